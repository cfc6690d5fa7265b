//! `shardlog topics` against the real broker: create with partitions and configs, list,
//! describe with leader, AR, ISR, OSR and preferred leader (and the overrides), the errors
//! Kafka names for an existing or unknown topic (one line, exit status 1), delete.

mod common;

use std::process::{Command, Output};

use common::Broker;

fn topics(broker: &Broker, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .arg("topics")
        .args(args)
        .args(["--bootstrap-server", &broker.addr])
        .output()
        .expect("run shardlog topics")
}

fn ok(broker: &Broker, args: &[&str]) -> String {
    let out = topics(broker, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?} failed: {err}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn failure(broker: &Broker, args: &[&str]) -> String {
    let out = topics(broker, args);
    assert_eq!(out.status.code(), Some(1), "{args:?} should fail");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    err
}

#[test]
fn create_list_describe_delete() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start_with(dir.path(), &["--shards", "2", "--node-id", "1"]);
    let created =
        ok(&broker, &["create", "orders", "--partitions", "3", "--config", "retention.ms=60000"]);
    assert_eq!(created.trim(), "Created topic orders.");
    assert!(ok(&broker, &["list"]).lines().any(|l| l == "orders"));

    let described = ok(&broker, &["describe", "orders"]);
    let lines: Vec<&str> = described.lines().collect();
    assert_eq!(lines.len(), 4, "{described}");
    assert!(lines[0].contains("PartitionCount: 3\tReplicationFactor: 1"), "{described}");
    assert!(lines[0].ends_with("Configs: retention.ms=60000"), "{described}");
    for (p, line) in lines[1..].iter().enumerate() {
        let want = format!(
            "Partition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1\tOsr: -\tElr: -\tLastKnownElr: -\tOffline: -\tPreferredLeader: 1"
        );
        assert!(line.contains(&want), "{line}");
    }

    let err = failure(&broker, &["create", "orders"]);
    assert!(err.contains("TOPIC_ALREADY_EXISTS"), "{err}");
    let err = failure(&broker, &["describe", "nope"]);
    assert!(err.contains("UNKNOWN_TOPIC_OR_PARTITION") && err.contains("nope"), "{err}");

    assert_eq!(ok(&broker, &["delete", "orders"]).trim(), "Deleted topic orders.");
    assert!(!ok(&broker, &["list"]).lines().any(|l| l == "orders"));
}
