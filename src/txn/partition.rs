//! The partition side of transactions that the request path calls into: what a
//! read_committed fetch reports as `aborted_transactions`, and what happens on a partition's
//! owner shard once a marker is durable (a marker on `__consumer_offsets` completes the
//! transaction's pending offset commits in the group coordinator of that shard).
//!
//! Runs on the partition's owner shard (fetch, markers) and on the connection's shard
//! (building the response). Small functions on purpose: `server::fetch` and
//! `partition::ops` only call them.

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::AbortedTransaction;
use kafka_protocol::messages::ProducerId;

use crate::group::placement::OFFSETS_TOPIC;
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

/// A marker closed `txn` on `topic`-`partition` (durably): counts it, and on
/// `__consumer_offsets` applies or drops the transaction's pending offsets.
pub fn marker_written(ctx: &ShardCtx, topic: &str, partition: i32, txn: &CompletedTxn) {
    crate::metrics::txn_marker_written(!txn.aborted);
    if topic == OFFSETS_TOPIC {
        crate::server::group::driver::complete_txn_offsets(
            ctx,
            partition,
            txn.producer_id,
            !txn.aborted,
        );
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
}
