//! The cluster simulation's reference check: a replay of the committed log against which
//! every node's committed state, the brokers' epochs and unfencing are compared after each
//! step (see [`super::cluster`]'s module docs for the invariants).
//!
//! Single-threaded, owned by the simulation; no I/O.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::check::Checker;
use super::cluster::fresh_state;
use super::node::SimNode;
use crate::controller::{BrokerEpoch, ControllerState, NO_LEADER};
use crate::types::NodeId;

/// Fills `out` with the snapshot bytes of `state` minus the last-applied index (bytes 1..9
/// of the header): a node restored from a snapshot taken at an empty entry records that
/// index, a replay records the last non-empty entry; nothing else may differ.
pub(super) fn masked_snapshot(state: &ControllerState) -> Vec<u8> {
    let mut s = state.snapshot();
    if s.len() >= 9 {
        s[1..9].fill(0);
    }
    s
}

/// The reference replay of the committed log and the checks on it; see the module docs.
pub struct ClusterCheck {
    reference: ControllerState,
    /// Index of the last committed entry replayed.
    replayed: u64,
    /// (index, masked snapshot) after each non-empty committed entry, index 0 first.
    snaps: Vec<(u64, Vec<u8>)>,
    /// Last (epoch, fenced) per node in the committed log.
    log_epochs: BTreeMap<NodeId, (i64, bool)>,
    /// The committed entry that registered each (node, epoch).
    registered_at: BTreeMap<(NodeId, i64), u64>,
    /// What brokers were told: node → (incarnation, epoch).
    told: BTreeMap<NodeId, (Uuid, i64)>,
    /// `changes` of each node when last compared.
    compared: BTreeMap<u64, u64>,
    /// Times a registered broker went from unfenced to fenced in the committed log.
    pub fences: u64,
    /// Per partition (topic id, index): the leader of each leader epoch seen in a committed
    /// state, and so the highest epoch (one leader per epoch; epochs never go back).
    leaders: BTreeMap<(Uuid, i32), BTreeMap<i32, NodeId>>,
    /// Leader of each partition under reassignment in the last state checked.
    reassigning_leaders: BTreeMap<(Uuid, i32), NodeId>,
    /// Leader changes of partitions that stayed under reassignment (elections during one).
    pub reassign_elections: u64,
}

impl ClusterCheck {
    pub(super) fn new() -> Self {
        let reference = fresh_state(1);
        let snaps = vec![(0, masked_snapshot(&reference))];
        Self {
            reference,
            replayed: 0,
            snaps,
            log_epochs: BTreeMap::new(),
            told: BTreeMap::new(),
            registered_at: BTreeMap::new(),
            compared: BTreeMap::new(),
            fences: 0,
            leaders: BTreeMap::new(),
            reassigning_leaders: BTreeMap::new(),
            reassign_elections: 0,
        }
    }

    /// A broker was told `epoch` for `incarnation`: never below an epoch told before, and
    /// above it for a new incarnation.
    pub(super) fn broker_told(
        &mut self,
        node: NodeId,
        incarnation: Uuid,
        epoch: BrokerEpoch,
    ) -> Result<(), String> {
        if let Some((inc, e)) = self.told.get(&node) {
            if epoch.0 < *e || (*inc != incarnation && epoch.0 == *e) {
                return Err(format!(
                    "broker {node} was told epoch {} (incarnation {incarnation}) after epoch {e} \
                     (incarnation {inc})",
                    epoch.0
                ));
            }
        }
        self.told.insert(node, (incarnation, epoch.0));
        Ok(())
    }

    /// A heartbeat reporting `offset` unfenced `node` at `epoch`: its registration entry, if
    /// committed, must be at or below `offset`.
    pub(super) fn unfenced(
        &self,
        node: NodeId,
        epoch: BrokerEpoch,
        offset: u64,
    ) -> Result<(), String> {
        match self.registered_at.get(&(node, epoch.0)) {
            Some(at) if *at > offset => Err(format!(
                "broker {node} (epoch {}) was unfenced at metadata offset {offset}, before \
                 applying its registration (entry {at})",
                epoch.0
            )),
            _ => Ok(()),
        }
    }

    /// Replays newly committed entries into the reference and checks each resulting state,
    /// then compares every changed node's committed state with the reference.
    pub fn check(&mut self, check: &Checker, nodes: &[SimNode]) -> Result<(), String> {
        while let Some((_, data)) = check.entry(self.replayed + 1) {
            let index = self.replayed + 1;
            self.replayed = index;
            if data.is_empty() {
                continue;
            }
            self.reference
                .apply_entry(index, data)
                .map_err(|e| format!("committed entry {index} does not apply: {e}"))?;
            self.check_state(index)?;
            self.snaps.push((index, masked_snapshot(&self.reference)));
        }
        for n in nodes {
            let Some(m) = n.machine() else { continue };
            if self.compared.get(&n.id) == Some(&n.changes) {
                continue;
            }
            self.compared.insert(n.id, n.changes);
            let applied = n.applied_index();
            let pos = self.snaps.partition_point(|(i, _)| *i <= applied);
            let Some((at, expected)) = pos.checked_sub(1).and_then(|p| self.snaps.get(p)) else {
                return Err(format!("node {}: no reference state for index {applied}", n.id));
            };
            if masked_snapshot(m) != *expected {
                return Err(format!(
                    "node {}'s committed state at applied index {applied} differs from the \
                     committed log replayed to {at}",
                    n.id
                ));
            }
        }
        Ok(())
    }

    /// Invariants of one committed state (the reference after entry `index`).
    fn check_state(&mut self, index: u64) -> Result<(), String> {
        let state = &self.reference;
        let brokers = state.brokers();
        for (node, b) in brokers {
            let (last, was_fenced) =
                self.log_epochs.insert(*node, (b.epoch, b.fenced)).unwrap_or((i64::MIN, true));
            if b.fenced && !was_fenced && b.epoch == last {
                self.fences += 1;
            }
            if b.epoch != last {
                self.registered_at.insert((*node, b.epoch), index);
            }
            if b.epoch < last {
                return Err(format!(
                    "entry {index}: broker {node}'s epoch went back from {last} to {}",
                    b.epoch
                ));
            }
        }
        if brokers.is_empty() {
            // Before any registration the single-node fallback places on the controller.
            return Ok(());
        }
        state.check_reassignments().map_err(|e| format!("entry {index}: {e}"))?;
        let image = state.image();
        let mut leaders = BTreeMap::new();
        for key in image.reassignments.keys() {
            let Some(t) = image.topic_by_id(&key.0) else { continue };
            let Some(p) = t.partitions.get(usize::try_from(key.1).unwrap_or(usize::MAX)) else {
                continue;
            };
            if self.reassigning_leaders.get(key).is_some_and(|l| *l != p.leader) {
                self.reassign_elections += 1;
            }
            leaders.insert(*key, p.leader);
        }
        self.reassigning_leaders = leaders;
        for t in image.topics.values() {
            for p in &t.partitions {
                let epochs = self.leaders.entry((t.topic_id, p.index)).or_default();
                if let Some((top, _)) = epochs.last_key_value() {
                    if p.leader_epoch.0 < *top {
                        return Err(format!(
                            "entry {index}: {}-{}'s leader epoch went back from {top} to {}",
                            t.name, p.index, p.leader_epoch.0
                        ));
                    }
                }
                match epochs.insert(p.leader_epoch.0, p.leader) {
                    Some(before) if before != p.leader => {
                        return Err(format!(
                            "entry {index}: {}-{} has two leaders in epoch {}: {before} and {}",
                            t.name, p.index, p.leader_epoch.0, p.leader
                        ));
                    }
                    _ => {}
                }
                check_elr(index, t, p)?;
                if p.leader == NO_LEADER {
                    continue;
                }
                let live = brokers.get(&p.leader).is_some_and(|b| !b.fenced);
                if !live || !p.replicas.contains(&p.leader) || !p.isr.contains(&p.leader) {
                    return Err(format!(
                        "entry {index}: {}-{} is led by {} (replicas {:?}, isr {:?}), which is \
                         not an unfenced registered replica (brokers {:?})",
                        t.name,
                        p.index,
                        p.leader,
                        p.replicas,
                        p.isr,
                        brokers.iter().map(|(n, b)| (n.0, b.epoch, b.fenced)).collect::<Vec<_>>()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// KIP-966's shape (`controller::elr`): ELR and last known ELR are replicas outside the ISR
/// and each other, and both are empty while the ISR is at or above `min.insync.replicas`.
fn check_elr(
    index: u64,
    t: &crate::controller::TopicImage,
    p: &crate::controller::PartitionImage,
) -> Result<(), String> {
    let min_isr = usize::try_from(t.config.min_insync_replicas).unwrap_or(1);
    let outside = p.elr.iter().chain(&p.last_known_elr);
    let overlaps = p.elr.iter().any(|r| p.isr.contains(r) || p.last_known_elr.contains(r))
        || p.last_known_elr.iter().any(|r| p.isr.contains(r));
    let stray = outside.clone().any(|r| !p.replicas.contains(r));
    let kept = p.isr.len() >= min_isr && (!p.elr.is_empty() || !p.last_known_elr.is_empty());
    if overlaps || stray || kept {
        return Err(format!(
            "entry {index}: {}-{} has ISR {:?}, ELR {:?}, last known ELR {:?} (replicas {:?}, \
             min ISR {min_isr})",
            t.name, p.index, p.isr, p.elr, p.last_known_elr, p.replicas
        ));
    }
    Ok(())
}
