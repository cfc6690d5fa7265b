//! SCRAM credentials of the [`ControllerState`] (Kafka's `UserScramCredentialRecord`):
//! AlterUserScramCredentials upserts and deletes them, the metadata log stores them (salt,
//! stored key, server key, iterations: never the password nor the salted password), they
//! are replayed at start, in snapshots, and published in the metadata image, where every
//! shard's SCRAM exchange (`security::scram`) finds them.
//!
//! Runs on the controller shard (changes) and every shard (the image's read-only copy).
//! Invariant: every credential's iterations lie within Kafka's bounds and its keys have the
//! mechanism's digest length.

use std::collections::BTreeMap;
use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

use super::records::{MetadataRecord, ScramCredentialRecord};
use super::{ControllerError, ControllerState};
use crate::constants::{SCRAM_ITERATIONS_MAX, SCRAM_ITERATIONS_MIN};

/// SCRAM-SHA-256 and SCRAM-SHA-512, with Kafka's type codes (`ScramMechanism.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    #[must_use]
    pub fn from_code(code: i8) -> Option<Self> {
        match code {
            1 => Some(Self::Sha256),
            2 => Some(Self::Sha512),
            _ => None,
        }
    }

    #[must_use]
    pub fn code(self) -> i8 {
        match self {
            Self::Sha256 => 1,
            Self::Sha512 => 2,
        }
    }

    /// The SASL mechanism name, `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Sha256 => "SCRAM-SHA-256",
            Self::Sha512 => "SCRAM-SHA-512",
        }
    }

    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Digest length in bytes.
    #[must_use]
    pub fn digest_bytes(self) -> usize {
        match self {
            Self::Sha256 => 32,
            Self::Sha512 => 64,
        }
    }

    #[must_use]
    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Self::Sha256 => Sha256::digest(data).to_vec(),
            Self::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    #[must_use]
    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Self::Sha256 => {
                let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
            Self::Sha512 => {
                let mut mac = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes any key");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
        }
    }

    /// RFC 5802's `Hi(password, salt, i)` (PBKDF2 with this HMAC).
    #[must_use]
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0u8; self.digest_bytes()];
        match self {
            Self::Sha256 => pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out),
            Self::Sha512 => pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out),
        }
        out
    }
}

/// What the broker keeps of a user's password for one mechanism (RFC 5802 §2.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl ScramCredential {
    /// From the salted password AlterUserScramCredentials carries.
    #[must_use]
    pub fn from_salted(
        mechanism: ScramMechanism,
        salted: &[u8],
        salt: &[u8],
        iterations: i32,
    ) -> Self {
        let client_key = mechanism.hmac(salted, b"Client Key");
        Self {
            salt: salt.to_vec(),
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted, b"Server Key"),
            iterations,
        }
    }

    /// From a password (`shardlog` tests and a first credential).
    #[must_use]
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        salt: &[u8],
        iterations: i32,
    ) -> Self {
        let salted =
            mechanism.salted_password(password.as_bytes(), salt, iterations.unsigned_abs());
        Self::from_salted(mechanism, &salted, salt, iterations)
    }
}

/// Every user's SCRAM credentials, by user then mechanism.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScramCredentials {
    pub users: BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>,
}

impl ScramCredentials {
    #[must_use]
    pub fn get(&self, user: &str, mechanism: ScramMechanism) -> Option<&ScramCredential> {
        self.users.get(user)?.get(&mechanism)
    }
}

/// One change of AlterUserScramCredentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScramChange {
    Upsert {
        user: String,
        mechanism: ScramMechanism,
        salted: Vec<u8>,
        salt: Vec<u8>,
        iterations: i32,
    },
    Delete {
        user: String,
        mechanism: ScramMechanism,
    },
}

/// The file `shardlog format --add-scram` leaves in a data directory: the first SCRAM
/// credentials, proposed once by the first active controller that finds them missing, then
/// removed (it holds salted passwords).
pub const BOOTSTRAP_SCRAM_FILE: &str = "bootstrap-scram";

/// One `--add-scram` credential per line: `MECHANISM<TAB>user<TAB>iterations<TAB>salt<TAB>
/// salted password` (base64), as [`ScramChange::Upsert`] carries it.
#[must_use]
pub fn encode_bootstrap(changes: &[ScramChange]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    changes
        .iter()
        .filter_map(|c| match c {
            ScramChange::Upsert { user, mechanism, salted, salt, iterations } => Some(format!(
                "{}\t{user}\t{iterations}\t{}\t{}\n",
                mechanism.name(),
                b64.encode(salt),
                b64.encode(salted)
            )),
            ScramChange::Delete { .. } => None,
        })
        .collect()
}

/// Parses [`encode_bootstrap`]'s text.
pub fn parse_bootstrap(text: &str) -> Result<Vec<ScramChange>, String> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            let [mechanism, user, iterations, salt, salted] = f.as_slice() else {
                return Err(format!(
                    "{BOOTSTRAP_SCRAM_FILE}: a line has {} fields, not 5",
                    f.len()
                ));
            };
            let bad = |what: &str| format!("{BOOTSTRAP_SCRAM_FILE}: bad {what} for {user}");
            Ok(ScramChange::Upsert {
                user: (*user).to_string(),
                mechanism: ScramMechanism::from_name(mechanism).ok_or_else(|| bad("mechanism"))?,
                iterations: iterations.parse().map_err(|_| bad("iterations"))?,
                salt: b64.decode(salt).map_err(|_| bad("salt"))?,
                salted: b64.decode(salted).map_err(|_| bad("salted password"))?,
            })
        })
        .collect()
}

/// Why one change is refused (mapped to Kafka's codes by the API handler).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    #[error("Too few iterations: {0} (at least {SCRAM_ITERATIONS_MIN})")]
    TooFewIterations(i32),
    #[error("Too many iterations: {0} (at most {SCRAM_ITERATIONS_MAX})")]
    TooManyIterations(i32),
    #[error("Empty user name")]
    EmptyUser,
    #[error("Attempt to delete a user credential that does not exist")]
    NoSuchCredential,
    #[error("Salted password of {got} bytes: {mechanism:?} needs {want}")]
    BadSaltedPassword { mechanism: ScramMechanism, got: usize, want: usize },
}

impl ControllerState {
    /// The SCRAM credentials in force.
    #[must_use]
    pub fn scram_credentials(&self) -> &Arc<ScramCredentials> {
        &self.scram_credentials
    }

    /// Checks one change against the credentials now.
    pub fn check_scram_change(&self, change: &ScramChange) -> Result<(), ScramError> {
        match change {
            ScramChange::Upsert { user, mechanism, salted, iterations, .. } => {
                if user.is_empty() {
                    return Err(ScramError::EmptyUser);
                }
                if *iterations < SCRAM_ITERATIONS_MIN {
                    return Err(ScramError::TooFewIterations(*iterations));
                }
                if *iterations > SCRAM_ITERATIONS_MAX {
                    return Err(ScramError::TooManyIterations(*iterations));
                }
                let want = mechanism.digest_bytes();
                if salted.len() != want {
                    let (mechanism, got) = (*mechanism, salted.len());
                    return Err(ScramError::BadSaltedPassword { mechanism, got, want });
                }
                Ok(())
            }
            ScramChange::Delete { user, mechanism } => {
                if user.is_empty() {
                    return Err(ScramError::EmptyUser);
                }
                self.scram_credentials
                    .get(user, *mechanism)
                    .map(|_| ())
                    .ok_or(ScramError::NoSuchCredential)
            }
        }
    }

    /// Writes checked changes as one operation. Returns whether anything was written.
    pub fn alter_scram_credentials(
        &mut self,
        changes: &[ScramChange],
    ) -> Result<bool, ControllerError> {
        let records: Vec<MetadataRecord> = changes
            .iter()
            .map(|c| {
                MetadataRecord::ScramCredential(match c {
                    ScramChange::Upsert { user, mechanism, salted, salt, iterations } => {
                        ScramCredentialRecord {
                            user: user.clone(),
                            mechanism: *mechanism,
                            credential: Some(ScramCredential::from_salted(
                                *mechanism,
                                salted,
                                salt,
                                *iterations,
                            )),
                        }
                    }
                    ScramChange::Delete { user, mechanism } => ScramCredentialRecord {
                        user: user.clone(),
                        mechanism: *mechanism,
                        credential: None,
                    },
                })
            })
            .collect();
        if records.is_empty() {
            return Ok(false);
        }
        self.propose(records)?;
        Ok(true)
    }

    /// Applies one recorded change (replay and live alike).
    pub(super) fn apply_scram_credential(&mut self, r: ScramCredentialRecord) {
        let all = Arc::make_mut(&mut self.scram_credentials);
        match r.credential {
            Some(c) => {
                all.users.entry(r.user).or_default().insert(r.mechanism, c);
            }
            None => {
                if let Some(user) = all.users.get_mut(&r.user) {
                    user.remove(&r.mechanism);
                    if user.is_empty() {
                        all.users.remove(&r.user);
                    }
                }
            }
        }
    }

    /// The records that rebuild the credentials (a snapshot's part).
    #[must_use]
    pub(super) fn scram_snapshot_records(&self) -> Vec<MetadataRecord> {
        let mut out = Vec::new();
        for (user, by_mechanism) in &self.scram_credentials.users {
            for (mechanism, credential) in by_mechanism {
                out.push(MetadataRecord::ScramCredential(ScramCredentialRecord {
                    user: user.clone(),
                    mechanism: *mechanism,
                    credential: Some(credential.clone()),
                }));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's SCRAM-SHA-256 example: user "user", password "pencil".
    #[test]
    fn rfc7677_keys() {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        let salt = b64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("salt");
        let c = ScramCredential::from_password(ScramMechanism::Sha256, "pencil", &salt, 4096);
        let salted = ScramMechanism::Sha256.salted_password(b"pencil", &salt, 4096);
        let client_key = ScramMechanism::Sha256.hmac(&salted, b"Client Key");
        assert_eq!(c.stored_key, ScramMechanism::Sha256.hash(&client_key));
        // ServerSignature of the RFC's exchange, from the server key.
        let auth = "n=user,r=rOprNGfwEbeRWgbNEkqO,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let sig = ScramMechanism::Sha256.hmac(&c.server_key, auth.as_bytes());
        assert_eq!(b64.encode(sig), "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    }

    #[test]
    fn mechanism_codes_and_names() {
        for m in ScramMechanism::ALL {
            assert_eq!(ScramMechanism::from_code(m.code()), Some(m));
            assert_eq!(ScramMechanism::from_name(m.name()), Some(m));
            assert_eq!(m.hash(b"x").len(), m.digest_bytes());
        }
        assert_eq!(ScramMechanism::from_code(0), None);
    }
}
