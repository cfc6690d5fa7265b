//! Partition reassignment on four real brokers with Kafka's own tool
//! (`org.apache.kafka.tools.reassign.ReassignPartitionsCommand`, kafka-reassign-partitions.sh)
//! from the pinned Kafka 4.1.2 jars (issue 16):
//! - cancel: partition 1 of {1,2,3} is moved to {1,2,4} (AlterPartitionReassignments sent
//!   directly: the tool refuses a broker that is down) while broker 4 is down, so it stays in
//!   progress; ListPartitionReassignments (and `--verify`) show it with adding [4] and
//!   removing [3]; `--cancel` reverts it to {1,2,3};
//! - move under load: partition 0 goes from {1,2,3} to {2,3,4} (its leader, 1, leaves) with
//!   `--execute --throttle` while Kafka's `VerifiableProducer` (acks=all) runs; `--verify` is
//!   repeated until it reports completion, which also clears the throttles; then every acked
//!   record is read back at its acked offset from the new leader.
//!
//! Skipped (with a message) when Java or the Kafka jars are missing (`tests/interop/install.sh`).
//! Ports: this file's block 127.0.0.1:23000-23999 (controllers 23100-23490; Kafka ports are
//! ephemeral). Bounds are loose; figures are printed.

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::{split_batches, Wire};
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, MetadataRequest,
    MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const LIMIT: Duration = Duration::from_secs(120);
const TOPIC: &str = "moving";

fn jars() -> Option<PathBuf> {
    let libs = Path::new(env!("CARGO_MANIFEST_DIR")).join(".interop-cache/kafka-4.1.2/libs");
    let java = Command::new("java").arg("-version").output().is_ok_and(|o| o.status.success());
    (java && libs.join("kafka-tools-4.1.2.jar").exists()).then_some(libs)
}

/// Runs a Kafka tool class to completion: (exit success, stdout + stderr).
fn tool(libs: &Path, class: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new("timeout")
        .arg("120")
        .args(["java", "-Xmx256m", "-cp"])
        .arg(format!("{}/*", libs.display()))
        .arg(class)
        .args(args)
        .output()
        .expect("run java");
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

const REASSIGN: &str = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand";

fn reassign(libs: &Path, bs: &str, args: &[&str]) -> (bool, String) {
    let mut all = vec!["--bootstrap-server", bs];
    all.extend_from_slice(args);
    tool(libs, REASSIGN, &all)
}

fn metadata(w: &mut Wire) -> MetadataResponse {
    w.call(ApiKey::Metadata, 12, &MetadataRequest::default().with_topics(None))
}

/// (leader, replicas, isr) of a partition of [`TOPIC`] as node `w` sees it.
fn partition_state(w: &mut Wire, p: i32) -> Option<(i32, Vec<i32>, Vec<i32>)> {
    let m = metadata(w);
    let t = m.topics.iter().find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == TOPIC))?;
    let p = t.partitions.iter().find(|x| x.partition_index == p)?;
    let ids = |v: &[kafka_protocol::messages::BrokerId]| v.iter().map(|b| b.0).collect();
    Some((p.leader_id.0, ids(&p.replica_nodes), ids(&p.isr_nodes)))
}

fn list(w: &mut Wire, partitions: Option<Vec<i32>>) -> ListPartitionReassignmentsResponse {
    let topics = partitions.map(|ps| {
        vec![ListPartitionReassignmentsTopics::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partition_indexes(ps)]
    });
    let req =
        ListPartitionReassignmentsRequest::default().with_timeout_ms(5_000).with_topics(topics);
    w.call(ApiKey::ListPartitionReassignments, 0, &req)
}

/// A base port in this file's block whose controller ports (base + 100 × id) are free now:
/// other runs of this file (or a broker left from one) may hold them.
fn free_base() -> u16 {
    (23000..23090)
        .find(|base| {
            (1..=4u16).all(|id| std::net::TcpListener::bind(("127.0.0.1", base + 100 * id)).is_ok())
        })
        .expect("a free base port in 23000-23999")
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write json");
    path.display().to_string()
}

#[test]
fn reassign_with_kafka_tool_under_load_then_cancel() {
    let Some(libs) = jars() else {
        eprintln!("[reassign] skipped: java or Kafka jars missing (tests/interop/install.sh)");
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let base = free_base();
    let mut c = Cluster::start(3, base);
    let four = c.add_node(4, base + 400, &["--process-roles", "broker"]);
    c.start_node(four);
    c.wait_for(LIMIT, "four brokers registered", |w| {
        (metadata(w).brokers.len() == 4).then_some(())
    });
    let bs = c.bootstrap();
    let (ok, out) = tool(
        &libs,
        "org.apache.kafka.tools.TopicCommand",
        &[
            "--bootstrap-server",
            &bs,
            "--create",
            "--topic",
            TOPIC,
            "--replica-assignment",
            "1:2:3,1:2:3",
            "--config",
            "min.insync.replicas=2",
        ],
    );
    assert!(ok, "create: {out}");
    c.wait_for(LIMIT, "partitions led with a full ISR", |w| {
        let a = partition_state(w, 0)?;
        let b = partition_state(w, 1)?;
        (a.0 == 1 && a.2.len() == 3 && b.2.len() == 3).then_some(())
    });

    // --generate proposes a plan over brokers 2,3,4 (printed, not applied).
    let topics_json = write(
        work.path(),
        "topics.json",
        &format!(r#"{{"version":1,"topics":[{{"topic":"{TOPIC}"}}]}}"#),
    );
    let (ok, out) = reassign(
        &libs,
        &bs,
        &["--generate", "--topics-to-move-json-file", &topics_json, "--broker-list", "2,3,4"],
    );
    assert!(ok && out.contains("Proposed partition reassignment configuration"), "generate: {out}");

    // Cancel: broker 4 down, partition 1 to {1,2,4} stays in progress.
    c.kill(four);
    let p1 = write(
        work.path(),
        "p1.json",
        &format!(
            r#"{{"version":1,"partitions":[{{"topic":"{TOPIC}","partition":1,"replicas":[1,2,4]}}]}}"#
        ),
    );
    let bs3 = c.bootstrap();
    // The tool's --execute refuses a broker DescribeCluster does not list (a fenced one):
    // start this one with the API itself.
    let started = c.wait_for(LIMIT, "AlterPartitionReassignments p1", |w| {
        let part = ReassignablePartition::default()
            .with_partition_index(1)
            .with_replicas(Some(vec![BrokerId(1), BrokerId(2), BrokerId(4)]));
        let req =
            AlterPartitionReassignmentsRequest::default().with_timeout_ms(5_000).with_topics(vec![
                ReassignableTopic::default()
                    .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
                    .with_partitions(vec![part]),
            ]);
        let r: AlterPartitionReassignmentsResponse =
            w.call(ApiKey::AlterPartitionReassignments, 0, &req);
        (r.error_code == 0).then_some(r)
    });
    assert_eq!(started.responses[0].partitions[0].error_code, 0);
    let listed = c.wait_for(LIMIT, "p1 listed", |w| {
        let r = list(w, Some(vec![1]));
        (r.topics.len() == 1).then_some(r)
    });
    let p = &listed.topics[0].partitions[0];
    let ids = |v: &[kafka_protocol::messages::BrokerId]| v.iter().map(|b| b.0).collect::<Vec<_>>();
    assert_eq!(ids(&p.replicas), vec![1, 2, 4, 3]);
    assert_eq!((ids(&p.adding_replicas), ids(&p.removing_replicas)), (vec![4], vec![3]));
    let (_, out) = reassign(&libs, &bs3, &["--verify", "--reassignment-json-file", &p1]);
    assert!(out.contains("still in progress"), "verify p1: {out}");
    // The tool then clears every broker's throttles, which cannot reach broker 4 (down):
    // only the cancellation itself is checked here.
    let (_, out) = reassign(&libs, &bs3, &["--cancel", "--reassignment-json-file", &p1]);
    assert!(out.contains("Successfully cancelled partition reassignment"), "cancel: {out}");
    c.wait_for(LIMIT, "p1 reverted", |w| {
        let (_, replicas, _) = partition_state(w, 1)?;
        (replicas == vec![1, 2, 3] && list(w, None).topics.is_empty()).then_some(())
    });

    // Move partition 0 from {1,2,3} to {2,3,4} under an acks=all load, throttled.
    c.start_node(four);
    let bs = c.bootstrap();
    let mut producer = Command::new("java")
        .args(["-Xmx256m", "-cp"])
        .arg(format!("{}/*", libs.display()))
        .args([
            "org.apache.kafka.tools.VerifiableProducer", "--bootstrap-server", &bs, "--topic",
            TOPIC, "--acks", "-1", "--throughput", "300", "--max-messages", "200000",
            "--producer.config", &write(work.path(), "p.properties", "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner\nretries=2147483647\n"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start VerifiableProducer");
    let acked: Arc<Mutex<BTreeMap<(i32, i64), String>>> = Arc::default();
    let reader = {
        let acked = Arc::clone(&acked);
        let stdout = producer.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if !line.contains("producer_send_success") {
                    continue;
                }
                let field = |name: &str| -> Option<String> {
                    let at = line.find(&format!("\"{name}\":"))? + name.len() + 3;
                    let rest = &line[at..];
                    let end = rest.find([',', '}'])?;
                    Some(rest[..end].trim_matches('"').to_string())
                };
                if let (Some(p), Some(o), Some(v)) =
                    (field("partition"), field("offset"), field("value"))
                {
                    if let (Ok(p), Ok(o)) = (p.parse(), o.parse()) {
                        acked.lock().unwrap().insert((p, o), v);
                    }
                }
            }
        })
    };
    let deadline = Instant::now() + LIMIT;
    while acked.lock().unwrap().len() < 300 {
        assert!(Instant::now() < deadline, "producer acked too little before the move");
        std::thread::sleep(Duration::from_millis(200));
    }
    let p0 = write(
        work.path(),
        "p0.json",
        &format!(
            r#"{{"version":1,"partitions":[{{"topic":"{TOPIC}","partition":0,"replicas":[2,3,4]}}]}}"#
        ),
    );
    let started = Instant::now();
    let (ok, out) = reassign(
        &libs,
        &bs,
        &["--execute", "--reassignment-json-file", &p0, "--throttle", "50000000"],
    );
    assert!(ok, "execute p0: {out}");
    assert!(out.contains("Successfully started"), "execute p0: {out}");
    let mut verifies = 0;
    let verified = loop {
        verifies += 1;
        let (_, out) = reassign(&libs, &bs, &["--verify", "--reassignment-json-file", &p0]);
        if out.contains("is completed") && out.contains("Clearing") {
            break out;
        }
        assert!(started.elapsed() < LIMIT * 2, "reassignment did not complete: {out}");
        std::thread::sleep(Duration::from_secs(1));
    };
    let took = started.elapsed();
    assert!(verified.contains("Clearing broker-level throttles"), "{verified}");
    let state = c.wait_for(LIMIT, "p0 on {2,3,4}", |w| {
        let s = partition_state(w, 0)?;
        (s.1 == vec![2, 3, 4] && s.0 != 1 && s.0 > 0).then_some(s)
    });
    // Let the load run on the new replicas a little, then stop it.
    let before = acked.lock().unwrap().len();
    let deadline = Instant::now() + LIMIT;
    while acked.lock().unwrap().len() < before + 100 {
        assert!(Instant::now() < deadline, "no acks after the move");
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = producer.kill();
    let _ = producer.wait();
    reader.join().unwrap();

    // Every acked record of partition 0 is at its acked offset on the new leader.
    let acked = acked.lock().unwrap().clone();
    let leader = c.index_of(state.0);
    let mut w = Wire::connect(&c.broker(leader).addr);
    let mut stored: BTreeMap<i64, String> = BTreeMap::new();
    let mut offset = 0;
    let end = acked.keys().filter(|(p, _)| *p == 0).map(|(_, o)| *o + 1).max().unwrap_or(0);
    while offset < end {
        let a = w.fetch(TOPIC, 0, offset);
        assert_eq!(a.error_code, 0, "fetch from the new leader");
        let batches = split_batches(a.records);
        assert!(!batches.is_empty(), "no data at {offset} (hw {})", a.high_watermark);
        for (records, next) in batches {
            for r in records {
                stored
                    .insert(r.offset, String::from_utf8_lossy(&r.value.unwrap_or_default()).into());
            }
            offset = next;
        }
    }
    let mut checked = 0;
    for ((p, o), v) in &acked {
        if *p == 0 {
            assert_eq!(stored.get(o), Some(v), "acked record at offset {o} lost or changed");
            checked += 1;
        }
    }
    assert!(checked > 0);
    // The removed broker deleted its copy.
    let gone = c.nodes[c.index_of(1)].data_dir.join(format!("{TOPIC}-0"));
    let deadline = Instant::now() + LIMIT;
    while gone.exists() {
        assert!(Instant::now() < deadline, "broker 1 kept {}", gone.display());
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "[reassign] {TOPIC}-0 {{1,2,3}} -> {{2,3,4}}: completed in {took:?} ({verifies} --verify runs), \
         {checked} acked records of partition 0 checked, {} acked in all, new leader {}",
        acked.len(),
        state.0
    );
}
