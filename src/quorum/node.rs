//! [`QuorumNode`]: raft-rs's `RawNode` over a [`LogView`], as a pure state machine. See the
//! parent module for the ready contract; this file keeps the types honest about it: a
//! [`Ready`] must go back through [`QuorumNode::advance`] before the node is stepped, ticked
//! or asked for another one, and the messages that depend on persistence come out of
//! `advance`, not `ready`.

use bytes::Bytes;
use raft::prelude::{Entry, HardState, Message, Snapshot, SnapshotMetadata};
use raft::{RawNode, SnapshotStatus, StateRole};

use super::store::Recovered;
use super::view::LogView;
use super::{raft_logger, QuorumConfig, QuorumError};

/// What the caller must do, in order: persist `snapshot`, `entries` and `hard_state` (fsync
/// if `must_sync`); meanwhile it may send `messages` and apply `committed`; then hand the
/// ready back to [`QuorumNode::advance`].
pub struct Ready {
    /// A snapshot received from the leader: persist it and restore the state machine from
    /// its data.
    pub snapshot: Option<Snapshot>,
    /// Entries to append (possibly replacing a tail).
    pub entries: Vec<Entry>,
    /// The new term, vote and commit index, if changed.
    pub hard_state: Option<HardState>,
    /// Whether persistence needs an fsync (entries, a snapshot, a new term or vote).
    pub must_sync: bool,
    /// Messages that do not depend on this ready's persistence (a leader's appends).
    pub messages: Vec<Message>,
    /// Committed entries to apply, in order (all already durable on this node).
    pub committed: Vec<Entry>,
    raw: raft::Ready,
    persisted_messages: Vec<Message>,
}

/// What [`QuorumNode::advance`] leaves to do: send `messages` (now that what they
/// acknowledge is durable), apply `committed`.
#[derive(Default)]
pub struct Advanced {
    pub messages: Vec<Message>,
    pub committed: Vec<Entry>,
}

/// A local snapshot of the applied state and the log that remains after it: persist with
/// [`super::store::RaftStore::compact`], then hand to [`QuorumNode::compact`].
#[derive(Clone, Debug)]
pub struct Compaction {
    pub snapshot: Snapshot,
    /// Entries after the snapshot.
    pub entries: Vec<Entry>,
    pub hard_state: HardState,
}

/// One member of the quorum (voter or learner). See the module docs.
pub struct QuorumNode {
    raw: RawNode<LogView>,
    /// A ready is out: the node must not change until it comes back.
    ready_out: bool,
}

impl QuorumNode {
    /// Starts (or restarts) a node from what its store recovered. A new store recovers its
    /// bootstrap snapshot, which carries the initial membership.
    pub fn restart(config: &QuorumConfig, rec: Recovered) -> Result<Self, QuorumError> {
        let view = LogView::from_recovered(rec);
        let raft_config = config.raft_config(view.snapshot_index());
        raft_config.validate()?;
        let raw = RawNode::new(&raft_config, view, &raft_logger(config.id))?;
        Ok(Self { raw, ready_out: false })
    }

    fn settled(&self) {
        assert!(!self.ready_out, "node {} changed while a ready was out", self.id());
    }

    #[must_use]
    pub fn id(&self) -> u64 {
        self.raw.raft.id
    }

    #[must_use]
    pub fn role(&self) -> StateRole {
        self.raw.raft.state
    }

    #[must_use]
    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }

    /// The leader this node knows of (0: none).
    #[must_use]
    pub fn leader_id(&self) -> u64 {
        self.raw.raft.leader_id
    }

    #[must_use]
    pub fn commit_index(&self) -> u64 {
        self.raw.raft.raft_log.committed
    }

    /// Index of the last entry handed out for applying.
    #[must_use]
    pub fn applied_index(&self) -> u64 {
        self.raw.raft.raft_log.applied
    }

    /// The durable log as this node sees it.
    #[must_use]
    pub fn view(&self) -> &LogView {
        self.raw.store()
    }

    /// Advances the logical clock by one tick (elections, heartbeats).
    pub fn tick(&mut self) {
        self.settled();
        self.raw.tick();
    }

    /// Feeds a message from a peer.
    pub fn step(&mut self, msg: Message) -> Result<(), QuorumError> {
        self.settled();
        Ok(self.raw.step(msg)?)
    }

    /// Proposes an entry; fails unless this node is (or knows) a leader to take it.
    pub fn propose(&mut self, data: Vec<u8>) -> Result<(), QuorumError> {
        self.settled();
        Ok(self.raw.propose(Vec::new(), data)?)
    }

    /// Starts an election now.
    pub fn campaign(&mut self) -> Result<(), QuorumError> {
        self.settled();
        Ok(self.raw.campaign()?)
    }

    /// The transport's report on a snapshot sent to `to`: without a failure report, a leader
    /// waits for the follower's answer before sending it anything else.
    pub fn report_snapshot(&mut self, to: u64, delivered: bool) {
        self.settled();
        let status = if delivered { SnapshotStatus::Finish } else { SnapshotStatus::Failure };
        self.raw.report_snapshot(to, status);
    }

    /// The transport could not reach `to`; the leader probes it instead of streaming.
    pub fn report_unreachable(&mut self, to: u64) {
        self.settled();
        self.raw.report_unreachable(to);
    }

    /// The work waiting, if any. See [`Ready`].
    pub fn ready(&mut self) -> Option<Ready> {
        self.settled();
        if !self.raw.has_ready() {
            return None;
        }
        let mut raw = self.raw.ready();
        self.ready_out = true;
        let snapshot = Some(raw.snapshot()).filter(|s| !s.is_empty()).cloned();
        Some(Ready {
            snapshot,
            entries: raw.take_entries(),
            hard_state: raw.hs().cloned(),
            must_sync: raw.must_sync(),
            messages: raw.take_messages(),
            committed: raw.take_committed_entries(),
            persisted_messages: raw.take_persisted_messages(),
            raw,
        })
    }

    /// Takes back a ready whose snapshot, entries and hard state are now durable; the
    /// caller applies `committed` of both before anything else.
    pub fn advance(&mut self, rd: Ready) -> Advanced {
        assert!(self.ready_out, "advance without a ready");
        self.ready_out = false;
        let view = self.raw.mut_store();
        if let Some(snap) = rd.snapshot {
            view.apply_snapshot(snap);
        }
        view.append(&rd.entries);
        if let Some(hs) = rd.hard_state {
            view.set_hard_state(hs);
        }
        let mut light = self.raw.advance(rd.raw);
        if let Some(commit) = light.commit_index() {
            self.raw.mut_store().set_commit(commit);
        }
        let mut messages = rd.persisted_messages;
        messages.extend(light.take_messages());
        let committed = light.take_committed_entries();
        self.raw.advance_apply();
        Advanced { messages, committed }
    }

    /// A snapshot of the applied state at `index` (≤ the applied index) holding `data`.
    pub fn compaction(&self, index: u64, data: Bytes) -> Result<Compaction, QuorumError> {
        self.settled();
        let view = self.view();
        if index > self.applied_index() || index <= view.snapshot_index() {
            return Err(QuorumError::Invalid(format!(
                "snapshot at {index}: applied {}, last snapshot {}",
                self.applied_index(),
                view.snapshot_index()
            )));
        }
        let term = view.term_of(index).ok_or_else(|| {
            QuorumError::Invalid(format!("no term for {index} (log {})", view.last()))
        })?;
        let mut meta = SnapshotMetadata { index, term, ..SnapshotMetadata::default() };
        meta.set_conf_state(view.conf_state().clone());
        let mut snapshot = Snapshot { data, ..Snapshot::default() };
        snapshot.set_metadata(meta);
        let entries = view.entries().iter().filter(|e| e.index > index).cloned().collect();
        Ok(Compaction { snapshot, entries, hard_state: view.hard_state().clone() })
    }

    /// Drops the log a durable compaction covers.
    pub fn compact(&mut self, c: Compaction) {
        self.settled();
        self.raw.mut_store().apply_snapshot(c.snapshot);
    }
}
