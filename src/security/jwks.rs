//! The verification keys of OAUTHBEARER's signed tokens: a JSON Web Key Set (RFC 7517) read
//! from the file `sasl.oauthbearer.jwks.endpoint.url` names (`file:` URL), its RSA and P-256
//! keys by `kid`, and the signature checks (RS256, RS384, RS512, ES256) over `ring`, the
//! crypto library rustls already brings (no OpenSSL).
//!
//! What it owns: a listener's key set, loaded on the main thread at start-up (a file that
//! cannot be read or holds no usable key fails the start), then shared read-only by every
//! shard and reloaded when the file's modification time changes, as Kafka's `CachedFile`
//! does for a JWKS file. Bounded: the file is looked at (one `stat`) at most once per
//! `JWKS_FILE_CHECK_INTERVAL_MS`, at most `JWKS_FILE_BYTES_MAX` bytes are read and at most
//! `JWKS_KEYS_MAX` keys kept. Invariant: a reload that fails (unreadable, bad JSON, no usable
//! key) never replaces a working key set; it is logged and the previous keys keep serving.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use base64::Engine as _;
use parking_lot::Mutex;
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};

use crate::constants::{JWKS_FILE_BYTES_MAX, JWKS_FILE_CHECK_INTERVAL_MS, JWKS_KEYS_MAX};

/// The signature algorithms served (`alg` of a token's header). `none` is never accepted here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Rs256,
    Rs384,
    Rs512,
    Es256,
}

impl Algorithm {
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "RS256" => Some(Self::Rs256),
            "RS384" => Some(Self::Rs384),
            "RS512" => Some(Self::Rs512),
            "ES256" => Some(Self::Es256),
            _ => None,
        }
    }

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Rs256 => "RS256",
            Self::Rs384 => "RS384",
            Self::Rs512 => "RS512",
            Self::Es256 => "ES256",
        }
    }
}

/// One verification key.
#[derive(Clone, Debug, PartialEq, Eq)]
enum KeyMaterial {
    /// RSA modulus and exponent, big-endian without leading zeros.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// A P-256 point, uncompressed (`04 || x || y`).
    P256(Vec<u8>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Jwk {
    kid: Option<String>,
    /// The JWK's own `alg`, when it names one: then only that algorithm may use it.
    alg: Option<String>,
    material: KeyMaterial,
}

/// Why a key set cannot be used.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum JwksError {
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("{0} is larger than {JWKS_FILE_BYTES_MAX} bytes")]
    TooLarge(String),
    #[error("not a JSON Web Key Set: {0}")]
    Format(String),
    #[error("no RSA or P-256 signature key in the key set ({0} keys of other kinds skipped)")]
    NoUsableKey(usize),
}

/// Why a signature does not verify.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("no key with kid {0:?} in the JWKS")]
    UnknownKid(String),
    #[error("the token names no kid and the JWKS has {0} keys for {1}")]
    NoKid(usize, &'static str),
    #[error("the key {kid:?} is not a {alg} key")]
    WrongKeyType { kid: String, alg: &'static str },
    #[error("JWS signature is invalid ({0})")]
    BadSignature(&'static str),
}

/// A parsed key set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Jwks {
    keys: Vec<Jwk>,
}

impl Jwks {
    /// Parses a JWKS document (`{"keys": [...]}`), keeping RSA and P-256 signature keys and
    /// skipping others (encryption keys, other curves), as jose4j does.
    pub fn parse(text: &str) -> Result<Self, JwksError> {
        let doc: serde_json::Value =
            serde_json::from_str(text).map_err(|e| JwksError::Format(e.to_string()))?;
        let list = doc
            .get("keys")
            .and_then(serde_json::Value::as_array)
            .ok_or_else(|| JwksError::Format("no \"keys\" array".into()))?;
        let mut keys = Vec::new();
        let mut skipped = 0;
        for entry in list {
            match parse_key(entry)? {
                Some(key) if keys.len() < JWKS_KEYS_MAX => keys.push(key),
                Some(_) => {
                    return Err(JwksError::Format(format!("more than {JWKS_KEYS_MAX} keys")))
                }
                None => skipped += 1,
            }
        }
        if keys.is_empty() {
            return Err(JwksError::NoUsableKey(skipped));
        }
        Ok(Self { keys })
    }

    /// How many keys it holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Checks `signature` over `message` with the key `kid` names (or, without a kid, the only
    /// key fit for `alg`, as jose4j's resolver picks it).
    pub fn verify(
        &self,
        alg: Algorithm,
        kid: Option<&str>,
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), KeyError> {
        let fits = |k: &&Jwk| {
            k.alg.as_deref().is_none_or(|a| a == alg.name())
                && matches!(
                    (&k.material, alg),
                    (
                        KeyMaterial::Rsa { .. },
                        Algorithm::Rs256 | Algorithm::Rs384 | Algorithm::Rs512
                    ) | (KeyMaterial::P256(_), Algorithm::Es256)
                )
        };
        let key = match kid {
            Some(kid) => {
                let key = self
                    .keys
                    .iter()
                    .find(|k| k.kid.as_deref() == Some(kid))
                    .ok_or_else(|| KeyError::UnknownKid(kid.to_string()))?;
                if !fits(&key) {
                    return Err(KeyError::WrongKeyType { kid: kid.to_string(), alg: alg.name() });
                }
                key
            }
            None => {
                let mut candidates = self.keys.iter().filter(fits);
                match (candidates.next(), candidates.count()) {
                    (Some(only), 0) => only,
                    (first, more) => {
                        return Err(KeyError::NoKid(
                            usize::from(first.is_some()) + more,
                            alg.name(),
                        ))
                    }
                }
            }
        };
        verify_with(&key.material, alg, message, signature)
    }
}

fn verify_with(
    material: &KeyMaterial,
    alg: Algorithm,
    message: &[u8],
    sig: &[u8],
) -> Result<(), KeyError> {
    let checked = match (material, alg) {
        (KeyMaterial::Rsa { n, e }, _) => {
            let params = match alg {
                Algorithm::Rs256 => &signature::RSA_PKCS1_2048_8192_SHA256,
                Algorithm::Rs384 => &signature::RSA_PKCS1_2048_8192_SHA384,
                Algorithm::Rs512 => &signature::RSA_PKCS1_2048_8192_SHA512,
                Algorithm::Es256 => return Err(KeyError::BadSignature("an RSA key for ES256")),
            };
            RsaPublicKeyComponents { n, e }.verify(params, message, sig)
        }
        (KeyMaterial::P256(point), Algorithm::Es256) => {
            UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point).verify(message, sig)
        }
        (KeyMaterial::P256(_), _) => return Err(KeyError::BadSignature("an EC key for RSA")),
    };
    checked.map_err(|_| KeyError::BadSignature(alg.name()))
}

/// One JWK: `Ok(None)` for a kind not served (skipped), `Err` for a malformed one of a kind
/// served.
fn parse_key(entry: &serde_json::Value) -> Result<Option<Jwk>, JwksError> {
    let text = |name: &str| entry.get(name).and_then(serde_json::Value::as_str);
    if text("use").is_some_and(|u| u != "sig") {
        return Ok(None);
    }
    let kid = text("kid").map(str::to_string);
    let bytes = |name: &str| -> Result<Vec<u8>, JwksError> {
        let value = text(name).ok_or_else(|| {
            JwksError::Format(format!("key {:?} has no \"{name}\"", kid.as_deref().unwrap_or("")))
        })?;
        base64url(value).ok_or_else(|| {
            JwksError::Format(format!("key {:?}: \"{name}\" is not base64url", kid.as_deref()))
        })
    };
    let material = match (text("kty"), text("crv")) {
        (Some("RSA"), _) => {
            let (n, e) = (strip_zeros(bytes("n")?), strip_zeros(bytes("e")?));
            // ring verifies 2048- to 8192-bit moduli; a smaller one could never verify.
            if !(256..=1024).contains(&n.len()) || e.is_empty() || e.len() > 8 {
                return Err(JwksError::Format(format!(
                    "key {kid:?}: RSA modulus of {} bits (2048 to 8192 served)",
                    n.len() * 8
                )));
            }
            KeyMaterial::Rsa { n, e }
        }
        (Some("EC"), Some("P-256")) => {
            let (x, y) = (bytes("x")?, bytes("y")?);
            if x.len() != 32 || y.len() != 32 {
                return Err(JwksError::Format(format!("key {kid:?}: P-256 x and y are 32 bytes")));
            }
            let mut point = Vec::with_capacity(65);
            point.push(4);
            point.extend_from_slice(&x);
            point.extend_from_slice(&y);
            KeyMaterial::P256(point)
        }
        _ => return Ok(None),
    };
    Ok(Some(Jwk { kid, alg: text("alg").map(str::to_string), material }))
}

fn strip_zeros(mut bytes: Vec<u8>) -> Vec<u8> {
    let zeros = bytes.iter().take_while(|b| **b == 0).count();
    bytes.drain(..zeros);
    bytes
}

/// Base64url without padding (RFC 7515), also accepting padding and the standard alphabet:
/// key sets and tokens from the field use both.
#[must_use]
pub fn base64url(text: &str) -> Option<Vec<u8>> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurposeConfig =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    const URL: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, LENIENT);
    const STD: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, LENIENT);
    URL.decode(text).or_else(|_| STD.decode(text)).ok()
}

/// A JWKS file and the keys last loaded from it.
#[derive(Debug)]
pub struct JwksFile {
    path: PathBuf,
    state: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    keys: Arc<Jwks>,
    mtime: Option<SystemTime>,
    /// Wall-clock ms of the last look at the file.
    checked_ms: i64,
}

impl JwksFile {
    /// Loads `path` (at start-up: an error fails the start).
    pub fn open(path: &Path, now_ms: i64) -> Result<Self, JwksError> {
        let (keys, mtime) = read(path)?;
        let state = Mutex::new(Loaded { keys: Arc::new(keys), mtime, checked_ms: now_ms });
        Ok(Self { path: path.to_path_buf(), state })
    }

    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The keys in force at `now_ms`: reloaded first if the file's modification time changed
    /// since it was last read (looked at once per `JWKS_FILE_CHECK_INTERVAL_MS` at most).
    pub fn keys(&self, now_ms: i64) -> Arc<Jwks> {
        let mut state = self.state.lock();
        let interval_ms = i64::try_from(JWKS_FILE_CHECK_INTERVAL_MS).unwrap_or(i64::MAX);
        if now_ms.saturating_sub(state.checked_ms) < interval_ms {
            return Arc::clone(&state.keys);
        }
        state.checked_ms = now_ms;
        let mtime = std::fs::metadata(&self.path).and_then(|m| m.modified()).ok();
        if mtime.is_some() && mtime != state.mtime {
            match read(&self.path) {
                Ok((keys, mtime)) => {
                    tracing::info!(path = %self.path.display(), keys = keys.len(), "JWKS reloaded");
                    state.keys = Arc::new(keys);
                    state.mtime = mtime;
                }
                Err(e) => {
                    // Not retried until the file changes again: one line per bad version.
                    state.mtime = mtime;
                    tracing::warn!(path = %self.path.display(), "JWKS not reloaded, the keys loaded before stay: {e}");
                }
            }
        }
        Arc::clone(&state.keys)
    }
}

fn read(path: &Path) -> Result<(Jwks, Option<SystemTime>), JwksError> {
    use std::io::Read as _;
    let shown = path.display().to_string();
    let failed = |e: std::io::Error| JwksError::Read { path: shown.clone(), reason: e.to_string() };
    let file = std::fs::File::open(path).map_err(failed)?;
    let meta = file.metadata().map_err(failed)?;
    let limit = u64::try_from(JWKS_FILE_BYTES_MAX).unwrap_or(u64::MAX);
    if meta.len() > limit {
        return Err(JwksError::TooLarge(shown));
    }
    let mut text = String::new();
    file.take(limit + 1).read_to_string(&mut text).map_err(failed)?;
    if text.len() > JWKS_FILE_BYTES_MAX {
        return Err(JwksError::TooLarge(shown));
    }
    Ok((Jwks::parse(&text)?, meta.modified().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A P-256 key pair made by ring, and its JWK.
    fn p256(kid: &str) -> (signature::EcdsaKeyPair, String) {
        use ring::signature::KeyPair as _;
        let rng = ring::rand::SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = signature::EcdsaKeyPair::generate_pkcs8(alg, &rng).expect("generate");
        let pair = signature::EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).expect("pair");
        let point = pair.public_key().as_ref().to_vec();
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let jwk = format!(
            r#"{{"kty":"EC","crv":"P-256","kid":"{kid}","use":"sig","x":"{}","y":"{}"}}"#,
            b64(&point[1..33]),
            b64(&point[33..])
        );
        (pair, jwk)
    }

    fn sign(pair: &signature::EcdsaKeyPair, message: &[u8]) -> Vec<u8> {
        let rng = ring::rand::SystemRandom::new();
        pair.sign(&rng, message).expect("sign").as_ref().to_vec()
    }

    #[test]
    fn es256_by_kid_and_the_only_key_without_one() {
        let (a, jwk_a) = p256("a");
        let (b, jwk_b) = p256("b");
        let set = Jwks::parse(&format!(r#"{{"keys":[{jwk_a},{jwk_b},{{"kty":"oct","k":"AA"}}]}}"#))
            .expect("parse");
        assert_eq!(set.len(), 2, "the symmetric key is skipped");
        let sig = sign(&a, b"msg");
        assert_eq!(set.verify(Algorithm::Es256, Some("a"), b"msg", &sig), Ok(()));
        let wrong = set.verify(Algorithm::Es256, Some("b"), b"msg", &sig);
        assert_eq!(wrong, Err(KeyError::BadSignature("ES256")));
        let unknown = set.verify(Algorithm::Es256, Some("c"), b"msg", &sig);
        assert_eq!(unknown, Err(KeyError::UnknownKid("c".into())));
        assert_eq!(
            set.verify(Algorithm::Es256, None, b"msg", &sig),
            Err(KeyError::NoKid(2, "ES256"))
        );
        let rsa = set.verify(Algorithm::Rs256, Some("a"), b"msg", &sig);
        assert!(matches!(rsa, Err(KeyError::WrongKeyType { .. })), "{rsa:?}");
        let one = Jwks::parse(&format!(r#"{{"keys":[{jwk_b}]}}"#)).expect("parse");
        assert_eq!(one.verify(Algorithm::Es256, None, b"m", &sign(&b, b"m")), Ok(()));
    }

    #[test]
    fn bad_key_sets_are_refused() {
        assert!(matches!(Jwks::parse("{"), Err(JwksError::Format(_))));
        assert!(matches!(Jwks::parse(r#"{"keys":3}"#), Err(JwksError::Format(_))));
        assert_eq!(Jwks::parse(r#"{"keys":[{"kty":"oct"}]}"#), Err(JwksError::NoUsableKey(1)));
        let small = r#"{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}"#;
        assert!(matches!(Jwks::parse(small), Err(JwksError::Format(_))), "a 24-bit modulus");
        let no_y = r#"{"keys":[{"kty":"EC","crv":"P-256","x":"AA"}]}"#;
        assert!(matches!(Jwks::parse(no_y), Err(JwksError::Format(_))));
        assert_eq!(base64url("AQAB"), Some(vec![1, 0, 1]));
        assert_eq!(base64url("-_8="), Some(vec![0xfb, 0xff]));
        assert_eq!(base64url("+/8"), Some(vec![0xfb, 0xff]));
        assert_eq!(base64url("@@"), None);
    }

    #[test]
    fn the_file_is_reloaded_when_it_changes_and_a_bad_version_is_not_applied() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("jwks.json");
        let (_, jwk_a) = p256("a");
        let (b, jwk_b) = p256("b");
        std::fs::write(&path, format!(r#"{{"keys":[{jwk_a}]}}"#)).expect("write");
        let file = JwksFile::open(&path, 0).expect("open");
        let sig_b = sign(&b, b"m");
        assert!(file.keys(0).verify(Algorithm::Es256, Some("b"), b"m", &sig_b).is_err());
        std::fs::write(&path, format!(r#"{{"keys":[{jwk_b}]}}"#)).expect("write");
        set_mtime(&path, 1);
        let step = i64::try_from(JWKS_FILE_CHECK_INTERVAL_MS).expect("fits");
        assert_eq!(file.keys(step - 1).len(), 1, "not looked at yet");
        let keys = file.keys(step);
        assert_eq!(keys.verify(Algorithm::Es256, Some("b"), b"m", &sig_b), Ok(()));
        std::fs::write(&path, "not json").expect("write");
        set_mtime(&path, 2);
        let kept = file.keys(2 * step);
        assert_eq!(kept.verify(Algorithm::Es256, Some("b"), b"m", &sig_b), Ok(()), "kept");
        assert!(JwksFile::open(&dir.path().join("missing"), 0).is_err());
    }

    /// Sets a file's modification time `seconds` after the epoch (the writes above may land
    /// within one timestamp tick).
    fn set_mtime(path: &Path, seconds: u64) {
        let file = std::fs::File::options().write(true).open(path).expect("open");
        let when = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(seconds);
        file.set_modified(when).expect("set mtime");
    }
}
