//! Where a follower truncates: Kafka's `AbstractFetcherThread.getOffsetTruncationState`,
//! pure. The input is the leader's answer to "where does my latest epoch end on your log"
//! (an OffsetForLeaderEpoch response, or Fetch v12+'s `diverging_epoch`), the follower's own
//! `end_offset_for_epoch` lookup and its log end.
//!
//! Runs wherever the follower's fetch decisions run (the partition's owner shard); no I/O.
//! Invariant: the offset returned never exceeds the follower's log end, so truncation never
//! grows a log; an incomplete answer means "truncate there, then ask again with the new
//! latest epoch", which terminates because each round lowers the follower's latest epoch.

use crate::types::{Epoch, Offset};

/// The leader's answer for the follower's epoch: the largest epoch <= the one asked about
/// and where it ends on the leader. `None`: the leader has no epoch information
/// (UNDEFINED_EPOCH_OFFSET), so the follower falls back to its high watermark.
pub type LeaderEpochEnd = Option<(Epoch, Offset)>;

/// Where to truncate, and whether the follower then knows its log is a prefix of the
/// leader's (`complete`) or must ask again with its new latest epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truncation {
    pub offset: Offset,
    pub complete: bool,
}

/// Kafka's rule. `local_end_for` is the follower's `end_offset_for_epoch`.
pub fn truncation_point(
    leader: LeaderEpochEnd,
    local_end_for: impl Fn(Epoch) -> Option<(Epoch, Offset)>,
    log_end: Offset,
    high_watermark: Offset,
) -> Truncation {
    let Some((leader_epoch, leader_end)) = leader else {
        return Truncation { offset: high_watermark.min(log_end), complete: true };
    };
    if leader_epoch.0 < 0 {
        return Truncation { offset: leader_end.min(log_end), complete: true };
    }
    match local_end_for(leader_epoch) {
        // The follower never saw the leader's epoch: cut to where the follower's largest
        // epoch below it ends and ask again with that epoch (the next round is complete).
        Some((local_epoch, local_end)) if local_epoch != leader_epoch => {
            Truncation { offset: local_end.min(log_end), complete: false }
        }
        // Both know the epoch: it ends at the earlier of the two ends. The follower's own
        // end matters when it led a later epoch the leader never saw (KIP-279): its data
        // past that end was written at that epoch and must go, even though the leader's
        // copy of the epoch runs further.
        Some((_, local_end)) => {
            #[cfg(test)]
            if crate::planted::is(crate::planted::Bug::LeaderEndTruncation) {
                return Truncation { offset: leader_end.min(log_end), complete: true };
            }
            Truncation { offset: local_end.min(leader_end).min(log_end), complete: true }
        }
        // The follower has no epoch at or below the leader's (it kept none): the leader's
        // end is all there is to go by.
        None => Truncation { offset: leader_end.min(log_end), complete: true },
    }
}

/// The leader's (epoch, end offset) as Kafka puts it on the wire (OffsetForLeaderEpoch, or
/// Fetch's `diverging_epoch`), where end offset -1 (UNDEFINED_EPOCH_OFFSET) means "no
/// epoch information".
#[must_use]
pub fn leader_answer(epoch: i32, end_offset: i64) -> LeaderEpochEnd {
    (end_offset >= 0).then_some((Epoch(epoch), Offset(end_offset)))
}

/// Leader side of Fetch v12+ (Kafka's `Partition.validateFetchOffsetAndMaybeGetDivergingEpoch`):
/// the follower's `last_fetched_epoch` and fetch offset checked against the leader's
/// `end_offset_for_epoch`. Returns the diverging epoch (wire values, `(-1, -1)` when the
/// leader knows no such epoch) when the follower's log may diverge from the leader's, in
/// which case the leader sends no records. `last_fetched_epoch` < 0: not checked.
pub fn diverging_epoch(
    leader_end_for: impl Fn(Epoch) -> Option<(Epoch, Offset)>,
    last_fetched_epoch: Epoch,
    fetch_offset: Offset,
) -> Option<(i32, i64)> {
    if last_fetched_epoch.0 < 0 {
        return None;
    }
    let (epoch, end) = leader_end_for(last_fetched_epoch).map_or((-1, -1), |(e, o)| (e.0, o.0));
    (epoch < last_fetched_epoch.0 || end < fetch_offset.0).then_some((epoch, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::epoch::EpochCache;

    fn cache(entries: &[(i32, i64)]) -> EpochCache {
        let mut c = EpochCache::default();
        for (e, o) in entries {
            c.assign(Epoch(*e), Offset(*o));
        }
        c
    }

    #[test]
    fn same_epoch_truncates_to_the_leaders_end() {
        let f = cache(&[(1, 0), (3, 10)]);
        let leo = Offset(25);
        let t = truncation_point(
            Some((Epoch(3), Offset(20))),
            |e| f.end_offset_for(e, leo),
            leo,
            Offset(5),
        );
        assert_eq!(t, Truncation { offset: Offset(20), complete: true });
        // The leader has more of the epoch than the follower: nothing to cut.
        let t = truncation_point(
            Some((Epoch(3), Offset(40))),
            |e| f.end_offset_for(e, leo),
            leo,
            Offset(5),
        );
        assert_eq!(t, Truncation { offset: leo, complete: true });
    }

    /// Issue 41's evidence: the follower led epoch 3 (one batch, 15629-15631) that the
    /// leader holds at epoch 2; the leader's epoch 4 starts at 15632. The follower's own end
    /// of epoch 2 (15629) is the cut, not the leader's (15632), and one round settles it.
    #[test]
    fn a_follower_that_led_an_unseen_epoch_cuts_at_its_own_end_of_the_common_epoch() {
        let leader = cache(&[(0, 0), (2, 1737), (4, 15632), (5, 39126)]);
        let follower = cache(&[(0, 0), (2, 1737), (3, 15629)]);
        let (leader_end, follower_end) = (Offset(39200), Offset(15632));
        let answer =
            diverging_epoch(|e| leader.end_offset_for(e, leader_end), Epoch(3), follower_end);
        assert_eq!(answer, Some((2, 15632)));
        let (e, o) = answer.unwrap();
        let t = truncation_point(
            leader_answer(e, o),
            |e| follower.end_offset_for(e, follower_end),
            follower_end,
            Offset(15629),
        );
        assert_eq!(t, Truncation { offset: Offset(15629), complete: true });
        // Next round: epoch 2 up to 15629 is a prefix of the leader's epoch 2.
        let at = |e| leader.end_offset_for(e, leader_end);
        assert_eq!(diverging_epoch(at, Epoch(2), Offset(15629)), None);
    }

    #[test]
    fn unknown_leader_epoch_takes_two_rounds() {
        // Follower: epochs 1@0, 3@10 (LEO 25). Leader never had epoch 3: answers (2, 12).
        let f = cache(&[(1, 0), (3, 10)]);
        let leo = Offset(25);
        let t = truncation_point(
            Some((Epoch(2), Offset(12))),
            |e| f.end_offset_for(e, leo),
            leo,
            Offset(0),
        );
        assert_eq!(t, Truncation { offset: Offset(10), complete: false });
    }

    #[test]
    fn leader_reports_divergence_as_kafka() {
        let l = cache(&[(1, 0), (4, 10)]);
        let leo = Offset(30);
        let at = |e| l.end_offset_for(e, leo);
        // In step: the follower's epoch is the leader's and its offset is within it.
        assert_eq!(diverging_epoch(at, Epoch(4), Offset(30)), None);
        assert_eq!(diverging_epoch(at, Epoch(1), Offset(10)), None);
        // Follower had more of epoch 1 than the leader kept.
        assert_eq!(diverging_epoch(at, Epoch(1), Offset(12)), Some((1, 10)));
        // Follower saw an epoch 3 the leader never had.
        assert_eq!(diverging_epoch(at, Epoch(3), Offset(11)), Some((1, 10)));
        // Follower's epoch above anything the leader knows.
        assert_eq!(diverging_epoch(at, Epoch(7), Offset(11)), Some((-1, -1)));
        assert_eq!(leader_answer(-1, -1), None);
        assert_eq!(diverging_epoch(at, Epoch(-1), Offset(99)), None);
    }

    #[test]
    fn no_epoch_information_falls_back_to_the_high_watermark() {
        let f = cache(&[]);
        let t = truncation_point(None, |e| f.end_offset_for(e, Offset(9)), Offset(9), Offset(4));
        assert_eq!(t, Truncation { offset: Offset(4), complete: true });
        let t = truncation_point(Some((Epoch(-1), Offset(3))), |_| None, Offset(9), Offset(4));
        assert_eq!(t, Truncation { offset: Offset(3), complete: true });
    }
}
