//! Leader elections the active controller runs besides the ones broker changes force
//! (`brokers.rs`): ElectLeaders (PREFERRED and UNCLEAN, KIP-460) and automatic leader
//! rebalancing (`auto.leader.rebalance.enable`), as Kafka 4.x's `ReplicationControlManager`
//! (`electLeaders`, `maybeBalancePartitionLeaders`) without KIP-966's ELR.
//!
//! Runs on the active controller's working state (shard 0, through `server::cluster`'s
//! `run_op`); pure, no clock. Every election is an ordinary `PartitionRecord` with the leader
//! epoch bumped; the ISR is unchanged except in an unclean election, where it becomes the
//! new leader alone. Invariants: a preferred election only picks the first replica of the
//! assignment, and only while it is registered, unfenced and in the ISR; an unclean election
//! only runs on a leaderless partition and picks a registered, unfenced replica; a partition
//! with a leader is never given NO_LEADER here.

use std::sync::atomic::{AtomicU64, Ordering};

use super::brokers::NO_LEADER;
use super::records::MetadataRecord;
use super::state::{record_of, ControllerState};
use super::{ControllerError, PartitionImage};
use crate::types::{Epoch, NodeId};

/// Partition records per metadata frame when many elections run at once (a frame must stay
/// far below `METADATA_FRAME_BYTES_MAX`, and one Raft entry per partition would be wasteful).
const ELECTIONS_PER_FRAME: usize = 512;

/// Kafka's election types (ElectLeaders `election_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElectionType {
    /// The first replica of the assignment, if it is live and in the ISR.
    Preferred,
    /// A leaderless partition gets any live replica, even out of the ISR (data may be lost).
    Unclean,
}

impl ElectionType {
    /// From the wire value (0 preferred, 1 unclean); ElectLeaders v0 has no field: preferred.
    #[must_use]
    pub fn from_wire(value: i8) -> Option<Self> {
        match value {
            0 => Some(ElectionType::Preferred),
            1 => Some(ElectionType::Unclean),
            _ => None,
        }
    }
}

/// Why one partition's election did not change its leader (Kafka codes at the boundary).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ElectionError {
    #[error("no such partition as {0}-{1}")]
    UnknownPartition(String, i32),
    /// The desired leader already leads (PREFERRED), or the partition has a leader (UNCLEAN).
    #[error("election not needed")]
    NotNeeded,
    #[error("the preferred leader is not live or not in the ISR")]
    PreferredNotAvailable,
    #[error("no live replica can lead")]
    EligibleNotAvailable,
}

/// The partitions an ElectLeaders names: `None` is every partition of every topic.
pub type ElectionTargets = Option<Vec<(String, Vec<i32>)>>;

/// One topic's outcomes, in request order.
pub type TopicElections = (String, Vec<(i32, Result<(), ElectionError>)>);

/// Elections this process ran as the active controller, by type (for `/metrics`).
static PREFERRED_ELECTIONS: AtomicU64 = AtomicU64::new(0);
static UNCLEAN_ELECTIONS: AtomicU64 = AtomicU64::new(0);
static AUTO_REBALANCE_ELECTIONS: AtomicU64 = AtomicU64::new(0);

/// Elections run here since start: (preferred by request, unclean, preferred by the
/// automatic rebalance). Counted when the operation is applied to the working state.
#[must_use]
pub fn election_counts() -> (u64, u64, u64) {
    (
        PREFERRED_ELECTIONS.load(Ordering::Relaxed),
        UNCLEAN_ELECTIONS.load(Ordering::Relaxed),
        AUTO_REBALANCE_ELECTIONS.load(Ordering::Relaxed),
    )
}

/// Whether `p` is led by its preferred replica (a partition without replicas counts as led).
#[must_use]
pub fn has_preferred_leader(p: &PartitionImage) -> bool {
    p.replicas.first().is_none_or(|r| *r == p.leader)
}

impl ControllerState {
    /// Whether `node` may be elected leader: registered and unfenced (see
    /// [`ControllerState::is_live`], which also covers the single node before it registers).
    #[must_use]
    pub fn is_eligible_leader(&self, node: NodeId) -> bool {
        node != NO_LEADER && self.is_live(node)
    }

    /// The new leader of a preferred election, if one can run: the first replica, when it
    /// is not the leader already, is eligible and in the ISR.
    fn preferred_candidate(&self, p: &PartitionImage) -> Result<NodeId, ElectionError> {
        let Some(preferred) = p.replicas.first().copied() else {
            return Err(ElectionError::PreferredNotAvailable);
        };
        if preferred == p.leader {
            return Err(ElectionError::NotNeeded);
        }
        if p.isr.contains(&preferred) && self.is_eligible_leader(preferred) {
            Ok(preferred)
        } else {
            Err(ElectionError::PreferredNotAvailable)
        }
    }

    /// The record of one election of `kind` on `topic`-`partition`, or why there is none.
    fn election_record(
        &self,
        kind: ElectionType,
        topic: &str,
        partition: i32,
    ) -> Result<MetadataRecord, ElectionError> {
        let unknown = || ElectionError::UnknownPartition(topic.to_string(), partition);
        let t = self.topics.get(topic).ok_or_else(unknown)?;
        let p = usize::try_from(partition)
            .ok()
            .and_then(|i| t.partitions.get(i))
            .ok_or_else(unknown)?;
        let mut r = record_of(t, p);
        match kind {
            ElectionType::Preferred => r.leader = self.preferred_candidate(p)?,
            ElectionType::Unclean => {
                if p.leader != NO_LEADER {
                    return Err(ElectionError::NotNeeded);
                }
                // A clean choice first (a live ISR member), as Kafka's PartitionChangeBuilder.
                let eligible = |n: &&NodeId| self.is_eligible_leader(**n);
                if let Some(clean) = p.replicas.iter().filter(|n| p.isr.contains(n)).find(eligible)
                {
                    r.leader = *clean;
                } else {
                    let leader = *p
                        .replicas
                        .iter()
                        .find(eligible)
                        .ok_or(ElectionError::EligibleNotAvailable)?;
                    r.leader = leader;
                    r.isr = vec![leader];
                }
            }
        }
        r.leader_epoch = Epoch(p.leader_epoch.0.saturating_add(1));
        super::elr::settle(t, &mut r);
        Ok(MetadataRecord::Partition(r))
    }

    /// ElectLeaders: one election of `kind` per named partition, or, with `targets` `None`,
    /// on every partition (whose results then leave out ELECTION_NOT_NEEDED, as Kafka's).
    /// The elections are proposed together; on `Err` (a frame refused) nothing was proposed.
    pub fn elect_leaders(
        &mut self,
        kind: ElectionType,
        targets: &ElectionTargets,
    ) -> Result<Vec<TopicElections>, ControllerError> {
        let all = targets.is_none();
        let named: Vec<(String, Vec<i32>)> = match targets {
            Some(t) => t.clone(),
            None => self
                .topics
                .values()
                .map(|t| (t.name.clone(), t.partitions.iter().map(|p| p.index).collect()))
                .collect(),
        };
        let mut records = Vec::new();
        let mut results = Vec::with_capacity(named.len());
        for (topic, partitions) in named {
            let mut outcomes = Vec::with_capacity(partitions.len());
            for partition in partitions {
                let outcome = match self.election_record(kind, &topic, partition) {
                    Ok(record) => {
                        records.push(record);
                        Ok(())
                    }
                    Err(e) => Err(e),
                };
                if !(all && outcome == Err(ElectionError::NotNeeded)) {
                    outcomes.push((partition, outcome));
                }
            }
            results.push((topic, outcomes));
        }
        let elected = records.len() as u64;
        self.propose_chunked(records)?;
        let counter = match kind {
            ElectionType::Preferred => &PREFERRED_ELECTIONS,
            ElectionType::Unclean => &UNCLEAN_ELECTIONS,
        };
        counter.fetch_add(elected, Ordering::Relaxed);
        Ok(results)
    }

    /// Partitions not led by their preferred replica, as (topic, partition): Kafka's
    /// "imbalanced" partitions (the preferred-leader imbalance gauge counts these).
    #[must_use]
    pub fn imbalanced_partitions(&self) -> Vec<(String, i32)> {
        let mut out = Vec::new();
        for t in self.topics.values() {
            for p in &t.partitions {
                if !has_preferred_leader(p) {
                    out.push((t.name.clone(), p.index));
                }
            }
        }
        out
    }

    /// Automatic leader rebalancing (Kafka 4.x, no percentage threshold): a preferred
    /// election for every partition whose preferred replica is live, in the ISR and not the
    /// leader. Returns how many leaders moved.
    pub fn rebalance_leaders(&mut self) -> Result<usize, ControllerError> {
        let mut records = Vec::new();
        for t in self.topics.values() {
            for p in &t.partitions {
                if let Ok(leader) = self.preferred_candidate(p) {
                    let mut r = record_of(t, p);
                    r.leader = leader;
                    r.leader_epoch = Epoch(p.leader_epoch.0.saturating_add(1));
                    records.push(MetadataRecord::Partition(r));
                }
            }
        }
        let moved = records.len();
        self.propose_chunked(records)?;
        AUTO_REBALANCE_ELECTIONS.fetch_add(moved as u64, Ordering::Relaxed);
        Ok(moved)
    }

    /// Whether `node` leads any partition (a broker in controlled shutdown may stop once it
    /// leads nothing).
    #[must_use]
    pub fn leads_any(&self, node: NodeId) -> bool {
        self.topics.values().any(|t| t.partitions.iter().any(|p| p.leader == node))
    }

    fn propose_chunked(&mut self, records: Vec<MetadataRecord>) -> Result<(), ControllerError> {
        if records.is_empty() {
            return Ok(());
        }
        let ops: Vec<Vec<MetadataRecord>> =
            records.chunks(ELECTIONS_PER_FRAME).map(<[MetadataRecord]>::to_vec).collect();
        self.propose_ops(ops)
    }
}

#[cfg(test)]
#[path = "election_tests.rs"]
mod tests;
