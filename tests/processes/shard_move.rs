//! Moving partitions between the shards of one broker (`server::shard_move`), on a real
//! broker with `--shards 2`:
//! - under a continuous idempotent acks=all load (librdkafka through confluent-kafka from
//!   the interop venv, `tests/shard_move/load.py`) and a continuous consumer, a partition
//!   moves back and forth with `shardlog shards move`: no record lost or duplicated, no
//!   error of either client;
//! - coordinator partitions, unknown partitions and missing shards are refused clearly;
//! - SIGKILL at each crash point of a move recovers to exactly one owner with every
//!   acknowledged record;
//! - the automatic balancer moves a hot partition off the hot shard.
//!
//! No timed assertions: durations are printed as figures.

use crate::common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{killed_by_sigkill, Broker, Wire};

/// The interop venv's Python (with confluent-kafka), if installed.
fn python() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(".interop-cache/venv/bin/python");
    p.exists().then_some(p)
}

fn shardlog(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shardlog")).args(args).output().expect("run shardlog")
}

/// `shardlog shards list` parsed: (topic, partition) → shard.
fn placement(admin: &str) -> Vec<(String, i32, u32, u64)> {
    let out = shardlog(&["--admin", admin, "shards", "list"]);
    assert!(out.status.success(), "shards list: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((
                f.first()?.to_string(),
                f.get(1)?.parse().ok()?,
                f.get(2)?.parse().ok()?,
                f.get(4)?.parse().ok()?,
            ))
        })
        .collect()
}

fn shard_of(admin: &str, topic: &str, partition: i32) -> u32 {
    placement(admin)
        .into_iter()
        .find(|(t, p, _, _)| t == topic && *p == partition)
        .map(|(_, _, s, _)| s)
        .unwrap_or_else(|| panic!("{topic}-{partition} not listed"))
}

fn http_post(admin: &str, path: &str) -> std::io::Result<String> {
    let mut s = std::net::TcpStream::connect(admin)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    write!(s, "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

fn metric(admin: &str, name: &str) -> u64 {
    let mut s = std::net::TcpStream::connect(admin).expect("admin");
    write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out.lines()
        .find_map(|l| {
            let (n, v) = l.split_once(' ')?;
            (n == name || n == format!("{name}_total")).then(|| v.trim().parse::<f64>().ok())?
        })
        .unwrap_or(0.0) as u64
}

#[test]
fn partition_moves_back_and_forth_under_idempotent_load() {
    let Some(py) = python() else {
        eprintln!("SKIP: no interop venv (tests/interop/install.sh); nothing checked");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let broker =
        Broker::start_with(dir.path(), &["--shards", "2", "--shard-balance-enable", "false"]);
    let admin = broker.admin_addr();
    Wire::connect(&broker.addr).create_topic("mv", 2, &[]);
    let stop = dir.path().join("stop");
    let load = Command::new(&py)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/shard_move/load.py"))
        .args([broker.addr.as_str(), "mv", "2"])
        .arg(&stop)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the load");
    std::thread::sleep(Duration::from_secs(2));
    let mut durations_ms = Vec::new();
    for round in 0..6 {
        let from = shard_of(&admin, "mv", 0);
        let to = 1 - from;
        let started = Instant::now();
        let out =
            shardlog(&["--admin", &admin, "shards", "move", "mv-0", "--to-shard", &to.to_string()]);
        durations_ms.push(started.elapsed().as_millis());
        assert!(out.status.success(), "move {round}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains("moved mv-0"));
        assert_eq!(shard_of(&admin, "mv", 0), to, "move {round} took effect");
        std::thread::sleep(Duration::from_millis(700));
    }
    std::fs::write(&stop, b"").expect("stop file");
    let out = load.wait_with_output().expect("load finished");
    let report = String::from_utf8_lossy(&out.stdout);
    eprintln!("move durations (CLI round trip) ms: {durations_ms:?}");
    eprintln!("load report: {report}");
    let v: serde_json::Value = serde_json::from_str(report.trim()).expect("load report JSON");
    assert!(v["acked"].as_u64().unwrap_or(0) > 0, "the producer made progress");
    assert_eq!(v["unflushed"], 0, "every record acknowledged");
    assert_eq!(v["acked"], v["sent"], "no record failed");
    assert_eq!(v["missing"], 0, "no acknowledged record lost");
    assert_eq!(v["duplicates"], 0, "no record written twice");
    assert_eq!(v["error_count"], 0, "no client error at all: {}", v["errors"]);
    assert_eq!(metric(&admin, "shardlog_shard_moves_manual"), 6);
    assert_eq!(metric(&admin, "shardlog_shard_moves_in_progress"), 0);
}

#[test]
fn coordinator_partitions_unknown_partitions_and_missing_shards_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start_with(dir.path(), &["--shards", "2"]);
    let admin = broker.admin_addr();
    Wire::connect(&broker.addr).create_topic("r", 1, &[]);
    let refused = |partition: &str, to: &str| {
        let out = shardlog(&["--admin", &admin, "shards", "move", partition, "--to-shard", to]);
        assert!(!out.status.success(), "{partition} → {to} must be refused");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    assert!(refused("__consumer_offsets-0", "1").contains("coordinator partition"));
    assert!(refused("__transaction_state-3", "0").contains("coordinator partition"));
    assert!(refused("nope-0", "1").contains("unknown topic or partition"));
    assert!(refused("r-0", "2").contains("does not exist"));
    let here = shard_of(&admin, "r", 0);
    let out =
        shardlog(&["--admin", &admin, "shards", "move", "r-0", "--to-shard", &here.to_string()]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("already on shard"));
}

/// Produces `count` single-record batches (acks=all) to `topic`/0 and returns how many
/// were acknowledged.
fn produce(addr: &str, topic: &str, count: usize, tag: &str) -> usize {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    rt.block_on(async {
        let client = rskafka::client::ClientBuilder::new(vec![addr.to_string()])
            .build()
            .await
            .expect("client");
        let pc = client
            .partition_client(topic, 0, rskafka::client::partition::UnknownTopicHandling::Retry)
            .await
            .expect("partition client");
        let mut acked = 0;
        for i in 0..count {
            let r = common::record(&format!("{tag}-{i}"));
            if pc
                .produce(vec![r], rskafka::client::partition::Compression::NoCompression)
                .await
                .is_ok()
            {
                acked += 1;
            }
        }
        acked
    })
}

#[test]
fn crash_mid_move_recovers_to_one_owner() {
    for (point, moved) in [
        ("shard_move.source_closed", false),
        ("shard_move.assignment_saved", true),
        ("shard_move.target_opened", true),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut broker = Broker::start_env(
            dir.path(),
            &["--shards", "2", "--shard-balance-enable", "false"],
            &[("SHARDLOG_CRASH_AT", point)],
        );
        let admin = broker.admin_addr();
        Wire::connect(&broker.addr).create_topic("c", 1, &[]);
        assert_eq!(produce(&broker.addr, "c", 50, "before"), 50);
        let from = shard_of(&admin, "c", 0);
        let to = 1 - from;
        // The broker kills itself during the move: the answer never comes.
        let _ = http_post(&admin, &format!("/v1/shards/move?partition=c-0&to={to}"));
        let status = broker.wait_for_exit(Duration::from_secs(60));
        assert!(killed_by_sigkill(&status), "{point}: died by its crash point ({status:?})");
        assert!(broker.log_contains(&format!("crash point {point} reached")));
        drop(broker);
        let broker =
            Broker::start_with(dir.path(), &["--shards", "2", "--shard-balance-enable", "false"]);
        let admin = broker.admin_addr();
        let owner = shard_of(&admin, "c", 0);
        assert_eq!(owner, if moved { to } else { from }, "{point}: one owner, the recorded one");
        let mut w = Wire::connect(&broker.addr);
        let answer = w.fetch("c", 0, 0);
        assert_eq!(answer.error_code, 0, "{point}: readable after restart");
        assert_eq!(answer.high_watermark, 50, "{point}: every acknowledged record is there");
        assert_eq!(produce(&broker.addr, "c", 10, "after"), 10, "{point}: writable");
        assert_eq!(w.fetch("c", 0, 0).high_watermark, 60);
        // And it moves again from where it is.
        let out = shardlog(&[
            "--admin",
            &admin,
            "shards",
            "move",
            "c-0",
            "--to-shard",
            &(1 - owner).to_string(),
        ]);
        assert!(out.status.success(), "{point}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(w.fetch("c", 0, 0).high_watermark, 60);
    }
}

#[test]
fn balancer_moves_a_hot_partition_off_the_hot_shard() {
    let Some(py) = python() else {
        eprintln!("SKIP: no interop venv (tests/interop/install.sh); nothing checked");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start_with(
        dir.path(),
        &[
            "--shards",
            "2",
            "--shard-balance-interval-ms",
            "2000",
            "--shard-balance-margin-percent",
            "20",
        ],
    );
    let admin = broker.admin_addr();
    Wire::connect(&broker.addr).create_topic("hot", 4, &[]);
    // The two partitions of one shard get all the load.
    let on0: Vec<i32> = placement(&admin)
        .into_iter()
        .filter(|(t, _, s, _)| t == "hot" && *s == 0)
        .map(|(_, p, _, _)| p)
        .collect();
    assert_eq!(on0.len(), 2, "least-loaded placement: two partitions per shard");
    let stop = dir.path().join("stop");
    let script = format!(
        r#"
import os, sys
from confluent_kafka import Producer
p = Producer({{"bootstrap.servers": sys.argv[1], "linger.ms": 5, "acks": 1}})
value = b"x" * 2000
n = 0
while not os.path.exists(sys.argv[2]):
    try:
        p.produce("hot", value=value, partition=[{a}, {b}][n % 2])
        n += 1
    except BufferError:
        p.poll(0.05)
    p.poll(0)
p.flush(30)
print(n)
"#,
        a = on0[0],
        b = on0[1]
    );
    let load = Command::new(&py)
        .args(["-c", &script, broker.addr.as_str()])
        .arg(&stop)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the load");
    let started = Instant::now();
    let deadline = started + Duration::from_secs(90);
    let mut moved = None;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        let now: Vec<u32> = on0.iter().map(|p| shard_of(&admin, "hot", *p)).collect();
        if now.contains(&1) {
            moved = Some(now);
            break;
        }
    }
    std::fs::write(&stop, b"").expect("stop");
    let out = load.wait_with_output().expect("load");
    eprintln!(
        "balancer moved after {:.1} s; records sent {}",
        started.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stdout).trim()
    );
    let now = moved.expect("the balancer moved one hot partition to shard 1");
    assert_eq!(now.iter().filter(|s| **s == 1).count(), 1, "one of the two, not both: {now:?}");
    // The move is counted once it returns, after the last shard got the new image (which
    // the placement above may already show): wait for it (bounded).
    let counted = Instant::now() + Duration::from_secs(10);
    while metric(&admin, "shardlog_shard_moves_auto") == 0 && Instant::now() < counted {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(metric(&admin, "shardlog_shard_moves_auto") >= 1);
}
