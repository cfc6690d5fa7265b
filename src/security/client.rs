//! The client side of a broker's connections to other brokers: the rustls client config of
//! the inter-broker listener (its trust store, its key store as the client certificate, the
//! broker's host name checked unless `ssl.endpoint.identification.algorithm` is empty) and
//! the SASL mechanisms as a client runs them (PLAIN, SCRAM-SHA-256/512, RFC 5802), plugged
//! into `protocol::client_auth`.
//!
//! Built once on the main thread at start-up; the configs are shared read-only and each
//! exchange ([`ScramClient`], [`PlainClient`]) lives in one connection on the shard that
//! opened it. Invariants: a SCRAM exchange completes only after the server's signature
//! verified (a broker that does not know the password cannot pose as one); iterations
//! outside Kafka's bounds are refused before any PBKDF2 work; no password is logged.

use std::sync::Arc;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};

use super::tls::{self, TlsError, TlsSettings};
use crate::constants::{SCRAM_ITERATIONS_MAX, SCRAM_ITERATIONS_MIN};
use crate::controller::scram::ScramMechanism;
use crate::protocol::client_auth::{SaslClient, SaslClientFactory, SaslLogin};

/// The rustls client config of a connection to another broker's TLS listener.
/// `verify_hostname`: Kafka's `ssl.endpoint.identification.algorithm=https` (the default);
/// off, the certificate must still chain to the trust store.
pub fn client_config(
    settings: &TlsSettings,
    verify_hostname: bool,
) -> Result<Arc<ClientConfig>, TlsError> {
    let provider = tls::provider(settings)?;
    if settings.truststore.is_none() {
        return Err(TlsError::Pem(
            "a TLS connection to another broker checks its certificate: set \
             ssl.truststore.location (or ssl.truststore.certificates)"
                .into(),
        ));
    }
    let mut roots = RootCertStore::empty();
    for cert in tls::trusted(settings)? {
        roots.add(cert)?;
    }
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
    let verifier: Arc<dyn ServerCertVerifier> =
        if verify_hostname { webpki } else { Arc::new(AnyName(webpki)) };
    let (chain, key) = tls::key_store(settings)?;
    let config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&tls::versions(settings))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(chain, key)?;
    Ok(Arc::new(config))
}

/// A client config that checks the server against the CA certificates of the PEM file `ca`
/// and presents no certificate (the load generator's).
pub fn trust_only_config(ca: &std::path::Path) -> Result<Arc<ClientConfig>, TlsError> {
    let settings = TlsSettings::pem(
        tls::Pem::Inline(String::new()),
        None,
        Some(tls::Pem::File(ca.display().to_string())),
    );
    let mut roots = RootCertStore::empty();
    for cert in tls::trusted(&settings)? {
        roots.add(cert)?;
    }
    let config = ClientConfig::builder_with_provider(tls::provider(&settings)?)
        .with_protocol_versions(&tls::versions(&settings))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The trust store's verdict without the host-name check
/// (`ssl.endpoint.identification.algorithm=`): webpki checks the name last, so a
/// name mismatch means everything else passed.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// A login with `mechanism` (`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`) as `user`; `None`
/// for OAUTHBEARER, whose login is a token, not a password.
#[must_use]
pub fn login(mechanism: super::sasl::Mechanism, user: &str, password: &str) -> Option<SaslLogin> {
    use super::sasl::Mechanism;
    let (user_owned, password) = (user.to_string(), password.to_string());
    let client: SaslClientFactory = match mechanism {
        Mechanism::Plain => Arc::new(move || {
            Box::new(PlainClient { user: user_owned.clone(), password: password.clone() })
        }),
        Mechanism::Scram(m) => Arc::new(move || {
            let nonce = super::scram::server_nonce(&mut rand::thread_rng());
            Box::new(ScramClient::new(m, &user_owned, &password, nonce))
        }),
        Mechanism::OAuthBearer => return None,
    };
    Some(SaslLogin { mechanism: mechanism.name(), user: user.to_string(), client })
}

/// SASL/PLAIN's one message (RFC 4616), no authorization id.
pub struct PlainClient {
    user: String,
    password: String,
}

impl SaslClient for PlainClient {
    fn first(&mut self) -> Vec<u8> {
        format!("\0{}\0{}", self.user, self.password).into_bytes()
    }

    fn step(&mut self, _challenge: &[u8]) -> Result<Option<Vec<u8>>, String> {
        Ok(None)
    }
}

/// Where a SCRAM client stands.
enum ScramState {
    /// client-first sent.
    First,
    /// client-final sent; the server's signature expected.
    Final {
        expected_signature: Vec<u8>,
    },
    Done,
}

/// The client side of SCRAM-SHA-256/512 without channel binding, as Kafka's client runs it.
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    client_first_bare: String,
    client_nonce: String,
    state: ScramState,
}

impl ScramClient {
    /// `nonce`: fresh printable random text.
    #[must_use]
    pub fn new(mechanism: ScramMechanism, user: &str, password: &str, nonce: String) -> Self {
        let name = user.replace('=', "=3D").replace(',', "=2C");
        Self {
            mechanism,
            password: password.to_string(),
            client_first_bare: format!("n={name},r={nonce}"),
            client_nonce: nonce,
            state: ScramState::First,
        }
    }

    fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, String> {
        let text = std::str::from_utf8(server_first).map_err(|_| "server-first is not UTF-8")?;
        let attr = |key: &str| text.split(',').find_map(|p| p.strip_prefix(key));
        let nonce = attr("r=").ok_or("server-first without a nonce")?;
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return Err("server-first's nonce does not extend ours".into());
        }
        let salt = B64.decode(attr("s=").ok_or("server-first without a salt")?);
        let salt = salt.map_err(|_| "server-first's salt is not base64")?;
        let iterations: i32 = attr("i=")
            .and_then(|i| i.parse().ok())
            .ok_or("server-first without a number of iterations")?;
        if !(SCRAM_ITERATIONS_MIN..=SCRAM_ITERATIONS_MAX).contains(&iterations) {
            return Err(format!("{iterations} iterations is outside Kafka's bounds"));
        }
        let m = self.mechanism;
        let salted = m.salted_password(self.password.as_bytes(), &salt, iterations.unsigned_abs());
        let client_key = m.hmac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let signature = m.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
        let server_key = m.hmac(&salted, b"Server Key");
        self.state =
            ScramState::Final { expected_signature: m.hmac(&server_key, auth_message.as_bytes()) };
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }
}

impl SaslClient for ScramClient {
    fn first(&mut self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    fn step(&mut self, challenge: &[u8]) -> Result<Option<Vec<u8>>, String> {
        match std::mem::replace(&mut self.state, ScramState::Done) {
            ScramState::First => self.client_final(challenge).map(Some),
            ScramState::Final { expected_signature } => {
                let text = std::str::from_utf8(challenge).map_err(|_| "server-final not UTF-8")?;
                if let Some(error) = text.strip_prefix("e=") {
                    return Err(format!("the server says {error}"));
                }
                let signature = text
                    .strip_prefix("v=")
                    .and_then(|v| B64.decode(v).ok())
                    .ok_or("server-final without a signature")?;
                if !super::plain::constant_time_eq(&signature, &expected_signature) {
                    return Err("the server's signature does not verify: it does not know \
                                this user's credential"
                        .into());
                }
                Ok(None)
            }
            ScramState::Done => Err("a token after the exchange finished".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::scram::ScramCredential;
    use crate::security::scram::ScramServer;

    /// Our client against our server, for both mechanisms: the right password authenticates
    /// and verifies the server; a wrong one is refused by the server.
    #[test]
    fn scram_client_and_server_agree() {
        for m in ScramMechanism::ALL {
            let cred = ScramCredential::from_password(m, "pw,=x", b"salty", 4096);
            let run = |password: &str| {
                let mut client = ScramClient::new(m, "bro=ker,1", password, "cnonce".into());
                let first = client.first();
                let (server, server_first) = ScramServer::start(m, &first, "snonce", |u| {
                    assert_eq!(u, "bro=ker,1");
                    Some(cred.clone())
                })
                .expect("start");
                let last = client.step(&server_first).expect("client-final").expect("token");
                let (_, server_final) = server.finish(&last).ok()?;
                Some(client.step(&server_final))
            };
            assert_eq!(run("pw,=x"), Some(Ok(None)));
            assert_eq!(run("wrong"), None);
        }
    }

    #[test]
    fn a_forged_server_final_or_bad_server_first_is_refused() {
        let m = ScramMechanism::Sha256;
        let mut client = ScramClient::new(m, "u", "pw", "abc".into());
        client.first();
        assert!(client.step(b"r=xyz,s=c2FsdA==,i=4096").is_err(), "nonce not extended");
        let mut client = ScramClient::new(m, "u", "pw", "abc".into());
        assert!(client.step(b"r=abcd,s=c2FsdA==,i=99999999").is_err(), "iterations");
        let mut client = ScramClient::new(m, "u", "pw", "abc".into());
        client.step(b"r=abcd,s=c2FsdA==,i=4096").expect("final");
        assert!(client.step(b"v=AAAA").is_err(), "wrong signature");
        let mut client = ScramClient::new(m, "u", "pw", "abc".into());
        client.step(b"r=abcd,s=c2FsdA==,i=4096").expect("final");
        assert!(client.step(b"e=invalid-proof").is_err());
    }

    #[test]
    fn plain_sends_user_and_password() {
        let mut c = PlainClient { user: "a".into(), password: "b".into() };
        assert_eq!(c.first(), b"\0a\0b");
        assert_eq!(c.step(b""), Ok(None));
    }
}
