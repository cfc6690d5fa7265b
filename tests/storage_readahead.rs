//! Read-ahead (`storage::readahead`) on the in-memory backend: a reader catching up through a
//! cold log gets exactly the log's bytes with its later reads served from the batch cache,
//! and a truncation while a read-ahead is in flight never lets truncated batches be read.

use std::path::Path;
use std::rc::Rc;

use bytes::Bytes;
use shardlog::io::mem::MemFileSystem;
use shardlog::io::run_local;
use shardlog::storage::batch::{BatchHeader, Compression};
use shardlog::storage::records::{build_batch, NewRecord};
use shardlog::storage::{BatchCache, LogConfig, PartitionLog};
use shardlog::types::{Epoch, Offset};

const DIR: &str = "/data/ra-0";
const CACHE_BYTES: usize = 16 << 20;

fn config() -> LogConfig {
    LogConfig {
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: i64::MAX,
        ..LogConfig::default()
    }
}

/// A log of `batches` 16 KiB batches, reopened so nothing is cached.
async fn cold_log(
    fs: &Rc<MemFileSystem>,
    batches: usize,
) -> (PartitionLog<MemFileSystem>, Rc<BatchCache>) {
    let value = vec![7u8; 1000];
    {
        let log = PartitionLog::open(
            fs.clone(),
            Path::new(DIR),
            config(),
            Rc::new(BatchCache::new(CACHE_BYTES)),
        )
        .await
        .expect("open");
        for i in 0..batches {
            let key = format!("k{i}");
            let recs: Vec<NewRecord<'_>> = (0..16)
                .map(|_| NewRecord {
                    key: Some(key.as_bytes()),
                    value: Some(&value),
                    timestamp_ms: 1,
                    headers: vec![],
                })
                .collect();
            log.append(build_batch(&recs, Compression::None), Epoch(1), 1).await.expect("append");
        }
        log.close().await.expect("close");
    }
    let cache = Rc::new(BatchCache::new(CACHE_BYTES));
    let log = PartitionLog::open(fs.clone(), Path::new(DIR), config(), cache.clone())
        .await
        .expect("reopen");
    (log, cache)
}

/// Reads the whole log from `from` with `max_bytes` per read, as a consumer would.
/// With `to_send`, through the Fetch path's read (runs of read-ahead batches as slices).
async fn read_through(
    log: &PartitionLog<MemFileSystem>,
    max_bytes: usize,
    to_send: bool,
) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    let end = log.committed_offset();
    while next < end {
        let data = if to_send {
            // Whole batches in every piece: joined, they read as one buffer.
            log.read_to_send(next, max_bytes, end).await.expect("read").to_bytes()
        } else {
            log.read(next, max_bytes, end).await.expect("read")
        };
        assert!(data.len() <= max_bytes.max(16 * 1024), "{} > {max_bytes}", data.len());
        assert!(!data.is_empty());
        let mut at = 0;
        while at < data.len() {
            let h = BatchHeader::parse(&data[at..]).expect("header");
            out.push(data.slice(at..at + h.total_size()));
            next = Offset(h.last_offset() + 1);
            at += h.total_size();
        }
        // Let the read-ahead run, as the network send would.
        futures_lite::future::yield_now().await;
    }
    out
}

#[test]
fn catch_up_reads_are_served_by_read_ahead() {
    catch_up(false);
}

#[test]
fn catch_up_reads_to_send_are_served_by_read_ahead() {
    catch_up(true);
}

fn catch_up(to_send: bool) {
    run_local(async move {
        let fs = Rc::new(MemFileSystem::new());
        let (log, cache) = cold_log(&fs, 400).await;
        let (hits0, misses0) = cache.hit_counts();
        let got = read_through(&log, 512 * 1024, to_send).await;
        assert_eq!(got.len(), 400);
        for (i, b) in got.iter().enumerate() {
            let h = BatchHeader::parse(b).expect("header");
            assert_eq!(h.base_offset, i as i64 * 16, "batch {i} in order, none twice");
        }
        let (hits, misses) = cache.hit_counts();
        // A run of batches answered as one slice counts as one hit.
        let wanted = if to_send { 100 } else { 200 };
        assert!(
            hits - hits0 > wanted && misses - misses0 < 10,
            "most batches came from read-ahead: {hits} hits, {misses} misses"
        );
        // The same bytes as a read without read-ahead (one huge read).
        let whole = log.read(Offset(0), 64 << 20, log.committed_offset()).await.expect("read");
        assert_eq!(got.concat(), whole.to_vec());
    });
}

#[test]
fn truncation_during_read_ahead_is_never_read_back() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let (log, _cache) = cold_log(&fs, 200).await;
        let end = log.committed_offset();
        // A large read starts a read-ahead of the next chunk.
        let first = log.read(Offset(0), 512 * 1024, end).await.expect("read");
        assert!(first.len() >= 256 * 1024);
        // Truncate into the read-ahead's range before it completes, then append new data.
        log.truncate_to(Offset(800)).await.expect("truncate");
        let value = b"new";
        let recs =
            [NewRecord { key: Some(b"n"), value: Some(value), timestamp_ms: 2, headers: vec![] }];
        log.append(build_batch(&recs, Compression::None), Epoch(2), 2).await.expect("append");
        log.flush().await.expect("flush");
        let end = log.committed_offset();
        assert_eq!(end, Offset(801));
        futures_lite::future::yield_now().await;
        let data = log.read(Offset(784), 1 << 20, end).await.expect("read");
        let sent = log.read_to_send(Offset(784), 1 << 20, end).await.expect("read to send");
        assert_eq!(sent.to_bytes(), data, "the Fetch path reads the same bytes");
        let mut at = 0;
        let mut last = None;
        while at < data.len() {
            let h = BatchHeader::parse(&data[at..]).expect("header");
            last = Some((h.base_offset, h.partition_leader_epoch));
            at += h.total_size();
        }
        assert_eq!(last, Some((800, 2)), "the new batch, not a stale read-ahead one");
    });
}
