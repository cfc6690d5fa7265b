//! Power-loss simulation with the in-memory backend, for every flush policy: concurrent
//! appenders, a power loss at a random moment (only synced data and names survive), restart,
//! then every batch that the policy promised is present byte-identical, the log is a
//! contiguous run of whole CRC-valid batches, and nothing else was invented.
//!
//! - EveryBatch: every batch acknowledged before the power loss survives.
//! - Never: every batch appended before the last completed `flush()` survives.
//! - IntervalMs: after appends stop and the interval passes, everything acknowledged survives.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use rand::{Rng, SeedableRng};
use shardlog::io::mem::MemFileSystem;
use shardlog::io::run_local;
use shardlog::storage::batch::{check_crc, BatchHeader};
use shardlog::storage::records::build_simple_batch;
use shardlog::storage::validate::assign;
use shardlog::storage::{BatchCache, FlushPolicy, LogConfig, PartitionLog};
use shardlog::types::{Epoch, Offset};

const DIR: &str = "/data/power-0";

fn config(flush: FlushPolicy) -> LogConfig {
    LogConfig {
        segment_bytes: 16 * 1024,
        index_interval_bytes: 512,
        segment_index_bytes: 4096,
        flush,
        ..LogConfig::default()
    }
}

#[derive(Default)]
struct Record {
    /// base offset -> stored bytes of every batch appended.
    appended: BTreeMap<i64, Bytes>,
    /// Exclusive end below which the policy promised durability (before the power loss).
    promised: Offset,
}

async fn open(fs: &MemFileSystem, flush: FlushPolicy) -> PartitionLog<MemFileSystem> {
    let cache = Rc::new(BatchCache::new(1 << 20));
    PartitionLog::open(Rc::new(fs.clone()), Path::new(DIR), config(flush), cache)
        .await
        .expect("open after power loss")
}

async fn verify(fs: &MemFileSystem, flush: FlushPolicy, rec: &Record) {
    let log = open(fs, flush).await;
    let end = log.log_end_offset();
    assert!(end >= rec.promised, "log end {end} below promised {}", rec.promised);
    let all = log.read(Offset(0), usize::MAX, end).await.unwrap();
    let (mut at, mut next) = (0, 0i64);
    while at < all.len() {
        let h = BatchHeader::parse(&all[at..]).unwrap();
        let b = &all[at..at + h.total_size()];
        check_crc(&h, b).expect("whole batches only");
        assert_eq!(h.base_offset, next, "contiguous offsets");
        let appended = rec.appended.get(&h.base_offset).expect("no invented batch");
        assert_eq!(b, &appended[..], "byte-identical batch at {}", h.base_offset);
        next = h.last_offset() + 1;
        at += h.total_size();
    }
    assert_eq!(Offset(next), end);
    let info = log.append(build_simple_batch(1, 8, 1), Epoch(1), 1).await.unwrap();
    log.wait_committed(info.last_offset).await.unwrap();
    log.close().await.unwrap();
}

async fn appender(
    log: Rc<PartitionLog<MemFileSystem>>,
    rec: Rc<RefCell<Record>>,
    stop: Rc<Cell<bool>>,
    flush: FlushPolicy,
    seed: u64,
) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let cfg = config(flush);
    while !stop.get() {
        let batch = build_simple_batch(rng.gen_range(1..5), rng.gen_range(1..900), 1);
        let Ok(info) = log.append(batch.clone(), Epoch(1), 1).await else { return };
        let stored = assign(batch, info.base_offset.0, 1, &cfg, 1);
        rec.borrow_mut().appended.insert(info.base_offset.0, stored);
        if log.wait_committed(info.last_offset).await.is_err() {
            return;
        }
        if flush == FlushPolicy::EveryBatch && !stop.get() {
            let mut r = rec.borrow_mut();
            r.promised = r.promised.max(info.last_offset.next());
        }
    }
}

fn round(flush: FlushPolicy, seed: u64) {
    run_local(async move {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let fs = MemFileSystem::new();
        let log = Rc::new(open(&fs, flush).await);
        let rec = Rc::new(RefCell::new(Record::default()));
        let stop = Rc::new(Cell::new(false));
        let tasks: Vec<_> = (0..4)
            .map(|i| {
                let t = appender(log.clone(), rec.clone(), stop.clone(), flush, seed * 10 + i);
                glommio::spawn_local(t)
            })
            .collect();
        let steps = rng.gen_range(1..400);
        for i in 0..steps {
            if flush == FlushPolicy::Never && i % 50 == 25 {
                let before = log.log_end_offset();
                log.flush().await.unwrap();
                let mut r = rec.borrow_mut();
                r.promised = r.promised.max(before);
            }
            futures_lite::future::yield_now().await;
        }
        if let FlushPolicy::IntervalMs(ms) = flush {
            stop.set(true);
            for t in tasks {
                t.await;
            }
            let acked = log.committed_offset();
            glommio::timer::sleep(Duration::from_millis(ms * 20)).await;
            rec.borrow_mut().promised = acked;
        } else {
            // Freeze the promise at the instant of the power loss.
            stop.set(true);
        }
        let snapshot = fs.power_loss();
        let r = std::mem::take(&mut *rec.borrow_mut());
        verify(&snapshot, flush, &r).await;
    });
}

#[test]
fn power_loss_every_batch_keeps_every_ack() {
    for seed in 0..25 {
        round(FlushPolicy::EveryBatch, seed);
    }
}

#[test]
fn power_loss_never_keeps_what_was_flushed() {
    for seed in 0..25 {
        round(FlushPolicy::Never, seed);
    }
}

#[test]
fn power_loss_interval_keeps_acks_after_the_interval() {
    for seed in 0..10 {
        round(FlushPolicy::IntervalMs(3), seed);
    }
}
