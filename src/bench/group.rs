//! Kafka's classic consumer-group protocol as the bench client speaks it: version
//! negotiation, FindCoordinator, JoinGroup (with the MEMBER_ID_REQUIRED round), SyncGroup
//! with the range assignor, Heartbeat, OffsetFetch, OffsetCommit and LeaveGroup, and the
//! ConsumerProtocolSubscription/Assignment encodings (protocol type "consumer").
//!
//! Runs on the bench executor of the member that calls it; every call is one request on
//! a [`Conn`] to the coordinator. Invariant: requests only set fields that exist in the
//! negotiated version, so any Kafka-compatible broker decodes them.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, ConsumerProtocolAssignment, ConsumerProtocolSubscription, FindCoordinatorRequest,
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
    OffsetFetchRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::client::topic_name;
use super::stats::error_name;
use super::wire::{pick_version, Conn};

/// Kafka's MEMBER_ID_REQUIRED: join again with the member id the error carries.
pub const MEMBER_ID_REQUIRED: i16 = 79;
/// Kafka's REBALANCE_IN_PROGRESS: the member must join again.
pub const REBALANCE_IN_PROGRESS: i16 = 27;
/// Kafka's ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID: join again (the latter afresh).
pub const ILLEGAL_GENERATION: i16 = 22;
pub const UNKNOWN_MEMBER_ID: i16 = 25;
/// Errors that mean "the coordinator is busy or moving": retry after a pause.
pub fn is_retriable(code: i16) -> bool {
    // COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
    matches!(code, 14..=16)
}

/// The assignor name Kafka's `RangeAssignor` registers.
pub const RANGE_ASSIGNOR: &str = "range";
/// Subscription/assignment schema version we write (v1: owned partitions, left empty).
const CONSUMER_PROTOCOL_VERSION: i16 = 1;

/// Versions picked for the group APIs.
#[derive(Debug, Clone, Copy)]
pub struct GroupVersions {
    pub find_coordinator: i16,
    pub join: i16,
    pub sync: i16,
    pub heartbeat: i16,
    pub leave: i16,
    pub offset_commit: i16,
    pub offset_fetch: i16,
}

impl GroupVersions {
    /// Our ranges: JoinGroup >= 4 (MEMBER_ID_REQUIRED round), single-group FindCoordinator
    /// (<= 3) and OffsetFetch (<= 7), batched LeaveGroup (>= 3).
    pub async fn negotiate(conn: &mut Conn) -> anyhow::Result<GroupVersions> {
        let resp = conn.api_versions().await?;
        let addr = conn.addr().to_string();
        let pick = |api, min, max| pick_version(&resp, api, min, max, &addr);
        Ok(GroupVersions {
            find_coordinator: pick(ApiKey::FindCoordinator, 1, 3)?,
            join: pick(ApiKey::JoinGroup, 4, 9)?,
            sync: pick(ApiKey::SyncGroup, 3, 5)?,
            heartbeat: pick(ApiKey::Heartbeat, 1, 4)?,
            leave: pick(ApiKey::LeaveGroup, 3, 5)?,
            offset_commit: pick(ApiKey::OffsetCommit, 2, 8)?,
            offset_fetch: pick(ApiKey::OffsetFetch, 1, 7)?,
        })
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn gid(g: &str) -> GroupId {
    GroupId(s(g))
}

/// The coordinator's address (host:port) for `group`, asked of any broker.
pub async fn find_coordinator(
    conn: &mut Conn,
    v: &GroupVersions,
    group: &str,
) -> anyhow::Result<Result<String, i16>> {
    let req = FindCoordinatorRequest::default().with_key(s(group)).with_key_type(0);
    let r = conn.call(&req, v.find_coordinator).await?;
    if r.error_code != 0 {
        return Ok(Err(r.error_code));
    }
    Ok(Ok(format!("{}:{}", r.host.as_str(), r.port)))
}

/// A JoinGroup answer: generation, our member id, the leader, and (for the leader
/// only) every member's subscribed topics.
pub struct Joined {
    pub generation: i32,
    pub member_id: String,
    pub leader: String,
    pub members: Vec<(String, Vec<String>)>,
}

/// Session and rebalance timeouts a member asks for.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub session_ms: i32,
    pub rebalance_ms: i32,
}

/// One JoinGroup request; `Err(code)` for a group error (incl. MEMBER_ID_REQUIRED, with
/// the assigned id in `member_id`).
pub async fn join(
    conn: &mut Conn,
    v: &GroupVersions,
    group: &str,
    member_id: &mut String,
    topic: &str,
    t: Timeouts,
) -> anyhow::Result<Result<Joined, i16>> {
    let req = JoinGroupRequest::default()
        .with_group_id(gid(group))
        .with_session_timeout_ms(t.session_ms)
        .with_rebalance_timeout_ms(t.rebalance_ms)
        .with_member_id(s(member_id))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s(RANGE_ASSIGNOR))
            .with_metadata(encode_subscription(topic)?)]);
    let r = conn.call(&req, v.join).await?;
    if !r.member_id.is_empty() {
        *member_id = r.member_id.as_str().to_string();
    }
    if r.error_code != 0 {
        return Ok(Err(r.error_code));
    }
    let mut members = Vec::with_capacity(r.members.len());
    for m in &r.members {
        members.push((m.member_id.as_str().to_string(), decode_subscription(m.metadata.clone())?));
    }
    Ok(Ok(Joined {
        generation: r.generation_id,
        member_id: member_id.clone(),
        leader: r.leader.as_str().to_string(),
        members,
    }))
}

/// SyncGroup: the leader sends `assignments` (member → partitions of `topic`); every
/// member gets its own partitions back.
pub async fn sync(
    conn: &mut Conn,
    v: &GroupVersions,
    group: &str,
    joined: &Joined,
    topic: &str,
    assignments: &BTreeMap<String, Vec<i32>>,
) -> anyhow::Result<Result<Vec<i32>, i16>> {
    let mut list = Vec::with_capacity(assignments.len());
    for (m, parts) in assignments {
        list.push(
            SyncGroupRequestAssignment::default()
                .with_member_id(s(m))
                .with_assignment(encode_assignment(topic, parts)?),
        );
    }
    let mut req = SyncGroupRequest::default()
        .with_group_id(gid(group))
        .with_generation_id(joined.generation)
        .with_member_id(s(&joined.member_id))
        .with_assignments(list);
    if v.sync >= 5 {
        req =
            req.with_protocol_type(Some(s("consumer"))).with_protocol_name(Some(s(RANGE_ASSIGNOR)));
    }
    let r = conn.call(&req, v.sync).await?;
    if r.error_code != 0 {
        return Ok(Err(r.error_code));
    }
    Ok(Ok(decode_assignment(r.assignment, topic)?))
}

/// One heartbeat; returns the group error code (0 = fine).
pub async fn heartbeat(
    conn: &mut Conn,
    v: &GroupVersions,
    group: &str,
    generation: i32,
    member_id: &str,
) -> anyhow::Result<i16> {
    let req = HeartbeatRequest::default()
        .with_group_id(gid(group))
        .with_generation_id(generation)
        .with_member_id(s(member_id));
    Ok(conn.call(&req, v.heartbeat).await?.error_code)
}

/// Committed offsets of `partitions` (None where nothing is committed).
pub async fn fetch_offsets(
    conn: &mut Conn,
    v: &GroupVersions,
    group: &str,
    topic: &str,
    partitions: &[i32],
) -> anyhow::Result<Result<BTreeMap<i32, Option<i64>>, i16>> {
    let req = OffsetFetchRequest::default().with_group_id(gid(group)).with_topics(Some(vec![
        OffsetFetchRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partition_indexes(partitions.to_vec()),
    ]));
    let r = conn.call(&req, v.offset_fetch).await?;
    if r.error_code != 0 {
        return Ok(Err(r.error_code));
    }
    let mut out = BTreeMap::new();
    for t in r.topics.iter().filter(|t| t.name.0.as_str() == topic) {
        for p in &t.partitions {
            if p.error_code != 0 {
                return Ok(Err(p.error_code));
            }
            let off = (p.committed_offset >= 0).then_some(p.committed_offset);
            out.insert(p.partition_index, off);
        }
    }
    Ok(Ok(out))
}

/// Commits `offsets` (partition → next offset to read) for this generation; returns
/// the first error code of the answer (0 = all committed).
pub async fn commit_offsets(
    conn: &mut Conn,
    v: &GroupVersions,
    group: &str,
    generation: i32,
    member_id: &str,
    topic: &str,
    offsets: &BTreeMap<i32, i64>,
) -> anyhow::Result<i16> {
    if offsets.is_empty() {
        return Ok(0);
    }
    let parts = offsets
        .iter()
        .map(|(p, o)| {
            OffsetCommitRequestPartition::default()
                .with_partition_index(*p)
                .with_committed_offset(*o)
        })
        .collect();
    let req = OffsetCommitRequest::default()
        .with_group_id(gid(group))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member_id))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(parts)]);
    let r = conn.call(&req, v.offset_commit).await?;
    let code = r.topics.iter().flat_map(|t| &t.partitions).map(|p| p.error_code).find(|c| *c != 0);
    Ok(code.unwrap_or(0))
}

/// LeaveGroup for one member.
pub async fn leave(
    conn: &mut Conn,
    v: &GroupVersions,
    group: &str,
    member_id: &str,
) -> anyhow::Result<i16> {
    let req = LeaveGroupRequest::default()
        .with_group_id(gid(group))
        .with_members(vec![MemberIdentity::default().with_member_id(s(member_id))]);
    Ok(conn.call(&req, v.leave).await?.error_code)
}

/// Kafka's range assignor for one topic: members sorted by id, each gets a contiguous
/// range, the first `partitions % members` one extra partition.
pub fn range_assign(
    members: &[(String, Vec<String>)],
    topic: &str,
    partitions: &[i32],
) -> BTreeMap<String, Vec<i32>> {
    let mut out: BTreeMap<String, Vec<i32>> =
        members.iter().map(|(m, _)| (m.clone(), Vec::new())).collect();
    let subscribed: Vec<&String> = out
        .keys()
        .filter(|m| members.iter().any(|(id, t)| id == *m && t.iter().any(|x| x == topic)))
        .collect();
    if subscribed.is_empty() {
        return out;
    }
    let mut sorted = partitions.to_vec();
    sorted.sort_unstable();
    let (per, extra) = (sorted.len() / subscribed.len(), sorted.len() % subscribed.len());
    let mut ranges = Vec::with_capacity(subscribed.len());
    let mut start = 0;
    for (i, m) in subscribed.iter().enumerate() {
        let n = per + usize::from(i < extra);
        ranges.push(((*m).clone(), sorted[start..start + n].to_vec()));
        start += n;
    }
    for (m, parts) in ranges {
        out.insert(m, parts);
    }
    out
}

fn encode_versioned<T: Encodable>(msg: &T) -> anyhow::Result<Bytes> {
    let mut buf = BytesMut::new();
    buf.put_i16(CONSUMER_PROTOCOL_VERSION);
    msg.encode(&mut buf, CONSUMER_PROTOCOL_VERSION)?;
    Ok(buf.freeze())
}

/// Reads the schema version prefix; newer versions decode with our highest known one
/// (Kafka's schemas only append fields).
fn read_version(buf: &mut Bytes, what: &str) -> anyhow::Result<i16> {
    anyhow::ensure!(buf.remaining() >= 2, "{what} shorter than its version");
    Ok(buf.get_i16().clamp(0, 3))
}

/// ConsumerProtocolSubscription of one topic.
pub fn encode_subscription(topic: &str) -> anyhow::Result<Bytes> {
    encode_versioned(&ConsumerProtocolSubscription::default().with_topics(vec![s(topic)]))
}

pub fn decode_subscription(mut buf: Bytes) -> anyhow::Result<Vec<String>> {
    let v = read_version(&mut buf, "subscription")?;
    let sub = ConsumerProtocolSubscription::decode(&mut buf, v)?;
    Ok(sub.topics.iter().map(|t| t.as_str().to_string()).collect())
}

/// ConsumerProtocolAssignment of `partitions` of one topic.
pub fn encode_assignment(topic: &str, partitions: &[i32]) -> anyhow::Result<Bytes> {
    let tp =
        AssignedTopic::default().with_topic(topic_name(topic)).with_partitions(partitions.to_vec());
    encode_versioned(&ConsumerProtocolAssignment::default().with_assigned_partitions(vec![tp]))
}

/// Our partitions of `topic` in an assignment (an empty blob = nothing assigned).
pub fn decode_assignment(mut buf: Bytes, topic: &str) -> anyhow::Result<Vec<i32>> {
    if buf.is_empty() {
        return Ok(Vec::new());
    }
    let v = read_version(&mut buf, "assignment")?;
    let a = ConsumerProtocolAssignment::decode(&mut buf, v)?;
    let mut out: Vec<i32> = a
        .assigned_partitions
        .iter()
        .filter(|t| t.topic.0.as_str() == topic)
        .flat_map(|t| t.partitions.iter().copied())
        .collect();
    out.sort_unstable();
    Ok(out)
}

/// One line for a group error code that ends the run.
pub fn group_error(what: &str, group: &str, code: i16) -> anyhow::Error {
    anyhow::anyhow!("{what} for group '{group}': {}", error_name(code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_assignor_matches_kafka() {
        let m = |id: &str| (id.to_string(), vec!["t".to_string()]);
        let members = vec![m("b"), m("a"), m("c")];
        let a = range_assign(&members, "t", &[0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(a["a"], vec![0, 1, 2]);
        assert_eq!(a["b"], vec![3, 4]);
        assert_eq!(a["c"], vec![5, 6]);
        let a = range_assign(&members, "t", &[0]);
        assert_eq!((a["a"].len(), a["b"].len(), a["c"].len()), (1, 0, 0));
    }

    #[test]
    fn subscription_and_assignment_round_trip() {
        let sub = encode_subscription("orders").expect("encode");
        assert_eq!(&sub[..2], &[0, 1], "version prefix");
        assert_eq!(decode_subscription(sub).expect("decode"), vec!["orders".to_string()]);
        let asg = encode_assignment("orders", &[3, 1]).expect("encode");
        assert_eq!(decode_assignment(asg, "orders").expect("decode"), vec![1, 3]);
        assert!(decode_assignment(Bytes::new(), "orders").expect("empty").is_empty());
        assert!(decode_assignment(Bytes::from_static(&[0]), "orders").is_err());
    }
}
