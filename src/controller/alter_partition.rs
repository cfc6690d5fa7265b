//! AlterPartition on the [`ControllerState`]: a partition leader asks to change its ISR
//! (shrink out lagging followers, expand with caught-up ones), as Kafka's
//! `ReplicationControlManager.alterPartition`, with KIP-966's ELR (see `controller::elr`). The
//! outcome is an ordinary `PartitionRecord` (no new record type); the leader epoch does
//! not change.
//!
//! Runs on the active controller's working state (through `server::cluster`'s `run_op`).
//! Invariants: only the current leader at the current leader epoch changes the ISR; the new
//! ISR holds the leader, only replicas, no duplicates; a broker joins the ISR only while
//! registered and unfenced (INELIGIBLE_REPLICA otherwise); a request built on an ISR other
//! than the one in force is refused (INVALID_UPDATE_VERSION: the leader retries with the
//! next image), which stands in for Kafka's partition epoch.

use uuid::Uuid;

use super::records::MetadataRecord;
use super::state::ControllerState;
use crate::types::{Epoch, NodeId};

/// One partition's ISR change, as the leader sends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterPartitionRequest {
    pub topic_id: Uuid,
    pub partition: i32,
    /// The sender, which must be the leader.
    pub leader: NodeId,
    pub leader_epoch: Epoch,
    /// The ISR the leader's change starts from (Kafka's partition epoch check).
    pub current_isr: Vec<NodeId>,
    pub new_isr: Vec<NodeId>,
}

/// Why an AlterPartition was refused; Kafka codes at the protocol boundary.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AlterPartitionError {
    #[error("unknown topic id {0} or partition")]
    UnknownPartition(Uuid),
    #[error("broker {sender} is not the leader (leader {leader})")]
    NotLeader { sender: NodeId, leader: NodeId },
    #[error("leader epoch {got} is not the current {current}")]
    FencedLeaderEpoch { got: Epoch, current: Epoch },
    #[error("the ISR changed since the request was built")]
    InvalidUpdateVersion,
    #[error("invalid ISR: {0}")]
    InvalidRequest(String),
    #[error("broker {0} is fenced or unregistered and cannot join the ISR")]
    IneligibleReplica(NodeId),
}

impl AlterPartitionError {
    /// The Kafka error code at the protocol boundary.
    #[must_use]
    pub fn kafka_code(&self) -> i16 {
        match self {
            AlterPartitionError::UnknownPartition(_) => 3, // UNKNOWN_TOPIC_OR_PARTITION
            AlterPartitionError::NotLeader { .. } => 6,    // NOT_LEADER_OR_FOLLOWER
            AlterPartitionError::FencedLeaderEpoch { .. } => 74, // FENCED_LEADER_EPOCH
            AlterPartitionError::InvalidRequest(_) => 42,  // INVALID_REQUEST
            AlterPartitionError::IneligibleReplica(_) => 107, // INELIGIBLE_REPLICA
            AlterPartitionError::InvalidUpdateVersion => 108, // INVALID_UPDATE_VERSION
        }
    }
}

impl ControllerState {
    /// Changes a partition's ISR as its leader asks; returns the ISR in force afterwards
    /// (the same ISR again proposes nothing).
    pub fn alter_partition(
        &mut self,
        req: &AlterPartitionRequest,
    ) -> Result<Vec<NodeId>, AlterPartitionError> {
        let unknown = || AlterPartitionError::UnknownPartition(req.topic_id);
        let t = self
            .topic_ids
            .get(&req.topic_id)
            .and_then(|name| self.topics.get(name))
            .ok_or_else(unknown)?;
        let p = usize::try_from(req.partition)
            .ok()
            .and_then(|i| t.partitions.get(i))
            .ok_or_else(unknown)?;
        if p.leader != req.leader {
            return Err(AlterPartitionError::NotLeader { sender: req.leader, leader: p.leader });
        }
        if p.leader_epoch != req.leader_epoch {
            return Err(AlterPartitionError::FencedLeaderEpoch {
                got: req.leader_epoch,
                current: p.leader_epoch,
            });
        }
        if p.isr != req.current_isr {
            return Err(AlterPartitionError::InvalidUpdateVersion);
        }
        if !req.new_isr.contains(&req.leader) {
            return Err(AlterPartitionError::InvalidRequest("the leader must stay".into()));
        }
        for (i, r) in req.new_isr.iter().enumerate() {
            if !p.replicas.contains(r) || req.new_isr[..i].contains(r) {
                return Err(AlterPartitionError::InvalidRequest(format!(
                    "{r} is not a replica or listed twice"
                )));
            }
            let joins = !p.isr.contains(r);
            let eligible = self.brokers.get(r).is_some_and(|b| !b.fenced);
            if joins && !eligible {
                return Err(AlterPartitionError::IneligibleReplica(*r));
            }
        }
        // The leader stays (it is in the new ISR); KIP-966 moves replicas that leave below
        // min.insync.replicas to the ELR and clears it once the ISR is back at the minimum.
        let leader = req.leader;
        let live = |r: NodeId| r == leader || self.brokers.get(&r).is_some_and(|b| !b.fenced);
        let Some(record) = super::elr::change(t, p, req.new_isr.clone(), live) else {
            return Ok(p.isr.clone());
        };
        let mut record = record;
        // An ISR expansion may finish a reassignment (`controller::reassign`): same frame.
        let done = self.complete_reassignment_if_done(p, &mut record);
        let isr = record.isr.clone();
        let mut records = vec![MetadataRecord::Partition(record)];
        records.extend(done);
        self.propose(records).map_err(|e| AlterPartitionError::InvalidRequest(e.to_string()))?;
        Ok(isr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::state::record_of;
    use crate::controller::test_support::registered;
    use crate::controller::{BrokerEpoch, NewTopic};

    fn epoch_of(st: &ControllerState, n: i32) -> BrokerEpoch {
        BrokerEpoch(st.brokers()[&NodeId(n)].epoch)
    }

    fn partition(st: &ControllerState) -> crate::controller::PartitionImage {
        st.image().topic("t").unwrap().partitions[0].clone()
    }

    fn ids(v: &[i32]) -> Vec<NodeId> {
        v.iter().map(|n| NodeId(*n)).collect()
    }

    fn request(st: &ControllerState, new_isr: &[i32]) -> AlterPartitionRequest {
        let p = partition(st);
        AlterPartitionRequest {
            topic_id: st.image().topic("t").unwrap().topic_id,
            partition: 0,
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            current_isr: p.isr.clone(),
            new_isr: ids(new_isr),
        }
    }

    fn with_topic(nodes: &[i32]) -> ControllerState {
        let mut st = registered(nodes);
        let topic =
            NewTopic { num_partitions: 1, replication_factor: 3, ..NewTopic::with_defaults("t") };
        for r in st.create_topics(&[topic], false) {
            r.unwrap();
        }
        st
    }

    #[test]
    fn shrink_and_expand_by_the_leader_only() {
        let mut st = with_topic(&[1, 2, 3]);
        let p = partition(&st);
        assert_eq!(p.isr.len(), 3);
        let leader = p.leader.0;
        let others: Vec<i32> = p.replicas.iter().map(|n| n.0).filter(|n| *n != leader).collect();
        // Shrink one follower out.
        let isr = st.alter_partition(&request(&st, &[leader, others[0]])).unwrap();
        assert_eq!(isr, ids(&[leader, others[0]]));
        assert_eq!(partition(&st).isr, isr);
        assert_eq!(partition(&st).leader_epoch, p.leader_epoch, "an ISR change keeps the epoch");
        // A request built on the old ISR is refused.
        let mut stale = request(&st, &[leader]);
        stale.current_isr = p.isr.clone();
        assert_eq!(st.alter_partition(&stale), Err(AlterPartitionError::InvalidUpdateVersion));
        // A follower may not change it; nor a stale leader epoch.
        let mut not_leader = request(&st, &[others[0]]);
        not_leader.leader = NodeId(others[0]);
        assert!(matches!(
            st.alter_partition(&not_leader),
            Err(AlterPartitionError::NotLeader { .. })
        ));
        let mut old = request(&st, &[leader]);
        old.leader_epoch = Epoch(p.leader_epoch.0 - 1);
        assert!(matches!(
            st.alter_partition(&old),
            Err(AlterPartitionError::FencedLeaderEpoch { .. })
        ));
        // Expand back; a fenced broker may not join.
        st.fence_broker(NodeId(others[1]), epoch_of(&st, others[1])).unwrap();
        assert_eq!(
            st.alter_partition(&request(&st, &[leader, others[0], others[1]])),
            Err(AlterPartitionError::IneligibleReplica(NodeId(others[1])))
        );
        st.unfence_broker(NodeId(others[1]), epoch_of(&st, others[1])).unwrap();
        assert_eq!(partition(&st).isr, ids(&[leader, others[0]]), "unfencing does not rejoin");
        let isr = st.alter_partition(&request(&st, &[leader, others[0], others[1]])).unwrap();
        assert_eq!(isr.len(), 3);
        assert!(matches!(
            st.alter_partition(&request(&st, &[others[0]])),
            Err(AlterPartitionError::InvalidRequest(_))
        ));
    }

    #[test]
    fn an_empty_isr_from_older_metadata_gets_the_live_replicas() {
        let mut st = with_topic(&[1, 2, 3]);
        for n in [1, 2, 3] {
            st.fence_broker(NodeId(n), epoch_of(&st, n)).unwrap();
        }
        // As the controller before kept ISRs wrote it: no leader, an empty ISR.
        let t = st.image().topic("t").unwrap().clone();
        let mut record = record_of(&t, &t.partitions[0]);
        record.isr.clear();
        record.elr.clear();
        record.last_known_elr.clear();
        st.propose(vec![MetadataRecord::Partition(record)]).unwrap();
        st.unfence_broker(NodeId(2), epoch_of(&st, 2)).unwrap();
        let p = partition(&st);
        assert_eq!((p.leader, p.isr), (NodeId(2), ids(&[2])));
    }

    #[test]
    fn fencing_elects_from_the_isr_only() {
        let mut st = with_topic(&[1, 2, 3]);
        let p = partition(&st);
        let leader = p.leader.0;
        let others: Vec<i32> = p.replicas.iter().map(|n| n.0).filter(|n| *n != leader).collect();
        // others[0] falls out of the ISR; then the leader is fenced: others[1] leads.
        st.alter_partition(&request(&st, &[leader, others[1]])).unwrap();
        st.fence_broker(NodeId(leader), epoch_of(&st, leader)).unwrap();
        let q = partition(&st);
        assert_eq!(q.leader, NodeId(others[1]));
        assert_eq!(q.isr, ids(&[others[1]]));
        assert_eq!(q.leader_epoch.0, p.leader_epoch.0 + 1);
        // The last ISR member fenced: no leader (no unclean election); it waits in the ELR.
        st.fence_broker(NodeId(others[1]), epoch_of(&st, others[1])).unwrap();
        let q = partition(&st);
        assert_eq!(q.leader, crate::controller::NO_LEADER);
        assert_eq!((q.isr, q.elr), (vec![], ids(&[others[1]])));
        // An out-of-sync replica coming back does not lead; the ISR member does.
        st.unfence_broker(NodeId(leader), epoch_of(&st, leader)).unwrap();
        assert_eq!(partition(&st).leader, crate::controller::NO_LEADER);
        st.unfence_broker(NodeId(others[1]), epoch_of(&st, others[1])).unwrap();
        assert_eq!(partition(&st).leader, NodeId(others[1]));
    }
}
