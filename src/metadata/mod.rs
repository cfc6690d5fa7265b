//! The cluster metadata every shard reads, below the controller that builds it (Kafka keeps
//! its metadata image in its own `metadata` module below the controller too).
//!
//! Owns the immutable [`MetadataImage`] (topics, partitions, brokers, and the client quotas,
//! SCRAM credentials, ACLs and reassignments it carries) and the config definitions it
//! carries and resolves topic configs against ([`configs`]). Plain data, no I/O and no
//! glommio, so the storage, runtime, replication and partition layers read the image without
//! naming the controller. The controller's record and operation code stays in `controller`,
//! which re-exports these names.
//!
//! Which shard: built on the controller shard after each change and published (as an `Arc`)
//! to every shard's cache, where every shard reads it; never mutated after publication.
//!
//! Invariants: `topics` and `topic_ids` index the same topics; partitions are indexed
//! `0..len` in order; in a node image ([`crate::controller::node_image`], what shards
//! receive) every `owner_shard` is below `shard_count` and `hosted` says whether this node is
//! a replica; in a [`crate::controller::ControllerState`]'s own image owner shards are
//! [`crate::controller::UNASSIGNED_SHARD`] or legacy hints. The image is `Send + Sync` (it
//! crosses shard threads; checked at compile time).

pub mod client_quotas;
pub mod configs;
mod image;
pub mod scram;

pub use client_quotas::{ClientQuotaConfigs, QuotaEntity};
pub use configs::{BrokerDefaults, TopicConfig};
pub use image::{
    BrokerEndpoint, BrokerImage, MetadataImage, PartitionImage, Reassignment, TopicImage,
};
pub use scram::ScramCredentials;
