//! AlterPartitionReassignments (API key 45), v0–1: start, replace or cancel (null replicas)
//! partition reassignments (`controller::reassign`); v1's `allow_replication_factor_change`
//! (KIP-860) refuses a target of another size when false.
//!
//! Runs on the active controller's working state (forwarded there like CreateTopics). One
//! proposal per partition changed; the caller answers once they are committed.

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};

use super::{sb, Mutation};
use crate::controller::ControllerState;
use crate::types::NodeId;

/// Every version Kafka 4.1 defines.
pub const VERSIONS: (i16, i16) = (0, 1);

/// Applies each partition's change in request order and answers per partition.
pub fn handle(
    controller: &mut ControllerState,
    request: &AlterPartitionReassignmentsRequest,
    version: i16,
) -> Mutation<AlterPartitionReassignmentsResponse> {
    // v0 has no such field: the replica count may change (Kafka's behaviour before KIP-860).
    let allow_rf_change = version < 1 || request.allow_replication_factor_change;
    let mut image_changed = false;
    let responses = request
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let target: Option<Vec<NodeId>> =
                        p.replicas.as_ref().map(|r| r.iter().map(|b| NodeId(b.0)).collect());
                    let outcome = controller.alter_partition_reassignment_with(
                        &t.name.0,
                        p.partition_index,
                        target.as_deref(),
                        allow_rf_change,
                    );
                    let result = ReassignablePartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    match outcome {
                        Ok(()) => {
                            image_changed = true;
                            result.with_error_code(0).with_error_message(None)
                        }
                        Err(e) => result
                            .with_error_code(e.kafka_code())
                            .with_error_message(Some(sb(e.to_string()))),
                    }
                })
                .collect();
            ReassignableTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    let response = AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(allow_rf_change)
        .with_error_code(0)
        .with_error_message(None)
        .with_responses(responses);
    Mutation { response, image_changed }
}
