//! Retention: deletes whole sealed segments that are older than `retention.ms` (by their
//! largest timestamp), beyond `retention.bytes`, or wholly below the log start offset, as
//! Kafka's `UnifiedLog.deleteOldSegments` does; rolls the active segment first when it alone
//! is past `retention.ms`.
//!
//! Runs on the partition's owner shard, from the shard's low-priority background queue.
//! Deletion is crash-safe: the new log start is checkpointed first, then the segment leaves
//! the in-memory map (new reads cannot find it; reads already holding its file complete),
//! then its `.log` and indexes are renamed with the `.deleted` suffix (the `.log` first, so a
//! crash leaves at worst orphan indexes, which recovery removes with any `.deleted` file),
//! and the files are removed `file.delete.delay.ms` later. Only segments wholly below the
//! committed offset are deleted.

use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use super::checkpoint::{self, LOG_START_FILE};
use super::error::StorageError;
use super::log::LogInner;
use super::segment::{
    segment_path, Segment, INDEX_SUFFIX, LOG_SUFFIX, SNAPSHOT_SUFFIX, TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
};
use crate::io::{DataFile, FileSystem};
use crate::types::Offset;

/// The suffix Kafka gives files awaiting asynchronous deletion.
pub const DELETED_SUFFIX: &str = ".deleted";

/// What one retention pass removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionOutcome {
    pub segments_deleted: u64,
    pub bytes_deleted: u64,
    /// The log start offset after the pass.
    pub log_start: Offset,
}

/// Why a prefix of segments goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reason {
    Time,
    Size,
    LogStart,
}

impl<F: FileSystem> LogInner<F> {
    /// One retention pass at wall-clock `now_ms`. See the module docs.
    pub async fn enforce_retention(
        self: &Rc<Self>,
        now_ms: i64,
    ) -> Result<RetentionOutcome, StorageError> {
        self.check_writable()?;
        self.expire_producers(now_ms);
        if self.active_past_retention(now_ms) {
            // Kafka rolls an active segment that alone is past retention, so it can go.
            self.roll_for_retention().await?;
            self.drain(false, false).await?;
        }
        let mut outcome = RetentionOutcome::default();
        for reason in [Reason::LogStart, Reason::Time, Reason::Size] {
            let doomed = self.deletable_prefix(reason, now_ms);
            if doomed.is_empty() {
                continue;
            }
            let (segments, bytes) = self.delete_prefix(&doomed, reason).await?;
            outcome.segments_deleted += segments;
            outcome.bytes_deleted += bytes;
        }
        outcome.log_start = self.st.borrow().log_start;
        Ok(outcome)
    }

    fn active_past_retention(&self, now_ms: i64) -> bool {
        let c = self.cfg();
        if !c.delete_retention_enabled || c.retention_ms < 0 {
            return false;
        }
        let st = self.st.borrow();
        let seg = st.active();
        seg.size_bytes > 0
            && seg.max_timestamp_ms >= 0
            && now_ms.saturating_sub(seg.max_timestamp_ms) > c.retention_ms
    }

    async fn roll_for_retention(self: &Rc<Self>) -> Result<(), StorageError> {
        let _turn = self.append_lock.acquire().await;
        self.check_writable()?;
        if self.st.borrow().active().size_bytes == 0 {
            return Ok(());
        }
        self.roll().await
    }

    /// Bases of the leading segments `reason` deletes: only finalized (sealed, fully written
    /// and, for EveryBatch, synced) segments wholly below the committed offset.
    fn deletable_prefix(&self, reason: Reason, now_ms: i64) -> Vec<i64> {
        let c = self.cfg();
        if reason != Reason::LogStart && !c.delete_retention_enabled {
            return Vec::new();
        }
        let committed = self.committed();
        let st = self.st.borrow();
        let total_bytes: u64 = st.segments.values().map(|s| s.size_bytes).sum();
        let mut excess_bytes = if c.retention_bytes >= 0 {
            i128::from(total_bytes) - i128::from(c.retention_bytes)
        } else {
            0
        };
        let bases: Vec<i64> = st.segments.keys().copied().collect();
        let mut out = Vec::new();
        for w in bases.windows(2) {
            let seg = &st.segments[&w[0]];
            if !seg.finalized || w[1] > committed.0 {
                break;
            }
            let goes = match reason {
                Reason::LogStart => w[1] <= st.log_start.0,
                Reason::Time => {
                    c.retention_ms >= 0
                        && seg.max_timestamp_ms >= 0
                        && now_ms.saturating_sub(seg.max_timestamp_ms) > c.retention_ms
                }
                Reason::Size => {
                    c.retention_bytes >= 0 && excess_bytes - i128::from(seg.size_bytes) >= 0
                }
            };
            if !goes {
                break;
            }
            excess_bytes -= i128::from(seg.size_bytes);
            out.push(w[0]);
        }
        out
    }

    /// Deletes the segments at `bases` (a prefix of the log) the crash-safe way.
    async fn delete_prefix(
        self: &Rc<Self>,
        bases: &[i64],
        reason: Reason,
    ) -> Result<(u64, u64), StorageError> {
        let new_start = {
            let st = self.st.borrow();
            let last = bases.last().copied().unwrap_or(i64::MIN);
            let next = st.segments.range(last + 1..).next().map_or(st.log_end, |(b, _)| Offset(*b));
            next.max(st.log_start)
        };
        if new_start > self.st.borrow().log_start {
            checkpoint::write(&*self.fs, &self.dir, LOG_START_FILE, new_start).await?;
            crate::crashpoint::hit("retention.log_start_written");
        }
        let doomed: Vec<Segment<F>> = {
            let mut st = self.st.borrow_mut();
            st.log_start = st.log_start.max(new_start);
            let out: Vec<Segment<F>> = bases.iter().filter_map(|b| st.segments.remove(b)).collect();
            st.max_timestamp = st
                .segments
                .values()
                .filter(|s| s.max_timestamp_ms >= 0)
                .map(|s| (s.max_timestamp_ms, s.offset_of_max_timestamp))
                .max_by_key(|(t, _)| *t);
            out
        };
        let bytes: u64 = doomed.iter().map(|s| s.size_bytes).sum();
        let count = doomed.len() as u64;
        self.schedule_deletion(doomed).await?;
        tracing::info!(
            dir = %self.dir.display(),
            ?reason,
            segments = count,
            bytes,
            log_start = new_start.0,
            "retention deleted segments"
        );
        Ok((count, bytes))
    }

    /// Renames each segment's files with `.deleted` (`.log` first), syncs the directory, and
    /// removes them after `file.delete.delay.ms` in the background.
    pub async fn schedule_deletion(&self, doomed: Vec<Segment<F>>) -> Result<(), StorageError> {
        if doomed.is_empty() {
            return Ok(());
        }
        let mut renamed = Vec::new();
        for seg in doomed {
            // The segment's producer snapshot goes with it (the latest snapshot is at or
            // above the active segment's base, which is never deleted).
            for suffix in
                [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX]
            {
                let from = segment_path(&self.dir, seg.base, suffix);
                let to = deleted_path(&from);
                match self.fs.rename(&from, &to).await {
                    Ok(()) => {
                        renamed.push(to);
                        if suffix == LOG_SUFFIX {
                            crate::crashpoint::hit("retention.log_renamed");
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(StorageError::io("rename", &from, 0)(e)),
                }
            }
            let fs = self.fs.clone();
            let delay = Duration::from_millis(self.cfg().file_delete_delay_ms);
            let paths = std::mem::take(&mut renamed);
            // A cached (unpinned) file leaves the shard's cache as the segment drops; reads
            // holding it keep it open until they finish.
            let file = seg.pinned_file.clone();
            drop(seg);
            self.fs.spawn(Box::pin(async move {
                fs.sleep(delay).await;
                // Reads that picked the file before the rename have had `delay` to finish.
                if let Some(file) = file {
                    let _ = file.close().await;
                }
                for p in paths {
                    if let Err(e) = fs.remove_file(&p).await {
                        tracing::warn!(file = %p.display(), error = %e, "removing deleted segment");
                    }
                }
            }));
        }
        self.fs.sync_dir(&self.dir).await.map_err(StorageError::io("sync dir", &self.dir, 0))?;
        crate::crashpoint::hit("retention.all_renamed");
        Ok(())
    }
}

/// `<path>.deleted`.
#[must_use]
pub fn deleted_path(path: &std::path::Path) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(DELETED_SUFFIX);
    PathBuf::from(s)
}

/// Whether recovery removes `name`: a `.deleted` leftover, or an index whose `.log` is gone
/// (a crash between the renames of one segment).
#[must_use]
pub fn is_leftover(name: &str, names: &[String]) -> bool {
    if name.ends_with(DELETED_SUFFIX) {
        return true;
    }
    for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX] {
        if let Some(stem) = name.strip_suffix(suffix) {
            let log = format!("{stem}{LOG_SUFFIX}");
            return stem.len() == 20 && !names.contains(&log);
        }
    }
    false
}
