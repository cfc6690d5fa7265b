//! [`TopicConfig`]: the effective, typed configuration of one topic, resolved from the topic's
//! overrides, then the broker-level synonyms, then Kafka's defaults.
//!
//! Computed on the controller shard whenever a topic or its configs change and carried in the
//! metadata image, so every shard reads it without parsing. Invariant: resolution never fails,
//! because overrides and broker settings were validated before they were stored.

use std::collections::BTreeMap;

use super::broker::{convert_unit, BrokerDefaults, BrokerSource};
use super::{ConfigDef, TOPIC_CONFIGS};

/// Kafka's `message.timestamp.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

/// Kafka's `cleanup.policy` (a list of `delete` and/or `compact`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CleanupPolicy {
    pub delete: bool,
    pub compact: bool,
}

/// Effective values of a topic's configs, with Kafka's names in snake case and units in names.
#[derive(Clone, Debug, PartialEq)]
pub struct TopicConfig {
    /// `segment.bytes` (or `internal.segment.bytes` when set, as Kafka does for tests).
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub segment_jitter_ms: i64,
    pub segment_index_bytes: u32,
    pub index_interval_bytes: u32,
    pub max_message_bytes: u32,
    pub message_timestamp_type: TimestampType,
    pub message_timestamp_before_max_ms: i64,
    pub message_timestamp_after_max_ms: i64,
    pub cleanup_policy: CleanupPolicy,
    /// `retention.ms`; -1 = no time limit.
    pub retention_ms: i64,
    /// `retention.bytes`; negative = no size limit.
    pub retention_bytes: i64,
    /// `flush.messages`; `i64::MAX` = never forced by count.
    pub flush_messages: i64,
    /// `flush.ms`; `i64::MAX` = never forced by time.
    pub flush_ms: i64,
    pub file_delete_delay_ms: i64,
    pub delete_retention_ms: i64,
    pub min_compaction_lag_ms: i64,
    pub max_compaction_lag_ms: i64,
    pub min_cleanable_dirty_ratio: f64,
    pub min_insync_replicas: i32,
    pub unclean_leader_election_enable: bool,
    pub preallocate: bool,
}

impl Default for TopicConfig {
    fn default() -> Self {
        Self::resolve(&BTreeMap::new(), &BrokerDefaults::default())
    }
}

/// The effective value of one topic config and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueSource {
    /// Set on the topic.
    Topic,
    /// Set dynamically for this broker under this (synonym) name.
    DynamicBroker(&'static str),
    /// Set dynamically as the cluster default under this (synonym) name.
    DynamicDefault(&'static str),
    /// Set in the broker config under this (synonym) name.
    StaticBroker(&'static str),
    /// Kafka's default.
    Default,
}

/// Resolves one config's effective text value: topic override, broker synonym (dynamic for
/// this broker, dynamic cluster default, static), default.
#[must_use]
pub fn effective_value(
    def: &ConfigDef,
    overrides: &BTreeMap<String, String>,
    broker: &BrokerDefaults,
) -> (Option<String>, ValueSource) {
    if let Some(v) = overrides.get(def.name) {
        return (Some(v.clone()), ValueSource::Topic);
    }
    if let Some((v, name, layer)) = broker.broker_value_for(def.synonyms) {
        let source = match layer {
            BrokerSource::DynamicBroker => ValueSource::DynamicBroker(name),
            BrokerSource::DynamicDefault => ValueSource::DynamicDefault(name),
            BrokerSource::Static => ValueSource::StaticBroker(name),
        };
        return (Some(v), source);
    }
    // Kafka's default is the highest-priority synonym default, converted (e.g. log.roll.hours).
    let from_synonym = def.synonyms.iter().find_map(|s| s.default.map(|d| convert_unit(d, s.unit)));
    (from_synonym.or_else(|| def.default.map(str::to_string)), ValueSource::Default)
}

impl TopicConfig {
    /// Resolves every config from validated overrides and broker defaults.
    #[must_use]
    pub fn resolve(overrides: &BTreeMap<String, String>, broker: &BrokerDefaults) -> Self {
        let text = |name: &str| -> String {
            TOPIC_CONFIGS
                .iter()
                .find(|d| d.name == name)
                .and_then(|d| effective_value(d, overrides, broker).0)
                .unwrap_or_default()
        };
        let long = |name: &str, fallback: i64| text(name).parse::<i64>().unwrap_or(fallback);
        let uint = |name: &str, fallback: u32| {
            u32::try_from(long(name, i64::from(fallback))).unwrap_or(fallback)
        };
        let policy = text("cleanup.policy");
        let segment_bytes = match overrides.get("internal.segment.bytes") {
            Some(v) => v.parse::<u64>().unwrap_or(crate::constants::SEGMENT_BYTES_DEFAULT),
            None => long("segment.bytes", 1 << 30).unsigned_abs(),
        };
        Self {
            segment_bytes,
            segment_ms: long("segment.ms", crate::constants::SEGMENT_MS_DEFAULT),
            segment_jitter_ms: long("segment.jitter.ms", 0),
            segment_index_bytes: uint("segment.index.bytes", 10 * 1024 * 1024),
            index_interval_bytes: uint("index.interval.bytes", 4096),
            max_message_bytes: uint("max.message.bytes", 1_048_588),
            message_timestamp_type: if text("message.timestamp.type") == "LogAppendTime" {
                TimestampType::LogAppendTime
            } else {
                TimestampType::CreateTime
            },
            message_timestamp_before_max_ms: long("message.timestamp.before.max.ms", i64::MAX),
            message_timestamp_after_max_ms: long("message.timestamp.after.max.ms", i64::MAX),
            cleanup_policy: CleanupPolicy {
                delete: policy.split(',').any(|p| p == "delete"),
                compact: policy.split(',').any(|p| p == "compact"),
            },
            retention_ms: long("retention.ms", 604_800_000),
            retention_bytes: long("retention.bytes", -1),
            flush_messages: long("flush.messages", i64::MAX),
            flush_ms: long("flush.ms", i64::MAX),
            file_delete_delay_ms: long("file.delete.delay.ms", 60_000),
            delete_retention_ms: long("delete.retention.ms", 86_400_000),
            min_compaction_lag_ms: long("min.compaction.lag.ms", 0),
            max_compaction_lag_ms: long("max.compaction.lag.ms", i64::MAX),
            min_cleanable_dirty_ratio: text("min.cleanable.dirty.ratio").parse().unwrap_or(0.5),
            min_insync_replicas: i32::try_from(long("min.insync.replicas", 1)).unwrap_or(1),
            unclean_leader_election_enable: text("unclean.leader.election.enable") == "true",
            preallocate: text("preallocate") == "true",
        }
    }
}
