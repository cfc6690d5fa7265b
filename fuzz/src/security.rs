//! Bytes a client sends before it authenticated: SASL tokens (PLAIN, SCRAM client-first and
//! client-final, OAUTHBEARER's first message and its JWT, after a v0 or v1 handshake) through
//! the broker's `SaslExchange`, and the texts the broker parses from its config (JAAS
//! options, PEM certificates and keys, a JWKS).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use shardlog::controller::scram::{ScramCredential, ScramMechanism};
use shardlog::security::jwks::{Jwks, JwksFile};
use shardlog::security::jwt::{SignedValidator, UnsecuredValidator};
use shardlog::security::oauthbearer::{self, TokenValidator};
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

/// The validators of an OAUTHBEARER listener, made once: Kafka's unsecured one (required
/// scope `produce`) and a signed one over a JWKS file with an RSA and a P-256 key.
fn validators() -> &'static [Arc<TokenValidator>; 2] {
    static VALIDATORS: OnceLock<[Arc<TokenValidator>; 2]> = OnceLock::new();
    VALIDATORS.get_or_init(|| {
        let options = [("unsecuredValidatorRequiredScope".to_string(), "produce".to_string())];
        let unsecured = UnsecuredValidator::from_jaas(&options).expect("options");
        // One file for every run, replaced whole (renamed into place) so that runs side by
        // side never read it half written.
        let path = std::env::temp_dir().join("shardlog-fuzz-jwks.json");
        let partial = path.with_extension(format!("{}", std::process::id()));
        std::fs::write(&partial, JWKS).expect("write the fuzz JWKS");
        std::fs::rename(&partial, &path).expect("rename the fuzz JWKS");
        let keys = JwksFile::open(&path, 0).expect("the fuzz JWKS loads");
        let signed = SignedValidator {
            keys,
            expected_audience: vec!["kafka".into()],
            expected_issuer: Some("https://idp.example".into()),
            sub_claim: "sub".into(),
            scope_claim: "scope".into(),
            clock_skew_ms: 30_000,
        };
        [
            Arc::new(TokenValidator::Unsecured(unsecured)),
            Arc::new(TokenValidator::Signed(Box::new(signed))),
        ]
    })
}

/// An RSA key (`rsa1`, the one `security::jwt`'s tests sign with) and a P-256 point.
const JWKS: &str = r#"{"keys":[
 {"kty":"RSA","kid":"rsa1","use":"sig","e":"AQAB","n":"x8W0SoDCZJAN7osr_lW_dYmP_3sJgXavFpXvt1ViQLQ_c0X_z4stMRycdd6U5vA-G442WT7SF_73kwwLxRFqllHo5r9HAWySOD0IhjRz4CDqnk8qbMOdj72qLqIIr-WK-MGe9RFjhW3bPoBKTMqiEnJaG_76OERF6O6oOoqbT7hnUSVL_3C4tzqc76tMJYn70lyM9SYZ2-WUzB3Hfi4TZXzC8cQ1WH3iRvDuyRazBkrBEfee93OrbvOBxvEYbzuq3gXW6MdUJZ92Hn_7d0uvupg-OiiB6jyDw90cd0XOqEJrVMlYpDpfGOtl7cjhdw6v5AsmDLQO1QoUJTwQCzz7vQ"},
 {"kty":"EC","crv":"P-256","kid":"ec1","x":"axfR8uEsQkf4vOblY6RA8ncDfYEt6zOg9KE5RdiYwpY","y":"T-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU"}
]}"#;

/// OAUTHBEARER as a client drives it. Byte 0: bit 0 picks the validator (unsecured or signed),
/// bit 7 a v0 handshake; the rest: client messages split at 0xff (each a first message, or the
/// `\x01` that ends an exchange after a refusal), fed in order until the exchange ends. The
/// rest whole also goes to the first-message parser, to both validators as a bare token, and
/// to the JWKS parser.
pub fn oauthbearer(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else { return };
    let mut config = SaslConfig::with_mechanisms(vec![Mechanism::OAuthBearer]);
    config.oauth = Some(Arc::clone(&validators()[usize::from(selector & 1)]));
    let mut exchange = SaslExchange::default();
    let version = i16::from(selector & 0x80 != 0);
    exchange.handshake(&config, "OAUTHBEARER", version).expect("enabled");
    for message in rest.split(|b| *b == 0xff) {
        match exchange.authenticate(&config, message, &Env) {
            Ok(Step::Refused { challenge, .. }) => assert!(challenge.starts_with(b"{\"status\":")),
            Ok(Step::Authenticated { user, expires_ms, .. }) => {
                assert!(!user.trim().is_empty() && expires_ms.is_some());
            }
            Ok(Step::Challenge(_)) => unreachable!("OAUTHBEARER has no other challenge"),
            Err(e) => {
                assert!(e.is_authentication_failure() && !e.client_message().is_empty());
                break;
            }
        }
    }
    if let Ok(first) = oauthbearer::parse_client_first(rest) {
        assert!(!first.token.is_empty());
    }
    if let Ok(text) = std::str::from_utf8(rest) {
        for validator in validators() {
            if let Ok(valid) = validator.validate(text, 1_700_000_000_000) {
                assert!(!valid.principal.is_empty());
            }
        }
        let _ = Jwks::parse(text);
    }
}
