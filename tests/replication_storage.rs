//! Property test: a leader log and a follower log on the in-memory file system. The leader
//! appends (plain and idempotent batches), loses a suffix and moves to a new leader epoch
//! (as a new leader whose log is shorter would); the follower fetches with Kafka's Fetch v12+
//! rules (last fetched epoch → diverging epoch → truncation point), appends with
//! `append_replicated`, and is sometimes crashed and reopened. At the end, after the follower
//! caught up, both logs hold byte-identical batches, the same leader-epoch cache and the same
//! producer state, and they still do after the follower reopens from its files.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::Bytes;
use proptest::prelude::*;
use shardlog::io::mem::MemFileSystem;
use shardlog::io::run_local;
use shardlog::replication::truncation::{diverging_epoch, leader_answer, truncation_point};
use shardlog::storage::batch::recompute_crc;
use shardlog::storage::records::build_simple_batch;
use shardlog::storage::{BatchCache, LogConfig, PartitionLog, StorageError};
use shardlog::types::{Epoch, Offset};

type Log = PartitionLog<MemFileSystem>;

#[derive(Clone, Debug)]
enum Op {
    Append { count: usize, value_bytes: usize, producer: Option<u8> },
    Fetch { max_bytes: usize, cut: bool },
    NewLeaderEpoch { keep: f64 },
    CrashFollower,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1usize..5, 0usize..900, prop::option::of(0u8..3))
            .prop_map(|(count, value_bytes, producer)| Op::Append { count, value_bytes, producer }),
        5 => (1usize..8000, any::<bool>()).prop_map(|(max_bytes, cut)| Op::Fetch { max_bytes, cut }),
        1 => (0.0f64..1.0).prop_map(|keep| Op::NewLeaderEpoch { keep }),
        1 => Just(Op::CrashFollower),
    ]
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 * 1024,
        index_interval_bytes: 700,
        timestamp_after_max_ms: i64::MAX,
        ..LogConfig::default()
    }
}

async fn open(fs: &Rc<MemFileSystem>, dir: &Path) -> Log {
    PartitionLog::open(fs.clone(), dir, config(), Rc::new(BatchCache::new(64 * 1024)))
        .await
        .expect("open")
}

/// A batch of producer `1000 + p` continuing that producer's sequence on the leader.
fn producer_batch(leader: &Log, p: u8, count: usize, value_bytes: usize) -> Bytes {
    let id = 1000 + i64::from(p);
    let next_seq = leader
        .producers()
        .into_iter()
        .find(|(pid, _)| *pid == id)
        .map_or(0, |(_, e)| e.last_seq() + 1);
    let mut b = build_simple_batch(count, value_bytes, 100).to_vec();
    b[43..51].copy_from_slice(&id.to_be_bytes());
    b[51..53].copy_from_slice(&0i16.to_be_bytes());
    b[53..57].copy_from_slice(&next_seq.to_be_bytes());
    recompute_crc(&mut b);
    b.into()
}

/// One follower fetch round; returns whether it changed the follower's log.
async fn fetch_once(leader: &Log, follower: &Log, max_bytes: usize, cut: bool) -> bool {
    let fetch_offset = follower.log_end_offset();
    if let Some(last) = follower.latest_epoch() {
        let end_for = |e| leader.end_offset_for_epoch(e);
        if let Some((e, o)) = diverging_epoch(end_for, last, fetch_offset) {
            let t = truncation_point(
                leader_answer(e, o),
                |e| follower.end_offset_for_epoch(e),
                fetch_offset,
                Offset(0),
            );
            follower.truncate_to(t.offset).await.unwrap();
            return true;
        }
    }
    let leader_end = leader.log_end_offset();
    if fetch_offset >= leader_end {
        return false;
    }
    let mut data = leader.read(fetch_offset, max_bytes, leader_end).await.unwrap();
    if cut && data.len() > 70 {
        data = data.slice(..data.len() - 13);
    }
    let info = follower.append_replicated(data, 0).await.unwrap();
    if let Some(last) = info.last_offset {
        assert!(follower.durable_offset() <= follower.log_end_offset());
        follower.wait_committed(last).await.unwrap();
        assert_eq!(follower.durable_offset(), follower.log_end_offset());
    }
    info.batches > 0
}

async fn whole(log: &Log) -> Bytes {
    let end = log.log_end_offset();
    log.read(log.log_start_offset(), usize::MAX / 2, end).await.unwrap()
}

async fn assert_same(leader: &Log, follower: &Log) {
    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
    assert_eq!(whole(follower).await, whole(leader).await, "byte-identical batches");
    // A leader's epoch recorded before its first append covers no batch yet: a follower
    // learns epochs from batches only (as in Kafka).
    let end = leader.log_end_offset();
    let mut held = leader.epoch_entries();
    held.retain(|(_, start)| *start < end);
    assert_eq!(follower.epoch_entries(), held, "leader-epoch cache");
    assert_eq!(follower.producers(), leader.producers(), "producer state");
}

async fn run(ops: Vec<Op>) {
    let leader_fs = Rc::new(MemFileSystem::new());
    let mut follower_fs = Rc::new(MemFileSystem::new());
    let dir = PathBuf::from("/data/t-0");
    let leader = open(&leader_fs, &dir).await;
    let mut follower = open(&follower_fs, &dir).await;
    let mut epoch = Epoch(1);
    for op in ops {
        match op {
            Op::Append { count, value_bytes, producer } => {
                let b = match producer {
                    Some(p) => producer_batch(&leader, p, count, value_bytes),
                    None => build_simple_batch(count, value_bytes, 100),
                };
                let info = leader.append(b, epoch, 0).await.unwrap();
                leader.wait_committed(info.last_offset).await.unwrap();
            }
            Op::Fetch { max_bytes, cut } => {
                fetch_once(&leader, &follower, max_bytes, cut).await;
            }
            Op::NewLeaderEpoch { keep } => {
                let end = leader.log_end_offset().0;
                let at = (end as f64 * keep).round() as i64;
                leader.truncate_to(Offset(at)).await.unwrap();
                epoch = Epoch(epoch.0 + 1);
                // Half the time the new leader records its epoch at once (as a leader with
                // followers does), else at its first append.
                if keep < 0.5 {
                    leader.assign_epoch_start(epoch).await.unwrap();
                }
            }
            Op::CrashFollower => {
                drop(follower);
                follower_fs = Rc::new(follower_fs.crash());
                follower = open(&follower_fs, &dir).await;
            }
        }
    }
    // Catch up: each round either truncates (bounded by the number of epochs) or appends.
    for _ in 0..10_000 {
        if !fetch_once(&leader, &follower, 64 * 1024, false).await {
            break;
        }
    }
    assert_same(&leader, &follower).await;
    follower.close().await.unwrap();
    let follower = open(&follower_fs, &dir).await;
    assert_same(&leader, &follower).await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn follower_converges_to_the_leader(ops in prop::collection::vec(op(), 1..80)) {
        run_local(run(ops));
    }
}

#[test]
fn follower_append_refuses_overlap_and_gap() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let leader = open(&fs, Path::new("/data/l-0")).await;
        let follower = open(&fs, Path::new("/data/f-0")).await;
        for _ in 0..3 {
            let info = leader.append(build_simple_batch(2, 10, 100), Epoch(3), 0).await.unwrap();
            leader.wait_committed(info.last_offset).await.unwrap();
        }
        let all = whole(&leader).await;
        let first = leader.read(Offset(0), 1, Offset(2)).await.unwrap();
        follower.append_replicated(first.clone(), 0).await.unwrap();
        // The same batch again: an overlap, nothing appended.
        let again = follower.append_replicated(first.clone(), 0).await;
        assert!(matches!(
            again,
            Err(StorageError::ReplicaOffsetMismatch { expected: Offset(2), got: Offset(0) })
        ));
        // Skipping the second batch: a gap in a non-compacted log.
        let third = leader.read(Offset(4), 1, Offset(6)).await.unwrap();
        assert!(matches!(
            follower.append_replicated(third, 0).await,
            Err(StorageError::ReplicaOffsetMismatch { expected: Offset(2), got: Offset(4) })
        ));
        assert_eq!(follower.log_end_offset(), Offset(2));
        follower.append_replicated(all.slice(first.len()..), 0).await.unwrap();
        assert_eq!(whole(&follower).await, all);
        assert_eq!(follower.epoch_entries(), vec![(Epoch(3), Offset(0))]);
    });
}

/// A follower that led an epoch the leader never saw (epoch 3 over offsets the leader wrote
/// in its epoch 2) needs two truncation rounds: the leader's answer names epoch 2, unknown to
/// the follower, which first cuts to its own end of epoch 1 and asks again.
#[test]
fn former_leader_truncates_in_two_rounds() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let leader = open(&fs, Path::new("/data/l-0")).await;
        let follower = open(&fs, Path::new("/data/f-0")).await;
        let one = || build_simple_batch(1, 10, 100);
        for _ in 0..3 {
            leader.append(one(), Epoch(1), 0).await.unwrap();
        }
        leader.flush().await.unwrap();
        assert!(fetch_once(&leader, &follower, 1 << 20, false).await);
        for _ in 0..2 {
            leader.append(one(), Epoch(2), 0).await.unwrap();
            follower.append(one(), Epoch(3), 0).await.unwrap();
        }
        leader.append(one(), Epoch(4), 0).await.unwrap();
        leader.flush().await.unwrap();
        follower.flush().await.unwrap();
        let mut rounds = 0;
        while fetch_once(&leader, &follower, 1 << 20, false).await {
            rounds += 1;
            assert!(rounds < 10, "no convergence");
        }
        // One truncation (to 3, where epoch 1 ends here), then one fetch.
        assert_eq!(rounds, 2);
        assert_same(&leader, &follower).await;
        assert_eq!(
            follower.epoch_entries(),
            vec![(Epoch(1), Offset(0)), (Epoch(2), Offset(3)), (Epoch(4), Offset(5))]
        );
    });
}

/// Issue 41: a replica that became leader records its epoch at its log end before writing
/// anything; if it follows again, a truncation at (or past) its log end must drop that empty
/// epoch, as Kafka's `truncateTo` does, or it names the epoch on every fetch and the leader
/// answers with the same divergence forever.
#[test]
fn truncating_at_the_log_end_drops_an_epoch_that_holds_no_batch() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let dir = Path::new("/data/e-0");
        let log = open(&fs, dir).await;
        let info = log.append(build_simple_batch(2, 10, 100), Epoch(3), 0).await.unwrap();
        log.wait_committed(info.last_offset).await.unwrap();
        log.assign_epoch_start(Epoch(5)).await.unwrap();
        assert_eq!(log.latest_epoch(), Some(Epoch(5)));
        let end = log.log_end_offset();
        log.truncate_to(end).await.unwrap();
        assert_eq!(log.log_end_offset(), end);
        assert_eq!(log.latest_epoch(), Some(Epoch(3)));
        log.close().await.unwrap();
        let log = open(&fs, dir).await;
        assert_eq!(log.epoch_entries(), [(Epoch(3), Offset(0))], "checkpointed");
    });
}
