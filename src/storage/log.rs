//! The partition log: its state, `wait_committed`, accessors, log-start advance, truncation
//! and close. Appending (validate, assign offsets, stage) is in `append`, writing in `writer`,
//! reading in `read`, opening and recovery in `recovery`.
//!
//! Lives on the partition's owner shard. State sits in one `RefCell` that is never borrowed
//! across `.await`. Invariants: `log_start <= durable <= written <= log_end` (durable may lag
//! written only under IntervalMs/Never); `unwritten` holds exactly the batches at offsets
//! `written..log_end`, in order; appends take effect in call order (ticket lock).

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;

use super::cache::BatchCache;
use super::checkpoint::{self, LEADER_EPOCH_FILE, LOG_START_FILE, RECOVERY_POINT_FILE};
use super::epoch::EpochCache;
use super::error::StorageError;
use super::producer_state::ProducerStateMap;
use super::segment::{
    segment_path, Segment, INDEX_SUFFIX, LOG_SUFFIX, SNAPSHOT_SUFFIX, TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
};
use super::{AppendInfo, FlushPolicy, LogConfig};
use crate::io::{DataFile, FileSystem};
use crate::sync::{Notify, TicketLock};
use crate::types::{Epoch, Offset};

/// A partition log. See the module docs of [`crate::storage`].
pub struct PartitionLog<F: FileSystem> {
    pub(super) inner: Rc<LogInner<F>>,
}

pub(super) struct LogInner<F: FileSystem> {
    pub fs: Rc<F>,
    pub dir: PathBuf,
    /// Swapped whole by `set_config`; readers take an `Rc` snapshot, never a borrow.
    pub config: RefCell<Rc<LogConfig>>,
    pub cache: Rc<BatchCache>,
    pub log_id: u64,
    pub st: RefCell<LogState<F>>,
    pub append_lock: TicketLock,
    /// Signalled on every writer step, failure and state change waiters care about.
    pub progress: Notify,
    pub readahead: Rc<super::readahead::Readahead>,
}

pub(super) struct LogState<F: FileSystem> {
    pub segments: BTreeMap<i64, Segment<F>>,
    pub log_start: Offset,
    pub log_end: Offset,
    pub written: Offset,
    pub durable: Offset,
    pub unwritten: VecDeque<(i64, i64, Bytes)>,
    pub unwritten_bytes: usize,
    pub writer_running: bool,
    pub syncer_scheduled: bool,
    /// Set by the IntervalMs timer: the next writer step fsyncs, due or not.
    pub sync_requested: bool,
    /// Number of callers waiting for an fsync regardless of policy (flush, close).
    pub force_sync: usize,
    /// Monotonic time (the file system's clock) of the last fsync.
    pub last_sync: Duration,
    /// When the oldest batch not yet handed to a write was staged (the writer's
    /// `write_wait` stage runs from here to the write's issue).
    pub first_staged_at: Option<Duration>,
    /// The preallocation running (at most one per log): its segment's base and the start of
    /// the region it zero-fills; writes ending past that start wait for it.
    pub fill: Option<(i64, u64)>,
    /// When the writer last advanced `written`/`durable` and woke the waiters (the
    /// `notify` stage of a waiting append runs from here to its wake-up).
    pub committed_at: Duration,
    pub failed: Option<String>,
    /// Set while the writer waits for disk space (`storage::writer`): appends and waits for
    /// commit get [`StorageError::OutOfSpace`] until it writes again.
    pub out_of_space: Option<String>,
    pub closed: bool,
    pub epochs: EpochCache,
    pub max_timestamp: Option<(i64, Offset)>,
    pub recovery_point: Offset,
    /// The cleaner's end of the clean section: sealed segments ending past it are dirty.
    /// Persisted in `cleaner-offset-checkpoint` after each pass.
    pub cleaner_checkpoint: Offset,
    /// The latest KIP-534 delete horizon the last cleaner pass left on a batch with
    /// tombstones (in memory, as Kafka's `latestDeleteHorizon`): once passed, the log is
    /// cleaned again to drop them.
    pub latest_delete_horizon_ms: Option<i64>,
    /// Idempotent producers' sequence windows (`storage::producer_state`), covering every
    /// batch below `log_end`; snapshotted at each roll and at close.
    pub producers: ProducerStateMap,
}

impl<F: FileSystem> LogState<F> {
    pub fn active(&self) -> &Segment<F> {
        self.segments.values().next_back().expect("a log always has an active segment")
    }

    pub fn active_mut(&mut self) -> &mut Segment<F> {
        self.segments.values_mut().next_back().expect("a log always has an active segment")
    }
}

impl<F: FileSystem> LogInner<F> {
    /// Drops the log's cached batches with a last offset >= `from` (and any read-ahead in
    /// flight), after truncation or cleaning changed what is on disk.
    pub fn invalidate_cached_from(&self, from: i64) {
        self.readahead.invalidate();
        self.cache.invalidate_from(self.log_id, from);
    }

    /// A snapshot of the current configuration.
    pub fn cfg(&self) -> Rc<LogConfig> {
        self.config.borrow().clone()
    }

    pub fn committed(&self) -> Offset {
        let st = self.st.borrow();
        match self.cfg().flush {
            FlushPolicy::EveryBatch => st.durable,
            FlushPolicy::IntervalMs(_) | FlushPolicy::Never => st.written,
        }
    }

    pub fn check_writable(&self) -> Result<(), StorageError> {
        let st = self.st.borrow();
        if st.closed {
            return Err(StorageError::Closed { path: self.dir.clone() });
        }
        if let Some(reason) = &st.failed {
            return Err(StorageError::ReadOnly { path: self.dir.clone(), reason: reason.clone() });
        }
        self.check_space(&st)
    }

    /// [`StorageError::OutOfSpace`] while the writer waits for disk space.
    pub(super) fn check_space(&self, st: &LogState<F>) -> Result<(), StorageError> {
        match &st.out_of_space {
            Some(reason) => {
                Err(StorageError::OutOfSpace { path: self.dir.clone(), reason: reason.clone() })
            }
            None => Ok(()),
        }
    }

    /// Creates the files of a new segment at `base`: the `.log` and sparse (ftruncate)
    /// preallocated indexes, then syncs the directory so the names survive a power loss.
    pub async fn create_segment(&self, base: Offset) -> Result<Segment<F>, StorageError> {
        let path = segment_path(&self.dir, base, LOG_SUFFIX);
        let file = self.fs.open(&path, true).await.map_err(StorageError::io("create", &path, 0))?;
        file.truncate(0).await.map_err(StorageError::io("truncate", &path, 0))?;
        for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
            let p = segment_path(&self.dir, base, suffix);
            let f = self.fs.open(&p, true).await.map_err(StorageError::io("create", &p, 0))?;
            let size = u64::from(self.cfg().segment_index_bytes);
            f.truncate(size).await.map_err(StorageError::io("preallocate", &p, size))?;
            f.close().await.map_err(StorageError::io("close", &p, 0))?;
        }
        self.fs.sync_dir(&self.dir).await.map_err(StorageError::io("sync dir", &self.dir, 0))?;
        Ok(Segment::new(base, path, file))
    }

    pub(super) fn needs_roll(&self, batch_bytes: usize, rel_last: i64, now_ms: i64) -> bool {
        let st = self.st.borrow();
        let seg = st.active();
        if seg.size_bytes == 0 {
            return false;
        }
        let c = self.cfg();
        // Kafka's `maxSegmentMs`: a compacted log rolls by max.compaction.lag.ms too, so its
        // records become cleanable in time.
        let roll_ms = if c.compacted && c.max_compaction_lag_ms > 0 {
            c.segment_ms.min(c.max_compaction_lag_ms)
        } else {
            c.segment_ms
        };
        seg.size_bytes + batch_bytes as u64 > c.segment_bytes.min(i32::MAX as u64)
            || seg.first_append_ms.is_some_and(|t| now_ms.saturating_sub(t) >= roll_ms)
            || seg.index_full(c.segment_index_bytes)
            || rel_last > i64::from(u32::MAX)
    }

    /// Seals the active segment (the writer finalizes it) and opens a new one at the log end,
    /// after snapshotting the producer state at that offset (recovery replays from there).
    pub(super) async fn roll(self: &Rc<Self>) -> Result<(), StorageError> {
        let (base, active) = {
            let st = self.st.borrow();
            (st.log_end, st.active().base)
        };
        // Before the snapshot: every segment below the latest snapshot has its `.txnindex`
        // on disk (`storage::txn_index`).
        self.write_txn_index(active.0, base.0).await?;
        self.write_producer_snapshot(base).await?;
        let seg = self.create_segment(base).await?;
        let mut st = self.st.borrow_mut();
        let old = st.active_mut();
        old.sealed = true;
        old.seal_time_index();
        st.segments.insert(base.0, seg);
        drop(st);
        self.kick_writer();
        Ok(())
    }

    pub async fn write_epochs(&self) -> Result<(), StorageError> {
        let text = self.st.borrow().epochs.to_text();
        let path = self.dir.join(LEADER_EPOCH_FILE);
        self.fs.write_file_atomic(&path, text.as_bytes()).await.map_err(StorageError::io(
            "checkpoint",
            &path,
            0,
        ))
    }

    pub async fn wait_committed(self: &Rc<Self>, offset: Offset) -> Result<(), StorageError> {
        let mut waited = false;
        loop {
            if self.committed() > offset {
                if waited {
                    let since = self.st.borrow().committed_at;
                    let woke = self.fs.monotonic().saturating_sub(since);
                    crate::metrics::writer_stage(crate::metrics::Stage::Notify, woke);
                }
                return Ok(());
            }
            {
                let st = self.st.borrow();
                if let Some(reason) = &st.failed {
                    return Err(StorageError::ReadOnly {
                        path: self.dir.clone(),
                        reason: reason.clone(),
                    });
                }
                self.check_space(&st)?;
                if offset >= st.log_end {
                    return Err(StorageError::OffsetOutOfRange {
                        requested: offset,
                        log_start: st.log_start,
                        log_end: st.log_end,
                    });
                }
            }
            let wait = self.progress.wait();
            self.kick_writer();
            wait.await;
            waited = true;
        }
    }

    /// Waits until everything appended before the call is written and, when `sync`, fsynced
    /// (whatever the policy). With `idle`, also until the writer has stopped (callers that
    /// hold the append lock and are about to change segments).
    pub async fn drain(self: &Rc<Self>, sync: bool, idle: bool) -> Result<(), StorageError> {
        let target = self.st.borrow().log_end;
        let _force = sync.then(|| ForceSync::new(self));
        loop {
            {
                let st = self.st.borrow();
                if let Some(reason) = &st.failed {
                    return Err(StorageError::ReadOnly {
                        path: self.dir.clone(),
                        reason: reason.clone(),
                    });
                }
                self.check_space(&st)?;
                let done = st.written >= target
                    && (!sync || st.durable >= target)
                    && (!idle || (!st.writer_running && st.fill.is_none()))
                    && st.segments.values().all(|s| s.base >= target || !s.sealed || s.finalized);
                if done {
                    return Ok(());
                }
            }
            let wait = self.progress.wait();
            self.kick_writer();
            wait.await;
        }
    }

    pub async fn advance_log_start(&self, offset: Offset) -> Result<(), StorageError> {
        let _turn = self.append_lock.acquire().await;
        let (start, end) = {
            let st = self.st.borrow();
            (st.log_start, st.log_end)
        };
        if offset > end {
            return Err(StorageError::OffsetOutOfRange {
                requested: offset,
                log_start: start,
                log_end: end,
            });
        }
        if offset <= start {
            return Ok(());
        }
        checkpoint::write(&*self.fs, &self.dir, LOG_START_FILE, offset).await?;
        self.st.borrow_mut().log_start = offset;
        self.advance_log_start_after_open(offset).await
    }

    /// Deletes every finalized segment wholly below `start` (the next segment begins at or
    /// below it). Also run at open, to finish a deletion a crash interrupted.
    pub async fn advance_log_start_after_open(&self, start: Offset) -> Result<(), StorageError> {
        let doomed: Vec<Segment<F>> = {
            let mut st = self.st.borrow_mut();
            let bases: Vec<i64> = st.segments.keys().copied().collect();
            let mut out = Vec::new();
            for w in bases.windows(2) {
                if w[1] <= start.0 && st.segments[&w[0]].finalized {
                    out.push(w[0]);
                }
            }
            out.into_iter().filter_map(|b| st.segments.remove(&b)).collect()
        };
        self.schedule_deletion(doomed).await
    }

    pub async fn delete_segments(&self, doomed: Vec<Segment<F>>) -> Result<(), StorageError> {
        if doomed.is_empty() {
            return Ok(());
        }
        for seg in doomed {
            // A cached (unpinned) file leaves the shard's cache as the segment drops.
            if let Some(file) = &seg.pinned_file {
                let _ = file.close().await;
            }
            for suffix in
                [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX]
            {
                let p = segment_path(&self.dir, seg.base, suffix);
                match self.fs.remove_file(&p).await {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(StorageError::io("remove", &p, 0)(e)),
                }
            }
        }
        self.fs.sync_dir(&self.dir).await.map_err(StorageError::io("sync dir", &self.dir, 0))
    }

    pub async fn lower_recovery_point(&self, to: Offset) -> Result<(), StorageError> {
        if self.st.borrow().recovery_point <= to {
            return Ok(());
        }
        checkpoint::write(&*self.fs, &self.dir, RECOVERY_POINT_FILE, to).await?;
        self.st.borrow_mut().recovery_point = to;
        Ok(())
    }
}

impl<F: FileSystem> PartitionLog<F> {
    /// Wall-clock ms from the log's file system (the clock seam: a simulator's virtual one).
    #[must_use]
    pub fn now_ms(&self) -> i64 {
        self.inner.fs.now_ms()
    }

    /// Monotonic time from the log's file system.
    #[must_use]
    pub fn monotonic(&self) -> Duration {
        self.inner.fs.monotonic()
    }

    /// Opens (creating if missing) the log in `dir`, recovering it if it was not shut down
    /// cleanly. See `recovery`.
    pub async fn open(
        fs: Rc<F>,
        dir: &Path,
        config: LogConfig,
        cache: Rc<BatchCache>,
    ) -> Result<Self, StorageError> {
        super::recovery::open(fs, dir, config, cache).await.map(|inner| PartitionLog { inner })
    }

    /// Validates (Kafka's log-validator rules), assigns offsets, stamps the leader epoch (and
    /// LogAppendTime), and stages the batch. Takes effect in call order; does not wait for
    /// the disk unless the unwritten backlog is full.
    pub async fn append(
        &self,
        batch: Bytes,
        leader_epoch: Epoch,
        now_ms: i64,
    ) -> Result<AppendInfo, StorageError> {
        self.inner.append(batch, leader_epoch, now_ms).await
    }

    /// Appends a coordinator's batch (a transaction marker or transactional offset commits);
    /// no client validation or sequence check (Kafka's `AppendOrigin.COORDINATOR`). Returns
    /// the transaction a marker closed.
    pub async fn append_coordinator(
        &self,
        batch: Bytes,
        leader_epoch: Epoch,
        now_ms: i64,
    ) -> Result<(AppendInfo, Option<super::producer_state::CompletedTxn>), StorageError> {
        self.inner.append_coordinator(batch, leader_epoch, now_ms).await
    }

    /// First offset of the oldest transaction that is open, or completed by a marker not yet
    /// below `hw` (the last stable offset is at most it).
    #[must_use]
    pub fn first_unstable_offset(&self, hw: Offset) -> Option<Offset> {
        self.inner.st.borrow_mut().producers.first_unstable_offset(hw.0).map(Offset)
    }

    /// Forgets the completed transactions whose marker is below `hw`: they no longer bound
    /// the last stable offset. A follower calls it as its high watermark moves; it never asks
    /// for its last stable offset (which does the same), and would otherwise keep one entry
    /// per replicated marker.
    pub fn forget_stable_txns(&self, hw: Offset) {
        let _ = self.first_unstable_offset(hw);
    }

    /// The oldest open transaction: its first offset and the max timestamp of its first
    /// batch here (-1 when unknown), what `shardlog_partition_lso_lag_ms` measures from.
    #[must_use]
    pub fn oldest_open_txn(&self) -> Option<(Offset, i64)> {
        self.inner.st.borrow().producers.oldest_open_txn().map(|(o, ts)| (Offset(o), ts))
    }

    /// Open transactions: (producer id, first offset), oldest first.
    #[must_use]
    pub fn ongoing_txns(&self) -> Vec<(i64, i64)> {
        self.inner.st.borrow().producers.ongoing_txns()
    }

    /// Aborted transactions overlapping `[from, upto)`: (producer id, first offset), what a
    /// read_committed fetch of that range returns as `aborted_transactions`.
    #[must_use]
    pub fn aborted_between(&self, from: Offset, upto: Offset) -> Vec<(i64, i64)> {
        let mut st = self.inner.st.borrow_mut();
        let start = st.log_start.0;
        st.producers.prune_aborted(start);
        st.producers.aborted_between(from.0, upto.0)
    }

    /// Resolves once everything up to and including `offset` is as durable as the flush
    /// policy promises (EveryBatch: fsynced; otherwise: O_DIRECT write completed).
    pub async fn wait_committed(&self, offset: Offset) -> Result<(), StorageError> {
        self.inner.wait_committed(offset).await
    }

    /// Writes and fsyncs everything appended so far, whatever the policy.
    pub async fn flush(&self) -> Result<(), StorageError> {
        self.inner.drain(true, false).await
    }

    /// Exclusive end of what `wait_committed` has promised: how far this replica's log is
    /// durable under the flush policy (what a follower reports as its log end). The high
    /// watermark is the partition layer's (`OwnedPartition::high_watermark`).
    #[must_use]
    pub fn committed_offset(&self) -> Offset {
        self.inner.committed()
    }

    /// How far this replica's log is durable under its flush policy, distinct from the log
    /// end: EveryBatch: fsynced; IntervalMs/Never: the O_DIRECT write completed (survives a
    /// process crash; those policies rely on replication for power loss, as Kafka). This is
    /// the log end offset a follower reports to its leader and the leader's own term in the
    /// high watermark. The same value as [`Self::committed_offset`], named for replication.
    #[must_use]
    pub fn durable_offset(&self) -> Offset {
        self.inner.committed()
    }

    /// Exclusive end of what is fsynced, whatever the flush policy.
    #[must_use]
    pub fn fsynced_offset(&self) -> Offset {
        self.inner.st.borrow().durable
    }

    /// Appends batches fetched from the partition leader as they are: the leader's base
    /// offsets, leader epochs, timestamps and CRCs (checked), no offset assignment, no
    /// validation, no re-compression. The first batch must start at the log end (a
    /// compacted log also accepts gaps), else [`StorageError::ReplicaOffsetMismatch`] and
    /// nothing is appended. Updates the leader-epoch cache and the producer state from the
    /// headers. A trailing partial batch is ignored. Durability follows the flush policy:
    /// wait with [`Self::wait_committed`] / [`Self::durable_offset`].
    pub async fn append_replicated(
        &self,
        records: Bytes,
        now_ms: i64,
    ) -> Result<super::ReplicaAppendInfo, StorageError> {
        self.inner.append_replicated(records, now_ms).await
    }

    /// The leader-epoch cache's entries (epoch, start offset), oldest first.
    #[must_use]
    pub fn epoch_entries(&self) -> Vec<(Epoch, Offset)> {
        self.inner.st.borrow().epochs.entries.clone()
    }

    #[must_use]
    pub fn log_end_offset(&self) -> Offset {
        self.inner.st.borrow().log_end
    }

    #[must_use]
    pub fn log_start_offset(&self) -> Offset {
        self.inner.st.borrow().log_start
    }

    /// Whole batches from the one containing `offset`, below `max_offset`, up to `max_bytes`
    /// but at least one batch if available (KIP-74).
    pub async fn read(
        &self,
        offset: Offset,
        max_bytes: usize,
        max_offset: Offset,
    ) -> Result<Bytes, StorageError> {
        Ok(self.inner.read(offset, max_bytes, max_offset, false).await?.to_bytes())
    }

    /// As [`Self::read`], for bytes that are sent and dropped (a Fetch response): batches
    /// come back as slices of the buffers holding them (a read-ahead's, the cache's chunks),
    /// in pieces, without a copy. Keeping the result would keep those buffers (up to 4 MiB
    /// each) alive outside the cache's bound.
    pub async fn read_to_send(
        &self,
        offset: Offset,
        max_bytes: usize,
        max_offset: Offset,
    ) -> Result<super::SendRecords, StorageError> {
        self.inner.read(offset, max_bytes, max_offset, true).await
    }

    /// First committed offset whose record timestamp is >= `timestamp_ms`, with that
    /// timestamp.
    pub async fn offset_for_timestamp(
        &self,
        timestamp_ms: i64,
    ) -> Result<Option<(Offset, i64)>, StorageError> {
        self.inner.offset_for_timestamp(timestamp_ms).await
    }

    /// Largest timestamp appended and the offset of its record (ListOffsets -3).
    #[must_use]
    pub fn max_timestamp(&self) -> Option<(i64, Offset)> {
        self.inner.st.borrow().max_timestamp
    }

    /// Moves the log start forward (retention, DeleteRecords) and deletes whole segments
    /// below it. Checkpointed before any file is removed.
    pub async fn advance_log_start(&self, offset: Offset) -> Result<(), StorageError> {
        self.inner.advance_log_start(offset).await
    }

    /// One retention pass (time, size, log start) at wall-clock `now_ms`; see
    /// `storage::retention`. Cheap when nothing is due.
    pub async fn enforce_retention(
        &self,
        now_ms: i64,
    ) -> Result<super::RetentionOutcome, StorageError> {
        self.inner.enforce_retention(now_ms).await
    }

    /// One log-compaction pass at wall-clock `now_ms` (`cleanup.policy` contains `compact`);
    /// see `storage::cleaner`. Cheap when the log is not dirty enough.
    pub async fn clean(
        &self,
        now_ms: i64,
        opts: &super::cleaner::CleanOptions<'_>,
    ) -> Result<super::CleanOutcome, StorageError> {
        self.inner.clean(now_ms, opts).await
    }

    /// How dirty the log is, for choosing which log to clean; see `storage::cleaner`.
    pub async fn clean_stats(&self, now_ms: i64) -> Result<super::CleanStats, StorageError> {
        self.inner.clean_stats(now_ms).await
    }

    /// The cleaner checkpoint: sealed segments ending past it are dirty.
    #[must_use]
    pub fn cleaner_checkpoint(&self) -> Offset {
        self.inner.st.borrow().cleaner_checkpoint
    }

    /// Removes every batch from the one containing `offset` onward (replication).
    pub async fn truncate_to(&self, offset: Offset) -> Result<(), StorageError> {
        self.inner.truncate_to(offset).await
    }

    /// Empties the log and restarts it at `offset` (replication: the leader's log starts
    /// past this log's end). Producer state and the epoch cache are emptied with it.
    pub async fn truncate_fully_and_start_at(&self, offset: Offset) -> Result<(), StorageError> {
        self.inner.truncate_fully_and_start_at(offset).await
    }

    /// Starts leader epoch `epoch` at the log end in the leader-epoch cache (checkpointed),
    /// before any append of the epoch: Kafka's `maybeAssignEpochStartOffset` on becoming
    /// leader, so a follower asking about an older epoch learns where it ends. No-op if the
    /// cache already has this or a later epoch.
    pub async fn assign_epoch_start(&self, epoch: Epoch) -> Result<(), StorageError> {
        let _turn = self.inner.append_lock.acquire().await;
        let end = self.inner.st.borrow().log_end;
        if self.inner.st.borrow_mut().epochs.assign(epoch, end) {
            self.inner.write_epochs().await?;
        }
        Ok(())
    }

    #[must_use]
    pub fn latest_epoch(&self) -> Option<Epoch> {
        self.inner.st.borrow().epochs.latest()
    }

    /// OffsetForLeaderEpoch semantics (Kafka's `LeaderEpochFileCache.endOffsetFor`).
    #[must_use]
    pub fn end_offset_for_epoch(&self, epoch: Epoch) -> Option<(Epoch, Offset)> {
        let st = self.inner.st.borrow();
        st.epochs.end_offset_for(epoch, st.log_end)
    }

    /// Applies new topic configs to the open log (AlterConfigs). Takes effect from the next
    /// append, roll, write or retention pass; a change of flush policy also wakes the writer
    /// so appends waiting under the old policy are re-judged.
    pub fn set_config(&self, config: LogConfig) {
        if **self.inner.config.borrow() == config {
            return;
        }
        *self.inner.config.borrow_mut() = Rc::new(config);
        self.inner.kick_writer();
        self.inner.progress.notify_all();
    }

    /// The configuration in force.
    #[must_use]
    pub fn config(&self) -> Rc<LogConfig> {
        self.inner.cfg()
    }

    /// Every idempotent producer's state on this partition, by producer id.
    #[must_use]
    pub fn producers(&self) -> Vec<(i64, super::producer_state::ProducerEntry)> {
        self.inner.st.borrow().producers.entries()
    }

    /// Bytes of the log's segments (`.log` files, not indexes): Kafka's `UnifiedLog.size`,
    /// what DescribeLogDirs reports. Counts appended batches not yet written too, as
    /// Kafka's page-cache writes count; segments waiting for deletion are not counted.
    #[must_use]
    pub fn size_bytes(&self) -> u64 {
        self.inner.st.borrow().segments.values().map(|s| s.size_bytes).sum()
    }

    /// Number of segments (for tests and metrics).
    #[must_use]
    pub fn segment_count(&self) -> usize {
        self.inner.st.borrow().segments.len()
    }

    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Flushes everything, finalizes the active segment's files, checkpoints the recovery
    /// point and writes the clean-shutdown marker.
    pub async fn close(self) -> Result<(), StorageError> {
        self.inner.close().await
    }
}

/// Keeps the writer fsyncing every write while a forced flush waits; undone on drop, so a
/// cancelled flush does not leave it set.
struct ForceSync<F: FileSystem> {
    log: Rc<LogInner<F>>,
}

impl<F: FileSystem> ForceSync<F> {
    fn new(log: &Rc<LogInner<F>>) -> Self {
        log.st.borrow_mut().force_sync += 1;
        ForceSync { log: log.clone() }
    }
}

impl<F: FileSystem> Drop for ForceSync<F> {
    fn drop(&mut self) {
        self.log.st.borrow_mut().force_sync -= 1;
    }
}
