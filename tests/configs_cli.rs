//! `shardlog configs` against the real broker: `alter` then `describe` shows the override
//! with its topic source, invalid values exit non-zero with one line naming the setting,
//! `--delete-config` returns a config to its default; and a small segment size set through
//! the CLI survives a SIGTERM and a SIGKILL restart and still rolls segments after each.
//!
//! Kafka 4 refuses `segment.bytes` below 1 MiB (checked here too), so the small segments use
//! Kafka's test-only `internal.segment.bytes`, which the broker accepts when named.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{record, Broker};
use rskafka::client::partition::{Compression, UnknownTopicHandling};

const SEGMENT_BYTES: u64 = 16 * 1024;
/// Upper bound of one produced batch (10 records of ~250 bytes): a sealed segment is rolled
/// when the next batch would not fit, so it holds more than `SEGMENT_BYTES - BATCH_BYTES_MAX`.
const BATCH_BYTES_MAX: u64 = 4096;

/// Runs `shardlog configs --bootstrap-server <broker> <args>`.
fn configs(broker: &Broker, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .args(["configs", "--bootstrap-server", &broker.addr])
        .args(args)
        .output()
        .expect("run shardlog configs")
}

fn stdout_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs a command that must succeed and returns its stdout.
fn ok(broker: &Broker, args: &[&str]) -> String {
    let out = configs(broker, args);
    assert!(out.status.success(), "{args:?} failed: {}", stderr_of(&out));
    stdout_of(&out)
}

/// Runs a command that must fail and returns its (single-line) stderr.
fn refused(broker: &Broker, args: &[&str]) -> String {
    let out = configs(broker, args);
    assert!(!out.status.success(), "{args:?} succeeded: {}", stdout_of(&out));
    let err = stderr_of(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    err
}

/// The (value, source) `describe` prints for `name`, if listed.
fn described(report: &str, name: &str) -> Option<(String, String)> {
    report.lines().find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        match cols.as_slice() {
            [n, v, s, _, _] if *n == name => Some((v.to_string(), s.to_string())),
            // An empty value leaves four columns.
            [n, s, _, _] if *n == name => Some((String::new(), s.to_string())),
            _ => None,
        }
    })
}

async fn create_topic(broker: &Broker, topic: &str) {
    let client = broker.client().await;
    let controller = client.controller_client().expect("controller");
    controller.create_topic(topic, 1, 1, 5_000).await.expect("create topic");
}

#[tokio::test]
async fn alter_describe_and_delete_configs() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A non-default server setting, so the broker has a STATIC_BROKER_CONFIG to show.
    let broker = Broker::start_with(dir.path(), &["--shards", "1", "--num-partitions", "3"]);
    create_topic(&broker, "cfg").await;

    let report = ok(&broker, &["describe", "--topic", "cfg"]);
    assert!(described(&report, "retention.ms").is_none(), "no override yet: {report}");

    let set = "retention.ms=123456,cleanup.policy=[compact,delete]";
    let out = ok(&broker, &["alter", "--topic", "cfg", "--add-config", set]);
    assert!(out.contains("Completed updating config for topic cfg"), "{out}");
    let report = ok(&broker, &["describe", "--topic", "cfg"]);
    let topic_source = |v: &str| Some((v.to_string(), "DYNAMIC_TOPIC_CONFIG".to_string()));
    assert_eq!(described(&report, "retention.ms"), topic_source("123456"), "{report}");
    assert_eq!(described(&report, "cleanup.policy"), topic_source("compact,delete"));
    assert!(described(&report, "segment.ms").is_none(), "defaults only with --all: {report}");

    for (bad, setting) in [
        ("retention.ms=abc", "retention.ms"),
        ("cleanup.policy=bogus", "cleanup.policy"),
        ("segment.bytes=16384", "segment.bytes"),
    ] {
        let err = refused(&broker, &["alter", "--topic", "cfg", "--add-config", bad]);
        assert!(err.contains("INVALID_CONFIG") && err.contains(setting), "{bad}: {err}");
    }
    let err = refused(&broker, &["alter", "--topic", "absent", "--add-config", "retention.ms=1"]);
    assert!(err.contains("UNKNOWN_TOPIC_OR_PARTITION"), "{err}");
    let err = refused(&broker, &["alter", "--topic", "cfg", "--add-config", "retention.ms"]);
    assert!(err.contains("key=val"), "{err}");
    // A change with one bad entry is refused whole: the good entry is not applied either.
    let mixed = "retention.ms=5000,cleanup.policy=bogus";
    let err = refused(&broker, &["alter", "--topic", "cfg", "--add-config", mixed]);
    assert!(err.contains("cleanup.policy"), "{err}");
    // A refused change leaves the stored value alone.
    let report = ok(&broker, &["describe", "--topic", "cfg"]);
    assert_eq!(described(&report, "retention.ms"), topic_source("123456"));

    ok(&broker, &["alter", "--topic", "cfg", "--delete-config", "retention.ms"]);
    let report = ok(&broker, &["describe", "--topic", "cfg", "--all"]);
    let default = Some(("604800000".to_string(), "DEFAULT_CONFIG".to_string()));
    assert_eq!(described(&report, "retention.ms"), default, "{report}");
    assert_eq!(described(&report, "cleanup.policy"), topic_source("compact,delete"));

    let report = ok(&broker, &["describe", "--broker", "0"]);
    assert!(report.starts_with("All configs for broker 0:"), "{report}");
    let (_, source) = described(&report, "log.retention.hours").expect("broker config listed");
    assert_eq!(source, "DEFAULT_CONFIG", "{report}");
    let static_config = Some(("3".to_string(), "STATIC_BROKER_CONFIG".to_string()));
    assert_eq!(described(&report, "num.partitions"), static_config, "{report}");
    let err = refused(&broker, &["describe", "--broker", "7"]);
    assert!(err.contains("broker 7"), "{err}");

    // Dynamic broker configs: the cluster default, then broker 0's own value over it.
    let out = ok(&broker, &["alter", "--broker-default", "--add-config", "log.roll.ms=3600000"]);
    assert!(out.contains("Completed updating config for brokers (cluster default)"), "{out}");
    let report = ok(&broker, &["describe", "--broker-default"]);
    let dynamic_default = Some(("3600000".into(), "DYNAMIC_DEFAULT_BROKER_CONFIG".into()));
    assert_eq!(described(&report, "log.roll.ms"), dynamic_default, "{report}");
    ok(&broker, &["alter", "--broker", "0", "--add-config", "log.roll.ms=7200000"]);
    let report = ok(&broker, &["describe", "--broker", "0"]);
    let per_broker = Some(("7200000".into(), "DYNAMIC_BROKER_CONFIG".into()));
    assert_eq!(described(&report, "log.roll.ms"), per_broker, "{report}");
    let report = ok(&broker, &["describe", "--topic", "cfg", "--all"]);
    let inherited = Some(("7200000".into(), "DYNAMIC_BROKER_CONFIG".into()));
    assert_eq!(described(&report, "segment.ms"), inherited, "{report}");
    // A read-only setting: Kafka's INVALID_REQUEST, one line, exit status 1.
    let out = configs(&broker, &["alter", "--broker-default", "--add-config", "num.partitions=2"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("INVALID_REQUEST: Cannot update these configs dynamically"));
    ok(&broker, &["alter", "--broker", "0", "--delete-config", "log.roll.ms"]);
    ok(&broker, &["alter", "--broker-default", "--delete-config", "log.roll.ms"]);
    let report = ok(&broker, &["describe", "--broker-default"]);
    assert!(report.contains("(none"), "{report}");
}

/// Sizes of the partition's `.log` files, by base offset.
fn log_sizes(dir: &Path) -> Vec<u64> {
    let mut logs: Vec<(String, u64)> = std::fs::read_dir(dir)
        .expect("partition dir")
        .map(|e| e.expect("dir entry"))
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.metadata().expect("meta").len()))
        .collect();
    logs.sort();
    logs.into_iter().map(|(_, size)| size).collect()
}

/// Produces 60 batches of 10 records of ~250 bytes (~160 KiB: about ten 16 KiB segments).
async fn produce_batches(broker: &Broker, topic: &str, round: u32) {
    let client = broker.client().await;
    let pc = client.partition_client(topic, 0, UnknownTopicHandling::Retry).await.expect("pc");
    let pad = "x".repeat(100);
    for b in 0..60 {
        let records = (0..10).map(|i| record(&format!("{round}-{b}-{i}-{pad}"))).collect();
        pc.produce(records, Compression::NoCompression).await.expect("produce");
    }
}

/// Produces a round and checks that it rolled several new segments, every sealed one filled
/// to the configured size and not past it.
async fn produce_and_check_rolls(broker: &Broker, partition_dir: &Path, round: u32) {
    let before = log_sizes(partition_dir).len();
    produce_batches(broker, "seg", round).await;
    let sizes = log_sizes(partition_dir);
    eprintln!("round {round}: {before} -> {} segments, sizes {sizes:?}", sizes.len());
    assert!(sizes.len() >= before + 5, "round {round}: {before} -> {} segments", sizes.len());
    let sealed = &sizes[..sizes.len() - 1];
    let filled = |s: &u64| *s <= SEGMENT_BYTES && *s + BATCH_BYTES_MAX > SEGMENT_BYTES;
    assert!(sealed.iter().all(filled), "round {round}: sizes {sizes:?}");
}

#[tokio::test]
async fn segment_size_survives_restarts_and_still_applies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args = ["--shards", "1"];
    let mut broker = Broker::start_with(dir.path(), &args);
    create_topic(&broker, "seg").await;
    let partition_dir = dir.path().join("seg-0");
    let small = format!("internal.segment.bytes={SEGMENT_BYTES}");
    ok(&broker, &["alter", "--topic", "seg", "--add-config", &small]);
    produce_and_check_rolls(&broker, &partition_dir, 0).await;

    for (round, graceful) in [(1, true), (2, false)] {
        if graceful {
            assert!(broker.terminate().success(), "clean exit on SIGTERM");
        } else {
            broker.kill();
        }
        broker = Broker::start_with(dir.path(), &args);
        let report = ok(&broker, &["describe", "--topic", "seg"]);
        let want = Some((SEGMENT_BYTES.to_string(), "DYNAMIC_TOPIC_CONFIG".to_string()));
        assert_eq!(described(&report, "internal.segment.bytes"), want, "{report}");
        produce_and_check_rolls(&broker, &partition_dir, round).await;
    }
}
