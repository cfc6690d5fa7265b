//! JoinGroup: forwarded to the group's coordinator shard, which may hold the answer until
//! the join phase completes (up to the rebalance timeout).

use std::net::IpAddr;
use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{ApiKey, JoinGroupRequest, JoinGroupResponse};

use super::{call_group_if, client_host, error_code, opt_str, str_bytes, GroupAnswer, GroupCall};
use crate::authz::Operation::Read;
use crate::group::types::{GroupError, JoinRequest, JoinResponse, Protocol};
use crate::protocol::decode_request;
use crate::server::dispatch::{respond, ResponseFuture};
use crate::shard::ShardCtx;

/// v0–v9 (Kafka 4's range); v4+ uses the MEMBER_ID_REQUIRED round, v5+ static members.
pub const VERSIONS: (i16, i16) = (0, 9);

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    (peer, session): (Option<IpAddr>, &crate::security::Session),
) -> Result<ResponseFuture, String> {
    let (header, req) = decode_request::<JoinGroupRequest>(frame, ApiKey::JoinGroup, version)
        .map_err(|e| e.to_string())?;
    let member_id = req.member_id.to_string();
    let join = JoinRequest {
        group_id: req.group_id.0.to_string(),
        member_id: member_id.clone(),
        group_instance_id: opt_str(req.group_instance_id),
        client_id: opt_str(header.client_id).unwrap_or_default(),
        client_host: client_host(peer),
        session_timeout_ms: req.session_timeout_ms,
        // v0 has no rebalance timeout: Kafka uses the session timeout.
        rebalance_timeout_ms: if version >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .into_iter()
            .map(|p| Protocol { name: p.name.to_string(), metadata: p.metadata })
            .collect(),
        require_known_member_id: version >= 4,
    };
    let group = join.group_id.clone();
    let call = super::if_allowed(ctx, session, (Read, &group), GroupCall::Join(join));
    let answer = call_group_if(ctx, call).await;
    Ok(Box::pin(async move {
        let r = match answer.await {
            GroupAnswer::Join(r) => r,
            GroupAnswer::Failed(e) => JoinResponse::error(e, &member_id),
            _ => JoinResponse::error(GroupError::CoordinatorNotAvailable, &member_id),
        };
        let response = to_wire(r, version);
        respond(ApiKey::JoinGroup, version, header.correlation_id, &response)
    }))
}

fn to_wire(r: JoinResponse, version: i16) -> JoinGroupResponse {
    let members = r
        .members
        .into_iter()
        .map(|m| {
            JoinGroupResponseMember::default()
                .with_member_id(str_bytes(&m.member_id))
                .with_group_instance_id(if version >= 5 {
                    m.group_instance_id.as_deref().map(str_bytes)
                } else {
                    None
                })
                .with_metadata(m.metadata)
        })
        .collect();
    // protocol_name is nullable only from v7; older versions need a string.
    let protocol_name = r.protocol_name.as_deref().map(str_bytes);
    let protocol_name =
        if version >= 7 { protocol_name } else { Some(protocol_name.unwrap_or_default()) };
    JoinGroupResponse::default()
        .with_error_code(error_code(r.error))
        .with_generation_id(r.generation_id)
        .with_protocol_type(if version >= 7 {
            r.protocol_type.as_deref().map(str_bytes)
        } else {
            None
        })
        .with_protocol_name(protocol_name)
        .with_leader(str_bytes(&r.leader))
        .with_member_id(str_bytes(&r.member_id))
        .with_members(members)
}
