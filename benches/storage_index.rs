//! Sparse offset-index and time-index lookup cost (ns) on a full 10 MiB index
//! (1.3 M entries, the `segment.index.bytes` default).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use shardlog::storage::index::{OffsetIndex, TimeIndex};

mod storage_common;
use storage_common as common;

fn index(c: &mut Criterion) {
    let entries = 10 * 1024 * 1024 / 8;
    let mut idx = OffsetIndex::default();
    let mut tidx = TimeIndex::default();
    for i in 0..entries as u32 {
        idx.push(i * 4 + 3, i * 4096);
        tidx.push(1_000_000 + i64::from(i), i * 4 + 3);
    }
    let mut x: u32 = 12345;
    c.bench_function("storage_index/offset_lookup", |b| {
        b.iter(|| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            black_box(idx.lookup(x % (entries as u32 * 4)))
        })
    });
    c.bench_function("storage_index/time_lookup", |b| {
        b.iter(|| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            black_box(tidx.lookup(1_000_000 + i64::from(x % entries as u32)))
        })
    });
}

criterion_group! { name = benches; config = common::quick(); targets = index }
criterion_main!(benches);
