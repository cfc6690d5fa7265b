//! Log compaction for `cleanup.policy=compact` (and `compact,delete`): keeps only the latest
//! record per key in the sealed segments, as Kafka's `LogCleaner` does.
//!
//! Runs on the log's owner shard, from the shard's background maintenance loop. A pass:
//! the cleanable range is the prefix of finalized sealed segments wholly below the committed
//! offset and the recovery point, stopping at the first segment holding a record newer than
//! `min.compaction.lag.ms`; if its dirty ratio (bytes above the cleaner checkpoint / cleanable
//! bytes) reaches `min.cleanable.dirty.ratio`, a key → latest offset map is built over it and
//! every segment is rewritten keeping, per key, only its latest record (tombstones only while
//! their batch's max timestamp is within `delete.retention.ms`), then swapped in crash-safely
//! (see [`swap`]). Invariants: offsets never change (gaps appear); keyless records and
//! control batches are kept; the last batch of a segment is kept (maybe empty) so the
//! segment's offset range, and thus recovery's end-of-segment check, is unchanged; a segment
//! is swapped only under the append lock and only if it is still in the log unchanged.

mod filter;
pub mod swap;

use std::collections::HashMap;
use std::rc::Rc;

use bytes::Bytes;

use self::swap::SWAP_SUFFIX;
use self::swap::{rename, suffixed, sync_dir, write_whole, SwapStep, CLEANED_SUFFIX, SWAP_ORDER};
use super::batch::{scan_batch, ScanStep};
use super::error::StorageError;
use super::log::LogInner;
use super::segment::{Segment, LOG_SUFFIX};
use crate::io::{DataFile, FileSystem};
use crate::types::Offset;

pub use filter::{rebuild, records_of, CleanRecord};

/// What one cleaner pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CleanOutcome {
    /// Whether the log was dirty enough to be cleaned.
    pub cleaned: bool,
    pub dirty_ratio: f64,
    pub segments_rewritten: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// One sealed segment's batches, read whole.
struct SegData {
    base: i64,
    size_bytes: u64,
    batches: Vec<Bytes>,
}

impl<F: FileSystem> LogInner<F> {
    /// Bases and sizes of the cleanable segments (see the module docs).
    fn cleanable(&self, now_ms: i64) -> Vec<(i64, u64)> {
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
            out.push((w[0], seg.size_bytes));
        }
        out
    }

    /// One cleaner pass at wall-clock `now_ms`; `stop_after` stops it after a swap step (for
    /// crash tests: the caller then simulates the crash).
    pub async fn clean(
        self: &Rc<Self>,
        now_ms: i64,
        stop_after: Option<SwapStep>,
    ) -> Result<CleanOutcome, StorageError> {
        self.check_writable()?;
        if !self.cfg().compacted {
            return Ok(CleanOutcome::default());
        }
        let segs = self.cleanable(now_ms);
        let total: u64 = segs.iter().map(|(_, s)| s).sum();
        let checkpoint = self.st.borrow().cleaner_checkpoint;
        let dirty: u64 = segs.iter().filter(|(b, _)| *b >= checkpoint.0).map(|(_, s)| s).sum();
        let ratio = if total == 0 { 0.0 } else { dirty as f64 / total as f64 };
        let mut out = CleanOutcome { dirty_ratio: ratio, ..CleanOutcome::default() };
        if total == 0 || dirty == 0 || ratio < self.cfg().min_cleanable_dirty_ratio {
            return Ok(out);
        }
        // Two passes, one segment in memory at a time: the key map, then the rewrite.
        let mut latest = HashMap::new();
        for (base, size) in &segs {
            if let Some(seg) = self.read_segment(*base, *size).await? {
                add_latest_offsets(&seg, &mut latest)?;
            }
            glommio_yield().await;
        }
        let horizon_ms = now_ms.saturating_sub(self.cfg().delete_retention_ms);
        out.cleaned = true;
        let end = segs.last().map_or(checkpoint.0, |(b, _)| *b);
        for (base, size) in &segs {
            // DeleteRecords may have removed it meanwhile.
            let Some(seg) = self.read_segment(*base, *size).await? else { continue };
            let new = clean_segment(&seg, &latest, horizon_ms)?;
            let new_size: u64 = new.iter().map(|b| b.len() as u64).sum();
            out.bytes_before += seg.size_bytes;
            out.bytes_after += new_size;
            if new_size == seg.size_bytes {
                continue;
            }
            if self.swap_in(&seg, &new, stop_after).await? {
                out.segments_rewritten += 1;
            }
            if stop_after.is_some() {
                return Ok(out);
            }
            glommio_yield().await;
        }
        // Everything below the last cleaned segment's end is now clean.
        let next = self.st.borrow().segments.range(end + 1..).next().map(|(b, _)| *b);
        self.st.borrow_mut().cleaner_checkpoint = Offset(next.unwrap_or(end));
        // Cached batches may hold records the cleaner removed.
        self.cache.invalidate_from(self.log_id, i64::MIN);
        tracing::info!(
            dir = %self.dir.display(),
            dirty_ratio = ratio,
            bytes_before = out.bytes_before,
            bytes_after = out.bytes_after,
            segments = out.segments_rewritten,
            "cleaner run"
        );
        Ok(out)
    }

    /// The batches of the segment at `base` (`None` if it left the log).
    async fn read_segment(&self, base: i64, size: u64) -> Result<Option<SegData>, StorageError> {
        let (file, path) = {
            let st = self.st.borrow();
            let Some(seg) = st.segments.get(&base) else { return Ok(None) };
            (seg.file.clone(), seg.path.clone())
        };
        let len = usize::try_from(size).map_err(|_| gone(base))?;
        let bytes = file.read_at(0, len).await.map_err(StorageError::io("read", &path, 0))?;
        let mut batches = Vec::new();
        let mut at = 0usize;
        while at < bytes.len() {
            match scan_batch(&bytes[at..]) {
                ScanStep::Batch(h) => {
                    batches.push(bytes.slice(at..at + h.total_size()));
                    at += h.total_size();
                }
                ScanStep::Incomplete | ScanStep::Invalid(_) => {
                    return Err(StorageError::Corrupt {
                        path,
                        position: at as u64,
                        reason: "cleaner: invalid batch in a sealed segment".into(),
                    });
                }
            }
        }
        Ok(Some(SegData { base, size_bytes: size, batches }))
    }

    /// Writes the cleaned copy of `seg` and swaps it in; false if the segment changed or left
    /// the log meanwhile (the copy is then removed).
    async fn swap_in(
        self: &Rc<Self>,
        seg: &SegData,
        batches: &[Bytes],
        stop_after: Option<SwapStep>,
    ) -> Result<bool, StorageError> {
        let base = Offset(seg.base);
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
        for b in batches {
            let h = super::batch::BatchHeader::parse(b)?;
            new.track_batch(&h, (h.max_timestamp, Offset(h.base_offset)), interval);
        }
        new.seal_time_index();
        let indexes = [new.index.to_bytes(), new.time_index.to_bytes()];
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
        let unchanged = self
            .st
            .borrow()
            .segments
            .get(&seg.base)
            .is_some_and(|s| s.finalized && s.size_bytes == seg.size_bytes);
        if !unchanged {
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
        let old = {
            let mut st = self.st.borrow_mut();
            let old = st.segments.remove(&seg.base).ok_or_else(|| gone(seg.base))?;
            new.next_offset = old.next_offset;
            new.written_bytes = new.size_bytes;
            new.queued_bytes = new.size_bytes;
            new.staged_end = new.next_offset;
            new.sealed = true;
            new.finalized = true;
            st.segments.insert(seg.base, new);
            old
        };
        self.schedule_deletion(vec![old]).await?;
        crate::crashpoint::hit("cleaner.old_renamed_to_deleted");
        if stop_after == Some(SwapStep::OldRenamedToDeleted) {
            return Ok(false);
        }
        for suffix in SWAP_ORDER {
            let fin = super::segment::segment_path(&self.dir, base, suffix);
            rename(&*self.fs, &swapped(suffix), &fin).await?;
        }
        sync_dir(&*self.fs, &self.dir).await?;
        crate::crashpoint::hit("cleaner.swap_finished");
        Ok(true)
    }
}

fn gone(base: i64) -> StorageError {
    StorageError::corrupt_message(format!("cleaner: segment {base} left the log during a clean"))
}

async fn glommio_yield() {
    futures_lite::future::yield_now().await;
}

/// Records in `latest` the offset of each key's latest record in `seg` (segments in order).
fn add_latest_offsets(
    seg: &SegData,
    latest: &mut HashMap<Vec<u8>, i64>,
) -> Result<(), StorageError> {
    for b in &seg.batches {
        let h = super::batch::BatchHeader::parse(b)?;
        if h.is_control() {
            continue;
        }
        for r in records_of(&h, b)?.1 {
            if let Some(k) = r.key {
                latest.insert(k, r.offset);
            }
        }
    }
    Ok(())
}

/// The batches of `seg` after cleaning (see the module docs for what is kept).
fn clean_segment(
    seg: &SegData,
    latest: &HashMap<Vec<u8>, i64>,
    horizon_ms: i64,
) -> Result<Vec<Bytes>, StorageError> {
    let mut out = Vec::with_capacity(seg.batches.len());
    let last_index = seg.batches.len().saturating_sub(1);
    for (i, b) in seg.batches.iter().enumerate() {
        let h = super::batch::BatchHeader::parse(b)?;
        if h.is_control() {
            out.push(b.clone());
            continue;
        }
        let (set, records) = records_of(&h, b)?;
        let keep: Vec<_> = records
            .iter()
            .filter(|r| match &r.key {
                None => true,
                Some(k) => {
                    latest.get(k) == Some(&r.offset)
                        && (!r.tombstone || h.max_timestamp > horizon_ms)
                }
            })
            .map(|r| r.raw.clone())
            .collect();
        if keep.len() == records.len() {
            out.push(b.clone());
        } else if !keep.is_empty() || i == last_index {
            out.push(rebuild(&h, b, &set, &keep)?);
        }
    }
    Ok(out)
}
