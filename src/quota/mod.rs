//! Client quotas: Kafka's byte-rate quotas (`producer_byte_rate`, `consumer_byte_rate`) for
//! `user`, `client-id` and `user`+`client-id` entities with their `<default>`s and KIP-55's
//! precedence ([`ClientQuotaConfigs::resolve`]), the windowed rate and throttle
//! math of Kafka's `ClientQuotaManager` ([`rate`]), and the per-shard state that applies them
//! ([`ShardQuotas`]).
//!
//! Pure logic, no glommio: the clock comes in as `now_ms`. The configs ([`ClientQuotaConfigs`],
//! defined with the image in [`crate::metadata::client_quotas`] and re-exported here) are
//! owned by the controller (recorded in the metadata log) and reach every shard in the
//! metadata image; each shard owns one [`ShardQuotas`] and touches it only from its own
//! thread, so the request path takes no lock.
//!
//! Sharing a budget between shards: a client's connections may land on several shards; each
//! shard enforces `quota × fraction` on the traffic it serves, the fractions re-split every
//! quota window in proportion to measured demand ([`share`]).
//!
//! Invariants: a shard keeps at most [`CLIENT_QUOTA_STATES_MAX`] client states (idle ones are
//! dropped first); a client without a quota costs one map lookup and no state.

pub mod mutation;
#[cfg(test)]
mod pipeline_sim;
pub mod rate;
pub mod share;
#[cfg(test)]
mod share_sim;

use std::collections::HashMap;
use std::sync::Arc;

pub use rate::{record_and_throttle_ms, QuotaWindow, SampledRate};
pub use share::{Demand, ShareBoard};

pub use crate::metadata::client_quotas::{
    validate, BudgetKey, ClientEntity, ClientQuotaConfigs, EntityName, QuotaConfigError,
    QuotaEntity, CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, ENTITY_CLIENT_ID, ENTITY_USER,
    PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE,
};

use crate::constants::CLIENT_QUOTA_STATES_MAX;

/// The principal a connection authenticated as, whose name is the `user` of user quotas.
/// Without authentication every connection is Kafka's `User:ANONYMOUS`; quota code takes the
/// name from the connection and never assumes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    name: std::rc::Rc<str>,
}

impl Principal {
    /// Kafka's principal of an unauthenticated connection.
    pub const ANONYMOUS_NAME: &'static str = "ANONYMOUS";

    #[must_use]
    pub fn anonymous() -> Self {
        Self::named(Self::ANONYMOUS_NAME)
    }

    #[must_use]
    pub fn named(name: &str) -> Self {
        Self { name: name.into() }
    }

    /// The user name quotas are configured for (`--entity-type users --entity-name`).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }
}

pub use crate::types::QuotaKind;

impl QuotaKind {
    /// The Kafka quota key this kind is configured by.
    #[must_use]
    pub fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => PRODUCER_BYTE_RATE,
            QuotaKind::Fetch => CONSUMER_BYTE_RATE,
        }
    }
}

/// One kind's measurement of one budget on this shard.
#[derive(Debug)]
struct KindState {
    rate: SampledRate,
    /// Bytes recorded since the last share exchange, and whether any was throttled.
    used: f64,
    throttled: bool,
    /// Until when the last throttle mutes the budget's connection on this shard: a muted
    /// connection records nothing, yet still wants its share.
    muted_until_ms: u64,
    /// The quota (bytes/s) the last record was measured against.
    quota_per_s: f64,
    /// This shard's fraction of the quota (see [`share`]).
    fraction: f64,
}

impl KindState {
    fn new(fraction: f64) -> Self {
        Self {
            rate: SampledRate::default(),
            used: 0.0,
            throttled: false,
            muted_until_ms: 0,
            quota_per_s: 0.0,
            fraction,
        }
    }

    /// The report for the `period_ms` since the previous exchange at `since_ms`: the rate
    /// served as a fraction of the quota, and whether the budget was saturated here (throttled,
    /// or its connection muted into the period: a muted connection records nothing, yet it
    /// wants its share).
    fn report(&self, since_ms: u64, period_ms: f64) -> (f64, bool) {
        let saturated = self.throttled || self.muted_until_ms > since_ms;
        if self.quota_per_s <= 0.0 {
            return (0.0, saturated);
        }
        (self.used.max(0.0) * 1000.0 / period_ms / self.quota_per_s, saturated)
    }
}

#[derive(Debug)]
struct ClientState {
    produce: KindState,
    fetch: KindState,
    /// Request time in percent-seconds (never shared: each shard's own core).
    request: KindState,
    last_ms: u64,
}

impl ClientState {
    fn new(fraction: f64) -> Self {
        Self {
            produce: KindState::new(fraction),
            fetch: KindState::new(fraction),
            request: KindState::new(1.0),
            last_ms: 0,
        }
    }

    fn kind(&mut self, kind: QuotaKind) -> &mut KindState {
        match kind {
            QuotaKind::Produce => &mut self.produce,
            QuotaKind::Fetch => &mut self.fetch,
        }
    }
}

/// One shard's quota state: the measured rates of the budgets with a quota that this shard
/// serves, and its fraction of each. Lives on its shard, behind the shard context.
#[derive(Debug)]
pub struct ShardQuotas {
    window: QuotaWindow,
    shard: usize,
    board: Arc<ShareBoard>,
    clients: HashMap<BudgetKey, ClientState>,
    last_exchange_ms: u64,
}

impl ShardQuotas {
    /// The quotas of shard `shard`, sharing budgets with the other shards through `board`.
    #[must_use]
    pub fn new(window: QuotaWindow, shard: usize, board: Arc<ShareBoard>) -> Self {
        Self { window, shard, board, clients: HashMap::new(), last_exchange_ms: 0 }
    }

    /// A shard alone (no sharing), for tests and tools.
    #[must_use]
    pub fn alone(window: QuotaWindow) -> Self {
        Self::new(window, 0, Arc::new(ShareBoard::new(1)))
    }

    /// Publishes this shard's demand per budget since the last exchange and takes its new
    /// fractions (once per quota window, from the shard's share task; see [`share`]).
    pub fn exchange_shares(&mut self, now_ms: u64) {
        let since_ms = self.last_exchange_ms;
        #[allow(clippy::cast_precision_loss)]
        let period_ms = now_ms.saturating_sub(since_ms).max(1) as f64;
        self.last_exchange_ms = now_ms;
        let mut demands = Vec::with_capacity(self.clients.len() * 2);
        for (budget, state) in &self.clients {
            for (kind, k) in
                [(QuotaKind::Produce, &state.produce), (QuotaKind::Fetch, &state.fetch)]
            {
                let (used, saturated) = k.report(since_ms, period_ms);
                demands.push(Demand { budget: budget.clone(), kind, used, saturated });
            }
        }
        let stale_ms = self.stale_ms();
        let fractions = self.board.exchange(self.shard, &demands, now_ms, stale_ms);
        for (d, f) in demands.iter().zip(fractions) {
            if let Some(state) = self.clients.get_mut(&d.budget) {
                let k = state.kind(d.kind);
                k.fraction = f;
                k.used = 0.0;
                k.throttled = false;
            }
        }
    }

    /// How old a share report may be before the board counts it as none.
    fn stale_ms(&self) -> u64 {
        2 * self.window.window_ms
    }

    /// The most of any quota this shard may enforce at `now_ms`: all of its fraction while
    /// its last exchange is fresh, only the floor once that exchange is older than the other
    /// shards still count its report ([`share`]): they have handed the rest out again.
    fn fraction_ceiling(&self, now_ms: u64) -> f64 {
        if now_ms > self.last_exchange_ms + self.stale_ms() {
            return self.board.floor();
        }
        1.0
    }

    /// The longest a throttle may mute a budget while its quota is shared: the span the rate
    /// remembers. Past it every sample has expired, and a longer throttle would come from a
    /// share that was small when the bytes arrived (a shard whose connection was idle or
    /// muted), not from the client exceeding its quota; the client's next window is held
    /// to the share again. A broker of one shard keeps Kafka's uncapped throttle.
    fn throttle_cap_ms(&self) -> u64 {
        if self.board.shards() == 1 {
            return u64::MAX;
        }
        u64::from(self.window.samples) * self.window.window_ms
    }

    /// This shard's current fraction of `budget`'s `kind` quota.
    fn fraction(&self, budget: &BudgetKey, kind: QuotaKind) -> f64 {
        self.clients.get(budget).map_or_else(
            || self.board.even(),
            |s| match kind {
                QuotaKind::Produce => s.produce.fraction,
                QuotaKind::Fetch => s.fetch.fraction,
            },
        )
    }

    /// `budget`'s state, created on first use with the fractions the other shards leave
    /// ([`ShareBoard::initial`]), and marked used at `now_ms`.
    fn state(&mut self, budget: BudgetKey, now_ms: u64) -> &mut ClientState {
        let (board, shard, stale_ms) = (&self.board, self.shard, self.stale_ms());
        let state = self.clients.entry(budget).or_insert_with_key(|budget| {
            let mut state = ClientState::new(board.even());
            for kind in [QuotaKind::Produce, QuotaKind::Fetch] {
                let key = (budget.clone(), kind);
                state.kind(kind).fraction = board.initial(shard, &key, now_ms, stale_ms);
            }
            state
        });
        state.last_ms = now_ms;
        state
    }

    /// Records `bytes` of `kind` for a request by `user` with `client_id` at `now_ms` and
    /// returns the throttle time in ms (0 when within quota, or without a quota).
    pub fn record(
        &mut self,
        configs: &ClientQuotaConfigs,
        kind: QuotaKind,
        (user, client_id): (&str, &str),
        bytes: u64,
        now_ms: u64,
    ) -> u64 {
        let Some((quota, budget)) = configs.resolve(user, client_id, kind.key()) else {
            return 0;
        };
        let window = self.window;
        if !self.clients.contains_key(&budget) && !self.make_room(now_ms) {
            return 0;
        }
        let (cap_ms, ceiling) = (self.throttle_cap_ms(), self.fraction_ceiling(now_ms));
        let state = self.state(budget, now_ms);
        let k = state.kind(kind);
        #[allow(clippy::cast_precision_loss)]
        let bytes = bytes as f64;
        k.quota_per_s = quota;
        let bound = quota * k.fraction.min(ceiling);
        let ms = record_and_throttle_ms(&mut k.rate, window, bound, bytes, now_ms).min(cap_ms);
        k.used += bytes;
        k.throttled |= ms > 0;
        k.muted_until_ms = k.muted_until_ms.max(now_ms.saturating_add(ms));
        ms
    }

    /// Records `busy_ns` of this shard's time spent on a request by `user` with `client_id`
    /// against its `request_percentage` (Kafka's request quota: percent of one core; here the
    /// shard's core, so not shared between shards) and returns the throttle time in ms.
    pub fn record_request_time(
        &mut self,
        configs: &ClientQuotaConfigs,
        (user, client_id): (&str, &str),
        busy_ns: u64,
        now_ms: u64,
    ) -> u64 {
        let Some((quota, budget)) = configs.resolve(user, client_id, REQUEST_PERCENTAGE) else {
            return 0;
        };
        let window = self.window;
        if !self.clients.contains_key(&budget) && !self.make_room(now_ms) {
            return 0;
        }
        let state = self.state(budget, now_ms);
        // Percent-seconds: 10 ms of the core is 1 % for one second.
        #[allow(clippy::cast_precision_loss)]
        let value = busy_ns as f64 * 100.0 / 1e9;
        record_and_throttle_ms(&mut state.request.rate, window, quota, value, now_ms)
    }

    /// Takes back `bytes` recorded at `now_ms` (Kafka's `unrecordQuotaSensor`, for a fetch
    /// answered empty because it was throttled).
    pub fn unrecord(
        &mut self,
        configs: &ClientQuotaConfigs,
        kind: QuotaKind,
        (user, client_id): (&str, &str),
        bytes: u64,
        now_ms: u64,
    ) {
        let Some((_, budget)) = configs.resolve(user, client_id, kind.key()) else { return };
        let window = self.window;
        if let Some(state) = self.clients.get_mut(&budget) {
            let k = state.kind(kind);
            #[allow(clippy::cast_precision_loss)]
            let bytes = bytes as f64;
            k.rate.record(window, -bytes, now_ms);
            k.used -= bytes;
        }
    }

    /// The most bytes one window of this shard's share allows (Kafka's
    /// `getMaxValueInQuotaWindow`): fetches are capped at it, so one response cannot exceed
    /// what the quota lets through in a window. `None` without a quota.
    #[must_use]
    pub fn max_bytes_in_window(
        &self,
        configs: &ClientQuotaConfigs,
        kind: QuotaKind,
        (user, client_id): (&str, &str),
    ) -> Option<u64> {
        let (quota, budget) = configs.resolve(user, client_id, kind.key())?;
        #[allow(clippy::cast_precision_loss)]
        let window_s = self.window.window_ms as f64 / 1000.0;
        let share = quota * self.fraction(&budget, kind);
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Some((share * window_s).max(1.0) as u64)
    }

    /// Whether a new client state fits, after dropping states idle for the whole measured
    /// span (their rates would read zero anyway). A client beyond the limit is not throttled.
    fn make_room(&mut self, now_ms: u64) -> bool {
        if self.clients.len() < CLIENT_QUOTA_STATES_MAX {
            return true;
        }
        let span_ms = u64::from(self.window.samples) * self.window.window_ms;
        self.clients.retain(|_, s| now_ms.saturating_sub(s.last_ms) < span_ms);
        self.clients.len() < CLIENT_QUOTA_STATES_MAX
    }

    /// Number of client states held (for tests and metrics).
    #[must_use]
    pub fn tracked_clients(&self) -> usize {
        self.clients.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANON: &str = Principal::ANONYMOUS_NAME;

    fn configs() -> ClientQuotaConfigs {
        let mut c = ClientQuotaConfigs::default();
        c.set(&QuotaEntity::client(None), PRODUCER_BYTE_RATE, Some(1000.0));
        c.set(&QuotaEntity::client(Some("app".into())), PRODUCER_BYTE_RATE, Some(500.0));
        c.set(&QuotaEntity::client(Some("app".into())), CONSUMER_BYTE_RATE, Some(700.0));
        c
    }

    #[test]
    fn client_then_default_precedence_per_key() {
        let c = configs();
        assert_eq!(c.quota(ANON, "app", PRODUCER_BYTE_RATE), Some(500.0));
        assert_eq!(c.quota(ANON, "other", PRODUCER_BYTE_RATE), Some(1000.0));
        assert_eq!(c.quota(ANON, "other", CONSUMER_BYTE_RATE), None);
        let mut c = c;
        c.set(&QuotaEntity::client(None), PRODUCER_BYTE_RATE, None);
        assert!(!c.entities.contains_key(&QuotaEntity::client(None)), "empty entity disappears");
    }

    #[test]
    fn each_shard_enforces_its_share() {
        let c = configs();
        let mut one = ShardQuotas::alone(QuotaWindow::KAFKA_DEFAULT);
        let mut two = ShardQuotas::new(QuotaWindow::KAFKA_DEFAULT, 0, Arc::new(ShareBoard::new(2)));
        let app = (ANON, "app");
        // 500 B/s over the 10 s minimum window: 5000 bytes pass on one shard, 2500 on two.
        assert_eq!(one.record(&c, QuotaKind::Produce, app, 5000, 0), 0);
        assert_eq!(two.record(&c, QuotaKind::Produce, app, 2500, 0), 0);
        assert_eq!(two.record(&c, QuotaKind::Produce, app, 250, 0), 1000);
        // No quota, no state.
        assert_eq!(one.record(&c, QuotaKind::Fetch, (ANON, "nobody"), 1 << 30, 0), 0);
        assert_eq!(one.tracked_clients(), 1);
    }

    #[test]
    fn a_user_quota_is_shared_by_the_users_client_ids() {
        let mut c = ClientQuotaConfigs::default();
        c.set(&QuotaEntity::user(Some("u".into())), PRODUCER_BYTE_RATE, Some(500.0));
        let mut q = ShardQuotas::alone(QuotaWindow::KAFKA_DEFAULT);
        assert_eq!(q.record(&c, QuotaKind::Produce, ("u", "a"), 5000, 0), 0);
        assert!(q.record(&c, QuotaKind::Produce, ("u", "b"), 500, 0) > 0);
        assert_eq!(q.record(&c, QuotaKind::Produce, ("v", "b"), 1 << 20, 0), 0);
    }

    /// A client on shard 0 only: after one exchange shard 0 enforces nearly the whole quota.
    #[test]
    fn shares_move_to_the_shard_with_demand() {
        let c = configs();
        let board = Arc::new(ShareBoard::new(2));
        let mut s0 = ShardQuotas::new(QuotaWindow::KAFKA_DEFAULT, 0, board.clone());
        let mut s1 = ShardQuotas::new(QuotaWindow::KAFKA_DEFAULT, 1, board);
        let app = (ANON, "app");
        // 500 B/s, 10 s minimum window: the even share lets 2500 bytes through.
        assert_eq!(s0.record(&c, QuotaKind::Produce, app, 2500, 0), 0);
        assert!(s0.record(&c, QuotaKind::Produce, app, 250, 0) > 0);
        s1.exchange_shares(1000);
        s0.exchange_shares(1000);
        let cap = s0.max_bytes_in_window(&c, QuotaKind::Produce, app).unwrap();
        assert!((480..=500).contains(&cap), "975 % of 500 B/s for one 1 s window: {cap}");
        // The old bytes plus nearly the rest of the 10 s window's allowance now pass.
        assert_eq!(s0.record(&c, QuotaKind::Produce, app, 1900, 1000), 0);
        // A shard that has not served the client yet starts at the even split.
        let cap = s1.max_bytes_in_window(&c, QuotaKind::Produce, app).unwrap();
        assert!(cap <= 250, "{cap}");
    }

    #[test]
    fn request_time_is_held_to_its_percentage_of_the_shard() {
        let mut c = ClientQuotaConfigs::default();
        c.set(&QuotaEntity::client(Some("busy".into())), REQUEST_PERCENTAGE, Some(10.0));
        let mut q = ShardQuotas::new(QuotaWindow::new(2, 1), 1, Arc::new(ShareBoard::new(2)));
        // 10 % of a core over the 1 s minimum window: 100 ms of shard time.
        assert_eq!(q.record_request_time(&c, (ANON, "busy"), 90_000_000, 0), 0);
        assert!(q.record_request_time(&c, (ANON, "busy"), 20_000_000, 0) > 0);
        assert_eq!(q.record_request_time(&c, (ANON, "idle"), 1_000_000_000, 0), 0);
    }
}
