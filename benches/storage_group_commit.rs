//! Acknowledgements per second with flush every batch: N concurrent appenders each append a
//! 1 KiB batch and wait until it is fsynced before the next. N = 1 is fsync-per-append; with
//! 8 and 64 the group commit shares one write + fsync among everything that arrived meanwhile.

use std::rc::Rc;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use shardlog::io::run_local;
use shardlog::storage::records::build_simple_batch;
use shardlog::storage::FlushPolicy;
use shardlog::types::Epoch;

mod storage_common;
use storage_common as common;

fn group_commit(c: &mut Criterion) {
    let mut g = c.benchmark_group("storage_group_commit");
    let batch = build_simple_batch(1, 1024 - 80, 1);
    for appenders in [1u64, 8, 64] {
        g.throughput(Throughput::Elements(appenders));
        g.bench_with_input(BenchmarkId::new("acks", appenders), &appenders, |b, &n| {
            b.iter_custom(|iters| {
                let root = common::bench_root();
                let batch = batch.clone();
                run_local(async move {
                    let log = Rc::new(common::open_log(root.path(), FlushPolicy::EveryBatch).await);
                    let start = Instant::now();
                    let tasks: Vec<_> = (0..n)
                        .map(|_| {
                            let (log, batch) = (log.clone(), batch.clone());
                            glommio::spawn_local(async move {
                                for _ in 0..iters {
                                    let info =
                                        log.append(batch.clone(), Epoch(0), 1).await.unwrap();
                                    log.wait_committed(info.last_offset).await.unwrap();
                                }
                            })
                        })
                        .collect();
                    for t in tasks {
                        t.await;
                    }
                    start.elapsed()
                })
            });
        });
    }
    g.finish();
}

criterion_group! { name = benches; config = common::quick(); targets = group_commit }
criterion_main!(benches);
