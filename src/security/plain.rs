//! SASL/PLAIN (RFC 4616): the client's one message `authzid NUL authcid NUL password`,
//! checked against the users of the listener's JAAS config (Kafka's
//! `listener.name.<l>.plain.sasl.jaas.config` with `user_<name>="<password>"` entries).
//!
//! Pure functions: run on the connection's shard, keep no state. Invariant: a password is
//! compared in constant time and never logged.

use std::collections::BTreeMap;

/// Why a PLAIN message does not authenticate (each is SASL_AUTHENTICATION_FAILED).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlainError {
    #[error("Invalid SASL/PLAIN response: expected 3 tokens, got {0}")]
    Tokens(usize),
    #[error("Invalid SASL/PLAIN response: not UTF-8")]
    Utf8,
    #[error("Authentication failed: username not specified")]
    NoUser,
    #[error("Authentication failed: password not specified")]
    NoPassword,
    #[error("Authentication failed: Client requested an authorization id that is different from username")]
    Authzid,
    #[error("Authentication failed: Invalid username or password")]
    Credentials,
}

/// Checks one PLAIN message; returns the authenticated user name.
pub fn authenticate(token: &[u8], users: &BTreeMap<String, String>) -> Result<String, PlainError> {
    let text = std::str::from_utf8(token).map_err(|_| PlainError::Utf8)?;
    let parts: Vec<&str> = text.split('\0').collect();
    let [authzid, user, password] = parts.as_slice() else {
        return Err(PlainError::Tokens(parts.len()));
    };
    if user.is_empty() {
        return Err(PlainError::NoUser);
    }
    if password.is_empty() {
        return Err(PlainError::NoPassword);
    }
    if !authzid.is_empty() && authzid != user {
        return Err(PlainError::Authzid);
    }
    match users.get(*user) {
        Some(expected) if constant_time_eq(expected.as_bytes(), password.as_bytes()) => {
            Ok((*user).to_string())
        }
        _ => Err(PlainError::Credentials),
    }
}

/// Equal bytes, in time that depends on the lengths only.
#[must_use]
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The `user_<name>="<password>"` options of a JAAS config line, e.g.
/// `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin"
/// password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`.
pub fn jaas_users(text: &str) -> Result<BTreeMap<String, String>, String> {
    Ok(jaas_options(text)?
        .into_iter()
        .filter_map(|(k, v)| k.strip_prefix("user_").map(|u| (u.to_string(), v)))
        .collect())
}

/// A JAAS config's `key=value` options (values quoted or bare), after the login module and
/// its control flag, up to the closing `;`.
pub fn jaas_options(text: &str) -> Result<Vec<(String, String)>, String> {
    let body = text.trim().strip_suffix(';').ok_or("a JAAS config ends with ';'")?;
    let mut rest = body.trim_start();
    // The login module class and its flag (required, requisite, sufficient, optional); the
    // options may be none (`...OAuthBearerLoginModule required;`).
    let module_end = rest.find(char::is_whitespace).ok_or("expected a login module and a flag")?;
    rest = rest[module_end..].trim_start();
    let flag_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    if flag_end == 0 {
        return Err("expected a login module and a flag".into());
    }
    rest = rest[flag_end..].trim_start();
    let mut options = Vec::new();
    while !rest.is_empty() {
        let (key, after) =
            rest.split_once('=').ok_or_else(|| format!("expected key=value at {rest:?}"))?;
        let after = after.trim_start();
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted.find('"').ok_or("an unclosed quote")?;
            (quoted[..end].to_string(), &quoted[end + 1..])
        } else {
            let end = after.find(char::is_whitespace).unwrap_or(after.len());
            (after[..end].to_string(), &after[end..])
        };
        options.push((key.trim().to_string(), value));
        rest = next.trim_start();
    }
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users() -> BTreeMap<String, String> {
        jaas_users(
            "org.apache.kafka.common.security.plain.PlainLoginModule required \
             username=\"admin\" password=\"admin-secret\" user_admin=\"admin-secret\" \
             user_alice=\"alice secret\";",
        )
        .expect("parse")
    }

    #[test]
    fn jaas_users_are_the_user_options() {
        let u = users();
        assert_eq!(u.len(), 2);
        assert_eq!(u["alice"], "alice secret");
        assert!(jaas_users("PlainLoginModule required user_a=\"x\"").is_err(), "no ;");
        assert!(jaas_users("M required user_a=\"x;").is_err(), "unclosed quote");
        assert_eq!(jaas_users("M required user_b=y;").expect("bare")["b"], "y");
        assert_eq!(jaas_options("M required;"), Ok(Vec::new()), "no options");
        assert!(jaas_options("M;").is_err(), "no flag");
    }

    #[test]
    fn plain_messages() {
        let u = users();
        assert_eq!(authenticate(b"\0alice\0alice secret", &u), Ok("alice".into()));
        assert_eq!(authenticate(b"alice\0alice\0alice secret", &u), Ok("alice".into()));
        assert_eq!(authenticate(b"\0alice\0wrong", &u), Err(PlainError::Credentials));
        assert_eq!(authenticate(b"\0bob\0x", &u), Err(PlainError::Credentials));
        assert_eq!(authenticate(b"admin\0alice\0alice secret", &u), Err(PlainError::Authzid));
        assert_eq!(authenticate(b"alice", &u), Err(PlainError::Tokens(1)));
        assert_eq!(authenticate(b"\0\0x", &u), Err(PlainError::NoUser));
        assert_eq!(authenticate(b"\0a\0", &u), Err(PlainError::NoPassword));
        assert_eq!(authenticate(&[0, 0xff, 0, 1], &u), Err(PlainError::Utf8));
    }
}
