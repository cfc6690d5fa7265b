//! [`ControllerState`]: cluster metadata as a pure, deterministic, cloneable state machine.
//!
//! Lives on the controller shard (shard 0) of every node; holds no I/O and no clock. Two uses:
//! - **Committed copy**: fed committed Raft entries with [`ControllerState::apply_entry`] (one
//!   CRC frame of [`MetadataRecord`]s per entry, the frame format of [`super::log`]) and
//!   snapshots with [`ControllerState::restore_snapshot`].
//! - **Working copy** (active controller only): operations (`create_topics`, `register_broker`,
//!   ...) validate, apply to `self` at once and queue the operation's frame;
//!   [`ControllerState::take_proposals`] drains the frames for Raft. Applying those frames to a
//!   clone of the pre-operation state yields the same replicated state (tests check it).
//!
//! Replicated fields are everything [`ControllerState::snapshot`] writes. Node-local fields
//! (this node's id, shard count, static broker defaults, the active controller id, the image
//! version) and leader-local ones (`next_producer_id`, pending proposals) are not.
//! Invariants: `topics`/`topic_ids` index the same topics; partitions are `0..n`; a broker
//! epoch is never handed out twice (`next_broker_epoch` only grows, and is in the snapshot).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use uuid::Uuid;

use super::configs::{BrokerDefaults, TopicConfig};
use super::log::{decode_frame, encode_frame, parse_log, METADATA_DIR, METADATA_FILE};
use super::records::{
    BrokerConfigRecord, ClientQuotaRecord, ConfigRecord, MetadataRecord, PartitionRecord,
    RegisterBrokerRecord, TopicRecord,
};
use super::BrokerImage;
use super::{placement, ControllerError, MetadataImage, PartitionImage, TopicImage};
use crate::constants::METADATA_FRAME_BYTES_MAX;
use crate::metadata::ClientQuotaConfigs;
use crate::types::{NodeId, ShardId};

/// Version byte of the snapshot layout: `[version u8][last applied index u64]
/// [next broker epoch i64][frame count u32]` then metadata-log frames (`docs/metadata.md`).
/// The count catches a snapshot cut at a frame boundary.
const SNAPSHOT_VERSION: u8 = 0;
const SNAPSHOT_HEADER_BYTES: usize = 21;
/// Suffix the server gives the legacy metadata log once imported, so it is imported once.
pub const LEGACY_IMPORTED_SUFFIX: &str = ".imported";

/// Cluster metadata as a replicated state machine. See the module docs.
#[derive(Clone, Debug)]
pub struct ControllerState {
    // Node-local.
    pub(super) cluster_id: String,
    /// This node: its dynamic broker-config layer, and the placement fallback while no
    /// broker is registered (a single node before it registers itself).
    pub(super) node_id: NodeId,
    pub(super) shard_count: u32,
    /// Static settings plus this node's dynamic layers (rebuilt when those change).
    pub(super) defaults: Arc<BrokerDefaults>,
    controller_id: NodeId,
    version: u64,
    image: Arc<MetadataImage>,
    // Replicated.
    /// Dynamic broker configs by node (`None`: the cluster default), as recorded.
    pub(super) broker_configs: BTreeMap<Option<NodeId>, BTreeMap<String, String>>,
    /// Client quotas by entity, as recorded (published in every image).
    pub(super) client_quotas: Arc<ClientQuotaConfigs>,
    /// SCRAM credentials (AlterUserScramCredentials), checked by every shard's SASL.
    pub(super) scram_credentials: Arc<super::scram::ScramCredentials>,
    /// ACLs (CreateAcls/DeleteAcls), checked by every shard's authorizer.
    pub(super) acls: Arc<crate::authz::AclSet>,
    pub(super) topics: BTreeMap<String, Arc<TopicImage>>,
    pub(super) topic_ids: HashMap<Uuid, String>,
    pub(super) producer_id_block_end: i64,
    pub(super) brokers: Arc<BTreeMap<NodeId, BrokerImage>>,
    pub(super) next_broker_epoch: i64,
    /// Ongoing partition reassignments (`controller::reassign`).
    pub(super) reassignments: super::reassign::Reassignments,
    last_applied: u64,
    // Leader-local.
    /// Next producer id to hand out; a new active controller skips to the block end.
    pub(super) next_producer_id: i64,
    pending: Vec<Vec<u8>>,
}

impl ControllerState {
    /// An empty state for this node. `controller_id` starts as `node_id`.
    pub fn new(
        cluster_id: String,
        node_id: NodeId,
        shard_count: u32,
        defaults: BrokerDefaults,
    ) -> Result<Self, ControllerError> {
        if shard_count == 0 {
            return Err(ControllerError::InvalidRequest("shard count must be at least 1".into()));
        }
        let defaults = Arc::new(defaults);
        let mut s = ControllerState {
            cluster_id,
            node_id,
            shard_count,
            image: Arc::new(MetadataImage::empty(node_id, shard_count, &defaults)),
            defaults,
            controller_id: node_id,
            version: 0,
            broker_configs: BTreeMap::new(),
            client_quotas: Arc::default(),
            scram_credentials: Arc::default(),
            acls: Arc::default(),
            topics: BTreeMap::new(),
            topic_ids: HashMap::new(),
            producer_id_block_end: 0,
            brokers: Arc::default(),
            next_broker_epoch: 1,
            reassignments: BTreeMap::new(),
            last_applied: 0,
            next_producer_id: 0,
            pending: Vec::new(),
        };
        s.rebuild_image();
        Ok(s)
    }

    /// This node's id.
    #[must_use]
    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    /// The current immutable snapshot, for publication to every shard.
    #[must_use]
    pub fn image(&self) -> Arc<MetadataImage> {
        Arc::clone(&self.image)
    }

    /// The broker-level defaults in force (static plus this node's dynamic layers).
    #[must_use]
    pub fn broker_defaults(&self) -> &Arc<BrokerDefaults> {
        &self.defaults
    }

    /// The index of the last entry applied (0: none; a legacy import's snapshot says 0).
    #[must_use]
    pub fn last_applied(&self) -> u64 {
        self.last_applied
    }

    /// Registered brokers.
    #[must_use]
    pub fn brokers(&self) -> &BTreeMap<NodeId, BrokerImage> {
        &self.brokers
    }

    /// Sets the active controller the image names (the server knows it from Raft).
    pub fn set_controller_id(&mut self, id: NodeId) {
        if self.controller_id != id {
            self.controller_id = id;
            self.rebuild_image();
        }
    }

    /// Called when this node becomes the active controller, on the working copy (a clone of
    /// the committed one): ids of the last producer-id block may have been handed out by the
    /// previous leader, so skip the rest of it.
    pub fn become_active(&mut self) {
        self.next_producer_id = self.producer_id_block_end;
        self.pending.clear();
    }

    /// Drains the frames of the operations run since the last call, in order; each is one
    /// Raft entry, to be applied with [`ControllerState::apply_entry`] once committed.
    pub fn take_proposals(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.pending)
    }

    /// The number of queued frames (the heartbeat code takes only its own).
    pub(super) fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Removes and returns the frames queued after the first `from`.
    pub(super) fn split_proposals(&mut self, from: usize) -> Vec<Vec<u8>> {
        self.pending.split_off(from.min(self.pending.len()))
    }

    /// Applies one committed entry: exactly one frame as [`encode_frame`] writes it. An entry
    /// at or below the last applied index is skipped (a replay after restart is harmless).
    /// On error the state may be partly changed: the caller must not go on with it.
    pub fn apply_entry(&mut self, index: u64, data: &[u8]) -> Result<(), ControllerError> {
        if index <= self.last_applied && self.last_applied > 0 {
            return Ok(());
        }
        let bad = |reason: String| ControllerError::BadEntry { index, reason };
        let records = decode_frame(data).map_err(bad)?;
        for record in records {
            self.apply(record).map_err(bad)?;
        }
        self.last_applied = index;
        self.rebuild_image();
        Ok(())
    }

    /// The records that rebuild the whole replicated state, with the last applied index and
    /// the broker-epoch counter. Deterministic: equal states give equal bytes.
    #[must_use]
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(SNAPSHOT_HEADER_BYTES);
        out.push(SNAPSHOT_VERSION);
        out.extend_from_slice(&self.last_applied.to_be_bytes());
        out.extend_from_slice(&self.next_broker_epoch.to_be_bytes());
        let frames = u32::try_from(self.topics.len() + 1).unwrap_or(u32::MAX);
        out.extend_from_slice(&frames.to_be_bytes());
        let mut cluster =
            vec![MetadataRecord::ProducerIdsBlock { block_end: self.producer_id_block_end }];
        for (node, b) in self.brokers.iter() {
            cluster.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                node: *node,
                broker_epoch: b.epoch,
                incarnation_id: b.incarnation_id,
                endpoints: b.endpoints.clone(),
                rack: b.rack.clone(),
                fenced: b.fenced,
            }));
        }
        for (node, layer) in &self.broker_configs {
            for (name, value) in layer {
                cluster.push(MetadataRecord::BrokerConfig(BrokerConfigRecord {
                    node: *node,
                    name: name.clone(),
                    value: Some(value.clone()),
                }));
            }
        }
        for (entity, quotas) in &self.client_quotas.entities {
            for (key, value) in quotas {
                cluster.push(MetadataRecord::ClientQuota(ClientQuotaRecord {
                    entity: super::client_quotas::record_parts(entity),
                    key: key.clone(),
                    value: Some(*value),
                }));
            }
        }
        cluster.extend(self.scram_snapshot_records());
        cluster.extend(self.acl_snapshot_records());
        out.extend_from_slice(&encode_frame(&cluster));
        // One frame per topic keeps every frame within the size a live change may have.
        for t in self.topics.values() {
            let mut records = vec![MetadataRecord::Topic(TopicRecord {
                name: t.name.clone(),
                topic_id: t.topic_id,
                internal: t.internal,
            })];
            records.extend(t.partitions.iter().map(|p| MetadataRecord::Partition(record_of(t, p))));
            records.extend(self.reassignment_records(t.topic_id));
            records.extend(t.configs.iter().map(|(name, value)| {
                MetadataRecord::Config(ConfigRecord {
                    topic_id: t.topic_id,
                    name: name.clone(),
                    value: Some(value.clone()),
                })
            }));
            out.extend_from_slice(&encode_frame(&records));
        }
        out
    }

    /// Replaces the replicated state with a snapshot's, as of entry `index`. Node-local
    /// settings are kept; pending proposals are dropped; producer ids skip to the block end.
    pub fn restore_snapshot(&mut self, index: u64, data: &[u8]) -> Result<(), ControllerError> {
        let bad = |reason: String| ControllerError::BadEntry { index, reason };
        if data.len() < SNAPSHOT_HEADER_BYTES {
            return Err(bad("snapshot shorter than its header".into()));
        }
        if data[0] != SNAPSHOT_VERSION {
            return Err(bad(format!("unknown snapshot version {}", data[0])));
        }
        let mut epoch = [0u8; 8];
        epoch.copy_from_slice(&data[9..17]);
        let count = u32::from_be_bytes([data[17], data[18], data[19], data[20]]);
        let body = &data[SNAPSHOT_HEADER_BYTES..];
        let frames = parse_log(body, Path::new("snapshot"))?;
        if frames.valid_len != body.len() as u64 || frames.operations.len() != count as usize {
            return Err(bad(format!(
                "snapshot cut: {} of {count} frames, {} of {} bytes",
                frames.operations.len(),
                frames.valid_len,
                body.len()
            )));
        }
        let statics = self.defaults.with_dynamic(BTreeMap::new(), BTreeMap::new());
        let mut fresh =
            ControllerState::new(self.cluster_id.clone(), self.node_id, self.shard_count, statics)?;
        for (_, records) in frames.operations {
            for record in records {
                fresh.apply(record).map_err(bad)?;
            }
        }
        fresh.next_broker_epoch = fresh.next_broker_epoch.max(i64::from_be_bytes(epoch));
        fresh.last_applied = index;
        fresh.next_producer_id = fresh.producer_id_block_end;
        fresh.controller_id = self.controller_id;
        // Images published from this node keep increasing versions across a restore.
        fresh.version = self.version;
        fresh.rebuild_image();
        *self = fresh;
        Ok(())
    }

    /// Applies one operation's records to `self` at once and queues its frame for Raft.
    pub(super) fn propose(&mut self, records: Vec<MetadataRecord>) -> Result<(), ControllerError> {
        self.propose_ops(vec![records])
    }

    /// As [`ControllerState::propose`] for several operations (one frame each), then rebuilds
    /// the image once. On error (a validated record failing to apply: a bug) the state may be
    /// partly changed and must be discarded; nothing is queued then.
    pub(super) fn propose_ops(
        &mut self,
        ops: Vec<Vec<MetadataRecord>>,
    ) -> Result<(), ControllerError> {
        let mut frames = Vec::with_capacity(ops.len());
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
            frames.push(frame);
        }
        for record in ops.into_iter().flatten() {
            self.apply(record).map_err(ControllerError::ApplyFailed)?;
        }
        self.pending.extend(frames);
        self.rebuild_image();
        Ok(())
    }

    /// Applies one record (entries, snapshots, legacy replay and live changes alike).
    pub(super) fn apply(&mut self, record: MetadataRecord) -> Result<(), String> {
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
                let node = self.node_id;
                let topic = self.topic_mut(&p.topic_id)?;
                let index = usize::try_from(p.partition)
                    .map_err(|_| format!("negative partition {}", p.partition))?;
                // The state's owner shard is only a legacy hint carried to the shard
                // assignment (or UNASSIGNED_SHARD); the node image sets the real one.
                let previous = topic.partitions.get(index).map(|p| p.owner_shard);
                let partition = PartitionImage {
                    index: p.partition,
                    owner_shard: p
                        .owner_shard_hint
                        .or(previous)
                        .unwrap_or(super::shard_assignment::UNASSIGNED_SHARD),
                    hosted: p.replicas.contains(&node),
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    replicas: p.replicas,
                    isr: p.isr,
                    elr: p.elr,
                    last_known_elr: p.last_known_elr,
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
                self.reassignments.retain(|(id, _), _| *id != topic_id);
            }
            MetadataRecord::ProducerIdsBlock { block_end } => {
                if block_end < self.producer_id_block_end {
                    return Err(format!("producer id block end {block_end} moves backwards"));
                }
                self.producer_id_block_end = block_end;
            }
            MetadataRecord::BrokerConfig(c) => self.apply_broker_config(c),
            MetadataRecord::ClientQuota(q) => self.apply_client_quota(q)?,
            MetadataRecord::RegisterBroker(r) => self.apply_register(r),
            MetadataRecord::FenceBroker(b) => self.apply_fence(b, true)?,
            MetadataRecord::UnfenceBroker(b) => self.apply_fence(b, false)?,
            MetadataRecord::UnregisterBroker(b) => self.apply_unregister(b)?,
            MetadataRecord::PartitionReassignment(r) => self.apply_reassignment(r)?,
            MetadataRecord::ScramCredential(r) => self.apply_scram_credential(r),
            MetadataRecord::Acl(r) => self.apply_acl(r)?,
            MetadataRecord::RemoveAcl { id } => self.apply_remove_acl(id)?,
        }
        Ok(())
    }

    fn topic_mut(&mut self, id: &Uuid) -> Result<&mut TopicImage, String> {
        let name = self.topic_ids.get(id).ok_or_else(|| format!("unknown topic id {id}"))?;
        let topic = self.topics.get_mut(name).ok_or_else(|| format!("topic {name} missing"))?;
        Ok(Arc::make_mut(topic))
    }

    pub(super) fn rebuild_image(&mut self) {
        self.version += 1;
        let mut image = MetadataImage::empty(self.node_id, self.shard_count, &self.defaults);
        image.version = self.version;
        image.cluster_id = self.cluster_id.clone();
        image.controller_id = self.controller_id;
        image.topics = self.topics.clone();
        image.topic_ids = self.topic_ids.clone();
        image.client_quotas = Arc::clone(&self.client_quotas);
        image.scram_credentials = Arc::clone(&self.scram_credentials);
        image.acls = Arc::clone(&self.acls);
        image.brokers = Arc::clone(&self.brokers);
        image.reassignments = Arc::new(self.reassignments.clone());
        self.image = Arc::new(image);
    }
}

/// The full record of a partition as it stands.
pub(super) fn record_of(t: &TopicImage, p: &PartitionImage) -> PartitionRecord {
    PartitionRecord {
        topic_id: t.topic_id,
        partition: p.index,
        owner_shard_hint: None,
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        replicas: p.replicas.clone(),
        isr: p.isr.clone(),
        elr: p.elr.clone(),
        last_known_elr: p.last_known_elr.clone(),
    }
}

/// Replays a pre-Raft single-node metadata log (`__cluster_metadata-0/00000000000000000000.log`,
/// torn tail ignored as the old replay cut it) into a state and returns that state's snapshot
/// bytes (last applied index 0), for the Raft store's bootstrap snapshot. The old records'
/// owner shards go to this node's `shard-assignment` file (unless one exists already). `None`: no legacy
/// log (or an empty one). Once the snapshot is durable the server calls
/// [`mark_legacy_log_imported`] so the file is not imported twice.
pub fn import_legacy_log(data_dir: &Path) -> Result<Option<Vec<u8>>, ControllerError> {
    let path = data_dir.join(METADATA_DIR).join(METADATA_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(ControllerError::Io { op: "read", path, source }),
    };
    let replayed = parse_log(&bytes, &path)?;
    if replayed.operations.is_empty() {
        return Ok(None);
    }
    if replayed.valid_len < bytes.len() as u64 {
        tracing::warn!(
            path = %path.display(),
            valid_bytes = replayed.valid_len,
            file_bytes = bytes.len(),
            "legacy metadata log has a torn tail (interrupted write); importing the whole frames"
        );
    }
    let mut state = ControllerState::new(String::new(), NodeId(-1), 1, BrokerDefaults::default())?;
    for (position, records) in replayed.operations {
        for record in records {
            state.apply(record).map_err(|reason| ControllerError::Corrupt {
                path: path.clone(),
                position,
                reason,
            })?;
        }
    }
    // The owner shards of the old records are this node's decision now: keep them in its
    // shard assignment so every partition stays on the shard that holds its data.
    state.rebuild_image();
    if !data_dir.join(super::SHARD_ASSIGNMENT_FILE).exists() {
        super::ShardAssignment::from_legacy(&state.image()).save(data_dir)?;
    }
    Ok(Some(state.snapshot()))
}

/// Renames the imported legacy log to `00000000000000000000.log.imported` (durably), so a
/// restart does not import it again. Missing file: nothing to do.
pub fn mark_legacy_log_imported(data_dir: &Path) -> Result<(), ControllerError> {
    let dir = data_dir.join(METADATA_DIR);
    let from = dir.join(METADATA_FILE);
    if !from.exists() {
        return Ok(());
    }
    let to = dir.join(format!("{METADATA_FILE}{LEGACY_IMPORTED_SUFFIX}"));
    std::fs::rename(&from, &to).map_err(|source| ControllerError::Io {
        op: "rename",
        path: from.clone(),
        source,
    })?;
    super::log::sync_dir(&dir)
}

/// The shard a new partition goes to, exposed for the server's own checks.
#[must_use]
pub fn least_loaded_shard(image: &MetadataImage) -> ShardId {
    let mut load = image.partitions_per_shard();
    placement::least_loaded(&mut load)
}
