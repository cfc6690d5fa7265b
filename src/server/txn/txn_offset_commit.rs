//! TxnOffsetCommit: offsets committed inside a transaction. The group coordinator writes them
//! to `__consumer_offsets` as a transactional batch of the producer and applies them only
//! when the transaction's COMMIT marker lands there (an ABORT drops them); see
//! `server::group::driver`.
//!
//! Runs on the connection's shard; the answer comes from the group's coordinator shard.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use crate::authz::Operation::{Read, Write};
use crate::authz::ResourceType::{Group, Topic, TransactionalId};
use crate::group::types::{CommitRequest, GroupError};
use crate::protocol::decode_request;
use crate::server::authz;
use crate::server::dispatch::{respond, ResponseFuture};
use crate::server::group::commit_slots::{answered, Sorted};
use crate::server::group::{call_group, error_code, GroupCall};
use crate::shard::ShardCtx;

/// Kafka 4's range up to v4 (v5 is transaction.version 2).
pub const VERSIONS: (i16, i16) = (0, 4);

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &crate::security::Session,
) -> Result<ResponseFuture, String> {
    let (header, req) =
        decode_request::<TxnOffsetCommitRequest>(frame, ApiKey::TxnOffsetCommit, version)
            .map_err(|e| e.to_string())?;
    let image = ctx.image();
    // Kafka: WRITE on the transactional id, then READ on the group (either refusal goes on
    // every partition), then READ on each topic.
    let acls = &image.acls;
    let everything = if !authz::allowed_in(
        ctx,
        session,
        acls,
        (Write, TransactionalId, &req.transactional_id.0),
    ) {
        Some(GroupError::TransactionalIdAuthorizationFailed)
    } else if !authz::allowed_in(ctx, session, acls, (Read, Group, &req.group_id.0)) {
        Some(GroupError::GroupAuthorizationFailed)
    } else {
        None
    };
    let mut sorted = Sorted::default();
    let mut response = TxnOffsetCommitResponse::default();
    for (t, topic) in req.topics.iter().enumerate() {
        let name = topic.name.0.as_str();
        let refused = everything.or_else(|| {
            (!authz::allowed_in(ctx, session, acls, (Read, Topic, name)))
                .then_some(GroupError::TopicAuthorizationFailed)
        });
        let given = topic.partitions.iter().map(|p| {
            let epoch = if version >= 2 { p.committed_leader_epoch } else { -1 };
            let metadata = p.committed_metadata.as_ref().map(ToString::to_string);
            (p.partition_index, p.committed_offset, epoch, metadata)
        });
        sorted.topic(&image, (t, name), refused, given);
        response.topics.push(TxnOffsetCommitResponseTopic::default().with_name(topic.name.clone()));
    }
    let Sorted { slots, partitions } = sorted;
    let commit = CommitRequest {
        group_id: req.group_id.0.to_string(),
        generation_id: if version >= 3 { req.generation_id } else { -1 },
        member_id: if version >= 3 { req.member_id.to_string() } else { String::new() },
        group_instance_id: if version >= 3 {
            req.group_instance_id.as_ref().map(ToString::to_string)
        } else {
            None
        },
        retention_time_ms: -1,
        partitions,
    };
    let sent = !commit.partitions.is_empty();
    let call = GroupCall::TxnCommit {
        req: commit,
        producer_id: req.producer_id.0,
        producer_epoch: req.producer_epoch,
    };
    let answer = if sent { Some(call_group(ctx, call).await) } else { None };
    let correlation_id = header.correlation_id;
    Ok(Box::pin(async move {
        for (t, partition, error) in answered(slots, answer).await {
            response.topics[t].partitions.push(
                TxnOffsetCommitResponsePartition::default()
                    .with_partition_index(partition)
                    .with_error_code(error_code(error)),
            );
        }
        respond(ApiKey::TxnOffsetCommit, version, correlation_id, &response)
    }))
}
