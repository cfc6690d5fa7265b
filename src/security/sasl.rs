//! One connection's SASL exchange, independent of Kafka's framing: the mechanism chosen by
//! SaslHandshake, then the tokens of SaslAuthenticate (or raw tokens after a v0 handshake)
//! through PLAIN ([`super::plain`]) or SCRAM ([`super::scram`]), to an authenticated user.
//!
//! Lives in the connection's reader on the shard that accepted it. Invariants: a mechanism is
//! chosen once, before any token; a token is at most `SASL_TOKEN_BYTES_MAX` bytes; after a
//! failure the exchange only answers errors (the connection is closing).

use std::collections::BTreeMap;

use super::plain::{self, PlainError};
use super::scram::{self, ScramError, ScramServer};
use crate::constants::SASL_TOKEN_BYTES_MAX;
use crate::controller::scram::{ScramCredential, ScramMechanism};

/// A SASL mechanism Shardlog serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
}

impl Mechanism {
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "PLAIN" => Some(Self::Plain),
            other => ScramMechanism::from_name(other).map(Self::Scram),
        }
    }

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::Scram(m) => m.name(),
        }
    }
}

/// A SASL listener's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslConfig {
    /// `sasl.enabled.mechanisms`, in order.
    pub mechanisms: Vec<Mechanism>,
    /// PLAIN's users and passwords (the JAAS config's `user_<name>` options).
    pub plain_users: BTreeMap<String, String>,
    /// `connection.failed.authentication.delay.ms`.
    pub failed_delay_ms: u64,
}

impl SaslConfig {
    /// The enabled mechanisms' names, as SaslHandshake lists them.
    #[must_use]
    pub fn mechanism_names(&self) -> Vec<&'static str> {
        self.mechanisms.iter().map(|m| m.name()).collect()
    }
}

/// Why a SASL step fails.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SaslError {
    #[error("Unsupported SASL mechanism {requested}; enabled: {}", enabled.join(", "))]
    UnsupportedMechanism { requested: String, enabled: Vec<&'static str> },
    #[error("Unexpected {0} in this SASL state")]
    IllegalState(&'static str),
    #[error("SASL token of {0} bytes is larger than the limit")]
    TooLarge(usize),
    #[error(transparent)]
    Plain(#[from] PlainError),
    #[error(transparent)]
    Scram(#[from] ScramError),
}

impl SaslError {
    /// Whether this is a failed authentication (delayed close, SASL_AUTHENTICATION_FAILED).
    #[must_use]
    pub fn is_authentication_failure(&self) -> bool {
        matches!(self, Self::Plain(_) | Self::Scram(_) | Self::TooLarge(_))
    }
}

/// Where an exchange stands.
#[derive(Debug, Default)]
enum State {
    #[default]
    Start,
    /// A mechanism is chosen; `raw`: a v0 handshake, tokens come without Kafka headers.
    Chosen {
        mechanism: Mechanism,
        raw: bool,
    },
    /// SCRAM's server-first was sent.
    ScramSent {
        server: Box<ScramServer>,
        raw: bool,
    },
    Done,
    Failed,
}

/// What a token leads to.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Send this challenge and wait for the next token.
    Challenge(Vec<u8>),
    /// Authenticated as `user`; send `reply` (possibly empty).
    Authenticated { user: String, reply: Vec<u8> },
}

/// One connection's exchange.
#[derive(Debug, Default)]
pub struct SaslExchange {
    state: State,
}

impl SaslExchange {
    /// SaslHandshake with `version` (0: raw tokens follow).
    pub fn handshake(
        &mut self,
        config: &SaslConfig,
        requested: &str,
        version: i16,
    ) -> Result<Mechanism, SaslError> {
        if !matches!(self.state, State::Start) {
            self.state = State::Failed;
            return Err(SaslError::IllegalState("SaslHandshake"));
        }
        match Mechanism::parse(requested).filter(|m| config.mechanisms.contains(m)) {
            Some(mechanism) => {
                self.state = State::Chosen { mechanism, raw: version == 0 };
                Ok(mechanism)
            }
            None => {
                self.state = State::Failed;
                Err(SaslError::UnsupportedMechanism {
                    requested: requested.to_string(),
                    enabled: config.mechanism_names(),
                })
            }
        }
    }

    /// Whether the next frame is a raw token (after a v0 handshake).
    #[must_use]
    pub fn expects_raw_token(&self) -> bool {
        matches!(self.state, State::Chosen { raw: true, .. } | State::ScramSent { raw: true, .. })
    }

    /// The next token. `lookup` finds a SCRAM credential; `nonce` makes a server nonce.
    pub fn authenticate(
        &mut self,
        config: &SaslConfig,
        token: &[u8],
        lookup: impl FnOnce(&str, ScramMechanism) -> Option<ScramCredential>,
        nonce: impl FnOnce() -> String,
    ) -> Result<Step, SaslError> {
        let result = self.step(config, token, lookup, nonce);
        if result.is_err() {
            self.state = State::Failed;
        }
        result
    }

    fn step(
        &mut self,
        config: &SaslConfig,
        token: &[u8],
        lookup: impl FnOnce(&str, ScramMechanism) -> Option<ScramCredential>,
        nonce: impl FnOnce() -> String,
    ) -> Result<Step, SaslError> {
        if token.len() > SASL_TOKEN_BYTES_MAX {
            return Err(SaslError::TooLarge(token.len()));
        }
        match std::mem::take(&mut self.state) {
            State::Chosen { mechanism: Mechanism::Plain, .. } => {
                let user = plain::authenticate(token, &config.plain_users)?;
                self.state = State::Done;
                Ok(Step::Authenticated { user, reply: Vec::new() })
            }
            State::Chosen { mechanism: Mechanism::Scram(m), raw } => {
                let (server, first) =
                    ScramServer::start(m, token, &nonce(), |user| lookup(user, m))?;
                self.state = State::ScramSent { server: Box::new(server), raw };
                Ok(Step::Challenge(first))
            }
            State::ScramSent { server, .. } => {
                let (user, reply) = server.finish(token)?;
                self.state = State::Done;
                Ok(Step::Authenticated { user, reply })
            }
            State::Start | State::Done | State::Failed => {
                Err(SaslError::IllegalState("SaslAuthenticate"))
            }
        }
    }
}

/// A fresh server nonce from the thread's RNG.
#[must_use]
pub fn fresh_nonce() -> String {
    scram::server_nonce(&mut rand::thread_rng())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> SaslConfig {
        SaslConfig {
            mechanisms: vec![Mechanism::Plain, Mechanism::Scram(ScramMechanism::Sha512)],
            plain_users: BTreeMap::from([("alice".to_string(), "pw".to_string())]),
            failed_delay_ms: 0,
        }
    }

    #[test]
    fn plain_in_one_token() {
        let mut x = SaslExchange::default();
        assert_eq!(x.handshake(&config(), "PLAIN", 1), Ok(Mechanism::Plain));
        assert!(!x.expects_raw_token());
        let step = x.authenticate(&config(), b"\0alice\0pw", |_, _| None, String::new);
        assert_eq!(step, Ok(Step::Authenticated { user: "alice".into(), reply: Vec::new() }));
        let again = x.authenticate(&config(), b"\0alice\0pw", |_, _| None, String::new);
        assert_eq!(again, Err(SaslError::IllegalState("SaslAuthenticate")));
    }

    #[test]
    fn unknown_or_disabled_mechanisms_list_the_enabled_ones() {
        let mut x = SaslExchange::default();
        let err = x.handshake(&config(), "SCRAM-SHA-256", 1).expect_err("disabled");
        assert_eq!(
            err.to_string(),
            "Unsupported SASL mechanism SCRAM-SHA-256; enabled: PLAIN, SCRAM-SHA-512"
        );
        let mut x = SaslExchange::default();
        assert!(x.handshake(&config(), "GSSAPI", 1).is_err());
    }

    #[test]
    fn scram_in_two_tokens_with_raw_v0_framing() {
        let m = ScramMechanism::Sha512;
        let cred = ScramCredential::from_password(m, "pw", b"salt", 4096);
        let mut x = SaslExchange::default();
        x.handshake(&config(), "SCRAM-SHA-512", 0).expect("handshake");
        assert!(x.expects_raw_token());
        let lookup = |u: &str, _| (u == "bob").then(|| cred.clone());
        let Ok(Step::Challenge(first)) =
            x.authenticate(&config(), b"n,,n=bob,r=cn", lookup, || "sn".into())
        else {
            panic!("expected a challenge")
        };
        assert!(first.starts_with(b"r=cnsn,s="));
        let bad = x.authenticate(&config(), b"c=biws,r=cnsn,p=AAAA", |_, _| None, String::new);
        assert!(bad.expect_err("bad proof").is_authentication_failure());
        assert!(!x.expects_raw_token(), "failed");
    }

    #[test]
    fn tokens_before_a_handshake_or_too_large_are_refused() {
        let mut x = SaslExchange::default();
        let early = x.authenticate(&config(), b"x", |_, _| None, String::new);
        assert_eq!(early, Err(SaslError::IllegalState("SaslAuthenticate")));
        let mut x = SaslExchange::default();
        x.handshake(&config(), "PLAIN", 1).expect("handshake");
        let big = vec![0u8; SASL_TOKEN_BYTES_MAX + 1];
        let err = x.authenticate(&config(), &big, |_, _| None, String::new);
        assert_eq!(err, Err(SaslError::TooLarge(SASL_TOKEN_BYTES_MAX + 1)));
    }
}
