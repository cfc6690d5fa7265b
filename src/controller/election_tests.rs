use uuid::Uuid;

use super::*;
use crate::controller::test_support::registered;
use crate::controller::{AlterPartitionRequest, BrokerEpoch, BrokerRegistration, NewTopic};

fn epoch_of(st: &ControllerState, n: NodeId) -> BrokerEpoch {
    BrokerEpoch(st.brokers()[&n].epoch)
}

fn partition(st: &ControllerState) -> PartitionImage {
    st.image().topic("t").unwrap().partitions[0].clone()
}

fn with_topic() -> ControllerState {
    let mut st = registered(&[1, 2, 3]);
    let topic =
        NewTopic { num_partitions: 1, replication_factor: 3, ..NewTopic::with_defaults("t") };
    for r in st.create_topics(&[topic], false) {
        r.unwrap();
    }
    st.take_proposals();
    st
}

fn one(kind: ElectionType, st: &mut ControllerState) -> Result<(), ElectionError> {
    let targets = Some(vec![("t".to_string(), vec![0])]);
    let mut res = st.elect_leaders(kind, &targets).unwrap();
    assert_eq!(res.len(), 1);
    res.remove(0).1.remove(0).1
}

/// The preferred replica fenced (a restart), then back: not eligible until it rejoins the
/// ISR; then elected once, and the second time the election is not needed.
fn preferred_out_and_back(st: &mut ControllerState) -> NodeId {
    let p = partition(st);
    let preferred = p.replicas[0];
    assert_eq!(p.leader, preferred, "a new partition starts on its preferred replica");
    st.fence_broker(preferred, epoch_of(st, preferred)).unwrap();
    let moved = partition(st);
    assert_ne!(moved.leader, preferred);
    assert!(!moved.isr.contains(&preferred));
    st.unfence_broker(preferred, epoch_of(st, preferred)).unwrap();
    assert_eq!(partition(st).leader, moved.leader, "unfencing alone moves nothing");
    assert_eq!(st.imbalanced_partitions(), vec![("t".to_string(), 0)]);
    preferred
}

fn rejoin_isr(st: &mut ControllerState, node: NodeId) {
    let p = partition(st);
    let mut new_isr = p.isr.clone();
    new_isr.push(node);
    let req = AlterPartitionRequest {
        topic_id: st.image().topic("t").unwrap().topic_id,
        partition: 0,
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        current_isr: p.isr,
        new_isr,
    };
    st.alter_partition(&req).unwrap();
}

#[test]
fn preferred_election_needs_the_preferred_replica_live_and_in_the_isr() {
    let mut st = with_topic();
    let preferred = preferred_out_and_back(&mut st);
    assert_eq!(one(ElectionType::Preferred, &mut st), Err(ElectionError::PreferredNotAvailable));
    rejoin_isr(&mut st, preferred);
    let before = partition(&st);
    st.take_proposals();
    assert_eq!(one(ElectionType::Preferred, &mut st), Ok(()));
    let after = partition(&st);
    assert_eq!(after.leader, preferred);
    assert_eq!(after.leader_epoch.0, before.leader_epoch.0 + 1);
    assert_eq!(after.isr, before.isr, "a preferred election keeps the ISR");
    assert_eq!(st.take_proposals().len(), 1);
    assert_eq!(one(ElectionType::Preferred, &mut st), Err(ElectionError::NotNeeded));
    assert!(st.take_proposals().is_empty());
    assert!(st.imbalanced_partitions().is_empty());
    // Unknown partitions and topics.
    let targets = Some(vec![("t".to_string(), vec![7]), ("nope".to_string(), vec![0])]);
    let res = st.elect_leaders(ElectionType::Preferred, &targets).unwrap();
    assert!(matches!(res[0].1[0].1, Err(ElectionError::UnknownPartition(..))));
    assert!(matches!(res[1].1[0].1, Err(ElectionError::UnknownPartition(..))));
}

#[test]
fn all_partitions_leave_out_elections_not_needed() {
    let mut st = with_topic();
    let res = st.elect_leaders(ElectionType::Preferred, &None).unwrap();
    assert_eq!(res.len(), 1);
    assert!(res[0].1.is_empty(), "{res:?}");
    let preferred = preferred_out_and_back(&mut st);
    rejoin_isr(&mut st, preferred);
    let res = st.elect_leaders(ElectionType::Preferred, &None).unwrap();
    assert_eq!(res[0].1, vec![(0, Ok(()))]);
    assert_eq!(partition(&st).leader, preferred);
}

#[test]
fn rebalance_moves_only_partitions_whose_preferred_replica_can_lead() {
    let mut st = with_topic();
    let preferred = preferred_out_and_back(&mut st);
    assert_eq!(st.rebalance_leaders().unwrap(), 0, "not in the ISR yet");
    rejoin_isr(&mut st, preferred);
    st.take_proposals();
    assert_eq!(st.rebalance_leaders().unwrap(), 1);
    assert_eq!(partition(&st).leader, preferred);
    assert_eq!(st.take_proposals().len(), 1);
    assert_eq!(st.rebalance_leaders().unwrap(), 0);
    assert!(st.take_proposals().is_empty());
}

#[test]
fn unclean_election_only_for_a_leaderless_partition() {
    let mut st = with_topic();
    assert_eq!(one(ElectionType::Unclean, &mut st), Err(ElectionError::NotNeeded));
    let p = partition(&st);
    // Fence every replica: the last ISR member goes to the ELR (KIP-966, an empty ISR), the
    // partition has no leader.
    for r in &p.replicas {
        st.fence_broker(*r, epoch_of(&st, *r)).unwrap();
    }
    let last = partition(&st);
    assert_eq!(last.leader, NO_LEADER);
    assert!(last.isr.is_empty());
    assert_eq!(last.elr.len(), 1);
    assert_eq!(one(ElectionType::Unclean, &mut st), Err(ElectionError::EligibleNotAvailable));
    // A replica other than the last ISR member comes back: only an unclean election helps.
    let back = *p.replicas.iter().find(|r| !last.elr.contains(r)).unwrap();
    st.unfence_broker(back, epoch_of(&st, back)).unwrap();
    assert_eq!(partition(&st).leader, NO_LEADER);
    assert_eq!(one(ElectionType::Preferred, &mut st), Err(ElectionError::PreferredNotAvailable));
    assert_eq!(one(ElectionType::Unclean, &mut st), Ok(()));
    let after = partition(&st);
    assert_eq!(after.leader, back);
    assert_eq!(after.isr, vec![back]);
    assert!(after.elr.is_empty(), "at min ISR the ELR empties");
    assert_eq!(after.leader_epoch.0, last.leader_epoch.0 + 1);
}

#[test]
fn working_copy_and_replayed_frames_agree() {
    let mut st = with_topic();
    let mut replica = st.clone();
    let preferred = preferred_out_and_back(&mut st);
    rejoin_isr(&mut st, preferred);
    st.rebalance_leaders().unwrap();
    for (i, frame) in st.take_proposals().into_iter().enumerate() {
        replica.apply_entry(i as u64 + 1, &frame).unwrap();
    }
    assert_eq!(partition(&replica), partition(&st));
    assert!(!replica.leads_any(NodeId(99)));
    assert!(replica.leads_any(preferred));
}

/// Controlled shutdown (Kafka's `BrokerHeartbeatManager`): the broker leaves every ISR it
/// is not the last member of, its leaderships move, it is told to go once it leads nothing
/// (fenced: no valid session), so its restart registers at once.
#[test]
fn controlled_shutdown_moves_leaderships_and_the_restart_registers_at_once() {
    use crate::controller::{BrokerHeartbeat, BrokerHeartbeats};
    let mut st = with_topic();
    let mut hbs = BrokerHeartbeats::new(9_000);
    hbs.activate(&st, 0);
    let p = partition(&st);
    let leaving = p.leader;
    let hb = BrokerHeartbeat {
        node: leaving,
        epoch: epoch_of(&st, leaving),
        metadata_offset: u64::MAX,
        want_fence: false,
        want_shutdown: true,
    };
    let out = hbs.heartbeat(&mut st, hb, 1_000).unwrap();
    assert!(out.should_shutdown && out.is_fenced);
    assert!(!out.records.is_empty());
    let after = partition(&st);
    assert_ne!(after.leader, leaving);
    assert!(after.isr.contains(&after.leader));
    assert!(!after.isr.contains(&leaving));
    assert!(!st.leads_any(leaving));
    // Its restart, within the old session's 9 s: accepted, not a duplicate.
    let req = BrokerRegistration {
        node: leaving,
        incarnation_id: Uuid::new_v4(),
        endpoints: Vec::new(),
        rack: None,
    };
    let epoch = hbs.register(&mut st, &req, 0, 2_000).unwrap();
    assert!(epoch.0 > hb.epoch.0);
}
