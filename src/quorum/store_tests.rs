//! Unit tests of [`super::store::RaftStore`] on the fault-injecting in-memory file system:
//! restart, power loss, torn tail, CRC damage, tail replacement, compaction and a crash
//! between a snapshot and its log rewrite.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures::executor::block_on;
use raft::prelude::{ConfState, Entry, HardState};

use super::codec;
use super::node::Compaction;
use super::store::{bootstrap_snapshot, RaftStore, Recovered, LOG_FILE, SNAPSHOT_FILE};
use crate::io::mem::{FaultPlan, MemFileSystem};
use crate::io::FileSystem;

fn dir() -> PathBuf {
    PathBuf::from("/data/quorum")
}

fn voters() -> ConfState {
    ConfState::from((vec![1, 2, 3], vec![4]))
}

fn entry(index: u64, term: u64) -> Entry {
    let data = Bytes::from(format!("e{index}t{term}"));
    Entry { index, term, data, ..Entry::default() }
}

fn entries(range: std::ops::RangeInclusive<u64>, term: u64) -> Vec<Entry> {
    range.map(|i| entry(i, term)).collect()
}

fn hs(term: u64, vote: u64, commit: u64) -> HardState {
    HardState { term, vote, commit, ..HardState::default() }
}

fn open(fs: &MemFileSystem) -> (RaftStore<MemFileSystem>, Recovered) {
    block_on(RaftStore::open(fs.clone(), &dir(), &voters())).expect("open")
}

fn save(store: &mut RaftStore<MemFileSystem>, ents: &[Entry], h: Option<HardState>) {
    block_on(store.save(None, ents, h.as_ref(), true)).expect("save");
}

fn indexes(rec: &Recovered) -> Vec<(u64, u64)> {
    rec.entries.iter().map(|e| (e.index, e.term)).collect()
}

#[test]
fn bootstrap_then_restart_keeps_entries_and_vote() {
    let fs = MemFileSystem::new();
    let (mut store, rec) = open(&fs);
    assert_eq!(rec.snapshot.get_metadata().index, 0);
    assert_eq!(rec.snapshot.get_metadata().get_conf_state(), &voters());
    assert!(rec.entries.is_empty());
    save(&mut store, &entries(1..=5, 1), Some(hs(1, 2, 3)));
    for image in [fs.crash(), fs.power_loss()] {
        let (_, rec) = open(&image);
        assert_eq!(rec.entries, entries(1..=5, 1));
        assert_eq!(rec.hard_state, hs(1, 2, 3));
        assert_eq!(rec.snapshot.get_metadata().get_conf_state(), &voters());
    }
}

#[test]
fn unsynced_hard_state_is_lost_on_power_loss_only() {
    let fs = MemFileSystem::new();
    let (mut store, _) = open(&fs);
    save(&mut store, &entries(1..=2, 1), Some(hs(1, 1, 0)));
    block_on(store.save(None, &[], Some(&hs(1, 1, 2)), false)).expect("save");
    assert_eq!(open(&fs.crash()).1.hard_state, hs(1, 1, 2));
    assert_eq!(open(&fs.power_loss()).1.hard_state, hs(1, 1, 0));
}

/// Bytes of a log holding the bootstrap mark and hard state, then `ents`.
fn log_bytes(ents: &[Entry]) -> usize {
    let mut recs = vec![
        codec::Record::Mark { index: 0, term: 0 },
        codec::Record::HardState(HardState::default()),
    ];
    recs.extend(ents.iter().cloned().map(codec::Record::Entry));
    recs.iter().map(|r| codec::frame(&codec::encode_record(r)).len()).sum()
}

#[test]
fn torn_write_fails_the_store_and_replay_drops_the_torn_record() {
    let fs = MemFileSystem::new();
    let (mut store, _) = open(&fs);
    save(&mut store, &entries(1..=3, 1), None);
    // The next write starts at 0 (rewriting the partial page): keep entry 4 whole and 3
    // bytes of entry 5.
    let torn_at = log_bytes(&entries(1..=4, 1)) + 3;
    fs.set_faults(FaultPlan { tear_write: Some((1, torn_at)), ..FaultPlan::default() });
    assert!(block_on(store.save(None, &entries(4..=6, 1), None, true)).is_err());
    let again = block_on(store.save(None, &entries(4..=4, 1), None, true));
    assert!(matches!(again, Err(super::QuorumError::Failed(_))), "{again:?}");
    let crashed = fs.crash();
    let (mut store, rec) = open(&crashed);
    assert_eq!(indexes(&rec), vec![(1, 1), (2, 1), (3, 1), (4, 1)]);
    // A shorter rewrite must not resurrect what the torn write left behind it.
    save(&mut store, &entries(5..=5, 2), None);
    let (_, rec) = open(&crashed.power_loss());
    assert_eq!(indexes(&rec), vec![(1, 1), (2, 1), (3, 1), (4, 1), (5, 2)]);
}

#[test]
fn failed_sync_fails_the_store() {
    let fs = MemFileSystem::new();
    let (mut store, _) = open(&fs);
    fs.set_faults(FaultPlan { fail_sync: Some(1), ..FaultPlan::default() });
    assert!(block_on(store.save(None, &entries(1..=1, 1), None, true)).is_err());
    assert!(block_on(store.save(None, &entries(1..=1, 1), None, true)).is_err());
    assert!(open(&fs.power_loss()).1.entries.is_empty());
}

#[test]
fn a_bad_crc_ends_the_replay() {
    let fs = MemFileSystem::new();
    let (mut store, _) = open(&fs);
    save(&mut store, &entries(1..=3, 1), None);
    // A byte of entry 3's data (its last 4 bytes are the empty context's length).
    let pos = log_bytes(&entries(1..=3, 1)) - 6;
    fs.corrupt(&dir().join(LOG_FILE), pos, &[0xff]);
    let (_, rec) = open(&fs.crash());
    assert_eq!(indexes(&rec), vec![(1, 1), (2, 1)]);
}

#[test]
fn a_later_entry_replaces_the_tail() {
    let fs = MemFileSystem::new();
    let (mut store, _) = open(&fs);
    save(&mut store, &entries(1..=5, 1), Some(hs(1, 1, 2)));
    save(&mut store, &entries(3..=4, 2), Some(hs(2, 3, 2)));
    let (_, rec) = open(&fs.power_loss());
    assert_eq!(indexes(&rec), vec![(1, 1), (2, 1), (3, 2), (4, 2)]);
    assert_eq!(rec.hard_state, hs(2, 3, 2));
}

fn compaction(index: u64, term: u64, rest: Vec<Entry>, h: HardState) -> Compaction {
    let mut snapshot = bootstrap_snapshot(&voters());
    snapshot.mut_metadata().index = index;
    snapshot.mut_metadata().term = term;
    snapshot.data = Bytes::from_static(b"state");
    Compaction { snapshot, entries: rest, hard_state: h }
}

#[test]
fn compaction_rewrites_the_log_after_the_snapshot() {
    let fs = MemFileSystem::new();
    let (mut store, _) = open(&fs);
    save(&mut store, &entries(1..=10, 1), Some(hs(1, 1, 8)));
    let log = dir().join(LOG_FILE);
    let before = fs.file_content(&log).expect("log").len();
    block_on(store.compact(&compaction(6, 1, entries(7..=10, 1), hs(1, 1, 8)))).expect("compact");
    assert!(fs.file_content(&log).expect("log").len() < before);
    save(&mut store, &entries(11..=11, 1), None);
    let (_, rec) = open(&fs.power_loss());
    assert_eq!(rec.snapshot.get_metadata().index, 6);
    assert_eq!(rec.snapshot.data, Bytes::from_static(b"state"));
    assert_eq!(rec.snapshot.get_metadata().get_conf_state(), &voters());
    assert_eq!(rec.entries, entries(7..=11, 1));
    assert_eq!(rec.hard_state, hs(1, 1, 8));
}

/// A snapshot file newer than the log: the crash came between the two renames.
fn snapshot_ahead_of_log(snap_term: u64) -> Recovered {
    let fs = MemFileSystem::new();
    let (mut store, _) = open(&fs);
    save(&mut store, &entries(1..=10, 1), Some(hs(1, 1, 4)));
    let snap = compaction(6, snap_term, Vec::new(), hs(1, 1, 6)).snapshot;
    let path = dir().join(SNAPSHOT_FILE);
    block_on(fs.write_file_atomic(&path, &codec::frame(&codec::encode_snapshot(&snap))))
        .expect("write snapshot");
    let image = fs.power_loss();
    let (_, rec) = open(&image);
    // The reconciled log was rewritten: a second restart sees the same.
    let (_, again) = open(&image.power_loss());
    assert_eq!(indexes(&rec), indexes(&again));
    rec
}

#[test]
fn a_log_behind_the_snapshot_keeps_entries_that_agree_with_it() {
    let rec = snapshot_ahead_of_log(1);
    assert_eq!(rec.snapshot.get_metadata().index, 6);
    assert_eq!(indexes(&rec), (7..=10).map(|i| (i, 1)).collect::<Vec<_>>());
    assert_eq!(rec.hard_state.commit, 6, "commit raised to the snapshot");
}

#[test]
fn a_log_behind_the_snapshot_that_disagrees_is_dropped() {
    let rec = snapshot_ahead_of_log(2);
    assert_eq!(rec.snapshot.get_metadata().index, 6);
    assert!(rec.entries.is_empty());
}

#[test]
fn a_log_without_its_snapshot_is_refused() {
    let fs = MemFileSystem::new();
    drop(open(&fs));
    block_on(fs.remove_file(&dir().join(SNAPSHOT_FILE))).expect("remove");
    let r = block_on(RaftStore::open(fs.clone(), Path::new("/data/quorum"), &voters()));
    assert!(matches!(r, Err(super::QuorumError::Corrupt { .. })));
}
