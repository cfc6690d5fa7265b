//! SCRAM credentials of the [`ControllerState`] (Kafka's `UserScramCredentialRecord`):
//! AlterUserScramCredentials upserts and deletes them, the metadata log stores them (salt,
//! stored key, server key, iterations: never the password nor the salted password), they
//! are replayed at start, in snapshots, and published in the metadata image, where every
//! shard's SCRAM exchange (`security::scram`) finds them.
//!
//! Runs on the controller shard (changes) and every shard (the image's read-only copy).
//! The credential types are `metadata::scram`'s, re-exported here. Invariant: every
//! credential's iterations lie within Kafka's bounds and its keys have the mechanism's
//! digest length.

use std::sync::Arc;

use super::records::{MetadataRecord, ScramCredentialRecord};
use super::{ControllerError, ControllerState};
use crate::constants::{SCRAM_ITERATIONS_MAX, SCRAM_ITERATIONS_MIN};
pub use crate::metadata::scram::{ScramCredential, ScramCredentials, ScramMechanism};

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
