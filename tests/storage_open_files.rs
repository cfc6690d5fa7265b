//! Bounded file descriptors (issue 19) on the in-memory file system: a log of many sealed
//! segments read back whole through a per-shard open-file cache of 2, before and after a
//! clean reopen and a crash; only the active segment keeps its file open while idle, and
//! deleted segments leave the cache.

use std::path::Path;
use std::rc::Rc;

use bytes::Bytes;
use shardlog::io::mem::MemFileSystem;
use shardlog::io::run_local;
use shardlog::storage::batch::BatchHeader;
use shardlog::storage::records::build_simple_batch;
use shardlog::storage::{BatchCache, LogConfig, PartitionLog};
use shardlog::types::{Epoch, Offset};

const CACHE_FILES: usize = 2;

fn config() -> LogConfig {
    LogConfig { segment_bytes: 16 * 1024, index_interval_bytes: 1024, ..LogConfig::default() }
}

/// No batch cache (every read goes to the segment files) and an open-file cache of 2.
fn shard_cache() -> Rc<BatchCache> {
    Rc::new(BatchCache::with_open_files_max(0, CACHE_FILES))
}

fn bases_in(data: &Bytes) -> Vec<i64> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let h = BatchHeader::parse(&data[at..]).unwrap();
        at += h.total_size();
        out.push(h.base_offset);
    }
    assert_eq!(at, data.len(), "only whole batches");
    out
}

/// Reads every batch on its own (each from its segment file), checks the bound after each
/// read, and returns their concatenation.
async fn read_each(
    log: &PartitionLog<MemFileSystem>,
    fs: &MemFileSystem,
    cache: &BatchCache,
    bases: &[i64],
) -> Vec<u8> {
    let mut out = Vec::new();
    for base in bases {
        let data = log.read(Offset(*base), 1, log.committed_offset()).await.unwrap();
        assert_eq!(bases_in(&data), vec![*base]);
        out.extend_from_slice(&data);
        // The active segment's own file plus at most the cache's bound (no read in flight).
        let open = fs.open_handles(".log");
        assert!(open <= 1 + CACHE_FILES, "{open} segment files open after reading {base}");
        assert!(cache.open_files().stats().held <= CACHE_FILES);
    }
    out
}

#[test]
fn every_sealed_segment_reads_back_through_a_cache_of_two() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let dir = Path::new("/data/t-0");
        let cache = shard_cache();
        let log = PartitionLog::open(fs.clone(), dir, config(), cache.clone()).await.unwrap();
        let mut bases = Vec::new();
        for i in 0..300usize {
            let b = build_simple_batch(1 + i % 4, 100 + (i * 37) % 400, 1_000 + i as i64);
            bases.push(log.append(b, Epoch(1), 2_000).await.unwrap().base_offset.0);
        }
        log.flush().await.unwrap();
        let segments = log.segment_count();
        assert!(segments >= 10, "only {segments} segments");
        // Finalized sealed segments gave up their files: only the active one is open.
        assert_eq!(fs.open_handles(".log"), 1);

        let whole = log.read(Offset(0), usize::MAX, log.committed_offset()).await.unwrap();
        assert_eq!(bases_in(&whole), bases);
        let each = read_each(&log, &fs, &cache, &bases).await;
        assert_eq!(each, whole.to_vec(), "batch by batch == one large read");
        let stats = cache.open_files().stats();
        assert!(stats.evicted > 0 && stats.opened >= segments as u64 - 1, "{stats:?}");
        log.close().await.unwrap();
        assert_eq!(fs.open_handles(".log"), 0, "close releases every segment file");

        // A clean reopen trusts the segments and closes each one it scanned.
        let cache = shard_cache();
        let log = PartitionLog::open(fs.clone(), dir, config(), cache.clone()).await.unwrap();
        assert_eq!(log.segment_count(), segments);
        assert_eq!(fs.open_handles(".log"), 1, "only the active segment open after recovery");
        assert_eq!(read_each(&log, &fs, &cache, &bases).await, whole.to_vec());

        // Retention deletes sealed segments: their cached files go with them.
        let last_base = *bases.last().unwrap();
        log.advance_log_start(Offset(last_base)).await.unwrap();
        assert!(log.segment_count() < segments);
        assert_eq!(cache.open_files().stats().held, 0);
        assert_eq!(fs.open_handles(".log"), 1);
        let tail = log.read(Offset(last_base), usize::MAX, log.committed_offset()).await.unwrap();
        assert_eq!(bases_in(&tail), vec![last_base]);
        drop(log);
    });
}

#[test]
fn after_a_crash_scanned_segments_close_once_finalized() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let dir = Path::new("/data/t-1");
        let log = PartitionLog::open(fs.clone(), dir, config(), shard_cache()).await.unwrap();
        let mut bases = Vec::new();
        for i in 0..200usize {
            let b = build_simple_batch(2, 200 + (i * 13) % 300, 1_000 + i as i64);
            bases.push(log.append(b, Epoch(1), 2_000).await.unwrap().base_offset.0);
        }
        log.flush().await.unwrap();
        let whole = log.read(Offset(0), usize::MAX, log.committed_offset()).await.unwrap();
        let crashed = Rc::new(fs.crash());
        drop(log);

        let cache = shard_cache();
        let log = PartitionLog::open(crashed.clone(), dir, config(), cache.clone()).await.unwrap();
        // Segments above the recovery point were scanned and are finalized again by the
        // writer; then only the active segment keeps its file.
        log.flush().await.unwrap();
        assert_eq!(crashed.open_handles(".log"), 1);
        assert_eq!(read_each(&log, &crashed, &cache, &bases).await, whole.to_vec());
        log.close().await.unwrap();
        assert_eq!(crashed.open_handles(".log"), 0);
    });
}
