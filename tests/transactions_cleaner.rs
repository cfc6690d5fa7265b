//! Compaction and transactions (issue 17): the cleaner removes the records of aborted
//! transactions (and never lets an aborted value supersede a committed one), keeps a
//! marker while its transaction has data in the log and removes it after the delete
//! horizon, and cleans nothing at or past the first offset of a transaction still open.
//! A model test runs random transactions, plain writes and cleans and checks after every
//! clean and after restarts: no data of an ended transaction without its marker, aborted
//! entries exactly for the ABORT markers left, read_committed's latest values, and only the
//! model's open transactions open.

use std::path::Path;
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use shardlog::io::mem::MemFileSystem;
use shardlog::io::{run_local, FileSystem};
use shardlog::storage::batch::{set_transactional_producer, BatchHeader, Compression};
use shardlog::storage::cleaner::swap::SwapStep;
use shardlog::storage::cleaner::throttle::Throttler;
use shardlog::storage::producer_state::encode_marker;
use shardlog::storage::records::{build_batch, NewRecord};
use shardlog::storage::{BatchCache, CleanOptions, LogConfig, PartitionLog};
use shardlog::types::{Epoch, Offset};

const DIR: &str = "/data/txn-compact-0";
const T0: i64 = 1_000_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        segment_ms: 1_000_000_000,
        index_interval_bytes: 256,
        segment_index_bytes: 4096,
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: i64::MAX,
        compacted: true,
        delete_retention_enabled: false,
        retention_ms: -1,
        file_delete_delay_ms: 10,
        ..LogConfig::default()
    }
}

/// One record `key` = `value`; transactional for producer `pid` at `seq` when `pid` >= 0.
fn batch(key: &str, value: &[u8], pid: i64, seq: i32) -> Bytes {
    let rec = NewRecord {
        key: Some(key.as_bytes()),
        value: Some(value),
        timestamp_ms: T0,
        headers: vec![],
    };
    let mut b = BytesMut::from(&build_batch(&[rec], Compression::None)[..]);
    if pid >= 0 {
        set_transactional_producer(&mut b, pid, 0, seq);
    }
    b.freeze()
}

/// The value of every stored record of `key`, and the number of control batches.
async fn values(log: &PartitionLog<MemFileSystem>, key: &str) -> (Vec<Vec<u8>>, usize) {
    let all = log.read(Offset(0), usize::MAX, log.log_end_offset()).await.expect("read");
    let (mut at, mut out, mut markers) = (0, Vec::new(), 0);
    while at < all.len() {
        let h = BatchHeader::parse(&all[at..]).expect("batch");
        let mut one = all.slice(at..at + h.total_size());
        at += h.total_size();
        if h.is_control() {
            markers += 1;
            continue;
        }
        let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut one).expect("decode");
        for r in set.records {
            if r.key.as_deref() == Some(key.as_bytes()) {
                out.push(r.value.map(|v| v.to_vec()).unwrap_or_default());
            }
        }
    }
    (out, markers)
}

#[test]
fn aborted_data_goes_and_open_transactions_stay() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let log = PartitionLog::open(
            fs.clone(),
            Path::new(DIR),
            config(),
            Rc::new(BatchCache::new(1 << 20)),
        )
        .await
        .expect("open");
        let filler = vec![b'f'; 200];
        // "k" committed, then overwritten by an aborted transaction of producer 7.
        log.append(batch("k", b"committed", -1, -1), Epoch(0), T0).await.expect("append");
        log.append(batch("k", b"aborted", 7, 0), Epoch(0), T0).await.expect("append");
        let (info, done) = log
            .append_coordinator(encode_marker(7, 0, false, 0, T0), Epoch(0), T0)
            .await
            .expect("marker");
        assert!(done.is_some_and(|t| t.aborted), "{info:?}");
        for i in 0..20 {
            log.append(batch(&format!("f{}", i % 3), &filler, -1, -1), Epoch(0), T0)
                .await
                .expect("fill");
        }
        // Producer 8 opens a transaction that overwrites "o"; it stays open.
        log.append(batch("o", b"old", -1, -1), Epoch(0), T0).await.expect("append");
        log.append(batch("o", b"open", 8, 0), Epoch(0), T0).await.expect("append");
        for i in 0..20 {
            log.append(batch(&format!("f{}", i % 3), &filler, -1, -1), Epoch(0), T0)
                .await
                .expect("fill");
        }
        log.flush().await.expect("flush");
        let throttle = Throttler::unlimited();
        let opts = CleanOptions {
            key_map_bytes: 1 << 20,
            throttle: &throttle,
            abort: &|| false,
            force: true,
            stop_after: None,
        };
        let out = log.clean(T0 + 1, &opts).await.expect("clean");
        assert!(out.cleaned, "{out:?}");
        let (k, markers) = values(&log, "k").await;
        assert_eq!(k, vec![b"committed".to_vec()], "the aborted value went, the committed stayed");
        assert_eq!(markers, 1, "the ABORT marker stays");
        let (o, _) = values(&log, "o").await;
        assert_eq!(
            o,
            vec![b"old".to_vec(), b"open".to_vec()],
            "nothing past an open transaction is cleaned"
        );
        log.close().await.expect("close");
    });
}

/// Every stored batch: (base offset, control, records, delete horizon).
async fn batches(log: &PartitionLog<MemFileSystem>) -> Vec<(i64, bool, i32, Option<i64>)> {
    let all = log.read(Offset(0), usize::MAX, log.log_end_offset()).await.expect("read");
    let mut at = 0;
    let mut out = Vec::new();
    while at < all.len() {
        let h = BatchHeader::parse(&all[at..]).expect("batch");
        at += h.total_size();
        out.push((h.base_offset, h.is_control(), h.records_count, h.delete_horizon_ms()));
    }
    out
}

/// The marker (control batch with a record) at `offset`, with its delete horizon.
async fn marker_at(log: &PartitionLog<MemFileSystem>, offset: i64) -> Option<Option<i64>> {
    batches(log).await.into_iter().find(|b| b.0 == offset && b.1 && b.2 > 0).map(|b| b.3)
}

const RETENTION_MS: i64 = 1_000;

fn marker_config() -> LogConfig {
    LogConfig { delete_retention_ms: RETENTION_MS, ..config() }
}

async fn open_log(fs: &Rc<MemFileSystem>) -> PartitionLog<MemFileSystem> {
    PartitionLog::open(
        fs.clone(),
        Path::new(DIR),
        marker_config(),
        Rc::new(BatchCache::new(1 << 20)),
    )
    .await
    .expect("open")
}

async fn fill(log: &PartitionLog<MemFileSystem>, n: usize) {
    let filler = vec![b'f'; 200];
    for i in 0..n {
        log.append(batch(&format!("f{}", i % 3), &filler, -1, -1), Epoch(0), T0)
            .await
            .expect("fill");
    }
}

async fn marker(log: &PartitionLog<MemFileSystem>, pid: i64, commit: bool) -> i64 {
    let (info, _) = log
        .append_coordinator(encode_marker(pid, 0, commit, 0, T0), Epoch(0), T0)
        .await
        .expect("marker");
    info.last_offset.0
}

async fn clean_at(
    log: &PartitionLog<MemFileSystem>,
    now_ms: i64,
) -> shardlog::storage::CleanOutcome {
    clean_until(log, now_ms, None).await
}

/// A forced pass at `now_ms` (which does nothing while no segment is sealed).
async fn try_clean(log: &PartitionLog<MemFileSystem>, now_ms: i64) {
    let throttle = Throttler::unlimited();
    let opts = CleanOptions {
        key_map_bytes: 1 << 20,
        throttle: &throttle,
        abort: &|| false,
        force: true,
        stop_after: None,
    };
    log.clean(now_ms, &opts).await.expect("clean");
}

/// A forced pass at `now_ms`, stopped after `stop_after` of its first swap if given.
async fn clean_until(
    log: &PartitionLog<MemFileSystem>,
    now_ms: i64,
    stop_after: Option<SwapStep>,
) -> shardlog::storage::CleanOutcome {
    let throttle = Throttler::unlimited();
    let opts = CleanOptions {
        key_map_bytes: 1 << 20,
        throttle: &throttle,
        abort: &|| false,
        force: true,
        stop_after,
    };
    let out = log.clean(now_ms, &opts).await.expect("clean");
    assert!(out.cleaned, "{out:?}");
    out
}

#[test]
fn markers_go_after_the_delete_horizon_once_their_transaction_is_empty() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let log = open_log(&fs).await;
        // Producer 7: T1 aborted (its data goes), T2 committed with surviving data.
        log.append(batch("k", b"aborted", 7, 0), Epoch(0), T0).await.expect("append");
        let abort_at = marker(&log, 7, false).await;
        log.append(batch("j", b"kept", 7, 1), Epoch(0), T0).await.expect("append");
        let kept_commit_at = marker(&log, 7, true).await;
        // Producer 9: T1 committed "a", superseded later; T2 committed "b" (its last batch).
        log.append(batch("a", b"1", 9, 0), Epoch(0), T0).await.expect("append");
        let superseded_commit_at = marker(&log, 9, true).await;
        log.append(batch("b", b"1", 9, 1), Epoch(0), T0).await.expect("append");
        let last_commit_at = marker(&log, 9, true).await;
        log.append(batch("a", b"2", -1, -1), Epoch(0), T0).await.expect("append");
        fill(&log, 30).await;
        log.flush().await.expect("flush");
        let all = [abort_at, kept_commit_at, superseded_commit_at, last_commit_at];

        // Pass 1 removes the aborted and superseded records; their batches were read in
        // this pass, so every marker stays, without a horizon.
        assert_eq!(clean_at(&log, T0).await.markers_removed, 0);
        for m in all {
            assert_eq!(marker_at(&log, m).await, Some(None), "marker {m} after pass 1");
        }
        assert_eq!(log.aborted_between(Offset(0), log.log_end_offset()), vec![(7, 0)]);
        // Pass 2: the emptied transactions' markers get a horizon; the others none.
        let t2 = T0 + 10;
        clean_at(&log, t2).await;
        assert_eq!(marker_at(&log, abort_at).await, Some(Some(t2 + RETENTION_MS)));
        assert_eq!(marker_at(&log, superseded_commit_at).await, Some(Some(t2 + RETENTION_MS)));
        assert_eq!(marker_at(&log, kept_commit_at).await, Some(None));
        assert_eq!(marker_at(&log, last_commit_at).await, Some(None));
        let stats = log.clean_stats(t2 + RETENTION_MS).await.expect("stats");
        assert!(stats.delete_horizon_due, "the markers' horizon schedules a clean: {stats:?}");
        // Before the horizon: kept (a consumer reading within delete.retention.ms sees them).
        assert_eq!(clean_at(&log, t2 + RETENTION_MS - 1).await.markers_removed, 0);
        assert!(marker_at(&log, abort_at).await.is_some());
        // After it: gone, with the aborted transaction's entry.
        assert_eq!(clean_at(&log, t2 + RETENTION_MS).await.markers_removed, 2);
        assert_eq!(marker_at(&log, abort_at).await, None);
        assert_eq!(marker_at(&log, superseded_commit_at).await, None);
        assert_eq!(marker_at(&log, kept_commit_at).await, Some(None), "its data survives");
        assert_eq!(marker_at(&log, last_commit_at).await, Some(None), "its data survives");
        assert!(log.aborted_between(Offset(0), log.log_end_offset()).is_empty());
        assert_eq!(values(&log, "j").await.0, vec![b"kept".to_vec()]);
        assert_eq!(values(&log, "a").await.0, vec![b"2".to_vec()]);
        assert_eq!(values(&log, "k").await.0, Vec::<Vec<u8>>::new());
        let end = log.log_end_offset();
        log.close().await.expect("close");

        let log = open_log(&fs).await;
        assert_eq!(log.first_unstable_offset(end), None, "no transaction is open after restart");
        assert!(log.ongoing_txns().is_empty());
        assert!(log.aborted_between(Offset(0), end).is_empty());
        assert_eq!(marker_at(&log, abort_at).await, None);
        log.close().await.expect("close");
    });
}

#[test]
fn a_removed_marker_leaves_no_open_transaction_in_any_snapshot() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let log = open_log(&fs).await;
        // Producer 5's aborted T1 starts in one segment and its marker lands in a later one,
        // so the snapshot taken at the roll in between holds T1 open.
        log.append(batch("x", b"aborted", 5, 0), Epoch(0), T0).await.expect("append");
        fill(&log, 10).await;
        let abort_at = marker(&log, 5, false).await;
        // T2 (committed) so T1's batch is not producer 5's last.
        log.append(batch("y", b"committed", 5, 1), Epoch(0), T0).await.expect("append");
        marker(&log, 5, true).await;
        fill(&log, 20).await;
        log.flush().await.expect("flush");
        let snapshots = |fs: Rc<MemFileSystem>| async move {
            let mut v: Vec<i64> = fs
                .list_dir(Path::new(DIR))
                .await
                .expect("list")
                .iter()
                .filter_map(|n| n.strip_suffix(".snapshot").and_then(|d| d.parse().ok()))
                .collect();
            v.sort_unstable();
            v
        };
        let before = snapshots(fs.clone()).await;
        assert!(
            before.iter().any(|s| *s > 0 && *s <= abort_at),
            "a snapshot inside T1: {before:?}"
        );
        for (i, now) in [T0, T0 + 10, T0 + 10 + RETENTION_MS].into_iter().enumerate() {
            let out = clean_at(&log, now).await;
            assert_eq!(out.markers_removed, u64::from(i == 2), "pass {i}: {out:?}");
        }
        assert_eq!(marker_at(&log, abort_at).await, None);
        let after = snapshots(fs.clone()).await;
        assert!(
            after.iter().all(|s| *s > abort_at),
            "snapshots at or below the marker go: {after:?}"
        );
        let end = log.log_end_offset();
        log.close().await.expect("close");

        // Restart from the snapshots left: nothing open, nothing aborted.
        let log = open_log(&fs).await;
        assert_eq!(log.first_unstable_offset(end), None);
        assert!(log.aborted_between(Offset(0), end).is_empty());
        log.close().await.expect("close");
        // Restart with every snapshot lost: a replay of the whole cleaned log agrees.
        for s in snapshots(fs.clone()).await {
            let path = Path::new(DIR).join(format!("{s:020}.snapshot"));
            fs.remove_file(&path).await.expect("remove snapshot");
        }
        let log = open_log(&fs).await;
        assert_eq!(log.first_unstable_offset(end), None);
        assert!(log.ongoing_txns().is_empty());
        assert!(log.aborted_between(Offset(0), end).is_empty());
        assert_eq!(values(&log, "y").await.0, vec![b"committed".to_vec()]);
        log.close().await.expect("close");
    });
}

#[test]
fn a_crash_while_markers_go_leaves_no_aborted_entry_without_its_marker() {
    let steps = [
        Some(SwapStep::CleanedWritten),
        Some(SwapStep::RenamedToSwap),
        Some(SwapStep::OldRenamedToDeleted),
        None,
    ];
    for stop_after in steps {
        run_local(async move {
            let fs = Rc::new(MemFileSystem::new());
            let log = open_log(&fs).await;
            log.append(batch("x", b"aborted", 5, 0), Epoch(0), T0).await.expect("append");
            let abort_at = marker(&log, 5, false).await;
            log.append(batch("y", b"committed", 5, 1), Epoch(0), T0).await.expect("append");
            marker(&log, 5, true).await;
            fill(&log, 30).await;
            log.flush().await.expect("flush");
            clean_at(&log, T0).await;
            clean_at(&log, T0 + 10).await;
            assert!(marker_at(&log, abort_at).await.is_some_and(|h| h.is_some()));
            // The pass that removes the marker, cut short at `stop_after`, then SIGKILL.
            clean_until(&log, T0 + 10 + RETENTION_MS, stop_after).await;
            let end = log.log_end_offset();
            drop(log);
            let crashed = Rc::new(fs.crash());
            let log = open_log(&crashed).await;
            let aborted = log.aborted_between(Offset(0), end);
            let marker_left = marker_at(&log, abort_at).await.is_some();
            assert!(
                aborted.is_empty() || marker_left,
                "{stop_after:?}: {aborted:?} without its marker"
            );
            assert_eq!(log.first_unstable_offset(end), None, "{stop_after:?}");
            assert!(log.ongoing_txns().is_empty(), "{stop_after:?}");
            assert_eq!(values(&log, "y").await.0, vec![b"committed".to_vec()]);
            // A later pass finishes the job.
            clean_at(&log, T0 + 20 + RETENTION_MS).await;
            assert_eq!(marker_at(&log, abort_at).await, None, "{stop_after:?}");
            assert!(log.aborted_between(Offset(0), end).is_empty());
            log.close().await.expect("close");
        });
    }
}

/// One step of the model test.
#[derive(Clone, Debug)]
enum Op {
    /// A transactional record of producer `pid` (opens its transaction if none is open).
    Txn { pid: i64, key: u8 },
    /// The coordinator ends `pid`'s open transaction (nothing if none is open).
    End { pid: i64, commit: bool },
    /// A plain record.
    Plain { key: u8 },
    /// Filler, so segments roll.
    Fill,
    /// A forced clean `advance_ms` later.
    Clean { advance_ms: i64 },
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (1i64..4, 0u8..4).prop_map(|(pid, key)| Op::Txn { pid, key }),
        3 => (1i64..4, any::<bool>()).prop_map(|(pid, commit)| Op::End { pid, commit }),
        2 => (0u8..4).prop_map(|key| Op::Plain { key }),
        2 => Just(Op::Fill),
        2 => (0i64..1_500).prop_map(|advance_ms| Op::Clean { advance_ms }),
    ]
}

/// What the model knows of a transaction: producer, first data offset, marker offset and
/// outcome once ended.
#[derive(Clone, Copy, Debug)]
struct ModelTxn {
    pid: i64,
    first: i64,
    end: Option<(i64, bool)>,
}

/// Checks the cleaned log against the model: every data batch of an ended transaction still
/// has its marker; the aborted transactions listed are exactly those whose ABORT marker is
/// still there; read_committed's latest value of every key is the model's.
async fn check_against_model(
    log: &PartitionLog<MemFileSystem>,
    txns: &[ModelTxn],
    records: &[(i64, u8, u32, Option<usize>)],
) {
    let all = log.read(Offset(0), usize::MAX, log.log_end_offset()).await.expect("read");
    let txn_of = |pid: i64, offset: i64| {
        txns.iter().position(|t| {
            t.pid == pid && t.first <= offset && t.end.is_none_or(|(m, _)| offset < m)
        })
    };
    let mut at = 0;
    let mut markers = std::collections::BTreeSet::new();
    let mut data_txns = std::collections::BTreeSet::new();
    let mut latest: std::collections::BTreeMap<u8, (i64, u32)> = Default::default();
    while at < all.len() {
        let h = BatchHeader::parse(&all[at..]).expect("batch");
        let mut one = all.slice(at..at + h.total_size());
        at += h.total_size();
        if h.is_control() {
            if h.records_count > 0 {
                markers.insert(h.last_offset());
            }
            continue;
        }
        let txn = (h.is_transactional()).then(|| txn_of(h.producer_id, h.base_offset)).flatten();
        if let Some(t) = txn {
            data_txns.insert(t);
        }
        let aborted = txn.is_some_and(|t| txns[t].end.is_some_and(|(_, commit)| !commit));
        let open = txn.is_some_and(|t| txns[t].end.is_none());
        let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut one).expect("decode");
        for r in set.records {
            let key = r.key.as_deref().expect("key")[0];
            let value =
                u32::from_be_bytes(r.value.as_deref().expect("value")[..4].try_into().unwrap());
            if key < 4 && !aborted && !open {
                latest.insert(key, (r.offset, value));
            }
        }
    }
    for t in &data_txns {
        if let Some((m, _)) = txns[*t].end {
            assert!(markers.contains(&m), "data of {:?} left without its marker", txns[*t]);
        }
    }
    // By marker offset, as the partition lists them.
    let mut want_aborted: Vec<(i64, i64, i64)> = txns
        .iter()
        .filter_map(|t| match t.end {
            Some((m, false)) if markers.contains(&m) => Some((m, t.pid, t.first)),
            _ => None,
        })
        .collect();
    want_aborted.sort_unstable();
    let want_aborted: Vec<(i64, i64)> = want_aborted.iter().map(|a| (a.1, a.2)).collect();
    assert_eq!(log.aborted_between(Offset(0), log.log_end_offset()), want_aborted);
    let mut want: std::collections::BTreeMap<u8, (i64, u32)> = Default::default();
    for (offset, key, value, txn) in records {
        let visible = txn.is_none_or(|t| txns[t].end.is_some_and(|(_, commit)| commit));
        if visible {
            want.insert(*key, (*offset, *value));
        }
    }
    assert_eq!(latest, want, "read_committed's latest value per key");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 32, ..Default::default() })]

    /// Random transactions, plain writes and cleans: after every clean the cleaned log
    /// agrees with the model, and a restart (clean, then SIGKILL) finds no open transaction
    /// but those the model has open.
    #[test]
    fn cleaned_markers_match_the_model(ops in proptest::collection::vec(op(), 1..80)) {
        run_local(async move {
            let fs = Rc::new(MemFileSystem::new());
            let mut log = open_log(&fs).await;
            let mut now = T0;
            let mut seq = [0i32; 4];
            let mut open: [Option<usize>; 4] = [None; 4];
            let mut txns: Vec<ModelTxn> = Vec::new();
            // (offset, key, value, transaction)
            let mut records: Vec<(i64, u8, u32, Option<usize>)> = Vec::new();
            let mut value = 0u32;
            let ops = ops.into_iter().chain([Op::Fill, Op::Fill, Op::Fill]);
            for op in ops {
                match op {
                    Op::Txn { pid, key } => {
                        value += 1;
                        let k = char::from(key).to_string();
                        let b = batch(&k, &value.to_be_bytes(), pid, seq[pid as usize]);
                        seq[pid as usize] += 1;
                        let info = log.append(b, Epoch(0), T0).await.expect("append");
                        let o = info.base_offset.0;
                        let t = *open[pid as usize].get_or_insert_with(|| {
                            txns.push(ModelTxn { pid, first: o, end: None });
                            txns.len() - 1
                        });
                        records.push((o, key, value, Some(t)));
                    }
                    Op::End { pid, commit } => {
                        if let Some(t) = open[pid as usize].take() {
                            txns[t].end = Some((marker(&log, pid, commit).await, commit));
                        }
                    }
                    Op::Plain { key } => {
                        value += 1;
                        let b = batch(&char::from(key).to_string(), &value.to_be_bytes(), -1, -1);
                        let info = log.append(b, Epoch(0), T0).await.expect("append");
                        records.push((info.base_offset.0, key, value, None));
                    }
                    Op::Fill => fill(&log, 4).await,
                    Op::Clean { advance_ms } => {
                        now += advance_ms;
                        log.flush().await.expect("flush");
                        try_clean(&log, now).await;
                        check_against_model(&log, &txns, &records).await;
                    }
                }
            }
            let open_now: Vec<(i64, i64)> = {
                let mut v: Vec<(i64, i64)> = open
                    .iter()
                    .flatten()
                    .map(|t| (txns[*t].pid, txns[*t].first))
                    .collect();
                v.sort_unstable_by_key(|x| x.1);
                v
            };
            // Passes far apart: emptied transactions' markers get a horizon, then go.
            for k in 1..=3 {
                fill(&log, 4).await;
                log.flush().await.expect("flush");
                try_clean(&log, now + k * 10 * RETENTION_MS).await;
                check_against_model(&log, &txns, &records).await;
            }
            for restart in 0..2 {
                if restart == 0 {
                    log.close().await.expect("close");
                    log = open_log(&fs).await;
                } else {
                    drop(log);
                    let crashed = Rc::new(fs.crash());
                    log = open_log(&crashed).await;
                }
                assert_eq!(log.ongoing_txns(), open_now, "restart {restart}");
                check_against_model(&log, &txns, &records).await;
            }
            log.close().await.expect("close");
        });
    }
}
