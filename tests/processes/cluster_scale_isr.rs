//! Many idle partitions at replication factor 3 on three real broker processes (issue 43):
//! topics are created through CreateTopics in batches of 100 (3 partitions each, RF 3, no
//! traffic), every partition must reach a full ISR, and the ISR must then stay unchanged
//! over a quiet window: no shrink, no expansion, as Kafka's idle cluster. Then one acks=all
//! record goes to every partition (one Produce per leader and 1,000 partitions). Figures
//! (time to create, time to a full ISR, ISR changes per node, the longest event-loop stall,
//! the time until every partition acknowledged its record) are printed; `perf/results/2026-12-07-many-partitions.md` keeps them.
//!
//! Long (minutes on this 2-core machine), so behind `SHARDLOG_SCALE_TEST=1`;
//! `SHARDLOG_SCALE_TOPICS` (default 1,000 topics = 3,000 partitions, 9,000 replicas) and
//! `SHARDLOG_SCALE_QUIET_S` (default 60) change the size. A release build gives the figures:
//! `SHARDLOG_SCALE_TEST=1 SHARDLOG_TEST_LOG=warn cargo test --release --test processes \
//!  cluster_scale_isr -- --nocapture`. Controller ports: this file's block,
//! 127.0.0.1:33000-33399.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::Wire;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use shardlog::storage::records::build_simple_batch;

const PARTITIONS: i32 = 3;
const BATCH: usize = 100;
const PREFIX: &str = "scale-";

/// Partitions per Produce request when writing one record to every partition: Kafka's
/// producer batches per broker the same way (one request carries many partitions).
const PRODUCE_PARTITIONS_PER_REQUEST: usize = 1000;

fn env_count(var: &str, default: u64) -> u64 {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Creates `names` in one CreateTopics (RF 3); retried (bounded) until each exists.
fn create_batch(c: &Cluster, names: &[String]) {
    c.wait_for(Duration::from_secs(120), "CreateTopics", |w| {
        let topics = names
            .iter()
            .map(|n| {
                CreatableTopic::default()
                    .with_name(TopicName(StrBytes::from_string(n.clone())))
                    .with_num_partitions(PARTITIONS)
                    .with_replication_factor(3)
            })
            .collect();
        let req = CreateTopicsRequest::default().with_topics(topics).with_timeout_ms(60_000);
        let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 5, &req);
        // 36: TOPIC_ALREADY_EXISTS (a retry after a created-but-timed-out answer).
        resp.topics.iter().all(|t| matches!(t.error_code, 0 | 36)).then_some(())
    });
}

/// (topic, partition) → (leader, sorted ISR) of every test partition, as one node sees it.
type IsrMap = BTreeMap<(String, i32), (i32, Vec<i32>)>;

fn isr_map(w: &mut Wire) -> IsrMap {
    let m: MetadataResponse =
        w.call(ApiKey::Metadata, 12, &MetadataRequest::default().with_topics(None));
    let mut out = IsrMap::new();
    for t in &m.topics {
        let Some(name) = t.name.as_ref().map(|n| n.0.to_string()) else { continue };
        if !name.starts_with(PREFIX) {
            continue;
        }
        for p in &t.partitions {
            let mut isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
            isr.sort_unstable();
            out.insert((name.clone(), p.partition_index), (p.leader_id.0, isr));
        }
    }
    out
}

fn full(map: &IsrMap, partitions: usize) -> usize {
    let n = map.values().filter(|(leader, isr)| *leader > 0 && isr.len() == 3).count();
    assert!(map.len() <= partitions);
    n
}

/// The sum of every sample of `name` (all shards) in a Prometheus text.
fn sum_of(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// (ISR shrinks, ISR expansions, longest event-loop stall in ms) of one node.
fn counters(admin: &str) -> (f64, f64, f64) {
    let text = shardlog::top::http_get(admin, "/metrics").expect("GET /metrics");
    let stall = text
        .lines()
        .filter(|l| l.split(['{', ' ']).next() == Some("shardlog_shard_stall_ms_max"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, f64::max);
    (
        sum_of(&text, "shardlog_isr_shrinks_total"),
        sum_of(&text, "shardlog_isr_expands_total"),
        stall,
    )
}

/// Resident memory of a process, in KiB.
/// Sends one acks=all record to each of `partitions` (all led by the broker at `addr`), in
/// requests of [`PRODUCE_PARTITIONS_PER_REQUEST`]; retries (bounded) what was refused.
fn one_record_each(addr: &str, mut partitions: Vec<(String, i32)>) {
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut w = Wire::connect(addr);
    while !partitions.is_empty() {
        assert!(Instant::now() < deadline, "{} partitions never acknowledged", partitions.len());
        let mut refused = Vec::new();
        for chunk in partitions.chunks(PRODUCE_PARTITIONS_PER_REQUEST) {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .as_millis() as i64;
            let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
            for (t, p) in chunk {
                by_topic.entry(t).or_default().push(*p);
            }
            let topic_data = by_topic
                .iter()
                .map(|(t, ps)| {
                    let parts = ps
                        .iter()
                        .map(|p| {
                            PartitionProduceData::default()
                                .with_index(*p)
                                .with_records(Some(build_simple_batch(1, 16, now)))
                        })
                        .collect();
                    TopicProduceData::default()
                        .with_name(TopicName(StrBytes::from_string((*t).to_string())))
                        .with_partition_data(parts)
                })
                .collect();
            let req = ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(60_000)
                .with_topic_data(topic_data);
            let resp: ProduceResponse = w.call(ApiKey::Produce, 9, &req);
            for t in &resp.responses {
                for p in &t.partition_responses {
                    if p.error_code != 0 {
                        refused.push((t.name.0.to_string(), p.index));
                    }
                }
            }
        }
        if !refused.is_empty() {
            eprintln!("[scale] {} partitions refused a write; retrying", refused.len());
            std::thread::sleep(Duration::from_millis(500));
        }
        partitions = refused;
    }
}

fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn thousands_of_idle_partitions_reach_a_full_isr_that_stays() {
    if std::env::var("SHARDLOG_SCALE_TEST").is_err() {
        eprintln!("skipped: set SHARDLOG_SCALE_TEST=1 (minutes; see the module doc)");
        return;
    }
    let topics = env_count("SHARDLOG_SCALE_TOPICS", 1000) as usize;
    let quiet = Duration::from_secs(env_count("SHARDLOG_SCALE_QUIET_S", 60));
    let partitions = topics * PARTITIONS as usize;
    let c = Cluster::start(3, 33000);
    c.wait_brokers(3, Duration::from_secs(60));
    let admins: Vec<String> = c.running().map(|(_, b)| b.admin_addr()).collect();

    let start = Instant::now();
    let names: Vec<String> = (0..topics).map(|i| format!("{PREFIX}{i:05}")).collect();
    for batch in names.chunks(BATCH) {
        create_batch(&c, batch);
    }
    let created = start.elapsed();
    eprintln!("[scale] {topics} topics x {PARTITIONS} (RF 3) created in {created:.1?}");

    let limit = Duration::from_secs(env_count("SHARDLOG_SCALE_ISR_LIMIT_S", 600));
    let mut last_print = Instant::now();
    let mut settled = None;
    while start.elapsed() < created + limit {
        let map = c.wait_for(Duration::from_secs(60), "Metadata", |w| Some(isr_map(w)));
        let n = full(&map, partitions);
        if n == partitions {
            settled = Some(map);
            break;
        }
        if last_print.elapsed() > Duration::from_secs(10) {
            eprintln!("[scale] {:.0?}: {n} of {partitions} with a full ISR", start.elapsed());
            last_print = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let Some(settled) = settled else {
        for (i, a) in admins.iter().enumerate() {
            let (shrinks, expands, stall) = counters(a);
            eprintln!(
                "[scale] node {}: {shrinks} ISR shrinks, {expands} expansions; longest stall \
                 {stall} ms",
                i + 1
            );
        }
        panic!("no full ISR on every partition {limit:?} after creation");
    };
    let to_full = start.elapsed();
    eprintln!("[scale] every partition led with a full ISR after {to_full:.1?}");

    let before: Vec<(f64, f64, f64)> = admins.iter().map(|a| counters(a)).collect();
    let quiet_start = Instant::now();
    let mut changed = 0;
    while quiet_start.elapsed() < quiet {
        std::thread::sleep(Duration::from_secs(5));
        let now = c.wait_for(Duration::from_secs(30), "Metadata", |w| Some(isr_map(w)));
        let differ = settled.iter().filter(|(k, v)| now.get(*k) != Some(*v)).count();
        if differ > 0 {
            eprintln!("[scale] {differ} partitions changed leader or ISR while idle");
        }
        changed = changed.max(differ);
    }
    let after: Vec<(f64, f64, f64)> = admins.iter().map(|a| counters(a)).collect();
    for (i, b) in c.running() {
        let kib = rss_kib(b.pid());
        let per_replica = kib * 1024 / partitions as u64;
        eprintln!("[scale] node {}: RSS {} MiB, {per_replica} B per replica", i + 1, kib / 1024);
    }
    let mut isr_changes = 0.0;
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        let (shrinks, expands) = (a.0 - b.0, a.1 - b.1);
        isr_changes += shrinks + expands;
        eprintln!(
            "[scale] node {}: over the quiet {quiet:?}: {shrinks} ISR shrinks, {expands} \
             expansions; since start {} shrinks, {} expansions; longest stall {} ms",
            i + 1,
            a.0,
            a.1,
            a.2
        );
    }
    // One acks=all record to every partition, each leader's partitions in parallel.
    let mut by_leader: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
    for ((t, p), (leader, _)) in &settled {
        by_leader.entry(*leader).or_default().push((t.clone(), *p));
    }
    let produce_start = Instant::now();
    std::thread::scope(|s| {
        for (leader, parts) in by_leader {
            let addr = c.broker(c.index_of(leader)).addr.clone();
            s.spawn(move || one_record_each(&addr, parts));
        }
    });
    eprintln!(
        "[scale] one acks=all record to each of the {partitions} partitions acknowledged in \
         {:.1?}",
        produce_start.elapsed()
    );
    assert_eq!(changed, 0, "leaders or ISRs changed over a quiet window");
    assert_eq!(isr_changes, 0.0, "ISR shrinks or expansions over a quiet window");
}
