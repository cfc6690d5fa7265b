//! ListGroups: every shard lists the groups it coordinates; filtered by state (v4+) and
//! type (v5+; every group here is a classic group).

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{ApiKey, GroupId, ListGroupsRequest, ListGroupsResponse};

use super::route::call_shard;
use super::{error_code, str_bytes, GroupAnswer, GroupCall};
use crate::authz::{Operation, ResourceType, CLUSTER_NAME};
use crate::protocol::decode_request;
use crate::server::authz::{Auth, Authorize};
use crate::server::dispatch::{respond, ResponseFuture};
use crate::shard::ShardCtx;
use crate::types::ShardId;

/// v0–v5 (Kafka 4's range).
pub const VERSIONS: (i16, i16) = (0, 5);

const CLASSIC: &str = "classic";

pub fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &Rc<crate::security::Session>,
) -> Result<ResponseFuture, String> {
    let (header, req) = decode_request::<ListGroupsRequest>(frame, ApiKey::ListGroups, version)
        .map_err(|e| e.to_string())?;
    let ctx = ctx.clone();
    // Kafka: DESCRIBE on the cluster lists every group; without it, the groups the
    // principal may DESCRIBE (quietly: a listing, not a request for one group).
    let auth = Auth::new(&ctx, session);
    let everything = auth.visible(Operation::Describe, ResourceType::Cluster, CLUSTER_NAME);
    Ok(Box::pin(async move {
        let states: Vec<String> = req.states_filter.iter().map(|s| s.to_lowercase()).collect();
        let types: Vec<String> = req.types_filter.iter().map(|s| s.to_lowercase()).collect();
        let mut response = ListGroupsResponse::default();
        let calls = (0..ctx.shard_count).map(|s| call_shard(&ctx, ShardId(s), GroupCall::List));
        for answer in futures::future::join_all(calls).await {
            let listed = match answer {
                GroupAnswer::List(list) => list,
                GroupAnswer::Failed(e) => {
                    response.error_code = error_code(Some(e));
                    continue;
                }
                _ => continue,
            };
            for (group_id, protocol_type, state) in listed {
                if !everything && !auth.visible(Operation::Describe, ResourceType::Group, &group_id)
                {
                    continue;
                }
                if !states.is_empty() && !states.contains(&state.name().to_lowercase()) {
                    continue;
                }
                if !types.is_empty() && !types.iter().any(|t| t == CLASSIC) {
                    continue;
                }
                let mut g = ListedGroup::default()
                    .with_group_id(GroupId(str_bytes(&group_id)))
                    .with_protocol_type(str_bytes(&protocol_type));
                if version >= 4 {
                    g.group_state = str_bytes(state.name());
                }
                if version >= 5 {
                    g.group_type = str_bytes(CLASSIC);
                }
                response.groups.push(g);
            }
        }
        response.groups.sort_by(|a, b| a.group_id.0.cmp(&b.group_id.0));
        respond(ApiKey::ListGroups, version, header.correlation_id, &response)
    }))
}
