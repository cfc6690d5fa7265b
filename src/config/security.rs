//! Each listener's TLS and SASL material from Kafka's settings: `ssl.*` (PEM or PKCS12 stores,
//! protocols, cipher suites, principal mapping rules) and `sasl.enabled.mechanisms` (each also
//! as `listener.name.<l>.<setting>`, which wins), and
//! `listener.name.<l>.<mechanism>.sasl.jaas.config` for PLAIN's users (OAUTHBEARER's token
//! validation and the KIP-368 session limits in [`super::oauthbearer`]); the client side of the
//! inter-broker listener and the controller quorum's TLS. Built on the main thread at start-up;
//! a listener whose keys or certificates cannot be loaded fails the start, naming the setting.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::cluster::Voter;
use super::controller_listener::ControllerListener;
use super::kafka::Settings;
use super::listeners::Listener;
use super::ConfigError;
use crate::protocol::client_auth::{ClientSecurity, SaslLogin};
use crate::quorum::QuorumTls;
use crate::security::principal::PrincipalMapper;
use crate::security::sasl::{Mechanism, SaslConfig};
use crate::security::tls::{self, ClientAuth, Pem, StoreType, TlsSettings};
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
            let principal_mapping = Arc::new(principal_mapping(&s, l)?);
            Ok(ListenerSecurity { tls, sasl, principal_mapping })
        })
        .collect()
}

/// The TLS settings of `listener`, as given (not loaded).
pub fn tls_settings(s: &Settings<'_>, listener: &Listener) -> Result<TlsSettings, ConfigError> {
    let get = |name: &str| setting(s, listener, name);
    let store_type = |name: &'static str| -> Result<StoreType, ConfigError> {
        match get(name).as_deref().map(str::trim) {
            None | Some("PEM") => Ok(StoreType::Pem),
            Some("PKCS12") => Ok(StoreType::Pkcs12),
            Some(other) => Err(ConfigError::Invalid {
                name,
                reason: format!(
                    "listener {}: {other} is Java's own format; convert it to PKCS12 (keytool \
                     -importkeystore -deststoretype PKCS12) or PEM",
                    listener.name
                ),
            }),
        }
    };
    let keystore_type = store_type("ssl.keystore.type")?;
    let truststore_type = store_type("ssl.truststore.type")?;
    let (keystore, key) =
        match (
            get("ssl.keystore.location"),
            get("ssl.keystore.certificate.chain"),
            get("ssl.keystore.key"),
        ) {
            (Some(path), None, None) => (Pem::File(path), None),
            (None, Some(chain), Some(key)) if keystore_type == StoreType::Pem => {
                (Pem::Inline(chain), Some(key))
            }
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
    let list = |name: &str| -> Vec<String> {
        get(name)
            .unwrap_or_default()
            .split(',')
            .map(|x| x.trim().to_string())
            .filter(|x| !x.is_empty())
            .collect()
    };
    let protocols = list("ssl.enabled.protocols");
    let has = |p: &str| protocols.iter().any(|x| x == p);
    let (tls12, tls13) = (has("TLSv1.2"), has("TLSv1.3"));
    if !tls12 && !tls13 {
        return Err(ConfigError::Invalid {
            name: "ssl.enabled.protocols",
            reason: format!("listener {}: enable TLSv1.2, TLSv1.3 or both", listener.name),
        });
    }
    let cipher_suites = list("ssl.cipher.suites");
    tls::cipher_suites(&cipher_suites, tls12, tls13).map_err(|reason| ConfigError::Invalid {
        name: "ssl.cipher.suites",
        reason: format!("listener {}: {reason}", listener.name),
    })?;
    Ok(TlsSettings {
        keystore,
        key,
        keystore_type,
        keystore_password: get("ssl.keystore.password").or_else(|| get("ssl.key.password")),
        truststore,
        truststore_type,
        truststore_password: get("ssl.truststore.password"),
        client_auth,
        tls12,
        tls13,
        cipher_suites,
    })
}

/// `ssl.principal.mapping.rules` of `listener`.
fn principal_mapping(
    s: &Settings<'_>,
    listener: &Listener,
) -> Result<PrincipalMapper, ConfigError> {
    let text = setting(s, listener, "ssl.principal.mapping.rules").unwrap_or_default();
    PrincipalMapper::parse(&text).map_err(|reason| ConfigError::Invalid {
        name: "ssl.principal.mapping.rules",
        reason: format!("listener {}: {reason}", listener.name),
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
    let oauth = if mechanisms.contains(&Mechanism::OAuthBearer) {
        Some(Arc::new(super::oauthbearer::validator(s, listener)?))
    } else {
        None
    };
    let max_reauth_ms = super::oauthbearer::max_reauth_ms(s, listener, &mechanisms);
    let failed_delay_ms = s.long("connection.failed.authentication.delay.ms").unsigned_abs();
    Ok(SaslConfig { mechanisms, plain_users, oauth, max_reauth_ms, failed_delay_ms })
}

/// How this broker connects to the others: the inter-broker listener's endpoints, with its
/// TLS (trust store, key store, `ssl.endpoint.identification.algorithm`) and SASL
/// (`sasl.mechanism.inter.broker.protocol`, the user and password of
/// `listener.name.<l>.<mechanism>.sasl.jaas.config`), as Kafka's inter-broker channel does.
/// A single node dials no other broker: only the listener name is kept.
pub fn inter_broker_client(
    listener: &Listener,
    settings: &BTreeMap<String, String>,
    clustered: bool,
) -> Result<ClientSecurity, ConfigError> {
    let mut out = ClientSecurity { listener: listener.name.clone(), tls: None, sasl: None };
    if !clustered {
        return Ok(out);
    }
    let s = Settings(settings);
    if listener.protocol.tls() {
        let settings = tls_settings(&s, listener)?;
        let algorithm = setting(&s, listener, "ssl.endpoint.identification.algorithm");
        let verify_hostname = match algorithm.as_deref().map(str::trim) {
            None | Some("https" | "HTTPS") => true,
            Some("") => false,
            Some(other) => {
                return Err(ConfigError::Invalid {
                    name: "ssl.endpoint.identification.algorithm",
                    reason: format!("{other:?}: https (check the host name) or empty (do not)"),
                })
            }
        };
        let tls = crate::security::client::client_config(&settings, verify_hostname)
            .map_err(|e| inter_invalid(listener, e.to_string()))?;
        out.tls = Some(tls);
    }
    if listener.protocol.sasl() {
        out.sasl = Some(inter_broker_login(&s, listener)?);
    }
    Ok(out)
}

fn inter_invalid(listener: &Listener, reason: String) -> ConfigError {
    ConfigError::Invalid {
        name: "inter.broker.listener.name",
        reason: format!("listener {} ({}): {reason}", listener.name, listener.protocol.name()),
    }
}

/// The SASL login of this broker on the inter-broker listener.
fn inter_broker_login(s: &Settings<'_>, listener: &Listener) -> Result<SaslLogin, ConfigError> {
    let setting_name = "sasl.mechanism.inter.broker.protocol";
    let invalid = |reason: String| ConfigError::Invalid { name: setting_name, reason };
    let name = s.text(setting_name).unwrap_or_else(|| "GSSAPI".into());
    let mechanism = Mechanism::parse(name.trim()).ok_or_else(|| {
        invalid(format!(
            "{name} is not served between brokers: the inter-broker listener {} is {}, so \
             set it to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
            listener.name,
            listener.protocol.name()
        ))
    })?;
    if mechanism == Mechanism::OAuthBearer {
        return Err(invalid(format!(
            "OAUTHBEARER is not served between brokers (the broker has no token retriever): \
             use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 on the inter-broker listener {}",
            listener.name
        )));
    }
    let enabled = sasl_config(s, listener)?.mechanisms;
    if !enabled.contains(&mechanism) {
        return Err(invalid(format!(
            "{} is not in listener {}'s sasl.enabled.mechanisms",
            mechanism.name(),
            listener.name
        )));
    }
    let jaas_name = format!("{}{}.sasl.jaas.config", listener.prefix(), mechanism.prefix());
    let text = s.0.get(&jaas_name).or_else(|| s.0.get("sasl.jaas.config")).ok_or_else(|| {
        inter_invalid(
            listener,
            format!("set {jaas_name} with this broker's username=\"...\" password=\"...\""),
        )
    })?;
    let options = crate::security::plain::jaas_options(text)
        .map_err(|e| inter_invalid(listener, format!("{jaas_name}: {e}")))?;
    let option = |key: &str| options.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    match (option("username"), option("password")) {
        (Some(user), Some(password)) if !user.is_empty() => {
            crate::security::client::login(mechanism, user, password).ok_or_else(|| {
                inter_invalid(listener, format!("{} has no password login", mechanism.name()))
            })
        }
        _ => Err(inter_invalid(
            listener,
            format!(
                "{jaas_name} needs username=\"...\" and password=\"...\" (this broker's login)"
            ),
        )),
    }
}

/// The quorum's TLS when the controller listener is SSL: its key store for both sides, its
/// trust store, mutual TLS unless `listener.name.<c>.ssl.client.auth` says otherwise (the
/// quorum has no other authentication, so the broker-wide `ssl.client.auth` does not weaken
/// it), and each voter's host from `controller.quorum.voters` for the host-name check.
pub fn quorum_tls(
    controller: &ControllerListener,
    settings: &BTreeMap<String, String>,
    voters: &[Voter],
) -> Result<Option<QuorumTls>, ConfigError> {
    let listener = &controller.listener;
    if !listener.protocol.tls() {
        return Ok(None);
    }
    let s = Settings(settings);
    let invalid = |reason: String| ConfigError::Invalid {
        name: "controller.listener.names",
        reason: format!("listener {} (SSL): {reason}", listener.name),
    };
    let mut tls = tls_settings(&s, listener)?;
    tls.client_auth = match s.0.get(&format!("{}ssl.client.auth", listener.prefix())) {
        Some(v) if v == "none" => ClientAuth::None,
        Some(v) if v == "requested" => ClientAuth::Requested,
        _ => ClientAuth::Required,
    };
    if tls.truststore.is_none() {
        return Err(invalid(
            "the quorum checks every node's certificate: set ssl.truststore.location (or \
             ssl.truststore.certificates)"
                .into(),
        ));
    }
    let server = tls::server_config(&tls).map_err(|e| invalid(e.to_string()))?;
    let algorithm = setting(&s, listener, "ssl.endpoint.identification.algorithm");
    let verify_hostname = !matches!(algorithm.as_deref().map(str::trim), Some(""));
    let client = crate::security::client::client_config(&tls, verify_hostname)
        .map_err(|e| invalid(e.to_string()))?;
    // A cluster's Raft ids are its node ids (only a single node 0 runs as Raft id 1).
    let voter_hosts =
        voters.iter().map(|v| (u64::try_from(v.id.0).unwrap_or(0), v.host.clone())).collect();
    Ok(Some(QuorumTls { server, client, voter_hosts }))
}
