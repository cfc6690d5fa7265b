//! OffsetCommit load figures (a benchmark harness, not a timed test: it asserts only that
//! commits succeed). 100 groups, each committing one partition's offset in a loop from
//! one of several client threads (one connection each, one commit in flight), for a
//! fixed time; prints commits/s and latency percentiles.
//!
//! Run: `cargo test --release --test group_commit_load -- --ignored --nocapture`
//! (set `SHARDLOG_BOOTSTRAP=host:port` to measure an already running broker).

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use shardlog::protocol::blocking::BlockingConn;

const PORT: u16 = 39_180;
const GROUPS: usize = 100;
const THREADS: usize = 10;
const DURATION_S: u64 = 5;
const TOPIC: &str = "commit-load";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// `BlockingConn` with test-style failures (a broken call panics with its reason).
struct Conn(BlockingConn);

impl Conn {
    fn open(addr: &str) -> Self {
        Self(BlockingConn::open(addr, "commit-load").expect("connect"))
    }

    fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        req: &Req,
    ) -> Resp {
        self.0.call(api, version, req).unwrap_or_else(|e| panic!("{e}"))
    }
}

fn commit_request(group: &str, offset: i64) -> OffsetCommitRequest {
    let part = OffsetCommitRequestPartition::default()
        .with_partition_index(0)
        .with_committed_offset(offset);
    let topic = OffsetCommitRequestTopic::default()
        .with_name(TopicName(s(TOPIC)))
        .with_partitions(vec![part]);
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(s(""))
        .with_topics(vec![topic])
}

fn start_broker(dir: &std::path::Path) -> Child {
    let child = Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .args(["serve", "--listen", &format!("127.0.0.1:{PORT}"), "--log-level", "warn"])
        .arg("--data-dir")
        .arg(dir)
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", PORT)).is_err() {
        assert!(Instant::now() < deadline, "broker did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

#[test]
#[ignore = "benchmark: run explicitly with --ignored --nocapture"]
fn offset_commit_throughput_and_latency_100_groups() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (addr, mut child) = match std::env::var("SHARDLOG_BOOTSTRAP") {
        Ok(addr) => (addr, None),
        Err(_) => (format!("127.0.0.1:{PORT}"), Some(start_broker(dir.path()))),
    };
    let mut setup = Conn::open(&addr);
    let topic = CreatableTopic::default()
        .with_name(TopicName(s(TOPIC)))
        .with_num_partitions(1)
        .with_replication_factor(1);
    let _: CreateTopicsResponse = setup.call(
        ApiKey::CreateTopics,
        4,
        &CreateTopicsRequest::default().with_topics(vec![topic]),
    );
    let keys: Vec<StrBytes> = (0..GROUPS).map(|g| s(&format!("load-{g}"))).collect();
    let found: FindCoordinatorResponse = setup.call(
        ApiKey::FindCoordinator,
        4,
        &FindCoordinatorRequest::default().with_key_type(0).with_coordinator_keys(keys),
    );
    assert!(found.coordinators.iter().all(|c| c.error_code == 0));
    let stop_at = Instant::now() + Duration::from_secs(DURATION_S);
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let mut conn = Conn::open(&addr);
                let mut hist = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)
                    .expect("hist");
                let mut offset = 0i64;
                while Instant::now() < stop_at {
                    for g in (t..GROUPS).step_by(THREADS) {
                        offset += 1;
                        let started = Instant::now();
                        let resp: OffsetCommitResponse = conn.call(
                            ApiKey::OffsetCommit,
                            8,
                            &commit_request(&format!("load-{g}"), offset),
                        );
                        hist.saturating_record(
                            u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
                        );
                        assert_eq!(resp.topics[0].partitions[0].error_code, 0, "commit failed");
                    }
                }
                hist
            })
        })
        .collect();
    let mut total =
        hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("hist");
    for h in handles {
        total.add(h.join().expect("thread")).expect("merge");
    }
    let secs = DURATION_S as f64;
    println!(
        "OffsetCommit, {GROUPS} groups, {THREADS} connections x 1 in flight, {DURATION_S}s: {:.0} commits/s; \
         latency us p50 {} p99 {} p99.9 {} max {}",
        total.len() as f64 / secs,
        total.value_at_quantile(0.5),
        total.value_at_quantile(0.99),
        total.value_at_quantile(0.999),
        total.max()
    );
    if let Some(child) = child.as_mut() {
        let _ = child.kill();
        let _ = child.wait();
    }
}
