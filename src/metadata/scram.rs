//! SCRAM credentials as the metadata image carries them (Kafka's `UserScramCredentialRecord`
//! data): the mechanisms with their digests, HMACs and `Hi()`, one user's credential for a
//! mechanism (salt, stored key, server key, iterations: never the password nor the salted
//! password), and every user's credentials ([`ScramCredentials`]), which every shard's SCRAM
//! exchange (`security::scram`) reads from its image.
//!
//! Pure data and hashing, no I/O. Built on the controller shard (whose AlterUserScramCredentials
//! changes, replay and snapshots are `controller::scram`'s, which re-exports these names) and
//! read on every shard. Invariant: every credential's iterations lie within Kafka's bounds and
//! its keys have the mechanism's digest length (the controller checks a change before it is
//! recorded).

use std::collections::BTreeMap;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

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
