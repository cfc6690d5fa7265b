//! Which transaction markers a cleaner pass may remove (Kafka's `CleanedTransactionMetadata`):
//! a marker is kept while a data batch of its transaction is still in the log.
//!
//! Pure; one tracker per cleaner pass on the log's owner shard, fed every batch of the
//! cleaned range in log order from the first segment (the pass re-reads the clean section
//! too, as Kafka's does), across all the pass's segment groups. Invariant: a producer is in
//! `with_data` exactly when a transactional data batch of it was read after its last control
//! batch, so a marker is "empty" only if no batch of its transaction (emptied ones included)
//! is left anywhere below it. Batches the same pass empties still count, so a marker becomes
//! empty one pass after its data went, as in Kafka.

use std::collections::HashSet;

use crate::storage::batch::BatchHeader;

/// Per-producer "is there still data of this transaction in the log" for one pass.
#[derive(Debug, Default)]
pub(super) struct TxnTracker {
    /// Producers with a transactional data batch read since their last marker.
    with_data: HashSet<i64>,
}

impl TxnTracker {
    /// A data batch read (before filtering).
    pub(super) fn on_data(&mut self, h: &BatchHeader) {
        if h.is_transactional() && !h.is_control() && h.producer_id >= 0 {
            self.with_data.insert(h.producer_id);
        }
    }

    /// A control batch read: whether it marks a transaction with no data left in the log
    /// (an empty control batch was a marker the cleaner already emptied: it is empty too).
    pub(super) fn on_control(&mut self, h: &BatchHeader) -> bool {
        if h.records_count == 0 {
            return true;
        }
        if h.producer_id < 0 {
            return false;
        }
        !self.with_data.remove(&h.producer_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::batch::BatchHeader;
    use crate::storage::producer_state::encode_marker;
    use crate::storage::records::{build_batch, NewRecord};

    fn data(pid: i64, transactional: bool) -> BatchHeader {
        let rec =
            NewRecord { key: Some(b"k"), value: Some(b"v"), timestamp_ms: 1, headers: vec![] };
        let b = build_batch(&[rec], crate::storage::batch::Compression::None);
        let mut h = BatchHeader::parse(&b).expect("header");
        h.producer_id = pid;
        if transactional {
            h.attributes |= 0x10;
        }
        h
    }

    fn marker(pid: i64, commit: bool) -> BatchHeader {
        BatchHeader::parse(&encode_marker(pid, 0, commit, 0, 1)).expect("header")
    }

    #[test]
    fn a_marker_is_empty_only_without_data_since_the_last_one() {
        let mut t = TxnTracker::default();
        // Producer 1: data then marker (kept); a second marker with no data in between: empty.
        t.on_data(&data(1, true));
        t.on_data(&data(2, true));
        assert!(!t.on_control(&marker(1, true)), "data of the transaction remains");
        assert!(t.on_control(&marker(1, false)), "nothing since the last marker");
        // Producer 2's data was read before producer 1's markers: its own marker stays.
        assert!(!t.on_control(&marker(2, false)));
        // Non-transactional data does not hold a marker.
        t.on_data(&data(3, false));
        assert!(t.on_control(&marker(3, true)));
        // An emptied control batch is empty whatever came before.
        t.on_data(&data(4, true));
        let mut emptied = marker(4, true);
        emptied.records_count = 0;
        assert!(t.on_control(&emptied));
    }
}
