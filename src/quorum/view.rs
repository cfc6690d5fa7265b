//! [`LogView`]: the in-memory image of what the store holds durably — the latest snapshot (with
//! its data, so a leader can send it), the entries after it, the hard state — which raft-rs
//! reads through its `Storage` trait.
//!
//! Owned by one [`super::QuorumNode`] (raft-rs's `RawNode` holds it). It changes only after
//! the store has made the change durable: [`super::QuorumNode::advance`] appends what was
//! persisted, [`super::QuorumNode::compact`] drops what a durable snapshot covers, and a
//! restart rebuilds it from [`super::store::Recovered`]. Invariants: `entries[i].index ==
//! snapshot index + 1 + i`; `hard_state.commit >= snapshot index`.

use raft::prelude::{ConfState, Entry, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, StorageError};

use super::store::Recovered;

/// The log as raft-rs sees it. See the module docs.
#[derive(Clone, Debug, Default)]
pub struct LogView {
    snapshot: Snapshot,
    entries: Vec<Entry>,
    hard_state: HardState,
}

impl LogView {
    /// The view of a recovered store.
    #[must_use]
    pub fn from_recovered(rec: Recovered) -> Self {
        let mut hard_state = rec.hard_state;
        hard_state.commit = hard_state.commit.max(rec.snapshot.get_metadata().index);
        Self { snapshot: rec.snapshot, entries: rec.entries, hard_state }
    }

    /// Index of the last entry the snapshot covers (0: none).
    #[must_use]
    pub fn snapshot_index(&self) -> u64 {
        self.snapshot.get_metadata().index
    }

    /// The latest snapshot.
    #[must_use]
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The membership as of the latest snapshot.
    #[must_use]
    pub fn conf_state(&self) -> &ConfState {
        self.snapshot.get_metadata().get_conf_state()
    }

    #[must_use]
    pub fn hard_state(&self) -> &HardState {
        &self.hard_state
    }

    /// Entries after the snapshot.
    #[must_use]
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    #[must_use]
    pub fn last(&self) -> u64 {
        self.snapshot_index() + self.entries.len() as u64
    }

    /// The entry at `index`, if the view holds it (not compacted, not past the end).
    #[must_use]
    pub fn entry(&self, index: u64) -> Option<&Entry> {
        let pos = index.checked_sub(self.snapshot_index() + 1)?;
        self.entries.get(usize::try_from(pos).ok()?)
    }

    /// The term of `index` where known (the snapshot's own index included).
    #[must_use]
    pub fn term_of(&self, index: u64) -> Option<u64> {
        if index == self.snapshot_index() {
            return Some(self.snapshot.get_metadata().term);
        }
        self.entry(index).map(|e| e.term)
    }

    /// Appends persisted entries, replacing any suffix they overwrite (a new leader's log
    /// wins over an uncommitted tail).
    ///
    /// # Panics
    /// If the entries would leave a gap or reach below the snapshot: raft-rs never hands out
    /// such entries, so the state is corrupt.
    pub fn append(&mut self, new: &[Entry]) {
        let Some(first) = new.first() else { return };
        let base = self.snapshot_index();
        assert!(first.index > base, "append at {} below snapshot {base}", first.index);
        assert!(
            first.index <= self.last() + 1,
            "gap: append {} after {}",
            first.index,
            self.last()
        );
        let keep = usize::try_from(first.index - base - 1).unwrap_or(usize::MAX);
        self.entries.truncate(keep);
        self.entries.extend_from_slice(new);
    }

    pub fn set_hard_state(&mut self, hs: HardState) {
        self.hard_state = hs;
    }

    pub fn set_commit(&mut self, commit: u64) {
        self.hard_state.commit = commit;
    }

    /// Installs a snapshot: entries it covers go; entries after it stay only if the snapshot
    /// is a local compaction (its index and term match an entry we hold); a snapshot received
    /// from a leader replaces the whole log.
    pub fn apply_snapshot(&mut self, snap: Snapshot) {
        let (index, term) = (snap.get_metadata().index, snap.get_metadata().term);
        if self.term_of(index) == Some(term) && index >= self.snapshot_index() {
            let drop = usize::try_from(index - self.snapshot_index()).unwrap_or(usize::MAX);
            self.entries.drain(..drop.min(self.entries.len()));
        } else {
            self.entries.clear();
        }
        self.hard_state.commit = self.hard_state.commit.max(index);
        self.snapshot = snap;
    }
}

impl raft::Storage for LogView {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(self.hard_state.clone(), self.conf_state().clone()))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let base = self.snapshot_index();
        if low <= base {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > self.last() + 1 {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let lo = usize::try_from(low - base - 1).map_err(|_| StorageError::Unavailable)?;
        let hi = usize::try_from(high - base - 1).map_err(|_| StorageError::Unavailable)?;
        let mut out = self.entries[lo..hi].to_vec();
        raft::util::limit_size(&mut out, max_size.into());
        Ok(out)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        if idx < self.snapshot_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        self.term_of(idx).ok_or(raft::Error::Store(StorageError::Unavailable))
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.snapshot_index() + 1)
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.last())
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        if self.snapshot_index() < request_index {
            return Err(raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable));
        }
        Ok(self.snapshot.clone())
    }
}
