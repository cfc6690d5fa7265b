//! Log compaction for `cleanup.policy=compact` (and `compact,delete`): keeps only the latest
//! record per key in the sealed segments, as Kafka's `LogCleaner` does.
//!
//! Runs on the log's owner shard, driven by the shard's cleaner loop
//! (`partition::maintenance::cleaner_loop`), which asks every compacted log for its
//! [`CleanStats`] and cleans the dirtiest. The cleanable range is the prefix of finalized
//! sealed segments wholly below the committed offset and the recovery point, stopping at the
//! first segment holding a record newer than `min.compaction.lag.ms`. The dirty section runs
//! from the persisted cleaner checkpoint to its end. A log is cleaned when its dirty ratio
//! reaches `min.cleanable.dirty.ratio`, or at once when a dirty segment's first batch is
//! older than `max.compaction.lag.ms`, or (with nothing dirty) when a tombstone's delete
//! horizon has passed. A pass maps key → latest offset over the dirty section in a bounded
//! [`keymap::OffsetMap`] (stopping where it fills), then rewrites every segment below the
//! mapped end keeping a record only if no later record of its key was mapped; tombstones get
//! a KIP-534 delete horizon (now + `delete.retention.ms`) the first time a clean passes them
//! and are dropped by the first clean after it. Consecutive segments whose sizes sum to at
//! most `segment.bytes` are cleaned into one (Kafka's `groupSegmentsBySize`), so a compacted
//! log does not accumulate ever-smaller files. Segments are read in chunks and all cleaner
//! I/O goes through the shard's [`throttle::Throttler`]. Each rewritten group is swapped in
//! crash-safely (see [`swap`]); the checkpoint is persisted last.
//!
//! Transactions: aborted data maps no key and loses its records; nothing at or past the
//! first offset of an open transaction is cleaned. A marker (control batch) is kept while its
//! transaction has a batch left in the log (`txn::TxnTracker`, one walk over the whole
//! cleaned range per pass); once it has none, it gets a delete horizon like a tombstone and
//! the first clean after the horizon removes it, except a producer's markers of its current
//! epoch when no data batch of it is left (they fence older epochs on replay). Before
//! swapping markers out, the removed ABORT markers' aborted-transaction entries leave the
//! producer state and its snapshots, and snapshots at or below the last removed marker are
//! deleted (`LogInner::forget_removed_markers`), so neither a read_committed fetch nor a
//! replay after a restart sees a transaction whose marker is gone.
//!
//! Invariants: offsets never change (gaps appear); keyless records are kept; a marker is
//! never removed while a batch of its transaction is in the log, nor before its delete
//! horizon; each live idempotent producer's last batch is kept (maybe empty, as Kafka does);
//! the last batch of a segment is kept (maybe empty) so the segment's offset range, and
//! thus recovery's end-of-segment check, is unchanged; a group is swapped only under the
//! append lock and only if all its segments are still in the log unchanged. Memory: the key
//! map's bound plus one read chunk plus one cleaned segment.

mod filter;
pub mod keymap;
pub mod swap;
pub mod throttle;
mod txn;

use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use self::keymap::OffsetMap;
use self::swap::SWAP_SUFFIX;
use self::swap::{rename, suffixed, sync_dir, write_whole, SwapStep, CLEANED_SUFFIX, SWAP_ORDER};
use self::throttle::Throttler;
use self::txn::TxnTracker;
use super::batch::{scan_batch, BatchHeader, ScanStep};
use super::checkpoint::{self, CLEANER_CHECKPOINT_FILE};
use super::error::StorageError;
use super::log::LogInner;
use super::producer_state::{control_batch_commit, AbortedTxn};
use super::segment::{Segment, LOG_SUFFIX};
use crate::constants::{CLEANER_READ_CHUNK_BYTES, THROTTLE_ABORT_CHECK_MS};
use crate::io::{DataFile, FileSystem};
use crate::types::Offset;

pub use filter::{rebuild, records_of, CleanRecord};

/// What one cleaner pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CleanOutcome {
    /// Whether the log was cleaned (dirty enough, forced, or a delete horizon was due).
    pub cleaned: bool,
    pub dirty_ratio: f64,
    pub segments_rewritten: u64,
    /// Bytes of the segments rewritten or examined, before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Bytes the cleaner read and wrote (what the throttle limits).
    pub io_bytes: u64,
    /// The new cleaner checkpoint (end of the clean section).
    pub clean_end: Offset,
    /// The key map filled before the dirty section's end.
    pub map_full: bool,
    /// Transaction markers removed (their delete horizon had passed).
    pub markers_removed: u64,
}

/// How dirty a compacted log is (Kafka's `LogToClean`), for choosing which log to clean.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CleanStats {
    pub clean_bytes: u64,
    pub dirty_bytes: u64,
    /// dirty / (clean + dirty); 0 when nothing is cleanable.
    pub dirty_ratio: f64,
    /// A dirty segment's first batch is older than `max.compaction.lag.ms`.
    pub compaction_overdue: bool,
    /// The latest delete horizon the cleaner set has passed (tombstones can go).
    pub delete_horizon_due: bool,
}

impl CleanStats {
    /// Whether a cleaner pass would do work now (Kafka's `grabFilthiestCompactedLog` filter).
    #[must_use]
    pub fn cleanable(&self, min_ratio: f64) -> bool {
        self.dirty_bytes > 0 && (self.dirty_ratio >= min_ratio || self.compaction_overdue)
    }
}

/// How a pass runs: the key map's memory, the shard's throttle, and test hooks.
pub struct CleanOptions<'a> {
    pub key_map_bytes: usize,
    pub throttle: &'a Throttler,
    /// Polled between batches and during throttle pauses: true abandons the pass before its
    /// next swap (shutdown), leaving the log as it was (Kafka aborts its cleaner likewise).
    pub abort: &'a dyn Fn() -> bool,
    /// Clean even if not dirty enough (tests, and due delete horizons).
    pub force: bool,
    /// Stop after this step of the first swap (crash tests simulate the crash then).
    pub stop_after: Option<SwapStep>,
}

/// One cleanable segment: `[base, end)` and its size.
#[derive(Clone, Copy, Debug)]
struct Span {
    base: i64,
    end: i64,
    size_bytes: u64,
}

impl<F: FileSystem> LogInner<F> {
    /// The cleanable segments (see the module docs).
    fn cleanable(&self, now_ms: i64) -> Vec<Span> {
        let c = self.cfg();
        let committed = self.committed();
        let st = self.st.borrow();
        let bases: Vec<i64> = st.segments.keys().copied().collect();
        let mut out = Vec::new();
        for w in bases.windows(2) {
            let seg = &st.segments[&w[0]];
            let too_new = c.min_compaction_lag_ms > 0
                && now_ms.saturating_sub(seg.max_timestamp_ms) < c.min_compaction_lag_ms;
            if !seg.finalized || w[1] > committed.0 || w[1] > st.recovery_point.0 || too_new {
                break;
            }
            out.push(Span { base: w[0], end: w[1], size_bytes: seg.size_bytes });
        }
        out
    }

    /// How dirty this log is at `now_ms`; reads the first batch header of dirty segments
    /// loaded from disk once, for `max.compaction.lag.ms`.
    pub async fn clean_stats(&self, now_ms: i64) -> Result<CleanStats, StorageError> {
        Ok(self.stats_and_spans(now_ms).await?.0)
    }

    /// The stats, the cleanable segments they were computed over, and the checkpoint.
    async fn stats_and_spans(
        &self,
        now_ms: i64,
    ) -> Result<(CleanStats, Vec<Span>, Offset), StorageError> {
        let c = self.cfg();
        if !c.compacted {
            return Ok((CleanStats::default(), Vec::new(), Offset(0)));
        }
        let spans = self.cleanable(now_ms);
        let (checkpoint, horizon) = {
            let st = self.st.borrow();
            (st.cleaner_checkpoint.min(st.log_end), st.latest_delete_horizon_ms)
        };
        let mut stats = CleanStats::default();
        let mut earliest_dirty_ms = i64::MAX;
        for s in &spans {
            if s.end > checkpoint.0 {
                stats.dirty_bytes += s.size_bytes;
                earliest_dirty_ms =
                    earliest_dirty_ms.min(self.first_batch_timestamp(s.base).await?);
            } else {
                stats.clean_bytes += s.size_bytes;
            }
        }
        let total = stats.clean_bytes + stats.dirty_bytes;
        stats.dirty_ratio = if total == 0 { 0.0 } else { stats.dirty_bytes as f64 / total as f64 };
        let lag = c.max_compaction_lag_ms.max(0);
        stats.compaction_overdue = earliest_dirty_ms > 0
            && earliest_dirty_ms != i64::MAX
            && earliest_dirty_ms < now_ms.saturating_sub(lag);
        stats.delete_horizon_due = horizon.is_some_and(|h| h <= now_ms) && total > 0;
        Ok((stats, spans, checkpoint))
    }

    /// The first batch's max timestamp of segment `base` (-1 when unknown or empty).
    async fn first_batch_timestamp(&self, base: i64) -> Result<i64, StorageError> {
        let (path, known) = {
            let st = self.st.borrow();
            let Some(seg) = st.segments.get(&base) else { return Ok(-1) };
            (seg.path.clone(), seg.first_batch_timestamp_ms)
        };
        if let Some(ts) = known {
            return Ok(ts);
        }
        let Some(file) = self.segment_file(base).await? else { return Ok(-1) };
        let head = file.read_at(0, 4096).await.map_err(StorageError::io("read", &path, 0))?;
        let ts = BatchHeader::parse(&head).map_or(-1, |h| h.max_timestamp);
        if let Some(seg) = self.st.borrow_mut().segments.get_mut(&base) {
            seg.first_batch_timestamp_ms = Some(ts);
        }
        Ok(ts)
    }

    /// One cleaner pass at wall-clock `now_ms`. See the module docs.
    pub async fn clean(
        self: &Rc<Self>,
        now_ms: i64,
        opts: &CleanOptions<'_>,
    ) -> Result<CleanOutcome, StorageError> {
        self.check_writable()?;
        if !self.cfg().compacted {
            return Ok(CleanOutcome::default());
        }
        let (stats, spans, checkpoint) = self.stats_and_spans(now_ms).await?;
        let mut out = CleanOutcome { dirty_ratio: stats.dirty_ratio, ..CleanOutcome::default() };
        let wanted = stats.cleanable(self.cfg().min_cleanable_dirty_ratio)
            || stats.delete_horizon_due
            || (opts.force && stats.clean_bytes + stats.dirty_bytes > 0);
        if !wanted {
            return Ok(out);
        }
        let mut map = OffsetMap::with_memory(opts.key_map_bytes);
        // Transactions: aborted data maps no key, and nothing at or past the first offset of
        // an open transaction is cleaned (its outcome is unknown: Kafka's first uncleanable
        // offset is at most the first unstable one).
        let (aborted_txns, open_from) = {
            let st = self.st.borrow();
            (st.producers.aborted_txns().to_vec(), st.producers.first_open_offset())
        };
        let mut unstable = false;
        let mut end =
            spans.iter().take_while(|s| s.end <= checkpoint.0).last().map_or(0, |s| s.end);
        for s in spans.iter().filter(|s| s.end > checkpoint.0) {
            let mut reader = SegmentReader::new(s);
            let mut full = false;
            while let Some(batch) = self.next_batch(&mut reader, opts, &mut out).await? {
                // CPU-bound between reads: let requests on this shard run first.
                self.fs.yield_if_needed().await;
                if (opts.abort)() {
                    return Ok(aborted(out));
                }
                let h = BatchHeader::parse(&batch)?;
                // Control batches hold no keys; a batch below the checkpoint was mapped by
                // the pass that stopped mid-segment.
                if open_from.is_some_and(|o| h.last_offset() >= o) {
                    unstable = true;
                    break;
                }
                if h.is_control()
                    || h.last_offset() < checkpoint.0
                    || in_aborted_txn(&aborted_txns, &h)
                {
                    continue;
                }
                let records = records_of(&h, &batch)?.1;
                // Map a batch wholly or not at all: the clean end is a batch boundary.
                let fits = records.iter().filter(|r| r.key.is_some()).count()
                    <= map.capacity() - map.len();
                if !fits && !map.is_empty() {
                    full = true;
                    break;
                }
                for r in &records {
                    if let Some(k) = &r.key {
                        map.put(k, r.offset);
                    }
                }
                end = h.last_offset() + 1;
            }
            if full {
                out.map_full = true;
                break;
            }
            if unstable {
                break;
            }
            end = s.end;
            self.fs.yield_if_needed().await;
        }
        out.cleaned = true;
        let mut latest_horizon: Option<i64> = None;
        let to_clean: Vec<Span> = spans.iter().filter(|s| s.base < end).copied().collect();
        // One walk over the whole cleaned range, carried across groups: whether each
        // marker's transaction still has data below it.
        let mut txns = TxnTracker::default();
        for group in group_by_size(&to_clean, &self.cfg()) {
            // DeleteRecords or retention may have removed a member meanwhile.
            let Some(cleaned) =
                self.clean_group(&group, &map, &mut txns, now_ms, opts, &mut out).await?
            else {
                if (opts.abort)() {
                    return Ok(aborted(out));
                }
                // The walk missed that group's batches (or some of them), so the tracker may
                // call a later marker's transaction empty while its data are still in the
                // log: end the pass here, uncheckpointed; the next pass walks it all again.
                tracing::info!(dir = %self.dir.display(), "cleaner pass ended early: a segment changed under it");
                return Ok(CleanOutcome { cleaned: false, ..out });
            };
            latest_horizon = latest_horizon.max(cleaned.latest_horizon_ms);
            let new_size: u64 = cleaned.batches.iter().map(|b| b.len() as u64).sum();
            out.bytes_before += group.iter().map(|s| s.size_bytes).sum::<u64>();
            out.bytes_after += new_size;
            if !cleaned.changed && group.len() == 1 {
                continue;
            }
            self.pace(opts, new_size, &mut out).await;
            if (opts.abort)() {
                return Ok(aborted(out));
            }
            if let Some(last) = cleaned.last_removed_marker {
                self.forget_removed_markers(&cleaned.removed_aborts, last).await?;
            }
            if self.swap_in(&group, &cleaned.batches, opts.stop_after).await? {
                out.segments_rewritten += group.len() as u64;
                out.markers_removed += cleaned.markers_removed;
            }
            if opts.stop_after.is_some() {
                return Ok(out);
            }
            self.fs.yield_if_needed().await;
        }
        out.clean_end = Offset(end);
        checkpoint::write(&*self.fs, &self.dir, CLEANER_CHECKPOINT_FILE, out.clean_end).await?;
        {
            let mut st = self.st.borrow_mut();
            st.cleaner_checkpoint = out.clean_end;
            st.latest_delete_horizon_ms = latest_horizon;
        }
        // Cached batches may hold records the cleaner removed.
        self.invalidate_cached_from(i64::MIN);
        Ok(out)
    }

    /// Accounts `bytes` of cleaner I/O and sleeps as long as the throttle says, in short
    /// steps so an abort (shutdown) is noticed within `THROTTLE_ABORT_CHECK_MS`.
    async fn pace(&self, opts: &CleanOptions<'_>, bytes: u64, out: &mut CleanOutcome) {
        out.io_bytes += bytes;
        let Some(mut pause) = opts.throttle.record(bytes, Instant::now()) else { return };
        let step = Duration::from_millis(THROTTLE_ABORT_CHECK_MS);
        while !pause.is_zero() && !(opts.abort)() {
            let nap = pause.min(step);
            self.fs.sleep(nap).await;
            pause -= nap;
        }
    }

    /// The next whole batch of the segment `reader` walks (`None` at its end or if the
    /// segment left the log).
    async fn next_batch(
        &self,
        reader: &mut SegmentReader,
        opts: &CleanOptions<'_>,
        out: &mut CleanOutcome,
    ) -> Result<Option<Bytes>, StorageError> {
        loop {
            if let ScanStep::Batch(h) = scan_batch(&reader.buf) {
                return Ok(Some(reader.buf.split_to(h.total_size()).freeze()));
            }
            if reader.pos >= reader.span.size_bytes {
                if reader.buf.is_empty() {
                    return Ok(None);
                }
                let reason = match scan_batch(&reader.buf) {
                    ScanStep::Invalid(r) => r,
                    _ => "cleaner: truncated batch at the end of a sealed segment".into(),
                };
                return Err(StorageError::Corrupt {
                    path: self.seg_path(reader.span.base),
                    position: reader.pos - reader.buf.len() as u64,
                    reason,
                });
            }
            // Leased per chunk from the shard's open-file cache.
            let Some(file) = self.segment_file(reader.span.base).await? else { return Ok(None) };
            let want = (reader.span.size_bytes - reader.pos).min(CLEANER_READ_CHUNK_BYTES as u64);
            let path = self.seg_path(reader.span.base);
            let chunk = file
                .read_at(reader.pos, want as usize)
                .await
                .map_err(StorageError::io("read", &path, reader.pos))?;
            if chunk.is_empty() {
                return Err(StorageError::Corrupt {
                    path,
                    position: reader.pos,
                    reason: "cleaner: sealed segment shorter than its recorded size".into(),
                });
            }
            reader.pos += chunk.len() as u64;
            reader.buf.extend_from_slice(&chunk);
            self.pace(opts, chunk.len() as u64, out).await;
        }
    }

    /// The segments of `group` after cleaning, as one segment, read a chunk at a time so
    /// only the cleaned copy is held in memory (`None` if a member left the log or changed).
    async fn clean_group(
        &self,
        group: &[Span],
        map: &OffsetMap,
        txns: &mut TxnTracker,
        now_ms: i64,
        opts: &CleanOptions<'_>,
        out: &mut CleanOutcome,
    ) -> Result<Option<CleanedSegment>, StorageError> {
        let mut cleaned = {
            let st = self.st.borrow();
            CleanedSegment {
                producer_last_offsets: st.producers.last_offsets(),
                aborted: st.producers.aborted_txns().to_vec(),
                marker_only_epochs: st
                    .producers
                    .entries()
                    .into_iter()
                    .filter(|(_, e)| e.batches().is_empty())
                    .map(|(id, e)| (id, e.epoch))
                    .collect(),
                ..CleanedSegment::default()
            }
        };
        let retention_ms = self.cfg().delete_retention_ms;
        for span in group {
            let mut reader = SegmentReader::new(span);
            while let Some(b) = self.next_batch(&mut reader, opts, out).await? {
                self.fs.yield_if_needed().await;
                if (opts.abort)() {
                    return Ok(None);
                }
                cleaned.add(&b, map, txns, now_ms, retention_ms)?;
            }
        }
        cleaned.finish();
        Ok(self.group_unchanged(group).then_some(cleaned))
    }

    /// Every member of `group` is still in the log, sealed, with its size unchanged.
    fn group_unchanged(&self, group: &[Span]) -> bool {
        let st = self.st.borrow();
        group.iter().all(|span| {
            st.segments
                .get(&span.base)
                .is_some_and(|s| s.finalized && s.size_bytes == span.size_bytes)
        })
    }

    /// Writes the cleaned copy of the segments of `group` as one segment at the first one's
    /// base and swaps it in; false if a member changed or left the log meanwhile (the copy
    /// is then removed).
    async fn swap_in(
        self: &Rc<Self>,
        group: &[Span],
        batches: &[Bytes],
        stop_after: Option<SwapStep>,
    ) -> Result<bool, StorageError> {
        let first = group.first().ok_or_else(|| gone(-1))?;
        let base = Offset(first.base);
        let cleaned = |s: &str| suffixed(&self.dir, base, s, CLEANED_SUFFIX);
        let swapped = |s: &str| suffixed(&self.dir, base, s, SWAP_SUFFIX);
        let log_path = cleaned(LOG_SUFFIX);
        let body: Vec<u8> = batches.concat();
        let file = write_whole(&*self.fs, &log_path, &body).await?;
        let mut new = Segment::<F>::new(
            base,
            super::segment::segment_path(&self.dir, base, LOG_SUFFIX),
            file,
        );
        let interval = self.cfg().index_interval_bytes;
        let mut markers = Vec::new();
        for b in batches {
            let h = BatchHeader::parse(b)?;
            new.track_batch(&h, (h.max_timestamp, Offset(h.base_offset)), interval);
            if h.is_control() {
                markers.push(h.last_offset());
            }
        }
        new.seal_time_index();
        // The aborted transactions whose markers the cleaned segment kept (`.txnindex`).
        let kept =
            |a: &super::producer_state::AbortedTxn| markers.binary_search(&a.last_offset).is_ok();
        let txns: Vec<_> =
            self.st.borrow().producers.aborted_txns().iter().copied().filter(|a| kept(a)).collect();
        let indexes =
            [new.index.to_bytes(), new.time_index.to_bytes(), super::txn_index::encode(&txns)];
        for (suffix, data) in SWAP_ORDER.iter().zip(indexes.iter()) {
            let f = write_whole(&*self.fs, &cleaned(suffix), data).await?;
            f.close().await.map_err(StorageError::io("close", &cleaned(suffix), 0))?;
        }
        sync_dir(&*self.fs, &self.dir).await?;
        crate::crashpoint::hit("cleaner.cleaned_written");
        if stop_after == Some(SwapStep::CleanedWritten) {
            return Ok(false);
        }
        let _turn = self.append_lock.acquire().await;
        if !self.group_unchanged(group) {
            for suffix in SWAP_ORDER {
                let _ = self.fs.remove_file(&cleaned(suffix)).await;
            }
            return Ok(false);
        }
        for suffix in SWAP_ORDER {
            rename(&*self.fs, &cleaned(suffix), &swapped(suffix)).await?;
        }
        sync_dir(&*self.fs, &self.dir).await?;
        crate::crashpoint::hit("cleaner.renamed_to_swap");
        if stop_after == Some(SwapStep::RenamedToSwap) {
            return Ok(false);
        }
        // Retention or DeleteRecords (which do not take the append lock) may have deleted
        // the group during the renames: un-commit the swap (its `.log.swap` first).
        if !self.group_unchanged(group) {
            for suffix in SWAP_ORDER.iter().rev() {
                let _ = self.fs.remove_file(&swapped(suffix)).await;
            }
            sync_dir(&*self.fs, &self.dir).await?;
            return Ok(false);
        }
        let old = {
            let mut st = self.st.borrow_mut();
            let mut old = Vec::with_capacity(group.len());
            for span in group {
                old.push(st.segments.remove(&span.base).ok_or_else(|| gone(span.base))?);
            }
            new.next_offset = old.last().map_or(new.next_offset, |s| s.next_offset);
            // Markers the cleaner dropped leave the aborted list with their index entries.
            st.producers.retain_aborted_in(first.base, new.next_offset.0, kept);
            new.written_bytes = new.size_bytes;
            new.queued_bytes = new.size_bytes;
            new.staged_end = new.next_offset;
            new.sealed = true;
            new.finalized = true;
            st.segments.insert(first.base, new);
            old
        };
        self.schedule_deletion(old).await?;
        crate::crashpoint::hit("cleaner.old_renamed_to_deleted");
        if stop_after == Some(SwapStep::OldRenamedToDeleted) {
            return Ok(false);
        }
        for suffix in SWAP_ORDER {
            let fin = super::segment::segment_path(&self.dir, base, suffix);
            rename(&*self.fs, &swapped(suffix), &fin).await?;
        }
        sync_dir(&*self.fs, &self.dir).await?;
        // The file has its final name now: the new segment gives up its own handle, like any
        // finalized one (until here a read could not have reopened it by that name).
        let pinned = {
            let mut st = self.st.borrow_mut();
            let seg = st.segments.get_mut(&first.base).filter(|s| s.finalized);
            seg.and_then(|s| s.pinned_file.take())
        };
        if let Some(file) = pinned {
            super::segment::release(file).await;
        }
        crate::crashpoint::hit("cleaner.swap_finished");
        Ok(true)
    }
}

/// Splits the segments to clean into runs that are cleaned into one segment each, as
/// Kafka's `groupSegmentsBySize`: consecutive segments whose sizes before cleaning sum to at
/// most `segment.bytes`, whose offset range fits the index's 32-bit relative offsets, and
/// whose index entries (estimated one per `index.interval.bytes`) fit `segment.index.bytes`.
/// Segments shrink when cleaned, so a later pass merges what an earlier one emptied.
fn group_by_size(spans: &[Span], cfg: &super::LogConfig) -> Vec<Vec<Span>> {
    let max_bytes = cfg.segment_bytes.min(i32::MAX as u64);
    let interval = u64::from(cfg.index_interval_bytes.max(1));
    let max_entries = u64::from(cfg.segment_index_bytes) / 8;
    let mut groups: Vec<Vec<Span>> = Vec::new();
    for s in spans {
        let fits = groups.last().is_some_and(|g| {
            let bytes: u64 = g.iter().map(|x| x.size_bytes).sum::<u64>() + s.size_bytes;
            let first = g[0].base;
            bytes <= max_bytes
                && s.end - 1 - first <= i64::from(u32::MAX)
                && bytes / interval < max_entries
        });
        match groups.last_mut() {
            Some(g) if fits => g.push(*s),
            _ => groups.push(vec![*s]),
        }
    }
    groups
}

/// The outcome of a pass abandoned before its next swap: nothing more changes, the
/// checkpoint stays where it was.
fn aborted(out: CleanOutcome) -> CleanOutcome {
    tracing::info!("cleaner pass abandoned (shutdown)");
    CleanOutcome { cleaned: false, ..out }
}

/// Walks one segment's batches a chunk at a time.
struct SegmentReader {
    span: Span,
    pos: u64,
    buf: BytesMut,
}

impl SegmentReader {
    fn new(span: &Span) -> Self {
        SegmentReader { span: *span, pos: 0, buf: BytesMut::new() }
    }
}

fn gone(base: i64) -> StorageError {
    StorageError::corrupt_message(format!("cleaner: segment {base} left the log during a clean"))
}

/// A segment after cleaning, built batch by batch.
#[derive(Default)]
struct CleanedSegment {
    batches: Vec<Bytes>,
    /// Some batch was rewritten (records removed or a delete horizon set).
    changed: bool,
    /// The latest delete horizon of a kept batch that still holds tombstones.
    latest_horizon_ms: Option<i64>,
    /// The header-only form of the latest batch that kept no record: written only if it
    /// turns out to be the segment's last batch (it then marks where the segment ends).
    pending_empty: Option<Bytes>,
    /// Producer id → last offset of its last batch: that batch is kept even when emptied
    /// (header only), as Kafka's cleaner keeps each live producer's last batch, so replaying
    /// the log finds the producer's sequence.
    producer_last_offsets: std::collections::HashMap<i64, i64>,
    /// The log's aborted transactions: their data batches lose every record (Kafka's
    /// cleaner removes aborted data; their markers go later, see [`txn`]).
    aborted: Vec<AbortedTxn>,
    /// Producer id → epoch of producers whose state holds no data batch (known from markers
    /// alone): their markers of that epoch stay, as Kafka keeps a producer's last marker,
    /// so replaying the log still fences older epochs.
    marker_only_epochs: std::collections::HashMap<i64, i16>,
    /// Offsets of the ABORT markers removed, ascending (their aborted-transaction entries go
    /// too).
    removed_aborts: Vec<i64>,
    /// The offset of the last marker removed.
    last_removed_marker: Option<i64>,
    markers_removed: u64,
}

/// Whether data batch `h` belongs to one of the `aborted` transactions.
fn in_aborted_txn(aborted: &[AbortedTxn], h: &BatchHeader) -> bool {
    h.is_transactional()
        && !h.is_control()
        && aborted.iter().any(|a| {
            a.producer_id == h.producer_id
                && a.first_offset <= h.base_offset
                && h.last_offset() < a.last_offset
        })
}

impl CleanedSegment {
    /// Adds batch `b` cleaned at `now_ms`, as Kafka's `LogCleaner.shouldRetainRecord` and
    /// `MemoryRecords.filterTo` decide (see the module docs for what is kept).
    fn add(
        &mut self,
        b: &Bytes,
        map: &OffsetMap,
        txns: &mut TxnTracker,
        now_ms: i64,
        delete_retention_ms: i64,
    ) -> Result<(), StorageError> {
        let h = BatchHeader::parse(b)?;
        if self.pending_empty.take().is_some() {
            // Not the segment's last batch after all: it goes.
            self.changed = true;
        }
        if h.is_control() {
            return self.add_control(b, &h, txns, now_ms, delete_retention_ms);
        }
        txns.on_data(&h);
        let horizon = h.delete_horizon_ms();
        let (set, records) = records_of(&h, b)?;
        let aborted = in_aborted_txn(&self.aborted, &h);
        let keep: Vec<&CleanRecord> = records
            .iter()
            .filter(|_| !aborted)
            .filter(|r| match &r.key {
                None => true,
                Some(k) => {
                    map.get(k).is_none_or(|latest| r.offset >= latest)
                        && (!r.tombstone || horizon.is_none_or(|hz| now_ms < hz))
                }
            })
            .collect();
        let has_tombstones = keep.iter().any(|r| r.tombstone);
        let new_horizon = (has_tombstones && horizon.is_none())
            .then(|| now_ms.saturating_add(delete_retention_ms.max(0)));
        if has_tombstones {
            self.latest_horizon_ms = self.latest_horizon_ms.max(new_horizon.or(horizon));
        }
        if keep.len() == records.len() && new_horizon.is_none() {
            self.batches.push(b.clone());
            return Ok(());
        }
        self.changed = true;
        let rebuilt = rebuild(&h, b, &set, &keep, new_horizon)?;
        let producer_last = h.producer_id >= 0
            && self.producer_last_offsets.get(&h.producer_id) == Some(&h.last_offset());
        if keep.is_empty() && !producer_last {
            self.pending_empty = Some(rebuilt);
        } else {
            self.batches.push(rebuilt);
        }
        Ok(())
    }

    /// Adds control batch `b` (a marker): kept while its transaction has data in the log;
    /// once it has none, the first clean sets a KIP-534 delete horizon on it (now +
    /// `delete.retention.ms`, so consumers reading within that time still see it), and the
    /// first clean after the horizon removes it. A producer's marker that fences its current
    /// epoch (no data batch of the producer is left) stays.
    fn add_control(
        &mut self,
        b: &Bytes,
        h: &BatchHeader,
        txns: &mut TxnTracker,
        now_ms: i64,
        delete_retention_ms: i64,
    ) -> Result<(), StorageError> {
        let empty_txn = txns.on_control(h);
        if h.records_count == 0 {
            // A marker removed by an earlier clean, kept as its segment's last batch.
            self.pending_empty = Some(b.clone());
            return Ok(());
        }
        let fences_epoch = self.marker_only_epochs.get(&h.producer_id) == Some(&h.producer_epoch);
        // Only COMMIT and ABORT markers go (any other control record stays).
        let commit = control_batch_commit(b);
        if !empty_txn || fences_epoch || commit.is_none() {
            self.batches.push(b.clone());
            return Ok(());
        }
        let (set, records) = records_of(h, b)?;
        match h.delete_horizon_ms() {
            Some(horizon) if now_ms >= horizon => {
                self.changed = true;
                self.markers_removed += 1;
                self.last_removed_marker = Some(h.last_offset());
                if commit == Some(false) {
                    self.removed_aborts.push(h.last_offset());
                }
                // Header only, written only if it is the segment's last batch.
                self.pending_empty = Some(rebuild(h, b, &set, &[], None)?);
            }
            Some(horizon) => {
                self.latest_horizon_ms = self.latest_horizon_ms.max(Some(horizon));
                self.batches.push(b.clone());
            }
            None => {
                let horizon = now_ms.saturating_add(delete_retention_ms.max(0));
                let all: Vec<&CleanRecord> = records.iter().collect();
                self.latest_horizon_ms = self.latest_horizon_ms.max(Some(horizon));
                self.changed = true;
                self.batches.push(rebuild(h, b, &set, &all, Some(horizon))?);
            }
        }
        Ok(())
    }

    /// Ends the segment: an emptied last batch stays, as a header-only batch.
    fn finish(&mut self) {
        if let Some(last) = self.pending_empty.take() {
            self.batches.push(last);
        }
    }
}
