//! The group APIs against the real broker binary, spoken with raw Kafka requests so every
//! error path is reachable: the MEMBER_ID_REQUIRED round, generations, bad input (unknown
//! generation, unsupported protocol type, huge metadata, bad session timeout) answered
//! with Kafka's codes while the group stays intact, commits and fetches with leader
//! epoch and metadata, admin-style commits for an empty group, and lag through
//! `shardlog::cli::groups::describe`. Bounded: every socket read times out after 30 s.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use shardlog::protocol::blocking::BlockingConn;

const PORT: u16 = 39_150;
const TOPIC: &str = "gp-topic";
const GROUP: &str = "gp-group";

struct Broker {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_broker(port: u16) -> Broker {
    let dir = tempfile::tempdir().expect("tempdir");
    let child = Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--shards", "2"])
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--log-level", "warn"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn broker");
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "broker did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    Broker { child, _dir: dir }
}

/// `BlockingConn` with test-style failures (a broken call panics with its reason).
struct Conn(BlockingConn);

impl Conn {
    fn open(port: u16) -> Self {
        Self(BlockingConn::open(&format!("127.0.0.1:{port}"), "group-test").expect("connect"))
    }

    fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        req: &Req,
    ) -> Resp {
        self.0.call(api, version, req).unwrap_or_else(|e| panic!("{e}"))
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn create_topic(conn: &mut Conn, partitions: i32) {
    let topic = CreatableTopic::default()
        .with_name(TopicName(s(TOPIC)))
        .with_num_partitions(partitions)
        .with_replication_factor(1);
    let req = CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(10_000);
    let resp: CreateTopicsResponse = conn.call(ApiKey::CreateTopics, 4, &req);
    assert_eq!(resp.topics[0].error_code, 0, "create topic");
}

fn produce(conn: &mut Conn, partition: i32, count: i64) {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: i32::try_from(i).expect("seq") - 1,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::from(format!("v{i}"))),
            headers: Default::default(),
        })
        .collect();
    let mut batch = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut batch, records.iter(), &options).expect("encode");
    let data =
        PartitionProduceData::default().with_index(partition).with_records(Some(batch.freeze()));
    let topic =
        TopicProduceData::default().with_name(TopicName(s(TOPIC))).with_partition_data(vec![data]);
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![topic]);
    let resp: ProduceResponse = conn.call(ApiKey::Produce, 7, &req);
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0, "produce");
}

fn join(
    conn: &mut Conn,
    member: &str,
    protocol_type: &str,
    metadata: Bytes,
    session_ms: i32,
) -> JoinGroupResponse {
    let req = JoinGroupRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_session_timeout_ms(session_ms)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(member))
        .with_protocol_type(s(protocol_type))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(metadata)]);
    conn.call(ApiKey::JoinGroup, 7, &req)
}

fn heartbeat(conn: &mut Conn, member: &str, generation: i32) -> i16 {
    let req = HeartbeatRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_generation_id(generation)
        .with_member_id(s(member));
    let resp: HeartbeatResponse = conn.call(ApiKey::Heartbeat, 4, &req);
    resp.error_code
}

fn commit(conn: &mut Conn, member: &str, generation: i32, partition: i32, offset: i64) -> i16 {
    let part = OffsetCommitRequestPartition::default()
        .with_partition_index(partition)
        .with_committed_offset(offset)
        .with_committed_leader_epoch(3)
        .with_committed_metadata(Some(s("meta")));
    let topic = OffsetCommitRequestTopic::default()
        .with_name(TopicName(s(TOPIC)))
        .with_partitions(vec![part]);
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member))
        .with_topics(vec![topic]);
    let resp: OffsetCommitResponse = conn.call(ApiKey::OffsetCommit, 8, &req);
    resp.topics[0].partitions[0].error_code
}

fn fetch(conn: &mut Conn, partition: i32) -> (i64, i32, String) {
    let topic = OffsetFetchRequestTopic::default()
        .with_name(TopicName(s(TOPIC)))
        .with_partition_indexes(vec![partition]);
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_topics(Some(vec![topic]));
    let resp: OffsetFetchResponse = conn.call(ApiKey::OffsetFetch, 7, &req);
    assert_eq!(resp.error_code, 0);
    let p = &resp.topics[0].partitions[0];
    (
        p.committed_offset,
        p.committed_leader_epoch,
        p.metadata.as_ref().map(ToString::to_string).unwrap_or_default(),
    )
}

/// Consumer-protocol assignment of partitions 0 and 1 of the topic.
fn assignment() -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    buf.put_i32(1);
    buf.put_i16(i16::try_from(TOPIC.len()).expect("len"));
    buf.put_slice(TOPIC.as_bytes());
    buf.put_i32(2);
    buf.put_i32(0);
    buf.put_i32(1);
    buf.put_i32(-1);
    buf.freeze()
}

#[test]
fn group_protocol_error_paths_commits_and_lag() {
    let _broker = start_broker(PORT);
    let mut boot = Conn::open(PORT);
    create_topic(&mut boot, 2);
    let found: FindCoordinatorResponse = boot.call(
        ApiKey::FindCoordinator,
        3,
        &FindCoordinatorRequest::default().with_key(s(GROUP)),
    );
    assert_eq!((found.error_code, found.port), (0, i32::from(PORT)));
    let batched: FindCoordinatorResponse = boot.call(
        ApiKey::FindCoordinator,
        4,
        &FindCoordinatorRequest::default().with_coordinator_keys(vec![s("a"), s("b")]),
    );
    assert_eq!(batched.coordinators.len(), 2);
    assert!(batched.coordinators.iter().all(|c| c.error_code == 0 && c.port == i32::from(PORT)));

    let mut c = Conn::open(PORT);
    let meta = Bytes::from_static(b"\x00\x00\x00\x00\x00\x01\x00\x08gp-topic\xff\xff\xff\xff");
    // Session timeout below group.min.session.timeout.ms.
    assert_eq!(join(&mut c, "", "consumer", meta.clone(), 1_000).error_code, 26);
    let first = join(&mut c, "", "consumer", meta.clone(), 10_000);
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
    let member = first.member_id.to_string();
    let started = Instant::now();
    let joined = join(&mut c, &member, "consumer", meta.clone(), 10_000);
    assert_eq!((joined.error_code, joined.generation_id), (0, 1));
    assert!(started.elapsed() >= Duration::from_millis(2_500), "group.initial.rebalance.delay.ms");
    assert_eq!(joined.leader.as_str(), member);
    assert_eq!(joined.members.len(), 1);
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_generation_id(1)
        .with_member_id(s(&member))
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(s(&member))
            .with_assignment(assignment())]);
    let synced: SyncGroupResponse = c.call(ApiKey::SyncGroup, 3, &sync);
    assert_eq!(synced.error_code, 0);
    assert_eq!(synced.assignment, assignment());

    // Bad input: Kafka's error codes, group intact.
    let mut other = Conn::open(PORT);
    assert_eq!(join(&mut other, "", "connect", meta.clone(), 10_000).error_code, 23);
    let huge = Bytes::from(vec![7u8; 2 * 1024 * 1024]);
    assert_eq!(join(&mut other, "", "consumer", huge, 10_000).error_code, -1);
    assert_eq!(commit(&mut other, &member, 7, 0, 5), 22, "unknown generation");
    assert_eq!(commit(&mut other, "stranger", 1, 0, 5), 25);
    assert_eq!(heartbeat(&mut other, &member, 0), 22);
    assert_eq!(heartbeat(&mut c, &member, 1), 0, "group intact after bad input");

    // Commit and fetch with leader epoch and metadata.
    assert_eq!(commit(&mut c, &member, 1, 0, 4), 0);
    assert_eq!(fetch(&mut c, 0), (4, 3, "meta".to_string()));
    assert_eq!(fetch(&mut c, 1).0, -1, "nothing committed");

    // Lag: committed 4, log end 10.
    produce(&mut boot, 0, 10);
    let report =
        shardlog::cli::groups::describe(&format!("127.0.0.1:{PORT}"), GROUP).expect("describe");
    let row = report.rows.iter().find(|r| r.partition == 0).expect("row for partition 0");
    assert_eq!((row.committed, row.log_end, row.lag()), (Some(4), Some(10), Some(6)));
    assert_eq!(row.member.as_ref().map(|m| m.0.as_str()), Some(member.as_str()));
    assert_eq!(report.state, "Stable");
    let groups = shardlog::cli::groups::list(&format!("127.0.0.1:{PORT}")).expect("list");
    assert!(groups.iter().any(|(g, state, _)| g == GROUP && state == "Stable"));

    // Leave; the empty group then takes admin-style commits (generation -1, no member).
    let leave = LeaveGroupRequest::default().with_group_id(GroupId(s(GROUP))).with_members(vec![
        leave_group_request::MemberIdentity::default().with_member_id(s(&member)),
    ]);
    let left: LeaveGroupResponse = c.call(ApiKey::LeaveGroup, 3, &leave);
    assert_eq!((left.error_code, left.members[0].error_code), (0, 0));
    assert_eq!(commit(&mut c, "", -1, 1, 9), 0);
    assert_eq!(fetch(&mut c, 1).0, 9);
    let described: DescribeGroupsResponse = c.call(
        ApiKey::DescribeGroups,
        4,
        &DescribeGroupsRequest::default().with_groups(vec![GroupId(s(GROUP))]),
    );
    assert_eq!(described.groups[0].group_state.as_str(), "Empty");
    let deleted: DeleteGroupsResponse = c.call(
        ApiKey::DeleteGroups,
        2,
        &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s(GROUP))]),
    );
    assert_eq!(deleted.results[0].error_code, 0);
    assert_eq!(fetch(&mut c, 1).0, -1, "offsets gone with the group");
}
