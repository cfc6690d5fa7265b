//! What issue 15 makes visible, on real processes: DescribeTopicPartitions (API 75) pages
//! through 3 topics × 40 partitions with a small `ResponsePartitionLimit` and returns every
//! partition exactly once, in order, with ELR fields present; the replication metrics are
//! scraped from `/metrics`; and (when the Kafka 4.1 jars are installed) Kafka's own
//! `TopicCommand` against three brokers, before and after a SIGKILL
//! (`tests/cluster/kafka_tools_check.py`). Ports: ephemeral, and 127.0.0.1:30500-30899 for
//! the three brokers' controller ports.
#![cfg(feature = "metrics")]

use crate::common;
use crate::metrics_support;

use std::time::{Duration, Instant};

use common::Wire;
use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
use kafka_protocol::messages::{
    ApiKey, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use metrics_support::{broker, parse_prometheus, value};
use shardlog::top::http_get;

const PARTITIONS: i32 = 40;
const TOPICS: [&str; 3] = ["vis-a", "vis-b", "vis-c"];

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// Pages through `topics` (all topics when empty) with `limit`: every (topic, partition)
/// seen, and the number of pages.
fn page_all(w: &mut Wire, topics: &[&str], limit: i32) -> (Vec<(String, i32)>, usize) {
    let mut seen = Vec::new();
    let mut cursor: Option<Cursor> = None;
    for page in 1..=1000 {
        let req = DescribeTopicPartitionsRequest::default()
            .with_topics(
                topics.iter().map(|t| TopicRequest::default().with_name(name(t))).collect(),
            )
            .with_response_partition_limit(limit)
            .with_cursor(cursor.take());
        let r: DescribeTopicPartitionsResponse = w.call(ApiKey::DescribeTopicPartitions, 0, &req);
        let mut on_page = 0;
        for t in &r.topics {
            assert_eq!(t.error_code, 0, "{t:?}");
            let topic = t.name.as_ref().expect("name").0.to_string();
            for p in &t.partitions {
                assert!(p.eligible_leader_replicas.is_some() && p.last_known_elr.is_some());
                assert!(p.isr_nodes.len() == 1 && p.leader_id.0 >= 0, "{p:?}");
                seen.push((topic.clone(), p.partition_index));
                on_page += 1;
            }
        }
        assert!(on_page <= limit as usize, "page {page} holds {on_page} > {limit}");
        match r.next_cursor {
            Some(c) => {
                cursor = Some(
                    Cursor::default()
                        .with_topic_name(c.topic_name)
                        .with_partition_index(c.partition_index),
                );
            }
            None => return (seen, page),
        }
    }
    panic!("pagination did not end");
}

#[test]
fn describe_topic_partitions_pages_and_metrics_scrape() {
    let b = broker::start(2);
    let mut w = Wire::connect(&b.addr);
    for t in TOPICS {
        w.create_topic(t, PARTITIONS, &[("min.insync.replicas", "1")]);
    }
    let expected: Vec<(String, i32)> =
        TOPICS.iter().flat_map(|t| (0..PARTITIONS).map(move |p| ((*t).to_string(), p))).collect();
    for limit in [1, 7, 40, 41, 2000] {
        let started = Instant::now();
        let (seen, pages) = page_all(&mut w, &TOPICS, limit);
        assert_eq!(seen, expected, "limit {limit}");
        eprintln!("[visibility] limit {limit}: {pages} pages in {:?}", started.elapsed());
    }
    // All topics (empty list): the same partitions, each once.
    let (seen, _) = page_all(&mut w, &[], 13);
    let ours: Vec<_> = seen.into_iter().filter(|(t, _)| t.starts_with("vis-")).collect();
    assert_eq!(ours, expected);

    // The replication families render (a single node: nothing under-replicated, no lag).
    let deadline = Instant::now() + Duration::from_secs(20);
    let text = loop {
        let text = http_get(&b.admin, "/metrics").expect("GET /metrics");
        // Every shard publishes its slot on its own timer: wait for shard 0's as well.
        if text.contains("shardlog_under_min_isr_partitions")
            && text.contains("shardlog_isr_shrinks_total{shard=\"0\"}")
        {
            break text;
        }
        assert!(Instant::now() < deadline, "no replication metrics:\n{text}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let samples = parse_prometheus(&text);
    for family in [
        "shardlog_under_replicated_partitions",
        "shardlog_under_min_isr_partitions",
        "shardlog_offline_partitions",
    ] {
        assert_eq!(value(&samples, family, &[]), Some(0.0), "{family}\n{text}");
    }
    assert_eq!(value(&samples, "shardlog_at_min_isr_partitions", &[]), Some(0.0));
    assert!(text.contains("UnderReplicatedPartitions"), "Kafka's name in the help text");
    assert!(
        value(&samples, "shardlog_isr_shrinks_total", &[("shard", "0")]).is_some(),
        "per-shard replication counters\n{text}"
    );
}

/// Kafka 4.1's TopicCommand against three brokers, a SIGKILL included
/// (`tests/cluster/kafka_tools_check.py`, the script `tests/cluster/run.sh` runs, here on a
/// cluster from the test harness); skipped without the Kafka jars.
#[test]
fn kafka_topic_command_shows_elr_after_a_sigkill() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let libs = root.join(".interop-cache/kafka-4.1.2/libs");
    if !libs.is_dir() {
        eprintln!("[visibility] SKIP: Kafka 4.1.2 jars not installed (tests/interop/install.sh)");
        return;
    }
    let c = common::cluster::Cluster::start(3, 30500);
    let started = Instant::now();
    let out = std::process::Command::new("python3")
        .arg(root.join("tests/cluster/kafka_tools_check.py"))
        .arg(c.bootstrap())
        .env("KAFKA_CLASSPATH", format!("{}/*", libs.display()))
        .output()
        .expect("run kafka_tools_check.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    eprintln!("[visibility] Kafka tools check took {:?}", started.elapsed());
    assert!(out.status.success() && stdout.contains("PASS"), "kafka_tools_check failed");
}
