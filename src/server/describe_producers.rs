//! DescribeProducers (API key 61, v0, the only version Kafka 4.1 has): each partition's
//! idempotent producers — id, epoch, last sequence, last timestamp — answered by the
//! partition's owner shard from its producer state (`storage::producer_state`), what
//! `kafka-transactions.sh describe-producers` shows. No transactions: coordinator epoch and
//! current transaction start offset are always -1.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeProducersResponse, ProducerId,
};
use kafka_protocol::protocol::StrBytes;

use super::dispatch::{respond, ResponseFuture};
use super::route::{self, Scatter};
use crate::authz::{Operation, ResourceType};
use crate::partition::ops::{PartitionOp, PartitionResult, ProducerInfo};
use crate::protocol::decode_request;
use crate::shard::ShardCtx;

pub const VERSIONS: (i16, i16) = (0, 0);

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &crate::security::Session,
) -> Result<ResponseFuture, String> {
    let (header, req) =
        decode_request::<DescribeProducersRequest>(frame, ApiKey::DescribeProducers, version)
            .map_err(|e| e.to_string())?;
    let mut scatter = Scatter::default();
    let mut response = DescribeProducersResponse::default();
    // Kafka's check: DescribeProducers: READ on each topic.
    let image = ctx.image();
    for (t, topic) in req.topics.into_iter().enumerate() {
        let name = topic.name.0.to_string();
        let denied = !crate::server::authz::allowed_in(
            ctx,
            session,
            &image.acls,
            (Operation::Read, ResourceType::Topic, &name),
        );
        for index in topic.partition_indexes {
            let target = if denied {
                Err(kafka_protocol::error::ResponseError::TopicAuthorizationFailed)
            } else {
                route::owner(ctx, &name, index)
            };
            scatter.push((t, index), target, || PartitionOp::DescribeProducers {
                topic: name.clone(),
                partition: index,
            });
        }
        response.topics.push(TopicResponse::default().with_name(topic.name));
    }
    let in_flight = scatter.send(ctx).await;
    let correlation_id = header.correlation_id;
    Ok(Box::pin(async move {
        for ((t, index), outcome) in in_flight.gather().await {
            let base = PartitionResponse::default().with_partition_index(index);
            let part = match outcome {
                Ok(PartitionResult::DescribeProducers(Ok(producers))) => {
                    base.with_active_producers(producers.into_iter().map(producer_state).collect())
                }
                Ok(PartitionResult::DescribeProducers(Err((code, message)))) => base
                    .with_error_code(code.code())
                    .with_error_message(message.map(StrBytes::from_string)),
                other => base.with_error_code(route::error_of(other).code()),
            };
            response.topics[t].partitions.push(part);
        }
        respond(ApiKey::DescribeProducers, version, correlation_id, &response)
    }))
}

/// No transactions: coordinator epoch and transaction start offset are always -1.
fn producer_state(p: ProducerInfo) -> ProducerState {
    ProducerState::default()
        .with_producer_id(ProducerId(p.producer_id))
        .with_producer_epoch(i32::from(p.epoch))
        .with_last_sequence(p.last_sequence)
        .with_last_timestamp(p.last_timestamp_ms)
        .with_coordinator_epoch(-1)
        .with_current_txn_start_offset(p.current_txn_start_offset)
}
