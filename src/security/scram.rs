//! The server side of a SCRAM-SHA-256/512 exchange (RFC 5802, RFC 7677) as Kafka runs it:
//! client-first → server-first → client-final → server-final, credentials from the metadata
//! image (`controller::scram`), no channel binding (`n,,` or `y,,`), Kafka's extensions
//! accepted and ignored.
//!
//! Pure state machine: the caller supplies the server nonce (random) and the credential
//! lookup; runs on the connection's shard. Invariants: the proof is checked in constant
//! time; a malformed message is an error, never a panic; the server signature is sent only
//! after the client proved its key.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;

use super::plain::constant_time_eq;
use crate::controller::scram::{ScramCredential, ScramMechanism};

/// Why a SCRAM exchange fails (each is SASL_AUTHENTICATION_FAILED at the protocol boundary).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    #[error("Invalid SCRAM message: {0}")]
    Malformed(&'static str),
    #[error("Authentication failed: channel binding is not supported")]
    ChannelBinding,
    #[error("Authentication failed during authentication due to invalid credentials with SASL mechanism {0}")]
    Credentials(&'static str),
    #[error("Invalid SCRAM message: the client's nonce does not match")]
    Nonce,
}

/// An exchange after the server-first message, waiting for client-final.
#[derive(Debug)]
pub struct ScramServer {
    mechanism: ScramMechanism,
    user: String,
    credential: ScramCredential,
    client_first_bare: String,
    server_first: String,
    nonce: String,
}

/// The attributes of a SCRAM message, `k=v` separated by commas (values may hold `=`).
fn attributes(message: &str) -> Result<Vec<(char, &str)>, ScramError> {
    message
        .split(',')
        .map(|part| {
            let mut chars = part.chars();
            match (chars.next(), chars.next()) {
                (Some(k), Some('=')) if k.is_ascii_alphabetic() => Ok((k, &part[2..])),
                _ => Err(ScramError::Malformed("expected key=value attributes")),
            }
        })
        .collect()
}

/// RFC 5802's saslname: `=2C` is `,` and `=3D` is `=`; any other `=` is malformed.
fn unescape_name(name: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(ScramError::Malformed("bad escape in the user name")),
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The client-first message's parts: the user name and the client nonce, and the message
/// without its GS2 header (`client-first-message-bare`).
pub fn parse_client_first(message: &[u8]) -> Result<(String, String, String), ScramError> {
    let text = std::str::from_utf8(message).map_err(|_| ScramError::Malformed("not UTF-8"))?;
    let (flag, rest) = text.split_once(',').ok_or(ScramError::Malformed("no GS2 header"))?;
    match flag {
        "n" | "y" => {}
        f if f.starts_with("p=") => return Err(ScramError::ChannelBinding),
        _ => return Err(ScramError::Malformed("bad GS2 channel-binding flag")),
    }
    let (_authzid, bare) = rest.split_once(',').ok_or(ScramError::Malformed("no GS2 header"))?;
    let attrs = attributes(bare)?;
    let user = match attrs.first() {
        Some(('n', name)) if !name.is_empty() => unescape_name(name)?,
        _ => return Err(ScramError::Malformed("expected n=<user> first")),
    };
    let nonce = match attrs.get(1) {
        Some(('r', nonce)) if !nonce.is_empty() => (*nonce).to_string(),
        _ => return Err(ScramError::Malformed("expected r=<nonce> after the user")),
    };
    Ok((user, nonce, bare.to_string()))
}

impl ScramServer {
    /// Takes client-first; returns the exchange and the server-first message. `lookup`
    /// finds the user's credential; `server_nonce` is fresh random printable text.
    pub fn start(
        mechanism: ScramMechanism,
        client_first: &[u8],
        server_nonce: &str,
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<(Self, Vec<u8>), ScramError> {
        let (user, client_nonce, client_first_bare) = parse_client_first(client_first)?;
        let credential = lookup(&user).ok_or(ScramError::Credentials(mechanism.name()))?;
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first =
            format!("r={nonce},s={},i={}", B64.encode(&credential.salt), credential.iterations);
        let reply = server_first.clone().into_bytes();
        let server =
            ScramServer { mechanism, user, credential, client_first_bare, server_first, nonce };
        Ok((server, reply))
    }

    /// Takes client-final; returns the authenticated user and the server-final message.
    pub fn finish(self, client_final: &[u8]) -> Result<(String, Vec<u8>), ScramError> {
        let text =
            std::str::from_utf8(client_final).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let (without_proof, proof) =
            text.rsplit_once(",p=").ok_or(ScramError::Malformed("no proof"))?;
        let attrs = attributes(without_proof)?;
        match attrs.first() {
            // base64 of the GS2 header `n,,` or `y,,` (no channel binding).
            Some(('c', "biws" | "eSws")) => {}
            Some(('c', _)) => return Err(ScramError::ChannelBinding),
            _ => return Err(ScramError::Malformed("expected c=<binding> first")),
        }
        // Kafka's `ScramSaslServer` checks that the nonce ends with the server's, not that it
        // equals it: librdkafka 2.0 (Debian's kcat) sends the client nonce twice.
        match attrs.get(1) {
            Some(('r', nonce)) if nonce.ends_with(&self.nonce) => {}
            Some(('r', _)) => return Err(ScramError::Nonce),
            _ => return Err(ScramError::Malformed("expected r=<nonce> after c=")),
        }
        let proof = B64.decode(proof).map_err(|_| ScramError::Malformed("proof not base64"))?;
        let m = self.mechanism;
        let auth_message =
            format!("{},{},{without_proof}", self.client_first_bare, self.server_first);
        let signature = m.hmac(&self.credential.stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return Err(ScramError::Credentials(m.name()));
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        if !constant_time_eq(&m.hash(&client_key), &self.credential.stored_key) {
            return Err(ScramError::Credentials(m.name()));
        }
        let server_signature = m.hmac(&self.credential.server_key, auth_message.as_bytes());
        Ok((self.user, format!("v={}", B64.encode(server_signature)).into_bytes()))
    }
}

/// A server nonce: 32 random letters and digits (Kafka's is alphanumeric too, a base-36
/// number).
#[must_use]
pub fn server_nonce(rng: &mut impl rand::Rng) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    (0..32).map(|_| char::from(ALPHABET[rng.gen_range(0..ALPHABET.len())])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 §3, SCRAM-SHA-256: user "user", password "pencil".
    #[test]
    fn rfc7677_exchange() {
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("salt");
        let cred = ScramCredential::from_password(ScramMechanism::Sha256, "pencil", &salt, 4096);
        let (server, first) = ScramServer::start(
            ScramMechanism::Sha256,
            b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
            "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
            |u| (u == "user").then(|| cred.clone()),
        )
        .expect("start");
        assert_eq!(
            String::from_utf8(first).expect("utf8"),
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let (user, last) = server
            .finish(
                b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                  p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            )
            .expect("finish");
        assert_eq!(user, "user");
        assert_eq!(last, b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    }

    fn started(mechanism: ScramMechanism) -> ScramServer {
        let cred = ScramCredential::from_password(mechanism, "secret", b"salt", 4096);
        ScramServer::start(mechanism, b"n,,n=a=3Db=2C,r=abc", "xyz", |u| {
            assert_eq!(u, "a=b,");
            Some(cred)
        })
        .expect("start")
        .0
    }

    /// librdkafka 2.0 repeats the client nonce in client-final; Kafka accepts a nonce that
    /// ends with the server's, and so does Shardlog.
    #[test]
    fn librdkafka_2_0_nonce_is_accepted() {
        let m = ScramMechanism::Sha256;
        let cred = ScramCredential::from_password(m, "pw", b"salt", 4096);
        let (server, _) =
            ScramServer::start(m, b"n,,n=u,r=abc", "xyz", |_| Some(cred.clone())).expect("start");
        let without_proof = "c=biws,r=abcabcxyz";
        let auth = format!("n=u,r=abc,r=abcxyz,s={},i=4096,{without_proof}", B64.encode(b"salt"));
        let salted = m.salted_password(b"pw", b"salt", 4096);
        let client_key = m.hmac(&salted, b"Client Key");
        let signature = m.hmac(&cred.stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
        let last = format!("{without_proof},p={}", B64.encode(proof));
        assert_eq!(server.finish(last.as_bytes()).expect("accepted").0, "u");
    }

    #[test]
    fn a_wrong_proof_or_nonce_fails() {
        for m in ScramMechanism::ALL {
            let bad = format!("c=biws,r=abcxyz,p={}", B64.encode(vec![0u8; m.digest_bytes()]));
            assert_eq!(started(m).finish(bad.as_bytes()), Err(ScramError::Credentials(m.name())));
            let short = "c=biws,r=abcxyz,p=AAAA";
            assert_eq!(started(m).finish(short.as_bytes()), Err(ScramError::Credentials(m.name())));
            assert_eq!(started(m).finish(b"c=biws,r=other,p=AAAA"), Err(ScramError::Nonce));
        }
    }

    #[test]
    fn malformed_messages_are_errors() {
        let none = |_: &str| None;
        let m = ScramMechanism::Sha512;
        for bad in [
            &b""[..],
            b"n",
            b"n,",
            b"x,,n=a,r=b",
            b"n,,r=b,n=a",
            b"n,,n=,r=b",
            b"n,,n=a",
            b"n,,n=a=,r=b",
            b"n,,=,,,",
            &[0xff, 0xfe],
        ] {
            let err = ScramServer::start(m, bad, "s", none).expect_err("malformed");
            assert!(matches!(err, ScramError::Malformed(_)), "{bad:?}: {err}");
        }
        let binding = ScramServer::start(m, b"p=tls-unique,,n=a,r=b", "s", none);
        assert_eq!(binding.expect_err("binding"), ScramError::ChannelBinding);
        let unknown = ScramServer::start(m, b"n,,n=a,r=b", "s", none);
        assert_eq!(unknown.expect_err("user"), ScramError::Credentials("SCRAM-SHA-512"));
        for bad in [
            &b"c=biws,r=abcxyz"[..],
            b"r=abcxyz,p=AA",
            b"c=biws,r=abcxyz,p=!!",
            b"c=cD10bHM=,r=abcxyz,p=AA",
        ] {
            assert!(started(m).finish(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn nonces_are_alphanumeric() {
        let n = server_nonce(&mut rand::thread_rng());
        assert_eq!(n.len(), 32);
        assert!(n.chars().all(|c| c.is_ascii_alphanumeric()));
    }
}
