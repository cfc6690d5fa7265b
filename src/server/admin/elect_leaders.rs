//! ElectLeaders (API key 43), v0–2 (KIP-460): preferred and unclean leader elections, run on
//! the active controller's working state by [`crate::controller::election`].
//!
//! Runs on the controller shard (forwarded there like every mutating admin request). A null
//! topic list means every partition, whose results then leave out ELECTION_NOT_NEEDED, as
//! Kafka's controller does. This is where election errors become Kafka codes.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};

use super::{error_code, sb, Mutation};
use crate::controller::election::{ElectionError, ElectionType};
use crate::controller::ControllerState;

/// Every version Kafka 4.1 serves.
pub const VERSIONS: (i16, i16) = (0, 2);

/// The Kafka error code and message of one partition's outcome.
fn code(outcome: &Result<(), ElectionError>) -> (i16, Option<String>) {
    let Err(e) = outcome else {
        return (0, None);
    };
    let error = match e {
        ElectionError::UnknownPartition(..) => ResponseError::UnknownTopicOrPartition,
        ElectionError::NotNeeded => ResponseError::ElectionNotNeeded,
        ElectionError::PreferredNotAvailable => ResponseError::PreferredLeaderNotAvailable,
        ElectionError::EligibleNotAvailable => ResponseError::EligibleLeadersNotAvailable,
    };
    (error.code(), Some(e.to_string()))
}

/// Runs the elections the request names.
pub fn handle(
    controller: &mut ControllerState,
    request: &ElectLeadersRequest,
    version: i16,
) -> Mutation<ElectLeadersResponse> {
    let kind = if version == 0 {
        Some(ElectionType::Preferred)
    } else {
        ElectionType::from_wire(request.election_type)
    };
    let targets = request.topic_partitions.as_ref().map(|topics| {
        topics.iter().map(|t| (t.topic.0.to_string(), t.partitions.clone())).collect::<Vec<_>>()
    });
    let response = ElectLeadersResponse::default();
    let Some(kind) = kind else {
        return Mutation {
            response: response.with_error_code(ResponseError::InvalidRequest.code()),
            image_changed: false,
        };
    };
    match controller.elect_leaders(kind, &targets) {
        Ok(results) => {
            let image_changed = results.iter().any(|(_, ps)| ps.iter().any(|(_, r)| r.is_ok()));
            let results = results
                .into_iter()
                .map(|(topic, partitions)| {
                    ReplicaElectionResult::default()
                        .with_topic(TopicName(sb(topic)))
                        .with_partition_result(
                            partitions
                                .into_iter()
                                .map(|(partition, outcome)| {
                                    let (code, message) = code(&outcome);
                                    PartitionResult::default()
                                        .with_partition_id(partition)
                                        .with_error_code(code)
                                        .with_error_message(message.map(sb))
                                })
                                .collect(),
                        )
                })
                .collect();
            Mutation { response: response.with_replica_election_results(results), image_changed }
        }
        Err(e) => {
            // Nothing was proposed: every named partition gets the controller's error.
            let (code, message) = error_code(&e);
            let results = targets
                .unwrap_or_default()
                .into_iter()
                .map(|(topic, partitions)| {
                    ReplicaElectionResult::default()
                        .with_topic(TopicName(sb(topic)))
                        .with_partition_result(
                            partitions
                                .into_iter()
                                .map(|p| {
                                    PartitionResult::default()
                                        .with_partition_id(p)
                                        .with_error_code(code)
                                        .with_error_message(Some(sb(message.clone())))
                                })
                                .collect(),
                        )
                })
                .collect();
            let response = if version >= 1 { response.with_error_code(code) } else { response };
            Mutation {
                response: response.with_replica_election_results(results),
                image_changed: false,
            }
        }
    }
}
