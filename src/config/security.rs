//! Each listener's TLS and SASL material from Kafka's settings: `ssl.*` and
//! `sasl.enabled.mechanisms` (each also as `listener.name.<l>.<setting>`, which wins), and
//! `listener.name.<l>.<mechanism>.sasl.jaas.config` for PLAIN's users. Built on the main
//! thread at start-up; a listener whose keys or certificates cannot be loaded fails the start.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::kafka::Settings;
use super::listeners::{Listener, SecurityProtocol};
use super::ConfigError;
use crate::security::sasl::{Mechanism, SaslConfig};
use crate::security::tls::{self, ClientAuth, Pem, TlsSettings};
use crate::security::ListenerSecurity;

/// A setting of `listener`: its `listener.name.<l>.` value, else the broker-wide one (else
/// the registry default).
fn setting(s: &Settings<'_>, listener: &Listener, name: &str) -> Option<String> {
    s.0.get(&format!("{}{name}", listener.prefix())).cloned().or_else(|| s.text(name))
}

fn invalid(listener: &Listener, reason: String) -> ConfigError {
    ConfigError::Invalid {
        name: "listeners",
        reason: format!("listener {}: {reason}", listener.name),
    }
}

/// The TLS and SASL of every listener, index-aligned with `listeners`.
pub fn resolve(
    listeners: &[Listener],
    settings: &BTreeMap<String, String>,
) -> Result<Vec<ListenerSecurity>, ConfigError> {
    let s = Settings(settings);
    listeners
        .iter()
        .map(|l| {
            let tls = if l.protocol.tls() { Some(tls_config(&s, l)?) } else { None };
            let sasl = if l.protocol.sasl() { Some(Arc::new(sasl_config(&s, l)?)) } else { None };
            Ok(ListenerSecurity { tls, sasl })
        })
        .collect()
}

/// The TLS settings of `listener`, as given (not loaded).
pub fn tls_settings(s: &Settings<'_>, listener: &Listener) -> Result<TlsSettings, ConfigError> {
    let get = |name: &str| setting(s, listener, name);
    let (keystore, key) =
        match (
            get("ssl.keystore.location"),
            get("ssl.keystore.certificate.chain"),
            get("ssl.keystore.key"),
        ) {
            (Some(path), None, None) => (Pem::File(path), None),
            (None, Some(chain), Some(key)) => (Pem::Inline(chain), Some(key)),
            _ => return Err(invalid(
                listener,
                "a TLS listener needs ssl.keystore.location, or ssl.keystore.certificate.chain \
                 with ssl.keystore.key (PEM)"
                    .into(),
            )),
        };
    let truststore = match (get("ssl.truststore.location"), get("ssl.truststore.certificates")) {
        (Some(path), None) => Some(Pem::File(path)),
        (None, Some(certs)) => Some(Pem::Inline(certs)),
        (None, None) => None,
        (Some(_), Some(_)) => {
            return Err(invalid(
                listener,
                "give ssl.truststore.location or ssl.truststore.certificates, not both".into(),
            ))
        }
    };
    let client_auth = match get("ssl.client.auth").as_deref() {
        Some("required") => ClientAuth::Required,
        Some("requested") => ClientAuth::Requested,
        _ => ClientAuth::None,
    };
    let protocols = get("ssl.enabled.protocols").unwrap_or_default();
    let has = |p: &str| protocols.split(',').any(|x| x.trim() == p);
    Ok(TlsSettings {
        keystore,
        key,
        truststore,
        client_auth,
        tls12: has("TLSv1.2"),
        tls13: has("TLSv1.3"),
    })
}

fn tls_config(
    s: &Settings<'_>,
    listener: &Listener,
) -> Result<Arc<rustls::ServerConfig>, ConfigError> {
    let settings = tls_settings(s, listener)?;
    tls::server_config(&settings).map_err(|e| invalid(listener, e.to_string()))
}

fn sasl_config(s: &Settings<'_>, listener: &Listener) -> Result<SaslConfig, ConfigError> {
    let names = setting(s, listener, "sasl.enabled.mechanisms").unwrap_or_default();
    let mechanisms: Vec<Mechanism> = names
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(|n| {
            Mechanism::parse(n)
                .ok_or_else(|| invalid(listener, format!("unknown SASL mechanism {n}")))
        })
        .collect::<Result<_, _>>()?;
    if mechanisms.is_empty() {
        return Err(invalid(listener, "sasl.enabled.mechanisms is empty".into()));
    }
    let jaas_name = format!("{}plain.sasl.jaas.config", listener.prefix());
    let plain_users = match s.0.get(&jaas_name).or_else(|| s.0.get("sasl.jaas.config")) {
        Some(text) => crate::security::plain::jaas_users(text)
            .map_err(|e| invalid(listener, format!("{jaas_name}: {e}")))?,
        None => BTreeMap::new(),
    };
    if mechanisms.contains(&Mechanism::Plain) && plain_users.is_empty() {
        tracing::warn!(
            listener = %listener.name,
            "PLAIN is enabled but {jaas_name} lists no user_<name> entries: no PLAIN login can succeed"
        );
    }
    let failed_delay_ms = s.long("connection.failed.authentication.delay.ms").unsigned_abs();
    Ok(SaslConfig { mechanisms, plain_users, failed_delay_ms })
}

/// Brokers speak PLAINTEXT to each other: a cluster's inter-broker listener must be one.
pub fn check_inter_broker(listener: &Listener, clustered: bool) -> Result<(), ConfigError> {
    if clustered && listener.protocol != SecurityProtocol::Plaintext {
        return Err(ConfigError::Invalid {
            name: "inter.broker.listener.name",
            reason: format!(
                "listener {} is {}: Shardlog's brokers speak PLAINTEXT to each other, so a \
                 cluster's inter-broker listener must be a PLAINTEXT one",
                listener.name,
                listener.protocol.name()
            ),
        });
    }
    Ok(())
}
