//! Crash tests of compaction and retention on a real broker process, killed by SIGKILL at
//! each step of a segment swap or deletion (`shardlog::crashpoint`).
//!
//! Every case runs four brokers on one data dir, all `--shards 1`:
//! 1. seed: an idle broker (see [`Pace::Idle`]) gets the topic and a known log, then stops
//!    cleanly or by SIGKILL ([`Mode`]), so no maintenance job races the producer;
//! 2. crash: a broker with retention and the cleaner every 200 ms and
//!    `SHARDLOG_CRASH_AT=<point>` runs the job (alone, or while a producer appends) and kills
//!    itself at the point (bounded wait, checked by signal and by its last words);
//! 3. recover: an idle broker opens the crashed log; the partition dir must hold no leftover
//!    of the interrupted swap or deletion, and the log must agree with the model;
//! 4. resume: a busy broker must finish the job (the cleaner leaves each key once in the
//!    cleaned part; retention advances the log start further);
//! 5. compaction only: the cleaned log survives a full recovery scan (checkpoints removed).
//!
//! The checks are Kafka semantics only: the high watermark is the acknowledged count (plus
//! the batch in flight at the crash, whole or not at all), offsets are preserved, every record
//! read is the one produced at its offset, each key's latest value (or tombstone,
//! `delete.retention.ms` being a day) survives, and the log start offset is a segment base
//! with everything above it readable.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{killed_by_sigkill, split_batches, Broker, ReadRecord, Wire};
use rskafka::client::partition::{Compression, OffsetAt, PartitionClient, UnknownTopicHandling};

const TOPIC: &str = "crash";
/// Small segments (Kafka's test-only `internal.segment.bytes`): many swaps and deletions.
const SEGMENT_BYTES: &str = "8192";
const KEYS: u64 = 20;
const BATCHES: usize = 100;
/// Batches the producer of [`Mode::UnderLoad`] may send before the crash stops it.
const LOAD_BATCHES: usize = 400;
const RECORDS_PER_BATCH: usize = 8;
/// Retention interval and cleaner backoff of the crash and resume brokers.
const FAST_MS: &str = "200";
/// Retention interval and cleaner backoff of the seed and recover brokers: an hour.
const IDLE_MS: &str = "3600000";
/// Bound on the wait for a broker to reach its crash point.
const CRASH_WAIT: Duration = Duration::from_secs(60);
/// Bound on the wait for the resumed broker to finish the cleaner's or retention's job.
const SETTLE_WAIT: Duration = Duration::from_secs(30);
/// Bound on the removal of `.deleted` files (`file.delete.delay.ms` is 100 ms here).
const DELETE_WAIT: Duration = Duration::from_secs(5);
const FETCHES_MAX: usize = 10_000;

/// What was produced, by offset: (key, value or `None` for a tombstone).
type Model = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// How busy a broker's maintenance is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pace {
    /// Retention every hour; the cleaner, which looks at its logs once at start, may do
    /// 1 byte/s of I/O, so it never gets past its first read (nothing written) in a test.
    /// Stop such a broker by SIGKILL once it opened a dirty compacted log: shutdown waits
    /// 5 s for the log the stalled cleaner holds, then skips closing it.
    Idle,
    /// Retention and an idle cleaner's backoff at 200 ms, cleaner I/O unlimited.
    Fast,
    /// As `Fast`, with cleaner I/O at 200 KB/s: a clean of the seed log lasts long enough
    /// for a producer to append during it.
    Throttled,
}

fn broker_args(pace: Pace) -> Vec<String> {
    let (interval_ms, cleaner_bytes_per_second) = match pace {
        Pace::Idle => (IDLE_MS, Some("1")),
        Pace::Fast => (FAST_MS, None),
        Pace::Throttled => (FAST_MS, Some("200000")),
    };
    let mut args = vec!["--shards", "1", "--log-retention-check-interval-ms", interval_ms];
    args.extend(["--log-cleaner-backoff-ms", interval_ms]);
    if let Some(rate) = cleaner_bytes_per_second {
        args.extend(["--log-cleaner-io-max-bytes-per-second", rate]);
    }
    args.into_iter().map(String::from).collect()
}

fn start(dir: &Path, pace: Pace, env: &[(&str, &str)]) -> Broker {
    let args = broker_args(pace);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Broker::start_env(dir, &args, env)
}

fn partition_dir(dir: &Path) -> PathBuf {
    dir.join(format!("{TOPIC}-0"))
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(partition_dir(dir))
        .expect("partition dir")
        .map(|e| e.expect("dir entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Base offsets of the segments (`<20 digits>.log`) in `names`.
fn segment_bases(names: &[String]) -> Vec<i64> {
    names
        .iter()
        .filter_map(|n| n.strip_suffix(".log"))
        .filter(|s| s.len() == 20)
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// Files a finished recovery must not leave: swap and deletion leftovers, and indexes
/// whose segment is gone.
fn leftovers(names: &[String]) -> Vec<String> {
    names
        .iter()
        .filter(|n| {
            let orphan_index = [".index", ".timeindex"].iter().any(|s| {
                n.strip_suffix(s).is_some_and(|stem| !names.contains(&format!("{stem}.log")))
            });
            orphan_index || [".cleaned", ".swap", ".deleted"].iter().any(|s| n.ends_with(s))
        })
        .cloned()
        .collect()
}

/// The offset a checkpoint file of the partition holds ("v0 <offset> <crc>"), or "-".
fn checkpoint(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(partition_dir(dir).join(name))
        .ok()
        .and_then(|t| t.split_whitespace().nth(1).map(str::to_string))
        .unwrap_or_else(|| "-".into())
}

/// One line describing a crashed partition dir: segments, checkpoints, every unusual file.
fn disk_summary(dir: &Path, names: &[String]) -> String {
    let short = |n: &String| match n.trim_start_matches('0') {
        rest if rest.starts_with('.') => format!("0{rest}"),
        rest => rest.to_string(),
    };
    let odd: Vec<String> = leftovers(names).iter().map(short).collect();
    format!(
        "{} segments, recovery point {}, log start {}, cleaner checkpoint {}; leftovers: [{}]",
        segment_bases(names).len(),
        checkpoint(dir, "recovery-point"),
        checkpoint(dir, "log-start-offset"),
        checkpoint(dir, "cleaner-offset-checkpoint"),
        odd.join(", ")
    )
}

/// A small deterministic generator (xorshift64*), so a failing case replays exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// `batches` batches of keyed records over `KEYS` keys, about one in eight a tombstone
/// when `tombstones`; values are unique (they name their offset) and poorly compressible.
fn workload(seed: u64, first_offset: usize, tombstones: bool, batches: usize) -> Vec<Model> {
    let mut rng = Rng(seed | 1);
    let mut offset = first_offset;
    (0..batches)
        .map(|_| {
            (0..RECORDS_PER_BATCH)
                .map(|_| {
                    let key = format!("key-{:02}", rng.next() % KEYS).into_bytes();
                    let value = (!tombstones || rng.next() % 8 != 0).then(|| {
                        let pad: String = (0..6).map(|_| format!("{:016x}", rng.next())).collect();
                        format!("v{offset}-{pad}").into_bytes()
                    });
                    offset += 1;
                    (key, value)
                })
                .collect()
        })
        .collect()
}

async fn partition_client(broker: &Broker) -> PartitionClient {
    let client = broker.client().await;
    client.partition_client(TOPIC, 0, UnknownTopicHandling::Retry).await.expect("partition client")
}

/// Codecs of successive batches: the cleaner must re-encode compressed batches too.
const CODECS: [Compression; 3] =
    [Compression::NoCompression, Compression::Zstd, Compression::NoCompression];

fn to_records(batch: &Model) -> Vec<rskafka::record::Record> {
    batch
        .iter()
        .map(|(k, v)| rskafka::record::Record {
            key: Some(k.clone()),
            value: v.clone(),
            headers: Default::default(),
            timestamp: common::now(),
        })
        .collect()
}

/// Produces `batches` (acks=all, codecs mixed) and appends them to `model`, checking each
/// batch lands at the next offset.
async fn produce(broker: &Broker, batches: Vec<Model>, model: &mut Model) {
    let pc = partition_client(broker).await;
    for (i, batch) in batches.into_iter().enumerate() {
        let records = to_records(&batch);
        let offsets = pc.produce(records, CODECS[i % CODECS.len()]).await.expect("produce");
        let first = model.len() as i64;
        assert_eq!(offsets, (first..first + batch.len() as i64).collect::<Vec<_>>());
        model.extend(batch);
    }
}

/// Reads every record from `from` to the high watermark, stepping over empty batches;
/// returns them with the high watermark.
fn read_from(broker: &Broker, from: i64) -> (Vec<ReadRecord>, i64) {
    let mut wire = Wire::connect(&broker.addr);
    let mut out = Vec::new();
    let mut position = from;
    for _ in 0..FETCHES_MAX {
        let answer = wire.fetch(TOPIC, 0, position);
        assert_eq!(answer.error_code, 0, "fetch at {position}");
        if position >= answer.high_watermark {
            return (out, answer.high_watermark);
        }
        let batches = split_batches(answer.records);
        assert!(
            !batches.is_empty(),
            "fetch at {position} < hw {}: no batch",
            answer.high_watermark
        );
        for (records, next) in batches {
            out.extend(records.into_iter().filter(|r| r.offset >= position));
            position = position.max(next);
        }
    }
    panic!("log not read in {FETCHES_MAX} fetches");
}

/// How the log reaches the crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// The seed broker stops cleanly; the crash broker trusts every segment and runs the
    /// maintenance job alone.
    CleanSeed,
    /// The seed broker is SIGKILLed right after its last acknowledgement: the crash broker
    /// recovers first, so the job runs on segments it scanned and finalized itself.
    KilledSeed,
    /// Clean seed, then a producer keeps appending while the crash broker runs the job,
    /// until the broker kills itself.
    UnderLoad,
    /// Compaction only: the seed is cleaned once, then overwritten, so the crash interrupts
    /// the rewrite of segments that already have gaps, empty batches and delete horizons.
    Recleaned,
}

const MODES: [Mode; 3] = [Mode::CleanSeed, Mode::KilledSeed, Mode::UnderLoad];

/// Seeds the partition with an idle broker: creates the topic, produces, stops it.
async fn seed(dir: &Path, configs: &[(&str, &str)], batches: Vec<Model>, mode: Mode) -> Model {
    let mut broker = start(dir, Pace::Idle, &[]);
    Wire::connect(&broker.addr).create_topic(TOPIC, 1, configs);
    let mut model = Model::new();
    produce(&broker, batches, &mut model).await;
    if mode == Mode::KilledSeed {
        broker.kill();
    } else {
        assert!(broker.terminate().success(), "seed broker stops cleanly");
    }
    model
}

/// Resolves once `broker` has announced it reached `point` (it dies right after).
async fn crash_announced(broker: &Broker, point: &str) {
    let line = format!("crash point {point} reached");
    while !broker.log_contains(&line) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Produces `batches` one at a time until the broker announces its crash; acknowledged
/// batches join `model`. Returns the batch in flight at the crash: it may or may not have
/// been appended (see [`settle_in_flight`]).
async fn produce_until_crash(
    broker: &Broker,
    point: &str,
    batches: Vec<Model>,
    model: &mut Model,
) -> Option<Model> {
    let pc = tokio::select! {
        pc = partition_client(broker) => pc,
        () = crash_announced(broker, point) => return None,
    };
    for (i, batch) in batches.into_iter().enumerate() {
        let sent = pc.produce(to_records(&batch), CODECS[i % CODECS.len()]);
        tokio::select! {
            acked = sent => {
                let offsets = match acked {
                    Ok(offsets) => offsets,
                    Err(e) => {
                        // The connection may break before the broker's last words reach us.
                        let last_words = tokio::time::timeout(
                            Duration::from_secs(5),
                            crash_announced(broker, point),
                        );
                        assert!(last_words.await.is_ok(), "{point}: produce failed: {e}");
                        return Some(batch);
                    }
                };
                let first = model.len() as i64;
                assert_eq!(offsets, (first..first + batch.len() as i64).collect::<Vec<_>>());
                model.extend(batch);
            }
            () = crash_announced(broker, point) => return Some(batch),
        }
    }
    None
}

/// Adds the batch in flight at the crash to `model` if the restarted broker has it (a
/// batch is appended whole or not at all).
fn settle_in_flight(point: &str, model: &mut Model, in_flight: Option<Model>, hw: i64) {
    let acked = model.len() as i64;
    let appended = in_flight.as_ref().is_some_and(|b| hw == acked + b.len() as i64);
    eprintln!(
        "{point}: {acked} records acknowledged, batch in flight at the crash: {}",
        if in_flight.is_none() {
            "none"
        } else if appended {
            "appended"
        } else {
            "lost"
        }
    );
    match in_flight {
        Some(batch) if appended => model.extend(batch),
        _ => assert_eq!(hw, acked, "{point}: high watermark is the acknowledged count"),
    }
}

/// Runs a broker armed with `point` until it kills itself (under load in
/// [`Mode::UnderLoad`]); returns what it left on disk and the batch in flight at the crash.
async fn crash_at(
    dir: &Path,
    point: &str,
    mode: Mode,
    model: &mut Model,
    load: Vec<Model>,
) -> (Vec<String>, Option<Model>) {
    let pace = if mode == Mode::UnderLoad { Pace::Throttled } else { Pace::Fast };
    let mut broker = start(dir, pace, &[(shardlog::crashpoint::CRASH_AT_ENV, point)]);
    let in_flight = if mode == Mode::UnderLoad {
        produce_until_crash(&broker, point, load, model).await
    } else {
        None
    };
    let status = broker.wait_for_exit(CRASH_WAIT);
    assert!(killed_by_sigkill(&status), "{point}: broker exited with {status:?}, not SIGKILL");
    // The broker's stderr is read by another thread: its last lines may still be on the way.
    let announced = tokio::time::timeout(Duration::from_secs(5), crash_announced(&broker, point));
    assert!(announced.await.is_ok(), "{point}: the broker died elsewhere than at its crash point");
    let names = listing(dir);
    eprintln!("on disk after a crash at {point} ({mode:?}): {}", disk_summary(dir, &names));
    (names, in_flight)
}

/// Starts the recover broker on the dir a crash left as `crashed` and checks recovery
/// removed every leftover: none of the crash's leftovers remains, and the only unusual files
/// are `.deleted` ones of segments the new broker itself deletes at open (those below the
/// checkpointed log start), which go after `file.delete.delay.ms`.
async fn recover(dir: &Path, point: &str, crashed: &[String]) -> Broker {
    let before = leftovers(crashed);
    let broker = start(dir, Pace::Idle, &[]);
    let stale: Vec<String> = leftovers(&listing(dir))
        .into_iter()
        .filter(|n| before.contains(n) || !n.ends_with(".deleted"))
        .collect();
    assert!(stale.is_empty(), "{point}: recovery left {stale:?}");
    let deadline = Instant::now() + DELETE_WAIT;
    while listing(dir).iter().any(|n| n.ends_with(".deleted")) {
        assert!(Instant::now() < deadline, "{point}: .deleted files stay past {DELETE_WAIT:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    broker
}

// ---------------------------------------------------------------------------------------
// Compaction

/// Checks a compacted log read from offset 0 against `model`. With `cleaned_below`, each
/// key also appears at most once below that offset (the cleaned, sealed part).
fn check_compacted(point: &str, read: &[ReadRecord], hw: i64, model: &Model, cleaned_below: i64) {
    assert_eq!(hw, model.len() as i64, "{point}: high watermark is the produced count");
    let mut last_of_key: HashMap<&[u8], i64> = HashMap::new();
    let mut values = HashSet::new();
    let mut previous = -1;
    for r in read {
        assert!(r.offset > previous, "{point}: offset {} after {previous}", r.offset);
        previous = r.offset;
        // Offsets are preserved, so a record must be the one produced at its offset: this
        // also rules out a record of a key after the key's latest one.
        let (key, value) = &model[usize::try_from(r.offset).expect("offset >= 0")];
        assert_eq!(r.key.as_ref(), Some(key), "{point}: key at {}", r.offset);
        assert_eq!(&r.value, value, "{point}: value at {}", r.offset);
        if let Some(v) = value {
            assert!(values.insert(v.clone()), "{point}: value at {} read twice", r.offset);
        }
        let seen_before = last_of_key.insert(key, r.offset).is_some();
        assert!(
            !(seen_before && r.offset < cleaned_below),
            "{point}: key {} twice in the cleaned part (below {cleaned_below})",
            String::from_utf8_lossy(key)
        );
    }
    let mut latest: HashMap<&[u8], i64> = HashMap::new();
    for (offset, (key, _)) in model.iter().enumerate() {
        latest.insert(key, offset as i64);
    }
    for (key, offset) in latest {
        assert_eq!(
            last_of_key.get(key),
            Some(&offset),
            "{point}: key {}'s latest record (offset {offset}) is its last one read",
            String::from_utf8_lossy(key)
        );
    }
}

/// Waits (bounded) until the cleaner has left each key at most once below the active
/// segment, checking the log against `model` at every look.
async fn wait_cleaned(point: &str, broker: &Broker, dir: &Path, model: &Model) {
    let deadline = Instant::now() + SETTLE_WAIT;
    loop {
        // The cleaner never touches the active (last) segment.
        let active_base = segment_bases(&listing(dir)).into_iter().max().unwrap_or(0);
        let (read, hw) = read_from(broker, 0);
        check_compacted(point, &read, hw, model, 0);
        let mut keys = HashSet::new();
        let cleaned =
            read.iter().filter(|r| r.offset < active_base).all(|r| keys.insert(r.key.clone()));
        if cleaned {
            check_compacted(point, &read, hw, model, active_base);
            return;
        }
        assert!(Instant::now() < deadline, "{point}: cleaner did not finish in {SETTLE_WAIT:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// [`Mode::Recleaned`]: a busy broker cleans the seeded log, then an idle one (whose cleaner
/// finds the log clean at start and sleeps) appends a second workload over the same keys.
async fn reclean_seed(point: &str, dir: &Path, model: &mut Model) {
    let mut broker = start(dir, Pace::Fast, &[]);
    wait_cleaned(point, &broker, dir, model).await;
    assert!(broker.terminate().success(), "cleaning broker stops cleanly");
    let mut broker = start(dir, Pace::Idle, &[]);
    produce(&broker, workload(0xD1CE, model.len(), true, BATCHES), model).await;
    assert!(broker.terminate().success(), "second seed broker stops cleanly");
}

async fn compaction_crash(point: &str) {
    for mode in MODES.into_iter().chain([Mode::Recleaned]) {
        compaction_crash_in(point, mode).await;
    }
}

async fn compaction_crash_in(point: &str, mode: Mode) {
    eprintln!("case: compaction, crash at {point}, {mode:?}");
    let dir = tempfile::tempdir().expect("tempdir");
    let configs = [
        ("cleanup.policy", "compact"),
        ("internal.segment.bytes", SEGMENT_BYTES),
        ("min.cleanable.dirty.ratio", "0.01"),
        ("delete.retention.ms", "86400000"),
        ("file.delete.delay.ms", "100"),
    ];
    let mut model = seed(dir.path(), &configs, workload(0xC0FFEE, 0, true, BATCHES), mode).await;
    if mode == Mode::Recleaned {
        reclean_seed(point, dir.path(), &mut model).await;
    }
    let load = workload(0xFACADE, model.len(), true, LOAD_BATCHES);
    let (crashed, in_flight) = crash_at(dir.path(), point, mode, &mut model, load).await;

    let mut broker = recover(dir.path(), point, &crashed).await;
    let (read, hw) = read_from(&broker, 0);
    settle_in_flight(point, &mut model, in_flight, hw);
    check_compacted(point, &read, hw, &model, 0);
    // SIGKILL: a SIGTERM would wait for the log its stalled cleaner holds (see `Pace::Idle`).
    broker.kill();

    let mut broker = start(dir.path(), Pace::Fast, &[]);
    wait_cleaned(point, &broker, dir.path(), &model).await;
    assert!(broker.terminate().success(), "resume broker stops cleanly");
    let swaps: Vec<String> = listing(dir.path())
        .into_iter()
        .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap"))
        .collect();
    assert!(swaps.is_empty(), "{point}: swap files after the cleaner finished: {swaps:?}");
    full_scan_keeps_cleaned_log(point, dir.path(), &model).await;
}

/// Without its recovery point and clean-shutdown marker, a broker scans every segment: the
/// cleaned ones (gaps, empty batches) must each still end where the next begins, or
/// recovery would take them for torn and drop everything after them.
async fn full_scan_keeps_cleaned_log(point: &str, dir: &Path, model: &Model) {
    for name in ["recovery-point", "clean-shutdown"] {
        // Both exist after the clean SIGTERM of the resume broker.
        let removed = std::fs::remove_file(partition_dir(dir).join(name));
        assert!(removed.is_ok(), "{point}: removing {name}: {removed:?}");
    }
    let before = segment_bases(&listing(dir));
    let mut broker = start(dir, Pace::Idle, &[]);
    assert_eq!(segment_bases(&listing(dir)), before, "{point}: a full scan kept every segment");
    let active_base = before.iter().copied().max().unwrap_or(0);
    let (read, hw) = read_from(&broker, 0);
    check_compacted(point, &read, hw, model, active_base);
    broker.kill();
}

#[tokio::test]
async fn crash_after_cleaned_written() {
    compaction_crash("cleaner.cleaned_written").await;
}

#[tokio::test]
async fn crash_after_renamed_to_swap() {
    compaction_crash("cleaner.renamed_to_swap").await;
}

#[tokio::test]
async fn crash_after_old_renamed_to_deleted() {
    compaction_crash("cleaner.old_renamed_to_deleted").await;
}

#[tokio::test]
async fn crash_after_swap_finished() {
    compaction_crash("cleaner.swap_finished").await;
}

/// The cleaner retires the old segment through retention's `schedule_deletion`: a crash
/// after its `.log` alone was renamed leaves the old indexes beside the `.swap` files.
#[tokio::test]
async fn crash_in_clean_after_old_log_renamed() {
    compaction_crash("retention.log_renamed").await;
}

#[tokio::test]
async fn crash_in_clean_after_old_files_renamed() {
    compaction_crash("retention.all_renamed").await;
}

// ---------------------------------------------------------------------------------------
// Retention

/// Checks a retention-trimmed log: the earliest offset is a segment base (and above 0: the
/// crash points all follow the log start checkpoint), everything from it to the high
/// watermark is readable, dense and as produced. Returns the earliest offset.
async fn check_retained(point: &str, broker: &Broker, dir: &Path, model: &Model) -> i64 {
    let bases = segment_bases(&listing(dir));
    let pc = partition_client(broker).await;
    let earliest = pc.get_offset(OffsetAt::Earliest).await.expect("earliest");
    let latest = pc.get_offset(OffsetAt::Latest).await.expect("latest");
    assert!(earliest > 0, "{point}: the checkpointed log start survived");
    assert!(bases.contains(&earliest), "{point}: earliest {earliest} not a base of {bases:?}");
    assert_eq!(latest, model.len() as i64, "{point}: latest offset is the produced count");
    let (read, hw) = read_from(broker, earliest);
    assert_eq!(hw, model.len() as i64, "{point}: high watermark is the produced count");
    let offsets: Vec<i64> = read.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (earliest..hw).collect::<Vec<_>>(), "{point}: dense from {earliest}");
    for r in &read {
        let (key, value) = &model[usize::try_from(r.offset).expect("offset >= 0")];
        assert_eq!((r.key.as_ref(), &r.value), (Some(key), value), "{point}: at {}", r.offset);
    }
    earliest
}

/// What makes retention delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Limit {
    /// `retention.bytes`: the oldest sealed segments beyond three segments' worth.
    Size,
    /// `retention.ms`: the crash broker starts once every seeded record is past it, so it
    /// rolls the active segment too and deletes the whole log.
    Time,
}

const RETENTION_MS: u64 = 1_000;

async fn retention_crash(point: &str, limit: Limit) {
    for mode in MODES {
        retention_crash_in(point, mode, limit).await;
    }
}

async fn retention_crash_in(point: &str, mode: Mode, limit: Limit) {
    eprintln!("case: retention by {limit:?}, crash at {point}, {mode:?}");
    let dir = tempfile::tempdir().expect("tempdir");
    let retention_ms = RETENTION_MS.to_string();
    let bound = match limit {
        Limit::Size => ("retention.bytes", "24576"),
        Limit::Time => ("retention.ms", retention_ms.as_str()),
    };
    let configs = [
        ("cleanup.policy", "delete"),
        ("internal.segment.bytes", SEGMENT_BYTES),
        bound,
        ("file.delete.delay.ms", "100"),
    ];
    let mut model = seed(dir.path(), &configs, workload(0xDE1E7E, 0, false, BATCHES), mode).await;
    if limit == Limit::Time {
        tokio::time::sleep(Duration::from_millis(RETENTION_MS + 100)).await;
    }
    let load = workload(0xFEED, model.len(), false, LOAD_BATCHES);
    let (crashed, in_flight) = crash_at(dir.path(), point, mode, &mut model, load).await;

    let mut broker = recover(dir.path(), point, &crashed).await;
    let pc = partition_client(&broker).await;
    let hw = pc.get_offset(OffsetAt::Latest).await.expect("latest");
    settle_in_flight(point, &mut model, in_flight, hw);
    let recovered_start = check_retained(point, &broker, dir.path(), &model).await;
    // SIGKILL: a SIGTERM would wait for the log its stalled cleaner holds (see `Pace::Idle`).
    broker.kill();

    let broker = start(dir.path(), Pace::Fast, &[]);
    produce(&broker, workload(0xBEEF, model.len(), false, BATCHES), &mut model).await;
    let pc = partition_client(&broker).await;
    // Settled: the log start moved past the recovered one and stayed put over more than two
    // maintenance intervals, with no deletion pending.
    let deadline = Instant::now() + SETTLE_WAIT;
    let mut previous = recovered_start;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let earliest = pc.get_offset(OffsetAt::Earliest).await.expect("earliest");
        let deleting = listing(dir.path()).iter().any(|n| n.ends_with(".deleted"));
        if earliest > recovered_start && earliest == previous && !deleting {
            break;
        }
        assert!(Instant::now() < deadline, "{point}: retention stalled at {earliest}");
        previous = earliest;
    }
    check_retained(point, &broker, dir.path(), &model).await;
}

#[tokio::test]
async fn crash_after_log_start_written() {
    retention_crash("retention.log_start_written", Limit::Size).await;
}

#[tokio::test]
async fn crash_after_log_renamed() {
    retention_crash("retention.log_renamed", Limit::Size).await;
}

#[tokio::test]
async fn crash_after_all_renamed() {
    retention_crash("retention.all_renamed", Limit::Size).await;
}

#[tokio::test]
async fn crash_after_log_start_written_by_time() {
    retention_crash("retention.log_start_written", Limit::Time).await;
}

#[tokio::test]
async fn crash_after_log_renamed_by_time() {
    retention_crash("retention.log_renamed", Limit::Time).await;
}

#[tokio::test]
async fn crash_after_all_renamed_by_time() {
    retention_crash("retention.all_renamed", Limit::Time).await;
}
