//! Log compaction on the in-memory backend: a model test (random keys, values and
//! tombstones over many segments; after cleaning, a read from the start yields exactly the
//! latest record of every key in offset order, and nothing newer than `min.compaction.lag.ms`
//! is removed) and crash tests at every step of the segment swap.

use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shardlog::io::mem::MemFileSystem;
use shardlog::io::{run_local, FileSystem};
use shardlog::storage::batch::{BatchHeader, Compression};
use shardlog::storage::cleaner::records_of;
use shardlog::storage::cleaner::swap::SwapStep;
use shardlog::storage::cleaner::throttle::Throttler;
use shardlog::storage::records::{build_batch, NewRecord};
use shardlog::storage::{BatchCache, LogConfig, PartitionLog};
use shardlog::storage::{CleanOptions, CleanOutcome};
use shardlog::types::{Epoch, Offset};

const DIR: &str = "/data/compact-0";
const T0: i64 = 1_000_000;
const DAY_MS: i64 = 86_400_000;

/// (offset, key, value or None for a tombstone, timestamp)
type Rec = (i64, String, Option<String>, i64);

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        segment_ms: 1_000_000_000,
        index_interval_bytes: 256,
        segment_index_bytes: 4096,
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: i64::MAX,
        compacted: true,
        delete_retention_enabled: false,
        retention_ms: -1,
        file_delete_delay_ms: 10,
        ..LogConfig::default()
    }
}

/// One cleaner pass with an unlimited throttle and a key map of `key_map_bytes`.
async fn clean_with(
    log: &PartitionLog<MemFileSystem>,
    now_ms: i64,
    force: bool,
    stop_after: Option<SwapStep>,
    key_map_bytes: usize,
) -> CleanOutcome {
    let throttle = Throttler::unlimited();
    let opts =
        CleanOptions { key_map_bytes, throttle: &throttle, abort: &|| false, force, stop_after };
    log.clean(now_ms, &opts).await.expect("clean")
}

async fn clean(log: &PartitionLog<MemFileSystem>, now_ms: i64) -> CleanOutcome {
    clean_with(log, now_ms, false, None, 64 << 20).await
}

async fn open(fs: &Rc<MemFileSystem>) -> PartitionLog<MemFileSystem> {
    PartitionLog::open(fs.clone(), Path::new(DIR), config(), Rc::new(BatchCache::new(1 << 20)))
        .await
        .expect("open")
}

/// Appends `batches` random batches (batch i at timestamp T0 + i*1000), then a batch with
/// the key "end" appended late enough to roll, so every model record is in a sealed segment.
async fn fill(log: &PartitionLog<MemFileSystem>, seed: u64, batches: usize) -> Vec<Rec> {
    let mut rng = StdRng::seed_from_u64(seed);
    let codecs = [Compression::None, Compression::Gzip, Compression::Zstd];
    let mut all = Vec::new();
    for i in 0..batches {
        let ts = T0 + i as i64 * 1000;
        let n = rng.gen_range(1..=5);
        let recs: Vec<(String, Option<String>)> = (0..n)
            .map(|j| {
                let key = format!("k{}", rng.gen_range(0..20));
                let value = (!rng.gen_bool(0.15)).then(|| format!("v{i}-{j}"));
                (key, value)
            })
            .collect();
        let new: Vec<NewRecord<'_>> = recs
            .iter()
            .map(|(k, v)| NewRecord {
                key: Some(k.as_bytes()),
                value: v.as_deref().map(str::as_bytes),
                timestamp_ms: ts,
                headers: Vec::new(),
            })
            .collect();
        let b = build_batch(&new, codecs[i % codecs.len()]);
        let info = log.append(b, Epoch(1), ts).await.expect("append");
        for (j, (k, v)) in recs.into_iter().enumerate() {
            all.push((info.base_offset.0 + j as i64, k, v, ts));
        }
    }
    let end = NewRecord { key: Some(b"end"), value: Some(b"x"), timestamp_ms: T0, headers: vec![] };
    let late = T0 + 2_000_000_000;
    let info = log.append(build_batch(&[end], Compression::None), Epoch(1), late).await.unwrap();
    all.push((info.base_offset.0, "end".into(), Some("x".into()), T0));
    log.flush().await.expect("flush");
    all
}

fn varint(b: &[u8], at: &mut usize) -> i64 {
    let mut raw = 0u64;
    let mut shift = 0;
    loop {
        let x = b[*at];
        *at += 1;
        raw |= u64::from(x & 0x7f) << shift;
        shift += 7;
        if x & 0x80 == 0 {
            return ((raw >> 1) as i64) ^ -((raw & 1) as i64);
        }
    }
}

fn bytes_field(b: &[u8], at: &mut usize) -> Option<String> {
    let len = varint(b, at);
    if len < 0 {
        return None;
    }
    let s = String::from_utf8(b[*at..*at + len as usize].to_vec()).unwrap();
    *at += len as usize;
    Some(s)
}

/// Every record of the log from the start, in order.
async fn read_all(log: &PartitionLog<MemFileSystem>) -> Vec<Rec> {
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    let end = log.committed_offset();
    while next < end {
        let data = log.read(next, 1 << 20, end).await.expect("read");
        assert!(!data.is_empty(), "no data at {next:?} below {end:?}");
        let mut at = 0;
        while at < data.len() {
            let h = BatchHeader::parse(&data[at..]).expect("header");
            let batch = &data[at..at + h.total_size()];
            shardlog::storage::batch::check_crc(&h, batch).expect("valid CRC");
            let (set, recs) = records_of(&h, batch).expect("records");
            for r in recs {
                let mut p = r.raw.start;
                varint(&set, &mut p);
                p += 1;
                let ts = h.base_timestamp + varint(&set, &mut p);
                varint(&set, &mut p);
                let key = bytes_field(&set, &mut p).unwrap();
                let value = bytes_field(&set, &mut p);
                if r.offset >= next.0 {
                    out.push((r.offset, key, value, ts));
                }
            }
            next = Offset(h.last_offset() + 1);
            at += h.total_size();
        }
    }
    out
}

/// The latest record of every key, in offset order, tombstones dropped when `drop_tombstones`.
fn expected(all: &[Rec], drop_tombstones: bool) -> Vec<Rec> {
    let mut latest: BTreeMap<&str, &Rec> = BTreeMap::new();
    for r in all {
        latest.insert(&r.1, r);
    }
    let mut out: Vec<Rec> =
        latest.into_values().filter(|r| !(drop_tombstones && r.2.is_none())).cloned().collect();
    out.sort_by_key(|r| r.0);
    out
}

async fn leftovers(fs: &MemFileSystem) -> Vec<String> {
    let names = fs.list_dir(Path::new(DIR)).await.expect("list");
    names.into_iter().filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap")).collect()
}

#[test]
fn cleaning_keeps_exactly_the_latest_record_per_key() {
    for seed in 0..4 {
        run_local(async move {
            let fs = Rc::new(MemFileSystem::new());
            let log = open(&fs).await;
            let all = fill(&log, seed, 150).await;
            assert!(log.segment_count() > 8, "many segments: {}", log.segment_count());
            let before = read_all(&log).await;
            assert_eq!(before, all);
            // Tombstones are within delete.retention.ms: kept (the latest only).
            let now = T0 + 200_000;
            let out = clean(&log, now).await;
            assert!(out.cleaned && out.bytes_after < out.bytes_before, "{out:?}");
            assert!((out.dirty_ratio - 1.0).abs() < f64::EPSILON);
            assert_eq!(read_all(&log).await, expected(&all, false), "seed {seed}");
            // Now clean: the dirty ratio is 0 and nothing happens.
            let again = clean(&log, now).await;
            assert!(!again.cleaned && again.dirty_ratio == 0.0, "{again:?}");
            assert!(leftovers(&fs).await.is_empty());
            // The cleaned log survives a clean restart and a crash.
            log.close().await.expect("close");
            let log = open(&fs).await;
            assert_eq!(read_all(&log).await, expected(&all, false));
            drop(log);
            let crashed = Rc::new(fs.crash());
            let log = open(&crashed).await;
            assert_eq!(read_all(&log).await, expected(&all, false));
            // The cleaner checkpoint survived: nothing is dirty after the restart.
            let again = clean(&log, now).await;
            assert!(!again.cleaned && again.dirty_ratio == 0.0, "{again:?}");
            // Past the delete horizon a clean drops the tombstones (forced: the in-memory
            // latest horizon, as Kafka's, is not kept across a restart).
            let out = clean_with(&log, now + 2 * DAY_MS, true, None, 64 << 20).await;
            assert!(out.cleaned);
            assert_eq!(read_all(&log).await, expected(&all, true), "seed {seed}");
            // Appends still work after cleaning.
            let b = build_batch(
                &[NewRecord {
                    key: Some(b"k1"),
                    value: Some(b"n"),
                    timestamp_ms: T0,
                    headers: vec![],
                }],
                Compression::None,
            );
            let info = log.append(b, Epoch(1), T0).await.expect("append");
            assert_eq!(info.base_offset, Offset(all.len() as i64));
        });
    }
}

#[test]
fn records_newer_than_the_min_compaction_lag_are_never_removed() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let log = open(&fs).await;
        let all = fill(&log, 7, 150).await;
        let lag_ms = 60_000;
        log.set_config(LogConfig { min_compaction_lag_ms: lag_ms, ..config() });
        let now = T0 + 100_000;
        let out = clean(&log, now).await;
        assert!(out.cleaned, "{out:?}");
        let after = read_all(&log).await;
        let recent: Vec<&Rec> = all.iter().filter(|r| r.3 > now - lag_ms && r.1 != "end").collect();
        assert!(!recent.is_empty());
        for r in recent {
            assert!(after.contains(r), "record newer than the lag removed: {r:?}");
        }
        assert!(after.len() < all.len(), "older records were cleaned");
        // The latest record of every key is still the last one seen for it.
        let mut last: BTreeMap<String, Rec> = BTreeMap::new();
        for r in &after {
            last.insert(r.1.clone(), r.clone());
        }
        let want: Vec<Rec> = expected(&all, false);
        assert_eq!(last.len(), want.len());
        for r in want {
            assert_eq!(last[&r.1], r);
        }
    });
}

#[test]
fn crash_at_each_swap_step_leaves_a_consistent_log() {
    for step in [SwapStep::CleanedWritten, SwapStep::RenamedToSwap, SwapStep::OldRenamedToDeleted] {
        run_local(async move {
            let fs = Rc::new(MemFileSystem::new());
            let log = open(&fs).await;
            let all = fill(&log, 11, 120).await;
            let now = T0 + 200_000;
            clean_with(&log, now, false, Some(step), 64 << 20).await;
            assert!(!leftovers(&fs).await.is_empty(), "{step:?} left swap files");
            let crashed = Rc::new(fs.crash());
            drop(log);
            let log = open(&crashed).await;
            assert!(leftovers(&crashed).await.is_empty(), "{step:?}: recovery cleaned up");
            let got = read_all(&log).await;
            // Offsets strictly increase (nothing duplicated) and the last record seen for
            // each key is its latest one (nothing lost).
            assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "{step:?}");
            let mut last: BTreeMap<String, Rec> = BTreeMap::new();
            for r in &got {
                last.insert(r.1.clone(), r.clone());
            }
            for r in expected(&all, false) {
                assert_eq!(last.get(&r.1), Some(&r), "{step:?}");
            }
            // A full pass afterwards completes the job (forced: the checkpoint was not
            // written, but part of the log may already be clean).
            clean_with(&log, now, true, None, 64 << 20).await;
            assert_eq!(read_all(&log).await, expected(&all, false), "{step:?}");
        });
    }
}

#[test]
fn tombstones_live_delete_retention_ms_after_the_first_clean_kip_534() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let log = open(&fs).await;
        let all = fill(&log, 3, 150).await;
        // Records are ten days old when first cleaned: their timestamps do not matter, the
        // delete horizon starts at this clean.
        let first = T0 + 10 * DAY_MS;
        assert!(clean(&log, first).await.cleaned);
        assert_eq!(read_all(&log).await, expected(&all, false), "tombstones kept");
        // Not dirty, horizon not due: nothing to do until delete.retention.ms (1 day) passed.
        let before = log.clean_stats(first + DAY_MS - 1).await.expect("stats");
        assert!(!before.delete_horizon_due && before.dirty_bytes == 0, "{before:?}");
        assert!(!clean(&log, first + DAY_MS - 1).await.cleaned);
        assert_eq!(read_all(&log).await, expected(&all, false));
        let due = log.clean_stats(first + DAY_MS).await.expect("stats");
        assert!(due.delete_horizon_due, "{due:?}");
        let out = clean(&log, first + DAY_MS).await;
        assert!(out.cleaned && out.bytes_after < out.bytes_before, "{out:?}");
        assert_eq!(read_all(&log).await, expected(&all, true), "tombstones dropped");
        let after = log.clean_stats(first + 2 * DAY_MS).await.expect("stats");
        assert!(!after.delete_horizon_due, "no tombstone left: {after:?}");
    });
}

#[test]
fn cleaned_segments_are_merged_up_to_segment_bytes() {
    for step in [None, Some(SwapStep::RenamedToSwap), Some(SwapStep::OldRenamedToDeleted)] {
        run_local(async move {
            let fs = Rc::new(MemFileSystem::new());
            let log = open(&fs).await;
            let all = fill(&log, 21, 150).await;
            let now = T0 + 200_000;
            let before = log.segment_count();
            assert!(clean(&log, now).await.cleaned);
            let after_first = log.segment_count();
            // The first pass shrank full segments; the next one merges the small results.
            let out = clean_with(&log, now, true, step, 64 << 20).await;
            let log = match step {
                None => log,
                Some(_) => {
                    // Crash in the middle of the merge's swap: recovery finishes or discards it.
                    let crashed = Rc::new(fs.crash());
                    drop(log);
                    let log = open(&crashed).await;
                    assert!(leftovers(&crashed).await.is_empty(), "{step:?}");
                    log
                }
            };
            let merged = log.segment_count();
            assert!(
                merged < after_first,
                "{step:?}: {before} -> {after_first} -> {merged} segments ({out:?})"
            );
            let got = read_all(&log).await;
            assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "{step:?}: offsets increase");
            assert_eq!(got, expected(&all, false), "{step:?}");
        });
    }
}

#[test]
fn compact_delete_retention_and_cleaning_interleave_consistently() {
    for seed in [31, 32] {
        run_local(async move {
            let fs = Rc::new(MemFileSystem::new());
            let log = open(&fs).await;
            let all = fill(&log, seed, 150).await;
            let now = T0 + 200_000;
            let mut last_start = 0;
            // cleanup.policy=compact,delete, its size limit tightened each round, cleaning
            // before or after retention.
            for (round, limit) in [8 * 2048, 2048, 1].into_iter().enumerate() {
                log.set_config(LogConfig {
                    delete_retention_enabled: true,
                    retention_bytes: limit,
                    ..config()
                });
                if round % 2 == 0 {
                    log.enforce_retention(now).await.expect("retention");
                    clean_with(&log, now, true, None, 64 << 20).await;
                } else {
                    clean_with(&log, now, true, None, 64 << 20).await;
                    log.enforce_retention(now).await.expect("retention");
                }
                let start = log.log_start_offset().0;
                assert!(start >= last_start);
                last_start = start;
                // A full clean of what is left: exactly the latest record of every key that
                // still has a record at or above the log start.
                clean_with(&log, now, true, None, 64 << 20).await;
                let live: Vec<Rec> = all.iter().filter(|r| r.0 >= start).cloned().collect();
                assert_eq!(
                    read_all(&log).await,
                    expected(&live, false),
                    "seed {seed} round {round}"
                );
            }
            assert!(last_start > 0, "size retention deleted a prefix");
        });
    }
}

#[test]
fn a_small_key_map_cleans_in_several_passes_to_the_same_result() {
    for seed in [5, 9] {
        run_local(async move {
            let fs = Rc::new(MemFileSystem::new());
            let log = open(&fs).await;
            let all = fill(&log, seed, 150).await;
            let now = T0 + 200_000;
            // Room for 8 of the 20 keys: each pass maps a prefix of the dirty section.
            let small = 8 * shardlog::storage::cleaner::keymap::KEY_MAP_ENTRY_BYTES;
            let mut passes = 0;
            // Forced: each pass cleans up to where its map filled, until nothing is dirty.
            while log.clean_stats(now).await.expect("stats").dirty_bytes > 0 {
                let out = clean_with(&log, now, true, None, small).await;
                assert!(out.cleaned);
                passes += 1;
                assert!(passes < 100, "the cleaner makes progress");
                let got = read_all(&log).await;
                let mut last: BTreeMap<String, Rec> = BTreeMap::new();
                for r in &got {
                    last.insert(r.1.clone(), r.clone());
                }
                for r in expected(&all, false) {
                    assert_eq!(last.get(&r.1), Some(&r), "latest kept after pass {passes}");
                }
            }
            assert!(passes > 1, "a small map needs several passes ({passes})");
            // Once the whole log is clean, a full-size pass finds nothing more to remove.
            let full = clean_with(&log, now, true, None, 64 << 20).await;
            assert_eq!(full.bytes_before, full.bytes_after, "{full:?}");
            assert_eq!(read_all(&log).await, expected(&all, false), "seed {seed}");
        });
    }
}

#[test]
fn max_compaction_lag_forces_a_clean_below_the_dirty_ratio() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let log = open(&fs).await;
        let all = fill(&log, 13, 150).await;
        let now = T0 + 200_000;
        assert!(clean(&log, now).await.cleaned);
        // A little new dirt: far below the 0.5 ratio.
        let mut late = fill(&log, 14, 12).await;
        // Roll the segment holding them (segment.ms past the previous "end" append).
        let end =
            NewRecord { key: Some(b"end"), value: Some(b"y"), timestamp_ms: T0, headers: vec![] };
        let roll_at = T0 + 4_000_000_000;
        let info =
            log.append(build_batch(&[end], Compression::None), Epoch(1), roll_at).await.unwrap();
        late.push((info.base_offset.0, "end".into(), Some("y".into()), T0));
        log.flush().await.expect("flush");
        let stats = log.clean_stats(now).await.expect("stats");
        assert!(stats.dirty_bytes > 0 && stats.dirty_ratio < 0.5, "{stats:?}");
        assert!(!stats.compaction_overdue);
        assert!(!clean(&log, now).await.cleaned, "not dirty enough");
        // The dirty batches (timestamps T0..) are older than a 100 s max.compaction.lag.ms.
        log.set_config(LogConfig { max_compaction_lag_ms: 100_000, ..config() });
        let stats = log.clean_stats(now).await.expect("stats");
        assert!(stats.compaction_overdue, "{stats:?}");
        assert!(clean(&log, now).await.cleaned);
        let got = read_all(&log).await;
        let mut last: BTreeMap<String, Rec> = BTreeMap::new();
        for r in &got {
            last.insert(r.1.clone(), r.clone());
        }
        let mut model = all.clone();
        let shift = late[0].0;
        model.retain(|r| r.0 < shift);
        model.extend(late.iter().cloned());
        for r in expected(&model, false) {
            assert_eq!(last.get(&r.1), Some(&r));
        }
    });
}

/// Prints the cleaner's throughput on the in-memory backend (a figure, not an assertion):
/// `cargo test --test compaction_model cleaner_throughput -- --ignored --nocapture`.
#[test]
#[ignore = "prints a figure"]
fn cleaner_throughput() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let log = PartitionLog::open(
            fs.clone(),
            Path::new(DIR),
            LogConfig { segment_bytes: 1 << 20, ..config() },
            Rc::new(BatchCache::new(1 << 20)),
        )
        .await
        .expect("open");
        let value = vec![7u8; 100];
        for i in 0..4000i64 {
            let keys: Vec<String> =
                (0..50).map(|j| format!("key-{}", (i * 50 + j) % 5000)).collect();
            let recs: Vec<NewRecord<'_>> = keys
                .iter()
                .map(|k| NewRecord {
                    key: Some(k.as_bytes()),
                    value: Some(&value),
                    timestamp_ms: T0,
                    headers: vec![],
                })
                .collect();
            log.append(build_batch(&recs, Compression::None), Epoch(1), T0).await.expect("append");
        }
        log.flush().await.expect("flush");
        let started = std::time::Instant::now();
        let out = clean(&log, T0).await;
        let secs = started.elapsed().as_secs_f64();
        let mib = out.bytes_before as f64 / (1 << 20) as f64;
        println!(
            "cleaned {mib:.1} MiB -> {:.1} MiB in {secs:.2} s: {:.1} MiB/s",
            out.bytes_after as f64 / (1 << 20) as f64,
            mib / secs
        );
    });
}
