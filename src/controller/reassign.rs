//! Partition reassignment on the [`ControllerState`], as Kafka's KRaft controller does it
//! (`ReplicationControlManager.alterPartitionReassignments`, `PartitionReassignmentReplicas`,
//! `PartitionReassignmentRevert`, `PartitionChangeBuilder.completeReassignmentIfNeeded`).
//!
//! Runs on the active controller's working state (AlterPartitionReassignments through
//! `server::cluster`'s `run_op`) and, for replay, on every node's committed state.
//!
//! The life of a reassignment from replicas `current` to `target`:
//! 1. Start: the partition's replicas (AR) become `target ++ (current − target)`, with
//!    `adding = target − current` and `removing = current − target` recorded in a
//!    [`PartitionReassignmentRecord`] next to the `PartitionRecord`. The ISR and the leader do
//!    not change: the new replicas' brokers see themselves in the replicas, open the log and
//!    start fetching (`partition::table`), the leader adds them to the ISR once caught up
//!    (AlterPartition).
//! 2. Completion, checked on every ISR change (`alter_partition`) and at the start: once the
//!    ISR minus `removing` is non-empty and holds every adding replica, the replicas become
//!    the target, the ISR loses the removed replicas, the reassignment record is cleared and
//!    the leader epoch is bumped (replicas left); if the leader was removed the first live
//!    target replica in the ISR leads. The removed brokers no longer host the partition:
//!    they stop their fetchers and delete the log (`partition::table::apply_image`).
//! 3. Cancellation (null target): replicas and ISR lose the adding replicas; if the ISR would
//!    be empty it becomes the remaining replicas (Kafka's unclean revert); a leader that was
//!    an adding replica is replaced.
//!
//! A new reassignment during one in progress starts from the current AR, as Kafka does.
//! Invariants: a partition has a reassignment entry iff `adding ∪ removing` is non-empty;
//! `adding ⊆ AR`, `removing ⊆ AR`, disjoint; every change is one frame (partition record and
//! reassignment record together), so a controller failover sees both or neither.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::records::{MetadataRecord, PartitionReassignmentRecord, PartitionRecord};
use super::state::{record_of, ControllerState};
use super::{PartitionImage, NO_LEADER};
pub use crate::metadata::Reassignment;
use crate::types::{Epoch, NodeId};

/// Ongoing reassignments by (topic id, partition).
pub(super) type Reassignments = BTreeMap<(Uuid, i32), Reassignment>;

/// One reassignment as ListPartitionReassignments shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReassignmentView {
    pub topic: String,
    pub partition: i32,
    /// The full replica set (AR): target first, then the replicas being removed.
    pub replicas: Vec<NodeId>,
    pub adding: Vec<NodeId>,
    pub removing: Vec<NodeId>,
}

/// Why a reassignment change was refused; Kafka codes at the protocol boundary.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReassignError {
    #[error("{0}")]
    UnknownTopicOrPartition(String),
    #[error("{0}")]
    InvalidReplicaAssignment(String),
    #[error("{0}")]
    NoReassignmentInProgress(String),
    /// The target changes the replica count while the request forbids it (KIP-860).
    #[error("{0}")]
    InvalidReplicationFactor(String),
    /// A validated change failed to apply to the working state: a bug.
    #[error("{0}")]
    Internal(String),
}

impl ReassignError {
    /// The Kafka error code at the protocol boundary.
    #[must_use]
    pub fn kafka_code(&self) -> i16 {
        match self {
            ReassignError::UnknownTopicOrPartition(_) => 3,
            ReassignError::InvalidReplicaAssignment(_) => 39,
            ReassignError::NoReassignmentInProgress(_) => 85,
            ReassignError::InvalidReplicationFactor(_) => 38,
            ReassignError::Internal(_) => -1,
        }
    }
}

impl ControllerState {
    /// Starts, replaces (`target: Some`) or cancels (`None`) the reassignment of one
    /// partition. Proposes one frame when something changes.
    pub fn alter_partition_reassignment(
        &mut self,
        topic: &str,
        partition: i32,
        target: Option<&[NodeId]>,
    ) -> Result<(), ReassignError> {
        self.alter_partition_reassignment_with(topic, partition, target, true)
    }

    /// As [`ControllerState::alter_partition_reassignment`]; with `allow_rf_change` false
    /// (AlterPartitionReassignments v1, KIP-860) a target whose size differs from the
    /// partition's replica count (AR minus removing) is INVALID_REPLICATION_FACTOR.
    pub fn alter_partition_reassignment_with(
        &mut self,
        topic: &str,
        partition: i32,
        target: Option<&[NodeId]>,
        allow_rf_change: bool,
    ) -> Result<(), ReassignError> {
        let unknown = || {
            ReassignError::UnknownTopicOrPartition(
                "This server does not host this topic-partition.".into(),
            )
        };
        let t = self.topics.get(topic).ok_or_else(unknown)?;
        let p = usize::try_from(partition)
            .ok()
            .and_then(|i| t.partitions.get(i))
            .ok_or_else(unknown)?
            .clone();
        let key = (t.topic_id, partition);
        let before = record_of(t, &p);
        let ongoing = self.reassignments.get(&key).cloned();
        let mut record = before.clone();
        let mut next = Reassignment::default();
        match target {
            None => {
                let Some(r) = &ongoing else {
                    return Err(ReassignError::NoReassignmentInProgress(format!(
                        "No ongoing reassignment for {topic}-{partition}."
                    )));
                };
                record.replicas.retain(|n| !r.adding.contains(n));
                record.isr.retain(|n| !r.adding.contains(n));
                if record.isr.is_empty() {
                    record.isr = record.replicas.clone();
                }
            }
            Some(target) => {
                self.validate_target(target)?;
                let removing = ongoing.as_ref().map_or(0, |r| r.removing.len());
                let current_rf = p.replicas.len().saturating_sub(removing);
                if !allow_rf_change && target.len() != current_rf {
                    return Err(ReassignError::InvalidReplicationFactor(format!(
                        "The replication factor is changed from {current_rf} to {}",
                        target.len()
                    )));
                }
                let current = &p.replicas;
                let removing: Vec<NodeId> =
                    current.iter().copied().filter(|n| !target.contains(n)).collect();
                next.adding = target.iter().copied().filter(|n| !current.contains(n)).collect();
                record.replicas = target.iter().copied().chain(removing.iter().copied()).collect();
                next.removing = removing;
            }
        }
        let mut state = Some(next).filter(|r| !r.adding.is_empty() || !r.removing.is_empty());
        if state.as_ref().is_some_and(|s| complete(s, &mut record)) {
            state = None;
        }
        self.elect_if_needed(&p, &mut record);
        super::elr::settle(t, &mut record);
        // Replicas left (completion or cancellation): fence them with a new epoch.
        if record.leader_epoch == p.leader_epoch
            && p.replicas.iter().any(|n| !record.replicas.contains(n))
        {
            record.leader_epoch = Epoch(p.leader_epoch.0.saturating_add(1));
        }
        if record == before && state == ongoing {
            return Ok(());
        }
        let mut records = vec![MetadataRecord::Partition(record)];
        if ongoing.is_some() || state.is_some() {
            let s = state.unwrap_or_default();
            records.push(MetadataRecord::PartitionReassignment(PartitionReassignmentRecord {
                topic_id: key.0,
                partition,
                adding: s.adding,
                removing: s.removing,
            }));
        }
        self.propose(records).map_err(|e| ReassignError::Internal(e.to_string()))
    }

    /// The reassignments in progress: all of them (`only: None`) or those of the listed
    /// partitions (unknown ones are skipped, as Kafka does).
    #[must_use]
    pub fn list_partition_reassignments(
        &self,
        only: Option<&[(String, Vec<i32>)]>,
    ) -> Vec<ReassignmentView> {
        let view = |topic: &str, partition: i32| -> Option<ReassignmentView> {
            let t = self.topics.get(topic)?;
            let r = self.reassignments.get(&(t.topic_id, partition))?;
            let p = t.partitions.get(usize::try_from(partition).ok()?)?;
            Some(ReassignmentView {
                topic: topic.to_string(),
                partition,
                replicas: p.replicas.clone(),
                adding: r.adding.clone(),
                removing: r.removing.clone(),
            })
        };
        match only {
            Some(list) => list
                .iter()
                .flat_map(|(topic, parts)| parts.iter().filter_map(move |p| view(topic, *p)))
                .collect(),
            None => self
                .reassignments
                .keys()
                .filter_map(|(id, p)| view(self.topic_ids.get(id)?, *p))
                .collect(),
        }
    }

    /// How many partitions are being reassigned (a metric on the active controller).
    #[must_use]
    pub fn reassignments_in_progress(&self) -> usize {
        self.reassignments.len()
    }

    /// The reassignment entry of a partition, if one is in progress.
    #[must_use]
    pub fn reassignment(&self, topic_id: Uuid, partition: i32) -> Option<&Reassignment> {
        self.reassignments.get(&(topic_id, partition))
    }

    /// Completes a partition's reassignment if `record` (a change about to be proposed, such
    /// as an ISR expansion) finishes it: rewrites replicas, ISR, leader and epoch in place and
    /// returns the record clearing the reassignment, to go in the same frame.
    pub(super) fn complete_reassignment_if_done(
        &self,
        p: &PartitionImage,
        record: &mut PartitionRecord,
    ) -> Option<MetadataRecord> {
        let r = self.reassignments.get(&(record.topic_id, record.partition))?;
        if !complete(r, record) {
            return None;
        }
        self.elect_if_needed(p, record);
        if let Some(t) = self.topic_ids.get(&record.topic_id).and_then(|n| self.topics.get(n)) {
            super::elr::settle(t, record);
        }
        if record.leader_epoch == p.leader_epoch {
            record.leader_epoch = Epoch(p.leader_epoch.0.saturating_add(1));
        }
        Some(MetadataRecord::PartitionReassignment(PartitionReassignmentRecord {
            topic_id: record.topic_id,
            partition: record.partition,
            adding: Vec::new(),
            removing: Vec::new(),
        }))
    }

    /// Checks the reassignment invariants (module docs) and that every ISR lies within its
    /// replicas; for the simulator and tests.
    pub fn check_reassignments(&self) -> Result<(), String> {
        for ((id, partition), r) in &self.reassignments {
            let p = self
                .topic_ids
                .get(id)
                .and_then(|name| self.topics.get(name))
                .and_then(|t| t.partitions.get(usize::try_from(*partition).ok()?))
                .ok_or_else(|| format!("reassignment of a missing partition {id}-{partition}"))?;
            let within = |v: &[NodeId]| v.iter().all(|n| p.replicas.contains(n));
            if (r.adding.is_empty() && r.removing.is_empty())
                || !within(&r.adding)
                || !within(&r.removing)
                || r.adding.iter().any(|n| r.removing.contains(n))
            {
                return Err(format!(
                    "{id}-{partition}: reassignment {r:?} does not fit replicas {:?}",
                    p.replicas
                ));
            }
        }
        for t in self.topics.values() {
            for p in &t.partitions {
                if !p.isr.iter().all(|n| p.replicas.contains(n)) {
                    return Err(format!(
                        "{}-{}: ISR {:?} outside replicas {:?}",
                        t.name, p.index, p.isr, p.replicas
                    ));
                }
            }
        }
        Ok(())
    }

    /// The reassignment records of one topic, for a snapshot (after its partition records).
    pub(super) fn reassignment_records(&self, topic_id: Uuid) -> Vec<MetadataRecord> {
        self.reassignments
            .range((topic_id, i32::MIN)..=(topic_id, i32::MAX))
            .map(|((id, partition), r)| {
                MetadataRecord::PartitionReassignment(PartitionReassignmentRecord {
                    topic_id: *id,
                    partition: *partition,
                    adding: r.adding.clone(),
                    removing: r.removing.clone(),
                })
            })
            .collect()
    }

    pub(super) fn apply_reassignment(
        &mut self,
        r: PartitionReassignmentRecord,
    ) -> Result<(), String> {
        let name = self
            .topic_ids
            .get(&r.topic_id)
            .ok_or_else(|| format!("reassignment of unknown topic id {}", r.topic_id))?;
        let known = self
            .topics
            .get(name)
            .and_then(|t| t.partitions.get(usize::try_from(r.partition).ok()?))
            .is_some();
        if !known {
            return Err(format!("reassignment of unknown partition {name}-{}", r.partition));
        }
        let key = (r.topic_id, r.partition);
        if r.adding.is_empty() && r.removing.is_empty() {
            self.reassignments.remove(&key);
        } else {
            self.reassignments.insert(key, Reassignment { adding: r.adding, removing: r.removing });
        }
        Ok(())
    }

    /// Kafka's `validateManualPartitionAssignment`: non-empty, no duplicates, registered
    /// brokers only.
    fn validate_target(&self, target: &[NodeId]) -> Result<(), ReassignError> {
        let bad = ReassignError::InvalidReplicaAssignment;
        if target.is_empty() {
            return Err(bad(
                "The manual partition assignment includes an empty replica list.".into()
            ));
        }
        for (i, n) in target.iter().enumerate() {
            if target[..i].contains(n) {
                return Err(bad(format!(
                    "The manual partition assignment includes the broker {n} more than once."
                )));
            }
            if !self.brokers.contains_key(n) {
                return Err(bad(format!(
                    "The manual partition assignment includes broker {n}, but no such broker \
                     is registered."
                )));
            }
        }
        Ok(())
    }

    /// Keeps the leader if it is still a replica in the ISR; otherwise the first live
    /// replica (in replica order) in the ISR leads, with a new epoch, or none.
    fn elect_if_needed(&self, p: &PartitionImage, record: &mut PartitionRecord) {
        let live = |n: &NodeId| self.brokers.get(n).is_some_and(|b| !b.fenced);
        let keeps = record.leader != NO_LEADER
            && record.replicas.contains(&record.leader)
            && record.isr.contains(&record.leader);
        if keeps {
            return;
        }
        let leader = record
            .replicas
            .iter()
            .copied()
            .find(|n| record.isr.contains(n) && live(n))
            .unwrap_or(NO_LEADER);
        if leader != record.leader {
            record.leader = leader;
            record.leader_epoch = Epoch(p.leader_epoch.0.saturating_add(1));
        }
    }
}

/// Kafka's `maybeCompleteReassignment`: the reassignment is done once the ISR minus the
/// removing replicas is non-empty and holds every adding replica; then `record` gets the
/// target replicas and that ISR. Returns whether it completed.
fn complete(r: &Reassignment, record: &mut PartitionRecord) -> bool {
    let isr: Vec<NodeId> = record.isr.iter().copied().filter(|n| !r.removing.contains(n)).collect();
    if isr.is_empty() || !r.adding.iter().all(|n| isr.contains(n)) {
        return false;
    }
    record.replicas.retain(|n| !r.removing.contains(n));
    record.isr = isr;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_support::registered;
    use crate::controller::{AlterPartitionRequest, BrokerDefaults, BrokerEpoch, NewTopic};

    fn ids(v: &[i32]) -> Vec<NodeId> {
        v.iter().map(|n| NodeId(*n)).collect()
    }

    /// Brokers 1..=4 registered and live; topic "t" with partition 0 on `replicas`
    /// (leader: the first). Returns the working state and the committed copy fed its frames.
    fn cluster(replicas: &[i32]) -> (ControllerState, ControllerState, u64) {
        let mut st = registered(&[1, 2, 3, 4]);
        let topic =
            NewTopic { assignments: vec![(0, replicas.to_vec())], ..NewTopic::with_defaults("t") };
        for r in st.create_topics(&[topic], false) {
            r.unwrap();
        }
        let mut committed =
            ControllerState::new("cluster".into(), NodeId(1), 2, BrokerDefaults::default())
                .unwrap();
        let mut index = 0;
        drain(&mut st, &mut committed, &mut index);
        (st, committed, index)
    }

    /// Applies the working state's queued frames to the committed copy, as Raft would.
    fn drain(st: &mut ControllerState, committed: &mut ControllerState, index: &mut u64) {
        for frame in st.take_proposals() {
            *index += 1;
            committed.apply_entry(*index, &frame).unwrap();
        }
    }

    fn part(st: &ControllerState) -> PartitionImage {
        st.image().topic("t").unwrap().partitions[0].clone()
    }

    fn expand(st: &mut ControllerState, with: i32) -> Vec<NodeId> {
        let p = part(st);
        let mut new_isr = p.isr.clone();
        new_isr.push(NodeId(with));
        let req = AlterPartitionRequest {
            topic_id: st.image().topic("t").unwrap().topic_id,
            partition: 0,
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            current_isr: p.isr.clone(),
            new_isr,
        };
        st.alter_partition(&req).unwrap()
    }

    #[test]
    fn reassignment_adds_then_completes_when_the_new_replica_joins_the_isr() {
        let (mut st, mut committed, mut index) = cluster(&[1, 2, 3]);
        let before = part(&st);
        assert_eq!(before.leader, NodeId(1));
        st.alter_partition_reassignment("t", 0, Some(&ids(&[2, 3, 4]))).unwrap();
        st.check_reassignments().unwrap();
        let p = part(&st);
        assert_eq!(p.replicas, ids(&[2, 3, 4, 1]), "AR = target ++ removing");
        assert_eq!(
            (p.leader, p.leader_epoch, p.isr.clone()),
            (NodeId(1), before.leader_epoch, before.isr)
        );
        let listed = st.list_partition_reassignments(None);
        assert_eq!(listed.len(), 1);
        assert_eq!((listed[0].adding.clone(), listed[0].removing.clone()), (ids(&[4]), ids(&[1])));
        assert_eq!(st.reassignments_in_progress(), 1);
        // A failover: the committed copy and a snapshot of it know the reassignment too.
        drain(&mut st, &mut committed, &mut index);
        assert_eq!(committed.snapshot()[9..], st.snapshot()[9..], "replay = working copy");
        let mut restored =
            ControllerState::new("cluster".into(), NodeId(2), 2, BrokerDefaults::default())
                .unwrap();
        restored.restore_snapshot(index, &committed.snapshot()).unwrap();
        assert_eq!(restored.list_partition_reassignments(None), listed);
        // Node 4 catches up and joins the ISR: the reassignment completes in the same change.
        let isr = expand(&mut st, 4);
        let p = part(&st);
        assert_eq!(p.replicas, ids(&[2, 3, 4]));
        assert_eq!(p.isr, isr);
        assert!(!p.isr.contains(&NodeId(1)));
        assert_eq!(
            p.leader,
            NodeId(2),
            "the removed leader hands over to the first target replica"
        );
        assert!(p.leader_epoch > before.leader_epoch);
        assert!(st.list_partition_reassignments(None).is_empty());
        drain(&mut st, &mut committed, &mut index);
        assert_eq!(committed.snapshot()[9..], st.snapshot()[9..], "replay = working copy");
        assert_eq!(committed.reassignments_in_progress(), 0);
    }

    #[test]
    fn cancellation_reverts_and_needs_a_reassignment() {
        let (mut st, ..) = cluster(&[1, 2, 3]);
        let err = st.alter_partition_reassignment("t", 0, None).unwrap_err();
        assert_eq!(err.kafka_code(), 85);
        st.alter_partition_reassignment("t", 0, Some(&ids(&[2, 3, 4]))).unwrap();
        st.alter_partition_reassignment("t", 0, None).unwrap();
        let p = part(&st);
        assert_eq!(p.replicas, ids(&[2, 3, 1]));
        assert_eq!(p.leader, NodeId(1));
        assert!(st.list_partition_reassignments(None).is_empty());
        assert_eq!(st.alter_partition_reassignment("t", 0, None).unwrap_err().kafka_code(), 85);
    }

    #[test]
    fn a_second_reassignment_starts_from_the_current_replicas() {
        let (mut st, ..) = cluster(&[1, 2, 3]);
        st.alter_partition_reassignment("t", 0, Some(&ids(&[2, 3, 4]))).unwrap();
        // Back to the original set: 4 is now being removed, nothing is added: done at once.
        st.alter_partition_reassignment("t", 0, Some(&ids(&[1, 2, 3]))).unwrap();
        let p = part(&st);
        assert_eq!(p.replicas, ids(&[1, 2, 3]));
        assert!(st.list_partition_reassignments(None).is_empty());
    }

    #[test]
    fn removing_a_replica_only_completes_at_once() {
        let (mut st, ..) = cluster(&[1, 2, 3]);
        let before = part(&st);
        st.alter_partition_reassignment("t", 0, Some(&ids(&[2, 3]))).unwrap();
        let p = part(&st);
        assert_eq!((p.replicas.clone(), p.isr.clone()), (ids(&[2, 3]), ids(&[2, 3])));
        assert_eq!(p.leader, NodeId(2));
        assert!(p.leader_epoch > before.leader_epoch);
        assert!(st.list_partition_reassignments(None).is_empty());
        // The same assignment again changes nothing and proposes nothing.
        st.take_proposals();
        st.alter_partition_reassignment("t", 0, Some(&ids(&[2, 3]))).unwrap();
        assert!(st.take_proposals().is_empty());
    }

    #[test]
    fn bad_requests_get_kafka_errors() {
        let (mut st, ..) = cluster(&[1, 2, 3]);
        let code = |st: &mut ControllerState, topic: &str, p: i32, t: &[i32]| {
            st.alter_partition_reassignment(topic, p, Some(&ids(t))).unwrap_err().kafka_code()
        };
        assert_eq!(code(&mut st, "nope", 0, &[1]), 3);
        assert_eq!(code(&mut st, "t", 5, &[1]), 3);
        assert_eq!(code(&mut st, "t", -1, &[1]), 3);
        assert_eq!(code(&mut st, "t", 0, &[]), 39);
        assert_eq!(code(&mut st, "t", 0, &[1, 1]), 39);
        assert_eq!(code(&mut st, "t", 0, &[1, 9]), 39);
        assert!(st.take_proposals().is_empty());
    }

    #[test]
    fn fenced_leader_during_reassignment_then_completion() {
        let (mut st, ..) = cluster(&[1, 2, 3]);
        st.alter_partition_reassignment("t", 0, Some(&ids(&[2, 3, 4]))).unwrap();
        let epoch = BrokerEpoch(st.brokers()[&NodeId(1)].epoch);
        st.fence_broker(NodeId(1), epoch).unwrap();
        let p = part(&st);
        assert_eq!(p.leader, NodeId(2), "election in AR order among the live ISR");
        assert_eq!(st.reassignments_in_progress(), 1, "the reassignment survives the election");
        expand(&mut st, 4);
        let p = part(&st);
        assert_eq!((p.replicas, p.leader), (ids(&[2, 3, 4]), NodeId(2)));
        assert!(st.list_partition_reassignments(None).is_empty());
    }

    #[test]
    fn list_filters_by_partition_and_deletion_forgets() {
        let (mut st, ..) = cluster(&[1, 2, 3]);
        st.alter_partition_reassignment("t", 0, Some(&ids(&[2, 3, 4]))).unwrap();
        let only = [("t".to_string(), vec![0, 7]), ("x".to_string(), vec![0])];
        assert_eq!(st.list_partition_reassignments(Some(&only)).len(), 1);
        assert!(st.list_partition_reassignments(Some(&[("t".into(), vec![1])])).is_empty());
        st.delete_topic("t").unwrap();
        assert_eq!(st.reassignments_in_progress(), 0);
    }
}
