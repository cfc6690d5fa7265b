//! Kafka 4.1's version maxima against the real binary, through raw requests: ApiVersions
//! advertises them; Metadata answers with topic ids and by id; Produce v13 and Fetch
//! v13–v18 name topics by id (an unknown id gets UNKNOWN_TOPIC_ID); ListOffsets v10
//! answers every offset spec including latest tiered (-5); OffsetCommit/OffsetFetch v9;
//! DescribeGroups v6 (GROUP_ID_NOT_FOUND); ApiVersions v4.

mod common;

use bytes::{Bytes, BytesMut};
use common::{split_batches, Broker, Wire};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, DescribeGroupsRequest,
    DescribeGroupsResponse, FetchRequest, FetchResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, GroupId, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest,
    MetadataResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use uuid::Uuid;

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const UNKNOWN_TOPIC_ID: i16 = 100;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn batch(value: &str, timestamp: i64) -> Bytes {
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
        timestamp,
        key: None,
        value: Some(Bytes::from(value.to_string())),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, &[record], &options).expect("encode batch");
    buf.freeze()
}

/// The topic's id, from Metadata v12 by name.
fn topic_id(wire: &mut Wire, topic: &str) -> Uuid {
    let req = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(name(topic)))]))
        .with_allow_auto_topic_creation(false);
    let resp: MetadataResponse = wire.call(ApiKey::Metadata, 12, &req);
    let t = &resp.topics[0];
    assert_eq!(t.error_code, 0, "{topic}");
    assert!(!t.topic_id.is_nil(), "Metadata v10+ carries the topic id");
    t.topic_id
}

fn produce_by_id(id: Uuid, partition: i32, records: Bytes) -> ProduceRequest {
    let topic = TopicProduceData::default().with_topic_id(id).with_partition_data(vec![
        PartitionProduceData::default().with_index(partition).with_records(Some(records)),
    ]);
    ProduceRequest::default().with_acks(-1).with_timeout_ms(5_000).with_topic_data(vec![topic])
}

fn fetch_by_id(id: Uuid, partitions: &[i32]) -> FetchRequest {
    let parts = partitions
        .iter()
        .map(|&p| {
            FetchPartition::default()
                .with_partition(p)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)
        })
        .collect();
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default().with_topic_id(id).with_partitions(parts)])
}

#[test]
fn api_versions_advertise_kafka_4_1_maxima() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    let mut wire = Wire::connect(&broker.addr);
    let resp: ApiVersionsResponse =
        wire.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(resp.error_code, 0);
    let range = |api: ApiKey| {
        let k = resp.api_keys.iter().find(|k| k.api_key == api as i16).expect("advertised");
        (k.min_version, k.max_version)
    };
    assert_eq!(range(ApiKey::Produce), (0, 13));
    assert_eq!(range(ApiKey::Fetch), (4, 18));
    assert_eq!(range(ApiKey::ListOffsets), (1, 10));
    assert_eq!(range(ApiKey::Metadata), (0, 13));
    assert_eq!(range(ApiKey::OffsetCommit), (2, 9));
    assert_eq!(range(ApiKey::OffsetFetch), (1, 9));
    assert_eq!(range(ApiKey::DescribeGroups), (0, 6));
    assert_eq!(range(ApiKey::ApiVersions), (0, 4));
    let v4: ApiVersionsResponse = wire.call(ApiKey::ApiVersions, 4, &ApiVersionsRequest::default());
    assert_eq!((v4.error_code, v4.api_keys.len()), (0, resp.api_keys.len()), "v4 is served");
}

#[test]
fn produce_and_fetch_by_topic_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    let mut wire = Wire::connect(&broker.addr);
    wire.create_topic("ids", 2, &[]);
    let id = topic_id(&mut wire, "ids");

    // Metadata v12+ names a topic by id; an unknown id gets UNKNOWN_TOPIC_ID.
    let unknown = Uuid::new_v4();
    let req = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(None).with_topic_id(id),
        MetadataRequestTopic::default().with_name(None).with_topic_id(unknown),
    ]));
    let resp: MetadataResponse = wire.call(ApiKey::Metadata, 13, &req);
    assert_eq!(resp.topics[0].name.as_ref().map(|n| n.0.as_str()), Some("ids"));
    assert_eq!((resp.topics[0].error_code, resp.topics[0].topic_id), (0, id));
    assert_eq!(resp.topics[0].partitions.len(), 2);
    assert_eq!((resp.topics[1].error_code, resp.topics[1].topic_id), (UNKNOWN_TOPIC_ID, unknown));

    // Produce v13 by id: one batch per partition, answered by id.
    for (p, value) in [(0, "zero"), (1, "one"), (1, "two")] {
        let resp: ProduceResponse =
            wire.call(ApiKey::Produce, 13, &produce_by_id(id, p, batch(value, 1_000)));
        let t = &resp.responses[0];
        assert_eq!(t.topic_id, id, "answered by topic id");
        assert!(t.name.0.is_empty(), "no name at v13");
        assert_eq!(t.partition_responses[0].error_code, 0, "{value}");
    }
    let resp: ProduceResponse =
        wire.call(ApiKey::Produce, 13, &produce_by_id(unknown, 0, batch("lost", 1_000)));
    assert_eq!(resp.responses[0].topic_id, unknown);
    assert_eq!(resp.responses[0].partition_responses[0].error_code, UNKNOWN_TOPIC_ID);
    // A known id with an unknown partition is UNKNOWN_TOPIC_OR_PARTITION, as by name.
    let resp: ProduceResponse =
        wire.call(ApiKey::Produce, 13, &produce_by_id(id, 7, batch("lost", 1_000)));
    assert_eq!(resp.responses[0].partition_responses[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);
    // v12 still names topics.
    let by_name = TopicProduceData::default().with_name(name("ids")).with_partition_data(vec![
        PartitionProduceData::default().with_index(0).with_records(Some(batch("three", 1_000))),
    ]);
    let req = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![by_name]);
    let resp: ProduceResponse = wire.call(ApiKey::Produce, 12, &req);
    assert_eq!(resp.responses[0].name.0.as_str(), "ids");
    assert_eq!(resp.responses[0].partition_responses[0].base_offset, 1);

    // Fetch v13..=v18 by id returns the records, answered by id.
    for version in 13..=18 {
        let resp: FetchResponse = wire.call(ApiKey::Fetch, version, &fetch_by_id(id, &[0, 1]));
        assert_eq!(resp.error_code, 0);
        let t = &resp.responses[0];
        assert_eq!(t.topic_id, id, "v{version} answers by topic id");
        let values: Vec<Vec<String>> = t
            .partitions
            .iter()
            .map(|p| {
                assert_eq!(p.error_code, 0, "v{version} partition {}", p.partition_index);
                assert_eq!(p.current_leader.leader_id.0, -1, "no leader change to report");
                split_batches(p.records.clone().unwrap_or_default())
                    .into_iter()
                    .flat_map(|(records, _)| records)
                    .map(|r| String::from_utf8(r.value.unwrap_or_default()).expect("utf-8"))
                    .collect()
            })
            .collect();
        assert_eq!(values, vec![vec!["zero", "three"], vec!["one", "two"]], "v{version}");
        assert_eq!(
            (t.partitions[0].high_watermark, t.partitions[1].high_watermark),
            (2, 2),
            "v{version}"
        );
        assert!(resp.node_endpoints.is_empty());
    }

    // An unknown id: UNKNOWN_TOPIC_ID on each of its partitions, at once, the known
    // topic answered alongside.
    let mut req = fetch_by_id(id, &[1]);
    req.topics.push(fetch_by_id(unknown, &[0, 1]).topics.remove(0));
    req.max_wait_ms = 5_000;
    let started = std::time::Instant::now();
    let resp: FetchResponse = wire.call(ApiKey::Fetch, 17, &req);
    assert!(started.elapsed() < std::time::Duration::from_secs(4), "errors answer at once");
    assert_eq!(resp.responses[0].partitions[0].error_code, 0);
    assert_eq!(resp.responses[1].topic_id, unknown);
    let codes: Vec<i16> = resp.responses[1].partitions.iter().map(|p| p.error_code).collect();
    assert_eq!(codes, vec![UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_ID]);

    // v12 still names topics (and ignores ids).
    let by_name = FetchTopic::default().with_topic(name("ids")).with_partitions(vec![
        FetchPartition::default().with_partition(1).with_partition_max_bytes(1 << 20),
    ]);
    let req = FetchRequest::default().with_max_bytes(1 << 20).with_topics(vec![by_name]);
    let resp: FetchResponse = wire.call(ApiKey::Fetch, 12, &req);
    assert_eq!(resp.responses[0].topic.0.as_str(), "ids");
    assert_eq!(resp.responses[0].partitions[0].high_watermark, 2);
}

#[test]
fn list_offsets_v10_answers_every_spec() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    let mut wire = Wire::connect(&broker.addr);
    wire.create_topic("offsets", 1, &[]);
    let id = topic_id(&mut wire, "offsets");
    for ts in [1_000, 3_000, 2_000] {
        let resp: ProduceResponse =
            wire.call(ApiKey::Produce, 13, &produce_by_id(id, 0, batch("v", ts)));
        assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    }
    let list = |ts: i64| {
        let part = ListOffsetsPartition::default()
            .with_partition_index(0)
            .with_current_leader_epoch(0)
            .with_timestamp(ts);
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_timeout_ms(1_000)
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(name("offsets"))
                .with_partitions(vec![part])])
    };
    // (spec, timestamp, offset, leader epoch): earliest, latest, max timestamp, earliest
    // local (no tiering: earliest), latest tiered (no tiering: -1 as Kafka), by time.
    for (spec, ts, offset, epoch) in [
        (-2i64, -1i64, 0i64, 0i32),
        (-1, -1, 3, 0),
        (-3, 3_000, 1, 0),
        (-4, -1, 0, 0),
        (-5, -1, -1, -1),
        (1_500, 3_000, 1, 0),
    ] {
        for version in [8, 9, 10] {
            let resp: ListOffsetsResponse = wire.call(ApiKey::ListOffsets, version, &list(spec));
            let p = &resp.topics[0].partitions[0];
            assert_eq!(
                (p.error_code, p.timestamp, p.offset, p.leader_epoch),
                (0, ts, offset, epoch),
                "v{version} spec {spec}"
            );
        }
    }
    // A stale or future epoch is still checked at v10.
    let mut req = list(-1);
    req.topics[0].partitions[0].current_leader_epoch = 9;
    let resp: ListOffsetsResponse = wire.call(ApiKey::ListOffsets, 10, &req);
    assert_eq!(resp.topics[0].partitions[0].error_code, 75, "UNKNOWN_LEADER_EPOCH");
}

#[test]
fn offset_commit_and_fetch_v9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    let mut wire = Wire::connect(&broker.addr);
    wire.create_topic("commits", 2, &[]);
    // A simple (standalone) commit: generation -1, no member.
    let parts = (0..2)
        .map(|p| {
            OffsetCommitRequestPartition::default()
                .with_partition_index(p)
                .with_committed_offset(10 + i64::from(p))
                .with_committed_leader_epoch(0)
                .with_committed_metadata(Some(StrBytes::from_static_str("m")))
        })
        .collect();
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g9")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            OffsetCommitRequestTopic::default().with_name(name("commits")).with_partitions(parts),
            OffsetCommitRequestTopic::default().with_name(name("nope")).with_partitions(vec![
                OffsetCommitRequestPartition::default().with_committed_offset(1),
            ]),
        ]);
    // FindCoordinator first, as clients do: it creates the offsets topic.
    let find = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_static_str("g9"))
        .with_key_type(0);
    let found: FindCoordinatorResponse = wire.call(ApiKey::FindCoordinator, 3, &find);
    assert_eq!(found.error_code, 0);
    let resp: OffsetCommitResponse = wire.call(ApiKey::OffsetCommit, 9, &req);
    let codes: Vec<Vec<i16>> =
        resp.topics.iter().map(|t| t.partitions.iter().map(|p| p.error_code).collect()).collect();
    assert_eq!(codes, vec![vec![0, 0], vec![UNKNOWN_TOPIC_OR_PARTITION]]);

    let group = |id: &str, topics| {
        OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(StrBytes::from_string(id.to_string())))
            .with_member_epoch(-1)
            .with_topics(topics)
    };
    let wanted = OffsetFetchRequestTopics::default()
        .with_name(name("commits"))
        .with_partition_indexes(vec![1, 0]);
    let req = OffsetFetchRequest::default()
        .with_groups(vec![group("g9", Some(vec![wanted])), group("g9", None), group("other", None)])
        .with_require_stable(true);
    let resp: OffsetFetchResponse = wire.call(ApiKey::OffsetFetch, 9, &req);
    assert_eq!(resp.groups.len(), 3);
    for g in &resp.groups[..2] {
        assert_eq!(g.error_code, 0);
        let mut rows: Vec<(i32, i64, i32)> = g.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.committed_offset, p.committed_leader_epoch))
            .collect();
        rows.sort_unstable();
        assert_eq!(rows, vec![(0, 10, 0), (1, 11, 0)]);
    }
    assert!(resp.groups[2].topics.is_empty(), "a group without commits has none");

    // DescribeGroups: the standalone group exists (Empty); an unknown one is Dead, with
    // GROUP_ID_NOT_FOUND from v6 (KIP-1043) and no error before.
    let req = DescribeGroupsRequest::default().with_groups(vec![
        GroupId(StrBytes::from_static_str("g9")),
        GroupId(StrBytes::from_static_str("never")),
    ]);
    let resp: DescribeGroupsResponse = wire.call(ApiKey::DescribeGroups, 6, &req);
    let g = &resp.groups;
    assert_eq!((g[0].error_code, g[0].group_state.as_str()), (0, "Empty"));
    assert_eq!((g[1].error_code, g[1].group_state.as_str()), (69, "Dead"));
    assert_eq!(g[1].error_message.as_deref(), Some("Group never not found."));
    let resp: DescribeGroupsResponse = wire.call(ApiKey::DescribeGroups, 5, &req);
    assert_eq!((resp.groups[1].error_code, resp.groups[1].group_state.as_str()), (0, "Dead"));
}
