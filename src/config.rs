//! Typed configuration of `shardlog serve`: defaults < TOML file (`--config`) < flags.
//!
//! Built once on the main thread before any shard starts, then cloned into every shard
//! (it is plain data, `Send + Sync`). Invariants after [`ServeConfig::resolve`]: the
//! shard count is at least 1, the advertised listener has a host and a port, and the
//! request size limit is positive.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

use crate::cli::units;

use crate::constants::{
    KAFKA_PORT_DEFAULT, LOG_CLEANER_BACKOFF_MS_DEFAULT, LOG_CLEANER_DEDUPE_BUFFER_BYTES_DEFAULT,
    RETENTION_CHECK_INTERVAL_MS_DEFAULT, SOCKET_REQUEST_MAX_BYTES_DEFAULT,
    SPIN_BEFORE_PARK_US_DEFAULT,
};
use crate::types::NodeId;

/// Flags of `shardlog serve`. Every field is optional so that an absent flag leaves the
/// TOML value (or the default) in place.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct ServeArgs {
    /// Address to listen on for Kafka clients (default 127.0.0.1:9092).
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// host:port clients are told to connect to (default: the listen address).
    #[arg(long)]
    pub advertised_listener: Option<String>,
    /// Data directory (default ./shardlog-data).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Number of shards, one pinned executor each (default: the cores this process may use).
    #[arg(long)]
    pub shards: Option<u32>,
    /// This broker's node id (default 0).
    #[arg(long)]
    pub node_id: Option<i32>,
    /// TOML configuration file; flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Log filter (tracing env-filter syntax); RUST_LOG is used when absent.
    #[arg(long)]
    pub log_level: Option<String>,
    /// Reserved: address of the admin HTTP endpoint (/metrics). Not served yet.
    #[arg(long)]
    pub admin_listen: Option<SocketAddr>,
    /// Microseconds an idle executor spins before parking (0 disables spinning); `2ms` works.
    #[arg(long, value_name = "US", value_parser = units::micros::<u64>)]
    pub spin_before_park_us: Option<u64>,
    /// Create unknown topics on Metadata requests (Kafka's auto.create.topics.enable).
    #[arg(long)]
    pub auto_create_topics: Option<bool>,
    /// Partitions of an auto-created topic or of CreateTopics with -1 (num.partitions).
    #[arg(long)]
    pub num_partitions: Option<i32>,
    /// Largest request frame accepted, bytes or `100MiB` (socket.request.max.bytes).
    #[arg(long, value_name = "SIZE", value_parser = units::bytes::<u32>)]
    pub socket_request_max_bytes: Option<u32>,
    /// How often each shard runs retention over its logs, ms
    /// (log.retention.check.interval.ms, default 300000; `5m` works).
    #[arg(long, value_name = "MS", value_parser = units::millis::<u64>)]
    pub log_retention_check_interval_ms: Option<u64>,
    /// How long a shard's log cleaner sleeps when no log needs cleaning, ms
    /// (log.cleaner.backoff.ms, default 15000; `15s` works).
    #[arg(long, value_name = "MS", value_parser = units::millis::<u64>)]
    pub log_cleaner_backoff_ms: Option<u64>,
    /// Cleaner read+write limit for the whole broker, bytes/s, split evenly across shards
    /// (log.cleaner.io.max.bytes.per.second, default unlimited; `50MiB` works).
    #[arg(long, value_name = "BYTES", value_parser = units::bytes_per_second)]
    pub log_cleaner_io_max_bytes_per_second: Option<f64>,
    /// Cleaner key-map memory for the whole broker, bytes, split evenly across shards
    /// (log.cleaner.dedupe.buffer.size, default 134217728; `128MiB` works).
    #[arg(long, value_name = "SIZE", value_parser = units::bytes::<u64>)]
    pub log_cleaner_dedupe_buffer_size: Option<u64>,
    /// Cores the shards are pinned to, e.g. `2` or `0,2-3`: shard i runs on the i-th listed
    /// core (default: the cores this process may use, so several brokers on one host stack
    /// on core 0 unless each gets its own). Also the default shard count.
    #[arg(long, value_name = "LIST", value_parser = parse_cpu_list)]
    pub cpus: Option<CpuList>,
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

/// The same settings as they may appear in the TOML file (snake_case keys).
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<SocketAddr>,
    advertised_listener: Option<String>,
    data_dir: Option<PathBuf>,
    shards: Option<u32>,
    node_id: Option<i32>,
    log_level: Option<String>,
    admin_listen: Option<SocketAddr>,
    spin_before_park_us: Option<u64>,
    auto_create_topics: Option<bool>,
    num_partitions: Option<i32>,
    socket_request_max_bytes: Option<u32>,
    log_retention_check_interval_ms: Option<u64>,
    log_cleaner_backoff_ms: Option<u64>,
    log_cleaner_io_max_bytes_per_second: Option<f64>,
    log_cleaner_dedupe_buffer_size: Option<u64>,
    /// `--cpus` in the same syntax, e.g. `cpus = "0,2-3"`.
    cpus: Option<String>,
}

/// Why a configuration could not be built.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("bad config file {path}, line {line}: {message}")]
    Parse { path: PathBuf, line: usize, message: String },
    #[error("invalid setting {name}: {reason}")]
    Invalid { name: &'static str, reason: String },
}

/// The resolved configuration every shard receives.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub advertised_host: String,
    pub advertised_port: u16,
    pub data_dir: PathBuf,
    pub shards: u32,
    pub node_id: NodeId,
    pub log_level: Option<String>,
    pub admin_listen: Option<SocketAddr>,
    pub spin_before_park_us: u64,
    pub auto_create_topics: bool,
    pub num_partitions: i32,
    pub socket_request_max_bytes: u32,
    pub log_retention_check_interval_ms: u64,
    pub log_cleaner_backoff_ms: u64,
    /// `None`: unlimited.
    pub log_cleaner_io_max_bytes_per_second: Option<f64>,
    pub log_cleaner_dedupe_buffer_size: u64,
    /// Cores to pin shard i to (`cpus[i % len]`); `None`: the process's allowed cores.
    pub cpus: Option<Vec<usize>>,
}

impl ServeConfig {
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

    /// Merges defaults, the TOML file named by `--config` (if any) and the flags.
    /// `allowed_cores` is the default shard count.
    pub fn resolve(args: &ServeArgs, allowed_cores: u32) -> Result<Self, ConfigError> {
        let file = match &args.config {
            Some(path) => read_file(path)?,
            None => FileConfig::default(),
        };
        let listen = args
            .listen
            .or(file.listen)
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], KAFKA_PORT_DEFAULT)));
        let advertised = args.advertised_listener.clone().or(file.advertised_listener);
        let (advertised_host, advertised_port) = match advertised {
            Some(text) => parse_host_port(&text)?,
            None => (listen.ip().to_string(), listen.port()),
        };
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
        let socket_request_max_bytes = args
            .socket_request_max_bytes
            .or(file.socket_request_max_bytes)
            .unwrap_or(SOCKET_REQUEST_MAX_BYTES_DEFAULT);
        if socket_request_max_bytes < 64 {
            return Err(invalid("socket_request_max_bytes", "must be at least 64 bytes"));
        }
        let num_partitions = args.num_partitions.or(file.num_partitions).unwrap_or(1);
        if num_partitions < 1 {
            return Err(invalid("num_partitions", "must be at least 1"));
        }
        let log_retention_check_interval_ms = args
            .log_retention_check_interval_ms
            .or(file.log_retention_check_interval_ms)
            .unwrap_or(RETENTION_CHECK_INTERVAL_MS_DEFAULT);
        if log_retention_check_interval_ms == 0 {
            return Err(invalid("log_retention_check_interval_ms", "must be at least 1 ms"));
        }
        let log_cleaner_backoff_ms = args
            .log_cleaner_backoff_ms
            .or(file.log_cleaner_backoff_ms)
            .unwrap_or(LOG_CLEANER_BACKOFF_MS_DEFAULT);
        if log_cleaner_backoff_ms == 0 {
            return Err(invalid("log_cleaner_backoff_ms", "must be at least 1 ms"));
        }
        let log_cleaner_io_max_bytes_per_second =
            args.log_cleaner_io_max_bytes_per_second.or(file.log_cleaner_io_max_bytes_per_second);
        if log_cleaner_io_max_bytes_per_second.is_some_and(|r| r.is_nan() || r <= 0.0) {
            return Err(invalid(
                "log_cleaner_io_max_bytes_per_second",
                "must be a positive number of bytes per second",
            ));
        }
        let log_cleaner_dedupe_buffer_size = args
            .log_cleaner_dedupe_buffer_size
            .or(file.log_cleaner_dedupe_buffer_size)
            .unwrap_or(LOG_CLEANER_DEDUPE_BUFFER_BYTES_DEFAULT);
        if log_cleaner_dedupe_buffer_size < 1024 * 1024 {
            return Err(invalid("log_cleaner_dedupe_buffer_size", "must be at least 1 MiB"));
        }
        Ok(Self {
            listen,
            advertised_host,
            advertised_port,
            data_dir: args
                .data_dir
                .clone()
                .or(file.data_dir)
                .unwrap_or_else(|| PathBuf::from("shardlog-data")),
            shards,
            node_id: NodeId(args.node_id.or(file.node_id).unwrap_or(0)),
            log_level: args.log_level.clone().or(file.log_level),
            admin_listen: args.admin_listen.or(file.admin_listen),
            spin_before_park_us: args
                .spin_before_park_us
                .or(file.spin_before_park_us)
                .unwrap_or(SPIN_BEFORE_PARK_US_DEFAULT),
            auto_create_topics: args.auto_create_topics.or(file.auto_create_topics).unwrap_or(true),
            num_partitions,
            socket_request_max_bytes,
            log_retention_check_interval_ms,
            log_cleaner_backoff_ms,
            log_cleaner_io_max_bytes_per_second,
            log_cleaner_dedupe_buffer_size,
            cpus,
        })
    }
}

fn invalid(name: &'static str, reason: &str) -> ConfigError {
    ConfigError::Invalid { name, reason: reason.to_string() }
}

fn read_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
    toml::from_str(&text).map_err(|e| {
        // toml's own Display draws the line with a caret over several lines: keep one.
        let line = e.span().map_or(1, |span| text[..span.start].matches('\n').count() + 1);
        ConfigError::Parse { path: path.to_path_buf(), line, message: e.message().to_string() }
    })
}

/// Splits `host:port` (IPv6 hosts in brackets, as Kafka listeners write them).
fn parse_host_port(text: &str) -> Result<(String, u16), ConfigError> {
    let bad = || invalid("advertised_listener", &format!("expected host:port, got {text:?}"));
    let (host, port) = text.rsplit_once(':').ok_or_else(bad)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port: u16 = port.parse().map_err(|_| bad())?;
    if host.is_empty() || port == 0 {
        return Err(bad());
    }
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {

    #[test]
    fn cpu_lists_parse_like_taskset() {
        assert_eq!(parse_cpu_list("1"), Ok(CpuList(vec![1])));
        assert_eq!(parse_cpu_list("0,2-4"), Ok(CpuList(vec![0, 2, 3, 4])));
        assert_eq!(parse_cpu_list(" 3 , 1 "), Ok(CpuList(vec![3, 1])));
        for bad in ["", "a", "1-", "3-1", "1,1", "0-99999999", "-1"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad:?} accepted");
        }
        // --cpus sets the default shard count; --shards still wins.
        let args = ServeArgs { cpus: Some(CpuList(vec![0, 1, 2])), ..ServeArgs::default() };
        let cfg = ServeConfig::resolve(&args, 8).expect("resolve");
        assert_eq!((cfg.shards, cfg.cpus), (3, Some(vec![0, 1, 2])));
        let args = ServeArgs { cpus: Some(CpuList(vec![1])), shards: Some(2), ..args };
        assert_eq!(ServeConfig::resolve(&args, 8).expect("resolve").shards, 2);
    }

    use super::*;

    #[test]
    fn defaults_without_flags() {
        let cfg = ServeConfig::resolve(&ServeArgs::default(), 2).expect("defaults resolve");
        assert_eq!(cfg.listen, "127.0.0.1:9092".parse().expect("addr"));
        assert_eq!(cfg.advertised_host, "127.0.0.1");
        assert_eq!(cfg.advertised_port, 9092);
        assert_eq!(cfg.data_dir, PathBuf::from("shardlog-data"));
        assert_eq!(cfg.shards, 2);
        assert!(cfg.auto_create_topics);
    }

    #[test]
    fn flags_override_file_which_overrides_defaults() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("shardlog.toml");
        std::fs::write(&path, "shards = 3\nnode_id = 7\nlisten = \"127.0.0.1:19092\"\n")
            .expect("write");
        let args = ServeArgs { config: Some(path), shards: Some(1), ..ServeArgs::default() };
        let cfg = ServeConfig::resolve(&args, 2).expect("resolve");
        assert_eq!(cfg.shards, 1);
        assert_eq!(cfg.node_id, NodeId(7));
        assert_eq!(cfg.advertised_port, 19092);
    }

    #[test]
    fn unknown_file_keys_and_bad_values_are_rejected() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, "shardz = 3\n").expect("write");
        let args = ServeArgs { config: Some(path), ..ServeArgs::default() };
        assert!(matches!(ServeConfig::resolve(&args, 1), Err(ConfigError::Parse { .. })));
        let args = ServeArgs { shards: Some(0), ..ServeArgs::default() };
        assert!(matches!(ServeConfig::resolve(&args, 1), Err(ConfigError::Invalid { .. })));
        let args = ServeArgs { advertised_listener: Some("nohost".into()), ..ServeArgs::default() };
        assert!(ServeConfig::resolve(&args, 1).is_err());
    }

    #[test]
    fn file_errors_are_one_line_with_the_line_number() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, "shards = 1\nshardz = 3\n").expect("write");
        let args = ServeArgs { config: Some(path), ..ServeArgs::default() };
        let err = ServeConfig::resolve(&args, 1).expect_err("unknown key").to_string();
        assert!(!err.contains('\n') && err.contains("line 2") && err.contains("shardz"), "{err}");
    }

    #[test]
    fn unit_flags_take_plain_numbers_and_units() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let parse = |argv: &[&str]| {
            let argv = std::iter::once("serve").chain(argv.iter().copied());
            Cli::try_parse_from(argv).map(|c| c.serve)
        };
        let args = parse(&["--log-cleaner-backoff-ms", "15000", "--spin-before-park-us", "50"])
            .expect("plain numbers");
        assert_eq!(args.log_cleaner_backoff_ms, Some(15_000));
        assert_eq!(args.spin_before_park_us, Some(50));
        let args = parse(&[
            "--log-cleaner-backoff-ms",
            "15s",
            "--log-retention-check-interval-ms",
            "5m",
            "--spin-before-park-us",
            "1ms",
            "--socket-request-max-bytes",
            "100MiB",
            "--log-cleaner-dedupe-buffer-size",
            "64MiB",
            "--log-cleaner-io-max-bytes-per-second",
            "10MB",
        ])
        .expect("units");
        assert_eq!(args.log_cleaner_backoff_ms, Some(15_000));
        assert_eq!(args.log_retention_check_interval_ms, Some(300_000));
        assert_eq!(args.spin_before_park_us, Some(1000));
        assert_eq!(args.socket_request_max_bytes, Some(100 << 20));
        assert_eq!(args.log_cleaner_dedupe_buffer_size, Some(64 << 20));
        assert_eq!(args.log_cleaner_io_max_bytes_per_second, Some(1e7));
        let err = parse(&["--log-cleaner-backoff-ms", "15x"]).expect_err("bad unit");
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("unknown duration unit 'x'"), "{err}");
    }

    #[test]
    fn advertised_listener_parses_ipv6() {
        assert_eq!(parse_host_port("[::1]:9093").expect("parse"), ("::1".to_string(), 9093));
    }
}
