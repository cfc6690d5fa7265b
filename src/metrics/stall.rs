//! Event-loop stall detection (issue 43): a probe task on every shard sleeps
//! [`STALL_PROBE_INTERVAL_MS`] again and again in the shard's default (request) task queue;
//! how late it wakes is how long the shard's loop ran something else without yielding (or did
//! not run at all). A lateness over [`STALL_WARN_MS`] is logged at WARN with its length and
//! counted; the longest one and the count are rendered per shard as
//! `shardlog_shard_stall_ms_max` and `shardlog_shard_stalls_total`.
//!
//! The probe loop runs on every shard (started by `shard_task`); the figures are kept in one
//! slot per shard behind a mutex, read at scrape time. [`StallStats`] is pure, so its rule is
//! tested without a runtime.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

use crate::constants::{STALL_PROBE_INTERVAL_MS, STALL_WARN_MS};

/// One shard's stall figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StallStats {
    /// The longest lateness seen since start, in ms.
    pub max_ms: u64,
    /// Latenesses over [`STALL_WARN_MS`].
    pub stalls: u64,
}

impl StallStats {
    /// Records one wake `late_ms` after it was due; true if that counts as a stall.
    pub fn observe(&mut self, late_ms: u64) -> bool {
        self.max_ms = self.max_ms.max(late_ms);
        let stall = late_ms > STALL_WARN_MS;
        if stall {
            self.stalls += 1;
        }
        stall
    }
}

static SHARDS: Mutex<BTreeMap<u32, StallStats>> = Mutex::new(BTreeMap::new());

/// Every shard's figures.
#[must_use]
pub fn snapshot() -> BTreeMap<u32, StallStats> {
    SHARDS.lock().map(|s| s.clone()).unwrap_or_default()
}

/// The probe loop of shard `shard` (runs for the executor's life).
pub async fn probe(shard: u32) {
    let interval = Duration::from_millis(STALL_PROBE_INTERVAL_MS);
    let mut stats = StallStats::default();
    loop {
        let due = Instant::now() + interval;
        glommio::timer::sleep(interval).await;
        let late = Instant::now().saturating_duration_since(due);
        let late_ms = u64::try_from(late.as_millis()).unwrap_or(u64::MAX);
        if stats.observe(late_ms) {
            tracing::warn!(shard, late_ms, "the shard's event loop stalled for {late_ms} ms");
        }
        if let Ok(mut slots) = SHARDS.lock() {
            slots.insert(shard, stats);
        }
    }
}

pub(super) fn encode(enc: &mut DescriptorEncoder) -> fmt::Result {
    let slots = snapshot();
    if slots.is_empty() {
        return Ok(());
    }
    let mut metric = enc.encode_descriptor(
        "shardlog_shard_stall_ms_max",
        "The longest time the shard's event loop did not run a due timer since start, in ms",
        None,
        MetricType::Gauge,
    )?;
    for (shard, s) in &slots {
        let labels = [("shard", shard.to_string())];
        let v = i64::try_from(s.max_ms).unwrap_or(i64::MAX);
        metric.encode_family(&labels)?.encode_gauge(&v)?;
    }
    let mut metric = enc.encode_descriptor(
        "shardlog_shard_stalls",
        "Event-loop stalls longer than 100 ms (a due timer ran that late)",
        None,
        MetricType::Counter,
    )?;
    for (shard, s) in &slots {
        let labels = [("shard", shard.to_string())];
        metric.encode_family(&labels)?.encode_counter::<NoLabelSet, u64, u64>(&s.stalls, None)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_lateness_over_the_bound_counts_as_a_stall() {
        let mut s = StallStats::default();
        assert!(!s.observe(3));
        assert!(!s.observe(STALL_WARN_MS));
        assert!(s.observe(STALL_WARN_MS + 1));
        assert!(!s.observe(50));
        assert_eq!(s, StallStats { max_ms: STALL_WARN_MS + 1, stalls: 1 });
    }
}
