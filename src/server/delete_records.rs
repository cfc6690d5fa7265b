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
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{ApiKey, DeleteRecordsRequest, DeleteRecordsResponse};

use super::dispatch::{respond, ResponseFuture};
use super::route::{self, Scatter};
use crate::authz::{Operation, ResourceType};
use crate::partition::ops::{PartitionOp, PartitionResult};
use crate::protocol::decode_request;
use crate::shard::ShardCtx;

/// Every version Kafka 4.x defines (v2 is flexible).
pub const VERSIONS: (i16, i16) = (0, 2);

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &crate::security::Session,
) -> Result<ResponseFuture, String> {
    let (header, req) =
        decode_request::<DeleteRecordsRequest>(frame, ApiKey::DeleteRecords, version)
            .map_err(|e| e.to_string())?;
    let mut scatter = Scatter::default();
    let mut response = DeleteRecordsResponse::default();
    // Kafka's check: DeleteRecords: DELETE on each topic.
    let image = ctx.image();
    for (t, topic) in req.topics.into_iter().enumerate() {
        let name = topic.name.0.to_string();
        let denied = !crate::server::authz::allowed_in(
            ctx,
            session,
            &image.acls,
            (Operation::Delete, ResourceType::Topic, &name),
        );
        for p in topic.partitions {
            let target = if denied {
                Err(kafka_protocol::error::ResponseError::TopicAuthorizationFailed)
            } else {
                route::owner(ctx, &name, p.partition_index)
            };
            scatter.push((t, p.partition_index), target, || PartitionOp::DeleteRecords {
                topic: name.clone(),
                partition: p.partition_index,
                offset: p.offset,
            });
        }
        response.topics.push(DeleteRecordsTopicResult::default().with_name(topic.name));
    }
    let in_flight = scatter.send(ctx).await;
    let correlation_id = header.correlation_id;
    Ok(Box::pin(async move {
        for ((t, index), outcome) in in_flight.gather().await {
            let base = DeleteRecordsPartitionResult::default()
                .with_partition_index(index)
                .with_low_watermark(-1);
            let part = match outcome {
                Ok(PartitionResult::DeleteRecords(Ok(low))) => base.with_low_watermark(low),
                Ok(PartitionResult::DeleteRecords(Err((code, _)))) => {
                    base.with_error_code(code.code())
                }
                other => base.with_error_code(route::error_of(other).code()),
            };
            response.topics[t].partitions.push(part);
        }
        respond(ApiKey::DeleteRecords, version, correlation_id, &response)
    }))
}
