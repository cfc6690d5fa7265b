//! Cost of the metrics hot path per request: a `RequestTimer` through start, handler,
//! response ready, writer and finish (five histogram records, counters, gauges) on a
//! shard-like thread with an installed recorder, and one shard's publish.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use shardlog::metrics::snapshot::ShardSnapshot;
use shardlog::metrics::{RequestTimer, ShardRecorder, Stage};

fn request_path(c: &mut Criterion) {
    shardlog::metrics::shard_task::install_for_bench(0);
    c.bench_function("request_timer_full_path", |b| {
        b.iter(|| {
            let mut t = RequestTimer::start(black_box(0), 1024);
            t.handler_started();
            let send = t.writer_took();
            t.finish(send, 64);
        });
    });
    c.bench_function("record_one_sample", |b| {
        b.iter(|| {
            shardlog::metrics::record(0, Stage::Storage, black_box(Duration::from_micros(42)))
        });
    });
}

fn publish(c: &mut Criterion) {
    let r = ShardRecorder::new(1);
    let mut snap = ShardSnapshot::default();
    c.bench_function("publish_3_apis_5_stages", |b| {
        b.iter(|| {
            for api in 0..3 {
                for stage in Stage::ALL {
                    r.record(api, stage, Duration::from_micros(100));
                }
            }
            r.publish(black_box(&mut snap));
        });
    });
}

criterion_group!(benches, request_path, publish);
criterion_main!(benches);
