//! Shard moves (`server::shard_move`) of replicated partitions on a three-broker cluster of
//! real processes, each broker with `--shards 2` (issue 16): under an idempotent acks=all
//! confluent-kafka load (`tests/cluster_shard_move/load.py`) on an RF3 topic with
//! `min.insync.replicas=2`, its partition moves between the shards of its leader broker
//! (followers keep fetching from the leader's new shard) and between the shards of a
//! follower broker (the follower fetcher lets go of the log on the old shard and fetches
//! from the new one), several times each. Checked: every acknowledged record is read back
//! once at its acknowledged offset; the ISR is whole again after each move; after a follower
//! move the new shard's fetcher appends (its `shardlog_replication_bytes_in`) and the
//! follower stays in the ISR past `replica.lag.time.max.ms` (so it fetches, not just
//! lingers); clients see no NOT_LEADER_OR_FOLLOWER beyond retriable ones (counted from
//! librdkafka's debug log) and no delivery error. Move times and counts are printed as
//! figures (no timed assertions). Controller ports come from this file's block,
//! 127.0.0.1:32300-32799 (base 32300: 32400, 32500, 32600).

use crate::common;

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::Wire;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const LIMIT: Duration = Duration::from_secs(90);
const TOPIC: &str = "cm";
/// Short enough that a follower whose fetcher stopped after a move leaves the ISR within
/// the test's wait, long enough for a loaded 2-core host.
const REPLICA_LAG_MS: u64 = 4000;
const ROUNDS: usize = 4;

fn shardlog(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shardlog")).args(args).output().expect("run shardlog")
}

/// (leader, ISR) of `TOPIC`-0 as Metadata reports it.
fn leader_isr(w: &mut Wire) -> Option<(i32, Vec<i32>)> {
    let req = MetadataRequest::default().with_topics(None);
    let m: MetadataResponse = w.call(ApiKey::Metadata, 12, &req);
    let t = m.topics.iter().find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == TOPIC))?;
    let p = t.partitions.iter().find(|p| p.partition_index == 0)?;
    Some((p.leader_id.0, p.isr_nodes.iter().map(|b| b.0).collect()))
}

fn create(w: &mut Wire) -> i16 {
    let topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
        .with_num_partitions(1)
        .with_replication_factor(3)
        .with_configs(vec![CreatableTopicConfig::default()
            .with_name(StrBytes::from_static_str("min.insync.replicas"))
            .with_value(Some(StrBytes::from_static_str("2")))]);
    let req = CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(10_000);
    let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 5, &req);
    resp.topics[0].error_code
}

/// Waits until `TOPIC`-0 has a leader and all three replicas in its ISR; returns the leader.
fn wait_full_isr(c: &Cluster) -> i32 {
    c.wait_for(LIMIT, "the whole ISR", |w| {
        let (leader, isr) = leader_isr(w)?;
        (leader > 0 && isr.len() == 3).then_some(leader)
    })
}

/// The shard of `TOPIC`-0 on the broker with admin endpoint `admin`.
fn shard_of(admin: &str) -> u32 {
    let out = shardlog(&["--admin", admin, "shards", "list"]);
    assert!(out.status.success(), "shards list: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.first() == Some(&TOPIC) && f.get(1) == Some(&"0")).then(|| f.get(2)?.parse().ok())?
        })
        .unwrap_or_else(|| panic!("{TOPIC}-0 not listed by {admin}"))
}

fn scrape(admin: &str) -> String {
    let mut s = std::net::TcpStream::connect(admin).expect("admin");
    write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out
}

/// The value of the series `name` (with `labels`, e.g. `shard="1"`, or none) summed over
/// matching lines; counters may carry `_total`.
fn metric(admin: &str, name: &str, labels: &str) -> u64 {
    scrape(admin)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, v) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            let named = n == name || n == format!("{name}_total");
            (named && rest.contains(labels)).then(|| v.trim().parse::<f64>().ok())?
        })
        .sum::<f64>() as u64
}

/// One move by the CLI: (shard before, shard after, the broker's own move time in ms).
fn move_once(admin: &str) -> (u32, u32, u64) {
    let from = shard_of(admin);
    let to = 1 - from;
    let out = shardlog(&[
        "--admin",
        admin,
        "shards",
        "move",
        &format!("{TOPIC}-0"),
        "--to-shard",
        &to.to_string(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "move on {admin}: {}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(&format!("moved {TOPIC}-0")), "{text}");
    assert_eq!(shard_of(admin), to, "the move took effect");
    let ms = text.rsplit(" in ").next().and_then(|t| t.trim().trim_end_matches(" ms").parse().ok());
    (from, to, ms.unwrap_or(0))
}

/// The load process, killed if the test fails before it ends.
struct Load(Option<std::process::Child>);

impl Drop for Load {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Open client connections per shard, from the admin endpoint's `/v1/shards` view.
fn connections_per_shard(admin: &str) -> Vec<(u64, i64)> {
    let mut s = std::net::TcpStream::connect(admin).expect("admin");
    write!(s, "GET /v1/shards HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let view: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    fn walk(v: &serde_json::Value, out: &mut Vec<(u64, i64)>) {
        match v {
            serde_json::Value::Object(m) => {
                if let (Some(shard), Some(n)) = (m.get("shard"), m.get("connections")) {
                    if let (Some(shard), Some(n)) = (shard.as_u64(), n.as_i64()) {
                        out.push((shard, n));
                        return;
                    }
                }
                m.values().for_each(|v| walk(v, out));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    walk(&view, &mut found);
    found
}

/// On a failure: what each broker's replication and the partition's offsets look like.
fn diagnose(c: &Cluster) {
    for (_, b) in c.running() {
        let admin = b.admin_addr();
        let lines: Vec<String> = scrape(&admin)
            .lines()
            .filter(|l| {
                !l.starts_with('#')
                    && (l.contains("replication_") || l.contains("isr_") || l.contains("moves"))
            })
            .map(str::to_string)
            .collect();
        eprintln!("[diagnose] {} metrics: {lines:?}", b.addr);
        let mut w = Wire::connect(&b.addr);
        let a = w.fetch(TOPIC, 0, 0);
        eprintln!(
            "[diagnose] {} fetch {TOPIC}-0: error {} hw {}",
            b.addr, a.error_code, a.high_watermark
        );
    }
}

#[test]
fn replicated_partition_moves_between_shards_on_leader_and_follower_under_acks_all_load() {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".interop-cache/venv/bin/python");
    if !python.exists() {
        eprintln!("[skip] no interop venv (tests/interop/install.sh): nothing checked");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("shardlog.toml");
    std::fs::write(
        &file,
        format!(
            "\"replica.lag.time.max.ms\" = {REPLICA_LAG_MS}\n\
             \"offsets.topic.num.partitions\" = 3\n\
             \"auto.leader.rebalance.enable\" = false\n"
        ),
    )
    .expect("write config");
    let file_arg = file.to_str().expect("utf-8 path").to_string();
    // Two shards each, placed by default on cores 0 and 1 (the harness pins only when
    // neither --shards nor --cpus is given).
    let c = Cluster::start_with(
        3,
        32300,
        &["--shards", "2", "--shard-balance-enable", "false", "--config", &file_arg],
    );
    c.wait_for(LIMIT, "CreateTopics", |w| matches!(create(w), 0 | 36).then_some(()));
    let leader = wait_full_isr(&c);
    eprintln!("[setup] {TOPIC}-0 led by node {leader}");

    let stop = dir.path().join("stop");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cluster_shard_move/load.py");
    let mut load = Load(Some(
        Command::new(&python)
            .arg(&script)
            .args([&c.bootstrap(), TOPIC, "1"])
            .arg(&stop)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the load"),
    ));
    std::thread::sleep(Duration::from_secs(4));

    let admin_of = |id: i32| c.broker(c.index_of(id)).admin_addr();
    let shrinks_before: u64 =
        (1..=3).map(|id| metric(&admin_of(id), "shardlog_isr_shrinks", "")).sum();
    let mut leader_moves = Vec::new();
    let mut follower_moves = Vec::new();
    let mut isr_back_ms = Vec::new();
    let mut isr_after_lag = Vec::new();
    let mut fetching_ms = Vec::new();
    for round in 0..ROUNDS {
        // (a) On the leader broker: followers keep fetching, now from the new shard.
        let leader = wait_full_isr(&c);
        let started = Instant::now();
        let (from, to, ms) = move_once(&admin_of(leader));
        leader_moves.push(ms);
        eprintln!("[move] round {round}: leader {leader} shard {from} -> {to} in {ms} ms");
        wait_full_isr(&c);
        isr_back_ms.push(started.elapsed().as_millis());

        // (b) On a follower broker: its fetcher moves with the partition.
        let leader = wait_full_isr(&c);
        let followers: Vec<i32> = [1, 2, 3].into_iter().filter(|n| *n != leader).collect();
        let follower = followers[round % followers.len()];
        let fadmin = admin_of(follower);
        let started = Instant::now();
        let (from, to, ms) = move_once(&fadmin);
        follower_moves.push(ms);
        eprintln!("[move] round {round}: follower {follower} shard {from} -> {to} in {ms} ms");
        // The new shard's fetcher appends (replication metrics publish every few seconds).
        let label = format!("shard=\"{to}\"");
        let base = metric(&fadmin, "shardlog_replication_bytes_in", &label);
        let deadline = Instant::now() + LIMIT;
        while metric(&fadmin, "shardlog_replication_bytes_in", &label) <= base {
            if Instant::now() >= deadline {
                diagnose(&c);
                panic!("follower {follower}'s shard {to} never fetched");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        fetching_ms.push(started.elapsed().as_millis());
        // Past replica.lag.time.max.ms the follower is still in the ISR: it kept up.
        std::thread::sleep(Duration::from_millis(REPLICA_LAG_MS + 1000));
        let (_, isr) = c.wait_for(LIMIT, "metadata", leader_isr);
        eprintln!(
            "[isr] round {round}: {} ms after the follower move: {isr:?}",
            started.elapsed().as_millis()
        );
        assert_eq!(wait_full_isr(&c), leader, "the leader stays");
        isr_after_lag.push(isr.len());
    }
    std::thread::sleep(Duration::from_secs(2));
    std::fs::write(&stop, b"").expect("stop file");
    let out = load.0.take().expect("load").wait_with_output().expect("load output");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!("[load] {text}");
    let shrinks_after: u64 =
        (1..=3).map(|id| metric(&admin_of(id), "shardlog_isr_shrinks", "")).sum();
    let moves: u64 =
        (1..=3).map(|id| metric(&admin_of(id), "shardlog_shard_moves_manual", "")).sum();
    eprintln!("[figure] leader-broker move times (broker-reported) ms: {leader_moves:?}");
    eprintln!("[figure] follower-broker move times (broker-reported) ms: {follower_moves:?}");
    eprintln!("[figure] move start to the new shard's first replicated bytes ms: {fetching_ms:?}");
    eprintln!("[figure] leader move start to the whole ISR seen again ms: {isr_back_ms:?}");
    eprintln!(
        "[figure] ISR size {REPLICA_LAG_MS} + 1000 ms after each follower move: {isr_after_lag:?}"
    );
    eprintln!("[figure] ISR shrinks during the moves: {}", shrinks_after - shrinks_before);
    let report: serde_json::Value = serde_json::from_str(text.trim()).expect("load JSON");
    eprintln!(
        "[figure] acked {}, read back {}, lost {}, duplicates {}, broker answers seen {}, ack latency {}",
        report["acked"], report["read_back"], report["lost"], report["duplicates"],
        report["broker_answers"], report["ack_latency_ms"]
    );
    assert_eq!(moves, 2 * ROUNDS as u64, "every move counted once");
    assert!(report["acked"].as_u64().unwrap_or(0) > 100, "the producer made progress: {report}");
    assert_eq!(report["unflushed"], 0, "every record acknowledged: {report}");
    assert_eq!(report["acked"], report["sent"], "no record failed: {report}");
    assert_eq!(report["lost"], 0, "no acknowledged record lost: {report}");
    assert_eq!(report["duplicates"], 0, "no record written twice: {report}");
    assert_eq!(report["error_count"], 0, "no client error: {}", report["errors"]);
}

/// Shard moves with three shards keep each connection's order (`server::shard_move`'s
/// barrier: before the source unparks, every other shard has flushed its channel to it, so
/// a request a connection on a third shard sent to the source cannot be overtaken by its
/// next one). Several idempotent producers (their connections spread over the broker's
/// three shards) while one partition moves round the shards, so each shard is in turn the
/// third: OUT_OF_ORDER_SEQUENCE_NUMBER and NOT_LEADER_OR_FOLLOWER answers are counted from
/// librdkafka's log, and no acknowledged record may be lost or written twice, and no
/// delivery may fail.
#[test]
fn moves_round_three_shards_under_several_idempotent_producers() {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".interop-cache/venv/bin/python");
    if !python.exists() {
        eprintln!("[skip] no interop venv (tests/interop/install.sh): nothing checked");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = common::Broker::start_with(
        dir.path(),
        &["--shards", "3", "--shard-balance-enable", "false", "--spin-before-park-us", "0"],
    );
    let admin = broker.admin_addr();
    Wire::connect(&broker.addr).create_topic(TOPIC, 1, &[]);
    let stop = dir.path().join("stop");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cluster_shard_move/load.py");
    let mut load = Load(Some(
        Command::new(&python)
            .arg(&script)
            .args([broker.addr.as_str(), TOPIC, "1"])
            .arg(&stop)
            .arg("6")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the load"),
    ));
    std::thread::sleep(Duration::from_secs(3));
    let connections = connections_per_shard(&admin);
    eprintln!("[figure] client connections per shard under the load: {connections:?}");
    let mut times_ms = Vec::new();
    for round in 0..9 {
        let from = shard_of(&admin);
        let to = (from + 1) % 3;
        let out = shardlog(&[
            "--admin",
            &admin,
            "shards",
            "move",
            &format!("{TOPIC}-0"),
            "--to-shard",
            &to.to_string(),
        ]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "move {round}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(shard_of(&admin), to, "move {round} took effect");
        times_ms.push(text.rsplit(" in ").next().unwrap_or("").trim().to_string());
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_secs(1));
    std::fs::write(&stop, b"").expect("stop file");
    let out = load.0.take().expect("load").wait_with_output().expect("load output");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!("[load] {text}");
    eprintln!("[figure] three-shard move times: {times_ms:?}");
    let report: serde_json::Value = serde_json::from_str(text.trim()).expect("load JSON");
    eprintln!(
        "[figure] 6 producers: acked {}, lost {}, duplicates {}, broker answers seen {}",
        report["acked"], report["lost"], report["duplicates"], report["broker_answers"]
    );
    assert!(report["acked"].as_u64().unwrap_or(0) > 100, "the producers made progress: {report}");
    assert_eq!(report["unflushed"], 0, "every record acknowledged: {report}");
    assert_eq!(report["acked"], report["sent"], "no record failed: {report}");
    assert_eq!(report["lost"], 0, "no acknowledged record lost: {report}");
    assert_eq!(report["duplicates"], 0, "no record written twice: {report}");
    assert_eq!(report["error_count"], 0, "no client error: {}", report["errors"]);
    assert_eq!(report["broker_answers"]["out_of_order_sequence"], 0, "order kept: {report}");
    assert_eq!(report["broker_answers"]["not_leader"], 0, "a local move: {report}");
}
