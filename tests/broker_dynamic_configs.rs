//! Issue 12, dynamic broker configs, against the real broker process (`--node-id 1`):
//! IncrementalAlterConfigs on BROKER `1` and on the cluster default (`""`) change settings
//! without a restart; DescribeConfigs shows the sources in Kafka's precedence (per-broker,
//! cluster default, static, default) with the synonyms in that order; a new
//! `log.segment.bytes` default reaches an existing topic without overrides (its DescribeConfigs
//! shows the inherited value and synonym, and its log rolls at the new size) and a per-broker
//! `log.retention.bytes` makes retention delete its old segments; read-only names, bad values
//! and unknown names get Kafka's codes; `validate_only` changes nothing; legacy AlterConfigs
//! replaces a resource's set; and after a restart the values are still in force (they come
//! from the metadata log). Bounded waits only.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{record, Broker, Wire};
use kafka_protocol::messages::alter_configs_request::{
    AlterConfigsResource as LegacyResource, AlterableConfig as LegacyConfig,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResourceResult;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use rskafka::client::partition::{Compression, OffsetAt, UnknownTopicHandling};

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const INVALID_REQUEST: i16 = 42;
const INVALID_CONFIG: i16 = 40;
const DYNAMIC_BROKER: i8 = 2;
const DYNAMIC_DEFAULT: i8 = 3;
const STATIC: i8 = 4;
const DEFAULT: i8 = 5;
/// Kafka 4's lowest `log.segment.bytes`.
const SEGMENT_BYTES: u64 = 1024 * 1024;
/// One produced batch: 10 records of ~10 KiB.
const BATCH_BYTES_MAX: u64 = 110 * 1024;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// IncrementalAlterConfigs of one resource; (error code, message).
fn alter(
    addr: &str,
    kind: i8,
    name: &str,
    ops: &[(&str, i8, Option<&str>)],
    validate_only: bool,
) -> (i16, Option<String>) {
    let configs = ops
        .iter()
        .map(|(k, op, v)| {
            AlterableConfig::default()
                .with_name(s(k))
                .with_config_operation(*op)
                .with_value(v.map(s))
        })
        .collect();
    let req = IncrementalAlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(s(name))
            .with_configs(configs)]);
    let resp: IncrementalAlterConfigsResponse =
        Wire::connect(addr).call(ApiKey::IncrementalAlterConfigs, 1, &req);
    let r = &resp.responses[0];
    (r.error_code, r.error_message.as_ref().map(ToString::to_string))
}

fn set_ok(addr: &str, name: &str, key: &str, value: &str) {
    let answer = alter(addr, RESOURCE_BROKER, name, &[(key, OP_SET, Some(value))], false);
    assert_eq!(answer, (0, None), "set {key}={value} on broker {name:?}");
}

/// DescribeConfigs (v4, with synonyms) of one resource.
fn describe(addr: &str, kind: i8, name: &str) -> Vec<DescribeConfigsResourceResult> {
    let req = DescribeConfigsRequest::default().with_include_synonyms(true).with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(s(name))
            .with_configuration_keys(None),
    ]);
    let resp: DescribeConfigsResponse = Wire::connect(addr).call(ApiKey::DescribeConfigs, 4, &req);
    let result = &resp.results[0];
    assert_eq!(result.error_code, 0, "{:?}", result.error_message);
    result.configs.clone()
}

/// (value, source, synonyms as (name, value, source)) of one described config.
type Described = (Option<String>, i8, Vec<(String, Option<String>, i8)>);

fn entry(configs: &[DescribeConfigsResourceResult], name: &str) -> Described {
    let c = configs.iter().find(|c| c.name.as_str() == name).unwrap_or_else(|| panic!("{name}"));
    let synonyms = c
        .synonyms
        .iter()
        .map(|y| (y.name.to_string(), y.value.as_ref().map(ToString::to_string), y.source))
        .collect();
    (c.value.as_ref().map(ToString::to_string), c.config_source, synonyms)
}

fn syn(name: &str, value: &str, source: i8) -> (String, Option<String>, i8) {
    (name.to_string(), Some(value.to_string()), source)
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

/// The name of the newest `.log` segment in `dir` (its base offset, zero-padded).
fn newest_segment(dir: &Path) -> String {
    std::fs::read_dir(dir)
        .expect("partition dir")
        .map(|e| e.expect("dir entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .max()
        .expect("a segment")
}

/// Produces `batches` batches of 10 records of ~10 KiB to `topic`-0.
async fn produce(broker: &Broker, topic: &str, batches: usize) {
    let client = broker.client().await;
    let pc = client.partition_client(topic, 0, UnknownTopicHandling::Retry).await.expect("pc");
    let pad = "x".repeat(10 * 1024);
    for b in 0..batches {
        let records = (0..10).map(|i| record(&format!("{b}-{i}-{pad}"))).collect();
        pc.produce(records, Compression::NoCompression).await.expect("produce");
    }
}

async fn earliest(broker: &Broker, topic: &str) -> i64 {
    let client = broker.client().await;
    let pc = client.partition_client(topic, 0, UnknownTopicHandling::Retry).await.expect("pc");
    pc.get_offset(OffsetAt::Earliest).await.expect("earliest")
}

const ARGS: &[&str] = &[
    "--shards",
    "1",
    "--node-id",
    "1",
    "--log-cleaner-backoff-ms",
    "20000",
    "--log-retention-check-interval-ms",
    "300",
];

#[tokio::test]
async fn dynamic_broker_configs_apply_live_and_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut broker = Broker::start_with(dir.path(), ARGS);
    let addr = broker.addr.clone();
    Wire::connect(&addr).create_topic("dyn", 1, &[]);
    produce(&broker, "dyn", 3).await;
    let partition_dir = dir.path().join("dyn-0");
    assert_eq!(log_sizes(&partition_dir).len(), 1, "one segment under the 1 GiB default");

    // Precedence: per-broker > cluster default > static > default, with synonyms in order.
    set_ok(&addr, "", "log.cleaner.backoff.ms", "1000");
    let (value, source, synonyms) =
        entry(&describe(&addr, RESOURCE_BROKER, "1"), "log.cleaner.backoff.ms");
    assert_eq!((value.as_deref(), source), (Some("1000"), DYNAMIC_DEFAULT));
    let name = "log.cleaner.backoff.ms";
    let expected_default = vec![
        syn(name, "1000", DYNAMIC_DEFAULT),
        syn(name, "20000", STATIC),
        syn(name, "15000", DEFAULT),
    ];
    assert_eq!(synonyms, expected_default);
    set_ok(&addr, "1", "log.cleaner.backoff.ms", "500");
    let configs = describe(&addr, RESOURCE_BROKER, "1");
    let (value, source, synonyms) = entry(&configs, name);
    assert_eq!((value.as_deref(), source), (Some("500"), DYNAMIC_BROKER));
    assert_eq!(synonyms[0], syn(name, "500", DYNAMIC_BROKER));
    assert_eq!(synonyms[1..], expected_default[..]);
    let read_only = |n: &str| configs.iter().find(|c| c.name.as_str() == n).expect(n).read_only;
    assert!(!read_only(name) && !read_only("log.retention.ms") && read_only("num.partitions"));
    assert!(read_only("log.retention.hours"), "Kafka's coarse synonyms are read-only");
    // The default resource lists the cluster defaults only, without per-broker values.
    let defaults = describe(&addr, RESOURCE_BROKER, "");
    assert_eq!(defaults.len(), 1);
    assert_eq!(entry(&defaults, name), (Some("1000".into()), DYNAMIC_DEFAULT, expected_default));

    // A new log.segment.bytes default reaches the existing topic live.
    set_ok(&addr, "", "log.segment.bytes", &SEGMENT_BYTES.to_string());
    let (value, source, synonyms) = entry(&describe(&addr, RESOURCE_TOPIC, "dyn"), "segment.bytes");
    assert_eq!((value, source), (Some(SEGMENT_BYTES.to_string()), DYNAMIC_DEFAULT));
    let seg = "log.segment.bytes";
    assert_eq!(
        synonyms,
        [syn(seg, &SEGMENT_BYTES.to_string(), DYNAMIC_DEFAULT), syn(seg, "1073741824", DEFAULT)]
    );
    produce(&broker, "dyn", 25).await;
    let sizes = log_sizes(&partition_dir);
    assert!(sizes.len() >= 3, "rolled at the new size: {sizes:?}");
    let sealed = &sizes[..sizes.len() - 1];
    let filled = |s: &u64| *s <= SEGMENT_BYTES && *s + BATCH_BYTES_MAX > SEGMENT_BYTES;
    assert!(sealed.iter().all(filled), "sealed segments filled to 1 MiB: {sizes:?}");

    // A per-broker log.retention.bytes makes retention delete the oldest segments.
    set_ok(&addr, "1", "log.retention.bytes", &SEGMENT_BYTES.to_string());
    let (_, source, _) = entry(&describe(&addr, RESOURCE_TOPIC, "dyn"), "retention.bytes");
    assert_eq!(source, DYNAMIC_BROKER);
    let deadline = Instant::now() + Duration::from_secs(20);
    while earliest(&broker, "dyn").await == 0 {
        assert!(Instant::now() < deadline, "retention did not apply the dynamic default");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    refusals(&addr);

    // After a restart the dynamic values are still in force (replayed from the metadata log).
    broker.terminate();
    let broker = Broker::start_with(dir.path(), ARGS);
    let addr = broker.addr.clone();
    let configs = describe(&addr, RESOURCE_BROKER, "1");
    assert_eq!(entry(&configs, name).0.as_deref(), Some("500"));
    assert_eq!(entry(&configs, "log.segment.bytes").1, DYNAMIC_DEFAULT);
    assert_eq!(entry(&configs, "log.retention.bytes").1, DYNAMIC_BROKER);
    let topic = describe(&addr, RESOURCE_TOPIC, "dyn");
    assert_eq!(entry(&topic, "segment.bytes").0, Some(SEGMENT_BYTES.to_string()));
    // Retention (1 MiB) deletes old segments meanwhile, so count new segments, not files.
    let before = newest_segment(&partition_dir);
    produce(&broker, "dyn", 12).await;
    assert!(newest_segment(&partition_dir) > before, "still rolls at 1 MiB after the restart");

    // Legacy AlterConfigs replaces the default resource's whole set.
    let req = AlterConfigsRequest::default().with_resources(vec![LegacyResource::default()
        .with_resource_type(RESOURCE_BROKER)
        .with_resource_name(s(""))
        .with_configs(vec![LegacyConfig::default()
            .with_name(s("log.cleaner.backoff.ms"))
            .with_value(Some(s("2000")))])]);
    let resp: AlterConfigsResponse = Wire::connect(&addr).call(ApiKey::AlterConfigs, 2, &req);
    assert_eq!(resp.responses[0].error_code, 0, "{:?}", resp.responses[0].error_message);
    let defaults = describe(&addr, RESOURCE_BROKER, "");
    let names: Vec<&str> = defaults.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["log.cleaner.backoff.ms"], "log.segment.bytes dropped from the set");
    let topic = describe(&addr, RESOURCE_TOPIC, "dyn");
    assert_eq!(entry(&topic, "segment.bytes").1, DEFAULT);
}

/// Kafka's answers to refused changes, and `validate_only`.
fn refusals(addr: &str) {
    let one = |name: &str, key: &str, value: &str| {
        alter(addr, RESOURCE_BROKER, name, &[(key, OP_SET, Some(value))], false)
    };
    let (code, message) = one("1", "num.partitions", "3");
    assert_eq!(code, INVALID_REQUEST);
    let message = message.unwrap_or_default();
    assert!(message.contains("Cannot update these configs dynamically"), "{message}");
    let (code, message) = one("", "log.cleaner.backoff.ms", "abc");
    assert_eq!(code, INVALID_REQUEST, "Kafka answers INVALID_REQUEST (KAFKA-13609)");
    assert_eq!(
        message.as_deref(),
        Some(
            "Invalid value abc for configuration log.cleaner.backoff.ms: Not a number of type LONG"
        )
    );
    assert_eq!(one("", "no.such.setting", "1").0, INVALID_CONFIG);
    let (code, message) = one("7", "log.cleaner.backoff.ms", "1");
    assert_eq!(code, INVALID_REQUEST);
    assert!(message.unwrap_or_default().contains("Unexpected broker id"));
    // The replication throttles are accepted and described.
    set_ok(addr, "", "leader.replication.throttled.rate", "10485760");
    let (code, _) = one("", "follower.replication.throttled.rate", "-1");
    assert_eq!(code, INVALID_REQUEST, "below its range");
    let configs = describe(addr, RESOURCE_BROKER, "1");
    let throttle = entry(&configs, "leader.replication.throttled.rate");
    assert_eq!((throttle.0.as_deref(), throttle.1), (Some("10485760"), DYNAMIC_DEFAULT));
    let answer = alter(
        addr,
        RESOURCE_BROKER,
        "",
        &[("leader.replication.throttled.rate", OP_DELETE, None)],
        false,
    );
    assert_eq!(answer.0, 0);
    // validate_only answers as a real change would and changes nothing.
    let ops = [("log.roll.ms", OP_SET, Some("60000"))];
    assert_eq!(alter(addr, RESOURCE_BROKER, "", &ops, true).0, 0);
    let configs = describe(addr, RESOURCE_BROKER, "1");
    assert_eq!(entry(&configs, "log.roll.ms").1, DEFAULT);
    assert_eq!(entry(&configs, "leader.replication.throttled.rate").1, DEFAULT);
}
