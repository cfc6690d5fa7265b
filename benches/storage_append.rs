//! Append throughput (MiB/s) of one partition log on glommio DMA files for 1 KiB, 16 KiB and
//! 1 MiB batches, with flush never and flush every batch. One appender pipelines its appends
//! (no wait per batch) and waits for the last one to be committed, as a busy partition would.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use shardlog::io::run_local;
use shardlog::storage::records::build_simple_batch;
use shardlog::storage::FlushPolicy;
use shardlog::types::Epoch;

mod storage_common;
use storage_common as common;

fn append(c: &mut Criterion) {
    let mut g = c.benchmark_group("storage_append");
    for size in [1024usize, 16 * 1024, 1024 * 1024] {
        let batch = build_simple_batch(1, size - 80, 1);
        g.throughput(Throughput::Bytes(batch.len() as u64));
        for (name, flush) in
            [("never", FlushPolicy::Never), ("every_batch", FlushPolicy::EveryBatch)]
        {
            g.bench_with_input(BenchmarkId::new(name, size), &batch, |b, batch| {
                b.iter_custom(|iters| {
                    let root = common::bench_root();
                    let batch = batch.clone();
                    run_local(async move {
                        let log = common::open_log(root.path(), flush).await;
                        let start = Instant::now();
                        let mut last = None;
                        for _ in 0..iters {
                            last = Some(log.append(batch.clone(), Epoch(0), 1).await.unwrap());
                        }
                        if let Some(info) = last {
                            log.wait_committed(info.last_offset).await.unwrap();
                        }
                        let took: Duration = start.elapsed();
                        drop(log);
                        took
                    })
                });
            });
        }
    }
    g.finish();
}

criterion_group! { name = benches; config = common::quick(); targets = append }
criterion_main!(benches);
