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
    pub default: Option<&'static str>,
    pub validator: Validator,
    pub doc: &'static str,
}

/// Broker-only configs Shardlog knows, sorted by name.
pub static BROKER_ONLY_CONFIGS: &[BrokerOnlyConfig] = &[
    BrokerOnlyConfig {
        name: "auto.create.topics.enable",
        kind: ConfigType::Boolean,
        default: Some("true"),
        validator: Validator::None,
        doc: "Enable auto creation of topic on the server.",
    },
    BrokerOnlyConfig {
        name: "default.replication.factor",
        kind: ConfigType::Int,
        default: Some("1"),
        validator: Validator::AtLeast(1),
        doc: "The replication factor for automatically created topics, and for topics created \
              with -1 as the replication factor",
    },
    BrokerOnlyConfig {
        name: "delete.topic.enable",
        kind: ConfigType::Boolean,
        default: Some("true"),
        validator: Validator::None,
        doc: "When set to false, deleting topics through the admin API has no effect.",
    },
    BrokerOnlyConfig {
        name: "log.retention.check.interval.ms",
        kind: ConfigType::Long,
        default: Some("300000"),
        validator: Validator::AtLeast(1),
        doc: "The frequency in milliseconds that the log cleaner checks whether any log is \
              eligible for deletion",
    },
    BrokerOnlyConfig {
        name: "num.partitions",
        kind: ConfigType::Int,
        default: Some("1"),
        validator: Validator::AtLeast(1),
        doc: "The default number of log partitions per topic",
    },
];

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
