//! Who may use the admin HTTP endpoint (`/metrics`, `/v1/shards`, shard moves) when
//! `--admin-require-auth` is on: the request names a broker user with HTTP Basic credentials
//! (RFC 7617), checked against the users the Kafka listeners accept (SCRAM credentials from
//! the metadata image, checked as a SCRAM exchange would: the salted password's StoredKey;
//! PLAIN users of the listeners' JAAS configs), and, with an authorizer, that user needs
//! DESCRIBE on the cluster to read and ALTER on the cluster to change anything (a shard
//! move), by the same ACLs and `super.users` as the Kafka APIs. Redpanda's admin API does
//! the same with `admin_api_require_auth`.
//!
//! Runs on the shard that serves the admin endpoint, before the request is routed
//! (`metrics::http::set_auth_handler`). Invariant: with the setting on, no request is
//! served without valid credentials; refusals are logged without the password.

use std::net::IpAddr;
use std::rc::Rc;

use base64::Engine as _;

use crate::authz::Operation;
use crate::metadata::scram::ScramCredential;
use crate::quota::Principal;
use crate::security::plain::constant_time_eq;
use crate::security::Session;
use crate::shard::ShardCtx;

/// Registers the check on this shard's admin endpoint, if the setting asks for it.
pub fn install(ctx: &Rc<ShardCtx>) {
    if !ctx.config.admin_require_auth {
        return;
    }
    let ctx = ctx.clone();
    crate::metrics::http::set_auth_handler(Box::new(move |method, target, header, peer| {
        check(&ctx, method, target, header, peer)
    }));
}

/// The verdict on one request (see the module docs).
fn check(
    ctx: &Rc<ShardCtx>,
    method: &str,
    target: &str,
    header: Option<&str>,
    peer: Option<IpAddr>,
) -> Result<(), (u16, String)> {
    let Some(header) = header else {
        return Err((401, "credentials required (HTTP Basic: a broker user)\n".into()));
    };
    let Some((user, password)) = basic_credentials(header) else {
        return Err((
            401,
            "malformed Authorization header: want Basic base64(user:password)\n".into(),
        ));
    };
    if !valid_user(ctx, &user, &password) {
        tracing::info!(%user, ?peer, %method, %target, "admin request refused: invalid credentials");
        return Err((401, "invalid credentials\n".into()));
    }
    let op = if method == "GET" { Operation::Describe } else { Operation::Alter };
    let session = Session::new("ADMIN".into(), Principal::named(&user)).with_peer(peer);
    if !super::authz::cluster(ctx, &session, op) {
        tracing::info!(%user, ?peer, %method, %target, "admin request refused: not authorized on the cluster");
        return Err((403, format!("User:{user} may not {op:?} the cluster\n")));
    }
    Ok(())
}

/// `Basic base64(user:password)` → (user, password).
fn basic_credentials(header: &str) -> Option<(String, String)> {
    let (scheme, encoded) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// Whether `password` is `user`'s, as a SCRAM credential of the image or a PLAIN user of
/// a listener.
fn valid_user(ctx: &ShardCtx, user: &str, password: &str) -> bool {
    let image = ctx.image();
    if let Some(creds) = image.scram_credentials.users.get(user) {
        if creds.iter().any(|(mechanism, cred)| scram_matches(*mechanism, cred, password)) {
            return true;
        }
    }
    ctx.config.listener_security.iter().filter_map(|l| l.sasl.as_ref()).any(|sasl| {
        sasl.plain_users
            .get(user)
            .is_some_and(|p| constant_time_eq(p.as_bytes(), password.as_bytes()))
    })
}

/// RFC 5802: the password is right if its salted form gives the stored key.
fn scram_matches(
    mechanism: crate::metadata::scram::ScramMechanism,
    cred: &ScramCredential,
    password: &str,
) -> bool {
    let salted =
        mechanism.salted_password(password.as_bytes(), &cred.salt, cred.iterations.unsigned_abs());
    let stored = mechanism.hash(&mechanism.hmac(&salted, b"Client Key"));
    constant_time_eq(&stored, &cred.stored_key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::scram::ScramMechanism;

    #[test]
    fn basic_credentials_are_parsed_and_bad_ones_refused() {
        let enc = base64::engine::general_purpose::STANDARD.encode("alice:s3:cret");
        assert_eq!(
            basic_credentials(&format!("Basic {enc}")),
            Some(("alice".into(), "s3:cret".into()))
        );
        assert_eq!(basic_credentials(&format!("bearer {enc}")), None);
        assert_eq!(basic_credentials("Basic !!!"), None);
        let no_colon = base64::engine::general_purpose::STANDARD.encode("alice");
        assert_eq!(basic_credentials(&format!("Basic {no_colon}")), None);
    }

    #[test]
    fn a_scram_credential_accepts_its_password_only() {
        for m in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let cred = ScramCredential::from_password(m, "right", b"salt-salt", 4096);
            assert!(scram_matches(m, &cred, "right"));
            assert!(!scram_matches(m, &cred, "wrong"));
        }
    }
}
