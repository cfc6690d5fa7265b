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

use super::{brokers, sb, Advertised};
use crate::authz::{Operation, ResourceType, CLUSTER_NAME};
use crate::controller::{is_internal, validate_topic_name, MetadataImage, TopicImage};
use crate::server::authz::Authorize;

/// Every version Kafka 4.x defines; topic ids in requests (v12+) are resolved by id.
pub const VERSIONS: (i16, i16) = (0, 13);

/// READ(3), WRITE(4), CREATE(5), DELETE(6), ALTER(7), DESCRIBE(8), DESCRIBE_CONFIGS(10),
/// ALTER_CONFIGS(11): Kafka's topic operations (AclOperation codes), all allowed without an
/// authorizer.
pub const TOPIC_OPERATIONS: i32 =
    (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11);

/// Builds the Metadata response; the second value lists topics to auto-create. As Kafka's
/// `handleTopicMetadataRequest`: a listing shows only topics the principal may DESCRIBE; a
/// topic asked for by name (or id) without DESCRIBE is TOPIC_AUTHORIZATION_FAILED (its
/// existence not disclosed: no id); an unknown topic is auto-created only with CREATE on the
/// cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED.
#[must_use]
pub fn build_metadata(
    image: &MetadataImage,
    request: &MetadataRequest,
    version: i16,
    advertised: (&[Advertised], &str),
    auth: &dyn Authorize,
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
        let ops = if auth.cluster(Operation::Describe) {
            auth.operations(ResourceType::Cluster, CLUSTER_NAME)
        } else {
            0
        };
        response = response.with_cluster_authorized_operations(ops);
    }
    let with_ops = version >= 8 && request.include_topic_authorized_operations;
    let ctx = Ctx { image, version, with_ops, auth };
    let all_topics = match &request.topics {
        None => true,
        Some(t) => version == 0 && t.is_empty(),
    };
    let mut to_create = Vec::new();
    let topics = if all_topics {
        image
            .topics
            .values()
            .filter(|t| auth.visible(Operation::Describe, ResourceType::Topic, &t.name))
            .map(|t| topic_entry(&ctx, t))
            .collect()
    } else {
        let may_create = image.broker_defaults.auto_create_topics_enable
            && (version < 4 || request.allow_auto_topic_creation);
        let create_cluster = std::cell::OnceCell::new();
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for t in request.topics.iter().flatten() {
            let key = (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id);
            if !seen.insert(key) {
                continue;
            }
            out.push(requested_topic(&ctx, t.name.as_ref(), t.topic_id, |n| {
                if !may_create || is_internal(n) {
                    return Create::No;
                }
                let cluster = *create_cluster.get_or_init(|| {
                    auth.visible(Operation::Create, ResourceType::Cluster, CLUSTER_NAME)
                });
                if cluster || auth.allowed(Operation::Create, ResourceType::Topic, n) {
                    to_create.push(n.to_string());
                    Create::Yes
                } else {
                    Create::Denied
                }
            }));
        }
        out
    };
    (response.with_topics(topics), to_create)
}

/// What the builder needs for each topic.
struct Ctx<'a> {
    image: &'a MetadataImage,
    version: i16,
    with_ops: bool,
    auth: &'a dyn Authorize,
}

/// Whether an unknown topic asked for by name will be auto-created.
enum Create {
    Yes,
    No,
    /// Auto-creation applies, but the principal may not create it.
    Denied,
}

fn denied(name: Option<TopicName>, id: Uuid) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(name)
        .with_topic_id(id)
        .with_error_code(ResponseError::TopicAuthorizationFailed.code())
}

/// The entry for one requested topic; `create` is asked whether an unknown name will be
/// auto-created.
fn requested_topic(
    ctx: &Ctx<'_>,
    name: Option<&TopicName>,
    id: Uuid,
    mut create: impl FnMut(&str) -> Create,
) -> MetadataResponseTopic {
    let (image, auth) = (ctx.image, ctx.auth);
    let Some(name) = name else {
        return match image.topic_by_id(&id) {
            // Topic ids are not secret: Kafka names the id in the refusal.
            Some(t) if !auth.allowed(Operation::Describe, ResourceType::Topic, &t.name) => {
                denied(None, id)
            }
            Some(t) => topic_entry(ctx, t),
            None => MetadataResponseTopic::default()
                .with_name(None)
                .with_topic_id(id)
                .with_error_code(ResponseError::UnknownTopicId.code()),
        };
    };
    if !auth.allowed(Operation::Describe, ResourceType::Topic, name.0.as_str()) {
        return denied(Some(name.clone()), Uuid::nil());
    }
    if let Some(t) = image.topic(name.0.as_str()) {
        return topic_entry(ctx, t);
    }
    let code = if validate_topic_name(name.0.as_str()).is_err() {
        ResponseError::InvalidTopicException
    } else {
        match create(name.0.as_str()) {
            Create::Yes => ResponseError::LeaderNotAvailable,
            Create::No => ResponseError::UnknownTopicOrPartition,
            Create::Denied => ResponseError::TopicAuthorizationFailed,
        }
    };
    MetadataResponseTopic::default().with_name(Some(name.clone())).with_error_code(code.code())
}

fn topic_entry(ctx: &Ctx<'_>, topic: &TopicImage) -> MetadataResponseTopic {
    let (image, version) = (ctx.image, ctx.version);
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
    if ctx.with_ops {
        t = t.with_topic_authorized_operations(
            ctx.auth.operations(ResourceType::Topic, &topic.name),
        );
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
