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

const fn only(
    name: &'static str,
    kind: ConfigType,
    default: Option<&'static str>,
    validator: Validator,
    update: UpdateMode,
    doc: &'static str,
) -> BrokerOnlyConfig {
    BrokerOnlyConfig { name, kind, default, validator, doc, update }
}

use ConfigType::{Boolean as B, Double as D, Int as I, Long as L, String as S};
use UpdateMode::{ClusterWide as DYNAMIC, ReadOnly as READ_ONLY};
use Validator::{AtLeast, Between, None as Any};

/// Kafka's default of the replication throttles, `Long.MAX_VALUE` bytes/s (no throttle).
const THROTTLE_DEFAULT: &str = "9223372036854775807";

/// Broker-only configs Shardlog knows, sorted by name (a test checks the order).
pub static BROKER_ONLY_CONFIGS: &[BrokerOnlyConfig] = &[
    only(
        "advertised.listeners",
        S,
        None,
        Any,
        UpdateMode::StartOnly("the advertised listener is read at start (Kafka: per-broker)"),
        "Listeners to publish to clients, as PLAINTEXT://host:port (alias of \
         --advertised-listener); null means the listeners value.",
    ),
    only(
        "auto.create.topics.enable",
        B,
        Some("true"),
        Any,
        READ_ONLY,
        "Enable auto creation of topic on the server.",
    ),
    only(
        "auto.leader.rebalance.enable",
        B,
        Some("true"),
        Any,
        READ_ONLY,
        "Enables auto leader balancing: the active controller checks the leadership balance \
         every leader.imbalance.check.interval.seconds and runs a preferred-leader election \
         for every partition not led by its preferred replica (first in the assignment) while \
         that replica is live and in the ISR (Kafka 4.x: no percentage threshold).",
    ),
    only(
        "broker.heartbeat.interval.ms",
        I,
        Some("2000"),
        AtLeast(1),
        READ_ONLY,
        "The length of time in milliseconds between broker heartbeats.",
    ),
    only(
        "broker.session.timeout.ms",
        I,
        Some("9000"),
        AtLeast(1),
        READ_ONLY,
        "The length of time in milliseconds that a broker lease lasts if no heartbeats are \
         made: the active controller then fences the broker.",
    ),
    only(
        "connections.max.idle.ms",
        L,
        Some("600000"),
        Any,
        READ_ONLY,
        "Idle connections timeout: the server closes a connection that has had no request \
         and no response for this many milliseconds. Negative disables the timeout.",
    ),
    only(
        "controlled.shutdown.enable",
        B,
        Some("true"),
        Any,
        READ_ONLY,
        "Enable controlled shutdown of the broker: on SIGTERM a clustered broker asks the \
         active controller (BrokerHeartbeat want_shut_down) to move its leaderships to other \
         ISR members and take it out of the ISRs, and keeps serving until it is told to go.",
    ),
    only(
        "controlled.shutdown.timeout.ms",
        I,
        Some("30000"),
        Between(0, 40_000),
        READ_ONLY,
        "Shardlog's own: how long a clustered broker's controlled shutdown may take before the \
         broker logs it and stops anyway (then its leaderships move when its session expires). \
         At most 40000, so it fits inside the 60 s hard shutdown limit with the 10 s drain.",
    ),
    only(
        "controller.quorum.election.timeout.ms",
        I,
        Some("1000"),
        AtLeast(100),
        READ_ONLY,
        "Maximum time in milliseconds without fetching from the leader before triggering a new \
         election. Shardlog rounds it to whole quorum ticks (controller.quorum.tick.ms).",
    ),
    only(
        "controller.quorum.voters",
        S,
        None,
        Any,
        READ_ONLY,
        "Map of id/endpoint information for the set of voters in a comma-separated list of \
         {id}@{host}:{port} entries, e.g. 1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293. \
         The endpoints are the voters' --controller-listen addresses, which speak Shardlog's \
         Raft framing, not the Kafka protocol. Unset: a single node that is its own quorum.",
    ),
    only(
        "default.replication.factor",
        I,
        Some("1"),
        AtLeast(1),
        READ_ONLY,
        "The replication factor for automatically created topics, and for topics created \
         with -1 as the replication factor",
    ),
    only(
        "delete.topic.enable",
        B,
        Some("true"),
        Any,
        READ_ONLY,
        "When set to false, deleting topics through the admin API has no effect.",
    ),
    only(
        "follower.replication.throttled.rate",
        L,
        Some(THROTTLE_DEFAULT),
        AtLeast(0),
        DYNAMIC,
        "A long representing the upper bound (bytes/sec) on replication traffic for followers \
         enumerated in the property follower.replication.throttled.replicas (for each topic). \
         It is suggested that the limit be kept above 1MB/s for accurate behaviour. Honoured by \
         each shard's replica traffic (`replication::throttle`).",
    ),
    only(
        "group.initial.rebalance.delay.ms",
        I,
        Some("3000"),
        AtLeast(0),
        READ_ONLY,
        "The amount of time the group coordinator will wait for more consumers to join a new \
         group before performing the first rebalance. A longer delay means potentially fewer \
         rebalances, but increases the time until processing begins.",
    ),
    only(
        "group.max.session.timeout.ms",
        I,
        Some("1800000"),
        AtLeast(1),
        READ_ONLY,
        "The maximum allowed session timeout for registered consumers. Longer timeouts give \
         consumers more time to process messages in between heartbeats at the cost of a longer \
         time to detect failures.",
    ),
    only(
        "group.max.size",
        I,
        Some("10000"),
        AtLeast(1),
        READ_ONLY,
        "The maximum number of consumers that a single consumer group can accommodate. \
         Shardlog's default is 10000 (Kafka's is unbounded) so one group cannot take \
         unbounded coordinator memory.",
    ),
    only(
        "group.min.session.timeout.ms",
        I,
        Some("6000"),
        AtLeast(1),
        READ_ONLY,
        "The minimum allowed session timeout for registered consumers. Shorter timeouts result \
         in quicker failure detection at the cost of more frequent consumer heartbeating, \
         which can overwhelm broker resources.",
    ),
    only(
        "leader.imbalance.check.interval.seconds",
        L,
        Some("300"),
        AtLeast(1),
        READ_ONLY,
        "The frequency with which the partition rebalance check is triggered by the controller.",
    ),
    only(
        "leader.replication.throttled.rate",
        L,
        Some(THROTTLE_DEFAULT),
        AtLeast(0),
        DYNAMIC,
        "A long representing the upper bound (bytes/sec) on replication traffic for leaders \
         enumerated in the property leader.replication.throttled.replicas (for each topic). \
         It is suggested that the limit be kept above 1MB/s for accurate behaviour. Honoured by \
         each shard's replica traffic (`replication::throttle`).",
    ),
    only(
        "listeners",
        S,
        Some("PLAINTEXT://127.0.0.1:9092"),
        Any,
        READ_ONLY,
        "The address the socket server listens on, as PLAINTEXT://host:port (alias of \
         --listen). Only one PLAINTEXT listener is served.",
    ),
    only(
        "log.cleaner.backoff.ms",
        L,
        Some("15000"),
        AtLeast(1),
        DYNAMIC,
        "The amount of time to sleep when there are no logs to clean",
    ),
    only(
        "log.cleaner.dedupe.buffer.size",
        L,
        Some("134217728"),
        AtLeast(1024 * 1024),
        DYNAMIC,
        "The total memory used for log deduplication across all cleaner threads (here: split \
         evenly across shards)",
    ),
    only(
        "log.cleaner.io.max.bytes.per.second",
        D,
        Some("1.7976931348623157E308"),
        Validator::DoubleBetween(f64::MIN_POSITIVE, f64::MAX),
        DYNAMIC,
        "The log cleaner will be throttled so that the sum of its read and write i/o will be \
         less than this value on average (here: for the whole broker, split across shards)",
    ),
    only(
        "log.dir.reserved.bytes",
        L,
        Some("67108864"),
        AtLeast(0),
        READ_ONLY,
        "Shardlog's own: free space of the data directory kept for the broker's own writes \
         (consumer offsets, group metadata, the metadata log). Below it, produce answers \
         KAFKA_STORAGE_ERROR until space is freed. 0: produce until the disk is full.",
    ),
    only(
        "log.retention.check.interval.ms",
        L,
        Some("300000"),
        AtLeast(1),
        READ_ONLY,
        "The frequency in milliseconds that the log cleaner checks whether any log is \
         eligible for deletion",
    ),
    only(
        "max.connection.creation.rate",
        I,
        Some("2147483647"),
        AtLeast(0),
        READ_ONLY,
        "The maximum connection creation rate the broker allows, connections/s; each shard \
         holds an equal share and delays accepts beyond it.",
    ),
    only(
        "max.connections",
        I,
        Some("2147483647"),
        AtLeast(0),
        READ_ONLY,
        "The maximum number of connections the broker allows; at the limit new connections \
         wait in the kernel's accept queue until one closes.",
    ),
    only(
        "max.connections.per.ip",
        I,
        Some("2147483647"),
        AtLeast(0),
        READ_ONLY,
        "The maximum number of connections from each IP address; a connection over it is \
         closed at once.",
    ),
    only(
        "max.connections.per.ip.overrides",
        S,
        Some(""),
        Any,
        READ_ONLY,
        "A comma-separated list of per-IP overrides of max.connections.per.ip, as IP:count \
         (IP addresses only, unlike Kafka which also takes host names).",
    ),
    only(
        "num.partitions",
        I,
        Some("1"),
        AtLeast(1),
        READ_ONLY,
        "The default number of log partitions per topic",
    ),
    only(
        "offset.metadata.max.bytes",
        I,
        Some("4096"),
        AtLeast(0),
        READ_ONLY,
        "The maximum size for a metadata entry associated with an offset commit.",
    ),
    only(
        "offsets.retention.check.interval.ms",
        L,
        Some("600000"),
        AtLeast(1),
        READ_ONLY,
        "Frequency at which to check for stale offsets",
    ),
    only(
        "offsets.retention.minutes",
        I,
        Some("10080"),
        AtLeast(1),
        READ_ONLY,
        "For subscribed consumers, committed offset of a specific partition will be expired \
         and discarded after this period of time once the group is empty; for standalone \
         consumers (manual assignment) after this period from the last commit.",
    ),
    only(
        "offsets.topic.num.partitions",
        I,
        Some("50"),
        AtLeast(1),
        READ_ONLY,
        "The number of partitions for the offset commit topic (should not change after \
         deployment: it only applies when __consumer_offsets is created).",
    ),
    only(
        "offsets.topic.replication.factor",
        I,
        Some("3"),
        AtLeast(1),
        READ_ONLY,
        "The replication factor for the offsets topic, capped by the number of live \
         unfenced brokers when __consumer_offsets is created.",
    ),
    only(
        "offsets.topic.segment.bytes",
        I,
        Some("104857600"),
        AtLeast(1024 * 1024),
        READ_ONLY,
        "The offsets topic segment bytes should be kept relatively small in order to \
         facilitate faster log compaction and cache loads.",
    ),
    only(
        "process.roles",
        ConfigType::List,
        Some("broker,controller"),
        Validator::ListOf(&["broker", "controller"]),
        READ_ONLY,
        "The roles this process plays: 'broker', 'controller', or 'broker,controller' if it \
         is both (Shardlog's default, so a single node needs no setting).",
    ),
    only(
        "producer.id.expiration.ms",
        L,
        Some("86400000"),
        AtLeast(1),
        DYNAMIC,
        "The time in ms that a topic partition leader will wait before expiring producer IDs. \
         Producer IDs will not expire while a transaction associated to them is still ongoing.",
    ),
    only(
        "queued.max.request.bytes",
        L,
        Some("536870912"),
        AtLeast(-1),
        READ_ONLY,
        "Bytes of requests read but not yet answered, for the whole broker (each shard holds \
         an equal share); when spent, connections stop reading until answers free it. -1: \
         unbounded (Kafka's default; Shardlog's is 512 MiB).",
    ),
    only(
        "quota.window.num",
        I,
        Some("11"),
        AtLeast(1),
        READ_ONLY,
        "The number of samples to retain in memory for client quotas",
    ),
    only(
        "quota.window.size.seconds",
        I,
        Some("1"),
        AtLeast(1),
        READ_ONLY,
        "The time span of each sample for client quotas",
    ),
    only(
        "replica.alter.log.dirs.io.max.bytes.per.second",
        L,
        Some(THROTTLE_DEFAULT),
        AtLeast(0),
        DYNAMIC,
        "A long representing the upper bound (bytes/sec) on disk IO used for moving replica \
         between log directories on the same broker. Accepted, validated, stored and \
         described; Shardlog has one log directory per broker, so nothing moves between them \
         (kafka-reassign-partitions.sh sets and removes it with its throttles).",
    ),
    only(
        "replica.lag.time.max.ms",
        L,
        Some("30000"),
        Any,
        READ_ONLY,
        "If a follower hasn't sent any fetch requests or hasn't consumed up to the leaders \
         log end offset for at least this time, the leader will remove the follower from isr",
    ),
    only(
        "request.receive.timeout.ms",
        L,
        Some("30000"),
        AtLeast(1),
        READ_ONLY,
        "Shardlog's own (Kafka has no such bound): a request whose first byte arrived must be \
         received whole within this many milliseconds, or the connection is closed.",
    ),
    only(
        "shard.balance.enable",
        B,
        Some("true"),
        Any,
        READ_ONLY,
        "Shardlog's own: whether shard 0 of this broker moves partitions between its shards \
         when one shard carries more bytes in+out per second than the coolest by \
         shard.balance.margin.percent (one move at a time; see tuning.md).",
    ),
    only(
        "shard.balance.interval.ms",
        L,
        Some("300000"),
        AtLeast(1000),
        READ_ONLY,
        "Shardlog's own: the window over which the shard balancer measures per-partition \
         byte rates; an imbalance must last a whole window, and a move is followed by a \
         window without moves (cooldown).",
    ),
    only(
        "shard.balance.margin.percent",
        I,
        Some("50"),
        AtLeast(1),
        READ_ONLY,
        "Shardlog's own: how much hotter (bytes in+out per second, percent) the hottest shard \
         must be than the coolest before the balancer moves a partition.",
    ),
    only(
        "socket.request.max.bytes",
        I,
        Some("104857600"),
        AtLeast(64),
        READ_ONLY,
        "The maximum number of bytes in a socket request",
    ),
    only(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        I,
        Some("10000"),
        AtLeast(1),
        READ_ONLY,
        "The interval at which to rollback transactions that have timed out",
    ),
    only(
        "transaction.max.timeout.ms",
        I,
        Some("900000"),
        AtLeast(1),
        READ_ONLY,
        "The maximum allowed timeout for transactions. If a client's requested transaction \
         time exceed this, then the broker will return an error in InitProducerIdRequest.",
    ),
    only(
        "transaction.partition.verification.enable",
        B,
        Some("true"),
        Any,
        READ_ONLY,
        "Enable verification that checks that the partition has been added to the \
         transaction before writing transactional records to the partition (KIP-890).",
    ),
    only(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        I,
        Some("3600000"),
        AtLeast(1),
        READ_ONLY,
        "The interval at which to remove transactions that have expired due to \
         transactional.id.expiration.ms passing",
    ),
    only(
        "transaction.state.log.min.isr",
        I,
        Some("2"),
        AtLeast(1),
        READ_ONLY,
        "The minimum number of replicas that must acknowledge a write to the transaction \
         topic (its min.insync.replicas, capped by its replication factor).",
    ),
    only(
        "transaction.state.log.num.partitions",
        I,
        Some("50"),
        AtLeast(1),
        READ_ONLY,
        "The number of partitions for the transaction topic (should not change after \
         deployment: it only applies when __transaction_state is created).",
    ),
    only(
        "transaction.state.log.replication.factor",
        I,
        Some("3"),
        AtLeast(1),
        READ_ONLY,
        "The replication factor for the transaction topic, capped by the number of live \
         unfenced brokers when __transaction_state is created.",
    ),
    only(
        "transaction.state.log.segment.bytes",
        I,
        Some("104857600"),
        AtLeast(1024 * 1024),
        READ_ONLY,
        "The transaction topic segment bytes should be kept relatively small in order to \
         facilitate faster log compaction and cache loads",
    ),
    only(
        "transactional.id.expiration.ms",
        I,
        Some("604800000"),
        AtLeast(1),
        READ_ONLY,
        "The time in ms that the transaction coordinator will wait without receiving any \
         transaction status updates for the current transaction before expiring its \
         transactional id.",
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

/// The update mode of a broker setting by name (`None`: not a setting Shardlog knows). The
/// broker synonyms of topic configs follow Kafka's `DynamicLogConfig`: the first synonym of
/// each topic config (`log.retention.ms`, `log.roll.ms`, `log.flush.interval.ms`, ...) is
/// cluster-wide, the coarser ones (`log.retention.hours`, `log.roll.hours`,
/// `log.flush.scheduler.interval.ms`) are read-only.
#[must_use]
pub fn update_mode(name: &str) -> Option<UpdateMode> {
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
