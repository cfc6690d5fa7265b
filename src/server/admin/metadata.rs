//! Metadata (API key 3), v0–13: brokers, cluster and controller ids, and topics with topic
//! ids, internal flags and partitions (leader, leader epoch, replicas, ISR, offline replicas).
//!
//! Read-only over a [`MetadataImage`]: runs on any shard. Unknown topics that may be
//! auto-created are returned to the caller, which asks the controller shard to create them
//! (`Controller::create_topics_with_defaults`); their entries say LEADER_NOT_AVAILABLE, which
//! clients retry. The server may instead rebuild the response from the new image once the
//! topics exist, so the client sees them at once. Fields absent from the request's version
//! are left at their defaults (the codec refuses to encode them otherwise).

use std::collections::HashSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use uuid::Uuid;

use super::describe_cluster::CLUSTER_OPERATIONS;
use super::{brokers, sb, Advertised};
use crate::controller::{is_internal, validate_topic_name, MetadataImage, TopicImage};

/// Every version Kafka 4.x defines; topic ids in requests (v12+) are resolved by id.
pub const VERSIONS: (i16, i16) = (0, 13);

/// READ(3), WRITE(4), CREATE(5), DELETE(6), ALTER(7), DESCRIBE(8), DESCRIBE_CONFIGS(10),
/// ALTER_CONFIGS(11): Kafka's topic operations (AclOperation codes); no authorizer here.
pub const TOPIC_OPERATIONS: i32 =
    (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11);

/// Builds the Metadata response; the second value lists topics to auto-create.
#[must_use]
pub fn build_metadata(
    image: &MetadataImage,
    request: &MetadataRequest,
    version: i16,
    advertised: (&[Advertised], &str),
) -> (MetadataResponse, Vec<String>) {
    let mut response = MetadataResponse::default().with_brokers(
        brokers(image, advertised)
            .iter()
            .map(|(id, host, port)| {
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(id.0))
                    .with_host(sb(host.clone()))
                    .with_port(*port)
                    .with_rack(None)
            })
            .collect(),
    );
    if version >= 1 {
        response = response.with_controller_id(BrokerId(image.controller_id.0));
    }
    if version >= 2 {
        response = response.with_cluster_id(Some(sb(image.cluster_id.clone())));
    }
    if (8..=10).contains(&version) && request.include_cluster_authorized_operations {
        response = response.with_cluster_authorized_operations(CLUSTER_OPERATIONS);
    }
    let with_ops = version >= 8 && request.include_topic_authorized_operations;
    let all_topics = match &request.topics {
        None => true,
        Some(t) => version == 0 && t.is_empty(),
    };
    let mut to_create = Vec::new();
    let topics = if all_topics {
        image.topics.values().map(|t| topic_entry(image, t, version, with_ops)).collect()
    } else {
        let may_create = image.broker_defaults.auto_create_topics_enable
            && (version < 4 || request.allow_auto_topic_creation);
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for t in request.topics.iter().flatten() {
            let key = (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id);
            if !seen.insert(key) {
                continue;
            }
            out.push(requested_topic(image, t.name.as_ref(), t.topic_id, version, with_ops, |n| {
                if may_create && !is_internal(n) {
                    to_create.push(n.to_string());
                    true
                } else {
                    false
                }
            }));
        }
        out
    };
    (response.with_topics(topics), to_create)
}

/// The entry for one requested topic; `create` is asked whether an unknown name will be
/// auto-created.
fn requested_topic(
    image: &MetadataImage,
    name: Option<&TopicName>,
    id: Uuid,
    version: i16,
    with_ops: bool,
    mut create: impl FnMut(&str) -> bool,
) -> MetadataResponseTopic {
    let Some(name) = name else {
        return match image.topic_by_id(&id) {
            Some(t) => topic_entry(image, t, version, with_ops),
            None => MetadataResponseTopic::default()
                .with_name(None)
                .with_topic_id(id)
                .with_error_code(ResponseError::UnknownTopicId.code()),
        };
    };
    if let Some(t) = image.topic(name.0.as_str()) {
        return topic_entry(image, t, version, with_ops);
    }
    let code = if validate_topic_name(name.0.as_str()).is_err() {
        ResponseError::InvalidTopicException
    } else if create(name.0.as_str()) {
        ResponseError::LeaderNotAvailable
    } else {
        ResponseError::UnknownTopicOrPartition
    };
    MetadataResponseTopic::default().with_name(Some(name.clone())).with_error_code(code.code())
}

fn topic_entry(
    image: &MetadataImage,
    topic: &TopicImage,
    version: i16,
    with_ops: bool,
) -> MetadataResponseTopic {
    let partitions = topic
        .partitions
        .iter()
        .map(|p| {
            let mut e = MetadataResponsePartition::default()
                .with_partition_index(p.index)
                .with_leader_id(BrokerId(p.leader.0))
                .with_replica_nodes(p.replicas.iter().map(|n| BrokerId(n.0)).collect())
                .with_isr_nodes(p.isr.iter().map(|n| BrokerId(n.0)).collect());
            if version >= 7 {
                e = e.with_leader_epoch(p.leader_epoch.0);
            }
            if version >= 5 {
                e = e.with_offline_replicas(offline_replicas(image, &p.replicas));
            }
            e
        })
        .collect();
    let mut t = MetadataResponseTopic::default()
        .with_name(Some(sb(topic.name.clone()).into()))
        .with_partitions(partitions);
    if version >= 1 {
        t = t.with_is_internal(topic.internal);
    }
    if version >= 10 {
        t = t.with_topic_id(topic.topic_id);
    }
    if with_ops {
        t = t.with_topic_authorized_operations(TOPIC_OPERATIONS);
    }
    t
}

/// Kafka's `getOfflineReplicas`: replicas whose broker is unregistered or fenced (none on a
/// single node, which registers nothing).
pub(crate) fn offline_replicas(
    image: &MetadataImage,
    replicas: &[crate::types::NodeId],
) -> Vec<BrokerId> {
    if image.brokers.is_empty() {
        return Vec::new();
    }
    replicas
        .iter()
        .filter(|n| image.brokers.get(n).is_none_or(|b| b.fenced))
        .map(|n| BrokerId(n.0))
        .collect()
}
