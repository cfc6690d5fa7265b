//! Sequential read throughput (MiB/s) of a 256 MiB log of 16 KiB batches in 1 MiB fetches:
//! cold (from disk through O_DIRECT; the batch cache is too small to hold any of it) and
//! warm (every batch in the per-shard cache).

use std::rc::Rc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use shardlog::io::dma::DmaFileSystem;
use shardlog::io::run_local;
use shardlog::storage::records::build_simple_batch;
use shardlog::storage::{BatchCache, FlushPolicy, LogConfig, PartitionLog};
use shardlog::types::{Epoch, Offset};

mod storage_common;
use storage_common as common;

const LOG_BYTES: usize = 256 << 20;
const FETCH_BYTES: usize = 1 << 20;

fn read(c: &mut Criterion) {
    let mut g = c.benchmark_group("storage_read");
    g.throughput(Throughput::Bytes(LOG_BYTES as u64));
    for (name, cache_bytes) in [("cold", 1usize << 20), ("warm", 512usize << 20)] {
        g.bench_function(BenchmarkId::new("sequential", name), |b| {
            b.iter_custom(|iters| {
                let root = common::bench_root();
                run_local(async move {
                    shardlog::io::probe_data_dir(root.path()).await.unwrap();
                    let cfg = LogConfig { flush: FlushPolicy::Never, ..LogConfig::default() };
                    let cache = Rc::new(BatchCache::new(cache_bytes));
                    let dir = root.path().join("read-0");
                    let log =
                        PartitionLog::open(Rc::new(DmaFileSystem), &dir, cfg, cache).await.unwrap();
                    let batch = build_simple_batch(1, 16 * 1024 - 80, 1);
                    let mut last = None;
                    for _ in 0..LOG_BYTES / batch.len() {
                        last = Some(log.append(batch.clone(), Epoch(0), 1).await.unwrap());
                    }
                    log.wait_committed(last.unwrap().last_offset).await.unwrap();
                    let end = log.committed_offset();
                    let mut took = Duration::ZERO;
                    for _ in 0..iters {
                        let start = Instant::now();
                        let mut cur = Offset(0);
                        while cur < end {
                            let data = log.read(cur, FETCH_BYTES, end).await.unwrap();
                            cur = Offset(cur.0 + (data.len() / batch.len()) as i64);
                        }
                        took += start.elapsed();
                    }
                    took
                })
            });
        });
    }
    g.finish();
}

criterion_group! { name = benches; config = common::quick(); targets = read }
criterion_main!(benches);
