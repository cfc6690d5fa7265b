//! Helpers for the hook lines in other subsystems' files, so each hook stays one line:
//! what a produce or fetch moved.
//!
//! Called on the partition's owner shard for [`produced`]/[`fetched`].

use std::time::Instant;

use super::{with, Level, Stage};

const PRODUCE: i16 = 0;

/// A produce of `bytes` bytes and `records` records to `topic` was appended and committed;
/// the append started at `started` (its time is the Produce `storage` stage).
pub fn produced(topic: &str, bytes: usize, records: u64, started: Instant) {
    with(|r| {
        r.record(PRODUCE, Stage::Storage, started.elapsed());
        r.topic_in(topic, bytes as u64, records);
        r.count(super::Count::OwnedBytesIn, bytes as u64);
    });
}

/// A fetch read `pieces` (stored record batches, whole, in one or more buffers) from
/// `topic`: one registry update for them all.
pub fn fetched(topic: &str, pieces: &[bytes::Bytes]) {
    let bytes: usize = pieces.iter().map(bytes::Bytes::len).sum();
    if bytes == 0 {
        return;
    }
    let records = pieces.iter().map(|p| batch_records(p)).sum();
    with(|r| {
        r.topic_out(topic, bytes as u64, records);
        r.count(super::Count::OwnedBytesOut, bytes as u64);
    });
}

/// This shard now owns `partitions` partitions, of which it leads `leaders`.
pub fn owned_partitions(partitions: usize, leaders: usize) {
    with(|r| {
        r.set(Level::Partitions, i64::try_from(partitions).unwrap_or(i64::MAX));
        r.set(Level::Leaders, i64::try_from(leaders).unwrap_or(i64::MAX));
    });
}

/// A retried idempotent batch was answered with its original offsets instead of written.
pub fn duplicate_batch_dropped() {
    with(|r| r.count(super::Count::DuplicateBatchesDropped, 1));
}

/// A log's writer started (`1`) or stopped (`-1`) waiting for disk space.
pub fn log_out_of_space(delta: i64) {
    with(|r| r.adjust(Level::LogsOutOfSpace, delta));
}

/// A log went offline after an I/O error.
pub fn log_offline() {
    with(|r| r.adjust(Level::LogsOffline, 1));
}

/// A transaction marker was written on this shard (`commit`: COMMIT, else ABORT).
pub fn txn_marker_written(commit: bool) {
    let kind = if commit { super::Count::TxnCommitMarkers } else { super::Count::TxnAbortMarkers };
    with(|r| r.count(kind, 1));
}

/// The open transactions this shard coordinates changed by `delta`.
pub fn open_transactions(delta: i64) {
    if delta != 0 {
        with(|r| r.adjust(Level::OpenTransactions, delta));
    }
}

/// The producer ids tracked by this shard's partitions changed by `delta`.
pub fn producers_tracked(delta: i64) {
    if delta != 0 {
        with(|r| r.adjust(Level::ProducerIds, delta));
    }
}

/// Records in a run of v2 record batches: the sum of `lastOffsetDelta + 1`. Stops at a
/// truncated batch (a fetch may end with a partial one).
#[must_use]
pub fn batch_records(mut bytes: &[u8]) -> u64 {
    const HEADER_BYTES: usize = 61;
    let mut records = 0u64;
    while bytes.len() >= HEADER_BYTES {
        let len = i32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        let Some(total) = usize::try_from(len).ok().map(|l| l + 12) else { break };
        if total > bytes.len() || total < HEADER_BYTES {
            break;
        }
        let delta = i32::from_be_bytes([bytes[23], bytes[24], bytes[25], bytes[26]]);
        records += u64::try_from(delta).map_or(0, |d| d + 1);
        bytes = &bytes[total..];
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(delta: i32) -> Vec<u8> {
        let mut b = vec![0u8; 70];
        b[8..12].copy_from_slice(&58i32.to_be_bytes());
        b[23..27].copy_from_slice(&delta.to_be_bytes());
        b
    }

    #[test]
    fn counts_records_of_whole_batches_only() {
        let mut bytes = batch(9);
        bytes.extend(batch(0));
        bytes.extend(&batch(4)[..30]);
        assert_eq!(batch_records(&bytes), 11);
        assert_eq!(batch_records(&[]), 0);
    }
}
