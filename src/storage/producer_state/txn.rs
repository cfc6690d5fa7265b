//! The transactional side of a partition's producer state (Kafka's `ProducerStateManager`
//! ongoing transactions, `CompletedTxn` and the aborted-transaction index): markers close
//! transactions, the oldest open one bounds the last stable offset, and aborted ones are
//! answered to read_committed fetches. Also the byte layout of a marker (a control batch).
//!
//! Pure, like the rest of `producer_state`. Invariants: `ongoing` and the entries'
//! `txn_first_offset` agree; `aborted` is sorted by marker offset.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use super::{ProducerEntry, ProducerStateMap, NO_SEQUENCE};

/// One aborted transaction of the partition (an entry of Kafka's `.txnindex`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    /// First offset of the transaction's data on this partition (the marker's own offset
    /// when it wrote none).
    pub first_offset: i64,
    /// Offset of the ABORT marker.
    pub last_offset: i64,
    /// The last stable offset once this transaction completed.
    pub last_stable_offset: i64,
}

/// When each open transaction started: first offset → the max timestamp of its first batch
/// on this partition (what `apply` records). Derived timing for the LSO lag in milliseconds,
/// not part of the state's identity: not in the snapshot (a decoded state estimates it from
/// the retained batches) and ignored by equality, so a state and its decoded snapshot still
/// compare equal.
#[derive(Clone, Debug, Default)]
pub(super) struct TxnStarts(pub(super) BTreeMap<i64, i64>);

impl PartialEq for TxnStarts {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for TxnStarts {}

/// A transaction a marker closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub aborted: bool,
}

/// Why a marker is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MarkerError {
    /// INVALID_PRODUCER_EPOCH: the marker is for an older epoch than the producer's.
    #[error("marker of producer {producer_id} has epoch {epoch}, the producer is at {current}")]
    StaleEpoch { producer_id: i64, epoch: i16, current: i16 },
}

impl ProducerStateMap {
    /// Checks a marker of `producer_id` at `epoch` (before it is appended).
    pub fn check_marker(&self, producer_id: i64, epoch: i16) -> Result<(), MarkerError> {
        match self.producers.get(&producer_id) {
            Some(e) if epoch < e.epoch => {
                Err(MarkerError::StaleEpoch { producer_id, epoch, current: e.epoch })
            }
            _ => Ok(()),
        }
    }

    /// Records a marker at `offset`: closes the producer's open transaction (an ABORT is
    /// added to the aborted list) and moves the producer to the marker's epoch. `hw` is the
    /// high watermark the completed transaction's last stable offset is bounded by.
    pub fn apply_marker(
        &mut self,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        offset: i64,
    ) -> CompletedTxn {
        let e = self.producers.entry(producer_id).or_insert_with(ProducerEntry::empty);
        e.set_epoch(epoch);
        let first = if e.txn_first_offset >= 0 { e.txn_first_offset } else { offset };
        if e.txn_first_offset >= 0 {
            self.ongoing.remove(&e.txn_first_offset);
            self.starts.0.remove(&e.txn_first_offset);
        }
        e.txn_first_offset = -1;
        self.completing.insert(offset, first);
        let done = CompletedTxn {
            producer_id,
            first_offset: first,
            last_offset: offset,
            aborted: !commit,
        };
        if !commit {
            let lso = self.ongoing.keys().next().copied().unwrap_or(offset + 1);
            if self.aborted.last().is_none_or(|a| a.last_offset < offset) {
                self.aborted.push(AbortedTxn {
                    producer_id,
                    first_offset: first,
                    last_offset: offset,
                    last_stable_offset: lso,
                });
            }
        }
        done
    }

    /// The first offset of the oldest open transaction, if any (the last stable offset is
    /// at most this). Completed transactions whose marker is not below `hw` yet count too.
    pub fn first_unstable_offset(&mut self, hw: i64) -> Option<i64> {
        self.completing = self.completing.split_off(&hw);
        let completing = self.completing.values().min().copied();
        let open = self.ongoing.keys().next().copied();
        open.into_iter().chain(completing).min()
    }

    /// The first offset of the oldest open transaction (markers not yet appended).
    #[must_use]
    pub fn first_open_offset(&self) -> Option<i64> {
        self.ongoing.keys().next().copied()
    }

    /// The oldest open transaction's first offset and start time (the max timestamp of its
    /// first batch here, in ms; -1 when unknown: it opened with a coordinator batch, which
    /// carries no sequence and so no retained batch, before a snapshot this state was loaded
    /// from).
    #[must_use]
    pub fn oldest_open_txn(&self) -> Option<(i64, i64)> {
        let first = self.first_open_offset()?;
        Some((first, self.starts.0.get(&first).copied().unwrap_or(-1)))
    }

    /// After loading a snapshot: each open transaction's start is its producer's oldest
    /// retained batch ending at or above the transaction's first offset (exact when the
    /// transaction's first batch is still retained, else a later one: the age is then
    /// underestimated).
    pub(super) fn estimate_txn_starts(&mut self) {
        self.starts.0 = self
            .ongoing
            .iter()
            .filter_map(|(first, id)| {
                let e = self.producers.get(id)?;
                let b = e.batches().iter().find(|b| b.last_offset >= *first)?;
                Some((*first, b.timestamp_ms))
            })
            .collect();
    }

    /// Open transactions: (producer id, first offset), oldest first.
    #[must_use]
    pub fn ongoing_txns(&self) -> Vec<(i64, i64)> {
        self.ongoing.iter().map(|(first, id)| (*id, *first)).collect()
    }

    /// Aborted transactions that a read of `[from, upto)` must tell a read_committed
    /// consumer about: (producer id, first offset), as Kafka's `collectAbortedTxns`.
    #[must_use]
    pub fn aborted_between(&self, from: i64, upto: i64) -> Vec<(i64, i64)> {
        let start = self.aborted.partition_point(|a| a.last_offset < from);
        self.aborted[start..]
            .iter()
            .filter(|a| a.first_offset < upto)
            .map(|a| (a.producer_id, a.first_offset))
            .collect()
    }

    /// Every aborted transaction still recorded.
    #[must_use]
    pub fn aborted_txns(&self) -> &[AbortedTxn] {
        &self.aborted
    }

    /// Forgets the aborted transactions whose ABORT markers sit at `marker_offsets`
    /// (ascending; the cleaner removes those markers, their data went before). Returns how
    /// many went.
    pub fn forget_aborted(&mut self, marker_offsets: &[i64]) -> usize {
        let before = self.aborted.len();
        self.aborted.retain(|a| marker_offsets.binary_search(&a.last_offset).is_err());
        before - self.aborted.len()
    }

    /// The aborted transactions whose ABORT marker lies in `[from, end)` (one segment's
    /// `.txnindex`).
    #[must_use]
    pub fn aborted_in(&self, from: i64, end: i64) -> &[AbortedTxn] {
        let start = self.aborted.partition_point(|a| a.last_offset < from);
        let stop = self.aborted.partition_point(|a| a.last_offset < end);
        &self.aborted[start..stop.max(start)]
    }

    /// Adds aborted transactions read from `.txnindex` files (or an old snapshot): kept
    /// ordered by marker offset, one per marker.
    pub fn add_aborted(&mut self, entries: impl IntoIterator<Item = AbortedTxn>) {
        let before = self.aborted.len();
        self.aborted.extend(entries);
        if self.aborted.len() != before {
            self.aborted.sort_by_key(|a| a.last_offset);
            self.aborted.dedup_by_key(|a| a.last_offset);
        }
    }

    /// Keeps the aborted transactions whose marker lies outside `[from, end)` or satisfies
    /// `keep` (the cleaner rewrote that range and dropped some markers).
    pub fn retain_aborted_in(&mut self, from: i64, end: i64, keep: impl Fn(&AbortedTxn) -> bool) {
        self.aborted.retain(|a| a.last_offset < from || a.last_offset >= end || keep(a));
    }

    /// Forgets aborted transactions wholly below `log_start` (retention removed them).
    pub fn prune_aborted(&mut self, log_start: i64) {
        let keep = self.aborted.partition_point(|a| a.last_offset < log_start);
        self.aborted.drain(..keep);
    }
}

/// Control record type of an ABORT marker.
pub const CONTROL_ABORT: i16 = 0;
/// Control record type of a COMMIT marker.
pub const CONTROL_COMMIT: i16 = 1;

/// A marker batch (Kafka's `EndTransactionMarker`): one control record, key = version 0 and
/// type, value = version 0 and the coordinator epoch; transactional and control bits set,
/// base sequence -1.
#[must_use]
pub fn encode_marker(
    producer_id: i64,
    epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    now_ms: i64,
) -> Bytes {
    let kind = if commit { CONTROL_COMMIT } else { CONTROL_ABORT };
    let mut key = BytesMut::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&kind.to_be_bytes());
    let mut value = BytesMut::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    let record = Record {
        transactional: true,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: 0,
        producer_id,
        producer_epoch: epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: NO_SEQUENCE,
        timestamp: now_ms,
        key: Some(key.freeze()),
        value: Some(value.freeze()),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    // One record of fixed fields: encoding cannot fail.
    let _ = RecordBatchEncoder::encode(&mut buf, std::iter::once(&record), &options);
    buf.freeze()
}

/// Whether a control batch (whole, uncompressed as markers are) is a COMMIT (`Some(true)`)
/// or an ABORT (`Some(false)`); `None` when its first record is not a marker.
#[must_use]
pub fn control_batch_commit(batch: &[u8]) -> Option<bool> {
    let mut r = batch.get(super::super::batch::BATCH_HEADER_BYTES..)?;
    let _len = varint(&mut r)?;
    r = r.get(1..)?; // attributes
    let _ts = varint(&mut r)?;
    let _delta = varint(&mut r)?;
    let key_len = varint(&mut r)?;
    if key_len < 4 {
        return None;
    }
    let kind = i16::from_be_bytes([*r.get(2)?, *r.get(3)?]);
    match kind {
        CONTROL_COMMIT => Some(true),
        CONTROL_ABORT => Some(false),
        _ => None,
    }
}

/// A zigzag varint (Kafka's record fields).
fn varint(r: &mut &[u8]) -> Option<i64> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let (b, rest) = r.split_first()?;
        *r = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(((v >> 1) as i64) ^ -((v & 1) as i64));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::ProducerBatch;
    use super::*;
    use crate::constants::PRODUCER_BATCHES_RETAINED;

    fn txn_batch(pid: i64, seq: i32, n: i32) -> ProducerBatch {
        ProducerBatch {
            producer_id: pid,
            epoch: 0,
            first_seq: seq,
            offset_delta: n - 1,
            transactional: true,
        }
    }

    #[test]
    fn markers_round_trip_their_type() {
        for commit in [true, false] {
            let b = encode_marker(7, 3, commit, 5, 1000);
            let h = crate::storage::batch::BatchHeader::parse(&b).expect("header");
            assert!(h.is_control() && h.is_transactional());
            assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence), (7, 3, -1));
            assert_eq!(control_batch_commit(&b), Some(commit));
            crate::storage::batch::check_crc(&h, &b).expect("crc");
        }
    }

    #[test]
    fn open_transactions_bound_the_stable_offset_and_aborts_are_listed() {
        let mut m = ProducerStateMap::default();
        m.apply(&txn_batch(1, 0, 2), 11, 0); // offsets 10..=11
        m.apply(&txn_batch(2, 0, 1), 12, 0);
        m.apply(&txn_batch(1, 2, 1), 13, 0);
        assert_eq!(m.first_unstable_offset(0), Some(10));
        assert_eq!(m.ongoing_txns(), vec![(1, 10), (2, 12)]);
        let done = m.apply_marker(1, 0, false, 14);
        assert_eq!(
            done,
            CompletedTxn { producer_id: 1, first_offset: 10, last_offset: 14, aborted: true }
        );
        // The marker is not below the high watermark yet: the aborted data stays unstable.
        assert_eq!(m.first_unstable_offset(14), Some(10));
        assert_eq!(m.first_unstable_offset(15), Some(12));
        assert_eq!(m.aborted_txns()[0].last_stable_offset, 12);
        m.apply_marker(2, 0, true, 15);
        assert_eq!(m.first_unstable_offset(16), None);
        assert_eq!(m.aborted_between(0, 100), vec![(1, 10)]);
        assert_eq!(m.aborted_between(15, 100), vec![]);
        assert_eq!(m.aborted_between(0, 10), vec![]);
        // A plain batch of a producer whose transaction is open is refused.
        let mut m2 = ProducerStateMap::default();
        m2.apply(&txn_batch(3, 0, 1), 21, 0);
        let plain3 = ProducerBatch { transactional: false, ..txn_batch(3, 1, 1) };
        assert_eq!(
            m2.check(&plain3),
            Err(super::super::SequenceError::InvalidTxnState { producer_id: 3 })
        );
        // A new transaction of producer 1 opens at its next batch.
        m.apply(&txn_batch(1, 3, 1), 16, 0);
        assert_eq!(m.first_unstable_offset(16), Some(16));
        // Round trip through a snapshot at the log end: version 3 leaves the aborted
        // transactions to the `.txnindex` files.
        let (at, mut back) = ProducerStateMap::decode(&m.encode(17)).expect("decode");
        assert!(back.aborted_txns().is_empty());
        back.add_aborted(m.aborted_txns().to_vec());
        assert_eq!((at, &back), (17, &m));
        let mut forgot = m.clone();
        assert_eq!(forgot.forget_aborted(&[13, 14]), 1, "the marker at 14 went");
        assert!(forgot.aborted_txns().is_empty() && forgot.aborted_between(0, 100).is_empty());
        m.prune_aborted(15);
        assert!(m.aborted_txns().is_empty());
    }

    #[test]
    fn the_oldest_open_transaction_has_its_first_batch_time() {
        let mut m = ProducerStateMap::default();
        assert_eq!(m.oldest_open_txn(), None);
        m.apply(&txn_batch(1, 0, 2), 11, 5_000); // offsets 10..=11
        m.apply(&txn_batch(2, 0, 1), 12, 6_000);
        m.apply(&txn_batch(1, 2, 1), 13, 7_000);
        assert_eq!(m.oldest_open_txn(), Some((10, 5_000)), "its first batch, not its last");
        m.apply_marker(1, 0, true, 14);
        assert_eq!(m.oldest_open_txn(), Some((12, 6_000)));
        // A snapshot does not carry the starts: they are taken from the retained batches.
        let (_, back) = ProducerStateMap::decode(&m.encode(15)).expect("decode");
        assert_eq!(back.oldest_open_txn(), Some((12, 6_000)));
        // Past the retained window, the oldest retained batch (an underestimate of the age).
        let retained = PRODUCER_BATCHES_RETAINED as i32;
        for i in 1..=retained {
            m.apply(&txn_batch(2, i, 1), 15 + i64::from(i), 6_000 + i64::from(i));
        }
        let (_, back) =
            ProducerStateMap::decode(&m.encode(16 + i64::from(retained))).expect("decode");
        assert_eq!(m.oldest_open_txn(), Some((12, 6_000)));
        assert_eq!(back.oldest_open_txn(), Some((12, 6_001)));
        m.apply_marker(2, 0, false, 100);
        assert_eq!(m.oldest_open_txn(), None);
        m.clear();
        assert_eq!(m.oldest_open_txn(), None);
    }

    #[test]
    fn stale_markers_are_refused_and_new_epochs_reset_the_window() {
        let mut m = ProducerStateMap::default();
        m.apply(&txn_batch(1, 0, 1), 0, 0);
        m.apply_marker(1, 1, false, 1);
        assert!(m.check_marker(1, 0).is_err());
        assert_eq!(m.get(1).map(|e| (e.epoch, e.batches().len())), Some((1, 0)));
        // The bumped producer starts at sequence 0.
        let next = ProducerBatch { epoch: 1, ..txn_batch(1, 0, 1) };
        assert_eq!(m.check(&next), Ok(super::super::Verdict::Append));
        assert_eq!(m.first_unstable_offset(2), None, "the marker is below the high watermark");
        let (_, mut back) = ProducerStateMap::decode(&m.encode(2)).expect("decode");
        back.add_aborted(m.aborted_txns().iter().copied());
        assert_eq!(back, m);
    }

    /// A version-2 snapshot (before `.txnindex` files) still loads, aborted list included.
    fn encode_v2(m: &ProducerStateMap, offset: i64) -> Vec<u8> {
        let v3 = m.encode(offset);
        let mut body = v3[10..].to_vec();
        let aborted: Vec<&AbortedTxn> =
            m.aborted.iter().filter(|a| a.last_offset < offset).collect();
        body.extend_from_slice(&(aborted.len() as u32).to_be_bytes());
        for a in aborted {
            for v in [a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset] {
                body.extend_from_slice(&v.to_be_bytes());
            }
        }
        let mut out = super::super::SNAPSHOT_MAGIC.to_vec();
        out.extend_from_slice(&super::super::SNAPSHOT_VERSION_V2.to_be_bytes());
        out.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn version_2_snapshots_with_aborted_lists_still_load() {
        let mut m = ProducerStateMap::default();
        m.apply(&txn_batch(1, 0, 2), 11, 0);
        m.apply_marker(1, 0, false, 12);
        m.apply(&txn_batch(2, 0, 1), 13, 0);
        m.apply_marker(2, 0, false, 14);
        m.first_unstable_offset(15);
        let (at, back) = ProducerStateMap::decode(&encode_v2(&m, 15)).expect("decode v2");
        assert_eq!((at, &back), (15, &m));
        assert_eq!(back.aborted_in(0, 13).len(), 1);
        assert_eq!(back.aborted_in(13, 15)[0].producer_id, 2);
        assert!(back.aborted_in(15, 100).is_empty());
    }

    #[test]
    fn aborted_entries_merge_in_order_once() {
        let a = |pid, last| AbortedTxn {
            producer_id: pid,
            first_offset: last - 1,
            last_offset: last,
            last_stable_offset: last,
        };
        let mut m = ProducerStateMap::default();
        m.add_aborted([a(1, 10), a(2, 30)]);
        m.add_aborted([a(3, 20), a(1, 10)]);
        let lasts: Vec<i64> = m.aborted_txns().iter().map(|t| t.last_offset).collect();
        assert_eq!(lasts, vec![10, 20, 30]);
        m.retain_aborted_in(15, 25, |t| t.producer_id != 3);
        assert_eq!(m.aborted_txns().len(), 2);
        m.retain_aborted_in(0, 100, |_| true);
        assert_eq!(m.aborted_in(10, 31).len(), 2);
    }
}
