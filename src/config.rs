//! Typed configuration of `shardlog serve`: defaults < TOML file (`--config`) < flags.
//!
//! Every behaviour Kafka makes a broker setting is one here, under Kafka's name: a TOML key
//! (the dotted name, quoted or bare) and a flag (dots as dashes), e.g.
//! `"group.min.session.timeout.ms" = 3000` or `--group-min-session-timeout-ms 3000`. Names,
//! types, defaults and validators live in the broker-config registry
//! (`controller::configs::BROKER_ONLY_CONFIGS` and the topic configs' broker synonyms), the
//! same table DescribeConfigs reads, so the three cannot drift apart. Shardlog's own
//! settings without a Kafka name (`data_dir`, `shards`, ...) keep snake_case keys.
//!
//! Built once on the main thread before any shard starts, then cloned into every shard
//! (it is plain data, `Send + Sync`). Invariants after [`ServeConfig::resolve`]: the
//! shard count is at least 1, the advertised listener has a host and a port, every Kafka
//! setting passed its registry validator, and the group session-timeout bounds are ordered.

mod cluster;
pub mod controller_listener;
mod kafka;
pub mod listeners;
pub mod oauthbearer;
pub mod security;
pub mod units;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

pub use cluster::{parse_voters, ClusterConfig, ClusterInput, Voter};
use kafka::Settings;
/// Typed reads of validated broker settings (for code that re-resolves them at runtime).
pub use kafka::Settings as KafkaSettings;
pub use kafka::{flag_name, KafkaArgs};
pub use listeners::{Listener, ListenerInput, Listeners, SecurityProtocol};

use crate::constants::{
    BATCH_CACHE_BYTES_DEFAULT, BATCH_CACHE_BYTES_MIN, BATCH_CACHE_MEMORY_DIVISOR,
};
use crate::constants::{
    GROUP_MEMBER_METADATA_BYTES_MAX, GROUP_METADATA_RECORD_BYTES_MAX, KAFKA_PORT_DEFAULT,
    MAX_CONNECTIONS_DEFAULT, QUEUED_MAX_REQUEST_BYTES_DEFAULT, REQUEST_RECEIVE_TIMEOUT_MS_DEFAULT,
    SPIN_BEFORE_PARK_US_DEFAULT,
};
use crate::controller::configs::BrokerDefaults;
use crate::group::GroupConfig;
use crate::types::NodeId;

/// Flags of `shardlog serve`. Every field is optional so that an absent flag leaves the
/// TOML value (or the default) in place. Kafka broker settings are flags too, by Kafka's
/// name with dots as dashes ([`KafkaArgs`]).
#[derive(clap::Args, Debug, Default, Clone)]
pub struct ServeArgs {
    /// Address to listen on for Kafka clients (default 127.0.0.1:9092; Kafka's `listeners`,
    /// also `--listeners PLAINTEXT://host:port`).
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// host:port clients are told to connect to (default: the listen address; Kafka's
    /// `advertised.listeners`, also `--advertised-listeners PLAINTEXT://host:port`).
    #[arg(long)]
    pub advertised_listener: Option<String>,
    /// Data directory (default ./shardlog-data).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Number of shards, one pinned executor each (default: the cores this process may use).
    #[arg(long)]
    pub shards: Option<u32>,
    /// This node's id (default 0; required, and at least 1, when
    /// --controller-quorum-voters is given).
    #[arg(long)]
    pub node_id: Option<i32>,
    /// HOST:PORT the controller quorum listens on (default: this node's entry in
    /// --controller-quorum-voters). It speaks Shardlog's Raft framing between nodes, not the
    /// Kafka protocol: point Kafka clients at --listen instead.
    #[arg(long, value_name = "HOST:PORT")]
    pub controller_listen: Option<SocketAddr>,
    /// TOML configuration file; flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Log filter (tracing env-filter syntax); RUST_LOG is used when absent.
    #[arg(long)]
    pub log_level: Option<String>,
    /// Address of the admin HTTP endpoint (/metrics, top, shard moves) [default:
    /// 127.0.0.1:9644, or an ephemeral port if taken]; a given address that is taken fails
    /// the start.
    #[arg(long)]
    pub admin_listen: Option<SocketAddr>,
    /// Ask every admin HTTP request for a user's credentials (HTTP Basic: a SCRAM or PLAIN
    /// user of the broker) and, with an authorizer, DESCRIBE (GET) or ALTER (POST) on the
    /// cluster [default: false].
    #[arg(long)]
    pub admin_require_auth: Option<bool>,
    /// Microseconds an idle executor spins before parking (0 disables spinning); `2ms` works.
    #[arg(long, value_name = "US", value_parser = units::micros::<u64>)]
    pub spin_before_park_us: Option<u64>,
    /// Each shard's cache of recent batches (`64MiB` default; at least 1 MiB): what tailing
    /// consumers and read-ahead for catch-up consumers are served from (tuning.md).
    #[arg(long, value_name = "SIZE", value_parser = units::bytes::<u64>)]
    pub cache_bytes: Option<u64>,
    /// Cores the shards are pinned to, e.g. `2` or `0,2-3`: shard i runs on the i-th listed
    /// core (default: the cores this process may use, so several brokers on one host stack
    /// on core 0 unless each gets its own). Also the default shard count.
    #[arg(long, value_name = "LIST", value_parser = parse_cpu_list)]
    pub cpus: Option<CpuList>,
    /// Create unknown topics on Metadata requests (alias of --auto-create-topics-enable).
    #[arg(long)]
    pub auto_create_topics: Option<bool>,
    #[command(flatten)]
    pub kafka: KafkaArgs,
}

/// Shardlog's own settings in the TOML file (snake_case keys; no Kafka name exists).
/// Every other key is a Kafka broker setting by its dotted name.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<SocketAddr>,
    advertised_listener: Option<String>,
    data_dir: Option<PathBuf>,
    shards: Option<u32>,
    node_id: Option<i32>,
    controller_listen: Option<SocketAddr>,
    log_level: Option<String>,
    admin_listen: Option<SocketAddr>,
    admin_require_auth: Option<bool>,
    spin_before_park_us: Option<u64>,
    /// `--cache-bytes`, bytes per shard.
    cache_bytes: Option<u64>,
    /// `--cpus` in the same syntax, e.g. `cpus = "0,2-3"`.
    cpus: Option<String>,
}

/// A list of core ids from `--cpus` (`0,2-3`): in order, without duplicates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

/// Parses `0,2-3` (Linux's cpulist syntax, as `taskset -c` takes it).
pub fn parse_cpu_list(text: &str) -> Result<CpuList, String> {
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim) {
        let bad = || format!("bad CPU list '{text}': want core ids such as 0,2-3");
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo.trim(), hi.trim()),
            None => (part, part),
        };
        let lo: usize = lo.parse().map_err(|_| bad())?;
        let hi: usize = hi.parse().map_err(|_| bad())?;
        if lo > hi || hi - lo >= CPU_LIST_CORES_MAX {
            return Err(bad());
        }
        for cpu in lo..=hi {
            if cpus.contains(&cpu) {
                return Err(format!("bad CPU list '{text}': core {cpu} is listed twice"));
            }
            cpus.push(cpu);
        }
    }
    if cpus.len() > CPU_LIST_CORES_MAX {
        return Err(format!("bad CPU list '{text}': more than {CPU_LIST_CORES_MAX} cores"));
    }
    Ok(CpuList(cpus))
}

/// More cores than any host this runs on has; bounds a list like `0-99999999`.
const CPU_LIST_CORES_MAX: usize = 4096;

const FILE_KEYS: &[&str] = &[
    "listen",
    "advertised_listener",
    "data_dir",
    "shards",
    "node_id",
    "controller_listen",
    "log_level",
    "admin_listen",
    "admin_require_auth",
    "spin_before_park_us",
    "cache_bytes",
    "cpus",
];

/// Snake-case file keys of earlier versions, still read as the Kafka setting they name.
const FILE_ALIASES: &[(&str, &str)] = &[
    ("auto_create_topics", "auto.create.topics.enable"),
    ("num_partitions", "num.partitions"),
    ("socket_request_max_bytes", "socket.request.max.bytes"),
    ("log_retention_check_interval_ms", "log.retention.check.interval.ms"),
    ("log_cleaner_backoff_ms", "log.cleaner.backoff.ms"),
    ("log_cleaner_io_max_bytes_per_second", "log.cleaner.io.max.bytes.per.second"),
    ("log_cleaner_dedupe_buffer_size", "log.cleaner.dedupe.buffer.size"),
];

/// Why a configuration could not be built.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    /// One line (toml's own text draws the line with a caret over several lines).
    #[error("bad config file {path}{}: {message}", line.map_or(String::new(), |l| format!(", line {l}")))]
    Parse { path: PathBuf, line: Option<usize>, message: String },
    #[error(
        "unknown setting {0:?}: the config file takes Shardlog's own keys ({keys}) and Kafka \
         broker settings by Kafka's dotted name (`shardlog serve --help` lists them)",
        keys = FILE_KEYS.join(", ")
    )]
    UnknownSetting(String),
    #[error("invalid setting {name}: {reason}")]
    Invalid { name: &'static str, reason: String },
    #[error(transparent)]
    Setting(#[from] crate::controller::configs::ConfigError),
}

/// The resolved configuration every shard receives.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Every Kafka listener (`listeners`); brokers talk over `listeners.inter_broker`.
    pub listeners: Listeners,
    /// Each listener's TLS and SASL (index-aligned with `listeners.all`).
    pub listener_security: Vec<crate::security::ListenerSecurity>,
    /// How this broker dials the others (the inter-broker listener's name, TLS and SASL).
    pub inter_broker_client: std::sync::Arc<crate::protocol::client_auth::ClientSecurity>,
    /// The controller quorum's TLS (`controller.listener.names` naming an SSL listener).
    pub controller_tls: Option<crate::quorum::QuorumTls>,
    /// The inter-broker listener's bind address and advertised endpoint (the one this
    /// broker registers first, so other brokers dial it).
    pub listen: SocketAddr,
    pub advertised_host: String,
    pub advertised_port: u16,
    pub data_dir: PathBuf,
    pub shards: u32,
    pub node_id: NodeId,
    /// Roles, controller quorum voters and the quorum's listen address.
    pub cluster: ClusterConfig,
    pub log_level: Option<String>,
    pub admin_listen: Option<SocketAddr>,
    /// `--admin-require-auth`: the admin endpoint authenticates (and authorizes) requests.
    pub admin_require_auth: bool,
    pub spin_before_park_us: u64,
    /// Each shard's batch cache bound (`--cache-bytes`).
    pub cache_bytes: usize,
    pub auto_create_topics: bool,
    pub num_partitions: i32,
    pub socket_request_max_bytes: u32,
    pub log_retention_check_interval_ms: u64,
    /// The static `log.cleaner.*` values. The cleaner loops read the settings in force
    /// (dynamic broker configs included) from each shard's metadata image instead.
    pub log_cleaner_backoff_ms: u64,
    /// `None`: unlimited.
    pub log_cleaner_io_max_bytes_per_second: Option<f64>,
    pub log_cleaner_dedupe_buffer_size: u64,
    /// `group.*`, `offsets.retention.minutes`, `offset.metadata.max.bytes`.
    pub group: GroupConfig,
    pub offsets_retention_check_interval_ms: u64,
    /// Partitions `__consumer_offsets` is created with (not changed afterwards).
    pub offsets_topic_num_partitions: i32,
    pub offsets_topic_segment_bytes: i32,
    /// `offsets.topic.replication.factor`, capped by the live brokers at creation.
    pub offsets_topic_replication_factor: i32,
    /// `transaction.*` settings of the transaction coordinator (issue 17).
    pub txn: crate::txn::TxnConfig,
    /// `connections.max.idle.ms`; `None` (a negative setting): never closed for idleness.
    pub connections_max_idle_ms: Option<u64>,
    /// `max.connections*`, `queued.max.request.bytes`, `request.receive.timeout.ms`.
    pub connection_limits: ConnectionLimits,
    /// `log.dir.reserved.bytes` (Shardlog's own): client produce is refused below this much
    /// free space in the data directory, kept for the broker's own writes.
    pub log_dir_reserved_bytes: u64,
    /// `quota.window.num` and `quota.window.size.seconds`: how client byte rates are measured.
    pub quota_window: crate::quota::QuotaWindow,
    /// Stored for replication (single node: every partition has one replica).
    pub min_insync_replicas: i32,
    /// Stored for replication; topics created with -1 get it.
    pub default_replication_factor: i16,
    /// Every Kafka broker setting set explicitly (file or flag), validated and normalized,
    /// by Kafka name: DescribeConfigs shows these as STATIC_BROKER_CONFIG.
    pub broker_settings: BTreeMap<String, String>,
    /// Cores to pin shard i to (`cpus[i % len]`); `None`: the process's allowed cores.
    pub cpus: Option<Vec<usize>>,
    /// `authorizer.class.name` with `super.users` and `allow.everyone.if.no.acl.found`:
    /// `None` (the default) authorizes nothing and leaves every request allowed.
    pub authorizer: Option<std::sync::Arc<crate::authz::Authorizer>>,
}

impl ServeConfig {
    /// The advertised host and port of listener `name` (`None`: the inter-broker listener).
    #[must_use]
    pub fn advertised(&self, name: Option<&str>) -> Option<(&str, u16)> {
        let l = match name {
            Some(name) => self.listeners.all.iter().find(|l| l.name == name)?,
            None => &self.listeners.all[self.listeners.inter_broker],
        };
        Some((l.advertised_host.as_str(), l.advertised_port))
    }

    /// This shard's share of the cleaner I/O limit, bytes/s (infinite when unlimited).
    #[must_use]
    pub fn cleaner_io_bytes_per_second_per_shard(&self) -> f64 {
        self.log_cleaner_io_max_bytes_per_second
            .map_or(f64::INFINITY, |r| r / f64::from(self.shards))
    }

    /// This shard's share of the cleaner key-map memory, bytes.
    #[must_use]
    pub fn cleaner_key_map_bytes_per_shard(&self) -> usize {
        usize::try_from(self.log_cleaner_dedupe_buffer_size / u64::from(self.shards))
            .unwrap_or(usize::MAX)
    }

    /// The broker-level settings as the controller and DescribeConfigs see them. Listeners
    /// set explicitly are shown as bound (a `:0` port replaced by the real one).
    #[must_use]
    pub fn broker_defaults(&self) -> BrokerDefaults {
        let mut settings = self.broker_settings.clone();
        let all = &self.listeners.all;
        if let Some(v) = settings.get_mut("listeners") {
            *v = render_all(all.iter().map(|l| (&l.name, l.bind.ip().to_string(), l.bind.port())));
        }
        if let Some(v) = settings.get_mut("advertised.listeners") {
            *v = render_all(
                all.iter().map(|l| (&l.name, l.advertised_host.clone(), l.advertised_port)),
            );
        }
        let s = Settings(&settings);
        BrokerDefaults {
            num_partitions: self.num_partitions,
            default_replication_factor: self.default_replication_factor,
            auto_create_topics_enable: self.auto_create_topics,
            delete_topic_enable: s.boolean("delete.topic.enable"),
            settings,
            ..BrokerDefaults::default()
        }
    }

    /// Merges defaults, the TOML file named by `--config` (if any) and the flags.
    /// `allowed_cores` is the default shard count; the default cache is the least one.
    pub fn resolve(args: &ServeArgs, allowed_cores: u32) -> Result<Self, ConfigError> {
        Self::resolve_on(args, allowed_cores, None)
    }

    /// [`ServeConfig::resolve`] on a host whose process may use `memory_bytes`: without
    /// `--cache-bytes` the shards' caches share `1 / BATCH_CACHE_MEMORY_DIVISOR` of it (each
    /// at least `BATCH_CACHE_BYTES_DEFAULT`).
    pub fn resolve_on(
        args: &ServeArgs,
        allowed_cores: u32,
        memory_bytes: Option<u64>,
    ) -> Result<Self, ConfigError> {
        let (file, file_settings) = match &args.config {
            Some(path) => read_file(path)?,
            None => (FileConfig::default(), BTreeMap::new()),
        };
        let mut flag_settings = args.kafka.values.clone();
        if let Some(enable) = args.auto_create_topics {
            once(&mut flag_settings, "auto.create.topics.enable", enable.to_string())?;
        }
        let mut raw = file_settings;
        // Listeners: a flag (either spelling) beats the file (either spelling).
        let plain = |a: SocketAddr| listeners::render("PLAINTEXT", &a.ip().to_string(), a.port());
        let listen_flag = pick(args.listen.map(plain), flag_settings.remove("listeners"))?;
        let listen_file = pick(file.listen.map(plain), raw.remove("listeners"))?;
        let listeners_text = listen_flag.or(listen_file);
        let adv_flag = pick_text(
            args.advertised_listener.clone(),
            flag_settings.remove("advertised.listeners"),
        )?;
        let adv_file = pick_text(file.advertised_listener, raw.remove("advertised.listeners"))?;
        let advertised_text = adv_flag.or(adv_file);
        raw.extend(flag_settings);
        let mut broker = BrokerDefaults::from_settings(raw)?;
        let given_listeners = listeners_text.clone();
        let (listeners_text, controller_listener) = controller_listener::split(
            listeners_text,
            broker.settings.get("controller.listener.names").map(String::as_str),
            broker
                .settings
                .get("listener.security.protocol.map")
                .map_or(listeners::PROTOCOL_MAP_DEFAULT, String::as_str),
        )?;
        let listeners = resolve_listeners(
            listeners_text.as_deref(),
            advertised_text.as_deref(),
            &broker.settings,
        )?;
        if let Some(text) = given_listeners {
            broker.settings.insert("listeners".into(), text);
        }
        if let Some(text) = advertised_text {
            broker.settings.insert("advertised.listeners".into(), text);
        }
        let listener_security = security::resolve(&listeners.all, &broker.settings)?;
        let inter = &listeners.all[listeners.inter_broker];
        let (listen, advertised_host, advertised_port) =
            (inter.bind, inter.advertised_host.clone(), inter.advertised_port);
        let cpus = match (&args.cpus, &file.cpus) {
            (Some(list), _) => Some(list.0.clone()),
            (None, Some(text)) => {
                Some(parse_cpu_list(text).map_err(|reason| invalid("cpus", &reason))?.0)
            }
            (None, None) => None,
        };
        let listed = cpus.as_ref().and_then(|c| u32::try_from(c.len()).ok());
        let shards = args.shards.or(file.shards).or(listed).unwrap_or(allowed_cores.max(1));
        if shards == 0 {
            return Err(invalid("shards", "must be at least 1"));
        }
        let cache_bytes = args
            .cache_bytes
            .or(file.cache_bytes)
            .unwrap_or_else(|| default_cache_bytes(memory_bytes, shards));
        if cache_bytes < BATCH_CACHE_BYTES_MIN {
            return Err(invalid(
                "cache_bytes",
                &format!("{cache_bytes} bytes: at least {BATCH_CACHE_BYTES_MIN} (1 MiB)"),
            ));
        }
        let cache_bytes = usize::try_from(cache_bytes).unwrap_or(usize::MAX);
        let s = Settings(&broker.settings);
        let group = group_config(&s)?;
        let cleaner_io = s.double("log.cleaner.io.max.bytes.per.second");
        let node_id_given = args.node_id.or(file.node_id);
        let node_id = NodeId(node_id_given.unwrap_or(0));
        let cluster = ClusterConfig::resolve(
            &ClusterInput {
                roles: broker.settings.get("process.roles").map_or("broker,controller", |v| v),
                voters: broker.settings.get("controller.quorum.voters").map(String::as_str),
                controller_listen: controller_listener::listen(
                    args.controller_listen.or(file.controller_listen),
                    controller_listener.as_ref(),
                )?,
                node_id_given,
                election_timeout_ms: s.long("controller.quorum.election.timeout.ms").unsigned_abs(),
            },
            node_id,
        )?;
        let inter_broker_client = std::sync::Arc::new(security::inter_broker_client(
            inter,
            &broker.settings,
            !cluster.is_single_node(),
        )?);
        let controller_tls = match &controller_listener {
            Some(c) if !cluster.is_single_node() => {
                security::quorum_tls(c, &broker.settings, &cluster.voters)?
            }
            _ => None,
        };
        Ok(Self {
            listeners,
            listener_security,
            inter_broker_client,
            controller_tls,
            listen,
            advertised_host,
            advertised_port,
            data_dir: args
                .data_dir
                .clone()
                .or(file.data_dir)
                .unwrap_or_else(|| PathBuf::from("shardlog-data")),
            shards,
            node_id,
            cluster,
            log_level: args.log_level.clone().or(file.log_level),
            admin_listen: args.admin_listen.or(file.admin_listen),
            admin_require_auth: args
                .admin_require_auth
                .or(file.admin_require_auth)
                .unwrap_or(false),
            spin_before_park_us: args
                .spin_before_park_us
                .or(file.spin_before_park_us)
                .unwrap_or(SPIN_BEFORE_PARK_US_DEFAULT),
            cache_bytes,
            auto_create_topics: s.boolean("auto.create.topics.enable"),
            num_partitions: s.int("num.partitions"),
            socket_request_max_bytes: u32::try_from(s.int("socket.request.max.bytes"))
                .unwrap_or(u32::MAX),
            log_retention_check_interval_ms: s
                .long("log.retention.check.interval.ms")
                .unsigned_abs(),
            log_cleaner_backoff_ms: s.long("log.cleaner.backoff.ms").unsigned_abs(),
            // Kafka's default, Double.MAX_VALUE, means unlimited.
            log_cleaner_io_max_bytes_per_second: (cleaner_io < f64::MAX).then_some(cleaner_io),
            log_cleaner_dedupe_buffer_size: s.long("log.cleaner.dedupe.buffer.size").unsigned_abs(),
            group,
            offsets_retention_check_interval_ms: s
                .long("offsets.retention.check.interval.ms")
                .unsigned_abs(),
            offsets_topic_num_partitions: s.int("offsets.topic.num.partitions"),
            offsets_topic_segment_bytes: s.int("offsets.topic.segment.bytes"),
            offsets_topic_replication_factor: s.int("offsets.topic.replication.factor"),
            txn: crate::txn::TxnConfig {
                state_log_num_partitions: s.int("transaction.state.log.num.partitions"),
                state_log_segment_bytes: s.int("transaction.state.log.segment.bytes"),
                state_log_replication_factor: s.int("transaction.state.log.replication.factor"),
                state_log_min_isr: s.int("transaction.state.log.min.isr"),
                partition_verification_enable: s
                    .boolean("transaction.partition.verification.enable"),
                max_timeout_ms: s.int("transaction.max.timeout.ms"),
                id_expiration_ms: i64::from(s.int("transactional.id.expiration.ms")),
                abort_check_interval_ms: i64::from(
                    s.int("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
                ),
                expiry_check_interval_ms: i64::from(
                    s.int("transaction.remove.expired.transaction.cleanup.interval.ms"),
                ),
            },
            connections_max_idle_ms: u64::try_from(s.long("connections.max.idle.ms")).ok(),
            connection_limits: connection_limits(&s)?,
            log_dir_reserved_bytes: s.long("log.dir.reserved.bytes").unsigned_abs(),
            quota_window: crate::quota::QuotaWindow::new(
                u32::try_from(s.int("quota.window.num")).unwrap_or(1),
                u32::try_from(s.int("quota.window.size.seconds")).unwrap_or(1),
            ),
            min_insync_replicas: s.int("min.insync.replicas"),
            default_replication_factor: broker.default_replication_factor,
            broker_settings: broker.settings.clone(),
            cpus,
            authorizer: authorizer(&s)?,
        })
    }
}

/// The authorizer the settings ask for (`None` without `authorizer.class.name`).
fn authorizer(
    s: &Settings<'_>,
) -> Result<Option<std::sync::Arc<crate::authz::Authorizer>>, ConfigError> {
    let class = s.text("authorizer.class.name").unwrap_or_default();
    if class.trim().is_empty() {
        return Ok(None);
    }
    let super_users = s.text("super.users").unwrap_or_default();
    let authorizer =
        crate::authz::Authorizer::new(&super_users, s.boolean("allow.everyone.if.no.acl.found"))
            .map_err(|e| invalid("super.users", &e.to_string()))?;
    Ok(Some(std::sync::Arc::new(authorizer)))
}

/// Connection and request-memory limits, enforced by `server::limits`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionLimits {
    /// `max.connections`: open connections of the broker.
    pub max_connections: usize,
    /// `max.connections.per.ip` and its overrides (`max.connections.per.ip.overrides`).
    pub max_connections_per_ip: u32,
    pub max_connections_per_ip_overrides: Vec<(std::net::IpAddr, u32)>,
    /// `max.connection.creation.rate`, connections/s for the whole broker.
    pub max_connection_creation_rate: u32,
    /// `queued.max.request.bytes` for the whole broker; `None` (a negative setting): unbounded.
    pub queued_max_request_bytes: Option<u64>,
    /// `request.receive.timeout.ms` (Shardlog's own).
    pub request_receive_timeout_ms: u64,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: MAX_CONNECTIONS_DEFAULT as usize,
            max_connections_per_ip: MAX_CONNECTIONS_DEFAULT,
            max_connections_per_ip_overrides: Vec::new(),
            max_connection_creation_rate: MAX_CONNECTIONS_DEFAULT,
            queued_max_request_bytes: Some(QUEUED_MAX_REQUEST_BYTES_DEFAULT),
            request_receive_timeout_ms: REQUEST_RECEIVE_TIMEOUT_MS_DEFAULT,
        }
    }
}

impl ConnectionLimits {
    /// The connection limit of one peer address (its override, else the general one).
    #[must_use]
    pub fn per_ip_limit(&self, ip: std::net::IpAddr) -> u32 {
        self.max_connections_per_ip_overrides
            .iter()
            .find(|(o, _)| *o == ip)
            .map_or(self.max_connections_per_ip, |(_, n)| *n)
    }

    /// One shard's share of `max.connection.creation.rate` (infinite at Kafka's default).
    #[must_use]
    pub fn max_connection_creation_rate_per_shard(&self, shards: u32) -> f64 {
        if self.max_connection_creation_rate >= MAX_CONNECTIONS_DEFAULT {
            return f64::INFINITY;
        }
        f64::from(self.max_connection_creation_rate) / f64::from(shards.max(1))
    }

    /// One shard's share of `queued.max.request.bytes`.
    #[must_use]
    pub fn queued_request_bytes_per_shard(&self, shards: u32) -> Option<u64> {
        self.queued_max_request_bytes.map(|b| b / u64::from(shards.max(1)))
    }
}

fn connection_limits(s: &Settings<'_>) -> Result<ConnectionLimits, ConfigError> {
    let name = "max.connections.per.ip.overrides";
    let mut overrides = Vec::new();
    for item in s.text(name).unwrap_or_default().split(',').map(str::trim) {
        if item.is_empty() {
            continue;
        }
        let parsed = item.rsplit_once(':').and_then(|(host, n)| {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            Some((host.parse::<std::net::IpAddr>().ok()?, n.trim().parse::<u32>().ok()?))
        });
        let reason =
            format!("{item:?} is not IP:count (Shardlog takes IP addresses, not host names)");
        overrides.push(parsed.ok_or_else(|| invalid(name, &reason))?);
    }
    let positive = |n: &str| u32::try_from(s.int(n)).unwrap_or(0);
    Ok(ConnectionLimits {
        max_connections: positive("max.connections") as usize,
        max_connections_per_ip: positive("max.connections.per.ip"),
        max_connections_per_ip_overrides: overrides,
        max_connection_creation_rate: positive("max.connection.creation.rate"),
        queued_max_request_bytes: u64::try_from(s.long("queued.max.request.bytes")).ok(),
        request_receive_timeout_ms: s.long("request.receive.timeout.ms").unsigned_abs(),
    })
}

/// The group coordinator's settings; checks `group.min.session.timeout.ms` ≤ max.
fn group_config(s: &Settings<'_>) -> Result<GroupConfig, ConfigError> {
    let min = s.int("group.min.session.timeout.ms");
    let max = s.int("group.max.session.timeout.ms");
    if min > max {
        return Err(invalid(
            "group.min.session.timeout.ms",
            &format!("{min} is above group.max.session.timeout.ms ({max})"),
        ));
    }
    Ok(GroupConfig {
        min_session_timeout_ms: min,
        max_session_timeout_ms: max,
        initial_rebalance_delay_ms: s.long("group.initial.rebalance.delay.ms"),
        group_max_size: usize::try_from(s.long("group.max.size")).unwrap_or(usize::MAX),
        offset_metadata_bytes_max: usize::try_from(s.long("offset.metadata.max.bytes"))
            .unwrap_or(0),
        offsets_retention_ms: s.long("offsets.retention.minutes").saturating_mul(60_000),
        member_metadata_bytes_max: GROUP_MEMBER_METADATA_BYTES_MAX,
        group_metadata_bytes_max: GROUP_METADATA_RECORD_BYTES_MAX,
    })
}

/// Inserts a setting given once; the same setting under two spellings is an error.
fn once(map: &mut BTreeMap<String, String>, name: &str, value: String) -> Result<(), ConfigError> {
    if map.insert(name.to_string(), value).is_some() {
        return Err(ConfigError::Invalid {
            name: "flags",
            reason: format!("{name} is given under two names; give it once"),
        });
    }
    Ok(())
}

/// The listeners from Shardlog's spelling (`listen`, one PLAINTEXT address) or Kafka's
/// `listeners` (not both).
fn pick(own: Option<String>, kafka: Option<String>) -> Result<Option<String>, ConfigError> {
    match (own, kafka) {
        (Some(_), Some(_)) => {
            Err(invalid("listeners", "given as both listen and listeners; give one"))
        }
        (own, kafka) => Ok(own.or(kafka)),
    }
}

fn pick_text(own: Option<String>, kafka: Option<String>) -> Result<Option<String>, ConfigError> {
    match (own, kafka) {
        (Some(_), Some(_)) => Err(invalid(
            "advertised.listeners",
            "given as both advertised_listener and advertised.listeners; give one",
        )),
        (own, kafka) => Ok(own.or(kafka)),
    }
}

/// Resolves `listeners` and `advertised.listeners` with the listener settings among the
/// validated broker settings.
fn resolve_listeners(
    listeners_text: Option<&str>,
    advertised_text: Option<&str>,
    settings: &BTreeMap<String, String>,
) -> Result<Listeners, ConfigError> {
    let get = |name: &str| settings.get(name).map(String::as_str);
    listeners::resolve(
        &ListenerInput {
            listeners: listeners_text,
            advertised: advertised_text,
            protocol_map: get("listener.security.protocol.map"),
            inter_broker_name: get("inter.broker.listener.name"),
            inter_broker_protocol: get("security.inter.broker.protocol"),
        },
        SocketAddr::from(([127, 0, 0, 1], KAFKA_PORT_DEFAULT)),
    )
}

/// `NAME://host:port,...` in Kafka's rendering.
fn render_all<'a>(items: impl Iterator<Item = (&'a String, String, u16)>) -> String {
    items
        .map(|(name, host, port)| listeners::render(name, &host, port))
        .collect::<Vec<_>>()
        .join(",")
}

fn invalid(name: &'static str, reason: &str) -> ConfigError {
    ConfigError::Invalid { name, reason: reason.to_string() }
}

/// Reads the TOML file: Shardlog's own keys, and Kafka broker settings by dotted name.
fn read_file(path: &Path) -> Result<(FileConfig, BTreeMap<String, String>), ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
    let parse = |e: toml::de::Error| ConfigError::Parse {
        path: path.to_path_buf(),
        line: e.span().map(|span| text[..span.start].matches('\n').count() + 1),
        message: e.message().to_string(),
    };
    let table: toml::Table = toml::from_str(&text).map_err(parse)?;
    let (mut own, mut kafka_keys, mut aliased) =
        (toml::Table::new(), toml::Table::new(), toml::Table::new());
    for (key, value) in table {
        if FILE_KEYS.contains(&key.as_str()) {
            own.insert(key, value);
        } else if let Some((_, name)) = FILE_ALIASES.iter().find(|(alias, _)| *alias == key) {
            aliased.insert((*name).to_string(), value);
        } else {
            kafka_keys.insert(key, value);
        }
    }
    let file: FileConfig = toml::Value::Table(own).try_into().map_err(parse)?;
    let mut settings = BTreeMap::new();
    kafka::flatten("", kafka_keys, &mut settings)?;
    kafka::flatten("", aliased, &mut settings)?;
    Ok((file, settings))
}

/// Each shard's batch cache without `--cache-bytes`: `1 / BATCH_CACHE_MEMORY_DIVISOR` of
/// `memory_bytes` over `shards`, at least `BATCH_CACHE_BYTES_DEFAULT` (which is also the
/// answer when the memory is unknown).
#[must_use]
pub fn default_cache_bytes(memory_bytes: Option<u64>, shards: u32) -> u64 {
    let share =
        memory_bytes.map_or(0, |m| m / BATCH_CACHE_MEMORY_DIVISOR / u64::from(shards.max(1)));
    share.max(BATCH_CACHE_BYTES_DEFAULT)
}

#[cfg(test)]
mod tests;
