//! Admin request handlers: one file per Kafka API, each a pure function from a decoded
//! kafka-protocol request (and the request's version) to its response, with the version range
//! it fully implements declared as `VERSIONS` (the server builds ApiVersions from them).
//!
//! Mutating handlers (CreateTopics, DeleteTopics, CreatePartitions, InitProducerId,
//! AlterConfigs, IncrementalAlterConfigs, AlterClientQuotas, AlterPartitionReassignments, and
//! ListPartitionReassignments, which Kafka also answers on the controller) run on
//! the controller shard with `&mut Controller` and return a [`Mutation`]: the response and
//! whether the image changed, so the server publishes the new image to every shard before
//! answering. Read-only handlers (Metadata, DescribeConfigs, DescribeCluster,
//! DescribeClientQuotas, DescribeTopicPartitions) take a
//! [`MetadataImage`] and run on any shard. This is the protocol boundary of the controller:
//! [`ControllerError`]s become Kafka error codes here and nowhere else.

pub mod acls;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_user_scram_credentials;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_topics;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_quorum;
pub mod describe_topic_partitions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod list_partition_reassignments;
pub mod metadata;
pub mod unavailable;

#[cfg(test)]
mod tests;

use kafka_protocol::error::ResponseError;
use kafka_protocol::protocol::StrBytes;

use crate::controller::configs::DynamicConfigError;
use crate::controller::{ControllerError, MetadataImage};
use crate::types::NodeId;

/// A mutating handler's answer.
#[derive(Debug)]
pub struct Mutation<R> {
    pub response: R,
    /// The controller's image changed: publish `controller.image()` to every shard (and wait
    /// for owner shards to open or close logs) before sending `response`.
    pub image_changed: bool,
}

/// An advertised listener of a broker: (node id, host, port).
pub type Advertised = (NodeId, String, i32);

/// The Kafka error code and message for a controller error.
#[must_use]
pub fn error_code(err: &ControllerError) -> (i16, String) {
    let code = match err {
        ControllerError::InvalidTopic(_) => ResponseError::InvalidTopicException,
        ControllerError::TopicAlreadyExists(_) => ResponseError::TopicAlreadyExists,
        ControllerError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition,
        ControllerError::UnknownTopicId(_) => ResponseError::UnknownTopicId,
        ControllerError::InvalidPartitions(_) => ResponseError::InvalidPartitions,
        ControllerError::InvalidReplicationFactor(_) => ResponseError::InvalidReplicationFactor,
        ControllerError::InvalidReplicaAssignment(_) => ResponseError::InvalidReplicaAssignment,
        ControllerError::InvalidConfig(_) => ResponseError::InvalidConfig,
        ControllerError::InvalidRequest(_) => ResponseError::InvalidRequest,
        // Kafka: an unknown name is INVALID_CONFIG; a read-only name or a bad value is
        // INVALID_REQUEST (`ConfigAdminManager.validateBrokerConfigChange`, KAFKA-13609).
        ControllerError::DynamicConfig(DynamicConfigError::Unknown(_)) => {
            ResponseError::InvalidConfig
        }
        ControllerError::DynamicConfig(_) => ResponseError::InvalidRequest,
        ControllerError::TopicDeletionDisabled(_) => ResponseError::TopicDeletionDisabled,
        ControllerError::ProducerIdsExhausted | ControllerError::ApplyFailed(_) => {
            ResponseError::UnknownServerError
        }
        ControllerError::StaleBrokerEpoch { .. } => ResponseError::StaleBrokerEpoch,
        ControllerError::DuplicateBrokerRegistration(_) => {
            ResponseError::DuplicateBrokerRegistration
        }
        ControllerError::Io { .. }
        | ControllerError::Corrupt { .. }
        | ControllerError::MetaProperties { .. }
        | ControllerError::ReadOnly(_)
        | ControllerError::BadEntry { .. } => {
            // The client sees a retriable storage error; the operator sees the cause.
            tracing::error!(error = %err, "controller storage failure");
            ResponseError::KafkaStorageError
        }
    };
    (code.code(), err.to_string())
}

/// A `StrBytes` from an owned string.
pub(crate) fn sb(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// The brokers to list for a client of listener `listener`: the registered, unfenced brokers
/// of the image with their endpoint of that listener (as Kafka, a broker without one is not
/// listed); before any broker registered (a single node starting), the endpoints the server
/// passes for itself.
pub(crate) fn brokers(
    image: &MetadataImage,
    (advertised, listener): (&[Advertised], &str),
) -> Vec<Advertised> {
    let live: Vec<Advertised> = image
        .brokers
        .iter()
        .filter(|(_, b)| !b.fenced)
        .filter_map(|(id, b)| {
            let e = b.endpoint(listener)?;
            Some((*id, e.host.clone(), i32::from(e.port)))
        })
        .collect();
    if live.is_empty() {
        advertised.to_vec()
    } else {
        live
    }
}
