//! Idle-scale measurement (not a pass/fail test; `--ignored`): the broker's resident memory
//! and open file descriptors with many idle partitions, idle connections and parked
//! long-poll fetches. Prints one line per step; figures go to `perf/results/`.
//!
//! `cargo test --test limits_idle_scale -- --ignored --nocapture`
//! (`IDLE_PARTITIONS`, `IDLE_CONNECTIONS`, `IDLE_FETCHES` override the counts.)

mod common;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{Broker, Wire};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, FetchRequest, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use shardlog::storage::batch::Compression;
use shardlog::storage::records::{build_batch, NewRecord};

const PARTITIONS_PER_TOPIC: usize = 1000;

fn count(var: &str, default: usize) -> usize {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// (resident KiB, open file descriptors) of the broker.
fn usage(pid: i32) -> (u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .expect("VmRSS");
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).expect("fd dir").count();
    (rss, fds)
}

fn report(step: &str, pid: i32, before: (u64, usize), things: usize) -> (u64, usize) {
    std::thread::sleep(Duration::from_millis(500));
    let now = usage(pid);
    let per = if things == 0 { 0 } else { (now.0.saturating_sub(before.0) * 1024) / things as u64 };
    eprintln!(
        "{step:<40} RSS {:>8} KiB  fds {:>6}  (+{} B RSS per item over {things})",
        now.0, now.1, per
    );
    now
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

#[test]
#[ignore = "measurement: run by hand with --ignored --nocapture"]
fn idle_partitions_connections_and_fetches() {
    let partitions = count("IDLE_PARTITIONS", 10_000);
    let connections = count("IDLE_CONNECTIONS", 2_000);
    let fetches = count("IDLE_FETCHES", 1_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start_with(dir.path(), &["--shards", "1"]);
    let pid = broker.pid();
    let mut wire = Wire::connect(&broker.addr);
    let start = report("started", pid, usage(pid), 0);

    // Connections and parked fetches first, on a fresh heap (freed request buffers of the
    // partition phase would otherwise hide their cost in RSS).
    wire.create_topic("idle-conn", 1, &[]);
    let open: Vec<TcpStream> =
        (0..connections).map(|_| TcpStream::connect(&broker.addr).expect("connect")).collect();
    let conns = report("idle connections", pid, start, connections);

    // Parked long-polls: a Fetch v11 with max_wait 60 s on an empty-tail partition, each on
    // its own connection (written raw; the answers are never read).
    let mut parked = Vec::new();
    for i in 0..fetches {
        let part = FetchPartition::default().with_partition(0).with_fetch_offset(0);
        let topic =
            FetchTopic::default().with_topic(TopicName(s("idle-conn"))).with_partitions(vec![part]);
        let req = FetchRequest::default()
            .with_max_wait_ms(60_000)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_topics(vec![topic]);
        let mut stream = TcpStream::connect(&broker.addr).expect("connect");
        write_request(&mut stream, ApiKey::Fetch as i16, 11, i as i32, &req);
        parked.push(stream);
    }
    let fetched = report("parked long-poll fetches", pid, conns, fetches);
    let topics = partitions.div_ceil(PARTITIONS_PER_TOPIC);
    let started = Instant::now();
    for t in 0..topics {
        wire.create_topic(&format!("idle-{t}"), PARTITIONS_PER_TOPIC as i32, &[]);
    }
    eprintln!("created {partitions} partitions in {:?}", started.elapsed());
    report("empty partitions", pid, fetched, partitions);

    // One small batch in every partition: the logs are open with data, indexes and cache.
    let value = vec![1u8; 100];
    let rec = [NewRecord { key: None, value: Some(&value), timestamp_ms: -1, headers: vec![] }];
    let batch = build_batch(&rec, Compression::None);
    for t in 0..topics {
        let parts = (0..PARTITIONS_PER_TOPIC as i32)
            .map(|p| {
                PartitionProduceData::default().with_index(p).with_records(Some(batch.clone()))
            })
            .collect();
        let topic = TopicProduceData::default()
            .with_name(TopicName(s(&format!("idle-{t}"))))
            .with_partition_data(parts);
        let req = ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![topic]);
        let resp: ProduceResponse = wire.call(ApiKey::Produce, 9, &req);
        assert!(resp.responses[0].partition_responses.iter().all(|p| p.error_code == 0));
    }
    report("one batch per partition", pid, fetched, partitions);

    drop((open, parked));
}

fn write_request<T: Encodable>(stream: &mut TcpStream, api: i16, version: i16, id: i32, body: &T) {
    use std::io::Write;
    let mut buf = bytes::BytesMut::new();
    let header = kafka_protocol::messages::RequestHeader::default()
        .with_request_api_key(api)
        .with_request_api_version(version)
        .with_correlation_id(id)
        .with_client_id(Some(s("idle")));
    header.encode(&mut buf, 1).expect("header");
    body.encode(&mut buf, version).expect("body");
    let mut frame = (buf.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&buf);
    stream.write_all(&frame).expect("write");
}
