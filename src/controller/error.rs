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
        )
    }
}
