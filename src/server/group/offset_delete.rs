//! OffsetDelete: removes committed offsets of partitions the group no longer consumes.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetDeleteRequest, OffsetDeleteResponse};

use super::{error_code, GroupAnswer, GroupCall};
use crate::authz::Operation::{Delete, Read};
use crate::authz::ResourceType::{Group, Topic};
use crate::group::types::GroupError;
use crate::protocol::decode_request;
use crate::server::dispatch::{respond, ResponseFuture};
use crate::shard::ShardCtx;

/// v0 only (Kafka 4's range).
pub const VERSIONS: (i16, i16) = (0, 0);

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &crate::security::Session,
) -> Result<ResponseFuture, String> {
    let (header, req) = decode_request::<OffsetDeleteRequest>(frame, ApiKey::OffsetDelete, version)
        .map_err(|e| e.to_string())?;
    // Kafka: DELETE on the group, then READ on each topic (a refused topic's partitions are
    // answered TOPIC_AUTHORIZATION_FAILED and not sent).
    let image = ctx.image();
    let group = req.group_id.0.to_string();
    let group_ok =
        crate::server::authz::allowed_in(ctx, session, &image.acls, (Delete, Group, &group));
    let topic_ok: Vec<bool> = req
        .topics
        .iter()
        .map(|t| {
            !group_ok
                || crate::server::authz::allowed_in(
                    ctx,
                    session,
                    &image.acls,
                    (Read, Topic, &t.name),
                )
        })
        .collect();
    let partitions: Vec<(String, i32)> = req
        .topics
        .iter()
        .zip(&topic_ok)
        .filter(|(_, ok)| **ok)
        .flat_map(|(t, _)| {
            t.partitions.iter().map(move |p| (t.name.0.to_string(), p.partition_index))
        })
        .collect();
    let call = GroupCall::OffsetDelete { group_id: group, partitions };
    let call = if group_ok { Ok(call) } else { Err(GroupError::GroupAuthorizationFailed) };
    let answer = super::call_group_if(ctx, call).await;
    Ok(Box::pin(async move {
        let result = match answer.await {
            GroupAnswer::OffsetDelete(r) => r,
            GroupAnswer::Failed(e) => Err(e),
            _ => Err(GroupError::CoordinatorNotAvailable),
        };
        let mut response = OffsetDeleteResponse::default();
        match result {
            Err(e) => response.error_code = error_code(Some(e)),
            Ok(errors) => {
                let mut errors = errors.into_iter();
                for (t, ok) in req.topics.into_iter().zip(topic_ok) {
                    let partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            let error = if ok {
                                errors.next().flatten()
                            } else {
                                Some(GroupError::TopicAuthorizationFailed)
                            };
                            OffsetDeleteResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(error_code(error))
                        })
                        .collect();
                    response.topics.push(
                        OffsetDeleteResponseTopic::default()
                            .with_name(t.name)
                            .with_partitions(partitions),
                    );
                }
            }
        }
        respond(ApiKey::OffsetDelete, version, header.correlation_id, &response)
    }))
}
