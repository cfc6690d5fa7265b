//! Heartbeat: keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, HeartbeatRequest as WireHeartbeat, HeartbeatResponse};

use super::{call_group_if, error_code, opt_str, GroupAnswer, GroupCall};
use crate::authz::Operation::Read;
use crate::group::types::{GroupError, HeartbeatRequest};
use crate::protocol::decode_request;
use crate::server::dispatch::{respond, ResponseFuture};
use crate::shard::ShardCtx;

/// v0–v4 (Kafka 4's range).
pub const VERSIONS: (i16, i16) = (0, 4);

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &crate::security::Session,
) -> Result<ResponseFuture, String> {
    let (header, req) = decode_request::<WireHeartbeat>(frame, ApiKey::Heartbeat, version)
        .map_err(|e| e.to_string())?;
    let hb = HeartbeatRequest {
        group_id: req.group_id.0.to_string(),
        generation_id: req.generation_id,
        member_id: req.member_id.to_string(),
        group_instance_id: opt_str(req.group_instance_id),
    };
    let group = hb.group_id.clone();
    let call = super::if_allowed(ctx, session, (Read, &group), GroupCall::Heartbeat(hb));
    let answer = call_group_if(ctx, call).await;
    Ok(Box::pin(async move {
        let error = match answer.await {
            GroupAnswer::Heartbeat(e) => e,
            GroupAnswer::Failed(e) => Some(e),
            _ => Some(GroupError::CoordinatorNotAvailable),
        };
        let response = HeartbeatResponse::default().with_error_code(error_code(error));
        respond(ApiKey::Heartbeat, version, header.correlation_id, &response)
    }))
}
