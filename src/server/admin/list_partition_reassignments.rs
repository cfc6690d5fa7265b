//! ListPartitionReassignments (API key 46), v0: the reassignments in progress, all of them
//! (null topics) or those of the listed partitions, with replicas (AR), adding and removing
//! replicas (`controller::reassign`).
//!
//! Runs on the active controller (forwarded there like the mutating APIs, as Kafka does),
//! reading its working state; changes nothing.

use std::collections::BTreeMap;

use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};

use super::{sb, Mutation};
use crate::controller::ControllerState;
use crate::types::NodeId;

/// Every version Kafka 4.1 defines.
pub const VERSIONS: (i16, i16) = (0, 0);

/// Lists the reassignments in progress.
pub fn handle(
    controller: &mut ControllerState,
    request: &ListPartitionReassignmentsRequest,
    _version: i16,
) -> Mutation<ListPartitionReassignmentsResponse> {
    let only: Option<Vec<(String, Vec<i32>)>> = request.topics.as_ref().map(|topics| {
        topics.iter().map(|t| (t.name.0.to_string(), t.partition_indexes.clone())).collect()
    });
    let ids = |v: &[NodeId]| v.iter().map(|n| BrokerId(n.0)).collect::<Vec<_>>();
    let mut by_topic: BTreeMap<String, Vec<OngoingPartitionReassignment>> = BTreeMap::new();
    for r in controller.list_partition_reassignments(only.as_deref()) {
        by_topic.entry(r.topic).or_default().push(
            OngoingPartitionReassignment::default()
                .with_partition_index(r.partition)
                .with_replicas(ids(&r.replicas))
                .with_adding_replicas(ids(&r.adding))
                .with_removing_replicas(ids(&r.removing)),
        );
    }
    let topics = by_topic
        .into_iter()
        .map(|(name, partitions)| {
            OngoingTopicReassignment::default()
                .with_name(TopicName(sb(name)))
                .with_partitions(partitions)
        })
        .collect();
    let response = ListPartitionReassignmentsResponse::default()
        .with_error_code(0)
        .with_error_message(None)
        .with_topics(topics);
    Mutation { response, image_changed: false }
}
