//! The automatic shard balancer: shard 0 of each broker measures bytes in and out per
//! second of every partition this broker leads (counted on the owner shard), sums them per
//! shard, and when the hottest shard carries more than the coolest by
//! `shard.balance.margin.percent` over a whole `shard.balance.interval.ms` window, moves
//! the one partition that evens them best (`server::shard_move`, trigger `Auto`).
//!
//! Bounded: one move per window at most, and the window after a move is a cooldown (its
//! rates mix the partition's two shards, so it is not judged). Below
//! [`SHARD_BALANCE_MIN_BYTES_PER_SECOND`] on the hottest shard nothing moves (an idle broker
//! has only noise). Coordinator partitions never move.
//!
//! Runs on shard 0 only, in the background queue. [`decide`] is a pure function.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::call::{ShardReply, ShardRequest};
use super::shard_move::{MoveAnswer, MoveCall, PartitionBytes, Trigger};
use crate::constants::SHARD_BALANCE_MIN_BYTES_PER_SECOND;
use crate::shard::ShardCtx;
use crate::types::{ShardId, TopicPartition};

/// One partition's measured rate over the last window.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionRate {
    pub tp: TopicPartition,
    pub shard: ShardId,
    /// Bytes in + out per second.
    pub bytes_per_s: u64,
}

/// A move the balancer wants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub tp: TopicPartition,
    pub from: ShardId,
    pub to: ShardId,
}

/// Per-shard totals (bytes/s) of `rates` over `shard_count` shards.
#[must_use]
pub fn shard_totals(rates: &[PartitionRate], shard_count: u32) -> Vec<u64> {
    let mut totals = vec![0u64; shard_count as usize];
    for r in rates {
        if let Some(t) = totals.get_mut(r.shard.0 as usize) {
            *t = t.saturating_add(r.bytes_per_s);
        }
    }
    totals
}

/// The move that evens the hottest and coolest shard best, if they differ by more than
/// `margin_percent` of the coolest and the hottest carries at least `min_bytes_per_s`: the
/// partition of the hottest shard whose rate `r` minimises |(hot − r) − (cool + r)|, among
/// those with `0 < r < hot − cool` (a larger one would only swap the roles).
#[must_use]
pub fn decide(
    rates: &[PartitionRate],
    shard_count: u32,
    margin_percent: u64,
    min_bytes_per_s: u64,
) -> Option<Decision> {
    if shard_count < 2 {
        return None;
    }
    let totals = shard_totals(rates, shard_count);
    let (hot, &hot_rate) = totals.iter().enumerate().max_by_key(|(i, r)| (**r, usize::MAX - i))?;
    let (cool, &cool_rate) = totals.iter().enumerate().min_by_key(|(i, r)| (**r, *i))?;
    if hot == cool || hot_rate < min_bytes_per_s {
        return None;
    }
    // hot > cool × (1 + margin): compared in integers.
    if u128::from(hot_rate) * 100 <= u128::from(cool_rate) * u128::from(100 + margin_percent) {
        return None;
    }
    let gap = hot_rate - cool_rate;
    let hot_id = ShardId(u32::try_from(hot).ok()?);
    rates
        .iter()
        .filter(|r| r.shard == hot_id && r.bytes_per_s > 0 && r.bytes_per_s < gap)
        .filter(|r| !crate::controller::is_internal(&r.tp.topic))
        .min_by_key(|r| (gap.abs_diff(2 * r.bytes_per_s), r.tp.clone()))
        .map(|r| Decision {
            tp: r.tp.clone(),
            from: hot_id,
            to: ShardId(u32::try_from(cool).unwrap_or(0)),
        })
}

/// Rates between two samples of the cumulative counters; a partition that changed shard
/// or whose counters went back (it reopened) has no rate this window.
#[must_use]
pub fn rates_between(
    before: &HashMap<TopicPartition, PartitionBytes>,
    now: &[PartitionBytes],
    elapsed: Duration,
) -> Vec<PartitionRate> {
    let secs = elapsed.as_secs_f64().max(1e-3);
    now.iter()
        .filter_map(|n| {
            let b = before.get(&n.tp).filter(|b| b.shard == n.shard)?;
            let bytes =
                n.bytes_in.checked_sub(b.bytes_in)? + n.bytes_out.checked_sub(b.bytes_out)?;
            Some(PartitionRate {
                tp: n.tp.clone(),
                shard: n.shard,
                bytes_per_s: (bytes as f64 / secs) as u64,
            })
        })
        .collect()
}

/// The balancer's settings in force (read every window: the image carries them).
struct Settings {
    enabled: bool,
    interval: Duration,
    margin_percent: u64,
}

fn settings(ctx: &ShardCtx) -> Settings {
    let d = &ctx.image().broker_defaults;
    Settings {
        enabled: d.current("shard.balance.enable").is_none_or(|v| v == "true"),
        interval: Duration::from_millis(
            u64::try_from(d.long("shard.balance.interval.ms")).unwrap_or(300_000).max(1000),
        ),
        margin_percent: u64::try_from(d.long("shard.balance.margin.percent")).unwrap_or(50),
    }
}

/// Every shard's per-partition counters.
async fn sample(ctx: &Rc<ShardCtx>) -> Vec<PartitionBytes> {
    let mut out = Vec::new();
    for shard in (0..ctx.shard_count).map(ShardId) {
        let pending = ctx.call(shard, ShardRequest::ShardMove(MoveCall::Load)).await;
        if let Ok(ShardReply::ShardMove(MoveAnswer::Load(list))) = pending.await {
            out.extend(list);
        }
    }
    out
}

/// The balancer loop (shard 0, background). See the module docs.
pub async fn run(ctx: Rc<ShardCtx>) {
    if ctx.shard_count < 2 {
        return;
    }
    let mut before: Option<(Instant, HashMap<TopicPartition, PartitionBytes>)> = None;
    while !ctx.is_shutting_down() {
        let s = settings(&ctx);
        let seen = ctx.shutdown.version();
        crate::shard::with_timeout(s.interval, ctx.shutdown.changed_since(seen)).await;
        if ctx.is_shutting_down() {
            return;
        }
        if !s.enabled {
            before = None;
            continue;
        }
        let now = sample(&ctx).await;
        let at = Instant::now();
        let decision = before.as_ref().and_then(|(then, b)| {
            let rates = rates_between(b, &now, at.duration_since(*then));
            decide(&rates, ctx.shard_count, s.margin_percent, SHARD_BALANCE_MIN_BYTES_PER_SECOND)
        });
        before = Some((at, now.into_iter().map(|p| (p.tp.clone(), p)).collect()));
        let Some(d) = decision else { continue };
        tracing::info!(partition = %d.tp, from = %d.from, to = %d.to, "shard balancer moves a partition");
        let moved = super::shard_move::move_partition(
            &ctx,
            &d.tp.topic,
            d.tp.partition,
            d.to,
            Trigger::Auto,
        )
        .await;
        if let Err(err) = moved {
            tracing::warn!(partition = %d.tp, "shard balancer's move failed: {err}");
        }
        // Cooldown: the next window mixes the partition's two shards; start afresh.
        before = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(topic: &str, p: i32, shard: u32, bps: u64) -> PartitionRate {
        PartitionRate { tp: TopicPartition::new(topic, p), shard: ShardId(shard), bytes_per_s: bps }
    }

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn moves_the_partition_that_evens_best() {
        // Shard 0: 3 + 2 + 1 MiB/s, shard 1: 1 MiB/s. Gap 6; the ideal move is 3 MiB/s.
        let rates =
            [r("a", 0, 0, 3 * MIB), r("a", 1, 0, 2 * MIB), r("a", 2, 0, MIB), r("a", 3, 1, MIB)];
        let d = decide(&rates, 2, 50, MIB).expect("imbalanced");
        assert_eq!(
            d,
            Decision { tp: TopicPartition::new("a", 0), from: ShardId(0), to: ShardId(1) }
        );
    }

    #[test]
    fn within_the_margin_or_idle_nothing_moves() {
        // 1.2 + 0.2 vs 1.0: 40 % hotter, margin 50 %; with 30 % the 0.2 one moves.
        let rates = [r("a", 0, 0, 12 * MIB / 10), r("a", 2, 0, 2 * MIB / 10), r("a", 1, 1, MIB)];
        assert_eq!(decide(&rates, 2, 50, MIB), None);
        assert_eq!(decide(&rates, 2, 30, MIB).unwrap().tp, TopicPartition::new("a", 2));
        // Very skewed but idle.
        let idle = [r("a", 0, 0, 1000), r("a", 1, 1, 0)];
        assert_eq!(decide(&idle, 2, 50, MIB), None);
        assert_eq!(decide(&idle, 1, 50, 0), None, "one shard: nowhere to go");
    }

    #[test]
    fn a_single_hot_partition_is_not_bounced() {
        // One partition carries everything: moving it would only swap the shards' roles.
        let rates = [r("a", 0, 0, 10 * MIB), r("a", 1, 1, 0)];
        assert_eq!(decide(&rates, 2, 50, MIB), None);
    }

    #[test]
    fn coordinator_partitions_stay() {
        let rates =
            [r("__consumer_offsets", 0, 0, 3 * MIB), r("a", 0, 0, 3 * MIB), r("a", 1, 1, 0)];
        assert_eq!(decide(&rates, 2, 50, MIB).unwrap().tp, TopicPartition::new("a", 0));
        let only = [r("__consumer_offsets", 0, 0, 3 * MIB), r("x", 0, 0, 3 * MIB), r("a", 1, 1, 0)];
        assert_eq!(decide(&only, 2, 50, MIB).unwrap().tp.topic, "x");
    }

    #[test]
    fn to_the_coolest_of_several_shards() {
        let rates =
            [r("a", 0, 0, 2 * MIB), r("a", 1, 0, 2 * MIB), r("a", 2, 1, 2 * MIB), r("a", 3, 2, 0)];
        let d = decide(&rates, 3, 50, MIB).unwrap();
        assert_eq!((d.from, d.to), (ShardId(0), ShardId(2)));
    }

    #[test]
    fn rates_skip_moved_or_reopened_partitions() {
        let pb = |p: i32, shard: u32, i: u64, o: u64| PartitionBytes {
            tp: TopicPartition::new("a", p),
            shard: ShardId(shard),
            bytes_in: i,
            bytes_out: o,
        };
        let before: HashMap<_, _> = [pb(0, 0, 100, 100), pb(1, 0, 100, 0), pb(2, 0, 500, 0)]
            .into_iter()
            .map(|p| (p.tp.clone(), p))
            .collect();
        let now = [pb(0, 0, 1100, 1100), pb(1, 1, 200, 0), pb(2, 0, 10, 0), pb(3, 1, 5, 5)];
        let rates = rates_between(&before, &now, Duration::from_secs(2));
        assert_eq!(
            rates,
            vec![PartitionRate {
                tp: TopicPartition::new("a", 0),
                shard: ShardId(0),
                bytes_per_s: 1000
            }]
        );
    }
}
