//! DeleteRecords (API key 21), v0–2 (every version Kafka 4.x defines): moves each
//! partition's log start offset forward (`kafka-delete-records.sh`, Admin
//! `deleteRecords`). Offset -1 means the high watermark. The new log start is checkpointed
//! before the call answers, so it survives a crash; whole segments below it leave through
//! retention's `.deleted` path. ListOffsets earliest and Fetch honour it.
//!
//! The request is split by owner shard on the connection's shard;
//! `partition::ops::delete_records` runs on the partition's owner shard.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{ApiKey, DeleteRecordsRequest, DeleteRecordsResponse};

use super::dispatch::{respond, ResponseFuture};
use super::route::Routed;
use crate::partition::ops::{PartitionOp, PartitionResult};
use crate::protocol::decode_request;
use crate::shard::ShardCtx;

/// Every version Kafka 4.x defines (v2 is flexible).
pub const VERSIONS: (i16, i16) = (0, 2);

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
) -> Result<ResponseFuture, String> {
    let (header, req) =
        decode_request::<DeleteRecordsRequest>(frame, ApiKey::DeleteRecords, version)
            .map_err(|e| e.to_string())?;
    let mut routed = Routed::default();
    let mut slots = Vec::new();
    let mut response = DeleteRecordsResponse::default();
    for (t, topic) in req.topics.into_iter().enumerate() {
        let name = topic.name.0.to_string();
        for p in topic.partitions {
            let owner = ctx.owner_of(&name, p.partition_index);
            if let Some((shard, _)) = owner {
                let op = PartitionOp::DeleteRecords {
                    topic: name.clone(),
                    partition: p.partition_index,
                    offset: p.offset,
                };
                routed.push(shard, slots.len(), op);
            }
            slots.push((t, p.partition_index, owner.is_some()));
        }
        response.topics.push(DeleteRecordsTopicResult::default().with_name(topic.name));
    }
    let in_flight = routed.send(ctx).await;
    let correlation_id = header.correlation_id;
    Ok(Box::pin(async move {
        let results = in_flight.gather(slots.len()).await;
        for ((t, index, known), result) in slots.into_iter().zip(results) {
            let base = DeleteRecordsPartitionResult::default()
                .with_partition_index(index)
                .with_low_watermark(-1);
            let part = match result {
                Some(PartitionResult::DeleteRecords(Ok(low))) => base.with_low_watermark(low),
                Some(PartitionResult::DeleteRecords(Err((code, _)))) => {
                    base.with_error_code(code.code())
                }
                _ if !known => base.with_error_code(ResponseError::UnknownTopicOrPartition.code()),
                _ => base.with_error_code(ResponseError::NotLeaderOrFollower.code()),
            };
            response.topics[t].partitions.push(part);
        }
        respond(ApiKey::DeleteRecords, version, correlation_id, &response)
    }))
}
