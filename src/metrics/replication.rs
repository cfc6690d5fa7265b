//! Replication metrics (issue 15), under Kafka's meanings (named in each help text):
//! under-replicated, under-min-ISR and at-min-ISR partitions as their leaders see them,
//! offline (leaderless) partitions as the metadata image shows them, ISR shrinks and
//! expands, per-follower lag in records and in milliseconds, and replication bytes in
//! (follower fetchers appending) and out (leaders answering followers) per shard.
//!
//! Counters are recorded on the shard that does the work, in thread-local cells (no lock
//! on the path); every `REPLICATION_METRICS_INTERVAL_MS` each shard
//! publishes them with its gauges ([`ShardReplication`], computed by
//! `partition::maintenance`) into one slot per shard here, which a scrape renders. The
//! per-follower series are capped at [`REPLICATION_LAG_SERIES_MAX`] per shard (the largest
//! lags kept), so label cardinality stays bounded however many partitions a shard leads.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;

use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

use crate::constants::REPLICATION_LAG_SERIES_MAX;

/// One follower's lag behind its leader, as the leader sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FollowerLag {
    pub topic: String,
    pub partition: i32,
    pub follower: i32,
    /// Leader log end minus the follower's fetch offset.
    pub records: i64,
    /// Time since the follower was last caught up (0 when it is).
    pub ms: i64,
}

/// One shard's replication gauges and counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardReplication {
    pub under_replicated: i64,
    pub under_min_isr: i64,
    pub at_min_isr: i64,
    /// Leaderless partitions in the image (published by shard 0 only: a broker-wide view).
    pub offline: i64,
    pub isr_shrinks: u64,
    pub isr_expands: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub follower_lag: Vec<FollowerLag>,
}

thread_local! {
    static SHRINKS: Cell<u64> = const { Cell::new(0) };
    static EXPANDS: Cell<u64> = const { Cell::new(0) };
    static BYTES_IN: Cell<u64> = const { Cell::new(0) };
    static BYTES_OUT: Cell<u64> = const { Cell::new(0) };
}

static SHARDS: Mutex<BTreeMap<u32, ShardReplication>> = Mutex::new(BTreeMap::new());

/// A rendered family: name, help text, and how to read its value.
type Family<T, V> = (&'static str, &'static str, fn(&T) -> V);

fn add(cell: &'static std::thread::LocalKey<Cell<u64>>, n: u64) {
    cell.with(|c| c.set(c.get().saturating_add(n)));
}

/// A leader's ISR changed at the same leader epoch: a shrink or an expansion.
pub fn isr_changed(shrink: bool) {
    add(if shrink { &SHRINKS } else { &EXPANDS }, 1);
}

/// A follower fetcher appended `n` replicated bytes.
pub fn bytes_in(n: u64) {
    add(&BYTES_IN, n);
}

/// A leader sent `n` bytes of records to a follower.
pub fn bytes_out(n: u64) {
    add(&BYTES_OUT, n);
}

/// Publishes `gauges` (plus this thread's counters) as shard `shard`'s slot, keeping the
/// `REPLICATION_LAG_SERIES_MAX` largest follower lags.
pub fn publish(shard: u32, mut gauges: ShardReplication) {
    gauges.isr_shrinks = SHRINKS.with(Cell::get);
    gauges.isr_expands = EXPANDS.with(Cell::get);
    gauges.bytes_in = BYTES_IN.with(Cell::get);
    gauges.bytes_out = BYTES_OUT.with(Cell::get);
    cap_lag_series(&mut gauges.follower_lag);
    if let Ok(mut slots) = SHARDS.lock() {
        slots.insert(shard, gauges);
    }
}

fn cap_lag_series(lags: &mut Vec<FollowerLag>) {
    lags.sort_by_key(|l| std::cmp::Reverse((l.records, l.ms)));
    lags.truncate(REPLICATION_LAG_SERIES_MAX);
}

/// Every shard's slot.
#[must_use]
pub fn snapshot() -> BTreeMap<u32, ShardReplication> {
    SHARDS.lock().map(|s| s.clone()).unwrap_or_default()
}

pub(super) fn encode(enc: &mut DescriptorEncoder) -> fmt::Result {
    encode_slots(enc, &snapshot())
}

fn encode_slots(
    enc: &mut DescriptorEncoder,
    slots: &BTreeMap<u32, ShardReplication>,
) -> fmt::Result {
    if slots.is_empty() {
        return Ok(());
    }
    let sum = |f: fn(&ShardReplication) -> i64| slots.values().map(f).sum::<i64>();
    let gauges: [(&str, &str, i64); 4] = [
        (
            "shardlog_under_replicated_partitions",
            "Led partitions whose ISR is smaller than their replica set (Kafka: \
             kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions)",
            sum(|s| s.under_replicated),
        ),
        (
            "shardlog_under_min_isr_partitions",
            "Led partitions whose ISR is below min.insync.replicas (Kafka: \
             kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount)",
            sum(|s| s.under_min_isr),
        ),
        (
            "shardlog_at_min_isr_partitions",
            "Led partitions whose ISR equals min.insync.replicas (Kafka: \
             kafka.server:type=ReplicaManager,name=AtMinIsrPartitionCount)",
            sum(|s| s.at_min_isr),
        ),
        (
            "shardlog_offline_partitions",
            "Partitions without a leader in this broker's metadata image (Kafka: \
             kafka.controller:type=KafkaController,name=OfflinePartitionsCount)",
            sum(|s| s.offline),
        ),
    ];
    for (name, help, value) in gauges {
        enc.encode_descriptor(name, help, None, MetricType::Gauge)?.encode_gauge(&value)?;
    }
    let counters: [Family<ShardReplication, u64>; 4] = [
        (
            "shardlog_isr_shrinks",
            "ISR shrinks of partitions this shard leads (Kafka: \
             kafka.server:type=ReplicaManager,name=IsrShrinksPerSec)",
            |s| s.isr_shrinks,
        ),
        (
            "shardlog_isr_expands",
            "ISR expansions of partitions this shard leads (Kafka: \
             kafka.server:type=ReplicaManager,name=IsrExpandsPerSec)",
            |s| s.isr_expands,
        ),
        (
            "shardlog_replication_bytes_in",
            "Bytes appended by this shard's follower fetchers (Kafka: \
             kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesInPerSec)",
            |s| s.bytes_in,
        ),
        (
            "shardlog_replication_bytes_out",
            "Record bytes this shard's leaders sent to followers (Kafka: \
             kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesOutPerSec)",
            |s| s.bytes_out,
        ),
    ];
    for (name, help, value) in counters {
        let mut metric = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (shard, s) in slots {
            let labels = [("shard", shard.to_string())];
            metric
                .encode_family(&labels)?
                .encode_counter::<NoLabelSet, u64, u64>(&value(s), None)?;
        }
    }
    encode_lag(enc, slots)
}

fn encode_lag(enc: &mut DescriptorEncoder, slots: &BTreeMap<u32, ShardReplication>) -> fmt::Result {
    let lags: Vec<&FollowerLag> = slots.values().flat_map(|s| &s.follower_lag).collect();
    if lags.is_empty() {
        return Ok(());
    }
    let families: [Family<FollowerLag, i64>; 2] = [
        (
            "shardlog_replication_follower_lag_records",
            "Records a follower is behind its leader's log end, seen by the leader (Kafka: \
             kafka.server:type=FetcherLagMetrics,name=ConsumerLag, seen from the follower); \
             the largest lags per shard only",
            |l| l.records,
        ),
        (
            "shardlog_replication_follower_lag_ms",
            "Milliseconds since a follower last caught up with its leader (Kafka's \
             lastCaughtUpTimeMs, which replica.lag.time.max.ms is compared with); -1 when \
             it has not caught up since this leader took over",
            |l| l.ms,
        ),
    ];
    for (name, help, value) in families {
        let mut metric = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for l in &lags {
            let labels = [
                ("topic", l.topic.clone()),
                ("partition", l.partition.to_string()),
                ("follower", l.follower.to_string()),
            ];
            metric.encode_family(&labels)?.encode_gauge(&value(l))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use prometheus_client::collector::Collector;
    use prometheus_client::registry::Registry;

    use super::*;

    #[derive(Debug)]
    struct Slots(BTreeMap<u32, ShardReplication>);

    impl Collector for Slots {
        fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
            encode_slots(&mut enc, &self.0)
        }
    }

    fn lag(partition: i32, records: i64) -> FollowerLag {
        FollowerLag { topic: "t".into(), partition, follower: 2, records, ms: records * 10 }
    }

    #[test]
    fn renders_kafka_named_families_with_bounded_lag_series() {
        let mut lags: Vec<FollowerLag> = (0..500).map(|p| lag(p, i64::from(p))).collect();
        cap_lag_series(&mut lags);
        assert_eq!(lags.len(), REPLICATION_LAG_SERIES_MAX);
        assert_eq!(lags[0].records, 499, "the largest lags are kept");
        let shard = ShardReplication {
            under_replicated: 2,
            under_min_isr: 1,
            at_min_isr: 1,
            offline: 3,
            isr_shrinks: 4,
            isr_expands: 5,
            bytes_in: 100,
            bytes_out: 200,
            follower_lag: lags,
        };
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Slots([(0, shard)].into())));
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &registry).unwrap();
        for line in [
            "shardlog_under_replicated_partitions 2",
            "shardlog_under_min_isr_partitions 1",
            "shardlog_at_min_isr_partitions 1",
            "shardlog_offline_partitions 3",
            "shardlog_isr_shrinks_total{shard=\"0\"} 4",
            "shardlog_isr_expands_total{shard=\"0\"} 5",
            "shardlog_replication_bytes_in_total{shard=\"0\"} 100",
            "shardlog_replication_bytes_out_total{shard=\"0\"} 200",
            "shardlog_replication_follower_lag_records{topic=\"t\",partition=\"499\",follower=\"2\"} 499",
        ] {
            assert!(out.contains(line), "{line} in\n{out}");
        }
        assert!(out.contains("UnderMinIsrPartitionCount"));
        let series =
            out.lines().filter(|l| l.starts_with("shardlog_replication_follower_lag_ms{")).count();
        assert_eq!(series, REPLICATION_LAG_SERIES_MAX);
    }
}
