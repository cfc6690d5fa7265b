//! KIP-890 part 1, the hanging-transaction defence: before a partition leader appends a
//! transactional batch, it asks the producer's transaction coordinator whether the partition
//! belongs to the producer's ongoing transaction (AddPartitionsToTxn v4 `verify_only`, over
//! the mesh when the coordinator is on this broker, else broker-to-broker). A produce that
//! does not is refused: INVALID_TXN_STATE (not in an ongoing transaction),
//! INVALID_PRODUCER_EPOCH (a fenced producer); while the coordinator cannot answer (loading,
//! moving, unreachable) NOT_ENOUGH_REPLICAS, the retriable error Kafka's leader gives then.
//! On with `transaction.partition.verification.enable` (default true). Kafka verifies only a
//! transaction's first batch on a partition; this verifies every transactional produce
//! request (one batched call per request), which is simpler and equally safe.
//!
//! Runs on the Produce request's connection shard, before the batches are routed.

use std::collections::HashMap;
use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::ProduceRequest;

use super::{call_txn, txn_partition_for, TxnAnswer, TxnCall};
use crate::controller::MetadataImage;
use crate::shard::ShardCtx;
use crate::txn::{TxnError, TXN_TOPIC};

/// The first Produce version naming topics by id.
const TOPIC_ID_VERSION: i16 = 13;
/// RecordBatch attributes bit of a transactional batch.
const TRANSACTIONAL_BIT: u16 = 0x10;

/// The producer id and epoch of a transactional v2 batch (from its header), else `None`.
#[must_use]
pub fn transactional_producer(records: &Bytes) -> Option<(i64, i16)> {
    if records.len() < 57 || records[16] != 2 {
        return None;
    }
    let attributes = u16::from_be_bytes([records[21], records[22]]);
    if attributes & TRANSACTIONAL_BIT == 0 {
        return None;
    }
    let producer_id = i64::from_be_bytes(records[43..51].try_into().ok()?);
    let epoch = i16::from_be_bytes([records[51], records[52]]);
    Some((producer_id, epoch))
}

/// The partitions of a Produce request that failed verification, with their error.
pub async fn check_produce(
    ctx: &Rc<ShardCtx>,
    req: &ProduceRequest,
    version: i16,
    image: &MetadataImage,
) -> HashMap<(String, i32), ResponseError> {
    let mut failed = HashMap::new();
    if !ctx.config.txn.partition_verification_enable {
        return failed;
    }
    let Some(transactional_id) = req.transactional_id.as_ref().map(|t| t.0.to_string()) else {
        return failed;
    };
    // (producer id, epoch) → partitions to verify.
    let mut wanted: HashMap<(i64, i16), Vec<(String, i32)>> = HashMap::new();
    for topic in &req.topic_data {
        let name = if version >= TOPIC_ID_VERSION {
            match image.topic_by_id(&topic.topic_id) {
                Some(t) => t.name.clone(),
                None => continue,
            }
        } else {
            topic.name.0.to_string()
        };
        for p in &topic.partition_data {
            if let Some(producer) = p.records.as_ref().and_then(transactional_producer) {
                wanted.entry(producer).or_default().push((name.clone(), p.index));
            }
        }
    }
    for ((producer_id, epoch), partitions) in wanted {
        let results = verify(ctx, image, &transactional_id, producer_id, epoch, &partitions).await;
        for (tp, error) in partitions.into_iter().zip(results) {
            if let Some(error) = error {
                tracing::debug!(transactional_id, partition = ?tp, ?error, "transactional produce refused");
                failed.insert(tp, error);
            }
        }
    }
    failed
}

/// Asks the coordinator of `transactional_id`; one answer per partition, in order.
async fn verify(
    ctx: &Rc<ShardCtx>,
    image: &MetadataImage,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &[(String, i32)],
) -> Vec<Option<ResponseError>> {
    let all = |e: Option<ResponseError>| partitions.iter().map(|_| e).collect();
    // No `__transaction_state`: no transaction can be ongoing.
    let Some(p) = txn_partition_for(ctx, transactional_id) else {
        return all(Some(ResponseError::InvalidTxnState));
    };
    let Some(leader) = image.partition(TXN_TOPIC, p).map(|pi| pi.leader).filter(|l| l.0 >= 0)
    else {
        return all(Some(ResponseError::NotEnoughReplicas));
    };
    if leader == image.node_id {
        let call = TxnCall::Verify {
            transactional_id: transactional_id.to_string(),
            producer_id,
            producer_epoch,
            partitions: partitions.to_vec(),
        };
        return match call_txn(ctx, call).await.await {
            TxnAnswer::Verified(list) if list.len() == partitions.len() => {
                list.into_iter().map(|r| r.err().map(from_txn_error)).collect()
            }
            TxnAnswer::Failed(e) => all(Some(from_txn_error(e))),
            _ => all(Some(ResponseError::NotEnoughReplicas)),
        };
    }
    let Some((_, host, port)) =
        crate::server::group::find_coordinator::leader_endpoint(ctx, image, leader.0, None)
    else {
        return all(Some(ResponseError::NotEnoughReplicas));
    };
    let addr = format!("{host}:{port}");
    match super::broker_client::verify_partitions(
        &addr,
        &ctx.config.inter_broker_client,
        transactional_id,
        producer_id,
        producer_epoch,
        partitions,
    )
    .await
    {
        Ok(codes) => partitions
            .iter()
            .map(|tp| {
                let code = codes.iter().find(|(q, _)| q == tp).map_or(-1, |(_, c)| *c);
                from_code(code)
            })
            .collect(),
        Err(reason) => {
            tracing::debug!(%addr, "transaction verification failed: {reason}");
            all(Some(ResponseError::NotEnoughReplicas))
        }
    }
}

/// The Produce error for a coordinator's verdict (Kafka's mapping in its replica manager).
fn from_txn_error(e: TxnError) -> ResponseError {
    match e {
        TxnError::InvalidTxnState | TxnError::InvalidProducerIdMapping => {
            ResponseError::InvalidTxnState
        }
        TxnError::ProducerFenced => ResponseError::InvalidProducerEpoch,
        TxnError::ConcurrentTransactions
        | TxnError::InvalidTransactionTimeout
        | TxnError::CoordinatorNotAvailable
        | TxnError::CoordinatorLoadInProgress
        | TxnError::NotCoordinator => ResponseError::NotEnoughReplicas,
    }
}

/// The same mapping from a remote coordinator's error code.
fn from_code(code: i16) -> Option<ResponseError> {
    match code {
        0 => None,
        c if c == ResponseError::InvalidTxnState.code()
            || c == ResponseError::InvalidProducerIdMapping.code() =>
        {
            Some(ResponseError::InvalidTxnState)
        }
        c if c == ResponseError::ProducerFenced.code()
            || c == ResponseError::InvalidProducerEpoch.code() =>
        {
            Some(ResponseError::InvalidProducerEpoch)
        }
        _ => Some(ResponseError::NotEnoughReplicas),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transactional_batches_are_recognised_by_their_header() {
        let marker = crate::storage::producer_state::encode_marker(42, 3, true, 0, 0);
        // A control batch is transactional too (bit 4 set with the control bit).
        assert_eq!(transactional_producer(&marker), Some((42, 3)));
        let mut plain = marker.to_vec();
        plain[22] &= !0x10;
        assert_eq!(transactional_producer(&Bytes::from(plain)), None);
        assert_eq!(transactional_producer(&Bytes::from_static(b"short")), None);
    }

    #[test]
    fn coordinator_verdicts_map_to_kafka_produce_errors() {
        assert_eq!(from_code(0), None);
        assert_eq!(from_code(48), Some(ResponseError::InvalidTxnState));
        assert_eq!(from_code(90), Some(ResponseError::InvalidProducerEpoch));
        assert_eq!(from_code(51), Some(ResponseError::NotEnoughReplicas));
        assert_eq!(from_txn_error(TxnError::NotCoordinator), ResponseError::NotEnoughReplicas);
    }
}
