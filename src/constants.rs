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
/// Requests a connection may have decoded but not yet answered (pipelining depth). Kafka
/// clients use up to 5 in flight; beyond this the connection stops reading (back-pressure).
pub const CONNECTION_IN_FLIGHT_MAX: usize = 32;
/// Capacity of each cross-shard mesh channel (messages), per ordered pair of shards.
pub const MESH_CHANNEL_CAPACITY: usize = 1024;
/// Locked memory the broker asks for at start (glommio needs >= 8 MiB for its buffers).
pub const MEMLOCK_BYTES_WANTED: u64 = 512 * 1024 * 1024;
/// Locked memory below which glommio cannot start at all.
pub const MEMLOCK_BYTES_MIN: u64 = 8 * 1024 * 1024;
/// Open files the broker asks for (three descriptors per segment, thousands of partitions).
pub const NOFILE_WANTED: u64 = 1_048_576;
/// Open files below which the broker refuses to start.
pub const NOFILE_MIN: u64 = 4096;
/// Per-shard cache of recent batches, bytes.
pub const BATCH_CACHE_BYTES_PER_SHARD: usize = 64 * 1024 * 1024;
/// Upper bound on a Fetch long-poll, whatever the client asks (Kafka caps it by its
/// request timeout; a shard must not hold a waiter forever).
pub const FETCH_MAX_WAIT_MS_CAP: i32 = 60_000;
/// How long shutdown waits for in-flight requests and connections to drain.
pub const SHUTDOWN_DRAIN_TIMEOUT_MS: u64 = 10_000;
/// How often a shard checks the process-wide shutdown flag set by the signal thread.
pub const SHUTDOWN_POLL_INTERVAL_MS: u64 = 50;
/// Default `spin_before_park` of every executor (design.md section 5: without it a
/// cross-shard hop costs milliseconds at p99).
pub const SPIN_BEFORE_PARK_US_DEFAULT: u64 = 50;

// ---------------------------------------------------------------- relations
const _: () = assert!(MEMLOCK_BYTES_MIN <= MEMLOCK_BYTES_WANTED);
const _: () = assert!(NOFILE_MIN <= NOFILE_WANTED);
const _: () = assert!(CONNECTION_IN_FLIGHT_MAX >= 5); // the Java producer's default in-flight
const _: () = assert!(SEGMENT_INDEX_BYTES_DEFAULT as u64 <= SEGMENT_BYTES_DEFAULT);
const _: () = assert!((MAX_MESSAGE_BYTES_DEFAULT as u64) < SEGMENT_BYTES_DEFAULT);
