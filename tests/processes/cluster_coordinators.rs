//! Group coordinators move with leadership (issue 15, "internal topics replicate too") on
//! three real broker processes: `__consumer_offsets` is created with replication factor 3,
//! FindCoordinator names the leader of the group's partition, a non-leader answers
//! NOT_COORDINATOR; a confluent-kafka consumer group commits offsets, the coordinator's broker
//! is SIGKILLed, and the group carries on from its committed offsets on the new leader (each
//! input consumed exactly once over both phases); `kafka-consumer-groups.sh --describe`
//! through the survivors shows the committed offsets. The failover time (kill → first
//! OffsetFetch answered by the new coordinator) is printed, not asserted (loose bounds only).
//! Needs `tests/interop/install.sh` (the venv with confluent-kafka, Kafka's jars); without
//! them the client part is skipped, said on stderr. Controller ports come from this file's
//! block, 127.0.0.1:32000-32499.

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::Wire;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, MetadataRequest, MetadataResponse, OffsetFetchRequest,
    OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const LIMIT: Duration = Duration::from_secs(60);
const NOT_COORDINATOR: i16 = 16;
const TOPIC: &str = "orders";
const GROUP: &str = "billing";
const RECORDS: usize = 3000;
const FIRST_PHASE: usize = 1000;

/// The consumer-group client: phase `produce` writes RECORDS records; phase `first` consumes
/// FIRST_PHASE of them and commits synchronously, printing the committed offsets; phase
/// `second` (after the coordinator's broker died) resumes from the committed offsets and
/// reads the rest. Each phase prints `VALUES v1,v2,...` and `COMMITTED p:o,...`.
const CLIENT: &str = r#"
import sys, time
from confluent_kafka import Consumer, Producer, TopicPartition
bs, phase, topic, group, total, first = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
if phase == "produce":
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5})
    for i in range(total):
        p.produce(topic, key=f"k{i}", value=f"v{i}")
    assert p.flush(60) == 0
    print("PRODUCED", total, flush=True)
    sys.exit(0)
c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
c.subscribe([topic])
want = first if phase == "first" else total - first
seen, deadline = [], time.time() + 180
while len(seen) < want and time.time() < deadline:
    for m in c.consume(100, 1.0):
        if m.error() or len(seen) >= want:
            continue
        seen.append(m.value().decode())
        c.commit(message=m, asynchronous=False)
committed = c.committed([TopicPartition(topic, p) for p in range(3)], timeout=30)
print("VALUES " + ",".join(seen), flush=True)
print("COMMITTED " + ",".join(f"{tp.partition}:{tp.offset}" for tp in committed), flush=True)
c.close()
"#;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The interop venv's python and Kafka's classpath, if installed.
fn clients() -> Option<(PathBuf, String)> {
    let cache = repo().join(".interop-cache");
    let python = cache.join("venv/bin/python3");
    let libs = cache.join("kafka-4.1.2/libs");
    (python.exists() && libs.exists()).then(|| (python, format!("{}/*", libs.display())))
}

fn run_client(python: &PathBuf, script: &PathBuf, args: &[&str]) -> Vec<String> {
    let out = Command::new(python).arg(script).args(args).output().expect("run python client");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "client {args:?} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().map(str::to_string).collect()
}

fn field<'a>(lines: &'a [String], prefix: &str) -> &'a str {
    lines.iter().find_map(|l| l.strip_prefix(prefix)).unwrap_or_default()
}

fn metadata(w: &mut Wire) -> MetadataResponse {
    w.call(ApiKey::Metadata, 12, &MetadataRequest::default().with_topics(None))
}

/// Waits until every running broker sees `n` brokers.
fn wait_brokers(c: &Cluster, n: usize) {
    let deadline = Instant::now() + LIMIT;
    loop {
        let all = c.running().all(|(_, b)| {
            Wire::try_connect(&b.addr).is_some_and(|mut w| metadata(&mut w).brokers.len() == n)
        });
        if all {
            return;
        }
        assert!(Instant::now() < deadline, "brokers did not register");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// FindCoordinator (v3, one key): (error, node id, port).
fn find_coordinator(w: &mut Wire, key: &str, key_type: i8) -> (i16, i32, i32) {
    let req = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_string(key.to_string()))
        .with_key_type(key_type);
    let resp: FindCoordinatorResponse = w.call(ApiKey::FindCoordinator, 3, &req);
    (resp.error_code, resp.node_id.0, resp.port)
}

/// OffsetFetch v7 of the group's partitions of TOPIC: (error, offsets by partition).
fn offset_fetch(w: &mut Wire) -> (i16, Vec<i64>) {
    let topic = OffsetFetchRequestTopic::default()
        .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
        .with_partition_indexes(vec![0, 1, 2]);
    let req = OffsetFetchRequest::default()
        .with_group_id(StrBytes::from_static_str(GROUP).into())
        .with_topics(Some(vec![topic]));
    let resp: OffsetFetchResponse = w.call(ApiKey::OffsetFetch, 7, &req);
    let mut offsets = vec![-1; 3];
    for t in &resp.topics {
        for p in &t.partitions {
            if let Some(slot) =
                usize::try_from(p.partition_index).ok().and_then(|i| offsets.get_mut(i))
            {
                *slot = p.committed_offset;
            }
        }
    }
    let code = resp
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| p.error_code)
        .find(|c| *c != 0);
    (code.unwrap_or(resp.error_code), offsets)
}

#[test]
fn group_offsets_survive_the_coordinators_broker() {
    let mut c = Cluster::start(3, 32000);
    wait_brokers(&c, 3);
    let create = |w: &mut Wire| {
        let t = CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_num_partitions(3)
            .with_replication_factor(3);
        let req = CreateTopicsRequest::default().with_topics(vec![t]).with_timeout_ms(10_000);
        let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 5, &req);
        matches!(resp.topics[0].error_code, 0 | 36).then_some(())
    };
    c.wait_for(LIMIT, "CreateTopics", create);
    // The first FindCoordinator creates __consumer_offsets with replication factor 3.
    let (_, coordinator_port) = c.wait_for(LIMIT, "FindCoordinator", |w| {
        let (code, node, port) = find_coordinator(w, GROUP, 0);
        (code == 0).then_some((node, port))
    });
    let offsets_rf = c.wait_for(LIMIT, "__consumer_offsets in Metadata", |w| {
        let m = metadata(w);
        let t = m
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "__consumer_offsets"))?;
        Some(t.partitions.first()?.replica_nodes.len())
    });
    assert_eq!(offsets_rf, 3, "offsets.topic.replication.factor 3 with three brokers");
    // A broker that is not the group's coordinator refuses its group requests.
    let other = c.running().find(|(_, b)| !b.addr.ends_with(&format!(":{coordinator_port}")));
    let (_, other) = other.expect("a non-coordinator broker");
    let mut w = Wire::connect(&other.addr);
    let deadline = Instant::now() + LIMIT;
    loop {
        let (code, _) = offset_fetch(&mut w);
        if code == NOT_COORDINATOR {
            break;
        }
        assert!(Instant::now() < deadline, "a non-leader answered OffsetFetch with {code}");
        std::thread::sleep(Duration::from_millis(200));
    }

    let Some((python, classpath)) = clients() else {
        eprintln!("[coordinators] interop clients not installed: client part skipped");
        return;
    };
    let script = std::env::temp_dir().join(format!("shardlog-coord-{}.py", std::process::id()));
    std::fs::write(&script, CLIENT).expect("write client");
    let (total, first) = (RECORDS.to_string(), FIRST_PHASE.to_string());
    let bs = c.bootstrap();
    run_client(&python, &script, &[&bs, "produce", TOPIC, GROUP, &total, &first]);
    let phase1 = run_client(&python, &script, &[&bs, "first", TOPIC, GROUP, &total, &first]);
    let committed_before = field(&phase1, "COMMITTED ").to_string();
    eprintln!("[coordinators] committed before the kill: {committed_before}");

    // SIGKILL the coordinator's broker; time until the new coordinator answers OffsetFetch.
    let coordinator = c.wait_for(LIMIT, "FindCoordinator", |w| {
        let (code, node, _) = find_coordinator(w, GROUP, 0);
        (code == 0).then_some(node)
    });
    let victim = c.index_of(coordinator);
    let killed = Instant::now();
    c.kill(victim);
    let (new_coordinator, offsets) = c.wait_for(LIMIT, "a new group coordinator", |w| {
        let (code, node, _) = find_coordinator(w, GROUP, 0);
        if code != 0 || node == coordinator {
            return None;
        }
        let addr = c.broker(c.index_of(node)).addr.clone();
        let mut cw = Wire::try_connect(&addr)?;
        let (code, offsets) = offset_fetch(&mut cw);
        (code == 0).then_some((node, offsets))
    });
    let failover = killed.elapsed();
    eprintln!(
        "[coordinators] broker {coordinator} killed: broker {new_coordinator} coordinates after {failover:?}, offsets {offsets:?}"
    );
    let expected: Vec<i64> = committed_before
        .split(',')
        .filter_map(|kv| kv.split_once(':'))
        // librdkafka prints a partition without a commit as -1001 (OFFSET_INVALID).
        .map(|(_, o)| o.parse::<i64>().unwrap_or(-1).max(-1))
        .collect();
    assert_eq!(offsets, expected, "the new coordinator serves the committed offsets");

    // The group carries on from its committed offsets: the rest, each record once.
    let phase2 =
        run_client(&python, &script, &[&c.bootstrap(), "second", TOPIC, GROUP, &total, &first]);
    let mut values: Vec<String> =
        field(&phase1, "VALUES ").split(',').map(str::to_string).collect();
    values.extend(field(&phase2, "VALUES ").split(',').map(str::to_string));
    values.sort();
    let distinct = {
        let mut d = values.clone();
        d.dedup();
        d.len()
    };
    assert_eq!((values.len(), distinct), (RECORDS, RECORDS), "each record consumed exactly once");

    // kafka-consumer-groups.sh --describe through the survivors.
    let out = Command::new("java")
        .args(["-cp", &classpath])
        .arg("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand")
        .args(["--bootstrap-server", &c.bootstrap(), "--describe", "--group", GROUP])
        .stdin(Stdio::null())
        .output()
        .expect("run ConsumerGroupCommand");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!("[coordinators] kafka-consumer-groups.sh --describe:\n{text}");
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with(GROUP)).collect();
    assert_eq!(rows.len(), 3, "one row per partition: {text}");
    for row in rows {
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols.get(3), cols.get(4), "CURRENT-OFFSET = LOG-END-OFFSET: {row}");
    }
    let _ = std::fs::remove_file(&script);
}
