//! DeleteGroups: each group deleted by its coordinator shard (only empty groups; their
//! offsets and metadata are tombstoned).

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{ApiKey, DeleteGroupsRequest, DeleteGroupsResponse, GroupId};

use super::{error_code, GroupAnswer, GroupCall};
use crate::authz::Operation::Delete;
use crate::constants::GROUP_REQUEST_GROUPS_MAX;
use crate::group::types::GroupError;
use crate::protocol::decode_request;
use crate::server::dispatch::{respond, ResponseFuture};
use crate::shard::ShardCtx;

/// v0–v2 (Kafka 4's range).
pub const VERSIONS: (i16, i16) = (0, 2);

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &crate::security::Session,
) -> Result<ResponseFuture, String> {
    let (header, req) = decode_request::<DeleteGroupsRequest>(frame, ApiKey::DeleteGroups, version)
        .map_err(|e| e.to_string())?;
    if req.groups_names.len() > GROUP_REQUEST_GROUPS_MAX {
        return Err(format!("DeleteGroups names {} groups", req.groups_names.len()));
    }
    let mut pending = Vec::with_capacity(req.groups_names.len());
    for g in &req.groups_names {
        let call =
            super::if_allowed(ctx, session, (Delete, &g.0), GroupCall::Delete(g.0.to_string()));
        pending.push(super::call_group_if(ctx, call).await);
    }
    let ids: Vec<GroupId> = req.groups_names;
    Ok(Box::pin(async move {
        let answers = futures::future::join_all(pending).await;
        let mut response = DeleteGroupsResponse::default();
        for (id, answer) in ids.into_iter().zip(answers) {
            let error = match answer {
                GroupAnswer::Delete(e) => e,
                GroupAnswer::Failed(e) => Some(e),
                _ => Some(GroupError::CoordinatorNotAvailable),
            };
            response.results.push(
                DeletableGroupResult::default()
                    .with_group_id(id)
                    .with_error_code(error_code(error)),
            );
        }
        respond(ApiKey::DeleteGroups, version, header.correlation_id, &response)
    }))
}
