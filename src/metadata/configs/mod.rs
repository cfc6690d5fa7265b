//! The topic-config registry: every topic config Kafka 4.x defines, with its type, default,
//! valid values, broker-level synonyms, documentation and whether Shardlog acts on it yet.
//!
//! Pure data and validation, no I/O; used on the controller shard (CreateTopics, config
//! changes) and on every shard (DescribeConfigs reads the registry through the image).
//! Invariants: a value stored in the metadata log has passed [`validate_topic_config`], so
//! [`TopicConfig::resolve`] never meets an unparsable override; names are Kafka's exactly.
//! Error messages follow Kafka's `ConfigException` wording so tools print familiar text.

mod broker;
mod broker_table;
mod defs;
mod topic_config;

pub use broker::{
    broker_config_def, broker_setting_names, update_mode, validate_dynamic_configs, BrokerDefaults,
    BrokerOnlyConfig, BrokerSource, DynamicConfigError, UpdateMode, BROKER_ONLY_CONFIGS,
};
pub use defs::TOPIC_CONFIGS;
pub use topic_config::{effective_value, CleanupPolicy, TimestampType, TopicConfig, ValueSource};

use std::collections::BTreeMap;

/// A config's type, with Kafka's DescribeConfigs `config_type` code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigType {
    Boolean,
    String,
    Int,
    Long,
    Double,
    List,
    Class,
    /// Kafka's PASSWORD: a secret (a JAAS config with passwords, an inline private key),
    /// never shown by DescribeConfigs.
    Password,
}

impl ConfigType {
    /// The code DescribeConfigs v3+ returns (`ConfigType` in DescribeConfigsResponse.json).
    #[must_use]
    pub fn describe_code(self) -> i8 {
        match self {
            ConfigType::Boolean => 1,
            ConfigType::String => 2,
            ConfigType::Int => 3,
            ConfigType::Long => 5,
            ConfigType::Double => 6,
            ConfigType::List => 7,
            ConfigType::Class => 8,
            ConfigType::Password => 9,
        }
    }

    fn kafka_name(self) -> &'static str {
        match self {
            ConfigType::Boolean => "BOOLEAN",
            ConfigType::String => "STRING",
            ConfigType::Int => "INT",
            ConfigType::Long => "LONG",
            ConfigType::Double => "DOUBLE",
            ConfigType::List => "LIST",
            ConfigType::Class => "CLASS",
            ConfigType::Password => "PASSWORD",
        }
    }
}

/// What a value must satisfy beyond parsing as its type.
#[derive(Clone, Copy, Debug)]
pub enum Validator {
    None,
    /// Integer at least this value (Kafka's `Range.atLeast`).
    AtLeast(i64),
    /// Integer within both bounds, inclusive (Kafka's `Range.between`).
    Between(i64, i64),
    /// Double within both bounds, inclusive.
    DoubleBetween(f64, f64),
    /// One of these strings, case-sensitive (Kafka's `ValidString.in`).
    OneOf(&'static [&'static str]),
    /// A non-empty comma-separated list of these strings (Kafka's `ValidList.in`).
    ListOf(&'static [&'static str]),
    /// `-1` or between 1 and 9 (gzip levels).
    GzipLevel,
    /// `*` or a list of `partition:broker` pairs (replication throttles).
    ThrottledReplicas,
    /// A known codec, of which Shardlog accepts only `producer` (no recompression yet).
    CompressionType,
}

/// How a broker-level synonym's value converts to the topic config's unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SynonymUnit {
    Same,
    HoursToMs,
    MinutesToMs,
}

/// A broker config that supplies a topic config's default (Kafka's `ConfigSynonym`).
#[derive(Clone, Copy, Debug)]
pub struct BrokerSynonym {
    pub name: &'static str,
    pub unit: SynonymUnit,
    /// The broker config's own Kafka default, in its own unit (`None` = no default, as
    /// `log.retention.ms`, which falls through to `log.retention.hours`).
    pub default: Option<&'static str>,
    /// The broker config's type (hours and minutes synonyms are INT where the topic is LONG).
    pub kind: ConfigType,
}

/// Whether Shardlog acts on a config yet (documented in `docs/topic-configs.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Resolved into [`TopicConfig`] and acted on by the storage engine or the server.
    Active,
    /// Accepted, validated, stored and described, but nothing acts on it yet.
    NotYet(&'static str),
}

/// One topic config as Kafka defines it.
#[derive(Clone, Copy, Debug)]
pub struct ConfigDef {
    pub name: &'static str,
    pub kind: ConfigType,
    /// Kafka's default as Kafka prints it; `None` is Kafka's `null`.
    pub default: Option<&'static str>,
    pub validator: Validator,
    /// Broker configs supplying the default, in priority order.
    pub synonyms: &'static [BrokerSynonym],
    pub doc: &'static str,
    pub effect: Effect,
    /// Kafka's internal configs (accepted when named, not listed by DescribeConfigs).
    pub internal: bool,
}

/// A rejected config, with Kafka-style wording for `error_message`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("Unknown topic config name: {0}")]
    UnknownTopicConfig(String),
    #[error("Unknown broker config name: {0}")]
    UnknownBrokerConfig(String),
    #[error("Null value not supported for topic configs: {0}")]
    NullValue(String),
    #[error("Invalid value {value} for configuration {name}: {reason}")]
    InvalidValue { name: String, value: String, reason: String },
    #[error("{0}")]
    Conflict(String),
}

/// The registry entry of a topic config, if Kafka defines one by that name.
#[must_use]
pub fn topic_config_def(name: &str) -> Option<&'static ConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// Validates one topic config value by name; returns the value normalized as stored.
pub fn validate_topic_config(name: &str, value: &str) -> Result<String, ConfigError> {
    let def = topic_config_def(name).ok_or_else(|| ConfigError::UnknownTopicConfig(name.into()))?;
    validate_value(name, def.kind, def.validator, value)
}

/// Validates a whole set of topic overrides, including cross-config rules Kafka checks
/// (`min.compaction.lag.ms` ≤ `max.compaction.lag.ms`, no tiered storage here).
pub fn validate_topic_configs(
    configs: &BTreeMap<String, String>,
    broker: &BrokerDefaults,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut normalized = BTreeMap::new();
    for (name, value) in configs {
        normalized.insert(name.clone(), validate_topic_config(name, value)?);
    }
    let resolved = TopicConfig::resolve(&normalized, broker);
    if resolved.min_compaction_lag_ms > resolved.max_compaction_lag_ms {
        return Err(ConfigError::Conflict(format!(
            "conflict topic config setting min.compaction.lag.ms ({}) > max.compaction.lag.ms ({})",
            resolved.min_compaction_lag_ms, resolved.max_compaction_lag_ms
        )));
    }
    if normalized.get("remote.storage.enable").map(String::as_str) == Some("true") {
        return Err(ConfigError::Conflict(
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured \
             with remote log storage."
                .into(),
        ));
    }
    Ok(normalized)
}

/// Parses `value` as `kind` and checks `validator`; returns the normalized text.
pub(crate) fn validate_value(
    name: &str,
    kind: ConfigType,
    validator: Validator,
    value: &str,
) -> Result<String, ConfigError> {
    let invalid = |reason: String| ConfigError::InvalidValue {
        name: name.into(),
        value: value.into(),
        reason,
    };
    let trimmed = value.trim();
    let not_a_number = || invalid(format!("Not a number of type {}", kind.kafka_name()));
    let normalized = match kind {
        ConfigType::Boolean => match trimmed.to_ascii_lowercase().as_str() {
            "true" => "true".to_string(),
            "false" => "false".to_string(),
            _ => return Err(invalid("Expected value to be either true or false".into())),
        },
        ConfigType::Int => {
            let n: i32 = trimmed.parse().map_err(|_| not_a_number())?;
            check_integer(i64::from(n), validator).map_err(invalid)?;
            n.to_string()
        }
        ConfigType::Long => {
            let n: i64 = trimmed.parse().map_err(|_| not_a_number())?;
            check_integer(n, validator).map_err(invalid)?;
            n.to_string()
        }
        ConfigType::Double => {
            let n: f64 = trimmed.parse().map_err(|_| not_a_number())?;
            if !n.is_finite() {
                return Err(not_a_number());
            }
            if let Validator::DoubleBetween(min, max) = validator {
                if n < min {
                    return Err(invalid(format!("Value must be at least {min}")));
                }
                if n > max {
                    return Err(invalid(format!("Value must be no more than {max}")));
                }
            }
            trimmed.to_string()
        }
        ConfigType::String | ConfigType::Class => {
            check_string(name, trimmed, validator).map_err(invalid)?;
            trimmed.to_string()
        }
        ConfigType::Password => value.to_string(),
        ConfigType::List => {
            let items: Vec<&str> =
                trimmed.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
            check_list(&items, validator).map_err(invalid)?;
            items.join(",")
        }
    };
    Ok(normalized)
}

fn check_integer(n: i64, validator: Validator) -> Result<(), String> {
    match validator {
        Validator::AtLeast(min) if n < min => Err(format!("Value must be at least {min}")),
        Validator::Between(min, _) if n < min => Err(format!("Value must be at least {min}")),
        Validator::Between(_, max) if n > max => Err(format!("Value must be no more than {max}")),
        Validator::GzipLevel if n != -1 && !(1..=9).contains(&n) => {
            Err("Value must be between 1 and 9, or -1 for the codec's default level".into())
        }
        _ => Ok(()),
    }
}

fn check_string(name: &str, s: &str, validator: Validator) -> Result<(), String> {
    match validator {
        Validator::OneOf(allowed) if !allowed.contains(&s) => {
            Err(format!("String must be one of: {}", allowed.join(", ")))
        }
        Validator::CompressionType => {
            const CODECS: [&str; 6] = ["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
            if !CODECS.contains(&s) {
                return Err(format!("String must be one of: {}", CODECS.join(", ")));
            }
            if s != "producer" {
                return Err(format!(
                    "Shardlog does not support {name}={s} yet: recompressing batches on \
                     append is not implemented; only 'producer' (keep the producer's codec) \
                     is accepted"
                ));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn check_list(items: &[&str], validator: Validator) -> Result<(), String> {
    match validator {
        Validator::ListOf(allowed) => {
            if items.is_empty() {
                return Err(format!("Empty list; must be one or more of: {}", allowed.join(", ")));
            }
            for item in items {
                if !allowed.contains(item) {
                    return Err(format!(
                        "Invalid value {item}; must be one or more of: {}",
                        allowed.join(", ")
                    ));
                }
            }
            Ok(())
        }
        Validator::ThrottledReplicas => {
            let pair_ok = |s: &&str| {
                let mut parts = s.split(':');
                matches!(
                    (parts.next(), parts.next(), parts.next()),
                    (Some(p), Some(b), None) if p.parse::<u32>().is_ok() && b.parse::<u32>().is_ok()
                )
            };
            if items == ["*"] || items.iter().all(pair_ok) {
                Ok(())
            } else {
                Err("must be the literal '*' or a list of replicas in the following format: \
                     [partitionId]:[brokerId],[partitionId]:[brokerId],..."
                    .into())
            }
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
