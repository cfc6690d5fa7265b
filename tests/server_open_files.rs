//! Bounded file descriptors against the real broker (issue 19): with a per-shard open-file
//! cache of 4 (`SHARDLOG_SEGMENT_OPEN_FILES_MAX`), records produced across many sealed
//! segments (`segment.ms` = 1: every produce rolls) are consumed back byte-identical after a
//! clean restart (cold batch cache: every read opens its segment through the cache), and the
//! broker's open file descriptors (`/proc/PID/fd`) stay under its base count plus one active
//! segment per partition plus the bound and a margin, far below the sealed-segment count.

mod common;

use std::time::Duration;

use common::{Broker, Wire};
use rskafka::client::partition::{Compression, UnknownTopicHandling};
use rskafka::record::Record;

const PARTITIONS: i32 = 4;
const PRODUCES_PER_PARTITION: usize = 40;
const RECORDS_PER_PRODUCE: usize = 3;
const OPEN_FILES_MAX: usize = 4;
/// Descriptors the broker may open besides segments and its base (client connections, a
/// directory being synced, index files being written, the metadata log).
const FD_MARGIN: usize = 16;

fn open_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).expect("fd dir").count()
}

fn start(dir: &std::path::Path) -> Broker {
    let bound = OPEN_FILES_MAX.to_string();
    Broker::start_env(dir, &["--shards", "1"], &[("SHARDLOG_SEGMENT_OPEN_FILES_MAX", &bound)])
}

fn value(p: i32, produce: usize, r: usize) -> Vec<u8> {
    // Varied lengths, content unique per record.
    let stem = format!("p{p}-n{produce}-r{r}-");
    stem.repeat(1 + (produce * 7 + r * 13) % 40).into_bytes()
}

/// Sealed segments of topic `lazy` on disk: `.log` files in its partition directories
/// (wherever the data dir puts them) beyond one active segment per partition.
fn sealed_segments(dir: &std::path::Path) -> usize {
    fn walk(dir: &std::path::Path, in_topic: bool, logs: &mut usize) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.filter_map(Result::ok) {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&e.path(), in_topic || name.starts_with("lazy-"), logs);
            } else if in_topic && name.ends_with(".log") {
                *logs += 1;
            }
        }
    }
    let mut logs = 0;
    walk(dir, false, &mut logs);
    logs.saturating_sub(PARTITIONS as usize)
}

#[tokio::test]
async fn consumes_many_sealed_segments_byte_identical_with_bounded_fds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut broker = start(dir.path());
    let base_fds = open_fds(broker.pid());
    Wire::connect(&broker.addr).create_topic("lazy", PARTITIONS, &[("segment.ms", "1")]);
    let client = broker.client().await;
    let mut expected: Vec<Vec<(i64, Vec<u8>)>> = vec![Vec::new(); PARTITIONS as usize];
    for p in 0..PARTITIONS {
        let pc = client.partition_client("lazy", p, UnknownTopicHandling::Retry).await.expect("pc");
        for n in 0..PRODUCES_PER_PARTITION {
            let records: Vec<Record> = (0..RECORDS_PER_PRODUCE)
                .map(|r| Record {
                    key: Some(format!("k{n}-{r}").into_bytes()),
                    value: Some(value(p, n, r)),
                    headers: Default::default(),
                    timestamp: common::now(),
                })
                .collect();
            let offsets = pc.produce(records, Compression::NoCompression).await.expect("produce");
            for (r, o) in offsets.iter().enumerate() {
                expected[p as usize].push((*o, value(p, n, r)));
            }
            // segment.ms = 1: the next produce rolls a new segment.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    drop(client);
    let during_produce = open_fds(broker.pid());
    broker.terminate();

    let sealed = sealed_segments(dir.path());
    let bound = base_fds + PARTITIONS as usize + OPEN_FILES_MAX + FD_MARGIN;
    assert!(
        sealed > bound,
        "the test needs more sealed segments ({sealed}) than the fd bound {bound}"
    );
    eprintln!("sealed segments {sealed}; fds: base {base_fds}, after producing {during_produce}");
    assert!(during_produce <= bound, "{during_produce} fds after producing, bound {bound}");

    // A clean restart: recovery opens each sealed segment once and closes it again, and the
    // batch cache is cold, so every fetch below reads segment files through the cache.
    let broker = start(dir.path());
    let after_start = open_fds(broker.pid());
    assert!(after_start <= bound, "{after_start} fds after restart, bound {bound}");
    let client = broker.client().await;
    let mut peak = after_start;
    for p in 0..PARTITIONS {
        let pc = client.partition_client("lazy", p, UnknownTopicHandling::Retry).await.expect("pc");
        let want = &expected[p as usize];
        let mut got: Vec<(i64, Vec<u8>)> = Vec::new();
        let mut next = 0;
        while got.len() < want.len() {
            // Small fetches: a few segments per fetch, so the cache evicts all along.
            let (records, _hw) = pc.fetch_records(next, 1..2_000, 1_000).await.expect("fetch");
            assert!(!records.is_empty(), "partition {p}: nothing at {next}");
            for r in records {
                next = r.offset + 1;
                got.push((r.offset, r.record.value.unwrap_or_default()));
            }
            peak = peak.max(open_fds(broker.pid()));
        }
        assert_eq!(&got, want, "partition {p} reads back byte-identical");
    }
    eprintln!("fds: after restart {after_start}, peak while consuming {peak}, bound {bound}");
    assert!(peak <= bound, "{peak} fds while consuming, bound {bound}");
}

/// (resident KiB, open file descriptors) of process `pid`.
fn usage(pid: u32) -> (u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .expect("VmRSS");
    (rss, open_fds(pid as i32))
}

/// A broker from binary `bin` on 127.0.0.1:32010 (this helper's port block), started and
/// stopped by the measurement itself so any build can be measured.
struct Measured(std::process::Child);

impl Measured {
    fn start(bin: &str, dir: &std::path::Path) -> Measured {
        use std::io::BufRead;
        let mut child = std::process::Command::new(bin)
            .args(["serve", "--shards", "1", "--spin-before-park-us", "0"])
            .args(["--listen", "127.0.0.1:32010", "--admin-listen", "127.0.0.1:32011"])
            .args(["--log-level", "warn,shardlog=info"])
            .arg("--data-dir")
            .arg(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn broker");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("shardlog listening on") {
                    let _ = tx.send(());
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(300)).expect("broker listening");
        Measured(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    fn terminate(mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

impl Drop for Measured {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn percentiles(mut v: Vec<Duration>) -> String {
    v.sort();
    let at = |q: f64| v[((v.len() - 1) as f64 * q) as usize];
    format!("p50 {:?} p99 {:?} max {:?} (n={})", at(0.5), at(0.99), v[v.len() - 1], v.len())
}

/// Idle open fds and RSS of a broker with `LAZY_PARTITIONS` (1,000) partitions of
/// `LAZY_SEGMENTS` (10) sealed segments each, before and after a clean restart, and the
/// latency of a fetch from a cold sealed segment against the same fetch again. The binary is
/// `LAZY_FDS_BIN` (default: this build), so an older build gives the "before" figures.
/// `cargo test --test server_open_files -- --ignored --nocapture`; figures in
/// `perf/results/2026-12-01-lazy-fds.md`.
#[test]
#[ignore = "measurement: run by hand with --ignored --nocapture"]
fn measure_idle_fds_rss_and_cold_reads() {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use shardlog::storage::batch::Compression as Codec;
    use shardlog::storage::records::{build_batch, NewRecord};

    let env = |k: &str, d: usize| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let partitions = env("LAZY_PARTITIONS", 1_000);
    let sealed = env("LAZY_SEGMENTS", 10);
    let bin = std::env::var("LAZY_FDS_BIN").unwrap_or(env!("CARGO_BIN_EXE_shardlog").into());
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Measured::start(&bin, dir.path());
    let addr = "127.0.0.1:32010";
    eprintln!("binary {bin}; started: {:?} (RSS KiB, fds)", usage(broker.pid()));
    let mut wire = Wire::connect(addr);
    wire.create_topic("idle", partitions as i32, &[("segment.ms", "1")]);
    let value = vec![7u8; 200];
    let rec = [NewRecord { key: None, value: Some(&value), timestamp_ms: -1, headers: vec![] }];
    let batch = build_batch(&rec, Codec::None);
    // One batch per partition per round; segment.ms = 1 rolls every partition each round.
    for _ in 0..=sealed {
        let parts = (0..partitions as i32)
            .map(|p| {
                PartitionProduceData::default().with_index(p).with_records(Some(batch.clone()))
            })
            .collect();
        let topic = TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("idle")))
            .with_partition_data(parts);
        let req = ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![topic]);
        let resp: ProduceResponse = wire.call(ApiKey::Produce, 9, &req);
        assert!(resp.responses[0].partition_responses.iter().all(|p| p.error_code == 0));
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(wire);
    std::thread::sleep(Duration::from_secs(5));
    eprintln!(
        "{partitions} partitions x {sealed} sealed segments, idle: {:?} (RSS KiB, fds)",
        usage(broker.pid())
    );
    broker.terminate();

    let started = std::time::Instant::now();
    let broker = Measured::start(&bin, dir.path());
    let mut wire = Wire::connect(addr);
    // Loaded once every partition answers a fetch.
    let probe = wire.fetch("idle", partitions as i32 - 1, 0);
    assert_eq!(probe.error_code, 0);
    eprintln!("restarted in {:?}", started.elapsed());
    std::thread::sleep(Duration::from_secs(5));
    eprintln!("after a clean restart, idle: {:?} (RSS KiB, fds)", usage(broker.pid()));

    // Cold: the first read of a sealed segment since the restart (the new code opens it);
    // warm: the same fetch again (file open; still a disk read, O_DIRECT has no page cache).
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for p in 0..partitions.min(500) as i32 {
        let offset = sealed as i64 - 1;
        let t = std::time::Instant::now();
        let a = wire.fetch("idle", p, offset);
        cold.push(t.elapsed());
        let t = std::time::Instant::now();
        let b = wire.fetch("idle", p, offset);
        warm.push(t.elapsed());
        assert_eq!(a.records, b.records);
        assert!(!a.records.is_empty());
    }
    eprintln!("fetch of a cold sealed segment: {}", percentiles(cold));
    eprintln!("the same fetch again (warm):    {}", percentiles(warm));
    eprintln!("after the reads: {:?} (RSS KiB, fds)", usage(broker.pid()));
    broker.terminate();
}
