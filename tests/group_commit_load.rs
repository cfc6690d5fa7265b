//! OffsetCommit load figures (a benchmark harness, not a timed test: it asserts only that
//! commits succeed). 100 groups, each committing one partition's offset in a loop from
//! one of several client threads (one connection each, one commit in flight), for a
//! fixed time; prints commits/s and latency percentiles.
//!
//! Run: `cargo test --release --test group_commit_load -- --ignored --nocapture`
//! (set `SHARDLOG_BOOTSTRAP=host:port` to measure an already running broker).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

const PORT: u16 = 39_180;
const GROUPS: usize = 100;
const THREADS: usize = 10;
const DURATION_S: u64 = 5;
const TOPIC: &str = "commit-load";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

struct Conn(TcpStream, i32);

impl Conn {
    fn open(addr: &str) -> Self {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        Self(stream, 0)
    }

    fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        req: &Req,
    ) -> Resp {
        self.1 += 1;
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.1);
        let mut body = BytesMut::new();
        header.encode(&mut body, api.request_header_version(version)).expect("header");
        req.encode(&mut body, version).expect("body");
        let mut frame = BytesMut::new();
        frame.put_u32(u32::try_from(body.len()).expect("size"));
        frame.put_slice(&body);
        self.0.write_all(&frame).expect("write");
        let mut size = [0u8; 4];
        self.0.read_exact(&mut size).expect("read");
        let mut buf = vec![0u8; u32::from_be_bytes(size) as usize];
        self.0.read_exact(&mut buf).expect("read");
        let mut buf = Bytes::from(buf);
        ResponseHeader::decode(&mut buf, api.response_header_version(version)).expect("header");
        Resp::decode(&mut buf, version).expect("decode")
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
