//! The per-shard cache of recent batches, so tailing readers are served from memory (there
//! is no page cache under O_DIRECT).
//!
//! One per shard, shared by every log of that shard through `Rc`. Bounded by bytes; evicts
//! the oldest insertions first (recent batches are what tailing consumers read). Entries are
//! whole stored batches keyed by (log id, base offset). The shard's open-file cache
//! (`storage::open_files`) rides along, so every log of the shard finds it the same way.
//!
//! Memory layout (issue 19: RSS must follow the live heap). Small batches (at most
//! [`CACHE_INLINE_MAX_BYTES`]) are copied into shard-wide chunks of up to
//! [`CACHE_CHUNK_BYTES_MAX`], filled in insertion order; eviction drops the oldest chunk with
//! every entry in it, so the allocator gets whole chunks back instead of part-full small-size
//! slabs. (Allocated one by one, the ~100-byte batches of a low-linger producer, their
//! `Bytes` headers and a B-tree's 640-byte nodes, freed oldest first while newer ones of every
//! size arrive, left 10-40 MiB of allocator slack that moved with the load;
//! `perf/results/2026-12-02-allocator.md`.) Larger batches keep their own allocation, which
//! the allocator returns whole anyway. Each log's entries sit in one `VecDeque` sorted by base
//! offset, and the eviction order in one more: two contiguous buffers, no per-entry nodes.
//!
//! Invariants:
//! - `used_bytes` = every live chunk buffer's capacity + per live entry
//!   [`BATCH_CACHE_ENTRY_OVERHEAD_BYTES`] + the bytes of live entries with their own
//!   allocation; it never exceeds `capacity_bytes` once an insert returns.
//! - A log's entries are sorted by base offset and do not overlap.
//! - A chunk's buffer is freed when its last slice is dropped. `BatchCache::get` hands out
//!   slices of it (no copy), so a caller that keeps a small batch beyond the response must copy
//!   it (`storage::read` does for a read answered by one cached batch): one kept slice would
//!   hold a whole chunk alive, outside the bound (seen when chunks were first tried).
//! - Callers insert compact batches (their own allocation, not a view of a request frame or
//!   read buffer): the bound cannot see through a view. The exception is a read-ahead's
//!   buffer, adopted whole as a chunk of its own and charged whole (`insert_adopted`): a
//!   catch-up reader's Fetch is then answered with one slice of it (`get_run`), with no copy
//!   into the cache and none out of it; that slice is sent and dropped, never kept.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use bytes::{Bytes, BytesMut};

use super::open_files::OpenFiles;
use crate::constants::{
    BATCH_CACHE_ENTRY_OVERHEAD_BYTES, CACHE_CHUNK_BYTES_MAX, CACHE_INLINE_MAX_BYTES,
};

/// What an entry of `len` bytes with its own allocation costs against the cache's bound.
fn charge(len: usize) -> usize {
    len + BATCH_CACHE_ENTRY_OVERHEAD_BYTES
}

/// One cached batch of a log.
struct Entry {
    base: i64,
    last: i64,
    /// The chunk it was inserted under: it is evicted with that chunk.
    chunk: u64,
    /// `batch` is a slice of the chunk's buffer (charged with the buffer), not its own
    /// allocation.
    inline: bool,
    batch: Bytes,
}

impl Entry {
    fn charge(&self) -> usize {
        if self.inline {
            BATCH_CACHE_ENTRY_OVERHEAD_BYTES
        } else {
            charge(self.batch.len())
        }
    }
}

/// The unit of eviction: the entries inserted while it was the newest chunk.
struct Chunk {
    seq: u64,
    /// Capacity of its buffer; 0 while only batches with their own allocation went in.
    buffer_bytes: usize,
    /// Bytes of every batch inserted under it; it closes when the next would pass the
    /// cache's chunk size.
    filled_bytes: usize,
}

#[derive(Default)]
struct CacheState {
    /// Each log's entries, sorted by base offset.
    logs: HashMap<u64, VecDeque<Entry>>,
    /// (log, base, chunk) in insertion order. Entries removed since (truncation) are skipped
    /// when their chunk goes.
    order: VecDeque<(u64, i64, u64)>,
    chunks: VecDeque<Chunk>,
    /// Chunks that are a read-ahead's own buffer (`insert_adopted`), by sequence number:
    /// their entries are contiguous slices of it, so a run of them can be served as one
    /// slice (`get_run`).
    adopted: HashMap<u64, Bytes>,
    /// The unused rest of the newest chunk's buffer.
    buffer: BytesMut,
    next_chunk: u64,
    used_bytes: usize,
}

impl CacheState {
    /// The index in `entries` of the batch containing `offset`.
    fn find(entries: &VecDeque<Entry>, offset: i64) -> Option<usize> {
        let i = entries.partition_point(|e| e.base <= offset).checked_sub(1)?;
        (entries[i].last >= offset).then_some(i)
    }

    /// Where a batch of `log` covering `base..=last` goes in its log's entries; `None` if it
    /// overlaps a cached one (the cached one stays, see `BatchCache::insert`).
    fn slot(&self, log: u64, base: i64, last: i64) -> Option<usize> {
        let Some(es) = self.logs.get(&log) else { return Some(0) };
        let i = es.partition_point(|e| e.base < base);
        let clash_after = es.get(i).is_some_and(|e| e.base <= last);
        let clash_before = i > 0 && es[i - 1].last >= base;
        (!clash_after && !clash_before).then_some(i)
    }

    /// Evicts the oldest chunks until the bound holds. Chunks without a buffer cost nothing
    /// but their entries; the second bound keeps their bookkeeping bounded when those
    /// entries are truncated away.
    fn hold_bound(&mut self, capacity_bytes: usize, chunk_bytes: usize) {
        let chunks_max = 2 * (capacity_bytes / chunk_bytes) + 2;
        while self.used_bytes > capacity_bytes || self.chunks.len() > chunks_max {
            if !self.evict_oldest() {
                break;
            }
        }
    }

    /// Opens a new chunk unless the newest one has room for `len` more bytes.
    fn chunk_for(&mut self, len: usize, inline: bool, chunk_bytes: usize) {
        let room = self.buffer.capacity() - self.buffer.len();
        let full = self.chunks.back().is_none_or(|c| {
            (c.filled_bytes > 0 && c.filled_bytes + len > chunk_bytes)
                || (inline && c.buffer_bytes > 0 && room < len)
        });
        if full {
            self.chunks.push_back(Chunk { seq: self.next_chunk, buffer_bytes: 0, filled_bytes: 0 });
            self.next_chunk += 1;
            // The old chunk's allocation lives on in its entries' slices.
            self.buffer = BytesMut::new();
        }
    }

    /// Drops the oldest chunk and every entry inserted under it.
    fn evict_oldest(&mut self) -> bool {
        let Some(chunk) = self.chunks.pop_front() else { return false };
        while let Some(&(log, base, seq)) = self.order.front() {
            if seq != chunk.seq {
                break;
            }
            self.order.pop_front();
            self.remove(log, base, seq);
        }
        self.used_bytes -= chunk.buffer_bytes;
        self.adopted.remove(&chunk.seq);
        if self.chunks.is_empty() {
            self.buffer = BytesMut::new();
        }
        shrink(&mut self.order);
        true
    }

    /// Removes the entry of `log` at `base` if it is still the one inserted under `chunk`
    /// (the same batch may have been truncated and cached again since).
    fn remove(&mut self, log: u64, base: i64, chunk: u64) {
        let Some(entries) = self.logs.get_mut(&log) else { return };
        let i = entries.partition_point(|e| e.base < base);
        if entries.get(i).is_some_and(|e| e.base == base && e.chunk == chunk) {
            if let Some(e) = entries.remove(i) {
                self.used_bytes -= e.charge();
            }
        }
        if entries.is_empty() {
            self.logs.remove(&log);
        } else {
            shrink(entries);
        }
    }
}

/// Gives back most of a queue's buffer once it is three quarters empty, so one burst does not
/// keep its peak allocated.
fn shrink<T>(q: &mut VecDeque<T>) {
    if q.capacity() > 64 && q.len() * 4 < q.capacity() {
        q.shrink_to(q.len() * 2);
    }
}

/// Per-shard cache of recent batches, bounded by `capacity_bytes`. Also carries the shard's
/// bounded cache of open sealed-segment files ([`OpenFiles`]), which every log of the shard
/// shares the same way.
pub struct BatchCache {
    capacity_bytes: usize,
    /// Size of a chunk: 1/64 of the bound, at most [`CACHE_CHUNK_BYTES_MAX`], so an eviction
    /// frees a small share of the cache.
    chunk_bytes: usize,
    /// Batches up to this size are copied into chunks.
    inline_max_bytes: usize,
    open_files: Rc<OpenFiles>,
    next_log_id: Cell<u64>,
    state: RefCell<CacheState>,
    hits: Cell<u64>,
    misses: Cell<u64>,
}

impl BatchCache {
    /// A cache of `capacity_bytes` of batches, with the default bound on open segment files
    /// ([`super::open_files::open_files_max_default`]).
    #[must_use]
    pub fn new(capacity_bytes: usize) -> Self {
        Self::with_open_files_max(capacity_bytes, super::open_files::open_files_max_default())
    }

    /// A cache of `capacity_bytes` of batches holding at most `open_files_max` idle sealed
    /// segment files open.
    #[must_use]
    pub fn with_open_files_max(capacity_bytes: usize, open_files_max: usize) -> Self {
        let chunk_bytes = (capacity_bytes / 64).clamp(64, CACHE_CHUNK_BYTES_MAX);
        Self {
            capacity_bytes,
            chunk_bytes,
            inline_max_bytes: (chunk_bytes / 4).min(CACHE_INLINE_MAX_BYTES),
            open_files: Rc::new(OpenFiles::new(open_files_max)),
            next_log_id: Cell::new(1),
            state: RefCell::default(),
            hits: Cell::new(0),
            misses: Cell::new(0),
        }
    }

    pub(crate) fn register_log(&self) -> u64 {
        let id = self.next_log_id.get();
        self.next_log_id.set(id + 1);
        id
    }

    /// Whether a batch of `log` starting at `base` is cached.
    #[cfg(test)]
    pub(crate) fn contains(&self, log: u64, base: i64) -> bool {
        let st = self.state.borrow();
        st.logs.get(&log).is_some_and(|es| {
            let i = es.partition_point(|e| e.base < base);
            es.get(i).is_some_and(|e| e.base == base)
        })
    }

    /// Caches `batch` unless a batch with the same (log, base) already is: the one cached
    /// stays. It holds the same records (truncation removes entries first; a cleaned copy
    /// of a batch keeps its base and last offset, and serving the uncleaned one is valid,
    /// as Kafka serves a segment before its cleaning); replacing it would only churn the
    /// allocator (a read-ahead over cached batches now skips them). A batch that overlaps a
    /// cached one without the same base is not cached (the cached one answers for it).
    pub(crate) fn insert(&self, log: u64, base: i64, last: i64, batch: Bytes) {
        self.put(log, base, last, &batch, || batch.clone());
    }

    /// As [`Self::insert`], for a batch that is a view of a larger buffer (a read-ahead's):
    /// copied once, into a chunk or into its own allocation, and only if it is cached. A
    /// slice would keep the whole buffer alive while the bound counts only the batch.
    pub(crate) fn insert_copy(&self, log: u64, base: i64, last: i64, batch: &[u8]) {
        self.put(log, base, last, batch, || Bytes::copy_from_slice(batch));
    }

    /// Caches the whole batches of a read-ahead's buffer without copying them: `buffer`
    /// becomes a chunk of its own, charged whole and evicted whole like any chunk, and each
    /// batch (`(base, last, start, end)` in `buffer`) not cached yet is an entry slicing it.
    /// A buffer larger than an eighth of the cache is copied batch by batch instead
    /// ([`Self::insert_copy`]), so one read-ahead cannot flush the tailing readers' data; so
    /// is one whose batches are mostly cached already.
    pub(crate) fn insert_adopted(
        &self,
        log: u64,
        buffer: &Bytes,
        batches: &[(i64, i64, usize, usize)],
    ) {
        let entries_cost = batches.len() * BATCH_CACHE_ENTRY_OVERHEAD_BYTES;
        // Mostly cached already (a read-ahead overlapping what the tail or an earlier
        // read-ahead holds): charging the whole buffer for the rest would waste the bound.
        let new_bytes: usize = {
            let st = self.state.borrow();
            batches
                .iter()
                .filter(|(base, last, ..)| st.slot(log, *base, *last).is_some())
                .map(|(_, _, start, end)| end.saturating_sub(*start))
                .sum()
        };
        if buffer.len() + entries_cost > self.capacity_bytes / 8 || new_bytes * 2 < buffer.len() {
            for &(base, last, start, end) in batches {
                self.insert_copy(log, base, last, &buffer[start..end]);
            }
            return;
        }
        let mut st = self.state.borrow_mut();
        let before = st.used_bytes;
        let st = &mut *st;
        let seq = st.next_chunk;
        st.next_chunk += 1;
        // Full from the start: later inserts open a chunk of their own.
        st.chunks.push_back(Chunk {
            seq,
            buffer_bytes: buffer.len(),
            filled_bytes: buffer.len().max(self.chunk_bytes),
        });
        st.buffer = BytesMut::new();
        st.used_bytes += buffer.len();
        st.adopted.insert(seq, buffer.clone());
        for &(base, last, start, end) in batches {
            if last < base || end > buffer.len() || start >= end {
                continue;
            }
            let Some(at) = st.slot(log, base, last) else { continue };
            let entry =
                Entry { base, last, chunk: seq, inline: true, batch: buffer.slice(start..end) };
            st.used_bytes += entry.charge();
            st.order.push_back((log, base, seq));
            st.logs.entry(log).or_default().insert(at, entry);
        }
        st.hold_bound(self.capacity_bytes, self.chunk_bytes);
        report_change(before, st.used_bytes);
    }

    /// Caches `batch`; `own` gives it as its own allocation when it is too large for a chunk.
    fn put(&self, log: u64, base: i64, last: i64, batch: &[u8], own: impl FnOnce() -> Bytes) {
        let len = batch.len();
        let inline = len <= self.inline_max_bytes;
        let cost =
            if inline { BATCH_CACHE_ENTRY_OVERHEAD_BYTES + self.chunk_bytes } else { charge(len) };
        if cost > self.capacity_bytes || last < base {
            return;
        }
        let mut st = self.state.borrow_mut();
        let before = st.used_bytes;
        let Some(at) = st.slot(log, base, last) else { return };
        st.chunk_for(len, inline, self.chunk_bytes);
        let st = &mut *st;
        let Some(chunk) = st.chunks.back_mut() else { return };
        chunk.filled_bytes += len;
        let stored = if inline {
            if chunk.buffer_bytes == 0 {
                st.buffer = BytesMut::with_capacity(self.chunk_bytes);
                chunk.buffer_bytes = st.buffer.capacity();
                st.used_bytes += chunk.buffer_bytes;
            }
            st.buffer.extend_from_slice(batch);
            st.buffer.split().freeze()
        } else {
            own()
        };
        let entry = Entry { base, last, chunk: chunk.seq, inline, batch: stored };
        st.used_bytes += entry.charge();
        st.order.push_back((log, base, entry.chunk));
        st.logs.entry(log).or_default().insert(at, entry);
        st.hold_bound(self.capacity_bytes, self.chunk_bytes);
        report_change(before, st.used_bytes);
    }

    /// The cached batch of `log` containing `offset`: (base, last, bytes). A small batch's
    /// bytes are a slice of a shared chunk: copy them before keeping them past the response.
    pub(crate) fn get(&self, log: u64, offset: i64) -> Option<(i64, i64, Bytes)> {
        let st = self.state.borrow();
        let found = st.logs.get(&log).and_then(|es| {
            let e = &es[CacheState::find(es, offset)?];
            Some((e.base, e.last, e.batch.clone()))
        });
        self.count_lookup(found.is_some());
        found
    }

    fn count_lookup(&self, hit: bool) {
        crate::metrics::cache(hit);
        let counter = if hit { &self.hits } else { &self.misses };
        counter.set(counter.get() + 1);
    }

    /// The batches of `log` from the one containing `offset`, as one slice of a read-ahead's
    /// adopted buffer (no copy): whole batches, consecutive in offsets and in the buffer,
    /// each with a last offset below `limit`, at most `max_bytes` together unless the first
    /// alone is larger. `None` unless the first batch is in an adopted buffer. Returns the
    /// last offset and the bytes; the slice keeps that buffer alive, so callers send it and
    /// drop it (the Fetch path), never keep it.
    pub(crate) fn get_run(
        &self,
        log: u64,
        offset: i64,
        max_bytes: usize,
        limit: i64,
    ) -> Option<(i64, Bytes)> {
        let st = self.state.borrow();
        let es = st.logs.get(&log)?;
        let i = CacheState::find(es, offset)?;
        let first = &es[i];
        let view = st.adopted.get(&first.chunk)?;
        if first.last >= limit {
            return None;
        }
        let start = (first.batch.as_ptr() as usize).checked_sub(view.as_ptr() as usize)?;
        let (mut end, mut last) = (start + first.batch.len(), first.last);
        for e in es.range(i + 1..) {
            let at = (e.batch.as_ptr() as usize).wrapping_sub(view.as_ptr() as usize);
            let fits = end - start + e.batch.len() <= max_bytes;
            if e.chunk != first.chunk || e.base != last + 1 || at != end || e.last >= limit || !fits
            {
                break;
            }
            end += e.batch.len();
            last = e.last;
        }
        if end > view.len() {
            return None;
        }
        self.count_lookup(true);
        Some((last, view.slice(start..end)))
    }

    /// How far the batches of `log` cached contiguously from `offset` reach: the first
    /// offset after them and their bytes, looking at most `max_bytes` ahead (not counted as
    /// lookups).
    pub(crate) fn cached_run(&self, log: u64, offset: i64, max_bytes: usize) -> (i64, usize) {
        let st = self.state.borrow();
        let (mut next, mut bytes) = (offset, 0usize);
        let Some(es) = st.logs.get(&log) else { return (next, bytes) };
        let Some(mut i) = CacheState::find(es, offset) else { return (next, bytes) };
        while bytes < max_bytes {
            let Some(e) = es.get(i).filter(|e| e.base <= next && e.last >= next) else { break };
            bytes += e.batch.len();
            next = e.last + 1;
            i += 1;
        }
        (next, bytes)
    }

    /// Drops every batch of `log` with a last offset >= `from` (truncation). Their bytes in a
    /// chunk stay charged until the chunk goes.
    pub(crate) fn invalidate_from(&self, log: u64, from: i64) {
        let mut st = self.state.borrow_mut();
        let before = st.used_bytes;
        let st = &mut *st;
        if let Some(es) = st.logs.get_mut(&log) {
            let i = es.partition_point(|e| e.last < from);
            let freed: usize = es.drain(i..).map(|e| e.charge()).sum();
            st.used_bytes -= freed;
            if es.is_empty() {
                st.logs.remove(&log);
            } else {
                shrink(es);
            }
        }
        report_change(before, st.used_bytes);
    }

    /// The shard's cache of open sealed-segment files.
    #[must_use]
    pub fn open_files(&self) -> &Rc<OpenFiles> {
        &self.open_files
    }

    /// Bytes charged against the bound: the chunks' buffers, the batches with their own
    /// allocation, and each entry's bookkeeping.
    #[must_use]
    pub fn used_bytes(&self) -> usize {
        self.state.borrow().used_bytes
    }

    /// (hits, misses) since creation.
    #[must_use]
    pub fn hit_counts(&self) -> (u64, u64) {
        (self.hits.get(), self.misses.get())
    }
}

/// Moves the shard's cache-bytes gauge by the change from `before` to `after`.
fn report_change(before: usize, after: usize) {
    if before != after {
        let delta = i64::try_from(after).unwrap_or(i64::MAX) - i64::try_from(before).unwrap_or(0);
        crate::metrics::adjust(crate::metrics::Level::BatchCacheBytes, delta);
    }
}

impl Drop for BatchCache {
    fn drop(&mut self) {
        report_change(self.state.get_mut().used_bytes, 0);
    }
}

impl Default for BatchCache {
    fn default() -> Self {
        Self::new(
            usize::try_from(crate::constants::BATCH_CACHE_BYTES_DEFAULT).unwrap_or(usize::MAX),
        )
    }
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
