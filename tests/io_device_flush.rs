//! Shared device flushes (`io::device_flush`) on real O_DIRECT files: several files' syncs
//! of overwritten, preallocated regions issued at once all complete and their data reads
//! back; a closed file's call fails cleanly; and durable logs on several partitions of one
//! shard (fsync every batch, preallocation on) acknowledge every append with the bytes on
//! disk. The data directory is under the target directory (ext4 or XFS on a usual Linux
//! machine; elsewhere the calls are plain fdatasyncs and the test checks the same).

use std::path::PathBuf;
use std::rc::Rc;

use shardlog::io::dma::DmaFileSystem;
use shardlog::io::{run_local, DataFile, FileSystem};
use shardlog::storage::records::build_simple_batch;
use shardlog::storage::{BatchCache, FlushPolicy, LogConfig, PartitionLog};
use shardlog::types::{Epoch, Offset};

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[test]
fn concurrent_overwrite_syncs_of_several_files_all_complete() {
    let dir = scratch("device-flush-files");
    run_local(async move {
        shardlog::io::probe_data_dir(&dir).await.expect("probe");
        let fs = DmaFileSystem;
        let mut files = Vec::new();
        for i in 0..4 {
            let f = fs.open(&dir.join(format!("f{i}")), true).await.expect("open");
            // The precondition of `sync_overwrites`: written, durable blocks inside the size.
            f.write_zeros(0, 64 * 1024).await.expect("zeros");
            f.sync().await.expect("sync");
            files.push(f);
        }
        for round in 0..20u8 {
            let writes = files.iter().enumerate().map(|(i, f)| async move {
                let byte = [round.wrapping_mul(7).wrapping_add(i as u8); 4096];
                f.write_at(u64::from(round % 16) * 4096, &[&byte]).await?;
                f.sync_overwrites().await
            });
            for r in futures::future::join_all(writes).await {
                r.expect("write + shared flush");
            }
        }
        for (i, f) in files.iter().enumerate() {
            let page = f.read_at(19 % 16 * 4096, 4096).await.expect("read");
            assert!(page.iter().all(|b| *b == 19u8.wrapping_mul(7).wrapping_add(i as u8)));
        }
        let closed = files.pop().expect("a file");
        closed.close().await.expect("close");
        let err = closed.sync_overwrites().await.expect_err("a closed file cannot sync");
        assert!(err.to_string().contains("closed"), "{err}");
    });
}

#[test]
fn durable_logs_of_one_shard_acknowledge_every_append_with_shared_flushes() {
    let dir = scratch("device-flush-logs");
    run_local(async move {
        shardlog::io::probe_data_dir(&dir).await.expect("probe");
        let fs = Rc::new(DmaFileSystem);
        let cache = Rc::new(BatchCache::new(1 << 20));
        let config = LogConfig {
            flush: FlushPolicy::EveryBatch,
            preallocate_bytes: 256 * 1024,
            ..LogConfig::default()
        };
        let open = |p: usize| {
            let (fs, dir, config, cache) =
                (fs.clone(), dir.join(format!("t-{p}")), config.clone(), cache.clone());
            async move { PartitionLog::open(fs, &dir, config, cache).await.expect("open") }
        };
        let mut logs = Vec::new();
        for p in 0..4 {
            logs.push(open(p).await);
        }
        // 600 KiB per log: past the first preallocation steps, so later syncs are shared.
        let appends = logs.iter().map(|log| async move {
            for _ in 0..600 {
                let info = log.append(build_simple_batch(1, 900, 0), Epoch(0), 1).await?;
                log.wait_committed(info.last_offset).await?;
            }
            Ok::<_, shardlog::storage::StorageError>(log.log_end_offset())
        });
        for end in futures::future::join_all(appends).await {
            assert_eq!(end.expect("acknowledged"), Offset(600));
        }
        for log in logs {
            log.close().await.expect("close");
        }
        // Reopened from disk: every acknowledged batch is there.
        for p in 0..4 {
            let log = open(p).await;
            assert_eq!(log.log_end_offset(), Offset(600));
            log.close().await.expect("close");
        }
    });
}
