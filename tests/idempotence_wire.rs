//! Idempotent produce through raw Kafka requests against the real binary: a duplicate sent by
//! hand gets the original base offset back and is not appended; a sequence gap gets
//! OUT_OF_ORDER_SEQUENCE_NUMBER, an old epoch INVALID_PRODUCER_EPOCH, an epoch bump from 0
//! works; DescribeProducers reports the producer; and the window survives a SIGKILL (replay
//! of the log tail) and a clean restart (snapshot).

mod common;

use bytes::{Bytes, BytesMut};
use common::{Broker, Wire};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeProducersResponse, InitProducerIdRequest,
    InitProducerIdResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use shardlog::storage::batch::recompute_crc;
use shardlog::storage::records::build_simple_batch;

const TOPIC: &str = "idem";

/// A batch of `count` records from producer `pid`/`epoch` starting at sequence `seq`.
fn batch(pid: i64, epoch: i16, seq: i32, count: usize) -> Bytes {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    let mut b = BytesMut::from(&build_simple_batch(count, 16, now)[..]);
    b[43..51].copy_from_slice(&pid.to_be_bytes());
    b[51..53].copy_from_slice(&epoch.to_be_bytes());
    b[53..57].copy_from_slice(&seq.to_be_bytes());
    recompute_crc(&mut b);
    b.freeze()
}

/// Produces `records` (acks=all, v9) and returns (error code, base offset).
fn produce(w: &mut Wire, records: Bytes) -> (i16, i64) {
    let part = PartitionProduceData::default().with_index(0).with_records(Some(records));
    let topic = TopicProduceData::default()
        .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
        .with_partition_data(vec![part]);
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![topic]);
    let resp: ProduceResponse = w.call(ApiKey::Produce, 9, &req);
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

fn log_end(w: &mut Wire) -> i64 {
    w.fetch(TOPIC, 0, 0).high_watermark
}

fn describe(w: &mut Wire) -> Vec<(i64, i32, i32)> {
    let req = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
        .with_partition_indexes(vec![0, 7])]);
    let resp: DescribeProducersResponse = w.call(ApiKey::DescribeProducers, 0, &req);
    let parts = &resp.topics[0].partitions;
    assert_eq!(parts[1].error_code, 3, "partition 7 does not exist");
    assert_eq!(parts[0].error_code, 0);
    parts[0]
        .active_producers
        .iter()
        .map(|p| (p.producer_id.0, p.producer_epoch, p.last_sequence))
        .collect()
}

#[test]
fn duplicates_are_answered_with_the_original_offset_and_not_appended() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut broker = Broker::start(dir.path());
    let mut w = Wire::connect(&broker.addr);
    w.create_topic(TOPIC, 1, &[]);
    let init: InitProducerIdResponse = w.call(
        ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000),
    );
    assert_eq!(init.error_code, 0);
    let (pid, epoch) = (init.producer_id.0, init.producer_epoch);

    let first = batch(pid, epoch, 0, 3);
    assert_eq!(produce(&mut w, first.clone()), (0, 0));
    assert_eq!(produce(&mut w, batch(pid, epoch, 3, 2)), (0, 3));
    // The retry of the first batch: no error, its original offset, nothing appended.
    assert_eq!(produce(&mut w, first.clone()), (0, 0));
    assert_eq!(produce(&mut w, batch(pid, epoch, 3, 2)), (0, 3));
    assert_eq!(log_end(&mut w), 5);
    // A gap in sequence; a different length at a retained start.
    assert_eq!(produce(&mut w, batch(pid, epoch, 6, 1)).0, 45);
    assert_eq!(produce(&mut w, batch(pid, epoch, 3, 1)).0, 45);
    assert_eq!(log_end(&mut w), 5);
    assert_eq!(describe(&mut w), vec![(pid, i32::from(epoch), 4)]);

    // SIGKILL: the window is rebuilt from the log tail.
    broker.kill();
    let mut broker = Broker::start(dir.path());
    let mut w = Wire::connect(&broker.addr);
    assert_eq!(produce(&mut w, first.clone()), (0, 0));
    assert_eq!(produce(&mut w, batch(pid, epoch, 5, 1)), (0, 5));
    assert_eq!(log_end(&mut w), 6);
    // KIP-360 epoch bump: the new epoch starts at 0; the old one is then fenced.
    assert_eq!(produce(&mut w, batch(pid, epoch + 1, 4, 1)).0, 45);
    assert_eq!(produce(&mut w, batch(pid, epoch + 1, 0, 2)), (0, 6));
    assert_eq!(produce(&mut w, batch(pid, epoch, 6, 1)).0, 47);
    assert_eq!(produce(&mut w, first).0, 47);
    // A producer without state on this partition is accepted at any sequence.
    assert_eq!(produce(&mut w, batch(pid + 1, 0, 1234, 1)), (0, 8));

    // Clean restart: the snapshot written at close carries the window.
    broker.terminate();
    let broker = Broker::start(dir.path());
    let mut w = Wire::connect(&broker.addr);
    assert!(dir.path().join("idem-0/00000000000000000009.snapshot").exists());
    assert_eq!(produce(&mut w, batch(pid, epoch + 1, 0, 2)), (0, 6));
    assert_eq!(produce(&mut w, batch(pid + 1, 0, 1234, 1)), (0, 8));
    assert_eq!(log_end(&mut w), 9);
    let mut producers = describe(&mut w);
    producers.sort_unstable();
    assert_eq!(producers, vec![(pid, i32::from(epoch) + 1, 1), (pid + 1, 0, 1234)]);
}
