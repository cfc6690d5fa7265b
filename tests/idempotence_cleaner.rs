//! Compaction keeps each live idempotent producer's last batch, as Kafka's cleaner does: the
//! batch is emptied (header only) when all its records are superseded, but not dropped, so
//! rebuilding the producer state from the log alone (no snapshot) still finds its sequence
//! and a retry of that batch is still a duplicate. Earlier emptied batches of the same
//! producer are dropped as before.

use std::path::Path;
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use shardlog::io::mem::MemFileSystem;
use shardlog::io::{run_local, FileSystem};
use shardlog::storage::batch::{recompute_crc, BatchHeader, Compression};
use shardlog::storage::cleaner::throttle::Throttler;
use shardlog::storage::records::{build_batch, NewRecord};
use shardlog::storage::{BatchCache, CleanOptions, LogConfig, PartitionLog};
use shardlog::types::{Epoch, Offset};

const DIR: &str = "/data/idem-compact-0";
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

async fn open(fs: &Rc<MemFileSystem>) -> PartitionLog<MemFileSystem> {
    PartitionLog::open(fs.clone(), Path::new(DIR), config(), Rc::new(BatchCache::new(1 << 20)))
        .await
        .expect("open")
}

/// One record `key` = `value`, from producer `pid` at sequence `seq` (`pid` -1: none).
fn batch(key: &str, value: &[u8], pid: i64, seq: i32) -> Bytes {
    let rec = NewRecord {
        key: Some(key.as_bytes()),
        value: Some(value),
        timestamp_ms: T0,
        headers: vec![],
    };
    let mut b = BytesMut::from(&build_batch(&[rec], Compression::None)[..]);
    b[43..51].copy_from_slice(&pid.to_be_bytes());
    b[51..53].copy_from_slice(&(if pid < 0 { -1i16 } else { 0 }).to_be_bytes());
    b[53..57].copy_from_slice(&(if pid < 0 { -1 } else { seq }).to_be_bytes());
    recompute_crc(&mut b);
    b.freeze()
}

/// (base offset, producer id, records) of every stored batch.
async fn batches(log: &PartitionLog<MemFileSystem>) -> Vec<(i64, i64, i32)> {
    let all = log.read(Offset(0), usize::MAX, log.log_end_offset()).await.expect("read");
    let (mut at, mut out) = (0, Vec::new());
    while at < all.len() {
        let h = BatchHeader::parse(&all[at..]).expect("batch");
        out.push((h.base_offset, h.producer_id, h.records_count));
        at += h.total_size();
    }
    out
}

#[test]
fn cleaner_keeps_a_live_producers_last_batch() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let log = open(&fs).await;
        let value = vec![b'v'; 200];
        let append = |b: Bytes| log.append(b, Epoch(0), T0);
        // Producer 5 writes key "a" twice; both are superseded by later non-idempotent writes.
        let first = append(batch("a", b"p0", 5, 0)).await.expect("append");
        let last_batch = batch("a", b"p1", 5, 1);
        let last = append(last_batch.clone()).await.expect("append");
        for i in 0..30 {
            append(batch(if i % 2 == 0 { "a" } else { "b" }, &value, -1, -1)).await.expect("fill");
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
        assert!(out.cleaned && out.segments_rewritten > 0, "{out:?}");
        let stored = batches(&log).await;
        assert!(
            !stored.iter().any(|(o, _, _)| *o == first.base_offset.0),
            "an earlier emptied batch of the producer goes: {stored:?}"
        );
        assert!(
            stored.contains(&(last.base_offset.0, 5, 0)),
            "the producer's last batch stays, emptied: {stored:?}"
        );
        log.close().await.expect("close");
        // Without any snapshot, the state comes from the log alone.
        for name in fs.list_dir(Path::new(DIR)).await.expect("list") {
            if name.ends_with(".snapshot") {
                fs.remove_file(&Path::new(DIR).join(name)).await.expect("remove");
            }
        }
        let log = open(&fs).await;
        let retry = log.append(last_batch, Epoch(0), T0).await.expect("retry");
        assert!(retry.duplicate, "the retry is recognized from the emptied batch");
        assert_eq!(retry.base_offset, last.base_offset);
        let next = log.append(batch("c", b"p2", 5, 2), Epoch(0), T0).await.expect("next");
        assert!(!next.duplicate);
        log.close().await.expect("close");
    });
}
