//! A three-node cluster of real processes on loopback (issue 13): the nodes form a quorum,
//! register as brokers and agree on metadata; the active controller is SIGKILLed and
//! SIGSTOPped and a new one takes over; all three restart one at a time; a fourth,
//! broker-only node joins. Bounds are loose (the figures are measured and printed, not
//! asserted); controller ports come from this file's block, 127.0.0.1:24000-24999.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::Wire;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, DescribeQuorumRequest,
    DescribeQuorumResponse, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const FAILOVER_LIMIT: Duration = Duration::from_secs(30);
const FORM_LIMIT: Duration = Duration::from_secs(60);

fn metadata(w: &mut Wire) -> MetadataResponse {
    w.call(ApiKey::Metadata, 12, &MetadataRequest::default().with_topics(None))
}

/// Live broker ids and the controller id, as one node sees them.
fn brokers(w: &mut Wire) -> (BTreeSet<i32>, i32) {
    let m = metadata(w);
    (m.brokers.iter().map(|b| b.node_id.0).collect(), m.controller_id.0)
}

/// CreateTopics through `w`: the error code of the one topic.
fn create(w: &mut Wire, name: &str, partitions: i32, rf: i16) -> i16 {
    let topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(name.to_string())))
        .with_num_partitions(partitions)
        .with_replication_factor(rf);
    let req = CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(10_000);
    let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 5, &req);
    resp.topics[0].error_code
}

fn quorum_leader(w: &mut Wire) -> Option<(i32, i32)> {
    let req: DescribeQuorumRequest =
        shardlog::server::admin::describe_quorum::metadata_partition_request();
    let resp: DescribeQuorumResponse = w.call(ApiKey::DescribeQuorum, 1, &req);
    let p = &resp.topics[0].partitions[0];
    (p.error_code == 0 && p.leader_id.0 > 0).then_some((p.leader_id.0, p.leader_epoch))
}

/// Waits until every running node lists `expected` brokers and one live controller.
fn wait_formed(c: &Cluster, expected: &BTreeSet<i32>) -> i32 {
    let deadline = Instant::now() + FORM_LIMIT;
    loop {
        let mut views = Vec::new();
        for (_, b) in c.running() {
            if let Some(mut w) = Wire::try_connect(&b.addr) {
                views.push(
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| brokers(&mut w))).ok(),
                );
            }
        }
        let controllers: BTreeSet<i32> = views.iter().flatten().map(|(_, c)| *c).collect();
        let all = views.len() == c.running().count()
            && views.iter().all(|v| v.as_ref().is_some_and(|(b, _)| b == expected));
        if all && controllers.len() == 1 {
            let controller = *controllers.iter().next().unwrap();
            if expected.contains(&controller) {
                return controller;
            }
        }
        assert!(Instant::now() < deadline, "cluster did not form: {views:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Retries CreateTopics on any running node until it succeeds; returns the time it took.
fn create_until_ok(c: &Cluster, name: &str, rf: i16) -> Duration {
    let start = Instant::now();
    c.wait_for(FAILOVER_LIMIT, &format!("CreateTopics {name}"), |w| {
        match create(w, name, 3, rf) {
            0 | 36 => Some(()), // created, or created by an earlier try (TOPIC_ALREADY_EXISTS)
            _ => None,
        }
    });
    start.elapsed()
}

fn ids(list: &[i32]) -> BTreeSet<i32> {
    list.iter().copied().collect()
}

#[test]
fn three_nodes_form_fail_over_and_restart() {
    let mut c = Cluster::start(3, 24000);
    let all = ids(&[1, 2, 3]);
    let controller = wait_formed(&c, &all);
    eprintln!("[cluster] formed, controller {controller}");

    // Replication factor 3 over three brokers; leaders spread.
    create_until_ok(&c, "rf3", 3);
    let m = c.wait_for(Duration::from_secs(20), "rf3 visible everywhere", |w| {
        let m = metadata(w);
        m.topics.iter().any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "rf3")).then_some(m)
    });
    let topic = m.topics.iter().find(|t| t.name.as_ref().unwrap().0.as_str() == "rf3").unwrap();
    let leaders: BTreeSet<i32> = topic.partitions.iter().map(|p| p.leader_id.0).collect();
    for p in &topic.partitions {
        assert_eq!(ids(&p.replica_nodes.iter().map(|n| n.0).collect::<Vec<_>>()), all);
    }
    assert_eq!(leaders, all, "leaders of 3 partitions spread over 3 brokers");

    // Too few brokers: INVALID_REPLICATION_FACTOR (38).
    let code = c.wait_for(Duration::from_secs(10), "rf4 answer", |w| Some(create(w, "rf4", 1, 4)));
    assert_eq!(code, 38);

    // SIGKILL the active controller: a new one, and CreateTopics works again.
    let victim = c.index_of(controller);
    let killed = Instant::now();
    c.kill(victim);
    let took = create_until_ok(&c, "after-kill", 1);
    let (_, new_controller) = c.wait_for(FAILOVER_LIMIT, "new controller", |w| {
        let (b, ctl) = brokers(w);
        (ctl != controller && ctl > 0).then_some((b, ctl))
    });
    eprintln!(
        "[cluster] controller {controller} killed; new controller {new_controller}; \
         CreateTopics ok {:?} after the kill",
        killed.elapsed().min(took)
    );
    c.start_node(victim);
    let controller = wait_formed(&c, &all);

    // SIGSTOP the active controller for 20 s: the others elect a leader; after SIGCONT the old
    // one follows it and catches up, with one leader per epoch.
    let stopped = c.index_of(controller);
    c.signal(stopped, libc::SIGSTOP);
    let stop_at = Instant::now();
    let others: Vec<usize> = (0..3).filter(|i| *i != stopped).collect();
    let mut elected = None;
    while stop_at.elapsed() < Duration::from_secs(20) {
        for i in &others {
            if let Some(mut w) = Wire::try_connect(&c.broker(*i).addr) {
                if let Ok(Some((leader, epoch))) =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| quorum_leader(&mut w)))
                {
                    if leader != controller && elected.is_none() {
                        elected = Some((leader, epoch, stop_at.elapsed()));
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let (new_leader, epoch, took) =
        elected.expect("a new quorum leader while the old one is stopped");
    eprintln!("[cluster] controller {controller} stopped; {new_leader} leads epoch {epoch} after {took:?}");
    let name = "during-stop";
    create_until_ok(&c, name, 1);
    c.signal(stopped, libc::SIGCONT);
    // Every node, the resumed one included, names the same leader and sees the topic.
    let deadline = Instant::now() + FAILOVER_LIMIT;
    loop {
        let mut leaders = BTreeSet::new();
        let mut seen = 0;
        for (_, b) in c.running() {
            if let Some(mut w) = Wire::try_connect(&b.addr) {
                if let Ok(m) =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| metadata(&mut w)))
                {
                    leaders.insert(m.controller_id.0);
                    if m.topics
                        .iter()
                        .any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == name))
                    {
                        seen += 1;
                    }
                }
            }
        }
        if leaders.len() == 1 && seen == 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no agreement after SIGCONT: {leaders:?}, seen by {seen}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }

    // Restart all three, one at a time: the topics survive and the cluster re-forms.
    for i in 0..3 {
        c.terminate(i);
        c.start_node(i);
        wait_formed(&c, &all);
    }
    let m = c.wait_for(Duration::from_secs(20), "topics after restarts", |w| {
        let m = metadata(w);
        (m.topics.len() >= 3).then_some(m)
    });
    let names: BTreeSet<String> =
        m.topics.iter().filter_map(|t| t.name.as_ref().map(|n| n.0.to_string())).collect();
    for t in ["rf3", "after-kill", "during-stop"] {
        assert!(names.contains(t), "{t} survived the restarts: {names:?}");
    }

    // A fresh fourth node, broker only, joins and registers.
    // Two shards on two cores: brokers may run different shard counts.
    let four =
        c.add_node(4, 24400, &["--process-roles", "broker", "--shards", "2", "--cpus", "0,1"]);
    c.start_node(four);
    wait_formed(&c, &ids(&[1, 2, 3, 4]));
    create_until_ok(&c, "rf4-now", 4);
}

#[test]
fn a_node_of_another_cluster_is_refused() {
    let mut c = Cluster::start(1, 24500);
    wait_formed(&c, &ids(&[1]));
    // Node 2 formatted with a different cluster id, pointing at node 1 as voter: it must
    // never join (the handshake refuses it) and says so.
    let dir = tempfile::tempdir().unwrap();
    let other = common::cluster::random_cluster_id();
    common::cluster::format(dir.path(), &other, 2);
    let voters = c.voters.clone();
    let mut b = common::Broker::start_with(
        dir.path(),
        &[
            "--node-id",
            "2",
            "--process-roles",
            "broker",
            "--controller-quorum-voters",
            &voters,
            "--shards",
            "1",
            "--spin-before-park-us",
            "0",
        ],
    );
    std::thread::sleep(Duration::from_secs(5));
    let (brokers_seen, _) = c.wait_for(Duration::from_secs(10), "metadata", |w| Some(brokers(w)));
    assert_eq!(brokers_seen, ids(&[1]), "node of another cluster never registers");
    assert!(
        c.broker(0).log_contains("cluster")
            && (c.broker(0).log_contains(&other) || b.log_contains(&other)),
        "the refusal names the cluster ids"
    );
    b.kill();
    c.terminate(0);
}

#[test]
fn without_a_quorum_controller_requests_fail_fast_and_reads_go_on() {
    // Three voters configured, one started: no quorum can form.
    let dir_port = 24600;
    let mut c = Cluster::start(0, dir_port);
    c.voters = (1..=3)
        .map(|i| format!("{i}@127.0.0.1:{}", dir_port + 100 * i))
        .collect::<Vec<_>>()
        .join(",");
    let one = c.add_node(1, dir_port + 100, &[]);
    c.start_node(one);
    assert!(c.broker(one).log_contains("no active controller"), "the node says it has no quorum");
    let mut w = Wire::connect(&c.broker(one).addr);
    let m = metadata(&mut w);
    assert_eq!(m.controller_id.0, -1, "no controller is named");
    let start = Instant::now();
    let code = create(&mut w, "no-quorum", 1, 1);
    let took = start.elapsed();
    eprintln!("[cluster] CreateTopics without a quorum: error {code} after {took:?}");
    assert_eq!(code, 41, "NOT_CONTROLLER");
    assert!(took < Duration::from_secs(25), "answered, not hung: {took:?}");
}

#[test]
fn a_single_node_with_a_nonzero_id_names_itself_controller() {
    let dir = tempfile::tempdir().unwrap();
    let b = common::Broker::start_with(dir.path(), &["--node-id", "1", "--shards", "1"]);
    let mut w = Wire::connect(&b.addr);
    let m = metadata(&mut w);
    assert_eq!(m.controller_id.0, 1, "the controller is a listed broker");
    assert_eq!(m.brokers.iter().map(|b| b.node_id.0).collect::<Vec<_>>(), vec![1]);
    assert_eq!(create(&mut w, "single-1", 1, 1), 0);
}
