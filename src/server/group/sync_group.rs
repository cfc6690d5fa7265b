//! SyncGroup: forwarded to the coordinator shard; a follower's answer waits for the
//! leader's assignment, and every answer waits until the group record is durable.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, SyncGroupRequest, SyncGroupResponse};

use super::{call_group_if, error_code, opt_str, str_bytes, GroupAnswer, GroupCall};
use crate::authz::Operation::Read;
use crate::group::types::{GroupError, SyncRequest, SyncResponse};
use crate::protocol::decode_request;
use crate::server::dispatch::{respond, ResponseFuture};
use crate::shard::ShardCtx;

/// v0–v5 (Kafka 4's range); v5 checks protocol type and name.
pub const VERSIONS: (i16, i16) = (0, 5);

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &crate::security::Session,
) -> Result<ResponseFuture, String> {
    let (header, req) = decode_request::<SyncGroupRequest>(frame, ApiKey::SyncGroup, version)
        .map_err(|e| e.to_string())?;
    let sync = SyncRequest {
        group_id: req.group_id.0.to_string(),
        generation_id: req.generation_id,
        member_id: req.member_id.to_string(),
        group_instance_id: opt_str(req.group_instance_id),
        protocol_type: opt_str(req.protocol_type),
        protocol_name: opt_str(req.protocol_name),
        assignments: req
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment))
            .collect(),
    };
    // Kafka answers a v5+ request without protocol type or name INCONSISTENT_GROUP_PROTOCOL
    // before it checks READ on the group; the coordinator gives that answer.
    let unchecked = version >= 5 && (sync.protocol_type.is_none() || sync.protocol_name.is_none());
    let group = sync.group_id.clone();
    let call = if unchecked {
        Ok(GroupCall::Sync(sync))
    } else {
        super::if_allowed(ctx, session, (Read, &group), GroupCall::Sync(sync))
    };
    let answer = call_group_if(ctx, call).await;
    Ok(Box::pin(async move {
        let r = match answer.await {
            GroupAnswer::Sync(r) => r,
            GroupAnswer::Failed(e) => SyncResponse::error(e),
            _ => SyncResponse::error(GroupError::CoordinatorNotAvailable),
        };
        let mut response = SyncGroupResponse::default()
            .with_error_code(error_code(r.error))
            .with_assignment(r.assignment);
        if version >= 5 {
            response.protocol_type = r.protocol_type.as_deref().map(str_bytes);
            response.protocol_name = r.protocol_name.as_deref().map(str_bytes);
        }
        respond(ApiKey::SyncGroup, version, header.correlation_id, &response)
    }))
}
