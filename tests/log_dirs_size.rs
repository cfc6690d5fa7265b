//! The partition size DescribeLogDirs reports (`PartitionLog::size_bytes`, Kafka's
//! `UnifiedLog.size`): the bytes of the batches in the log's segments across rolls, equal to
//! the `.log` files on disk once the log is closed (O_DIRECT pads and preallocates the active
//! segment while it is open; close trims it), the same after reopening, and smaller after
//! retention deletes a segment.

use std::path::Path;
use std::rc::Rc;

use shardlog::io::dma::DmaFileSystem;
use shardlog::io::run_local;
use shardlog::storage::records::build_simple_batch;
use shardlog::storage::{BatchCache, LogConfig, PartitionLog};
use shardlog::types::{Epoch, Offset};

fn log_files_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

#[test]
fn size_is_the_segments_bytes_and_matches_the_files_after_close() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    run_local(async move {
        shardlog::io::probe_data_dir(tmp.path()).await.unwrap();
        let config = LogConfig { segment_bytes: 16 * 1024, ..LogConfig::default() };
        let fs = Rc::new(DmaFileSystem);
        let cache = Rc::new(BatchCache::new(1 << 20));
        let log =
            PartitionLog::open(fs.clone(), &dir, config.clone(), cache.clone()).await.unwrap();
        assert_eq!(log.size_bytes(), 0);
        let mut appended = 0u64;
        let mut last = Offset(0);
        for i in 0..100 {
            let b = build_simple_batch(3, 200 + i, 1_000);
            appended += b.len() as u64;
            last = log.append(b, Epoch(1), 2_000).await.unwrap().last_offset;
        }
        log.wait_committed(last).await.unwrap();
        assert!(log.segment_count() > 1, "the test spans rolls");
        assert_eq!(log.size_bytes(), appended, "every appended batch, whole");
        log.close().await.unwrap();
        assert_eq!(log_files_bytes(&dir), appended, "the .log files after a clean close");
        let log = PartitionLog::open(fs, &dir, config, cache).await.unwrap();
        assert_eq!(log.size_bytes(), appended, "the same after reopening");
        // DeleteRecords past the first segment: it leaves, and the size with it.
        log.advance_log_start(Offset(last.0 / 2)).await.unwrap();
        let after = log.size_bytes();
        assert!(after < appended && after > 0, "{after} of {appended}");
        log.close().await.unwrap();
    });
}
