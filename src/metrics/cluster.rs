//! Gauges of the metadata quorum and broker registry, as this node sees them: its quorum
//! role, term, commit and applied index (the metadata offset this broker has reached), the
//! active controller's lag per voter, and registered and fenced brokers.
//!
//! Written by the controller shard after each quorum step it publishes (a plain snapshot
//! behind a mutex: a few writes a second at most, read at scrape time), rendered with the
//! other families by [`super::prom`].

use std::fmt;
use std::sync::Mutex;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

/// One node's view of the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterGauges {
    /// 0 follower, 1 candidate (or pre-candidate), 2 leader, 3 learner.
    pub role: i64,
    pub term: i64,
    pub commit_index: i64,
    /// The metadata offset this broker applied.
    pub applied_index: i64,
    /// The active controller as this node knows it (-1: none).
    pub leader_id: i64,
    /// On the active controller: entries each voter is behind (node id, lag).
    pub voter_lag: Vec<(i32, i64)>,
    pub brokers_registered: i64,
    pub brokers_fenced: i64,
    /// Raft messages dropped (full queues) and handshakes refused since start.
    pub messages_dropped: i64,
    pub connections_refused: i64,
}

static CLUSTER: Mutex<Option<ClusterGauges>> = Mutex::new(None);

/// Replaces the cluster gauges (called on the controller shard).
pub fn set(gauges: ClusterGauges) {
    if let Ok(mut g) = CLUSTER.lock() {
        *g = Some(gauges);
    }
}

/// The gauges last set, if any.
#[must_use]
pub fn get() -> Option<ClusterGauges> {
    CLUSTER.lock().ok().and_then(|g| g.clone())
}

pub(super) fn encode(enc: &mut DescriptorEncoder) -> fmt::Result {
    let Some(g) = get() else {
        return Ok(());
    };
    let gauges = [
        (
            "shardlog_quorum_role",
            "Metadata quorum role: 0 follower, 1 candidate, 2 leader, 3 learner",
            g.role,
        ),
        ("shardlog_quorum_term", "Metadata quorum term (Kafka's metadata leader epoch)", g.term),
        (
            "shardlog_quorum_commit_index",
            "Highest metadata log index known committed",
            g.commit_index,
        ),
        ("shardlog_metadata_offset", "Metadata log index this broker has applied", g.applied_index),
        ("shardlog_quorum_leader", "The active controller's node id (-1: none known)", g.leader_id),
        (
            "shardlog_brokers_registered",
            "Brokers registered in the committed metadata",
            g.brokers_registered,
        ),
        ("shardlog_brokers_fenced", "Registered brokers that are fenced", g.brokers_fenced),
        (
            "shardlog_quorum_messages_dropped",
            "Raft messages dropped on full queues since start",
            g.messages_dropped,
        ),
        (
            "shardlog_quorum_connections_refused",
            "Quorum handshakes refused since start (cluster id or voter set mismatch)",
            g.connections_refused,
        ),
    ];
    for (name, help, value) in gauges {
        enc.encode_descriptor(name, help, None, MetricType::Gauge)?.encode_gauge(&value)?;
    }
    if !g.voter_lag.is_empty() {
        let mut metric = enc.encode_descriptor(
            "shardlog_quorum_voter_lag",
            "On the active controller: metadata log entries each voter is behind",
            None,
            MetricType::Gauge,
        )?;
        for (voter, lag) in &g.voter_lag {
            let labels: Vec<(&str, String)> = vec![("voter", voter.to_string())];
            metric.encode_family(&labels)?.encode_gauge(lag)?;
        }
    }
    Ok(())
}
