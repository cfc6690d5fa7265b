//! Cost of client-quota accounting per request on the request path (`ShardQuotas::record`
//! and the resolve behind it): no quota configured at all, quotas configured but none for
//! this client (KIP-55's eight lookups), and a client with a quota under its bound (resolve
//! plus the windowed rate), on a `--shards 2`-like shard with a share board.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use shardlog::quota::{
    ClientQuotaConfigs, QuotaEntity, QuotaKind, QuotaWindow, ShardQuotas, ShareBoard,
    PRODUCER_BYTE_RATE,
};

fn record(c: &mut Criterion) {
    let none = ClientQuotaConfigs::default();
    let mut some = ClientQuotaConfigs::default();
    some.set(&QuotaEntity::client(Some("app".into())), PRODUCER_BYTE_RATE, Some(1e12));
    some.set(&QuotaEntity::user(Some("alice".into())), PRODUCER_BYTE_RATE, Some(1e12));
    let mut clients_only = ClientQuotaConfigs::default();
    clients_only.set(&QuotaEntity::client(Some("app".into())), PRODUCER_BYTE_RATE, Some(1e12));
    let mut q = ShardQuotas::new(QuotaWindow::KAFKA_DEFAULT, 0, Arc::new(ShareBoard::new(2)));
    let mut now_ms = 0u64;
    c.bench_function("quota_record_no_quotas", |b| {
        b.iter(|| q.record(&none, QuotaKind::Produce, black_box(("ANONYMOUS", "other")), 1024, 0));
    });
    c.bench_function("quota_record_configured_not_this_client", |b| {
        b.iter(|| q.record(&some, QuotaKind::Produce, black_box(("ANONYMOUS", "other")), 1024, 0));
    });
    c.bench_function("quota_record_client_quotas_only_not_this_client", |b| {
        b.iter(|| {
            q.record(&clients_only, QuotaKind::Produce, black_box(("ANONYMOUS", "other")), 1024, 0)
        });
    });
    c.bench_function("quota_record_client_within_quota", |b| {
        b.iter(|| {
            now_ms += 1;
            q.record(&some, QuotaKind::Produce, black_box(("ANONYMOUS", "app")), 1024, now_ms)
        });
    });
}

criterion_group!(benches, record);
criterion_main!(benches);
