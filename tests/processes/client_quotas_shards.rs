//! Issue 18, a client's quota shared accurately between shards (`quota::share`): on a real
//! `--shards 2` broker, a producer whose two connections both land on one shard and a
//! producer with one connection on each shard, each with `producer_byte_rate = 1 MiB/s`,
//! both produce as fast as the broker lets them for 24 s. Measured over the last 20 s (the
//! first windows' burst left out), each stays within 1.1 × its quota,
//! and the one whose connections share a shard gets more than the 0.5 an even split between
//! the shards would allow (on a quiet host both get 0.97-1.05 of it).
//! Where a connection landed is read from `/metrics` (`shardlog_shard_connections`); a
//! connection on the wrong shard is closed and another opened. The clients never wait on
//! `throttle_time_ms` themselves: the broker's muting alone holds them.

use crate::common;

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use common::Wire;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

const QUOTA_BYTES_PER_S: f64 = 1_048_576.0;
const RUN_SECS: u64 = 20;
/// Not measured: quota windows of 1 s, two of them sampled, let a client burst at first
/// (Kafka's quotas throttle after the fact); over the whole run that burst read as up to
/// 1.13-1.15 of the quota on a loaded host.
const WARMUP_SECS: u64 = 4;
const TOPIC: &str = "share-t";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn set_quota(addr: &str, client: &str) {
    let entity =
        EntityData::default().with_entity_type(s("client-id")).with_entity_name(Some(s(client)));
    let op = OpData::default().with_key(s("producer_byte_rate")).with_value(QUOTA_BYTES_PER_S);
    let entry = EntryData::default().with_entity(vec![entity]).with_ops(vec![op]);
    let req = AlterClientQuotasRequest::default().with_entries(vec![entry]);
    let resp: AlterClientQuotasResponse =
        Wire::connect(addr).call(ApiKey::AlterClientQuotas, 1, &req);
    assert_eq!(resp.entries[0].error_code, 0, "{:?}", resp.entries[0].error_message);
}

/// Open connections per shard, from `/metrics`.
fn shard_connections(admin: &str) -> [u64; 2] {
    let text = shardlog::top::http_get(admin, "/metrics").expect("GET /metrics");
    let mut out = [0; 2];
    for line in text.lines() {
        for (i, slot) in out.iter_mut().enumerate() {
            let prefix = format!("shardlog_shard_connections{{shard=\"{i}\"}} ");
            if let Some(v) = line.strip_prefix(&prefix) {
                *slot = v.trim().parse::<f64>().map_or(0, |v| v as u64);
            }
        }
    }
    out
}

/// Waits (up to 5 s) until `/metrics` shows `want` connections in all, then returns them.
fn settled(admin: &str, want: u64) -> [u64; 2] {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = shard_connections(admin);
        if now[0] + now[1] == want || Instant::now() > deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Opens connections as `client` until one lands on `shard`.
fn connect_on(addr: &str, admin: &str, client: &'static str, shard: usize) -> Wire {
    for _ in 0..40 {
        let before = shard_connections(admin);
        let total = before[0] + before[1];
        let wire = Wire::connect_as(addr, client);
        let after = settled(admin, total + 1);
        if after[shard] > before[shard] {
            return wire;
        }
        drop(wire);
        settled(admin, total);
    }
    panic!("no connection of {client} landed on shard {shard} in 40 tries");
}

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

/// Produces 10 kB requests back to back until `end`: bytes acknowledged after `from` (the
/// sustained rate; the first windows may take a burst before the broker mutes the client).
fn produce_until(mut wire: Wire, from: Instant, end: Instant) -> u64 {
    let part = PartitionProduceData::default().with_index(0).with_records(Some(batch(10_000)));
    let topic =
        TopicProduceData::default().with_name(TopicName(s(TOPIC))).with_partition_data(vec![part]);
    let req =
        ProduceRequest::default().with_acks(1).with_timeout_ms(5_000).with_topic_data(vec![topic]);
    let mut bytes = 0;
    while Instant::now() < end {
        let resp: ProduceResponse = wire.call(ApiKey::Produce, 9, &req);
        assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
        if Instant::now() >= from {
            bytes += 10_000;
        }
    }
    bytes
}

#[test]
fn a_clients_quota_is_met_whichever_shards_its_connections_use() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The harness's broker: ephemeral ports, killed when dropped (a panic included).
    let broker = common::Broker::start_with(
        dir.path(),
        &["--shards", "2", "--quota-window-num", "2", "--quota-window-size-seconds", "1"],
    );
    let (addr, admin) = (broker.addr.clone(), broker.admin_addr());
    // No fsync per produce: the clients must outrun the quota whatever the host's load (on
    // a loaded 2-core host fsynced 10 kB produces reached only 0.61 of it), and the quota,
    // not the disk, is what this test measures.
    Wire::connect(&addr).create_topic(TOPIC, 1, &[("flush.ms", "60000")]);
    set_quota(&addr, "share-one");
    set_quota(&addr, "share-both");
    settled(&admin, 0);
    let one =
        [connect_on(&addr, &admin, "share-one", 0), connect_on(&addr, &admin, "share-one", 0)];
    let both =
        [connect_on(&addr, &admin, "share-both", 0), connect_on(&addr, &admin, "share-both", 1)];
    let start = Instant::now();
    let from = start + Duration::from_secs(WARMUP_SECS);
    let end = from + Duration::from_secs(RUN_SECS);
    let spawn = |w: Wire| std::thread::spawn(move || produce_until(w, from, end));
    let [a, b] = one.map(spawn);
    let [c, d] = both.map(spawn);
    let one_bytes = a.join().unwrap() + b.join().unwrap();
    let both_bytes = c.join().unwrap() + d.join().unwrap();
    let secs = from.elapsed().as_secs_f64();
    drop(broker);
    #[allow(clippy::cast_precision_loss)]
    let rates = [("share-one", one_bytes as f64 / secs), ("share-both", both_bytes as f64 / secs)];
    for (client, rate) in rates {
        let ratio = rate / QUOTA_BYTES_PER_S;
        eprintln!("{client}: {rate:.0} B/s over {secs:.1} s = {ratio:.3} of its quota");
        // The quota held: a per-shard copy of the whole quota would give ~2.0.
        assert!(ratio <= 1.1, "{client} at {ratio:.3} of its quota");
        // Shared by demand: an even split would cap `share-one`, both of whose connections
        // are on shard 0, at 0.5 of the quota. The bound sits just above that cap, not near
        // 1.0, because the client itself may be too slow to reach the quota on a loaded host
        // (0.61-0.82 with a soak beside this binary's other tests; quiet, 0.97-1.05), and
        // `share-both` gets its whole quota either way, so it has no lower bound.
        if client == "share-one" {
            assert!(ratio > 0.55, "{client} at {ratio:.3}: its shard kept an even split");
        }
    }
}
