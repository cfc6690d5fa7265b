//! AlterUserScramCredentials (API key 51), v0: upserts and deletes users' SCRAM credentials
//! (`kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-512=[...]'`), checked
//! as Kafka's `ScramControlManager` checks them and written as one metadata-log operation: a
//! user named twice in one request, an empty name, an unknown mechanism, iterations out of
//! range or a deletion of a credential that does not exist fails that user only.
//!
//! Runs on the controller shard (a [`Mutation`]: every shard holds the new credentials before
//! the answer leaves, so the user can log in at once on any shard).

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult as UserResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};

use super::{error_code, sb, Mutation};
use crate::controller::scram::{ScramChange, ScramError, ScramMechanism};
use crate::controller::ControllerState;

/// Every version Kafka 4.1 defines (v0, flexible).
pub const VERSIONS: (i16, i16) = (0, 0);

type Refusal = (ResponseError, String);

pub fn handle(
    controller: &mut ControllerState,
    request: &AlterUserScramCredentialsRequest,
    _version: i16,
) -> Mutation<AlterUserScramCredentialsResponse> {
    // Per user, in request order: its changes, or why the user is refused.
    let mut users: BTreeMap<String, Result<Vec<ScramChange>, Refusal>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let deletions = request.deletions.iter().map(|d| (d.name.to_string(), d.mechanism, None));
    let upsertions = request.upsertions.iter().map(|u| {
        let data = (u.salted_password.to_vec(), u.salt.to_vec(), u.iterations);
        (u.name.to_string(), u.mechanism, Some(data))
    });
    let mut seen: BTreeMap<(String, i8), ()> = BTreeMap::new();
    for (user, code, upsert) in deletions.chain(upsertions) {
        if !users.contains_key(&user) {
            order.push(user.clone());
            users.insert(user.clone(), Ok(Vec::new()));
        }
        let duplicate = seen.insert((user.clone(), code), ()).is_some();
        let change = to_change(&user, code, upsert, duplicate).and_then(|c| check(controller, c));
        let entry = users.get_mut(&user).expect("inserted above");
        match (entry.as_mut(), change) {
            (Ok(list), Ok(c)) => list.push(c),
            (Ok(_), Err(refusal)) => *entry = Err(refusal),
            (Err(_), _) => {}
        }
    }
    let accepted: Vec<ScramChange> =
        users.values().filter_map(|r| r.as_ref().ok()).flatten().cloned().collect();
    let written = controller.alter_scram_credentials(&accepted);
    let results = order
        .iter()
        .map(|user| {
            let result = UserResult::default().with_user(sb(user.clone()));
            let refusal = match (&users[user], &written) {
                (Err(refusal), _) => Some(refusal.clone()),
                (Ok(_), Err(e)) => {
                    let (code, message) = error_code(e);
                    return result.with_error_code(code).with_error_message(Some(sb(message)));
                }
                (Ok(_), Ok(_)) => None,
            };
            match refusal {
                Some((code, message)) => {
                    result.with_error_code(code.code()).with_error_message(Some(sb(message)))
                }
                None => result.with_error_message(None),
            }
        })
        .collect();
    let response = AlterUserScramCredentialsResponse::default().with_results(results);
    Mutation { response, image_changed: matches!(written, Ok(true)) }
}

fn to_change(
    user: &str,
    code: i8,
    upsert: Option<(Vec<u8>, Vec<u8>, i32)>,
    duplicate: bool,
) -> Result<ScramChange, Refusal> {
    if duplicate {
        return Err((
            ResponseError::DuplicateResource,
            "A user credential cannot be altered twice in the same request".into(),
        ));
    }
    let mechanism = ScramMechanism::from_code(code).ok_or_else(|| {
        (ResponseError::UnsupportedSaslMechanism, "Unknown SCRAM mechanism".to_string())
    })?;
    let user = user.to_string();
    Ok(match upsert {
        Some((salted, salt, iterations)) => {
            ScramChange::Upsert { user, mechanism, salted, salt, iterations }
        }
        None => ScramChange::Delete { user, mechanism },
    })
}

fn check(controller: &ControllerState, change: ScramChange) -> Result<ScramChange, Refusal> {
    controller.check_scram_change(&change).map_err(|e| {
        let code = match e {
            ScramError::NoSuchCredential => ResponseError::ResourceNotFound,
            ScramError::EmptyUser
            | ScramError::TooFewIterations(_)
            | ScramError::TooManyIterations(_)
            | ScramError::BadSaltedPassword { .. } => ResponseError::UnacceptableCredential,
        };
        let message = match e {
            ScramError::EmptyUser => "Username must not be empty".to_string(),
            other => other.to_string(),
        };
        (code, message)
    })?;
    Ok(change)
}
