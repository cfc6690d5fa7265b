//! Kafka's group APIs: one handler file per API, the routing of a group's requests to its
//! coordinator shard (the owner of its `__consumer_offsets` partition), and the driver
//! that runs the pure [`crate::group::Coordinator`] on that shard.
//!
//! Handlers run on the connection's shard and send a [`GroupCall`] over the mesh; the
//! coordinator shard answers with a [`GroupAnswer`]. Invariant: Kafka error codes are
//! chosen here ([`error_code`]), never in `crate::group`.

pub(crate) mod commit_slots;
pub mod delete_groups;
pub mod describe_groups;
pub(crate) mod driver;
pub mod find_coordinator;
pub mod heartbeat;
pub mod join_group;
pub mod leader_write;
pub mod leave_group;
pub mod list_groups;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
mod route;
pub mod sync_group;

use kafka_protocol::error::ResponseError;
use kafka_protocol::protocol::StrBytes;

pub use driver::execute;
pub use route::{
    call_group, call_group_if, capped_replication_factor, coordinator_shard, create_internal_topic,
    ensure_offsets_topic, offsets_partitions, InternalTopic,
};

use crate::group::types::{
    CommitRequest, Committed, GroupError, GroupState, GroupSummary, HeartbeatRequest, JoinRequest,
    JoinResponse, LeavingMember, SyncRequest, SyncResponse,
};

/// A group operation sent to the group's coordinator shard.
pub enum GroupCall {
    Join(JoinRequest),
    Sync(SyncRequest),
    Heartbeat(HeartbeatRequest),
    Leave {
        group_id: String,
        members: Vec<LeavingMember>,
    },
    Commit(CommitRequest),
    /// TxnOffsetCommit: offsets written with the producer's transaction, applied at its
    /// COMMIT marker.
    TxnCommit {
        req: CommitRequest,
        producer_id: i64,
        producer_epoch: i16,
    },
    /// `None`: every committed offset of the group. `require_stable` (OffsetFetch v7+):
    /// partitions with offsets pending in an open transaction are marked unstable.
    Fetch {
        group_id: String,
        partitions: Option<Vec<(String, i32)>>,
        require_stable: bool,
    },
    /// ListGroups on one shard: every group it coordinates.
    List,
    Describe(String),
    Delete(String),
    OffsetDelete {
        group_id: String,
        partitions: Vec<(String, i32)>,
    },
}

impl GroupCall {
    /// The group the call is about (`None` for shard-wide calls).
    #[must_use]
    pub fn group_id(&self) -> Option<&str> {
        match self {
            GroupCall::Join(r) => Some(&r.group_id),
            GroupCall::Sync(r) => Some(&r.group_id),
            GroupCall::Heartbeat(r) => Some(&r.group_id),
            GroupCall::Commit(r) | GroupCall::TxnCommit { req: r, .. } => Some(&r.group_id),
            GroupCall::Leave { group_id, .. }
            | GroupCall::Fetch { group_id, .. }
            | GroupCall::OffsetDelete { group_id, .. }
            | GroupCall::Describe(group_id)
            | GroupCall::Delete(group_id) => Some(group_id),
            GroupCall::List => None,
        }
    }
}

/// The coordinator shard's answer.
pub enum GroupAnswer {
    Join(JoinResponse),
    Sync(SyncResponse),
    Heartbeat(Option<GroupError>),
    Leave(Result<Vec<Option<GroupError>>, GroupError>),
    Commit(Vec<Option<GroupError>>),
    Fetch(Result<Vec<(String, i32, Option<Committed>)>, GroupError>),
    List(Vec<(String, String, GroupState)>),
    Describe(Result<GroupSummary, GroupError>),
    Delete(Option<GroupError>),
    OffsetDelete(Result<Vec<Option<GroupError>>, GroupError>),
    /// The call could not reach a coordinator (wrong shard, loading, mesh failure).
    Failed(GroupError),
}

/// The Kafka error for a coordinator error: the protocol boundary.
#[must_use]
pub fn error_code(err: Option<GroupError>) -> i16 {
    let Some(err) = err else { return 0 };
    let e = match err {
        GroupError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        GroupError::NotCoordinator => ResponseError::NotCoordinator,
        GroupError::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        GroupError::InvalidGroupId => ResponseError::InvalidGroupId,
        GroupError::UnknownMemberId => ResponseError::UnknownMemberId,
        GroupError::MemberIdRequired => ResponseError::MemberIdRequired,
        GroupError::IllegalGeneration => ResponseError::IllegalGeneration,
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        GroupError::FencedInstanceId => ResponseError::FencedInstanceId,
        GroupError::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout,
        GroupError::GroupMaxSizeReached => ResponseError::GroupMaxSizeReached,
        GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup,
        GroupError::GroupIdNotFound => ResponseError::GroupIdNotFound,
        GroupError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
        GroupError::OffsetMetadataTooLarge => ResponseError::OffsetMetadataTooLarge,
        GroupError::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
        // Kafka maps a group record over the message size limit to this.
        GroupError::MetadataTooLarge => ResponseError::UnknownServerError,
        GroupError::GroupAuthorizationFailed => ResponseError::GroupAuthorizationFailed,
        GroupError::TopicAuthorizationFailed => ResponseError::TopicAuthorizationFailed,
        GroupError::TransactionalIdAuthorizationFailed => {
            ResponseError::TransactionalIdAuthorizationFailed
        }
    };
    e.code()
}

/// `Ok(call)` if the connection may do `op` on the group (Kafka's check before every group
/// API reaches the coordinator), else GROUP_AUTHORIZATION_FAILED and nothing is sent.
pub(crate) fn if_allowed(
    ctx: &crate::shard::ShardCtx,
    session: &crate::security::Session,
    (op, group): (crate::authz::Operation, &str),
    call: GroupCall,
) -> Result<GroupCall, GroupError> {
    if crate::server::authz::allowed(ctx, session, op, crate::authz::ResourceType::Group, group) {
        Ok(call)
    } else {
        Err(GroupError::GroupAuthorizationFailed)
    }
}

fn opt_str(s: Option<StrBytes>) -> Option<String> {
    s.map(|s| s.to_string())
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A member's host as Kafka shows it: `/` and the connection's peer IP.
fn client_host(peer: Option<std::net::IpAddr>) -> String {
    peer.map_or_else(|| "/unknown".to_string(), |ip| format!("/{ip}"))
}
