//! Partition logs: Kafka record batches in segment files (`.log`, sparse `.index`,
//! `.timeindex`) written with direct I/O, validated like Kafka's log validator, group-committed,
//! recovered after crashes, and read back through a per-shard batch cache.
//!
//! Lives on the partition's owner shard: one glommio executor owns a [`PartitionLog`] and
//! every call on it (`&self` with interior mutability; no borrow is held across `.await`).
//! The on-disk format and the flush/ack rule are in `docs/format.md`.
//!
//! Module map: [`batch`] (header parsing, CRC, patching), [`records`] (record walk,
//! decompression, batch builder), [`validate`] (produce-time checks), [`index`] (offset and
//! time indexes), [`segment`] (one segment, scanning), [`epoch`] (leader-epoch cache),
//! [`checkpoint`] (small checkpoint files), [`cache`] (per-shard batch cache), [`open_files`]
//! (per-shard bounded cache of open sealed-segment files), `log` (the
//! partition log: append, wait_committed, read, truncation), `writer` (group commit), `prealloc` (zero-filled space ahead of the active segment's end), `read`
//! and `recovery`, [`retention`] (time/size/log-start deletion through `.deleted` files), [`cleaner`]
//! (log compaction with crash-safe segment swaps), [`producer_state`] (idempotent producers'
//! sequence windows, pure) and `producers` (their snapshots and rebuild from the log),
//! [`txn_index`] (per-segment `.txnindex` files of aborted transactions, Kafka's format),
//! `replicated` (follower appends with the leader's offsets and epochs).

mod append;
pub mod batch;
pub mod cache;
pub mod checkpoint;
pub mod cleaner;
pub mod epoch;
pub mod error;
pub mod index;
mod log;
mod maintenance;
pub mod open_files;
mod prealloc;
pub mod producer_state;
mod producers;
mod read;
mod readahead;
pub mod records;
mod recovery;
mod replicated;
pub mod retention;
pub mod segment;
mod send_records;
pub mod txn_index;
pub mod validate;
mod writer;

pub use cache::BatchCache;
pub use cleaner::{CleanOptions, CleanOutcome, CleanStats};
pub use error::StorageError;
pub use log::PartitionLog;
pub use open_files::{OpenFiles, OpenFilesStats};
pub use replicated::ReplicaAppendInfo;
pub use retention::RetentionOutcome;
pub use send_records::SendRecords;

use crate::constants;
use crate::types::Offset;

/// A partition log on glommio DMA files, as the server uses it.
pub type DmaPartitionLog = PartitionLog<crate::io::dma::DmaFileSystem>;

/// Which timestamp a topic stores (`message.timestamp.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TimestampType {
    #[default]
    CreateTime,
    LogAppendTime,
}

/// When appended data is fsynced, and therefore what `wait_committed` promises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushPolicy {
    /// Every batch is fsynced before it is committed (group commit shares one write + fsync
    /// among all batches that arrived meanwhile). Survives power loss. The default.
    EveryBatch,
    /// Committed once the O_DIRECT write completed (survives a process crash); fsync at most
    /// this many ms later (plus at every segment roll and at close).
    IntervalMs(u64),
    /// Committed once the O_DIRECT write completed; fsync only at segment roll and close
    /// (rely on replication, as Kafka's default does).
    Never,
}

impl Default for FlushPolicy {
    /// Durable by default: group commit keeps the fsync cost small (see `perf/results/`).
    fn default() -> Self {
        FlushPolicy::EveryBatch
    }
}

/// Per-log configuration (Kafka topic configs). Replaced live by
/// [`PartitionLog::set_config`] when a topic's configs change.
#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub index_interval_bytes: u32,
    pub segment_index_bytes: u32,
    pub max_message_bytes: u32,
    pub timestamp_type: TimestampType,
    pub timestamp_before_max_ms: i64,
    pub timestamp_after_max_ms: i64,
    pub compacted: bool,
    pub flush: FlushPolicy,
    /// `cleanup.policy` contains `delete`: time and size retention apply.
    pub delete_retention_enabled: bool,
    /// `retention.ms`; negative = no time limit.
    pub retention_ms: i64,
    /// `retention.bytes`; negative = no size limit.
    pub retention_bytes: i64,
    /// `file.delete.delay.ms`: how long `.deleted` files linger before removal.
    pub file_delete_delay_ms: u64,
    /// `delete.retention.ms`: how long tombstones survive after the cleaner passed them.
    pub delete_retention_ms: i64,
    pub min_compaction_lag_ms: i64,
    pub max_compaction_lag_ms: i64,
    pub min_cleanable_dirty_ratio: f64,
    /// `producer.id.expiration.ms` (a broker config in Kafka): a producer id whose last batch
    /// is this old is forgotten by the retention pass.
    pub producer_id_expiration_ms: i64,
    /// Largest zero-filled preallocation step of the active segment under
    /// [`FlushPolicy::EveryBatch`] (0: off); see `storage::prealloc`.
    pub preallocate_bytes: u64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: constants::SEGMENT_BYTES_DEFAULT,
            segment_ms: constants::SEGMENT_MS_DEFAULT,
            index_interval_bytes: constants::INDEX_INTERVAL_BYTES_DEFAULT,
            segment_index_bytes: constants::SEGMENT_INDEX_BYTES_DEFAULT,
            max_message_bytes: constants::MAX_MESSAGE_BYTES_DEFAULT,
            timestamp_type: TimestampType::CreateTime,
            timestamp_before_max_ms: constants::MESSAGE_TIMESTAMP_BEFORE_MAX_MS_DEFAULT,
            timestamp_after_max_ms: constants::MESSAGE_TIMESTAMP_AFTER_MAX_MS_DEFAULT,
            compacted: false,
            flush: FlushPolicy::default(),
            delete_retention_enabled: true,
            retention_ms: constants::RETENTION_MS_DEFAULT,
            retention_bytes: -1,
            file_delete_delay_ms: constants::FILE_DELETE_DELAY_MS_DEFAULT,
            delete_retention_ms: constants::DELETE_RETENTION_MS_DEFAULT,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: constants::MIN_CLEANABLE_DIRTY_RATIO_DEFAULT,
            producer_id_expiration_ms: constants::PRODUCER_ID_EXPIRATION_MS_DEFAULT,
            preallocate_bytes: preallocate_bytes_default(),
        }
    }
}

/// The preallocation step: [`constants::LOG_PREALLOCATE_BYTES_DEFAULT`], or the
/// `SHARDLOG_PREALLOCATE_BYTES` environment variable (bytes, 0 = off) read once per process:
/// an operator's escape hatch and the A/B switch of `perf/durable.sh`.
#[must_use]
pub fn preallocate_bytes_default() -> u64 {
    static VALUE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *VALUE.get_or_init(|| {
        std::env::var("SHARDLOG_PREALLOCATE_BYTES")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(constants::LOG_PREALLOCATE_BYTES_DEFAULT)
    })
}

/// What `append` assigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: Offset,
    pub last_offset: Offset,
    pub log_end_offset: Offset,
    /// The stamped LogAppendTime, -1 for CreateTime topics.
    pub log_append_time_ms: i64,
    pub log_start_offset: Offset,
    /// An idempotent producer's retry of a batch already in the log: the offsets are the
    /// original's and nothing was appended.
    pub duplicate: bool,
}
