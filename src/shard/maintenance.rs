//! Periodic per-shard log maintenance: retention and, for compacted logs, a cleaner pass
//! (`storage::cleaner`) every `log.retention.check.interval.ms`.
//!
//! Lives on every shard, in the low-share background queue, and touches only the logs this
//! shard owns. A pass yields between partitions so request handling keeps its latency; a
//! failing partition is logged and skipped, never stopping the loop.

use std::rc::Rc;
use std::time::Duration;

use super::ctx::ShardCtx;
use super::{now_ms, sleep};

/// Runs retention over this shard's logs until shutdown.
pub async fn retention_loop(ctx: Rc<ShardCtx>) {
    let interval = Duration::from_millis(ctx.config.log_retention_check_interval_ms);
    loop {
        sleep(interval).await;
        if ctx.is_shutting_down() {
            return;
        }
        retention_pass(&ctx).await;
    }
}

/// One retention pass over every log this shard owns.
pub async fn retention_pass(ctx: &ShardCtx) {
    for partition in ctx.partitions.all() {
        if ctx.is_shutting_down() {
            return;
        }
        match partition.log.enforce_retention(now_ms()).await {
            Ok(out) if out.segments_deleted > 0 => {
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
        if partition.log.config().compacted {
            if let Err(err) = partition.log.clean(now_ms()).await {
                tracing::warn!(partition = %partition.tp, "cleaner failed: {err}");
            }
        }
        glommio::executor().yield_if_needed().await;
    }
}
