//! The controller: owner of cluster metadata (topics, partitions, placement, topic configs,
//! producer-id blocks, brokers). The image it publishes and the topic-config registry are
//! [`crate::metadata`]'s, re-exported here.
//!
//! Lives on the controller shard (shard 0) and is called synchronously from there; it holds
//! no glommio types. The metadata itself is [`ControllerState`], a deterministic state
//! machine fed committed entries (one CRC frame of records each) and snapshots, whose
//! operations apply at once and queue their frames as proposals (see [`state`]).
//! [`BrokerHeartbeats`] tracks broker sessions on the active controller.
//!
//! [`Controller`] is the single-node path until the server runs the Raft quorum: a state plus
//! the legacy metadata log file. Every change follows "log, then apply": the operation runs
//! on a clone of the state, its frames are written and fsynced (see [`log`]), and only then
//! does the clone replace the state, so a restart rebuilds exactly what clients were told.
//! After each change a new immutable [`MetadataImage`] is built, which the server publishes
//! to every shard.
//!
//! Invariants: topic names and ids are unique; partitions of a topic are `0..n`; every owner
//! shard is below the shard count (partitions of vanished shards are re-placed at open and
//! the move recorded); producer ids are never handed out twice, across restarts too.

pub mod acls;
pub mod alter_partition;
mod broker_configs;
mod brokers;
mod client_quotas;
mod delta;
pub mod election;
mod elr;
mod error;
pub mod log;
mod meta_properties;
mod placement;
pub mod reassign;
pub mod records;
pub mod scram;
pub mod shard_assignment;
pub mod state;
mod topic_name;
mod topics;

#[cfg(test)]
mod state_tests;
#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;

pub use alter_partition::{AlterPartitionError, AlterPartitionRequest};
pub use broker_configs::BrokerChange;
pub use brokers::{
    BrokerEpoch, BrokerHeartbeat, BrokerHeartbeats, BrokerRegistration, HeartbeatOutcome, NO_LEADER,
};
pub use client_quotas::QuotaChange;
pub use delta::{ImageDelta, PartitionRef};
pub use error::ControllerError;
pub use meta_properties::{random_kafka_uuid, MetaProperties};
pub use reassign::{ReassignError, ReassignmentView};
pub use shard_assignment::{
    node_image, node_image_since, stable_shard, ShardAssignment, SHARD_ASSIGNMENT_FILE,
    UNASSIGNED_SHARD,
};
pub use state::{
    import_legacy_log, least_loaded_shard, mark_legacy_log_imported, ControllerState,
    LEGACY_IMPORTED_SUFFIX,
};
pub use topic_name::{collision_key, is_internal, validate_topic_name, INTERNAL_TOPICS};
pub use topics::{NewTopic, TopicChange};

// The image and the config registry are `metadata`'s (below the controller, which builds the
// image); re-exported so `controller::MetadataImage`, `controller::configs` and the rest keep
// their paths.
pub use crate::metadata::configs::{self, BrokerDefaults, TopicConfig};
pub use crate::metadata::{BrokerImage, MetadataImage, PartitionImage, TopicImage};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use uuid::Uuid;

use self::log::{parse_log, FileStore, MetadataStore};
use self::records::MetadataRecord;
use crate::constants::PRODUCER_ID_BLOCK_SIZE;
use crate::metadata::{ClientQuotaConfigs, QuotaEntity};
use crate::types::{NodeId, ProducerId};

/// The single-node controller: a [`ControllerState`] made durable by the legacy metadata
/// log. See the module docs.
pub struct Controller {
    meta: MetaProperties,
    state: ControllerState,
    store: Box<dyn MetadataStore + Send>,
    /// Set after a failed log write: the file may end in a partial frame, so the controller
    /// refuses changes until a restart replays (and truncates) it.
    failed: Option<String>,
    /// Where the shard assignment is saved (`None`: tests over an in-memory store).
    data_dir: Option<PathBuf>,
    /// This node's replica → shard map, reconciled after every change.
    assignment: ShardAssignment,
    /// The state's image with this node's owner shards ([`node_image`]).
    image: Arc<MetadataImage>,
    /// The state's image `image` was built from (to reuse unchanged topics).
    built_from: Arc<MetadataImage>,
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
        let assignment = ShardAssignment::load_from(data_dir, shard_count)?;
        Self::open_inner(Box::new(store), meta, defaults, Some(data_dir.into()), assignment)
    }

    /// As [`Controller::open`], over any store (tests use an in-memory one).
    pub fn open_with_store(
        store: Box<dyn MetadataStore + Send>,
        meta: MetaProperties,
        shard_count: u32,
        defaults: BrokerDefaults,
    ) -> Result<Controller, ControllerError> {
        if shard_count == 0 {
            return Err(ControllerError::InvalidRequest("shard count must be at least 1".into()));
        }
        Self::open_inner(store, meta, defaults, None, ShardAssignment::new(shard_count))
    }

    fn open_inner(
        mut store: Box<dyn MetadataStore + Send>,
        meta: MetaProperties,
        defaults: BrokerDefaults,
        data_dir: Option<PathBuf>,
        assignment: ShardAssignment,
    ) -> Result<Controller, ControllerError> {
        let shard_count = assignment.shard_count();
        let mut state =
            ControllerState::new(meta.cluster_id.clone(), meta.node_id, shard_count, defaults)?;
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
        for (position, records) in replayed.operations {
            for record in records {
                state.apply(record).map_err(|reason| ControllerError::Corrupt {
                    path: store.path().to_path_buf(),
                    position,
                    reason,
                })?;
            }
        }
        // Ids of the last block may have been handed out before the restart: skip the rest.
        state.become_active();
        state.rebuild_image();
        let image = state.image();
        let built_from = Arc::clone(&image);
        let mut c = Controller {
            meta,
            state,
            store,
            failed: None,
            data_dir,
            assignment,
            image,
            built_from,
        };
        // Places new partitions, and re-places those of shards that no longer exist (fewer
        // `--shards` than before); version-0 records' owner shards seed a fresh assignment.
        c.refresh()?;
        Ok(c)
    }

    /// Reconciles the shard assignment with the state (saving it when it changed) and
    /// rebuilds this node's image.
    fn refresh(&mut self) -> Result<(), ControllerError> {
        let committed = self.state.image();
        let node = self.meta.node_id;
        if self.assignment.reconcile(&committed, node) {
            if let Some(dir) = &self.data_dir {
                if let Err(e) = self.assignment.save(dir) {
                    self.failed = Some(e.to_string());
                    return Err(e);
                }
            }
        }
        let previous = Some((&*self.built_from, &*self.image));
        let image = node_image_since(&committed, node, node, &self.assignment, previous);
        self.image = Arc::new(image);
        self.built_from = committed;
        Ok(())
    }

    /// The topic as this node's image has it (with its owner shards), when it is the same
    /// topic (validate-only previews have a nil id and stay as they are).
    fn published(&self, t: Arc<TopicImage>) -> Arc<TopicImage> {
        match self.image.topic(&t.name) {
            Some(p) if p.topic_id == t.topic_id => Arc::clone(p),
            _ => t,
        }
    }

    /// Runs an operation on a clone of the state, makes its proposals durable, then keeps
    /// the clone ("log, then apply"). On any error the state is unchanged.
    fn exec<T>(
        &mut self,
        op: impl FnOnce(&mut ControllerState) -> Result<T, ControllerError>,
    ) -> Result<T, ControllerError> {
        let mut working = self.state.clone();
        let out = op(&mut working)?;
        self.persist(working)?;
        Ok(out)
    }

    fn persist(&mut self, mut working: ControllerState) -> Result<(), ControllerError> {
        let frames = working.take_proposals();
        if !frames.is_empty() {
            if let Some(reason) = &self.failed {
                return Err(ControllerError::ReadOnly(reason.clone()));
            }
            if let Err(e) = self.store.append_durable(&frames.concat()) {
                self.failed = Some(e.to_string());
                return Err(e);
            }
        }
        self.state = working;
        self.refresh()
    }

    /// The state (read-only): image, brokers, snapshot.
    #[must_use]
    pub fn state(&self) -> &ControllerState {
        &self.state
    }

    /// The current immutable snapshot with this node's owner shards, for publication to
    /// every shard.
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
        self.state.broker_defaults()
    }

    /// Hands out a producer id unique across restarts (reserving a block in the log first).
    pub fn allocate_producer_id(&mut self) -> Result<ProducerId, ControllerError> {
        if self.state.next_producer_id < self.state.producer_id_block_end {
            // Inside the reserved block: nothing to log, so no clone.
            return self.state.allocate_producer_id();
        }
        self.exec(ControllerState::allocate_producer_id)
    }

    /// See [`ControllerState::create_topics`]; a failed write fails every created topic.
    pub fn create_topics(
        &mut self,
        topics: &[NewTopic],
        validate_only: bool,
    ) -> Vec<Result<Arc<TopicImage>, ControllerError>> {
        let mut working = self.state.clone();
        let mut results = working.create_topics(topics, validate_only);
        if let Err(e) = self.persist(working) {
            let reason = e.to_string();
            let mut first = Some(e);
            for r in results.iter_mut().filter(|r| r.is_ok()) {
                *r = Err(first.take().unwrap_or_else(|| ControllerError::ReadOnly(reason.clone())));
            }
        }
        results.into_iter().map(|r| r.map(|t| self.published(t))).collect()
    }

    /// See [`ControllerState::create_topics_with_defaults`].
    pub fn create_topics_with_defaults(
        &mut self,
        names: &[String],
    ) -> Vec<(String, Result<Arc<TopicImage>, ControllerError>)> {
        let mut working = self.state.clone();
        let mut results = working.create_topics_with_defaults(names);
        if let Err(e) = self.persist(working) {
            let reason = e.to_string();
            let mut first = Some(e);
            for (_, r) in results.iter_mut().filter(|(_, r)| r.is_ok()) {
                *r = Err(first.take().unwrap_or_else(|| ControllerError::ReadOnly(reason.clone())));
            }
        }
        results.into_iter().map(|(n, r)| (n, r.map(|t| self.published(t)))).collect()
    }

    /// See [`ControllerState::delete_topic`].
    pub fn delete_topic(&mut self, name: &str) -> Result<Arc<TopicImage>, ControllerError> {
        self.exec(|s| s.delete_topic(name))
    }

    /// See [`ControllerState::delete_topic_by_id`].
    pub fn delete_topic_by_id(&mut self, id: &Uuid) -> Result<Arc<TopicImage>, ControllerError> {
        self.exec(|s| s.delete_topic_by_id(id))
    }

    /// See [`ControllerState::create_partitions`].
    pub fn create_partitions(
        &mut self,
        name: &str,
        count: i32,
        assignments: Option<&[Vec<i32>]>,
        validate_only: bool,
    ) -> Result<Arc<TopicImage>, ControllerError> {
        let t = self.exec(|s| s.create_partitions(name, count, assignments, validate_only))?;
        Ok(if validate_only { t } else { self.published(t) })
    }

    /// See [`ControllerState::alter_topic_configs`].
    pub fn alter_topic_configs(
        &mut self,
        name: &str,
        changes: &[TopicChange],
        validate_only: bool,
    ) -> Result<Arc<TopicImage>, ControllerError> {
        let t = self.exec(|s| s.alter_topic_configs(name, changes, validate_only))?;
        Ok(if validate_only { t } else { self.published(t) })
    }

    /// See [`ControllerState::dynamic_broker_configs`].
    #[must_use]
    pub fn dynamic_broker_configs(&self, node: Option<NodeId>) -> BTreeMap<String, String> {
        self.state.dynamic_broker_configs(node)
    }

    /// See [`ControllerState::alter_broker_configs`].
    pub fn alter_broker_configs(
        &mut self,
        node: Option<NodeId>,
        changes: &[BrokerChange],
        validate_only: bool,
    ) -> Result<bool, ControllerError> {
        self.exec(|s| s.alter_broker_configs(node, changes, validate_only))
    }

    /// See [`ControllerState::client_quotas`].
    #[must_use]
    pub fn client_quotas(&self) -> &Arc<ClientQuotaConfigs> {
        self.state.client_quotas()
    }

    /// See [`ControllerState::alter_client_quotas`].
    pub fn alter_client_quotas(
        &mut self,
        entity: &QuotaEntity,
        changes: &[QuotaChange],
        validate_only: bool,
    ) -> Result<bool, ControllerError> {
        self.exec(|s| s.alter_client_quotas(entity, changes, validate_only))
    }
}

impl ControllerState {
    /// Hands out a producer id: reserves the next block (a proposal) when the current one is
    /// used up. Ids are unique across leaders because a new active controller skips to the
    /// block end ([`ControllerState::become_active`]).
    pub fn allocate_producer_id(&mut self) -> Result<ProducerId, ControllerError> {
        if self.next_producer_id >= self.producer_id_block_end {
            let block_end = self
                .producer_id_block_end
                .checked_add(PRODUCER_ID_BLOCK_SIZE)
                .ok_or(ControllerError::ProducerIdsExhausted)?;
            self.propose(vec![MetadataRecord::ProducerIdsBlock { block_end }])?;
        }
        let id = self.next_producer_id;
        self.next_producer_id += 1;
        Ok(ProducerId(id))
    }
}

// The server may open the controller before moving it onto the controller shard's thread.
const _: fn() = || {
    fn assert_send<T: Send>() {}
    assert_send::<Controller>();
    assert_send::<ControllerState>();
};
