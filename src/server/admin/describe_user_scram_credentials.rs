//! DescribeUserScramCredentials (API key 50), v0: each user's SCRAM mechanisms and
//! iterations (never salts or keys) from the metadata image. All users when the request
//! names none; a named user without credentials is RESOURCE_NOT_FOUND and a user named twice
//! DUPLICATE_RESOURCE, as Kafka answers. Kafka's ConfigCommand asks it alongside
//! DescribeClientQuotas for `--describe --entity-type users`.
//!
//! Read-only: runs on the connection's shard from its image.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult as UserResult,
};
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};

use super::sb;
use crate::controller::scram::ScramCredentials;

/// Every version Kafka 4.1 defines (v0, flexible).
pub const VERSIONS: (i16, i16) = (0, 0);

#[must_use]
pub fn handle(
    credentials: &ScramCredentials,
    request: &DescribeUserScramCredentialsRequest,
    _version: i16,
) -> DescribeUserScramCredentialsResponse {
    let named: Vec<String> = request.users.iter().flatten().map(|u| u.name.to_string()).collect();
    let users: Vec<String> =
        if named.is_empty() { credentials.users.keys().cloned().collect() } else { named.clone() };
    let results = users
        .iter()
        .map(|user| {
            let result = UserResult::default().with_user(sb(user.clone()));
            if named.iter().filter(|n| *n == user).count() > 1 {
                return result
                    .with_error_code(ResponseError::DuplicateResource.code())
                    .with_error_message(Some(sb(format!(
                        "Cannot describe SCRAM credentials for the same user twice in a single \
                         request: {user}"
                    ))));
            }
            match credentials.users.get(user) {
                Some(by_mechanism) => result.with_error_message(None).with_credential_infos(
                    by_mechanism
                        .iter()
                        .map(|(m, c)| {
                            CredentialInfo::default()
                                .with_mechanism(m.code())
                                .with_iterations(c.iterations)
                        })
                        .collect(),
                ),
                None => result
                    .with_error_code(ResponseError::ResourceNotFound.code())
                    .with_error_message(Some(sb(format!(
                        "Attempt to describe a user credential that does not exist: {user}"
                    )))),
            }
        })
        .collect();
    DescribeUserScramCredentialsResponse::default().with_error_message(None).with_results(results)
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;

    use super::*;
    use crate::controller::scram::{ScramCredential, ScramMechanism};

    #[test]
    fn users_with_and_without_credentials() {
        let mut creds = ScramCredentials::default();
        let c = ScramCredential::from_password(ScramMechanism::Sha512, "pw", b"salt", 8192);
        creds.users.entry("alice".into()).or_default().insert(ScramMechanism::Sha512, c);
        let all =
            handle(&creds, &DescribeUserScramCredentialsRequest::default().with_users(None), 0);
        assert_eq!((all.error_code, all.results.len()), (0, 1));
        assert_eq!(all.results[0].credential_infos[0].iterations, 8192);
        assert_eq!(all.results[0].credential_infos[0].mechanism, 2);
        let named = |names: &[&str]| {
            DescribeUserScramCredentialsRequest::default().with_users(Some(
                names.iter().map(|n| UserName::default().with_name(sb(*n))).collect(),
            ))
        };
        let r = handle(&creds, &named(&["bob"]), 0);
        assert_eq!(r.results[0].error_code, ResponseError::ResourceNotFound.code());
        let r = handle(&creds, &named(&["alice", "alice"]), 0);
        assert_eq!(r.results[0].error_code, ResponseError::DuplicateResource.code());
    }
}
