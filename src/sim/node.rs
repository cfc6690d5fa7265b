//! One simulated node: its in-memory disk (which outlives crashes), and while it is up its
//! [`QuorumNode`], [`RaftStore`] and applied state: the list of applied entries and, in a
//! cluster run ([`super::cluster`]), the committed [`ControllerState`] those entries built.
//! A snapshot holds both: `[u32 list bytes][list][ControllerState::snapshot()]` (the last
//! part empty outside cluster runs), restored with `ControllerState::restore_snapshot` as the
//! server restores it.
//!
//! Also keeps the node's *acknowledged disk*: what the simulator saw [`RaftStore`] report
//! durable. A node may apply only entries found there (or under its durable snapshot), and
//! a node restarted after a crash or a power loss must recover exactly that — unless a write
//! failed (torn, or a failed fsync), after which it may recover more than was acknowledged.

use std::collections::BTreeMap;
use std::path::Path;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::executor::block_on;

use super::check::{Applied, Checker};
use crate::controller::ControllerState;
use crate::io::mem::{FaultPlan, MemFileSystem};
use crate::quorum::store::{RaftStore, Recovered};
use crate::quorum::{ConfState, Entry, Message, QuorumConfig, QuorumNode, Ready};

const DIR: &str = "/quorum";
/// Entries whose data starts with this are the liveness phase's markers.
pub const MARKER_PREFIX: &[u8] = b"marker";

/// Why draining a node stopped.
pub enum NodeError {
    /// The disk failed (an injected fault): the node must crash.
    Disk(String),
    /// An invariant broke: the run fails.
    Invariant(String),
}

struct Live {
    node: QuorumNode,
    store: RaftStore<MemFileSystem>,
    state: Vec<Applied>,
    /// The committed controller state (cluster runs only).
    machine: Option<ControllerState>,
}

/// What the simulator saw acknowledged durable.
#[derive(Default, PartialEq, Debug)]
struct AckedDisk {
    snapshot_index: u64,
    entries: BTreeMap<u64, (u64, Bytes)>,
    term_vote: (u64, u64),
}

impl AckedDisk {
    fn from_recovered(rec: &Recovered) -> Self {
        Self {
            snapshot_index: rec.snapshot.get_metadata().index,
            entries: rec.entries.iter().map(|e| (e.index, (e.term, e.data.clone()))).collect(),
            term_vote: (rec.hard_state.term, rec.hard_state.vote),
        }
    }

    fn persisted(&mut self, rd: &Ready) {
        if let Some(s) = &rd.snapshot {
            self.entries.clear();
            self.snapshot_index = s.get_metadata().index;
        }
        for e in &rd.entries {
            self.entries.split_off(&e.index);
            self.entries.insert(e.index, (e.term, e.data.clone()));
        }
        if let Some(hs) = &rd.hard_state {
            self.term_vote = (hs.term, hs.vote);
        }
    }

    fn compacted(&mut self, index: u64) {
        self.entries = self.entries.split_off(&(index + 1));
        self.snapshot_index = index;
    }
}

/// A simulated node. See the module docs.
pub struct SimNode {
    pub id: u64,
    fs: MemFileSystem,
    live: Option<Live>,
    acked: AckedDisk,
    /// A write or sync failed since the last start: the disk may hold unacknowledged data.
    unacked_write: bool,
    /// Compact once this many entries are applied past the snapshot.
    compact_every: u64,
    /// Liveness markers in the applied state.
    pub markers: usize,
    /// A fresh controller state for this node (cluster runs only).
    template: Option<ControllerState>,
    /// Bumped whenever the applied state changes (the cluster checks re-run then).
    pub changes: u64,
    /// Process starts (a change tells the cluster layer the process restarted).
    pub starts: u64,
}

fn encode_state(state: &[Applied], machine: Option<&ControllerState>) -> Bytes {
    let mut list = BytesMut::new();
    encode_list(&mut list, state);
    let mut b = BytesMut::new();
    b.put_u32(u32::try_from(list.len()).unwrap_or(u32::MAX));
    b.put_slice(&list);
    if let Some(m) = machine {
        b.put_slice(&m.snapshot());
    }
    b.freeze()
}

/// Splits snapshot data into the applied list and the controller snapshot (may be empty).
fn split_snapshot(mut b: Bytes) -> Result<(Vec<Applied>, Bytes), String> {
    if b.is_empty() {
        return Ok((Vec::new(), Bytes::new()));
    }
    if b.remaining() < 4 {
        return Err("snapshot data truncated".to_string());
    }
    let len = b.get_u32() as usize;
    if b.remaining() < len {
        return Err("snapshot data truncated".to_string());
    }
    let list = b.split_to(len);
    Ok((decode_state(list)?, b))
}

fn encode_list(b: &mut BytesMut, state: &[Applied]) {
    for (index, term, data) in state {
        b.put_u64(*index);
        b.put_u64(*term);
        b.put_u32(u32::try_from(data.len()).unwrap_or(u32::MAX));
        b.put_slice(data);
    }
}

fn decode_state(mut b: Bytes) -> Result<Vec<Applied>, String> {
    let mut out = Vec::new();
    while b.has_remaining() {
        if b.remaining() < 20 {
            return Err("snapshot data truncated".to_string());
        }
        let (index, term, len) = (b.get_u64(), b.get_u64(), b.get_u32() as usize);
        if b.remaining() < len {
            return Err("snapshot data truncated".to_string());
        }
        out.push((index, term, b.split_to(len)));
    }
    Ok(out)
}

fn count_markers(state: &[Applied]) -> usize {
    state.iter().filter(|(_, _, d)| d.starts_with(MARKER_PREFIX)).count()
}

impl SimNode {
    #[must_use]
    pub fn new(id: u64, compact_every: u64, template: Option<ControllerState>) -> Self {
        Self {
            template,
            changes: 0,
            starts: 0,
            id,
            fs: MemFileSystem::new(),
            live: None,
            acked: AckedDisk::default(),
            unacked_write: false,
            compact_every,
            markers: 0,
        }
    }

    #[must_use]
    pub fn is_up(&self) -> bool {
        self.live.is_some()
    }

    /// The running quorum node, if up.
    pub fn node(&mut self) -> Option<&mut QuorumNode> {
        self.live.as_mut().map(|l| &mut l.node)
    }

    /// Starts the node from its disk and checks what it recovered.
    pub fn start(&mut self, conf: &ConfState, check: &Checker) -> Result<(), String> {
        let id = self.id;
        let opened = block_on(RaftStore::open(self.fs.clone(), Path::new(DIR), conf));
        let (store, rec) = opened.map_err(|e| format!("node {id} cannot reopen its store: {e}"))?;
        let found = AckedDisk::from_recovered(&rec);
        if !self.unacked_write && found != self.acked {
            return Err(format!(
                "node {id} recovered {found:?}, but its acknowledged disk was {:?}",
                self.acked
            ));
        }
        self.acked = found;
        self.unacked_write = false;
        let (state, machine_data) = split_snapshot(rec.snapshot.data.clone())?;
        check.restored(id, &state)?;
        let index = rec.snapshot.get_metadata().index;
        let machine = self.restore_machine(None, index, &machine_data)?;
        self.markers = count_markers(&state);
        self.changes += 1;
        self.starts += 1;
        let node = QuorumNode::restart(&QuorumConfig::new(id), rec)
            .map_err(|e| format!("node {id} cannot restart: {e}"))?;
        self.live = Some(Live { node, store, state, machine });
        Ok(())
    }

    /// The controller state a snapshot holds, restored as the server restores it: into the
    /// running state (`current`) if any, else into a fresh one.
    fn restore_machine(
        &self,
        current: Option<ControllerState>,
        index: u64,
        data: &[u8],
    ) -> Result<Option<ControllerState>, String> {
        let Some(template) = &self.template else { return Ok(None) };
        let mut m = current.unwrap_or_else(|| template.clone());
        if !data.is_empty() {
            m.restore_snapshot(index, data)
                .map_err(|e| format!("node {}: restoring snapshot {index} failed: {e}", self.id))?;
        }
        Ok(Some(m))
    }

    /// The committed controller state (cluster runs, while up).
    #[must_use]
    pub fn machine(&self) -> Option<&ControllerState> {
        self.live.as_ref().and_then(|l| l.machine.as_ref())
    }

    /// The last applied index (0 while down).
    #[must_use]
    pub fn applied_index(&self) -> u64 {
        self.live.as_ref().and_then(|l| l.state.last()).map_or(0, |a| a.0)
    }

    /// The node's raft state, while up (no ready is out between drains).
    #[must_use]
    pub fn quorum(&self) -> Option<&QuorumNode> {
        self.live.as_ref().map(|l| &l.node)
    }

    /// SIGKILL: the process goes, every completed write stays.
    pub fn crash(&mut self) {
        self.live = None;
        self.fs = self.fs.crash();
    }

    /// Power loss: the process goes, and whatever no fsync covered.
    pub fn power_loss(&mut self) {
        self.live = None;
        self.fs = self.fs.power_loss();
    }

    /// The (term, vote) last acknowledged durable.
    #[must_use]
    pub fn acked_term_vote(&self) -> (u64, u64) {
        self.acked.term_vote
    }

    /// Arms a disk fault for the next matching write or sync.
    pub fn set_disk_fault(&self, plan: FaultPlan) {
        self.fs.set_faults(plan);
    }

    /// Handles every ready the node has: persist, apply, advance, compact. Returns the
    /// messages to send.
    pub fn drain(&mut self, check: &mut Checker) -> Result<Vec<Message>, NodeError> {
        let mut out = Vec::new();
        while let Some(live) = self.live.as_mut() {
            let Some(mut rd) = live.node.ready() else { break };
            if let Err(e) = block_on(live.store.persist(&rd)) {
                self.unacked_write = true;
                return Err(NodeError::Disk(e.to_string()));
            }
            self.acked.persisted(&rd);
            out.append(&mut rd.messages);
            if let Some(snap) = &rd.snapshot {
                let (state, data) =
                    split_snapshot(snap.data.clone()).map_err(NodeError::Invariant)?;
                check.restored(self.id, &state).map_err(NodeError::Invariant)?;
                self.markers = count_markers(&state);
                let index = snap.get_metadata().index;
                let current = live.machine.take();
                let machine = {
                    let this = &*self;
                    this.restore_machine(current, index, &data).map_err(NodeError::Invariant)?
                };
                let Some(live) = self.live.as_mut() else { break };
                live.state = state;
                live.machine = machine;
                self.changes += 1;
            }
            let committed = std::mem::take(&mut rd.committed);
            self.apply(&committed, check)?;
            let Some(live) = self.live.as_mut() else { break };
            let adv = live.node.advance(rd);
            out.extend(adv.messages);
            self.apply(&adv.committed, check)?;
        }
        self.maybe_compact()?;
        Ok(out)
    }

    fn apply(&mut self, entries: &[Entry], check: &mut Checker) -> Result<(), NodeError> {
        let Some(live) = self.live.as_mut() else { return Ok(()) };
        for e in entries {
            if e.index > self.acked.snapshot_index
                && self.acked.entries.get(&e.index) != Some(&(e.term, e.data.clone()))
            {
                return Err(NodeError::Invariant(format!(
                    "node {} applies entry {} (term {}) that its disk never acknowledged",
                    self.id, e.index, e.term
                )));
            }
            let last = live.state.last().map_or(0, |a| a.0);
            let applied = (e.index, e.term, e.data.clone());
            check.applied(self.id, last, &applied).map_err(NodeError::Invariant)?;
            if e.data.starts_with(MARKER_PREFIX) {
                self.markers += 1;
            }
            if let (Some(m), false) = (live.machine.as_mut(), e.data.is_empty()) {
                // As the server's state machine: empty entries (a new leader's) carry nothing.
                m.apply_entry(e.index, &e.data).map_err(|err| {
                    NodeError::Invariant(format!(
                        "node {} cannot apply committed entry {} (term {}): {err}",
                        self.id, e.index, e.term
                    ))
                })?;
            }
            live.state.push(applied);
            self.changes += 1;
        }
        Ok(())
    }

    fn maybe_compact(&mut self) -> Result<(), NodeError> {
        let Some(live) = self.live.as_mut() else { return Ok(()) };
        let applied = live.state.last().map_or(0, |a| a.0);
        if applied < live.node.view().snapshot_index() + self.compact_every {
            return Ok(());
        }
        let c = live
            .node
            .compaction(applied, encode_state(&live.state, live.machine.as_ref()))
            .map_err(|e| NodeError::Invariant(format!("node {}: {e}", self.id)))?;
        if let Err(e) = block_on(live.store.compact(&c)) {
            self.unacked_write = true;
            return Err(NodeError::Disk(e.to_string()));
        }
        self.acked.compacted(applied);
        live.node.compact(c);
        Ok(())
    }
}
