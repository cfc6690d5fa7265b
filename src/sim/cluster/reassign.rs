//! Partition reassignment in the cluster simulation (issue 16): a client that starts,
//! replaces and cancels reassignments (`ControllerState::alter_partition_reassignment`,
//! AlterPartitionReassignments) and, standing in for a partition leader whose adding replica
//! caught up, asks for the ISR expansion (AlterPartition) that completes them, both built
//! from a random node's committed image as real callers would (stale images included).
//! Broker deaths, fencing and controller failovers of the harness happen meanwhile, so
//! elections run during reassignments; `ClusterCheck` checks every committed state with
//! `ControllerState::check_reassignments` besides its leader invariants.
//!
//! Single-threaded, part of [`super::Cluster`]; deterministic for a seed (the image's
//! topics and brokers are iterated in name and id order).

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;

use super::super::net::Network;
use super::super::node::SimNode;
use super::{error_body, Body, Cluster};
use crate::controller::{AlterPartitionRequest, ControllerError, ControllerState};
use crate::types::NodeId;

/// Percent of client reassignment steps that cancel one in progress (the rest expand).
const CANCEL_PERCENT: u32 = 15;

impl Cluster {
    /// One client reassignment step from a random node's committed image.
    pub(super) fn client_reassign(
        &mut self,
        nodes: &[SimNode],
        net: &mut Network,
        rng: &mut StdRng,
        now: u64,
    ) {
        let host_i = rng.gen_range(0..self.ids.len());
        let Some(state) = nodes[host_i].machine() else { return };
        let image = state.image();
        let brokers: Vec<NodeId> = state.brokers().keys().copied().collect();
        let topics: Vec<_> = image.topics.values().filter(|t| !t.partitions.is_empty()).collect();
        if brokers.is_empty() || topics.is_empty() {
            return;
        }
        let t = topics[rng.gen_range(0..topics.len())];
        let p = &t.partitions[rng.gen_range(0..t.partitions.len())];
        let body = match image.reassignments.get(&(t.topic_id, p.index)) {
            Some(_) if rng.gen_range(0..100) < CANCEL_PERCENT => {
                Body::Reassign { topic: t.name.clone(), partition: p.index, target: None }
            }
            Some(r) => {
                let Some(add) = r.adding.iter().find(|n| !p.isr.contains(n)) else { return };
                let mut new_isr = p.isr.clone();
                new_isr.push(*add);
                Body::ExpandIsr(AlterPartitionRequest {
                    topic_id: t.topic_id,
                    partition: p.index,
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    current_isr: p.isr.clone(),
                    new_isr,
                })
            }
            None => {
                let mut target = brokers;
                target.shuffle(rng);
                target.truncate(rng.gen_range(1..=target.len().min(3)));
                Body::Reassign { topic: t.name.clone(), partition: p.index, target: Some(target) }
            }
        };
        let host = self.ids[host_i];
        self.client_send(host, nodes, net, rng, now, body);
    }
}

/// Runs a reassignment request on the working copy and gives the answer.
pub(super) fn run(working: &mut ControllerState, body: &Body) -> Body {
    let refused = |reason: String| error_body(&ControllerError::InvalidRequest(reason));
    match body {
        Body::Reassign { topic, partition, target } => {
            match working.alter_partition_reassignment(topic, *partition, target.as_deref()) {
                Ok(()) => Body::Done,
                Err(e) => refused(e.to_string()),
            }
        }
        Body::ExpandIsr(req) => match working.alter_partition(req) {
            Ok(_) => Body::Done,
            Err(e) => refused(e.to_string()),
        },
        _ => refused("not a reassignment request".into()),
    }
}
