//! Every hard limit and default of the broker in one place, each with its unit in the name.
//!
//! Lives on every shard (plain constants). Relations between limits are checked at compile
//! time at the bottom of the file, so changing one limit cannot silently break another.
//! Each subsystem keeps its limits in its own section; add new ones to your section.

// ---------------------------------------------------------------- storage
/// Kafka's `segment.bytes` default: 1 GiB.
pub const SEGMENT_BYTES_DEFAULT: u64 = 1024 * 1024 * 1024;
/// Kafka's `segment.ms` default: 7 days.
pub const SEGMENT_MS_DEFAULT: i64 = 7 * 24 * 60 * 60 * 1000;
/// Kafka's `index.interval.bytes` default.
pub const INDEX_INTERVAL_BYTES_DEFAULT: u32 = 4096;
/// Kafka's `segment.index.bytes` default: 10 MiB.
pub const SEGMENT_INDEX_BYTES_DEFAULT: u32 = 10 * 1024 * 1024;
/// Kafka's `max.message.bytes` default (1 MiB + 12 bytes of log overhead).
pub const MAX_MESSAGE_BYTES_DEFAULT: u32 = 1_048_588;
/// Direct I/O alignment: every O_DIRECT write starts and ends on this boundary.
pub const DIRECT_IO_ALIGNMENT_BYTES: u64 = 4096;

// ---------------------------------------------------------------- server
/// Kafka's `socket.request.max.bytes` default: 100 MiB.
pub const SOCKET_REQUEST_MAX_BYTES_DEFAULT: u32 = 100 * 1024 * 1024;
/// Default Kafka listener port.
pub const KAFKA_PORT_DEFAULT: u16 = 9092;

// ---------------------------------------------------------------- bench
/// Largest record value or key the load generator builds.
pub const BENCH_RECORD_BYTES_MAX: usize = 1024 * 1024;
/// Largest partition batch the load generator builds (Kafka's default max request is 1 MiB).
pub const BENCH_BATCH_BYTES_MAX: usize = 1024 * 1024;
/// Largest produce request the load generator sends (all partition batches together).
pub const BENCH_REQUEST_BYTES_MAX: usize = 8 * 1024 * 1024;
/// Connections per broker per executor.
pub const BENCH_CONNECTIONS_MAX: usize = 64;
/// Requests in flight per connection.
pub const BENCH_IN_FLIGHT_MAX: usize = 64;
/// Largest response frame the load generator accepts.
pub const BENCH_RESPONSE_BYTES_MAX: usize = 256 * 1024 * 1024;
/// Highest latency the histograms record: one hour in microseconds.
pub const BENCH_LATENCY_US_MAX: u64 = 3_600_000_000;

// ---------------------------------------------------------------- relations
const _: () = assert!(SEGMENT_INDEX_BYTES_DEFAULT as u64 <= SEGMENT_BYTES_DEFAULT);
const _: () = assert!((MAX_MESSAGE_BYTES_DEFAULT as u64) < SEGMENT_BYTES_DEFAULT);
const _: () = assert!(BENCH_BATCH_BYTES_MAX <= BENCH_REQUEST_BYTES_MAX);
const _: () = assert!(BENCH_REQUEST_BYTES_MAX <= BENCH_RESPONSE_BYTES_MAX);
