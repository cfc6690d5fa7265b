//! DescribeTransactions (API 65): each transactional id's state, producer id and epoch,
//! timeout, start time and partitions, asked of its coordinator shard
//! (`kafka-transactions.sh describe`).
//!
//! Runs on the connection's shard.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
    TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::{call_txn, error_code, TxnAnswer, TxnCall};
use crate::authz::{Operation, ResourceType};
use crate::protocol::decode_request;
use crate::server::authz::{Auth, Authorize};
use crate::server::dispatch::{respond, ResponseFuture};
use crate::shard::ShardCtx;
use crate::txn::{TxnError, TxnMeta};

pub const VERSIONS: (i16, i16) = (0, 0);

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &std::rc::Rc<crate::security::Session>,
) -> Result<ResponseFuture, String> {
    let (header, req) =
        decode_request::<DescribeTransactionsRequest>(frame, ApiKey::DescribeTransactions, version)
            .map_err(|e| e.to_string())?;
    // Kafka: DESCRIBE on each transactional id; its partitions are shown only for topics
    // the principal may DESCRIBE.
    let auth = Auth::new(ctx, session);
    let mut pending = Vec::with_capacity(req.transactional_ids.len());
    for id in &req.transactional_ids {
        let answer = if auth.allowed(Operation::Describe, ResourceType::TransactionalId, &id.0) {
            let call = TxnCall::Describe(vec![id.0.to_string()]);
            Some(call_txn(ctx, call).await)
        } else {
            None
        };
        pending.push((id.0.to_string(), answer));
    }
    Ok(Box::pin(async move {
        let mut response = DescribeTransactionsResponse::default();
        for (id, answer) in pending {
            let Some(answer) = answer else {
                response.transaction_states.push(denied(&id));
                continue;
            };
            let row = match answer.await {
                TxnAnswer::Described(mut rows) if !rows.is_empty() => rows.remove(0).1,
                TxnAnswer::Failed(e) => Err(e),
                _ => Err(TxnError::CoordinatorNotAvailable),
            };
            let mut state = state_of(&id, row);
            state
                .topics
                .retain(|t| auth.visible(Operation::Describe, ResourceType::Topic, &t.topic.0));
            response.transaction_states.push(state);
        }
        respond(ApiKey::DescribeTransactions, version, header.correlation_id, &response)
    }))
}

/// A transactional id the principal may not DESCRIBE.
fn denied(id: &str) -> TransactionState {
    TransactionState::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(id.to_string())))
        .with_error_code(
            kafka_protocol::error::ResponseError::TransactionalIdAuthorizationFailed.code(),
        )
        .with_transaction_state(StrBytes::from_static_str(""))
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}

fn state_of(id: &str, row: Result<TxnMeta, TxnError>) -> TransactionState {
    let base = TransactionState::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(id.to_string())));
    match row {
        Err(TxnError::InvalidProducerIdMapping) => base
            .with_error_code(kafka_protocol::error::ResponseError::TransactionalIdNotFound.code())
            .with_transaction_state(StrBytes::from_static_str(""))
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
        Err(e) => base
            .with_error_code(error_code(Some(e), 0, 0))
            .with_transaction_state(StrBytes::from_static_str(""))
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
        Ok(m) => {
            let mut topics: Vec<TopicData> = Vec::new();
            for (t, p) in &m.partitions {
                match topics.last_mut() {
                    Some(last) if last.topic.0.as_str() == t.as_str() => last.partitions.push(*p),
                    _ => topics.push(
                        TopicData::default()
                            .with_topic(TopicName(StrBytes::from_string(t.clone())))
                            .with_partitions(vec![*p]),
                    ),
                }
            }
            base.with_transaction_state(StrBytes::from_static_str(m.state.name()))
                .with_transaction_timeout_ms(m.timeout_ms)
                .with_transaction_start_time_ms(m.start_ms)
                .with_producer_id(ProducerId(m.producer_id))
                .with_producer_epoch(m.producer_epoch)
                .with_topics(topics)
        }
    }
}
