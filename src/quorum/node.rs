//! [`QuorumNode`]: raft-rs's `RawNode` over a [`LogView`], as a pure state machine. See the
//! parent module for the ready contract; this file keeps the types honest about it: a
//! [`Ready`] must go back through [`QuorumNode::advance`] before the node is stepped, ticked
//! or asked for another one, and the messages that depend on persistence come out of
//! `advance`, not `ready`.

use bytes::Bytes;
use raft::prelude::{
    ConfChange, ConfChangeType, ConfChangeV2, ConfState, Entry, HardState, Message, Snapshot,
    SnapshotMetadata,
};
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

    /// Index of the last entry in the log, durable or not (a leader's proposal lands here).
    #[must_use]
    pub fn last_index(&self) -> u64 {
        self.raw.raft.raft_log.last_index()
    }

    /// The membership as of the last applied conf change (raft-rs's progress tracker).
    #[must_use]
    pub fn conf_state(&self) -> ConfState {
        self.raw.raft.prs().conf().to_conf_state()
    }

    /// What a leader knows `id` holds (its match index); `None` on a non-leader or for an
    /// unknown id.
    #[must_use]
    pub fn match_index(&self, id: u64) -> Option<u64> {
        if self.role() != StateRole::Leader {
            return None;
        }
        self.raw.raft.prs().get(id).map(|p| p.matched)
    }

    /// A leader whose applied entry belongs to its own term: it has applied everything
    /// committed before it took over (its term's no-op is applied), so its state machine is
    /// current and it may take proposals.
    #[must_use]
    pub fn leader_ready(&self) -> bool {
        self.role() == StateRole::Leader
            && self.raw.raft.raft_log.term(self.applied_index()).ok() == Some(self.term())
    }

    /// Proposes adding `id` as a learner (a conf change entry).
    pub fn propose_add_learner(&mut self, id: u64) -> Result<(), QuorumError> {
        self.settled();
        let mut cc = ConfChange::default();
        cc.set_change_type(ConfChangeType::AddLearnerNode);
        cc.node_id = id;
        Ok(self.raw.propose_conf_change(Vec::new(), cc)?)
    }

    /// Applies a committed conf change entry's data (`v2`: a `ConfChangeV2`) to the
    /// membership. Allowed while a ready is out: committed entries are applied between
    /// [`QuorumNode::ready`] and [`QuorumNode::advance`] (raft-rs's own examples do so).
    pub fn apply_conf_change(&mut self, data: &[u8], v2: bool) -> Result<ConfState, QuorumError> {
        use protobuf::Message as _;
        let bad = |e: protobuf::ProtobufError| QuorumError::Invalid(format!("conf change: {e}"));
        if v2 {
            let cc = ConfChangeV2::parse_from_bytes(data).map_err(bad)?;
            Ok(self.raw.apply_conf_change(&cc)?)
        } else {
            let cc = ConfChange::parse_from_bytes(data).map_err(bad)?;
            Ok(self.raw.apply_conf_change(&cc)?)
        }
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
        // The tracker's membership, not the last snapshot's: conf changes applied since
        // then (up to `index`, as the caller applies in order) belong in this snapshot.
        meta.set_conf_state(self.conf_state());
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
