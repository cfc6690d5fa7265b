//! Bytes a client sends before it authenticated: SASL tokens (PLAIN, SCRAM client-first and
//! client-final, after a v0 or v1 handshake) through the broker's `SaslExchange`, and the
//! texts the broker parses from its config (JAAS options, PEM certificates and keys).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use shardlog::controller::scram::{ScramCredential, ScramMechanism};
use shardlog::security::sasl::{Mechanism, SaslConfig, SaslExchange, Step};
use shardlog::security::{plain, tls};

/// alice's credentials, made once (PBKDF2 per input would slow the fuzzer down).
fn credential(m: ScramMechanism) -> ScramCredential {
    static CREDS: OnceLock<[ScramCredential; 2]> = OnceLock::new();
    let creds = CREDS.get_or_init(|| {
        ScramMechanism::ALL.map(|m| ScramCredential::from_password(m, "pw", b"salt", 4096))
    });
    creds[usize::from(m == ScramMechanism::Sha512)].clone()
}

/// Byte 0: mechanism (% 3) and handshake version (bit 7); the rest: tokens separated by
/// 0xff, fed in order until the exchange ends. The rest as text also goes to the JAAS and
/// PEM parsers.
pub fn sasl_tokens(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else { return };
    let config = SaslConfig {
        mechanisms: vec![
            Mechanism::Plain,
            Mechanism::Scram(ScramMechanism::Sha256),
            Mechanism::Scram(ScramMechanism::Sha512),
        ],
        plain_users: BTreeMap::from([("alice".to_string(), "pw".to_string())]),
        failed_delay_ms: 0,
    };
    let name = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"][usize::from(selector) % 3];
    let mut exchange = SaslExchange::default();
    let version = i16::from(selector & 0x80 != 0);
    exchange.handshake(&config, name, version).expect("an enabled mechanism is accepted");
    for token in rest.split(|b| *b == 0xff) {
        let lookup = |user: &str, m| (user == "alice").then(|| credential(m));
        match exchange.authenticate(&config, token, lookup, || "servernonce".into()) {
            Ok(Step::Challenge(reply)) => assert!(!reply.is_empty()),
            Ok(Step::Authenticated { user, .. }) => assert_eq!(user, "alice"),
            Err(_) => break,
        }
    }
    if let Ok(text) = std::str::from_utf8(rest) {
        let _ = plain::jaas_users(text);
        let _ = tls::certificates(text, "fuzz");
        let _ = tls::private_key(text, "fuzz");
    }
}
