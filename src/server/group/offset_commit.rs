//! OffsetCommit: partitions of unknown topics are refused here; the rest go to the
//! coordinator shard, which answers once the commit records are durable.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetCommitRequest, OffsetCommitResponse};

use super::{call_group, error_code, opt_str, GroupAnswer, GroupCall};
use crate::authz::Operation::Read;
use crate::authz::ResourceType::{Group, Topic};
use crate::group::types::{CommitPartition, CommitRequest, GroupError};
use crate::protocol::decode_request;
use crate::server::authz;
use crate::server::dispatch::{respond, ResponseFuture};
use crate::shard::ShardCtx;

/// 2 is Kafka 4's floor; 10 (topic ids) is not served.
pub const VERSIONS: (i16, i16) = (2, 9);

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &crate::security::Session,
) -> Result<ResponseFuture, String> {
    let (header, req) = decode_request::<OffsetCommitRequest>(frame, ApiKey::OffsetCommit, version)
        .map_err(|e| e.to_string())?;
    let image = ctx.image();
    // Kafka's order: READ on the group (else every partition is refused), then READ on each
    // topic, then the topic's existence.
    let group_id = req.group_id.0.as_str();
    let group_denied = !authz::allowed_in(ctx, session, &image.acls, (Read, Group, group_id));
    // (topic index, partition, Some(error) decided here | None = sent)
    let mut slots: Vec<(usize, i32, Option<GroupError>)> = Vec::new();
    let mut partitions = Vec::new();
    let mut response = OffsetCommitResponse::default();
    for (t, topic) in req.topics.iter().enumerate() {
        let name = topic.name.0.to_string();
        let count = image.topics.get(name.as_str()).map(|ti| ti.partitions.len());
        let refused = if group_denied {
            Some(GroupError::GroupAuthorizationFailed)
        } else if !authz::allowed_in(ctx, session, &image.acls, (Read, Topic, &name)) {
            Some(GroupError::TopicAuthorizationFailed)
        } else {
            None
        };
        for p in &topic.partitions {
            if refused.is_some() {
                slots.push((t, p.partition_index, refused));
                continue;
            }
            let known =
                count.is_some_and(|n| usize::try_from(p.partition_index).is_ok_and(|i| i < n));
            if known {
                partitions.push(CommitPartition {
                    topic: name.clone(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: if version >= 6 { p.committed_leader_epoch } else { -1 },
                    metadata: opt_str(p.committed_metadata.clone()),
                });
                slots.push((t, p.partition_index, None));
            } else {
                slots.push((t, p.partition_index, Some(GroupError::UnknownTopicOrPartition)));
            }
        }
        response.topics.push(OffsetCommitResponseTopic::default().with_name(topic.name.clone()));
    }
    let commit = CommitRequest {
        group_id: req.group_id.0.to_string(),
        generation_id: req.generation_id_or_member_epoch,
        member_id: req.member_id.to_string(),
        group_instance_id: opt_str(req.group_instance_id),
        retention_time_ms: if version <= 4 { req.retention_time_ms } else { -1 },
        partitions,
    };
    let sent = !commit.partitions.is_empty();
    let answer = if sent { Some(call_group(ctx, GroupCall::Commit(commit)).await) } else { None };
    let correlation_id = header.correlation_id;
    Ok(Box::pin(async move {
        let mut results = match answer {
            Some(answer) => match answer.await {
                GroupAnswer::Commit(errors) => errors,
                GroupAnswer::Failed(e) => vec![Some(e); slots.len()],
                _ => vec![Some(GroupError::CoordinatorNotAvailable); slots.len()],
            },
            None => Vec::new(),
        }
        .into_iter();
        for (t, partition, decided) in slots {
            let error = match decided {
                Some(e) => Some(e),
                None => results.next().flatten(),
            };
            let part = OffsetCommitResponsePartition::default()
                .with_partition_index(partition)
                .with_error_code(error_code(error));
            response.topics[t].partitions.push(part);
        }
        respond(ApiKey::OffsetCommit, version, correlation_id, &response)
    }))
}
