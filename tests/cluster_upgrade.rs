//! A single-node data directory written before the controller quorum existed opens after the
//! upgrade (issue 13): the fixture `tests/fixtures/legacy-single-node` (see its README) is
//! copied, served by today's binary, and its topic, topic config and records are all there;
//! the old metadata log is imported once (renamed `.imported`) and a second start reads the
//! quorum's own store.

mod common;

use std::path::Path;

use common::{Broker, Wire};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{
    ApiKey, DescribeConfigsRequest, DescribeConfigsResponse, MetadataRequest, MetadataResponse,
};
use kafka_protocol::protocol::StrBytes;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn check(broker: &Broker) {
    let mut w = Wire::connect(&broker.addr);
    let m: MetadataResponse =
        w.call(ApiKey::Metadata, 12, &MetadataRequest::default().with_topics(None));
    let topic = m
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "legacy"))
        .expect("topic legacy survives the upgrade");
    assert_eq!(topic.partitions.len(), 3);
    for p in 0..3 {
        let answer = w.fetch("legacy", p, 0);
        assert_eq!(answer.error_code, 0, "partition {p}");
        let records: Vec<_> =
            common::split_batches(answer.records).into_iter().flat_map(|(r, _)| r).collect();
        assert_eq!(records.len(), 1, "partition {p} keeps its record");
        assert_eq!(records[0].key.as_deref(), Some(format!("k{p}").as_bytes()));
    }
    let req =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("legacy"))
            .with_configuration_keys(Some(vec![StrBytes::from_static_str("retention.ms")]))]);
    let d: DescribeConfigsResponse = w.call(ApiKey::DescribeConfigs, 4, &req);
    let value = d.results[0].configs[0].value.as_ref().map(|v| v.to_string());
    assert_eq!(value.as_deref(), Some("86400000"), "topic config survives");
}

#[test]
fn a_pre_quorum_single_node_data_dir_opens() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/legacy-single-node"),
        &data,
    );
    let mut b = Broker::start(&data);
    check(&b);
    let meta = data.join("__cluster_metadata-0");
    assert!(meta.join("00000000000000000000.log.imported").exists(), "old log kept, renamed");
    assert!(!meta.join("00000000000000000000.log").exists());
    b.terminate();
    // The second start reads the quorum's store, not the old log.
    let b = Broker::start(&data);
    check(&b);
}
