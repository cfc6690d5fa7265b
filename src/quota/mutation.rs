//! `controller_mutation_rate` (KIP-599): partition mutations per second (topics created ×
//! partitions, partitions added, topics deleted × partitions) per budget, as Kafka's
//! `ControllerMutationQuotaManager` counts them: a token bucket of `quota` tokens/s holding
//! at most `quota × quota.window.num × quota.window.size.seconds`, that a request may drive
//! negative; once it is negative the budget is over quota until it refills.
//!
//! Strict mode (CreateTopics ≥ v6, CreatePartitions ≥ v3, DeleteTopics ≥ v5) refuses a request
//! arriving while the bucket is negative (THROTTLING_QUOTA_EXCEEDED with the time until it is
//! not); permissive mode (older versions) accepts it and delays the response. Unlike Kafka,
//! a request is refused or accepted whole (Kafka may accept the first topics of a request and
//! refuse the rest once the quota is crossed).
//!
//! Process-wide ([`MutationBuckets::global`]), one mutex: admin requests are rare and off the
//! data path, and one bucket per budget per broker is Kafka's exact model (no sharing error).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::{BudgetKey, ClientQuotaConfigs, QuotaWindow, CONTROLLER_MUTATION_RATE};
use crate::constants::CLIENT_QUOTA_STATES_MAX;

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    last_ms: u64,
}

/// What to do with a mutating request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Go ahead; in permissive mode delay the answer by `throttle_ms` (0: not at all).
    Allow { throttle_ms: u64 },
    /// Strict mode, over quota: refuse with THROTTLING_QUOTA_EXCEEDED and this throttle time.
    Refuse { throttle_ms: u64 },
}

/// The buckets of every budget with a `controller_mutation_rate`.
#[derive(Debug, Default)]
pub struct MutationBuckets {
    buckets: Mutex<HashMap<BudgetKey, Bucket>>,
}

impl MutationBuckets {
    /// The process's buckets (one broker per process).
    #[must_use]
    pub fn global() -> &'static Self {
        static BUCKETS: OnceLock<MutationBuckets> = OnceLock::new();
        BUCKETS.get_or_init(Self::default)
    }

    /// Checks and records `mutations` partition mutations of a request by `user` with
    /// `client_id` at `now_ms`.
    #[allow(clippy::too_many_arguments)]
    pub fn check(
        &self,
        configs: &ClientQuotaConfigs,
        window: QuotaWindow,
        (user, client_id): (&str, &str),
        mutations: u32,
        strict: bool,
        now_ms: u64,
    ) -> Verdict {
        let Some((quota, budget)) = configs.resolve(user, client_id, CONTROLLER_MUTATION_RATE)
        else {
            return Verdict::Allow { throttle_ms: 0 };
        };
        #[allow(clippy::cast_precision_loss)]
        let burst = quota * f64::from(window.samples) * window.window_ms as f64 / 1000.0;
        let Ok(mut buckets) = self.buckets.lock() else { return Verdict::Allow { throttle_ms: 0 } };
        if buckets.len() >= CLIENT_QUOTA_STATES_MAX && !buckets.contains_key(&budget) {
            buckets.retain(|_, b| b.tokens < burst);
        }
        let b = buckets.entry(budget).or_insert(Bucket { tokens: burst, last_ms: now_ms });
        #[allow(clippy::cast_precision_loss)]
        let elapsed_s = now_ms.saturating_sub(b.last_ms) as f64 / 1000.0;
        b.tokens = (b.tokens + quota * elapsed_s).min(burst);
        b.last_ms = now_ms;
        let wait_ms = |tokens: f64| -> u64 {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            if tokens < 0.0 {
                (-tokens / quota * 1000.0).ceil() as u64
            } else {
                0
            }
        };
        if strict && b.tokens < 0.0 {
            return Verdict::Refuse { throttle_ms: wait_ms(b.tokens) };
        }
        b.tokens -= f64::from(mutations);
        Verdict::Allow { throttle_ms: if strict { 0 } else { wait_ms(b.tokens) } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::QuotaEntity;

    #[test]
    fn a_bucket_may_go_negative_once_then_refuses_until_refilled() {
        let mut c = ClientQuotaConfigs::default();
        c.set(&QuotaEntity::client(Some("m".into())), CONTROLLER_MUTATION_RATE, Some(1.0));
        let w = QuotaWindow::new(2, 1);
        let b = MutationBuckets::default();
        let who = ("ANONYMOUS", "m");
        assert_eq!(b.check(&c, w, who, 5, true, 0), Verdict::Allow { throttle_ms: 0 });
        assert_eq!(b.check(&c, w, who, 1, true, 0), Verdict::Refuse { throttle_ms: 3000 });
        assert_eq!(b.check(&c, w, who, 1, true, 2000), Verdict::Refuse { throttle_ms: 1000 });
        assert_eq!(b.check(&c, w, who, 1, true, 3000), Verdict::Allow { throttle_ms: 0 });
        // Permissive: accepted, delayed by the time to refill.
        assert_eq!(b.check(&c, w, who, 2, false, 3000), Verdict::Allow { throttle_ms: 3000 });
        // Another client has no quota.
        assert_eq!(
            b.check(&c, w, ("ANONYMOUS", "x"), 99, true, 0),
            Verdict::Allow { throttle_ms: 0 }
        );
    }
}
