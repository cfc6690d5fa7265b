//! Sharing one budget's quota between the shards that serve its connections, by measured
//! demand ([`ShareBoard`]).
//!
//! Every quota window each shard's share task ([`crate::server::throttle::share_loop`])
//! publishes, for every budget it tracks, what it used of the quota over the window just
//! ended and whether it was *saturated* (it throttled or kept muted the budget: it wanted
//! more than it got), and reads the other shards' latest reports for the same budgets. The
//! quota is then split max-min fairly: every shard keeps a floor
//! (`QUOTA_SHARE_FLOOR_PERCENT / 100 / shards`, so a shard where a client has just connected
//! serves it at once); an unsaturated shard is offered what it used plus
//! `QUOTA_SHARE_HEADROOM_PERCENT` (room to grow before it is throttled); saturated shards
//! split the rest evenly, and what nobody wants stays free for the next shard that does. Two shards that both
//! throttle a client therefore converge on halves whatever split they start from (a split
//! by demand alone keeps any split: each throttled shard's demand is its own share).
//!
//! A shard never takes more than the other shards' fresh reports leave (`1 - Σ taken`):
//! they took theirs from older reports and hold it until their next exchange, so the
//! fractions in force sum to at most 1 (plus the floors) whatever order the exchanges run
//! in. A report older than two windows counts as none (its shard no longer serves the
//! budget, or its share task runs late). The reporting shard holds to the same rule from its
//! side: once its own last exchange is older than that it enforces only the floor
//! ([`super::ShardQuotas`]), so a late shard never keeps a fraction the others have handed
//! out again. Both sides read one process-wide clock (`ShardCtx::quota_clock_ms`).
//!
//! Process-wide (`ShareBoard::global`), behind one mutex taken once per window per shard
//! by the share task, never on the request path: the request path reads only its own
//! shard's fractions.
//!
//! Error bound (docs/architecture-details.md, "Client quotas"): at most the floors of shards that do not
//! serve the budget (5 % of the quota by default) stay unused, plus, after a change of
//! demand, up to two windows at the old split; the fractions in force never sum past 1 by
//! more than one floor.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::{BudgetKey, QuotaKind};
use crate::constants::{QUOTA_SHARE_FLOOR_PERCENT, QUOTA_SHARE_HEADROOM_PERCENT};

/// One shard's latest report for one budget and kind.
#[derive(Clone, Copy, Debug, Default)]
struct Report {
    used: f64,
    saturated: bool,
    at_ms: u64,
    /// The fraction the shard took with this report.
    taken: f64,
}

impl Report {
    /// Whether the report still counts at `now_ms` (made, and at most `stale_ms` old).
    fn fresh(&self, now_ms: u64, stale_ms: u64) -> bool {
        self.at_ms > 0 && self.at_ms + stale_ms >= now_ms
    }
}

/// What the fresh reports of shards other than `shard` took.
fn others_taken(row: &[Report], shard: usize, now_ms: u64, stale_ms: u64) -> f64 {
    row.iter()
        .enumerate()
        .filter(|(i, r)| *i != shard && r.fresh(now_ms, stale_ms))
        .map(|(_, r)| r.taken)
        .sum()
}

/// The reports every shard made, per budget and kind.
#[derive(Debug)]
pub struct ShareBoard {
    shards: usize,
    reports: Mutex<HashMap<(BudgetKey, QuotaKind), Vec<Report>>>,
}

/// One budget's use on the reporting shard over the window just ended.
#[derive(Clone, Debug)]
pub struct Demand {
    pub budget: BudgetKey,
    pub kind: QuotaKind,
    /// The rate served, as a fraction of the whole quota.
    pub used: f64,
    /// The shard throttled or muted the budget: it wanted more than `used`.
    pub saturated: bool,
}

impl ShareBoard {
    #[must_use]
    pub fn new(shards: u32) -> Self {
        Self { shards: shards.max(1) as usize, reports: Mutex::new(HashMap::new()) }
    }

    /// The process's board (one broker per process), created for `shards` on first use.
    #[must_use]
    pub fn global(shards: u32) -> Arc<Self> {
        static BOARD: OnceLock<Arc<ShareBoard>> = OnceLock::new();
        BOARD.get_or_init(|| Arc::new(Self::new(shards))).clone()
    }

    /// How many shards share each budget.
    #[must_use]
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// The fraction every shard keeps whatever its demand, and the one a shard falls back to
    /// when its own exchange has lapsed (the others then count its report as none).
    #[must_use]
    pub fn floor(&self) -> f64 {
        if self.shards == 1 {
            return 1.0;
        }
        #[allow(clippy::cast_precision_loss)]
        let n = self.shards as f64;
        f64::from(QUOTA_SHARE_FLOOR_PERCENT) / 100.0 / n
    }

    /// The share of one shard in `1 / shards` units when nobody reports demand.
    #[must_use]
    pub fn even(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let n = self.shards as f64;
        1.0 / n
    }

    /// Publishes `shard`'s reports at `now_ms` and returns its new fraction of each budget's
    /// quota, in the order of `demands`. Reports older than `stale_ms` count as none.
    pub fn exchange(
        &self,
        shard: usize,
        demands: &[Demand],
        now_ms: u64,
        stale_ms: u64,
    ) -> Vec<f64> {
        if self.shards == 1 {
            return vec![1.0; demands.len()];
        }
        let floor = self.floor();
        let Ok(mut reports) = self.reports.lock() else {
            return vec![self.even(); demands.len()];
        };
        let fractions = demands
            .iter()
            .map(|d| {
                let row = reports
                    .entry((d.budget.clone(), d.kind))
                    .or_insert_with(|| vec![Report::default(); self.shards]);
                let mine = Report {
                    used: d.used.max(0.0),
                    saturated: d.saturated,
                    at_ms: now_ms,
                    taken: 0.0,
                };
                if let Some(slot) = row.get_mut(shard) {
                    *slot = mine;
                }
                let others_taken = others_taken(row, shard, now_ms, stale_ms);
                let live: Vec<(usize, Report)> = row
                    .iter()
                    .copied()
                    .enumerate()
                    .filter(|(_, r)| r.fresh(now_ms, stale_ms))
                    .collect();
                let wants: Vec<f64> = live.iter().map(|(_, r)| want(r, floor)).collect();
                // The floors of shards that report nothing stay reserved for them.
                #[allow(clippy::cast_precision_loss)]
                let available = 1.0 - floor * (self.shards - live.len()) as f64;
                let fills = water_fill(&wants, available);
                let wanted = live
                    .iter()
                    .zip(fills)
                    .find(|((i, _), _)| *i == shard)
                    .map_or(floor, |(_, f)| f);
                let taken = wanted.min(1.0 - others_taken).max(floor);
                if let Some(slot) = row.get_mut(shard) {
                    slot.taken = taken;
                }
                taken
            })
            .collect();
        // Shard 0 sweeps budgets nobody reports any more, bounding the board.
        if shard == 0 {
            reports.retain(|_, row| row.iter().any(|r| r.fresh(now_ms, stale_ms)));
        }
        fractions
    }

    /// The fraction `shard` starts a budget with when it first serves it: the even split, but
    /// never more than the other shards' fresh reports leave (nor less than the floor).
    /// Takes the board's lock, so it is for a new client state, not for every request.
    #[must_use]
    pub fn initial(
        &self,
        shard: usize,
        key: &(BudgetKey, QuotaKind),
        now_ms: u64,
        stale_ms: u64,
    ) -> f64 {
        if self.shards == 1 {
            return 1.0;
        }
        let Ok(reports) = self.reports.lock() else { return self.floor() };
        let others_taken =
            reports.get(key).map_or(0.0, |row| others_taken(row, shard, now_ms, stale_ms));
        self.even().min(1.0 - others_taken).max(self.floor())
    }

    /// Budgets on the board (for tests).
    #[must_use]
    pub fn len(&self) -> usize {
        self.reports.lock().map_or(0, |r| r.len())
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a shard is offered before the split: unbounded when saturated, otherwise what it
/// used plus headroom, and never less than the floor.
fn want(r: &Report, floor: f64) -> f64 {
    if r.saturated {
        return f64::INFINITY;
    }
    let headroom = 1.0 + f64::from(QUOTA_SHARE_HEADROOM_PERCENT) / 100.0;
    (r.used * headroom).max(floor)
}

/// Max-min fair split of `available` over `wants`: everyone gets `min(want, level)` for the
/// level that uses it all. What even the wants leave over stays unallocated: a shard where
/// the client newly connects, or one that must grow past its headroom, takes it at its next
/// exchange without waiting for the others to give some back.
fn water_fill(wants: &[f64], available: f64) -> Vec<f64> {
    if wants.is_empty() {
        return Vec::new();
    }
    let mut order: Vec<usize> = (0..wants.len()).collect();
    order.sort_by(|a, b| wants[*a].total_cmp(&wants[*b]));
    let mut out = vec![0.0; wants.len()];
    let mut left = available.max(0.0);
    for (k, &i) in order.iter().enumerate() {
        #[allow(clippy::cast_precision_loss)]
        let level = left / (wants.len() - k) as f64;
        out[i] = wants[i].min(level);
        left -= out[i];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(used: f64, saturated: bool) -> Vec<Demand> {
        vec![Demand {
            budget: (String::new(), "c".into()),
            kind: QuotaKind::Produce,
            used,
            saturated,
        }]
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn a_client_on_one_shard_gets_nearly_all_of_its_quota() {
        let board = ShareBoard::new(2);
        // Shard 1 has never served the client: its floor stays reserved.
        assert!(close(board.exchange(0, &report(0.9, true), 1000, 2000)[0], 0.975));
        let other = board.exchange(1, &report(0.0, false), 1000, 2000)[0];
        assert!(close(other, 0.025), "{other}");
        assert!(close(board.exchange(0, &report(0.97, true), 2000, 2000)[0], 0.975));
    }

    #[test]
    fn unsaturated_shards_get_their_use_plus_headroom_and_the_rest_evenly() {
        let board = ShareBoard::new(2);
        board.exchange(0, &report(0.3, false), 1000, 2000);
        let f1 = board.exchange(1, &report(0.1, false), 1000, 2000)[0];
        let f0 = board.exchange(0, &report(0.3, false), 1001, 2000)[0];
        // Wants 0.375 and 0.125; the 0.5 nobody wants stays free.
        assert!(close(f0, 0.375) && close(f1, 0.125), "{f0} {f1}");
        // A shard that has to throttle takes all the other leaves, at once.
        let f1 = board.exchange(1, &report(0.12, true), 2000, 2000)[0];
        assert!(close(f1, 0.625), "{f1}");
        let f0 = board.exchange(0, &report(0.3, false), 2001, 2000)[0];
        assert!(close(f0, 0.375), "{f0}");
    }

    /// Two shards that both throttle the client end at halves from any split, and never
    /// hold more than the whole quota between them on the way.
    #[test]
    fn saturated_shards_converge_on_halves_within_the_quota() {
        let board = ShareBoard::new(2);
        let f0 = board.exchange(0, &report(0.9, true), 1000, 2000)[0];
        let f1 = board.exchange(1, &report(0.02, true), 1010, 2000)[0];
        assert!(close(f0, 0.975) && f0 + f1 <= 1.0 + 1e-9, "{f0} {f1}");
        let f0 = board.exchange(0, &report(0.97, true), 2000, 2000)[0];
        assert!(close(f0, 0.5), "{f0}");
        let f1 = board.exchange(1, &report(0.02, true), 2010, 2000)[0];
        assert!(close(f1, 0.5), "{f1}");
    }

    #[test]
    fn stale_reports_count_as_none_and_are_swept() {
        let board = ShareBoard::new(2);
        let f1 = board.exchange(1, &report(0.5, true), 1000, 2000)[0];
        let f0 = board.exchange(0, &report(0.5, true), 1500, 2000)[0];
        assert!(close(f1, 0.975) && close(f0, 0.025), "{f1} {f0}");
        let f1 = board.exchange(1, &report(0.5, true), 2000, 2000)[0];
        let f0 = board.exchange(0, &report(0.5, true), 2500, 2000)[0];
        assert!(close(f1, 0.5) && close(f0, 0.5), "{f1} {f0}");
        let f0 = board.exchange(0, &report(0.5, true), 4600, 2000)[0];
        assert!(close(f0, 0.975), "shard 1's report expired: {f0}");
        board.exchange(0, &[], 10_000, 2000);
        assert!(board.is_empty());
    }

    #[test]
    fn a_new_shard_starts_with_what_the_others_leave() {
        let board = ShareBoard::new(2);
        let key = ((String::new(), "c".to_string()), QuotaKind::Produce);
        assert!(close(board.initial(1, &key, 500, 2000), 0.5));
        board.exchange(0, &report(0.9, true), 1000, 2000);
        assert!(close(board.initial(1, &key, 1500, 2000), 0.025));
        assert!(close(board.initial(1, &key, 3500, 2000), 0.5), "shard 0's report expired");
    }

    #[test]
    fn water_fill_is_max_min_fair() {
        let got = water_fill(&[0.1, f64::INFINITY, f64::INFINITY], 1.0);
        assert!(close(got[0], 0.1) && close(got[1], 0.45) && close(got[2], 0.45), "{got:?}");
        let got = water_fill(&[0.1, 0.2], 1.0);
        assert!(close(got[0], 0.1) && close(got[1], 0.2), "{got:?}");
        assert!(water_fill(&[], 1.0).is_empty());
    }
}
