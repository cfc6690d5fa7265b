//! Periodic per-shard log maintenance: retention every `log.retention.check.interval.ms`,
//! the high-watermark checkpoint every `replica.high.watermark.checkpoint.interval.ms`,
//! and the shard's log cleaner (`storage::cleaner`), which cleans the dirtiest compacted log
//! it owns, one after another, and sleeps `log.cleaner.backoff.ms` when none needs it.
//!
//! Lives on every shard, in the low-share background queue, and touches only the logs this
//! shard owns. Both loops yield between partitions so request handling keeps its latency; the
//! cleaner's I/O goes through this shard's share of `log.cleaner.io.max.bytes.per.second`. A
//! failing partition is logged and skipped, never stopping a loop.
//!
//! The cleaner settings (`log.cleaner.backoff.ms`, `log.cleaner.io.max.bytes.per.second`,
//! `log.cleaner.dedupe.buffer.size`) are dynamic broker configs: the loop reads them from the
//! shard's current metadata image before each pass, and rechecks the backoff at least every
//! `CLEANER_SETTINGS_RECHECK_MS` while it sleeps, so a change applies without a restart.

use std::rc::Rc;
use std::time::{Duration, Instant};

use super::OwnedPartition as Partition;
use super::PartitionTable;
use crate::metrics::{self, Count, Level};
use crate::shard::{sleep, ShardCtx};
use crate::storage::cleaner::throttle::Throttler;
use crate::storage::CleanOptions;

/// Runs retention over this shard's logs (`table`) until shutdown.
pub async fn retention_loop(ctx: Rc<ShardCtx>, table: &PartitionTable) {
    let interval = Duration::from_millis(ctx.config.log_retention_check_interval_ms);
    loop {
        sleep(interval).await;
        if ctx.is_shutting_down() {
            return;
        }
        retention_pass(&ctx, table).await;
    }
}

/// Writes this shard's high-watermark checkpoint every
/// `replica.high.watermark.checkpoint.interval.ms` until shutdown (the last one is written
/// at clean shutdown by the runtime's `App::stop_shard` hook, after requests drained).
pub async fn hw_checkpoint_loop(ctx: Rc<ShardCtx>, table: &PartitionTable) {
    let interval = Duration::from_millis(crate::constants::REPLICA_HW_CHECKPOINT_INTERVAL_MS);
    loop {
        sleep(interval).await;
        if ctx.is_shutting_down() {
            return;
        }
        write_hw_checkpoint(&ctx, table).await;
    }
}

/// Writes the checkpoint of `table` once; a failure is a WARN (the next pass retries).
pub async fn write_hw_checkpoint(ctx: &ShardCtx, table: &PartitionTable) {
    if let Err(err) = table.write_hw_checkpoint(ctx.id).await {
        tracing::warn!(shard = %ctx.id, "cannot write the high-watermark checkpoint: {err}");
    }
}

/// Publishes this shard's replication metrics every `REPLICATION_METRICS_INTERVAL_MS` until
/// shutdown (`metrics::replication`).
pub async fn replication_metrics_loop(ctx: Rc<ShardCtx>, table: &PartitionTable) {
    let interval = Duration::from_millis(crate::constants::REPLICATION_METRICS_INTERVAL_MS);
    loop {
        sleep(interval).await;
        if ctx.is_shutting_down() {
            return;
        }
        let gauges = replication_gauges(&ctx, table);
        crate::metrics::replication::publish(ctx.id.0, gauges);
    }
}

/// This shard's replication gauges: ISR health and follower lag of the partitions it
/// leads; on shard 0 also the image's leaderless partitions.
fn replication_gauges(
    ctx: &ShardCtx,
    table: &PartitionTable,
) -> crate::metrics::replication::ShardReplication {
    use crate::metrics::replication::{FollowerLag, ShardReplication};
    let mut out = ShardReplication::default();
    for p in table.all() {
        if !p.is_leader.get() || !p.replication.has_followers() {
            continue;
        }
        let log_end = p.log.log_end_offset();
        let now_ms = p.log.now_ms();
        p.replication.with(|st| {
            let min = usize::try_from(st.settings.min_insync_replicas).unwrap_or(1);
            out.under_replicated += i64::from(st.isr.len() < st.replicas.len());
            out.under_min_isr += i64::from(st.isr.len() < min);
            out.at_min_isr += i64::from(st.isr.len() == min);
            for f in st.followers() {
                // -1: never caught up under this leader (no time to measure from).
                let ms = match (f.log_end == log_end, f.last_caught_up_ms > 0) {
                    (true, _) => 0,
                    (false, true) => (now_ms - f.last_caught_up_ms).max(0),
                    (false, false) => -1,
                };
                out.follower_lag.push(FollowerLag {
                    topic: p.tp.topic.clone(),
                    partition: p.tp.partition,
                    follower: f.id.0,
                    records: (log_end.0 - f.log_end.0.max(0)).max(0),
                    ms,
                });
            }
        });
    }
    if ctx.id.0 == 0 {
        let image = ctx.image();
        let offline = image.topics.values().flat_map(|t| &t.partitions).filter(|p| p.leader.0 < 0);
        out.offline = i64::try_from(offline.count()).unwrap_or(i64::MAX);
    }
    out
}

/// One retention pass over every log this shard owns.
pub async fn retention_pass(ctx: &ShardCtx, table: &PartitionTable) {
    for partition in table.all() {
        if ctx.is_shutting_down() {
            return;
        }
        match partition.log.enforce_retention(partition.log.now_ms()).await {
            Ok(out) if out.segments_deleted > 0 => {
                metrics::count(Count::RetentionSegmentsDeleted, out.segments_deleted);
                metrics::count(Count::RetentionBytesDeleted, out.bytes_deleted);
                tracing::info!(
                    partition = %partition.tp,
                    segments = out.segments_deleted,
                    bytes = out.bytes_deleted,
                    log_start = out.log_start.0,
                    "retention pass deleted segments"
                );
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(partition = %partition.tp, "retention failed: {err}"),
        }
        crate::shard::yield_if_needed().await;
    }
}

/// Longest a sleeping cleaner goes without rereading its backoff (a lowered
/// `log.cleaner.backoff.ms` applies within this).
const CLEANER_SETTINGS_RECHECK_MS: u64 = 1_000;

/// This shard's cleaner settings in force: the broker-wide values (dynamic per broker >
/// dynamic default > static > default) with the I/O rate and key-map memory split evenly
/// across shards.
#[derive(Clone, Copy, Debug, PartialEq)]
struct CleanerSettings {
    backoff_ms: u64,
    /// Bytes/s for this shard; infinite when unlimited.
    io_bytes_per_second: f64,
    key_map_bytes: usize,
}

fn cleaner_settings(ctx: &ShardCtx) -> CleanerSettings {
    let image = ctx.image();
    let broker = &image.broker_defaults;
    let shards = ctx.shard_count.max(1);
    let io = broker.double("log.cleaner.io.max.bytes.per.second");
    let dedupe = broker.long("log.cleaner.dedupe.buffer.size").unsigned_abs();
    CleanerSettings {
        backoff_ms: broker.long("log.cleaner.backoff.ms").unsigned_abs().max(1),
        // Kafka's default, Double.MAX_VALUE, means unlimited.
        io_bytes_per_second: if io < f64::MAX { io / f64::from(shards) } else { f64::INFINITY },
        key_map_bytes: usize::try_from(dedupe / u64::from(shards)).unwrap_or(usize::MAX),
    }
}

/// Runs this shard's log cleaner over `table` until shutdown.
pub async fn cleaner_loop(ctx: Rc<ShardCtx>, table: &PartitionTable) {
    let mut settings = cleaner_settings(&ctx);
    let mut throttle = Throttler::new(settings.io_bytes_per_second, Instant::now());
    loop {
        if ctx.is_shutting_down() {
            return;
        }
        let now = cleaner_settings(&ctx);
        if now.io_bytes_per_second.to_bits() != settings.io_bytes_per_second.to_bits() {
            tracing::info!(bytes_per_second = now.io_bytes_per_second, "cleaner I/O limit changed");
            throttle = Throttler::new(now.io_bytes_per_second, Instant::now());
        }
        settings = now;
        let cleaned = match filthiest(&ctx, table).await {
            Some(partition) => clean_one(&ctx, &partition, &throttle, settings.key_map_bytes).await,
            None => false,
        };
        if !cleaned {
            back_off(&ctx).await;
        }
        crate::shard::yield_if_needed().await;
    }
}

/// Sleeps `log.cleaner.backoff.ms` as currently set, rereading it while asleep.
async fn back_off(ctx: &ShardCtx) {
    let started = Instant::now();
    loop {
        let backoff = Duration::from_millis(cleaner_settings(ctx).backoff_ms);
        let left = backoff.saturating_sub(started.elapsed());
        if left.is_zero() || ctx.is_shutting_down() {
            return;
        }
        sleep(left.min(Duration::from_millis(CLEANER_SETTINGS_RECHECK_MS))).await;
    }
}

/// The compacted log to clean next, as Kafka's `grabFilthiestCompactedLog` picks it: the
/// highest dirty ratio among logs past `min.cleanable.dirty.ratio` or `max.compaction.lag.ms`;
/// failing that, a log whose tombstones' delete horizon has passed.
async fn filthiest(ctx: &ShardCtx, table: &PartitionTable) -> Option<Rc<Partition>> {
    let now = table.now_ms();
    let mut best: Option<(f64, Rc<Partition>)> = None;
    let mut horizon_due = None;
    let mut max_dirty = 0.0f64;
    for partition in table.all() {
        if ctx.is_shutting_down() {
            return None;
        }
        let config = partition.log.config();
        if !config.compacted {
            continue;
        }
        match partition.log.clean_stats(now).await {
            Ok(stats) => {
                max_dirty = max_dirty.max(stats.dirty_ratio);
                if stats.cleanable(config.min_cleanable_dirty_ratio) {
                    if best.as_ref().is_none_or(|(r, _)| stats.dirty_ratio > *r) {
                        best = Some((stats.dirty_ratio, partition.clone()));
                    }
                } else if stats.delete_horizon_due && horizon_due.is_none() {
                    horizon_due = Some(partition.clone());
                }
            }
            Err(err) => tracing::warn!(partition = %partition.tp, "cleaner check failed: {err}"),
        }
        crate::shard::yield_if_needed().await;
    }
    metrics::set(Level::CleanerMaxDirtyPercent, (max_dirty * 100.0).round() as i64);
    best.map(|(_, p)| p).or(horizon_due)
}

/// Cleans one log; true if it did work.
async fn clean_one(
    ctx: &ShardCtx,
    partition: &Partition,
    throttle: &Throttler,
    key_map_bytes: usize,
) -> bool {
    let abort = || ctx.is_shutting_down();
    let opts =
        CleanOptions { key_map_bytes, throttle, abort: &abort, force: false, stop_after: None };
    let started = Instant::now();
    match partition.log.clean(partition.log.now_ms(), &opts).await {
        Ok(out) if out.cleaned => {
            metrics::count(Count::CleanerRuns, 1);
            metrics::count(Count::CleanerSegmentsRewritten, out.segments_rewritten);
            metrics::count(
                Count::CleanerBytesReclaimed,
                out.bytes_before.saturating_sub(out.bytes_after),
            );
            metrics::count(Count::CleanerIoBytes, out.io_bytes);
            let secs = started.elapsed().as_secs_f64().max(1e-6);
            tracing::info!(
                partition = %partition.tp,
                dirty_ratio = out.dirty_ratio,
                bytes_before = out.bytes_before,
                bytes_after = out.bytes_after,
                segments = out.segments_rewritten,
                clean_end = out.clean_end.0,
                map_full = out.map_full,
                io_mib_per_s = out.io_bytes as f64 / secs / (1024.0 * 1024.0),
                "cleaned log"
            );
            true
        }
        Ok(_) => false,
        Err(err) => {
            tracing::warn!(partition = %partition.tp, "cleaner failed: {err}");
            false
        }
    }
}
