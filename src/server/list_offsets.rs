//! ListOffsets: earliest (-2), latest (-1, the high watermark), max timestamp (-3),
//! earliest local (-4, v8: the same as earliest without tiered storage), latest tiered
//! (-5, v9: offset -1, as Kafka answers with remote storage disabled) and by timestamp,
//! each answered by the partition's owner shard with the leader epoch. v10's timeout_ms
//! bounds waits for remote storage, which never happen here: every answer is immediate.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ListOffsetsRequest, ListOffsetsResponse};

use super::dispatch::{respond, ResponseFuture};
use super::route::{self, Scatter};
use crate::authz::{Operation, ResourceType};
use crate::partition::ops::{PartitionOp, PartitionResult};
use crate::protocol::decode_request;
use crate::shard::ShardCtx;

/// 1 is the Kafka 4 floor; 7 adds max timestamp (-3), 8 earliest local (-4), 9 latest
/// tiered (-5), 10 timeout_ms (Kafka 4.1's maximum).
pub const VERSIONS: (i16, i16) = (1, 10);

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &crate::security::Session,
) -> Result<ResponseFuture, String> {
    let (header, req) = decode_request::<ListOffsetsRequest>(frame, ApiKey::ListOffsets, version)
        .map_err(|e| e.to_string())?;
    let mut scatter = Scatter::default();
    let mut response = ListOffsetsResponse::default();
    // Kafka's check: ListOffsets: DESCRIBE on each topic.
    let image = ctx.image();
    for (t, topic) in req.topics.into_iter().enumerate() {
        let name = topic.name.0.to_string();
        let denied = !crate::server::authz::allowed_in(
            ctx,
            session,
            &image.acls,
            (Operation::Describe, ResourceType::Topic, &name),
        );
        for p in topic.partitions {
            let target = if denied {
                Err(kafka_protocol::error::ResponseError::TopicAuthorizationFailed)
            } else {
                route::owner(ctx, &name, p.partition_index)
            };
            scatter.push((t, p.partition_index), target, || PartitionOp::ListOffsets {
                topic: name.clone(),
                partition: p.partition_index,
                timestamp: p.timestamp,
                current_leader_epoch: p.current_leader_epoch,
                read_committed: req.isolation_level == 1,
            });
        }
        response.topics.push(ListOffsetsTopicResponse::default().with_name(topic.name));
    }
    let in_flight = scatter.send(ctx).await;
    let correlation_id = header.correlation_id;
    Ok(Box::pin(async move {
        for ((t, index), outcome) in in_flight.gather().await {
            let base = ListOffsetsPartitionResponse::default()
                .with_partition_index(index)
                .with_timestamp(-1)
                .with_offset(-1)
                .with_leader_epoch(-1);
            let part = match outcome {
                Ok(PartitionResult::ListOffsets(Ok(a))) => base
                    .with_timestamp(a.timestamp)
                    .with_offset(a.offset)
                    // The field exists from v4 on; encoding it earlier is an error.
                    .with_leader_epoch(if version >= 4 { a.leader_epoch } else { -1 }),
                Ok(PartitionResult::ListOffsets(Err((code, _)))) => {
                    base.with_error_code(code.code())
                }
                other => base.with_error_code(route::error_of(other).code()),
            };
            response.topics[t].partitions.push(part);
        }
        respond(ApiKey::ListOffsets, version, correlation_id, &response)
    }))
}
