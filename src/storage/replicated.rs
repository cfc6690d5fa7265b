//! Follower appends: batches fetched from the partition leader go into the log exactly as the
//! leader wrote them (its base offsets, leader epochs, timestamps and CRCs), with no offset
//! assignment, no record validation and no re-compression (Kafka's `appendAsFollower`).
//!
//! Runs on the partition's owner shard, under the log's append lock like `append`, so a
//! follower append never interleaves with another append, a truncation or a roll.
//! Invariants: every batch is checked (header, lengths, CRC) and the whole chunk is checked
//! for contiguity *before* anything is staged, so a bad chunk changes nothing; a batch starts
//! exactly at the log end (or, for a compacted topic, at or after it: the leader's cleaner
//! leaves gaps between batches, which Kafka's followers accept too); the leader-epoch cache
//! and the producer state are updated from the batch headers (and a marker's control record:
//! COMMIT or ABORT), so after the append they are what recovery would rebuild from the same
//! bytes.

use std::rc::Rc;

use bytes::Bytes;

use super::batch::{scan_batch, BatchHeader, ScanStep};
use super::error::StorageError;
use super::log::LogInner;
use super::producer_state::{control_batch_commit, NO_PRODUCER_ID};
use super::producers::producer_batch;
use crate::io::FileSystem;
use crate::types::{Epoch, Offset};

/// What a follower append stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaAppendInfo {
    /// Base offset of the first batch stored (None: the chunk held no whole batch).
    pub first_offset: Option<Offset>,
    /// Last offset of the last batch stored.
    pub last_offset: Option<Offset>,
    pub batches: usize,
    /// Bytes of whole batches consumed from the chunk; a trailing partial batch (a Fetch
    /// response cut at its size limit) is ignored and fetched again next time.
    pub bytes: usize,
    pub log_end_offset: Offset,
}

/// Splits a fetched chunk into whole, CRC-checked batches (ignoring a trailing partial one).
fn split_checked(records: &Bytes) -> Result<Vec<(BatchHeader, Bytes)>, StorageError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < records.len() {
        match scan_batch(&records[pos..]) {
            ScanStep::Batch(h) => {
                let end = pos + h.total_size();
                out.push((h, records.slice(pos..end)));
                pos = end;
            }
            ScanStep::Incomplete => break,
            ScanStep::Invalid(reason) => {
                return Err(StorageError::corrupt_message(format!(
                    "replicated batch at byte {pos}: {reason}"
                )))
            }
        }
    }
    Ok(out)
}

/// Checks that the batches follow each other and the log end (`gaps_allowed`: compacted).
fn check_contiguous(
    batches: &[(BatchHeader, Bytes)],
    log_end: Offset,
    gaps_allowed: bool,
) -> Result<(), StorageError> {
    let mut expected = log_end;
    for (h, _) in batches {
        let got = Offset(h.base_offset);
        if got < expected || (got > expected && !gaps_allowed) {
            return Err(StorageError::ReplicaOffsetMismatch { expected, got });
        }
        expected = Offset(h.last_offset() + 1);
    }
    Ok(())
}

/// Whether a replicated batch is a transaction marker: `Some(true)` for COMMIT,
/// `Some(false)` for ABORT (as recovery's replay reads it), `None` for anything else.
fn replicated_marker(h: &BatchHeader, batch: &[u8]) -> Option<bool> {
    if !h.is_control() || h.producer_id == NO_PRODUCER_ID {
        return None;
    }
    control_batch_commit(batch)
}

impl<F: FileSystem> LogInner<F> {
    pub async fn append_replicated(
        self: &Rc<Self>,
        records: Bytes,
        now_ms: i64,
    ) -> Result<ReplicaAppendInfo, StorageError> {
        let batches = split_checked(&records)?;
        let bytes = batches.iter().map(|(_, b)| b.len()).sum();
        let _turn = self.append_lock.acquire().await;
        self.check_writable()?;
        let log_end = self.st.borrow().log_end;
        check_contiguous(&batches, log_end, self.cfg().compacted)?;
        let mut info = ReplicaAppendInfo {
            first_offset: batches.first().map(|(h, _)| Offset(h.base_offset)),
            last_offset: batches.last().map(|(h, _)| Offset(h.last_offset())),
            batches: batches.len(),
            bytes,
            log_end_offset: log_end,
        };
        for (h, batch) in batches {
            self.stage_replicated(&h, batch, now_ms).await?;
        }
        info.log_end_offset = self.st.borrow().log_end;
        self.kick_writer();
        Ok(info)
    }

    /// Stages one checked batch at its own offsets (the append lock is held).
    async fn stage_replicated(
        self: &Rc<Self>,
        h: &BatchHeader,
        batch: Bytes,
        now_ms: i64,
    ) -> Result<(), StorageError> {
        let config = self.cfg();
        self.wait_for_space(batch.len()).await?;
        let seg_base = self.st.borrow().active().base;
        if self.needs_roll(batch.len(), h.last_offset() - seg_base.0, now_ms) {
            self.roll().await?;
        }
        self.check_writable()?;
        let base = Offset(h.base_offset);
        let last = Offset(h.last_offset());
        // Kafka's follower path: `leaderEpochCache.assign(batch.partitionLeaderEpoch, base)`.
        if self.st.borrow_mut().epochs.assign(Epoch(h.partition_leader_epoch), base) {
            self.write_epochs().await?;
        }
        // The offset of the max timestamp is taken as the batch's base, as recovery does
        // from headers alone: finding the exact record would mean decompressing.
        let max_ts = (h.max_timestamp, base);
        let mut st = self.st.borrow_mut();
        let seg = st.active_mut();
        seg.first_append_ms.get_or_insert(now_ms);
        seg.track_batch(h, max_ts, config.index_interval_bytes);
        seg.staged.push_back((batch.clone(), Some(last.next())));
        seg.staged_end = last.next();
        st.unwritten_bytes += batch.len();
        st.unwritten.push_back((base.0, last.0, batch.clone()));
        st.log_end = last.next();
        if let Some(p) = producer_batch(h) {
            // Replication origin: no sequence checks (the leader made them), as Kafka.
            let ts = if h.max_timestamp >= 0 { h.max_timestamp } else { now_ms };
            if st.producers.apply(&p, last.0, ts) {
                crate::metrics::producers_tracked(1);
            }
        } else if let Some(commit) = replicated_marker(h, &batch) {
            // A transaction marker closes the producer's open transaction here too (Kafka's
            // `appendEndTxnMarker` on the follower path), or this replica, once elected,
            // would hold its last stable offset at that transaction's first offset and
            // forget the aborted ones (issue 17's stuck LSO); an ABORT is also recorded for
            // read_committed fetches and this segment's `.txnindex`.
            st.producers.apply_marker(h.producer_id, h.producer_epoch, commit, last.0);
        }
        if st.max_timestamp.is_none_or(|(t, _)| max_ts.0 > t) {
            st.max_timestamp = Some(max_ts);
        }
        drop(st);
        // A copy: `batch` is a slice of the whole fetch response, which a slice in the cache
        // would keep alive beyond the cache's byte bound.
        self.cache.insert(self.log_id, base.0, last.0, Bytes::copy_from_slice(&batch));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::records::build_simple_batch;
    use crate::storage::validate::assign;
    use crate::storage::LogConfig;

    fn chunk(parts: &[Bytes]) -> Bytes {
        parts.iter().flat_map(|b| b.iter().copied()).collect::<Vec<u8>>().into()
    }

    #[test]
    fn split_ignores_a_trailing_partial_batch_and_refuses_a_bad_crc() {
        let cfg = LogConfig::default();
        let a = assign(build_simple_batch(2, 10, 5), 0, 1, &cfg, 0);
        let b = assign(build_simple_batch(3, 10, 5), 2, 1, &cfg, 0);
        let whole = chunk(&[a.clone(), b.clone()]);
        assert_eq!(split_checked(&whole).unwrap().len(), 2);
        let cut = whole.slice(..whole.len() - 7);
        let got = split_checked(&cut).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1, a);
        let mut bad = whole.to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        assert!(matches!(
            split_checked(&Bytes::from(bad)),
            Err(StorageError::CorruptMessage { .. })
        ));
    }

    #[test]
    fn contiguity_refuses_gaps_and_overlaps_unless_compacted() {
        let cfg = LogConfig::default();
        let a = assign(build_simple_batch(2, 10, 5), 10, 1, &cfg, 0);
        let b = assign(build_simple_batch(3, 10, 5), 14, 1, &cfg, 0);
        let batches = split_checked(&chunk(&[a, b])).unwrap();
        assert!(check_contiguous(&batches[..1], Offset(10), false).is_ok());
        let overlap = check_contiguous(&batches[..1], Offset(11), false);
        assert!(matches!(
            overlap,
            Err(StorageError::ReplicaOffsetMismatch { expected: Offset(11), got: Offset(10) })
        ));
        assert!(check_contiguous(&batches, Offset(10), false).is_err());
        assert!(check_contiguous(&batches, Offset(10), true).is_ok());
        assert!(check_contiguous(&batches, Offset(11), true).is_err());
    }
}
