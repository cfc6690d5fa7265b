//! Broker-level configs: the broker defaults topic configs fall back to (`log.retention.hours`,
//! `message.max.bytes`, ...) and the broker-only settings the controller uses
//! (`num.partitions`, `default.replication.factor`, `auto.create.topics.enable`).
//!
//! Built once from the server config at start and shared read-only by every shard through the
//! metadata image. Invariant: every value in [`BrokerDefaults::settings`] was validated against
//! its broker config's type, so resolution never meets an unparsable value.

use std::collections::BTreeMap;

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
    /// Whether Kafka lets this setting change at runtime (IncrementalAlterConfigs on a
    /// BROKER resource). Shardlog serves every broker setting read-only for now; this marks
    /// which ones a dynamic-config implementation should open up. (The broker synonyms of
    /// topic configs, `log.*` and the like, are all dynamic in Kafka.)
    pub kafka_dynamic: bool,
}

const fn only(
    name: &'static str,
    kind: ConfigType,
    default: Option<&'static str>,
    validator: Validator,
    kafka_dynamic: bool,
    doc: &'static str,
) -> BrokerOnlyConfig {
    BrokerOnlyConfig { name, kind, default, validator, doc, kafka_dynamic }
}

use ConfigType::{Boolean as B, Double as D, Int as I, Long as L, String as S};
use Validator::{AtLeast, None as Any};

/// Broker-only configs Shardlog knows, sorted by name (a test checks the order).
pub static BROKER_ONLY_CONFIGS: &[BrokerOnlyConfig] = &[
    only(
        "advertised.listeners",
        S,
        None,
        Any,
        true,
        "Listeners to publish to clients, as PLAINTEXT://host:port (alias of \
         --advertised-listener); null means the listeners value.",
    ),
    only(
        "auto.create.topics.enable",
        B,
        Some("true"),
        Any,
        false,
        "Enable auto creation of topic on the server.",
    ),
    only(
        "connections.max.idle.ms",
        L,
        Some("600000"),
        Any,
        false,
        "Idle connections timeout: the server closes a connection that has had no request \
         and no response for this many milliseconds. Negative disables the timeout.",
    ),
    only(
        "default.replication.factor",
        I,
        Some("1"),
        AtLeast(1),
        false,
        "The replication factor for automatically created topics, and for topics created \
         with -1 as the replication factor",
    ),
    only(
        "delete.topic.enable",
        B,
        Some("true"),
        Any,
        false,
        "When set to false, deleting topics through the admin API has no effect.",
    ),
    only(
        "group.initial.rebalance.delay.ms",
        I,
        Some("3000"),
        AtLeast(0),
        false,
        "The amount of time the group coordinator will wait for more consumers to join a new \
         group before performing the first rebalance. A longer delay means potentially fewer \
         rebalances, but increases the time until processing begins.",
    ),
    only(
        "group.max.session.timeout.ms",
        I,
        Some("1800000"),
        AtLeast(1),
        false,
        "The maximum allowed session timeout for registered consumers. Longer timeouts give \
         consumers more time to process messages in between heartbeats at the cost of a longer \
         time to detect failures.",
    ),
    only(
        "group.max.size",
        I,
        Some("10000"),
        AtLeast(1),
        false,
        "The maximum number of consumers that a single consumer group can accommodate. \
         Shardlog's default is 10000 (Kafka's is unbounded) so one group cannot take \
         unbounded coordinator memory.",
    ),
    only(
        "group.min.session.timeout.ms",
        I,
        Some("6000"),
        AtLeast(1),
        false,
        "The minimum allowed session timeout for registered consumers. Shorter timeouts result \
         in quicker failure detection at the cost of more frequent consumer heartbeating, \
         which can overwhelm broker resources.",
    ),
    only(
        "listeners",
        S,
        Some("PLAINTEXT://127.0.0.1:9092"),
        Any,
        false,
        "The address the socket server listens on, as PLAINTEXT://host:port (alias of \
         --listen). Only one PLAINTEXT listener is served.",
    ),
    only(
        "log.cleaner.backoff.ms",
        L,
        Some("15000"),
        AtLeast(1),
        true,
        "The amount of time to sleep when there are no logs to clean",
    ),
    only(
        "log.cleaner.dedupe.buffer.size",
        L,
        Some("134217728"),
        AtLeast(1024 * 1024),
        true,
        "The total memory used for log deduplication across all cleaner threads (here: split \
         evenly across shards)",
    ),
    only(
        "log.cleaner.io.max.bytes.per.second",
        D,
        Some("1.7976931348623157E308"),
        Validator::DoubleBetween(f64::MIN_POSITIVE, f64::MAX),
        true,
        "The log cleaner will be throttled so that the sum of its read and write i/o will be \
         less than this value on average (here: for the whole broker, split across shards)",
    ),
    only(
        "log.retention.check.interval.ms",
        L,
        Some("300000"),
        AtLeast(1),
        false,
        "The frequency in milliseconds that the log cleaner checks whether any log is \
         eligible for deletion",
    ),
    only(
        "num.partitions",
        I,
        Some("1"),
        AtLeast(1),
        false,
        "The default number of log partitions per topic",
    ),
    only(
        "offset.metadata.max.bytes",
        I,
        Some("4096"),
        AtLeast(0),
        false,
        "The maximum size for a metadata entry associated with an offset commit.",
    ),
    only(
        "offsets.retention.check.interval.ms",
        L,
        Some("600000"),
        AtLeast(1),
        false,
        "Frequency at which to check for stale offsets",
    ),
    only(
        "offsets.retention.minutes",
        I,
        Some("10080"),
        AtLeast(1),
        false,
        "For subscribed consumers, committed offset of a specific partition will be expired \
         and discarded after this period of time once the group is empty; for standalone \
         consumers (manual assignment) after this period from the last commit.",
    ),
    only(
        "offsets.topic.num.partitions",
        I,
        Some("50"),
        AtLeast(1),
        false,
        "The number of partitions for the offset commit topic (should not change after \
         deployment: it only applies when __consumer_offsets is created).",
    ),
    only(
        "offsets.topic.segment.bytes",
        I,
        Some("104857600"),
        AtLeast(1024 * 1024),
        false,
        "The offsets topic segment bytes should be kept relatively small in order to \
         facilitate faster log compaction and cache loads.",
    ),
    only(
        "socket.request.max.bytes",
        I,
        Some("104857600"),
        AtLeast(64),
        false,
        "The maximum number of bytes in a socket request",
    ),
];

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

/// Broker-level defaults, from the server config (Kafka broker config names).
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
}

impl Default for BrokerDefaults {
    fn default() -> Self {
        Self {
            num_partitions: 1,
            default_replication_factor: 1,
            auto_create_topics_enable: true,
            delete_topic_enable: true,
            settings: BTreeMap::new(),
        }
    }
}

/// The type, validator and default of a broker config Shardlog knows, by name.
#[must_use]
pub fn broker_config_def(
    name: &str,
) -> Option<(ConfigType, Validator, Option<&'static str>, &'static str)> {
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

    /// The value of a broker config as this broker uses it, and whether it was set
    /// explicitly. The typed fields win over `settings`, so a server that fills the fields
    /// directly still describes what it runs with.
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

    /// The broker-level value for a topic config, converted to the topic's unit, with the
    /// synonym it came from: the first synonym set explicitly, in Kafka's priority order.
    #[must_use]
    pub fn static_value_for(&self, synonyms: &[BrokerSynonym]) -> Option<(String, &'static str)> {
        synonyms
            .iter()
            .find_map(|s| self.settings.get(s.name).map(|v| (convert_unit(v, s.unit), s.name)))
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
