//! `.txnindex` files of the partition log (issue 17) on the in-memory file system: written at
//! each roll and at close with the aborted transactions whose ABORT marker is in the segment,
//! rebuilt after a power loss, truncated with the log, renamed away by retention, rebuilt
//! from the log when one is damaged, and written for a data dir whose version-2 snapshot
//! still carries the aborted list (from before these files).

use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use shardlog::io::mem::MemFileSystem;
use shardlog::io::run_local;
use shardlog::storage::batch::{recompute_crc, set_transactional_producer, Compression};
use shardlog::storage::producer_state::{encode_marker, AbortedTxn};
use shardlog::storage::records::{build_batch, NewRecord};
use shardlog::storage::{txn_index, BatchCache, LogConfig, PartitionLog};
use shardlog::types::{Epoch, Offset};

const DIR: &str = "/data/txi-0";
const T0: i64 = 1_000_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        segment_ms: 1_000_000_000,
        index_interval_bytes: 256,
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: i64::MAX,
        retention_ms: -1,
        file_delete_delay_ms: 10,
        ..LogConfig::default()
    }
}

/// Two records of producer `pid` (transactional) at sequence `seq`.
fn txn_batch(pid: i64, seq: i32) -> Bytes {
    let value = [b'v'; 100];
    let recs: Vec<NewRecord> = (0..2)
        .map(|_| NewRecord {
            key: Some(b"k"),
            value: Some(&value),
            timestamp_ms: T0,
            headers: vec![],
        })
        .collect();
    let mut b = BytesMut::from(&build_batch(&recs, Compression::None)[..]);
    set_transactional_producer(&mut b, pid, 0, seq);
    b.freeze()
}

async fn open(fs: &Rc<MemFileSystem>) -> PartitionLog<MemFileSystem> {
    PartitionLog::open(fs.clone(), Path::new(DIR), config(), Rc::new(BatchCache::new(1 << 20)))
        .await
        .expect("open")
}

/// `count` transactions of producers 7 and 8 in turn from transaction `from` on (every
/// third aborted); returns the aborted ones as (producer id, first offset, marker offset).
async fn transactions(
    log: &PartitionLog<MemFileSystem>,
    from: usize,
    count: usize,
) -> Vec<(i64, i64, i64)> {
    let mut aborted = Vec::new();
    for i in from..from + count {
        let pid = 7 + (i % 2) as i64;
        let seq = i32::try_from(i / 2 * 2).expect("small");
        let info = log.append(txn_batch(pid, seq), Epoch(0), T0).await.expect("append");
        let commit = i % 3 != 1;
        let (m, done) = log
            .append_coordinator(encode_marker(pid, 0, commit, 0, T0), Epoch(0), T0)
            .await
            .expect("marker");
        assert_eq!(done.map(|t| t.aborted), Some(!commit));
        if !commit {
            aborted.push((pid, info.base_offset.0, m.base_offset.0));
        }
    }
    aborted
}

fn path(base: i64, suffix: &str) -> PathBuf {
    Path::new(DIR).join(format!("{base:020}{suffix}"))
}

/// Segment bases, from the `.log` names.
fn bases(fs: &MemFileSystem) -> Vec<i64> {
    let names = run_list(fs);
    let mut v: Vec<i64> =
        names.iter().filter_map(|n| n.strip_suffix(".log")?.parse().ok()).collect();
    v.sort_unstable();
    v
}

fn run_list(fs: &MemFileSystem) -> Vec<String> {
    use shardlog::io::FileSystem;
    futures::executor::block_on(fs.list_dir(Path::new(DIR))).expect("list")
}

/// Every `.txnindex` entry by the file's base; checks each lies in its segment.
fn index_entries(fs: &MemFileSystem) -> Vec<(i64, AbortedTxn)> {
    let bases = bases(fs);
    let mut out = Vec::new();
    for (i, base) in bases.iter().enumerate() {
        let Some(data) = fs.file_content(&path(*base, ".txnindex")) else { continue };
        let next = bases.get(i + 1).copied().unwrap_or(i64::MAX);
        for a in txn_index::decode(&data).expect("a valid .txnindex") {
            assert!(a.last_offset >= *base && a.last_offset < next, "{a:?} in segment {base}");
            out.push((*base, a));
        }
    }
    for n in run_list(fs) {
        if let Some(stem) = n.strip_suffix(".txnindex") {
            assert!(bases.contains(&stem.parse().expect("base")), "{n} without its .log");
        }
    }
    out
}

fn triples(entries: &[(i64, AbortedTxn)]) -> Vec<(i64, i64, i64)> {
    entries.iter().map(|(_, a)| (a.producer_id, a.first_offset, a.last_offset)).collect()
}

fn answered(log: &PartitionLog<MemFileSystem>) -> Vec<(i64, i64)> {
    log.aborted_between(Offset(0), log.log_end_offset())
}

fn pairs(want: &[(i64, i64, i64)]) -> Vec<(i64, i64)> {
    want.iter().map(|(p, f, _)| (*p, *f)).collect()
}

#[test]
fn rolls_and_close_write_the_index_and_a_power_loss_rebuilds_it() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let log = open(&fs).await;
        let mut want = transactions(&log, 0, 30).await;
        assert!(log.segment_count() > 3, "segments: {}", log.segment_count());
        log.flush().await.expect("flush");
        // Every sealed segment's file is written at its roll; the active one's at close.
        let active = *bases(&fs).last().expect("a segment");
        let sealed: Vec<_> = want.iter().copied().filter(|(_, _, l)| *l < active).collect();
        assert_eq!(triples(&index_entries(&fs)), sealed);
        log.close().await.expect("close");
        let entries = index_entries(&fs);
        assert_eq!(triples(&entries), want);
        assert!(
            entries.iter().map(|(b, _)| b).collect::<std::collections::BTreeSet<_>>().len() > 2
        );
        // The stable offset recorded is the one after the marker (nothing else was open).
        assert!(entries.iter().all(|(_, a)| a.last_stable_offset == a.last_offset + 1));

        // Reopen: the aborted list comes back from the files (the snapshot has none).
        let log = open(&fs).await;
        assert_eq!(answered(&log), pairs(&want));
        // More transactions, durable, then a power loss before any close: the active
        // segment's entries (never written to its file) are rebuilt from the log.
        want.extend(transactions(&log, 30, 6).await);
        log.flush().await.expect("flush");
        let fs = Rc::new(fs.power_loss());
        drop(log);
        let log = open(&fs).await;
        assert_eq!(answered(&log), pairs(&want));
        assert_eq!(triples(&index_entries(&fs)), want, "reconciled at open");
        log.close().await.expect("close");
    });
}

#[test]
fn truncation_retention_and_a_damaged_file() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let log = open(&fs).await;
        let mut want = transactions(&log, 0, 30).await;
        log.flush().await.expect("flush");
        // Truncate in the middle of the segment holding the 5th aborted transaction's marker.
        let cut = want[4].2;
        log.truncate_to(Offset(cut)).await.expect("truncate");
        want.truncate(4);
        assert_eq!(answered(&log), pairs(&want));
        assert_eq!(triples(&index_entries(&fs)), want, "entries at or past the cut go");
        // Retention: whole segments below the new log start lose their `.txnindex` too.
        let second = bases(&fs)[2];
        log.advance_log_start(Offset(second)).await.expect("log start");
        assert!(!run_list(&fs).iter().any(|n| {
            n.ends_with(".txnindex") && n[..20].parse::<i64>().is_ok_and(|b| b < second)
        }));
        let kept: Vec<_> = want.iter().copied().filter(|(_, _, l)| *l >= second).collect();
        assert_eq!(triples(&index_entries(&fs)), kept);
        log.close().await.expect("close");

        // A damaged file: the log is replayed whole and the file rewritten.
        let (base, _) = index_entries(&fs)[0];
        fs.corrupt(&path(base, ".txnindex"), 0, &[0, 9]);
        let log = open(&fs).await;
        assert_eq!(answered(&log), pairs(&kept));
        assert_eq!(triples(&index_entries(&fs)), kept);
        log.close().await.expect("close");
    });
}

/// A version-2 snapshot: version 3's bytes plus the aborted list (the layout before
/// `.txnindex` files).
fn as_version_2(v3: &[u8], aborted: &[AbortedTxn]) -> Vec<u8> {
    let mut body = v3[10..].to_vec();
    body.extend_from_slice(&(aborted.len() as u32).to_be_bytes());
    for a in aborted {
        for v in [a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset] {
            body.extend_from_slice(&v.to_be_bytes());
        }
    }
    let mut out = b"SLPS".to_vec();
    out.extend_from_slice(&2u16.to_be_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

#[test]
fn a_data_dir_from_before_txnindex_files_gets_them() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let log = open(&fs).await;
        let want = transactions(&log, 0, 24).await;
        let end = log.log_end_offset().0;
        log.close().await.expect("close");
        let entries: Vec<AbortedTxn> = index_entries(&fs).into_iter().map(|(_, a)| a).collect();
        // What the old code left: no `.txnindex`, the aborted list in the v2 snapshot.
        let snap = path(end, ".snapshot");
        let v3 = fs.file_content(&snap).expect("the close's snapshot");
        assert_eq!(u16::from_be_bytes([v3[4], v3[5]]), 3);
        let gone = fs.crash();
        {
            use shardlog::io::FileSystem;
            for n in run_list(&gone) {
                if n.ends_with(".txnindex") {
                    gone.remove_file(&Path::new(DIR).join(n)).await.expect("remove");
                }
            }
            gone.write_file_atomic(&snap, &as_version_2(&v3, &entries)).await.expect("v2");
        }
        let fs = Rc::new(gone);
        let log = open(&fs).await;
        assert_eq!(answered(&log), pairs(&want));
        assert_eq!(triples(&index_entries(&fs)), want, "written at the first open");
        log.close().await.expect("close");
    });
}

#[test]
fn compaction_carries_the_index_through_its_swap() {
    use shardlog::storage::cleaner::swap::SwapStep;
    use shardlog::storage::cleaner::throttle::Throttler;
    use shardlog::storage::CleanOptions;
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let compacted = LogConfig { compacted: true, delete_retention_enabled: false, ..config() };
        let cache = Rc::new(BatchCache::new(1 << 20));
        let log = PartitionLog::open(fs.clone(), Path::new(DIR), compacted.clone(), cache.clone())
            .await
            .expect("open");
        let want = transactions(&log, 0, 30).await;
        log.flush().await.expect("flush");
        let throttle = Throttler::unlimited();
        let run = |stop_after| CleanOptions {
            key_map_bytes: 1 << 20,
            throttle: &throttle,
            abort: &|| false,
            force: true,
            stop_after,
        };
        // A crash between the renames to `.swap` and the old files' removal: recovery
        // finishes the swap, `.txnindex` included.
        log.clean(T0 + 1, &run(Some(SwapStep::RenamedToSwap))).await.expect("clean");
        assert!(run_list(&fs).iter().any(|n| n.ends_with(".txnindex.swap")));
        let fs = Rc::new(fs.crash());
        drop(log);
        let log = PartitionLog::open(fs.clone(), Path::new(DIR), compacted.clone(), cache.clone())
            .await
            .expect("reopen");
        assert_eq!(triples(&index_entries(&fs)), want);
        // A whole pass: the merged segments keep every marker, so every entry, in the file of
        // the segment that now holds the marker.
        let before = log.segment_count();
        let out = log.clean(T0 + 1, &run(None)).await.expect("clean");
        assert!(out.cleaned && log.segment_count() < before, "{out:?}");
        assert_eq!(triples(&index_entries(&fs)), want);
        assert_eq!(answered(&log), pairs(&want));
        log.close().await.expect("close");
        let log =
            PartitionLog::open(fs.clone(), Path::new(DIR), compacted, cache).await.expect("open");
        assert_eq!(answered(&log), pairs(&want));
        log.close().await.expect("close");
    });
}

#[test]
fn a_follower_records_the_aborts_it_replicates() {
    use shardlog::storage::batch::patch_offset_and_epoch;
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let log = open(&fs).await;
        let at = |b: Bytes, offset: i64| {
            let mut m = BytesMut::from(&b[..]);
            patch_offset_and_epoch(&mut m, offset, 0);
            recompute_crc(&mut m);
            m.freeze()
        };
        // The leader's bytes: producer 7's two records at 0..=1 and its ABORT marker at 2.
        let mut chunk = at(txn_batch(7, 0), 0).to_vec();
        chunk.extend_from_slice(&at(encode_marker(7, 0, false, 0, T0), 2));
        log.append_replicated(Bytes::from(chunk), T0).await.expect("replicate");
        assert_eq!(answered(&log), vec![(7, 0)]);
        assert_eq!(log.first_unstable_offset(Offset(3)), None, "the transaction is closed");
        log.close().await.expect("close");
        assert_eq!(triples(&index_entries(&fs)), vec![(7, 0, 2)]);
    });
}
