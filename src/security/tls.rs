//! TLS for a Kafka listener with rustls (ring provider; no OpenSSL): the server config built
//! from Kafka's `ssl.*` settings (PEM key stores, KIP-651), and the principal a client
//! certificate authenticates (`User:<subject DN>`, Kafka's default mapping).
//!
//! The config is built once on the main thread at start-up (a bad key or certificate fails
//! the start) and shared read-only; each handshake and all record encryption run on the
//! shard that accepted the connection (`server::connection`). Invariant: a listener with
//! `ssl.client.auth=required` only completes handshakes with a certificate that chains to its
//! trust store.

use std::io::BufReader;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

/// `ssl.client.auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

/// Where PEM text comes from: a file (`*.location`) or the setting itself (KIP-651).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pem {
    File(String),
    Inline(String),
}

/// One listener's TLS settings, as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSettings {
    /// The certificate chain (and, from a keystore file, the key too).
    pub keystore: Pem,
    /// `ssl.keystore.key` when the chain is inline; `None`: the key is in `keystore`.
    pub key: Option<String>,
    pub truststore: Option<Pem>,
    pub client_auth: ClientAuth,
    /// `ssl.enabled.protocols`: TLSv1.2 and/or TLSv1.3.
    pub tls12: bool,
    pub tls13: bool,
}

/// Why a listener's TLS settings cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} {path}: {source}")]
    Read { what: &'static str, path: String, source: std::io::Error },
    #[error("{0}")]
    Pem(String),
    #[error("TLS configuration refused: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("client certificate verifier: {0}")]
    Verifier(String),
}

fn pem_text(pem: &Pem, what: &'static str) -> Result<String, TlsError> {
    match pem {
        Pem::Inline(text) => Ok(text.clone()),
        Pem::File(path) => std::fs::read_to_string(path).map_err(|source| TlsError::Read {
            what,
            path: path.clone(),
            source,
        }),
    }
}

/// Every certificate in PEM text.
pub fn certificates(text: &str, what: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = rustls_pemfile::certs(&mut BufReader::new(text.as_bytes()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem(format!("{what}: bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(TlsError::Pem(format!("{what}: no certificate in it")));
    }
    Ok(certs)
}

/// The one private key in PEM text (PKCS#8, PKCS#1 or SEC1; not encrypted).
pub fn private_key(text: &str, what: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
    rustls_pemfile::private_key(&mut BufReader::new(text.as_bytes()))
        .map_err(|e| TlsError::Pem(format!("{what}: bad PEM: {e}")))?
        .ok_or_else(|| {
            TlsError::Pem(format!("{what}: no unencrypted private key (PKCS#8, PKCS#1 or SEC1)"))
        })
}

/// The crypto provider of a listener or client.
pub fn provider(_settings: &TlsSettings) -> Result<Arc<CryptoProvider>, TlsError> {
    // ring, not aws-lc-rs (rustls' default, which needs cmake and a C toolchain for its
    // build); rustls deprecates ring's provider only for lacking post-quantum key exchange.
    #[allow(deprecated)]
    let provider = rustls::crypto::ring::default_provider();
    Ok(Arc::new(provider))
}

/// `ssl.enabled.protocols` as rustls versions.
#[must_use]
pub fn versions(settings: &TlsSettings) -> Vec<&'static rustls::SupportedProtocolVersion> {
    let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    if settings.tls13 {
        versions.push(&rustls::version::TLS13);
    }
    if settings.tls12 {
        versions.push(&rustls::version::TLS12);
    }
    versions
}

/// The key store: the certificate chain and its private key.
pub fn key_store(
    settings: &TlsSettings,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let chain_text = pem_text(&settings.keystore, "ssl.keystore.location")?;
    let chain = certificates(&chain_text, "ssl.keystore")?;
    let key = private_key(settings.key.as_deref().unwrap_or(&chain_text), "ssl.keystore")?;
    Ok((chain, key))
}

/// The trust store's certificates.
pub fn trusted(trust: &Pem) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    certificates(&pem_text(trust, "ssl.truststore.location")?, "truststore")
}

/// Builds the rustls server config of a listener.
pub fn server_config(settings: &TlsSettings) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = provider(settings)?;
    let (chain, key) = key_store(settings)?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions(settings))?;
    let builder = match (settings.client_auth, &settings.truststore) {
        (ClientAuth::None, _) => builder.with_no_client_auth(),
        (_, None) => {
            return Err(TlsError::Pem(
                "ssl.client.auth asks for client certificates: set ssl.truststore.location \
                 (or ssl.truststore.certificates)"
                    .into(),
            ))
        }
        (auth, Some(trust)) => {
            let mut roots = RootCertStore::empty();
            for cert in trusted(trust)? {
                roots.add(cert)?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier.build().map_err(|e| TlsError::Verifier(e.to_string()))?,
            )
        }
    };
    Ok(Arc::new(builder.with_single_cert(chain, key)?))
}

/// Kafka's default principal of a client certificate: its subject DN as Java's
/// `X500Principal.getName()` (RFC 2253) gives it, most specific RDN first, e.g.
/// `CN=alice,OU=eng,O=Example`. `None` when the certificate cannot be parsed.
#[must_use]
pub fn subject_dn(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let registry = x509_parser::objects::oid_registry();
    let subject: Vec<_> = parsed.subject().iter().collect();
    let rdns: Vec<String> = subject
        .into_iter()
        .rev()
        .map(|rdn| {
            rdn.iter()
                .map(|attr| {
                    let oid = attr.attr_type();
                    let name = x509_parser::objects::oid2abbrev(oid, registry)
                        .map_or_else(|_| oid.to_id_string(), str::to_string);
                    let value = attr.as_str().map_or_else(|_| String::new(), escape_rfc2253);
                    format!("{name}={value}")
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    Some(rdns.join(","))
}

/// RFC 2253 escaping of an attribute value.
fn escape_rfc2253(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for (i, c) in value.chars().enumerate() {
        let edge = (i == 0 && (c == ' ' || c == '#')) || (i + 1 == value.len() && c == ' ');
        if edge || matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca_and_leaf() -> (String, String, String) {
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut ca_params = rcgen::CertificateParams::new(Vec::new()).expect("params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).expect("ca");
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(vec!["localhost".into()]).expect("params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(rcgen::DnType::OrganizationName, "Example, Inc");
        params.distinguished_name.push(rcgen::DnType::CommonName, "alice");
        let leaf = params.signed_by(&key, &ca, &ca_key).expect("leaf");
        (ca.pem(), leaf.pem(), key.serialize_pem())
    }

    fn settings(chain: &str, key: &str) -> TlsSettings {
        TlsSettings {
            keystore: Pem::Inline(chain.into()),
            key: Some(key.into()),
            truststore: None,
            client_auth: ClientAuth::None,
            tls12: true,
            tls13: true,
        }
    }

    #[test]
    fn inline_pem_and_a_keystore_file_both_build() {
        let (ca, chain, key) = ca_and_leaf();
        server_config(&settings(&chain, &key)).expect("inline");
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("broker.pem");
        std::fs::write(&path, format!("{key}{chain}")).expect("write");
        let mut s = settings("", "");
        s.keystore = Pem::File(path.display().to_string());
        s.key = None;
        s.client_auth = ClientAuth::Required;
        s.truststore = Some(Pem::Inline(ca));
        server_config(&s).expect("file with mutual TLS");
    }

    #[test]
    fn bad_material_is_a_clear_error() {
        let (_, chain, key) = ca_and_leaf();
        assert!(server_config(&settings("garbage", &key)).is_err());
        assert!(server_config(&settings(&chain, "garbage")).is_err());
        let mut s = settings(&chain, &key);
        s.client_auth = ClientAuth::Required;
        let err = server_config(&s).expect_err("no truststore");
        assert!(err.to_string().contains("ssl.truststore.location"), "{err}");
        s.keystore = Pem::File("/nonexistent/x.pem".into());
        assert!(server_config(&s).is_err());
    }

    #[test]
    fn the_principal_is_the_subject_dn_most_specific_first() {
        let (_, chain, _) = ca_and_leaf();
        let cert = &certificates(&chain, "t").expect("cert")[0];
        assert_eq!(subject_dn(cert).as_deref(), Some("CN=alice,O=Example\\, Inc"));
    }
}
