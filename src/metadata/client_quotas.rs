//! Client quota configs as the metadata image carries them: Kafka's quota keys, quota
//! entities (`user`, `client-id`, both, with their `<default>`s), the values set per entity
//! and KIP-55's precedence ([`ClientQuotaConfigs::resolve`]), and the check a value passes
//! before it is recorded ([`validate`]).
//!
//! Pure data, no clock and no per-client state: the controller records the values in the
//! metadata log and every shard reads them from its image; enforcement (rates, throttles,
//! shares between shards) is `quota`'s, which re-exports these names.
//!
//! Invariants: a [`ClientQuotaConfigs`] holds no entity without a value ([`set`] drops an
//! emptied one); the image's copy holds only values that pass [`validate`] (the controller
//! checks them before recording and again at replay).
//!
//! [`set`]: ClientQuotaConfigs::set

use std::collections::BTreeMap;

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

#[cfg(test)]
mod tests {
    use super::*;

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
