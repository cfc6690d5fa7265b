//! Client quotas: Kafka's byte-rate quotas (`producer_byte_rate`, `consumer_byte_rate`) for
//! `user`, `client-id` and `user`+`client-id` entities with their `<default>`s and KIP-55's
//! precedence ([`ClientQuotaConfigs::resolve`]), the windowed rate and throttle
//! math of Kafka's `ClientQuotaManager` ([`rate`]), and the per-shard state that applies them
//! ([`ShardQuotas`]).
//!
//! Pure logic, no glommio: the clock comes in as `now_ms`. The configs ([`ClientQuotaConfigs`])
//! are owned by the controller (recorded in the metadata log) and reach every shard in the
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

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

pub use rate::{record_and_throttle_ms, QuotaWindow, SampledRate};
pub use share::{Demand, ShareBoard};

use crate::constants::CLIENT_QUOTA_STATES_MAX;

/// Kafka's quota key for produce bytes/s per broker.
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
/// Kafka's quota key for fetch bytes/s per broker.
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
/// Kafka's quota key for request time: percent of one core (here: of the shard's core) per
/// quota window spent on the client's requests.
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
/// Kafka's quota key for partition mutations/s (KIP-599).
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
/// Kafka's entity type of a client-id quota.
pub const ENTITY_CLIENT_ID: &str = "client-id";

/// Kafka's entity type of a user (principal) quota.
pub const ENTITY_USER: &str = "user";

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

/// Which byte rate a request counts against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    Produce,
    Fetch,
}

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

/// A client-id entity: `Some(id)` for one client id, `None` for `<default>`.
pub type ClientEntity = Option<String>;

/// One part of a quota entity: `Some(name)`, or `None` for `<default>`.
pub type EntityName = Option<String>;

/// A quota entity: a `user`, a `client-id`, or both (Kafka's `/config/users/<u>/clients/<c>`);
/// an absent part (`None`) is not part of the entity, `Some(None)` is its `<default>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QuotaEntity {
    pub user: Option<EntityName>,
    pub client_id: Option<EntityName>,
}

impl QuotaEntity {
    /// The client-id entity `name` (`None`: `<default>`).
    #[must_use]
    pub fn client(name: EntityName) -> Self {
        Self { user: None, client_id: Some(name) }
    }

    /// The user entity `name` (`None`: `<default>`).
    #[must_use]
    pub fn user(name: EntityName) -> Self {
        Self { user: Some(name), client_id: None }
    }

    /// The user+client-id entity.
    #[must_use]
    pub fn user_client(user: EntityName, client_id: EntityName) -> Self {
        Self { user: Some(user), client_id: Some(client_id) }
    }

    /// The entity's parts as (entity type, name), user first, as the metadata log stores them.
    #[must_use]
    pub fn parts(&self) -> Vec<(&'static str, EntityName)> {
        let mut parts = Vec::with_capacity(2);
        if let Some(u) = &self.user {
            parts.push((ENTITY_USER, u.clone()));
        }
        if let Some(c) = &self.client_id {
            parts.push((ENTITY_CLIENT_ID, c.clone()));
        }
        parts
    }

    /// The entity of (entity type, name) parts, in any order: Kafka's rules (one `user`, one
    /// `client-id`, at least one part, no other type, no empty name).
    pub fn from_parts<'a>(
        parts: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<Self, QuotaConfigError> {
        let mut entity = Self::default();
        for (kind, name) in parts {
            let slot = match kind {
                ENTITY_USER => &mut entity.user,
                ENTITY_CLIENT_ID => &mut entity.client_id,
                other => return Err(QuotaConfigError::UnsupportedEntity(other.to_string())),
            };
            if slot.is_some() {
                return Err(QuotaConfigError::DuplicateEntity(kind.to_string()));
            }
            if name == Some("") {
                return Err(QuotaConfigError::EmptyName(kind.to_string()));
            }
            *slot = Some(name.map(str::to_string));
        }
        if entity.user.is_none() && entity.client_id.is_none() {
            return Err(QuotaConfigError::EmptyEntity);
        }
        Ok(entity)
    }
}

/// Whose budget a request is counted against: the `(user, client-id)` tags of Kafka's quota
/// sensor. A part the matching entity does not have is empty, so e.g. every client id of a
/// user with a user quota shares one budget.
pub type BudgetKey = (String, String);

/// Quota values by entity and key, as recorded in the metadata log.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientQuotaConfigs {
    pub entities: BTreeMap<QuotaEntity, BTreeMap<String, f64>>,
}

impl ClientQuotaConfigs {
    /// The quota for `key` of a request by `user` with `client_id`, per Kafka's precedence
    /// (KIP-55), the first entity of these with a value for `key`:
    /// `/users/<user>/clients/<client-id>`, `/users/<user>/clients/<default>`, `/users/<user>`,
    /// `/users/<default>/clients/<client-id>`, `/users/<default>/clients/<default>`,
    /// `/users/<default>`, `/clients/<client-id>`, `/clients/<default>`. Also returns the budget
    /// the request counts against (the matched entity's parts, filled with the request's
    /// names).
    #[must_use]
    pub fn resolve(&self, user: &str, client_id: &str, key: &str) -> Option<(f64, BudgetKey)> {
        if self.entities.is_empty() {
            return None;
        }
        // Entities sort user-less first, so the last one tells whether any has a user; without
        // one the six user levels are skipped (and their lookups' allocations).
        let any_user = self.entities.keys().next_back().is_some_and(|e| e.user.is_some());
        let c = Some(client_id.to_string());
        let user_levels = any_user.then(|| {
            let u = Some(user.to_string());
            [
                QuotaEntity::user_client(u.clone(), c.clone()),
                QuotaEntity::user_client(u.clone(), None),
                QuotaEntity::user(u),
                QuotaEntity::user_client(None, c.clone()),
                QuotaEntity::user_client(None, None),
                QuotaEntity::user(None),
            ]
        });
        let client_levels = [QuotaEntity::client(c), QuotaEntity::client(None)];
        user_levels.into_iter().flatten().chain(client_levels).find_map(|entity| {
            let value = *self.entities.get(&entity)?.get(key)?;
            let budget = (
                if entity.user.is_some() { user.to_string() } else { String::new() },
                if entity.client_id.is_some() { client_id.to_string() } else { String::new() },
            );
            Some((value, budget))
        })
    }

    /// Whether any entity sets `key` (the request path skips a quota nobody uses).
    #[must_use]
    pub fn uses(&self, key: &str) -> bool {
        self.entities.values().any(|v| v.contains_key(key))
    }

    /// The quota value alone (see [`Self::resolve`]).
    #[must_use]
    pub fn quota(&self, user: &str, client_id: &str, key: &str) -> Option<f64> {
        self.resolve(user, client_id, key).map(|(v, _)| v)
    }

    /// Sets (`Some`) or removes (`None`) one value; an entity left empty disappears.
    pub fn set(&mut self, entity: &QuotaEntity, key: &str, value: Option<f64>) {
        let values = self.entities.entry(entity.clone()).or_default();
        match value {
            Some(v) => values.insert(key.to_string(), v),
            None => values.remove(key),
        };
        if values.is_empty() {
            self.entities.remove(entity);
        }
    }
}

/// Why a quota value is refused (Kafka answers INVALID_REQUEST with these messages).
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum QuotaConfigError {
    #[error(
        "Unknown quota key {0} (supported: producer_byte_rate, consumer_byte_rate, \
         request_percentage, controller_mutation_rate)"
    )]
    UnknownKey(String),
    #[error("Configuration {0} must be a Long value")]
    NotALong(String),
    #[error("Quota {0} must be greater than 0, got {1}")]
    NotPositive(String, f64),
    #[error("Unsupported quota entity type {0} (supported: user, client-id)")]
    UnsupportedEntity(String),
    #[error("Duplicate {0} entity in a quota entity")]
    DuplicateEntity(String),
    #[error("Invalid empty {0} entity name")]
    EmptyName(String),
    #[error("Invalid empty client quota entity")]
    EmptyEntity,
}

/// Checks one value the way Kafka's `ClientQuotaControlManager` checks a byte rate: a
/// known key and a whole, positive number.
pub fn validate(key: &str, value: f64) -> Result<(), QuotaConfigError> {
    let whole = match key {
        PRODUCER_BYTE_RATE | CONSUMER_BYTE_RATE => true,
        // Doubles in Kafka.
        CONTROLLER_MUTATION_RATE | REQUEST_PERCENTAGE => false,
        _ => return Err(QuotaConfigError::UnknownKey(key.to_string())),
    };
    if !value.is_finite() || (whole && value.fract() != 0.0) {
        return Err(QuotaConfigError::NotALong(key.to_string()));
    }
    if value <= 0.0 {
        return Err(QuotaConfigError::NotPositive(key.to_string(), value));
    }
    Ok(())
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

    /// KIP-55's eight levels, each removed in turn from the most specific down.
    #[test]
    fn kip55_precedence_and_budgets() {
        let (a, c1) = (Some("alice".to_string()), Some("c1".to_string()));
        let levels = [
            QuotaEntity::user_client(a.clone(), c1.clone()),
            QuotaEntity::user_client(a.clone(), None),
            QuotaEntity::user(a.clone()),
            QuotaEntity::user_client(None, c1.clone()),
            QuotaEntity::user_client(None, None),
            QuotaEntity::user(None),
            QuotaEntity::client(c1.clone()),
            QuotaEntity::client(None),
        ];
        let budgets = [
            ("alice", "c1"),
            ("alice", "c1"),
            ("alice", ""),
            ("alice", "c1"),
            ("alice", "c1"),
            ("alice", ""),
            ("", "c1"),
            ("", "c1"),
        ];
        let mut c = ClientQuotaConfigs::default();
        for (i, e) in levels.iter().enumerate() {
            c.set(e, PRODUCER_BYTE_RATE, Some(100.0 + i as f64));
        }
        for (i, e) in levels.iter().enumerate() {
            let (v, budget) = c.resolve("alice", "c1", PRODUCER_BYTE_RATE).unwrap();
            assert_eq!(v, 100.0 + i as f64, "level {i}");
            assert_eq!((budget.0.as_str(), budget.1.as_str()), budgets[i], "level {i}");
            c.set(e, PRODUCER_BYTE_RATE, None);
        }
        assert_eq!(c.resolve("alice", "c1", PRODUCER_BYTE_RATE), None);
        // Another user falls through to the defaults, not to alice's values.
        let mut c = ClientQuotaConfigs::default();
        c.set(&levels[2], PRODUCER_BYTE_RATE, Some(1.0));
        c.set(&levels[7], PRODUCER_BYTE_RATE, Some(2.0));
        assert_eq!(c.quota("bob", "c1", PRODUCER_BYTE_RATE), Some(2.0));
        assert_eq!(c.quota("alice", "zz", PRODUCER_BYTE_RATE), Some(1.0));
    }

    #[test]
    fn entities_from_parts_follow_kafka_rules() {
        let e = QuotaEntity::from_parts([("client-id", Some("c")), ("user", None)]).unwrap();
        assert_eq!(e, QuotaEntity::user_client(None, Some("c".into())));
        assert_eq!(e.parts(), vec![(ENTITY_USER, None), (ENTITY_CLIENT_ID, Some("c".into()))]);
        assert!(QuotaEntity::from_parts([]).is_err());
        assert!(QuotaEntity::from_parts([("ip", Some("1.2.3.4"))]).is_err());
        assert!(QuotaEntity::from_parts([("user", Some("a")), ("user", Some("b"))]).is_err());
        assert!(QuotaEntity::from_parts([("user", Some(""))]).is_err());
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

    #[test]
    fn validation_follows_kafka() {
        assert!(validate(PRODUCER_BYTE_RATE, 1024.0).is_ok());
        assert!(matches!(validate("foo_rate", 5.0), Err(QuotaConfigError::UnknownKey(_))));
        assert!(matches!(validate(CONSUMER_BYTE_RATE, 1.5), Err(QuotaConfigError::NotALong(_))));
        assert!(matches!(
            validate(CONSUMER_BYTE_RATE, 0.0),
            Err(QuotaConfigError::NotPositive(..))
        ));
    }
}
