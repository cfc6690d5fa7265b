//! Feeds `metrics::lso` (issue 17): every `REPLICATION_METRICS_INTERVAL_MS` each shard
//! measures, for the partitions it leads, how far the last stable offset trails the high
//! watermark, and publishes the lagging ones. A partition whose lag only grows names an
//! open transaction whose marker never arrived (a stuck LSO).
//!
//! Runs on every shard, in the background queue, and reads only the partitions it owns
//! (no I/O: the LSO comes from the producer state in memory).

use std::rc::Rc;
use std::time::Duration;

use crate::metrics::lso::{publish, LsoLag};
use crate::shard::{sleep, ShardCtx};

/// Publishes this shard's LSO lags until shutdown.
pub async fn lso_metrics_loop(ctx: Rc<ShardCtx>) {
    let interval = Duration::from_millis(crate::constants::REPLICATION_METRICS_INTERVAL_MS);
    loop {
        sleep(interval).await;
        if ctx.is_shutting_down() {
            return;
        }
        publish(ctx.id.0, lso_lags(&ctx));
    }
}

/// The led partitions of this shard whose last stable offset is below the high watermark.
fn lso_lags(ctx: &ShardCtx) -> Vec<LsoLag> {
    ctx.partitions
        .all()
        .into_iter()
        .filter(|p| p.is_leader.get())
        .filter_map(|p| {
            let records = p.high_watermark().0 - p.last_stable_offset().0;
            (records > 0).then(|| LsoLag {
                topic: p.tp.topic.clone(),
                partition: p.tp.partition,
                records,
            })
        })
        .collect()
}
