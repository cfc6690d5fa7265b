//! Topic operations of the [`ControllerState`]: create (explicit and auto-create), delete,
//! add partitions, change configs. Each validates fully before proposing, proposes one frame
//! per topic, and rebuilds the image once per call.
//!
//! Runs on the controller shard. Kafka's rules and messages: replication factor and partition
//! count (-1 = broker default) over the unfenced brokers (striped placement, see
//! `placement::striped`), manual assignments over registered brokers, '.'/'_' name
//! collisions refused, partition counts only grow. While no broker is registered, this node
//! is the only placement target (single-node compatibility).

use std::collections::BTreeMap;
use std::sync::Arc;

use uuid::Uuid;

use super::configs::{validate_topic_configs, ConfigError};
use super::records::{ConfigRecord, MetadataRecord, PartitionRecord, TopicRecord};
use super::topic_name::{collision_key, is_internal, validate_topic_name};
use super::{placement, ControllerError, ControllerState, PartitionImage, TopicConfig, TopicImage};
use crate::constants::TOPIC_PARTITIONS_MAX;
use crate::types::{Epoch, NodeId};

use super::brokers::NO_LEADER;

/// A topic to create, as CreateTopics describes it.
#[derive(Clone, Debug, Default)]
pub struct NewTopic {
    pub name: String,
    /// -1 = `num.partitions` (required to be -1 when `assignments` is given).
    pub num_partitions: i32,
    /// -1 = `default.replication.factor`.
    pub replication_factor: i16,
    /// Manual assignment: (partition index, replica broker ids).
    pub assignments: Vec<(i32, Vec<i32>)>,
    /// Configs as sent; `None` values are refused (as Kafka refuses them).
    pub configs: Vec<(String, Option<String>)>,
}

impl NewTopic {
    /// A topic with broker-default partitions, replication and configs.
    #[must_use]
    pub fn with_defaults(name: impl Into<String>) -> Self {
        Self { name: name.into(), num_partitions: -1, replication_factor: -1, ..Self::default() }
    }
}

/// One config change for [`ControllerState::alter_topic_configs`]: set (`Some`) or delete (`None`).
pub type TopicChange = (String, Option<String>);

impl ControllerState {
    /// Creates topics (or only validates them); one result per topic, in order. On success the
    /// result is the created topic (with a nil topic id when `validate_only`).
    pub fn create_topics(
        &mut self,
        topics: &[NewTopic],
        validate_only: bool,
    ) -> Vec<Result<Arc<TopicImage>, ControllerError>> {
        // Plan every topic against the state plus the topics planned before it, then write
        // all frames (one per topic, each atomic) with a single fsync.
        let mut pending: Vec<String> = Vec::new();
        let mut ops = Vec::new();
        let mut results: Vec<Result<Arc<TopicImage>, ControllerError>> = topics
            .iter()
            .map(|spec| {
                let (image, records) = self.plan_topic(spec, &pending)?;
                pending.push(image.name.clone());
                ops.push(records);
                Ok(Arc::new(TopicImage { topic_id: Uuid::nil(), ..image }))
            })
            .collect();
        if validate_only || ops.is_empty() {
            return results;
        }
        if let Err(e) = self.propose_ops(ops) {
            let reason = e.to_string();
            let mut first = Some(e);
            for r in results.iter_mut().filter(|r| r.is_ok()) {
                *r = Err(first.take().unwrap_or_else(|| ControllerError::ReadOnly(reason.clone())));
            }
            return results;
        }
        for r in &mut results {
            if let Ok(planned) = r {
                *r = self.topics.get(&planned.name).cloned().ok_or_else(|| {
                    ControllerError::ReadOnly(format!(
                        "topic {} vanished after commit",
                        planned.name
                    ))
                });
            }
        }
        results
    }

    /// Auto-creates topics with the broker defaults (Metadata auto-create). A topic that
    /// already exists is returned as is, so racing requests both succeed.
    pub fn create_topics_with_defaults(
        &mut self,
        names: &[String],
    ) -> Vec<(String, Result<Arc<TopicImage>, ControllerError>)> {
        let (existing, missing): (Vec<&String>, Vec<&String>) =
            names.iter().partition(|n| self.topics.contains_key(n.as_str()));
        let specs: Vec<NewTopic> = missing.iter().map(|n| NewTopic::with_defaults(*n)).collect();
        let created = self.create_topics(&specs, false);
        let mut out: Vec<_> = existing
            .into_iter()
            .filter_map(|n| self.topics.get(n).map(|t| (n.clone(), Ok(Arc::clone(t)))))
            .collect();
        out.extend(missing.into_iter().cloned().zip(created));
        out
    }

    /// Deletes a topic by name; returns its last state (the server renames its directories).
    pub fn delete_topic(&mut self, name: &str) -> Result<Arc<TopicImage>, ControllerError> {
        if !self.defaults.delete_topic_enable {
            return Err(ControllerError::TopicDeletionDisabled(
                "Topic deletion is disabled.".into(),
            ));
        }
        let topic = self
            .topics
            .get(name)
            .cloned()
            .ok_or_else(|| ControllerError::UnknownTopic(name.to_string()))?;
        self.propose(vec![MetadataRecord::RemoveTopic { topic_id: topic.topic_id }])?;
        Ok(topic)
    }

    /// Deletes a topic by topic id.
    pub fn delete_topic_by_id(&mut self, id: &Uuid) -> Result<Arc<TopicImage>, ControllerError> {
        let name = self.topic_ids.get(id).cloned().ok_or(ControllerError::UnknownTopicId(*id))?;
        self.delete_topic(&name)
    }

    /// Grows a topic to `count` partitions (CreatePartitions). `assignments`, when given,
    /// must name one replica list per new partition, over registered brokers; otherwise the
    /// new partitions get the topic's replication factor, striped over unfenced brokers.
    pub fn create_partitions(
        &mut self,
        name: &str,
        count: i32,
        assignments: Option<&[Vec<i32>]>,
        validate_only: bool,
    ) -> Result<Arc<TopicImage>, ControllerError> {
        let topic = self
            .topics
            .get(name)
            .cloned()
            .ok_or_else(|| ControllerError::UnknownTopic(name.to_string()))?;
        let current = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
        if count < current {
            return Err(ControllerError::InvalidPartitions(format!(
                "Topic currently has {current} partitions, which is higher than the requested \
                 {count}."
            )));
        }
        if count == current {
            return Err(ControllerError::InvalidPartitions(format!(
                "Topic already has {current} partitions."
            )));
        }
        check_partition_limit(count)?;
        if let Some(a) = assignments {
            let added = usize::try_from(count - current).unwrap_or(0);
            if a.len() != added {
                return Err(ControllerError::InvalidReplicaAssignment(format!(
                    "Attempted to add {added} additional partition(s), but only {} assignment(s) \
                     were specified.",
                    a.len()
                )));
            }
            for replicas in a {
                self.check_assignment(replicas)?;
            }
        }
        let rf = topic.partitions.first().map_or(1, |p| p.replicas.len());
        let added = usize::try_from(count - current).unwrap_or(0);
        // Continue the topic's row-major replica slots (see `placement::striped`).
        let first_slot = topic.partitions.len() * rf;
        let mut striped = match assignments {
            Some(_) => Vec::new().into_iter(),
            None => self.striped(first_slot, added, rf)?,
        };
        let records: Vec<MetadataRecord> = (current..count)
            .map(|index| {
                let replicas = match assignments {
                    Some(a) => a[usize::try_from(index - current).unwrap_or(0)]
                        .iter()
                        .map(|r| NodeId(*r))
                        .collect(),
                    None => striped.next().unwrap_or_default(),
                };
                MetadataRecord::Partition(self.new_partition(topic.topic_id, index, replicas))
            })
            .collect();
        if validate_only {
            let mut preview = (*topic).clone();
            preview
                .partitions
                .extend(records.iter().filter_map(|r| partition_image(r, self.node_id)));
            return Ok(Arc::new(preview));
        }
        self.propose(records)?;
        self.topics.get(name).cloned().ok_or_else(|| ControllerError::UnknownTopic(name.into()))
    }

    /// Sets or deletes topic configs as one validated change (the base of AlterConfigs and
    /// IncrementalAlterConfigs). Returns the topic with its new configs.
    pub fn alter_topic_configs(
        &mut self,
        name: &str,
        changes: &[TopicChange],
        validate_only: bool,
    ) -> Result<Arc<TopicImage>, ControllerError> {
        let topic = self
            .topics
            .get(name)
            .cloned()
            .ok_or_else(|| ControllerError::UnknownTopic(name.to_string()))?;
        let mut wanted = topic.configs.clone();
        for (key, value) in changes {
            match value {
                Some(v) => wanted.insert(key.clone(), v.clone()),
                None => wanted.remove(key),
            };
        }
        let normalized = validate_topic_configs(&wanted, &self.defaults)?;
        let mut records = Vec::new();
        for (key, value) in &normalized {
            if topic.configs.get(key) != Some(value) {
                records.push(config_record(topic.topic_id, key, Some(value.clone())));
            }
        }
        for key in topic.configs.keys().filter(|k| !normalized.contains_key(*k)) {
            records.push(config_record(topic.topic_id, key, None));
        }
        if validate_only || records.is_empty() {
            let mut preview = (*topic).clone();
            preview.config = TopicConfig::resolve(&normalized, &self.defaults);
            preview.configs = normalized;
            return Ok(Arc::new(preview));
        }
        self.propose(records)?;
        self.topics.get(name).cloned().ok_or_else(|| ControllerError::UnknownTopic(name.into()))
    }

    /// Validates a new topic and builds its records and resulting image (not yet applied).
    fn plan_topic(
        &self,
        spec: &NewTopic,
        pending: &[String],
    ) -> Result<(TopicImage, Vec<MetadataRecord>), ControllerError> {
        validate_topic_name(&spec.name).map_err(ControllerError::InvalidTopic)?;
        if self.topics.contains_key(&spec.name) || pending.contains(&spec.name) {
            return Err(ControllerError::TopicAlreadyExists(spec.name.clone()));
        }
        let key = collision_key(&spec.name);
        let mut names = self.topics.keys().chain(pending.iter());
        if let Some(other) = names.find(|t| collision_key(t) == key) {
            return Err(ControllerError::InvalidTopic(format!(
                "Topic '{}' collides with existing topic: {other}",
                spec.name
            )));
        }
        let (partitions, rf) = self.partition_count(spec)?;
        let configs = self.validated_configs(spec)?;
        // Rotate the first leader per topic so single-partition topics spread too.
        let mut striped = match rf {
            Some(rf) => {
                let count = usize::try_from(partitions).unwrap_or(0);
                Some(self.striped(self.topics.len() + pending.len(), count, rf)?)
            }
            None => None,
        };
        let topic_id = Uuid::new_v4();
        let mut records = vec![MetadataRecord::Topic(TopicRecord {
            name: spec.name.clone(),
            topic_id,
            internal: is_internal(&spec.name),
        })];
        for index in 0..partitions {
            let replicas = match &mut striped {
                Some(s) => s.next().unwrap_or_default(),
                None => spec
                    .assignments
                    .iter()
                    .find(|(i, _)| *i == index)
                    .map(|(_, r)| r.iter().map(|n| NodeId(*n)).collect())
                    .unwrap_or_default(),
            };
            records.push(MetadataRecord::Partition(self.new_partition(topic_id, index, replicas)));
        }
        for (name, value) in &configs {
            records.push(config_record(topic_id, name, Some(value.clone())));
        }
        let image = TopicImage {
            name: spec.name.clone(),
            topic_id,
            internal: is_internal(&spec.name),
            config: TopicConfig::resolve(&configs, &self.defaults),
            configs,
            partitions: records.iter().filter_map(|r| partition_image(r, self.node_id)).collect(),
        };
        Ok((image, records))
    }

    /// The partition count after defaults and assignment checks, and the replication factor
    /// to stripe with (`None`: the manual assignment gives the replicas).
    fn partition_count(&self, spec: &NewTopic) -> Result<(i32, Option<usize>), ControllerError> {
        if !spec.assignments.is_empty() {
            if spec.num_partitions != -1 || spec.replication_factor != -1 {
                return Err(ControllerError::InvalidRequest(
                    "Both numPartitions or replicationFactor and replicasAssignments were set. \
                     Both cannot be used at the same time."
                        .into(),
                ));
            }
            let count = i32::try_from(spec.assignments.len()).unwrap_or(i32::MAX);
            check_partition_limit(count)?;
            let mut indexes: Vec<i32> = spec.assignments.iter().map(|(i, _)| *i).collect();
            indexes.sort_unstable();
            if indexes.iter().copied().ne(0..count) {
                return Err(ControllerError::InvalidReplicaAssignment(
                    "partitions should be a consecutive 0-based integer sequence".into(),
                ));
            }
            for (_, replicas) in &spec.assignments {
                self.check_assignment(replicas)?;
            }
            let first = spec.assignments.first().map_or(0, |(_, r)| r.len());
            if spec.assignments.iter().any(|(_, r)| r.len() != first) {
                return Err(ControllerError::InvalidReplicaAssignment(
                    "All partitions should have the same number of replicas".into(),
                ));
            }
            return Ok((count, None));
        }
        let rf = match spec.replication_factor {
            -1 => self.defaults.default_replication_factor,
            rf if rf <= 0 => {
                return Err(ControllerError::InvalidReplicationFactor(
                    "Replication factor must be larger than 0, or -1 to use the default value."
                        .into(),
                ))
            }
            rf => rf,
        };
        let rf = usize::try_from(rf).unwrap_or(1);
        let live = self.live_brokers().len();
        if rf > live {
            return Err(ControllerError::InvalidReplicationFactor(format!(
                "Unable to replicate the partition {rf} time(s): The target replication factor \
                 of {rf} cannot be reached because only {live} broker(s) are registered."
            )));
        }
        let count = match spec.num_partitions {
            -1 => self.defaults.num_partitions,
            n if n <= 0 => {
                return Err(ControllerError::InvalidPartitions(
                    "Number of partitions was set to an invalid non-positive value.".into(),
                ))
            }
            n => n,
        };
        check_partition_limit(count)?;
        Ok((count, Some(rf)))
    }

    fn validated_configs(&self, spec: &NewTopic) -> Result<BTreeMap<String, String>, ConfigError> {
        let mut configs = BTreeMap::new();
        for (name, value) in &spec.configs {
            let value = value.clone().ok_or_else(|| ConfigError::NullValue(name.clone()))?;
            configs.insert(name.clone(), value);
        }
        validate_topic_configs(&configs, &self.defaults)
    }

    /// A manual replica list: non-empty, no repeats, every broker registered (while none is
    /// registered, only this node).
    fn check_assignment(&self, replicas: &[i32]) -> Result<(), ControllerError> {
        if self.brokers.is_empty() {
            if replicas == [self.node_id.0] {
                return Ok(());
            }
            return Err(ControllerError::InvalidReplicaAssignment(format!(
                "Replica assignment {replicas:?} is not supported: no broker is registered yet, \
                 so this cluster can only place replicas on broker {}",
                self.node_id
            )));
        }
        if replicas.is_empty() {
            return Err(ControllerError::InvalidReplicaAssignment(
                "The manual partition assignment includes an empty replica list.".into(),
            ));
        }
        let mut seen = replicas.to_vec();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != replicas.len() {
            return Err(ControllerError::InvalidReplicaAssignment(format!(
                "The manual partition assignment includes duplicate replicas: {replicas:?}"
            )));
        }
        if let Some(r) = replicas.iter().find(|r| !self.brokers.contains_key(&NodeId(**r))) {
            return Err(ControllerError::InvalidReplicaAssignment(format!(
                "The manual partition assignment includes broker {r}, but no such broker is \
                 registered."
            )));
        }
        Ok(())
    }

    /// Replica lists for `count` partitions striped over the live brokers.
    fn striped(
        &self,
        first_slot: usize,
        count: usize,
        rf: usize,
    ) -> Result<std::vec::IntoIter<Vec<NodeId>>, ControllerError> {
        let live = self.live_brokers();
        if rf > live.len() {
            return Err(ControllerError::InvalidReplicationFactor(format!(
                "Unable to replicate the partition {rf} time(s): The target replication factor \
                 of {rf} cannot be reached because only {} broker(s) are registered.",
                live.len()
            )));
        }
        Ok(placement::striped(&live, first_slot, count, rf).into_iter())
    }

    /// A new partition on `replicas`: leader = first live replica (or none), ISR = the live
    /// replicas (each hosting broker picks the shard itself).
    fn new_partition(&self, topic_id: Uuid, index: i32, replicas: Vec<NodeId>) -> PartitionRecord {
        let isr: Vec<NodeId> = replicas.iter().copied().filter(|r| self.is_live(*r)).collect();
        PartitionRecord {
            topic_id,
            partition: index,
            owner_shard_hint: None,
            leader: isr.first().copied().unwrap_or(NO_LEADER),
            leader_epoch: Epoch(0),
            replicas,
            isr,
            elr: Vec::new(),
            last_known_elr: Vec::new(),
        }
    }
}

fn check_partition_limit(count: i32) -> Result<(), ControllerError> {
    if count > TOPIC_PARTITIONS_MAX {
        return Err(ControllerError::InvalidPartitions(format!(
            "Number of partitions {count} exceeds this broker's limit of {TOPIC_PARTITIONS_MAX} \
             per topic."
        )));
    }
    Ok(())
}

fn config_record(topic_id: Uuid, name: &str, value: Option<String>) -> MetadataRecord {
    MetadataRecord::Config(ConfigRecord { topic_id, name: name.to_string(), value })
}

fn partition_image(r: &MetadataRecord, node: NodeId) -> Option<PartitionImage> {
    match r {
        MetadataRecord::Partition(p) => Some(PartitionImage {
            index: p.partition,
            owner_shard: p.owner_shard_hint.unwrap_or(super::shard_assignment::UNASSIGNED_SHARD),
            hosted: p.replicas.contains(&node),
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            replicas: p.replicas.clone(),
            isr: p.isr.clone(),
            elr: p.elr.clone(),
            last_known_elr: p.last_known_elr.clone(),
        }),
        _ => None,
    }
}
