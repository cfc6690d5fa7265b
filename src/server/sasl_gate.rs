//! The protocol boundary of SASL on a SASL_PLAINTEXT or SASL_SSL listener: until the
//! connection authenticated, only ApiVersions, SaslHandshake (v0–1) and SaslAuthenticate
//! (v0–2; raw tokens after a v0 handshake) are served; any other request closes the
//! connection (ILLEGAL_SASL_STATE, as Kafka's `SaslServerAuthenticator` does). Kafka's error
//! codes are chosen here: UNSUPPORTED_SASL_MECHANISM (with the enabled list),
//! SASL_AUTHENTICATION_FAILED (with the reason), ILLEGAL_SASL_STATE.
//!
//! KIP-368 too: a session lasts `connections.max.reauth.ms` (capped by an OAUTHBEARER token's
//! expiry), told to the client in SaslAuthenticate v1+ (`session_lifetime_ms`). A client may
//! re-authenticate on the open connection (SaslHandshake, then SaslAuthenticate, with the same
//! mechanism; at most once per `REAUTH_INTERVAL_MS_MIN`), which renews the session; a
//! re-authentication that would change the principal is refused and the connection closed. A
//! request other than that handshake after the session expired closes the connection, as
//! Kafka's `KafkaChannel.serverAuthenticationSessionExpired` does. Requests already in flight
//! keep their place: the gate's answers join the connection's ordered responses.
//!
//! Runs in the connection's reader on the shard that accepted it; the SCRAM credentials come
//! from that shard's metadata image, session times from its monotonic clock. Invariant: after
//! a failed authentication the connection only sends the error response, then closes
//! `connection.failed.authentication.delay.ms` later (against password guessing).

use std::cell::{Cell, RefCell};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::dispatch::{respond, Outcome};
use crate::constants::REAUTH_INTERVAL_MS_MIN;
use crate::controller::scram::{ScramCredential, ScramMechanism};
use crate::protocol::{decode_request, peek_api};
use crate::quota::Principal;
use crate::security::sasl::{
    fresh_nonce, session_lifetime_ms, Mechanism, SaslConfig, SaslEnv, SaslError, SaslExchange, Step,
};
use crate::security::Session;
use crate::shard::ShardCtx;

/// SaslHandshake versions served (v1: SaslAuthenticate follows; v0: raw tokens).
pub const HANDSHAKE_VERSIONS: (i16, i16) = (0, 1);
/// SaslAuthenticate versions served (v1 adds the session lifetime, v2 is flexible).
pub const AUTHENTICATE_VERSIONS: (i16, i16) = (0, 2);

/// An authenticated connection's session.
#[derive(Debug)]
struct AuthSession {
    mechanism: Mechanism,
    user: String,
    /// When it expires on the shard's monotonic clock (`quota_clock_ms`); `None`: never.
    expires_at_ms: Option<u64>,
    /// The lifetime it was given, for the log line of its expiry.
    lifetime_ms: u64,
    /// When the last re-authentication began (monotonic ms).
    reauth_started_ms: Option<u64>,
}

/// A re-authentication under way: the handshake asked for `asked`.
#[derive(Debug, Default)]
struct Reauth {
    asked: Option<Mechanism>,
}

/// A SASL listener's connection: its exchange until it authenticated, then its session.
pub struct SaslGate {
    config: std::sync::Arc<SaslConfig>,
    exchange: RefCell<SaslExchange>,
    /// The mechanism SaslHandshake chose for the exchange under way.
    chosen: Cell<Option<Mechanism>>,
    session: RefCell<Option<AuthSession>>,
    reauth: RefCell<Option<Reauth>>,
}

/// What the reader does with a frame.
pub enum Verdict {
    /// Not for the gate (ApiVersions, or any request once authenticated): dispatch it.
    Pass,
    /// Answer with this, and keep reading.
    Answer(Outcome),
    /// Answer with this (if any), then close after `delay_ms`.
    Close { outcome: Option<Outcome>, delay_ms: u64, reason: String },
}

/// The shard as an exchange sees it.
struct ShardEnv<'a>(&'a ShardCtx);

impl SaslEnv for ShardEnv<'_> {
    fn scram_credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.0.image().scram_credentials.get(user, mechanism).cloned()
    }
    fn nonce(&self) -> String {
        fresh_nonce()
    }
    fn now_ms(&self) -> i64 {
        crate::shard::now_ms()
    }
}

impl SaslGate {
    #[must_use]
    pub fn new(config: std::sync::Arc<SaslConfig>) -> Self {
        Self {
            config,
            exchange: RefCell::default(),
            chosen: Cell::new(None),
            session: RefCell::new(None),
            reauth: RefCell::new(None),
        }
    }

    /// Whether the connection authenticated (and is not re-authenticating).
    #[must_use]
    pub fn authenticated(&self) -> bool {
        self.session.borrow().is_some() && self.reauth.borrow().is_none()
    }

    /// Judges one frame read from the connection.
    pub fn on_frame(&self, ctx: &ShardCtx, frame: &Bytes, session: &Session) -> Verdict {
        if self.authenticated() {
            return self.after_authentication(ctx, frame);
        }
        if self.exchange.borrow().expects_raw_token() {
            return self.token(ctx, frame, session, None);
        }
        let Ok(peek) = peek_api(frame) else {
            return close_illegal("a frame too short for a request header".into());
        };
        match ApiKey::try_from(peek.api_key) {
            Ok(ApiKey::ApiVersions) => Verdict::Pass,
            Ok(ApiKey::SaslHandshake) => self.handshake(frame, peek.version),
            Ok(ApiKey::SaslAuthenticate) => {
                if !(AUTHENTICATE_VERSIONS.0..=AUTHENTICATE_VERSIONS.1).contains(&peek.version) {
                    return close_illegal(format!("SaslAuthenticate v{}", peek.version));
                }
                match decode_request::<SaslAuthenticateRequest>(
                    frame.clone(),
                    ApiKey::SaslAuthenticate,
                    peek.version,
                ) {
                    Ok((header, req)) => self.token(
                        ctx,
                        &req.auth_bytes,
                        session,
                        Some((peek.version, header.correlation_id)),
                    ),
                    Err(e) => close_illegal(format!("malformed SaslAuthenticate: {e}")),
                }
            }
            Ok(api) => close_illegal(format!("{api:?} before SASL authentication")),
            Err(()) => close_illegal(format!("unknown api key {}", peek.api_key)),
        }
    }

    /// A request on an authenticated connection: a SaslHandshake may begin a
    /// re-authentication; anything else closes an expired session or passes.
    fn after_authentication(&self, ctx: &ShardCtx, frame: &Bytes) -> Verdict {
        let now_ms = ctx.quota_clock_ms();
        let handshake = peek_api(frame).ok().filter(|p| p.api_key == ApiKey::SaslHandshake as i16);
        if let Some(peek) = handshake.filter(|_| self.may_reauthenticate(now_ms)) {
            if let Some(s) = self.session.borrow_mut().as_mut() {
                s.reauth_started_ms = Some(now_ms);
            }
            *self.exchange.borrow_mut() = SaslExchange::default();
            *self.reauth.borrow_mut() = Some(Reauth::default());
            return self.handshake(frame, peek.version);
        }
        let session = self.session.borrow();
        match session.as_ref() {
            Some(s) if s.expires_at_ms.is_some_and(|at| now_ms > at) => Verdict::Close {
                outcome: None,
                delay_ms: 0,
                reason: format!(
                    "the SASL session of User:{} expired ({} ms after it authenticated, KIP-368) \
                     and the client did not re-authenticate",
                    s.user, s.lifetime_ms
                ),
            },
            _ => Verdict::Pass,
        }
    }

    /// Kafka's `KafkaChannel.maybeBeginServerReauthentication`: only a session that expires,
    /// and not again within `REAUTH_INTERVAL_MS_MIN`.
    fn may_reauthenticate(&self, now_ms: u64) -> bool {
        self.session.borrow().as_ref().is_some_and(|s| {
            s.expires_at_ms.is_some()
                && s.reauth_started_ms
                    .is_none_or(|at| now_ms.saturating_sub(at) >= REAUTH_INTERVAL_MS_MIN)
        })
    }

    fn handshake(&self, frame: &Bytes, version: i16) -> Verdict {
        if !(HANDSHAKE_VERSIONS.0..=HANDSHAKE_VERSIONS.1).contains(&version) {
            return close_illegal(format!("SaslHandshake v{version}"));
        }
        let (header, req) = match decode_request::<SaslHandshakeRequest>(
            frame.clone(),
            ApiKey::SaslHandshake,
            version,
        ) {
            Ok(decoded) => decoded,
            Err(e) => return close_illegal(format!("malformed SaslHandshake: {e}")),
        };
        let names = self.config.mechanism_names();
        let mechanisms = names.iter().map(|n| StrBytes::from_static_str(n)).collect();
        let result =
            self.exchange.borrow_mut().handshake(&self.config, req.mechanism.as_str(), version);
        let code = match &result {
            Ok(_) => 0,
            Err(SaslError::UnsupportedMechanism { .. }) => {
                ResponseError::UnsupportedSaslMechanism.code()
            }
            Err(_) => ResponseError::IllegalSaslState.code(),
        };
        let response =
            SaslHandshakeResponse::default().with_error_code(code).with_mechanisms(mechanisms);
        let outcome = respond(ApiKey::SaslHandshake, version, header.correlation_id, &response);
        match result {
            Ok(mechanism) => {
                self.chosen.set(Some(mechanism));
                if let Some(reauth) = self.reauth.borrow_mut().as_mut() {
                    reauth.asked = Some(mechanism);
                }
                Verdict::Answer(outcome)
            }
            Err(e) => Verdict::Close { outcome: Some(outcome), delay_ms: 0, reason: e.to_string() },
        }
    }

    /// One token; `framed`: the SaslAuthenticate version and correlation id (`None`: a raw
    /// token after a v0 handshake, answered raw).
    fn token(
        &self,
        ctx: &ShardCtx,
        token: &[u8],
        session: &Session,
        framed: Option<(i16, i32)>,
    ) -> Verdict {
        if let Some(refusal) = self.reauth_mechanism_refusal() {
            return self.fail(framed, &refusal);
        }
        let step = self.exchange.borrow_mut().authenticate(&self.config, token, &ShardEnv(ctx));
        match step {
            Ok(Step::Challenge(bytes)) => {
                Verdict::Answer(reply(framed, Bytes::from(bytes), 0, None))
            }
            Ok(Step::Refused { challenge, reason }) => {
                tracing::info!(
                    shard = %ctx.id,
                    listener = %session.listener,
                    "OAUTHBEARER token refused: {reason}"
                );
                Verdict::Answer(reply(framed, Bytes::from(challenge), 0, None))
            }
            Ok(Step::Authenticated { user, reply: bytes, expires_ms }) => {
                self.authenticated_as(ctx, session, framed, (user, Bytes::from(bytes), expires_ms))
            }
            Err(e) => {
                let failed = e.is_authentication_failure();
                let text = format!("{e}");
                let outcome = self.failure_outcome(framed, &e);
                let delay_ms = if failed { self.config.failed_delay_ms } else { 0 };
                Verdict::Close {
                    outcome,
                    delay_ms,
                    reason: format!("SASL {} failed: {text}", self.what()),
                }
            }
        }
    }

    /// A re-authentication must keep its mechanism (Kafka's `REAUTH_BAD_MECHANISM`).
    fn reauth_mechanism_refusal(&self) -> Option<String> {
        let reauth = self.reauth.borrow();
        let asked = reauth.as_ref()?.asked?;
        let session = self.session.borrow();
        let had = session.as_ref()?.mechanism;
        (asked != had).then(|| {
            format!(
                "SASL mechanism '{}' requested by client is not supported for re-authentication \
                 of mechanism '{}'",
                asked.name(),
                had.name()
            )
        })
    }

    /// A successful (re-)authentication as `user` with a credential that expires at
    /// `expires_ms` (wall clock), answered with `bytes`.
    fn authenticated_as(
        &self,
        ctx: &ShardCtx,
        session: &Session,
        framed: Option<(i16, i32)>,
        (user, bytes, expires_ms): (String, Bytes, Option<i64>),
    ) -> Verdict {
        let Some(mechanism) = self.chosen.get() else {
            return close_illegal("SaslAuthenticate before SaslHandshake".into());
        };
        let reauthenticating = self.reauth.borrow().is_some();
        let previous = self.session.borrow().as_ref().map(|s| s.user.clone());
        if let Some(before) = previous.filter(|before| reauthenticating && *before != user) {
            let message = format!(
                "Cannot change principals during re-authentication from User.{before}: User.{user}"
            );
            return self.fail(framed, &message);
        }
        *self.reauth.borrow_mut() = None;
        let lifetime = session_lifetime_ms(
            self.config.max_reauth_ms(mechanism),
            expires_ms,
            crate::shard::now_ms(),
        );
        let now_ms = ctx.quota_clock_ms();
        let reauth_started_ms = self.session.borrow().as_ref().and_then(|s| s.reauth_started_ms);
        *self.session.borrow_mut() = Some(AuthSession {
            mechanism,
            user: user.clone(),
            expires_at_ms: lifetime.map(|ms| now_ms.saturating_add(ms)),
            lifetime_ms: lifetime.unwrap_or(0),
            reauth_started_ms,
        });
        if !reauthenticating {
            session.authenticated(Principal::named(&user));
        }
        tracing::info!(
            shard = %ctx.id,
            listener = %session.listener,
            principal = %format_args!("User:{user}"),
            mechanism = mechanism.name(),
            session_lifetime_ms = lifetime.unwrap_or(0),
            "SASL {} succeeded",
            if reauthenticating { "re-authentication" } else { "authentication" }
        );
        let lifetime_ms = i64::try_from(lifetime.unwrap_or(0)).unwrap_or(i64::MAX);
        Verdict::Answer(reply(framed, bytes, lifetime_ms, None))
    }

    fn what(&self) -> &'static str {
        if self.reauth.borrow().is_some() {
            "re-authentication"
        } else {
            "authentication"
        }
    }

    /// SASL_AUTHENTICATION_FAILED with `message`, then the delayed close.
    fn fail(&self, framed: Option<(i16, i32)>, message: &str) -> Verdict {
        let error = Some((ResponseError::SaslAuthenticationFailed, message.to_string()));
        Verdict::Close {
            outcome: framed.map(|f| reply(Some(f), Bytes::new(), 0, error)),
            delay_ms: self.config.failed_delay_ms,
            reason: format!("SASL {} failed: {message}", self.what()),
        }
    }

    fn failure_outcome(&self, framed: Option<(i16, i32)>, e: &SaslError) -> Option<Outcome> {
        let code = if e.is_authentication_failure() {
            ResponseError::SaslAuthenticationFailed
        } else {
            ResponseError::IllegalSaslState
        };
        framed.map(|f| reply(Some(f), Bytes::new(), 0, Some((code, e.client_message()))))
    }
}

/// Logs, once at start (the config is built before logging starts), what each SASL listener
/// accepts that an operator should know: unsecured OAUTHBEARER tokens (WARN: development
/// only), the JWKS of signed ones, PLAIN with no users, the KIP-368 session limits.
pub fn log_settings(config: &crate::config::ServeConfig) {
    use crate::security::oauthbearer::TokenValidator;
    for (listener, security) in config.listeners.all.iter().zip(&config.listener_security) {
        let Some(sasl) = &security.sasl else { continue };
        let name = &listener.name;
        match sasl.oauth.as_deref() {
            Some(TokenValidator::Unsecured(_)) => tracing::warn!(
                listener = %name,
                "OAUTHBEARER accepts UNSECURED tokens (alg none: anyone can write one; Kafka's \
                 OAuthBearerUnsecuredValidatorCallbackHandler), for development only; set \
                 {}oauthbearer.sasl.server.callback.handler.class={} and \
                 sasl.oauthbearer.jwks.endpoint.url to verify signed tokens",
                listener.prefix(),
                crate::config::oauthbearer::SIGNED_HANDLERS[0]
            ),
            Some(TokenValidator::Signed(v)) => tracing::info!(
                listener = %name,
                jwks = %v.keys.path().display(),
                keys = v.keys.keys(crate::shard::now_ms()).len(),
                "OAUTHBEARER verifies signed tokens"
            ),
            None => {}
        }
        if sasl.mechanisms.contains(&Mechanism::Plain) && sasl.plain_users.is_empty() {
            tracing::warn!(
                listener = %name,
                "PLAIN is enabled but {}plain.sasl.jaas.config lists no user_<name> entries: no \
                 PLAIN login can succeed",
                listener.prefix()
            );
        }
        for (mechanism, ms) in sasl.max_reauth_ms.iter().filter(|(_, ms)| *ms > 0) {
            tracing::info!(listener = %name, mechanism = mechanism.name(), "SASL sessions last at most connections.max.reauth.ms={ms} (KIP-368)");
        }
    }
}

/// Kafka closes a connection that sends anything but SASL before authenticating.
fn close_illegal(what: String) -> Verdict {
    Verdict::Close {
        outcome: None,
        delay_ms: 0,
        reason: format!("ILLEGAL_SASL_STATE: {what} on a SASL listener"),
    }
}

/// A SaslAuthenticate response (v1+ with `session_lifetime_ms`), or a raw token frame (v0
/// handshake).
fn reply(
    framed: Option<(i16, i32)>,
    bytes: Bytes,
    session_lifetime_ms: i64,
    error: Option<(ResponseError, String)>,
) -> Outcome {
    match framed {
        Some((version, correlation_id)) => {
            let mut response = SaslAuthenticateResponse::default()
                .with_auth_bytes(bytes)
                .with_session_lifetime_ms(session_lifetime_ms);
            if let Some((code, message)) = error {
                response = response
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_string(message)));
            }
            respond(ApiKey::SaslAuthenticate, version, correlation_id, &response)
        }
        None => {
            let mut frame = BytesMut::with_capacity(4 + bytes.len());
            frame.put_u32(u32::try_from(bytes.len()).unwrap_or(u32::MAX));
            frame.put_slice(&bytes);
            Outcome::Respond(frame.freeze().into())
        }
    }
}
