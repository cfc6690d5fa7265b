//! Leadership operations on a three-node cluster of real processes (issue 16): a restarted
//! broker's leaderships come back through Kafka's `LeaderElectionCommand` (preferred, by
//! `--topic/--partition`, `--path-to-json-file` and `--all-topic-partitions`) and, with
//! `leader.imbalance.check.interval.seconds=2`, by the automatic rebalance; and SIGTERM under
//! an acks=all idempotent load (confluent-kafka, `tests/cluster/acks_all_load.py`) is a
//! controlled shutdown: no acknowledged record lost, only retriable client errors.
//! Figures are printed, not asserted (loose bounds only). The Java and Python parts are
//! skipped, said on stderr, when `.interop-cache` lacks Kafka's jars or the venv
//! (`tests/interop/install.sh`). Controller ports come from this file's block,
//! 127.0.0.1:22000-22999.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::Wire;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, ElectLeadersRequest, ElectLeadersResponse,
    MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const LIMIT: Duration = Duration::from_secs(90);
const PARTITIONS: i32 = 3;
/// Three-node clusters one at a time: this machine has two cores.
static SERIAL: Mutex<()> = Mutex::new(());

/// One partition as Metadata reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Part {
    index: i32,
    leader: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
}

fn metadata(w: &mut Wire) -> MetadataResponse {
    w.call(ApiKey::Metadata, 12, &MetadataRequest::default().with_topics(None))
}

fn parts(w: &mut Wire, topic: &str) -> Option<Vec<Part>> {
    let m = metadata(w);
    let t = m.topics.iter().find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))?;
    let mut out: Vec<Part> = t
        .partitions
        .iter()
        .map(|p| Part {
            index: p.partition_index,
            leader: p.leader_id.0,
            replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
            isr: p.isr_nodes.iter().map(|b| b.0).collect(),
        })
        .collect();
    out.sort_by_key(|p| p.index);
    Some(out)
}

fn create(w: &mut Wire, name: &str) {
    let topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(name.to_string())))
        .with_num_partitions(PARTITIONS)
        .with_replication_factor(3)
        .with_configs(vec![CreatableTopicConfig::default()
            .with_name(StrBytes::from_static_str("min.insync.replicas"))
            .with_value(Some(StrBytes::from_static_str("2")))]);
    let req = CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(10_000);
    let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 5, &req);
    assert_eq!(resp.topics[0].error_code, 0, "{:?}", resp.topics[0].error_message);
}

/// Waits until every partition of `topic` has its whole assignment in the ISR.
fn wait_full_isr(c: &Cluster, topic: &str) -> Vec<Part> {
    c.wait_for(LIMIT, "every replica in the ISR", |w| {
        let ps = parts(w, topic)?;
        (ps.len() == PARTITIONS as usize && ps.iter().all(|p| p.isr.len() == 3 && p.leader > 0))
            .then_some(ps)
    })
}

fn controller(c: &Cluster) -> i32 {
    c.wait_for(LIMIT, "an active controller", |w| {
        let id = metadata(w).controller_id.0;
        (id > 0).then_some(id)
    })
}

/// A node that is not the active controller and is the preferred leader of a partition.
fn victim(c: &Cluster, ps: &[Part]) -> usize {
    let ctl = controller(c);
    let id = ps.iter().map(|p| p.replicas[0]).find(|r| *r != ctl).expect("a preferred leader");
    c.index_of(id)
}

/// Kafka's jars, if installed.
fn kafka_libs() -> Option<PathBuf> {
    let libs = Path::new(env!("CARGO_MANIFEST_DIR")).join(".interop-cache/kafka-4.1.2/libs");
    libs.join("kafka-tools-4.1.2.jar").exists().then_some(libs)
}

/// Runs `LeaderElectionCommand` with `args`; (exit success, stdout + stderr).
fn election_tool(libs: &Path, bootstrap: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new("java")
        .args(["-Xmx256m", "-cp"])
        .arg(format!("{}/*", libs.display()))
        .arg("org.apache.kafka.tools.LeaderElectionCommand")
        .args(["--bootstrap-server", bootstrap])
        .args(args)
        .output()
        .expect("run java");
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("[LeaderElectionCommand {args:?}] {text}");
    (out.status.success(), text)
}

/// Runs `shardlog elect-leaders --election-type preferred` with `args` against the first
/// node of `bootstrap`; (exit success, stdout + stderr).
fn shardlog_elect(bootstrap: &str, args: &[&str]) -> (bool, String) {
    let first = bootstrap.split(',').next().expect("a node");
    let out = Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .args(["elect-leaders", "--bootstrap-server", first, "--election-type", "preferred"])
        .args(args)
        .output()
        .expect("run shardlog elect-leaders");
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("[shardlog elect-leaders {args:?}] {text}");
    (out.status.success(), text)
}

/// ElectLeaders v2 on the wire: (partition, error code) for the named topic partitions.
fn elect(w: &mut Wire, kind: i8, topic: &str, partitions: Vec<i32>) -> Vec<(i32, i16)> {
    let req = ElectLeadersRequest::default()
        .with_election_type(kind)
        .with_timeout_ms(10_000)
        .with_topic_partitions(Some(vec![TopicPartitions::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(partitions)]));
    let resp: ElectLeadersResponse = w.call(ApiKey::ElectLeaders, 2, &req);
    assert_eq!(resp.error_code, 0);
    resp.replica_election_results
        .iter()
        .flat_map(|t| t.partition_result.iter().map(|p| (p.partition_id, p.error_code)))
        .collect()
}

/// SIGTERM node `i` (a controlled shutdown), wait for its exit; the time it took.
fn terminate(c: &mut Cluster, i: usize) -> Duration {
    let started = Instant::now();
    let mut b = c.nodes[i].broker.take().expect("running");
    let status = b.terminate();
    let took = started.elapsed();
    assert!(status.success(), "clean exit after SIGTERM: {status:?}");
    assert!(
        b.log_contains("controlled shutdown approved"),
        "the controller approved the controlled shutdown"
    );
    took
}

/// Restarts the victim and waits until it is back in every ISR; its leaderships stay moved.
fn restart_and_catch_up(c: &mut Cluster, i: usize, topic: &str) {
    let id = c.nodes[i].id;
    c.wait_for(LIMIT, "leaderships moved off the stopped broker", |w| {
        let ps = parts(w, topic)?;
        ps.iter().all(|p| p.leader != id && p.leader > 0).then_some(())
    });
    start_again(c, i);
    wait_full_isr(c, topic);
}

/// Restarts node `i`, once more if its controller port was taken meanwhile (the block lies
/// in the kernel's ephemeral range: a peer's reconnect to the stopped node can land on it).
fn start_again(c: &mut Cluster, i: usize) {
    for attempt in 1..=3 {
        let started =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.start_node(i))).is_ok();
        if started {
            return;
        }
        eprintln!("[harness] node {} did not start (attempt {attempt}); again", c.nodes[i].id);
        std::thread::sleep(Duration::from_secs(2));
    }
    panic!("node {} did not restart", c.nodes[i].id);
}

fn all_preferred(ps: &[Part]) -> bool {
    ps.iter().all(|p| p.leader == p.replicas[0])
}

#[test]
fn preferred_leaders_return_by_tool_and_automatically() {
    let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // Default check interval (300 s): only the tool moves leaderships back here.
    let mut c = Cluster::start(3, 22000);
    create(&mut Wire::connect(&c.broker(0).addr), "lead");
    let ps = wait_full_isr(&c, "lead");
    assert!(all_preferred(&ps), "new partitions start on their preferred replica: {ps:?}");
    let v = victim(&c, &ps);
    let id = c.nodes[v].id;
    let mine: Vec<i32> = ps.iter().filter(|p| p.replicas[0] == id).map(|p| p.index).collect();
    let took = terminate(&mut c, v);
    eprintln!("[figure] controlled shutdown of broker {id} (idle): {took:?}");
    restart_and_catch_up(&mut c, v, "lead");
    let ps = c.wait_for(LIMIT, "metadata", |w| parts(w, "lead"));
    assert!(!all_preferred(&ps), "no automatic rebalance within 300 s: {ps:?}");

    let first = mine[0];
    if let Some(libs) = kafka_libs() {
        let bootstrap = c.bootstrap();
        let p = first.to_string();
        let by_partition = ["--election-type", "preferred", "--topic", "lead", "--partition", &p];
        let (ok, out) = election_tool(&libs, &bootstrap, &by_partition);
        assert!(ok, "{out}");
        assert!(out.contains("Successfully completed leader election (PREFERRED)"), "{out}");
        assert!(out.contains(&format!("lead-{first}")), "{out}");
        let (ok, out) = election_tool(&libs, &bootstrap, &by_partition);
        assert!(ok, "{out}");
        assert!(out.contains("Valid replica already elected for partitions lead-"), "{out}");
        let dir = tempfile::tempdir().expect("tempdir");
        let json = dir.path().join("partitions.json");
        std::fs::write(
            &json,
            format!(r#"{{"partitions":[{{"topic":"lead","partition":{first}}}]}}"#),
        )
        .expect("write json");
        let json = json.to_str().expect("utf-8").to_string();
        let (ok, out) = election_tool(
            &libs,
            &bootstrap,
            &["--election-type", "preferred", "--path-to-json-file", &json],
        );
        assert!(ok && out.contains("Valid replica already elected"), "{out}");
        // Out of the ISR again, then every partition at once.
        terminate(&mut c, v);
        restart_and_catch_up(&mut c, v, "lead");
        let (ok, out) = election_tool(
            &libs,
            &c.bootstrap(),
            &["--election-type", "preferred", "--all-topic-partitions"],
        );
        assert!(ok && out.contains("Successfully completed leader election (PREFERRED)"), "{out}");
    } else {
        eprintln!("[skip] Kafka jars not installed: `shardlog elect-leaders` only");
        let p = first.to_string();
        let (ok, out) = shardlog_elect(&c.bootstrap(), &["--topic", "lead", "--partition", &p]);
        assert!(ok && out.contains("Successfully completed leader election (PREFERRED)"), "{out}");
    }
    let ps = c.wait_for(LIMIT, "preferred leaders back", |w| {
        let ps = parts(w, "lead")?;
        all_preferred(&ps).then_some(ps)
    });
    // On the wire: ELECTION_NOT_NEEDED (84) now, for preferred and unclean alike.
    let mut w = Wire::connect(&c.broker(0).addr);
    assert_eq!(elect(&mut w, 0, "lead", vec![first]), vec![(first, 84)]);
    assert_eq!(elect(&mut w, 1, "lead", vec![first]), vec![(first, 84)]);
    assert_eq!(elect(&mut w, 0, "lead", vec![99]), vec![(99, 3)]);
    drop(ps);
    // `shardlog elect-leaders`, the same report as Kafka's tool.
    let p = first.to_string();
    let (ok, out) = shardlog_elect(&c.bootstrap(), &["--topic", "lead", "--partition", &p]);
    assert!(ok, "{out}");
    assert_eq!(out.trim(), format!("Valid replica already elected for partitions lead-{first}"));
    let (ok, out) = shardlog_elect(&c.bootstrap(), &["--all-topic-partitions"]);
    assert!(ok && out.trim().is_empty(), "{out}");
    drop(c);

    // Automatic: a 2 s check interval brings the leaderships back without a request.
    let mut c = Cluster::start_with(3, 22050, &["--leader-imbalance-check-interval-seconds", "2"]);
    create(&mut Wire::connect(&c.broker(0).addr), "auto");
    let ps = wait_full_isr(&c, "auto");
    let v = victim(&c, &ps);
    terminate(&mut c, v);
    restart_and_catch_up(&mut c, v, "auto");
    let back = Instant::now();
    c.wait_for(LIMIT, "automatic rebalance", |w| {
        let ps = parts(w, "auto")?;
        all_preferred(&ps).then_some(())
    });
    eprintln!("[figure] automatic rebalance (interval 2 s) after catch-up: {:?}", back.elapsed());
}

#[test]
fn sigterm_under_acks_all_load_loses_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".interop-cache/venv/bin/python3");
    if !python.exists() {
        eprintln!("[skip] no interop venv (tests/interop/install.sh): no confluent-kafka load");
        return;
    }
    let mut c = Cluster::start(3, 22020);
    create(&mut Wire::connect(&c.broker(0).addr), "cs");
    let ps = wait_full_isr(&c, "cs");
    let v = victim(&c, &ps);
    let dir = tempfile::tempdir().expect("tempdir");
    let stop = dir.path().join("stop");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cluster/acks_all_load.py");
    let load = Command::new(&python)
        .arg(&script)
        .args([&c.bootstrap(), "cs", &PARTITIONS.to_string()])
        .arg(&stop)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the load");
    std::thread::sleep(Duration::from_secs(4));
    let sigterm_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let took = terminate(&mut c, v);
    eprintln!("[figure] controlled shutdown under load: {took:?} (SIGTERM at {sigterm_unix_s:.3})");
    std::thread::sleep(Duration::from_secs(3));
    start_again(&mut c, v);
    wait_full_isr(&c, "cs");
    std::thread::sleep(Duration::from_secs(2));
    std::fs::write(&stop, b"").expect("stop file");
    let out = load.wait_with_output().expect("load output");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!("[load] {text}");
    let report: serde_json::Value = serde_json::from_str(text.trim()).expect("load JSON");
    assert!(report["acked"].as_u64().unwrap_or(0) > 100, "{report}");
    assert_eq!(report["lost"], 0, "acknowledged records lost: {report}");
    assert_eq!(report["unflushed"], 0, "{report}");
    let errors = report["delivery_errors"].as_array().cloned().unwrap_or_default();
    assert!(errors.is_empty(), "delivery failures: {report}");
    let fatal: Vec<_> = report["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["fatal"] == true)
        .collect();
    assert!(fatal.is_empty(), "fatal client errors: {report}");
    eprintln!(
        "[figure] acked {} records, longest gap between acks {} ms, {} duplicates",
        report["acked"], report["max_ack_gap_ms"], report["duplicates"]
    );
}
