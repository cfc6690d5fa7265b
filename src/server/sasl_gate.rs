//! The protocol boundary of SASL on a SASL_PLAINTEXT or SASL_SSL listener: until the
//! connection authenticated, only ApiVersions, SaslHandshake (v0–1) and SaslAuthenticate
//! (v0–2; raw tokens after a v0 handshake) are served; any other request closes the
//! connection (ILLEGAL_SASL_STATE, as Kafka's `SaslServerAuthenticator` does). Kafka's error
//! codes are chosen here: UNSUPPORTED_SASL_MECHANISM (with the enabled list),
//! SASL_AUTHENTICATION_FAILED (with the reason; for OAUTHBEARER, Kafka's JSON challenge first),
//! ILLEGAL_SASL_STATE.
//!
//! Runs in the connection's reader on the shard that accepted it; the SCRAM credentials come
//! from that shard's metadata image. Invariant: after a failed authentication the connection
//! only sends the error response, then closes `connection.failed.authentication.delay.ms`
//! later (against password guessing).

use std::cell::RefCell;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::dispatch::{respond, Outcome};
use crate::controller::scram::{ScramCredential, ScramMechanism};
use crate::protocol::{decode_request, peek_api};
use crate::quota::Principal;
use crate::security::sasl::{
    fresh_nonce, Mechanism, SaslConfig, SaslEnv, SaslError, SaslExchange, Step,
};
use crate::security::Session;
use crate::shard::ShardCtx;

/// SaslHandshake versions served (v1: SaslAuthenticate follows; v0: raw tokens).
pub const HANDSHAKE_VERSIONS: (i16, i16) = (0, 1);
/// SaslAuthenticate versions served (v1 adds the session lifetime, v2 is flexible).
pub const AUTHENTICATE_VERSIONS: (i16, i16) = (0, 2);

/// A SASL listener's connection until it authenticated.
pub struct SaslGate {
    config: std::sync::Arc<SaslConfig>,
    exchange: RefCell<SaslExchange>,
    done: std::cell::Cell<bool>,
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
        Self { config, exchange: RefCell::default(), done: std::cell::Cell::new(false) }
    }

    /// Whether the connection authenticated.
    #[must_use]
    pub fn authenticated(&self) -> bool {
        self.done.get()
    }

    /// Judges one frame read before authentication.
    pub fn on_frame(&self, ctx: &ShardCtx, frame: &Bytes, session: &Session) -> Verdict {
        if self.done.get() {
            return Verdict::Pass;
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
            Ok(_) => Verdict::Answer(outcome),
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
        let step = self.exchange.borrow_mut().authenticate(&self.config, token, &ShardEnv(ctx));
        match step {
            Ok(Step::Challenge(bytes)) => Verdict::Answer(reply(framed, Bytes::from(bytes), None)),
            Ok(Step::Refused { challenge, reason }) => {
                tracing::info!(
                    shard = %ctx.id,
                    listener = %session.listener,
                    "OAUTHBEARER token refused: {reason}"
                );
                Verdict::Answer(reply(framed, Bytes::from(challenge), None))
            }
            Ok(Step::Authenticated { user, reply: bytes, .. }) => {
                session.authenticated(Principal::named(&user));
                self.done.set(true);
                tracing::info!(
                    shard = %ctx.id,
                    listener = %session.listener,
                    principal = %format_args!("User:{user}"),
                    "SASL authentication succeeded"
                );
                Verdict::Answer(reply(framed, Bytes::from(bytes), None))
            }
            Err(e) => {
                let failed = e.is_authentication_failure();
                let code = if failed {
                    ResponseError::SaslAuthenticationFailed
                } else {
                    ResponseError::IllegalSaslState
                };
                let outcome =
                    framed.map(|f| reply(Some(f), Bytes::new(), Some((code, e.client_message()))));
                let delay_ms = if failed { self.config.failed_delay_ms } else { 0 };
                Verdict::Close {
                    outcome,
                    delay_ms,
                    reason: format!("SASL authentication failed: {e}"),
                }
            }
        }
    }
}

/// Logs, once at start (the config is built before logging starts), what each SASL listener
/// accepts that an operator should know: unsecured OAUTHBEARER tokens (WARN: development
/// only), the JWKS of signed ones, PLAIN with no users.
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

/// A SaslAuthenticate response, or a raw token frame (v0 handshake).
fn reply(
    framed: Option<(i16, i32)>,
    bytes: Bytes,
    error: Option<(ResponseError, String)>,
) -> Outcome {
    match framed {
        Some((version, correlation_id)) => {
            let mut response = SaslAuthenticateResponse::default().with_auth_bytes(bytes);
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
