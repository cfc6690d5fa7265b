//! A consumer group's committed offsets survive SIGKILLs of its coordinator's broker (issue
//! 15), on three real broker processes, through the Kafka wire only (no client install
//! needed): offsets are committed (OffsetCommit, acks=all on `__consumer_offsets`, RF 3) to
//! the coordinator FindCoordinator names; its broker is SIGKILLed; FindCoordinator and
//! OffsetFetch (all partitions of the group, as `list_consumer_group_offsets` asks) are
//! polled through the survivors until the new coordinator answers. The invariant checked on
//! every answer, not only the last: an OffsetFetch answered without error serves exactly the
//! acknowledged offsets (a new coordinator still loading answers a retriable error, never
//! "no offsets"). Then offsets committed to the new coordinator survive a second kill, after
//! the first broker came back (restarted, caught up, back in the ISR): it must serve the
//! commits made while it was dead, not what it knew before.
//!
//! The failover times (kill → offsets served) are printed, not asserted: loose bounds only
//! (`LIMIT`). Controller ports from this file's block, 127.0.0.1:30200-30399.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::Wire;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, GroupId, MetadataRequest, MetadataResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

/// Bound of each wait (a failover takes about `broker.session.timeout.ms`, 9 s, to fence the
/// dead broker and move leadership).
const LIMIT: Duration = Duration::from_secs(90);
const TOPIC: &str = "gcf-orders";
const GROUP: &str = "gcf-billing";
const PARTITIONS: i32 = 3;
const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Errors a client retries while the coordinator moves: NOT_COORDINATOR,
/// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, REQUEST_TIMED_OUT.
const RETRIABLE: [i16; 4] = [16, 14, 15, 7];
/// Pause between OffsetFetch rounds after a kill.
const POLL: Duration = Duration::from_millis(10);

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// The three-node cluster, controller ports 30210/30220/30230.
fn start_cluster() -> Cluster {
    let mut c = Cluster::start(0, 30200);
    c.voters =
        (1..=3).map(|i| format!("{i}@127.0.0.1:{}", 30200 + 10 * i)).collect::<Vec<_>>().join(",");
    let nodes: Vec<usize> = (1..=3).map(|i| c.add_node(i, 30200 + 10 * i as u16, &[])).collect();
    c.start_nodes(&nodes);
    c
}

fn metadata(w: &mut Wire) -> MetadataResponse {
    w.call(ApiKey::Metadata, 12, &MetadataRequest::default().with_topics(None))
}

/// (leader, replicas, ISR) of `topic`-`p` in `m`.
fn partition_state(m: &MetadataResponse, topic: &str, p: i32) -> Option<(i32, usize, usize)> {
    let t = m.topics.iter().find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))?;
    let p = t.partitions.iter().find(|q| q.partition_index == p)?;
    Some((p.leader_id.0, p.replica_nodes.len(), p.isr_nodes.len()))
}

/// FindCoordinator v3 for GROUP: the coordinator's node id once one is named.
fn find_coordinator(w: &mut Wire) -> Option<i32> {
    let req = FindCoordinatorRequest::default().with_key(s(GROUP)).with_key_type(0);
    let resp: FindCoordinatorResponse = w.call(ApiKey::FindCoordinator, 3, &req);
    (resp.error_code == 0 && resp.node_id.0 >= 0).then_some(resp.node_id.0)
}

/// OffsetCommit v8 of `offsets` (by partition) as a standalone commit (no membership, as
/// `Consumer.commit(offsets=...)` without a subscription): the first non-zero error, or 0.
fn commit(w: &mut Wire, offsets: &[i64]) -> i16 {
    let parts = offsets
        .iter()
        .zip(0..)
        .map(|(o, p)| {
            OffsetCommitRequestPartition::default()
                .with_partition_index(p)
                .with_committed_offset(*o)
                .with_committed_metadata(Some(s("")))
        })
        .collect();
    let topic =
        OffsetCommitRequestTopic::default().with_name(TopicName(s(TOPIC))).with_partitions(parts);
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(s(""))
        .with_topics(vec![topic]);
    let resp: OffsetCommitResponse = w.call(ApiKey::OffsetCommit, 8, &req);
    resp.topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.error_code)
        .find(|c| *c != 0)
        .unwrap_or(0)
}

/// OffsetFetch v8 of every committed offset of GROUP (topics null): `Err(code)` or the
/// offsets of TOPIC by partition.
fn fetch_all(w: &mut Wire) -> Result<BTreeMap<i32, i64>, i16> {
    let group =
        OffsetFetchRequestGroup::default().with_group_id(GroupId(s(GROUP))).with_topics(None);
    let req = OffsetFetchRequest::default().with_groups(vec![group]);
    let resp: OffsetFetchResponse = w.call(ApiKey::OffsetFetch, 8, &req);
    let g = resp.groups.first().ok_or(-1i16)?;
    if g.error_code != 0 {
        return Err(g.error_code);
    }
    let mut out = BTreeMap::new();
    for t in g.topics.iter().filter(|t| t.name.0.as_str() == TOPIC) {
        for p in &t.partitions {
            if p.error_code != 0 {
                return Err(p.error_code);
            }
            out.insert(p.partition_index, p.committed_offset);
        }
    }
    Ok(out)
}

fn expected(offsets: &[i64]) -> BTreeMap<i32, i64> {
    (0..).zip(offsets.iter().copied()).collect()
}

/// Commits `offsets` through the coordinator (retrying the coordinator's retriable errors,
/// bounded); returns its node id. (`Cluster::wait_for` retries a panicking check, so a
/// failure leaves the check as a value and is asserted outside.)
fn commit_through_coordinator(c: &Cluster, offsets: &[i64]) -> i32 {
    let outcome = c.wait_for(LIMIT, "an acknowledged OffsetCommit", |w| {
        let node = find_coordinator(w)?;
        let (_, b) = c.running().find(|(i, _)| c.nodes[*i].id == node)?;
        let mut cw = Wire::try_connect(&b.addr)?;
        match commit(&mut cw, offsets) {
            0 => Some(Ok(node)),
            code if RETRIABLE.contains(&code) => None,
            code => Some(Err(format!("OffsetCommit to node {node} refused: error {code}"))),
        }
    });
    outcome.unwrap_or_else(|e| panic!("{e}"))
}

/// Polls OffsetFetch on every survivor (kept connections, every `POLL`) until one serves
/// the group, so the new coordinator is asked from the moment it takes over, loading window
/// included; every error-free answer on the way must be `want` (a non-coordinator answers
/// NOT_COORDINATOR, a loading one COORDINATOR_LOAD_IN_PROGRESS). Then FindCoordinator must
/// name that node. Returns the serving node and the answers seen (by error code, 0 = served).
fn offsets_after_kill(c: &Cluster, want: &[i64]) -> (i32, BTreeMap<i16, u32>) {
    let mut seen: BTreeMap<i16, u32> = BTreeMap::new();
    let mut conns: BTreeMap<i32, Wire> = BTreeMap::new();
    let deadline = Instant::now() + LIMIT;
    let served = 'poll: loop {
        for (i, b) in c.running() {
            let node = c.nodes[i].id;
            let w = match conns.entry(node) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    let Some(w) = Wire::try_connect(&b.addr) else { continue };
                    e.insert(w)
                }
            };
            let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fetch_all(w)));
            let Ok(answer) = answer else {
                conns.remove(&node);
                continue;
            };
            *seen.entry(answer.as_ref().err().copied().unwrap_or(0)).or_default() += 1;
            match answer {
                Ok(got) if got == expected(want) => break 'poll node,
                Ok(got) => panic!("node {node} served {got:?}, committed {want:?}; seen {seen:?}"),
                Err(code) if RETRIABLE.contains(&code) => {}
                Err(code) => panic!("OffsetFetch from node {node}: error {code}; seen {seen:?}"),
            }
        }
        assert!(Instant::now() < deadline, "no coordinator served the group: {seen:?}");
        std::thread::sleep(POLL);
    };
    c.wait_for(LIMIT, "FindCoordinator naming the serving node", |w| {
        (find_coordinator(w) == Some(served)).then_some(())
    });
    (served, seen)
}

#[test]
fn committed_offsets_survive_coordinator_sigkills() {
    let mut c = start_cluster();
    c.wait_for(LIMIT, "three registered brokers", |w| {
        (metadata(w).brokers.len() == 3).then_some(())
    });
    c.wait_for(LIMIT, "CreateTopics", |w| {
        let config = CreatableTopicConfig::default()
            .with_name(s("min.insync.replicas"))
            .with_value(Some(s("2")));
        let t = CreatableTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_num_partitions(PARTITIONS)
            .with_replication_factor(3)
            .with_configs(vec![config]);
        let req = CreateTopicsRequest::default().with_topics(vec![t]).with_timeout_ms(10_000);
        let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 5, &req);
        matches!(resp.topics[0].error_code, 0 | 36).then_some(())
    });
    // The first FindCoordinator creates __consumer_offsets: RF min(3, brokers) = 3.
    c.wait_for(LIMIT, "FindCoordinator", find_coordinator);
    let (count, rf) = c.wait_for(LIMIT, "__consumer_offsets in Metadata", |w| {
        let m = metadata(w);
        let t = m
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == OFFSETS_TOPIC))?;
        Some((i32::try_from(t.partitions.len()).ok()?, t.partitions.first()?.replica_nodes.len()))
    });
    assert_eq!(rf, 3, "offsets.topic.replication.factor 3 with three brokers");
    let offsets_partition = shardlog::group::placement::partition_for(GROUP, count);

    // Kill 1: the coordinator that took the commit.
    let first = [100, 101, 102];
    let victim = commit_through_coordinator(&c, &first);
    let killed = Instant::now();
    c.kill(c.index_of(victim));
    let (successor, seen) = offsets_after_kill(&c, &first);
    eprintln!(
        "[group-failover] broker {victim} killed: broker {successor} served the offsets after \
         {:?}; answers by error code {seen:?}",
        killed.elapsed()
    );

    // The new coordinator takes commits; the first broker comes back and catches up.
    let second = [200, 201, 202];
    let coordinator = commit_through_coordinator(&c, &second);
    assert_eq!(coordinator, successor, "the coordinator stays put while nothing dies");
    c.start_node(c.index_of(victim));
    let rejoined = Instant::now();
    c.wait_for(LIMIT, "the offsets partition's full ISR", |w| {
        let (_, replicas, isr) = partition_state(&metadata(w), OFFSETS_TOPIC, offsets_partition)?;
        (replicas == 3 && isr == 3).then_some(())
    });
    eprintln!("[group-failover] broker {victim} back in the ISR after {:?}", rejoined.elapsed());

    // Kill 2: the second coordinator; the survivors (the restarted broker among them) serve
    // the second commit, never the first.
    let killed = Instant::now();
    c.kill(c.index_of(successor));
    let (third, seen) = offsets_after_kill(&c, &second);
    eprintln!(
        "[group-failover] broker {successor} killed: broker {third} served the offsets after \
         {:?}; answers by error code {seen:?}",
        killed.elapsed()
    );
}
