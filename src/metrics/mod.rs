//! Broker metrics: per-shard recorders, their merge at scrape time, and the admin HTTP
//! endpoint that serves them (Prometheus text, `.hgrm` histograms, a JSON view for
//! `shardlog top`).
//!
//! Where things live:
//! - Recording happens on every shard, into that shard's thread-local [`ShardRecorder`]
//!   (plain `Cell`s and `RefCell`s: no lock, no atomic, no cross-shard traffic on the hot
//!   path). The hook functions below ([`record`], [`count`], [`RequestTimer`], ...) are
//!   what the server and storage call; they do nothing on a thread that is not a shard,
//!   and compile to nothing without the `metrics` cargo feature.
//! - Every [`METRICS_PUBLISH_INTERVAL_MS`](crate::constants::METRICS_PUBLISH_INTERVAL_MS)
//!   each shard's background task publishes its recordings into its [`hub`] slot (one
//!   uncontended mutex per shard, taken off the hot path), so a scrape sees values at
//!   most one interval old.
//! - A scrape (on the shard running the admin listener) merges all slots: counters and
//!   gauges are summed, HDR histograms added, and the result rendered.
//!
//! Invariants: a recorder is only touched by its own thread; histograms are microsecond
//! HdrHistograms with 3 significant digits, saturating at
//! [`METRICS_LATENCY_US_MAX`](crate::constants::METRICS_LATENCY_US_MAX).

pub mod allocator;
pub mod cluster;
pub mod hgrm;
pub mod hooks;
pub mod http;
pub mod hub;
pub mod leadership;
pub mod lso;
pub mod prom;
pub mod reassign;
mod recorder;
pub mod replication;
pub mod shard_task;
pub mod snapshot;
pub mod stall;
mod timer;
pub mod view;

use std::time::Duration;

pub use hooks::{
    duplicate_batch_dropped, fetched, log_offline, log_out_of_space, owned_partitions, produced,
    producers_tracked,
};
pub use hooks::{open_transactions, txn_marker_written};
pub use recorder::{LatencyHist, ShardRecorder};
pub use timer::{hop, RequestTimer};

/// Stages a request's latency is split into. `Total` runs from the moment the whole
/// request frame has been read to the moment its response has been written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// Frame read → response written.
    Total = 0,
    /// Waiting before work starts: frame read → handler start, plus response ready →
    /// writer free (responses leave in request order).
    Queue = 1,
    /// Cross-shard round trip to a partition's owner shard, as the connection's shard
    /// sees it (includes the owner's work: compare with `storage`).
    Hop = 2,
    /// Storage append on the owner shard, including the wait for the flush policy.
    Storage = 3,
    /// Writing the response to the socket.
    Send = 4,
    /// Log writer (recorded under Produce, one sample per write job, not per request): how
    /// long the oldest batch of a write waited, staged, for the write before it (group
    /// commit's wait for the in-flight write).
    WriteWait = 5,
    /// Log writer: the O_DIRECT write itself.
    Write = 6,
    /// Log writer: the fdatasync after the write (fsync-every-batch policy, or a due sync).
    Fdatasync = 7,
    /// Log writer → waiting appender: from the writer publishing a committed offset to the
    /// produce handler waiting on it running again (reactor wake-up and scheduling). One
    /// sample per append that had to wait.
    Notify = 8,
}

impl Stage {
    pub const COUNT: usize = 9;
    pub const ALL: [Stage; Stage::COUNT] = [
        Stage::Total,
        Stage::Queue,
        Stage::Hop,
        Stage::Storage,
        Stage::Send,
        Stage::WriteWait,
        Stage::Write,
        Stage::Fdatasync,
        Stage::Notify,
    ];
    /// The log writer's stages, in the order a durable acknowledgement passes them.
    pub const WRITER: [Stage; 4] =
        [Stage::WriteWait, Stage::Write, Stage::Fdatasync, Stage::Notify];

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Stage::Total => "total",
            Stage::Queue => "queue",
            Stage::Hop => "hop",
            Stage::Storage => "storage",
            Stage::Send => "send",
            Stage::WriteWait => "write_wait",
            Stage::Write => "write",
            Stage::Fdatasync => "fdatasync",
            Stage::Notify => "notify",
        }
    }

    /// Parses a stage name as written by [`Stage::name`].
    #[must_use]
    pub fn parse(name: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// Monotonic per-shard counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    /// Requests read (any API).
    Requests = 0,
    /// Request frame bytes read.
    RequestBytes = 1,
    /// Response frame bytes written.
    ResponseBytes = 2,
    /// Connections accepted.
    ConnectionsAccepted = 3,
    /// Cross-shard messages sent by this shard.
    MeshMessages = 4,
    /// Storage flushes (fsyncs) completed.
    StorageFlushes = 5,
    /// Appends covered by those flushes (sum of group-commit sizes).
    GroupCommitAppends = 6,
    /// Reads served from the batch cache.
    CacheHits = 7,
    /// Reads that went to disk.
    CacheMisses = 8,
    /// Segments retention deleted (time, size or log start).
    RetentionSegmentsDeleted = 9,
    /// Bytes of those segments.
    RetentionBytesDeleted = 10,
    /// Log-cleaner passes that cleaned a log.
    CleanerRuns = 11,
    /// Segments the cleaner rewrote.
    CleanerSegmentsRewritten = 12,
    /// Bytes the cleaner removed (size before minus size after).
    CleanerBytesReclaimed = 13,
    /// Bytes the cleaner read and wrote (what `log.cleaner.io.max.bytes.per.second` limits).
    CleanerIoBytes = 14,
    /// Idempotent producers' retried batches answered from the producer state, not written.
    DuplicateBatchesDropped = 15,
    /// Transaction markers written: ABORT (issue 17).
    TxnAbortMarkers = 16,
    /// Transaction markers written: COMMIT.
    TxnCommitMarkers = 17,
    /// Partitions moved between this broker's shards by hand (`shardlog shards move`),
    /// counted on shard 0 (`server::shard_move`).
    ShardMovesManual = 18,
    /// Partitions moved between shards by the automatic balancer.
    ShardMovesAuto = 19,
    /// Record bytes produced into partitions this shard owns (counted on the owner shard,
    /// unlike `RequestBytes`, which counts on the connection's shard).
    OwnedBytesIn = 20,
    /// Record bytes fetched from partitions this shard owns (owner shard).
    OwnedBytesOut = 21,
    /// Shared device flushes (`io::device_flush`): one fdatasync covering the durable
    /// overwrites of several logs.
    DeviceFlushes = 22,
    /// Log syncs those device flushes covered.
    DeviceFlushSyncs = 23,
    /// Requests (or parts of requests) the authorizer denied (`server::authz`).
    AuthorizationDenials = 24,
}

impl Count {
    pub const COUNT: usize = 25;
    pub const ALL: [Count; Count::COUNT] = [
        Count::Requests,
        Count::RequestBytes,
        Count::ResponseBytes,
        Count::ConnectionsAccepted,
        Count::MeshMessages,
        Count::StorageFlushes,
        Count::GroupCommitAppends,
        Count::CacheHits,
        Count::CacheMisses,
        Count::RetentionSegmentsDeleted,
        Count::RetentionBytesDeleted,
        Count::CleanerRuns,
        Count::CleanerSegmentsRewritten,
        Count::CleanerBytesReclaimed,
        Count::CleanerIoBytes,
        Count::DuplicateBatchesDropped,
        Count::TxnAbortMarkers,
        Count::TxnCommitMarkers,
        Count::ShardMovesManual,
        Count::ShardMovesAuto,
        Count::OwnedBytesIn,
        Count::OwnedBytesOut,
        Count::DeviceFlushes,
        Count::DeviceFlushSyncs,
        Count::AuthorizationDenials,
    ];
}

/// Per-shard gauges (current values; summed across shards at scrape).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    ConnectionsActive = 0,
    RequestsInFlight = 1,
    /// Cross-shard messages sent and not yet answered.
    MeshQueueDepth = 2,
    /// Partitions whose log this shard owns.
    Partitions = 3,
    /// Owned partitions this broker leads.
    Leaders = 4,
    /// The largest dirty ratio, in percent, among this shard's compacted logs at the last
    /// cleaner check (Kafka's `max-dirty-percent`; the scrape shows the max over shards).
    CleanerMaxDirtyPercent = 5,
    /// Producer ids with sequence state in this shard's partitions (one per partition they
    /// wrote to).
    ProducerIds = 6,
    /// Logs whose writer waits for disk space (ENOSPC); they resume by themselves.
    LogsOutOfSpace = 7,
    /// Logs offline (read-only until reopened) after an I/O error on one of their files.
    LogsOffline = 8,
    /// Open transactions (Ongoing, PrepareCommit, PrepareAbort) of the transactional ids
    /// this shard coordinates.
    OpenTransactions = 9,
    /// Bytes held by this shard's batch cache (bounded by `serve --cache-bytes`), so
    /// memory watchers can tell the bounded cache from growth elsewhere.
    BatchCacheBytes = 10,
    /// Partition moves between this broker's shards under way (0 or 1; shard 0).
    ShardMovesInProgress = 11,
}

impl Level {
    pub const COUNT: usize = 12;
    pub const ALL: [Level; Level::COUNT] = [
        Level::ConnectionsActive,
        Level::RequestsInFlight,
        Level::MeshQueueDepth,
        Level::Partitions,
        Level::Leaders,
        Level::CleanerMaxDirtyPercent,
        Level::ProducerIds,
        Level::LogsOutOfSpace,
        Level::LogsOffline,
        Level::OpenTransactions,
        Level::BatchCacheBytes,
        Level::ShardMovesInProgress,
    ];
}

/// Runs `f` on this thread's recorder, if this thread is a shard with metrics on.
#[inline]
fn with<F: FnOnce(&ShardRecorder)>(f: F) {
    #[cfg(feature = "metrics")]
    recorder::with_local(f);
    #[cfg(not(feature = "metrics"))]
    let _ = f;
}

/// Records one latency sample of `api_key` at `stage`.
#[inline]
pub fn record(api_key: i16, stage: Stage, elapsed: Duration) {
    with(|r| r.record(api_key, stage, elapsed));
}

/// Adds `n` to a shard counter.
#[inline]
pub fn count(counter: Count, n: u64) {
    with(|r| r.count(counter, n));
}

/// Moves a shard gauge by `delta`.
#[inline]
pub fn adjust(level: Level, delta: i64) {
    with(|r| r.adjust(level, delta));
}

/// Sets a shard gauge.
#[inline]
pub fn set(level: Level, value: i64) {
    with(|r| r.set(level, value));
}

/// Bytes and records produced into `topic` (counted on the partition's owner shard).
#[inline]
pub fn topic_in(topic: &str, bytes: u64, records: u64) {
    with(|r| r.topic_in(topic, bytes, records));
}

/// Bytes a client sent (produce) or was sent (fetch) on this shard, and the throttle time
/// its request got (0: not throttled). Counted on the connection's shard.
#[inline]
pub fn client_quota(kind: crate::types::QuotaKind, client_id: &str, bytes: u64, throttle_ms: u64) {
    with(|r| r.client_quota(kind, client_id, bytes, throttle_ms));
}

/// Bytes and records fetched from `topic` (counted on the partition's owner shard).
#[inline]
pub fn topic_out(topic: &str, bytes: u64, records: u64) {
    with(|r| r.topic_out(topic, bytes, records));
}

/// One storage flush (write + fsync) that covered `appends` appends.
#[inline]
pub fn flush(elapsed: Duration, appends: u64) {
    with(|r| r.flush(elapsed, appends));
}

/// One shared device flush that covered `syncs` log syncs (`io::device_flush`).
#[inline]
pub fn device_flush(syncs: u64) {
    with(|r| {
        r.count(Count::DeviceFlushes, 1);
        r.count(Count::DeviceFlushSyncs, syncs);
    });
}

/// One log-writer stage sample ([`Stage::WRITER`]), recorded under Produce.
#[inline]
pub fn writer_stage(stage: Stage, elapsed: Duration) {
    with(|r| r.record(0, stage, elapsed));
}

/// One batch-cache lookup.
#[inline]
pub fn cache(hit: bool) {
    with(|r| r.count(if hit { Count::CacheHits } else { Count::CacheMisses }, 1));
}

/// Sets a consumer group's lag on one partition (log end offset − committed offset).
pub fn consumer_lag(group: &str, topic: &str, partition: i32, lag: i64) {
    with(|r| r.consumer_lag(group, topic, partition, lag));
}

/// Microseconds of `d`, saturating.
#[must_use]
pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Name of a Kafka API key as Kafka spells it (`Produce`, `Fetch`, ...), or `api_<n>`.
#[must_use]
pub fn api_name(api_key: i16) -> String {
    match kafka_protocol::messages::ApiKey::try_from(api_key) {
        Ok(api) => format!("{api:?}"),
        Err(()) => format!("api_{api_key}"),
    }
}

/// The API key of a name written by [`api_name`] (case-insensitive) or a number.
#[must_use]
pub fn api_key_of(name: &str) -> Option<i16> {
    if let Ok(n) = name.parse::<i16>() {
        return Some(n);
    }
    (0..=recorder::API_KEY_MAX).find(|k| api_name(*k).eq_ignore_ascii_case(name))
}
