//! OAUTHBEARER and KIP-368 re-authentication at the wire (issue 34), against the real broker
//! binary with four listeners from a config file: PLAINTEXT, DEV (SASL_PLAINTEXT, Kafka's
//! unsecured validator with a required scope, and PLAIN without re-authentication), SIGNED
//! (SASL_PLAINTEXT, signed tokens checked against a JWKS file, audience and issuer expected)
//! and REAUTH (SASL_PLAINTEXT, PLAIN and SCRAM with `connections.max.reauth.ms`). Raw
//! protocol: Kafka's JSON challenge then SASL_AUTHENTICATION_FAILED for each kind of bad
//! token, the generic answer to a malformed first message, the token's principal in the log,
//! a JWKS reloaded when its file changes; `session_lifetime_ms`, an in-band re-authentication
//! (with a request in flight before it), the close after expiry and the refused principal and
//! mechanism changes; settings that cannot be honoured failing the start. Kafka's Java
//! producer logs in with a signed token from a file; the other real clients (confluent-kafka's
//! oauth_cb, Java's unsecured login, Java re-authenticating) are in tests/security/run.sh.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use common::Broker;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use shardlog::protocol::blocking::BlockingConn;

const PLAIN_JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                          user_alice=\"alice-secret\" user_admin=\"admin-secret\";";
const OAUTH_JAAS: &str = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule \
                          required unsecuredLoginStringClaim_sub=\"admin\" \
                          unsecuredValidatorRequiredScope=\"produce\";";
/// REAUTH's `connections.max.reauth.ms`.
const REAUTH_MS: i64 = 1500;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn now_s() -> i64 {
    shardlog::shard::now_ms() / 1000
}

/// A P-256 key the test signs with, and its JWKS entry.
struct Signer {
    kid: &'static str,
    pair: ring::signature::EcdsaKeyPair,
}

impl Signer {
    fn new(kid: &'static str) -> Self {
        use ring::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING as ALG};
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ALG, &rng).expect("generate");
        let pair = EcdsaKeyPair::from_pkcs8(&ALG, pkcs8.as_ref(), &rng).expect("pair");
        Self { kid, pair }
    }

    fn jwk(&self) -> String {
        use ring::signature::KeyPair as _;
        let point = self.pair.public_key().as_ref();
        format!(
            r#"{{"kty":"EC","crv":"P-256","use":"sig","kid":"{}","x":"{}","y":"{}"}}"#,
            self.kid,
            b64(&point[1..33]),
            b64(&point[33..])
        )
    }

    /// An ES256 token with `claims`, its header naming `kid`.
    fn token(&self, kid: &str, claims: &str) -> String {
        let header = format!(r#"{{"alg":"ES256","typ":"JWT","kid":"{kid}"}}"#);
        let input = format!("{}.{}", b64(header.as_bytes()), b64(claims.as_bytes()));
        let rng = ring::rand::SystemRandom::new();
        let sig = self.pair.sign(&rng, input.as_bytes()).expect("sign");
        format!("{input}.{}", b64(sig.as_ref()))
    }
}

fn write_jwks(path: &Path, signers: &[&Signer]) {
    let keys: Vec<String> = signers.iter().map(|s| s.jwk()).collect();
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!(r#"{{"keys":[{}]}}"#, keys.join(","))).expect("write jwks");
    std::fs::rename(&tmp, path).expect("rename jwks");
}

fn start(dir: &Path, jwks: &Path) -> Broker {
    let config = format!(
        "listeners = \"PLAINTEXT://127.0.0.1:0,DEV://127.0.0.1:0,SIGNED://127.0.0.1:0,\
         REAUTH://127.0.0.1:0\"\n\
         \"listener.security.protocol.map\" = \"PLAINTEXT:PLAINTEXT,DEV:SASL_PLAINTEXT,\
         SIGNED:SASL_PLAINTEXT,REAUTH:SASL_PLAINTEXT\"\n\
         \"listener.name.dev.sasl.enabled.mechanisms\" = \"OAUTHBEARER,PLAIN\"\n\
         \"listener.name.dev.oauthbearer.sasl.jaas.config\" = '{OAUTH_JAAS}'\n\
         \"listener.name.dev.plain.sasl.jaas.config\" = '{PLAIN_JAAS}'\n\
         \"listener.name.signed.sasl.enabled.mechanisms\" = \"OAUTHBEARER\"\n\
         \"listener.name.signed.oauthbearer.sasl.server.callback.handler.class\" = \
         \"org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler\"\n\
         \"listener.name.signed.oauthbearer.sasl.oauthbearer.jwks.endpoint.url\" = \"file://{}\"\n\
         \"sasl.oauthbearer.expected.audience\" = \"other,kafka\"\n\
         \"listener.name.signed.sasl.oauthbearer.expected.issuer\" = \"https://idp.test\"\n\
         \"listener.name.reauth.sasl.enabled.mechanisms\" = \"PLAIN,SCRAM-SHA-256\"\n\
         \"listener.name.reauth.plain.sasl.jaas.config\" = '{PLAIN_JAAS}'\n\
         \"listener.name.reauth.connections.max.reauth.ms\" = {REAUTH_MS}\n\
         \"connection.failed.authentication.delay.ms\" = 50\n",
        jwks.display()
    );
    let path = dir.join("broker.toml");
    std::fs::write(&path, config).expect("write config");
    let config = path.to_str().expect("utf8 path");
    Broker::start_listening(&dir.join("data"), &["--config", config], &["--shards", "2"], &[])
}

fn open(addr: &str) -> BlockingConn {
    BlockingConn::open(addr, "oauth-test").expect("connect")
}

fn handshake(conn: &mut BlockingConn, mechanism: &'static str) -> SaslHandshakeResponse {
    let req = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
    conn.call(ApiKey::SaslHandshake, 1, &req).expect("SaslHandshake")
}

fn authenticate(conn: &mut BlockingConn, token: &[u8]) -> SaslAuthenticateResponse {
    let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token));
    conn.call(ApiKey::SaslAuthenticate, 2, &req).expect("SaslAuthenticate")
}

fn metadata(conn: &mut BlockingConn) -> Result<MetadataResponse, String> {
    conn.call(ApiKey::Metadata, 12, &MetadataRequest::default().with_topics(Some(Vec::new())))
        .map_err(|e| e.to_string())
}

/// Kafka's OAUTHBEARER client first message carrying `token` (and one extension).
fn first_message(token: &str) -> Vec<u8> {
    format!("n,,\u{1}auth=Bearer {token}\u{1}traceId=t-1\u{1}\u{1}").into_bytes()
}

fn unsecured(claims: &str) -> String {
    format!("{}.{}.", b64(br#"{"alg":"none"}"#), b64(claims.as_bytes()))
}

/// A refused token: Kafka's JSON challenge (no error), then the client's `\x01` gets
/// SASL_AUTHENTICATION_FAILED with that JSON as the message, then the connection closes.
fn refused(addr: &str, message: &[u8]) -> String {
    let mut c = open(addr);
    assert_eq!(handshake(&mut c, "OAUTHBEARER").error_code, 0);
    let challenge = authenticate(&mut c, message);
    assert_eq!(challenge.error_code, 0, "a challenge, not yet a failure");
    let json = String::from_utf8(challenge.auth_bytes.to_vec()).expect("utf8");
    let end = authenticate(&mut c, &[1]);
    assert_eq!(end.error_code, 58, "SASL_AUTHENTICATION_FAILED");
    assert_eq!(end.error_message.map(|m| m.to_string()), Some(json.clone()));
    assert!(metadata(&mut c).is_err(), "closed after the failure");
    json
}

/// A successful OAUTHBEARER login: the SaslAuthenticate response.
fn accepted(addr: &str, token: &str) -> (BlockingConn, SaslAuthenticateResponse) {
    let mut c = open(addr);
    assert_eq!(handshake(&mut c, "OAUTHBEARER").error_code, 0);
    let r = authenticate(&mut c, &first_message(token));
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    assert!(r.auth_bytes.is_empty());
    assert!(metadata(&mut c).is_ok(), "served after authenticating");
    (c, r)
}

#[test]
fn oauthbearer_unsecured_tokens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let signer = Signer::new("k1");
    write_jwks(&dir.path().join("jwks.json"), &[&signer]);
    let broker = start(dir.path(), &dir.path().join("jwks.json"));
    let dev = broker.listener_addr("DEV");
    assert!(broker.logs_within("OAUTHBEARER accepts UNSECURED tokens"), "the start warns");
    let exp = now_s() + 600;

    let good = unsecured(&format!(r#"{{"sub":"dora","exp":{exp},"scope":["produce","x"]}}"#));
    let (_c, r) = accepted(&dev, &good);
    // Kafka caps an OAUTHBEARER session at the token's exp even without
    // connections.max.reauth.ms.
    let lifetime = r.session_lifetime_ms;
    assert!((590_000..=600_000).contains(&lifetime), "session_lifetime_ms {lifetime}");
    assert!(broker.logs_within("principal=User:dora"));

    let no_scope = unsecured(&format!(r#"{{"sub":"dora","exp":{exp}}}"#));
    let json = refused(&dev, &first_message(&no_scope));
    assert_eq!(json, r#"{"status":"insufficient_scope", "scope":"[produce]"}"#);
    let expired = unsecured(r#"{"sub":"dora","exp":1600000000,"scope":"produce"}"#);
    assert_eq!(refused(&dev, &first_message(&expired)), r#"{"status":"invalid_token"}"#);
    assert!(broker.logs_within("OAUTHBEARER token refused: The indicated time"));
    let signed = signer.token("k1", &format!(r#"{{"sub":"dora","exp":{exp}}}"#));
    assert_eq!(refused(&dev, &first_message(&signed)), r#"{"status":"invalid_token"}"#);
    assert!(broker.logs_within("Unsecured JWS must have 'none'"));
    let bad_b64 = "x.y.";
    assert_eq!(refused(&dev, &first_message(bad_b64)), r#"{"status":"invalid_token"}"#);
    let bad_json = format!("{}.{}.", b64(b"{\"alg\""), b64(b"{}"));
    assert_eq!(refused(&dev, &first_message(&bad_json)), r#"{"status":"invalid_token"}"#);

    // A malformed first message: Kafka's generic answer at once, then closed.
    for message in
        [&b"n,,\x01auth=Bearer\x01\x01"[..], b"\x01", b"n,,\x01auth=Bearer t\x01", b"\xff"]
    {
        let mut c = open(&dev);
        assert_eq!(handshake(&mut c, "OAUTHBEARER").error_code, 0);
        let r = authenticate(&mut c, message);
        assert_eq!(r.error_code, 58, "{message:?}");
        let text = r.error_message.map(|m| m.to_string()).unwrap_or_default();
        assert_eq!(
            text,
            "Authentication failed during authentication due to invalid credentials with SASL \
             mechanism OAUTHBEARER"
        );
        assert!(metadata(&mut c).is_err());
    }
    assert!(broker.logs_within("Invalid OAUTHBEARER client first message"));
    // An authorization id other than the token's principal.
    let mut c = open(&dev);
    assert_eq!(handshake(&mut c, "OAUTHBEARER").error_code, 0);
    let good_scoped = unsecured(&format!(r#"{{"sub":"dora","exp":{exp},"scope":"produce"}}"#));
    let message = format!("n,a=eve,\u{1}auth=Bearer {good_scoped}\u{1}\u{1}");
    let r = authenticate(&mut c, message.as_bytes());
    assert_eq!(r.error_code, 58);
    assert!(r.error_message.expect("message").contains("authorization id (eve)"));
    assert!(!broker.log_contains(&good_scoped), "a token is never logged");
}

#[test]
fn oauthbearer_signed_tokens_and_a_reloaded_jwks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jwks = dir.path().join("jwks.json");
    let (k1, k2) = (Signer::new("k1"), Signer::new("k2"));
    write_jwks(&jwks, &[&k1]);
    let broker = start(dir.path(), &jwks);
    let signed = broker.listener_addr("SIGNED");
    assert!(broker.logs_within("OAUTHBEARER verifies signed tokens"));
    let (iat, exp) = (now_s() - 5, now_s() + 300);
    let claims = |sub: &str, aud: &str, iss: &str| {
        format!(r#"{{"sub":"{sub}","iat":{iat},"exp":{exp},"aud":"{aud}","iss":"{iss}"}}"#)
    };
    let good = claims("erin", "kafka", "https://idp.test");
    let (_c, r) = accepted(&signed, &k1.token("k1", &good));
    assert!((290_000..=300_000).contains(&r.session_lifetime_ms), "{}", r.session_lifetime_ms);
    assert!(broker.logs_within("principal=User:erin"));

    let invalid = r#"{"status":"invalid_token"}"#;
    let mut forged = k1.token("k1", &good);
    forged.replace_range(forged.len() - 4.., "AAAA");
    for (token, why) in [
        (forged, "signature is invalid"),
        (k2.token("k2", &good), "no key with kid \"k2\""),
        (k1.token("k1", &claims("erin", "elsewhere", "https://idp.test")), "Audience (aud)"),
        (k1.token("k1", &claims("erin", "kafka", "https://evil.test")), "Issuer (iss)"),
        (
            k1.token(
                "k1",
                r#"{"sub":"erin","iat":1600000000,"exp":1600000600,"aud":"kafka","iss":"https://idp.test"}"#,
            ),
            "no longer valid",
        ),
        (unsecured(&good), "\"none\" is not allowed"),
    ] {
        assert_eq!(refused(&signed, &first_message(&token)), invalid, "{why}");
        assert!(broker.logs_within(why), "logged: {why}");
    }

    // The identity provider rotates its keys: the file is rewritten, the broker reloads it.
    write_jwks(&jwks, &[&k1, &k2]);
    let started = std::time::Instant::now();
    loop {
        let mut c = open(&signed);
        assert_eq!(handshake(&mut c, "OAUTHBEARER").error_code, 0);
        let r = authenticate(&mut c, &first_message(&k2.token("k2", &good)));
        if r.error_code == 0 && r.auth_bytes.is_empty() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "the JWKS was not reloaded");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(broker.logs_within("JWKS reloaded"));
}

/// Requests written back to back on one connection, answers read in order.
struct Pipe {
    stream: TcpStream,
    next: i32,
}

impl Pipe {
    fn send<R: kafka_protocol::protocol::Request>(&mut self, req: &R, version: i16) -> i32 {
        let mut buf = bytes::BytesMut::new();
        self.next += 1;
        shardlog::protocol::client::encode_request(&mut buf, req, version, self.next)
            .expect("encode");
        self.stream.write_all(&buf).expect("write");
        self.next
    }

    fn recv<R: kafka_protocol::protocol::Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        id: i32,
    ) -> R {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).expect("length");
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut body).expect("body");
        shardlog::protocol::blocking::decode_response(api, version, id, Bytes::from(body))
            .expect("decode")
    }
}

fn plain(user: &str, password: &str) -> Vec<u8> {
    format!("\0{user}\0{password}").into_bytes()
}

#[test]
fn reauthentication_renews_expires_and_keeps_the_principal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jwks = dir.path().join("jwks.json");
    write_jwks(&jwks, &[&Signer::new("k1")]);
    let broker = start(dir.path(), &jwks);
    let reauth = broker.listener_addr("REAUTH");
    let dev = broker.listener_addr("DEV");
    assert!(broker.logs_within("connections.max.reauth.ms=1500"));

    // A session of connections.max.reauth.ms, renewed in band with a request in flight.
    let stream = TcpStream::connect(&reauth).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let mut p = Pipe { stream, next: 0 };
    let id = p.send(
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
        1,
    );
    assert_eq!(p.recv::<SaslHandshakeResponse>(ApiKey::SaslHandshake, 1, id).error_code, 0);
    let auth = |user: &str| {
        SaslAuthenticateRequest::default()
            .with_auth_bytes(Bytes::from(plain(user, &format!("{user}-secret"))))
    };
    let id = p.send(&auth("alice"), 2);
    let r: SaslAuthenticateResponse = p.recv(ApiKey::SaslAuthenticate, 2, id);
    assert_eq!((r.error_code, r.session_lifetime_ms), (0, REAUTH_MS));
    let meta = MetadataRequest::default().with_topics(Some(Vec::new()));
    let in_flight = p.send(&meta, 12);
    let hs = p.send(
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
        1,
    );
    let _: MetadataResponse = p.recv(ApiKey::Metadata, 12, in_flight);
    assert_eq!(p.recv::<SaslHandshakeResponse>(ApiKey::SaslHandshake, 1, hs).error_code, 0);
    let id = p.send(&auth("alice"), 2);
    let r: SaslAuthenticateResponse = p.recv(ApiKey::SaslAuthenticate, 2, id);
    assert_eq!((r.error_code, r.session_lifetime_ms), (0, REAUTH_MS), "renewed");
    assert!(broker.logs_within("SASL re-authentication succeeded"));
    // Past the renewed lifetime, the next request closes the connection.
    std::thread::sleep(Duration::from_millis(u64::try_from(REAUTH_MS).unwrap() + 300));
    let id = p.send(&meta, 12);
    let mut byte = [0u8; 1];
    assert!(matches!(p.stream.read(&mut byte), Ok(0) | Err(_)), "closed, not answered ({id})");
    assert!(broker.logs_within("SASL session of User:alice expired"));

    // A re-authentication as someone else is refused and the connection closed.
    let mut c = open(&reauth);
    assert_eq!(handshake(&mut c, "PLAIN").error_code, 0);
    assert_eq!(authenticate(&mut c, &plain("alice", "alice-secret")).error_code, 0);
    assert_eq!(handshake(&mut c, "PLAIN").error_code, 0);
    let r = authenticate(&mut c, &plain("admin", "admin-secret"));
    assert_eq!(r.error_code, 58);
    assert_eq!(
        r.error_message.map(|m| m.to_string()).as_deref(),
        Some("Cannot change principals during re-authentication from User.alice: User.admin")
    );
    assert!(metadata(&mut c).is_err());
    // So is one with another mechanism.
    let mut c = open(&reauth);
    assert_eq!(handshake(&mut c, "PLAIN").error_code, 0);
    assert_eq!(authenticate(&mut c, &plain("alice", "alice-secret")).error_code, 0);
    assert_eq!(handshake(&mut c, "SCRAM-SHA-256").error_code, 0);
    let r = authenticate(&mut c, b"n,,n=alice,r=abc");
    assert_eq!(r.error_code, 58);
    assert!(r.error_message.expect("message").contains("not supported for re-authentication"));

    // Without connections.max.reauth.ms (PLAIN on DEV): lifetime 0, and a SaslHandshake after
    // authenticating is answered ILLEGAL_SASL_STATE on a connection that stays open.
    let mut c = open(&dev);
    assert_eq!(handshake(&mut c, "PLAIN").error_code, 0);
    let r = authenticate(&mut c, &plain("alice", "alice-secret"));
    assert_eq!((r.error_code, r.session_lifetime_ms), (0, 0));
    assert_eq!(handshake(&mut c, "PLAIN").error_code, 34, "ILLEGAL_SASL_STATE");
    assert!(metadata(&mut c).is_ok());
}

/// Settings Shardlog cannot honour fail the start with a line naming the setting, never a
/// panic: an HTTP JWKS, a JWKS file that is missing or holds no usable key, a callback
/// handler class not served, OAUTHBEARER without its JAAS line, a bad unsecured option.
#[test]
fn bad_oauthbearer_settings_fail_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, r#"{"keys":[{"kty":"oct","k":"AAAA"}]}"#).expect("write");
    let base = "listeners = \"SASL_PLAINTEXT://127.0.0.1:0\"\n\
                \"sasl.enabled.mechanisms\" = \"OAUTHBEARER\"\n";
    let signed = "\"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class\" \
                  = \"org.apache.kafka.common.security.oauthbearer.secured.\
                  OAuthBearerValidatorCallbackHandler\"\n";
    let url = |u: &str| format!("\"sasl.oauthbearer.jwks.endpoint.url\" = \"{u}\"\n");
    let cases = [
        (format!("{signed}{}", url("https://idp.test/jwks")), "sasl.oauthbearer.jwks.endpoint.url"),
        (format!("{signed}{}", url("file:///nonexistent/jwks.json")), "cannot read"),
        (format!("{signed}{}", url(&format!("file://{}", empty.display()))), "no RSA or P-256"),
        (signed.to_string(), "sasl.oauthbearer.jwks.endpoint.url"),
        (
            "\"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class\" = \
             \"com.example.Custom\"\n"
                .to_string(),
            "com.example.Custom is not served",
        ),
        (String::new(), "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"),
        (
            "\"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config\" = 'org.apache.kafka.\
             common.security.oauthbearer.OAuthBearerLoginModule required \
             unsecuredValidatorAllowableClockSkewMs=\"-5\";'\n"
                .to_string(),
            "must not be negative",
        ),
    ];
    for (more, named) in cases {
        let config = dir.path().join("bad.toml");
        std::fs::write(&config, format!("{base}{more}")).expect("write");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_shardlog"))
            .args(["serve", "--shards", "1", "--data-dir"])
            .arg(dir.path().join("data"))
            .arg("--config")
            .arg(&config)
            .output()
            .expect("serve");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{named}: started");
        assert!(stderr.contains(named) && !stderr.contains("panicked"), "{named}: {stderr}");
    }
}

/// Kafka's classpath (`perf/kafka/kafka.sh classpath`), if its jars are installed.
fn kafka_classpath() -> Option<String> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new(repo.join("perf/kafka/kafka.sh"))
        .arg("classpath")
        .output()
        .ok()?;
    let cp = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let jars = cp.split(':').next().map(|p| p.trim_end_matches('*').to_string())?;
    (out.status.success() && Path::new(&jars).is_dir()).then_some(cp)
}

/// Kafka's Java producer with a signed token: its `OAuthBearerLoginCallbackHandler` reads the
/// token from a file (`sasl.oauthbearer.token.endpoint.url=file:...`), the broker checks it
/// against the JWKS, and the principal is the token's subject.
#[test]
fn the_java_client_logs_in_with_a_signed_token() {
    let Some(cp) = kafka_classpath() else {
        eprintln!("Kafka's jars are not installed (perf/kafka/kafka.sh fetch): skipped");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let jwks = dir.path().join("jwks.json");
    let signer = Signer::new("k1");
    write_jwks(&jwks, &[&signer]);
    let broker = start(dir.path(), &jwks);
    let signed = broker.listener_addr("SIGNED");
    let (iat, exp) = (now_s(), now_s() + 600);
    let claims = format!(
        r#"{{"sub":"frank","iat":{iat},"exp":{exp},"aud":"kafka","iss":"https://idp.test","scope":"kafka"}}"#
    );
    let token = dir.path().join("token.jwt");
    std::fs::write(&token, signer.token("k1", &claims)).expect("token");
    let props = dir.path().join("client.properties");
    std::fs::write(
        &props,
        format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n\
             sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.\
             OAuthBearerLoginCallbackHandler\n\
             sasl.oauthbearer.token.endpoint.url=file://{}\n\
             sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule \
             required;\n",
            token.display()
        ),
    )
    .expect("props");
    let mut producer = std::process::Command::new("java")
        // Kafka 4 reads token files only from URLs it is told to allow.
        .arg(format!("-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=file://{}", token.display()))
        .args(["-Xmx256m", "-cp", &cp, "org.apache.kafka.tools.ConsoleProducer"])
        .args(["--bootstrap-server", &signed, "--topic", "java-signed", "--producer.config"])
        .arg(&props)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("java");
    producer.stdin.take().expect("stdin").write_all(b"one\ntwo\n").expect("write");
    let out = producer.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(broker.logs_within("principal=User:frank mechanism=\"OAUTHBEARER\""));
    let mut plain = open(&broker.addr);
    let r: ListOffsetsResponse = plain
        .call(
            ApiKey::ListOffsets,
            1,
            &ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
                list_offsets_request::ListOffsetsTopic::default()
                    .with_name(TopicName(StrBytes::from_static_str("java-signed")))
                    .with_partitions(vec![
                        list_offsets_request::ListOffsetsPartition::default().with_timestamp(-1)
                    ]),
            ]),
        )
        .expect("ListOffsets");
    assert_eq!(r.topics[0].partitions[0].offset, 2, "both records were written");
}
