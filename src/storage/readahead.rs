//! Sequential read-ahead for catch-up readers. Writes bypass the page cache (O_DIRECT), so a
//! consumer reading old data would otherwise wait for a cold disk read on every fetch, with
//! the disk idle while the response is sent and the client processes it. When a large read
//! ends at an offset that is not in memory, the chunk of the segment holding it is read in the
//! background and its batches go into the shard's batch cache, where the consumer's next
//! fetch finds them; that fetch, large again, starts the next read-ahead.
//!
//! Lives on the partition's owner shard, one per log. Invariants: at most one read-ahead in
//! flight per log; only bytes below the segment's written size are read and only whole
//! batches that pass the length/magic/CRC scan are cached; a read-ahead that completes after
//! the log's cache was invalidated (truncation, cleaning) caches nothing (`epoch`); a reader
//! asking for exactly the offset an in-flight read-ahead starts at waits for it instead of
//! issuing the same disk read.

use std::cell::Cell;
use std::rc::Rc;

use super::batch::{scan_batch_framing, ScanStep};
use super::cache::BatchCache;
use crate::io::{DataFile, FileSystem};
use crate::sync::Notify;

/// Per-log read-ahead state.
#[derive(Default)]
pub struct Readahead {
    /// The offset the in-flight read-ahead starts at.
    inflight_next: Cell<Option<i64>>,
    /// Bumped whenever the log's cached batches are invalidated.
    epoch: Cell<u64>,
    done: Notify,
}

/// Where the read-ahead starts: a position in the segment file at or before the batch
/// holding `next_offset` (from the sparse index), and the segment's written size.
pub struct DiskTail {
    pub end_pos: u64,
    pub limit_bytes: u64,
    /// The offset the reader asks for next.
    pub next_offset: i64,
}

impl Readahead {
    /// Cached batches are about to be dropped: a read-ahead in flight must not re-add any.
    pub fn invalidate(&self) {
        self.epoch.set(self.epoch.get().wrapping_add(1));
    }

    /// Waits for the in-flight read-ahead if it starts exactly at `offset`; true if it did.
    pub async fn wait_if_reading(&self, offset: i64) -> bool {
        if self.inflight_next.get() != Some(offset) {
            return false;
        }
        self.done.wait().await;
        true
    }

    /// Starts reading `len` bytes after `tail` into `cache` (log `log_id`) unless one is in
    /// flight or the segment has nothing more written. `open` leases the segment's file (from
    /// the shard's open-file cache) in the background task; `None` (the segment is gone)
    /// reads nothing.
    pub fn start<F: FileSystem, O>(
        self: &Rc<Self>,
        fs: &F,
        cache: &Rc<BatchCache>,
        log_id: u64,
        tail: DiskTail,
        open: O,
        len: usize,
    ) where
        O: std::future::Future<Output = Option<Rc<F::File>>> + 'static,
    {
        let room = tail.limit_bytes.saturating_sub(tail.end_pos);
        let len = u64::try_from(len).unwrap_or(u64::MAX).min(room);
        if len == 0 || self.inflight_next.get().is_some() {
            return;
        }
        self.inflight_next.set(Some(tail.next_offset));
        let (me, cache, epoch) = (self.clone(), cache.clone(), self.epoch.get());
        fs.spawn(Box::pin(async move {
            // Errors are left to the reader's own disk read, which reports them.
            let data = match open.await {
                Some(file) => file.read_at(tail.end_pos, len as usize).await.ok(),
                None => None,
            };
            if let Some(data) = data {
                if me.epoch.get() == epoch {
                    let mut at = 0usize;
                    let mut batches = Vec::new();
                    while let ScanStep::Batch(h) = scan_batch_framing(&data[at..]) {
                        let size = h.total_size();
                        batches.push((h.base_offset, h.last_offset(), at, at + size));
                        at += size;
                    }
                    // The read buffer itself is cached (no copy), and a catch-up reader's
                    // Fetch is answered with slices of it (`BatchCache::get_run`).
                    cache.insert_adopted(log_id, &data, &batches);
                }
            }
            me.inflight_next.set(None);
            me.done.notify_all();
        }));
    }
}
