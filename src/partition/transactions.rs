//! The partition side of transactions that the request path calls into: what a
//! read_committed fetch reports as `aborted_transactions`, and what happens on a partition's
//! owner shard once a marker is durable (a marker on `__consumer_offsets` completes the
//! transaction's pending offset commits in the group coordinator of that shard).
//!
//! It also defines [`CoordinatorEpochs`], which each partition holds: per producer the
//! highest coordinator epoch whose marker the partition took, so a marker from a deposed
//! coordinator (an older epoch, after the `__transaction_state` partition's leadership
//! moved) is refused with TRANSACTION_COORDINATOR_FENCED, as Kafka's
//! `ProducerStateEntry.coordinatorEpoch` does. In memory with the partition on its owner
//! shard (bounded, `TXN_COORDINATOR_EPOCHS_MAX`): after a restart the first marker sets it
//! again, and a deleted topic takes its epochs with it.
//!
//! Runs on the partition's owner shard (fetch, markers) and on the connection's shard
//! (building the response). Small functions on purpose: `server::fetch` and
//! `partition::ops` only call them. Part of `partition` (not `txn`, the coordinator's
//! layer above) because the partition holds this state and calls it.

use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::AbortedTransaction;
use kafka_protocol::messages::ProducerId;

use crate::constants::OFFSETS_TOPIC;
use crate::shard::ShardCtx;
use crate::storage::producer_state::CompletedTxn;
use crate::types::Offset;

/// The offset after the last batch of a run of whole batches (`None` if there is none).
#[must_use]
pub fn records_end(records: &Bytes) -> Option<Offset> {
    let mut at = 0usize;
    let mut end = None;
    while records.len() >= at + 27 {
        let base = i64::from_be_bytes(records[at..at + 8].try_into().ok()?);
        let len = i32::from_be_bytes(records[at + 8..at + 12].try_into().ok()?);
        let delta = i32::from_be_bytes(records[at + 23..at + 27].try_into().ok()?);
        end = Some(Offset(base + i64::from(delta) + 1));
        at += 12 + usize::try_from(len).ok()?;
    }
    end
}

/// The response field: `None` (null) for read_uncommitted, else the list.
#[must_use]
pub fn aborted_field(aborted: Option<Vec<(i64, i64)>>) -> Option<Vec<AbortedTransaction>> {
    aborted.map(|list| {
        list.into_iter()
            .map(|(producer_id, first_offset)| {
                AbortedTransaction::default()
                    .with_producer_id(ProducerId(producer_id))
                    .with_first_offset(first_offset)
            })
            .collect()
    })
}

/// Applies (`true`) or drops a transaction's pending offset commits in the group
/// coordinator of `__consumer_offsets` partition `partition` on this shard, for producer
/// `producer_id`. The coordinator sits in a layer above this one, so the server registers
/// it ([`register_offsets_completion`]) instead of this module naming it.
pub type OffsetsCompletion = fn(ctx: &ShardCtx, partition: i32, producer_id: i64, commit: bool);

/// Set once per process by the server before any shard serves; the same function pointer
/// for every shard (each call runs on the marker's owner shard).
static OFFSETS_COMPLETION: std::sync::OnceLock<OffsetsCompletion> = std::sync::OnceLock::new();

/// Registers what a marker on `__consumer_offsets` completes (idempotent: the first wins).
pub fn register_offsets_completion(complete: OffsetsCompletion) {
    let _ = OFFSETS_COMPLETION.set(complete);
}

/// A marker closed `txn` on `topic`-`partition` (durably): counts it, and on
/// `__consumer_offsets` applies or drops the transaction's pending offsets.
pub fn marker_written(ctx: &ShardCtx, topic: &str, partition: i32, txn: &CompletedTxn) {
    crate::metrics::txn_marker_written(!txn.aborted);
    if topic == OFFSETS_TOPIC {
        match OFFSETS_COMPLETION.get() {
            Some(complete) => complete(ctx, partition, txn.producer_id, !txn.aborted),
            None => tracing::error!(
                partition,
                producer_id = txn.producer_id,
                "a transaction marker on __consumer_offsets with no group coordinator registered"
            ),
        }
    }
}

/// Per partition, kept with it on its owner shard (`partition::OwnedPartition`): for each
/// producer, the highest coordinator epoch whose marker the partition took (Kafka keeps it
/// in `ProducerStateEntry.coordinatorEpoch`). In memory only and bounded
/// (`TXN_COORDINATOR_EPOCHS_MAX` producers): after a restart the first marker sets it again.
#[derive(Debug, Default)]
pub struct CoordinatorEpochs(HashMap<i64, i32>);

impl CoordinatorEpochs {
    /// Kafka's marker rule: a marker whose coordinator epoch is older than the last one the
    /// partition took for the producer is TRANSACTION_COORDINATOR_FENCED; otherwise its
    /// epoch is remembered. A negative epoch (an operator's `kafka-transactions.sh abort`,
    /// since DescribeProducers reports no coordinator epoch) is not checked.
    pub fn check(
        &mut self,
        producer_id: i64,
        coordinator_epoch: i32,
    ) -> Result<(), (ResponseError, Option<String>)> {
        if coordinator_epoch < 0 {
            return Ok(());
        }
        if let Some(&seen) = self.0.get(&producer_id) {
            if coordinator_epoch < seen {
                let why =
                    format!("marker from coordinator epoch {coordinator_epoch}, older than {seen}");
                return Err((ResponseError::TransactionCoordinatorFenced, Some(why)));
            }
        }
        if self.0.len() >= crate::constants::TXN_COORDINATOR_EPOCHS_MAX
            && !self.0.contains_key(&producer_id)
        {
            // Bounded: forget an arbitrary half (a forgotten entry only skips one check).
            let victims: Vec<i64> = self.0.keys().take(self.0.len() / 2).copied().collect();
            for k in victims {
                self.0.remove(&k);
            }
        }
        self.0.insert(producer_id, coordinator_epoch);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_end_is_after_the_last_batch() {
        let a = crate::storage::producer_state::encode_marker(1, 0, true, 0, 0);
        let mut both = a.to_vec();
        let mut b = a.to_vec();
        b[0..8].copy_from_slice(&5i64.to_be_bytes());
        both.extend_from_slice(&b);
        assert_eq!(records_end(&Bytes::from(both)), Some(Offset(6)));
        assert_eq!(records_end(&Bytes::new()), None);
    }

    #[test]
    fn an_older_coordinator_epoch_is_fenced() {
        let (mut p0, mut p1) = (CoordinatorEpochs::default(), CoordinatorEpochs::default());
        assert!(p0.check(7, 3).is_ok());
        assert!(p0.check(7, 3).is_ok(), "the same epoch retries");
        let err = p0.check(7, 2).unwrap_err();
        assert_eq!(err.0, ResponseError::TransactionCoordinatorFenced);
        assert!(p0.check(7, 4).is_ok(), "a newer epoch takes over");
        assert!(p1.check(7, 0).is_ok(), "per partition");
        assert!(p0.check(7, -1).is_ok(), "an operator's abort");
        assert!(p0.check(8, 0).is_ok(), "per producer");
    }

    #[test]
    fn the_epochs_stay_bounded() {
        let mut p = CoordinatorEpochs::default();
        for pid in 0..(crate::constants::TXN_COORDINATOR_EPOCHS_MAX as i64 * 3) {
            p.check(pid, 1).unwrap();
            assert!(p.0.len() <= crate::constants::TXN_COORDINATOR_EPOCHS_MAX);
        }
    }
}
