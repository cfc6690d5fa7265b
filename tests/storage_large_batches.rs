//! KIP-74 at the storage layer: a read always returns at least the whole batch holding the
//! offset asked for, whatever the batch's size against the read's byte limit, cold (from
//! disk, through the sparse index and the forward scan, after a reopen emptied the cache) and
//! warm (from the batch cache), so a consumer with a small per-partition limit never stalls.
//! Batches from a 1-byte record to 10 MiB, limits from 1 byte to 100,000 bytes.

use std::path::Path;
use std::rc::Rc;

use bytes::Bytes;
use shardlog::io::mem::MemFileSystem;
use shardlog::io::run_local;
use shardlog::storage::batch::{BatchHeader, Compression};
use shardlog::storage::records::{build_batch, NewRecord};
use shardlog::storage::{BatchCache, LogConfig, PartitionLog};
use shardlog::types::{Epoch, Offset};

const CACHE_BYTES: usize = 64 << 20;
const BATCHES: usize = 4;
/// Value bytes per record and records per batch: a 1-byte record, a 10 KB batch of 1 KB
/// records, librdkafka's ~1 MB batches of 10 KB records (the stall seen with a real client),
/// and a 10 MiB batch.
const SHAPES: [(usize, usize); 5] =
    [(1, 1), (1_000, 10), (10_000, 99), (100_000, 10), (1 << 20, 10)];
const LIMITS: [usize; 4] = [1, 100, 16_384, 100_000];

fn config() -> LogConfig {
    LogConfig {
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: i64::MAX,
        max_message_bytes: 64 << 20,
        ..LogConfig::default()
    }
}

async fn open(fs: &Rc<MemFileSystem>, dir: &str) -> PartitionLog<MemFileSystem> {
    PartitionLog::open(fs.clone(), Path::new(dir), config(), Rc::new(BatchCache::new(CACHE_BYTES)))
        .await
        .expect("open")
}

/// Appends `BATCHES` batches of `records` records of `value_bytes` each; returns their bytes.
async fn fill(log: &PartitionLog<MemFileSystem>, value_bytes: usize, records: usize) -> Vec<usize> {
    let value = vec![b'v'; value_bytes];
    let mut sizes = Vec::new();
    for i in 0..BATCHES {
        let key = format!("k{i}");
        let recs: Vec<NewRecord<'_>> = (0..records)
            .map(|_| NewRecord {
                key: Some(key.as_bytes()),
                value: Some(&value),
                timestamp_ms: 1,
                headers: vec![],
            })
            .collect();
        let batch = build_batch(&recs, Compression::None);
        sizes.push(batch.len());
        log.append(batch, Epoch(1), 1).await.expect("append");
    }
    log.flush().await.expect("flush");
    sizes
}

/// Reads from the start with `max_bytes` per read, as a consumer would: every read returns
/// data (never empty before the end) and together they are the log's batches in order.
async fn read_through(log: &PartitionLog<MemFileSystem>, max_bytes: usize) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    let end = log.committed_offset();
    while next < end {
        let data = log.read(next, max_bytes, end).await.expect("read");
        assert!(!data.is_empty(), "empty read at offset {} (limit {max_bytes} B)", next.0);
        let mut at = 0;
        while at < data.len() {
            let h = BatchHeader::parse(&data[at..]).expect("header");
            assert!(at + h.total_size() <= data.len(), "a partial batch was returned");
            out.push(data.slice(at..at + h.total_size()));
            next = Offset(h.last_offset() + 1);
            at += h.total_size();
        }
        futures_lite::future::yield_now().await;
    }
    out
}

fn check(got: &[Bytes], sizes: &[usize], records: usize, what: &str) {
    assert_eq!(got.len(), sizes.len(), "{what}: every batch once");
    for (i, b) in got.iter().enumerate() {
        let h = BatchHeader::parse(b).expect("header");
        assert_eq!(h.base_offset, (i * records) as i64, "{what}: batch {i} in order");
        assert_eq!(b.len(), sizes[i], "{what}: batch {i} whole");
    }
}

#[test]
fn every_read_returns_at_least_one_whole_batch_cold_and_warm() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        for (n, &(value_bytes, records)) in SHAPES.iter().enumerate() {
            let dir = format!("/data/kip74-{n}");
            let log = open(&fs, &dir).await;
            let sizes = fill(&log, value_bytes, records).await;
            for &limit in &LIMITS {
                let what = format!("warm, batches {:?} B, limit {limit} B", sizes[0]);
                check(&read_through(&log, limit).await, &sizes, records, &what);
            }
            log.close().await.expect("close");
            for &limit in &LIMITS {
                // Reopened for every limit: each pass starts with nothing cached.
                let log = open(&fs, &dir).await;
                let what = format!("cold, batches {:?} B, limit {limit} B", sizes[0]);
                check(&read_through(&log, limit).await, &sizes, records, &what);
                log.close().await.expect("close");
            }
        }
    });
}
