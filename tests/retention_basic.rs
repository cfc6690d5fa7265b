//! Retention on the in-memory backend: time and size retention through `.deleted` files,
//! the log start advancing, reads below it refused, live config changes, and recovery of a
//! crash that left `.deleted` files or orphan indexes behind.

use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use shardlog::io::mem::MemFileSystem;
use shardlog::io::{run_local, FileSystem};
use shardlog::storage::records::build_simple_batch;
use shardlog::storage::{BatchCache, LogConfig, PartitionLog, StorageError};
use shardlog::types::{Epoch, Offset};

const DIR: &str = "/data/ret-0";
const NOW_MS: i64 = 10_000_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 8 * 1024,
        index_interval_bytes: 512,
        segment_index_bytes: 4096,
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: i64::MAX,
        retention_ms: -1,
        retention_bytes: -1,
        file_delete_delay_ms: 50,
        ..LogConfig::default()
    }
}

async fn open(fs: &Rc<MemFileSystem>, config: LogConfig) -> PartitionLog<MemFileSystem> {
    PartitionLog::open(fs.clone(), Path::new(DIR), config, Rc::new(BatchCache::new(1 << 20)))
        .await
        .expect("open")
}

/// Appends `n` batches of 5 records (~1 KiB each) with timestamps `ts0`, `ts0 + 1`, ...
async fn fill(log: &PartitionLog<MemFileSystem>, n: usize, ts0: i64) -> Offset {
    let mut last = Offset(0);
    for i in 0..n {
        let b = build_simple_batch(5, 200, ts0 + i as i64);
        last = log.append(b, Epoch(1), NOW_MS).await.expect("append").last_offset;
    }
    log.wait_committed(last).await.expect("commit");
    last
}

async fn names(fs: &MemFileSystem, suffix: &str) -> Vec<String> {
    let all = fs.list_dir(Path::new(DIR)).await.expect("list");
    all.into_iter().filter(|n| n.ends_with(suffix)).collect()
}

#[test]
fn time_retention_deletes_old_segments_through_deleted_files() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let log = open(&fs, config()).await;
        // 40 old batches, then 40 recent ones.
        fill(&log, 40, 1_000).await;
        let old_end = log.log_end_offset();
        fill(&log, 40, NOW_MS - 10).await;
        let segments_before = log.segment_count();
        assert!(segments_before > 4, "small segments: {segments_before}");
        // Nothing is due while retention.ms is -1.
        let out = log.enforce_retention(NOW_MS).await.expect("retention");
        assert_eq!(out.segments_deleted, 0);
        log.set_config(LogConfig { retention_ms: 60_000, ..config() });
        let out = log.enforce_retention(NOW_MS).await.expect("retention");
        assert!(out.segments_deleted > 0);
        assert!(out.bytes_deleted > 0);
        assert_eq!(out.log_start, log.log_start_offset());
        assert!(log.log_start_offset() > Offset(0));
        assert!(log.log_start_offset() <= old_end, "no recent segment goes");
        assert!(!names(&fs, ".log.deleted").await.is_empty());
        assert!(matches!(
            log.read(Offset(0), 1, log.committed_offset()).await,
            Err(StorageError::OffsetOutOfRange { .. })
        ));
        // Head consumers are unaffected.
        let head = log.read(log.log_start_offset(), 1 << 20, log.committed_offset()).await;
        assert!(!head.expect("read at log start").is_empty());
        fs.sleep(Duration::from_millis(200)).await;
        assert!(names(&fs, ".deleted").await.is_empty(), "removed after the delay");
        // Everything past retention: the active segment is rolled and goes too.
        let out = log.enforce_retention(NOW_MS + 3_600_000).await.expect("retention");
        assert!(out.segments_deleted > 0);
        assert_eq!(log.log_start_offset(), log.log_end_offset());
        assert_eq!(log.segment_count(), 1);
        log.close().await.expect("close");
        let log = open(&fs, config()).await;
        assert_eq!(log.log_start_offset(), log.log_end_offset(), "log start survives restart");
    });
}

#[test]
fn size_retention_keeps_at_most_retention_bytes() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let log = open(&fs, LogConfig { retention_bytes: 20 * 1024, ..config() }).await;
        fill(&log, 120, NOW_MS).await;
        let out = log.enforce_retention(NOW_MS).await.expect("retention");
        assert!(out.segments_deleted > 0);
        let remaining: u64 = {
            let all = fs.list_dir(Path::new(DIR)).await.expect("list");
            let mut sum = 0;
            for n in all.iter().filter(|n| n.ends_with(".log")) {
                sum += fs.file_content(&Path::new(DIR).join(n)).map_or(0, |c| c.len() as u64);
            }
            sum
        };
        // Kafka deletes a segment only if the log stays at or above retention.bytes, so up
        // to one segment more remains (plus the active segment's page padding here).
        assert!(remaining <= 20 * 1024 + 8 * 1024 + 4096, "kept {remaining} bytes");
        assert!(remaining >= 20 * 1024, "deleted too much: {remaining} {out:?}");
        let again = log.enforce_retention(NOW_MS).await.expect("retention");
        assert_eq!(again.segments_deleted, 0, "idempotent");
        log.close().await.expect("close");
    });
}

#[test]
fn crash_after_rename_recovers_without_leftovers() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let log = open(&fs, LogConfig { file_delete_delay_ms: 60_000, ..config() }).await;
        fill(&log, 60, 1_000).await;
        fill(&log, 10, NOW_MS).await;
        let end = log.log_end_offset();
        log.set_config(LogConfig { retention_ms: 1_000, file_delete_delay_ms: 60_000, ..config() });
        log.enforce_retention(NOW_MS).await.expect("retention");
        let start = log.log_start_offset();
        assert!(!names(&fs, ".deleted").await.is_empty());
        // SIGKILL with `.deleted` files pending; also fake a crash between the renames of
        // one segment: an index whose `.log` is already renamed.
        let crashed = Rc::new(fs.crash());
        let orphan = Path::new(DIR).join("00000000000000000001.index");
        drop(crashed.open(&orphan, true).await.expect("orphan"));
        let log = open(&crashed, config()).await;
        assert!(names(&crashed, ".deleted").await.is_empty());
        assert!(!crashed
            .list_dir(Path::new(DIR))
            .await
            .expect("list")
            .contains(&"00000000000000000001.index".to_string()));
        assert_eq!(log.log_start_offset(), start);
        assert_eq!(log.log_end_offset(), end);
        let data = log.read(start, 1 << 20, log.committed_offset()).await.expect("read");
        assert!(!data.is_empty());
    });
}

#[test]
fn live_config_changes_segment_size_and_message_limit() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let log = open(&fs, LogConfig { segment_bytes: 1 << 30, ..config() }).await;
        fill(&log, 20, NOW_MS).await;
        assert_eq!(log.segment_count(), 1);
        log.set_config(LogConfig { segment_bytes: 4096, max_message_bytes: 600, ..config() });
        assert!(log.append(build_simple_batch(5, 200, NOW_MS), Epoch(1), NOW_MS).await.is_err());
        for _ in 0..10 {
            log.append(build_simple_batch(1, 100, NOW_MS), Epoch(1), NOW_MS).await.expect("small");
        }
        assert!(log.segment_count() >= 2, "rolled under the new segment.bytes");
        assert_eq!(log.config().max_message_bytes, 600);
        log.close().await.expect("close");
    });
}
