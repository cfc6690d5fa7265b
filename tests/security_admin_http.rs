//! The admin HTTP endpoint with `--admin-require-auth true` (issue 35), against the real
//! broker binary with a SASL_PLAINTEXT listener (PLAIN users alice, bob, admin) and Kafka's
//! StandardAuthorizer (`super.users = User:admin`): no credentials or a wrong password get
//! 401 with a Basic challenge; a user without ACLs gets 403; a user with DESCRIBE on the
//! cluster may read but not move a partition (ALTER); the super user may do both; a SCRAM
//! user made by AlterUserScramCredentials logs in with its password.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use common::Broker;
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use shardlog::authz::{Operation, PatternType, Permission, ResourceType};
use shardlog::metadata::scram::ScramMechanism;
use shardlog::protocol::blocking::BlockingConn;

const JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                    user_alice=\"alice-secret\" user_admin=\"admin-secret\" \
                    user_bob=\"bob-secret\";";

fn start(dir: &Path) -> Broker {
    let config = format!(
        "listeners = \"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0\"\n\
         \"listener.name.sasl_plaintext.plain.sasl.jaas.config\" = '{JAAS}'\n\
         \"listener.name.sasl_plaintext.sasl.enabled.mechanisms\" = \"PLAIN,SCRAM-SHA-256\"\n\
         \"authorizer.class.name\" = \"org.apache.kafka.metadata.authorizer.StandardAuthorizer\"\n\
         \"super.users\" = \"User:admin\"\n\
         admin_require_auth = true\n"
    );
    let path = dir.join("broker.toml");
    std::fs::write(&path, config).expect("write config");
    let config = path.to_str().expect("utf8 path");
    Broker::start_listening(&dir.join("data"), &["--config", config], &["--shards", "2"], &[])
}

fn login(addr: &str, user: &str) -> BlockingConn {
    let mut c = BlockingConn::open(addr, "admin-http-test").expect("connect");
    let hs = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    let r: SaslHandshakeResponse = c.call(ApiKey::SaslHandshake, 1, &hs).expect("handshake");
    assert_eq!(r.error_code, 0);
    let token = format!("\0{user}\0{user}-secret");
    let auth = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token.into_bytes()));
    let r: SaslAuthenticateResponse = c.call(ApiKey::SaslAuthenticate, 2, &auth).expect("auth");
    assert_eq!(r.error_code, 0, "{user} logs in");
    c
}

/// One HTTP/1.1 request; the status and the whole response text.
fn http(addr: &str, method: &str, path: &str, user: Option<(&str, &str)>) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect admin");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let auth = user.map_or(String::new(), |(u, p)| {
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
        format!("Authorization: Basic {b64}\r\n")
    });
    write!(s, "{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}\r\n").expect("write");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read");
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, text)
}

fn cluster_acl(principal: &str, op: Operation) -> AclCreation {
    AclCreation::default()
        .with_resource_type(ResourceType::Cluster.code())
        .with_resource_name(StrBytes::from_static_str("kafka-cluster"))
        .with_resource_pattern_type(PatternType::Literal.code())
        .with_principal(StrBytes::from_string(principal.to_string()))
        .with_host(StrBytes::from_static_str("*"))
        .with_operation(op.code())
        .with_permission_type(Permission::Allow.code())
}

#[test]
fn the_admin_endpoint_asks_for_a_user_and_the_cluster_acl() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path());
    let sasl = broker.listener_addr("SASL_PLAINTEXT");
    let admin_http = broker.admin_addr();
    let mut admin = login(&sasl, "admin");
    let req = CreateAclsRequest::default().with_creations(vec![
        cluster_acl("User:alice", Operation::Describe),
        cluster_acl("User:carol", Operation::Describe),
    ]);
    let r: CreateAclsResponse = admin.call(ApiKey::CreateAcls, 3, &req).expect("create acls");
    assert!(r.results.iter().all(|x| x.error_code == 0), "{r:?}");
    // carol: a SCRAM-SHA-256 credential only.
    let m = ScramMechanism::Sha256;
    let salt = b"0123456789abcdef".to_vec();
    let req = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_static_str("carol"))
            .with_mechanism(m.code())
            .with_iterations(4096)
            .with_salt(Bytes::from(salt.clone()))
            .with_salted_password(Bytes::from(m.salted_password(b"carol-pw", &salt, 4096))),
    ]);
    let r: AlterUserScramCredentialsResponse =
        admin.call(ApiKey::AlterUserScramCredentials, 0, &req).expect("alter scram");
    assert!(r.results.iter().all(|x| x.error_code == 0));
    std::thread::sleep(Duration::from_millis(300)); // the image reaches every shard

    let (status, text) = http(&admin_http, "GET", "/metrics", None);
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("WWW-Authenticate: Basic"), "{text}");
    assert_eq!(http(&admin_http, "GET", "/metrics", Some(("alice", "nope"))).0, 401);
    assert_eq!(http(&admin_http, "GET", "/metrics", Some(("nobody", "x"))).0, 401);
    assert_eq!(http(&admin_http, "GET", "/metrics", Some(("bob", "bob-secret"))).0, 403);
    let (status, text) = http(&admin_http, "GET", "/metrics", Some(("alice", "alice-secret")));
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("# TYPE"), "Prometheus text");
    assert_eq!(http(&admin_http, "GET", "/v1/shards", Some(("carol", "carol-pw"))).0, 200);
    assert_eq!(http(&admin_http, "GET", "/v1/shards", Some(("carol", "carol-px"))).0, 401);
    // A shard move is ALTER on the cluster: alice may not, the super user may ask.
    let mv = "/v1/shards/move?partition=nope-0&to=1";
    assert_eq!(http(&admin_http, "POST", mv, Some(("alice", "alice-secret"))).0, 403);
    let (status, text) = http(&admin_http, "POST", mv, Some(("admin", "admin-secret")));
    assert!(status != 401 && status != 403, "the super user reaches the action: {text}");
    assert!(broker.log_contains("admin request refused: invalid credentials"));
    assert!(!broker.log_contains("alice-secret"), "no password in the log");
}

/// `shardlog topics`, `configs` and `groups` log in with `--user/--password` (PLAIN or
/// SCRAM) on a SASL listener and act as that principal: the super user creates and lists a
/// topic; a user without ACLs sees none of it; a wrong password fails with the broker's
/// message.
#[test]
fn the_admin_subcommands_log_in_as_a_user() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path());
    let sasl = broker.listener_addr("SASL_PLAINTEXT");
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_shardlog"))
            .args(args)
            .args(["--bootstrap-server", &sasl])
            .output()
            .expect("run shardlog");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let admin = ["--user", "admin", "--password", "admin-secret"];
    let (ok, text) =
        cli(&[&["topics", "create", "secured", "--partitions", "1"][..], &admin].concat());
    assert!(ok, "{text}");
    let (ok, text) = cli(&[&["topics", "list"][..], &admin].concat());
    assert!(ok && text.lines().any(|l| l == "secured"), "{text}");
    let (ok, text) = cli(&[&["configs", "describe", "--topic", "secured"][..], &admin].concat());
    assert!(ok, "{text}");
    let (ok, text) = cli(&["topics", "list", "--user", "bob", "--password", "bob-secret"]);
    assert!(ok && !text.lines().any(|l| l == "secured"), "bob sees no topic: {text}");
    let (ok, text) = cli(&["groups", "list", "--user", "bob", "--password", "wrong"]);
    assert!(!ok && text.contains("SASL authentication failed"), "{text}");
}
