//! Exactly-once through a transaction-coordinator failover (issue 17): Kafka's Java client
//! runs a consume-transform-produce loop (`tests/transactions/java/EosApp.java`,
//! `sendOffsetsToTransaction`, read_committed) over N input records (6,000 unless
//! `SHARDLOG_TXN_KILL_RECORDS` says) on three real brokers, with the input, the output,
//! `__consumer_offsets` and `__transaction_state` at replication factor 3. Once a quarter of
//! the input is done, the broker coordinating the app's transactional id (not the group's:
//! names are picked so) is SIGKILLed and, once another broker is named coordinator,
//! restarted; preferred-leader elections every 15 s then move the coordinator back to it
//! while the app runs (`SHARDLOG_TXN_KILL_NO_RESTART=1` leaves it down). The app must
//! finish by itself (no watchdog restart: `tests/transactions/eos_cluster.py` with
//! `EOS_CLUSTER_STRICT=1` fails a run without progress for 60 s) and a read_committed
//! consumer of the output sees each input exactly once. Figures (time, app restarts, COMMIT and ABORT markers on the output
//! partitions) are printed, not asserted. At the end no broker reports an output partition
//! whose last stable offset trails its high watermark (`shardlog_partition_lso_lag_records`).
//! Needs `tests/interop/install.sh`; without it the test says so on stderr and passes.
//! Controller ports: 127.0.0.1:30490, 30590, 30690 (this file's block is 30400-30699).

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::cluster::Cluster;
use common::Wire;
use kafka_protocol::messages::{
    ApiKey, FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest, MetadataResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;

const LIMIT: Duration = Duration::from_secs(120);
const KIND: &str = "java";
/// Kept small for CI's time budget; `SHARDLOG_TXN_KILL_RECORDS=20000` is the full run.
const RECORDS_DEFAULT: usize = 6_000;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn metadata(w: &mut Wire) -> MetadataResponse {
    w.call(ApiKey::Metadata, 12, &MetadataRequest::default().with_topics(None))
}

/// The node coordinating a transactional id, other than `not` (-1: any).
fn txn_coordinator(c: &Cluster, id: &str, not: i32) -> i32 {
    coordinator(c, id, 1, not)
}

/// The node coordinating `key` (key type 0: a group, 1: a transactional id), other than
/// `not` (-1: any).
fn coordinator(c: &Cluster, key: &str, key_type: i8, not: i32) -> i32 {
    c.wait_for(LIMIT, "FindCoordinator", |w| {
        let req = FindCoordinatorRequest::default().with_key(s(key)).with_key_type(key_type);
        let resp: FindCoordinatorResponse = w.call(ApiKey::FindCoordinator, 3, &req);
        (resp.error_code == 0 && resp.node_id.0 != not).then_some(resp.node_id.0)
    })
}

/// Partition → leader's address, once every partition of `topic` has a live leader.
fn leaders(c: &Cluster, topic: &str) -> BTreeMap<i32, String> {
    c.wait_for(LIMIT, "leaders", |w| {
        let m = metadata(w);
        let addr: BTreeMap<i32, String> =
            m.brokers.iter().map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port))).collect();
        let t = m.topics.iter().find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))?;
        let out: BTreeMap<i32, String> = t
            .partitions
            .iter()
            .filter_map(|p| Some((p.partition_index, addr.get(&p.leader_id.0)?.clone())))
            .collect();
        (out.len() == t.partitions.len() && !out.is_empty()).then_some(out)
    })
}

/// COMMIT and ABORT markers in one partition (read_uncommitted, from offset 0).
fn markers(addr: &str, topic: &str, partition: i32) -> (usize, usize) {
    let mut w = Wire::connect(addr);
    let (mut commits, mut aborts, mut offset) = (0, 0, 0i64);
    loop {
        let answer = w.fetch(topic, partition, offset);
        assert_eq!(answer.error_code, 0, "fetch {topic}-{partition} from {addr}");
        let mut bytes: Bytes = answer.records;
        let start = offset;
        while bytes.len() >= 12 {
            let length = i32::from_be_bytes(bytes[8..12].try_into().expect("4 bytes"));
            let total = 12 + usize::try_from(length).expect("batch length");
            if bytes.len() < total {
                break;
            }
            let mut batch = bytes.split_to(total);
            let set = RecordBatchDecoder::decode(&mut batch).expect("a valid batch");
            for r in set.records {
                offset = offset.max(r.offset + 1);
                // A control record's key: version i16, type i16 (0 ABORT, 1 COMMIT).
                match r.key.as_deref().filter(|_| r.control).map(|k| k.get(2..4)) {
                    Some(Some([0, 1])) => commits += 1,
                    Some(Some([0, 0])) => aborts += 1,
                    _ => {}
                }
            }
        }
        if offset == start || offset >= answer.high_watermark {
            return (commits, aborts);
        }
    }
}

/// Whether `broker`'s log shows `needle` within `limit`: its stderr reader may print a
/// dying broker's last line a moment after the exit status is known.
fn log_shows(broker: &common::Broker, needle: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while !broker.log_contains(needle) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

/// How the coordinator's broker goes down.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// The test SIGKILLs it once the app is a quarter through.
    Kill,
    /// It SIGKILLs itself the `n`th time a transaction's PrepareCommit/PrepareAbort is
    /// durable, before any marker is written (crash point `txn.prepare_persisted`).
    CrashAfterPrepare(u64),
}

/// One broker cluster at a time: the scenarios share this machine's two cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn java_eos_app_survives_a_coordinator_kill() {
    scenario("txn-kill", 30390, Fault::Kill, RECORDS_DEFAULT);
}

/// The new coordinator finds the transaction in PrepareCommit (or PrepareAbort), writes its
/// markers and completes it; the client's retried EndTxn is answered from that state.
/// (Its end check once found an output partition's LSO 688 records behind the high
/// watermark for 120 s: the crashed broker, restarted as a follower, never applied the
/// markers it replicated, and the preferred-leader election made it leader after the last
/// transaction; `tests/transactions_follower.rs` holds that case now.)
#[test]
fn java_eos_app_survives_a_coordinator_crash_between_prepare_and_markers() {
    // Opt-in, like the long fault matrix: CI already runs the coordinator-kill scenario, and
    // its whole run is over its 30-minute budget. With the follower-marker fix it passed 3
    // runs in a row on a quiet host (60-63 s each, 2026-12-02); at load 25 one run's app did
    // only 820 of the first 1,000 records in the driver's 180 s.
    // SHARDLOG_TXN_CRASH_TEST=1 runs it.
    if std::env::var_os("SHARDLOG_TXN_CRASH_TEST").is_none() {
        eprintln!("[txn-crash] skipped: SHARDLOG_TXN_CRASH_TEST=1 runs it (see issue 17)");
        return;
    }
    let records = 4_000;
    // About half-way: each transaction carries up to 20 records.
    scenario("txn-crash", 30395, Fault::CrashAfterPrepare(records as u64 / 40), records);
}

fn scenario(tag: &str, base_port: u16, fault: Fault, records_default: usize) {
    let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".interop-cache");
    let python = cache.join("venv/bin/python3");
    let libs = cache.join("kafka-4.1.2/libs");
    if !python.exists() || !libs.exists() {
        eprintln!("[{tag}] interop clients not installed (tests/interop/install.sh): skipped");
        return;
    }
    let records: usize = std::env::var("SHARDLOG_TXN_KILL_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(records_default);
    // Preferred-leader elections every few seconds: once the killed broker is back, its
    // partitions (the coordinators among them) move back to it while the app runs, a
    // second, graceful coordinator move.
    let imbalance_s =
        std::env::var("SHARDLOG_TXN_KILL_IMBALANCE_S").unwrap_or_else(|_| "15".into());
    let mut c = Cluster::start_with(
        3,
        base_port,
        &["--leader-imbalance-check-interval-seconds", &imbalance_s],
    );
    c.wait_brokers(3, LIMIT);
    // Names whose group coordinator is on another broker than the transaction coordinator:
    // the kill then leaves the group's `__consumer_offsets` partition with a dead follower
    // in its ISR while the transaction's offsets are written there.
    let name = (0..20)
        .map(|i| format!("{KIND}{i}"))
        .find(|n| {
            coordinator(&c, &format!("cl-{n}"), 0, -1)
                != coordinator(&c, &format!("cl-{n}-txn"), 1, -1)
        })
        .expect("a group and a transactional id on different brokers");
    let (src, dst, txn_id) =
        (format!("cl-in-{name}"), format!("cl-out-{name}"), format!("cl-{name}-txn"));
    let first = txn_coordinator(&c, &txn_id, -1);
    eprintln!(
        "[{tag}] group cl-{name} on broker {}, transactional id {txn_id} on broker {first}",
        coordinator(&c, &format!("cl-{name}"), 0, -1),
    );
    c.create_rf3(&src, 3, LIMIT);
    c.create_rf3(&dst, 3, LIMIT);
    if let Fault::CrashAfterPrepare(nth) = fault {
        // Arm the coordinator's broker: restart it with the crash point and wait until the
        // preferred-leader election gives it its partitions back.
        let i = c.index_of(first);
        c.nodes[i].env = vec![("SHARDLOG_CRASH_AT".into(), format!("txn.prepare_persisted@{nth}"))];
        c.terminate(i);
        c.start_node(i);
        c.wait_brokers(3, LIMIT);
        let deadline = Instant::now() + LIMIT;
        while txn_coordinator(&c, &txn_id, -1) != first {
            assert!(Instant::now() < deadline, "broker {first} did not lead again");
            std::thread::sleep(Duration::from_millis(500));
        }
        eprintln!("[{tag}] broker {first} armed: it crashes at its prepared transaction {nth}");
    }
    let driver =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/transactions/eos_cluster.py");
    let classpath = format!("{}/*", libs.display());
    let started = Instant::now();
    let mut child = Command::new(&python)
        .arg(&driver)
        .args([&c.bootstrap(), KIND, &classpath, &records.to_string(), &name])
        .env("EOS_CLUSTER_STRICT", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start eos_cluster.py");
    let stdout = child.stdout.take().expect("stdout");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = Vec::new();
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        eprintln!("[{tag}] {line}");
        if line == "KILL" {
            let (node, down) = match fault {
                Fault::Kill => {
                    let node = txn_coordinator(&c, &txn_id, -1);
                    c.kill(c.index_of(node));
                    (node, Instant::now())
                }
                Fault::CrashAfterPrepare(_) => {
                    let i = c.index_of(first);
                    let mut broker = c.nodes[i].broker.take().expect("armed broker running");
                    let status = broker.wait_for_exit(Duration::from_secs(600));
                    assert!(common::killed_by_sigkill(&status), "broker {first}: {status:?}");
                    let point = "crash point txn.prepare_persisted reached";
                    assert!(log_shows(&broker, point, Duration::from_secs(10)), "{point}");
                    c.nodes[i].env.clear();
                    (first, Instant::now())
                }
            };
            let new_node = txn_coordinator(&c, &txn_id, node);
            eprintln!(
                "[{tag}] coordinator broker {node} down at {:?}; broker {new_node} named \
                 coordinator after {:?}",
                started.elapsed(),
                down.elapsed()
            );
            if std::env::var("SHARDLOG_TXN_KILL_NO_RESTART").is_err() {
                c.start_node(c.index_of(node));
                c.wait_brokers(3, LIMIT);
                eprintln!("[{tag}] broker {node} restarted after {:?}", down.elapsed());
            }
            let down_unix = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .saturating_sub(down.elapsed());
            writeln!(stdin, "{node} {:.3}", down_unix.as_secs_f64()).expect("answer the driver");
            stdin.flush().expect("flush");
        }
        lines.push(line);
    }
    let status = child.wait().expect("eos_cluster.py");
    assert!(status.success(), "eos_cluster.py failed: {lines:?}");
    assert!(lines.iter().any(|l| l == "eos_cluster: ok"), "{lines:?}");
    let (mut commits, mut aborts) = (0, 0);
    for (p, addr) in leaders(&c, &dst) {
        let (c, a) = markers(&addr, &dst, p);
        commits += c;
        aborts += a;
    }
    eprintln!(
        "[{tag}] {records} records exactly once in {:?}; markers on {dst}: {commits} COMMIT, \
         {aborts} ABORT",
        started.elapsed()
    );
    // Every marker arrived: no broker reports an output partition whose last stable offset
    // trails its high watermark (`shardlog_partition_lso_lag_records`).
    let series = format!("shardlog_partition_lso_lag_records{{topic=\"{dst}\"");
    let deadline = Instant::now() + LIMIT;
    loop {
        let texts: Vec<String> = c
            .running()
            .map(|(_, b)| shardlog::top::http_get(&b.admin_addr(), "/metrics").expect("scrape"))
            .collect();
        assert!(texts.iter().all(|t| t.contains("shardlog_partition_lso_lagging")));
        let lagging: Vec<&str> =
            texts.iter().flat_map(|t| t.lines()).filter(|l| l.starts_with(&series)).collect();
        if lagging.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "LSO stuck behind the high watermark: {lagging:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}
