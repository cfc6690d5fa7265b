//! Issue 18, `shardlog quotas` against a real broker: alter (with units) and describe a
//! client-id, a user and a user+client-id entity, delete a value, and list every entity.

mod common;

use std::process::Command;

use common::Broker;

fn quotas(addr: &str, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .arg("quotas")
        .args(args)
        .args(["--bootstrap-server", addr])
        .output()
        .expect("run shardlog quotas");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{args:?}: {text} {}", String::from_utf8_lossy(&out.stderr));
    text
}

#[test]
fn quotas_cli_alters_and_describes_entities() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start_with(dir.path(), &["--shards", "1"]);
    let addr = &broker.addr;
    let out = quotas(
        addr,
        &[
            "alter",
            "--client-id",
            "app",
            "--add",
            "producer_byte_rate=1MiB,consumer_byte_rate=2048",
        ],
    );
    assert!(out.contains("Altered quotas of client-id=app"), "{out}");
    quotas(addr, &["alter", "--user", "alice", "--add", "request_percentage=12.5"]);
    quotas(
        addr,
        &["alter", "--user-default", "--client-id", "c1", "--add", "producer_byte_rate=10"],
    );
    let app = quotas(addr, &["describe", "--client-id", "app"]);
    assert_eq!(app, "client-id=app: consumer_byte_rate=2048, producer_byte_rate=1048576\n");
    let alice = quotas(addr, &["describe", "--user", "alice"]);
    assert_eq!(alice, "user=alice: request_percentage=12.5\n");
    quotas(addr, &["alter", "--client-id", "app", "--delete", "consumer_byte_rate"]);
    let all = quotas(addr, &["describe"]);
    assert_eq!(
        all,
        "client-id=app: producer_byte_rate=1048576\nuser=<default> client-id=c1: \
         producer_byte_rate=10\nuser=alice: request_percentage=12.5\n"
    );
    let bad = Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .args(["quotas", "alter", "--client-id", "app", "--add", "nope=1", "-b", addr])
        .output()
        .expect("run");
    assert!(!bad.status.success(), "an unknown key is refused");
}
