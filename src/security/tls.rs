//! TLS for a Kafka listener with rustls (ring provider; no OpenSSL): the server config built
//! from Kafka's `ssl.*` settings (PEM key stores, KIP-651, and password-protected PKCS12 ones
//! through `p12-keystore`; `ssl.enabled.protocols`; `ssl.cipher.suites` by their IANA names),
//! and the subject DN of a client certificate, which `super::principal` maps to the principal.
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

/// `ssl.keystore.type` / `ssl.truststore.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreType {
    Pem,
    /// A PKCS12 file (`Pem::File` only), opened with the store's password.
    Pkcs12,
}

/// One listener's TLS settings, as given.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// The certificate chain (and, from a keystore file, the key too).
    pub keystore: Pem,
    /// `ssl.keystore.key` when the chain is inline; `None`: the key is in `keystore`.
    pub key: Option<String>,
    pub keystore_type: StoreType,
    /// `ssl.keystore.password` (PKCS12; falls back to `ssl.key.password`).
    pub keystore_password: Option<String>,
    pub truststore: Option<Pem>,
    pub truststore_type: StoreType,
    /// `ssl.truststore.password` (PKCS12: without it the file's integrity is not checked,
    /// as in Kafka, when the file has no MAC; a file with a MAC needs it).
    pub truststore_password: Option<String>,
    pub client_auth: ClientAuth,
    /// `ssl.enabled.protocols`: TLSv1.2 and/or TLSv1.3.
    pub tls12: bool,
    pub tls13: bool,
    /// `ssl.cipher.suites` (IANA names); empty: rustls' defaults (all AEAD, forward secret).
    pub cipher_suites: Vec<String>,
}

impl TlsSettings {
    /// PEM material with every other setting at its default.
    #[must_use]
    pub fn pem(keystore: Pem, key: Option<String>, truststore: Option<Pem>) -> Self {
        Self {
            keystore,
            key,
            keystore_type: StoreType::Pem,
            keystore_password: None,
            truststore,
            truststore_type: StoreType::Pem,
            truststore_password: None,
            client_auth: ClientAuth::None,
            tls12: true,
            tls13: true,
            cipher_suites: Vec::new(),
        }
    }
}

/// Never the key nor a password.
impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let location = |p: &Pem| match p {
            Pem::File(path) => path.clone(),
            Pem::Inline(_) => "(inline)".into(),
        };
        f.debug_struct("TlsSettings")
            .field("keystore", &location(&self.keystore))
            .field("keystore_type", &self.keystore_type)
            .field("truststore", &self.truststore.as_ref().map(location))
            .field("truststore_type", &self.truststore_type)
            .field("client_auth", &self.client_auth)
            .field("tls12", &self.tls12)
            .field("tls13", &self.tls13)
            .field("cipher_suites", &self.cipher_suites)
            .finish_non_exhaustive()
    }
}

/// `ssl.cipher.suites` names (IANA's, as Java and Kafka spell them; rustls' `TLS13_` spelling
/// of the TLS 1.3 ones too) of the suites rustls' ring provider offers.
pub const CIPHER_SUITES: &[(&str, rustls::CipherSuite)] = {
    use rustls::CipherSuite as C;
    &[
        ("TLS_AES_256_GCM_SHA384", C::TLS13_AES_256_GCM_SHA384),
        ("TLS_AES_128_GCM_SHA256", C::TLS13_AES_128_GCM_SHA256),
        ("TLS_CHACHA20_POLY1305_SHA256", C::TLS13_CHACHA20_POLY1305_SHA256),
        ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", C::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384),
        ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
        (
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
            C::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
        ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", C::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
        ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
        (
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
            C::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
    ]
};

/// The rustls suites named by `names`, in that order (a client's preference order; none:
/// rustls' defaults). An unknown name, or an enabled protocol left without a suite, is an
/// error naming `ssl.cipher.suites`.
pub fn cipher_suites(
    names: &[String],
    tls12: bool,
    tls13: bool,
) -> Result<Vec<rustls::SupportedCipherSuite>, String> {
    #[allow(deprecated)]
    let available = rustls::crypto::ring::default_provider().cipher_suites;
    if names.is_empty() {
        return Ok(available);
    }
    let mut out: Vec<rustls::SupportedCipherSuite> = Vec::new();
    for name in names {
        let upper = name.trim().to_ascii_uppercase();
        let wanted = upper.replacen("TLS13_", "TLS_", 1);
        let suite = CIPHER_SUITES.iter().find(|(n, _)| *n == wanted).map(|(_, s)| *s);
        let found = suite.and_then(|s| available.iter().find(|a| a.suite() == s));
        match found {
            Some(s) if !out.iter().any(|o| o.suite() == s.suite()) => out.push(*s),
            Some(_) => {}
            None => {
                let known: Vec<&str> = CIPHER_SUITES.iter().map(|(n, _)| *n).collect();
                return Err(format!(
                    "ssl.cipher.suites: {name} is not a cipher suite Shardlog offers (rustls: \
                     AEAD with forward secrecy only); use some of {}",
                    known.join(", ")
                ));
            }
        }
    }
    let is13 =
        |s: &rustls::SupportedCipherSuite| matches!(s, rustls::SupportedCipherSuite::Tls13(_));
    for (enabled, v13, version) in [(tls12, false, "TLSv1.2"), (tls13, true, "TLSv1.3")] {
        if enabled && !out.iter().any(|s| is13(s) == v13) {
            return Err(format!(
                "ssl.cipher.suites lists no {version} suite, but ssl.enabled.protocols enables \
                 {version}"
            ));
        }
    }
    Ok(out)
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

/// The crypto provider of a listener or client: ring's, with the cipher suites of
/// `ssl.cipher.suites` when given.
pub fn provider(settings: &TlsSettings) -> Result<Arc<CryptoProvider>, TlsError> {
    // ring, not aws-lc-rs (rustls' default, which needs cmake and a C toolchain for its
    // build); rustls deprecates ring's provider only for lacking post-quantum key exchange.
    #[allow(deprecated)]
    let mut provider = rustls::crypto::ring::default_provider();
    if !settings.tls12 && !settings.tls13 {
        return Err(TlsError::Pem(
            "ssl.enabled.protocols enables neither TLSv1.2 nor TLSv1.3".into(),
        ));
    }
    if !settings.cipher_suites.is_empty() {
        provider.cipher_suites =
            cipher_suites(&settings.cipher_suites, settings.tls12, settings.tls13)
                .map_err(TlsError::Pem)?;
    }
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
    if settings.keystore_type == StoreType::Pkcs12 {
        let bytes = store_bytes(&settings.keystore, "ssl.keystore")?;
        return pkcs12_key_store(&bytes, settings.keystore_password.as_deref());
    }
    let chain_text = pem_text(&settings.keystore, "ssl.keystore.location")?;
    let chain = certificates(&chain_text, "ssl.keystore")?;
    let key = private_key(settings.key.as_deref().unwrap_or(&chain_text), "ssl.keystore")?;
    Ok((chain, key))
}

/// The trust store's certificates.
pub fn trusted(settings: &TlsSettings) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let Some(trust) = &settings.truststore else { return Ok(Vec::new()) };
    if settings.truststore_type == StoreType::Pkcs12 {
        let bytes = store_bytes(trust, "ssl.truststore")?;
        return pkcs12_trusted(&bytes, settings.truststore_password.as_deref());
    }
    certificates(&pem_text(trust, "ssl.truststore.location")?, "truststore")
}

/// A PKCS12 store's file (PKCS12 is binary: never inline).
fn store_bytes(store: &Pem, what: &'static str) -> Result<Vec<u8>, TlsError> {
    let Pem::File(path) = store else {
        return Err(TlsError::Pem(format!(
            "{what}.type=PKCS12 needs a file ({what}.location), not inline PEM"
        )));
    };
    std::fs::read(path).map_err(|source| TlsError::Read {
        what: if what == "ssl.keystore" {
            "ssl.keystore.location"
        } else {
            "ssl.truststore.location"
        },
        path: path.clone(),
        source,
    })
}

/// Opens PKCS12 bytes with `password` (none: the empty one). A wrong password fails the MAC
/// check (or the decryption) and says so.
fn pkcs12(
    bytes: &[u8],
    password: Option<&str>,
    what: &'static str,
) -> Result<p12_keystore::KeyStore, TlsError> {
    p12_keystore::KeyStore::from_pkcs12(bytes, password.unwrap_or("")).map_err(|e| {
        TlsError::Pem(format!(
            "{what}.location: cannot open it as PKCS12 (wrong {what}.password, or not a \
             PKCS12 file?): {e}"
        ))
    })
}

/// The first private key of a PKCS12 key store and its certificate chain.
pub fn pkcs12_key_store(
    bytes: &[u8],
    password: Option<&str>,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let store = pkcs12(bytes, password, "ssl.keystore")?;
    let (_, entry) = store.private_key_chain().ok_or_else(|| {
        TlsError::Pem("ssl.keystore.location: the PKCS12 key store holds no private key".into())
    })?;
    let chain: Vec<CertificateDer<'static>> =
        entry.chain().iter().map(|c| CertificateDer::from(c.as_der().to_vec())).collect();
    if chain.is_empty() {
        return Err(TlsError::Pem(
            "ssl.keystore.location: the PKCS12 key has no certificate chain".into(),
        ));
    }
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(entry.key().to_vec());
    Ok((chain, PrivateKeyDer::Pkcs8(key)))
}

/// Every certificate of a PKCS12 trust store (trusted-certificate entries, and chains).
pub fn pkcs12_trusted(
    bytes: &[u8],
    password: Option<&str>,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let store = pkcs12(bytes, password, "ssl.truststore")?;
    let certs: Vec<CertificateDer<'static>> = store
        .entries()
        .flat_map(|(_, entry)| match entry {
            p12_keystore::KeyStoreEntry::Certificate(c) => vec![c.as_der().to_vec()],
            p12_keystore::KeyStoreEntry::PrivateKeyChain(k) => {
                k.chain().iter().map(|c| c.as_der().to_vec()).collect()
            }
            p12_keystore::KeyStoreEntry::Secret(_) => Vec::new(),
        })
        .map(CertificateDer::from)
        .collect();
    if certs.is_empty() {
        return Err(TlsError::Pem(
            "ssl.truststore.location: the PKCS12 trust store holds no certificate".into(),
        ));
    }
    Ok(certs)
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
        (auth, Some(_)) => {
            let mut roots = RootCertStore::empty();
            for cert in trusted(settings)? {
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
        TlsSettings::pem(Pem::Inline(chain.into()), Some(key.into()), None)
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

    /// A PKCS12 file of the leaf's key and chain (and one of the CA alone), written with
    /// `algorithm`; returns (key store path, trust store path).
    fn pkcs12_files(
        dir: &std::path::Path,
        algorithm: p12_keystore::EncryptionAlgorithm,
    ) -> (String, String) {
        use p12_keystore::{Certificate, KeyStore, KeyStoreEntry, PrivateKeyChain};
        let (ca, chain, key) = ca_and_leaf();
        let der = |pem: &str| certificates(pem, "t").expect("cert")[0].as_ref().to_vec();
        let key_der = match private_key(&key, "t").expect("key") {
            PrivateKeyDer::Pkcs8(k) => k.secret_pkcs8_der().to_vec(),
            _ => unreachable!("rcgen writes PKCS#8"),
        };
        let leaf = Certificate::from_der(&der(&chain)).expect("leaf");
        let ca_cert = Certificate::from_der(&der(&ca)).expect("ca");
        let mut ks = KeyStore::new();
        let entry = PrivateKeyChain::new(key_der, b"id", vec![leaf, ca_cert.clone()]);
        ks.add_entry("broker", KeyStoreEntry::PrivateKeyChain(entry));
        let mut ts = KeyStore::new();
        ts.add_entry("ca", KeyStoreEntry::Certificate(ca_cert));
        let write = |store: &KeyStore, name: &str, password: &str| {
            let bytes =
                store.writer(password).encryption_algorithm(algorithm).write().expect("p12");
            let path = dir.join(name);
            std::fs::write(&path, bytes).expect("write");
            path.display().to_string()
        };
        (write(&ks, "broker.p12", "ks-secret"), write(&ts, "trust.p12", "ts-secret"))
    }

    fn pkcs12_settings(ks: &str, ts: &str) -> TlsSettings {
        let mut s = TlsSettings::pem(Pem::File(ks.into()), None, Some(Pem::File(ts.into())));
        s.keystore_type = StoreType::Pkcs12;
        s.keystore_password = Some("ks-secret".into());
        s.truststore_type = StoreType::Pkcs12;
        s.truststore_password = Some("ts-secret".into());
        s.client_auth = ClientAuth::Required;
        s
    }

    /// PKCS12 stores (AES as OpenSSL 3 and Java write them, 3DES as older ones do) serve
    /// mutual TLS; a wrong password is an error naming the setting, and no password shows in
    /// the settings' Debug.
    #[test]
    fn pkcs12_key_and_trust_stores() {
        use p12_keystore::EncryptionAlgorithm as A;
        for algorithm in [A::PbeWithHmacSha256AndAes256, A::PbeWithShaAnd3KeyTripleDesCbc] {
            let dir = tempfile::tempdir().expect("dir");
            let (ks, ts) = pkcs12_files(dir.path(), algorithm);
            let s = pkcs12_settings(&ks, &ts);
            server_config(&s).expect("server");
            crate::security::client::client_config(&s, true).expect("client");
            assert_eq!(key_store(&s).expect("chain").0.len(), 2);
            assert!(!format!("{s:?}").contains("secret"), "{s:?}");
            let mut wrong = s.clone();
            wrong.keystore_password = Some("nope".into());
            let err = server_config(&wrong).expect_err("wrong password").to_string();
            assert!(err.contains("ssl.keystore.password"), "{err}");
            let mut wrong = s.clone();
            wrong.truststore_password = None;
            let err = server_config(&wrong).expect_err("no trust password").to_string();
            assert!(err.contains("ssl.truststore.password"), "{err}");
        }
        let mut inline = settings("x", "y");
        inline.keystore_type = StoreType::Pkcs12;
        assert!(server_config(&inline).is_err(), "PKCS12 inline");
    }

    #[test]
    fn cipher_suites_by_iana_name() {
        let names = |list: &[&str]| list.iter().map(|n| (*n).to_string()).collect::<Vec<_>>();
        let picked = cipher_suites(
            &names(&["TLS_AES_256_GCM_SHA384", "tls_ecdhe_ecdsa_with_aes_128_gcm_sha256"]),
            true,
            true,
        )
        .expect("known");
        assert_eq!(picked.len(), 2);
        assert_eq!(picked[0].suite(), rustls::CipherSuite::TLS13_AES_256_GCM_SHA384);
        let alias = cipher_suites(&names(&["TLS13_AES_128_GCM_SHA256"]), false, true);
        assert_eq!(alias.expect("rustls spelling").len(), 1);
        let unknown = cipher_suites(&names(&["TLS_RSA_WITH_AES_128_CBC_SHA"]), true, true);
        assert!(unknown.expect_err("unknown").contains("ssl.cipher.suites"));
        let only13 = cipher_suites(&names(&["TLS_AES_128_GCM_SHA256"]), true, true);
        assert!(only13.expect_err("no 1.2 suite").contains("TLSv1.2"));
        assert_eq!(cipher_suites(&[], true, true).expect("defaults").len(), 9);
        let (_, chain, key) = ca_and_leaf();
        let mut s = settings(&chain, &key);
        s.tls12 = false;
        s.cipher_suites = names(&["TLS_CHACHA20_POLY1305_SHA256"]);
        server_config(&s).expect("TLS 1.3 with one suite");
    }
}
