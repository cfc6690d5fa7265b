//! The Prometheus text of a merged multi-shard scrape parses with a real Prometheus text
//! parser (Python's `prometheus_client.parser`) and its values match what was recorded.

mod metrics_support;

use std::time::Duration;

use shardlog::metrics::snapshot::{merge, ShardSnapshot};
use shardlog::metrics::{prom, Count, Level, ShardRecorder, Stage};

fn shard(id: u32, produce_us: &[u64]) -> ShardSnapshot {
    let r = ShardRecorder::new(id);
    for us in produce_us {
        r.record(0, Stage::Total, Duration::from_micros(*us));
        r.record(0, Stage::Storage, Duration::from_micros(us / 2));
    }
    r.count(Count::Requests, produce_us.len() as u64);
    r.set(Level::Partitions, 3);
    r.topic_in("orders", 100 * produce_us.len() as u64, produce_us.len() as u64);
    r.topic_out("we\"ird\\topic\nname", 5, 1);
    r.flush(Duration::from_micros(50), 4);
    r.consumer_lag("grp", "orders", i32::try_from(id).unwrap_or(0), 7);
    let mut s = ShardSnapshot::default();
    r.publish(&mut s);
    s
}

#[test]
fn merged_scrape_parses_and_sums_across_shards() {
    let a = shard(0, &[100, 200, 300]);
    let b = shard(1, &[5_000, 70_000_000]);
    let text = prom::render(merge([&a, &b]));
    let samples = metrics_support::parse_prometheus(&text);
    let get = |name: &str, labels: &[(&str, &str)]| metrics_support::value(&samples, name, labels);
    assert_eq!(get("shardlog_requests_total", &[]), Some(5.0));
    assert_eq!(
        get("shardlog_request_latency_seconds_count", &[("api", "Produce"), ("stage", "total")]),
        Some(5.0)
    );
    assert_eq!(
        get(
            "shardlog_request_latency_seconds_bucket",
            &[("api", "Produce"), ("stage", "total"), ("le", "0.001")]
        ),
        Some(3.0)
    );
    assert_eq!(get("shardlog_topic_records_in_total", &[("topic", "orders")]), Some(5.0));
    assert_eq!(
        get("shardlog_topic_bytes_out_total", &[("topic", "we\"ird\\topic\nname")]),
        Some(10.0)
    );
    assert_eq!(get("shardlog_partitions", &[]), Some(6.0));
    assert_eq!(get("shardlog_shard_partitions", &[("shard", "1")]), Some(3.0));
    assert_eq!(get("shardlog_storage_group_commit_appends_sum", &[]), Some(8.0));
    assert_eq!(get("shardlog_consumer_lag", &[("group", "grp"), ("partition", "1")]), Some(7.0));
    let p99 = get(
        "shardlog_request_latency_percentile_seconds",
        &[("api", "Produce"), ("stage", "total"), ("quantile", "0.5")],
    )
    .expect("p50");
    assert!((0.0002..0.0004).contains(&p99), "{p99}");
}
