//! The leader's replica-fetch path at the partition level (`partition::replica_fetch`), on
//! the in-memory file system: a partition with replicas [1, 2, 3] led by 1, followers 2 and
//! 3 fetching into their own logs with `append_replicated`. The cluster wiring (placement of
//! replicas on other brokers) is not there yet, so this is where the positive path is tested;
//! `replication_wire` checks the refusal on a real broker.

use std::path::Path;
use std::rc::Rc;

use shardlog::io::mem::MemFileSystem;
use shardlog::io::run_local;
use shardlog::partition::leader::Replication;
use shardlog::partition::replica_fetch::{
    serve_replica_fetch, ReplicaFetchError, ReplicaFetchRequest,
};
use shardlog::partition::replicas::{AckState, LeaderReplicas, ReplicaError, ReplicaSettings};
use shardlog::storage::records::build_simple_batch;
use shardlog::storage::{BatchCache, LogConfig, PartitionLog, StorageError};
use shardlog::types::{Epoch, NodeId, Offset};

type Log = PartitionLog<MemFileSystem>;

const T0: i64 = 1_000_000;

async fn open(fs: &Rc<MemFileSystem>, dir: &str) -> Log {
    let cfg = LogConfig { timestamp_after_max_ms: i64::MAX, ..LogConfig::default() };
    PartitionLog::open(fs.clone(), Path::new(dir), cfg, Rc::new(BatchCache::new(1 << 20)))
        .await
        .unwrap()
}

fn nodes(ids: &[i32]) -> Vec<NodeId> {
    ids.iter().map(|i| NodeId(*i)).collect()
}

fn three_replicas(min_isr: i32) -> Replication {
    let settings = ReplicaSettings { lag_time_max_ms: 30_000, min_insync_replicas: min_isr };
    let ids = nodes(&[1, 2, 3]);
    Replication::new(LeaderReplicas::new(
        NodeId(1),
        Epoch(1),
        Offset(0),
        &ids,
        &ids,
        Offset(0),
        settings,
        T0,
    ))
}

fn req(replica: i32, fetch_offset: i64, last_fetched_epoch: i32) -> ReplicaFetchRequest {
    ReplicaFetchRequest {
        replica: NodeId(replica),
        broker_epoch: 7,
        fetch_offset: Offset(fetch_offset),
        last_fetched_epoch: Epoch(last_fetched_epoch),
        max_bytes: 1 << 20,
        epoch_given: true,
    }
}

async fn produce(leader: &Log, n: usize) -> Offset {
    let mut last = Offset(-1);
    for _ in 0..n {
        last =
            leader.append(build_simple_batch(2, 50, 100), Epoch(1), 0).await.unwrap().last_offset;
    }
    leader.wait_committed(last).await.unwrap();
    last.next()
}

/// One fetch round of follower `id` into its log; returns the high watermark answered.
async fn follow(leader: &Log, repl: &Replication, id: i32, follower: &Log) -> Offset {
    let epoch = follower.latest_epoch().map_or(-1, |e| e.0);
    let r = req(id, follower.log_end_offset().0, epoch);
    let answer = serve_replica_fetch(leader, repl, &r, T0).await.unwrap();
    assert_eq!(answer.diverging_epoch, None);
    let info = follower.append_replicated(answer.records.to_bytes(), T0).await.unwrap();
    if let Some(last) = info.last_offset {
        follower.wait_committed(last).await.unwrap();
    }
    answer.high_watermark
}

async fn whole(log: &Log) -> bytes::Bytes {
    log.read(Offset(0), 1 << 22, log.log_end_offset()).await.unwrap()
}

#[test]
fn followers_get_data_past_the_high_watermark_and_move_it() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let leader = open(&fs, "/l/t-0").await;
        let (f2, f3) = (open(&fs, "/f2/t-0").await, open(&fs, "/f3/t-0").await);
        let repl = three_replicas(2);
        let end = produce(&leader, 3).await;
        // Consumers see nothing yet: the followers hold nothing.
        assert_eq!(repl.high_watermark(&leader, T0), Offset(0));
        assert_eq!(repl.ack_state(&leader, end, T0), Ok(AckState::Waiting));
        // Follower 2 reads up to the log end, not the high watermark.
        assert_eq!(follow(&leader, &repl, 2, &f2).await, Offset(0));
        assert_eq!(f2.log_end_offset(), end);
        assert_eq!(follow(&leader, &repl, 3, &f3).await, Offset(0));
        // Their next fetches report the log end: the ISR minimum reaches it.
        follow(&leader, &repl, 2, &f2).await;
        let hw = follow(&leader, &repl, 3, &f3).await;
        assert_eq!(hw, end);
        assert_eq!(repl.ack_state(&leader, end, T0), Ok(AckState::Done));
        assert_eq!(whole(&f2).await, whole(&leader).await);
        assert_eq!(whole(&f3).await, whole(&leader).await);
    });
}

#[test]
fn refusals_follow_kafka() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let leader = open(&fs, "/l/t-0").await;
        let repl = three_replicas(2);
        let end = produce(&leader, 2).await;
        // Not a replica: UNKNOWN_LEADER_EPOCH with a leader epoch, else NOT_LEADER_OR_FOLLOWER.
        let err = serve_replica_fetch(&leader, &repl, &req(9, 0, -1), T0).await.unwrap_err();
        assert!(matches!(err, ReplicaFetchError::Replica(ReplicaError::NotReplica { .. })));
        let ReplicaFetchError::Replica(e) = err else { unreachable!() };
        assert_eq!(e.kafka_code(), 75);
        let old = ReplicaFetchRequest { epoch_given: false, ..req(9, 0, -1) };
        let ReplicaFetchError::Replica(e) =
            serve_replica_fetch(&leader, &repl, &old, T0).await.unwrap_err()
        else {
            panic!("expected a replica error")
        };
        assert_eq!(e.kafka_code(), 6);
        // A follower ahead of the leader in the same epoch gets the diverging epoch, no data.
        let ahead = serve_replica_fetch(&leader, &repl, &req(2, end.0 + 3, 1), T0).await.unwrap();
        assert_eq!(ahead.diverging_epoch, Some((1, end.0)));
        assert!(ahead.records.is_empty());
        assert!(repl.with(|r| r.follower(NodeId(2)).unwrap().log_end) < Offset(0));
        // Without an epoch, an offset past the log end is out of range.
        let oor = serve_replica_fetch(&leader, &repl, &req(2, end.0 + 3, -1), T0).await;
        assert!(matches!(
            oor,
            Err(ReplicaFetchError::Storage(StorageError::OffsetOutOfRange { .. }))
        ));
        // A stale broker epoch after a newer one: NOT_LEADER_OR_FOLLOWER.
        serve_replica_fetch(&leader, &repl, &req(2, 0, -1), T0).await.unwrap();
        let stale = ReplicaFetchRequest { broker_epoch: 3, ..req(2, 0, -1) };
        let ReplicaFetchError::Replica(e) =
            serve_replica_fetch(&leader, &repl, &stale, T0).await.unwrap_err()
        else {
            panic!("expected a replica error")
        };
        assert_eq!(e.kafka_code(), 6);
    });
}

#[test]
fn a_single_replica_behaves_as_before() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let leader = open(&fs, "/l/t-0").await;
        let repl = Replication::single(NodeId(1), Epoch(0));
        assert!(!repl.has_followers());
        let end = produce(&leader, 2).await;
        assert_eq!(repl.high_watermark(&leader, T0), leader.committed_offset());
        assert_eq!(repl.high_watermark(&leader, T0), end);
        assert!(repl.check_produce().is_ok());
        assert_eq!(repl.ack_state(&leader, end, T0), Ok(AckState::Done));
    });
}

/// acks=all on a partition with followers: answered once the followers' fetches carry the
/// high watermark past the batch; REQUEST_TIMED_OUT at the request's bound when they do not;
/// NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrinks below min.insync.replicas.
#[test]
fn acks_all_waits_for_the_isr_with_a_bound() {
    use kafka_protocol::error::ResponseError;
    use shardlog::partition::replica::PartitionReplica;
    use shardlog::sync::Notify;
    use std::cell::Cell;

    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let (f2, f3) = (open(&fs, "/f2/t-0").await, open(&fs, "/f3/t-0").await);
        let waiter = PartitionReplica {
            log: Rc::new(open(&fs, "/l/t-0").await),
            leader_epoch: Cell::new(Epoch(1)),
            is_leader: Cell::new(true),
            follower_hw: Rc::new(Cell::new(Offset(0))),
            hw_changed: Notify::new(),
            replication: three_replicas(2),
        };
        let (leader, repl, hw_changed) = (&*waiter.log, &waiter.replication, &waiter.hw_changed);
        let end = produce(leader, 2).await;
        let started = std::time::Instant::now();
        let Err(err) = waiter.wait_acks_at(Epoch(1), end, 50, || T0).await else {
            panic!("no timeout")
        };
        assert_eq!(err.code, ResponseError::RequestTimedOut);
        let waited = started.elapsed();
        assert!(waited >= std::time::Duration::from_millis(50));
        eprintln!("[figure] acks=all timeout 50 ms answered after {waited:?}");
        let fetches = async {
            for _ in 0..2 {
                follow(leader, repl, 2, &f2).await;
                hw_changed.notify_all();
                follow(leader, repl, 3, &f3).await;
                hw_changed.notify_all();
            }
        };
        let started = std::time::Instant::now();
        let (acked, ()) =
            futures::join!(waiter.wait_acks_at(Epoch(1), end, 10_000, || T0), fetches);
        assert!(acked.is_ok(), "acks=all answered OK");
        eprintln!("[figure] acks=all with two in-process followers: {:?}", started.elapsed());
        // The ISR shrinks to the leader alone while a produce waits: below
        // min.insync.replicas the high watermark is frozen (KIP-966), so the produce is never
        // acknowledged by the leader alone and times out, as Kafka 4.1's DelayedProduce.
        let end2 = produce(leader, 1).await;
        repl.with(|r| r.apply_isr(&nodes(&[1])));
        let Err(err) = waiter.wait_acks_at(Epoch(1), end2, 1000, || T0 + 31_000).await else {
            panic!("acked")
        };
        assert_eq!(err.code, ResponseError::RequestTimedOut);
        // A leader demoted while its batch waits is refused at once, whatever the ISR says.
        waiter.is_leader.set(false);
        let Err(err) = waiter.wait_acks_at(Epoch(1), end, 1000, || T0).await else {
            panic!("a demoted leader acknowledged")
        };
        assert_eq!(err.code, ResponseError::NotLeaderOrFollower);
        assert_eq!(repl.check_produce().unwrap_err().kafka_code(), 19);
    });
}
