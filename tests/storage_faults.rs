//! Fault injection with the in-memory backend: a write torn at every byte of a batch, a
//! failed write, a failed fsync. After each, the log refuses appends (read-only until
//! reopened), and a restart (process crash or power loss) recovers every acknowledged batch
//! byte-identical and never exposes a partial batch.

use std::path::Path;
use std::rc::Rc;

use bytes::Bytes;
use shardlog::io::mem::{FaultPlan, MemFileSystem};
use shardlog::io::run_local;
use shardlog::storage::batch::BatchHeader;
use shardlog::storage::records::build_simple_batch;
use shardlog::storage::{BatchCache, LogConfig, PartitionLog, StorageError};
use shardlog::types::{Epoch, Offset};

const DIR: &str = "/data/faults-0";

async fn open(fs: &MemFileSystem) -> PartitionLog<MemFileSystem> {
    let cache = Rc::new(BatchCache::new(1 << 20));
    PartitionLog::open(Rc::new(fs.clone()), Path::new(DIR), LogConfig::default(), cache)
        .await
        .expect("open")
}

/// Appends `n` acknowledged batches; returns their stored bytes.
async fn acked(log: &PartitionLog<MemFileSystem>, n: usize) -> Vec<Bytes> {
    let mut out = Vec::new();
    for i in 0..n {
        let info = log.append(build_simple_batch(2, 50 + i * 13, 1), Epoch(0), 1).await.unwrap();
        log.wait_committed(info.last_offset).await.unwrap();
        out.push(log.read(info.base_offset, 1, info.last_offset.next()).await.unwrap());
    }
    out
}

async fn check_recovered(fs: MemFileSystem, expected: &[Bytes]) {
    let log = open(&fs).await;
    let end = log.log_end_offset();
    let all = log.read(Offset(0), usize::MAX, end).await.unwrap();
    let mut at = 0;
    let mut n = 0;
    while at < all.len() {
        let h = BatchHeader::parse(&all[at..]).unwrap();
        let b = &all[at..at + h.total_size()];
        shardlog::storage::batch::check_crc(&h, b).expect("no partial batch");
        if n < expected.len() {
            assert_eq!(b, &expected[n][..], "acked batch {n} byte-identical");
        }
        at += h.total_size();
        n += 1;
    }
    assert!(n >= expected.len(), "all {} acked batches survive, got {n}", expected.len());
    // The recovered log accepts appends again.
    let info = log.append(build_simple_batch(1, 10, 1), Epoch(0), 1).await.unwrap();
    log.wait_committed(info.last_offset).await.unwrap();
    log.close().await.unwrap();
}

async fn expect_read_only(log: &PartitionLog<MemFileSystem>, pending: Offset) {
    assert!(log.wait_committed(pending).await.is_err(), "failed write is not acknowledged");
    let err = log.append(build_simple_batch(1, 10, 1), Epoch(0), 1).await.unwrap_err();
    assert!(matches!(err, StorageError::ReadOnly { .. }), "{err}");
}

#[test]
fn torn_write_at_every_byte_of_a_batch() {
    run_local(async {
        // Find the layout once: where the next batch lands in its write.
        let probe_fs = MemFileSystem::new();
        let log = open(&probe_fs).await;
        let _ = acked(&log, 3).await;
        let start = log.read(Offset(0), usize::MAX, log.log_end_offset()).await.unwrap().len();
        let next = build_simple_batch(3, 200, 1);
        let prefix = start % 4096;
        let write_len = prefix + next.len();
        drop(log);
        for tear_at in 0..=write_len {
            let fs = MemFileSystem::new();
            let log = open(&fs).await;
            let expected = acked(&log, 3).await;
            fs.set_faults(FaultPlan {
                path_suffix: Some(".log".into()),
                tear_write: Some((1, tear_at)),
                ..FaultPlan::default()
            });
            let info = log.append(next.clone(), Epoch(0), 1).await.unwrap();
            expect_read_only(&log, info.last_offset).await;
            check_recovered(fs.crash(), &expected).await;
            check_recovered(fs.power_loss(), &expected).await;
        }
    });
}

#[test]
fn failed_write_and_failed_fsync_make_the_log_read_only() {
    run_local(async {
        for plan in [
            FaultPlan { fail_write: Some(1), ..FaultPlan::default() },
            FaultPlan { fail_sync: Some(1), ..FaultPlan::default() },
        ] {
            let fs = MemFileSystem::new();
            let log = open(&fs).await;
            let expected = acked(&log, 5).await;
            fs.set_faults(FaultPlan { path_suffix: Some(".log".into()), ..plan.clone() });
            let info = log.append(build_simple_batch(2, 99, 1), Epoch(0), 1).await.unwrap();
            expect_read_only(&log, info.last_offset).await;
            // Reads of acknowledged data keep working.
            let first = log.read(Offset(0), 1, log.committed_offset()).await.unwrap();
            assert_eq!(first, expected[0]);
            assert!(log.close().await.is_err(), "close reports the failure");
            check_recovered(fs.crash(), &expected).await;
            check_recovered(fs.power_loss(), &expected).await;
        }
    });
}
