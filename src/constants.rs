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
/// Kafka's `message.timestamp.before.max.ms` default (no lower bound).
pub const MESSAGE_TIMESTAMP_BEFORE_MAX_MS_DEFAULT: i64 = i64::MAX;
/// Kafka 4.0's `message.timestamp.after.max.ms` default: 1 hour (KIP-1030).
pub const MESSAGE_TIMESTAMP_AFTER_MAX_MS_DEFAULT: i64 = 60 * 60 * 1000;
/// Appended bytes of one log not yet handed to a completed write; appends past it wait
/// (back-pressure) in call order.
pub const LOG_UNWRITTEN_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Largest single write the log writer issues; larger backlogs go in several writes.
pub const LOG_WRITE_BYTES_MAX: usize = 4 * 1024 * 1024;
/// O_DIRECT writes one log keeps in flight (they never share a page).
pub const LOG_WRITES_IN_FLIGHT_MAX: usize = 2;
/// Largest zero-filled preallocation step of an active segment under fsync-every-batch
/// (`storage::prealloc`): appends then overwrite written extents inside the file size, so
/// their fdatasync flushes data only, without an ext4 journal commit for the size change
/// (fio: 0.24–2.4 ms against 20–70 µs, perf/results/2026-12-01-durable-latency.md).
/// 0 turns preallocation off. Overridden by `SHARDLOG_PREALLOCATE_BYTES` (tuning.md).
/// Each step's zeros compete with the appends at the device, so a large step makes a
/// stall as large: at 66,000 records/s over 8 partitions p99 was 6.1 ms with 2 MiB, 9.9 ms
/// with 8 MiB and 38 ms with 32 MiB; at 5,000 and 10,000 records/s 2 MiB and 8 MiB did
/// the same (perf/results/2026-12-03-device-flush.md).
pub const LOG_PREALLOCATE_BYTES_DEFAULT: u64 = 2 * 1024 * 1024;
/// Shared device flushes (`io::device_flush`) in flight per device and shard: one lets
/// every caller that arrives during it share the next; more let the device work on
/// several (this virtio disk did 6,600 serial flushes a second and 8,400 with two at once,
/// fio) at the cost of less sharing.
pub const DEVICE_FLUSHES_IN_FLIGHT_MAX: usize = 2;
/// First (smallest) preallocation step of a segment; each later step is as large as the
/// segment already is, up to the configured step, so idle partitions cost little disk.
pub const LOG_PREALLOCATE_BYTES_MIN: u64 = 256 * 1024;
/// Per-shard bound on open sealed-segment files (`storage::open_files`): finalized sealed
/// segments are opened on first read and the least recently used idle one is closed past
/// this many. Active segments stay open outside the bound (one per partition). Larger: fewer
/// re-opens (one open syscall each, see perf/results/2026-12-01-lazy-fds.md) for consumers
/// reading many old segments; smaller: fewer file descriptors. Overridden by
/// `SHARDLOG_SEGMENT_OPEN_FILES_MAX` (tuning.md).
pub const LOG_SEGMENT_OPEN_FILES_MAX_DEFAULT: usize = 1024;
/// The least default per-shard cache of recent batches (`serve --cache-bytes`), and the
/// default where the host's memory cannot be read.
pub const BATCH_CACHE_BYTES_DEFAULT: u64 = 64 * 1024 * 1024;
/// Without `--cache-bytes`, the shards' caches together may hold this fraction (1/N) of the
/// memory the process may use (`io::host::memory_bytes`): O_DIRECT leaves no page cache,
/// so this cache is what serves a consumer catching up on data it read before (Kafka has the
/// whole page cache there; tuning.md, "read cache").
pub const BATCH_CACHE_MEMORY_DIVISOR: u64 = 8;
/// Smallest `--cache-bytes`: below it a cache cannot hold a read-ahead.
pub const BATCH_CACHE_BYTES_MIN: u64 = 1024 * 1024;
/// What one batch in the batch cache costs beyond its own bytes, charged against the cache's
/// bound so the bound holds the memory: its 64-byte slot in its log's sorted queue and its
/// 24-byte slot in the eviction queue, each queue up to half empty after growing or before
/// shrinking. (Until chunks: 192, for a B-tree slot, a `Bytes` header and malloc rounding per
/// batch; perf/results/2026-12-02-rss.md.)
pub const BATCH_CACHE_ENTRY_OVERHEAD_BYTES: usize = 160;
/// Largest chunk the batch cache copies small batches into (a cache uses 1/64 of its bound,
/// up to this). Eviction frees a chunk whole (issue 19).
pub const CACHE_CHUNK_BYTES_MAX: usize = 256 * 1024;
/// Batches up to this size are copied into the cache's chunks; larger ones keep their own
/// allocation, which the allocator frees whole anyway, and are not copied again on a read.
pub const CACHE_INLINE_MAX_BYTES: usize = 16 * 1024;
/// A read that ends with a disk read of at least this many bytes starts a read-ahead of the
/// next chunk (catch-up consumers; tailing ones are served from the cache).
pub const READAHEAD_MIN_READ_BYTES: usize = 256 * 1024;
/// Read-ahead keeps this many of the reader's requests' worth of data ahead of it.
pub const READAHEAD_REQUESTS: usize = 4;
/// Largest read-ahead per log: `READAHEAD_REQUESTS` times the request size, capped here.
pub const READAHEAD_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Smallest disk read issued by the reader (whole batches are then cut out of it).
pub const LOG_READ_CHUNK_BYTES_MIN: usize = 64 * 1024;
/// `log.dir.reserved.bytes` default (Shardlog's own): free space of the data directory kept
/// for the broker's own writes (consumer offsets and group metadata, the metadata log,
/// segment rolls): client produce is refused with KAFKA_STORAGE_ERROR below it.
pub const LOG_DIR_RESERVED_BYTES_DEFAULT: u64 = 64 * 1024 * 1024;
/// How often each shard measures the data directory's free space (one statvfs).
pub const DISK_SPACE_CHECK_INTERVAL_MS: u64 = 1000;
/// How often a log's writer retries its writes while the disk is full (ENOSPC).
pub const DISK_FULL_RETRY_MS: u64 = 1000;
/// Bound on a decompressed batch during validation (zip-bomb guard).
pub const DECOMPRESSED_BATCH_BYTES_MAX: usize = 64 * 1024 * 1024;
/// Default `flush.ms` for `FlushPolicy::IntervalMs` when chosen without a value.
pub const LOG_FLUSH_INTERVAL_MS_DEFAULT: u64 = 1000;
/// Kafka's `retention.ms` default: 7 days.
pub const RETENTION_MS_DEFAULT: i64 = 7 * 24 * 60 * 60 * 1000;
/// Kafka's `file.delete.delay.ms` default: 1 minute.
pub const FILE_DELETE_DELAY_MS_DEFAULT: u64 = 60_000;
/// Kafka's `log.retention.check.interval.ms` default: 5 minutes.
pub const RETENTION_CHECK_INTERVAL_MS_DEFAULT: u64 = 300_000;
/// Kafka's `delete.retention.ms` default: 1 day.
pub const DELETE_RETENTION_MS_DEFAULT: i64 = 24 * 60 * 60 * 1000;
/// Kafka's `min.cleanable.dirty.ratio` default.
pub const MIN_CLEANABLE_DIRTY_RATIO_DEFAULT: f64 = 0.5;
/// Read size of the log cleaner: segments are scanned this many bytes at a time.
/// Batches remembered per producer id and partition for duplicate detection: the window
/// behind the clients' `max.in.flight.requests.per.connection` <= 5 (Kafka's
/// `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`).
pub const PRODUCER_BATCHES_RETAINED: usize = 5;
/// Kafka's `producer.id.expiration.ms` default: 1 day since a producer id's last batch.
pub const PRODUCER_ID_EXPIRATION_MS_DEFAULT: i64 = 24 * 60 * 60 * 1000;
pub const CLEANER_READ_CHUNK_BYTES: usize = 1024 * 1024;
/// Longest a throttled cleaner sleeps before checking whether the shard is shutting down.
pub const THROTTLE_ABORT_CHECK_MS: u64 = 100;
/// Kafka's `log.cleaner.dedupe.buffer.size` default: key-map memory for the whole broker,
/// split evenly across shards.
pub const LOG_CLEANER_DEDUPE_BUFFER_BYTES_DEFAULT: u64 = 128 * 1024 * 1024;
/// Kafka's `log.cleaner.backoff.ms` default: how long a shard's cleaner sleeps when no log
/// needs cleaning.
pub const LOG_CLEANER_BACKOFF_MS_DEFAULT: u64 = 15_000;

// ---------------------------------------------------------------- server
/// Kafka's `socket.request.max.bytes` default: 100 MiB.
pub const SOCKET_REQUEST_MAX_BYTES_DEFAULT: u32 = 100 * 1024 * 1024;
/// Kafka's `connections.max.idle.ms` default: a connection with no request and no
/// response for 10 minutes is closed.
pub const CONNECTIONS_MAX_IDLE_MS_DEFAULT: u64 = 600_000;
/// Kafka's `max.connections`, `max.connections.per.ip` and `max.connection.creation.rate`
/// defaults: `Int.MaxValue`, no limit.
pub const MAX_CONNECTIONS_DEFAULT: u32 = i32::MAX as u32;
/// How often an accept loop (or a held connection) at `max.connections` looks again: a
/// connection closing on another shard does not wake this one (its own closes do, at once).
pub const ACCEPT_RECHECK_MS: u64 = 10;
/// `queued.max.request.bytes` default: request bytes read but not yet answered, for the whole
/// broker, split evenly across shards. Kafka's default is -1 (unbounded); 512 MiB holds five
/// maximum-size (100 MiB) requests, or thousands of ordinary ones, while memory stays bounded.
pub const QUEUED_MAX_REQUEST_BYTES_DEFAULT: u64 = 512 * 1024 * 1024;
/// `request.receive.timeout.ms` default (Shardlog's own): a frame whose first byte arrived
/// must be complete within this time. Kafka clients give up on a request after
/// `request.timeout.ms` = 30 s anyway.
pub const REQUEST_RECEIVE_TIMEOUT_MS_DEFAULT: u64 = 30_000;

/// Client states (measured rates) one shard keeps for client quotas; beyond it idle states are
/// dropped, and a new client is not throttled until room frees up (bounded memory per shard).
pub const CLIENT_QUOTA_STATES_MAX: usize = 100_000;
/// The part of a client's quota kept spread over all shards whatever their measured demand
/// (`quota::share`): the floor that lets a shard where the client newly connects serve it
/// at once, and the most of the quota idle shards can leave unused.
pub const QUOTA_SHARE_FLOOR_PERCENT: u32 = 5;
/// How far past its last window's use a shard that did not throttle a client is offered
/// (`quota::share`): room to grow before it is throttled and has to ask for more.
pub const QUOTA_SHARE_HEADROOM_PERCENT: u32 = 25;
/// `quota.window.num`: samples a client's byte rate is measured over (Kafka's default).
pub const QUOTA_WINDOW_NUM_DEFAULT: u32 = 11;
/// `quota.window.size.seconds`: the span of one sample (Kafka's default).
pub const QUOTA_WINDOW_SIZE_SECONDS_DEFAULT: u32 = 1;
/// Default Kafka listener port.
pub const KAFKA_PORT_DEFAULT: u16 = 9092;
/// Kafka's default `listener.security.protocol.map`: each protocol is a listener name.
pub const LISTENER_SECURITY_PROTOCOL_MAP_DEFAULT: &str =
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";
/// A TLS handshake must finish within this (Kafka bounds it by the idle timeout; a client
/// that trickles or stalls its handshake holds a connection slot no longer than this).
pub const TLS_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;
/// The largest SASL token (SaslAuthenticate `auth_bytes`, or a v0 raw token) read before
/// authentication: a PLAIN or SCRAM message is far smaller; Kafka bounds it by
/// `sasl.server.max.receive.size` (512 KiB) and so does Shardlog.
pub const SASL_TOKEN_BYTES_MAX: usize = 512 * 1024;
/// OAUTHBEARER: client first messages one exchange may send. After a refused token Kafka
/// lets the client try another instead of the `\x01` that ends the exchange; this bounds the
/// tries on one connection (a token costs a signature check).
pub const OAUTHBEARER_ATTEMPTS_MAX: u32 = 4;
/// A JWKS file (`sasl.oauthbearer.jwks.endpoint.url`, `file:`) is looked at (one `stat`) at
/// most this often; a changed modification time reloads it (Kafka's `CachedFile`).
pub const JWKS_FILE_CHECK_INTERVAL_MS: u64 = 1_000;
/// The largest JWKS file read: an identity provider's set is a few KiB.
pub const JWKS_FILE_BYTES_MAX: usize = 1024 * 1024;
/// Keys kept from one JWKS (more fails the load: a set that large is not a key set).
pub const JWKS_KEYS_MAX: usize = 256;
/// KIP-368: a re-authentication may start at most this often on one connection; an earlier
/// SaslHandshake is answered as any request after authentication (ILLEGAL_SASL_STATE), as
/// Kafka's `KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS` does.
pub const REAUTH_INTERVAL_MS_MIN: u64 = 1_000;
/// SCRAM iterations Kafka accepts (`ScramMechanism.minIterations` / `maxIterations`).
pub const SCRAM_ITERATIONS_MIN: i32 = 4096;
pub const SCRAM_ITERATIONS_MAX: i32 = 16_384;
/// Resource names one connection's authorization cache keeps decisions for
/// (`authz::DecisionCache`); past this it starts over. A producer or consumer names a few
/// topics, a group and a transactional id; an admin listing thousands of topics refills it.
pub const AUTHZ_CACHE_NAMES_MAX: usize = 4096;
/// Denials logged per shard per second (`server::authz`); the rest are counted and summed
/// into the next logged line.
pub const AUTHZ_DENIAL_LOGS_PER_SECOND_MAX: u32 = 10;
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
/// Upper bound on a Fetch long-poll, whatever the client asks (Kafka caps it by its
/// request timeout; a shard must not hold a waiter forever).
pub const FETCH_MAX_WAIT_MS_CAP: i32 = 60_000;
/// A Fetch response's records of at least this many bytes are written from their own
/// buffers instead of being copied into the response frame (`protocol::fetch_encode`):
/// above it a copy costs more than the extra send of a piece.
pub const FETCH_RECORDS_COPY_MAX_BYTES: usize = 16 * 1024;
/// A response piece at least this large is written by itself; smaller neighbours go in
/// vectored writes (`server::connection::write_frame`).
pub const FRAME_PIECE_ALONE_BYTES: usize = 128 * 1024;
/// The most bytes of small pieces one vectored write carries.
pub const FRAME_VECTORED_WRITE_BYTES_MAX: usize = 1024 * 1024;
/// `replica.lag.time.max.ms` (Kafka's default): a follower that has not caught up with the
/// leader's log end for this long leaves the ISR.
pub const REPLICA_LAG_TIME_MAX_MS_DEFAULT: i64 = 30_000;
/// `replica.fetch.wait.max.ms` (Kafka's default): a follower's Fetch long-poll. An append
/// wakes it at once, so acks=all never waits this long for a live follower.
pub const REPLICA_FETCH_WAIT_MAX_MS_DEFAULT: i32 = 500;
/// `replica.fetch.min.bytes` (Kafka's default).
pub const REPLICA_FETCH_MIN_BYTES_DEFAULT: i32 = 1;
/// `replica.fetch.max.bytes` (Kafka's default, 1 MiB): per partition of a follower's Fetch.
pub const REPLICA_FETCH_MAX_BYTES_DEFAULT: i32 = 1024 * 1024;
/// `replica.fetch.response.max.bytes` (Kafka's default, 10 MiB).
pub const REPLICA_FETCH_RESPONSE_MAX_BYTES_DEFAULT: i32 = 10 * 1024 * 1024;
/// `replica.fetch.backoff.ms` (Kafka's default): retry delay after a follower fetch error.
pub const REPLICA_FETCH_BACKOFF_MS_DEFAULT: i64 = 1000;
/// `replica.socket.timeout.ms` (Kafka's default): a follower's request to its leader is
/// abandoned (and the connection dropped) after this long plus the fetch's long-poll.
pub const REPLICA_SOCKET_TIMEOUT_MS_DEFAULT: u64 = 30_000;
/// Commands (add/remove partition, metadata version) queued for one running fetcher.
pub const FETCHER_COMMANDS_MAX: usize = 4096;
/// Partitions one follower fetcher (one per shard and leader broker) follows at most.
pub const FETCHER_PARTITIONS_MAX: usize = 100_000;
/// How long a partition that becomes leader (or closes) waits for its follower fetcher's
/// round in flight to let go of the log (one long-poll plus its appends).
pub const FOLLOWER_RELEASE_WAIT_MS_MAX: u64 = 5_000;
/// How often a leader checks its partitions' ISR for a shrink or an expansion to send as
/// AlterPartition (Kafka checks shrinks every `replica.lag.time.max.ms / 2` and expansions
/// on every follower fetch; one short period serves both here).
pub const ISR_CHECK_INTERVAL_MS: u64 = 250;
/// Threads per shard for blocking file-system calls (directory and small-file fsyncs,
/// unlinks): they sleep in the kernel, so several let a batch of new partitions sync in
/// parallel instead of one after another.
pub const BLOCKING_THREADS_PER_SHARD: usize = 8;
/// Partition logs a shard opens at once while applying an image (new topics): each open
/// waits on file creation and a directory fsync.
pub const PARTITION_OPENS_IN_FLIGHT_MAX: usize = 32;
/// After a refused or failed AlterPartition, how long a leader waits before proposing
/// another change of that partition's ISR, unless an image changes its ISR first.
pub const ISR_CHANGE_RETRY_MS: i64 = 2_000;
/// How long shutdown waits for in-flight requests and connections to drain.
pub const SHUTDOWN_DRAIN_TIMEOUT_MS: u64 = 10_000;
/// How long after SIGTERM the process exits even if shutdown has not finished (drain, then
/// up to 5 s per shard waiting for logs to be released, then closing them).
pub const SHUTDOWN_HARD_LIMIT_MS: u64 = 60_000;
/// A start that has not reached "listening" after this long exits with the stage each shard
/// is stuck at, instead of hanging silently (a start takes well under a second here).
pub const STARTUP_STALL_LIMIT_MS: u64 = 60_000;
/// How often a shard checks the process-wide shutdown flag set by the signal thread.
pub const SHUTDOWN_POLL_INTERVAL_MS: u64 = 50;
/// How long closing a deleted partition waits for in-flight requests to let go of it.
pub const PARTITION_CLOSE_WAIT_MS_MAX: u64 = 5_000;
/// Default `spin_before_park` of every executor (design.md section 5: without it a
/// cross-shard hop costs milliseconds at p99).
pub const SPIN_BEFORE_PARK_US_DEFAULT: u64 = 50;

/// The group coordinator's internal topic (Kafka's name), read by the partition layer
/// (transaction markers on it complete offset commits) and the group coordinator.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

// ---------------------------------------------------------------- controller
/// Most partitions one topic may have (CreateTopics / CreatePartitions beyond it get
/// INVALID_PARTITIONS): each partition costs an open log with three file descriptors per
/// segment, so an unbounded count would exhaust RLIMIT_NOFILE on one request.
pub const TOPIC_PARTITIONS_MAX: i32 = 10_000;
/// Kafka's `num.partitions` default: partitions of an auto-created topic.
pub const NUM_PARTITIONS_DEFAULT: i32 = 1;
/// Kafka's `default.replication.factor` default.
pub const DEFAULT_REPLICATION_FACTOR_DEFAULT: i16 = 1;
/// Kafka's `broker.session.timeout.ms` default: a broker silent this long is fenced.
pub const BROKER_SESSION_TIMEOUT_MS_DEFAULT: u64 = 9000;
/// Kafka's `broker.heartbeat.interval.ms` default.
pub const BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT: u64 = 2000;
/// Kafka's `min.insync.replicas` default.
pub const MIN_INSYNC_REPLICAS_DEFAULT: i32 = 1;
/// Kafka's `max.request.partition.size.limit` default: the most partitions one
/// DescribeTopicPartitions response holds, whatever the request's limit.
pub const MAX_REQUEST_PARTITION_SIZE_LIMIT: i32 = 2000;
/// Kafka's `replica.high.watermark.checkpoint.interval.ms` default: how often each shard
/// writes its high-watermark checkpoint (`partition::hw_checkpoint`).
pub const REPLICA_HW_CHECKPOINT_INTERVAL_MS: u64 = 5000;
/// Per-follower lag series each shard publishes at most (`metrics::replication`): the
/// largest lags, so label cardinality stays bounded.
pub const REPLICATION_LAG_SERIES_MAX: usize = 100;
/// Last-stable-offset lag series each shard publishes at most (`metrics::lso`): the
/// largest lags, so label cardinality stays bounded.
pub const LSO_LAG_SERIES_MAX: usize = 100;
/// How often each shard recomputes its replication gauges (a pass over the partitions it
/// leads, so slower than `METRICS_PUBLISH_INTERVAL_MS`).
pub const REPLICATION_METRICS_INTERVAL_MS: u64 = 1000;
/// Kafka's topic name limit (249 characters: the partition directory name must fit in 255).
pub const TOPIC_NAME_CHARS_MAX: usize = 249;
/// Producer ids reserved per metadata-log write; a restart skips the unused rest of a block.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;
/// Largest metadata-log frame accepted on replay: a bigger length field means corruption.
pub const METADATA_FRAME_BYTES_MAX: u32 = 64 * 1024 * 1024;
/// Most topics the controller accepts in one request; bounds the work of one metadata write.
pub const ADMIN_REQUEST_TOPICS_MAX: usize = 10_000;
// ---------------------------------------------------------------- group
/// Kafka's `offsets.topic.num.partitions` default.
pub const OFFSETS_TOPIC_PARTITIONS_DEFAULT: i32 = 50;
/// Kafka's `group.min.session.timeout.ms` default.
pub const GROUP_MIN_SESSION_TIMEOUT_MS_DEFAULT: i32 = 6_000;
/// Kafka's `group.max.session.timeout.ms` default (30 minutes).
pub const GROUP_MAX_SESSION_TIMEOUT_MS_DEFAULT: i32 = 1_800_000;
/// Kafka's `group.initial.rebalance.delay.ms` default.
pub const GROUP_INITIAL_REBALANCE_DELAY_MS_DEFAULT: i64 = 3_000;
/// Members per group (`group.max.size`; Kafka's default is unbounded, ours bounds memory).
pub const GROUP_MAX_SIZE_DEFAULT: usize = 10_000;
/// Kafka's `offset.metadata.max.bytes` default.
pub const OFFSET_METADATA_BYTES_MAX_DEFAULT: usize = 4096;
/// Kafka's `offsets.retention.minutes` default (7 days).
pub const OFFSETS_RETENTION_MINUTES_DEFAULT: i64 = 7 * 24 * 60;
/// The same, in ms (the unit the coordinator works in).
pub const OFFSETS_RETENTION_MS_DEFAULT: i64 = OFFSETS_RETENTION_MINUTES_DEFAULT * 60 * 1000;
/// Kafka's `offsets.topic.segment.bytes` default (100 MiB): small segments compact sooner.
pub const OFFSETS_TOPIC_SEGMENT_BYTES_DEFAULT: i32 = 100 * 1024 * 1024;
/// Kafka's `offsets.retention.check.interval.ms` default.
pub const OFFSETS_RETENTION_CHECK_INTERVAL_MS_DEFAULT: u64 = 600_000;
/// Largest protocol metadata one member may send in JoinGroup; past it the group record
/// could not be stored anyway (it must fit in one message).
pub const GROUP_MEMBER_METADATA_BYTES_MAX: usize = MAX_MESSAGE_BYTES_DEFAULT as usize;
/// Largest GroupMetadata record value (Kafka's `offsets.load.buffer.size`/message limit).
pub const GROUP_METADATA_RECORD_BYTES_MAX: usize = MAX_MESSAGE_BYTES_DEFAULT as usize;
/// How often a coordinator shard publishes consumer lag to the metrics endpoint.
pub const GROUP_LAG_PUBLISH_INTERVAL_MS: i64 = 5_000;
/// Most (group, partition) lag gauges one shard publishes per interval.
pub const GROUP_LAG_PARTITIONS_MAX: usize = 10_000;
/// Longest a group request waits for another request's replay of an offsets partition
/// before answering COORDINATOR_LOAD_IN_PROGRESS (the client retries the same broker).
pub const GROUP_LOAD_WAIT_MS_MAX: u64 = 5_000;
/// Longest a coordinator write waits for the ISR to hold it (Kafka's
/// `offsets.commit.timeout.ms` default) before answering COORDINATOR_NOT_AVAILABLE.
pub const COORDINATOR_WRITE_TIMEOUT_MS: u64 = 5_000;
/// Longest the first FindCoordinator waits for `__consumer_offsets` to be created and
/// opened on every shard before answering COORDINATOR_NOT_AVAILABLE (the client retries).
pub const OFFSETS_TOPIC_READY_WAIT_MS_MAX: u64 = 10_000;
/// Groups one DescribeGroups/DeleteGroups/OffsetFetch request may name.
pub const GROUP_REQUEST_GROUPS_MAX: usize = 10_000;

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
/// A run with nothing acknowledged for this long stops: the broker is stalled.
pub const BENCH_STALL_TIMEOUT_MS: u64 = 30_000;

// ---------------------------------------------------------------- metrics
/// Highest latency the broker's histograms track (2 minutes, above the Fetch long-poll
/// cap); longer values are recorded as this.
pub const METRICS_LATENCY_US_MAX: u64 = 120_000_000;
/// Significant digits of every latency histogram (HdrHistogram precision).
pub const METRICS_HISTOGRAM_SIGFIG: u8 = 3;
/// How often each shard publishes its local recordings for scrapes (staleness bound).
pub const METRICS_PUBLISH_INTERVAL_MS: u64 = 200;
/// How often each shard's stall probe (`metrics::stall`) asks to be woken: its lateness is
/// how long the shard's event loop did not run.
pub const STALL_PROBE_INTERVAL_MS: u64 = 10;
/// A wake later than this is an event-loop stall, logged at WARN (issue 43's bound).
pub const STALL_WARN_MS: u64 = 100;
/// Distinct topics with their own byte/record counters per shard; more fold into `_other`.
pub const METRICS_TOPICS_MAX: usize = 10_000;
/// Distinct client ids with their own quota counters per shard; more fold into `_other`.
pub const METRICS_CLIENTS_MAX: usize = 10_000;
/// Consumer-lag series kept (group, topic, partition); more are dropped from /metrics.
pub const METRICS_LAG_SERIES_MAX: usize = 100_000;
/// Default admin HTTP address (`--admin-listen`).
pub const ADMIN_PORT_DEFAULT: u16 = 9644;
/// Largest HTTP request head the admin listener reads.
pub const ADMIN_REQUEST_HEAD_BYTES_MAX: usize = 8 * 1024;
/// Admin HTTP connections served at once; more wait in the accept backlog.
pub const ADMIN_CONNECTIONS_MAX: usize = 16;
/// An admin HTTP client that sends no complete request head within this is dropped.
pub const ADMIN_REQUEST_TIMEOUT_MS: u64 = 5_000;
/// Lowest free-space fraction of the data directory's filesystem `doctor` accepts quietly.
pub const DOCTOR_FREE_DISK_RATIO_WARN: f64 = 0.10;
/// Free bytes below which `doctor` calls the data directory unusable.
pub const DOCTOR_FREE_DISK_BYTES_MIN: u64 = 256 * 1024 * 1024;

/// How long `serve` waits for its Kafka port to be released (a broker killed a moment ago
/// keeps its listener until the kernel tears its io_uring down) before failing.
pub const PORT_FREE_WAIT_MS_MAX: u64 = 5_000;
/// How long the admin endpoint retries the default port in use (same reason) before it
/// falls back to an ephemeral port.
pub const ADMIN_BIND_WAIT_MS_MAX: u64 = 5_000;

// ---------------------------------------------------------------- cli
/// Socket read/write timeout of every request the admin CLIs (`groups`, `configs`) send.
pub const CLI_REQUEST_TIMEOUT_MS: u64 = 30_000;
/// Largest response frame the admin CLIs accept.
pub const CLI_RESPONSE_BYTES_MAX: usize = 64 * 1024 * 1024;

// ---------------------------------------------------------------- relations
const _: () = assert!(MEMLOCK_BYTES_MIN <= MEMLOCK_BYTES_WANTED);
const _: () = assert!(NOFILE_MIN <= NOFILE_WANTED);
const _: () = assert!(CONNECTION_IN_FLIGHT_MAX >= 5); // the Java producer's default in-flight
const _: () = assert!(OAUTHBEARER_ATTEMPTS_MAX >= 1); // the client's first token is always read
const _: () = assert!(SEGMENT_INDEX_BYTES_DEFAULT as u64 <= SEGMENT_BYTES_DEFAULT);
const _: () = assert!((MAX_MESSAGE_BYTES_DEFAULT as u64) < SEGMENT_BYTES_DEFAULT);
const _: () = assert!(LOG_WRITE_BYTES_MAX <= LOG_UNWRITTEN_BYTES_MAX);
const _: () = assert!(LOG_WRITE_BYTES_MAX as u64 % DIRECT_IO_ALIGNMENT_BYTES == 0);
const _: () = assert!(LOG_PREALLOCATE_BYTES_MIN % DIRECT_IO_ALIGNMENT_BYTES == 0);
const _: () = assert!((MAX_MESSAGE_BYTES_DEFAULT as usize) <= LOG_UNWRITTEN_BYTES_MAX);
const _: () = assert!(LOG_READ_CHUNK_BYTES_MIN as u64 % DIRECT_IO_ALIGNMENT_BYTES == 0);
const _: () = assert!(PRODUCER_ID_BLOCK_SIZE > 0);
// The window must cover every batch a client may have in flight on one connection.
const _: () = assert!(PRODUCER_BATCHES_RETAINED >= 5 && PRODUCER_BATCHES_RETAINED < 256);
const _: () = assert!(PRODUCER_BATCHES_RETAINED <= CONNECTION_IN_FLIGHT_MAX);
const _: () = assert!(TOPIC_PARTITIONS_MAX > 0);
const _: () = assert!(BENCH_BATCH_BYTES_MAX <= BENCH_REQUEST_BYTES_MAX);
const _: () = assert!(GROUP_MIN_SESSION_TIMEOUT_MS_DEFAULT <= GROUP_MAX_SESSION_TIMEOUT_MS_DEFAULT);
const _: () = assert!(GROUP_MEMBER_METADATA_BYTES_MAX <= GROUP_METADATA_RECORD_BYTES_MAX);
const _: () = assert!(BENCH_REQUEST_BYTES_MAX <= BENCH_RESPONSE_BYTES_MAX);
const _: () = assert!(METRICS_LATENCY_US_MAX >= FETCH_MAX_WAIT_MS_CAP as u64 * 1000);

/// Transaction coordinator: the timer loop's tick (timeouts are checked every
/// `transaction.abort.timed.out.transaction.cleanup.interval.ms`, on a tick).
pub const TXN_TIMER_TICK_MS: u64 = 100;
/// Transaction coordinator: pause between rounds of markers that failed (a partition
/// loading, a full disk), retried until they succeed.
pub const TXN_MARKER_RETRY_MS: u64 = 200;
/// Broker-to-broker transaction requests (WriteTxnMarkers, KIP-890 verification): longest
/// one call waits for its answer (Kafka's `request.timeout.ms` default).
pub const BROKER_CALL_TIMEOUT_MS: u64 = 30_000;
/// Cached broker-to-broker connections per shard (one per other broker in practice).
pub const BROKER_CONNECTIONS_PER_SHARD_MAX: usize = 64;
/// Partition side of markers: producers whose coordinator epoch a partition remembers, to
/// refuse a deposed coordinator's markers (`partition::transactions::CoordinatorEpochs`); past this
/// an arbitrary half is forgotten (each forgotten entry only skips one check).
pub const TXN_COORDINATOR_EPOCHS_MAX: usize = 10_000;

/// Shard moves (`server::shard_move`): how long the source shard waits for a moving
/// partition's in-flight requests to finish before it gives the move up (the partition
/// stays where it is).
pub const SHARD_MOVE_DRAIN_WAIT_MS_MAX: u64 = 10_000;
/// Shard moves of a led partition with followers: how long the source waits without the
/// high watermark moving before it stops waiting for its appended records to be committed
/// (a frozen high watermark, e.g. an ISR below `min.insync.replicas`, would not move).
pub const SHARD_MOVE_COMMIT_STALL_MS_MAX: u64 = 1_000;
/// Shard moves: how often a source goes back to waiting for commits because a produce
/// appended after it stopped waiting (each bounded by the stall above).
pub const SHARD_MOVE_COMMIT_PHASES_MAX: u32 = 3;
/// Shard moves: how long a request parked behind a move waits for it to finish (a move
/// that takes longer is stuck; the request then runs where the image says).
pub const SHARD_MOVE_PARK_WAIT_MS_MAX: u64 = 30_000;
/// Shard moves: how long a request waits for its partition to finish opening on the
/// shard the image names (the target of a move installs the image before it opens).
pub const SHARD_MOVE_OPEN_WAIT_MS_MAX: u64 = 5_000;
/// Shard balancer defaults (`shard.balance.*`, registry in `metadata::configs::broker`).
pub const SHARD_BALANCE_ENABLE_DEFAULT: bool = true;
pub const SHARD_BALANCE_INTERVAL_MS_DEFAULT: i64 = 300_000;
pub const SHARD_BALANCE_MARGIN_PERCENT_DEFAULT: i32 = 50;
/// Below this many bytes/s on its hottest shard a broker is not balanced: noise, not load.
pub const SHARD_BALANCE_MIN_BYTES_PER_SECOND: u64 = 1024 * 1024;
