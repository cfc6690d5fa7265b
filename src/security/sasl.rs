//! One connection's SASL exchange, independent of Kafka's framing: the mechanism chosen by
//! SaslHandshake, then the tokens of SaslAuthenticate (or raw tokens after a v0 handshake)
//! through PLAIN ([`super::plain`]), SCRAM ([`super::scram`]) or OAUTHBEARER
//! ([`super::oauthbearer`]), to an authenticated user and, for a token, when it expires; and
//! KIP-368's session lifetime ([`session_lifetime_ms`]).
//!
//! Lives in the connection's reader on the shard that accepted it. Invariants: a mechanism is
//! chosen once, before any token; a token is at most `SASL_TOKEN_BYTES_MAX` bytes; after a
//! failure the exchange only answers errors (the connection is closing); what it needs from
//! outside (SCRAM credentials, a nonce, the time) comes through [`SaslEnv`].

use std::collections::BTreeMap;
use std::sync::Arc;

use super::oauthbearer::{self, OAuthBearerError, TokenValidator, CONTROL_A};
use super::plain::{self, PlainError};
use super::scram::{self, ScramError, ScramServer};
use crate::constants::{OAUTHBEARER_ATTEMPTS_MAX, SASL_TOKEN_BYTES_MAX};
use crate::controller::scram::{ScramCredential, ScramMechanism};

/// A SASL mechanism Shardlog serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
    OAuthBearer,
}

impl Mechanism {
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "PLAIN" => Some(Self::Plain),
            oauthbearer::NAME => Some(Self::OAuthBearer),
            other => ScramMechanism::from_name(other).map(Self::Scram),
        }
    }

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::Scram(m) => m.name(),
            Self::OAuthBearer => oauthbearer::NAME,
        }
    }

    /// The lower-case prefix of its per-listener settings
    /// (`listener.name.<l>.<prefix>.sasl.jaas.config`).
    #[must_use]
    pub fn prefix(self) -> String {
        self.name().to_ascii_lowercase()
    }
}

/// A SASL listener's settings.
#[derive(Clone, Debug)]
pub struct SaslConfig {
    /// `sasl.enabled.mechanisms`, in order.
    pub mechanisms: Vec<Mechanism>,
    /// PLAIN's users and passwords (the JAAS config's `user_<name>` options).
    pub plain_users: BTreeMap<String, String>,
    /// OAUTHBEARER's token validation (when it is enabled).
    pub oauth: Option<Arc<TokenValidator>>,
    /// KIP-368 `connections.max.reauth.ms` of each enabled mechanism (0: no limit).
    pub max_reauth_ms: Vec<(Mechanism, u64)>,
    /// `connection.failed.authentication.delay.ms`.
    pub failed_delay_ms: u64,
}

impl SaslConfig {
    /// Settings with `mechanisms` and nothing else (no users, no token validator, no
    /// re-authentication, no delay).
    #[must_use]
    pub fn with_mechanisms(mechanisms: Vec<Mechanism>) -> Self {
        Self {
            mechanisms,
            plain_users: BTreeMap::new(),
            oauth: None,
            max_reauth_ms: Vec::new(),
            failed_delay_ms: 0,
        }
    }

    /// The enabled mechanisms' names, as SaslHandshake lists them.
    #[must_use]
    pub fn mechanism_names(&self) -> Vec<&'static str> {
        self.mechanisms.iter().map(|m| m.name()).collect()
    }

    /// `connections.max.reauth.ms` of `mechanism` (0: sessions do not expire by it).
    #[must_use]
    pub fn max_reauth_ms(&self, mechanism: Mechanism) -> u64 {
        self.max_reauth_ms.iter().find(|(m, _)| *m == mechanism).map_or(0, |(_, ms)| *ms)
    }
}

/// KIP-368: how long a session lasts (ms) after authenticating at `now_ms`, as Kafka's
/// `SaslServerAuthenticator` computes it: `connections.max.reauth.ms` (`max_reauth_ms`, 0 =
/// no limit), capped by the credential's expiry (an OAUTHBEARER token's `exp`) when it has
/// one, never negative. `None`: the session never expires (the client is told 0).
#[must_use]
pub fn session_lifetime_ms(
    max_reauth_ms: u64,
    credential_expires_ms: Option<i64>,
    now_ms: i64,
) -> Option<u64> {
    let left =
        credential_expires_ms.map(|exp| u64::try_from(exp.saturating_sub(now_ms)).unwrap_or(0));
    match (left, max_reauth_ms) {
        (None, 0) => None,
        (None, max) => Some(max),
        (Some(left), 0) => Some(left),
        (Some(left), max) => Some(left.min(max)),
    }
}

/// What an exchange needs from the connection's shard.
pub trait SaslEnv {
    /// The SCRAM credential of `user` for `mechanism`.
    fn scram_credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential>;
    /// A fresh server nonce.
    fn nonce(&self) -> String;
    /// Wall-clock ms since the epoch (token expiry).
    fn now_ms(&self) -> i64;
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
    #[error(transparent)]
    OAuthBearer(#[from] OAuthBearerError),
}

impl SaslError {
    /// Whether this is a failed authentication (delayed close, SASL_AUTHENTICATION_FAILED).
    #[must_use]
    pub fn is_authentication_failure(&self) -> bool {
        matches!(self, Self::Plain(_) | Self::Scram(_) | Self::TooLarge(_) | Self::OAuthBearer(_))
    }

    /// What the client is told (the log line gets the whole `Display`).
    #[must_use]
    pub fn client_message(&self) -> String {
        match self {
            Self::OAuthBearer(e) => e.client_message().into_owned(),
            other => other.to_string(),
        }
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
    /// OAUTHBEARER's error challenge was sent: the client's `\x01` ends the exchange with it,
    /// anything else is another first message (Kafka's `OAuthBearerSaslServer`).
    OAuthRefused {
        challenge: String,
        raw: bool,
        attempts: u32,
    },
    Done,
    Failed,
}

/// What a token leads to.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Send this challenge and wait for the next token.
    Challenge(Vec<u8>),
    /// OAUTHBEARER refused the token: send `challenge` (Kafka's JSON) and wait for the
    /// client's `\x01`; `reason` is for the broker's log.
    Refused { challenge: Vec<u8>, reason: String },
    /// Authenticated as `user`; send `reply` (possibly empty). `expires_ms`: when the
    /// credential expires (wall clock; an OAUTHBEARER token's `exp`).
    Authenticated { user: String, reply: Vec<u8>, expires_ms: Option<i64> },
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
        matches!(
            self.state,
            State::Chosen { raw: true, .. }
                | State::ScramSent { raw: true, .. }
                | State::OAuthRefused { raw: true, .. }
        )
    }

    /// The next token.
    pub fn authenticate(
        &mut self,
        config: &SaslConfig,
        token: &[u8],
        env: &impl SaslEnv,
    ) -> Result<Step, SaslError> {
        let result = self.step(config, token, env);
        if result.is_err() {
            self.state = State::Failed;
        }
        result
    }

    fn step(
        &mut self,
        config: &SaslConfig,
        token: &[u8],
        env: &impl SaslEnv,
    ) -> Result<Step, SaslError> {
        if token.len() > SASL_TOKEN_BYTES_MAX {
            return Err(SaslError::TooLarge(token.len()));
        }
        match std::mem::take(&mut self.state) {
            State::Chosen { mechanism: Mechanism::Plain, .. } => {
                let user = plain::authenticate(token, &config.plain_users)?;
                self.state = State::Done;
                Ok(Step::Authenticated { user, reply: Vec::new(), expires_ms: None })
            }
            State::Chosen { mechanism: Mechanism::Scram(m), raw } => {
                let (server, first) = ScramServer::start(m, token, &env.nonce(), |user| {
                    env.scram_credential(user, m)
                })?;
                self.state = State::ScramSent { server: Box::new(server), raw };
                Ok(Step::Challenge(first))
            }
            State::ScramSent { server, .. } => {
                let (user, reply) = server.finish(token)?;
                self.state = State::Done;
                Ok(Step::Authenticated { user, reply, expires_ms: None })
            }
            State::Chosen { mechanism: Mechanism::OAuthBearer, raw } => {
                self.oauth(config, token, env, raw, 1)
            }
            State::OAuthRefused { challenge, .. } if token == [CONTROL_A] => {
                Err(OAuthBearerError::Refused(challenge).into())
            }
            State::OAuthRefused { raw, attempts, .. } => {
                if attempts >= OAUTHBEARER_ATTEMPTS_MAX {
                    return Err(OAuthBearerError::Attempts(OAUTHBEARER_ATTEMPTS_MAX).into());
                }
                self.oauth(config, token, env, raw, attempts + 1)
            }
            State::Start | State::Done | State::Failed => {
                Err(SaslError::IllegalState("SaslAuthenticate"))
            }
        }
    }

    /// An OAUTHBEARER first message (the `attempts`-th of this exchange).
    fn oauth(
        &mut self,
        config: &SaslConfig,
        token: &[u8],
        env: &impl SaslEnv,
        raw: bool,
        attempts: u32,
    ) -> Result<Step, SaslError> {
        let first = oauthbearer::parse_client_first(token)?;
        let validator = config.oauth.as_ref().ok_or(SaslError::IllegalState("OAUTHBEARER"))?;
        match validator.validate(first.token, env.now_ms()) {
            Ok(valid) => {
                if !first.authzid.is_empty() && first.authzid != valid.principal {
                    let (asked, principal) = (first.authzid.to_string(), valid.principal);
                    return Err(OAuthBearerError::Authzid(asked, principal).into());
                }
                self.state = State::Done;
                Ok(Step::Authenticated {
                    user: valid.principal,
                    reply: Vec::new(),
                    expires_ms: Some(valid.expires_ms),
                })
            }
            Err(rejection) => {
                let challenge = rejection.challenge();
                self.state = State::OAuthRefused { challenge: challenge.clone(), raw, attempts };
                Ok(Step::Refused { challenge: challenge.into_bytes(), reason: rejection.reason })
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

    /// bob's SHA-512 credential, a fixed nonce and time.
    struct Env(Option<ScramCredential>);

    impl SaslEnv for Env {
        fn scram_credential(&self, user: &str, _: ScramMechanism) -> Option<ScramCredential> {
            self.0.clone().filter(|_| user == "bob")
        }
        fn nonce(&self) -> String {
            "sn".into()
        }
        fn now_ms(&self) -> i64 {
            1_700_000_000_000
        }
    }

    const NO_ENV: Env = Env(None);

    fn config() -> SaslConfig {
        let mut c = SaslConfig::with_mechanisms(vec![
            Mechanism::Plain,
            Mechanism::Scram(ScramMechanism::Sha512),
            Mechanism::OAuthBearer,
        ]);
        c.plain_users = BTreeMap::from([("alice".to_string(), "pw".to_string())]);
        let unsecured = super::super::jwt::UnsecuredValidator::from_jaas(&[]).expect("defaults");
        c.oauth = Some(Arc::new(TokenValidator::Unsecured(unsecured)));
        c
    }

    #[test]
    fn plain_in_one_token() {
        let mut x = SaslExchange::default();
        assert_eq!(x.handshake(&config(), "PLAIN", 1), Ok(Mechanism::Plain));
        assert!(!x.expects_raw_token());
        let step = x.authenticate(&config(), b"\0alice\0pw", &NO_ENV);
        let want =
            Step::Authenticated { user: "alice".into(), reply: Vec::new(), expires_ms: None };
        assert_eq!(step, Ok(want));
        let again = x.authenticate(&config(), b"\0alice\0pw", &NO_ENV);
        assert_eq!(again, Err(SaslError::IllegalState("SaslAuthenticate")));
    }

    #[test]
    fn unknown_or_disabled_mechanisms_list_the_enabled_ones() {
        let mut x = SaslExchange::default();
        let err = x.handshake(&config(), "SCRAM-SHA-256", 1).expect_err("disabled");
        assert_eq!(
            err.to_string(),
            "Unsupported SASL mechanism SCRAM-SHA-256; enabled: PLAIN, SCRAM-SHA-512, OAUTHBEARER"
        );
        let mut x = SaslExchange::default();
        assert!(x.handshake(&config(), "GSSAPI", 1).is_err());
    }

    #[test]
    fn scram_in_two_tokens_with_raw_v0_framing() {
        let m = ScramMechanism::Sha512;
        let env = Env(Some(ScramCredential::from_password(m, "pw", b"salt", 4096)));
        let mut x = SaslExchange::default();
        x.handshake(&config(), "SCRAM-SHA-512", 0).expect("handshake");
        assert!(x.expects_raw_token());
        let Ok(Step::Challenge(first)) = x.authenticate(&config(), b"n,,n=bob,r=cn", &env) else {
            panic!("expected a challenge")
        };
        assert!(first.starts_with(b"r=cnsn,s="));
        let bad = x.authenticate(&config(), b"c=biws,r=cnsn,p=AAAA", &env);
        assert!(bad.expect_err("bad proof").is_authentication_failure());
        assert!(!x.expects_raw_token(), "failed");
    }

    #[test]
    fn tokens_before_a_handshake_or_too_large_are_refused() {
        let mut x = SaslExchange::default();
        let early = x.authenticate(&config(), b"x", &NO_ENV);
        assert_eq!(early, Err(SaslError::IllegalState("SaslAuthenticate")));
        let mut x = SaslExchange::default();
        x.handshake(&config(), "PLAIN", 1).expect("handshake");
        let big = vec![0u8; SASL_TOKEN_BYTES_MAX + 1];
        let err = x.authenticate(&config(), &big, &NO_ENV);
        assert_eq!(err, Err(SaslError::TooLarge(SASL_TOKEN_BYTES_MAX + 1)));
    }

    fn oauth_message(claims: &str, authzid: &str) -> Vec<u8> {
        use base64::Engine as _;
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let token = format!("{}.{}.", b64(br#"{"alg":"none"}"#), b64(claims.as_bytes()));
        format!("n,{authzid},\u{1}auth=Bearer {token}\u{1}\u{1}").into_bytes()
    }

    #[test]
    fn oauthbearer_accepts_a_token_with_its_expiry() {
        let mut x = SaslExchange::default();
        x.handshake(&config(), "OAUTHBEARER", 1).expect("handshake");
        let step = x.authenticate(
            &config(),
            &oauth_message(r#"{"sub":"carol","exp":1700000060}"#, ""),
            &NO_ENV,
        );
        let want = Step::Authenticated {
            user: "carol".into(),
            reply: Vec::new(),
            expires_ms: Some(1_700_000_060_000),
        };
        assert_eq!(step, Ok(want));
        let mut x = SaslExchange::default();
        x.handshake(&config(), "OAUTHBEARER", 1).expect("handshake");
        let other = oauth_message(r#"{"sub":"carol","exp":1700000060}"#, "a=dave");
        let err = x.authenticate(&config(), &other, &NO_ENV).expect_err("authzid");
        assert!(err.client_message().contains("authorization id (dave)"), "{err}");
    }

    #[test]
    fn oauthbearer_refusal_is_a_challenge_then_a_failure_with_it() {
        let expired = oauth_message(r#"{"sub":"carol","exp":1600000000}"#, "");
        let mut x = SaslExchange::default();
        x.handshake(&config(), "OAUTHBEARER", 0).expect("v0");
        let Ok(Step::Refused { challenge, reason }) = x.authenticate(&config(), &expired, &NO_ENV)
        else {
            panic!("a challenge")
        };
        assert_eq!(challenge, br#"{"status":"invalid_token"}"#);
        assert!(reason.contains("Expiration Time"), "{reason}");
        assert!(x.expects_raw_token(), "still raw after a v0 handshake");
        let err = x.authenticate(&config(), &[CONTROL_A], &NO_ENV).expect_err("ends");
        assert!(err.is_authentication_failure());
        assert_eq!(err.client_message(), r#"{"status":"invalid_token"}"#);
        // Another token instead of \x01 is read (Kafka), a bounded number of times.
        let mut x = SaslExchange::default();
        x.handshake(&config(), "OAUTHBEARER", 1).expect("v1");
        for _ in 0..OAUTHBEARER_ATTEMPTS_MAX {
            assert!(matches!(
                x.authenticate(&config(), &expired, &NO_ENV),
                Ok(Step::Refused { .. })
            ));
        }
        let err = x.authenticate(&config(), &expired, &NO_ENV).expect_err("bounded");
        assert_eq!(
            err,
            SaslError::OAuthBearer(OAuthBearerError::Attempts(OAUTHBEARER_ATTEMPTS_MAX))
        );
        // A malformed first message: Kafka's generic answer.
        let mut x = SaslExchange::default();
        x.handshake(&config(), "OAUTHBEARER", 1).expect("v1");
        let err = x.authenticate(&config(), &[CONTROL_A], &NO_ENV).expect_err("malformed");
        assert!(err.client_message().starts_with("Authentication failed during authentication"));
    }

    #[test]
    fn session_lifetimes_as_kafka() {
        assert_eq!(session_lifetime_ms(0, None, 5), None, "off");
        assert_eq!(session_lifetime_ms(3000, None, 5), Some(3000));
        assert_eq!(session_lifetime_ms(0, Some(10_005), 5), Some(10_000), "the token's exp");
        assert_eq!(session_lifetime_ms(3000, Some(10_005), 5), Some(3000));
        assert_eq!(session_lifetime_ms(30_000, Some(10_005), 5), Some(10_000));
        assert_eq!(session_lifetime_ms(3000, Some(1), 5), Some(0), "never negative");
    }
}
