//! WriteTxnMarkers (API 27) from outside: the request Kafka's coordinators send to partition
//! leaders, and what `kafka-transactions.sh abort` sends to end a hanging transaction.
//! Each marker goes to its partition's owner shard (`PartitionOp::WriteMarker`), like the
//! markers this broker's own coordinator writes.
//!
//! Runs on the connection's shard.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{ApiKey, WriteTxnMarkersRequest, WriteTxnMarkersResponse};

use crate::authz::{Operation, ResourceType};
use crate::partition::ops::{PartitionOp, PartitionResult};
use crate::protocol::decode_request;
use crate::server::authz::Authorize;
use crate::server::dispatch::{respond, ResponseFuture};
use crate::server::route::{self, Scatter};
use crate::shard::ShardCtx;

/// Kafka 4 serves v1 only (v0 was removed).
pub const VERSIONS: (i16, i16) = (1, 1);

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &std::rc::Rc<crate::security::Session>,
) -> Result<ResponseFuture, String> {
    let (header, req) =
        decode_request::<WriteTxnMarkersRequest>(frame, ApiKey::WriteTxnMarkers, version)
            .map_err(|e| e.to_string())?;
    // Kafka: ALTER on the cluster, else CLUSTER_ACTION (brokers write markers), else every
    // partition is refused.
    let auth = crate::server::authz::Auth::new(ctx, session);
    let allowed = auth.visible(Operation::Alter, ResourceType::Cluster, crate::authz::CLUSTER_NAME)
        || auth.cluster(Operation::ClusterAction);
    let mut scatter = Scatter::default();
    let mut response = WriteTxnMarkersResponse::default();
    for (m, marker) in req.markers.iter().enumerate() {
        let mut result = WritableTxnMarkerResult::default().with_producer_id(marker.producer_id);
        for (t, topic) in marker.topics.iter().enumerate() {
            let name = topic.name.0.to_string();
            for p in &topic.partition_indexes {
                let target = if allowed {
                    route::owner(ctx, &name, *p)
                } else {
                    Err(ResponseError::ClusterAuthorizationFailed)
                };
                scatter.push((m, t, *p), target, || PartitionOp::WriteMarker {
                    topic: name.clone(),
                    partition: *p,
                    producer_id: marker.producer_id.0,
                    producer_epoch: marker.producer_epoch,
                    commit: marker.transaction_result,
                    coordinator_epoch: marker.coordinator_epoch,
                });
            }
            result
                .topics
                .push(WritableTxnMarkerTopicResult::default().with_name(topic.name.clone()));
        }
        response.markers.push(result);
    }
    let in_flight = scatter.send(ctx).await;
    let correlation_id = header.correlation_id;
    Ok(Box::pin(async move {
        for ((m, t, p), outcome) in in_flight.gather().await {
            let code = match outcome {
                Ok(PartitionResult::WriteMarker(Ok(_))) => 0,
                Ok(PartitionResult::WriteMarker(Err((code, _)))) => code.code(),
                Ok(_) => ResponseError::UnknownServerError.code(),
                other => route::error_of(other).code(),
            };
            response.markers[m].topics[t].partitions.push(
                WritableTxnMarkerPartitionResult::default()
                    .with_partition_index(p)
                    .with_error_code(code),
            );
        }
        respond(ApiKey::WriteTxnMarkers, version, correlation_id, &response)
    }))
}
