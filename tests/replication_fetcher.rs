//! The follower fetcher (`replication::fetcher` + `replication::driver`) against a leader in
//! the same process, at the partition level: the leader is a real `PartitionLog` with its
//! `Replication` state (replicas [1, 2]) answering through `serve_replica_fetch`, the link
//! adds the leader-epoch check the broker makes. (A real broker refuses replica id 2 until
//! the cluster work places replicas on other brokers; see `replication_wire`.)
//! Checked: byte-identical logs, producer state and epoch cache on the follower, the high
//! watermark moving on both sides, truncation on a diverging epoch after a leader change,
//! NOT_LEADER_OR_FOLLOWER parking a partition until new metadata, and a follower whose
//! leader's log starts past its end restarting there (inside a batch).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use shardlog::io::mem::MemFileSystem;
use shardlog::io::run_local;
use shardlog::partition::leader::Replication;
use shardlog::partition::replica_fetch::{serve_replica_fetch, to_reply, ReplicaFetchRequest};
use shardlog::partition::replicas::{IsrChange, LeaderReplicas, ReplicaSettings};
use shardlog::replication::driver::{
    fetch_round, fetch_round_assigned, FollowerLog, LeaderLink, LinkError,
};
use shardlog::replication::fetcher::{
    FetchPlan, Fetcher, FetcherConfig, PartitionReply, PartitionState,
};
use shardlog::storage::batch::recompute_crc;
use shardlog::storage::records::build_simple_batch;
use shardlog::storage::{BatchCache, LogConfig, PartitionLog};
use shardlog::types::{Epoch, NodeId, Offset, TopicPartition};
use uuid::Uuid;

type Log = PartitionLog<MemFileSystem>;

const T0: i64 = 1_000_000;

struct InProcessLeader {
    log: Rc<Log>,
    replication: Replication,
    epoch: Cell<Epoch>,
    /// The next fetch answers this error code instead (fault injection).
    fail_next: Cell<Option<i16>>,
}

impl LeaderLink for InProcessLeader {
    async fn fetch(
        &self,
        plan: &FetchPlan,
    ) -> Result<Vec<(TopicPartition, PartitionReply)>, LinkError> {
        let mut out = Vec::new();
        for p in &plan.partitions {
            let fail = |code| PartitionReply { error_code: code, ..PartitionReply::default() };
            if let Some(code) = self.fail_next.take() {
                out.push((p.tp.clone(), fail(code)));
                continue;
            }
            if p.current_leader_epoch != self.epoch.get() {
                let code = if p.current_leader_epoch < self.epoch.get() { 74 } else { 75 };
                out.push((p.tp.clone(), fail(code)));
                continue;
            }
            let req = ReplicaFetchRequest {
                replica: plan.replica,
                broker_epoch: plan.broker_epoch,
                fetch_offset: p.fetch_offset,
                last_fetched_epoch: p.last_fetched_epoch,
                max_bytes: usize::try_from(plan.partition_max_bytes).unwrap(),
                epoch_given: true,
            };
            let reply = to_reply(serve_replica_fetch(&self.log, &self.replication, &req, T0).await);
            out.push((p.tp.clone(), reply));
        }
        Ok(out)
    }

    async fn log_offsets(&self, _tp: &TopicPartition) -> Result<(Offset, Offset), LinkError> {
        Ok((self.log.log_start_offset(), self.log.log_end_offset()))
    }
}

async fn open(fs: &Rc<MemFileSystem>, dir: &str) -> Rc<Log> {
    let cfg = LogConfig {
        timestamp_after_max_ms: i64::MAX,
        segment_bytes: 256 * 1024,
        ..LogConfig::default()
    };
    let cache = Rc::new(BatchCache::new(8 << 20));
    Rc::new(PartitionLog::open(fs.clone(), std::path::Path::new(dir), cfg, cache).await.unwrap())
}

fn leader_state(epoch: i32, epoch_start: Offset) -> LeaderReplicas {
    let ids = [NodeId(1), NodeId(2)];
    let settings = ReplicaSettings { lag_time_max_ms: 30_000, min_insync_replicas: 2 };
    LeaderReplicas::new(NodeId(1), Epoch(epoch), epoch_start, &ids, &ids, Offset(0), settings, T0)
}

/// An idempotent batch of producer 77 with `seq` as its first sequence.
fn idempotent(count: usize, value_bytes: usize, seq: i32) -> Bytes {
    let mut b = build_simple_batch(count, value_bytes, 100).to_vec();
    b[43..51].copy_from_slice(&77i64.to_be_bytes());
    b[51..53].copy_from_slice(&0i16.to_be_bytes());
    b[53..57].copy_from_slice(&seq.to_be_bytes());
    recompute_crc(&mut b);
    b.into()
}

async fn produce(leader: &Log, batches: usize, records: usize, value_bytes: usize, epoch: i32) {
    let seq0 = leader.producers().first().map_or(0, |(_, e)| e.last_seq() + 1);
    let mut last = Offset(0);
    for i in 0..batches {
        let seq = seq0 + i32::try_from(i * records).unwrap();
        let b = idempotent(records, value_bytes, seq);
        last = leader.append(b, Epoch(epoch), 0).await.unwrap().last_offset;
    }
    leader.wait_committed(last).await.unwrap();
}

async fn whole(log: &Log) -> Bytes {
    log.read(log.log_start_offset(), usize::MAX / 2, log.log_end_offset()).await.unwrap()
}

/// Rounds until a round changes nothing; returns (rounds, truncations).
async fn catch_up(
    fetcher: &mut Fetcher,
    logs: &BTreeMap<TopicPartition, FollowerLog<MemFileSystem>>,
    leader: &InProcessLeader,
) -> (usize, usize) {
    let (mut rounds, mut truncations) = (0, 0);
    for _ in 0..10_000 {
        let Some(stats) = fetch_round(fetcher, logs, leader, T0).await.unwrap() else { break };
        rounds += 1;
        truncations += stats.truncations;
        if stats.appended_batches == 0 && stats.truncations == 0 {
            break;
        }
    }
    (rounds, truncations)
}

async fn assert_same(leader: &Log, follower: &Log) {
    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
    assert_eq!(follower.log_start_offset(), leader.log_start_offset());
    assert_eq!(whole(follower).await, whole(leader).await, "byte-identical batches");
    assert_eq!(follower.producers(), leader.producers(), "producer state");
    assert_eq!(follower.epoch_entries(), leader.epoch_entries(), "leader-epoch cache");
}

fn tp() -> TopicPartition {
    TopicPartition::new("r", 0)
}

#[test]
fn follower_replicates_moves_the_high_watermark_and_truncates_on_divergence() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let leader = InProcessLeader {
            log: open(&fs, "/leader/r-0").await,
            replication: Replication::new(leader_state(1, Offset(0))),
            epoch: Cell::new(Epoch(1)),
            fail_next: Cell::new(None),
        };
        let follower_log = open(&fs, "/follower/r-0").await;
        let logs: BTreeMap<_, _> = [(tp(), FollowerLog::new(follower_log.clone()))].into();
        let mut fetcher = Fetcher::new(FetcherConfig::new(NodeId(2), 5), NodeId(1));
        fetcher.add_partition(tp(), Uuid::new_v4(), Epoch(1)).unwrap();

        // Measured, not asserted: a catch-up of ~8 MiB in 1 KiB records.
        produce(&leader.log, 2000, 4, 1024, 1).await;
        assert_eq!(leader.replication.high_watermark(&leader.log, T0), Offset(0));
        let started = Instant::now();
        let (rounds, _) = catch_up(&mut fetcher, &logs, &leader).await;
        let secs = started.elapsed().as_secs_f64();
        let bytes = whole(&leader.log).await.len();
        eprintln!(
            "[figure] in-process catch-up: {bytes} bytes in {rounds} rounds, {secs:.3} s, \
             {:.0} MiB/s (debug build, in-memory fs)",
            bytes as f64 / secs / (1 << 20) as f64
        );
        assert_same(&leader.log, &follower_log).await;
        let end = leader.log.log_end_offset();
        // The follower's last fetch reported the leader's log end: the ISR holds it all.
        assert_eq!(leader.replication.high_watermark(&leader.log, T0), end);
        assert_eq!(logs[&tp()].high_watermark.get(), end);

        // The follower picked up records of epoch 1 that the next leader never got.
        for _ in 0..3 {
            let b = build_simple_batch(2, 10, 100);
            follower_log.append(b, Epoch(1), 0).await.unwrap();
        }
        follower_log.flush().await.unwrap();
        // Leader epoch 2 (same leader, as after a re-election), with new data.
        leader.epoch.set(Epoch(2));
        leader.replication.sync(
            NodeId(1),
            Epoch(2),
            end,
            &[NodeId(1), NodeId(2)],
            &[NodeId(1), NodeId(2)],
            end,
            ReplicaSettings::default(),
            T0,
        );
        leader.log.assign_epoch_start(Epoch(2)).await.unwrap();
        produce(&leader.log, 3, 2, 100, 2).await;
        // The fetcher still names epoch 1: fenced, parked until the metadata changes.
        fetch_round(&mut fetcher, &logs, &leader, T0).await.unwrap();
        let state = fetcher.partition(&tp()).unwrap().state;
        assert!(matches!(state, PartitionState::AwaitingMetadata { .. }), "{state:?}");
        assert!(fetch_round(&mut fetcher, &logs, &leader, T0).await.unwrap().is_none());
        fetcher.add_partition(tp(), fetcher.partition(&tp()).unwrap().topic_id, Epoch(2)).unwrap();
        let (_, truncations) = catch_up(&mut fetcher, &logs, &leader).await;
        assert!(truncations >= 1, "the diverging epoch made the follower truncate");
        assert_same(&leader.log, &follower_log).await;
        assert_eq!(logs[&tp()].high_watermark.get(), leader.log.log_end_offset());
    });
}

#[test]
fn fenced_epoch_parks_the_partition_until_new_metadata() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let leader = InProcessLeader {
            log: open(&fs, "/leader/r-0").await,
            replication: Replication::new(leader_state(1, Offset(0))),
            epoch: Cell::new(Epoch(1)),
            fail_next: Cell::new(Some(74)),
        };
        produce(&leader.log, 3, 2, 10, 1).await;
        let follower_log = open(&fs, "/follower/r-0").await;
        let logs: BTreeMap<_, _> = [(tp(), FollowerLog::new(follower_log.clone()))].into();
        let mut fetcher = Fetcher::new(FetcherConfig::new(NodeId(2), 5), NodeId(1));
        fetcher.metadata_changed(4);
        fetcher.add_partition(tp(), Uuid::new_v4(), Epoch(1)).unwrap();
        fetch_round(&mut fetcher, &logs, &leader, T0).await.unwrap();
        assert!(fetch_round(&mut fetcher, &logs, &leader, T0 + 60_000).await.unwrap().is_none());
        fetcher.metadata_changed(4);
        assert!(fetch_round(&mut fetcher, &logs, &leader, T0).await.unwrap().is_none());
        fetcher.metadata_changed(5);
        catch_up(&mut fetcher, &logs, &leader).await;
        assert_same(&leader.log, &follower_log).await;
        // Any other error, NOT_LEADER_OR_FOLLOWER included (the leader may not have applied
        // its image yet), delays by the backoff only.
        for code in [56, 6] {
            leader.fail_next.set(Some(code));
            fetch_round(&mut fetcher, &logs, &leader, T0).await.unwrap();
            assert!(fetch_round(&mut fetcher, &logs, &leader, T0 + 10).await.unwrap().is_none());
            let later = T0 + FetcherConfig::new(NodeId(2), 5).backoff_ms;
            assert!(fetch_round(&mut fetcher, &logs, &leader, later).await.unwrap().is_some());
        }
    });
}

#[test]
fn follower_restarts_at_the_leaders_log_start() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let leader = InProcessLeader {
            log: open(&fs, "/leader/r-0").await,
            replication: Replication::new(leader_state(1, Offset(0))),
            epoch: Cell::new(Epoch(1)),
            fail_next: Cell::new(None),
        };
        produce(&leader.log, 400, 4, 1000, 1).await;
        // DeleteRecords to an offset inside a batch (4 records per batch).
        leader.log.advance_log_start(Offset(1001)).await.unwrap();
        let follower_log = open(&fs, "/follower/r-0").await;
        let logs: BTreeMap<_, _> = [(tp(), FollowerLog::new(follower_log.clone()))].into();
        let mut fetcher = Fetcher::new(FetcherConfig::new(NodeId(2), 5), NodeId(1));
        fetcher.add_partition(tp(), Uuid::new_v4(), Epoch(1)).unwrap();
        catch_up(&mut fetcher, &logs, &leader).await;
        assert_eq!(follower_log.log_end_offset(), leader.log.log_end_offset());
        // The follower starts at the base of the batch holding the leader's log start.
        assert_eq!(follower_log.log_start_offset(), Offset(1000));
        let from = Offset(1001);
        let end = leader.log.log_end_offset();
        let l = leader.log.read(from, usize::MAX / 2, end).await.unwrap();
        let f = follower_log.read(from, usize::MAX / 2, end).await.unwrap();
        assert_eq!(f, l);
    });
}

/// The long-running fetcher loop (`replication::task`) driven through its handle as the
/// coordinator will: add a partition, let it catch up while the leader keeps appending, new
/// metadata after a leadership error, stop.
#[test]
fn fetcher_task_follows_commands_and_stops() {
    use shardlog::replication::task::{run, Command, FetcherHandle};

    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let leader = InProcessLeader {
            log: open(&fs, "/leader/r-0").await,
            replication: Replication::new(leader_state(1, Offset(0))),
            epoch: Cell::new(Epoch(1)),
            fail_next: Cell::new(Some(74)),
        };
        produce(&leader.log, 20, 2, 100, 1).await;
        let follower_log = open(&fs, "/follower/r-0").await;
        let handle: Rc<FetcherHandle<MemFileSystem>> = Rc::new(FetcherHandle::default());
        let fetcher = Fetcher::new(FetcherConfig::new(NodeId(2), 5), NodeId(1));
        let add = Command::Add {
            tp: tp(),
            topic_id: Uuid::new_v4(),
            leader_epoch: Epoch(1),
            in_isr: true,
            log: follower_log.clone(),
            high_watermark: Rc::default(),
        };
        handle.send(add).map_err(|_| "queue full").unwrap();
        let driver = async {
            // The first answer is NOT_LEADER_OR_FOLLOWER: parked until new metadata.
            shardlog::shard::sleep(std::time::Duration::from_millis(20)).await;
            assert_eq!(follower_log.log_end_offset(), Offset(0));
            handle.send(Command::Metadata { version: 1 }).map_err(|_| "full").unwrap();
            for _ in 0..200 {
                if follower_log.log_end_offset() == leader.log.log_end_offset() {
                    break;
                }
                shardlog::shard::sleep(std::time::Duration::from_millis(5)).await;
            }
            produce(&leader.log, 5, 2, 100, 1).await;
            for _ in 0..200 {
                if follower_log.log_end_offset() == leader.log.log_end_offset() {
                    break;
                }
                shardlog::shard::sleep(std::time::Duration::from_millis(5)).await;
            }
            handle.stop();
        };
        let (stats, ()) = futures::join!(run(fetcher, handle.clone(), &leader, || T0), driver);
        assert_same(&leader.log, &follower_log).await;
        assert!(stats.appended_batches >= 2, "{stats:?}");
    });
}

/// A link that changes the follower's world while its Fetch is in flight: takes the
/// partition from the fetcher, or lets a second writer append to the follower's log.
struct MidFlight<'a> {
    leader: &'a InProcessLeader,
    assigned: &'a Cell<bool>,
    unassign: bool,
    append: Option<(Rc<Log>, Bytes)>,
}

impl LeaderLink for MidFlight<'_> {
    async fn fetch(
        &self,
        plan: &FetchPlan,
    ) -> Result<Vec<(TopicPartition, PartitionReply)>, LinkError> {
        let replies = self.leader.fetch(plan).await?;
        if self.unassign {
            self.assigned.set(false);
        }
        if let Some((log, batch)) = &self.append {
            log.append_replicated(batch.clone(), T0).await.unwrap();
        }
        Ok(replies)
    }

    async fn log_offsets(&self, tp: &TopicPartition) -> Result<(Offset, Offset), LinkError> {
        self.leader.log_offsets(tp).await
    }
}

#[test]
fn answers_that_went_stale_in_flight_are_dropped() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let leader = InProcessLeader {
            log: open(&fs, "/leader/r-0").await,
            replication: Replication::new(leader_state(1, Offset(0))),
            epoch: Cell::new(Epoch(1)),
            fail_next: Cell::new(None),
        };
        produce(&leader.log, 3, 2, 10, 1).await;
        let follower_log = open(&fs, "/follower/r-0").await;
        let logs: BTreeMap<_, _> = [(tp(), FollowerLog::new(follower_log.clone()))].into();
        let mut fetcher = Fetcher::new(FetcherConfig::new(NodeId(2), 5), NodeId(1));
        fetcher.add_partition(tp(), Uuid::new_v4(), Epoch(1)).unwrap();
        let assigned = Cell::new(true);
        let check = |_: &TopicPartition, epoch: Epoch| assigned.get() && epoch == Epoch(1);

        // The partition left this fetcher (a new leader, or this broker leads it now) while
        // the leader answered: nothing is written.
        let link = MidFlight { leader: &leader, assigned: &assigned, unassign: true, append: None };
        let stats = fetch_round_assigned(&mut fetcher, &logs, &link, T0, check).await.unwrap();
        assert_eq!(stats.unwrap().dropped, 1);
        assert_eq!(follower_log.log_end_offset(), Offset(0));

        // Another writer (a second fetcher) appended while the fetch was in flight: the
        // answer for offset 0 no longer fits the log and is dropped, not half-applied.
        assigned.set(true);
        let first = leader.log.read(Offset(0), 1, Offset(2)).await.unwrap();
        let append = Some((follower_log.clone(), first));
        let link = MidFlight { leader: &leader, assigned: &assigned, unassign: false, append };
        let stats = fetch_round_assigned(&mut fetcher, &logs, &link, T0, check).await.unwrap();
        assert_eq!(stats.unwrap().dropped, 1);
        assert_eq!(follower_log.log_end_offset(), Offset(2));

        // With nothing changing under it, the fetcher catches up from where the log ends.
        let link =
            MidFlight { leader: &leader, assigned: &assigned, unassign: false, append: None };
        for _ in 0..10 {
            fetch_round_assigned(&mut fetcher, &logs, &link, T0, check).await.unwrap();
        }
        assert_same(&leader.log, &follower_log).await;
    });
}

/// Appends records `from..to` to `log` at `epoch`, in batches of at most 1,000 records, and
/// returns the batches so another replica can hold the very same bytes.
async fn fill(log: &Log, from: i64, to: i64, epoch: i32) -> Vec<Bytes> {
    assert_eq!(log.log_end_offset(), Offset(from));
    let mut batches = Vec::new();
    let mut at = from;
    while at < to {
        let count = usize::try_from((to - at).min(1000)).unwrap();
        let b = build_simple_batch(count, 10, 100);
        log.append(b.clone(), Epoch(epoch), 0).await.unwrap();
        batches.push(b);
        at += i64::try_from(count).unwrap();
    }
    log.flush().await.unwrap();
    batches
}

/// Issue 41, from its evidence (`shared/evidence/2026-12-07-follower-truncation-loop`): node
/// 3 led epoch 3 for 0.2 s and appended the producer's retry as 15629-15631, a batch that the
/// leader holds stamped epoch 2 (same CRC); the leader's epoch 4 starts at 15632. The
/// follower's epoch cache is {0: 0, 2: 1737, 3: 15629}, the leader's {0: 0, 2: 1737,
/// 4: 15632, 5: 39126}. Kafka's rule (KIP-279) cuts the follower at its own end of epoch 2,
/// 15629, once; truncating to the leader's end of epoch 2 (15632) kept the epoch-3 batch and
/// diverged again on every fetch (21,992 truncations in 110 s).
#[test]
fn follower_that_led_an_unseen_epoch_truncates_once_catches_up_and_joins_the_isr() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let (me, follower) = (NodeId(1), NodeId(3));
        let settings = ReplicaSettings { lag_time_max_ms: 30_000, min_insync_replicas: 1 };
        let ids = [me, follower];
        let state =
            LeaderReplicas::new(me, Epoch(5), Offset(39126), &ids, &[me], Offset(0), settings, T0);
        let leader = InProcessLeader {
            log: open(&fs, "/node-1/p-2").await,
            replication: Replication::new(state),
            epoch: Cell::new(Epoch(5)),
            fail_next: Cell::new(None),
        };
        let follower_log = open(&fs, "/node-3/p-2").await;
        for b in fill(&leader.log, 0, 1737, 0).await {
            follower_log.append(b, Epoch(0), 0).await.unwrap();
        }
        for b in fill(&leader.log, 1737, 15629, 2).await {
            follower_log.append(b, Epoch(2), 0).await.unwrap();
        }
        let retry = fill(&leader.log, 15629, 15632, 2).await;
        follower_log.append(retry[0].clone(), Epoch(3), 0).await.unwrap();
        follower_log.flush().await.unwrap();
        fill(&leader.log, 15632, 39126, 4).await;
        fill(&leader.log, 39126, 39200, 5).await;
        let epochs = |l: &Log| l.epoch_entries().iter().map(|(e, o)| (e.0, o.0)).collect();
        let leader_epochs: Vec<(i32, i64)> = epochs(&leader.log);
        assert_eq!(leader_epochs, [(0, 0), (2, 1737), (4, 15632), (5, 39126)]);
        let follower_epochs: Vec<(i32, i64)> = epochs(&follower_log);
        assert_eq!(follower_epochs, [(0, 0), (2, 1737), (3, 15629)]);
        let end = leader.log.log_end_offset();
        assert_eq!(leader.replication.high_watermark(&leader.log, T0), end);

        let logs: BTreeMap<_, _> = [(tp(), FollowerLog::new(follower_log.clone()))].into();
        let mut fetcher = Fetcher::new(FetcherConfig::new(follower, 5), me);
        fetcher.add_partition(tp(), Uuid::new_v4(), Epoch(5)).unwrap();
        // First round: the leader reports the divergence (epoch 2 ends at 15632 on its log);
        // the follower's own epoch 2 ends at 15629, so that is where it cuts.
        let first = fetch_round(&mut fetcher, &logs, &leader, T0).await.unwrap().unwrap();
        assert_eq!((first.truncations, first.appended_batches), (1, 0));
        assert_eq!(follower_log.log_end_offset(), Offset(15629));
        let follower_epochs: Vec<(i32, i64)> = epochs(&follower_log);
        assert_eq!(follower_epochs, [(0, 0), (2, 1737)], "the epoch-3 entry goes with its batch");
        let (_, truncations) = catch_up(&mut fetcher, &logs, &leader).await;
        assert_eq!(truncations, 0, "one truncation was enough");
        assert_same(&leader.log, &follower_log).await;
        // Caught up to the high watermark and past the epoch's start: the leader adds it.
        let change = leader.replication.with(|r| r.isr_change(end, T0, |_| true));
        let expected = IsrChange::Expand { add: follower, new_isr: vec![me, follower] };
        assert_eq!(change, Some(expected));
    });
}
