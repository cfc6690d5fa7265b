//! Feeds `metrics::lso` (issue 17): every `REPLICATION_METRICS_INTERVAL_MS` each shard
//! measures, for the partitions it leads, how far the last stable offset trails the high
//! watermark, and publishes the lagging ones, with the age of their oldest open transaction
//! (now minus the max timestamp of its first batch on the partition: the batch's own clock,
//! as replicated and replayed, so every replica measures from the same instant). A partition
//! whose lag only grows names an open transaction whose marker never arrived (a stuck LSO).
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
    let now_ms = crate::shard::now_ms();
    crate::server::broker::of(ctx)
        .partitions
        .all()
        .into_iter()
        .filter(|p| p.is_leader.get())
        .filter_map(|p| {
            let records = p.high_watermark().0 - p.last_stable_offset().0;
            (records > 0).then(|| LsoLag {
                topic: p.tp.topic.clone(),
                partition: p.tp.partition,
                records,
                age_ms: p.log.oldest_open_txn().map_or(0, |(_, start)| txn_age_ms(now_ms, start)),
            })
        })
        .collect()
}

/// Age of a transaction that started at `start_ms` (0 when unknown, or in the future by a
/// producer's clock).
fn txn_age_ms(now_ms: i64, start_ms: i64) -> i64 {
    if start_ms < 0 {
        0
    } else {
        now_ms.saturating_sub(start_ms).max(0)
    }
}

#[cfg(test)]
mod tests {
    use super::txn_age_ms;

    #[test]
    fn ages_are_never_negative_and_unknown_starts_are_zero() {
        assert_eq!(txn_age_ms(10_000, 7_500), 2_500);
        assert_eq!(txn_age_ms(10_000, 12_000), 0, "a producer clock ahead of ours");
        assert_eq!(txn_age_ms(10_000, -1), 0, "unknown start");
    }
}
