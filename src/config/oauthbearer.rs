//! A SASL listener's OAUTHBEARER validation and each mechanism's KIP-368 session limit, from
//! Kafka's settings: `listener.name.<l>.oauthbearer.sasl.jaas.config` (the unsecured
//! validator's `unsecuredValidator*` options),
//! `listener.name.<l>.oauthbearer.sasl.server.callback.handler.class` (Kafka's
//! `OAuthBearerValidatorCallbackHandler`: signed tokens) with `sasl.oauthbearer.*`, and
//! `connections.max.reauth.ms`. A mechanism setting is looked up as Kafka's
//! `ConfigurationUtils` does: `listener.name.<l>.<mechanism>.<name>`, then
//! `listener.name.<l>.<name>`, then `<name>`. Built on the main thread at start-up, before
//! logging starts (`server::sasl_gate::log_settings` says what was built); a JWKS that cannot
//! be loaded or a setting Shardlog cannot honour fails the start naming it.

use std::path::PathBuf;

use super::kafka::Settings;
use super::listeners::Listener;
use super::ConfigError;
use crate::security::jwks::JwksFile;
use crate::security::jwt::{SignedValidator, UnsecuredValidator};
use crate::security::oauthbearer::TokenValidator;
use crate::security::sasl::Mechanism;

/// Kafka's handler of signed tokens (4.x), and its older name (Kafka 3.x's `secured` package).
pub const SIGNED_HANDLERS: [&str; 2] = [
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
];
/// Kafka's default handler: unsigned tokens.
pub const UNSECURED_HANDLER: &str =
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler";

/// The value of mechanism setting `name` on `listener`, and the name it was found under.
pub fn mechanism_setting(
    s: &Settings<'_>,
    listener: &Listener,
    mechanism: Mechanism,
    name: &str,
) -> Option<(String, String)> {
    let prefixed = format!("{}{}.{name}", listener.prefix(), mechanism.prefix());
    let listener_wide = format!("{}{name}", listener.prefix());
    [prefixed, listener_wide]
        .into_iter()
        .find_map(|key| s.0.get(&key).map(|v| (v.clone(), key)))
        .or_else(|| s.text(name).map(|v| (v, name.to_string())))
}

/// `connections.max.reauth.ms` of each of `mechanisms` on `listener` (≤ 0: no limit).
pub fn max_reauth_ms(
    s: &Settings<'_>,
    listener: &Listener,
    mechanisms: &[Mechanism],
) -> Vec<(Mechanism, u64)> {
    mechanisms
        .iter()
        .map(|m| {
            let value = mechanism_setting(s, listener, *m, "connections.max.reauth.ms");
            let ms = value.and_then(|(v, _)| v.trim().parse::<i64>().ok()).unwrap_or(0);
            (*m, u64::try_from(ms).unwrap_or(0))
        })
        .collect()
}

fn invalid(name: String, listener: &Listener, reason: impl std::fmt::Display) -> ConfigError {
    ConfigError::Invalid {
        name: "listeners",
        reason: format!("listener {} ({name}): {reason}", listener.name),
    }
}

/// The token validator of `listener` (OAUTHBEARER enabled).
pub fn validator(s: &Settings<'_>, listener: &Listener) -> Result<TokenValidator, ConfigError> {
    let m = Mechanism::OAuthBearer;
    let handler = mechanism_setting(s, listener, m, "sasl.server.callback.handler.class");
    match handler {
        Some((class, _)) if SIGNED_HANDLERS.contains(&class.trim()) => {
            Ok(TokenValidator::Signed(Box::new(signed(s, listener)?)))
        }
        None => unsecured(s, listener),
        Some((class, _)) if class.trim().is_empty() || class.trim() == UNSECURED_HANDLER => {
            unsecured(s, listener)
        }
        Some((class, name)) => Err(invalid(
            name,
            listener,
            format!(
                "{class} is not served: use {} (signed tokens, a JWKS file) or leave it unset \
                 (Kafka's unsecured validator, development only)",
                SIGNED_HANDLERS[0]
            ),
        )),
    }
}

fn unsecured(s: &Settings<'_>, listener: &Listener) -> Result<TokenValidator, ConfigError> {
    let jaas = format!("{}oauthbearer.sasl.jaas.config", listener.prefix());
    let text = s.0.get(&jaas).or_else(|| s.0.get("sasl.jaas.config")).ok_or_else(|| {
        invalid(
            jaas.clone(),
            listener,
            "OAUTHBEARER is enabled: give its JAAS line (org.apache.kafka.common.security.\
             oauthbearer.OAuthBearerLoginModule required;), or a server callback handler",
        )
    })?;
    let options = crate::security::plain::jaas_options(text)
        .map_err(|e| invalid(jaas.clone(), listener, e))?;
    let v = UnsecuredValidator::from_jaas(&options).map_err(|e| invalid(jaas, listener, e))?;
    Ok(TokenValidator::Unsecured(v))
}

fn signed(s: &Settings<'_>, listener: &Listener) -> Result<SignedValidator, ConfigError> {
    let m = Mechanism::OAuthBearer;
    let get = |name: &str| mechanism_setting(s, listener, m, name);
    let url_name = "sasl.oauthbearer.jwks.endpoint.url";
    let (url, found) = get(url_name).ok_or_else(|| {
        invalid(url_name.into(), listener, "the signed-token validator needs a JWKS: set it")
    })?;
    let path = file_url(url.trim()).ok_or_else(|| {
        invalid(
            found.clone(),
            listener,
            format!(
                "{url}: only file: URLs are served (a local JWKS file, e.g. \
                 file:///etc/shardlog/jwks.json, refreshed by whatever fetches it: the broker \
                 reloads it when it changes); the broker makes no HTTP requests"
            ),
        )
    })?;
    let keys = JwksFile::open(&path, crate::io::real_now_ms())
        .map_err(|e| invalid(found, listener, format!("{url}: {e}")))?;
    let text = |name: &str, default: &str| {
        get(name).map_or_else(|| default.to_string(), |(v, _)| v.trim().to_string())
    };
    let expected_audience = get("sasl.oauthbearer.expected.audience")
        .map(|(v, _)| {
            v.split(',').map(str::trim).filter(|a| !a.is_empty()).map(String::from).collect()
        })
        .unwrap_or_default();
    let expected_issuer = get("sasl.oauthbearer.expected.issuer")
        .map(|(v, _)| v.trim().to_string())
        .filter(|v| !v.is_empty());
    let skew_s = text("sasl.oauthbearer.clock.skew.seconds", "30").parse::<i64>().unwrap_or(30);
    Ok(SignedValidator {
        keys,
        expected_audience,
        expected_issuer,
        sub_claim: text("sasl.oauthbearer.sub.claim.name", "sub"),
        scope_claim: text("sasl.oauthbearer.scope.claim.name", "scope"),
        clock_skew_ms: skew_s.saturating_mul(1000),
    })
}

/// The path of a `file:` URL (`file:/p`, `file:///p`, `file://localhost/p`); `None` for
/// another scheme.
fn file_url(url: &str) -> Option<PathBuf> {
    let rest = url.strip_prefix("file:")?;
    let path = match rest.strip_prefix("//") {
        Some(authority_and_path) => {
            let slash = authority_and_path.find('/')?;
            let host = &authority_and_path[..slash];
            if !(host.is_empty() || host == "localhost") {
                return None;
            }
            &authority_and_path[slash..]
        }
        None => rest,
    };
    (!path.is_empty()).then(|| PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_urls() {
        assert_eq!(file_url("file:///etc/j.json"), Some("/etc/j.json".into()));
        assert_eq!(file_url("file:/etc/j.json"), Some("/etc/j.json".into()));
        assert_eq!(file_url("file://localhost/j"), Some("/j".into()));
        assert_eq!(file_url("file:rel/j"), Some("rel/j".into()));
        assert_eq!(file_url("file://idp/j"), None);
        assert_eq!(file_url("https://idp/jwks"), None);
        assert_eq!(file_url("file:"), None);
    }
}
