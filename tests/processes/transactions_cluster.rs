//! Transactions on three real broker processes (issues 15 and 17): `__transaction_state`
//! replicated (replication factor 3, `min.insync.replicas` 2); KIP-890 part 1 — a
//! transactional produce to a partition not added to the transaction is refused with
//! INVALID_TXN_STATE by its leader, on whichever broker, after asking the coordinator (over the
//! mesh or broker to broker), and accepted once added; markers reach partition leaders on
//! other brokers (read_committed sees the committed batch); zombie fencing (the older epoch
//! gets PRODUCER_FENCED); and a consume-transform-produce app (confluent-kafka, and the Java
//! client with `SHARDLOG_TXN_CLUSTER_KINDS=python,java`) keeps exactly-once output while the
//! broker coordinating its transactional id is SIGKILLed. Figures are printed, not asserted.
//! The app part needs `tests/interop/install.sh`; without it that part is skipped (said on
//! stderr). Controller ports come from this file's block, 127.0.0.1:32500-32999.

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::cluster::Cluster;
use common::Wire;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, EndTxnRequest, EndTxnResponse,
    FetchRequest, FetchResponse, FindCoordinatorRequest, FindCoordinatorResponse,
    InitProducerIdRequest, InitProducerIdResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, ProduceResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

const LIMIT: Duration = Duration::from_secs(60);
const TOPIC: &str = "ledger";
const PRODUCER_FENCED: i16 = 90;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_TXN_STATE: i16 = 48;

use common::txn_batch;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn metadata(w: &mut Wire) -> MetadataResponse {
    w.call(ApiKey::Metadata, 12, &MetadataRequest::default().with_topics(None))
}

/// Partition → leader's address, once every partition of `topic` has a leader.
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

/// The coordinator of a transactional id: (node id, address).
fn txn_coordinator(c: &Cluster, id: &str) -> (i32, String) {
    c.wait_for(LIMIT, "FindCoordinator", |w| {
        let req = FindCoordinatorRequest::default().with_key(s(id)).with_key_type(1);
        let resp: FindCoordinatorResponse = w.call(ApiKey::FindCoordinator, 3, &req);
        (resp.error_code == 0).then(|| (resp.node_id.0, format!("{}:{}", resp.host, resp.port)))
    })
}

/// A transactional produce (with the transactional id, as clients send it): the error.
fn produce(addr: &str, id: &str, partition: i32, records: Bytes) -> i16 {
    let mut w = Wire::connect(addr);
    let part = PartitionProduceData::default().with_index(partition).with_records(Some(records));
    let topic =
        TopicProduceData::default().with_name(TopicName(s(TOPIC))).with_partition_data(vec![part]);
    let req = ProduceRequest::default()
        .with_transactional_id(Some(TransactionalId(s(id))))
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![topic]);
    let resp: ProduceResponse = w.call(ApiKey::Produce, 9, &req);
    resp.responses[0].partition_responses[0].error_code
}

fn init(addr: &str, id: &str) -> (i64, i16) {
    let mut w = Wire::connect(addr);
    let deadline = Instant::now() + LIMIT;
    loop {
        let req = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(s(id))))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let resp: InitProducerIdResponse = w.call(ApiKey::InitProducerId, 4, &req);
        if resp.error_code == 0 {
            return (resp.producer_id.0, resp.producer_epoch);
        }
        assert!(Instant::now() < deadline, "InitProducerId answered {}", resp.error_code);
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn add_partitions(addr: &str, id: &str, pid: i64, epoch: i16, partitions: Vec<i32>) -> i16 {
    let mut w = Wire::connect(addr);
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s(id)))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_partitions(partitions)]);
    let resp: AddPartitionsToTxnResponse = w.call(ApiKey::AddPartitionsToTxn, 3, &req);
    resp.results_by_topic_v3_and_below[0]
        .results_by_partition
        .iter()
        .map(|p| p.partition_error_code)
        .find(|c| *c != 0)
        .unwrap_or(0)
}

fn end(addr: &str, id: &str, pid: i64, epoch: i16, commit: bool) -> i16 {
    let mut w = Wire::connect(addr);
    let req = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(s(id)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    let resp: EndTxnResponse = w.call(ApiKey::EndTxn, 3, &req);
    resp.error_code
}

/// read_committed fetch of one partition from 0: (last stable offset, bytes returned).
fn read_committed(addr: &str, partition: i32) -> (i64, usize) {
    let mut w = Wire::connect(addr);
    let part = FetchPartition::default()
        .with_partition(partition)
        .with_fetch_offset(0)
        .with_partition_max_bytes(1 << 20);
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_isolation_level(1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(s(TOPIC)))
            .with_partitions(vec![part])]);
    let resp: FetchResponse = w.call(ApiKey::Fetch, 11, &req);
    let p = &resp.responses[0].partitions[0];
    (p.last_stable_offset, p.records.as_ref().map_or(0, Bytes::len))
}

/// KIP-890 part 1, cross-broker markers and zombie fencing, on the raw protocol.
fn verification_markers_and_fencing(c: &Cluster) {
    let id = "ledger-writer";
    c.create_rf3(TOPIC, 3, LIMIT);
    let (coordinator, coord_addr) = txn_coordinator(c, id);
    let txn_rf = c.wait_for(LIMIT, "__transaction_state in Metadata", |w| {
        let m = metadata(w);
        let t = m
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "__transaction_state"))?;
        Some(t.partitions.first()?.replica_nodes.len())
    });
    assert_eq!(txn_rf, 3, "transaction.state.log.replication.factor 3 with three brokers");
    let leaders = leaders(c, TOPIC);
    eprintln!("[txn-cluster] coordinator of {id}: broker {coordinator}; leaders {leaders:?}");
    let (pid, epoch) = init(&coord_addr, id);
    // Not added: every leader refuses, local to the coordinator or not.
    for (p, addr) in &leaders {
        let code = produce(addr, id, *p, txn_batch(pid, epoch, 0, 3));
        assert_eq!(code, INVALID_TXN_STATE, "partition {p} (leader {addr}) before AddPartitions");
    }
    let started = Instant::now();
    assert_eq!(add_partitions(&coord_addr, id, pid, epoch, leaders.keys().copied().collect()), 0);
    for (p, addr) in &leaders {
        assert_eq!(produce(addr, id, *p, txn_batch(pid, epoch, 0, 3)), 0, "partition {p}");
    }
    assert_eq!(end(&coord_addr, id, pid, epoch, true), 0, "EndTxn commit");
    // The markers reach every leader: the last stable offset passes the batch and its marker.
    for (p, addr) in &leaders {
        let deadline = Instant::now() + LIMIT;
        loop {
            let (lso, bytes) = read_committed(addr, *p);
            if lso >= 4 && bytes > 0 {
                break;
            }
            assert!(Instant::now() < deadline, "partition {p}: LSO {lso}, {bytes} bytes");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    eprintln!(
        "[txn-cluster] verified transaction committed on 3 leaders in {:?}",
        started.elapsed()
    );
    // Zombie fencing: a new instance bumps the epoch; the old one is fenced.
    let (pid2, epoch2) = init(&coord_addr, id);
    assert_eq!(pid2, pid);
    assert!(epoch2 > epoch);
    let code = add_partitions(&coord_addr, id, pid, epoch, vec![0]);
    assert_eq!(code, PRODUCER_FENCED, "AddPartitionsToTxn v3 of the old epoch");
    let (p0, addr0) = leaders.iter().next().expect("a partition");
    let code = produce(addr0, id, *p0, txn_batch(pid, epoch, 1, 1));
    assert!(
        [INVALID_PRODUCER_EPOCH, PRODUCER_FENCED].contains(&code),
        "the zombie's produce: {code}"
    );
}

#[test]
fn transactions_across_three_brokers() {
    let mut c = Cluster::start(3, 32500);
    c.wait_brokers(3, LIMIT);
    verification_markers_and_fencing(&c);

    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".interop-cache");
    let python = cache.join("venv/bin/python3");
    let libs = cache.join("kafka-4.1.2/libs");
    if !python.exists() || !libs.exists() {
        eprintln!("[txn-cluster] interop clients not installed: the app part is skipped");
        return;
    }
    let classpath = format!("{}/*", libs.display());
    let kinds = std::env::var("SHARDLOG_TXN_CLUSTER_KINDS").unwrap_or_else(|_| "python".into());
    let records: usize = std::env::var("SHARDLOG_TXN_CLUSTER_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let driver =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/transactions/eos_cluster.py");
    for kind in kinds.split(',') {
        c.create_rf3(&format!("cl-in-{kind}"), 3, LIMIT);
        c.create_rf3(&format!("cl-out-{kind}"), 3, LIMIT);
        let mut child = Command::new(&python)
            .arg(&driver)
            .args([&c.bootstrap(), kind, &classpath, &records.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start eos_cluster.py");
        let stdout = child.stdout.take().expect("stdout");
        let mut stdin = child.stdin.take().expect("stdin");
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            eprintln!("[txn-cluster {kind}] {line}");
            if line == "KILL" {
                let (node, _) = txn_coordinator(&c, &format!("cl-{kind}-txn"));
                let killed = Instant::now();
                c.kill(c.index_of(node));
                let (new_node, _) = c.wait_for(LIMIT, "a new transaction coordinator", |w| {
                    let req = FindCoordinatorRequest::default()
                        .with_key(s(&format!("cl-{kind}-txn")))
                        .with_key_type(1);
                    let resp: FindCoordinatorResponse = w.call(ApiKey::FindCoordinator, 3, &req);
                    (resp.error_code == 0 && resp.node_id.0 != node).then_some((resp.node_id.0, ()))
                });
                eprintln!(
                    "[txn-cluster {kind}] coordinator broker {node} SIGKILLed; broker {new_node} named coordinator after {:?}",
                    killed.elapsed()
                );
                writeln!(stdin, "{node}").expect("answer the driver");
                stdin.flush().expect("flush");
            }
            lines.push(line);
        }
        let status = child.wait().expect("eos_cluster.py");
        assert!(status.success(), "eos_cluster.py [{kind}] failed: {lines:?}");
        assert!(lines.iter().any(|l| l == "eos_cluster: ok"));
        // The next kind runs on the survivors plus the restarted broker.
        let down: Vec<usize> = (0..3).filter(|i| !c.running().any(|(j, _)| j == *i)).collect();
        for i in down {
            c.start_node(i);
        }
        c.wait_brokers(3, LIMIT);
    }
}
