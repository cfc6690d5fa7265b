//! Issue 18, `controller_mutation_rate` (KIP-599) against the real broker with raw wire
//! requests: a client with 2 partition mutations/s (burst 2 × 2 windows = 4) creates a
//! 10-partition topic (allowed: the bucket was not negative), then its next CreateTopics v7,
//! CreatePartitions v3 and DeleteTopics v6 are refused with THROTTLING_QUOTA_EXCEEDED and a
//! `throttle_time_ms`, and nothing is created or deleted; its CreateTopics v5 (before KIP-599)
//! is accepted but answered late; a client without the quota is not held. And
//! `request_percentage`: a client flooding Metadata is held by muting, another is not.

mod common;

use std::time::{Duration, Instant};

use common::{Broker, Wire};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const THROTTLING_QUOTA_EXCEEDED: i16 = 89;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn create(wire: &mut Wire, version: i16, name: &str, partitions: i32) -> CreateTopicsResponse {
    let topic = CreatableTopic::default()
        .with_name(TopicName(s(name)))
        .with_num_partitions(partitions)
        .with_replication_factor(1);
    let req = CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(30_000);
    wire.call(ApiKey::CreateTopics, version, &req)
}

fn exists(addr: &str, name: &str) -> bool {
    let req = MetadataRequest::default().with_topics(None);
    let resp: MetadataResponse = Wire::connect(addr).call(ApiKey::Metadata, 9, &req);
    resp.topics.iter().any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == name))
}

#[test]
fn mutation_rate_refuses_new_versions_and_delays_old_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flags = ["--shards", "2", "--quota-window-num", "2", "--quota-window-size-seconds", "1"];
    let broker = Broker::start_with(dir.path(), &flags);
    let addr = &broker.addr;
    let entity =
        EntityData::default().with_entity_type(s("client-id")).with_entity_name(Some(s("mut")));
    let op = OpData::default().with_key(s("controller_mutation_rate")).with_value(2.0);
    let req = AlterClientQuotasRequest::default()
        .with_entries(vec![EntryData::default().with_entity(vec![entity]).with_ops(vec![op])]);
    let resp: AlterClientQuotasResponse =
        Wire::connect(addr).call(ApiKey::AlterClientQuotas, 1, &req);
    assert_eq!(resp.entries[0].error_code, 0, "{:?}", resp.entries[0].error_message);

    let mut wire = Wire::connect_as(addr, "mut");
    let first = create(&mut wire, 7, "mut-a", 10);
    assert_eq!(first.topics[0].error_code, 0, "the first request goes through");

    let refused = create(&mut wire, 7, "mut-b", 1);
    eprintln!("CreateTopics v7 over quota: throttle_time_ms {}", refused.throttle_time_ms);
    assert_eq!(refused.topics[0].error_code, THROTTLING_QUOTA_EXCEEDED);
    assert!(refused.throttle_time_ms > 0);
    assert!(!exists(addr, "mut-b"), "a refused topic is not created");

    let req = CreatePartitionsRequest::default()
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(TopicName(s("mut-a")))
            .with_count(12)])
        .with_timeout_ms(30_000);
    let resp: CreatePartitionsResponse = wire.call(ApiKey::CreatePartitions, 3, &req);
    assert_eq!(resp.results[0].error_code, THROTTLING_QUOTA_EXCEEDED);
    assert!(resp.throttle_time_ms > 0);

    let req = DeleteTopicsRequest::default()
        .with_topics(vec![DeleteTopicState::default().with_name(Some(TopicName(s("mut-a"))))])
        .with_timeout_ms(30_000);
    let resp: DeleteTopicsResponse = wire.call(ApiKey::DeleteTopics, 6, &req);
    assert_eq!(resp.responses[0].error_code, THROTTLING_QUOTA_EXCEEDED);
    assert!(exists(addr, "mut-a"), "a refused delete deletes nothing");

    // Before KIP-599 (CreateTopics v5): accepted, answered once the bucket refills.
    let start = Instant::now();
    let old = create(&mut wire, 5, "mut-c", 1);
    let waited = start.elapsed();
    eprintln!("CreateTopics v5 over quota answered after {waited:?}");
    assert_eq!(old.topics[0].error_code, 0, "an old version is never refused");
    assert!(waited > Duration::from_millis(1000), "answered late: {waited:?}");

    let mut free = Wire::connect_as(addr, "mut-free");
    let start = Instant::now();
    assert_eq!(create(&mut free, 7, "mut-d", 10).topics[0].error_code, 0);
    assert_eq!(create(&mut free, 7, "mut-e", 10).topics[0].error_code, 0);
    eprintln!("client without a quota: two creates in {:?}", start.elapsed());
}

/// Metadata requests back to back as `client` for `secs`: requests answered per second, and
/// the largest `throttle_time_ms` the responses carried.
fn metadata_flood(addr: &str, client: &'static str, secs: f64) -> (f64, i32) {
    let mut wire = Wire::connect_as(addr, client);
    let req = MetadataRequest::default().with_topics(None);
    let start = Instant::now();
    let mut n = 0u32;
    let mut throttle_ms_max = 0;
    while start.elapsed().as_secs_f64() < secs {
        let resp: MetadataResponse = wire.call(ApiKey::Metadata, 9, &req);
        throttle_ms_max = throttle_ms_max.max(resp.throttle_time_ms);
        n += 1;
    }
    (f64::from(n) / start.elapsed().as_secs_f64(), throttle_ms_max)
}

/// `request_percentage`: a client flooding Metadata with 1 % of a core is held far below
/// what it does unthrottled (muting alone: this client does not look at `throttle_time_ms`,
/// which its responses carry all the same, KIP-219), while another client flooding at the
/// same time is not.
#[test]
fn request_percentage_holds_a_flooding_client_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flags = ["--shards", "1", "--quota-window-num", "2", "--quota-window-size-seconds", "1"];
    let broker = Broker::start_with(dir.path(), &flags);
    let addr = broker.addr.clone();
    Wire::connect(&addr).create_topic("rp-t", 4, &[]);
    let (before, unthrottled_ms) = metadata_flood(&addr, "rp-slow", 2.0);
    assert_eq!(unthrottled_ms, 0, "no quota yet, no throttle time");
    let entity =
        EntityData::default().with_entity_type(s("client-id")).with_entity_name(Some(s("rp-slow")));
    let op = OpData::default().with_key(s("request_percentage")).with_value(1.0);
    let req = AlterClientQuotasRequest::default()
        .with_entries(vec![EntryData::default().with_entity(vec![entity]).with_ops(vec![op])]);
    let resp: AlterClientQuotasResponse =
        Wire::connect(&addr).call(ApiKey::AlterClientQuotas, 1, &req);
    assert_eq!(resp.entries[0].error_code, 0, "{:?}", resp.entries[0].error_message);
    let free_addr = addr.clone();
    let free = std::thread::spawn(move || metadata_flood(&free_addr, "rp-free", 4.0));
    let (slow, slow_throttle_ms) = metadata_flood(&addr, "rp-slow", 4.0);
    let (free, free_throttle_ms) = free.join().expect("free flooder");
    eprintln!(
        "Metadata/s: rp-slow {before:.0} unthrottled, {slow:.0} at request_percentage=1 \
         (throttle_time_ms up to {slow_throttle_ms}); rp-free alongside {free:.0}"
    );
    assert!(slow_throttle_ms > 0, "the throttled client's responses say so");
    assert_eq!(free_throttle_ms, 0, "the other client's responses carry no throttle");
    assert!(slow < before / 3.0, "the flooding client is held: {slow:.0} vs {before:.0}");
    assert!(free > slow * 3.0, "the other client is not: {free:.0} vs {slow:.0}");
}
