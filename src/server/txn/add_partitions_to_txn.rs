//! AddPartitionsToTxn v0–3 (the client path): adds partitions to the producer's open
//! transaction on its coordinator. Unknown partitions fail the request as Kafka answers it:
//! UNKNOWN_TOPIC_OR_PARTITION for them and OPERATION_NOT_ATTEMPTED for the others. v4 is
//! the broker-to-broker form (KIP-890 part 1): several transactional ids, each either added
//! or, with `verify_only`, only checked against the ongoing transaction (what a partition
//! leader on another broker asks before appending a transactional batch). v5 (KIP-890
//! part 2) is not served.
//!
//! Runs on the connection's shard; the answer comes from the coordinator shard.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey};

use super::{call_txn, done, error_code, TxnCall};
use crate::authz::Operation;
use crate::authz::ResourceType::{Topic, TransactionalId};
use crate::protocol::decode_request;
use crate::server::authz;
use crate::server::dispatch::{ready, respond, ResponseFuture};
use crate::shard::ShardCtx;

/// v0–3: the client versions; v4: broker-to-broker (verification).
pub const VERSIONS: (i16, i16) = (0, 4);
/// The first version with batched transactions (`transactions`).
const BATCHED_VERSION: i16 = 4;
const FENCED_FROM: i16 = 2;

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &crate::security::Session,
) -> Result<ResponseFuture, String> {
    let (header, req) =
        decode_request::<AddPartitionsToTxnRequest>(frame, ApiKey::AddPartitionsToTxn, version)
            .map_err(|e| e.to_string())?;
    if version >= BATCHED_VERSION {
        // Only brokers send these (KIP-890): CLUSTER_ACTION on the cluster.
        if !authz::cluster(ctx, session, Operation::ClusterAction) {
            let response = AddPartitionsToTxnResponse::default()
                .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
            let outcome =
                respond(ApiKey::AddPartitionsToTxn, version, header.correlation_id, &response);
            return Ok(ready(outcome));
        }
        return Ok(batched(ctx, header.correlation_id, req, version).await);
    }
    let image = ctx.image();
    // Kafka: WRITE on the transactional id (else every partition fails with it), then WRITE
    // on each (non-internal) topic, then the partitions' existence; any refusal leaves the
    // others OPERATION_NOT_ATTEMPTED.
    let txn_id = req.v3_and_below_transactional_id.0.as_str();
    let txn_denied =
        !authz::allowed_in(ctx, session, &image.acls, (Operation::Write, TransactionalId, txn_id));
    let mut partitions = Vec::new();
    let mut unknown: Vec<(String, i32, ResponseError)> = Vec::new();
    for topic in &req.v3_and_below_topics {
        let name = topic.name.0.to_string();
        let count = image.topics.get(name.as_str()).map(|t| t.partitions.len());
        let topic_denied = !txn_denied
            && !crate::controller::is_internal(&name)
            && !authz::allowed_in(ctx, session, &image.acls, (Operation::Write, Topic, &name));
        for p in &topic.partitions {
            let known = count.is_some_and(|n| usize::try_from(*p).is_ok_and(|i| i < n));
            if txn_denied {
                unknown.push((name.clone(), *p, ResponseError::TransactionalIdAuthorizationFailed));
            } else if topic_denied {
                unknown.push((name.clone(), *p, ResponseError::TopicAuthorizationFailed));
            } else if known {
                partitions.push((name.clone(), *p));
            } else {
                unknown.push((name.clone(), *p, ResponseError::UnknownTopicOrPartition));
            }
        }
    }
    let answer = if unknown.is_empty() {
        let call = TxnCall::AddPartitions {
            transactional_id: req.v3_and_below_transactional_id.0.to_string(),
            producer_id: req.v3_and_below_producer_id.0,
            producer_epoch: req.v3_and_below_producer_epoch,
            partitions,
        };
        Some(call_txn(ctx, call).await)
    } else {
        None
    };
    let correlation_id = header.correlation_id;
    Ok(Box::pin(async move {
        let error = match answer {
            Some(answer) => error_code(done(answer.await), FENCED_FROM, version),
            None => ResponseError::OperationNotAttempted.code(),
        };
        let mut response = AddPartitionsToTxnResponse::default();
        for topic in &req.v3_and_below_topics {
            let results = topic
                .partitions
                .iter()
                .map(|p| {
                    let bad = unknown
                        .iter()
                        .find(|(t, q, _)| t.as_str() == topic.name.0.as_str() && q == p);
                    let code = bad.map_or(error, |(_, _, e)| e.code());
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(*p)
                        .with_partition_error_code(code)
                })
                .collect();
            response.results_by_topic_v3_and_below.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(topic.name.clone())
                    .with_results_by_partition(results),
            );
        }
        respond(ApiKey::AddPartitionsToTxn, version, correlation_id, &response)
    }))
}

/// v4: each transaction added or verified on its coordinator; every partition answered.
async fn batched(
    ctx: &Rc<ShardCtx>,
    correlation_id: i32,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> ResponseFuture {
    use kafka_protocol::messages::add_partitions_to_txn_response::AddPartitionsToTxnResult;
    let mut pending = Vec::new();
    for txn in &req.transactions {
        let partitions: Vec<(String, i32)> = txn
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.to_string(), *p)))
            .collect();
        let transactional_id = txn.transactional_id.0.to_string();
        let call = if txn.verify_only {
            TxnCall::Verify {
                transactional_id,
                producer_id: txn.producer_id.0,
                producer_epoch: txn.producer_epoch,
                partitions: partitions.clone(),
            }
        } else {
            TxnCall::AddPartitions {
                transactional_id,
                producer_id: txn.producer_id.0,
                producer_epoch: txn.producer_epoch,
                partitions: partitions.clone(),
            }
        };
        pending.push((txn.transactional_id.clone(), partitions, call_txn(ctx, call).await));
    }
    Box::pin(async move {
        let mut response = AddPartitionsToTxnResponse::default();
        for (transactional_id, partitions, answer) in pending {
            let codes: Vec<i16> = match answer.await {
                super::TxnAnswer::Verified(list) => {
                    list.into_iter().map(|r| error_code(r.err(), FENCED_FROM, version)).collect()
                }
                other => {
                    let code = error_code(done(other), FENCED_FROM, version);
                    partitions.iter().map(|_| code).collect()
                }
            };
            let mut topics: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
            for ((topic, p), code) in partitions.into_iter().zip(codes) {
                let result = AddPartitionsToTxnPartitionResult::default()
                    .with_partition_index(p)
                    .with_partition_error_code(code);
                match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                    Some(t) => t.results_by_partition.push(result),
                    None => topics.push(
                        AddPartitionsToTxnTopicResult::default()
                            .with_name(kafka_protocol::messages::TopicName(
                                kafka_protocol::protocol::StrBytes::from_string(topic),
                            ))
                            .with_results_by_partition(vec![result]),
                    ),
                }
            }
            response.results_by_transaction.push(
                AddPartitionsToTxnResult::default()
                    .with_transactional_id(transactional_id)
                    .with_topic_results(topics),
            );
        }
        respond(ApiKey::AddPartitionsToTxn, version, correlation_id, &response)
    })
}
