//! Leadership gauges and election counters, as this node sees the committed metadata:
//! partition leaders per broker (per shard of this broker: `shardlog_shard_leaders`, fed by
//! the shards themselves), the preferred-leader imbalance (partitions not led by the first replica of their assignment,
//! Kafka's `PreferredReplicaImbalanceCount`), and the leader elections this process ran as
//! the active controller, by type.
//!
//! Written by the controller shard with the cluster gauges ([`super::cluster`]: a plain
//! snapshot behind a mutex, read at scrape time), rendered by [`super::prom`].

use std::fmt;
use std::sync::Mutex;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

/// One node's view of partition leadership.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeadershipGauges {
    /// (broker id, partitions it leads), every registered broker listed.
    pub leaders_by_broker: Vec<(i32, i64)>,
    /// Partitions with a leader other than their preferred replica (or none).
    pub preferred_imbalance: i64,
    /// Leader elections run here as the active controller: (type, count since start).
    pub elections: Vec<(&'static str, u64)>,
}

static LEADERSHIP: Mutex<Option<LeadershipGauges>> = Mutex::new(None);

/// Replaces the leadership gauges (called on the controller shard).
pub fn set(gauges: LeadershipGauges) {
    if let Ok(mut g) = LEADERSHIP.lock() {
        *g = Some(gauges);
    }
}

/// The gauges last set, if any.
#[must_use]
pub fn get() -> Option<LeadershipGauges> {
    LEADERSHIP.lock().ok().and_then(|g| g.clone())
}

pub(super) fn encode(enc: &mut DescriptorEncoder) -> fmt::Result {
    let Some(g) = get() else {
        return Ok(());
    };
    enc.encode_descriptor(
        "shardlog_preferred_leader_imbalance",
        "Partitions not led by their preferred replica (first in the assignment)",
        None,
        MetricType::Gauge,
    )?
    .encode_gauge(&g.preferred_imbalance)?;
    let mut metric = enc.encode_descriptor(
        "shardlog_broker_partition_leaders",
        "Partitions each broker leads, in the committed metadata this node applied",
        None,
        MetricType::Gauge,
    )?;
    for (broker, count) in &g.leaders_by_broker {
        let labels: Vec<(&str, String)> = vec![("broker", broker.to_string())];
        metric.encode_family(&labels)?.encode_gauge(count)?;
    }
    let mut metric = enc.encode_descriptor(
        "shardlog_leader_elections",
        "Leader elections this node ran as the active controller, by type (preferred and \
         unclean by ElectLeaders, auto_rebalance by the automatic leader rebalance)",
        None,
        MetricType::Counter,
    )?;
    for (kind, count) in &g.elections {
        let labels: Vec<(&str, String)> = vec![("type", (*kind).to_string())];
        metric
            .encode_family(&labels)?
            .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(count, None)?;
    }
    Ok(())
}
