//! [`ControllerError`]: everything the controller can refuse or fail at, typed; the admin
//! handlers map it to Kafka error codes at the protocol boundary.
//!
//! Lives on the controller shard. I/O errors carry the operation and the path.

use std::path::PathBuf;

use super::configs::{ConfigError, DynamicConfigError};

/// A failed or refused controller operation.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("{0}")]
    InvalidTopic(String),
    #[error("Topic '{0}' already exists.")]
    TopicAlreadyExists(String),
    #[error("This server does not host this topic: {0}")]
    UnknownTopic(String),
    #[error("This server does not host this topic ID: {0}")]
    UnknownTopicId(uuid::Uuid),
    #[error("{0}")]
    InvalidPartitions(String),
    #[error("{0}")]
    InvalidReplicationFactor(String),
    #[error("{0}")]
    InvalidReplicaAssignment(String),
    #[error(transparent)]
    InvalidConfig(#[from] ConfigError),
    #[error("{0}")]
    InvalidRequest(String),
    /// A dynamic broker config change refused (unknown name, read-only, bad value).
    #[error(transparent)]
    DynamicConfig(#[from] DynamicConfigError),
    #[error("{0}")]
    TopicDeletionDisabled(String),
    #[error("producer ids are exhausted")]
    ProducerIdsExhausted,
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("metadata log {path} is corrupt at byte {position}: {reason}")]
    Corrupt { path: PathBuf, position: u64, reason: String },
    #[error("{path}: {reason}")]
    MetaProperties { path: PathBuf, reason: String },
    #[error("the metadata log failed earlier ({0}); the controller refuses further changes")]
    ReadOnly(String),
    /// A committed entry or snapshot that does not decode or apply (Raft index given).
    #[error("metadata entry {index} cannot be applied: {reason}")]
    BadEntry { index: u64, reason: String },
    /// A record the controller validated failed to apply to its own state: a bug.
    #[error("a validated metadata change failed to apply: {0}")]
    ApplyFailed(String),
    /// Unknown broker, or a broker epoch that is not its current one (STALE_BROKER_EPOCH).
    #[error("broker {node} has no registration with epoch {epoch}")]
    StaleBrokerEpoch { node: crate::types::NodeId, epoch: i64 },
    /// Another incarnation of this node id still has a live session
    /// (DUPLICATE_BROKER_REGISTRATION).
    #[error("another incarnation of broker {0} is registered and alive")]
    DuplicateBrokerRegistration(crate::types::NodeId),
}

impl ControllerError {
    /// Whether the failure is the environment's (disk), not the request's.
    #[must_use]
    pub fn is_storage(&self) -> bool {
        matches!(
            self,
            ControllerError::Io { .. }
                | ControllerError::Corrupt { .. }
                | ControllerError::MetaProperties { .. }
                | ControllerError::ReadOnly(_)
                | ControllerError::BadEntry { .. }
        )
    }
}
