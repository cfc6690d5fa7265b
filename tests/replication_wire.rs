//! A follower's Fetch against a real single-node broker. The controller places replicas only
//! on this node until the cluster work lands, so no other broker id is a replica: a replica
//! fetch gets Kafka 4.1's answer for "not in the replica set" (UNKNOWN_LEADER_EPOCH when the
//! request names the current leader epoch, NOT_LEADER_OR_FOLLOWER when it does not), in
//! every request shape (replica_id before v15, replica_state from v15), while consumers'
//! fetches on the same partition are served as before. The accepted path is tested at the
//! partition level (`replication_leader`).

mod common;

use common::{Broker, Wire};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

const NOT_LEADER_OR_FOLLOWER: i16 = ResponseError::NotLeaderOrFollower.code();
const UNKNOWN_LEADER_EPOCH: i16 = ResponseError::UnknownLeaderEpoch.code();

/// Topic id and partition 0's leader epoch, from Metadata v12.
fn topic_meta(wire: &mut Wire, topic: &str) -> (Uuid, i32) {
    let req = MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.to_string()))))]));
    let answer: MetadataResponse = wire.call(ApiKey::Metadata, 12, &req);
    let t = &answer.topics[0];
    (t.topic_id, t.partitions[0].leader_epoch)
}

/// Produces `values` to partition 0 of `topic` with a real client (rskafka).
fn produce(broker: &Broker, topic: &str, values: &[&str]) {
    use rskafka::client::partition::{Compression, UnknownTopicHandling};
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = broker.client().await;
        let pc = client.partition_client(topic, 0, UnknownTopicHandling::Retry).await.unwrap();
        let records = values.iter().map(|v| common::record(v)).collect();
        pc.produce(records, Compression::NoCompression).await.unwrap();
    });
}

fn replica_fetch(
    wire: &mut Wire,
    version: i16,
    (topic, id): (&str, Uuid),
    replica: i32,
    current_leader_epoch: i32,
) -> i16 {
    let part = FetchPartition::default()
        .with_partition(0)
        .with_fetch_offset(0)
        .with_current_leader_epoch(current_leader_epoch)
        .with_partition_max_bytes(1 << 20);
    let mut t = FetchTopic::default().with_partitions(vec![part]);
    if version >= 13 {
        t.topic_id = id;
    } else {
        t.topic = TopicName(StrBytes::from_string(topic.to_string()));
    }
    let mut req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![t]);
    if version >= 15 {
        req.replica_state =
            ReplicaState::default().with_replica_id(BrokerId(replica)).with_replica_epoch(1);
    } else {
        req.replica_id = BrokerId(replica);
    }
    let answer: FetchResponse = wire.call(ApiKey::Fetch, version, &req);
    let p = &answer.responses[0].partitions[0];
    if p.error_code == 0 {
        assert!(p.records.as_ref().is_some_and(|r| !r.is_empty()));
    }
    p.error_code
}

#[test]
fn a_fetch_from_a_non_replica_gets_kafkas_error() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start_with(dir.path(), &["--shards", "2"]);
    let mut wire = Wire::connect(&broker.addr);
    wire.create_topic("r", 1, &[]);
    produce(&broker, "r", &["a", "b"]);
    let (id, epoch) = topic_meta(&mut wire, "r");
    assert!(epoch >= 0);
    for version in [4, 11, 12, 13, 14, 15, 16, 18] {
        let named = version >= 9;
        let with_epoch = replica_fetch(&mut wire, version, ("r", id), 2, epoch);
        let want = if named { UNKNOWN_LEADER_EPOCH } else { NOT_LEADER_OR_FOLLOWER };
        assert_eq!(with_epoch, want, "v{version} with the leader epoch");
        let without = replica_fetch(&mut wire, version, ("r", id), 2, -1);
        assert_eq!(without, NOT_LEADER_OR_FOLLOWER, "v{version} without a leader epoch");
        // Consumers (replica id -1) on the same partition are served as before.
        let consumer = replica_fetch(&mut wire, version, ("r", id), -1, -1);
        assert_eq!(consumer, 0, "v{version} consumer fetch");
    }
    assert_eq!(wire.fetch("r", 0, 0).high_watermark, 2);
}

/// The follower fetcher over TCP (`replication::link::TcpLink`, Fetch v15 with replica
/// state) against the real broker, with a follower log of its own (DMA files in a temp dir):
/// the broker refuses replica 2, and the fetcher handles each refusal as Kafka's does:
/// UNKNOWN_LEADER_EPOCH and NOT_LEADER_OR_FOLLOWER delay the partition by the backoff
/// (FENCED_LEADER_EPOCH alone parks it until the metadata changes); nothing is appended. ListOffsets through the same link
/// returns the leader's log start and end.
#[test]
fn fetcher_over_tcp_handles_the_brokers_refusal() {
    use std::collections::BTreeMap;
    use std::rc::Rc;

    use shardlog::io::dma::DmaFileSystem;
    use shardlog::io::{probe_data_dir, run_local};
    use shardlog::replication::driver::{fetch_round, FollowerLog, LeaderLink};
    use shardlog::replication::fetcher::{Fetcher, FetcherConfig, PartitionState};
    use shardlog::replication::link::TcpLink;
    use shardlog::storage::{BatchCache, LogConfig, PartitionLog};
    use shardlog::types::{Epoch, NodeId, Offset, TopicPartition};

    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start_with(&dir.path().join("leader"), &["--shards", "2"]);
    let mut wire = Wire::connect(&broker.addr);
    wire.create_topic("f", 1, &[]);
    produce(&broker, "f", &["x", "y", "z"]);
    let (topic_id, epoch) = topic_meta(&mut wire, "f");
    let follower_dir = dir.path().join("follower");
    let addr = broker.addr.clone();
    run_local(async move {
        std::fs::create_dir_all(&follower_dir).unwrap();
        probe_data_dir(&follower_dir).await.unwrap();
        let cache = Rc::new(BatchCache::new(1 << 20));
        let log_dir = follower_dir.join("f-0");
        let fs = Rc::new(DmaFileSystem);
        let log = PartitionLog::open(fs, &log_dir, LogConfig::default(), cache).await.unwrap();
        let tp = TopicPartition::new("f", 0);
        let logs: BTreeMap<_, _> = [(tp.clone(), FollowerLog::new(Rc::new(log)))].into();
        let link = TcpLink::new(addr, NodeId(2), std::sync::Arc::default());
        let mut fetcher = Fetcher::new(FetcherConfig::new(NodeId(2), 1), NodeId(1));
        fetcher.add_partition(tp.clone(), topic_id, Epoch(epoch)).unwrap();
        let now = 1_000_000;
        let stats = fetch_round(&mut fetcher, &logs, &link, now).await.unwrap().unwrap();
        assert_eq!(stats.appended_batches, 0);
        let state = fetcher.partition(&tp).unwrap().state;
        assert!(matches!(state, PartitionState::Delayed { .. }), "{state:?}");
        // Without a leader epoch the broker answers NOT_LEADER_OR_FOLLOWER: retried after
        // the backoff (Kafka's fetcher), never appended.
        fetcher.add_partition(tp.clone(), topic_id, Epoch(-1)).unwrap();
        fetch_round(&mut fetcher, &logs, &link, now).await.unwrap();
        let state = fetcher.partition(&tp).unwrap().state;
        assert!(matches!(state, PartitionState::Delayed { .. }), "{state:?}");
        assert!(fetch_round(&mut fetcher, &logs, &link, now + 10).await.unwrap().is_none());
        assert_eq!(logs[&tp].log.log_end_offset(), Offset(0));
        assert_eq!(link.log_offsets(&tp).await.unwrap(), (Offset(0), Offset(3)));
    });
}
