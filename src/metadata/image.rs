//! [`MetadataImage`]: an immutable snapshot of cluster metadata that every shard reads, and
//! the plain data it holds (brokers with their endpoints, topics, partitions, reassignments).
//!
//! Built on the controller shard after each change and published (as an `Arc`) to every
//! shard's cache; it is `Send + Sync` and never mutated after publication. Topics are held
//! behind their own `Arc`, so a new image shares every unchanged topic with the previous one.
//! Invariants: in the module docs of [`crate::metadata`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use uuid::Uuid;

use super::client_quotas::ClientQuotaConfigs;
use super::configs::{BrokerDefaults, TopicConfig};
use super::scram::ScramCredentials;
use crate::types::{Epoch, NodeId, ShardId, TopicPartition};

/// One listener of a broker, as BrokerRegistration sends it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct BrokerEndpoint {
    pub listener: String,
    pub host: String,
    pub port: u16,
    /// Kafka's security protocol id (0 = PLAINTEXT).
    pub security_protocol: i16,
}

/// A registered broker (Kafka's broker registration as the controller keeps it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerImage {
    /// The broker epoch of the current incarnation (by convention the Raft index of its
    /// registration entry, so "caught up" is `metadata offset >= epoch`).
    pub epoch: i64,
    pub incarnation_id: Uuid,
    pub endpoints: Vec<BrokerEndpoint>,
    pub rack: Option<String>,
    /// A fenced broker leads nothing and gets no new replicas.
    pub fenced: bool,
}

impl BrokerImage {
    /// The endpoint of listener `name`, as Metadata gives it to a client that came in on a
    /// listener of that name. A broker registered before listener names mattered (one
    /// PLAINTEXT endpoint) is found by its PLAINTEXT endpoint when `name` is PLAINTEXT.
    #[must_use]
    pub fn endpoint(&self, name: &str) -> Option<&BrokerEndpoint> {
        self.endpoints.iter().find(|e| e.listener == name)
    }

    /// The endpoint another broker dials: its endpoint of the dialler's inter-broker
    /// `listener` (every broker of a cluster names the same one), else the first registered
    /// (a broker registers its own inter-broker listener first; one registered before
    /// listener names mattered has only that one).
    #[must_use]
    pub fn inter_broker_endpoint(&self, listener: &str) -> Option<&BrokerEndpoint> {
        self.endpoint(listener).or_else(|| self.endpoints.first())
    }
}

/// The state of one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionImage {
    pub index: i32,
    /// The shard that owns the partition's log on this broker (for a partition this broker
    /// does not host: a stable shard that answers NOT_LEADER_OR_FOLLOWER).
    pub owner_shard: ShardId,
    /// Whether this broker holds a replica (only hosted partitions get a log).
    pub hosted: bool,
    pub leader: NodeId,
    pub leader_epoch: Epoch,
    pub replicas: Vec<NodeId>,
    pub isr: Vec<NodeId>,
    /// KIP-966 eligible leader replicas: left the ISR while it was below
    /// `min.insync.replicas`, so they hold every committed record and may lead (see
    /// `controller::elr`). Empty while the ISR is at or above the minimum.
    pub elr: Vec<NodeId>,
    /// KIP-966 last known ELR: replicas that were in the ELR and since went out of it.
    pub last_known_elr: Vec<NodeId>,
}

/// The adding and removing replicas of one partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reassignment {
    pub adding: Vec<NodeId>,
    pub removing: Vec<NodeId>,
}

/// The state of one topic.
#[derive(Clone, Debug, PartialEq)]
pub struct TopicImage {
    pub name: String,
    /// Random v4 UUID given at creation (Kafka's topic id).
    pub topic_id: Uuid,
    /// `__consumer_offsets` and `__transaction_state`.
    pub internal: bool,
    /// Explicitly set topic configs (validated, normalized).
    pub configs: BTreeMap<String, String>,
    /// Effective typed configs (overrides → broker defaults → Kafka defaults).
    pub config: TopicConfig,
    pub partitions: Vec<PartitionImage>,
}

/// An immutable snapshot of cluster metadata.
#[derive(Clone, Debug)]
pub struct MetadataImage {
    /// Increases with every change; a shard ignores an image older than the one it holds.
    pub version: u64,
    pub cluster_id: String,
    pub node_id: NodeId,
    /// The active controller: this node while the cluster is a single node.
    pub controller_id: NodeId,
    pub shard_count: u32,
    pub topics: BTreeMap<String, Arc<TopicImage>>,
    pub topic_ids: HashMap<Uuid, String>,
    pub broker_defaults: Arc<BrokerDefaults>,
    /// Client quotas (AlterClientQuotas), enforced by every shard.
    pub client_quotas: Arc<ClientQuotaConfigs>,
    /// SCRAM credentials (AlterUserScramCredentials), read by every shard's SASL exchange.
    pub scram_credentials: Arc<ScramCredentials>,
    /// ACLs (CreateAcls/DeleteAcls), checked by every shard's authorizer.
    pub acls: Arc<crate::authz::AclSet>,
    /// Registered brokers by node id (empty until brokers register: a single node).
    pub brokers: Arc<BTreeMap<NodeId, BrokerImage>>,
    /// Partition reassignments in progress by (topic id, partition): adding and removing
    /// replicas (`controller::reassign`).
    pub reassignments: Arc<BTreeMap<(Uuid, i32), Reassignment>>,
}

impl MetadataImage {
    /// An image with no topics for `node_id` (which is also the controller).
    #[must_use]
    pub fn empty(node_id: NodeId, shard_count: u32, defaults: &Arc<BrokerDefaults>) -> Self {
        MetadataImage {
            version: 0,
            cluster_id: String::new(),
            node_id,
            controller_id: node_id,
            shard_count,
            topics: BTreeMap::new(),
            topic_ids: HashMap::new(),
            broker_defaults: Arc::clone(defaults),
            client_quotas: Arc::default(),
            scram_credentials: Arc::default(),
            acls: Arc::default(),
            brokers: Arc::default(),
            reassignments: Arc::default(),
        }
    }

    /// A topic by name.
    #[must_use]
    pub fn topic(&self, name: &str) -> Option<&Arc<TopicImage>> {
        self.topics.get(name)
    }

    /// A topic by topic id.
    #[must_use]
    pub fn topic_by_id(&self, id: &Uuid) -> Option<&Arc<TopicImage>> {
        self.topic_ids.get(id).and_then(|name| self.topics.get(name))
    }

    /// A partition by topic name and index.
    #[must_use]
    pub fn partition(&self, topic: &str, index: i32) -> Option<&PartitionImage> {
        let i = usize::try_from(index).ok()?;
        self.topics.get(topic)?.partitions.get(i)
    }

    /// The shard owning a partition, if the partition exists.
    #[must_use]
    pub fn owner_shard(&self, topic: &str, index: i32) -> Option<ShardId> {
        self.partition(topic, index).map(|p| p.owner_shard)
    }

    /// Every hosted partition owned by `shard`, with its topic (for opening logs there).
    pub fn partitions_of_shard(
        &self,
        shard: ShardId,
    ) -> impl Iterator<Item = (TopicPartition, &Arc<TopicImage>, &PartitionImage)> + '_ {
        self.topics.values().flat_map(move |t| {
            t.partitions
                .iter()
                .filter(move |p| p.hosted && p.owner_shard == shard)
                .map(move |p| (TopicPartition::new(t.name.clone(), p.index), t, p))
        })
    }

    /// Number of hosted partitions per shard (index = shard id).
    #[must_use]
    pub fn partitions_per_shard(&self) -> Vec<usize> {
        let mut load = vec![0usize; self.shard_count as usize];
        for p in self.topics.values().flat_map(|t| t.partitions.iter()).filter(|p| p.hosted) {
            if let Some(n) = load.get_mut(p.owner_shard.0 as usize) {
                *n += 1;
            }
        }
        load
    }
}

// The image crosses shard threads; this fails to compile if a field stops being Send + Sync.
const _: fn() = || {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<MetadataImage>();
};
