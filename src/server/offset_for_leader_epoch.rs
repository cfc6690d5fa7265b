//! OffsetForLeaderEpoch (v3+): the end offset of a leader epoch from the partition's
//! epoch checkpoint, on the owner shard. Advertising it makes the Java consumer check
//! for log truncation after a leader change.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{ApiKey, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::dispatch::{respond, ResponseFuture};
use super::route::{self, Scatter};
use crate::authz::{Operation, ResourceType};
use crate::partition::ops::{PartitionOp, PartitionResult};
use crate::protocol::decode_request;
use crate::shard::ShardCtx;

pub const VERSIONS: (i16, i16) = (3, 4);

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &crate::security::Session,
) -> Result<ResponseFuture, String> {
    let (header, req) =
        decode_request::<OffsetForLeaderEpochRequest>(frame, ApiKey::OffsetForLeaderEpoch, version)
            .map_err(|e| e.to_string())?;
    let mut scatter = Scatter::default();
    let mut response = OffsetForLeaderEpochResponse::default();
    // Kafka's check: OffsetForLeaderEpoch: CLUSTER_ACTION on the cluster (followers), else DESCRIBE on each topic (consumers, KIP-320).
    let image = ctx.image();
    let cluster = crate::server::authz::filter(
        ctx,
        session,
        &image.acls,
        (Operation::ClusterAction, ResourceType::Cluster, crate::authz::CLUSTER_NAME),
    );
    for (t, topic) in req.topics.into_iter().enumerate() {
        let name = topic.topic.0.to_string();
        let denied = !cluster
            && !crate::server::authz::allowed_in(
                ctx,
                session,
                &image.acls,
                (Operation::Describe, ResourceType::Topic, &name),
            );
        for p in topic.partitions {
            let target = if denied {
                Err(kafka_protocol::error::ResponseError::TopicAuthorizationFailed)
            } else {
                route::owner(ctx, &name, p.partition)
            };
            scatter.push((t, p.partition), target, || PartitionOp::EpochEnd {
                topic: name.clone(),
                partition: p.partition,
                leader_epoch: p.leader_epoch,
                current_leader_epoch: p.current_leader_epoch,
            });
        }
        response.topics.push(OffsetForLeaderTopicResult::default().with_topic(topic.topic));
    }
    let in_flight = scatter.send(ctx).await;
    let correlation_id = header.correlation_id;
    Ok(Box::pin(async move {
        for ((t, partition), outcome) in in_flight.gather().await {
            let base = EpochEndOffset::default()
                .with_partition(partition)
                .with_leader_epoch(-1)
                .with_end_offset(-1);
            let part = match outcome {
                Ok(PartitionResult::EpochEnd(Ok((epoch, end)))) => {
                    base.with_leader_epoch(epoch).with_end_offset(end)
                }
                Ok(PartitionResult::EpochEnd(Err((code, _)))) => base.with_error_code(code.code()),
                other => base.with_error_code(route::error_of(other).code()),
            };
            response.topics[t].partitions.push(part);
        }
        respond(ApiKey::OffsetForLeaderEpoch, version, correlation_id, &response)
    }))
}
