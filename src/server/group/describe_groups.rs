//! DescribeGroups: each group described by its coordinator shard. An unknown group is
//! reported as Dead without error (Kafka's answer up to v5).

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{ApiKey, DescribeGroupsRequest, DescribeGroupsResponse, GroupId};

use super::{call_group, error_code, str_bytes, GroupAnswer, GroupCall};
use crate::constants::GROUP_REQUEST_GROUPS_MAX;
use crate::group::types::GroupError;
use crate::protocol::decode_request;
use crate::server::dispatch::{respond, ResponseFuture};
use crate::shard::ShardCtx;

/// v0–v5; v6 (GROUP_ID_NOT_FOUND for unknown groups, error messages) is not served.
pub const VERSIONS: (i16, i16) = (0, 5);

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
) -> Result<ResponseFuture, String> {
    let (header, req) =
        decode_request::<DescribeGroupsRequest>(frame, ApiKey::DescribeGroups, version)
            .map_err(|e| e.to_string())?;
    if req.groups.len() > GROUP_REQUEST_GROUPS_MAX {
        return Err(format!("DescribeGroups names {} groups", req.groups.len()));
    }
    let mut pending = Vec::with_capacity(req.groups.len());
    for g in &req.groups {
        pending.push(call_group(ctx, GroupCall::Describe(g.0.to_string())).await);
    }
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
                Ok(s) => DescribedGroup::default()
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
