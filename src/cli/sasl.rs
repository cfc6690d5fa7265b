//! The client side of SASL for the subcommands (`--user`, `--password`,
//! `--sasl-mechanism`): PLAIN and SCRAM-SHA-256/512 (RFC 5802) over a blocking connection to a
//! SASL_PLAINTEXT listener, so `shardlog acls` can act as a principal the authorizer knows
//! (a super user, or one holding ALTER on the cluster).
//!
//! Every admin subcommand takes these flags; [`connect`] opens a connection and logs in with
//! them. They are installed once per process ([`SaslArgs::install`]) rather than threaded
//! through every helper, because a subcommand dials several brokers (the bootstrap, a group
//! coordinator, each broker of a log-dirs query) and each connection logs in the same way.
//!
//! Runs in the CLI process only. Invariant: the server's SCRAM signature is checked before
//! the connection is used, so a broker that does not know the password is never trusted.

use anyhow::{anyhow, bail};
use base64::Engine as _;
use bytes::Bytes;
use clap::Args;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::controller::scram::ScramMechanism;
use crate::protocol::blocking::BlockingConn;

/// Authentication flags of a subcommand.
#[derive(Args, Debug, Clone, Default)]
pub struct SaslArgs {
    /// Authenticate as this user (SASL on a SASL_PLAINTEXT listener).
    #[arg(long, global = true, requires = "password")]
    pub user: Option<String>,
    /// The user's password.
    #[arg(long, global = true, requires = "user")]
    pub password: Option<String>,
    /// PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    #[arg(long, global = true, default_value = "PLAIN")]
    pub sasl_mechanism: String,
}

/// The login of this CLI process (set by the subcommand before it connects).
static LOGIN: std::sync::OnceLock<SaslArgs> = std::sync::OnceLock::new();

/// A connection to `addr`, logged in as the user the flags name (anonymous without one).
pub fn connect(addr: &str, client_id: &'static str) -> anyhow::Result<BlockingConn> {
    let mut conn = BlockingConn::open(addr, client_id)?;
    if let Some(login) = LOGIN.get() {
        login.login(&mut conn).map_err(|e| anyhow!("{addr}: {e}"))?;
    }
    Ok(conn)
}

impl SaslArgs {
    /// Makes [`connect`] log in with these flags (the first call wins).
    pub fn install(&self) {
        let _ = LOGIN.set(self.clone());
    }

    /// Authenticates `conn` if a user was given.
    pub fn login(&self, conn: &mut BlockingConn) -> anyhow::Result<()> {
        let (Some(user), Some(password)) = (&self.user, &self.password) else { return Ok(()) };
        let mechanism = self.sasl_mechanism.to_ascii_uppercase();
        let handshake = SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_string(mechanism.clone()));
        let r: SaslHandshakeResponse = conn.call(ApiKey::SaslHandshake, 1, &handshake)?;
        if r.error_code != 0 {
            bail!("SASL handshake refused {mechanism} (error {})", r.error_code);
        }
        if mechanism == "PLAIN" {
            authenticate(conn, format!("\0{user}\0{password}").into_bytes())?;
            return Ok(());
        }
        let m = ScramMechanism::from_name(&mechanism)
            .ok_or_else(|| anyhow!("unknown SASL mechanism {mechanism}"))?;
        scram(conn, m, user, password)
    }
}

fn authenticate(conn: &mut BlockingConn, token: Vec<u8>) -> anyhow::Result<Bytes> {
    let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
    let r: SaslAuthenticateResponse = conn.call(ApiKey::SaslAuthenticate, 2, &req)?;
    if r.error_code != 0 {
        let message = r.error_message.map(|m| m.to_string()).unwrap_or_default();
        bail!("SASL authentication failed: {message}");
    }
    Ok(r.auth_bytes)
}

/// RFC 5802's exchange; names with `=` or `,` are escaped as the RFC says.
fn scram(
    conn: &mut BlockingConn,
    m: ScramMechanism,
    user: &str,
    password: &str,
) -> anyhow::Result<()> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let name = user.replace('=', "=3D").replace(',', "=2C");
    let nonce: String = {
        let bytes: [u8; 18] = rand::random();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    };
    let first_bare = format!("n={name},r={nonce}");
    let server_first = authenticate(conn, format!("n,,{first_bare}").into_bytes())?;
    let server_first = String::from_utf8(server_first.to_vec())?;
    let attr = |k: &str| {
        server_first
            .split(',')
            .find_map(|p| p.strip_prefix(k))
            .map(str::to_string)
            .ok_or_else(|| anyhow!("SCRAM server-first message without {k}"))
    };
    let (server_nonce, salt, iterations) = (attr("r=")?, b64.decode(attr("s=")?)?, attr("i=")?);
    if !server_nonce.starts_with(&nonce) {
        bail!("SCRAM server nonce does not extend ours");
    }
    let iterations: u32 = iterations.parse()?;
    let salted = m.salted_password(password.as_bytes(), &salt, iterations);
    let client_key = m.hmac(&salted, b"Client Key");
    let stored_key = m.hash(&client_key);
    let without_proof = format!("c=biws,r={server_nonce}");
    let auth_message = format!("{first_bare},{server_first},{without_proof}");
    let signature = m.hmac(&stored_key, auth_message.as_bytes());
    let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
    let server_final =
        authenticate(conn, format!("{without_proof},p={}", b64.encode(proof)).into_bytes())?;
    let server_key = m.hmac(&salted, b"Server Key");
    let expected = format!("v={}", b64.encode(m.hmac(&server_key, auth_message.as_bytes())));
    if server_final.as_ref() != expected.as_bytes() {
        bail!("SCRAM server signature does not verify: not the broker that knows this user");
    }
    Ok(())
}
