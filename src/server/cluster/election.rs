//! Automatic leader rebalancing on the active controller (`auto.leader.rebalance.enable`,
//! every `leader.imbalance.check.interval.seconds`, as Kafka 4.x's
//! `QuorumController.maybeScheduleNextBalancePartitionLeaders`: the first check one interval
//! after this node became the active controller), and the leadership gauges of `/metrics`.
//!
//! Runs on the controller shard of every node (the same loop refreshes the cluster and
//! leadership gauges every `REBALANCE_POLL_MS`). The elections themselves are
//! `ControllerState::rebalance_leaders`, one controller operation per check (`run_op`).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::ClusterNode;
use crate::controller::election::{election_counts, has_preferred_leader};
use crate::controller::{MetadataImage, NO_LEADER};
use crate::metrics::leadership::LeadershipGauges;
use crate::shard::ShardCtx;

/// How often the loop looks at its role and settings (a check runs at most this late).
const REBALANCE_POLL_MS: u64 = 500;

/// On the active controller: a preferred election for every imbalanced partition, every
/// check interval, while the setting is on.
pub async fn rebalance_loop(node: Rc<ClusterNode>, ctx: Rc<ShardCtx>) {
    // When this node became the active controller (term), or when it last checked.
    let mut since: Option<(u64, Instant)> = None;
    while !ctx.is_shutting_down() {
        crate::shard::sleep(Duration::from_millis(REBALANCE_POLL_MS)).await;
        node.update_metrics();
        if !node.is_ready_leader() {
            since = None;
            continue;
        }
        let term = node.quorum.status().term;
        let (_, last) = *since.get_or_insert((term, Instant::now()));
        if since.is_some_and(|(t, _)| t != term) {
            since = Some((term, Instant::now()));
            continue;
        }
        let defaults = ctx.image().broker_defaults.clone();
        if defaults.current("auto.leader.rebalance.enable").as_deref() == Some("false") {
            continue;
        }
        let interval_s = u64::try_from(defaults.long("leader.imbalance.check.interval.seconds"))
            .unwrap_or(1)
            .max(1);
        if last.elapsed() < Duration::from_secs(interval_s) {
            continue;
        }
        since = Some((term, Instant::now()));
        match node.run_op(&ctx, |w, _, _| w.rebalance_leaders()).await {
            Ok((Ok(0), _)) => {}
            Ok((Ok(moved), _)) => {
                tracing::info!(moved, "automatic leader rebalance: preferred leaders elected");
            }
            Ok((Err(err), _)) => tracing::warn!("automatic leader rebalance refused: {err}"),
            Err(err) => tracing::debug!("automatic leader rebalance: {err:?}"),
        }
    }
}

/// The leadership gauges from this node's image.
#[must_use]
pub fn leadership_gauges(image: &MetadataImage) -> LeadershipGauges {
    let mut by_broker: BTreeMap<i32, i64> = image.brokers.keys().map(|b| (b.0, 0)).collect();
    let mut imbalance = 0;
    for t in image.topics.values() {
        for p in &t.partitions {
            if p.leader != NO_LEADER {
                *by_broker.entry(p.leader.0).or_default() += 1;
            }
            if !has_preferred_leader(p) {
                imbalance += 1;
            }
        }
    }
    let (preferred, unclean, auto) = election_counts();
    LeadershipGauges {
        leaders_by_broker: by_broker.into_iter().collect(),
        preferred_imbalance: imbalance,
        elections: vec![("preferred", preferred), ("unclean", unclean), ("auto_rebalance", auto)],
    }
}

#[cfg(test)]
mod tests {
    use super::leadership_gauges;
    use crate::controller::{BrokerEpoch, NewTopic};
    use crate::types::NodeId;

    #[test]
    fn gauges_count_leaders_per_broker_and_the_imbalance() {
        let mut st = crate::controller::test_support::registered(&[1, 2, 3]);
        let topic =
            NewTopic { num_partitions: 3, replication_factor: 3, ..NewTopic::with_defaults("t") };
        for r in st.create_topics(&[topic], false) {
            r.unwrap();
        }
        let g = leadership_gauges(&st.image());
        assert_eq!(g.preferred_imbalance, 0);
        assert_eq!(g.leaders_by_broker.iter().map(|(_, n)| n).sum::<i64>(), 3);
        assert_eq!(g.leaders_by_broker.len(), 3);
        // Broker 1 fenced: its leaderships move, each to a non-preferred replica.
        let led_by_1 = g.leaders_by_broker.iter().find(|(b, _)| *b == 1).map_or(0, |(_, n)| *n);
        let epoch = BrokerEpoch(st.brokers()[&NodeId(1)].epoch);
        st.fence_broker(NodeId(1), epoch).unwrap();
        let g = leadership_gauges(&st.image());
        assert_eq!(g.preferred_imbalance, led_by_1);
        assert_eq!(g.leaders_by_broker.iter().find(|(b, _)| *b == 1), Some(&(1, 0)));
        assert_eq!(g.elections.len(), 3);
    }
}
