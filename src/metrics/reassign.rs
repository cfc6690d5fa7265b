//! Partition reassignment and replication-throttle figures (issue 16): reassignments in
//! progress (as this node's committed metadata says; on the active controller that is
//! Kafka's `ReassigningPartitions`), bytes appended by this broker's adding replicas (bytes
//! moved), and bytes counted against the replication throttles on each side.
//!
//! Process-wide atomics: the controller shard sets the gauge when it publishes an image,
//! follower fetchers and leader replica fetches (any shard) add to the counters; read at
//! scrape time and rendered with the other families by [`super::prom`].

use std::fmt;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

static IN_PROGRESS: AtomicI64 = AtomicI64::new(0);
static BYTES_MOVED: AtomicU64 = AtomicU64::new(0);
static THROTTLED_LEADER: AtomicU64 = AtomicU64::new(0);
static THROTTLED_FOLLOWER: AtomicU64 = AtomicU64::new(0);

/// Sets the number of partitions being reassigned.
pub fn set_in_progress(n: usize) {
    IN_PROGRESS.store(i64::try_from(n).unwrap_or(i64::MAX), Ordering::Relaxed);
}

/// Adds bytes an adding replica of this broker appended.
pub fn add_bytes_moved(bytes: u64) {
    BYTES_MOVED.fetch_add(bytes, Ordering::Relaxed);
}

/// Adds bytes counted against the leader (`leader: true`) or follower throttle.
pub fn add_throttled(leader: bool, bytes: u64) {
    let counter = if leader { &THROTTLED_LEADER } else { &THROTTLED_FOLLOWER };
    counter.fetch_add(bytes, Ordering::Relaxed);
}

/// (in progress, bytes moved, throttled leader bytes, throttled follower bytes).
#[must_use]
pub fn get() -> (i64, u64, u64, u64) {
    (
        IN_PROGRESS.load(Ordering::Relaxed),
        BYTES_MOVED.load(Ordering::Relaxed),
        THROTTLED_LEADER.load(Ordering::Relaxed),
        THROTTLED_FOLLOWER.load(Ordering::Relaxed),
    )
}

pub(super) fn encode(enc: &mut DescriptorEncoder) -> fmt::Result {
    let (in_progress, moved, leader, follower) = get();
    enc.encode_descriptor(
        "shardlog_reassignments_in_progress",
        "Partitions being reassigned (AlterPartitionReassignments), in the committed metadata",
        None,
        MetricType::Gauge,
    )?
    .encode_gauge(&in_progress)?;
    enc.encode_descriptor(
        "shardlog_reassignment_bytes_moved",
        "Bytes appended by this broker's adding replicas of reassigned partitions",
        None,
        MetricType::Counter,
    )?
    .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&moved, None)?;
    let mut metric = enc.encode_descriptor(
        "shardlog_replication_throttled_bytes",
        "Replication bytes of throttled replicas (leader: sent, follower: received)",
        None,
        MetricType::Counter,
    )?;
    for (side, value) in [("leader", leader), ("follower", follower)] {
        let labels: Vec<(&str, &str)> = vec![("side", side)];
        metric
            .encode_family(&labels)?
            .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&value, None)?;
    }
    Ok(())
}
