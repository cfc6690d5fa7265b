//! The per-shard bounded cache of open sealed-segment files, so file descriptors stay
//! bounded however many partitions and segments a shard holds (issue 19).
//!
//! One per shard, inside the shard's [`super::BatchCache`] (shared by every log of the shard
//! through `Rc`). The active segment of each log and any sealed segment the writer has not
//! finalized yet keep their own open file (`Segment::pinned_file`); a finalized sealed
//! segment has none and is opened on first use through this cache
//! (`LogInner::segment_file`), keyed by a [`FileSlot`] the segment owns.
//!
//! Invariants:
//! - at most `capacity` files are held, except while more than `capacity` of them are in
//!   use at once (each read holds an `Rc` of its file, its lease, until it finishes);
//! - a file is never closed while leased: eviction takes the least recently used entry that
//!   nobody else holds (`Rc::strong_count == 1`) and skips leased ones; dropping the cache's
//!   `Rc` of an idle file closes it (glommio closes a dropped DMA file on its next I/O
//!   cycle), a leased one closes when its last reader drops it;
//! - an entry lives no longer than its segment: dropping the segment drops its
//!   [`FileSlot`], which removes the entry (retention, truncation and cleaner swaps must not
//!   keep a deleted file's blocks alive through a cached descriptor).
//!
//! The files are type-erased (`Rc<dyn Any>`) so the cache is not generic over the file
//! system (one cache serves every log of the shard, as the batch cache does).

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use super::error::StorageError;
use super::log::LogInner;
use crate::io::{DataFile, FileSystem};

/// A file as the cache holds it.
type Held = Rc<dyn Any>;

#[derive(Default)]
struct Lru {
    /// slot id -> (file, last-use tick).
    entries: HashMap<u64, (Held, u64)>,
    /// last-use tick -> slot id, oldest first.
    by_use: BTreeMap<u64, u64>,
    tick: u64,
}

impl Lru {
    fn touch(&mut self, slot: u64) {
        self.tick += 1;
        let tick = self.tick;
        if let Some((_, used)) = self.entries.get_mut(&slot) {
            self.by_use.remove(used);
            *used = tick;
            self.by_use.insert(tick, slot);
        }
    }

    fn take(&mut self, slot: u64) -> Option<Held> {
        let (file, used) = self.entries.remove(&slot)?;
        self.by_use.remove(&used);
        Some(file)
    }
}

/// Counters of one shard's cache, for tests and the results in `perf/results/`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenFilesStats {
    /// Files held now (idle or leased).
    pub held: usize,
    /// Lookups answered with a held file.
    pub hits: u64,
    /// Files inserted (opened by a reader).
    pub opened: u64,
    /// Idle files dropped to stay under the bound.
    pub evicted: u64,
}

/// The bounded LRU of open segment files. See the module docs.
pub struct OpenFiles {
    capacity: usize,
    next_slot: Cell<u64>,
    lru: RefCell<Lru>,
    hits: Cell<u64>,
    opened: Cell<u64>,
    evicted: Cell<u64>,
}

/// A segment's key in its shard's [`OpenFiles`]; dropping it removes (and, if idle, closes)
/// the cached file.
pub struct FileSlot {
    files: Rc<OpenFiles>,
    id: u64,
}

impl FileSlot {
    #[must_use]
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for FileSlot {
    fn drop(&mut self) {
        self.files.remove(self.id);
    }
}

impl std::fmt::Debug for FileSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSlot").field("id", &self.id).finish()
    }
}

impl OpenFiles {
    /// A cache holding at most `capacity` idle files (at least 1).
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        OpenFiles {
            capacity: capacity.max(1),
            next_slot: Cell::new(1),
            lru: RefCell::default(),
            hits: Cell::new(0),
            opened: Cell::new(0),
            evicted: Cell::new(0),
        }
    }

    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// A new key for one segment's file.
    #[must_use]
    pub fn slot(self: &Rc<Self>) -> FileSlot {
        let id = self.next_slot.get();
        self.next_slot.set(id + 1);
        FileSlot { files: self.clone(), id }
    }

    /// The file held for `slot`, leased (the returned `Rc` keeps it open), marked most
    /// recently used. `None` if not held or held with another type.
    #[must_use]
    pub fn get<T: 'static>(&self, slot: u64) -> Option<Rc<T>> {
        let mut lru = self.lru.borrow_mut();
        let held = lru.entries.get(&slot)?.0.clone();
        let file = held.downcast::<T>().ok()?;
        lru.touch(slot);
        self.hits.set(self.hits.get() + 1);
        Some(file)
    }

    /// Holds `file` for `slot` and returns it leased. If another task opened the same slot
    /// meanwhile, that file is kept and returned instead (`file` is dropped, so closed).
    /// Then drops idle least-recently-used files until at most `capacity` are held.
    pub fn insert<T: 'static>(&self, slot: u64, file: Rc<T>) -> Rc<T> {
        if let Some(existing) = self.get::<T>(slot) {
            return existing;
        }
        let dropped = {
            let mut lru = self.lru.borrow_mut();
            lru.tick += 1;
            let tick = lru.tick;
            if let Some(old) = lru.take(slot) {
                drop(old); // held with another type: cannot be ours, replace it
            }
            lru.entries.insert(slot, (file.clone() as Held, tick));
            lru.by_use.insert(tick, slot);
            self.evict_idle(&mut lru)
        };
        self.opened.set(self.opened.get() + 1);
        // Closed here, outside the borrow.
        drop(dropped);
        file
    }

    /// Idle files past the bound, oldest first, taken out of `lru` (dropped by the caller).
    fn evict_idle(&self, lru: &mut Lru) -> Vec<Held> {
        let mut out = Vec::new();
        if lru.entries.len() <= self.capacity {
            return out;
        }
        let excess = lru.entries.len() - self.capacity;
        let idle: Vec<u64> = lru
            .by_use
            .values()
            .copied()
            .filter(|slot| lru.entries.get(slot).is_some_and(|(f, _)| Rc::strong_count(f) == 1))
            .take(excess)
            .collect();
        for slot in idle {
            if let Some(f) = lru.take(slot) {
                out.push(f);
            }
        }
        self.evicted.set(self.evicted.get() + out.len() as u64);
        out
    }

    /// Drops the file held for `slot` (closed now if idle, else when its last lease ends).
    pub fn remove(&self, slot: u64) {
        let file = self.lru.borrow_mut().take(slot);
        drop(file);
    }

    /// Drops idle files until at most `capacity` are held (after a burst of concurrent
    /// reads left the cache above its bound).
    pub fn trim(&self) {
        let dropped = self.evict_idle(&mut self.lru.borrow_mut());
        drop(dropped);
    }

    #[must_use]
    pub fn stats(&self) -> OpenFilesStats {
        OpenFilesStats {
            held: self.lru.borrow().entries.len(),
            hits: self.hits.get(),
            opened: self.opened.get(),
            evicted: self.evicted.get(),
        }
    }
}

impl<F: FileSystem> LogInner<F> {
    /// The open file of segment `base`, leased for one read: its own file if it has one
    /// (unfinalized), else the shard cache's, opening it on a miss. `None` if the segment is
    /// no longer in the log (deleted by retention, truncation or a cleaner swap meanwhile).
    pub async fn segment_file(&self, base: i64) -> Result<Option<Rc<F::File>>, StorageError> {
        let files = self.cache.open_files().clone();
        let (slot, path) = {
            let mut st = self.st.borrow_mut();
            if st.closed {
                return Err(StorageError::Closed { path: self.dir.clone() });
            }
            let Some(seg) = st.segments.get_mut(&base) else { return Ok(None) };
            if let Some(file) = &seg.pinned_file {
                return Ok(Some(file.clone()));
            }
            let slot = seg.slot.get_or_insert_with(|| files.slot()).id();
            if let Some(file) = files.get::<F::File>(slot) {
                return Ok(Some(file));
            }
            (slot, seg.path.clone())
        };
        let opened = self.fs.open(&path, false).await;
        // The segment may have left the log (its file renamed or removed) during the open.
        let still_here = {
            let st = self.st.borrow();
            st.segments.get(&base).and_then(|s| s.slot.as_ref()).is_some_and(|s| s.id() == slot)
        };
        if !still_here {
            if let Ok(file) = opened {
                let _ = file.close().await;
            }
            return Ok(None);
        }
        let file = opened.map_err(StorageError::io("open", &path, 0))?;
        Ok(Some(files.insert(slot, Rc::new(file))))
    }
}

/// The per-shard bound: [`crate::constants::LOG_SEGMENT_OPEN_FILES_MAX_DEFAULT`], or the
/// `SHARDLOG_SEGMENT_OPEN_FILES_MAX` environment variable (files, at least 1) read once per
/// process: an operator's knob until it is a broker setting, and the tests' small bound.
#[must_use]
pub fn open_files_max_default() -> usize {
    static VALUE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *VALUE.get_or_init(|| {
        std::env::var("SHARDLOG_SEGMENT_OPEN_FILES_MAX")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .filter(|n| *n >= 1)
            .unwrap_or(crate::constants::LOG_SEGMENT_OPEN_FILES_MAX_DEFAULT)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that records whether it was dropped (closed).
    struct Probe(Rc<Cell<bool>>);

    impl Drop for Probe {
        fn drop(&mut self) {
            self.0.set(true);
        }
    }

    fn probe() -> (Rc<Probe>, Rc<Cell<bool>>) {
        let closed = Rc::new(Cell::new(false));
        (Rc::new(Probe(closed.clone())), closed)
    }

    #[test]
    fn bound_holds_and_least_recently_used_goes_first() {
        let files = Rc::new(OpenFiles::new(2));
        let slots: Vec<FileSlot> = (0..4).map(|_| files.slot()).collect();
        let mut closed = Vec::new();
        for s in &slots[..2] {
            let (f, c) = probe();
            drop(files.insert(s.id(), f));
            closed.push(c);
        }
        // Touch the first: the second is now the least recently used.
        assert!(files.get::<Probe>(slots[0].id()).is_some());
        let (f, c) = probe();
        drop(files.insert(slots[2].id(), f));
        closed.push(c);
        assert_eq!(files.stats().held, 2);
        assert!(!closed[0].get() && closed[1].get() && !closed[2].get());
        assert!(files.get::<Probe>(slots[1].id()).is_none());
        for (i, s) in slots.iter().enumerate() {
            let (f, _) = probe();
            drop(files.insert(s.id(), f));
            assert!(files.stats().held <= 2, "after insert {i}");
        }
        assert_eq!(files.stats().evicted, 4);
    }

    #[test]
    fn eviction_never_closes_a_leased_file() {
        let files = Rc::new(OpenFiles::new(1));
        let (a, b, c) = (files.slot(), files.slot(), files.slot());
        let (fa, closed_a) = probe();
        let lease_a = files.insert(a.id(), fa);
        let (fb, closed_b) = probe();
        let lease_b = files.insert(b.id(), fb);
        // Both leased: over the bound, nothing closed.
        assert_eq!(files.stats().held, 2);
        assert!(!closed_a.get() && !closed_b.get());
        drop(lease_b);
        let (fc, closed_c) = probe();
        drop(files.insert(c.id(), fc));
        // `a` is older but leased: `b` (idle) goes; `c` is idle too but newest.
        assert!(!closed_a.get() && closed_b.get() && !closed_c.get());
        assert_eq!(files.stats().held, 2);
        drop(lease_a);
        files.trim();
        assert!(closed_a.get(), "idle once released, then trimmed");
        assert_eq!(files.stats().held, 1);
    }

    #[test]
    fn dropping_the_slot_removes_its_file_but_not_under_a_reader() {
        let files = Rc::new(OpenFiles::new(4));
        let slot = files.slot();
        let (f, closed) = probe();
        let lease = files.insert(slot.id(), f);
        drop(slot);
        assert_eq!(files.stats().held, 0);
        assert!(!closed.get(), "the reader still holds it");
        drop(lease);
        assert!(closed.get());
    }

    #[test]
    fn a_second_open_of_one_slot_keeps_the_first() {
        let files = Rc::new(OpenFiles::new(4));
        let slot = files.slot();
        let (f1, closed1) = probe();
        let first = files.insert(slot.id(), f1);
        let (f2, closed2) = probe();
        let second = files.insert(slot.id(), f2);
        assert!(Rc::ptr_eq(&first, &second));
        assert!(!closed1.get() && closed2.get());
    }
}
