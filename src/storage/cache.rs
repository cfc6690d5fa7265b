//! The per-shard cache of recent batches, so tailing readers are served from memory (there
//! is no page cache under O_DIRECT).
//!
//! One per shard, shared by every log of that shard through `Rc`. Bounded by bytes; evicts
//! the oldest insertions first (recent batches are what tailing consumers read). The bound
//! counts what an entry really holds: its bytes plus [`BATCH_CACHE_ENTRY_OVERHEAD_BYTES`] of
//! bookkeeping (for the ~100-byte batches of a low-linger producer the bookkeeping is more than
//! the batch), so `used_bytes` and the `shardlog_batch_cache_bytes` gauge track the heap the
//! cache keeps. Callers insert compact batches (their own allocation, not a view of a request
//! frame or read buffer), which the bound cannot see through. Entries are
//! whole stored batches keyed by (log id, base offset). The shard's open-file cache
//! (`storage::open_files`) rides along, so every log of the shard finds it the same way.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use bytes::Bytes;

use super::open_files::OpenFiles;
use crate::constants::BATCH_CACHE_ENTRY_OVERHEAD_BYTES;

/// What an entry of `len` bytes costs against the cache's bound.
fn charge(len: usize) -> usize {
    len + BATCH_CACHE_ENTRY_OVERHEAD_BYTES
}

#[derive(Default)]
struct CacheState {
    entries: BTreeMap<(u64, i64), (i64, Bytes)>,
    order: VecDeque<(u64, i64)>,
    used_bytes: usize,
}

/// Per-shard cache of recent batches, bounded by `capacity_bytes`. Also carries the shard's
/// bounded cache of open sealed-segment files ([`OpenFiles`]), which every log of the shard
/// shares the same way.
pub struct BatchCache {
    capacity_bytes: usize,
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
        Self {
            capacity_bytes,
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
    pub(crate) fn contains(&self, log: u64, base: i64) -> bool {
        self.state.borrow().entries.contains_key(&(log, base))
    }

    /// Caches `batch` unless a batch with the same (log, base) already is: the one cached
    /// stays. It holds the same records (truncation removes entries first; a cleaned copy
    /// of a batch keeps its base and last offset, and serving the uncleaned one is valid,
    /// as Kafka serves a segment before its cleaning); replacing it would only churn the
    /// allocator (a read-ahead over cached batches now skips them).
    pub(crate) fn insert(&self, log: u64, base: i64, last: i64, batch: Bytes) {
        if charge(batch.len()) > self.capacity_bytes {
            return;
        }
        let mut st = self.state.borrow_mut();
        let std::collections::btree_map::Entry::Vacant(slot) = st.entries.entry((log, base)) else {
            return;
        };
        let charged = charge(batch.len());
        slot.insert((last, batch));
        let before = st.used_bytes;
        st.used_bytes += charged;
        st.order.push_back((log, base));
        while st.used_bytes > self.capacity_bytes {
            let Some(key) = st.order.pop_front() else { break };
            if let Some((_, b)) = st.entries.remove(&key) {
                st.used_bytes -= charge(b.len());
            }
        }
        report_change(before, st.used_bytes);
    }

    /// The cached batch of `log` containing `offset`: (base, last, bytes).
    pub(crate) fn get(&self, log: u64, offset: i64) -> Option<(i64, i64, Bytes)> {
        let st = self.state.borrow();
        let found = st
            .entries
            .range((log, i64::MIN)..=(log, offset))
            .next_back()
            .filter(|(_, (last, _))| *last >= offset)
            .map(|((_, base), (last, b))| (*base, *last, b.clone()));
        crate::metrics::cache(found.is_some());
        let counter = if found.is_some() { &self.hits } else { &self.misses };
        counter.set(counter.get() + 1);
        found
    }

    /// How far the batches of `log` cached contiguously from `offset` reach: the first
    /// offset after them and their bytes, looking at most `max_bytes` ahead (not counted as
    /// lookups).
    pub(crate) fn cached_run(&self, log: u64, offset: i64, max_bytes: usize) -> (i64, usize) {
        let st = self.state.borrow();
        let (mut next, mut bytes) = (offset, 0usize);
        while bytes < max_bytes {
            let found = st
                .entries
                .range((log, i64::MIN)..=(log, next))
                .next_back()
                .filter(|(_, (last, _))| *last >= next);
            let Some((_, (last, b))) = found else { break };
            bytes += b.len();
            next = last + 1;
        }
        (next, bytes)
    }

    /// Drops every batch of `log` with a last offset >= `from` (truncation).
    pub(crate) fn invalidate_from(&self, log: u64, from: i64) {
        let mut st = self.state.borrow_mut();
        let before = st.used_bytes;
        let doomed: Vec<(u64, i64)> = st
            .entries
            .range((log, i64::MIN)..=(log, i64::MAX))
            .filter(|(_, (last, _))| *last >= from)
            .map(|(k, _)| *k)
            .collect();
        for k in doomed {
            if let Some((_, b)) = st.entries.remove(&k) {
                st.used_bytes -= charge(b.len());
            }
        }
        let st = &mut *st;
        st.order.retain(|k| st.entries.contains_key(k));
        report_change(before, st.used_bytes);
    }

    /// The shard's cache of open sealed-segment files.
    #[must_use]
    pub fn open_files(&self) -> &Rc<OpenFiles> {
        &self.open_files
    }

    /// Bytes charged against the bound: the batches' bytes plus each entry's bookkeeping.
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
        Self::new(crate::constants::BATCH_CACHE_BYTES_DEFAULT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_oldest_and_finds_containing_batch() {
        let c = BatchCache::new(2 * charge(4) + 2);
        c.insert(1, 0, 4, Bytes::from_static(b"aaaa"));
        c.insert(1, 5, 9, Bytes::from_static(b"bbbb"));
        assert_eq!(c.get(1, 7).map(|e| e.0), Some(5));
        c.insert(1, 10, 10, Bytes::from_static(b"cccc"));
        assert!(c.get(1, 2).is_none(), "oldest evicted");
        assert!(c.used_bytes() <= 2 * charge(4) + 2);
        c.invalidate_from(1, 9);
        assert!(c.get(1, 10).is_none() && c.get(1, 5).is_none());
    }

    #[test]
    fn a_cached_batch_is_kept_when_the_same_batch_is_inserted_again() {
        let c = BatchCache::new(1 << 20);
        c.insert(1, 0, 4, Bytes::from_static(b"first"));
        c.insert(1, 0, 4, Bytes::from_static(b"again"));
        assert!(c.contains(1, 0) && !c.contains(1, 5));
        assert_eq!(c.get(1, 2).map(|e| e.2), Some(Bytes::from_static(b"first")));
        assert_eq!(c.used_bytes(), charge(5));
    }

    #[test]
    fn bound_counts_each_entrys_bookkeeping() {
        // 100-byte batches (a low-linger producer's): the bound holds the bookkeeping too, so
        // a 64 KiB cache keeps ~220 of them, not 655.
        let cap = 64 * 1024;
        let c = BatchCache::new(cap);
        for i in 0..10_000 {
            c.insert(1, i, i, Bytes::from(vec![0u8; 100]));
        }
        assert_eq!(c.used_bytes(), (cap / charge(100)) * charge(100));
        assert!(c.get(1, 10_000 - 1).is_some());
        assert!(c.get(1, 10_000 - 1 - (cap / charge(100)) as i64).is_none());
        c.invalidate_from(1, 0);
        assert_eq!(c.used_bytes(), 0);
        // An entry whose bookkeeping alone passes the bound is not cached.
        let tiny = BatchCache::new(BATCH_CACHE_ENTRY_OVERHEAD_BYTES);
        tiny.insert(1, 0, 0, Bytes::from_static(b"x"));
        assert_eq!((tiny.used_bytes(), tiny.get(1, 0).is_none()), (0, true));
    }
}
