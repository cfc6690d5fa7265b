//! Client quotas: Kafka's byte-rate quotas per client id (`producer_byte_rate`,
//! `consumer_byte_rate`, with the `<default>` client-id entity), the windowed rate and throttle
//! math of Kafka's `ClientQuotaManager` ([`rate`]), and the per-shard state that applies them
//! ([`ShardQuotas`]).
//!
//! Pure logic, no glommio: the clock comes in as `now_ms`. The configs ([`ClientQuotaConfigs`])
//! are owned by the controller (recorded in the metadata log) and reach every shard in the
//! metadata image; each shard owns one [`ShardQuotas`] and touches it only from its own
//! thread, so the request path takes no lock.
//!
//! Sharing a client's budget between shards: a client's connections may land on several
//! shards, and each shard enforces `quota / shard_count` on the traffic it serves. A client
//! spread evenly over the shards gets its whole quota; a client whose connections all land on
//! one shard gets `1 / shard_count` of it. Rebalancing shares by measured use (so a
//! one-shard client gets its whole quota) is not built yet.
//!
//! Invariants: a shard keeps at most [`CLIENT_QUOTA_STATES_MAX`] client states (idle ones are
//! dropped first); a client without a quota costs one map lookup and no state.

pub mod rate;

use std::collections::{BTreeMap, HashMap};

pub use rate::{record_and_throttle_ms, QuotaWindow, SampledRate};

use crate::constants::CLIENT_QUOTA_STATES_MAX;

/// Kafka's quota key for produce bytes/s per broker.
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
/// Kafka's quota key for fetch bytes/s per broker.
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
/// Kafka's entity type of a client-id quota.
pub const ENTITY_CLIENT_ID: &str = "client-id";

/// Which byte rate a request counts against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// Quota values by client-id entity and key, as recorded in the metadata log.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientQuotaConfigs {
    pub clients: BTreeMap<ClientEntity, BTreeMap<String, f64>>,
}

impl ClientQuotaConfigs {
    /// The quota for `client_id` and `key` per Kafka's precedence for client-id quotas:
    /// `/clients/<client-id>`, then `/clients/<default>`.
    #[must_use]
    pub fn quota(&self, client_id: &str, key: &str) -> Option<f64> {
        let own = self.clients.get(&Some(client_id.to_string()));
        own.and_then(|q| q.get(key))
            .or_else(|| self.clients.get(&None).and_then(|q| q.get(key)))
            .copied()
    }

    /// Sets (`Some`) or removes (`None`) one value; an entity left empty disappears.
    pub fn set(&mut self, entity: &ClientEntity, key: &str, value: Option<f64>) {
        let values = self.clients.entry(entity.clone()).or_default();
        match value {
            Some(v) => values.insert(key.to_string(), v),
            None => values.remove(key),
        };
        if values.is_empty() {
            self.clients.remove(entity);
        }
    }
}

/// Why a quota value is refused (Kafka answers INVALID_REQUEST with these messages).
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum QuotaConfigError {
    #[error("Unknown quota key {0} (supported: producer_byte_rate, consumer_byte_rate)")]
    UnknownKey(String),
    #[error("Configuration {0} must be a Long value")]
    NotALong(String),
    #[error("Quota {0} must be greater than 0, got {1}")]
    NotPositive(String, f64),
}

/// Checks one value the way Kafka's `ClientQuotaControlManager` checks a byte rate: a
/// known key and a whole, positive number.
pub fn validate(key: &str, value: f64) -> Result<(), QuotaConfigError> {
    if key != PRODUCER_BYTE_RATE && key != CONSUMER_BYTE_RATE {
        return Err(QuotaConfigError::UnknownKey(key.to_string()));
    }
    if value.fract() != 0.0 || !value.is_finite() {
        return Err(QuotaConfigError::NotALong(key.to_string()));
    }
    if value <= 0.0 {
        return Err(QuotaConfigError::NotPositive(key.to_string(), value));
    }
    Ok(())
}

#[derive(Debug, Default)]
struct ClientState {
    produce: SampledRate,
    fetch: SampledRate,
    last_ms: u64,
}

/// One shard's quota state: the measured rates of the clients with a quota that this shard
/// serves. Lives on its shard, behind the shard context.
#[derive(Debug)]
pub struct ShardQuotas {
    window: QuotaWindow,
    shard_count: u32,
    clients: HashMap<String, ClientState>,
}

impl ShardQuotas {
    #[must_use]
    pub fn new(window: QuotaWindow, shard_count: u32) -> Self {
        Self { window, shard_count: shard_count.max(1), clients: HashMap::new() }
    }

    /// This shard's share of a client's quota, bytes/s.
    #[must_use]
    pub fn share(&self, quota: f64) -> f64 {
        quota / f64::from(self.shard_count)
    }

    /// Records `bytes` of `kind` for `client_id` at `now_ms` and returns the throttle time in
    /// ms (0 when within quota, or when the client has no quota).
    pub fn record(
        &mut self,
        configs: &ClientQuotaConfigs,
        kind: QuotaKind,
        client_id: &str,
        bytes: u64,
        now_ms: u64,
    ) -> u64 {
        let Some(quota) = configs.quota(client_id, kind.key()) else { return 0 };
        let bound = self.share(quota);
        let window = self.window;
        if !self.clients.contains_key(client_id) && !self.make_room(now_ms) {
            return 0;
        }
        let state = self.clients.entry(client_id.to_string()).or_default();
        state.last_ms = now_ms;
        let rate = match kind {
            QuotaKind::Produce => &mut state.produce,
            QuotaKind::Fetch => &mut state.fetch,
        };
        #[allow(clippy::cast_precision_loss)]
        record_and_throttle_ms(rate, window, bound, bytes as f64, now_ms)
    }

    /// Takes back `bytes` recorded at `now_ms` (Kafka's `unrecordQuotaSensor`, for a fetch
    /// answered empty because it was throttled).
    pub fn unrecord(
        &mut self,
        configs: &ClientQuotaConfigs,
        kind: QuotaKind,
        client_id: &str,
        bytes: u64,
        now_ms: u64,
    ) {
        if configs.quota(client_id, kind.key()).is_none() {
            return;
        }
        let window = self.window;
        if let Some(state) = self.clients.get_mut(client_id) {
            let rate = match kind {
                QuotaKind::Produce => &mut state.produce,
                QuotaKind::Fetch => &mut state.fetch,
            };
            #[allow(clippy::cast_precision_loss)]
            rate.record(window, -(bytes as f64), now_ms);
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
        client_id: &str,
    ) -> Option<u64> {
        let quota = configs.quota(client_id, kind.key())?;
        #[allow(clippy::cast_precision_loss)]
        let window_s = self.window.window_ms as f64 / 1000.0;
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Some((self.share(quota) * window_s).max(1.0) as u64)
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

    fn configs() -> ClientQuotaConfigs {
        let mut c = ClientQuotaConfigs::default();
        c.set(&None, PRODUCER_BYTE_RATE, Some(1000.0));
        c.set(&Some("app".into()), PRODUCER_BYTE_RATE, Some(500.0));
        c.set(&Some("app".into()), CONSUMER_BYTE_RATE, Some(700.0));
        c
    }

    #[test]
    fn client_then_default_precedence_per_key() {
        let c = configs();
        assert_eq!(c.quota("app", PRODUCER_BYTE_RATE), Some(500.0));
        assert_eq!(c.quota("other", PRODUCER_BYTE_RATE), Some(1000.0));
        assert_eq!(c.quota("other", CONSUMER_BYTE_RATE), None);
        let mut c = c;
        c.set(&None, PRODUCER_BYTE_RATE, None);
        assert!(!c.clients.contains_key(&None), "an empty entity disappears");
    }

    #[test]
    fn each_shard_enforces_its_share() {
        let c = configs();
        let mut one = ShardQuotas::new(QuotaWindow::KAFKA_DEFAULT, 1);
        let mut two = ShardQuotas::new(QuotaWindow::KAFKA_DEFAULT, 2);
        // 500 B/s over the 10 s minimum window: 5000 bytes pass on one shard, 2500 on two.
        assert_eq!(one.record(&c, QuotaKind::Produce, "app", 5000, 0), 0);
        assert_eq!(two.record(&c, QuotaKind::Produce, "app", 2500, 0), 0);
        assert_eq!(two.record(&c, QuotaKind::Produce, "app", 250, 0), 1000);
        // No quota, no state.
        assert_eq!(one.record(&c, QuotaKind::Fetch, "nobody", 1 << 30, 0), 0);
        assert_eq!(one.tracked_clients(), 1);
    }

    #[test]
    fn validation_follows_kafka() {
        assert!(validate(PRODUCER_BYTE_RATE, 1024.0).is_ok());
        assert!(matches!(
            validate("request_percentage", 5.0),
            Err(QuotaConfigError::UnknownKey(_))
        ));
        assert!(matches!(validate(CONSUMER_BYTE_RATE, 1.5), Err(QuotaConfigError::NotALong(_))));
        assert!(matches!(
            validate(CONSUMER_BYTE_RATE, 0.0),
            Err(QuotaConfigError::NotPositive(..))
        ));
    }
}
