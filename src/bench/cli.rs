//! Command-line arguments of `shardlog bench` and their validation.
//!
//! Pure data, no I/O: parsed on the main thread before any executor starts. Every
//! size and count is checked here so that bad input becomes one clear error line
//! ([`CommonArgs::validate`], [`ProducerArgs::validate`]) instead of a failure deep inside
//! a shard; a refused value exits with status 2 like a clap usage error.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use crate::cli::{units, ClientArgs, UsageError};
use crate::constants::{
    BENCH_BATCH_BYTES_MAX, BENCH_CONNECTIONS_MAX, BENCH_IN_FLIGHT_MAX, BENCH_RECORD_BYTES_MAX,
};

/// `shardlog bench`: a Kafka-protocol load generator for any Kafka-compatible broker.
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: BenchCommand,
}

/// The four modes of the load generator.
#[derive(Subcommand, Debug, Clone)]
pub enum BenchCommand {
    /// Produce records as fast as possible (closed loop) or at `--rate` (open loop).
    Produce(ProduceArgs),
    /// Consume records by assigning partitions directly (or through `--group`).
    Consume(ConsumeArgs),
    /// Produce and consume at once; latency is produce-intended-time to consume time.
    E2e(E2eArgs),
    /// Draw latency-by-percentile curves of one or more `--json` results as one SVG.
    Plot(PlotArgs),
}

/// Compression codec of produced batches.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompressionArg {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

/// Where a consumer starts when it assigns partitions directly.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFrom {
    Earliest,
    Latest,
}

/// Options shared by every mode that talks to a broker.
#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    /// The broker (`--bootstrap-server`, `--bootstrap`, `-b`), accepted anywhere on the line.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Topic to use.
    #[arg(long, default_value = "shardlog-bench")]
    pub topic: String,
    /// Partitions; when given, the topic is created with this count if it is missing.
    #[arg(long)]
    pub partitions: Option<i32>,
    /// Replication factor used when creating the topic.
    #[arg(long, default_value_t = 1)]
    pub replication_factor: i16,
    /// Topic config used when creating the topic (repeatable), e.g. flush.messages=1.
    #[arg(long = "topic-config", value_name = "KEY=VALUE")]
    pub topic_configs: Vec<String>,
    /// Stop after this long (after warm-up): `10s`, `2m`, `500ms`, or plain seconds.
    #[arg(long, value_name = "DURATION", value_parser = units::seconds)]
    pub duration: Option<f64>,
    /// Stop after this many records (measured, after warm-up).
    #[arg(long)]
    pub records: Option<u64>,
    /// Load before measuring starts (`5s`, or plain seconds); its latencies are discarded.
    #[arg(long, default_value = "0", value_name = "DURATION", value_parser = units::seconds)]
    pub warmup: f64,
    /// TCP connections per broker (and per executor).
    #[arg(long, default_value_t = 1)]
    pub connections: usize,
    /// Client executors (threads, one per core of the allowed CPU set).
    #[arg(long, default_value_t = 1)]
    pub cpus: usize,
    /// Write the HdrHistogram percentile distribution (.hgrm) to this file.
    #[arg(long)]
    pub hgrm: Option<PathBuf>,
    /// Write a machine-readable result to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Label of this run in JSON results and plots.
    #[arg(long)]
    pub label: Option<String>,
    /// No live progress line.
    #[arg(long)]
    pub quiet: bool,
    /// How to reach the brokers (Kafka's security.protocol): PLAINTEXT, SSL, SASL_PLAINTEXT or
    /// SASL_SSL. TLS runs on the client's executors, as the broker runs it on its shards.
    #[arg(long, default_value = "PLAINTEXT", value_name = "PROTOCOL")]
    pub security_protocol: String,
    /// PEM file of the CA the brokers' certificates must chain to (SSL, SASL_SSL).
    #[arg(long, value_name = "FILE")]
    pub ssl_ca: Option<PathBuf>,
    /// SASL mechanism (SASL_*): PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    #[arg(long, default_value = "SCRAM-SHA-512", value_name = "MECHANISM")]
    pub sasl_mechanism: String,
    /// SASL user (SASL_*).
    #[arg(long, value_name = "NAME")]
    pub sasl_username: Option<String>,
    /// SASL password (SASL_*).
    #[arg(long, value_name = "PASSWORD")]
    pub sasl_password: Option<String>,
}

/// Options of the producing side (`produce` and `e2e`).
#[derive(Args, Debug, Clone)]
pub struct ProducerArgs {
    /// Bytes of each record value (`1KiB` works).
    #[arg(long, default_value = "1024", value_name = "SIZE", value_parser = units::bytes::<usize>)]
    pub record_size: usize,
    /// Bytes of each record key (0 = no key).
    #[arg(long, default_value = "0", value_name = "SIZE", value_parser = units::bytes::<usize>)]
    pub key_size: usize,
    /// Distinct keys (records are spread over partitions by key); 0 = round robin.
    #[arg(long, default_value_t = 0)]
    pub keys: u64,
    /// Target bytes of one partition batch (Kafka's batch.size; `16KiB` works).
    #[arg(long, default_value = "16384", value_name = "SIZE", value_parser = units::bytes::<usize>)]
    pub batch_bytes: usize,
    /// How long a partial batch may wait for more records, ms (Kafka's linger.ms).
    #[arg(long, default_value = "0", value_name = "MS", value_parser = units::millis_f64)]
    pub linger_ms: f64,
    /// Compression codec.
    #[arg(long, value_enum, default_value_t = CompressionArg::None)]
    pub compression: CompressionArg,
    /// Acks: 0, 1 or -1 (all).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub acks: i16,
    /// Produce requests in flight per connection.
    #[arg(long, default_value_t = 5)]
    pub in_flight: usize,
    /// Records per second in total (open loop, latency from intended send time);
    /// absent = closed loop at maximum throughput.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Idempotent producer (Kafka's enable.idempotence=true): each connection gets a
    /// producer id with InitProducerId and numbers its batches per partition. No retries:
    /// a failed batch leaves a gap the broker then refuses as out of order.
    #[arg(long)]
    pub idempotent: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ProduceArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub producer: ProducerArgs,
}

/// Options of the consuming side.
#[derive(Args, Debug, Clone)]
pub struct ConsumerArgs {
    /// Where to start reading when partitions are assigned directly.
    #[arg(long, value_enum, default_value_t = StartFrom::Earliest)]
    pub from: StartFrom,
    /// Join this consumer group instead of assigning partitions: start from its committed
    /// offsets (else `--from`), commit every second and at the end.
    #[arg(long)]
    pub group: Option<String>,
    /// Stop once every partition reaches the high watermark seen at start.
    #[arg(long)]
    pub to_end: bool,
    /// Fetch max_bytes per request (`8MiB` works).
    #[arg(long, default_value = "8MiB", value_name = "SIZE", value_parser = units::bytes::<i32>)]
    pub fetch_max_bytes: i32,
    /// Fetch max_wait_ms.
    #[arg(long, default_value = "100", value_name = "MS", value_parser = units::millis::<i32>)]
    pub fetch_max_wait_ms: i32,
}

#[derive(Args, Debug, Clone)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub consumer: ConsumerArgs,
}

#[derive(Args, Debug, Clone)]
pub struct E2eArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub producer: ProducerArgs,
    /// Fetch max_wait_ms of the consuming side.
    #[arg(long, default_value = "100", value_name = "MS", value_parser = units::millis::<i32>)]
    pub fetch_max_wait_ms: i32,
}

#[derive(Args, Debug, Clone)]
pub struct PlotArgs {
    /// Result files written with `--json` (or `.hgrm` files, e.g. a broker's
    /// `/v1/histograms/<api>`).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// SVG file to write.
    #[arg(long, short)]
    pub output: PathBuf,
    /// Chart title.
    #[arg(long, default_value = "Latency by percentile")]
    pub title: String,
}

fn check(ok: bool, msg: impl FnOnce() -> String) -> Result<(), UsageError> {
    if ok {
        Ok(())
    } else {
        Err(UsageError(format!("invalid option: {}", msg())))
    }
}

impl CommonArgs {
    pub fn validate(&self) -> Result<(), UsageError> {
        check(!self.topic.is_empty() && self.topic.len() <= 249, || {
            "--topic must have 1 to 249 characters".into()
        })?;
        if let Some(p) = self.partitions {
            check(p >= 1, || format!("--partitions must be >= 1, got {p}"))?;
        }
        check(self.replication_factor >= 1, || "--replication-factor must be >= 1".into())?;
        for c in &self.topic_configs {
            check(c.split_once('=').is_some_and(|(k, _)| !k.is_empty()), || {
                format!("--topic-config must be KEY=VALUE, got '{c}'")
            })?;
        }
        if let Some(d) = self.duration {
            check(d.is_finite() && d > 0.0, || format!("--duration must be > 0, got {d}"))?;
        }
        if let Some(r) = self.records {
            check(r >= 1, || "--records must be >= 1".into())?;
        }
        check(self.warmup.is_finite() && self.warmup >= 0.0, || "--warmup must be >= 0".into())?;
        check((1..=BENCH_CONNECTIONS_MAX).contains(&self.connections), || {
            format!("--connections must be in 1..={BENCH_CONNECTIONS_MAX}")
        })?;
        check(self.cpus >= 1 && self.cpus <= 256, || "--cpus must be in 1..=256".into())?;
        Ok(())
    }
}

impl ProducerArgs {
    pub fn validate(&self) -> Result<(), UsageError> {
        check(self.record_size <= BENCH_RECORD_BYTES_MAX, || {
            format!("--record-size must be <= {BENCH_RECORD_BYTES_MAX}, got {}", self.record_size)
        })?;
        check(self.key_size <= BENCH_RECORD_BYTES_MAX, || {
            format!("--key-size must be <= {BENCH_RECORD_BYTES_MAX}")
        })?;
        check(self.keys == 0 || self.key_size >= 8, || {
            "--keys needs --key-size >= 8 (the key carries its number)".into()
        })?;
        check((1..=BENCH_BATCH_BYTES_MAX).contains(&self.batch_bytes), || {
            format!("--batch-bytes must be in 1..={BENCH_BATCH_BYTES_MAX}")
        })?;
        check(self.linger_ms.is_finite() && self.linger_ms >= 0.0, || {
            "--linger-ms must be >= 0".into()
        })?;
        check(matches!(self.acks, -1..=1), || {
            format!("--acks must be 0, 1 or -1, got {}", self.acks)
        })?;
        check((1..=BENCH_IN_FLIGHT_MAX).contains(&self.in_flight), || {
            format!("--in-flight must be in 1..={BENCH_IN_FLIGHT_MAX}")
        })?;
        if let Some(r) = self.rate {
            check(r.is_finite() && r > 0.0, || format!("--rate must be > 0, got {r}"))?;
        }
        Ok(())
    }
}
