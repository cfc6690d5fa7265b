//! KIP-966 eligible leader replicas on real processes (issue 15): a one-node quorum (node 1,
//! broker and controller) and three broker-only nodes (2, 3, 4); a topic with RF 3 on them and
//! `min.insync.replicas=2`. SIGKILL two followers' worth of brokers: once the ISR is below
//! two the high watermark stops (acks=all refused, acks=1 records stay invisible) and
//! DescribeTopicPartitions shows the ELR; SIGKILL the last leader too (no leader, the ISR
//! empty, every member in the ELR); restart one ELR member: it is elected (clean election
//! from the ELR); restart the rest: every acknowledged record is there, at its offset. A
//! clean shutdown then leaves each broker's high-watermark checkpoint, and a restart serves
//! the committed records again. Bounds
//! are loose; figures are printed. Ports from this file's block, 127.0.0.1:30000-30199.

use crate::common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::cluster::Cluster;
use common::{split_batches, Wire};
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, CreateTopicsResponse, DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use shardlog::storage::records::build_simple_batch;

const LIMIT: Duration = Duration::from_secs(60);
const TOPIC: &str = "elr";

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// CreateTopics: partition 0 on brokers 2, 3, 4 (2 preferred), min.insync.replicas=2.
fn create(w: &mut Wire) -> i16 {
    let config = CreatableTopicConfig::default()
        .with_name(StrBytes::from_static_str("min.insync.replicas"))
        .with_value(Some(StrBytes::from_static_str("2")));
    let assignment = CreatableReplicaAssignment::default()
        .with_partition_index(0)
        .with_broker_ids(vec![BrokerId(2), BrokerId(3), BrokerId(4)]);
    let t = CreatableTopic::default()
        .with_name(name(TOPIC))
        .with_num_partitions(-1)
        .with_replication_factor(-1)
        .with_assignments(vec![assignment])
        .with_configs(vec![config]);
    let req = CreateTopicsRequest::default().with_topics(vec![t]).with_timeout_ms(10_000);
    let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 5, &req);
    resp.topics[0].error_code
}

/// Partition 0 as DescribeTopicPartitions shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct View {
    leader: i32,
    epoch: i32,
    isr: Vec<i32>,
    elr: Vec<i32>,
    last_known_elr: Vec<i32>,
}

fn describe(w: &mut Wire) -> Option<View> {
    let req = DescribeTopicPartitionsRequest::default()
        .with_topics(vec![TopicRequest::default().with_name(name(TOPIC))]);
    let r: DescribeTopicPartitionsResponse = w.call(ApiKey::DescribeTopicPartitions, 0, &req);
    let p = r.topics.first()?.partitions.first()?;
    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<_>>();
    Some(View {
        leader: p.leader_id.0,
        epoch: p.leader_epoch,
        isr: ids(&p.isr_nodes),
        elr: ids(p.eligible_leader_replicas.as_deref().unwrap_or_default()),
        last_known_elr: ids(p.last_known_elr.as_deref().unwrap_or_default()),
    })
}

/// Waits until the partition's view satisfies `pred` (asked of any running node).
fn wait_view(c: &Cluster, what: &str, pred: impl Fn(&View) -> bool) -> View {
    let started = Instant::now();
    let v = c.wait_for(LIMIT, what, |w| describe(w).filter(|v| pred(v)));
    eprintln!("[elr] {what}: {v:?} after {:?}", started.elapsed());
    v
}

/// One batch of `count` records: (error code, base offset).
fn produce(w: &mut Wire, acks: i16, count: usize) -> (i16, i64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    let records: Bytes = build_simple_batch(count, 32, now);
    let part = PartitionProduceData::default().with_index(0).with_records(Some(records));
    let t = TopicProduceData::default().with_name(name(TOPIC)).with_partition_data(vec![part]);
    let req =
        ProduceRequest::default().with_acks(acks).with_timeout_ms(2_000).with_topic_data(vec![t]);
    let resp: ProduceResponse = w.call(ApiKey::Produce, 9, &req);
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// `batches` acks=all batches of 10 to the leader, retrying refusals: their base offsets.
fn produce_acked(c: &Cluster, leader: i32, batches: usize) -> Vec<i64> {
    let mut w = Wire::connect(&c.broker(c.index_of(leader)).addr);
    let deadline = Instant::now() + LIMIT;
    let mut acked = Vec::new();
    while acked.len() < batches {
        match produce(&mut w, -1, 10) {
            (0, base) => acked.push(base),
            (code, _) => {
                // Appended but not acknowledged (e.g. REQUEST_TIMED_OUT while a dead
                // follower is still in the ISR): a gap in the acknowledged offsets.
                eprintln!("[elr] acks=all answered error {code}; retrying");
                assert!(Instant::now() < deadline, "acks=all refused: error {code}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    acked
}

/// Every record offset below the high watermark of the leader `leader`, once it reaches
/// `end`.
fn read_offsets(c: &Cluster, leader: i32, end: i64) -> Vec<i64> {
    let mut w = Wire::connect(&c.broker(c.index_of(leader)).addr);
    let deadline = Instant::now() + LIMIT;
    let mut offsets = Vec::new();
    let mut next = 0;
    while next < end {
        let a = w.fetch(TOPIC, 0, next);
        let batches = if a.error_code == 0 { split_batches(a.records) } else { Vec::new() };
        if batches.is_empty() {
            assert!(
                Instant::now() < deadline,
                "high watermark {} below {end} (error {})",
                a.high_watermark,
                a.error_code
            );
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        for (records, after) in batches {
            offsets.extend(records.iter().map(|r| r.offset));
            next = after;
        }
    }
    offsets
}

fn high_watermark(c: &Cluster, leader: i32) -> i64 {
    Wire::connect(&c.broker(c.index_of(leader)).addr).fetch(TOPIC, 0, 0).high_watermark
}

#[test]
fn below_min_isr_the_high_watermark_stops_and_the_elr_leads_cleanly() {
    // Node 1 is the whole quorum (and a broker hosting nothing of the topic), so killing
    // brokers never costs the controller.
    let mut c = Cluster::start(1, 30000);
    for id in 2..=4 {
        let i = c.add_node(id, 30000 + 100 * id as u16, &["--process-roles", "broker"]);
        c.start_node(i);
    }
    c.wait_for(LIMIT, "CreateTopics", |w| matches!(create(w), 0 | 36).then_some(()));
    let v = wait_view(&c, "full ISR", |v| v.leader == 2 && v.isr.len() == 3);
    assert!(v.elr.is_empty() && v.last_known_elr.is_empty());

    let mut acked = produce_acked(&c, 2, 10);
    // Broker 4 dies: the ISR (2 of 3) is still at the minimum, so no ELR.
    let killed = Instant::now();
    c.kill(c.index_of(4));
    wait_view(&c, "4 out of the ISR", |v| v.isr == [2, 3] && v.elr.is_empty());
    eprintln!("[elr] ISR shrink after a SIGKILL took {:?}", killed.elapsed());
    acked.extend(produce_acked(&c, 2, 5));
    let end = acked.last().unwrap() + 10;
    // Broker 3 dies: the ISR falls below two; 3 goes to the ELR.
    c.kill(c.index_of(3));
    let v = wait_view(&c, "3 in the ELR", |v| v.isr == [2] && v.elr == [3]);
    assert_eq!(v.leader, 2);
    // The high watermark stops: acks=all is refused before appending, acks=1 appends but
    // its records stay above the high watermark.
    let hw = high_watermark(&c, 2);
    assert!(hw >= end, "acknowledged records are committed ({hw} < {end})");
    let mut w = Wire::connect(&c.broker(c.index_of(2)).addr);
    // 19 (NOT_ENOUGH_REPLICAS) once the leader has applied the shrink; a produce that
    // arrived just before waits on the frozen high watermark and times out (7), as Kafka
    // 4.1's DelayedProduce does: then the next one is refused.
    let mut code = produce(&mut w, -1, 10).0;
    if code == 7 {
        code = produce(&mut w, -1, 10).0;
    }
    assert_eq!(code, 19, "NOT_ENOUGH_REPLICAS");
    let (code, base) = produce(&mut w, 1, 10);
    assert_eq!(code, 0, "acks=1 is still taken");
    assert!(base >= hw);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(high_watermark(&c, 2), hw, "the high watermark is frozen below min ISR");
    drop(w);

    // The leader dies too: no leader, an empty ISR, both former members electable.
    c.kill(c.index_of(2));
    let v = wait_view(&c, "no leader", |v| v.leader == -1);
    assert!(v.isr.is_empty(), "{v:?}");
    assert_eq!(v.elr, [2, 3]);

    // Broker 4 (out of ISR and ELR) returns first: electing it would be unclean.
    c.start_node(c.index_of(4));
    std::thread::sleep(Duration::from_secs(3));
    let v = wait_view(&c, "4 back, still no leader", |v| v.leader == -1);
    assert_eq!(v.elr, [2, 3]);
    // Broker 3 returns: elected from the ELR, it is the ISR.
    let restarted = Instant::now();
    c.start_node(c.index_of(3));
    let v = wait_view(&c, "3 elected from the ELR", |v| v.leader == 3);
    eprintln!("[elr] ELR member elected {:?} after its restart", restarted.elapsed());
    assert_eq!((v.isr.clone(), v.elr.clone()), (vec![3], vec![2]), "{v:?}");
    // 4 catches up and joins: the ISR is back at the minimum, ELR cleared.
    let v = wait_view(&c, "ISR back at the minimum", |v| v.isr.len() >= 2 && v.elr.is_empty());
    assert_eq!(v.leader, 3);
    c.start_node(c.index_of(2));
    wait_view(&c, "full ISR again", |v| v.isr.len() == 3);
    let got = read_offsets(&c, 3, end);
    assert!(got.windows(2).all(|w| w[0] < w[1]), "each offset once, in order");
    let missing: Vec<i64> =
        acked.iter().flat_map(|b| *b..*b + 10).filter(|o| got.binary_search(o).is_err()).collect();
    assert!(missing.is_empty(), "acknowledged offsets lost: {missing:?}");
    eprintln!("[elr] {} acknowledged records all read back from the new leader", acked.len() * 10);
    let more = produce_acked(&c, 3, 2);
    assert!(more[0] >= end);
    let end2 = more[1] + 10;

    // Clean shutdown writes the high-watermark checkpoint (Kafka's text format): the
    // leader's holds everything acknowledged, the followers' at least what was before.
    for i in (0..c.nodes.len()).rev() {
        c.terminate(i);
    }
    for id in 2..=4 {
        let path = c.nodes[c.index_of(id)].data_dir.join("replication-offset-checkpoint.0");
        let text = std::fs::read_to_string(&path).expect("checkpoint written");
        let hw: i64 = text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{TOPIC} 0 ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no entry in {text:?}"));
        assert!(text.starts_with("0\n"), "{text:?}");
        let floor = if id == 3 { end2 } else { end };
        assert!(hw >= floor, "node {id}: checkpointed {hw} < {floor}");
        eprintln!("[elr] node {id} checkpointed high watermark {hw} (acknowledged end {end2})");
    }
    // Restarted, the leader starts from its checkpoint: committed records readable at once.
    let nodes: Vec<usize> = (0..c.nodes.len()).collect();
    c.start_nodes(&nodes);
    let v = wait_view(&c, "a leader after the restart", |v| v.leader > 0 && v.isr.len() >= 2);
    let restarted = Instant::now();
    let got = read_offsets(&c, v.leader, end2);
    eprintln!(
        "[elr] after the restart, {} records readable in {:?}",
        got.len(),
        restarted.elapsed()
    );
    // Brokers first, the controller quorum (node 1) last: a broker's controlled shutdown
    // waits for the controller's approval.
    for i in (0..c.nodes.len()).rev() {
        c.terminate(i);
    }
}
