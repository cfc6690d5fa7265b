//! Truncation (`truncate_to`, for replication) and clean shutdown (`close`).
//!
//! Runs on the partition's owner shard, holding the append lock so no append interleaves.
//! Truncation order, so a crash at any step leaves a valid (possibly longer) log that the
//! caller truncates again: lower the recovery point to the affected segment (so recovery
//! rescans it), truncate the leader-epoch checkpoint, delete later segments, then ftruncate
//! the segment holding the new end.

use std::rc::Rc;

use super::checkpoint::{self, CLEAN_SHUTDOWN_FILE, LOG_START_FILE, RECOVERY_POINT_FILE};
use super::error::StorageError;
use super::log::LogInner;
use super::segment::{scan_file, Segment};
use crate::io::{align_down, DataFile, FileSystem};
use crate::types::Offset;

/// A segment that left the log while an operation holding the append lock needed it.
fn segment_gone(path: &std::path::Path) -> StorageError {
    StorageError::io("open", path, 0)(std::io::Error::new(
        std::io::ErrorKind::NotFound,
        "segment left the log",
    ))
}

impl<F: FileSystem> LogInner<F> {
    pub async fn truncate_to(self: &Rc<Self>, offset: Offset) -> Result<(), StorageError> {
        let _turn = self.append_lock.acquire().await;
        self.check_writable()?;
        self.drain(false, true).await?;
        let (start, end, first_base) = {
            let st = self.st.borrow();
            let first = st.segments.keys().next().copied().unwrap_or(0);
            (st.log_start, st.log_end, first)
        };
        if offset >= end {
            // Nothing to cut, but the leader-epoch cache may still end with an epoch this
            // replica started as leader and wrote nothing in; a follower that kept it would
            // name it as its last fetched epoch forever (Kafka's `truncateTo` drops such
            // entries in this case too).
            #[cfg(test)]
            if crate::planted::is(crate::planted::Bug::EmptyEpochKept) {
                return Ok(());
            }
            if self.st.borrow_mut().epochs.truncate_from_end(end) {
                self.write_epochs().await?;
            }
            return Ok(());
        }
        // Kafka logs every truncation at INFO: it is how a lost tail is traced afterwards.
        tracing::info!(dir = %self.dir.display(), from = end.0, to = offset.0, "truncating the log");
        if offset.0 <= first_base || offset < start {
            return self.truncate_fully(offset).await;
        }
        let seg_base = *self
            .st
            .borrow()
            .segments
            .range(..=offset.0)
            .next_back()
            .map(|(b, _)| b)
            .unwrap_or(&first_base);
        let (pos, new_end) = self.locate_batch(seg_base, offset).await?;
        self.lower_recovery_point(Offset(seg_base)).await?;
        if self.st.borrow_mut().epochs.truncate_from_end(new_end) {
            self.write_epochs().await?;
        }
        let doomed: Vec<Segment<F>> = {
            let mut st = self.st.borrow_mut();
            let later: Vec<i64> = st.segments.range(seg_base + 1..).map(|(b, _)| *b).collect();
            later.into_iter().rev().filter_map(|b| st.segments.remove(&b)).collect()
        };
        self.delete_segments(doomed).await?;
        self.shrink_segment(seg_base, pos, new_end).await?;
        self.invalidate_cached_from(new_end.0);
        // Kafka's `loadProducerState(targetOffset)`: the latest snapshot at or below the new
        // end (later ones are deleted), then the batches above it.
        self.load_producer_state(new_end).await?;
        // The batch holding `offset` may start below the log start (Kafka: the log start
        // never exceeds the log end).
        if new_end < start {
            checkpoint::write(&*self.fs, &self.dir, LOG_START_FILE, new_end).await?;
            self.st.borrow_mut().log_start = new_end;
        }
        Ok(())
    }

    /// Position and base offset of the first batch of segment `seg_base` whose last offset is
    /// >= `offset`.
    async fn locate_batch(
        &self,
        seg_base: i64,
        offset: Offset,
    ) -> Result<(u64, Offset), StorageError> {
        let (start, size) = {
            let st = self.st.borrow();
            let seg = &st.segments[&seg_base];
            (u64::from(seg.index.lookup(seg.relative(offset))), seg.written_bytes)
        };
        let path = self.seg_path(seg_base);
        let file = self.segment_file(seg_base).await?.ok_or_else(|| segment_gone(&path))?;
        let scan = scan_file(&*file, &path, start, size, i64::MIN).await?;
        scan.batches
            .iter()
            .find(|(_, h)| h.last_offset() >= offset.0)
            .map(|(pos, h)| (*pos, Offset(h.base_offset)))
            .ok_or_else(|| StorageError::Corrupt {
                path,
                position: start + scan.valid_bytes,
                reason: format!("no batch holds offset {offset}"),
            })
    }

    async fn shrink_segment(
        &self,
        seg_base: i64,
        pos: u64,
        new_end: Offset,
    ) -> Result<(), StorageError> {
        let path = self.seg_path(seg_base);
        let file = self.segment_file(seg_base).await?.ok_or_else(|| segment_gone(&path))?;
        {
            // The segment becomes the active one again: it keeps its own file (the writer's),
            // out of the open-file cache.
            let mut st = self.st.borrow_mut();
            let seg = st.segments.get_mut(&seg_base).ok_or_else(|| segment_gone(&path))?;
            seg.pinned_file = Some(file.clone());
            seg.slot = None;
        }
        file.truncate(pos).await.map_err(StorageError::io("truncate", &path, pos))?;
        file.sync().await.map_err(StorageError::io("fsync", &path, pos))?;
        let aligned = align_down(pos);
        let prefix = file
            .read_at(aligned, (pos - aligned) as usize)
            .await
            .map_err(StorageError::io("read", &path, aligned))?;
        // The time index only covers up to its last entry; rescan the batches after the last
        // surviving offset-index entry for the segment's max timestamp.
        let tail_start = {
            let st = self.st.borrow();
            let idx = &st.segments[&seg_base].index;
            idx.entries.iter().rev().map(|(_, p)| u64::from(*p)).find(|p| *p < pos).unwrap_or(0)
        };
        let tail = scan_file(&*file, &path, tail_start, pos, i64::MIN).await?;
        let mut st = self.st.borrow_mut();
        let seg = st.segments.get_mut(&seg_base).expect("segment being truncated");
        seg.size_bytes = pos;
        seg.written_bytes = pos;
        seg.queued_bytes = pos;
        seg.page_prefix = prefix.to_vec();
        seg.next_offset = new_end;
        seg.staged_end = new_end;
        seg.index.truncate_to_position(u32::try_from(pos).unwrap_or(u32::MAX));
        let rel = seg.relative(new_end);
        seg.time_index.truncate_to_offset(rel);
        let (ts, off) = seg.time_index.entries.last().copied().unwrap_or((-1, 0));
        seg.max_timestamp_ms = ts;
        seg.offset_of_max_timestamp =
            if ts < 0 { Offset(-1) } else { Offset(seg_base + i64::from(off)) };
        for (_, h) in &tail.batches {
            if h.max_timestamp > seg.max_timestamp_ms {
                seg.max_timestamp_ms = h.max_timestamp;
                seg.offset_of_max_timestamp = Offset(h.base_offset);
            }
        }
        seg.bytes_since_index = pos - seg.index.entries.last().map_or(0, |(_, p)| u64::from(*p));
        seg.sealed = false;
        seg.finalized = false;
        // The file now ends at `pos`: preallocation starts over from there.
        seg.prealloc_end = 0;
        st.log_end = new_end;
        st.written = new_end;
        st.durable = new_end;
        // Truncated offsets are no longer clean (fewer removals, never wrong ones).
        st.cleaner_checkpoint = st.cleaner_checkpoint.min(new_end);
        st.max_timestamp = st
            .segments
            .values()
            .filter(|s| s.max_timestamp_ms >= 0)
            .map(|s| (s.max_timestamp_ms, s.offset_of_max_timestamp))
            .max_by_key(|(t, _)| *t);
        Ok(())
    }

    /// Empties the log and restarts it at `offset` (Kafka's `truncateFullyAndStartAt`: a
    /// follower whose leader's log now starts past this log's end).
    pub async fn truncate_fully_and_start_at(
        self: &Rc<Self>,
        offset: Offset,
    ) -> Result<(), StorageError> {
        let _turn = self.append_lock.acquire().await;
        self.check_writable()?;
        self.drain(false, true).await?;
        self.truncate_fully(offset).await
    }

    async fn truncate_fully(self: &Rc<Self>, offset: Offset) -> Result<(), StorageError> {
        tracing::info!(dir = %self.dir.display(), start = offset.0, "emptying the log");
        self.lower_recovery_point(offset).await?;
        if self.st.borrow_mut().epochs.truncate_from_end(offset) {
            self.write_epochs().await?;
        }
        checkpoint::write(&*self.fs, &self.dir, LOG_START_FILE, offset).await?;
        self.reset_producers().await?;
        let doomed: Vec<Segment<F>> = {
            let mut st = self.st.borrow_mut();
            std::mem::take(&mut st.segments).into_values().rev().collect()
        };
        self.delete_segments(doomed).await?;
        let seg = self.create_segment(offset).await?;
        let mut st = self.st.borrow_mut();
        st.segments.insert(offset.0, seg);
        st.log_start = offset;
        st.log_end = offset;
        st.cleaner_checkpoint = st.cleaner_checkpoint.min(offset);
        st.written = offset;
        st.durable = offset;
        st.max_timestamp = None;
        drop(st);
        self.invalidate_cached_from(i64::MIN);
        Ok(())
    }

    pub async fn close(self: &Rc<Self>) -> Result<(), StorageError> {
        let _turn = self.append_lock.acquire().await;
        let drained = self.drain(true, true).await;
        let result = match drained {
            Ok(()) => self.finish_clean().await,
            Err(e) => Err(e),
        };
        let files: Vec<_> = {
            let mut st = self.st.borrow_mut();
            st.closed = true;
            crate::metrics::producers_tracked(-(st.producers.len() as i64));
            // Cached files of sealed segments leave the shard's cache now (closed once no
            // read holds them), not when the last handle of the log goes.
            for s in st.segments.values_mut() {
                s.slot = None;
            }
            st.segments.values().filter_map(|s| s.pinned_file.clone()).collect()
        };
        for f in files {
            let _ = f.close().await;
        }
        self.progress.notify_all();
        result
    }

    async fn finish_clean(&self) -> Result<(), StorageError> {
        let (active, end) = {
            let mut st = self.st.borrow_mut();
            st.active_mut().seal_time_index();
            (st.active().base.0, st.log_end)
        };
        self.finalize_files(active).await?;
        self.write_txn_index(active, end.0).await?;
        // The next open loads this and replays nothing.
        self.write_producer_snapshot(end).await?;
        checkpoint::write(&*self.fs, &self.dir, RECOVERY_POINT_FILE, end).await?;
        checkpoint::write(&*self.fs, &self.dir, CLEAN_SHUTDOWN_FILE, end).await
    }
}
