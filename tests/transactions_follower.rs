//! Transactions on a follower (issue 17's stuck LSO): a follower that receives a
//! transaction's data and its marker by replication must close the transaction as the
//! leader did, so that once elected its last stable offset equals its high watermark and it
//! still knows the aborted transactions, whether it got there by plain fetching, by
//! truncating and fetching again, or by restarting from its files.
//!
//! Leader and follower logs on the in-memory file system; the follower fetches with
//! `append_replicated`, as `replication::driver` does.

use std::path::Path;
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use shardlog::io::mem::MemFileSystem;
use shardlog::io::run_local;
use shardlog::storage::batch::set_transactional_producer;
use shardlog::storage::producer_state::encode_marker;
use shardlog::storage::records::build_simple_batch;
use shardlog::storage::{BatchCache, LogConfig, PartitionLog};
use shardlog::types::{Epoch, Offset};

type Log = PartitionLog<MemFileSystem>;

const DIR: &str = "/data/txn-out-2";
const T0: i64 = 1_000_000;

fn config() -> LogConfig {
    LogConfig {
        // Small segments: rolls write producer snapshots between the transactions.
        segment_bytes: 1024,
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: i64::MAX,
        ..LogConfig::default()
    }
}

async fn open(fs: &Rc<MemFileSystem>) -> Log {
    PartitionLog::open(fs.clone(), Path::new(DIR), config(), Rc::new(BatchCache::new(1 << 20)))
        .await
        .expect("open")
}

/// A transactional batch of `count` records of producer `pid` (epoch 0) at sequence `seq`.
fn txn_batch(pid: i64, seq: i32, count: usize) -> Bytes {
    let mut b = BytesMut::from(&build_simple_batch(count, 40, T0)[..]);
    set_transactional_producer(&mut b, pid, 0, seq);
    b.freeze()
}

/// Fetches everything the leader has beyond the follower's log end.
async fn catch_up(leader: &Log, follower: &Log) {
    while follower.log_end_offset() < leader.log_end_offset() {
        let end = leader.log_end_offset();
        let data = leader.read(follower.log_end_offset(), 4096, end).await.expect("read");
        let info = follower.append_replicated(data, T0).await.expect("append_replicated");
        assert!(info.batches > 0, "no progress at {:?}", follower.log_end_offset());
    }
    follower.flush().await.expect("flush");
}

/// What an elected replica answers read_committed consumers from: its first unstable offset
/// at a high watermark of its log end, its open and its aborted transactions.
type TxnView = (Option<Offset>, Vec<(i64, i64)>, Vec<(i64, i64)>);

fn txn_view(log: &Log) -> TxnView {
    let end = log.log_end_offset();
    (log.first_unstable_offset(end), log.ongoing_txns(), log.aborted_between(Offset(0), end))
}

/// Producer 7 commits, producer 8 aborts, producer 7 commits again, producer 9 stays open
/// (when `open_tail`). Returns the offset where producer 9's transaction starts.
async fn transactions(leader: &Log, open_tail: bool) -> Offset {
    let mut seq7 = 0;
    for round in 0..6 {
        for _ in 0..3 {
            leader.append(txn_batch(7, seq7, 4), Epoch(1), T0).await.expect("data 7");
            seq7 += 4;
        }
        let commit = round % 2 == 0;
        leader.append(txn_batch(8, round * 2, 2), Epoch(1), T0).await.expect("data 8");
        leader
            .append_coordinator(encode_marker(8, 0, false, 0, T0), Epoch(1), T0)
            .await
            .expect("abort 8");
        leader
            .append_coordinator(encode_marker(7, 0, commit, 0, T0), Epoch(1), T0)
            .await
            .expect("end 7");
    }
    let tail = leader.log_end_offset();
    if open_tail {
        leader.append(txn_batch(9, 0, 3), Epoch(1), T0).await.expect("data 9");
    }
    leader.flush().await.expect("flush");
    tail
}

#[test]
fn a_follower_applies_replicated_markers() {
    run_local(async {
        let (leader_fs, follower_fs) =
            (Rc::new(MemFileSystem::new()), Rc::new(MemFileSystem::new()));
        let leader = open(&leader_fs).await;
        let follower = open(&follower_fs).await;
        let tail = transactions(&leader, true).await;
        catch_up(&leader, &follower).await;
        let view = txn_view(&leader);
        assert_eq!(view.0, Some(tail), "only producer 9's transaction is open on the leader");
        assert_eq!(view.2.len(), 9, "6 aborts of producer 8, 3 of producer 7");
        assert_eq!(txn_view(&follower), view, "the follower closed what the markers closed");
        assert_eq!(follower.producers(), leader.producers());
        // Producer 9 commits: once elected, the follower's LSO is its high watermark.
        leader
            .append_coordinator(encode_marker(9, 0, true, 0, T0), Epoch(1), T0)
            .await
            .expect("commit 9");
        catch_up(&leader, &follower).await;
        assert_eq!(txn_view(&follower).0, None, "LSO = HW on the follower");
        assert!(follower.ongoing_txns().is_empty());
        // Restarting from its files (snapshots taken at rolls while following) agrees.
        follower.close().await.expect("close");
        let follower = open(&follower_fs).await;
        assert_eq!(txn_view(&follower), txn_view(&leader));
        assert_eq!(follower.producers(), leader.producers());
    });
}

/// The follower is truncated between a transaction's data and its marker (as after an
/// unclean leader change), then fetches the marker again, then is elected.
#[test]
fn a_truncated_follower_rebuilds_its_transactions_and_closes_them_on_refetch() {
    run_local(async {
        let (leader_fs, follower_fs) =
            (Rc::new(MemFileSystem::new()), Rc::new(MemFileSystem::new()));
        let leader = open(&leader_fs).await;
        let follower = open(&follower_fs).await;
        transactions(&leader, false).await;
        catch_up(&leader, &follower).await;
        assert_eq!(txn_view(&follower), txn_view(&leader));
        // The last two batches are producer 8's ABORT and producer 7's marker: cut both.
        let end = leader.log_end_offset();
        follower.truncate_to(Offset(end.0 - 2)).await.expect("truncate");
        let (first, open, _) = txn_view(&follower);
        assert_eq!(open.len(), 2, "both transactions are open again: {open:?}");
        assert_eq!(first, Some(Offset(open.iter().map(|(_, o)| *o).min().expect("open"))));
        catch_up(&leader, &follower).await;
        assert_eq!(txn_view(&follower), txn_view(&leader));
        assert_eq!(txn_view(&follower).0, None, "elected now, its LSO is its HW");
        // And a follower cut right below the first marker of all.
        follower.truncate_to(Offset(14)).await.expect("truncate");
        catch_up(&leader, &follower).await;
        assert_eq!(txn_view(&follower), txn_view(&leader));
        assert_eq!(follower.producers(), leader.producers());
    });
}

/// A replicated marker bounds the follower's last stable offset until its high watermark
/// passes the marker (as on the leader), and is then forgotten: a follower never asks for
/// its LSO, so the replication driver prunes as the high watermark moves.
#[test]
fn a_follower_forgets_markers_below_its_high_watermark() {
    run_local(async {
        let (leader_fs, follower_fs) =
            (Rc::new(MemFileSystem::new()), Rc::new(MemFileSystem::new()));
        let leader = open(&leader_fs).await;
        let follower = open(&follower_fs).await;
        leader.append(txn_batch(7, 0, 4), Epoch(1), T0).await.expect("data 7");
        leader
            .append_coordinator(encode_marker(7, 0, true, 0, T0), Epoch(1), T0)
            .await
            .expect("commit 7");
        catch_up(&leader, &follower).await;
        assert_eq!(follower.first_unstable_offset(Offset(4)), Some(Offset(0)), "marker at 4");
        follower.forget_stable_txns(Offset(5));
        assert_eq!(follower.first_unstable_offset(Offset(0)), None, "forgotten once stable");
    });
}
