//! `controller.listener.names`: the listener the controller quorum speaks on, as Kafka's
//! KRaft names it (`listeners=PLAINTEXT://:9092,CONTROLLER://:9093`,
//! `controller.listener.names=CONTROLLER`, `listener.security.protocol.map=...,CONTROLLER:SSL`).
//!
//! A controller listener is not a Kafka listener: its entry in `listeners` is taken out of the
//! Kafka listeners and gives the quorum's listen address (`--controller-listen`), and its
//! security protocol says whether the quorum runs over TLS. A broker-only node lists no
//! controller listener but names it, so it knows how to reach the voters. Runs on the main
//! thread at start-up only. Invariants: the protocol is PLAINTEXT or SSL (the quorum's own
//! framing has no SASL); a listener not in the protocol map is PLAINTEXT, as in Kafka 4.

use std::net::{SocketAddr, ToSocketAddrs};

use super::listeners::{self, Listener, SecurityProtocol};
use super::ConfigError;

/// The controller listener: its name, protocol and (on a voter that lists it) its address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerListener {
    pub listener: Listener,
    /// From its `listeners` entry (`None`: not listed on this node).
    pub bind: Option<SocketAddr>,
}

fn invalid(name: &'static str, reason: String) -> ConfigError {
    ConfigError::Invalid { name, reason }
}

/// Takes the controller listener (the first of `controller.listener.names`) out of
/// `listeners`: the Kafka listeners left (as text; `None` when none is left) and the
/// controller listener, if one is named.
pub fn split(
    listeners_text: Option<String>,
    names: Option<&str>,
    protocol_map: &str,
) -> Result<(Option<String>, Option<ControllerListener>), ConfigError> {
    let setting = "controller.listener.names";
    let names: Vec<String> = names
        .unwrap_or_default()
        .split(',')
        .map(|n| n.trim().to_ascii_uppercase())
        .filter(|n| !n.is_empty())
        .collect();
    let Some(name) = names.first().cloned() else { return Ok((listeners_text, None)) };
    let protocol = protocol_of(&name, protocol_map)?;
    if protocol.sasl() {
        return Err(invalid(
            setting,
            format!(
                "{name} is {}: the controller quorum speaks Shardlog's Raft framing, which has \
                 no SASL; map it to SSL (mutual TLS) or PLAINTEXT",
                protocol.name()
            ),
        ));
    }
    let mut kafka = Vec::new();
    let mut bind = None;
    if let Some(text) = &listeners_text {
        for (entry, host, port) in listeners::parse_list("listeners", text)? {
            if !names.contains(&entry) {
                kafka.push(listeners::render(&entry, &host, port));
            } else if entry == name {
                let host = if host.is_empty() { "0.0.0.0" } else { host.as_str() };
                let addr = (host, port).to_socket_addrs().ok().and_then(|mut a| a.next());
                bind = Some(addr.ok_or_else(|| {
                    invalid("listeners", format!("cannot resolve {host}:{port} ({name})"))
                })?);
            }
        }
    }
    let listener = Listener {
        name,
        protocol,
        bind: bind.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
        advertised_host: String::new(),
        advertised_port: 0,
    };
    let kafka_text = listeners_text.map(|_| kafka.join(",")).filter(|t| !t.is_empty());
    Ok((kafka_text, Some(ControllerListener { listener, bind })))
}

/// The protocol `listener.security.protocol.map` gives `name` (PLAINTEXT when absent).
fn protocol_of(name: &str, protocol_map: &str) -> Result<SecurityProtocol, ConfigError> {
    for entry in protocol_map.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        if let Some((listener, protocol)) = entry.split_once(':') {
            if listener.trim().eq_ignore_ascii_case(name) {
                return SecurityProtocol::parse(protocol).ok_or_else(|| {
                    invalid(
                        "listener.security.protocol.map",
                        format!("unknown security protocol in {entry:?}"),
                    )
                });
            }
        }
    }
    Ok(SecurityProtocol::Plaintext)
}

/// The quorum's listen address: the controller listener's entry, `--controller-listen`, or
/// neither (the voter's own `controller.quorum.voters` address); both must agree.
pub fn listen(
    flag: Option<SocketAddr>,
    controller: Option<&ControllerListener>,
) -> Result<Option<SocketAddr>, ConfigError> {
    match (flag, controller.and_then(|c| c.bind)) {
        (Some(a), Some(b)) if a != b => Err(invalid(
            "controller_listen",
            format!(
                "--controller-listen {a} and the controller listener's entry in listeners ({b}) \
                 differ; give one"
            ),
        )),
        (a, b) => Ok(a.or(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL,SASLC:SASL_SSL";

    #[test]
    fn the_controller_entry_leaves_the_kafka_listeners() {
        let text = Some("PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093".to_string());
        let (kafka, c) = split(text, Some("controller"), MAP).expect("split");
        assert_eq!(kafka.as_deref(), Some("PLAINTEXT://127.0.0.1:9092"));
        let c = c.expect("controller listener");
        assert_eq!(
            (c.listener.name.as_str(), c.listener.protocol),
            ("CONTROLLER", SecurityProtocol::Ssl)
        );
        assert_eq!(c.bind, Some("127.0.0.1:9093".parse().unwrap()));
        assert_eq!(listen(None, Some(&c)).expect("listen"), c.bind);
        assert!(listen(Some("127.0.0.1:1".parse().unwrap()), Some(&c)).is_err());
    }

    #[test]
    fn a_broker_only_node_names_it_without_listing_it_and_sasl_is_refused() {
        let text = Some("PLAINTEXT://127.0.0.1:9092".to_string());
        let (kafka, c) = split(text.clone(), Some("CONTROLLER"), MAP).expect("split");
        assert_eq!(kafka, text);
        assert_eq!(c.expect("named").bind, None);
        let (_, c) = split(None, Some("OTHER"), MAP).expect("unmapped");
        assert_eq!(c.expect("named").listener.protocol, SecurityProtocol::Plaintext);
        let err = split(None, Some("SASLC"), MAP).expect_err("sasl");
        assert!(err.to_string().contains("controller.listener.names"), "{err}");
        assert_eq!(split(text.clone(), None, MAP).expect("none"), (text, None));
    }
}
