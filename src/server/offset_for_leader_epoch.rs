//! OffsetForLeaderEpoch (v3+): the end offset of a leader epoch from the partition's
//! epoch checkpoint, on the owner shard. Advertising it makes the Java consumer check
//! for log truncation after a leader change.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{ApiKey, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::dispatch::{respond, ResponseFuture};
use super::route::Routed;
use crate::partition::ops::{PartitionOp, PartitionResult};
use crate::protocol::decode_request;
use crate::shard::ShardCtx;

pub const VERSIONS: (i16, i16) = (3, 4);

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
) -> Result<ResponseFuture, String> {
    let (header, req) =
        decode_request::<OffsetForLeaderEpochRequest>(frame, ApiKey::OffsetForLeaderEpoch, version)
            .map_err(|e| e.to_string())?;
    let mut routed = Routed::default();
    let mut slots = Vec::new();
    let mut response = OffsetForLeaderEpochResponse::default();
    for (t, topic) in req.topics.into_iter().enumerate() {
        let name = topic.topic.0.to_string();
        for p in topic.partitions {
            let owner = ctx.owner_of(&name, p.partition);
            if let Some((shard, _)) = owner {
                let op = PartitionOp::EpochEnd {
                    topic: name.clone(),
                    partition: p.partition,
                    leader_epoch: p.leader_epoch,
                    current_leader_epoch: p.current_leader_epoch,
                };
                routed.push(shard, slots.len(), op);
            }
            slots.push((t, p.partition, owner.is_some()));
        }
        response.topics.push(OffsetForLeaderTopicResult::default().with_topic(topic.topic));
    }
    let in_flight = routed.send(ctx).await;
    let correlation_id = header.correlation_id;
    Ok(Box::pin(async move {
        let results = in_flight.gather(slots.len()).await;
        for ((t, partition, known), result) in slots.into_iter().zip(results) {
            let base = EpochEndOffset::default()
                .with_partition(partition)
                .with_leader_epoch(-1)
                .with_end_offset(-1);
            let part = match result {
                Some(PartitionResult::EpochEnd(Ok((epoch, end)))) => {
                    base.with_leader_epoch(epoch).with_end_offset(end)
                }
                Some(PartitionResult::EpochEnd(Err((code, _)))) => {
                    base.with_error_code(code.code())
                }
                _ if !known => base.with_error_code(ResponseError::UnknownTopicOrPartition.code()),
                _ => base.with_error_code(ResponseError::NotLeaderOrFollower.code()),
            };
            response.topics[t].partitions.push(part);
        }
        respond(ApiKey::OffsetForLeaderEpoch, version, correlation_id, &response)
    }))
}
