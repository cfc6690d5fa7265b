//! Sharing one budget's quota between the shards that serve its connections, by measured
//! demand ([`ShareBoard`]).
//!
//! Every quota window each shard's share task ([`crate::server::throttle::share_loop`])
//! publishes, for every budget it tracks, its demand over the window just ended (bytes/ms
//! recorded, doubled when the shard throttled the budget: it wanted more than it got), and
//! reads the other shards' latest demands for the same budgets. Its fraction of the quota is
//! then `floor + (1 - shards·floor) · own / total` (`1 / shards` while nobody reports
//! demand), with `floor = QUOTA_SHARE_FLOOR_PERCENT / 100 / shards`, so the fractions of all
//! shards sum to 1 and a shard where a client has just connected gets something at once.
//! A report older than two windows counts as no demand (its shard no longer serves the
//! budget, or does not report).
//!
//! Process-wide (`ShareBoard::global`), behind one mutex taken once per window per shard
//! by the share task, never on the request path: the request path reads only its own
//! shard's fractions.
//!
//! Error bound (ARCHITECTURE.md, "Client quotas"): when every shard serving a budget uses
//! its share, the shares sum to the quota; when some do not, at most `floor · (shards - 1)`
//! of the quota (the idle shards' floors, 5 % by default) stays unused, plus, after a change
//! of demand, up to two windows at the old split.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::{BudgetKey, QuotaKind};
use crate::constants::QUOTA_SHARE_FLOOR_PERCENT;

/// One shard's latest demand for one budget and kind.
#[derive(Clone, Copy, Debug, Default)]
struct Report {
    demand_per_ms: f64,
    at_ms: u64,
}

/// The demands every shard reported, per budget and kind.
#[derive(Debug)]
pub struct ShareBoard {
    shards: usize,
    reports: Mutex<HashMap<(BudgetKey, QuotaKind), Vec<Report>>>,
}

/// One budget's demand on the reporting shard over the window just ended.
#[derive(Clone, Debug)]
pub struct Demand {
    pub budget: BudgetKey,
    pub kind: QuotaKind,
    pub demand_per_ms: f64,
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

    /// The share of one shard in `1 / shards` units when nobody reports demand.
    #[must_use]
    pub fn even(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let n = self.shards as f64;
        1.0 / n
    }

    /// Publishes `shard`'s demands at `now_ms` and returns its new fraction of each budget's
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
        #[allow(clippy::cast_precision_loss)]
        let n = self.shards as f64;
        let floor = f64::from(QUOTA_SHARE_FLOOR_PERCENT) / 100.0 / n;
        let Ok(mut reports) = self.reports.lock() else {
            return vec![self.even(); demands.len()];
        };
        let fractions = demands
            .iter()
            .map(|d| {
                let row = reports
                    .entry((d.budget.clone(), d.kind))
                    .or_insert_with(|| vec![Report::default(); self.shards]);
                if let Some(mine) = row.get_mut(shard) {
                    *mine = Report { demand_per_ms: d.demand_per_ms.max(0.0), at_ms: now_ms };
                }
                let fresh = |r: &Report| r.at_ms + stale_ms >= now_ms && r.at_ms > 0;
                let total: f64 = row.iter().filter(|r| fresh(r)).map(|r| r.demand_per_ms).sum();
                if total <= 0.0 {
                    return 1.0 / n;
                }
                floor + (1.0 - n * floor) * d.demand_per_ms.max(0.0) / total
            })
            .collect();
        // Shard 0 sweeps budgets nobody reports any more, bounding the board.
        if shard == 0 {
            reports.retain(|_, row| row.iter().any(|r| r.at_ms + stale_ms >= now_ms));
        }
        fractions
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

#[cfg(test)]
mod tests {
    use super::*;

    fn demand(d: f64) -> Vec<Demand> {
        vec![Demand {
            budget: (String::new(), "c".into()),
            kind: QuotaKind::Produce,
            demand_per_ms: d,
        }]
    }

    #[test]
    fn a_client_on_one_shard_gets_nearly_all_of_its_quota() {
        let board = ShareBoard::new(2);
        assert!((board.exchange(0, &demand(100.0), 1000, 2000)[0] - 0.975).abs() < 1e-9);
        let other = board.exchange(1, &demand(0.0), 1000, 2000)[0];
        assert!((other - 0.025).abs() < 1e-9, "{other}");
    }

    #[test]
    fn shares_follow_demand_and_sum_to_one() {
        let board = ShareBoard::new(2);
        board.exchange(0, &demand(30.0), 1000, 2000);
        let f1 = board.exchange(1, &demand(10.0), 1000, 2000)[0];
        let f0 = board.exchange(0, &demand(30.0), 1001, 2000)[0];
        assert!((f0 + f1 - 1.0).abs() < 1e-9);
        assert!(f0 > 0.7 && f1 < 0.3, "{f0} {f1}");
        // Nobody demanding: the even split.
        let board = ShareBoard::new(4);
        assert!((board.exchange(2, &demand(0.0), 5, 10)[0] - 0.25).abs() < 1e-9);
    }

    #[test]
    fn stale_reports_count_as_no_demand_and_are_swept() {
        let board = ShareBoard::new(2);
        board.exchange(1, &demand(50.0), 1000, 2000);
        let f0 = board.exchange(0, &demand(50.0), 1500, 2000)[0];
        assert!((f0 - 0.5).abs() < 1e-9);
        let f0 = board.exchange(0, &demand(50.0), 4000, 2000)[0];
        assert!(f0 > 0.97, "shard 1's report expired: {f0}");
        board.exchange(0, &[], 10_000, 2000);
        assert!(board.is_empty());
    }
}
