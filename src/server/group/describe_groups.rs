//! DescribeGroups: each group described by its coordinator shard. An unknown group is
//! reported as Dead without error up to v5, and from v6 (KIP-1043) as Dead with
//! GROUP_ID_NOT_FOUND and Kafka's message.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{ApiKey, DescribeGroupsRequest, DescribeGroupsResponse, GroupId};

use super::{error_code, str_bytes, GroupAnswer, GroupCall};
use crate::authz::{Operation, ResourceType};
use crate::constants::GROUP_REQUEST_GROUPS_MAX;
use crate::group::types::{GroupError, GroupState};
use crate::protocol::decode_request;
use crate::server::authz::Authorize;
use crate::server::dispatch::{respond, ResponseFuture};
use crate::shard::ShardCtx;

/// v0–v6 (Kafka 4.1's maximum).
pub const VERSIONS: (i16, i16) = (0, 6);
/// The first version answering an unknown group with GROUP_ID_NOT_FOUND.
const NOT_FOUND_VERSION: i16 = 6;

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &std::rc::Rc<crate::security::Session>,
) -> Result<ResponseFuture, String> {
    let (header, req) =
        decode_request::<DescribeGroupsRequest>(frame, ApiKey::DescribeGroups, version)
            .map_err(|e| e.to_string())?;
    if req.groups.len() > GROUP_REQUEST_GROUPS_MAX {
        return Err(format!("DescribeGroups names {} groups", req.groups.len()));
    }
    let mut pending = Vec::with_capacity(req.groups.len());
    for g in &req.groups {
        let call = GroupCall::Describe(g.0.to_string());
        let call = super::if_allowed(ctx, session, (Operation::Describe, &g.0), call);
        pending.push(super::call_group_if(ctx, call).await);
    }
    let with_ops = version >= 3 && req.include_authorized_operations;
    let auth = crate::server::authz::Auth::new(ctx, session);
    let ids: Vec<GroupId> = req.groups;
    Ok(Box::pin(async move {
        let answers = futures::future::join_all(pending).await;
        let mut response = DescribeGroupsResponse::default();
        for (id, answer) in ids.into_iter().zip(answers) {
            let summary = match answer {
                GroupAnswer::Describe(r) => r,
                GroupAnswer::Failed(e) => Err(e),
                _ => Err(GroupError::CoordinatorNotAvailable),
            };
            let entry = match summary {
                Err(e) => {
                    DescribedGroup::default().with_group_id(id).with_error_code(error_code(Some(e)))
                }
                // A group the coordinator does not hold is described as Dead.
                Ok(s) if version >= NOT_FOUND_VERSION && s.state == GroupState::Dead => {
                    DescribedGroup::default()
                        .with_group_id(id.clone())
                        .with_group_state(str_bytes(s.state.name()))
                        .with_error_code(error_code(Some(GroupError::GroupIdNotFound)))
                        .with_error_message(Some(str_bytes(&format!("Group {} not found.", id.0))))
                }
                Ok(s) => DescribedGroup::default()
                    .with_authorized_operations(if with_ops {
                        auth.operations(ResourceType::Group, &id.0)
                    } else {
                        i32::MIN
                    })
                    .with_group_id(id)
                    .with_group_state(str_bytes(s.state.name()))
                    .with_protocol_type(str_bytes(&s.protocol_type))
                    .with_protocol_data(str_bytes(&s.protocol))
                    .with_members(
                        s.members
                            .into_iter()
                            .map(|m| {
                                DescribedGroupMember::default()
                                    .with_member_id(str_bytes(&m.member_id))
                                    .with_group_instance_id(if version >= 4 {
                                        m.group_instance_id.as_deref().map(str_bytes)
                                    } else {
                                        None
                                    })
                                    .with_client_id(str_bytes(&m.client_id))
                                    .with_client_host(str_bytes(&m.client_host))
                                    .with_member_metadata(m.metadata)
                                    .with_member_assignment(m.assignment)
                            })
                            .collect(),
                    ),
            };
            response.groups.push(entry);
        }
        respond(ApiKey::DescribeGroups, version, header.correlation_id, &response)
    }))
}
