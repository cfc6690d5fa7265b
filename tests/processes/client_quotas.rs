//! Issue 18, client byte-rate quotas against the real broker process: a quota set with
//! AlterClientQuotas is described back and survives a restart; a producer whose client id
//! has a `producer_byte_rate` gets `throttle_time_ms > 0` and, held back only by the broker
//! muting its connection (this client does not wait on `throttle_time_ms` by itself), stays
//! near its quota over a few seconds, while another client id is not throttled; a reader
//! with a `consumer_byte_rate` likewise (throttled fetches are answered empty). Loose
//! bounds (within 2x), never a tight timed assertion.

use crate::common;

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use common::{Broker, Wire};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

const QUOTA_BYTES_PER_S: f64 = 100_000.0;
const TOPIC: &str = "quota-t";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// Kafka's ConfigCommand for `--entity-type clients --entity-name <client> --add-config
/// producer_byte_rate=<rate>`.
fn set_quota(addr: &str, client: &str, rate: f64) {
    let entity =
        EntityData::default().with_entity_type(s("client-id")).with_entity_name(Some(s(client)));
    let op = OpData::default().with_key(s("producer_byte_rate")).with_value(rate);
    let entry = EntryData::default().with_entity(vec![entity]).with_ops(vec![op]);
    let req = AlterClientQuotasRequest::default().with_entries(vec![entry]);
    let resp: AlterClientQuotasResponse =
        Wire::connect(addr).call(ApiKey::AlterClientQuotas, 1, &req);
    assert_eq!(resp.entries[0].error_code, 0, "{:?}", resp.entries[0].error_message);
}

/// The `producer_byte_rate` described for `client`, if any.
fn described_rate(addr: &str, client: &str) -> Option<f64> {
    let component = ComponentData::default()
        .with_entity_type(s("client-id"))
        .with_match_type(0)
        .with_match(Some(s(client)));
    let req =
        DescribeClientQuotasRequest::default().with_components(vec![component]).with_strict(true);
    let resp: DescribeClientQuotasResponse =
        Wire::connect(addr).call(ApiKey::DescribeClientQuotas, 1, &req);
    assert_eq!(resp.error_code, 0, "{:?}", resp.error_message);
    let entries = resp.entries.unwrap_or_default();
    entries.first()?.values.iter().find(|v| v.key.as_str() == "producer_byte_rate").map(|v| v.value)
}

/// Kafka's ConfigCommand `--add-config consumer_byte_rate=<rate>` for `client`.
fn set_fetch_quota(addr: &str, client: &str, rate: f64) {
    let entity =
        EntityData::default().with_entity_type(s("client-id")).with_entity_name(Some(s(client)));
    let op = OpData::default().with_key(s("consumer_byte_rate")).with_value(rate);
    let entry = EntryData::default().with_entity(vec![entity]).with_ops(vec![op]);
    let req = AlterClientQuotasRequest::default().with_entries(vec![entry]);
    let resp: AlterClientQuotasResponse =
        Wire::connect(addr).call(ApiKey::AlterClientQuotas, 1, &req);
    assert_eq!(resp.entries[0].error_code, 0, "{:?}", resp.entries[0].error_message);
}

/// Fetches (v11) from offset 0 onwards as `client` for `secs`: (record bytes received per
/// second, the largest throttle_time_ms seen, throttled responses that were empty).
fn fetch_for(addr: &str, client: &'static str, secs: u64) -> (f64, i32, usize) {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    let mut wire = Wire::connect_as(addr, client);
    let (start, mut offset, mut bytes, mut throttle_max, mut empty) =
        (Instant::now(), 0i64, 0usize, 0, 0);
    while start.elapsed() < Duration::from_secs(secs) {
        let part = FetchPartition::default()
            .with_partition(0)
            .with_fetch_offset(offset)
            .with_partition_max_bytes(1 << 20);
        let req = FetchRequest::default()
            .with_max_wait_ms(100)
            .with_min_bytes(1)
            .with_max_bytes(4 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(s(TOPIC)))
                .with_partitions(vec![part])]);
        let resp: FetchResponse = wire.call(ApiKey::Fetch, 11, &req);
        throttle_max = throttle_max.max(resp.throttle_time_ms);
        let Some(p) = resp.responses.first().and_then(|t| t.partitions.first()) else {
            assert!(resp.throttle_time_ms > 0, "only a throttled fetch is answered empty");
            empty += 1;
            continue;
        };
        assert_eq!(p.error_code, 0, "fetch as {client}");
        let records = p.records.clone().unwrap_or_default();
        bytes += records.len();
        if let Some((_, next)) = common::split_batches(records).last() {
            offset = *next;
        }
    }
    #[allow(clippy::cast_precision_loss)]
    let rate = bytes as f64 / start.elapsed().as_secs_f64();
    (rate, throttle_max, empty)
}

/// One uncompressed batch of one `len`-byte record.
fn batch(len: usize) -> Bytes {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(Bytes::from(vec![b'x'; len])),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, &[record], &options).expect("encode batch");
    buf.freeze()
}

/// Produces 10 kB requests back to back for `secs` as `client`: (bytes acknowledged per
/// second, the largest throttle_time_ms seen).
fn produce_for(addr: &str, client: &'static str, secs: u64) -> (f64, i32) {
    let mut wire = Wire::connect_as(addr, client);
    let part = PartitionProduceData::default().with_index(0).with_records(Some(batch(10_000)));
    let topic =
        TopicProduceData::default().with_name(TopicName(s(TOPIC))).with_partition_data(vec![part]);
    let req =
        ProduceRequest::default().with_acks(1).with_timeout_ms(5_000).with_topic_data(vec![topic]);
    let (start, mut bytes, mut throttle_max) = (Instant::now(), 0usize, 0);
    while start.elapsed() < Duration::from_secs(secs) {
        let resp: ProduceResponse = wire.call(ApiKey::Produce, 9, &req);
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(p.error_code, 0, "produce as {client}");
        bytes += 10_000;
        throttle_max = throttle_max.max(resp.throttle_time_ms);
    }
    #[allow(clippy::cast_precision_loss)]
    let rate = bytes as f64 / start.elapsed().as_secs_f64();
    (rate, throttle_max)
}

#[test]
fn producer_quota_throttles_its_client_only_and_survives_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Two 1 s samples: the rate settles within a second (Kafka's 11 would allow a 10 s burst).
    let flags = ["--shards", "1", "--quota-window-num", "2", "--quota-window-size-seconds", "1"];
    let mut broker = Broker::start_with(dir.path(), &flags);
    Wire::connect(&broker.addr).create_topic(TOPIC, 1, &[]);
    set_quota(&broker.addr, "quota-slow", QUOTA_BYTES_PER_S);
    assert_eq!(described_rate(&broker.addr, "quota-slow"), Some(QUOTA_BYTES_PER_S));
    assert_eq!(described_rate(&broker.addr, "quota-free"), None);

    let (slow_rate, slow_throttle) = produce_for(&broker.addr, "quota-slow", 4);
    eprintln!("quota-slow: {slow_rate:.0} B/s, max throttle {slow_throttle} ms");
    assert!(slow_throttle > 0, "the client over its quota is told to back off");
    assert!(
        slow_rate > QUOTA_BYTES_PER_S / 2.0 && slow_rate < QUOTA_BYTES_PER_S * 2.0,
        "rate {slow_rate:.0} B/s not near the {QUOTA_BYTES_PER_S} B/s quota"
    );
    let (free_rate, free_throttle) = produce_for(&broker.addr, "quota-free", 2);
    eprintln!("quota-free: {free_rate:.0} B/s, max throttle {free_throttle} ms");
    assert_eq!(free_throttle, 0, "a client without a quota is not throttled");
    assert!(free_rate > QUOTA_BYTES_PER_S * 2.0, "unthrottled client at {free_rate:.0} B/s");

    // consumer_byte_rate: the reader is held near its quota; data is refetched, not lost.
    set_fetch_quota(&broker.addr, "quota-reader", QUOTA_BYTES_PER_S * 2.0);
    let (read_rate, read_throttle, empty) = fetch_for(&broker.addr, "quota-reader", 3);
    eprintln!("quota-reader: {read_rate:.0} B/s, max throttle {read_throttle} ms, {empty} empty");
    assert!(read_throttle > 0 && empty > 0, "the reader over its quota is throttled");
    let read_quota = QUOTA_BYTES_PER_S * 2.0;
    assert!(
        read_rate > read_quota / 2.0 && read_rate < read_quota * 2.0,
        "fetch rate {read_rate:.0} B/s not near the {read_quota} B/s quota"
    );

    broker.terminate();
    let broker = Broker::start_with(dir.path(), &flags);
    assert_eq!(described_rate(&broker.addr, "quota-slow"), Some(QUOTA_BYTES_PER_S));
}
