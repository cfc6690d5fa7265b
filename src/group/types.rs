//! Inputs and outputs of the pure coordinator: requests as plain structs, responses,
//! the replies to park until a rebalance completes, and the coordinator's error type
//! (mapped to Kafka error codes only at the protocol boundary, `server::group`).
//!
//! Pure data; used on the group's coordinator shard.

use bytes::Bytes;
use thiserror::Error;

use super::records::Record;

/// Identifies a parked request (a JoinGroup or SyncGroup waiting for the rebalance); the
/// driver maps it to the connection waiting for the answer.
pub type Token = u64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum GroupError {
    #[error("coordinator not available")]
    CoordinatorNotAvailable,
    #[error("not the coordinator")]
    NotCoordinator,
    /// The group's `__consumer_offsets` partition is assigned to this shard but still
    /// opening or replaying: retry the same coordinator (no new FindCoordinator needed).
    #[error("coordinator load in progress")]
    CoordinatorLoadInProgress,
    #[error("invalid group id")]
    InvalidGroupId,
    #[error("unknown member id")]
    UnknownMemberId,
    #[error("member id required")]
    MemberIdRequired,
    #[error("illegal generation")]
    IllegalGeneration,
    #[error("rebalance in progress")]
    RebalanceInProgress,
    #[error("inconsistent group protocol")]
    InconsistentGroupProtocol,
    #[error("fenced instance id")]
    FencedInstanceId,
    #[error("invalid session timeout")]
    InvalidSessionTimeout,
    #[error("group max size reached")]
    GroupMaxSizeReached,
    #[error("group is not empty")]
    NonEmptyGroup,
    #[error("group id not found")]
    GroupIdNotFound,
    #[error("group is subscribed to the topic")]
    GroupSubscribedToTopic,
    #[error("offset metadata too large")]
    OffsetMetadataTooLarge,
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    /// Kafka's answer when a group's metadata record exceeds the message size limit.
    #[error("group metadata too large to store")]
    MetadataTooLarge,
    /// The principal may not do this to the group (decided by the server, never here).
    #[error("group authorization failed")]
    GroupAuthorizationFailed,
    /// The principal may not do this to the topic.
    #[error("topic authorization failed")]
    TopicAuthorizationFailed,
    /// The principal may not describe the transactional id (FindCoordinator).
    #[error("transactional id authorization failed")]
    TransactionalIdAuthorizationFailed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    pub name: String,
    pub metadata: Bytes,
}

#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<Protocol>,
    /// JoinGroup v4+: a new member first gets MEMBER_ID_REQUIRED with its id.
    pub require_known_member_id: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JoinResponse {
    pub error: Option<GroupError>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Only the leader gets the member list (to run the assignor).
    pub members: Vec<JoinMember>,
}

impl JoinResponse {
    #[must_use]
    pub fn error(error: GroupError, member_id: &str) -> Self {
        Self {
            error: Some(error),
            generation_id: -1,
            member_id: member_id.into(),
            ..Self::default()
        }
    }
}

#[derive(Debug, Clone)]
pub struct SyncRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncResponse {
    pub error: Option<GroupError>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncResponse {
    #[must_use]
    pub fn error(error: GroupError) -> Self {
        Self { error: Some(error), ..Self::default() }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Join(JoinResponse),
    Sync(SyncResponse),
}

/// What a coordinator call asks the driver to do.
#[derive(Debug, Default)]
pub struct Effects {
    /// Answers to send now.
    pub replies: Vec<(Token, Reply)>,
    /// Records to append to the group's `__consumer_offsets` partition.
    pub records: Vec<Record>,
    /// Answers to send once `records` are durable (or, with an error, if that fails).
    pub after_persist: Vec<(Token, Reply)>,
}

impl Effects {
    pub fn merge(&mut self, other: Effects) {
        self.replies.extend(other.replies);
        self.records.extend(other.records);
        self.after_persist.extend(other.after_persist);
    }

    #[must_use]
    pub fn reply(token: Token, reply: Reply) -> Self {
        Self { replies: vec![(token, reply)], ..Self::default() }
    }
}

#[derive(Debug, Clone)]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

/// One member leaving (LeaveGroup v3+ batches them).
#[derive(Debug, Clone)]
pub struct LeavingMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

#[derive(Debug, Clone)]
pub struct CommitPartition {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

#[derive(Debug, Clone)]
pub struct CommitRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// OffsetCommit v2–v4 `retention_time_ms`; -1 for the broker default.
    pub retention_time_ms: i64,
    pub partitions: Vec<CommitPartition>,
}

/// A committed offset as OffsetFetch returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    /// An open transaction holds offsets for this partition (TxnOffsetCommit not yet
    /// committed or aborted): OffsetFetch with `require_stable` answers
    /// UNSTABLE_OFFSET_COMMIT, and the client retries.
    pub unstable: bool,
}

/// Group state names as Kafka prints them (DescribeGroups, ListGroups).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSummary {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSummary {
    pub group_id: String,
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<MemberSummary>,
}
