//! The partition logs a shard owns, kept in step with the metadata image: partitions
//! assigned to this shard are opened (created on first use, with `partition.metadata`
//! recording the topic id); partitions that left the image are closed, their directory
//! renamed to `<topic>-<p>.<uuid>-delete` and removed in the background, so the name can
//! be re-created at once.
//!
//! Each image also sets every open partition's role: leader when the image names this node
//! (it takes produces and answers fetches), else follower, its log written by this shard's
//! follower fetcher for that leader (`replication::manager`, reconciled here).
//!
//! Lives on each shard, touched only by it. Invariant: at most one open log per
//! partition directory; a log is closed only once no request and no fetcher holds it; a
//! partition takes produces only after its fetcher let go of it (bounded wait).

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use super::replica::{PartitionReplica, Role};
use super::replicas::ReplicaSettings;
use crate::io::dma::DmaFileSystem;
use crate::metadata::BrokerDefaults;
use crate::metadata::{MetadataImage, TopicImage};
use crate::replication::manager::{Follow, FollowerSet};
use crate::shard::ShardCtx;
use crate::storage::DmaPartitionLog as Log;
use crate::storage::{BatchCache, FlushPolicy, LogConfig, TimestampType};
use crate::types::{Epoch, NodeId, Offset, ShardId, TopicPartition};

use crate::constants::PARTITION_CLOSE_WAIT_MS_MAX as CLOSE_WAIT_MS_MAX;
use crate::constants::{FOLLOWER_RELEASE_WAIT_MS_MAX, PARTITION_OPENS_IN_FLIGHT_MAX};

/// A partition this shard owns: its replica (log, role, replica state: [`PartitionReplica`],
/// which it derefs to, so `p.log` and `p.is_leader` read as before) and what only the broker
/// keeps of it.
pub struct OwnedPartition {
    pub tp: TopicPartition,
    pub topic_id: Uuid,
    pub replica: PartitionReplica<DmaFileSystem>,
    /// Record bytes produced into / fetched from this partition since it opened on this
    /// shard: what the shard balancer (`server::shard_balance`) measures rates from.
    pub bytes_in: Cell<u64>,
    pub bytes_out: Cell<u64>,
    /// Per producer, the newest transaction coordinator epoch whose marker this partition
    /// took (`partition::transactions::CoordinatorEpochs`).
    pub coordinator_epochs: RefCell<super::transactions::CoordinatorEpochs>,
}

impl std::ops::Deref for OwnedPartition {
    type Target = PartitionReplica<DmaFileSystem>;

    fn deref(&self) -> &Self::Target {
        &self.replica
    }
}

pub struct PartitionTable {
    data_dir: PathBuf,
    fs: Rc<DmaFileSystem>,
    cache: Rc<BatchCache>,
    map: RefCell<HashMap<TopicPartition, Rc<OwnedPartition>>>,
    /// The follower fetchers of this shard (`replication::manager`).
    followers: FollowerSet,
    /// The high watermarks of the data dir's checkpoints (`hw_checkpoint`), read at the
    /// first open; where a reopened partition's high watermark starts.
    checkpointed_hw: RefCell<Option<HashMap<TopicPartition, Offset>>>,
    /// High watermarks handed over by a shard move (`server::shard_move`): a partition
    /// adopted from another shard starts from its source's high watermark, not from 0.
    handoff: RefCell<HashMap<TopicPartition, Offset>>,
    /// The last image applied in full: a later image's topics that are the same `Arc` (the
    /// node image keeps unchanged topics shared) need no per-partition work.
    applied: RefCell<Option<Arc<MetadataImage>>>,
}

impl PartitionTable {
    /// Wall-clock ms from the partitions' file system (the clock seam a simulator replaces).
    #[must_use]
    pub fn now_ms(&self) -> i64 {
        crate::io::FileSystem::now_ms(&*self.fs)
    }

    #[must_use]
    pub fn new(data_dir: PathBuf, cache_bytes: usize) -> Self {
        Self {
            data_dir,
            fs: Rc::new(DmaFileSystem),
            cache: Rc::new(BatchCache::new(cache_bytes)),
            map: RefCell::new(HashMap::new()),
            followers: FollowerSet::default(),
            checkpointed_hw: RefCell::new(None),
            handoff: RefCell::new(HashMap::new()),
            applied: RefCell::new(None),
        }
    }

    /// Takes a partition out of this shard's table for a shard move: no new request finds
    /// it here, its follower fetcher (if any) lets go of its log. The caller closes it
    /// (`close_moved`) or puts it back (`reattach`).
    pub(crate) fn detach(&self, tp: &TopicPartition) -> Option<Rc<OwnedPartition>> {
        let p = self.map.borrow_mut().remove(tp)?;
        self.followers.forget(tp);
        // The next image is applied in full (the partition may come back).
        self.applied.borrow_mut().take();
        // Long-polls drop their reference and re-route.
        p.hw_changed.notify_all();
        p.replication.appended.notify_all();
        Some(p)
    }

    /// Puts back a partition [`PartitionTable::detach`] took out (an aborted move).
    pub(crate) fn reattach(&self, p: Rc<OwnedPartition>) {
        self.applied.borrow_mut().take();
        self.map.borrow_mut().insert(p.tp.clone(), p);
    }

    /// Records the high watermark a partition arriving by a shard move starts from.
    pub(crate) fn hand_over(&self, tp: TopicPartition, high_watermark: Offset) {
        self.handoff.borrow_mut().insert(tp, high_watermark);
    }

    #[must_use]
    pub fn get(&self, topic: &str, partition: i32) -> Option<Rc<OwnedPartition>> {
        let key: &dyn crate::types::TopicPartitionKey = &(topic, partition);
        self.map.borrow().get(key).cloned()
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.map.borrow().len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Opens what the image assigns to `me` and closes what it no longer lists; starts,
    /// changes or stops follower fetchers so this shard follows exactly the hosted
    /// partitions it owns whose leader is another live broker (`replication::manager`).
    ///
    /// Per-partition work (roles, replica state, configs, waking long-polls) is done only for
    /// partitions opened now or whose topic changed since the last image applied (issue 43:
    /// with thousands of partitions every AlterPartition's image redid it for all of them,
    /// stalling the shard); the rest is hash lookups, with a yield every
    /// [`IMAGE_PARTITIONS_PER_YIELD`] partitions.
    pub(crate) async fn apply_image(
        &self,
        ctx: &ShardCtx,
        image: &Arc<MetadataImage>,
    ) -> Result<(), String> {
        // Once shutdown began, `close_all` owns the logs (it writes their clean-shutdown
        // markers): a late image, such as this broker's own fencing, changes nothing.
        if ctx.is_shutting_down() {
            return Ok(());
        }
        let wanted = owned_by(image, ctx.id);
        crate::replication::throttle::install_image(image, ctx.id);
        let stale: Vec<Rc<OwnedPartition>> = {
            let mut map = self.map.borrow_mut();
            let gone: Vec<TopicPartition> = map
                .iter()
                .filter(|(tp, p)| wanted.get(*tp).is_none_or(|w| w.topic_id != p.topic_id))
                .map(|(tp, _)| tp.clone())
                .collect();
            gone.iter().filter_map(|tp| map.remove(tp)).collect()
        };
        let mut failures = Vec::new();
        let fresh: HashSet<TopicPartition> = {
            let map = self.map.borrow();
            wanted.keys().filter(|tp| !map.contains_key(*tp)).cloned().collect()
        };
        // New partitions open [`PARTITION_OPENS_IN_FLIGHT_MAX`] at a time: one by one, an
        // image creating hundreds held the controller's operation (which publishes it) for
        // seconds, so heartbeats and AlterPartitions waited (issue 43).
        let to_open: Vec<(&TopicPartition, &Wanted)> =
            wanted.iter().filter(|(tp, _)| fresh.contains(*tp)).collect();
        for chunk in to_open.chunks(PARTITION_OPENS_IN_FLIGHT_MAX) {
            // Shutdown may begin while this image opens logs: open no more then.
            if ctx.is_shutting_down() {
                break;
            }
            let opens = chunk.iter().filter_map(|(tp, w)| {
                if self.map.borrow().contains_key(*tp) {
                    return None;
                }
                let topic = image.topic(&tp.topic)?;
                Some(async move {
                    (*tp, self.open(tp, topic, &image.broker_defaults, w.leader_epoch).await)
                })
            });
            let opened = futures::future::join_all(opens).await;
            // New directories' entries made durable once per chunk, before any of them
            // serves (and acknowledges) a write.
            if opened.iter().any(|(_, o)| o.as_ref().is_ok_and(|(_, created)| *created)) {
                let data_dir = self.data_dir.clone();
                let synced = crate::shard::spawn_blocking(move || {
                    std::fs::File::open(&data_dir)?.sync_all()
                })
                .await;
                if let Err(err) = synced {
                    let reason = format!("{}: sync dir: {err}", self.data_dir.display());
                    tracing::error!("cannot open new partitions: {reason}");
                    failures.push(reason);
                    for (_, o) in opened {
                        if let Ok((partition, _)) = o {
                            let _ = close_log(partition).await;
                        }
                    }
                    continue;
                }
            }
            for (tp, opened) in opened {
                match opened {
                    Ok((partition, _)) => {
                        if let Some(hw) = self.handoff.borrow_mut().remove(tp) {
                            partition.follower_hw.set(hw);
                        }
                        self.map.borrow_mut().insert(tp.clone(), Rc::new(partition));
                    }
                    Err(reason) => {
                        tracing::error!(partition = %tp, "cannot open partition: {reason}");
                        failures.push(format!("{tp}: {reason}"));
                    }
                }
            }
        }
        // Fetchers first: a partition this broker now leads, or that left, stops being
        // written by its fetcher before it takes produces or closes.
        let was_following: HashSet<TopicPartition> =
            wanted.keys().filter(|tp| self.followers.follows(tp)).cloned().collect();
        let follows: Vec<Follow> = wanted
            .iter()
            .filter(|(_, w)| w.leader != image.node_id && w.leader.0 >= 0)
            .filter_map(|(tp, w)| {
                let p = self.map.borrow().get(tp).cloned()?;
                Some(Follow {
                    tp: tp.clone(),
                    topic_id: w.topic_id,
                    leader: w.leader,
                    leader_epoch: w.leader_epoch,
                    in_isr: w.in_isr,
                    log: p.log.clone(),
                    high_watermark: p.follower_hw.clone(),
                })
            })
            .collect();
        let security = &ctx.config.inter_broker_client;
        let (me, brokers) = (image.node_id, &image.brokers);
        self.followers.reconcile(me, image.version, brokers, security, follows, |f| {
            drop(ctx.spawn(f));
        });
        for partition in stale {
            self.remove(ctx, partition).await;
        }
        let previous = self.applied.borrow_mut().take();
        let unchanged = |tp: &TopicPartition| {
            previous.as_deref().is_some_and(|prev| same_topic(prev, image, &tp.topic))
                && !fresh.contains(tp)
        };
        let mut epoch_starts = Vec::new();
        for (i, (tp, w)) in wanted.into_iter().enumerate() {
            if i % IMAGE_PARTITIONS_PER_YIELD == IMAGE_PARTITIONS_PER_YIELD - 1 {
                crate::shard::yield_if_needed().await;
            }
            if unchanged(&tp) {
                continue;
            }
            let Some(topic) = image.topic(&tp.topic) else { continue };
            let Some(existing) = self.map.borrow().get(&tp).cloned() else { continue };
            let leads = w.leader == image.node_id;
            if leads && was_following.contains(&tp) {
                wait_log_released(&existing).await;
            }
            let role = role_of(image, topic, &existing.tp, w.leader);
            if existing.apply_role(&role) {
                tracing::info!(
                    partition = %tp,
                    epoch = w.leader_epoch.0,
                    log_end = existing.log.log_end_offset().0,
                    follower_hw = existing.follower_hw.get().0,
                    "leading the partition"
                );
            }
            // Live topic configs (AlterConfigs): a no-op when nothing changed.
            existing.log.set_config(log_config(topic, &image.broker_defaults));
            epoch_starts.push((existing, w.leader_epoch));
        }
        // Each start writes and syncs the leader-epoch checkpoint: many at once, not one
        // after another (a batch of new topics leads a hundred partitions here).
        for chunk in epoch_starts.chunks(PARTITION_OPENS_IN_FLIGHT_MAX) {
            futures::future::join_all(chunk.iter().map(|(p, e)| start_leader_epoch(p, *e))).await;
            for (p, _) in chunk {
                // Long-polls re-check leadership and the high watermark.
                p.hw_changed.notify_all();
            }
        }
        if failures.is_empty() && !ctx.is_shutting_down() {
            *self.applied.borrow_mut() = Some(image.clone());
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("; "))
        }
    }

    async fn open(
        &self,
        tp: &TopicPartition,
        topic: &TopicImage,
        broker: &BrokerDefaults,
        epoch: Epoch,
    ) -> Result<(OwnedPartition, bool), String> {
        let topic_id = topic.topic_id;
        let dir = self.data_dir.join(tp.dir_name());
        // Off the reactor: creating a directory and a file allocates inodes, which took
        // milliseconds each on a busy ext4, and an image creates hundreds (issue 43).
        let target = dir.clone();
        let created = crate::shard::spawn_blocking(move || prepare_dir(&target, topic_id))
            .await
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let log = Log::open(self.fs.clone(), &dir, log_config(topic, broker), self.cache.clone())
            .await
            .map_err(|e| e.to_string())?;
        tracing::debug!(partition = %tp, "opened partition log");
        let hw = self.checkpointed_hw(tp).await.min(log.log_end_offset());
        let partition = OwnedPartition {
            tp: tp.clone(),
            topic_id,
            replica: PartitionReplica::new(Rc::new(log), epoch, Rc::new(Cell::new(hw))),
            bytes_in: Cell::new(0),
            bytes_out: Cell::new(0),
            coordinator_epochs: RefCell::default(),
        };
        Ok((partition, created))
    }

    /// Closes a partition that left the image and schedules its directory's removal.
    async fn remove(&self, ctx: &ShardCtx, partition: Rc<OwnedPartition>) {
        // Wake long-polls so they drop their reference.
        partition.hw_changed.notify_all();
        partition.replication.appended.notify_all();
        let tp = partition.tp.clone();
        let topic_id = partition.topic_id;
        if let Some(owned) = wait_sole_owner(partition).await {
            if let Err(err) = close_log(owned).await {
                tracing::warn!(partition = %tp, "close of deleted partition failed: {err}");
            }
        } else {
            tracing::warn!(partition = %tp, "deleted partition still in use; dropping it");
        }
        let dir = self.data_dir.join(tp.dir_name());
        let target = self.data_dir.join(format!("{}.{}-delete", tp.dir_name(), topic_id.simple()));
        match std::fs::rename(&dir, &target) {
            Ok(()) => {
                ctx.spawn_background(async move {
                    let removal = move || std::fs::remove_dir_all(&target);
                    if let Err(err) = crate::shard::spawn_blocking(removal).await {
                        tracing::warn!("background removal failed: {err}");
                    }
                });
            }
            Err(err) => tracing::warn!(partition = %tp, "rename for deletion failed: {err}"),
        }
    }

    /// The checkpointed high watermark of `tp` (0 when none), reading the data dir's
    /// checkpoints on first use.
    async fn checkpointed_hw(&self, tp: &TopicPartition) -> Offset {
        if self.checkpointed_hw.borrow().is_none() {
            let read = super::hw_checkpoint::read_all(&*self.fs, &self.data_dir).await;
            self.checkpointed_hw.borrow_mut().get_or_insert(read);
        }
        self.checkpointed_hw.borrow().as_ref().and_then(|m| m.get(tp).copied()).unwrap_or_default()
    }

    /// Writes this shard's high-watermark checkpoint: each partition's high watermark as
    /// leader, or the one it follows (`hw_checkpoint`).
    pub async fn write_hw_checkpoint(&self, shard: ShardId) -> std::io::Result<()> {
        let entries: Vec<(TopicPartition, Offset)> = self
            .all()
            .iter()
            .map(|p| {
                let hw = if p.is_leader.get() { p.high_watermark() } else { p.follower_hw.get() };
                (p.tp.clone(), hw)
            })
            .collect();
        super::hw_checkpoint::write(&*self.fs, &self.data_dir, shard.0, &entries).await
    }

    /// Every open partition (a snapshot: the table may change while the caller awaits).
    #[must_use]
    pub fn all(&self) -> Vec<Rc<OwnedPartition>> {
        self.map.borrow().values().cloned().collect()
    }

    /// Closes every log (shutdown). Requests must have drained first.
    pub(crate) async fn close_all(&self) {
        self.followers.stop_all();
        let all: Vec<Rc<OwnedPartition>> = self.map.borrow_mut().drain().map(|(_, p)| p).collect();
        for partition in all {
            let tp = partition.tp.clone();
            match wait_sole_owner(partition).await {
                Some(owned) => {
                    if let Err(err) = close_log(owned).await {
                        tracing::warn!(partition = %tp, "close failed: {err}");
                    }
                }
                None => tracing::warn!(partition = %tp, "still in use at shutdown"),
            }
        }
    }
}

/// The storage settings of a topic, from its effective configs. The flush policy follows
/// `flush.ms` / `flush.messages` only where they are set explicitly, on the topic or by a
/// broker synonym (`log.flush.interval.*`, static or dynamic); otherwise the storage
/// engine's durable default (group-committed fsync per batch) applies. An explicit
/// `flush.messages` above 1 (Kafka's default is "never") without `flush.ms` means never:
/// acknowledged once the O_DIRECT write completed, as Kafka's page-cache write.
fn log_config(topic: &TopicImage, broker: &BrokerDefaults) -> LogConfig {
    use crate::metadata::configs::{topic_config_def, TimestampType as ConfigTimestampType};
    let c = &topic.config;
    let explicit = |name: &str| {
        topic.configs.get(name).cloned().or_else(|| {
            let def = topic_config_def(name)?;
            broker.broker_value_for(def.synonyms).map(|(v, _, _)| v)
        })
    };
    let flush_messages = explicit("flush.messages").and_then(|v| v.parse::<i64>().ok());
    let flush = if flush_messages.is_some_and(|n| n <= 1) {
        FlushPolicy::EveryBatch
    } else if explicit("flush.ms").is_some() {
        FlushPolicy::IntervalMs(u64::try_from(c.flush_ms).unwrap_or(u64::MAX))
    } else if flush_messages.is_some() {
        FlushPolicy::Never
    } else {
        LogConfig::default().flush
    };
    LogConfig {
        segment_bytes: c.segment_bytes,
        segment_ms: c.segment_ms,
        index_interval_bytes: c.index_interval_bytes,
        segment_index_bytes: c.segment_index_bytes,
        max_message_bytes: c.max_message_bytes,
        timestamp_type: match c.message_timestamp_type {
            ConfigTimestampType::CreateTime => TimestampType::CreateTime,
            ConfigTimestampType::LogAppendTime => TimestampType::LogAppendTime,
        },
        timestamp_before_max_ms: c.message_timestamp_before_max_ms,
        timestamp_after_max_ms: c.message_timestamp_after_max_ms,
        compacted: c.cleanup_policy.compact,
        flush,
        delete_retention_enabled: c.cleanup_policy.delete,
        retention_ms: c.retention_ms,
        retention_bytes: c.retention_bytes,
        file_delete_delay_ms: u64::try_from(c.file_delete_delay_ms).unwrap_or(0),
        delete_retention_ms: c.delete_retention_ms,
        min_compaction_lag_ms: c.min_compaction_lag_ms,
        max_compaction_lag_ms: c.max_compaction_lag_ms,
        min_cleanable_dirty_ratio: c.min_cleanable_dirty_ratio,
        producer_id_expiration_ms: broker.long("producer.id.expiration.ms"),
        preallocate_bytes: crate::storage::preallocate_bytes_default(),
    }
}

/// Partitions [`PartitionTable::apply_image`] handles between two yields.
const IMAGE_PARTITIONS_PER_YIELD: usize = 256;

/// Whether `topic` means the same to this node's partitions in `prev` and `next`: the same
/// shared topic image (same partitions, replicas, ISR, epochs, placement and configs), the
/// same node, broker defaults and brokers (fencing decides ISR eligibility).
fn same_topic(prev: &MetadataImage, next: &MetadataImage, topic: &str) -> bool {
    let shared = match (prev.topics.get(topic), next.topics.get(topic)) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    };
    shared
        && prev.node_id == next.node_id
        && (Arc::ptr_eq(&prev.broker_defaults, &next.broker_defaults)
            || prev.broker_defaults == next.broker_defaults)
        && (Arc::ptr_eq(&prev.brokers, &next.brokers) || prev.brokers == next.brokers)
}

/// The image's view of one partition as [`PartitionReplica::apply_role`] takes it (replicas,
/// ISR, leader epoch, `min.insync.replicas`, `replica.lag.time.max.ms`, and the replicas that
/// may not join the ISR).
fn role_of(image: &MetadataImage, topic: &TopicImage, tp: &TopicPartition, leader: NodeId) -> Role {
    let me = image.node_id;
    let settings = ReplicaSettings {
        lag_time_max_ms: image.broker_defaults.long("replica.lag.time.max.ms"),
        min_insync_replicas: topic.config.min_insync_replicas,
    };
    let pi = usize::try_from(tp.partition).ok().and_then(|i| topic.partitions.get(i));
    let (leader_epoch, replicas, isr) = match pi {
        Some(pi) => (pi.leader_epoch, pi.replicas.clone(), pi.isr.clone()),
        None => (Epoch(-1), vec![me], vec![me]),
    };
    // Kafka's `isReplicaIsrEligible`: fenced or unregistered brokers (a single node
    // registers nothing: every replica is eligible).
    let ineligible: Vec<NodeId> = if image.brokers.is_empty() {
        Vec::new()
    } else {
        replicas.iter().copied().filter(|r| image.brokers.get(r).is_none_or(|b| b.fenced)).collect()
    };
    Role { me, leader, leader_epoch, replicas, isr, ineligible, settings }
}

/// Records a new leader's epoch start (see [`PartitionReplica::start_leader_epoch`]).
async fn start_leader_epoch(p: &OwnedPartition, epoch: Epoch) {
    if let Err(err) = p.start_leader_epoch(epoch).await {
        tracing::warn!(partition = %p.tp, "cannot record leader epoch {epoch}: {err}");
    }
}

/// What the image says of a partition this shard owns.
struct Wanted {
    topic_id: Uuid,
    leader: NodeId,
    leader_epoch: Epoch,
    /// This broker is in the partition's ISR.
    in_isr: bool,
}

/// Partitions the image assigns to `me`, with topic id, leader and leader epoch.
fn owned_by(image: &MetadataImage, me: ShardId) -> HashMap<TopicPartition, Wanted> {
    let mut out = HashMap::new();
    for (name, topic) in &image.topics {
        for p in topic.partitions.iter().filter(|p| p.hosted && p.owner_shard == me) {
            out.insert(
                TopicPartition::new(name.clone(), p.index),
                Wanted {
                    topic_id: topic.topic_id,
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    in_isr: p.isr.contains(&image.node_id),
                },
            );
        }
    }
    out
}

/// Waits (bounded) until the follower fetcher dropped its reference to the partition's
/// log: its round in flight (a long-poll plus appends) ends before the log takes produces.
async fn wait_log_released(p: &OwnedPartition) {
    let mut waited_ms = 0;
    while Rc::strong_count(&p.log) > 1 {
        if waited_ms >= FOLLOWER_RELEASE_WAIT_MS_MAX {
            tracing::warn!(partition = %p.tp, "follower fetcher still holds the log");
            return;
        }
        crate::shard::sleep(Duration::from_millis(5)).await;
        waited_ms += 5;
    }
}

/// Closes a partition's log once its fetcher let go of it.
pub(crate) async fn close_log(owned: OwnedPartition) -> Result<(), crate::storage::StorageError> {
    wait_log_released(&owned).await;
    let tp = owned.tp.clone();
    match Rc::try_unwrap(owned.replica.log) {
        Ok(log) => log.close().await,
        Err(_) => {
            tracing::warn!(partition = %tp, "log still shared at close; dropping it");
            Ok(())
        }
    }
}

pub(crate) async fn wait_sole_owner(mut partition: Rc<OwnedPartition>) -> Option<OwnedPartition> {
    let mut waited_ms = 0;
    loop {
        match Rc::try_unwrap(partition) {
            Ok(owned) => return Some(owned),
            Err(shared) if waited_ms < CLOSE_WAIT_MS_MAX => {
                partition = shared;
                crate::shard::sleep(Duration::from_millis(1)).await;
                waited_ms += 1;
            }
            Err(_) => return None,
        }
    }
}

/// Creates the directory and its `partition.metadata` (Kafka's format) if missing or torn.
/// Returns whether the directory was created now: its entry in the data directory is not
/// durable until the caller syncs the data directory.
///
/// The file is not fsynced (Kafka too flushes it lazily, on the first log flush): nothing
/// here reads it back, and a copy a power loss left empty or torn is rewritten on the next
/// open. Its fsync was one of two per new partition (issue 43).
fn prepare_dir(dir: &Path, topic_id: Uuid) -> std::io::Result<bool> {
    let created = match std::fs::create_dir(dir) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)?;
            true
        }
        Err(e) => return Err(e),
    };
    let meta = dir.join("partition.metadata");
    let whole = |t: &str| t.starts_with("version: 0\ntopic_id: ") && t.ends_with('\n');
    if created || !std::fs::read_to_string(&meta).is_ok_and(|t| whole(&t)) {
        let text = format!("version: 0\ntopic_id: {}\n", kafka_topic_id(topic_id));
        let tmp = dir.join("partition.metadata.tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, &meta)?;
    }
    Ok(created)
}

/// Kafka prints topic ids as URL-safe base64 without padding.
fn kafka_topic_id(id: Uuid) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes())
}

/// Removes `*-delete` directories a previous run left behind (crash during removal).
pub(crate) fn leftover_deletions(data_dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(data_dir) else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir() && p.to_string_lossy().ends_with("-delete"))
        .collect()
}
