//! Kafka's listener settings: `listeners` (`NAME://host:port,...`), `advertised.listeners`,
//! `listener.security.protocol.map` (custom listener names), `inter.broker.listener.name`
//! or `security.inter.broker.protocol`, and the per-listener prefix
//! `listener.name.<name>.<setting>`.
//!
//! Runs on the main thread at start-up only. Invariants of a resolved [`Listeners`]: at
//! least one listener; names unique (upper case, as Kafka normalizes them); every name has
//! a security protocol; each advertised endpoint has a host; the inter-broker listener is
//! one of them.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};

use super::ConfigError;

/// Kafka's security protocols, with the codes of `RegisterBrokerRecord` endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name (`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`, `SASL_SSL`), case-insensitive.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(Self::Plaintext),
            "SSL" => Some(Self::Ssl),
            "SASL_PLAINTEXT" => Some(Self::SaslPlaintext),
            "SASL_SSL" => Some(Self::SaslSsl),
            _ => None,
        }
    }

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }

    /// Kafka's `SecurityProtocol.id`.
    #[must_use]
    pub fn code(self) -> i16 {
        match self {
            Self::Plaintext => 0,
            Self::Ssl => 1,
            Self::SaslPlaintext => 2,
            Self::SaslSsl => 3,
        }
    }

    #[must_use]
    pub fn tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    #[must_use]
    pub fn sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

/// One listener: where it binds and what clients are told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// Upper case (`PLAINTEXT`, `SASL_SSL`, `CLIENT`).
    pub name: String,
    pub protocol: SecurityProtocol,
    pub bind: SocketAddr,
    pub advertised_host: String,
    /// 0 until bound when the listener's port is 0 (the runtime fills in the real one).
    pub advertised_port: u16,
}

impl Listener {
    /// `listener.name.<name>.` (Kafka's prefix is the lower-case name).
    #[must_use]
    pub fn prefix(&self) -> String {
        format!("listener.name.{}.", self.name.to_ascii_lowercase())
    }
}

/// The broker's listeners and which one brokers use between themselves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listeners {
    pub all: Vec<Listener>,
    /// Index into `all`.
    pub inter_broker: usize,
}

/// The listener settings as given (file or flag), by Kafka name.
#[derive(Default, Debug)]
pub struct ListenerInput<'a> {
    pub listeners: Option<&'a str>,
    pub advertised: Option<&'a str>,
    pub protocol_map: Option<&'a str>,
    pub inter_broker_name: Option<&'a str>,
    pub inter_broker_protocol: Option<&'a str>,
}

pub use crate::constants::LISTENER_SECURITY_PROTOCOL_MAP_DEFAULT as PROTOCOL_MAP_DEFAULT;

/// Resolves the listener settings; `default_bind` is the one PLAINTEXT listener used when
/// `listeners` is not set.
pub fn resolve(
    input: &ListenerInput<'_>,
    default_bind: SocketAddr,
) -> Result<Listeners, ConfigError> {
    let map = protocol_map(input.protocol_map.unwrap_or(PROTOCOL_MAP_DEFAULT))?;
    let mut all = match input.listeners {
        Some(text) => parse_list("listeners", text)?
            .into_iter()
            .map(|(name, host, port)| bound(&map, name, &host, port))
            .collect::<Result<Vec<_>, _>>()?,
        None => vec![Listener {
            name: "PLAINTEXT".into(),
            protocol: SecurityProtocol::Plaintext,
            bind: default_bind,
            advertised_host: default_bind.ip().to_string(),
            advertised_port: default_bind.port(),
        }],
    };
    if all.is_empty() {
        return Err(invalid("listeners", "no listener given".into()));
    }
    for (i, l) in all.iter().enumerate() {
        if all[..i].iter().any(|o| o.name == l.name) {
            return Err(invalid("listeners", format!("listener name {} is given twice", l.name)));
        }
        if l.bind.port() != 0 && all[..i].iter().any(|o| o.bind.port() == l.bind.port()) {
            return Err(invalid("listeners", format!("port {} is used twice", l.bind.port())));
        }
    }
    if let Some(text) = input.advertised {
        advertise(&mut all, text)?;
    }
    let inter_broker = inter_broker(&all, input)?;
    Ok(Listeners { all, inter_broker })
}

fn bound(
    map: &BTreeMap<String, SecurityProtocol>,
    name: String,
    host: &str,
    port: u16,
) -> Result<Listener, ConfigError> {
    let protocol = *map.get(&name).ok_or_else(|| {
        invalid(
            "listeners",
            format!("listener {name} has no security protocol in listener.security.protocol.map"),
        )
    })?;
    let bind_host = if host.is_empty() { "0.0.0.0" } else { host };
    let bind =
        (bind_host, port).to_socket_addrs().ok().and_then(|mut a| a.next()).ok_or_else(|| {
            invalid("listeners", format!("cannot resolve {bind_host}:{port} to an address to bind"))
        })?;
    Ok(Listener {
        name,
        protocol,
        bind,
        advertised_host: bind.ip().to_string(),
        advertised_port: port,
    })
}

/// Applies `advertised.listeners`: each entry names a listener (a bare `host:port`, the
/// spelling from before listener names, is the PLAINTEXT listener's).
fn advertise(all: &mut [Listener], text: &str) -> Result<(), ConfigError> {
    let name = "advertised.listeners";
    for (listener, host, port) in parse_list(name, text)? {
        if host.is_empty() {
            return Err(invalid(name, format!("{text:?}: each entry needs a host")));
        }
        let l = all
            .iter_mut()
            .find(|l| l.name == listener)
            .ok_or_else(|| invalid(name, format!("{listener} is not one of the listeners")))?;
        l.advertised_host = host;
        l.advertised_port = port;
    }
    Ok(())
}

fn inter_broker(all: &[Listener], input: &ListenerInput<'_>) -> Result<usize, ConfigError> {
    let by_name = |name: &str, setting: &'static str| {
        let upper = name.trim().to_ascii_uppercase();
        all.iter()
            .position(|l| l.name == upper)
            .ok_or_else(|| invalid(setting, format!("{upper} is not one of the listeners")))
    };
    match (input.inter_broker_name, input.inter_broker_protocol) {
        (Some(_), Some(_)) => Err(invalid(
            "inter.broker.listener.name",
            "give only one of inter.broker.listener.name and security.inter.broker.protocol".into(),
        )),
        (Some(name), None) => by_name(name, "inter.broker.listener.name"),
        (None, Some(protocol)) => by_name(protocol, "security.inter.broker.protocol"),
        // Kafka's default names the PLAINTEXT listener; a broker without one (a secured
        // single node) uses its first listener.
        (None, None) => Ok(all.iter().position(|l| l.name == "PLAINTEXT").unwrap_or(0)),
    }
}

/// `NAME:PROTOCOL,...` with upper-case names.
fn protocol_map(text: &str) -> Result<BTreeMap<String, SecurityProtocol>, ConfigError> {
    let name = "listener.security.protocol.map";
    let mut map = BTreeMap::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (listener, protocol) = entry
            .split_once(':')
            .ok_or_else(|| invalid(name, format!("{entry:?} is not NAME:PROTOCOL")))?;
        let protocol = SecurityProtocol::parse(protocol)
            .ok_or_else(|| invalid(name, format!("unknown security protocol in {entry:?}")))?;
        map.insert(listener.trim().to_ascii_uppercase(), protocol);
    }
    Ok(map)
}

/// `NAME://host:port,...` (a bare `host:port` is `PLAINTEXT`), as (upper-case name, host,
/// port); an empty host means every interface.
pub fn parse_list(
    setting: &'static str,
    text: &str,
) -> Result<Vec<(String, String, u16)>, ConfigError> {
    let bad = |why: &str| invalid(setting, format!("{why}, got {text:?}"));
    let mut out = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, address) = match entry.split_once("://") {
            Some((name, rest)) => (name.trim().to_ascii_uppercase(), rest),
            None => ("PLAINTEXT".to_string(), entry),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(bad("a listener name is letters, digits and _"));
        }
        let (host, port) = address.rsplit_once(':').ok_or_else(|| bad("expected host:port"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port: u16 = port.parse().map_err(|_| bad("expected a port number"))?;
        out.push((name, host.to_string(), port));
    }
    Ok(out)
}

/// Kafka's rendering of a listener: `NAME://host:port` (IPv6 hosts in brackets).
#[must_use]
pub fn render(name: &str, host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("{name}://[{host}]:{port}")
    } else {
        format!("{name}://{host}:{port}")
    }
}

fn invalid(name: &'static str, reason: String) -> ConfigError {
    ConfigError::Invalid { name, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_bind() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 9092))
    }

    #[test]
    fn the_default_is_one_plaintext_listener() {
        let l = resolve(&ListenerInput::default(), default_bind()).expect("resolve");
        assert_eq!(l.all.len(), 1);
        assert_eq!(
            (l.all[0].name.as_str(), l.all[0].protocol),
            ("PLAINTEXT", SecurityProtocol::Plaintext)
        );
        assert_eq!(l.inter_broker, 0);
    }

    #[test]
    fn several_listeners_with_custom_names_and_advertised_hosts() {
        let input = ListenerInput {
            listeners: Some("PLAINTEXT://127.0.0.1:9092, client://127.0.0.1:9094"),
            advertised: Some("CLIENT://broker1.example:19094"),
            protocol_map: Some("PLAINTEXT:PLAINTEXT,CLIENT:SASL_SSL"),
            ..ListenerInput::default()
        };
        let l = resolve(&input, default_bind()).expect("resolve");
        assert_eq!(l.all[1].name, "CLIENT");
        assert_eq!(l.all[1].protocol, SecurityProtocol::SaslSsl);
        assert_eq!(
            (l.all[1].advertised_host.as_str(), l.all[1].advertised_port),
            ("broker1.example", 19094)
        );
        assert_eq!(
            (l.all[0].advertised_host.as_str(), l.all[0].advertised_port),
            ("127.0.0.1", 9092)
        );
        assert_eq!(l.inter_broker, 0);
        assert_eq!(l.all[1].prefix(), "listener.name.client.");
    }

    #[test]
    fn the_inter_broker_listener_by_name_or_protocol() {
        let mut input = ListenerInput {
            listeners: Some("SSL://127.0.0.1:9093,INTERNAL://127.0.0.1:9095"),
            protocol_map: Some("SSL:SSL,INTERNAL:PLAINTEXT"),
            inter_broker_name: Some("internal"),
            ..ListenerInput::default()
        };
        assert_eq!(resolve(&input, default_bind()).expect("name").inter_broker, 1);
        input.inter_broker_name = None;
        input.inter_broker_protocol = Some("SSL");
        assert_eq!(resolve(&input, default_bind()).expect("protocol").inter_broker, 0);
        input.inter_broker_name = Some("INTERNAL");
        assert!(resolve(&input, default_bind()).is_err(), "both given");
        input.inter_broker_name = Some("OTHER");
        input.inter_broker_protocol = None;
        assert!(resolve(&input, default_bind()).is_err(), "unknown name");
    }

    #[test]
    fn bad_listener_settings_are_refused() {
        for (listeners, map, advertised) in [
            ("CLIENT://127.0.0.1:9092", None, None),
            ("PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093", None, None),
            ("PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9092", None, None),
            ("PLAINTEXT://127.0.0.1:x", None, None),
            ("PLAINTEXT://127.0.0.1:9092", Some("PLAINTEXT:TLS"), None),
            ("PLAINTEXT://127.0.0.1:9092", None, Some("SSL://h:1")),
            ("PLAINTEXT://127.0.0.1:9092", None, Some("PLAINTEXT://:1")),
        ] {
            let input = ListenerInput {
                listeners: Some(listeners),
                protocol_map: map,
                advertised,
                ..ListenerInput::default()
            };
            assert!(resolve(&input, default_bind()).is_err(), "{listeners} {map:?} {advertised:?}");
        }
    }

    #[test]
    fn a_bare_address_is_plaintext() {
        let parsed = parse_list("listeners", "127.0.0.1:9092").expect("parse");
        assert_eq!(parsed, vec![("PLAINTEXT".to_string(), "127.0.0.1".to_string(), 9092)]);
        assert_eq!(render("SSL", "::1", 9093), "SSL://[::1]:9093");
    }
}
