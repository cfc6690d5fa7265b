//! Bytes a client sends before it authenticated: SASL tokens (PLAIN, SCRAM client-first and
//! client-final, after a v0 or v1 handshake) through the broker's `SaslExchange`, and the
//! texts the broker parses from its config (JAAS options, PEM certificates and keys).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use shardlog::controller::scram::{ScramCredential, ScramMechanism};
use shardlog::security::sasl::{Mechanism, SaslConfig, SaslEnv, SaslExchange, Step};
use shardlog::security::{plain, tls};

/// What the exchange asks of the shard: alice's credentials, a fixed nonce and time.
struct Env;

impl SaslEnv for Env {
    fn scram_credential(&self, user: &str, m: ScramMechanism) -> Option<ScramCredential> {
        (user == "alice").then(|| credential(m))
    }
    fn nonce(&self) -> String {
        "servernonce".into()
    }
    fn now_ms(&self) -> i64 {
        1_700_000_000_000
    }
}

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
    let mut config = SaslConfig::with_mechanisms(vec![
        Mechanism::Plain,
        Mechanism::Scram(ScramMechanism::Sha256),
        Mechanism::Scram(ScramMechanism::Sha512),
    ]);
    config.plain_users = BTreeMap::from([("alice".to_string(), "pw".to_string())]);
    let name = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"][usize::from(selector) % 3];
    let mut exchange = SaslExchange::default();
    let version = i16::from(selector & 0x80 != 0);
    exchange.handshake(&config, name, version).expect("an enabled mechanism is accepted");
    for token in rest.split(|b| *b == 0xff) {
        match exchange.authenticate(&config, token, &Env) {
            Ok(Step::Challenge(reply)) => assert!(!reply.is_empty()),
            Ok(Step::Authenticated { user, .. }) => assert_eq!(user, "alice"),
            Ok(Step::Refused { .. }) => unreachable!("only OAUTHBEARER refuses with a challenge"),
            Err(_) => break,
        }
    }
    if let Ok(text) = std::str::from_utf8(rest) {
        let _ = plain::jaas_users(text);
        let _ = tls::certificates(text, "fuzz");
        let _ = tls::private_key(text, "fuzz");
    }
}

/// What a broker reads from its own config and from another broker: PKCS12 key and trust
/// stores (`security::tls::pkcs12_key_store`, `pkcs12_trusted`), `ssl.principal.mapping.rules`
/// and the DNs they map (`security::principal`), and a broker's SCRAM answers to our client
/// (`security::client::ScramClient`). Byte 0 % 3 picks which; the rest is the input (rules
/// and DN, or SCRAM's server-first and server-final, split at 0xff).
pub fn tls_stores(data: &[u8]) {
    use shardlog::protocol::client_auth::SaslClient;
    use shardlog::security::client::ScramClient;
    use shardlog::security::principal::PrincipalMapper;
    let Some((&selector, rest)) = data.split_first() else { return };
    match selector % 3 {
        0 => {
            let _ = tls::pkcs12_key_store(rest, Some("pw"));
            let _ = tls::pkcs12_trusted(rest, None);
        }
        1 => {
            let mut parts = rest.splitn(2, |b| *b == 0xff);
            let rules = String::from_utf8_lossy(parts.next().unwrap_or_default());
            let dn = String::from_utf8_lossy(parts.next().unwrap_or_default());
            if let Ok(mapper) = PrincipalMapper::parse(&rules) {
                let _ = mapper.name(&dn);
            }
        }
        _ => {
            let m =
                if selector & 0x80 == 0 { ScramMechanism::Sha256 } else { ScramMechanism::Sha512 };
            let mut client = ScramClient::new(m, "alice", "pw", "clientnonce".into());
            assert!(!client.first().is_empty());
            for token in rest.split(|b| *b == 0xff) {
                match client.step(token) {
                    Ok(Some(reply)) => assert!(!reply.is_empty()),
                    Ok(None) | Err(_) => break,
                }
            }
        }
    }
}
