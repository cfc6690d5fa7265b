//! A full disk with the in-memory fault-injecting file system: while every write fails with
//! ENOSPC, an append already staged is not acknowledged (its waiter gets a retriable
//! KAFKA_STORAGE_ERROR at once), new appends are refused the same way, and reads of
//! acknowledged data go on. Once space returns the log resumes writing by itself (no
//! reopen): the staged batch is written, new appends are acknowledged, and after a crash or
//! a power loss every acknowledged batch is there, byte-identical. Also across a segment
//! roll and with fsync-per-batch. A non-ENOSPC write error takes only its log offline (the
//! error names the file; its acknowledged data stays readable; another log is untouched).

use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use shardlog::io::mem::{FaultPlan, MemFileSystem};
use shardlog::io::{run_local, FileSystem};
use shardlog::storage::batch::BatchHeader;
use shardlog::storage::records::build_simple_batch;
use shardlog::storage::{BatchCache, FlushPolicy, LogConfig, PartitionLog, StorageError};
use shardlog::types::{Epoch, Offset};

const DIR: &str = "/data/full-0";

async fn open(fs: &MemFileSystem, config: LogConfig) -> PartitionLog<MemFileSystem> {
    let cache = Rc::new(BatchCache::new(1 << 20));
    PartitionLog::open(Rc::new(fs.clone()), Path::new(DIR), config, cache).await.expect("open")
}

async fn append_acked(log: &PartitionLog<MemFileSystem>, i: usize) -> Bytes {
    let info = log.append(build_simple_batch(2, 50 + i * 7, 1), Epoch(0), 1).await.unwrap();
    log.wait_committed(info.last_offset).await.unwrap();
    log.read(info.base_offset, 1, info.last_offset.next()).await.unwrap()
}

/// Every batch of the log, in order.
async fn all_batches(log: &PartitionLog<MemFileSystem>) -> Vec<Bytes> {
    let end = log.log_end_offset();
    let all = log.read(Offset(0), usize::MAX, end).await.unwrap();
    let mut out = Vec::new();
    let mut at = 0;
    while at < all.len() {
        let h = BatchHeader::parse(&all[at..]).unwrap();
        out.push(all.slice(at..at + h.total_size()));
        at += h.total_size();
    }
    out
}

fn is_retriable_storage_error(e: &StorageError) -> bool {
    // KAFKA_STORAGE_ERROR is retriable for Kafka clients.
    matches!(e, StorageError::OutOfSpace { .. }) && e.kafka_code() == 56
}

async fn disk_full_then_space_back(config: LogConfig) {
    let fs = MemFileSystem::new();
    let log = open(&fs, config.clone()).await;
    let mut acked = Vec::new();
    for i in 0..5 {
        acked.push(append_acked(&log, i).await);
    }
    fs.set_disk_full(true);
    // Staged while the disk is full: not acknowledged, answered with a retriable error. (An
    // append that must roll the segment first is refused at once: the roll writes files.)
    let pending = match log.append(build_simple_batch(2, 77, 1), Epoch(0), 1).await {
        Ok(info) => {
            let err = log.wait_committed(info.last_offset).await.unwrap_err();
            assert!(is_retriable_storage_error(&err), "{err}");
            Some(info)
        }
        Err(err) => {
            assert_eq!(err.kafka_code(), 56, "{err}");
            None
        }
    };
    // New appends are refused the same way; reads of acknowledged data go on.
    let err = log.append(build_simple_batch(1, 10, 1), Epoch(0), 1).await.unwrap_err();
    assert_eq!(err.kafka_code(), 56, "{err}");
    let first = log.read(Offset(0), 1, log.committed_offset()).await.unwrap();
    assert_eq!(first, acked[0]);
    // Still full after a few retries.
    fs.sleep(Duration::from_millis(2_500)).await;
    assert!(log.append(build_simple_batch(1, 10, 1), Epoch(0), 1).await.is_err());

    fs.set_disk_full(false);
    // The writer resumes by itself: the staged batch becomes committed.
    if let Some(pending) = pending {
        let mut waited_ms = 0;
        while log.committed_offset() <= pending.last_offset {
            assert!(waited_ms < 10_000, "writes did not resume");
            fs.sleep(Duration::from_millis(50)).await;
            waited_ms += 50;
        }
        acked.push(log.read(pending.base_offset, 1, pending.last_offset.next()).await.unwrap());
    }
    // New appends are accepted again once the writer cleared the mark (within a retry).
    let mut waited_ms = 0;
    let resumed = loop {
        match log.append(build_simple_batch(2, 60, 1), Epoch(0), 1).await {
            Ok(info) => break info,
            Err(e) => assert_eq!(e.kafka_code(), 56, "{e}"),
        }
        assert!(waited_ms < 10_000, "appends did not resume");
        fs.sleep(Duration::from_millis(50)).await;
        waited_ms += 50;
    };
    log.wait_committed(resumed.last_offset).await.unwrap();
    acked.push(log.read(resumed.base_offset, 1, resumed.last_offset.next()).await.unwrap());
    for i in 0..20 {
        acked.push(append_acked(&log, 100 + i).await);
    }
    assert_eq!(all_batches(&log).await, acked);
    for image in [fs.crash(), fs.power_loss()] {
        let reopened = open(&image, config.clone()).await;
        let got = all_batches(&reopened).await;
        // Power loss keeps what was synced; every acknowledged batch was (flush per batch) or
        // was written (interval: acknowledged = written, so the crash image has it).
        assert!(got.len() >= acked.len() - usize::from(config.flush != FlushPolicy::EveryBatch));
        assert_eq!(&got[..], &acked[..got.len().min(acked.len())]);
        reopened.close().await.unwrap();
    }
    log.close().await.unwrap();
}

#[test]
fn writes_resume_by_themselves_when_space_returns() {
    run_local(async {
        let every_batch = LogConfig { flush: FlushPolicy::EveryBatch, ..LogConfig::default() };
        disk_full_then_space_back(every_batch).await;
        // Small segments: rolls (finalize, snapshots, new files) meet the full disk too.
        let small = LogConfig {
            flush: FlushPolicy::EveryBatch,
            segment_bytes: 1024,
            ..LogConfig::default()
        };
        disk_full_then_space_back(small).await;
    });
}

#[test]
fn other_io_errors_take_only_that_log_offline() {
    run_local(async {
        let fs = MemFileSystem::new();
        let cache = Rc::new(BatchCache::new(1 << 20));
        let open_at = |dir: &'static str| {
            let (fs, cache) = (Rc::new(fs.clone()), cache.clone());
            async move {
                PartitionLog::open(fs, Path::new(dir), LogConfig::default(), cache)
                    .await
                    .expect("open")
            }
        };
        let broken = open_at("/data/broken-0").await;
        let healthy = open_at("/data/healthy-0").await;
        let kept = append_acked(&broken, 0).await;
        let _ = append_acked(&healthy, 0).await;
        // Every write to one partition's segment fails (not ENOSPC: an I/O error).
        fs.set_faults(FaultPlan {
            path_suffix: Some("broken-0/00000000000000000000.log".into()),
            fail_write: Some(1),
            ..FaultPlan::default()
        });
        let info = broken.append(build_simple_batch(2, 99, 1), Epoch(0), 1).await.unwrap();
        let err = broken.wait_committed(info.last_offset).await.unwrap_err();
        assert!(matches!(err, StorageError::ReadOnly { .. }), "{err}");
        assert!(
            err.to_string().contains("broken-0/00000000000000000000.log"),
            "names the file: {err}"
        );
        let err = broken.append(build_simple_batch(1, 10, 1), Epoch(0), 1).await.unwrap_err();
        assert_eq!(err.kafka_code(), 56, "offline: {err}");
        // Its acknowledged data stays readable; the other partition is untouched.
        assert_eq!(broken.read(Offset(0), 1, broken.committed_offset()).await.unwrap(), kept);
        for i in 1..10 {
            let _ = append_acked(&healthy, i).await;
        }
        assert_eq!(all_batches(&healthy).await.len(), 10);
    });
}
