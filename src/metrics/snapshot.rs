//! Published recordings of one shard, and their merge across shards.
//!
//! A [`ShardSnapshot`] lives in the shard's hub slot, written by that shard's publisher
//! and read by scrapes on any thread (under the slot's mutex). [`merge`] builds a
//! [`Merged`] view: totals summed across shards plus a small per-shard load summary.
//! Invariant: histograms only grow (cumulative since start), counters are monotonic.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::recorder::LatencyHist;
use super::{Count, Level, Stage};

/// Per-topic byte and record totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicTotals {
    pub bytes_in: u64,
    pub records_in: u64,
    pub bytes_out: u64,
    pub records_out: u64,
}

impl TopicTotals {
    fn add(&mut self, o: &TopicTotals) {
        self.bytes_in += o.bytes_in;
        self.records_in += o.records_in;
        self.bytes_out += o.bytes_out;
        self.records_out += o.records_out;
    }
}

/// Per-client quota totals (by client id): bytes moved and throttling, per direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientTotals {
    pub produce_bytes: u64,
    pub fetch_bytes: u64,
    pub produce_throttle_ms: u64,
    pub fetch_throttle_ms: u64,
    pub produce_throttled: u64,
    pub fetch_throttled: u64,
}

impl ClientTotals {
    fn add(&mut self, o: &ClientTotals) {
        self.produce_bytes += o.produce_bytes;
        self.fetch_bytes += o.fetch_bytes;
        self.produce_throttle_ms += o.produce_throttle_ms;
        self.fetch_throttle_ms += o.fetch_throttle_ms;
        self.produce_throttled += o.produce_throttled;
        self.fetch_throttled += o.fetch_throttled;
    }
}

/// A consumer-lag series key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LagKey {
    pub group: String,
    pub topic: String,
    pub partition: i32,
}

/// Cumulative latency histograms of one API, by [`Stage`].
#[derive(Clone, Debug, Default)]
pub struct ApiSnapshot {
    pub stages: [Option<LatencyHist>; Stage::COUNT],
}

/// Everything one shard has published.
#[derive(Clone, Debug)]
pub struct ShardSnapshot {
    pub shard: u32,
    pub apis: BTreeMap<i16, ApiSnapshot>,
    pub counts: [u64; Count::COUNT],
    pub levels: [i64; Level::COUNT],
    pub topics: BTreeMap<String, TopicTotals>,
    /// Client-quota totals by client id (every client, quota or not).
    pub clients: BTreeMap<String, ClientTotals>,
    pub flush_us: LatencyHist,
    /// Appends per flush (values are counts, not microseconds).
    pub group_commit: LatencyHist,
    pub lag: BTreeMap<LagKey, i64>,
    /// Reactor busy time over the last measurement window, 0..=1.
    pub busy_ratio: f64,
    /// Reactor busy time since start.
    pub busy_ns: u64,
}

impl Default for ShardSnapshot {
    fn default() -> Self {
        Self {
            shard: 0,
            apis: BTreeMap::new(),
            counts: [0; Count::COUNT],
            levels: [0; Level::COUNT],
            topics: BTreeMap::new(),
            clients: BTreeMap::new(),
            flush_us: LatencyHist::new(),
            group_commit: LatencyHist::new(),
            lag: BTreeMap::new(),
            busy_ratio: 0.0,
            busy_ns: 0,
        }
    }
}

/// A shard's load at a glance (what `shardlog top` shows per shard).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardLoad {
    pub shard: u32,
    pub busy_ratio: f64,
    pub busy_ns: u64,
    pub requests: u64,
    pub request_bytes: u64,
    pub response_bytes: u64,
    pub connections: i64,
    pub in_flight: i64,
    pub partitions: i64,
    pub leaders: i64,
    pub mesh_queue_depth: i64,
    /// Producer ids with sequence state in the shard's partitions.
    #[serde(default)]
    pub producer_ids: i64,
    /// Record bytes produced into / fetched from the partitions this shard owns (what the
    /// shard balancer evens out; `request_bytes` counts on the connection's shard).
    #[serde(default)]
    pub owned_bytes_in: u64,
    #[serde(default)]
    pub owned_bytes_out: u64,
}

impl ShardLoad {
    fn of(s: &ShardSnapshot) -> Self {
        Self {
            shard: s.shard,
            busy_ratio: s.busy_ratio,
            busy_ns: s.busy_ns,
            requests: s.counts[Count::Requests as usize],
            request_bytes: s.counts[Count::RequestBytes as usize],
            response_bytes: s.counts[Count::ResponseBytes as usize],
            connections: s.levels[Level::ConnectionsActive as usize],
            in_flight: s.levels[Level::RequestsInFlight as usize],
            partitions: s.levels[Level::Partitions as usize],
            leaders: s.levels[Level::Leaders as usize],
            mesh_queue_depth: s.levels[Level::MeshQueueDepth as usize],
            producer_ids: s.levels[Level::ProducerIds as usize],
            owned_bytes_in: s.counts[Count::OwnedBytesIn as usize],
            owned_bytes_out: s.counts[Count::OwnedBytesOut as usize],
        }
    }
}

/// All shards merged: `total` sums every shard (its `shard` field is meaningless),
/// `shards` keeps each shard's load summary, ordered by shard id.
#[derive(Clone, Debug, Default)]
pub struct Merged {
    pub total: ShardSnapshot,
    pub shards: Vec<ShardLoad>,
    /// The max over shards of `Level::CleanerMaxDirtyPercent` (a sum would mean nothing).
    pub max_dirty_percent: i64,
}

impl Merged {
    /// The merged histogram of `api_key` at `stage`, if any sample was recorded.
    #[must_use]
    pub fn histogram(&self, api_key: i16, stage: Stage) -> Option<&LatencyHist> {
        self.total.apis.get(&api_key)?.stages[stage as usize].as_ref()
    }
}

/// Starts a merge; feed each shard's snapshot to [`Merger::add`].
#[derive(Default)]
pub struct Merger {
    merged: Merged,
}

impl Merger {
    pub fn add(&mut self, s: &ShardSnapshot) {
        let t = &mut self.merged.total;
        for (key, api) in &s.apis {
            let out = t.apis.entry(*key).or_default();
            for (i, h) in api.stages.iter().enumerate() {
                if let Some(h) = h {
                    out.stages[i].get_or_insert_with(LatencyHist::new).add(h);
                }
            }
        }
        for i in 0..Count::COUNT {
            t.counts[i] = t.counts[i].wrapping_add(s.counts[i]);
        }
        for i in 0..Level::COUNT {
            t.levels[i] = t.levels[i].saturating_add(s.levels[i]);
        }
        let dirty = s.levels[Level::CleanerMaxDirtyPercent as usize];
        self.merged.max_dirty_percent = self.merged.max_dirty_percent.max(dirty);
        for (name, totals) in &s.topics {
            t.topics.entry(name.clone()).or_default().add(totals);
        }
        for (name, totals) in &s.clients {
            t.clients.entry(name.clone()).or_default().add(totals);
        }
        t.flush_us.add(&s.flush_us);
        t.group_commit.add(&s.group_commit);
        for (k, v) in &s.lag {
            // A group's partitions are tracked by one coordinator shard: no overlap.
            t.lag.insert(k.clone(), *v);
        }
        t.busy_ns = t.busy_ns.saturating_add(s.busy_ns);
        self.merged.shards.push(ShardLoad::of(s));
    }

    #[must_use]
    pub fn finish(mut self) -> Merged {
        self.merged.shards.sort_by_key(|l| l.shard);
        let n = self.merged.shards.len().max(1) as f64;
        self.merged.total.busy_ratio =
            self.merged.shards.iter().map(|l| l.busy_ratio).sum::<f64>() / n;
        self.merged
    }
}

/// Merges shard snapshots (convenience over [`Merger`]).
#[must_use]
pub fn merge<'a>(snaps: impl IntoIterator<Item = &'a ShardSnapshot>) -> Merged {
    let mut m = Merger::default();
    for s in snaps {
        m.add(s);
    }
    m.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::ShardRecorder;
    use std::time::Duration;

    fn shard(id: u32, samples_us: &[u64], requests: u64) -> ShardSnapshot {
        let r = ShardRecorder::new(id);
        for us in samples_us {
            r.record(0, Stage::Total, Duration::from_micros(*us));
        }
        r.count(Count::Requests, requests);
        r.set(Level::Partitions, 4);
        r.topic_in("a", 10, 1);
        let mut s = ShardSnapshot::default();
        r.publish(&mut s);
        s.busy_ratio = f64::from(id) / 2.0;
        s
    }

    #[test]
    fn merge_sums_counters_and_adds_histograms() {
        let a = shard(1, &[100, 200], 2);
        let b = shard(0, &[1000], 1);
        let m = merge([&a, &b]);
        let h = m.histogram(0, Stage::Total).expect("produce total");
        assert_eq!(h.count(), 3);
        assert_eq!(h.sum_us, 1300);
        assert!(h.hist.max() >= 999 && h.hist.max() <= 1001);
        assert_eq!(m.total.counts[Count::Requests as usize], 3);
        assert_eq!(m.total.levels[Level::Partitions as usize], 8);
        assert_eq!(m.total.topics["a"].bytes_in, 20);
        assert_eq!(m.shards.iter().map(|l| l.shard).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(m.shards[1].requests, 2);
        assert!((m.total.busy_ratio - 0.25).abs() < 1e-9);
    }
}
