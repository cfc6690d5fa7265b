//! LeaveGroup: one member (v0–v2) or a batch of members by id or instance id (v3+).

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{ApiKey, LeaveGroupRequest, LeaveGroupResponse};

use super::{call_group_if, error_code, opt_str, str_bytes, GroupAnswer, GroupCall};
use crate::authz::Operation::Read;
use crate::group::types::{GroupError, LeavingMember};
use crate::protocol::decode_request;
use crate::server::dispatch::{respond, ResponseFuture};
use crate::shard::ShardCtx;

/// v0–v5 (Kafka 4's range).
pub const VERSIONS: (i16, i16) = (0, 5);

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &crate::security::Session,
) -> Result<ResponseFuture, String> {
    let (header, req) = decode_request::<LeaveGroupRequest>(frame, ApiKey::LeaveGroup, version)
        .map_err(|e| e.to_string())?;
    let members: Vec<LeavingMember> = if version >= 3 {
        req.members
            .into_iter()
            .map(|m| LeavingMember {
                member_id: m.member_id.to_string(),
                group_instance_id: opt_str(m.group_instance_id),
            })
            .collect()
    } else {
        vec![LeavingMember { member_id: req.member_id.to_string(), group_instance_id: None }]
    };
    let group = req.group_id.0.to_string();
    let call = GroupCall::Leave { group_id: group.clone(), members: members.clone() };
    let call = super::if_allowed(ctx, session, (Read, &group), call);
    let answer = call_group_if(ctx, call).await;
    Ok(Box::pin(async move {
        let result = match answer.await {
            GroupAnswer::Leave(r) => r,
            GroupAnswer::Failed(e) => Err(e),
            _ => Err(GroupError::CoordinatorNotAvailable),
        };
        let mut response = LeaveGroupResponse::default();
        match result {
            Err(e) => response.error_code = error_code(Some(e)),
            Ok(errors) if version >= 3 => {
                response.members = members
                    .iter()
                    .zip(errors)
                    .map(|(m, e)| {
                        MemberResponse::default()
                            .with_member_id(str_bytes(&m.member_id))
                            .with_group_instance_id(m.group_instance_id.as_deref().map(str_bytes))
                            .with_error_code(error_code(e))
                    })
                    .collect();
            }
            Ok(errors) => response.error_code = error_code(errors.into_iter().next().flatten()),
        }
        respond(ApiKey::LeaveGroup, version, header.correlation_id, &response)
    }))
}
