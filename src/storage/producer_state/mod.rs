//! Idempotent-producer state of one partition, as Kafka's `ProducerStateManager`,
//! `ProducerStateEntry` and `ProducerAppendInfo` keep it: for each producer id its epoch and
//! the sequence ranges and offsets of its last [`PRODUCER_BATCHES_RETAINED`] batches.
//!
//! Pure: no I/O, no runtime. Owned by the partition log on the partition's owner shard
//! (`LogState::producers`); [`ProducerStateMap::check`] runs inside `append` under the
//! append ticket lock that assigns offsets, and [`ProducerStateMap::apply`] records the batch
//! before the lock is released, so two in-flight copies of one batch cannot both pass.
//!
//! Rules of a client append (`check`), in Kafka's order:
//! 1. a producer id the partition has no state for is accepted at any sequence (Kafka >= 2.5:
//!    its batches may have been removed by retention or expired);
//! 2. same epoch, and a retained batch has exactly this first and last sequence: a duplicate,
//!    answered with that batch's offsets and never written again;
//! 3. an epoch below the producer's: INVALID_PRODUCER_EPOCH;
//! 4. a higher epoch (a KIP-360 bump) must start at sequence 0, else OUT_OF_ORDER_SEQUENCE;
//! 5. the same epoch must continue at last sequence + 1 (wrapping from `i32::MAX` to 0), else
//!    OUT_OF_ORDER_SEQUENCE.
//!
//! Replaying the log (recovery, truncation) calls `apply` without `check`, as Kafka's
//! replication origin does: a batch of another epoch resets the producer's window.
//! Transactions (issue 17, Kafka's `currentTxnFirstOffset`, `ongoingTxns` and the aborted
//! index): a transactional data batch opens a transaction for its producer at its first
//! offset unless one is open; a marker (control batch, written by the transaction
//! coordinator) closes it, and an ABORT marker records an [`AbortedTxn`]. The first offset of
//! the oldest open transaction bounds the last stable offset (`txn` submodule).
//!
//! Invariants: every entry holds 0..=`PRODUCER_BATCHES_RETAINED` batches (0 only for a
//! producer known from a marker or a coordinator batch alone), oldest first, with increasing
//! offsets; `ongoing` holds exactly the producers whose `txn_first_offset` is set; the
//! snapshot encoding (`docs/format.md`) round-trips exactly.

use std::collections::{BTreeMap, HashMap};

use crate::constants::PRODUCER_BATCHES_RETAINED;

mod txn;
pub use txn::{control_batch_commit, encode_marker, AbortedTxn, CompletedTxn, MarkerError};

/// A batch without a producer id (not idempotent).
pub const NO_PRODUCER_ID: i64 = -1;
/// No epoch (a producer without state).
pub const NO_PRODUCER_EPOCH: i16 = -1;
/// No sequence.
pub const NO_SEQUENCE: i32 = -1;

/// One retained batch of a producer (Kafka's `BatchMetadata`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchMeta {
    pub last_seq: i32,
    /// lastOffset - baseOffset (= lastOffsetDelta).
    pub offset_delta: i32,
    pub last_offset: i64,
    /// The batch's max timestamp (what expiration measures from, as in Kafka).
    pub timestamp_ms: i64,
}

impl BatchMeta {
    #[must_use]
    pub fn first_seq(&self) -> i32 {
        decrement_sequence(self.last_seq, self.offset_delta)
    }

    #[must_use]
    pub fn first_offset(&self) -> i64 {
        self.last_offset - i64::from(self.offset_delta)
    }
}

/// `seq + delta` as Kafka's `DefaultRecordBatch.incrementSequence`: wraps past `i32::MAX` to 0.
#[must_use]
pub fn increment_sequence(seq: i32, delta: i32) -> i32 {
    if seq > i32::MAX - delta {
        delta - (i32::MAX - seq) - 1
    } else {
        seq + delta
    }
}

/// `seq - delta`, the inverse of [`increment_sequence`].
#[must_use]
pub fn decrement_sequence(seq: i32, delta: i32) -> i32 {
    if seq < delta {
        i32::MAX - (delta - seq) + 1
    } else {
        seq - delta
    }
}

fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    i64::from(next_seq) == i64::from(last_seq) + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

/// One producer's state on this partition (Kafka's `ProducerStateEntry`, without
/// transactions). Fixed size: no allocation per producer beyond the map slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    /// First offset of this producer's open transaction on the partition, -1 if none.
    pub txn_first_offset: i64,
    len: u8,
    batches: [BatchMeta; PRODUCER_BATCHES_RETAINED],
}

impl ProducerEntry {
    fn empty() -> Self {
        ProducerEntry {
            epoch: NO_PRODUCER_EPOCH,
            txn_first_offset: -1,
            len: 0,
            batches: [BatchMeta::default(); PRODUCER_BATCHES_RETAINED],
        }
    }

    /// The retained batches, oldest first.
    #[must_use]
    pub fn batches(&self) -> &[BatchMeta] {
        &self.batches[..usize::from(self.len)]
    }

    #[must_use]
    pub fn last(&self) -> Option<&BatchMeta> {
        self.batches().last()
    }

    #[must_use]
    pub fn last_seq(&self) -> i32 {
        self.last().map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    #[must_use]
    pub fn last_timestamp_ms(&self) -> i64 {
        self.last().map_or(-1, |b| b.timestamp_ms)
    }

    fn push(&mut self, epoch: i16, batch: BatchMeta) {
        self.set_epoch(epoch);
        if usize::from(self.len) == PRODUCER_BATCHES_RETAINED {
            self.batches.copy_within(1.., 0);
            self.len -= 1;
        }
        self.batches[usize::from(self.len)] = batch;
        self.len += 1;
    }

    /// A new epoch starts the window afresh (an open transaction stays open: only a marker
    /// closes it).
    fn set_epoch(&mut self, epoch: i16) {
        if self.epoch != epoch {
            let txn = self.txn_first_offset;
            // Unused slots stay zeroed, so equal states compare equal.
            *self = ProducerEntry::empty();
            self.epoch = epoch;
            self.txn_first_offset = txn;
        }
    }

    fn find(&self, epoch: i16, first_seq: i32, last_seq: i32) -> Option<BatchMeta> {
        if epoch != self.epoch {
            return None;
        }
        self.batches()
            .iter()
            .find(|b| b.first_seq() == first_seq && b.last_seq == last_seq)
            .copied()
    }
}

/// What a client batch's producer fields say about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Append it (then [`ProducerStateMap::apply`] it).
    Append,
    /// A retry of this retained batch: answer with its offsets, write nothing.
    Duplicate(BatchMeta),
}

/// Why a client batch is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SequenceError {
    /// INVALID_PRODUCER_EPOCH (47).
    #[error(
        "epoch of producer {producer_id} is {epoch}, which is smaller than the last seen epoch \
         {current}"
    )]
    InvalidEpoch { producer_id: i64, epoch: i16, current: i16 },
    /// OUT_OF_ORDER_SEQUENCE_NUMBER (45).
    #[error(
        "out of order sequence number for producer {producer_id} (epoch {epoch}): {first_seq} \
         (incoming seq. number), {last_seq} (current end sequence number, epoch {current})"
    )]
    OutOfOrder { producer_id: i64, epoch: i16, first_seq: i32, last_seq: i32, current: i16 },
    /// INVALID_TXN_STATE (48): a non-transactional batch while the producer's transaction is
    /// open on this partition (Kafka's "Expected transactional write from producer").
    #[error("expected transactional write from producer {producer_id} (its transaction is open)")]
    InvalidTxnState { producer_id: i64 },
}

/// The producer fields of a batch header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub epoch: i16,
    pub first_seq: i32,
    /// lastOffsetDelta of the batch.
    pub offset_delta: i32,
    /// The batch belongs to a transaction (attributes bit 4).
    pub transactional: bool,
}

impl ProducerBatch {
    #[must_use]
    pub fn last_seq(&self) -> i32 {
        increment_sequence(self.first_seq, self.offset_delta)
    }
}

/// Every producer's state on one partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerStateMap {
    producers: HashMap<i64, ProducerEntry>,
    /// Open transactions: first offset → producer id.
    ongoing: BTreeMap<i64, i64>,
    /// Aborted transactions, by the offset of their ABORT marker (ascending).
    aborted: Vec<AbortedTxn>,
    /// Transactions whose marker is appended but maybe not yet below the high watermark:
    /// marker offset → first offset. They still bound the last stable offset (Kafka's
    /// `unreplicatedTxns`). In memory only: a reopened log's high watermark is its end.
    completing: BTreeMap<i64, i64>,
    /// When each open transaction started (`txn::TxnStarts`, for the LSO lag in ms).
    starts: txn::TxnStarts,
}

impl ProducerStateMap {
    /// Judges a client batch (see the module docs for the rules).
    pub fn check(&self, b: &ProducerBatch) -> Result<Verdict, SequenceError> {
        let Some(e) = self.producers.get(&b.producer_id) else { return Ok(Verdict::Append) };
        if let Some(dup) = e.find(b.epoch, b.first_seq, b.last_seq()) {
            return Ok(Verdict::Duplicate(dup));
        }
        if !b.transactional && e.txn_first_offset >= 0 && b.epoch >= e.epoch {
            return Err(SequenceError::InvalidTxnState { producer_id: b.producer_id });
        }
        let out_of_order = || SequenceError::OutOfOrder {
            producer_id: b.producer_id,
            epoch: b.epoch,
            first_seq: b.first_seq,
            last_seq: e.last_seq(),
            current: e.epoch,
        };
        if b.epoch < e.epoch {
            return Err(SequenceError::InvalidEpoch {
                producer_id: b.producer_id,
                epoch: b.epoch,
                current: e.epoch,
            });
        }
        if b.epoch != e.epoch {
            if b.first_seq != 0 && e.epoch != NO_PRODUCER_EPOCH {
                return Err(out_of_order());
            }
            return Ok(Verdict::Append);
        }
        if e.epoch != NO_PRODUCER_EPOCH && !in_sequence(e.last_seq(), b.first_seq) {
            return Err(out_of_order());
        }
        Ok(Verdict::Append)
    }

    /// Records a batch at `last_offset` with max timestamp `timestamp_ms` (after `check`, or
    /// replaying the log). A batch of another epoch starts the producer's window afresh.
    /// Returns whether the producer id is new to the partition.
    pub fn apply(&mut self, b: &ProducerBatch, last_offset: i64, timestamp_ms: i64) -> bool {
        if b.producer_id == NO_PRODUCER_ID {
            return false;
        }
        let new = !self.producers.contains_key(&b.producer_id);
        let meta = BatchMeta {
            last_seq: b.last_seq(),
            offset_delta: b.offset_delta,
            last_offset,
            timestamp_ms,
        };
        let e = self.producers.entry(b.producer_id).or_insert_with(ProducerEntry::empty);
        if b.first_seq == NO_SEQUENCE {
            // A coordinator's batch (transactional offset commits): no sequence to keep.
            e.set_epoch(b.epoch);
        } else {
            e.push(b.epoch, meta);
        }
        if b.transactional && e.txn_first_offset < 0 {
            let first = meta.first_offset();
            e.txn_first_offset = first;
            self.ongoing.insert(first, b.producer_id);
            self.starts.0.insert(first, timestamp_ms);
        }
        new
    }

    /// Forgets producers whose last batch is `expiration_ms` or more older than `now_ms`
    /// (Kafka's `removeExpiredProducers`). Returns how many went.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        // A producer with an open transaction stays (Kafka: expiry skips ongoing txns).
        self.producers.retain(|_, e| {
            e.txn_first_offset >= 0 || now_ms.saturating_sub(e.last_timestamp_ms()) < expiration_ms
        });
        before - self.producers.len()
    }

    /// Forgets every producer (the log was truncated fully).
    pub fn clear(&mut self) {
        self.producers.clear();
        self.ongoing.clear();
        self.starts.0.clear();
        self.aborted.clear();
        self.completing.clear();
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    #[must_use]
    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Every producer with its state, by producer id.
    #[must_use]
    pub fn entries(&self) -> Vec<(i64, ProducerEntry)> {
        let mut v: Vec<(i64, ProducerEntry)> =
            self.producers.iter().map(|(id, e)| (*id, *e)).collect();
        v.sort_unstable_by_key(|(id, _)| *id);
        v
    }

    /// Producer id → last offset of its last batch: what the cleaner must keep (the batch
    /// header, even emptied) so replaying the log finds each live producer's sequence.
    #[must_use]
    pub fn last_offsets(&self) -> HashMap<i64, i64> {
        self.producers.iter().filter_map(|(id, e)| e.last().map(|b| (*id, b.last_offset))).collect()
    }

    /// The snapshot file's bytes for the state at log offset `offset` (see
    /// `docs/format.md`, `.snapshot`).
    #[must_use]
    pub fn encode(&self, offset: i64) -> Vec<u8> {
        let entries = self.entries();
        let mut body = Vec::with_capacity(16 + entries.len() * (11 + 24 * 5));
        body.extend_from_slice(&offset.to_be_bytes());
        body.extend_from_slice(&(entries.len() as u32).to_be_bytes());
        for (id, e) in &entries {
            body.extend_from_slice(&id.to_be_bytes());
            body.extend_from_slice(&e.epoch.to_be_bytes());
            body.extend_from_slice(&e.txn_first_offset.to_be_bytes());
            body.push(e.len);
            for b in e.batches() {
                body.extend_from_slice(&b.last_seq.to_be_bytes());
                body.extend_from_slice(&b.offset_delta.to_be_bytes());
                body.extend_from_slice(&b.last_offset.to_be_bytes());
                body.extend_from_slice(&b.timestamp_ms.to_be_bytes());
            }
        }
        // Version 3: the aborted transactions are in the segments' `.txnindex` files.
        let mut out = Vec::with_capacity(body.len() + 10);
        out.extend_from_slice(SNAPSHOT_MAGIC);
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        out.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Decodes a snapshot: the offset it was taken at and the state. `Err` names what is
    /// wrong (bad magic, version, CRC, or a structure that breaks the invariants).
    pub fn decode(data: &[u8]) -> Result<(i64, ProducerStateMap), String> {
        let mut r = Reader { buf: data, at: 0 };
        if r.take(4)? != SNAPSHOT_MAGIC {
            return Err("not a producer snapshot (magic)".into());
        }
        let version = r.u16()?;
        if !(SNAPSHOT_VERSION_V1..=SNAPSHOT_VERSION).contains(&version) {
            return Err(format!("unknown snapshot version {version}"));
        }
        let crc = r.u32()?;
        if crc32fast::hash(&data[r.at..]) != crc {
            return Err("snapshot fails its CRC".into());
        }
        let offset = r.i64()?;
        let count = r.u32()?;
        let mut map = ProducerStateMap::default();
        for _ in 0..count {
            let id = r.i64()?;
            let mut e = ProducerEntry::empty();
            e.epoch = r.u16()? as i16;
            if version >= 2 {
                e.txn_first_offset = r.i64()?;
            }
            let n = usize::from(r.take(1)?[0]);
            let empty = n == 0 && (version < 2 || (e.txn_first_offset < 0 && e.epoch < 0));
            if empty || n > PRODUCER_BATCHES_RETAINED || id < 0 {
                return Err(format!("producer {id} with {n} batches"));
            }
            for i in 0..n {
                let b = BatchMeta {
                    last_seq: r.u32()? as i32,
                    offset_delta: r.u32()? as i32,
                    last_offset: r.i64()?,
                    timestamp_ms: r.i64()?,
                };
                if i > 0 && b.last_offset <= e.batches[i - 1].last_offset {
                    return Err(format!("producer {id}: batch offsets do not increase"));
                }
                e.batches[i] = b;
            }
            e.len = n as u8;
            if e.txn_first_offset >= 0 && map.ongoing.insert(e.txn_first_offset, id).is_some() {
                return Err(format!("two open transactions start at {}", e.txn_first_offset));
            }
            if map.producers.insert(id, e).is_some() {
                return Err(format!("producer {id} appears twice"));
            }
        }
        if version == SNAPSHOT_VERSION_V2 {
            let n = r.u32()?;
            for _ in 0..n {
                let a = AbortedTxn {
                    producer_id: r.i64()?,
                    first_offset: r.i64()?,
                    last_offset: r.i64()?,
                    last_stable_offset: r.i64()?,
                };
                if map.aborted.last().is_some_and(|l| l.last_offset >= a.last_offset) {
                    return Err("aborted transactions out of order".into());
                }
                map.aborted.push(a);
            }
        }
        if r.at != data.len() {
            return Err("trailing bytes after the last producer".into());
        }
        map.estimate_txn_starts();
        Ok((offset, map))
    }
}

/// `.snapshot` files start with these bytes ("ShardLog Producer Snapshot").
pub const SNAPSHOT_MAGIC: &[u8; 4] = b"SLPS";
/// Version 3 is version 2 without the aborted transactions: they live in the segments'
/// `.txnindex` files (`storage::txn_index`).
pub const SNAPSHOT_VERSION: u16 = 3;
/// Version 2 added each producer's open transaction and the aborted transactions (issue 17);
/// still read (its aborted transactions are loaded, and written out as `.txnindex` files).
pub const SNAPSHOT_VERSION_V2: u16 = 2;
/// Issue 14's layout, still read.
pub const SNAPSHOT_VERSION_V1: u16 = 1;

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let s = self.buf.get(self.at..self.at + n).ok_or("snapshot truncated")?;
        self.at += n;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_be_bytes(self.take(2)?.try_into().expect("2 bytes")))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
}

#[cfg(test)]
mod tests;
