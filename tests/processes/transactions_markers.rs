//! The cleaner removes transaction markers after the delete horizon (issue 17), against a
//! real broker process and confluent-kafka's transactional producer: on a compacted topic
//! with 4 KiB segments, `min.cleanable.dirty.ratio` 0.01 and `delete.retention.ms` 2 s, an
//! aborted transaction (T1) and a committed one whose records are all superseded (T2) lose
//! their markers from the segment files once the cleaner has run past the horizon, while the
//! markers of transactions with surviving data (T3, T4) stay. read_committed and
//! read_uncommitted consumers then see the latest committed value of every key and no
//! aborted one, a later transaction of the same producer is visible to read_committed (no
//! stale aborted-transaction entry hides it), and the last stable offset equals the high
//! watermark; all of it again after a SIGKILL and restart. The segment files are read with
//! our own batch parser, and once with Kafka's `DumpLogSegments` (when its jars are there). Needs `tests/interop/install.sh` (skipped otherwise, said on
//! stderr). Ports: 127.0.0.1:32200-32203. Figures (time and fill rounds until the markers
//! went) are printed, not asserted.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::Wire;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListOffsetsRequest, ListOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use shardlog::storage::batch::{scan_batch, ScanStep};

const TOPIC: &str = "markers";
const LIMIT: Duration = Duration::from_secs(120);

/// A broker on fixed ports (this test's block); killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(dir: &Path, port: u16) -> (Server, String) {
    let addr = format!("127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .arg("serve")
        .args(["--listen", &addr, "--admin-listen", &format!("127.0.0.1:{}", port + 1)])
        .args(["--shards", "1", "--log-level", "info", "--log-cleaner-backoff-ms", "100"])
        .arg("--data-dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn shardlog");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("shardlog listening on") {
                let _ = tx.send(());
            }
            if line.contains("cleaner") || line.contains("WARN") || line.contains("ERROR") {
                eprintln!("[broker] {line}");
            }
        }
    });
    let server = Server(child);
    rx.recv_timeout(Duration::from_secs(90)).expect("broker started");
    (server, addr)
}

/// Runs `markers.py` with `args`; its last stdout line (JSON).
fn py(python: &Path, addr: &str, args: &[&str]) -> serde_json::Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/transactions/markers.py");
    let out = Command::new(python)
        .arg(&script)
        .args([addr, TOPIC])
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .expect("run markers.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "markers.py {args:?} failed: {stdout}");
    let last = stdout.lines().last().expect("markers.py printed nothing");
    serde_json::from_str(last).expect("JSON line")
}

/// The partition directory's file names, sorted.
fn listing(part: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(part)
        .expect("partition dir")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    names.sort();
    names
}

/// The contents of the partition's `.log` files, read while no cleaner swap was under way:
/// the directory listing is the same before and after the reads, no `.swap` file is in it,
/// and every file could be read. Skipping a file renamed mid-swap lost its batches and made
/// markers look removed (or T3's look gone) when they were not.
fn segment_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let part = dir.join(format!("{TOPIC}-0"));
    for _ in 0..500 {
        let before = listing(&part);
        if !before.iter().any(|n| n.ends_with(".swap")) {
            let read: Option<Vec<(PathBuf, Vec<u8>)>> = before
                .iter()
                .filter(|n| n.ends_with(".log"))
                .map(|n| std::fs::read(part.join(n)).ok().map(|d| (part.join(n), d)))
                .collect();
            if let Some(files) = read {
                if listing(&part) == before {
                    return files;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no stable view of {} (a cleaner swap never finished?)", part.display());
}

/// Every batch in the partition's segment files: (base offset, control, records).
fn stored_batches(dir: &Path) -> Vec<(i64, bool, i32)> {
    let mut out = Vec::new();
    for (_, data) in segment_files(dir) {
        let mut at = 0;
        while let ScanStep::Batch(h) = scan_batch(&data[at..]) {
            at += h.total_size();
            out.push((h.base_offset, h.is_control(), h.records_count));
        }
    }
    out
}

/// Offsets of the markers (control batches holding a record) stored in `(after, before)`.
fn markers_between(batches: &[(i64, bool, i32)], after: i64, before: i64) -> Vec<i64> {
    batches
        .iter()
        .filter(|(o, control, n)| *control && *n > 0 && *o > after && *o < before)
        .map(|b| b.0)
        .collect()
}

/// The latest offset ListOffsets answers at `isolation` (0: the high watermark, 1: the last
/// stable offset).
fn latest_offset(addr: &str, isolation: i8) -> i64 {
    let part = ListOffsetsPartition::default().with_partition_index(0).with_timestamp(-1);
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partitions(vec![part])]);
    let resp: ListOffsetsResponse = Wire::connect(addr).call(ApiKey::ListOffsets, 5, &req);
    let p = &resp.topics[0].partitions[0];
    assert_eq!(p.error_code, 0, "ListOffsets isolation {isolation}");
    p.offset
}

/// Offsets of the markers Kafka's own `DumpLogSegments` finds in a copy of the partition's
/// segment files (it must read them all, every batch valid); `None` without Kafka's jars.
fn kafka_dump_markers(dir: &Path) -> Option<Vec<i64>> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let cp = Command::new(repo.join("perf/kafka/kafka.sh")).arg("classpath").output().ok()?;
    let cp = String::from_utf8_lossy(&cp.stdout).trim().to_string();
    if cp.is_empty() || !repo.join(".interop-cache/kafka-4.1.2/libs").exists() {
        return None;
    }
    let copy = tempfile::tempdir().expect("tempdir");
    let mut logs = segment_files(dir);
    // The active segment is preallocated (zeros past its end), which Kafka's reader refuses;
    // the cleaned ones are all sealed.
    logs.pop();
    let mut files = Vec::new();
    for (p, data) in logs {
        let to = copy.path().join(p.file_name().expect("name"));
        std::fs::write(&to, data).expect("copy a segment");
        files.push(to.display().to_string());
    }
    let out = Command::new("java")
        .args(["-cp", &cp, "kafka.tools.DumpLogSegments", "--deep-iteration", "--files"])
        .arg(files.join(","))
        .output()
        .expect("run DumpLogSegments");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "DumpLogSegments failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("isvalid: false"), "an invalid batch: {stdout}");
    let markers = stdout
        .lines()
        .filter(|l| l.contains("endTxnMarker:"))
        .filter_map(|l| l.split("offset: ").nth(1)?.split_whitespace().next()?.parse().ok())
        .collect();
    Some(markers)
}

fn range(v: &serde_json::Value, t: &str) -> (i64, i64) {
    (v[t][0].as_i64().expect("first"), v[t][1].as_i64().expect("last"))
}

#[test]
fn markers_leave_the_segment_files_after_the_delete_horizon() {
    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".interop-cache");
    let python = cache.join("venv/bin/python3");
    if !python.exists() {
        eprintln!("[markers] interop clients not installed (tests/interop/install.sh): skipped");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, addr) = start(dir.path(), 32200);
    Wire::connect(&addr).create_topic(
        TOPIC,
        1,
        &[
            ("cleanup.policy", "compact"),
            ("internal.segment.bytes", "4096"),
            ("min.cleanable.dirty.ratio", "0.01"),
            ("delete.retention.ms", "2000"),
        ],
    );
    let written = py(&python, &addr, &["write"]);
    eprintln!("[markers] written: {written}");
    let (t1, t2, t3, t4) = (
        range(&written, "t1"),
        range(&written, "t2"),
        range(&written, "t3"),
        range(&written, "t4"),
    );
    let before = stored_batches(dir.path());
    for (txn, next) in [(t1, t2), (t2, t3), (t3, t4)] {
        assert_eq!(markers_between(&before, txn.1, next.0).len(), 1, "one marker after {txn:?}");
    }

    // Keep the log dirty until the cleaner has removed T1's data and T1's and T2's markers.
    let started = Instant::now();
    let mut rounds = 0;
    loop {
        assert!(started.elapsed() < LIMIT, "markers still there: {:?}", stored_batches(dir.path()));
        py(&python, &addr, &["fill", "2"]);
        rounds += 1;
        let now = stored_batches(dir.path());
        let t1_data = now.iter().any(|(o, c, n)| !c && *n > 0 && *o >= t1.0 && *o <= t1.1);
        if !t1_data
            && markers_between(&now, t1.1, t2.0).is_empty()
            && markers_between(&now, t2.1, t3.0).is_empty()
        {
            break;
        }
    }
    eprintln!(
        "[markers] T1's and T2's markers left the segment files after {:.1} s ({rounds} fill rounds of 2 s)",
        started.elapsed().as_secs_f64()
    );
    let after = stored_batches(dir.path());
    assert_eq!(markers_between(&after, t3.1, t4.0).len(), 1, "T3's data survive: marker kept");
    assert_eq!(markers_between(&after, t4.1, i64::MAX).len(), 1, "T4's marker kept");
    match kafka_dump_markers(dir.path()) {
        Some(markers) => {
            eprintln!("[markers] DumpLogSegments finds markers at {markers:?}");
            assert!(!markers.iter().any(|m| *m > t1.1 && *m < t3.0), "T1's or T2's marker");
            assert!(markers.iter().any(|m| *m > t3.1 && *m < t4.0), "T3's marker");
        }
        None => eprintln!("[markers] Kafka's jars not installed: DumpLogSegments skipped"),
    }
    let checked = py(&python, &addr, &["check"]);
    eprintln!("[markers] consumers after the clean: {checked}");

    // SIGKILL and restart (recovery from the producer snapshots and the cleaned log).
    drop(server);
    let (_server, addr) = start(dir.path(), 32202);
    let after_restart = stored_batches(dir.path());
    assert!(markers_between(&after_restart, t1.1, t2.0).is_empty());
    assert!(markers_between(&after_restart, t2.1, t3.0).is_empty());
    let (lso, hw) = (latest_offset(&addr, 1), latest_offset(&addr, 0));
    assert_eq!(lso, hw, "no transaction open after the restart");
    let checked = py(&python, &addr, &["check"]);
    eprintln!("[markers] consumers after a SIGKILL and restart: {checked}");
    assert_eq!(latest_offset(&addr, 1), latest_offset(&addr, 0));
}
