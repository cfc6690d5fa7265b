//! Controller failover and metadata propagation on a three-node cluster of real processes
//! (issue 13's measurements): SIGKILL the active controller, time until a CreateTopics sent
//! to the survivors succeeds, restart it; and time from CreateTopics answered until every
//! broker's Metadata lists the topic. Figures are printed, not asserted (a loose 30 s bound
//! only). Two kills in `cargo test`; `SHARDLOG_FAILOVER_KILLS=20` for the full measurement.
//! Controller ports come from this file's block, 127.0.0.1:26000-26999.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::Wire;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const LIMIT: Duration = Duration::from_secs(30);

fn metadata(w: &mut Wire) -> MetadataResponse {
    w.call(ApiKey::Metadata, 12, &MetadataRequest::default().with_topics(None))
}

fn create(w: &mut Wire, name: &str) -> i16 {
    let topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(name.to_string())))
        .with_num_partitions(1)
        .with_replication_factor(1);
    let req = CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(5_000);
    let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 5, &req);
    resp.topics[0].error_code
}

/// The controller every running node names, once they agree on a live one.
fn agreed_controller(c: &Cluster) -> i32 {
    let deadline = Instant::now() + LIMIT;
    loop {
        let mut seen = BTreeSet::new();
        let mut brokers = BTreeSet::new();
        let mut answers = 0;
        for (_, b) in c.running() {
            if let Some(mut w) = Wire::try_connect(&b.addr) {
                if let Ok(m) =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| metadata(&mut w)))
                {
                    answers += 1;
                    seen.insert(m.controller_id.0);
                    brokers.insert(m.brokers.len());
                }
            }
        }
        if answers == c.running().count() && seen.len() == 1 && brokers == BTreeSet::from([3]) {
            let id = *seen.iter().next().unwrap();
            if id > 0 {
                return id;
            }
        }
        assert!(Instant::now() < deadline, "no agreed controller: {seen:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[test]
fn controller_failover_and_metadata_propagation() {
    let kills: usize =
        std::env::var("SHARDLOG_FAILOVER_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
    let mut c = Cluster::start(3, 26000);
    let mut failovers = Vec::new();
    let mut propagation = Vec::new();
    for round in 0..kills {
        let controller = agreed_controller(&c);
        // Metadata propagation: CreateTopics answered → visible on every broker.
        let name = format!("prop-{round}");
        let answered =
            c.wait_for(LIMIT, "CreateTopics", |w| (create(w, &name) == 0).then(Instant::now));
        loop {
            let all = c.running().all(|(_, b)| {
                Wire::try_connect(&b.addr).is_some_and(|mut w| {
                    metadata(&mut w)
                        .topics
                        .iter()
                        .any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == name))
                })
            });
            if all {
                propagation.push(answered.elapsed());
                break;
            }
            assert!(answered.elapsed() < LIMIT, "{name} did not reach every broker");
            std::thread::sleep(Duration::from_millis(2));
        }
        // Failover: kill the active controller, CreateTopics through the survivors.
        let victim = c.index_of(controller);
        let killed = Instant::now();
        c.kill(victim);
        let after = format!("after-kill-{round}");
        c.wait_for(LIMIT, "CreateTopics after the kill", |w| match create(w, &after) {
            0 | 36 => Some(()),
            _ => None,
        });
        let took = killed.elapsed();
        eprintln!("[failover] round {round}: controller {controller} killed, CreateTopics ok after {took:?}");
        failovers.push(took);
        c.start_node(victim);
    }
    failovers.sort();
    propagation.sort();
    eprintln!(
        "[failover] {} kills: p50 {:?}, max {:?}; metadata propagation p50 {:?}, max {:?}",
        failovers.len(),
        percentile(&failovers, 0.5),
        failovers.last().unwrap(),
        percentile(&propagation, 0.5),
        propagation.last().unwrap()
    );
}
