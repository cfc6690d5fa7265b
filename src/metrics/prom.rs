//! Prometheus text rendering (format 0.0.4) of a [`Merged`] scrape, through
//! `prometheus-client`'s collector interface.
//!
//! Runs on whatever thread serves the scrape; pure function of its input. Conventions:
//! latencies in seconds (recorded in µs, so the finest bucket is exact), counters end in
//! `_total`, per-shard load series carry a `shard` label, everything else is summed
//! across shards. Latency histograms get fixed buckets from the merged HDR histogram
//! plus p50/p99/p99.9/p99.99 gauges computed from it (exact to 3 digits, unlike buckets).

use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::recorder::LatencyHist;
use super::snapshot::{Merged, ShardLoad};
use super::{api_name, Count, Level, Stage};

/// The `Content-Type` of what [`render`] returns.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Latency bucket bounds, microseconds (Prometheus `le`, rendered in seconds).
const LATENCY_BUCKETS_US: [u64; 21] = [
    10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
    500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000, 30_000_000, 60_000_000,
];
/// Group-commit size buckets (appends per flush).
const GROUP_COMMIT_BUCKETS: [u64; 11] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
/// Percentiles exported as gauges, as (label, quantile).
pub const QUANTILES: [(&str, f64); 4] =
    [("0.5", 0.5), ("0.99", 0.99), ("0.999", 0.999), ("0.9999", 0.9999)];

type Labels = Vec<(&'static str, String)>;

/// Renders `merged` as Prometheus text.
#[must_use]
pub fn render(merged: Merged) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(MergedCollector(Arc::new(merged))));
    let mut out = String::new();
    if let Err(err) = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry) {
        tracing::warn!("cannot render metrics: {err}");
    }
    out
}

#[derive(Debug)]
struct MergedCollector(Arc<Merged>);

impl Collector for MergedCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let m = &*self.0;
        encode_requests(&mut enc, m)?;
        encode_totals(&mut enc, m)?;
        encode_topics(&mut enc, m)?;
        encode_clients(&mut enc, m)?;
        encode_storage(&mut enc, m)?;
        encode_shards(&mut enc, &m.shards)?;
        super::cluster::encode(&mut enc)?;
        super::leadership::encode(&mut enc)?;
        super::replication::encode(&mut enc)?;
        super::reassign::encode(&mut enc)?;
        super::lso::encode(&mut enc)?;
        super::allocator::encode(&mut enc)?;
        super::stall::encode(&mut enc)?;
        encode_lag(&mut enc, m)
    }
}

fn encode_requests(enc: &mut DescriptorEncoder, m: &Merged) -> fmt::Result {
    let mut series = Vec::new();
    for (key, api) in &m.total.apis {
        for stage in Stage::ALL {
            if let Some(h) = api.stages[stage as usize].as_ref() {
                let labels = vec![("api", api_name(*key)), ("stage", stage.name().to_owned())];
                series.push((labels, h));
            }
        }
    }
    let help = "Request latency by Kafka API and stage (total = frame read to response written)";
    let mut metric = enc.encode_descriptor(
        "shardlog_request_latency_seconds",
        help,
        None,
        MetricType::Histogram,
    )?;
    for (labels, h) in &series {
        latency_histogram(&mut metric.encode_family(labels)?, h, &LATENCY_BUCKETS_US, 1e6)?;
    }
    let help = "Request latency percentiles from the merged HDR histograms (3 significant digits)";
    let mut metric = enc.encode_descriptor(
        "shardlog_request_latency_percentile_seconds",
        help,
        None,
        MetricType::Gauge,
    )?;
    for (labels, h) in &series {
        for (label, q) in QUANTILES {
            let mut labels = labels.clone();
            labels.push(("quantile", label.to_owned()));
            let value = h.hist.value_at_quantile(q) as f64 / 1e6;
            metric.encode_family(&labels)?.encode_gauge(&value)?;
        }
    }
    Ok(())
}

/// Encodes one histogram series; recorded units divided by `divisor` give exported ones
/// (a division keeps bounds like 1e-5 exact in decimal, a multiplication by 1e-6 does not).
fn latency_histogram(
    metric: &mut prometheus_client::encoding::MetricEncoder,
    h: &LatencyHist,
    bounds: &[u64],
    divisor: f64,
) -> fmt::Result {
    let mut counts = vec![0u64; bounds.len()];
    let mut overflow = 0u64;
    for v in h.hist.iter_recorded() {
        let value = h.hist.lowest_equivalent(v.value_iterated_to());
        match bounds.iter().position(|b| value <= *b) {
            Some(i) => counts[i] += v.count_at_value(),
            None => overflow += v.count_at_value(),
        }
    }
    let mut buckets: Vec<(f64, u64)> =
        bounds.iter().zip(counts).map(|(b, c)| (*b as f64 / divisor, c)).collect();
    buckets.push((f64::INFINITY, overflow));
    metric.encode_histogram::<NoLabelSet>(h.sum_us as f64 / divisor, h.count(), &buckets, None)
}

fn encode_totals(enc: &mut DescriptorEncoder, m: &Merged) -> fmt::Result {
    let c = |x: Count| m.total.counts[x as usize];
    let counters = [
        ("shardlog_requests", "Requests read", c(Count::Requests)),
        ("shardlog_request_bytes", "Request frame bytes read", c(Count::RequestBytes)),
        ("shardlog_response_bytes", "Response frame bytes written", c(Count::ResponseBytes)),
        ("shardlog_connections_accepted", "Connections accepted", c(Count::ConnectionsAccepted)),
        ("shardlog_mesh_messages", "Cross-shard messages sent", c(Count::MeshMessages)),
        ("shardlog_cache_hits", "Batch-cache reads served from memory", c(Count::CacheHits)),
        ("shardlog_cache_misses", "Batch-cache reads that went to disk", c(Count::CacheMisses)),
        (
            "shardlog_retention_segments_deleted",
            "Segments deleted by time, size or log-start retention",
            c(Count::RetentionSegmentsDeleted),
        ),
        (
            "shardlog_retention_bytes_deleted",
            "Bytes of segments deleted by retention",
            c(Count::RetentionBytesDeleted),
        ),
        ("shardlog_cleaner_runs", "Log-cleaner passes that cleaned a log", c(Count::CleanerRuns)),
        (
            "shardlog_cleaner_segments_rewritten",
            "Segments the log cleaner rewrote",
            c(Count::CleanerSegmentsRewritten),
        ),
        (
            "shardlog_cleaner_bytes_reclaimed",
            "Bytes the log cleaner removed",
            c(Count::CleanerBytesReclaimed),
        ),
        (
            "shardlog_cleaner_io_bytes",
            "Bytes the log cleaner read and wrote",
            c(Count::CleanerIoBytes),
        ),
        (
            "shardlog_producer_duplicate_batches",
            "Idempotent producers' retried batches answered with their original offsets",
            c(Count::DuplicateBatchesDropped),
        ),
        (
            "shardlog_txn_abort_markers",
            "Transaction ABORT markers written to partitions",
            c(Count::TxnAbortMarkers),
        ),
        (
            "shardlog_txn_commit_markers",
            "Transaction COMMIT markers written to partitions",
            c(Count::TxnCommitMarkers),
        ),
        (
            "shardlog_shard_moves_manual",
            "Partitions moved between this broker's shards by hand (shardlog shards move)",
            c(Count::ShardMovesManual),
        ),
        (
            "shardlog_shard_moves_auto",
            "Partitions moved between this broker's shards by the automatic shard balancer",
            c(Count::ShardMovesAuto),
        ),
        (
            "shardlog_owned_bytes_in",
            "Record bytes produced into partitions, counted on their owner shard",
            c(Count::OwnedBytesIn),
        ),
        (
            "shardlog_owned_bytes_out",
            "Record bytes fetched from partitions, counted on their owner shard",
            c(Count::OwnedBytesOut),
        ),
        (
            "shardlog_device_flushes",
            "Shared device flushes: one fdatasync covering several logs' durable overwrites",
            c(Count::DeviceFlushes),
        ),
        (
            "shardlog_device_flush_syncs",
            "Log syncs covered by shared device flushes",
            c(Count::DeviceFlushSyncs),
        ),
        (
            "shardlog_authorization_denials",
            "Requests, or parts of requests, the authorizer denied",
            c(Count::AuthorizationDenials),
        ),
    ];
    for (name, help, value) in counters {
        enc.encode_descriptor(name, help, None, MetricType::Counter)?
            .encode_counter::<NoLabelSet, _, u64>(&value, None)?;
    }
    let (hits, misses) = (c(Count::CacheHits), c(Count::CacheMisses));
    let ratio = if hits + misses == 0 { 0.0 } else { hits as f64 / (hits + misses) as f64 };
    enc.encode_descriptor(
        "shardlog_cache_hit_ratio",
        "Batch-cache hit ratio since start",
        None,
        MetricType::Gauge,
    )?
    .encode_gauge(&ratio)?;
    let l = |x: Level| m.total.levels[x as usize];
    let gauges = [
        ("shardlog_connections_active", "Open client connections", l(Level::ConnectionsActive)),
        (
            "shardlog_requests_in_flight",
            "Requests read and not yet answered",
            l(Level::RequestsInFlight),
        ),
        (
            "shardlog_mesh_queue_depth",
            "Cross-shard messages awaiting a reply",
            l(Level::MeshQueueDepth),
        ),
        (
            "shardlog_partitions",
            "Partitions whose log this broker's shards own",
            l(Level::Partitions),
        ),
        ("shardlog_partition_leaders", "Owned partitions this broker leads", l(Level::Leaders)),
        (
            "shardlog_producer_ids",
            "Producer ids with sequence state, counted once per partition",
            l(Level::ProducerIds),
        ),
        (
            "shardlog_logs_out_of_space",
            "Logs waiting for disk space to write (they resume when space returns)",
            l(Level::LogsOutOfSpace),
        ),
        (
            "shardlog_logs_offline",
            "Logs offline (appends refused until reopened) after an I/O error on their files",
            l(Level::LogsOffline),
        ),
        (
            "shardlog_open_transactions",
            "Open transactions of the transactional ids this broker coordinates",
            l(Level::OpenTransactions),
        ),
        (
            "shardlog_batch_cache_bytes",
            "Bytes held by the shards' batch caches (bounded per shard)",
            l(Level::BatchCacheBytes),
        ),
        (
            "shardlog_shard_moves_in_progress",
            "Partition moves between this broker's shards under way",
            l(Level::ShardMovesInProgress),
        ),
        (
            "shardlog_cleaner_max_dirty_percent",
            "Largest dirty ratio (percent) of a compacted log at the last cleaner check",
            m.max_dirty_percent,
        ),
    ];
    for (name, help, value) in gauges {
        enc.encode_descriptor(name, help, None, MetricType::Gauge)?.encode_gauge(&value)?;
    }
    Ok(())
}

fn encode_topics(enc: &mut DescriptorEncoder, m: &Merged) -> fmt::Result {
    type Pick = fn(&super::snapshot::TopicTotals) -> u64;
    let families: [(&str, &str, Pick); 4] = [
        ("shardlog_topic_bytes_in", "Record-batch bytes produced, by topic", |t| t.bytes_in),
        ("shardlog_topic_records_in", "Records produced, by topic", |t| t.records_in),
        ("shardlog_topic_bytes_out", "Record-batch bytes fetched, by topic", |t| t.bytes_out),
        ("shardlog_topic_records_out", "Records fetched, by topic", |t| t.records_out),
    ];
    for (name, help, pick) in families {
        let mut metric = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (topic, totals) in &m.total.topics {
            let labels: Labels = vec![("topic", topic.clone())];
            metric
                .encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(&pick(totals), None)?;
        }
    }
    Ok(())
}

fn encode_clients(enc: &mut DescriptorEncoder, m: &Merged) -> fmt::Result {
    type Pick = fn(&super::snapshot::ClientTotals) -> u64;
    let families: [(&str, &str, Pick); 6] = [
        ("shardlog_client_produce_bytes", "Produce request bytes, by client id", |t| {
            t.produce_bytes
        }),
        ("shardlog_client_fetch_bytes", "Fetch response bytes sent, by client id", |t| {
            t.fetch_bytes
        }),
        ("shardlog_client_produce_throttle_ms", "Produce throttle time given, by client id", |t| {
            t.produce_throttle_ms
        }),
        ("shardlog_client_fetch_throttle_ms", "Fetch throttle time given, by client id", |t| {
            t.fetch_throttle_ms
        }),
        ("shardlog_client_produce_throttled", "Produce requests throttled, by client id", |t| {
            t.produce_throttled
        }),
        (
            "shardlog_client_fetch_throttled",
            "Fetches throttled (answered empty), by client id",
            |t| t.fetch_throttled,
        ),
    ];
    for (name, help, pick) in families {
        let mut metric = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (client, totals) in &m.total.clients {
            let labels: Labels = vec![("client_id", client.clone())];
            metric
                .encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(&pick(totals), None)?;
        }
    }
    Ok(())
}

fn encode_storage(enc: &mut DescriptorEncoder, m: &Merged) -> fmt::Result {
    let mut metric = enc.encode_descriptor(
        "shardlog_storage_flush_latency_seconds",
        "Storage flush (write and fsync) latency",
        None,
        MetricType::Histogram,
    )?;
    latency_histogram(&mut metric, &m.total.flush_us, &LATENCY_BUCKETS_US, 1e6)?;
    let mut metric = enc.encode_descriptor(
        "shardlog_storage_group_commit_appends",
        "Appends covered by one flush (group-commit size)",
        None,
        MetricType::Histogram,
    )?;
    latency_histogram(&mut metric, &m.total.group_commit, &GROUP_COMMIT_BUCKETS, 1.0)
}

fn encode_shards(enc: &mut DescriptorEncoder, shards: &[ShardLoad]) -> fmt::Result {
    let label = |l: &ShardLoad| -> Labels { vec![("shard", l.shard.to_string())] };
    let mut metric = enc.encode_descriptor(
        "shardlog_shard_busy_ratio",
        "Reactor busy time over the last second (0..1), per shard",
        None,
        MetricType::Gauge,
    )?;
    for l in shards {
        metric.encode_family(&label(l))?.encode_gauge(&l.busy_ratio)?;
    }
    let mut metric = enc.encode_descriptor(
        "shardlog_shard_busy_seconds",
        "Reactor busy time since start, per shard",
        None,
        MetricType::Counter,
    )?;
    for l in shards {
        let secs = l.busy_ns as f64 / 1e9;
        metric.encode_family(&label(l))?.encode_counter::<NoLabelSet, _, u64>(&secs, None)?;
    }
    type Pick = fn(&ShardLoad) -> u64;
    let counters: [(&str, &str, Pick); 3] = [
        ("shardlog_shard_requests", "Requests read, per shard", |l| l.requests),
        ("shardlog_shard_request_bytes", "Request bytes read, per shard", |l| l.request_bytes),
        ("shardlog_shard_response_bytes", "Response bytes written, per shard", |l| {
            l.response_bytes
        }),
    ];
    for (name, help, pick) in counters {
        let mut metric = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
        for l in shards {
            metric
                .encode_family(&label(l))?
                .encode_counter::<NoLabelSet, _, u64>(&pick(l), None)?;
        }
    }
    type PickG = fn(&ShardLoad) -> i64;
    let gauges: [(&str, &str, PickG); 4] = [
        ("shardlog_shard_connections", "Open connections, per shard", |l| l.connections),
        ("shardlog_shard_partitions", "Owned partitions, per shard", |l| l.partitions),
        ("shardlog_shard_leaders", "Owned partitions led, per shard", |l| l.leaders),
        ("shardlog_shard_producer_ids", "Producer ids tracked, per shard", |l| l.producer_ids),
    ];
    for (name, help, pick) in gauges {
        let mut metric = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for l in shards {
            metric.encode_family(&label(l))?.encode_gauge(&pick(l))?;
        }
    }
    Ok(())
}

fn encode_lag(enc: &mut DescriptorEncoder, m: &Merged) -> fmt::Result {
    let mut metric = enc.encode_descriptor(
        "shardlog_consumer_lag",
        "Consumer group lag in records (log end offset minus committed offset)",
        None,
        MetricType::Gauge,
    )?;
    for (k, lag) in &m.total.lag {
        let labels: Labels = vec![
            ("group", k.group.clone()),
            ("topic", k.topic.clone()),
            ("partition", k.partition.to_string()),
        ];
        metric.encode_family(&labels)?.encode_gauge(lag)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::snapshot::{merge, ShardSnapshot};
    use crate::metrics::ShardRecorder;
    use std::time::Duration;

    pub(crate) fn sample() -> Merged {
        let r = ShardRecorder::new(0);
        for us in [40, 90, 300, 2_000_000] {
            r.record(0, Stage::Total, Duration::from_micros(us));
        }
        r.record(1, Stage::Send, Duration::from_micros(7));
        r.count(Count::Requests, 5);
        r.topic_in("orders \"eu\"", 1000, 10);
        r.flush(Duration::from_micros(45), 3);
        r.consumer_lag("g1", "orders", 0, 12);
        let mut s = ShardSnapshot::default();
        r.publish(&mut s);
        merge([&s])
    }

    #[test]
    fn client_quota_counters_merge_across_shards() {
        use crate::types::QuotaKind;
        let snaps: Vec<ShardSnapshot> = (0..2)
            .map(|shard| {
                let r = ShardRecorder::new(shard);
                r.client_quota(QuotaKind::Produce, "app", 1000, 0);
                r.client_quota(QuotaKind::Produce, "app", 500, 40);
                r.client_quota(QuotaKind::Fetch, "app", 0, 7);
                let mut s = ShardSnapshot::default();
                r.publish(&mut s);
                s
            })
            .collect();
        let text = render(merge(snaps.iter()));
        for line in [
            "shardlog_client_produce_bytes_total{client_id=\"app\"} 3000",
            "shardlog_client_produce_throttle_ms_total{client_id=\"app\"} 80",
            "shardlog_client_produce_throttled_total{client_id=\"app\"} 2",
            "shardlog_client_fetch_throttled_total{client_id=\"app\"} 2",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[test]
    fn renders_histograms_counters_and_percentiles() {
        let text = render(sample());
        assert!(text.contains("# TYPE shardlog_request_latency_seconds histogram"), "{text}");
        assert!(text.contains(
            "shardlog_request_latency_seconds_bucket{api=\"Produce\",stage=\"total\",le=\"5e-05\"} 1"
        ), "{text}");
        assert!(text.contains(
            "shardlog_request_latency_seconds_bucket{api=\"Produce\",stage=\"total\",le=\"+Inf\"} 4"
        ), "{text}");
        assert!(
            text.contains(
                "shardlog_request_latency_seconds_count{api=\"Produce\",stage=\"total\"} 4"
            ),
            "{text}"
        );
        assert!(text.contains("shardlog_requests_total 5"), "{text}");
        assert!(
            text.contains("shardlog_topic_records_in_total{topic=\"orders \\\"eu\\\"\"} 10"),
            "{text}"
        );
        assert!(text.contains("quantile=\"0.99\""), "{text}");
        assert!(
            text.contains(
                "shardlog_consumer_lag{group=\"g1\",topic=\"orders\",partition=\"0\"} 12"
            ),
            "{text}"
        );
        assert!(text.contains("shardlog_shard_busy_ratio{shard=\"0\"}"), "{text}");
    }
}
