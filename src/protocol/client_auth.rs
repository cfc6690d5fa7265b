//! How the broker's own Kafka client secures a connection to another broker, as Kafka's
//! inter-broker channel does: TLS with the listener's trust store (and its key store when
//! the other side asks for a client certificate), then SASL with the mechanism of
//! `sasl.mechanism.inter.broker.protocol` (SaslHandshake v1, then SaslAuthenticate v2
//! tokens until the mechanism is done).
//!
//! The mechanisms themselves (PLAIN, SCRAM) live above this layer (`security::client`) and
//! come in through [`SaslClient`]; this module only frames their tokens. Built once at
//! start-up from the configuration and shared read-only ([`ClientSecurity`] is `Send +
//! Sync`); each exchange runs on the shard that opens the connection, in its event loop.
//! Invariant: a [`Conn`] from `connect_secure` is handed out only after
//! the exchange succeeded, and no password appears in a `Debug` rendering or an error.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;

use super::client::{ClientError, Conn};

/// SaslHandshake version sent (v1: tokens travel in SaslAuthenticate requests).
const SASL_HANDSHAKE_VERSION: i16 = 1;
/// SaslAuthenticate version sent (v2: flexible; Kafka 4 serves v0–2).
const SASL_AUTHENTICATE_VERSION: i16 = 2;
/// Tokens one exchange may take before it counts as looping (SCRAM needs two, PLAIN one).
const SASL_ROUNDS_MAX: usize = 4;

/// One connection's client side of a SASL mechanism.
pub trait SaslClient {
    /// The first token (PLAIN's only one, SCRAM's client-first).
    fn first(&mut self) -> Vec<u8>;
    /// The token answering the server's `challenge`, or `None` when the exchange is done
    /// (after checking what the server's last answer proves, e.g. SCRAM's signature).
    fn step(&mut self, challenge: &[u8]) -> Result<Option<Vec<u8>>, String>;
}

/// Makes a fresh [`SaslClient`] for each connection.
pub type SaslClientFactory = Arc<dyn Fn() -> Box<dyn SaslClient> + Send + Sync>;

/// A SASL login: the mechanism, the user (for logs) and the client that proves it.
#[derive(Clone)]
pub struct SaslLogin {
    /// Kafka's mechanism name (`PLAIN`, `SCRAM-SHA-512`).
    pub mechanism: &'static str,
    pub user: String,
    pub client: SaslClientFactory,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslLogin")
            .field("mechanism", &self.mechanism)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// What a connection to another broker needs beyond TCP (built from the inter-broker
/// listener's settings; the default is plain TCP to the `PLAINTEXT` endpoints).
#[derive(Clone)]
pub struct ClientSecurity {
    /// The listener whose endpoints other brokers are dialled on (upper case, as brokers
    /// register it).
    pub listener: String,
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub sasl: Option<SaslLogin>,
}

impl Default for ClientSecurity {
    fn default() -> Self {
        Self { listener: "PLAINTEXT".into(), tls: None, sasl: None }
    }
}

impl std::fmt::Debug for ClientSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSecurity")
            .field("listener", &self.listener)
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl)
            .finish()
    }
}

/// Runs `login`'s exchange on `conn`; an error names the broker's answer (its error message
/// for a refused credential, the enabled mechanisms for an unsupported one).
pub async fn authenticate(conn: &mut Conn, login: &SaslLogin) -> Result<(), ClientError> {
    let addr = conn.addr().to_string();
    let refused = |msg: String| ClientError::Authentication { addr: addr.clone(), msg };
    let req =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(login.mechanism));
    let shake = conn.call(&req, SASL_HANDSHAKE_VERSION).await?;
    if shake.error_code != 0 {
        let enabled: Vec<&str> = shake.mechanisms.iter().map(StrBytes::as_str).collect();
        return Err(refused(format!(
            "SASL mechanism {} refused (error {}); the broker enables {}",
            login.mechanism,
            shake.error_code,
            enabled.join(", ")
        )));
    }
    let mut client = (login.client)();
    let mut token = client.first();
    for _ in 0..SASL_ROUNDS_MAX {
        let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
        let answer = conn.call(&req, SASL_AUTHENTICATE_VERSION).await?;
        if answer.error_code != 0 {
            let why = answer.error_message.as_ref().map_or("", StrBytes::as_str);
            return Err(refused(format!(
                "SASL {} as {} refused (error {}): {why}",
                login.mechanism, login.user, answer.error_code
            )));
        }
        match client.step(&answer.auth_bytes) {
            Ok(Some(next)) => token = next,
            Ok(None) => return Ok(()),
            Err(why) => return Err(refused(format!("SASL {}: {why}", login.mechanism))),
        }
    }
    Err(refused(format!("SASL {} did not finish in {SASL_ROUNDS_MAX} rounds", login.mechanism)))
}
