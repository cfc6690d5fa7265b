//! Last-stable-offset lag (issue 17): per partition this broker leads, the records between
//! its last stable offset and its high watermark, i.e. what read_committed consumers cannot
//! see yet because a transaction is open (or its marker is not yet replicated). A lag that
//! stays up names a partition whose marker never arrived (a stuck LSO).
//!
//! Each shard computes its partitions' lags (`server::txn::lso_metrics`, every
//! `REPLICATION_METRICS_INTERVAL_MS`) and publishes them into one slot per shard here, which
//! a scrape renders as `shardlog_partition_lso_lag_records{topic,partition}`, and, for a
//! lagging partition with an open transaction, `shardlog_partition_lso_lag_ms{topic,partition}`:
//! the age of its oldest open transaction (now minus the max timestamp of that transaction's
//! first batch on the partition). Only lagging partitions get a series, at most
//! [`LSO_LAG_SERIES_MAX`] per shard and metric (the largest lags kept, by records and by age
//! separately), so label cardinality stays bounded; `shardlog_partition_lso_lagging` counts
//! every lagging partition, capped or not.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

use crate::constants::LSO_LAG_SERIES_MAX;

/// One led partition whose last stable offset is below its high watermark.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LsoLag {
    pub topic: String,
    pub partition: i32,
    /// High watermark minus last stable offset (> 0).
    pub records: i64,
    /// Age of the oldest open transaction in ms (now minus the max timestamp of its first
    /// batch here); 0 when none is open (a marker not yet replicated) or its start is unknown.
    pub age_ms: i64,
}

/// One shard's published lags: the lagging partitions (capped: the largest by records, and
/// the oldest by open-transaction age) and how many there were.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct ShardLso {
    lagging: i64,
    series: Vec<LsoLag>,
    aged: Vec<LsoLag>,
}

static SHARDS: Mutex<BTreeMap<u32, ShardLso>> = Mutex::new(BTreeMap::new());

/// Replaces shard `shard`'s lags (partitions with a zero lag may be included; they are
/// dropped here).
pub fn publish(shard: u32, mut lags: Vec<LsoLag>) {
    lags.retain(|l| l.records > 0);
    let lagging = i64::try_from(lags.len()).unwrap_or(i64::MAX);
    let aged = largest(lags.iter().filter(|l| l.age_ms > 0).cloned().collect(), |l| l.age_ms);
    let series = largest(lags, |l| l.records);
    if let Ok(mut slots) = SHARDS.lock() {
        slots.insert(shard, ShardLso { lagging, series, aged });
    }
}

/// The [`LSO_LAG_SERIES_MAX`] largest of `lags` by `key`, by topic and partition.
fn largest(mut lags: Vec<LsoLag>, key: impl Fn(&LsoLag) -> i64) -> Vec<LsoLag> {
    if lags.len() > LSO_LAG_SERIES_MAX {
        lags.sort_by_key(|l| std::cmp::Reverse(key(l)));
        lags.truncate(LSO_LAG_SERIES_MAX);
    }
    lags.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    lags
}

pub(super) fn encode(enc: &mut DescriptorEncoder) -> fmt::Result {
    let slots = SHARDS.lock().map(|s| s.clone()).unwrap_or_default();
    if slots.is_empty() {
        return Ok(());
    }
    let lagging: i64 = slots.values().map(|s| s.lagging).sum();
    enc.encode_descriptor(
        "shardlog_partition_lso_lagging",
        "Led partitions whose last stable offset is below the high watermark (an open \
         transaction, or a marker not yet replicated)",
        None,
        MetricType::Gauge,
    )?
    .encode_gauge(&lagging)?;
    let mut metric = enc.encode_descriptor(
        "shardlog_partition_lso_lag_records",
        "High watermark minus last stable offset of a led partition: records read_committed \
         consumers wait for; only lagging partitions, the largest lags per shard",
        None,
        MetricType::Gauge,
    )?;
    for l in slots.values().flat_map(|s| &s.series) {
        let labels = [("topic", l.topic.clone()), ("partition", l.partition.to_string())];
        metric.encode_family(&labels)?.encode_gauge(&l.records)?;
    }
    let mut metric = enc.encode_descriptor(
        "shardlog_partition_lso_lag_ms",
        "Age of the oldest open transaction of a lagging led partition: now minus the max \
         timestamp of its first batch there; only lagging partitions with an open transaction, \
         the oldest per shard",
        None,
        MetricType::Gauge,
    )?;
    for l in slots.values().flat_map(|s| &s.aged) {
        let labels = [("topic", l.topic.clone()), ("partition", l.partition.to_string())];
        metric.encode_family(&labels)?.encode_gauge(&l.age_ms)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use prometheus_client::collector::Collector;
    use prometheus_client::registry::Registry;

    use super::*;

    #[derive(Debug)]
    struct Lso;

    impl Collector for Lso {
        fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
            encode(&mut enc)
        }
    }

    fn lag(partition: i32, records: i64) -> LsoLag {
        // Ages rank the other way round: partition 0 holds the oldest transaction.
        let age_ms = if partition < 500 { i64::from(1000 - partition) } else { 0 };
        LsoLag { topic: "out".into(), partition, records, age_ms }
    }

    #[test]
    fn renders_lagging_partitions_only_capped_per_shard() {
        let mut lags: Vec<LsoLag> = (0..500).map(|p| lag(p, i64::from(p % 250))).collect();
        lags.push(lag(900, 0));
        publish(7, lags);
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Lso));
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &registry).expect("render");
        // 498 partitions lag (the two with 0 records and partition 900 do not).
        assert!(out.contains("shardlog_partition_lso_lagging 498"), "{out}");
        let series =
            out.lines().filter(|l| l.starts_with("shardlog_partition_lso_lag_records{")).count();
        assert_eq!(series, LSO_LAG_SERIES_MAX);
        assert!(
            out.contains("shardlog_partition_lso_lag_records{topic=\"out\",partition=\"249\"} 249")
        );
        assert!(!out.contains("partition=\"900\""));
        // Ages are capped on their own: the oldest transactions (low partitions) are kept,
        // among lagging partitions only (partition 0 lags by 0 records).
        let aged: Vec<&str> =
            out.lines().filter(|l| l.starts_with("shardlog_partition_lso_lag_ms{")).collect();
        assert_eq!(aged.len(), LSO_LAG_SERIES_MAX);
        assert!(out.contains("shardlog_partition_lso_lag_ms{topic=\"out\",partition=\"1\"} 999"));
        assert!(!out.contains("shardlog_partition_lso_lag_ms{topic=\"out\",partition=\"0\"}"));
        assert!(!out.contains("shardlog_partition_lso_lag_ms{topic=\"out\",partition=\"249\"}"));
        publish(7, Vec::new());
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &registry).expect("render");
        assert!(out.contains("shardlog_partition_lso_lagging 0"), "{out}");
        assert!(!out.contains("shardlog_partition_lso_lag_records{"));
        assert!(!out.contains("shardlog_partition_lso_lag_ms{"));
    }
}
