//! Unit tests of [`super::QuorumNode`]'s ready contract with one voter and its store: elect,
//! propose, commit, compact, restart from disk.

use std::path::Path;

use bytes::Bytes;
use futures::executor::block_on;
use raft::prelude::ConfState;

use super::store::RaftStore;
use super::{QuorumConfig, QuorumNode, StateRole};
use crate::io::mem::MemFileSystem;

type Store = RaftStore<MemFileSystem>;

fn start(fs: &MemFileSystem) -> (QuorumNode, Store) {
    let conf = ConfState::from((vec![1], vec![]));
    let (store, rec) = block_on(RaftStore::open(fs.clone(), Path::new("/q"), &conf)).expect("open");
    (QuorumNode::restart(&QuorumConfig::new(1), rec).expect("restart"), store)
}

/// Drives readies until none is left; returns the data of the entries applied.
fn drain(node: &mut QuorumNode, store: &mut Store) -> Vec<Bytes> {
    let mut applied = Vec::new();
    while let Some(mut rd) = node.ready() {
        block_on(store.persist(&rd)).expect("persist");
        assert!(rd.messages.is_empty(), "a single voter sends nothing");
        applied.extend(std::mem::take(&mut rd.committed).into_iter().map(|e| e.data));
        let adv = node.advance(rd);
        applied.extend(adv.committed.into_iter().map(|e| e.data));
    }
    applied
}

#[test]
fn a_single_voter_elects_itself_commits_compacts_and_restarts() {
    let fs = MemFileSystem::new();
    let (mut node, mut store) = start(&fs);
    node.campaign().expect("campaign");
    // A new leader commits an empty entry of its term first.
    assert_eq!(drain(&mut node, &mut store), vec![Bytes::new()]);
    assert_eq!(node.role(), StateRole::Leader);
    node.propose(b"a".to_vec()).expect("propose");
    node.propose(b"b".to_vec()).expect("propose");
    assert_eq!(drain(&mut node, &mut store), vec![Bytes::from("a"), Bytes::from("b")]);
    assert_eq!(node.applied_index(), 3);

    let c = node.compaction(2, Bytes::from("state@2")).expect("compaction");
    block_on(store.compact(&c)).expect("compact");
    node.compact(c);
    assert_eq!(node.view().snapshot_index(), 2);
    assert!(node.compaction(1, Bytes::new()).is_err(), "below the snapshot");

    let (mut again, mut store) = start(&fs.power_loss());
    assert_eq!(again.view().snapshot().data, Bytes::from("state@2"));
    assert_eq!(again.term(), 1);
    // Entry 3 is re-applied after the snapshot; the node campaigns again and commits more.
    again.campaign().expect("campaign");
    let applied = drain(&mut again, &mut store);
    assert_eq!(applied.first(), Some(&Bytes::from("b")));
    assert_eq!(again.role(), StateRole::Leader);
    assert_eq!(again.term(), 2);
}

#[test]
#[should_panic(expected = "while a ready was out")]
fn stepping_with_a_ready_out_is_refused() {
    let fs = MemFileSystem::new();
    let (mut node, _store) = start(&fs);
    node.campaign().expect("campaign");
    let _rd = node.ready().expect("ready");
    node.tick();
}
