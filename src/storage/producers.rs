//! The partition log's side of idempotence: the duplicate answer, producer-state snapshots
//! (`NNN.snapshot`, written at each roll and at close) and rebuilding the state at open and
//! after truncation from the latest snapshot plus the batch headers above it.
//!
//! Runs on the partition's owner shard. The state logic itself is pure
//! (`storage::producer_state`); this module only moves it to and from files. Invariants: the
//! in-memory state always covers exactly the batches below the log end; a snapshot named N
//! holds the state of the batches below offset N and is written only once they are all in
//! the log (roll, close), so one above the log end after a crash describes lost data and is
//! deleted before loading; snapshots are replaced atomically (write temp, fsync, rename,
//! fsync dir) and CRC-checked on load (a bad one is skipped: the log is replayed further).
//! When the cleaner removes transaction markers, the snapshots are first made to agree with
//! the cleaned log ([`LogInner::forget_removed_markers`]).

use std::path::{Path, PathBuf};

use super::batch::BatchHeader;
use super::error::StorageError;
use super::log::LogInner;
use super::producer_state::{BatchMeta, ProducerBatch, ProducerStateMap, NO_PRODUCER_ID};
use super::segment::{scan_file, segment_path, SNAPSHOT_SUFFIX};
use super::{AppendInfo, LogConfig, TimestampType};
use crate::io::{DataFile, FileSystem};
use crate::types::Offset;

/// The producer fields of a data batch, `None` for a batch without producer id (or a
/// control batch, which carries no sequence).
#[must_use]
pub fn producer_batch(h: &BatchHeader) -> Option<ProducerBatch> {
    (h.producer_id != NO_PRODUCER_ID && !h.is_control()).then_some(ProducerBatch {
        producer_id: h.producer_id,
        epoch: h.producer_epoch,
        first_seq: h.base_sequence,
        offset_delta: h.last_offset_delta,
        transactional: h.is_transactional(),
    })
}

/// Base offset of a `NNN.snapshot` file name, if it is one.
#[must_use]
pub fn parse_snapshot_name(name: &str) -> Option<i64> {
    let digits = name.strip_suffix(SNAPSHOT_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Where replay scans one segment: start position, written size, path, file.
type SegmentScan = (u64, u64, PathBuf, i64);

/// Snapshot offsets present in `dir`, ascending.
async fn snapshot_offsets_in<F: FileSystem>(fs: &F, dir: &Path) -> Result<Vec<i64>, StorageError> {
    let names = fs.list_dir(dir).await.map_err(StorageError::io("list", dir, 0))?;
    let mut offsets: Vec<i64> = names.iter().filter_map(|n| parse_snapshot_name(n)).collect();
    offsets.sort_unstable();
    Ok(offsets)
}

/// The latest snapshot in `dir` at or below `upto` that passes its checks, with its offset
/// (bad ones are skipped with a warning).
pub(super) async fn latest_snapshot<F: FileSystem>(
    fs: &F,
    dir: &Path,
    upto: i64,
) -> Result<Option<(i64, ProducerStateMap)>, StorageError> {
    let offsets = snapshot_offsets_in(fs, dir).await?;
    for o in offsets.iter().rev().filter(|o| **o <= upto) {
        let path = segment_path(dir, Offset(*o), SNAPSHOT_SUFFIX);
        let data = fs.read_file(&path).await.map_err(StorageError::io("read", &path, 0))?;
        let why = match data.as_deref().map(ProducerStateMap::decode) {
            Some(Ok((at, state))) if at == *o => return Ok(Some((at, state))),
            Some(Ok((at, _))) => format!("names offset {at}"),
            Some(Err(e)) => e,
            None => "vanished".into(),
        };
        tracing::warn!(file = %path.display(), reason = %why, "ignoring a bad producer snapshot");
    }
    Ok(None)
}

impl<F: FileSystem> LogInner<F> {
    /// The answer to a retry of batch `d`: its original offsets (Kafka's duplicate append
    /// info). The log append time is the stored batch's, for LogAppendTime topics.
    pub(super) fn duplicate_info(&self, d: &BatchMeta, config: &LogConfig) -> AppendInfo {
        crate::metrics::duplicate_batch_dropped();
        let st = self.st.borrow();
        AppendInfo {
            base_offset: Offset(d.first_offset()),
            last_offset: Offset(d.last_offset),
            log_end_offset: st.log_end,
            log_append_time_ms: if config.timestamp_type == TimestampType::LogAppendTime {
                d.timestamp_ms
            } else {
                -1
            },
            log_start_offset: st.log_start,
            duplicate: true,
        }
    }

    fn snapshot_path(&self, offset: i64) -> PathBuf {
        segment_path(&self.dir, Offset(offset), SNAPSHOT_SUFFIX)
    }

    /// Writes the producer state as `<offset>.snapshot` (atomic and durable). `offset` must be
    /// the log end: the state covers exactly the batches below it.
    pub(super) async fn write_producer_snapshot(&self, offset: Offset) -> Result<(), StorageError> {
        let bytes = {
            let st = self.st.borrow();
            assert_eq!(st.log_end, offset, "a snapshot is taken at the log end");
            st.producers.encode(offset.0)
        };
        let path = self.snapshot_path(offset.0);
        self.fs
            .write_file_atomic(&path, &bytes)
            .await
            .map_err(StorageError::io("snapshot", &path, 0))
    }

    /// Snapshot offsets present in the directory, ascending.
    async fn snapshot_offsets(&self) -> Result<Vec<i64>, StorageError> {
        snapshot_offsets_in(&*self.fs, &self.dir).await
    }

    async fn remove_snapshot(&self, offset: i64) -> Result<(), StorageError> {
        let path = self.snapshot_path(offset);
        match self.fs.remove_file(&path).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StorageError::io("remove", &path, 0)(e)),
        }
    }

    /// Rebuilds the producer state for the log below `upto` (the log end): deletes snapshots
    /// above it, loads the latest valid one at or below it (or starts empty), and replays the
    /// producer fields of every batch from there to `upto`. Also removes snapshots below both
    /// the loaded one and the first segment (left behind by merged or deleted segments).
    pub(super) async fn load_producer_state(&self, upto: Offset) -> Result<(), StorageError> {
        let loaded = latest_snapshot(&*self.fs, &self.dir, upto.0).await?;
        let first_base = self.st.borrow().segments.keys().next().copied().unwrap_or(0);
        let (from, mut state) = loaded.unwrap_or((first_base, ProducerStateMap::default()));
        let replayed = self.replay_producers(&mut state, Offset(from), upto).await?;
        self.install_producer_state(from, state, upto, replayed).await
    }

    /// Makes `state` (the snapshot at `from` plus `replayed` batches up to `upto`) the log's
    /// producer state, deleting snapshots above `upto` and strays below `from` and the first
    /// segment.
    pub(super) async fn install_producer_state(
        &self,
        from: i64,
        mut state: ProducerStateMap,
        upto: Offset,
        mut replayed: u64,
    ) -> Result<(), StorageError> {
        // The aborted transactions below the snapshot are in the segments' `.txnindex` files
        // (a version-2 snapshot carries them too: merged). A bad file: rebuild everything
        // from the first segment instead.
        let mut from = from;
        match self.read_txn_indexes(from).await? {
            Ok(entries) => state.add_aborted(entries),
            Err(why) => {
                let first = self.st.borrow().segments.keys().next().copied().unwrap_or(0);
                tracing::warn!(dir = %self.dir.display(), reason = %why, "a transaction index fails its checks; replaying the whole log");
                state = ProducerStateMap::default();
                replayed = self.replay_producers(&mut state, Offset(first), upto).await?;
                from = first;
            }
        }
        let offsets = self.snapshot_offsets().await?;
        let first_base = self.st.borrow().segments.keys().next().copied().unwrap_or(0);
        let mut changed = false;
        for o in offsets.iter().filter(|o| **o > upto.0 || (**o < from && **o < first_base)) {
            if *o > upto.0 {
                tracing::info!(dir = %self.dir.display(), offset = o, "deleting a producer snapshot past the log end");
            }
            self.remove_snapshot(*o).await?;
            changed = true;
        }
        if replayed > 0 || from != upto.0 {
            tracing::info!(
                dir = %self.dir.display(),
                snapshot = from,
                log_end = upto.0,
                batches = replayed,
                producers = state.len(),
                "rebuilt producer state"
            );
        }
        if changed {
            // Durable before any append: a stale snapshot must not outlive a log that grows
            // past its offset again.
            self.fs
                .sync_dir(&self.dir)
                .await
                .map_err(StorageError::io("sync dir", &self.dir, 0))?;
        }
        let before = self.st.borrow().producers.len();
        crate::metrics::producers_tracked(state.len() as i64 - before as i64);
        self.st.borrow_mut().producers = state;
        // Files written before a crash or a truncation, or missing (a data dir from before
        // `.txnindex` files), are made to match.
        self.reconcile_txn_indexes().await
    }

    /// Applies the producer fields of every batch whose last offset is in `[from, upto)`.
    /// Returns how many producer batches were applied.
    async fn replay_producers(
        &self,
        state: &mut ProducerStateMap,
        from: Offset,
        upto: Offset,
    ) -> Result<u64, StorageError> {
        // (scan start, written size, path, base) of each segment holding offsets >= from.
        let segments: Vec<SegmentScan> = {
            let st = self.st.borrow();
            st.segments
                .values()
                .filter(|s| s.next_offset > from && s.base < upto)
                .map(|s| {
                    let start =
                        if from > s.base { u64::from(s.index.lookup(s.relative(from))) } else { 0 };
                    (start, s.written_bytes, s.path.clone(), s.base.0)
                })
                .collect()
        };
        let mut applied = 0;
        for (start, size, path, base) in segments {
            // A segment gone meanwhile (retention below the log start) holds nothing to
            // replay; each file is leased from the shard's open-file cache while scanned.
            let Some(file) = self.segment_file(base).await? else { continue };
            let scan = scan_file(&*file, &path, start, size, i64::MIN).await?;
            for (pos, h) in &scan.batches {
                if h.last_offset() < from.0 || h.last_offset() >= upto.0 {
                    continue;
                }
                if h.is_control() && h.producer_id != NO_PRODUCER_ID {
                    // A transaction marker: its type is in the record (control batches are
                    // rare and small, so each is read on its own).
                    let bytes = file
                        .read_at(*pos, h.total_size())
                        .await
                        .map_err(StorageError::io("read", &path, *pos))?;
                    if let Some(commit) = super::producer_state::control_batch_commit(&bytes) {
                        state.apply_marker(
                            h.producer_id,
                            h.producer_epoch,
                            commit,
                            h.last_offset(),
                        );
                        applied += 1;
                    }
                    continue;
                }
                if let Some(p) = producer_batch(h) {
                    state.apply(&p, h.last_offset(), h.max_timestamp);
                    applied += 1;
                }
            }
            self.fs.yield_if_needed().await;
        }
        Ok(applied)
    }

    /// Forgets producers idle for `producer.id.expiration.ms` (the retention pass calls it).
    pub(super) fn expire_producers(&self, now_ms: i64) -> usize {
        let expiration_ms = self.cfg().producer_id_expiration_ms;
        let gone = self.st.borrow_mut().producers.remove_expired(now_ms, expiration_ms);
        if gone > 0 {
            crate::metrics::producers_tracked(-(gone as i64));
            tracing::info!(dir = %self.dir.display(), producers = gone, "expired producer ids");
        }
        gone
    }

    /// Before the cleaner swaps out markers (the last at `last_marker`), makes the producer
    /// state agree with the cleaned log: the aborted transactions of the removed ABORT
    /// markers (`aborted_markers`) are forgotten in memory and in every snapshot that still
    /// lists them (version 2 only: version 3 leaves them to the `.txnindex` files), and
    /// snapshots at or below `last_marker` are deleted (one may hold a transaction open
    /// whose marker goes: a replay from it would never close it). Done first, under the
    /// append lock (no roll or truncation writes or deletes a snapshot meanwhile): a crash
    /// before the swap leaves markers whose transactions hold no data, which mean nothing to
    /// readers; the reverse (an aborted entry without its marker) would hide a later
    /// transaction of the producer from read_committed consumers. The latest snapshot, taken
    /// at the active segment's base, lies above every cleaned offset and is only rewritten.
    pub(super) async fn forget_removed_markers(
        &self,
        aborted_markers: &[i64],
        last_marker: i64,
    ) -> Result<(), StorageError> {
        let _turn = self.append_lock.acquire().await;
        self.st.borrow_mut().producers.forget_aborted(aborted_markers);
        let mut changed = false;
        for o in self.snapshot_offsets().await? {
            if o <= last_marker {
                self.remove_snapshot(o).await?;
                changed = true;
                continue;
            }
            if aborted_markers.is_empty() {
                continue;
            }
            let path = self.snapshot_path(o);
            let data =
                self.fs.read_file(&path).await.map_err(StorageError::io("read", &path, 0))?;
            // A bad snapshot is skipped at load anyway.
            let Some(Ok((at, mut state))) = data.as_deref().map(ProducerStateMap::decode) else {
                continue;
            };
            if state.forget_aborted(aborted_markers) > 0 {
                self.fs
                    .write_file_atomic(&path, &state.encode(at))
                    .await
                    .map_err(StorageError::io("snapshot", &path, 0))?;
            }
        }
        if changed {
            self.fs
                .sync_dir(&self.dir)
                .await
                .map_err(StorageError::io("sync dir", &self.dir, 0))?;
        }
        Ok(())
    }

    /// Forgets every producer and deletes every snapshot (the log was emptied).
    pub(super) async fn reset_producers(&self) -> Result<(), StorageError> {
        for o in self.snapshot_offsets().await? {
            self.remove_snapshot(o).await?;
        }
        let n = self.st.borrow().producers.len();
        crate::metrics::producers_tracked(-(n as i64));
        self.st.borrow_mut().producers.clear();
        Ok(())
    }
}

/// The producer state recovery rebuilds while it loads segments: the latest snapshot (at
/// `from`) plus the producer fields of every batch of the segments it scans from their
/// first byte anyway, so the tail is not read twice. Valid only if the scanned segments
/// cover everything from `from` to the log end.
pub(super) struct ProducerFold {
    from: i64,
    state: ProducerStateMap,
    /// The state covers every batch below this offset (and above `from`).
    next: i64,
    /// Offsets at or above `next` were loaded without a scan: replay instead.
    broken: bool,
    applied: u64,
}

impl ProducerFold {
    /// Starts from `snapshot`, or from nothing at `first_base`.
    pub(super) fn new(snapshot: Option<(i64, ProducerStateMap)>, first_base: i64) -> Self {
        let (from, state) = snapshot.unwrap_or((first_base, ProducerStateMap::default()));
        ProducerFold { from, state, next: from, broken: false, applied: 0 }
    }

    /// A segment ending at `end` loaded without a full scan (trusted).
    pub(super) fn skipped(&mut self, end: i64) {
        if end > self.next {
            self.broken = true;
        }
    }

    /// A segment from `base` scanned from its first byte: its batches in order, up to `end`.
    pub(super) fn scanned<'a>(
        &mut self,
        base: i64,
        headers: impl Iterator<Item = &'a BatchHeader>,
        end: i64,
    ) {
        if self.broken || base > self.next {
            self.broken = true;
            return;
        }
        for h in headers.filter(|h| h.last_offset() >= self.next) {
            if h.is_control() && h.producer_id != NO_PRODUCER_ID {
                // A marker's type is in its record, which the fold does not have: replay.
                self.broken = true;
                return;
            }
            if let Some(p) = producer_batch(h) {
                self.state.apply(&p, h.last_offset(), h.max_timestamp);
                self.applied += 1;
            }
        }
        self.next = self.next.max(end);
    }

    /// The state at `log_end` (snapshot offset, state, batches applied), if the fold covers
    /// exactly up to it.
    pub(super) fn finish(self, log_end: i64) -> Option<(i64, ProducerStateMap, u64)> {
        (!self.broken && self.from <= log_end && self.next == log_end).then_some((
            self.from,
            self.state,
            self.applied,
        ))
    }
}
