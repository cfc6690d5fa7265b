//! Broker-level configs: the broker defaults topic configs fall back to (`log.retention.hours`,
//! `message.max.bytes`, ...) and the broker-only settings the controller uses
//! (`num.partitions`, `default.replication.factor`, `auto.create.topics.enable`).
//!
//! Each setting has three layers above its default, in Kafka's precedence: the dynamic config
//! of this broker (IncrementalAlterConfigs on BROKER `<node id>`), the dynamic cluster default
//! (BROKER `""`), then the static value (file or flag). Which settings may change at runtime
//! is each entry's [`UpdateMode`], Kafka's "Dynamic Update Mode" column.
//!
//! Built from the server config at start, then rebuilt by the controller whenever a dynamic
//! broker config changes, and shared read-only by every shard through the metadata image.
//! Invariant: every value in every layer of [`BrokerDefaults`] was validated against its
//! broker config's type, so resolution never meets an unparsable value.

use std::collections::BTreeMap;

pub use super::broker_table::BROKER_ONLY_CONFIGS;
use super::{
    validate_value, BrokerSynonym, ConfigError, ConfigType, SynonymUnit, Validator, TOPIC_CONFIGS,
};

/// A broker config that is not a synonym of a topic config.
#[derive(Clone, Copy, Debug)]
pub struct BrokerOnlyConfig {
    pub name: &'static str,
    pub kind: ConfigType,
    /// Shardlog's default as DescribeConfigs prints it; Kafka's unless the doc says why
    /// not. Each matches its typed constant in `constants.rs` (checked by a test).
    pub default: Option<&'static str>,
    pub validator: Validator,
    pub doc: &'static str,
    /// Whether the setting may change at runtime (Kafka's update mode). The broker synonyms
    /// of topic configs are not listed here: see [`update_mode`].
    pub update: UpdateMode,
}

/// Kafka's "Dynamic Update Mode" of a broker setting (`DynamicBrokerConfig`), as Shardlog
/// serves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateMode {
    /// Set in the file or by a flag only; a restart applies a change.
    ReadOnly,
    /// Dynamic for one broker at a time only (Kafka's per-broker mode).
    PerBroker,
    /// Dynamic for one broker or as the cluster default, and applied without a restart.
    ClusterWide,
    /// Kafka changes it at runtime, Shardlog only at start, for this reason.
    StartOnly(&'static str),
}

impl UpdateMode {
    /// Whether IncrementalAlterConfigs on a BROKER resource may change the setting.
    #[must_use]
    pub fn is_dynamic(self) -> bool {
        matches!(self, UpdateMode::PerBroker | UpdateMode::ClusterWide)
    }
}

/// Every broker setting name Shardlog knows (broker-only configs and the broker synonyms of
/// topic configs), sorted and deduplicated: the names accepted in the TOML file, as `serve`
/// flags and listed by DescribeConfigs.
#[must_use]
pub fn broker_setting_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = BROKER_ONLY_CONFIGS
        .iter()
        .map(|c| c.name)
        .chain(TOPIC_CONFIGS.iter().flat_map(|d| d.synonyms.iter().map(|s| s.name)))
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// The update mode of a broker setting by name (`None`: not a setting Shardlog knows). The
/// broker synonyms of topic configs follow Kafka's `DynamicLogConfig`: the first synonym of
/// each topic config (`log.retention.ms`, `log.roll.ms`, `log.flush.interval.ms`, ...) is
/// cluster-wide, the coarser ones (`log.retention.hours`, `log.roll.hours`,
/// `log.flush.scheduler.interval.ms`) are read-only.
#[must_use]
pub fn update_mode(name: &str) -> Option<UpdateMode> {
    if let Some(base) = listener_base(name) {
        return update_mode(base);
    }
    if let Some(c) = BROKER_ONLY_CONFIGS.iter().find(|c| c.name == name) {
        return Some(c.update);
    }
    TOPIC_CONFIGS.iter().find_map(|def| {
        let position = def.synonyms.iter().position(|s| s.name == name)?;
        Some(if position == 0 { UpdateMode::ClusterWide } else { UpdateMode::ReadOnly })
    })
}

/// Where a broker setting's value comes from, highest precedence first (Kafka's
/// `ConfigSource` order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum BrokerSource {
    /// Set dynamically for this broker (DYNAMIC_BROKER_CONFIG).
    DynamicBroker,
    /// Set dynamically as the cluster default (DYNAMIC_DEFAULT_BROKER_CONFIG).
    DynamicDefault,
    /// Set in the file or by a flag (STATIC_BROKER_CONFIG).
    Static,
}

impl BrokerSource {
    /// Every layer, highest precedence first.
    pub const ALL: [BrokerSource; 3] =
        [BrokerSource::DynamicBroker, BrokerSource::DynamicDefault, BrokerSource::Static];
}

/// Broker-level defaults: the static settings from the server config and the dynamic ones
/// from the metadata log (Kafka broker config names).
#[derive(Clone, Debug, PartialEq)]
pub struct BrokerDefaults {
    /// `num.partitions`: partitions of a topic created with -1 or auto-created.
    pub num_partitions: i32,
    /// `default.replication.factor`.
    pub default_replication_factor: i16,
    /// `auto.create.topics.enable`: Metadata requests create unknown topics.
    pub auto_create_topics_enable: bool,
    /// `delete.topic.enable`: DeleteTopics is refused when false (as Kafka).
    pub delete_topic_enable: bool,
    /// Every broker config set explicitly, validated and normalized, by Kafka name
    /// (e.g. `log.retention.hours` → `24`); the source of STATIC_BROKER_CONFIG values.
    pub settings: BTreeMap<String, String>,
    /// Dynamic configs of this broker (BROKER resource `<node id>`), validated.
    pub dynamic_broker: BTreeMap<String, String>,
    /// Dynamic cluster-wide defaults (BROKER resource `""`), validated.
    pub dynamic_default: BTreeMap<String, String>,
}

impl Default for BrokerDefaults {
    fn default() -> Self {
        Self {
            num_partitions: 1,
            default_replication_factor: 1,
            auto_create_topics_enable: true,
            delete_topic_enable: true,
            settings: BTreeMap::new(),
            dynamic_broker: BTreeMap::new(),
            dynamic_default: BTreeMap::new(),
        }
    }
}

/// The type, validator and default of a broker config Shardlog knows, by name.
#[must_use]
pub fn broker_config_def(
    name: &str,
) -> Option<(ConfigType, Validator, Option<&'static str>, &'static str)> {
    if let Some(base) = listener_base(name) {
        return broker_config_def(base);
    }
    if let Some(c) = BROKER_ONLY_CONFIGS.iter().find(|c| c.name == name) {
        return Some((c.kind, c.validator, c.default, c.doc));
    }
    TOPIC_CONFIGS.iter().find_map(|def| {
        def.synonyms.iter().find(|s| s.name == name).map(|s| {
            // Hours and minutes synonyms have their own ranges in Kafka; the topic's
            // millisecond range does not apply to them.
            let validator =
                if s.unit == SynonymUnit::Same { def.validator } else { Validator::None };
            (s.kind, validator, s.default, def.doc)
        })
    })
}

/// Listener settings Kafka takes with the prefix `listener.name.<listener>.`.
const LISTENER_SETTINGS: &[&str] = &[
    "connections.max.reauth.ms",
    "sasl.enabled.mechanisms",
    "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.server.callback.handler.class",
    "ssl.cipher.suites",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm",
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.principal.mapping.rules",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
];

/// Settings Kafka takes per listener and SASL mechanism,
/// `listener.name.<listener>.<mechanism lower-case>.<setting>`.
const MECHANISM_SETTINGS: &[&str] = &[
    "connections.max.reauth.ms",
    "sasl.jaas.config",
    "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.server.callback.handler.class",
];

/// The SASL mechanisms Shardlog serves, as setting prefixes.
const SERVED_MECHANISMS: &[&str] = &["plain", "scram-sha-256", "scram-sha-512", "oauthbearer"];

/// The setting a per-listener name stands for: `listener.name.<l>.ssl.keystore.location` is
/// `ssl.keystore.location`, `listener.name.<l>.<mechanism>.sasl.jaas.config` is
/// `sasl.jaas.config` (a mechanism Shardlog serves). `None` for any other name.
#[must_use]
pub fn listener_base(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("listener.name.")?;
    let (listener, setting) = rest.split_once('.')?;
    if listener.is_empty() {
        return None;
    }
    if let Some((mechanism, base)) = setting.split_once('.') {
        if SERVED_MECHANISMS.contains(&mechanism) {
            return MECHANISM_SETTINGS.contains(&base).then_some(base);
        }
    }
    LISTENER_SETTINGS.contains(&setting).then_some(setting)
}

/// Why a dynamic broker config change is refused, with Kafka's wording; the admin handlers
/// map it to Kafka's codes (`DynamicBrokerConfig.validate` answers INVALID_REQUEST for both
/// a read-only name and a bad value: KAFKA-13609).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DynamicConfigError {
    /// A name no broker config has (INVALID_CONFIG).
    #[error("Unknown broker config name: {0}")]
    Unknown(String),
    /// Read-only names (INVALID_REQUEST), listed as Kafka's Scala `Set(...)` prints them.
    #[error("Cannot update these configs dynamically: Set({})", .0.join(", "))]
    ReadOnly(Vec<String>),
    /// Per-broker names given for the cluster default (INVALID_REQUEST).
    #[error(
        "Cannot update these configs at default cluster level, broker id must be specified: \
         Set({})", .0.join(", ")
    )]
    PerBrokerOnly(Vec<String>),
    /// A value its type or range refuses (INVALID_REQUEST).
    #[error(transparent)]
    Invalid(ConfigError),
}

/// Validates a whole set of dynamic configs for one BROKER resource (`per_broker`: a node id,
/// else the cluster default) as Kafka does: unknown names first, then read-only names, then
/// per-broker names at the default level, then each value. Returns them normalized.
pub fn validate_dynamic_configs(
    configs: &BTreeMap<String, String>,
    per_broker: bool,
) -> Result<BTreeMap<String, String>, DynamicConfigError> {
    if let Some(name) = configs.keys().find(|n| update_mode(n).is_none()) {
        return Err(DynamicConfigError::Unknown(name.clone()));
    }
    let mode = |n: &String| update_mode(n).unwrap_or(UpdateMode::ReadOnly);
    let read_only: Vec<String> =
        configs.keys().filter(|n| !mode(n).is_dynamic()).cloned().collect();
    if !read_only.is_empty() {
        return Err(DynamicConfigError::ReadOnly(read_only));
    }
    let per_broker_only: Vec<String> =
        configs.keys().filter(|n| mode(n) == UpdateMode::PerBroker).cloned().collect();
    if !per_broker && !per_broker_only.is_empty() {
        return Err(DynamicConfigError::PerBrokerOnly(per_broker_only));
    }
    let mut out = BTreeMap::new();
    for (name, value) in configs {
        let (kind, validator, _, _) =
            broker_config_def(name).ok_or_else(|| DynamicConfigError::Unknown(name.clone()))?;
        let value =
            validate_value(name, kind, validator, value).map_err(DynamicConfigError::Invalid)?;
        out.insert(name.clone(), value);
    }
    Ok(out)
}

impl BrokerDefaults {
    /// Builds broker defaults from explicitly set broker configs (Kafka names). Unknown names
    /// and bad values are rejected with the same wording as topic configs.
    pub fn from_settings<I, K, V>(settings: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: AsRef<str>,
    {
        let mut out = Self::default();
        for (name, value) in settings {
            let name = name.into();
            let (kind, validator, _, _) = broker_config_def(&name)
                .ok_or_else(|| ConfigError::UnknownBrokerConfig(name.clone()))?;
            let value = validate_value(&name, kind, validator, value.as_ref())?;
            out.settings.insert(name, value);
        }
        let get = |n: &str| out.settings.get(n).map(String::as_str);
        if let Some(v) = get("num.partitions") {
            out.num_partitions = parse_checked(v)?;
        }
        if let Some(v) = get("default.replication.factor") {
            let rf: i32 = parse_checked(v)?;
            out.default_replication_factor =
                i16::try_from(rf).map_err(|_| ConfigError::InvalidValue {
                    name: "default.replication.factor".into(),
                    value: v.into(),
                    reason: "Value must be no more than 32767".into(),
                })?;
        }
        if let Some(v) = get("auto.create.topics.enable") {
            out.auto_create_topics_enable = v == "true";
        }
        if let Some(v) = get("delete.topic.enable") {
            out.delete_topic_enable = v == "true";
        }
        Ok(out)
    }

    /// The same static settings with these dynamic layers (the controller's view after a
    /// dynamic broker config change or replay).
    #[must_use]
    pub fn with_dynamic(
        &self,
        dynamic_broker: BTreeMap<String, String>,
        dynamic_default: BTreeMap<String, String>,
    ) -> Self {
        Self { dynamic_broker, dynamic_default, ..self.clone() }
    }

    /// The map of one layer.
    #[must_use]
    pub fn layer(&self, source: BrokerSource) -> &BTreeMap<String, String> {
        match source {
            BrokerSource::DynamicBroker => &self.dynamic_broker,
            BrokerSource::DynamicDefault => &self.dynamic_default,
            BrokerSource::Static => &self.settings,
        }
    }

    /// The value of a broker config as this broker uses it, and whether it was set
    /// statically (file or flag). The typed fields win over `settings`, so a server that
    /// fills the fields directly still describes what it runs with.
    #[must_use]
    pub fn value_of(&self, name: &str) -> Option<(String, bool)> {
        let typed = match name {
            "num.partitions" => Some((self.num_partitions.to_string(), self.num_partitions != 1)),
            "default.replication.factor" => Some((
                self.default_replication_factor.to_string(),
                self.default_replication_factor != 1,
            )),
            "auto.create.topics.enable" => {
                Some((self.auto_create_topics_enable.to_string(), !self.auto_create_topics_enable))
            }
            "delete.topic.enable" => {
                Some((self.delete_topic_enable.to_string(), !self.delete_topic_enable))
            }
            _ => None,
        };
        match typed {
            Some((v, differs)) => Some((v, differs || self.settings.contains_key(name))),
            None => self.settings.get(name).map(|v| (v.clone(), true)),
        }
    }

    /// Every explicit value of one broker config, highest precedence first: (value, layer).
    #[must_use]
    pub fn layers_of(&self, name: &str) -> Vec<(String, BrokerSource)> {
        BrokerSource::ALL
            .into_iter()
            .filter_map(|source| match source {
                BrokerSource::Static => {
                    self.value_of(name).filter(|(_, set)| *set).map(|(v, _)| (v, source))
                }
                _ => self.layer(source).get(name).map(|v| (v.clone(), source)),
            })
            .collect()
    }

    /// The explicit value of one broker config in force (dynamic per-broker > dynamic
    /// default > static), with its layer; `None`: the default applies.
    #[must_use]
    pub fn explicit(&self, name: &str) -> Option<(String, BrokerSource)> {
        self.layers_of(name).into_iter().next()
    }

    /// The value in force of a broker config, or its registry default (text).
    #[must_use]
    pub fn current(&self, name: &str) -> Option<String> {
        self.explicit(name)
            .map(|(v, _)| v)
            .or_else(|| broker_config_def(name).and_then(|(_, _, d, _)| d).map(str::to_string))
    }

    /// A LONG/INT setting in force (validated, so it parses; 0 for an unknown name).
    #[must_use]
    pub fn long(&self, name: &str) -> i64 {
        self.current(name).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// A DOUBLE setting in force (`f64::MAX`, Kafka's "unlimited", for an unknown name).
    #[must_use]
    pub fn double(&self, name: &str) -> f64 {
        self.current(name).and_then(|v| v.parse().ok()).unwrap_or(f64::MAX)
    }

    /// The broker-level value for a topic config, converted to the topic's unit, with the
    /// synonym and layer it came from. As Kafka's merged `KafkaConfig`: each synonym takes
    /// its highest layer, then the first synonym set anywhere wins (so a static
    /// `log.retention.ms` beats a dynamic `log.retention.hours`).
    #[must_use]
    pub fn broker_value_for(
        &self,
        synonyms: &[BrokerSynonym],
    ) -> Option<(String, &'static str, BrokerSource)> {
        synonyms.iter().find_map(|s| {
            BrokerSource::ALL.into_iter().find_map(|source| {
                self.layer(source).get(s.name).map(|v| (convert_unit(v, s.unit), s.name, source))
            })
        })
    }
}

fn parse_checked(v: &str) -> Result<i32, ConfigError> {
    // Values were validated as INT already; a failure here is a registry bug, still reported.
    v.parse().map_err(|_| ConfigError::Conflict(format!("broker config value {v} is not an INT")))
}

/// Converts a broker synonym's value to the topic config's unit (hours/minutes to ms).
pub(crate) fn convert_unit(value: &str, unit: SynonymUnit) -> String {
    let factor: i64 = match unit {
        SynonymUnit::Same => return value.to_string(),
        SynonymUnit::HoursToMs => 3_600_000,
        SynonymUnit::MinutesToMs => 60_000,
    };
    match value.parse::<i64>() {
        // Kafka keeps negative retention (-1 = unlimited) as is when converting units.
        Ok(n) if n < 0 => "-1".to_string(),
        Ok(n) => n.saturating_mul(factor).to_string(),
        Err(_) => value.to_string(),
    }
}
