//! The controller: owner of cluster metadata (topics, partitions, placement, topic configs,
//! producer-id blocks), its durable metadata log, and the topic-config registry.
//!
//! Lives on the controller shard (shard 0) and is called synchronously from there; it holds
//! no glommio types. Every change follows "log, then apply": the records of one operation are
//! validated, written as one CRC-checked frame and fsynced (see [`log`]), then applied to the
//! in-memory state through the same `Controller::apply` replay uses, so a restart rebuilds
//! exactly the state clients were told about. After each change a new immutable
//! [`MetadataImage`] is built, which the server publishes to every shard.
//!
//! Invariants: topic names and ids are unique; partitions of a topic are `0..n`; every owner
//! shard is below the shard count (partitions of vanished shards are re-placed at open and
//! the move recorded); producer ids are never handed out twice, across restarts too.

mod broker_configs;
pub mod cli;
mod client_quotas;
pub mod configs;
mod delta;
mod error;
mod image;
pub mod log;
mod meta_properties;
mod placement;
pub mod records;
mod topic_name;
mod topics;
pub mod topics_cli;

#[cfg(test)]
mod tests;

pub use broker_configs::BrokerChange;
pub use client_quotas::QuotaChange;
pub use configs::{BrokerDefaults, TopicConfig};
pub use delta::{ImageDelta, PartitionRef};
pub use error::ControllerError;
pub use image::{MetadataImage, PartitionImage, TopicImage};
pub use meta_properties::{random_kafka_uuid, MetaProperties};
pub use topic_name::{collision_key, is_internal, validate_topic_name, INTERNAL_TOPICS};
pub use topics::{NewTopic, TopicChange};

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use uuid::Uuid;

use self::log::{encode_frame, parse_log, FileStore, MetadataStore};
use self::records::{MetadataRecord, PartitionRecord};
use crate::constants::{METADATA_FRAME_BYTES_MAX, PRODUCER_ID_BLOCK_SIZE};
use crate::types::{NodeId, ProducerId, ShardId};

/// Cluster metadata and the log that makes it durable. See the module docs.
pub struct Controller {
    meta: MetaProperties,
    shard_count: u32,
    /// Static settings plus this broker's dynamic layers (rebuilt when those change).
    defaults: Arc<BrokerDefaults>,
    /// Dynamic broker configs by node (`None`: the cluster default), as recorded.
    broker_configs: BTreeMap<Option<NodeId>, BTreeMap<String, String>>,
    /// Client quotas by entity, as recorded (published in every image).
    client_quotas: Arc<crate::quota::ClientQuotaConfigs>,
    store: Box<dyn MetadataStore + Send>,
    /// Set after a failed log write: the file may end in a partial frame, so the controller
    /// refuses changes until a restart replays (and truncates) it.
    failed: Option<String>,
    topics: BTreeMap<String, Arc<TopicImage>>,
    topic_ids: HashMap<Uuid, String>,
    next_producer_id: i64,
    producer_id_block_end: i64,
    version: u64,
    image: Arc<MetadataImage>,
}

impl Controller {
    /// Opens the controller over `data_dir`: reads or creates `meta.properties`, replays the
    /// metadata log (cutting a torn tail), and re-places partitions whose shard is gone.
    pub fn open(
        data_dir: &Path,
        node_id: NodeId,
        shard_count: u32,
        defaults: BrokerDefaults,
    ) -> Result<Controller, ControllerError> {
        let meta = MetaProperties::load_or_create(data_dir, node_id)?;
        let store = FileStore::open(data_dir)?;
        Self::open_with_store(Box::new(store), meta, shard_count, defaults)
    }

    /// As [`Controller::open`], over any store (tests use an in-memory one).
    pub fn open_with_store(
        mut store: Box<dyn MetadataStore + Send>,
        meta: MetaProperties,
        shard_count: u32,
        defaults: BrokerDefaults,
    ) -> Result<Controller, ControllerError> {
        if shard_count == 0 {
            return Err(ControllerError::InvalidRequest("shard count must be at least 1".into()));
        }
        let bytes = store.read_all()?;
        let replayed = parse_log(&bytes, store.path())?;
        if replayed.valid_len < bytes.len() as u64 {
            tracing::warn!(
                path = %store.path().display(),
                valid_bytes = replayed.valid_len,
                file_bytes = bytes.len(),
                "metadata log has a torn tail (interrupted write); truncating it"
            );
            store.truncate(replayed.valid_len)?;
        }
        let defaults = Arc::new(defaults);
        let image = Arc::new(empty_image(&meta, shard_count, &defaults));
        let mut c = Controller {
            meta,
            shard_count,
            defaults,
            broker_configs: BTreeMap::new(),
            client_quotas: Arc::default(),
            store,
            failed: None,
            topics: BTreeMap::new(),
            topic_ids: HashMap::new(),
            next_producer_id: 0,
            producer_id_block_end: 0,
            version: 0,
            image,
        };
        for (position, records) in replayed.operations {
            for record in records {
                c.apply(record).map_err(|reason| ControllerError::Corrupt {
                    path: c.store.path().to_path_buf(),
                    position,
                    reason,
                })?;
            }
        }
        // Ids of the last block may have been handed out before the restart: skip the rest.
        c.next_producer_id = c.producer_id_block_end;
        c.replace_lost_shards()?;
        c.rebuild_image();
        Ok(c)
    }

    /// The current immutable snapshot, for publication to every shard.
    #[must_use]
    pub fn image(&self) -> Arc<MetadataImage> {
        Arc::clone(&self.image)
    }

    /// The identity read from `meta.properties`.
    #[must_use]
    pub fn meta_properties(&self) -> &MetaProperties {
        &self.meta
    }

    /// The broker-level defaults in force: the static ones the controller was opened with
    /// and this broker's dynamic layers.
    #[must_use]
    pub fn broker_defaults(&self) -> &Arc<BrokerDefaults> {
        &self.defaults
    }

    /// Hands out a producer id unique across restarts (reserving a block in the log first).
    pub fn allocate_producer_id(&mut self) -> Result<ProducerId, ControllerError> {
        if self.next_producer_id >= self.producer_id_block_end {
            let block_end = self
                .producer_id_block_end
                .checked_add(PRODUCER_ID_BLOCK_SIZE)
                .ok_or(ControllerError::ProducerIdsExhausted)?;
            self.commit(vec![MetadataRecord::ProducerIdsBlock { block_end }])?;
        }
        let id = self.next_producer_id;
        self.next_producer_id += 1;
        Ok(ProducerId(id))
    }

    /// Writes one operation durably, then applies it. Does not rebuild the image.
    fn commit(&mut self, records: Vec<MetadataRecord>) -> Result<(), ControllerError> {
        self.commit_ops(vec![records])
    }

    /// Writes several operations (one frame each, so each is atomic on its own) with a single
    /// write and fsync, then applies them. Does not rebuild the image.
    fn commit_ops(&mut self, ops: Vec<Vec<MetadataRecord>>) -> Result<(), ControllerError> {
        if let Some(reason) = &self.failed {
            return Err(ControllerError::ReadOnly(reason.clone()));
        }
        let mut bytes = Vec::new();
        for records in &ops {
            let frame = encode_frame(records);
            // Replay treats a longer frame as corruption: refuse to write one.
            if frame.len() > METADATA_FRAME_BYTES_MAX as usize {
                return Err(ControllerError::InvalidRequest(format!(
                    "metadata change of {} bytes exceeds the {METADATA_FRAME_BYTES_MAX}-byte \
                     frame limit",
                    frame.len()
                )));
            }
            bytes.extend_from_slice(&frame);
        }
        if let Err(e) = self.store.append_durable(&bytes) {
            self.failed = Some(e.to_string());
            return Err(e);
        }
        for record in ops.into_iter().flatten() {
            if let Err(reason) = self.apply(record) {
                // A record we just validated failed to apply: a controller bug. The log now
                // holds it, so stop accepting changes rather than diverge further.
                self.failed = Some(reason.clone());
                return Err(ControllerError::ReadOnly(reason));
            }
        }
        Ok(())
    }

    /// Applies one record to the in-memory state (replay and live changes alike).
    fn apply(&mut self, record: MetadataRecord) -> Result<(), String> {
        match record {
            MetadataRecord::Topic(t) => {
                if self.topics.contains_key(&t.name) || self.topic_ids.contains_key(&t.topic_id) {
                    return Err(format!("topic {} ({}) created twice", t.name, t.topic_id));
                }
                self.topic_ids.insert(t.topic_id, t.name.clone());
                let image = TopicImage {
                    config: TopicConfig::resolve(&BTreeMap::new(), &self.defaults),
                    name: t.name.clone(),
                    topic_id: t.topic_id,
                    internal: t.internal,
                    configs: BTreeMap::new(),
                    partitions: Vec::new(),
                };
                self.topics.insert(t.name, Arc::new(image));
            }
            MetadataRecord::Partition(p) => {
                let topic = self.topic_mut(&p.topic_id)?;
                let index = usize::try_from(p.partition)
                    .map_err(|_| format!("negative partition {}", p.partition))?;
                let partition = PartitionImage {
                    index: p.partition,
                    owner_shard: p.owner_shard,
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    replicas: p.replicas,
                    isr: p.isr,
                };
                match index.cmp(&topic.partitions.len()) {
                    std::cmp::Ordering::Less => topic.partitions[index] = partition,
                    std::cmp::Ordering::Equal => topic.partitions.push(partition),
                    std::cmp::Ordering::Greater => {
                        return Err(format!("partition {index} of {} leaves a gap", topic.name))
                    }
                }
            }
            MetadataRecord::Config(c) => {
                let defaults = Arc::clone(&self.defaults);
                let topic = self.topic_mut(&c.topic_id)?;
                match c.value {
                    Some(v) => topic.configs.insert(c.name, v),
                    None => topic.configs.remove(&c.name),
                };
                topic.config = TopicConfig::resolve(&topic.configs, &defaults);
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                let name = self
                    .topic_ids
                    .remove(&topic_id)
                    .ok_or_else(|| format!("removal of unknown topic id {topic_id}"))?;
                self.topics.remove(&name);
            }
            MetadataRecord::ProducerIdsBlock { block_end } => {
                if block_end < self.producer_id_block_end {
                    return Err(format!("producer id block end {block_end} moves backwards"));
                }
                self.producer_id_block_end = block_end;
            }
            MetadataRecord::BrokerConfig(c) => self.apply_broker_config(c),
            MetadataRecord::ClientQuota(q) => self.apply_client_quota(q)?,
        }
        Ok(())
    }

    fn topic_mut(&mut self, id: &Uuid) -> Result<&mut TopicImage, String> {
        let name = self.topic_ids.get(id).ok_or_else(|| format!("unknown topic id {id}"))?;
        let topic = self.topics.get_mut(name).ok_or_else(|| format!("topic {name} missing"))?;
        Ok(Arc::make_mut(topic))
    }

    /// Moves partitions whose owner shard no longer exists (fewer `--shards` than before) to
    /// the least-loaded shards, and records the moves so later restarts agree.
    fn replace_lost_shards(&mut self) -> Result<(), ControllerError> {
        let mut load = placement::load_of(self.topics.values(), self.shard_count);
        let mut ops = Vec::new();
        for topic in self.topics.values() {
            let mut moves = Vec::new();
            for p in topic.partitions.iter().filter(|p| p.owner_shard.0 >= self.shard_count) {
                let shard = placement::least_loaded(&mut load);
                moves.push(MetadataRecord::Partition(PartitionRecord {
                    topic_id: topic.topic_id,
                    partition: p.index,
                    owner_shard: shard,
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    replicas: p.replicas.clone(),
                    isr: p.isr.clone(),
                }));
            }
            if !moves.is_empty() {
                ops.push(moves);
            }
        }
        if !ops.is_empty() {
            let partitions: usize = ops.iter().map(Vec::len).sum();
            tracing::warn!(partitions, "re-placing partitions of removed shards");
            self.commit_ops(ops)?;
        }
        Ok(())
    }

    fn rebuild_image(&mut self) {
        self.version += 1;
        let mut image = empty_image(&self.meta, self.shard_count, &self.defaults);
        image.version = self.version;
        image.topics = self.topics.clone();
        image.topic_ids = self.topic_ids.clone();
        image.client_quotas = Arc::clone(&self.client_quotas);
        self.image = Arc::new(image);
    }
}

fn empty_image(meta: &MetaProperties, shard_count: u32, d: &Arc<BrokerDefaults>) -> MetadataImage {
    MetadataImage {
        version: 0,
        cluster_id: meta.cluster_id.clone(),
        node_id: meta.node_id,
        controller_id: meta.node_id,
        shard_count,
        topics: BTreeMap::new(),
        topic_ids: HashMap::new(),
        broker_defaults: Arc::clone(d),
        client_quotas: Arc::default(),
    }
}

/// The shard a new partition goes to, exposed for the server's own checks.
#[must_use]
pub fn least_loaded_shard(image: &MetadataImage) -> ShardId {
    let mut load = image.partitions_per_shard();
    placement::least_loaded(&mut load)
}

// The server may open the controller before moving it onto the controller shard's thread.
const _: fn() = || {
    fn assert_send<T: Send>() {}
    assert_send::<Controller>();
};
