//! The log writer: one background task per log at a time that turns staged batches into
//! O_DIRECT writes, fsyncs them as the flush policy says, finalizes sealed segments and
//! advances the written/durable offsets (group commit: whatever was appended while a
//! write + fsync was in flight goes into the next one).
//!
//! Runs on the partition's owner shard, spawned through [`FileSystem::spawn`]. Only one job is
//! in flight per log, so the partial last page can be rewritten safely by the next write.
//! Segments are processed in base-offset order: a segment's data is written only after every
//! earlier segment was finalized (synced, truncated to size, indexes written), which is what
//! lets recovery trust everything below the recovery point.
//!
//! A full disk (ENOSPC/EDQUOT on a write, sync or finalize) is not a failure: the writer keeps
//! the jobs it could not finish, marks the log out of space (appends and commit waits get
//! KAFKA_STORAGE_ERROR, retriable, at once; reads go on), retries them in order every
//! [`DISK_FULL_RETRY_MS`] (rewriting the same bytes at the same aligned position is
//! idempotent), and clears the mark once they complete: writes resume by themselves, and
//! nothing appended is dropped. After any other failed write or sync the log is marked
//! failed (offline: appends refused until reopened; the error log line names the file).

use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;

use super::checkpoint::{self, RECOVERY_POINT_FILE};
use super::error::StorageError;
use super::log::LogInner;
use super::segment::{segment_path, INDEX_SUFFIX, TIME_INDEX_SUFFIX};
use super::FlushPolicy;
use futures::stream::{FuturesOrdered, StreamExt};

use super::prealloc::{next_fill, Fill};
use crate::constants::{DISK_FULL_RETRY_MS, LOG_WRITES_IN_FLIGHT_MAX, LOG_WRITE_BYTES_MAX};
use crate::io::{align_down, align_up, DataFile, FileSystem};
use crate::metrics::Stage;
use crate::types::Offset;

enum Job<F: FileSystem> {
    Write(WriteJob<F>),
    Finalize { seg_base: i64 },
    Sync { file: Rc<F::File>, upto: Offset },
}

struct WriteJob<F: FileSystem> {
    seg_base: i64,
    file: Rc<F::File>,
    pos: u64,
    parts: Vec<Bytes>,
    end_bytes: u64,
    /// End of the last batch this write completes (None: it only carries part of a batch).
    end_offset: Option<Offset>,
    sync: bool,
    /// The write lies inside the segment's durable preallocation: its sync commits no
    /// metadata and may share a device flush with other logs' (`DataFile::sync_overwrites`).
    overwrite: bool,
}

impl<F: FileSystem> Clone for WriteJob<F> {
    fn clone(&self) -> Self {
        Self {
            seg_base: self.seg_base,
            file: self.file.clone(),
            pos: self.pos,
            parts: self.parts.clone(),
            end_bytes: self.end_bytes,
            end_offset: self.end_offset,
            sync: self.sync,
            overwrite: self.overwrite,
        }
    }
}

impl<F: FileSystem> Clone for Job<F> {
    fn clone(&self) -> Self {
        match self {
            Job::Write(w) => Job::Write(w.clone()),
            Job::Finalize { seg_base } => Job::Finalize { seg_base: *seg_base },
            Job::Sync { file, upto } => Job::Sync { file: file.clone(), upto: *upto },
        }
    }
}

/// A job and the preallocation to start beside it.
type JobAndFill<F> = (Job<F>, Option<Fill<<F as FileSystem>::File>>);

/// What a finished write reports back, in issue order.
struct WriteDone {
    seg_base: i64,
    end_bytes: u64,
    end_offset: Option<Offset>,
    synced: bool,
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

    /// The writer loop: keeps up to [`LOG_WRITES_IN_FLIGHT_MAX`] writes in flight (only
    /// when they do not share a page), completes them in issue order, and runs finalize and
    /// sync jobs alone (they are barriers).
    async fn run_writer(self: Rc<Self>) {
        let mut in_flight = FuturesOrdered::new();
        let failure = loop {
            let mut barrier_failure = None;
            while in_flight.len() < LOG_WRITES_IN_FLIGHT_MAX {
                match self.take_job(in_flight.len()) {
                    Some(Job::Write(w)) => in_flight.push_back(self.write(w)),
                    Some(other) => {
                        if let Err(e) = self.run_barrier_until_space(other).await {
                            barrier_failure = Some(e);
                            break;
                        }
                    }
                    None => break,
                }
            }
            if barrier_failure.is_some() {
                break barrier_failure;
            }
            // Empty (nothing in flight, nothing to take) resolves at once: the loop stops in
            // the same step that found no work, so no append can slip in unnoticed. A running
            // preallocation keeps the writer up, waiting for it (the fill notifies).
            let Some((job, done)) = in_flight.next().await else {
                let wait = self.progress.wait();
                if self.held_by_fill() {
                    wait.await;
                    continue;
                }
                break None;
            };
            match done {
                Ok(done) => self.complete_write(done),
                Err(e) if e.is_out_of_space() => {
                    // The writes issued after it are retried too, in order: completions must
                    // stay in issue order.
                    let mut retry = vec![job];
                    while let Some((job, _)) = in_flight.next().await {
                        retry.push(job);
                    }
                    if let Err(e) = self.retry_writes(&e, retry).await {
                        break Some(e);
                    }
                }
                Err(e) => break Some(e),
            }
        };
        drop(in_flight);
        let mut st = self.st.borrow_mut();
        if let Some(e) = failure {
            self.go_offline(&mut st, &e);
        }
        st.writer_running = false;
        drop(st);
        self.progress.notify_all();
    }

    /// Issues one write (and its fsync); hands the job back with the outcome, so a write
    /// that met a full disk can be retried.
    fn write(
        &self,
        w: WriteJob<F>,
    ) -> impl std::future::Future<Output = (WriteJob<F>, Result<WriteDone, StorageError>)> {
        let path = self.seg_path(w.seg_base);
        let fs = self.fs.clone();
        async move {
            let result = async {
                let refs: Vec<&[u8]> = w.parts.iter().map(|p| &p[..]).collect();
                let started = fs.monotonic();
                w.file
                    .write_at(w.pos, &refs)
                    .await
                    .map_err(StorageError::io("write", &path, w.pos))?;
                let written = fs.monotonic();
                crate::metrics::writer_stage(Stage::Write, written.saturating_sub(started));
                if w.sync {
                    let synced = if w.overwrite {
                        w.file.sync_overwrites().await
                    } else {
                        w.file.sync().await
                    };
                    synced.map_err(StorageError::io("fsync", &path, w.pos))?;
                    let synced = fs.monotonic().saturating_sub(written);
                    crate::metrics::writer_stage(Stage::Fdatasync, synced);
                }
                let took = fs.monotonic().saturating_sub(started);
                crate::metrics::flush(took, w.parts.len().saturating_sub(1) as u64);
                Ok(WriteDone {
                    seg_base: w.seg_base,
                    end_bytes: w.end_bytes,
                    end_offset: w.end_offset,
                    synced: w.sync,
                })
            }
            .await;
            (w, result)
        }
    }

    /// Takes the log offline after a failed write or sync on one of its files (not ENOSPC):
    /// appends are refused until it is reopened. Logged and counted once.
    pub(super) fn go_offline(&self, st: &mut super::log::LogState<F>, e: &StorageError) {
        if st.failed.is_none() && !st.closed {
            tracing::error!(dir = %self.dir.display(), error = %e, "log write failed; partition offline (appends refused) until reopened");
            crate::metrics::log_offline();
        }
        st.failed = Some(e.to_string());
    }

    /// Marks the log out of space (once) and wakes the waiters so they answer at once.
    fn enter_out_of_space(&self, err: &StorageError) {
        let mut st = self.st.borrow_mut();
        if st.out_of_space.is_none() {
            tracing::warn!(dir = %self.dir.display(), error = %err, "disk full: appends to this log are refused until space returns; retrying its writes every {DISK_FULL_RETRY_MS} ms");
            crate::metrics::log_out_of_space(1);
            st.out_of_space = Some(err.to_string());
        }
        drop(st);
        self.progress.notify_all();
    }

    fn leave_out_of_space(&self) {
        if self.st.borrow_mut().out_of_space.take().is_some() {
            tracing::info!(dir = %self.dir.display(), "disk space is back: writes resumed");
            crate::metrics::log_out_of_space(-1);
        }
        self.progress.notify_all();
    }

    /// Waits out one retry interval; `false` once the log is closing (then give up).
    async fn retry_pause(&self) -> bool {
        self.fs.sleep(Duration::from_millis(DISK_FULL_RETRY_MS)).await;
        !self.st.borrow().closed
    }

    /// Retries `jobs` in order until each is written, while the disk is full.
    async fn retry_writes(
        self: &Rc<Self>,
        first: &StorageError,
        jobs: Vec<WriteJob<F>>,
    ) -> Result<(), StorageError> {
        self.enter_out_of_space(first);
        for job in jobs {
            loop {
                if !self.retry_pause().await {
                    return Err(StorageError::Closed { path: self.dir.clone() });
                }
                match self.write(job.clone()).await.1 {
                    Ok(done) => {
                        self.complete_write(done);
                        break;
                    }
                    Err(e) if e.is_out_of_space() => {}
                    Err(e) => return Err(e),
                }
            }
        }
        self.leave_out_of_space();
        Ok(())
    }

    /// Runs a finalize or sync job, retrying it while the disk is full (both are
    /// idempotent: truncate, rewrite the indexes whole, fsync).
    async fn run_barrier_until_space(self: &Rc<Self>, job: Job<F>) -> Result<(), StorageError> {
        let mut waited = false;
        loop {
            match self.run_barrier(job.clone()).await {
                Ok(()) => break,
                Err(e) if e.is_out_of_space() => {
                    self.enter_out_of_space(&e);
                    waited = true;
                    if !self.retry_pause().await {
                        return Err(StorageError::Closed { path: self.dir.clone() });
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if waited {
            self.leave_out_of_space();
        }
        Ok(())
    }

    fn sync_due(&self, last_sync: Duration) -> bool {
        match self.cfg().flush {
            FlushPolicy::EveryBatch => true,
            FlushPolicy::IntervalMs(ms) => {
                self.fs.monotonic().saturating_sub(last_sync) >= Duration::from_millis(ms)
            }
            FlushPolicy::Never => false,
        }
    }

    fn take_job(self: &Rc<Self>, in_flight: usize) -> Option<Job<F>> {
        let (job, fill) = self.next_job(in_flight)?;
        if let Some(fill) = fill {
            self.start_fill(fill);
        }
        Some(job)
    }

    /// Whether the writer stays up for the running preallocation: it holds back writes that
    /// reach its region and the finalize of its segment, and `drain(idle)` waits for it. A
    /// writer that stopped instead would be restarted by every waiter and stop again at once,
    /// a busy loop that also starved the reactor, so the fill's I/O never completed.
    fn held_by_fill(&self) -> bool {
        let st = self.st.borrow();
        st.fill.is_some() && st.failed.is_none()
    }

    /// The next job, and the preallocation to start beside it (`storage::prealloc`).
    fn next_job(&self, in_flight: usize) -> Option<JobAndFill<F>> {
        let (step_max, segment_bytes) = (self.prealloc_step(), self.cfg().segment_bytes);
        let mut st = self.st.borrow_mut();
        if st.failed.is_some() {
            return None;
        }
        let sync = st.force_sync > 0 || st.sync_requested || self.sync_due(st.last_sync);
        let (durable, written, fill) = (st.durable, st.written, st.fill);
        let seg = st.segments.values_mut().find(|s| !s.finalized)?;
        let filling = fill.filter(|(base, _)| *base == seg.base.0).map(|(_, from)| from);
        if seg.staged.is_empty() {
            if in_flight > 0 {
                return None;
            }
            if seg.sealed {
                // Finalize trims the file: not under a preallocation still writing to it.
                return filling.is_none().then_some((Job::Finalize { seg_base: seg.base.0 }, None));
            }
            let file = seg.writer_file().expect("an unfinalized segment keeps its file");
            return (durable < written && sync)
                .then_some((Job::Sync { file, upto: written }, None));
        }
        // A second write in flight must not share a page with the first.
        if in_flight > 0 && !seg.page_prefix.is_empty() {
            return None;
        }
        let pos = align_down(seg.queued_bytes);
        let staged: usize = seg.staged.iter().map(|(b, _)| b.len()).sum();
        // A backlog larger than one write is cut at a page boundary so the next write can be
        // issued before this one completes.
        let mut limit = if seg.page_prefix.len() + staged > LOG_WRITE_BYTES_MAX {
            LOG_WRITE_BYTES_MAX
        } else {
            usize::MAX
        };
        // A write must not reach into a region a preallocation is zero-filling: it is cut at
        // the fill's start (a page boundary), or waits for the fill (which wakes the writer)
        // when it could not carry a staged byte.
        if let Some(from) = filling {
            let planned = (seg.page_prefix.len() + staged).min(limit);
            if align_up(pos + planned as u64) > from {
                let room = usize::try_from(from.saturating_sub(pos)).unwrap_or(usize::MAX);
                if room <= seg.page_prefix.len() {
                    return None;
                }
                limit = limit.min(room);
            }
        }
        let prefix = Bytes::from(std::mem::take(&mut seg.page_prefix));
        let mut bytes = prefix.len();
        let mut parts = vec![prefix];
        let mut end_offset = None;
        while bytes < limit {
            let Some((b, end)) = seg.staged.pop_front() else { break };
            if bytes + b.len() > limit {
                let cut = limit - bytes;
                seg.staged.push_front((b.slice(cut..), end));
                parts.push(b.slice(..cut));
                bytes = limit;
                break;
            }
            bytes += b.len();
            end_offset = end.or(end_offset);
            parts.push(b);
        }
        let end_bytes = pos + bytes as u64;
        seg.page_prefix = tail_bytes(&parts, (end_bytes - align_down(end_bytes)) as usize);
        seg.queued_bytes = end_bytes;
        let more_staged = !seg.staged.is_empty();
        let file = seg.writer_file().expect("an unfinalized segment keeps its file");
        let seg_base = seg.base.0;
        // `prealloc_end` moves only once a fill's zeros and the size covering them are
        // durable (`storage::prealloc`), so a write below it changes no metadata.
        let overwrite = align_up(end_bytes) <= seg.prealloc_end;
        let new_fill = if fill.is_none() && !seg.sealed && !seg.prealloc_off {
            next_fill(end_bytes, seg.prealloc_end, step_max, segment_bytes)
        } else {
            None
        };
        let now = self.fs.monotonic();
        if let Some(since) = st.first_staged_at.take() {
            crate::metrics::writer_stage(Stage::WriteWait, now.saturating_sub(since));
        }
        // A backlog cut at the write limit: what stays staged waits from now on.
        if more_staged {
            st.first_staged_at = Some(now);
        }
        let new_fill = new_fill.map(|(from, to)| {
            st.fill = Some((seg_base, from));
            Fill { seg_base, file: file.clone(), from, to }
        });
        let job = Job::Write(WriteJob {
            seg_base,
            file,
            pos,
            parts,
            end_bytes,
            end_offset,
            sync,
            overwrite,
        });
        Some((job, new_fill))
    }

    async fn run_barrier(self: &Rc<Self>, job: Job<F>) -> Result<(), StorageError> {
        match job {
            Job::Write(_) => unreachable!("writes are issued by run_writer"),
            Job::Finalize { seg_base } => {
                self.finalize_files(seg_base).await?;
                let (next, file) = {
                    let mut st = self.st.borrow_mut();
                    let seg = st.segments.get_mut(&seg_base).expect("finalizing a live segment");
                    seg.finalized = true;
                    seg.page_prefix = Vec::new();
                    // Sealed and final: its file is reopened through the shard's open-file
                    // cache when read, so file descriptors stay bounded.
                    let file = seg.pinned_file.take();
                    let next = seg.next_offset;
                    st.durable = st.durable.max(next);
                    st.committed_at = self.fs.monotonic();
                    (next, file)
                };
                if let Some(file) = file {
                    super::segment::release(file).await;
                }
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
                st.last_sync = self.fs.monotonic();
                st.committed_at = st.last_sync;
                st.sync_requested = false;
                drop(st);
                self.progress.notify_all();
            }
        }
        Ok(())
    }

    fn complete_write(self: &Rc<Self>, done: WriteDone) {
        let WriteDone { seg_base, end_bytes, end_offset, synced } = done;
        let mut st = self.st.borrow_mut();
        if let Some(seg) = st.segments.get_mut(&seg_base) {
            seg.written_bytes = end_bytes;
        }
        if let Some(end_offset) = end_offset {
            st.written = end_offset;
            st.committed_at = self.fs.monotonic();
            if synced {
                st.durable = end_offset;
            }
            while st.unwritten.front().is_some_and(|(_, last, _)| *last < end_offset.0) {
                if let Some((_, _, b)) = st.unwritten.pop_front() {
                    st.unwritten_bytes -= b.len();
                }
            }
        }
        if synced {
            st.last_sync = self.fs.monotonic();
            st.sync_requested = false;
        }
        let schedule = !synced
            && !st.syncer_scheduled
            && matches!(self.cfg().flush, FlushPolicy::IntervalMs(_));
        st.syncer_scheduled |= schedule;
        drop(st);
        self.progress.notify_all();
        if let (true, FlushPolicy::IntervalMs(ms)) = (schedule, self.cfg().flush) {
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
            (seg.writer_file(), seg.size_bytes, seg.index.to_bytes(), seg.time_index.to_bytes())
        };
        let path = self.seg_path(seg_base);
        let file = file.ok_or_else(|| StorageError::Closed { path: path.clone() })?;
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
