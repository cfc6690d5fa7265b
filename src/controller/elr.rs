//! KIP-966 eligible leader replicas: how a partition's ISR, ELR, last known ELR and leader
//! change together, as Kafka 4.1's `PartitionChangeBuilder` does with
//! `eligible.leader.replicas.version=1` (on for every cluster here: there are no older
//! metadata versions to stay compatible with).
//!
//! Pure, used on the controller shard by broker fencing/unfencing ([`super::brokers`]) and
//! AlterPartition ([`super::alter_partition`]). Rules:
//! - while the target ISR is at or above the topic's `min.insync.replicas`, ELR and last
//!   known ELR are empty;
//! - below it, ELR = (current ISR ∪ current ELR) − target ISR: a replica that leaves the ISR
//!   while the high watermark is frozen (the leader stops advancing it below the minimum,
//!   `partition::replicas`) holds every committed record, so it may lead again cleanly;
//! - last known ELR = (its old members ∪ the candidates above) − target ISR − ELR;
//! - a leader is kept while it is live and in the target ISR; otherwise the first live
//!   replica (replica order) in the target ISR, or, when the target ISR is empty, in the ELR.
//!   An ELR member elected becomes the whole ISR and leaves the ELR;
//! - no unclean election: no live ISR or ELR member means no leader (-1).
//!
//! One deliberate difference from Kafka: a replica that restarts after an unclean shutdown
//! stays in the ELR. Kafka drops it (its page cache may have lost acknowledged data); here a
//! follower reports a log end offset only for data its flush policy made durable, so a
//! SIGKILL loses nothing the high watermark covered. Lists are kept in ascending node order
//! (what Kafka's `HashSet` iteration gives for small ids).

use super::brokers::NO_LEADER;
use super::records::PartitionRecord;
use super::state::record_of;
use super::{PartitionImage, TopicImage};
use crate::types::{Epoch, NodeId};

/// The partition change to apply, given the ISR the caller wants (`target_isr`) and which
/// brokers may lead (`acceptable`: registered and unfenced). `None` when nothing changes.
pub(super) fn change(
    t: &TopicImage,
    p: &PartitionImage,
    target_isr: Vec<NodeId>,
    acceptable: impl Fn(NodeId) -> bool,
) -> Option<PartitionRecord> {
    let min_isr = usize::try_from(t.config.min_insync_replicas).unwrap_or(1);
    let (mut isr, mut elr, last_known_elr) = target_elr(p, target_isr, min_isr);
    let valid = |r: NodeId, isr: &[NodeId], elr: &[NodeId]| {
        acceptable(r) && (isr.contains(&r) || (isr.is_empty() && elr.contains(&r)))
    };
    let leader = if p.leader != NO_LEADER && valid(p.leader, &isr, &elr) {
        p.leader
    } else {
        p.replicas.iter().copied().find(|r| valid(*r, &isr, &elr)).unwrap_or(NO_LEADER)
    };
    if leader != p.leader && elr.contains(&leader) {
        isr = vec![leader];
        elr.retain(|r| *r != leader);
    }
    if leader == p.leader && isr == p.isr && elr == p.elr && last_known_elr == p.last_known_elr {
        return None;
    }
    let mut record = record_of(t, p);
    if leader != p.leader {
        record.leader = leader;
        record.leader_epoch = Epoch(p.leader_epoch.0.saturating_add(1));
    }
    record.isr = isr;
    record.elr = elr;
    record.last_known_elr = last_known_elr;
    // An ELR member elected is the whole ISR: at the minimum (min ISR 1) the lists empty.
    settle(t, &mut record);
    (record != record_of(t, p)).then_some(record)
}

/// Brings `record`'s ELR and last known ELR in line with an ISR or replica set a caller
/// changed directly (an unclean election, a reassignment's completion or cancellation):
/// at or above `min.insync.replicas` both are empty; below it, ISR members and replicas no
/// longer assigned leave them.
pub(super) fn settle(t: &TopicImage, record: &mut PartitionRecord) {
    let min_isr = usize::try_from(t.config.min_insync_replicas).unwrap_or(1);
    if record.isr.len() >= min_isr {
        record.elr.clear();
        record.last_known_elr.clear();
        return;
    }
    let (isr, replicas) = (record.isr.clone(), record.replicas.clone());
    let keep = |n: &NodeId| !isr.contains(n) && replicas.contains(n);
    record.elr.retain(keep);
    record.last_known_elr.retain(keep);
}

/// Kafka's `maybePopulateTargetElr`: (ISR, ELR, last known ELR) for `target_isr`.
fn target_elr(
    p: &PartitionImage,
    target_isr: Vec<NodeId>,
    min_isr: usize,
) -> (Vec<NodeId>, Vec<NodeId>, Vec<NodeId>) {
    if target_isr.len() >= min_isr {
        return (target_isr, Vec::new(), Vec::new());
    }
    let mut candidates: Vec<NodeId> = p.elr.iter().chain(&p.isr).copied().collect();
    candidates.sort_unstable();
    candidates.dedup();
    let elr: Vec<NodeId> = candidates.iter().copied().filter(|r| !target_isr.contains(r)).collect();
    let mut last: Vec<NodeId> = candidates.into_iter().chain(p.last_known_elr.clone()).collect();
    last.sort_unstable();
    last.dedup();
    last.retain(|r| !target_isr.contains(r) && !elr.contains(r));
    (target_isr, elr, last)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use uuid::Uuid;

    use super::*;
    use crate::controller::configs::{BrokerDefaults, TopicConfig};
    use crate::types::ShardId;

    fn ids(v: &[i32]) -> Vec<NodeId> {
        v.iter().map(|n| NodeId(*n)).collect()
    }

    fn topic(min_isr: &str) -> TopicImage {
        let mut configs = BTreeMap::new();
        configs.insert("min.insync.replicas".to_string(), min_isr.to_string());
        TopicImage {
            name: "t".into(),
            topic_id: Uuid::from_u128(1),
            internal: false,
            config: TopicConfig::resolve(&configs, &BrokerDefaults::default()),
            configs,
            partitions: Vec::new(),
        }
    }

    fn partition(leader: i32, isr: &[i32], elr: &[i32], lke: &[i32]) -> PartitionImage {
        PartitionImage {
            index: 0,
            owner_shard: ShardId(0),
            hosted: true,
            leader: NodeId(leader),
            leader_epoch: Epoch(5),
            replicas: ids(&[1, 2, 3]),
            isr: ids(isr),
            elr: ids(elr),
            last_known_elr: ids(lke),
        }
    }

    /// Applies `change` to `p` as the controller would.
    fn step(t: &TopicImage, p: &PartitionImage, isr: &[i32], live: &[i32]) -> PartitionImage {
        let live = ids(live);
        match change(t, p, ids(isr), |r| live.contains(&r)) {
            None => p.clone(),
            Some(r) => PartitionImage {
                leader: r.leader,
                leader_epoch: r.leader_epoch,
                isr: r.isr,
                elr: r.elr,
                last_known_elr: r.last_known_elr,
                ..p.clone()
            },
        }
    }

    fn view(p: &PartitionImage) -> (i32, i32, Vec<NodeId>, Vec<NodeId>, Vec<NodeId>) {
        (p.leader.0, p.leader_epoch.0, p.isr.clone(), p.elr.clone(), p.last_known_elr.clone())
    }

    #[test]
    fn at_or_above_min_isr_there_is_no_elr() {
        let t = topic("2");
        let p = partition(1, &[1, 2, 3], &[], &[]);
        let q = step(&t, &p, &[1, 2], &[1, 2]);
        assert_eq!(view(&q), (1, 5, ids(&[1, 2]), vec![], vec![]));
    }

    /// The KIP-966 walk: RF 3, min ISR 2; followers leave one by one, then the leader dies;
    /// the last member to leave comes back first and leads from the ELR (clean election).
    #[test]
    fn replicas_leaving_below_min_isr_stay_electable() {
        let t = topic("2");
        let p = partition(1, &[1, 2, 3], &[], &[]);
        let p = step(&t, &p, &[1, 2], &[1, 2]);
        // ISR drops below 2: broker 2 goes to the ELR; 3 left while the ISR was large enough.
        let p = step(&t, &p, &[1], &[1]);
        assert_eq!(view(&p), (1, 5, ids(&[1]), ids(&[2]), vec![]));
        // The leader is fenced: no live ISR or ELR member, no leader; the ISR is empty.
        let p = step(&t, &p, &[], &[]);
        assert_eq!(view(&p), (-1, 6, vec![], ids(&[1, 2]), vec![]));
        // Broker 3 (never in the ELR) returns: it may not lead (that would be unclean).
        let p = step(&t, &p, &[], &[3]);
        assert_eq!(p.leader, NO_LEADER);
        // Broker 2 returns: elected from the ELR, it becomes the ISR.
        let p = step(&t, &p, &[], &[2, 3]);
        assert_eq!(view(&p), (2, 7, ids(&[2]), ids(&[1]), vec![]));
        // The leader adds 3 back: the ISR reaches 2, ELR and last known ELR clear.
        let p = step(&t, &p, &[2, 3], &[2, 3]);
        assert_eq!(view(&p), (2, 7, ids(&[2, 3]), vec![], vec![]));
    }

    #[test]
    fn an_isr_member_leads_before_an_elr_member() {
        let t = topic("3");
        let p = partition(1, &[1, 2], &[3], &[]);
        // The leader dies; 2 is live and in the ISR, 3 only in the ELR.
        let q = step(&t, &p, &[2], &[2, 3]);
        assert_eq!(view(&q), (2, 6, ids(&[2]), ids(&[1, 3]), vec![]));
    }

    #[test]
    fn last_known_elr_keeps_former_members() {
        let t = topic("3");
        let p = partition(1, &[1], &[2], &[3]);
        // Nothing changes: no record.
        assert!(change(&t, &p, ids(&[1]), |_| true).is_none());
        // The ISR grows to the minimum: everything clears.
        let q = step(&t, &p, &[1, 2, 3], &[1, 2, 3]);
        assert_eq!(view(&q), (1, 5, ids(&[1, 2, 3]), vec![], vec![]));
        // Below it, a former last-known member stays there unless it is back in ISR/ELR.
        let q = step(&t, &p, &[1, 2], &[1, 2]);
        assert_eq!(view(&q), (1, 5, ids(&[1, 2]), vec![], ids(&[3])));
    }
}
