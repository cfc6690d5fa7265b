//! Shared helpers of the storage benchmarks (included with `#[path]`, not a bench itself).

#![allow(dead_code)]

use std::path::Path;
use std::rc::Rc;

use shardlog::io::dma::DmaFileSystem;
use shardlog::storage::{BatchCache, FlushPolicy, LogConfig, PartitionLog};

/// Where benchmark logs live: `SHARDLOG_BENCH_DIR` or the system temp dir (same disk as
/// `perf/fio.sh` by default: both use /tmp).
pub fn bench_root() -> tempfile::TempDir {
    match std::env::var("SHARDLOG_BENCH_DIR") {
        Ok(dir) => tempfile::tempdir_in(dir).expect("bench dir"),
        Err(_) => tempfile::tempdir().expect("temp dir"),
    }
}

pub async fn open_log(dir: &Path, flush: FlushPolicy) -> PartitionLog<DmaFileSystem> {
    shardlog::io::probe_data_dir(dir).await.expect("probe");
    let config = LogConfig { flush, ..LogConfig::default() };
    PartitionLog::open(
        Rc::new(DmaFileSystem),
        &dir.join("bench-0"),
        config,
        Rc::new(BatchCache::new(64 << 20)),
    )
    .await
    .expect("open")
}

/// Criterion settings small enough for a shared 2-core machine.
pub fn quick() -> criterion::Criterion {
    criterion::Criterion::default()
        .sample_size(10)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2))
}
