//! OffsetCommit: partitions of unknown topics are refused here; the rest go to the
//! coordinator shard, which answers once the commit records are durable.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetCommitRequest, OffsetCommitResponse};

use super::commit_slots::{answered, Sorted};
use super::{call_group, error_code, opt_str, GroupCall};
use crate::authz::Operation::Read;
use crate::authz::ResourceType::{Group, Topic};
use crate::group::types::{CommitRequest, GroupError};
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
    let mut sorted = Sorted::default();
    let mut response = OffsetCommitResponse::default();
    for (t, topic) in req.topics.iter().enumerate() {
        let name = topic.name.0.as_str();
        let refused = if group_denied {
            Some(GroupError::GroupAuthorizationFailed)
        } else if !authz::allowed_in(ctx, session, &image.acls, (Read, Topic, name)) {
            Some(GroupError::TopicAuthorizationFailed)
        } else {
            None
        };
        let given = topic.partitions.iter().map(|p| {
            let epoch = if version >= 6 { p.committed_leader_epoch } else { -1 };
            (p.partition_index, p.committed_offset, epoch, opt_str(p.committed_metadata.clone()))
        });
        sorted.topic(&image, (t, name), refused, given);
        response.topics.push(OffsetCommitResponseTopic::default().with_name(topic.name.clone()));
    }
    let Sorted { slots, partitions } = sorted;
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
        for (t, partition, error) in answered(slots, answer).await {
            let part = OffsetCommitResponsePartition::default()
                .with_partition_index(partition)
                .with_error_code(error_code(error));
            response.topics[t].partitions.push(part);
        }
        respond(ApiKey::OffsetCommit, version, correlation_id, &response)
    }))
}
