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

#[test]
fn truncation_into_a_sealed_segment_makes_it_active_with_its_own_file() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let dir = Path::new("/data/t-2");
        let cache = shard_cache();
        let log = PartitionLog::open(fs.clone(), dir, config(), cache.clone()).await.unwrap();
        let mut bases = Vec::new();
        for i in 0..200usize {
            let b = build_simple_batch(2, 300, 1_000 + i as i64);
            bases.push(log.append(b, Epoch(1), 2_000).await.unwrap().base_offset.0);
        }
        log.flush().await.unwrap();
        let segments = log.segment_count();
        // Read everything once so the cache holds sealed files, then cut into an old one.
        read_each(&log, &fs, &cache, &bases).await;
        let cut = bases[bases.len() / 3];
        bases.truncate(200);
        log.truncate_to(Offset(cut)).await.unwrap();
        assert!(log.segment_count() < segments);
        assert_eq!(log.log_end_offset(), Offset(cut));
        for i in 0..50usize {
            let b = build_simple_batch(1, 500, 5_000 + i as i64);
            bases.push(log.append(b, Epoch(2), 6_000).await.unwrap().base_offset.0);
        }
        log.flush().await.unwrap();
        let expected: Vec<i64> = bases
            .iter()
            .copied()
            .filter(|b| *b < cut)
            .chain(bases[200..].iter().copied())
            .collect();
        let whole = log.read(Offset(0), usize::MAX, log.committed_offset()).await.unwrap();
        assert_eq!(bases_in(&whole), expected);
        // The truncated segment became active (own file) and later ones sealed again: once
        // finalized, only the active segment's file stays open beside the cache.
        assert!(fs.open_handles(".log") <= 1 + CACHE_FILES);
        log.close().await.unwrap();
        assert_eq!(fs.open_handles(".log"), 0);
    });
}

#[test]
fn compaction_reads_and_swaps_through_a_cache_of_one() {
    use shardlog::storage::batch::Compression;
    use shardlog::storage::cleaner::records_of;
    use shardlog::storage::cleaner::throttle::Throttler;
    use shardlog::storage::records::{build_batch, NewRecord};
    use shardlog::storage::CleanOptions;

    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let dir = Path::new("/data/t-3");
        let cache = Rc::new(BatchCache::with_open_files_max(0, 1));
        let config = LogConfig {
            segment_bytes: 2048,
            segment_ms: 1_000_000,
            index_interval_bytes: 256,
            compacted: true,
            delete_retention_enabled: false,
            retention_ms: -1,
            file_delete_delay_ms: 10,
            ..LogConfig::default()
        };
        let log = PartitionLog::open(fs.clone(), dir, config, cache.clone()).await.unwrap();
        let mut last_of_key = std::collections::BTreeMap::new();
        for i in 0..300usize {
            let key = format!("k{}", i % 10);
            let value = vec![b'v'; 40 + i % 50];
            let rec = [NewRecord {
                key: Some(key.as_bytes()),
                value: Some(&value),
                timestamp_ms: 1_000,
                headers: vec![],
            }];
            let info = log.append(build_batch(&rec, Compression::None), Epoch(1), 1_000).await;
            last_of_key.insert(key, info.unwrap().base_offset.0);
        }
        // A record past `segment.ms` rolls: every keyed record above is in a sealed segment.
        let end = [NewRecord {
            key: Some(b"end"),
            value: Some(b"x"),
            timestamp_ms: 1_000,
            headers: vec![],
        }];
        let info = log.append(build_batch(&end, Compression::None), Epoch(1), 10_000_000).await;
        last_of_key.insert("end".to_string(), info.unwrap().base_offset.0);
        log.flush().await.unwrap();
        let before = log.segment_count();
        assert!(before >= 10, "only {before} segments");
        let throttle = Throttler::unlimited();
        let opts = CleanOptions {
            key_map_bytes: 1 << 20,
            throttle: &throttle,
            abort: &|| false,
            force: true,
            stop_after: None,
        };
        log.clean(10_000_000, &opts).await.expect("clean");
        let whole = log.read(Offset(0), usize::MAX, log.committed_offset()).await.unwrap();
        let mut seen = std::collections::BTreeMap::new();
        let mut at = 0;
        while at < whole.len() {
            let h = BatchHeader::parse(&whole[at..]).unwrap();
            let (_, recs) = records_of(&h, &whole[at..at + h.total_size()]).unwrap();
            for r in recs {
                let key = String::from_utf8(r.key.unwrap()).unwrap();
                assert!(seen.insert(key, r.offset).is_none(), "a key twice after cleaning");
            }
            at += h.total_size();
        }
        assert_eq!(seen, last_of_key, "the latest record of every key, nothing else");
        let stats = cache.open_files().stats();
        assert!(stats.evicted > 0 && stats.held <= 1, "{stats:?}");
        // The swapped-in segment gave up its own file after the swap: only the active
        // segment's file and at most the cache's one stay open.
        assert!(fs.open_handles(".log") <= 2, "{} open", fs.open_handles(".log"));
        log.close().await.unwrap();
        assert_eq!(fs.open_handles(".log"), 0);
    });
}
