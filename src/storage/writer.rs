//! The log writer: one background task per log at a time that turns staged batches into
//! O_DIRECT writes, fsyncs them as the flush policy says, finalizes sealed segments and
//! advances the written/durable offsets (group commit: whatever was appended while a
//! write + fsync was in flight goes into the next one).
//!
//! Runs on the partition's owner shard, spawned through [`FileSystem::spawn`]. Only one job is
//! in flight per log, so the partial last page can be rewritten safely by the next write.
//! Segments are processed in base-offset order: a segment's data is written only after every
//! earlier segment was finalized (synced, truncated to size, indexes written), which is what
//! lets recovery trust everything below the recovery point. After any failed write or sync
//! the log is marked failed and refuses appends until reopened.

use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::batch::BatchHeader;
use super::checkpoint::{self, RECOVERY_POINT_FILE};
use super::error::StorageError;
use super::log::LogInner;
use super::segment::{segment_path, INDEX_SUFFIX, TIME_INDEX_SUFFIX};
use super::FlushPolicy;
use crate::constants::LOG_WRITE_BYTES_MAX;
use crate::io::{align_down, DataFile, FileSystem};
use crate::types::Offset;

enum Job<F: FileSystem> {
    Write {
        seg_base: i64,
        file: Rc<F::File>,
        pos: u64,
        parts: Vec<Bytes>,
        end_bytes: u64,
        end_offset: Offset,
        sync: bool,
    },
    Finalize {
        seg_base: i64,
    },
    Sync {
        file: Rc<F::File>,
        upto: Offset,
    },
}

/// The last `len` bytes of the concatenation of `parts`.
fn tail_bytes(parts: &[Bytes], mut len: usize) -> Vec<u8> {
    let mut chunks = Vec::new();
    for p in parts.iter().rev() {
        if len == 0 {
            break;
        }
        let take = len.min(p.len());
        chunks.push(&p[p.len() - take..]);
        len -= take;
    }
    chunks.iter().rev().flat_map(|c| c.iter().copied()).collect()
}

impl<F: FileSystem> LogInner<F> {
    /// Starts the writer task if it is not running and the log has not failed.
    pub fn kick_writer(self: &Rc<Self>) {
        {
            let mut st = self.st.borrow_mut();
            if st.writer_running || st.failed.is_some() {
                return;
            }
            st.writer_running = true;
        }
        let me = self.clone();
        self.fs.spawn(Box::pin(async move { me.run_writer().await }));
    }

    async fn run_writer(self: Rc<Self>) {
        loop {
            let Some(job) = self.take_job() else { break };
            if let Err(e) = self.run_job(job).await {
                tracing::error!(dir = %self.dir.display(), error = %e, "log write failed; log is read-only until reopened");
                self.st.borrow_mut().failed = Some(e.to_string());
                break;
            }
        }
        self.st.borrow_mut().writer_running = false;
        self.progress.notify_all();
    }

    fn sync_due(&self, last_sync: Instant) -> bool {
        match self.config.flush {
            FlushPolicy::EveryBatch => true,
            FlushPolicy::IntervalMs(ms) => last_sync.elapsed() >= Duration::from_millis(ms),
            FlushPolicy::Never => false,
        }
    }

    fn take_job(&self) -> Option<Job<F>> {
        let mut st = self.st.borrow_mut();
        if st.failed.is_some() {
            return None;
        }
        let sync = st.force_sync > 0 || st.sync_requested || self.sync_due(st.last_sync);
        let (durable, written) = (st.durable, st.written);
        let seg = st.segments.values_mut().find(|s| !s.finalized)?;
        if seg.staged.is_empty() {
            if seg.sealed {
                return Some(Job::Finalize { seg_base: seg.base.0 });
            }
            return (durable < written && sync)
                .then(|| Job::Sync { file: seg.file.clone(), upto: written });
        }
        let pos = align_down(seg.written_bytes);
        let mut parts = vec![Bytes::from(std::mem::take(&mut seg.page_prefix))];
        let mut bytes = parts[0].len();
        let mut taken = 0;
        let mut end_offset = Offset(-1);
        for b in &seg.staged {
            if taken > 0 && bytes + b.len() > LOG_WRITE_BYTES_MAX {
                break;
            }
            let h = BatchHeader::parse(b).expect("staged batches were validated");
            end_offset = Offset(h.last_offset() + 1);
            bytes += b.len();
            parts.push(b.clone());
            taken += 1;
        }
        seg.staged.drain(..taken);
        let end_bytes = pos + bytes as u64;
        Some(Job::Write {
            seg_base: seg.base.0,
            file: seg.file.clone(),
            pos,
            parts,
            end_bytes,
            end_offset,
            sync,
        })
    }

    async fn run_job(self: &Rc<Self>, job: Job<F>) -> Result<(), StorageError> {
        match job {
            Job::Write { seg_base, file, pos, parts, end_bytes, end_offset, sync } => {
                let path = self.seg_path(seg_base);
                let refs: Vec<&[u8]> = parts.iter().map(|p| &p[..]).collect();
                let started = std::time::Instant::now();
                file.write_at(pos, &refs).await.map_err(StorageError::io("write", &path, pos))?;
                if sync {
                    file.sync().await.map_err(StorageError::io("fsync", &path, pos))?;
                }
                crate::metrics::flush(started.elapsed(), parts.len() as u64 - 1);
                let tail = tail_bytes(&parts, (end_bytes - align_down(end_bytes)) as usize);
                self.complete_write(seg_base, end_bytes, tail, end_offset, sync);
            }
            Job::Finalize { seg_base } => {
                self.finalize_files(seg_base).await?;
                let next = {
                    let mut st = self.st.borrow_mut();
                    let seg = st.segments.get_mut(&seg_base).expect("finalizing a live segment");
                    seg.finalized = true;
                    seg.page_prefix = Vec::new();
                    let next = seg.next_offset;
                    st.durable = st.durable.max(next);
                    next
                };
                if self.st.borrow().recovery_point < next {
                    checkpoint::write(&*self.fs, &self.dir, RECOVERY_POINT_FILE, next).await?;
                    self.st.borrow_mut().recovery_point = next;
                }
                self.progress.notify_all();
            }
            Job::Sync { file, upto } => {
                file.sync().await.map_err(StorageError::io("fsync", &self.dir, 0))?;
                let mut st = self.st.borrow_mut();
                st.durable = st.durable.max(upto);
                st.last_sync = Instant::now();
                st.sync_requested = false;
                drop(st);
                self.progress.notify_all();
            }
        }
        Ok(())
    }

    fn complete_write(
        self: &Rc<Self>,
        seg_base: i64,
        end_bytes: u64,
        tail: Vec<u8>,
        end_offset: Offset,
        synced: bool,
    ) {
        let mut st = self.st.borrow_mut();
        if let Some(seg) = st.segments.get_mut(&seg_base) {
            seg.written_bytes = end_bytes;
            seg.page_prefix = tail;
        }
        st.written = end_offset;
        if synced {
            st.durable = end_offset;
            st.last_sync = Instant::now();
            st.sync_requested = false;
        }
        while st.unwritten.front().is_some_and(|(_, last, _)| *last < end_offset.0) {
            if let Some((_, _, b)) = st.unwritten.pop_front() {
                st.unwritten_bytes -= b.len();
            }
        }
        let schedule = !synced
            && !st.syncer_scheduled
            && matches!(self.config.flush, FlushPolicy::IntervalMs(_));
        st.syncer_scheduled |= schedule;
        drop(st);
        self.progress.notify_all();
        if let (true, FlushPolicy::IntervalMs(ms)) = (schedule, self.config.flush) {
            let me = self.clone();
            self.fs.spawn(Box::pin(async move {
                me.fs.sleep(Duration::from_millis(ms)).await;
                let mut st = me.st.borrow_mut();
                st.syncer_scheduled = false;
                st.sync_requested = st.durable < st.written;
                drop(st);
                me.kick_writer();
            }));
        }
    }

    pub fn seg_path(&self, base: i64) -> std::path::PathBuf {
        segment_path(&self.dir, Offset(base), super::segment::LOG_SUFFIX)
    }

    /// Makes a segment's files final: `.log` truncated to its exact size and synced, `.index`
    /// and `.timeindex` written whole, trimmed and synced.
    pub async fn finalize_files(&self, seg_base: i64) -> Result<(), StorageError> {
        let (file, size, index, time_index) = {
            let st = self.st.borrow();
            let seg = &st.segments[&seg_base];
            (seg.file.clone(), seg.size_bytes, seg.index.to_bytes(), seg.time_index.to_bytes())
        };
        let path = self.seg_path(seg_base);
        file.truncate(size).await.map_err(StorageError::io("truncate", &path, size))?;
        file.sync().await.map_err(StorageError::io("fsync", &path, size))?;
        for (suffix, data) in [(INDEX_SUFFIX, index), (TIME_INDEX_SUFFIX, time_index)] {
            let p = segment_path(&self.dir, Offset(seg_base), suffix);
            let f = self.fs.open(&p, true).await.map_err(StorageError::io("open", &p, 0))?;
            f.write_at(0, &[&data]).await.map_err(StorageError::io("write", &p, 0))?;
            let len = data.len() as u64;
            f.truncate(len).await.map_err(StorageError::io("truncate", &p, len))?;
            f.sync().await.map_err(StorageError::io("fsync", &p, 0))?;
            f.close().await.map_err(StorageError::io("close", &p, 0))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_bytes_spans_parts() {
        let parts = [Bytes::from_static(b"abc"), Bytes::from_static(b"de"), Bytes::new()];
        assert_eq!(tail_bytes(&parts, 3), b"cde");
        assert_eq!(tail_bytes(&parts, 0), b"");
        assert_eq!(tail_bytes(&parts, 5), b"abcde");
    }
}
