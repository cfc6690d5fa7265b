//! Broker lifecycle on the [`ControllerState`], with KRaft's semantics: registration (a new
//! incarnation gets a new epoch and starts fenced), fencing, unfencing, unregistration, and
//! the leadership moves each implies; plus [`BrokerHeartbeats`], the active controller's
//! in-memory session tracker.
//!
//! Runs on the controller shard. No clock reads: time comes in as `now_ms`. Invariants: a
//! fenced broker is never chosen as a new leader; a leader is elected from the ISR only
//! (fencing removes a broker from the ISR, unfencing never adds it: the partition leader
//! does, through AlterPartition); a leader change bumps the leader epoch; leader -1 means
//! no live ISR member.

use std::collections::BTreeMap;
use std::sync::Arc;

use uuid::Uuid;

use super::records::{BrokerEndpoint, BrokerEpochRecord, MetadataRecord, RegisterBrokerRecord};
use super::state::ControllerState;
use super::BrokerImage;
use super::ControllerError;
use crate::types::NodeId;

/// The leader of a partition without a live replica (Kafka's NO_LEADER).
pub const NO_LEADER: NodeId = NodeId(-1);

/// A broker epoch: identifies one registration (incarnation) of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BrokerEpoch(pub i64);

/// What BrokerRegistration asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub node: NodeId,
    /// Random per process start: a new one means the broker restarted.
    pub incarnation_id: Uuid,
    pub endpoints: Vec<BrokerEndpoint>,
    pub rack: Option<String>,
}

impl ControllerState {
    /// `broker.session.timeout.ms` in force (for [`BrokerHeartbeats::new`]).
    #[must_use]
    pub fn broker_session_timeout_ms(&self) -> u64 {
        u64::try_from(self.defaults.long("broker.session.timeout.ms")).unwrap_or(0)
    }

    /// `broker.heartbeat.interval.ms` in force (what a broker is told to heartbeat at).
    #[must_use]
    pub fn broker_heartbeat_interval_ms(&self) -> u64 {
        u64::try_from(self.defaults.long("broker.heartbeat.interval.ms")).unwrap_or(0)
    }

    /// Whether `node` may lead and receive new replicas: registered and unfenced, or, while
    /// no broker is registered at all, this node (single-node start-up before it registers).
    #[must_use]
    pub fn is_live(&self, node: NodeId) -> bool {
        if self.brokers.is_empty() {
            return node == self.node_id;
        }
        self.brokers.get(&node).is_some_and(|b| !b.fenced)
    }

    /// Unfenced brokers in id order (the placement candidates); see [`Self::is_live`].
    #[must_use]
    pub fn live_brokers(&self) -> Vec<NodeId> {
        if self.brokers.is_empty() {
            return vec![self.node_id];
        }
        self.brokers.iter().filter(|(_, b)| !b.fenced).map(|(n, _)| *n).collect()
    }

    /// Registers a broker (the state-level rule; [`BrokerHeartbeats::register`] adds the
    /// live-session check). The same incarnation again returns its epoch and proposes
    /// nothing. A new incarnation gets epoch `max(epoch_hint, next counter)` and starts
    /// fenced: partitions it led move to other live replicas in the same operation. Pass as
    /// `epoch_hint` the Raft index the registration entry will get, so "caught up" is simply
    /// `metadata_offset >= epoch` (Kafka's convention).
    pub fn register_broker(
        &mut self,
        req: &BrokerRegistration,
        epoch_hint: i64,
    ) -> Result<BrokerEpoch, ControllerError> {
        if req.node.0 < 0 {
            return Err(ControllerError::InvalidRequest(format!("invalid broker id {}", req.node)));
        }
        if let Some(b) = self.brokers.get(&req.node) {
            if b.incarnation_id == req.incarnation_id {
                return Ok(BrokerEpoch(b.epoch));
            }
        }
        let epoch = epoch_hint.max(self.next_broker_epoch);
        let mut records = vec![MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            node: req.node,
            broker_epoch: epoch,
            incarnation_id: req.incarnation_id,
            endpoints: req.endpoints.clone(),
            rack: req.rack.clone(),
            fenced: true,
        })];
        let mut live = self.live_set();
        live.retain(|n| *n != req.node);
        records.extend(self.leadership_changes(&live));
        self.propose(records)?;
        Ok(BrokerEpoch(epoch))
    }

    /// Fences a broker: it leaves every ISR, and its leaderships move to the first live ISR
    /// member (epoch + 1).
    pub fn fence_broker(
        &mut self,
        node: NodeId,
        epoch: BrokerEpoch,
    ) -> Result<(), ControllerError> {
        self.broker_change(node, epoch, MetadataRecord::FenceBroker, false)
    }

    /// Unfences a broker: leaderless partitions whose ISR holds it get it as leader; it
    /// rejoins other ISRs only when their leaders add it (AlterPartition).
    pub fn unfence_broker(
        &mut self,
        node: NodeId,
        epoch: BrokerEpoch,
    ) -> Result<(), ControllerError> {
        self.broker_change(node, epoch, MetadataRecord::UnfenceBroker, true)
    }

    /// Removes a broker's registration (its leaderships move as when fenced).
    pub fn unregister_broker(
        &mut self,
        node: NodeId,
        epoch: BrokerEpoch,
    ) -> Result<(), ControllerError> {
        self.broker_change(node, epoch, MetadataRecord::UnregisterBroker, false)
    }

    /// One operation: the broker's record (`make`), then the leadership changes that follow
    /// from the broker being live (`live`) or not.
    fn broker_change(
        &mut self,
        node: NodeId,
        epoch: BrokerEpoch,
        make: fn(BrokerEpochRecord) -> MetadataRecord,
        live: bool,
    ) -> Result<(), ControllerError> {
        self.check_epoch(node, epoch)?;
        let mut live_set = self.live_set();
        live_set.retain(|n| *n != node);
        if live {
            live_set.push(node);
        }
        let mut records = vec![make(BrokerEpochRecord { node, broker_epoch: epoch.0 })];
        records.extend(self.leadership_changes(&live_set));
        self.propose(records)
    }

    fn check_epoch(&self, node: NodeId, epoch: BrokerEpoch) -> Result<(), ControllerError> {
        match self.brokers.get(&node) {
            Some(b) if b.epoch == epoch.0 => Ok(()),
            _ => Err(ControllerError::StaleBrokerEpoch { node, epoch: epoch.0 }),
        }
    }

    /// The nodes live now (registered brokers' fence state, or the single-node fallback).
    fn live_set(&self) -> Vec<NodeId> {
        if self.brokers.is_empty() {
            return Vec::new();
        }
        self.live_brokers()
    }

    /// Partition records for every partition whose leader or ISR changes when exactly the
    /// nodes in `live` are live (Kafka's KRaft rules, `unclean.leader.election.enable=false`,
    /// without KIP-966's ELR): a replica that is not live leaves the ISR, except the last
    /// member, which stays so the partition can come back with it; a leader that is not live
    /// or not in the ISR is replaced by the first replica (in replica order) that is live
    /// and in the ISR, or [`NO_LEADER`]; a leaderless partition gets one the same way. A live
    /// replica never joins the ISR here: the leader adds it once it has caught up
    /// (AlterPartition, `controller::alter_partition`). A leader change bumps the epoch.
    fn leadership_changes(&self, live: &[NodeId]) -> Vec<MetadataRecord> {
        let mut out = Vec::new();
        for t in self.topics.values() {
            for p in &t.partitions {
                let isr: Vec<NodeId> = if p.isr.is_empty() && p.elr.is_empty() {
                    // Metadata written before ISRs were kept (fencing emptied them): the old
                    // rule, every live replica, so such a partition can lead again.
                    p.replicas.iter().copied().filter(|r| live.contains(r)).collect()
                } else {
                    p.isr.iter().copied().filter(|r| live.contains(r)).collect()
                };
                // KIP-966: ISR members that leave below min.insync.replicas go to the ELR,
                // which may lead when no ISR member is live (`super::elr`).
                if let Some(r) = super::elr::change(t, p, isr, |r| live.contains(&r)) {
                    out.push(MetadataRecord::Partition(r));
                }
            }
        }
        out
    }

    pub(super) fn apply_register(&mut self, r: RegisterBrokerRecord) {
        self.next_broker_epoch = self.next_broker_epoch.max(r.broker_epoch.saturating_add(1));
        Arc::make_mut(&mut self.brokers).insert(
            r.node,
            BrokerImage {
                epoch: r.broker_epoch,
                incarnation_id: r.incarnation_id,
                endpoints: r.endpoints,
                rack: r.rack,
                fenced: r.fenced,
            },
        );
    }

    pub(super) fn apply_fence(&mut self, b: BrokerEpochRecord, fenced: bool) -> Result<(), String> {
        let broker = Arc::make_mut(&mut self.brokers)
            .get_mut(&b.node)
            .filter(|r| r.epoch == b.broker_epoch)
            .ok_or_else(|| {
                format!("(un)fence of broker {} epoch {}: no such", b.node, b.broker_epoch)
            })?;
        broker.fenced = fenced;
        Ok(())
    }

    pub(super) fn apply_unregister(&mut self, b: BrokerEpochRecord) -> Result<(), String> {
        match self.brokers.get(&b.node) {
            Some(r) if r.epoch == b.broker_epoch => {
                Arc::make_mut(&mut self.brokers).remove(&b.node);
                Ok(())
            }
            _ => Err(format!("unregister of broker {} epoch {}: no such", b.node, b.broker_epoch)),
        }
    }
}

/// One BrokerHeartbeat request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BrokerHeartbeat {
    pub node: NodeId,
    pub epoch: BrokerEpoch,
    /// The last metadata (Raft) index the broker applied.
    pub metadata_offset: u64,
    pub want_fence: bool,
    pub want_shutdown: bool,
}

/// The answer to a heartbeat, plus the frames to propose (already applied to the working
/// state the heartbeat ran on).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeartbeatOutcome {
    pub is_caught_up: bool,
    pub is_fenced: bool,
    pub should_shutdown: bool,
    pub records: Vec<Vec<u8>>,
}

/// Broker sessions on the active controller: in memory, not replicated. A new active
/// controller builds a fresh one and calls [`BrokerHeartbeats::activate`], which gives every
/// registered broker a full session from now (as KRaft does).
#[derive(Clone, Debug)]
pub struct BrokerHeartbeats {
    session_timeout_ms: u64,
    deadlines_ms: BTreeMap<NodeId, u64>,
    /// When `expire` last ran: a gap longer than `stall_ms()` means the controller itself
    /// was not running.
    last_expire_ms: Option<u64>,
}

impl BrokerHeartbeats {
    /// Sessions of `session_timeout_ms` (`broker.session.timeout.ms`).
    #[must_use]
    pub fn new(session_timeout_ms: u64) -> Self {
        Self { session_timeout_ms, deadlines_ms: BTreeMap::new(), last_expire_ms: None }
    }

    /// A gap between two expiry checks longer than this (half a session) is a stall of the
    /// controller's own shard (overload, SIGSTOP, a long synchronous step), not silence of
    /// the brokers: heartbeats that arrived meanwhile were not processed either.
    fn stall_ms(&self) -> u64 {
        self.session_timeout_ms / 2
    }

    /// Gives every registered broker a fresh deadline (on becoming the active controller).
    pub fn activate(&mut self, state: &ControllerState, now_ms: u64) {
        let deadline = now_ms.saturating_add(self.session_timeout_ms);
        self.deadlines_ms = state.brokers().keys().map(|n| (*n, deadline)).collect();
        self.last_expire_ms = Some(now_ms);
    }

    fn session_live(&self, node: NodeId, now_ms: u64) -> bool {
        self.deadlines_ms.get(&node).is_some_and(|d| *d > now_ms)
    }

    /// BrokerRegistration on the active controller: refuses a new incarnation while another
    /// one of the same node id has a live session (DUPLICATE_BROKER_REGISTRATION).
    pub fn register(
        &mut self,
        state: &mut ControllerState,
        req: &BrokerRegistration,
        epoch_hint: i64,
        now_ms: u64,
    ) -> Result<BrokerEpoch, ControllerError> {
        if let Some(b) = state.brokers().get(&req.node) {
            // The active controller's own broker registering again is this very process
            // restarted: its previous incarnation cannot be alive, so no session wait.
            let restarted_self = req.node == state.node_id();
            // A fenced broker has no valid session (Kafka's `BrokerHeartbeatManager
            // .hasValidSession`): after a controlled shutdown its restart registers at once.
            if b.incarnation_id != req.incarnation_id
                && !restarted_self
                && !b.fenced
                && self.session_live(req.node, now_ms)
            {
                return Err(ControllerError::DuplicateBrokerRegistration(req.node));
            }
        }
        let epoch = state.register_broker(req, epoch_hint)?;
        self.deadlines_ms.insert(req.node, now_ms.saturating_add(self.session_timeout_ms));
        Ok(epoch)
    }

    /// BrokerHeartbeat: renews the session, then unfences a caught-up broker (its metadata
    /// offset reached its registration entry), fences one that asks for it, and fences one
    /// that wants to shut down (moving its leaderships away) and tells it to go.
    pub fn heartbeat(
        &mut self,
        state: &mut ControllerState,
        hb: BrokerHeartbeat,
        now_ms: u64,
    ) -> Result<HeartbeatOutcome, ControllerError> {
        let fenced = match state.brokers().get(&hb.node) {
            Some(b) if b.epoch == hb.epoch.0 => b.fenced,
            _ => {
                return Err(ControllerError::StaleBrokerEpoch { node: hb.node, epoch: hb.epoch.0 })
            }
        };
        self.deadlines_ms.insert(hb.node, now_ms.saturating_add(self.session_timeout_ms));
        let caught_up = i64::try_from(hb.metadata_offset).unwrap_or(i64::MAX) >= hb.epoch.0;
        let before = state.pending_len();
        let mut now_fenced = fenced;
        if (hb.want_shutdown || hb.want_fence) && !fenced {
            state.fence_broker(hb.node, hb.epoch)?;
            now_fenced = true;
        } else if fenced && !hb.want_fence && !hb.want_shutdown && caught_up {
            state.unfence_broker(hb.node, hb.epoch)?;
            now_fenced = false;
        }
        Ok(HeartbeatOutcome {
            is_caught_up: caught_up,
            is_fenced: now_fenced,
            // Kafka's SHUTDOWN_NOW once the broker leads nothing; fencing it above moved
            // every leadership (to a live ISR member, or NO_LEADER when it was the last), and
            // the answer leaves only once those records are committed (`run_op`), Kafka's
            // "controlled shutdown offset committed" condition.
            should_shutdown: hb.want_shutdown && !state.leads_any(hb.node),
            records: state.split_proposals(before),
        })
    }

    /// Fences every unfenced broker whose session ended at or before `now_ms`; returns the
    /// frames to propose. Brokers without a session (registered through another controller)
    /// get a full one from now.
    ///
    /// After a stall of the controller itself (longer than half a session) every session is
    /// extended by the stall: the controller's clock stood still for the brokers too. Without
    /// this, a single-node broker whose shard was overloaded for a session fenced itself
    /// (seen with 10,000 parked fetches and 1,000-partition CreateTopics at load 30), and
    /// every broker's session would end at once after a controller's SIGSTOP.
    pub fn expire(&mut self, state: &mut ControllerState, now_ms: u64) -> Vec<Vec<u8>> {
        let registered: Vec<(NodeId, i64, bool)> =
            state.brokers().iter().map(|(n, b)| (*n, b.epoch, b.fenced)).collect();
        self.deadlines_ms.retain(|n, _| registered.iter().any(|(r, _, _)| r == n));
        let gap_ms = self.last_expire_ms.map_or(0, |last| now_ms.saturating_sub(last));
        self.last_expire_ms = Some(now_ms);
        if gap_ms > self.stall_ms() {
            tracing::warn!(
                gap_ms,
                "the controller did not run for {gap_ms} ms; extending broker sessions by it"
            );
            for deadline in self.deadlines_ms.values_mut() {
                *deadline = deadline.saturating_add(gap_ms);
            }
        }
        let before = state.pending_len();
        let fresh = now_ms.saturating_add(self.session_timeout_ms);
        for (node, epoch, fenced) in registered {
            let deadline = *self.deadlines_ms.entry(node).or_insert(fresh);
            if !fenced && deadline <= now_ms {
                tracing::warn!(%node, "broker session expired; fencing it");
                if let Err(e) = state.fence_broker(node, BrokerEpoch(epoch)) {
                    tracing::error!(%node, "fencing an expired broker failed: {e}");
                }
            }
        }
        state.split_proposals(before)
    }
}
