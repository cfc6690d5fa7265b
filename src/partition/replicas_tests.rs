//! Unit tests of `partition::replicas` (Kafka's `PartitionTest`/`ReplicaTest` cases that
//! need no log).

use super::*;

const LAG: i64 = 30_000;

fn n(ids: &[i32]) -> Vec<NodeId> {
    ids.iter().map(|i| NodeId(*i)).collect()
}

fn three(isr: &[i32], min_isr: i32) -> LeaderReplicas {
    let settings = ReplicaSettings { lag_time_max_ms: LAG, min_insync_replicas: min_isr };
    LeaderReplicas::new(
        NodeId(1),
        Epoch(5),
        Offset(0),
        &n(&[1, 2, 3]),
        &n(isr),
        Offset(0),
        settings,
        1_000_000,
    )
}

#[test]
fn single_replica_high_watermark_is_its_own_durable_offset() {
    let mut r = LeaderReplicas::new(
        NodeId(1),
        Epoch(0),
        Offset(0),
        &n(&[1]),
        &n(&[1]),
        Offset(0),
        ReplicaSettings::default(),
        0,
    );
    assert!(r.update_high_watermark(Offset(10), Offset(7), 5));
    assert_eq!(r.high_watermark(), Offset(7));
    assert!(!r.update_high_watermark(Offset(10), Offset(7), 6));
    assert!(r.check_produce().is_ok());
    assert_eq!(r.ack_state(Offset(7)), Ok(AckState::Done));
    assert_eq!(r.ack_state(Offset(8)), Ok(AckState::Waiting));
    assert!(r.isr_change(Offset(10), 10_000_000, |_| true).is_none());
}

#[test]
fn high_watermark_is_the_isr_minimum_and_never_goes_back() {
    let mut r = three(&[1, 2, 3], 2);
    let t = 1_000_000;
    // Followers unknown yet: nothing advances.
    assert!(!r.update_high_watermark(Offset(10), Offset(10), t));
    r.on_follower_fetch(NodeId(2), 7, Offset(10), Offset(10), Offset(10), true, t).unwrap();
    assert_eq!(r.high_watermark(), Offset(0));
    assert!(r.on_follower_fetch(NodeId(3), 7, Offset(6), Offset(10), Offset(10), true, t).unwrap());
    assert_eq!(r.high_watermark(), Offset(6));
    // The leader's own durable offset bounds it too.
    r.on_follower_fetch(NodeId(3), 7, Offset(10), Offset(12), Offset(8), true, t).unwrap();
    assert_eq!(r.high_watermark(), Offset(8));
    // A follower that truncated (new fetch offset lower) does not move it back.
    r.on_follower_fetch(NodeId(3), 7, Offset(4), Offset(12), Offset(12), true, t).unwrap();
    assert_eq!(r.high_watermark(), Offset(8));
    // Taken out of the ISR (fenced, say), 3 no longer holds the high watermark, although
    // its last catch-up is within the lag window: Kafka counts only ISR-eligible replicas.
    r.apply_isr(&n(&[1, 2]));
    r.on_follower_fetch(NodeId(2), 7, Offset(12), Offset(12), Offset(12), true, t).unwrap();
    assert_eq!(r.high_watermark(), Offset(12));
}

#[test]
fn a_caught_up_replica_about_to_rejoin_holds_the_high_watermark() {
    // Not in the ISR, but caught up within the lag window (Kafka's joining replica): the
    // high watermark does not pass it, so it never joins below it; past the window it may.
    let mut r = three(&[1, 2], 2);
    let t = 1_000_000;
    r.on_follower_fetch(NodeId(3), 7, Offset(10), Offset(10), Offset(10), true, t).unwrap();
    r.on_follower_fetch(NodeId(3), 7, Offset(10), Offset(12), Offset(12), true, t + 10).unwrap();
    r.on_follower_fetch(NodeId(2), 7, Offset(12), Offset(12), Offset(12), true, t + 20).unwrap();
    assert_eq!(r.high_watermark(), Offset(10));
    let later = t + LAG + 100;
    r.on_follower_fetch(NodeId(2), 7, Offset(12), Offset(12), Offset(12), true, later).unwrap();
    assert_eq!(r.high_watermark(), Offset(12));
}

#[test]
fn caught_up_time_follows_kafkas_rule() {
    let mut r = three(&[1, 2, 3], 1);
    let t0 = 1_000_000;
    // Fetch at 5 while the leader is at 10: not caught up (yet).
    r.on_follower_fetch(NodeId(2), 1, Offset(5), Offset(10), Offset(10), true, t0).unwrap();
    assert_eq!(r.follower(NodeId(2)).unwrap().last_caught_up_ms, t0); // the ISR grace
                                                                      // Next fetch at 10 (the leader's end at the previous fetch) while the leader is at 20:
                                                                      // caught up as of the previous fetch.
    let t1 = t0 + 40_000;
    r.on_follower_fetch(NodeId(2), 1, Offset(10), Offset(20), Offset(20), true, t1).unwrap();
    assert_eq!(r.follower(NodeId(2)).unwrap().last_caught_up_ms, t0);
    let t2 = t1 + 500;
    r.on_follower_fetch(NodeId(2), 1, Offset(20), Offset(20), Offset(20), true, t2).unwrap();
    assert_eq!(r.follower(NodeId(2)).unwrap().last_caught_up_ms, t2);
    // Stale broker epoch refused, unknown replica refused with Kafka's two codes.
    let stale = r.on_follower_fetch(NodeId(2), 0, Offset(20), Offset(20), Offset(20), true, t2);
    assert_eq!(stale.unwrap_err().kafka_code(), 6);
    let other = r.on_follower_fetch(NodeId(9), 1, Offset(0), Offset(20), Offset(20), true, t2);
    assert_eq!(other.unwrap_err().kafka_code(), 75);
    let old = r.on_follower_fetch(NodeId(9), 1, Offset(0), Offset(20), Offset(20), false, t2);
    assert_eq!(old.unwrap_err().kafka_code(), 6);
}

#[test]
fn lagging_follower_shrinks_the_isr_and_rejoins_at_the_high_watermark() {
    let mut r = three(&[1, 2, 3], 2);
    let t0 = 1_000_000;
    r.on_follower_fetch(NodeId(2), 1, Offset(10), Offset(10), Offset(10), true, t0).unwrap();
    r.on_follower_fetch(NodeId(3), 1, Offset(10), Offset(10), Offset(10), true, t0).unwrap();
    assert_eq!(r.high_watermark(), Offset(10));
    // Leader grows to 50; 2 keeps up, 3 stops fetching.
    let t1 = t0 + LAG + 1;
    r.on_follower_fetch(NodeId(2), 1, Offset(50), Offset(50), Offset(50), true, t1).unwrap();
    assert!(r.isr_change(Offset(50), t0 + LAG, |_| true).is_none(), "within the lag window");
    let change = r.isr_change(Offset(50), t1, |_| true).unwrap();
    assert_eq!(change, IsrChange::Shrink { remove: n(&[3]), new_isr: n(&[1, 2]) });
    r.mark_pending(change);
    assert!(r.isr_change(Offset(50), t1, |_| true).is_none(), "one change in flight");
    r.apply_isr(&n(&[1, 2]));
    r.update_high_watermark(Offset(50), Offset(50), t1);
    assert_eq!(r.high_watermark(), Offset(50));
    // 3 comes back below the high watermark: not yet; at it: expand (if eligible).
    r.on_follower_fetch(NodeId(3), 1, Offset(30), Offset(50), Offset(50), true, t1).unwrap();
    assert!(r.isr_change(Offset(50), t1, |_| true).is_none());
    r.on_follower_fetch(NodeId(3), 1, Offset(50), Offset(50), Offset(50), true, t1).unwrap();
    assert!(r.isr_change(Offset(50), t1, |_| false).is_none(), "fenced broker");
    let change = r.isr_change(Offset(50), t1, |_| true).unwrap();
    assert_eq!(change, IsrChange::Expand { add: NodeId(3), new_isr: n(&[1, 2, 3]) });
    r.mark_pending(change);
    assert_eq!(r.maximal_isr(), n(&[1, 2, 3]));
}

#[test]
fn min_insync_replicas_before_and_after_append() {
    let mut r = three(&[1], 2);
    assert_eq!(r.check_produce().unwrap_err().kafka_code(), 19);
    r.apply_isr(&n(&[1, 2]));
    assert!(r.check_produce().is_ok());
    let t = 1_000_000;
    r.on_follower_fetch(NodeId(2), 1, Offset(5), Offset(5), Offset(5), true, t).unwrap();
    assert_eq!(r.ack_state(Offset(5)), Ok(AckState::Done));
    // The ISR shrinks while a produce waits for offset 9: below min.insync.replicas the
    // high watermark is frozen (KIP-966), so the produce keeps waiting (Kafka 4.1 times
    // it out) rather than being acknowledged by the leader alone.
    r.apply_isr(&n(&[1]));
    assert!(r.is_under_min_isr());
    // (Past the lag window, so 2 no longer counts as a replica about to rejoin.)
    assert!(!r.update_high_watermark(Offset(9), Offset(9), t + LAG + 1));
    r.on_follower_fetch(NodeId(3), 1, Offset(9), Offset(9), Offset(9), true, t).unwrap();
    assert_eq!(r.high_watermark(), Offset(5));
    assert_eq!(r.ack_state(Offset(9)), Ok(AckState::Waiting));
    // Back at the minimum, it moves again.
    r.apply_isr(&n(&[1, 3]));
    assert!(r.update_high_watermark(Offset(9), Offset(9), t + LAG + 1));
    assert_eq!(r.ack_state(Offset(9)), Ok(AckState::Done));
}

/// Kafka's `effectiveMinIsr`: a minimum above the replica count is capped by it.
#[test]
fn effective_min_isr_is_capped_by_the_replica_count() {
    let settings = ReplicaSettings { lag_time_max_ms: LAG, min_insync_replicas: 2 };
    let one = n(&[1]);
    let mut r =
        LeaderReplicas::new(NodeId(1), Epoch(0), Offset(0), &one, &one, Offset(0), settings, 0);
    assert_eq!(r.effective_min_isr(), 1);
    assert!(r.update_high_watermark(Offset(4), Offset(4), 0));
    assert_eq!(r.high_watermark(), Offset(4));
}

/// Kafka's `isReplicaIsrEligible`: a fenced follower, caught up a moment ago but out of the
/// ISR, does not hold the high watermark back as a replica about to join.
#[test]
fn a_fenced_follower_does_not_hold_the_high_watermark() {
    let mut r = three(&[1, 2, 3], 2);
    let t = 1_000_000;
    r.on_follower_fetch(NodeId(2), 1, Offset(5), Offset(5), Offset(5), true, t).unwrap();
    r.on_follower_fetch(NodeId(3), 1, Offset(5), Offset(5), Offset(5), true, t).unwrap();
    assert_eq!(r.high_watermark(), Offset(5));
    // 3 dies and the controller fences it out of the ISR; the leader appends more.
    r.apply_isr(&n(&[1, 2]));
    r.ineligible = n(&[3]);
    r.on_follower_fetch(NodeId(2), 1, Offset(9), Offset(9), Offset(9), true, t + 1).unwrap();
    r.update_high_watermark(Offset(9), Offset(9), t + 2);
    assert_eq!(r.high_watermark(), Offset(9), "3, out of the ISR and fenced, holds nothing");
}

#[test]
fn a_replica_leaving_the_isr_stops_holding_the_high_watermark() {
    // Broker 2 dies right after a fetch: the controller fences it and drops it from the ISR.
    // Its stale log end must not keep acks=all waiting for replica.lag.time.max.ms.
    let mut r = three(&[1, 2, 3], 2);
    let t = 1_000_000;
    r.on_follower_fetch(NodeId(2), 7, Offset(10), Offset(10), Offset(10), true, t).unwrap();
    r.on_follower_fetch(NodeId(3), 7, Offset(10), Offset(10), Offset(10), true, t).unwrap();
    assert_eq!(r.high_watermark(), Offset(10));
    r.on_follower_fetch(NodeId(3), 7, Offset(20), Offset(20), Offset(20), true, t + 100).unwrap();
    assert_eq!(r.high_watermark(), Offset(10));
    r.apply_isr(&n(&[1, 3]));
    assert!(r.update_high_watermark(Offset(20), Offset(20), t + 200));
    assert_eq!(r.high_watermark(), Offset(20));
    // Back and caught up, it counts again before it rejoins (Kafka's joining replica).
    r.on_follower_fetch(NodeId(2), 8, Offset(20), Offset(25), Offset(25), true, t + 300).unwrap();
    assert_eq!(r.high_watermark(), Offset(20));
}

/// Issue 43: a follower of an idle partition whose log end is the leader's is caught up
/// however long ago it last fetched (a long-poll parked for `replica.fetch.wait.max.ms`, a
/// leader or follower stall longer than `replica.lag.time.max.ms`): Kafka's `isCaughtUp`
/// compares the log ends before it looks at `lastCaughtUpTimeMs`. Only an append on the
/// leader starts the clock, from the follower's last fetch at the leader's end.
#[test]
fn an_idle_caught_up_follower_never_counts_as_lagging() {
    let mut r = three(&[1, 2, 3], 2);
    let t0 = 1_000_000;
    let end = Offset(10);
    for f in [2, 3] {
        r.on_follower_fetch(NodeId(f), 1, end, end, end, true, t0).unwrap();
    }
    let mut t = t0;
    // Gaps between fetches: long-polls answered at the wait bound, then stalls around and far
    // beyond the lag window.
    for gap in [500, 500, 1, LAG - 1, LAG, LAG + 1, 2 * LAG, 10 * LAG, 500] {
        for probe in [t + gap / 2, t + gap] {
            assert_eq!(r.isr_change(end, probe, |_| true), None, "gap {gap} at {probe}");
            for f in [2, 3] {
                assert!(r.follower(NodeId(f)).unwrap().is_caught_up(end, probe, LAG));
            }
        }
        t += gap;
        for f in [2, 3] {
            r.on_follower_fetch(NodeId(f), 1, end, end, end, true, t).unwrap();
        }
    }
    // Follower 3 stops fetching: the partition is idle, so it still is caught up.
    assert_eq!(r.isr_change(end, t + 100 * LAG, |_| true), None);
    // The leader appends: the clock runs from each follower's last fetch at the old end.
    let grown = Offset(11);
    r.on_follower_fetch(NodeId(2), 1, grown, grown, grown, true, t + LAG).unwrap();
    assert_eq!(r.isr_change(grown, t + LAG, |_| true), None, "within the window");
    let change = r.isr_change(grown, t + LAG + 1, |_| true).unwrap();
    assert_eq!(change, IsrChange::Shrink { remove: n(&[3]), new_isr: n(&[1, 2]) });
}

/// Issue 43: a refused AlterPartition (the controller's ISR moved on, or it did not answer)
/// is not rebuilt from the same stale ISR at every check: the next change waits for an ISR
/// change from the controller or `ISR_CHANGE_RETRY_MS`.
#[test]
fn a_refused_isr_change_waits_for_a_new_isr_or_the_retry_delay() {
    let mut r = three(&[1, 2, 3], 2);
    let t0 = 1_000_000;
    r.on_follower_fetch(NodeId(2), 1, Offset(10), Offset(10), Offset(10), true, t0).unwrap();
    r.on_follower_fetch(NodeId(3), 1, Offset(0), Offset(10), Offset(10), true, t0).unwrap();
    let t1 = t0 + LAG + 1;
    let change = r.isr_change(Offset(10), t1, |_| true).unwrap();
    r.mark_pending(change);
    r.refused(t1);
    assert_eq!(r.pending, None);
    assert_eq!(r.isr_change(Offset(10), t1 + 250, |_| true), None, "held after a refusal");
    let retry = t1 + crate::constants::ISR_CHANGE_RETRY_MS;
    assert!(r.isr_change(Offset(10), retry, |_| true).is_some(), "retried after the delay");
    // Refused again, then the image brings the ISR the controller holds: decided at once
    // (3, at the high watermark, may rejoin).
    r.refused(retry);
    assert_eq!(r.isr_change(Offset(10), retry + 1, |_| true), None);
    r.apply_isr(&n(&[1, 2]));
    let change = r.isr_change(Offset(10), retry + 1, |_| true).unwrap();
    assert_eq!(change, IsrChange::Expand { add: NodeId(3), new_isr: n(&[1, 2, 3]) });
}
