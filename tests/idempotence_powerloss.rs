//! Power loss (and process crash) under idempotent producers, on the fault-injecting
//! in-memory file system: four producers append in sequence to a log with small segments
//! (so rolls write producer snapshots, some of them past what the disk will keep), the power
//! goes at a random moment, the log is reopened (snapshot + replay of the tail), and then:
//! - every producer's last acknowledged batches, sent again, are duplicates answered with
//!   their original offsets (the window survived);
//! - its unacknowledged in-flight batch, sent again, is either a duplicate (it survived) or
//!   appended once;
//! - the next batch continues the sequence;
//! - the log holds each producer's sequences exactly once, in order, from 0.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use rand::{Rng, SeedableRng};
use shardlog::io::mem::MemFileSystem;
use shardlog::io::run_local;
use shardlog::storage::batch::{recompute_crc, BatchHeader};
use shardlog::storage::records::build_simple_batch;
use shardlog::storage::{BatchCache, FlushPolicy, LogConfig, PartitionLog};
use shardlog::types::{Epoch, Offset};

const DIR: &str = "/data/idem-0";
const PRODUCERS: i64 = 4;
/// How many acknowledged batches per producer are retried after the power loss: one batch
/// may be in flight, so the last 4 acknowledged ones are inside the 5-batch window.
const RETRIED: usize = 4;

fn config(flush: FlushPolicy) -> LogConfig {
    LogConfig { segment_bytes: 8 * 1024, index_interval_bytes: 512, flush, ..LogConfig::default() }
}

fn batch(pid: i64, seq: i32, count: usize, value_bytes: usize) -> Bytes {
    let mut b = BytesMut::from(&build_simple_batch(count, value_bytes, 1_000)[..]);
    b[43..51].copy_from_slice(&pid.to_be_bytes());
    b[51..53].copy_from_slice(&0i16.to_be_bytes());
    b[53..57].copy_from_slice(&seq.to_be_bytes());
    recompute_crc(&mut b);
    b.freeze()
}

#[derive(Default)]
struct Producer {
    next_seq: i32,
    /// Acknowledged batches: (bytes, base offset).
    acked: Vec<(Bytes, i64)>,
    in_flight: Option<Bytes>,
}

async fn open(fs: &MemFileSystem, flush: FlushPolicy) -> PartitionLog<MemFileSystem> {
    let cache = Rc::new(BatchCache::new(1 << 20));
    PartitionLog::open(Rc::new(fs.clone()), Path::new(DIR), config(flush), cache)
        .await
        .expect("open after power loss")
}

async fn producer(
    log: Rc<PartitionLog<MemFileSystem>>,
    state: Rc<RefCell<Producer>>,
    pid: i64,
    stop: Rc<Cell<bool>>,
    seed: u64,
) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    while !stop.get() {
        let count = rng.gen_range(1..4);
        let b = batch(pid, state.borrow().next_seq, count, rng.gen_range(1..700));
        state.borrow_mut().in_flight = Some(b.clone());
        let Ok(info) = log.append(b.clone(), Epoch(1), 1_000).await else { return };
        if log.wait_committed(info.last_offset).await.is_err() || stop.get() {
            return;
        }
        let mut s = state.borrow_mut();
        s.next_seq += count as i32;
        s.acked.push((b, info.base_offset.0));
        s.in_flight = None;
    }
}

/// Every producer's sequences in the log, in offset order.
async fn sequences(log: &PartitionLog<MemFileSystem>) -> BTreeMap<i64, Vec<(i32, i32)>> {
    let end = log.log_end_offset();
    let all = log.read(Offset(0), usize::MAX, end).await.expect("read");
    let (mut at, mut out) = (0, BTreeMap::<i64, Vec<(i32, i32)>>::new());
    while at < all.len() {
        let h = BatchHeader::parse(&all[at..]).expect("batch");
        out.entry(h.producer_id)
            .or_default()
            .push((h.base_sequence, h.base_sequence + h.last_offset_delta));
        at += h.total_size();
    }
    out
}

async fn verify(fs: &MemFileSystem, flush: FlushPolicy, producers: &[Rc<RefCell<Producer>>]) {
    let lasts: Vec<Option<(Bytes, i64)>> =
        producers.iter().map(|p| p.borrow().acked.last().cloned()).collect();
    let log = open(fs, flush).await;
    // Small segments: every round rolls (and snapshots) several times.
    assert!(log.segment_count() > 1 || producers.iter().all(|p| p.borrow().acked.len() < 8));
    for (pid, p) in producers.iter().enumerate() {
        let p = std::mem::take(&mut *p.borrow_mut());
        for (b, base) in p.acked.iter().rev().take(RETRIED) {
            let info = log.append(b.clone(), Epoch(1), 1_000).await.expect("retry");
            assert!(info.duplicate, "producer {pid}: acked batch at {base} not recognized");
            assert_eq!(info.base_offset.0, *base, "producer {pid}: original offset");
        }
        let mut next = p.next_seq;
        if let Some(b) = &p.in_flight {
            let info = log.append(b.clone(), Epoch(1), 1_000).await.expect("in-flight retry");
            next += BatchHeader::parse(b).expect("header").records_count;
            let _ = info;
        }
        let info = log.append(batch(pid as i64, next, 1, 10), Epoch(1), 1_000).await;
        assert!(info.is_ok_and(|i| !i.duplicate), "producer {pid}: the sequence continues");
    }
    for (pid, seqs) in sequences(&log).await {
        let mut expect = 0;
        for (first, last) in seqs {
            assert_eq!(first, expect, "producer {pid}: each sequence exactly once, in order");
            expect = last + 1;
        }
    }
    log.close().await.expect("close");
    // After a clean close the snapshot alone restores the window.
    let log = open(fs, flush).await;
    for (pid, last) in lasts.iter().enumerate() {
        if let Some((b, base)) = last {
            let info = log.append(b.clone(), Epoch(1), 1_000).await.expect("retry");
            assert!(info.duplicate && info.base_offset.0 == *base, "producer {pid} after close");
        }
    }
    log.close().await.expect("close");
}

fn round(seed: u64, crash_only: bool) {
    run_local(async move {
        let flush = FlushPolicy::EveryBatch;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let fs = MemFileSystem::new();
        let log = Rc::new(open(&fs, flush).await);
        let stop = Rc::new(Cell::new(false));
        let states: Vec<Rc<RefCell<Producer>>> = (0..PRODUCERS).map(|_| Rc::default()).collect();
        let tasks: Vec<_> = (0..PRODUCERS)
            .map(|pid| {
                let t = producer(
                    log.clone(),
                    states[pid as usize].clone(),
                    pid,
                    stop.clone(),
                    seed * 7 + pid as u64,
                );
                glommio::spawn_local(t)
            })
            .collect();
        for _ in 0..rng.gen_range(1..600) {
            futures_lite::future::yield_now().await;
        }
        stop.set(true);
        let after = if crash_only { fs.crash() } else { fs.power_loss() };
        verify(&after, flush, &states).await;
        drop(tasks);
    });
}

#[test]
fn power_loss_keeps_the_producer_window() {
    for seed in 0..30 {
        round(seed, false);
    }
}

#[test]
fn crash_keeps_the_producer_window() {
    for seed in 100..115 {
        round(seed, true);
    }
}

/// Truncation (replication's `truncate_to`) rebuilds the window at the new end: batches
/// above it are forgotten (their retry is appended again), batches below are still
/// duplicates, and snapshots past the new end are gone.
#[test]
fn truncation_rebuilds_the_window() {
    run_local(async {
        let fs = MemFileSystem::new();
        let log = open(&fs, FlushPolicy::EveryBatch).await;
        let mut sent = Vec::new();
        for seq in 0..40 {
            let b = batch(1, seq, 1, 600);
            let info = log.append(b.clone(), Epoch(1), 1_000).await.expect("append");
            sent.push((b, info.base_offset.0));
        }
        log.flush().await.expect("flush");
        assert!(log.segment_count() > 2, "several segments, several snapshots");
        log.truncate_to(Offset(30)).await.expect("truncate");
        for (b, base) in &sent[25..30] {
            let info = log.append(b.clone(), Epoch(1), 1_000).await.expect("retry");
            assert!(info.duplicate && info.base_offset.0 == *base, "below the truncation point");
        }
        let info = log.append(sent[30].0.clone(), Epoch(1), 1_000).await.expect("re-append");
        assert!(!info.duplicate, "above the truncation point: appended again");
        assert_eq!(info.base_offset.0, 30);
        log.close().await.expect("close");
        let log = open(&fs, FlushPolicy::EveryBatch).await;
        let info = log.append(sent[30].0.clone(), Epoch(1), 1_000).await.expect("retry");
        assert!(info.duplicate && info.base_offset.0 == 30);
        log.close().await.expect("close");
    });
}

/// `producer.id.expiration.ms`: the retention pass forgets a producer whose last batch is
/// that old; afterwards it is accepted at any sequence (Kafka >= 2.5), before it is not.
#[test]
fn idle_producers_expire_in_the_retention_pass() {
    run_local(async {
        let fs = MemFileSystem::new();
        let cfg = LogConfig { producer_id_expiration_ms: 5_000, ..config(FlushPolicy::EveryBatch) };
        let log = PartitionLog::open(
            Rc::new(fs.clone()),
            Path::new(DIR),
            cfg,
            Rc::new(BatchCache::new(1 << 20)),
        )
        .await
        .expect("open");
        // build_simple_batch stamps its records at 1_000 ms.
        log.append(batch(9, 0, 2, 10), Epoch(1), 1_000).await.expect("append");
        let gap = log.append(batch(9, 50, 1, 10), Epoch(1), 1_000).await;
        assert_eq!(gap.expect_err("a gap").kafka_code(), 45);
        log.enforce_retention(5_999).await.expect("retention");
        assert_eq!(log.producers().len(), 1, "not yet expired");
        log.enforce_retention(6_000).await.expect("retention");
        assert!(log.producers().is_empty(), "expired");
        let info = log.append(batch(9, 50, 1, 10), Epoch(1), 1_000).await.expect("any sequence");
        assert!(!info.duplicate);
        log.close().await.expect("close");
    });
}
