//! DescribeTopicPartitions (API key 75), v0: topics with their partitions' leader, epoch,
//! replicas, ISR, KIP-966 eligible leader replicas and last known ELR, and offline replicas,
//! paginated. Kafka 4.1's Admin client (and so `kafka-topics.sh --describe`) uses it when it
//! is advertised, and prints `Elr:` and `LastKnownElr:` from it; Metadata stays unchanged.
//!
//! Read-only over a [`MetadataImage`]: runs on any shard. Pagination as Kafka's
//! `DescribeTopicPartitionsRequestHandler` and `KRaftMetadataCache.describeTopicResponse`:
//! topics in name order from the cursor's topic (from its partition index in that topic),
//! at most `min(ResponsePartitionLimit, max.request.partition.size.limit)` partitions (at
//! least one); `NextCursor` names the first partition left out. An empty topic list means
//! every topic (unknown ones are then skipped rather than reported). A cursor whose topic is
//! not in a non-empty list, or whose partition index is negative, answers INVALID_REQUEST
//! for every requested topic. A replica is offline when its broker is unregistered or fenced
//! (Kafka's `getOfflineReplicas`).

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use uuid::Uuid;

use super::sb;
use crate::authz::{Operation, ResourceType};
use crate::constants::MAX_REQUEST_PARTITION_SIZE_LIMIT;
use crate::controller::{validate_topic_name, MetadataImage, PartitionImage, TopicImage};
use crate::server::authz::Authorize;
use crate::types::NodeId;

/// The only version Kafka 4.1 defines.
pub const VERSIONS: (i16, i16) = (0, 0);

/// Answers one DescribeTopicPartitions request from `image`. As Kafka: topics the principal
/// may not DESCRIBE are left out of a listing, and answered TOPIC_AUTHORIZATION_FAILED (no
/// id) after the others when asked for by name.
#[must_use]
pub fn handle(
    image: &MetadataImage,
    request: &DescribeTopicPartitionsRequest,
    auth: &dyn Authorize,
) -> DescribeTopicPartitionsResponse {
    let all = request.topics.is_empty();
    let cursor = request.cursor.as_ref().map(|c| (c.topic_name.0.to_string(), c.partition_index));
    let from = cursor.as_ref().map_or("", |(t, _)| t.as_str());
    let names: BTreeSet<String> = if all {
        image.topics.keys().filter(|n| n.as_str() >= from).cloned().collect()
    } else {
        request.topics.iter().map(|t| t.name.0.to_string()).filter(|n| n.as_str() >= from).collect()
    };
    let bad_cursor =
        cursor.as_ref().is_some_and(|(t, p)| *p < 0 || (!all && !names.contains(t.as_str())));
    if bad_cursor {
        return invalid(request);
    }
    let limit = request.response_partition_limit.clamp(1, MAX_REQUEST_PARTITION_SIZE_LIMIT);
    let mut remaining = usize::try_from(limit).unwrap_or(1);
    let mut response = DescribeTopicPartitionsResponse::default();
    let mut denied = Vec::new();
    for name in names {
        if !auth.allowed(Operation::Describe, ResourceType::Topic, &name) {
            if !all {
                denied.push(
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_name(Some(TopicName(sb(name))))
                        .with_topic_id(Uuid::nil())
                        .with_error_code(ResponseError::TopicAuthorizationFailed.code()),
                );
            }
            continue;
        }
        if remaining == 0 {
            response.next_cursor = Some(cursor_at(&name, 0));
            break;
        }
        let Some(topic) = image.topic(&name) else {
            if !all {
                response.topics.push(unknown(&name));
            }
            continue;
        };
        let start = match &cursor {
            Some((t, p)) if *t == name => usize::try_from(*p).unwrap_or(0),
            _ => 0,
        };
        let end = topic.partitions.len().min(start.saturating_add(remaining));
        let partitions: Vec<_> = topic
            .partitions
            .get(start..end)
            .unwrap_or_default()
            .iter()
            .map(|p| partition_entry(image, p))
            .collect();
        remaining -= partitions.len();
        let ops = auth.operations(ResourceType::Topic, &topic.name);
        response.topics.push(topic_entry(topic, partitions).with_topic_authorized_operations(ops));
        if end < topic.partitions.len() {
            response.next_cursor = Some(cursor_at(&name, i32::try_from(end).unwrap_or(i32::MAX)));
            break;
        }
    }
    response.topics.extend(denied);
    response
}

fn cursor_at(topic: &str, partition: i32) -> Cursor {
    Cursor::default()
        .with_topic_name(TopicName(sb(topic.to_string())))
        .with_partition_index(partition)
}

fn topic_entry(
    topic: &TopicImage,
    partitions: Vec<DescribeTopicPartitionsResponsePartition>,
) -> DescribeTopicPartitionsResponseTopic {
    DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(TopicName(sb(topic.name.clone()))))
        .with_topic_id(topic.topic_id)
        .with_is_internal(topic.internal)
        .with_partitions(partitions)
}

fn unknown(name: &str) -> DescribeTopicPartitionsResponseTopic {
    let code = if validate_topic_name(name).is_err() {
        ResponseError::InvalidTopicException
    } else {
        ResponseError::UnknownTopicOrPartition
    };
    DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(TopicName(sb(name.to_string()))))
        .with_topic_id(Uuid::nil())
        .with_is_internal(crate::controller::is_internal(name))
        .with_error_code(code.code())
}

/// Kafka's `getErrorResponse`: the request's error on every requested topic.
fn invalid(request: &DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse {
    let topics = request
        .topics
        .iter()
        .map(|t| {
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(t.name.clone()))
                .with_error_code(ResponseError::InvalidRequest.code())
        })
        .collect();
    DescribeTopicPartitionsResponse::default().with_topics(topics)
}

fn partition_entry(
    image: &MetadataImage,
    p: &PartitionImage,
) -> DescribeTopicPartitionsResponsePartition {
    let ids = |v: &[NodeId]| v.iter().map(|n| BrokerId(n.0)).collect::<Vec<_>>();
    let registered = image.brokers.is_empty() || image.brokers.contains_key(&p.leader);
    let leader = if registered { p.leader.0 } else { -1 };
    DescribeTopicPartitionsResponsePartition::default()
        .with_partition_index(p.index)
        .with_leader_id(BrokerId(leader))
        .with_leader_epoch(p.leader_epoch.0)
        .with_replica_nodes(ids(&p.replicas))
        .with_isr_nodes(ids(&p.isr))
        .with_eligible_leader_replicas(Some(ids(&p.elr)))
        .with_last_known_elr(Some(ids(&p.last_known_elr)))
        .with_offline_replicas(super::metadata::offline_replicas(image, &p.replicas))
}

#[cfg(test)]
#[path = "describe_topic_partitions_tests.rs"]
mod tests;
