//! The cluster metadata every shard reads, below the controller that builds it (as Kafka
//! keeps its metadata image below its controller): for now the client quota configs
//! ([`client_quotas`]). Plain data, no I/O and no glommio.
//!
//! Which shard: built on the controller shard and read on every shard.

pub mod client_quotas;

pub use client_quotas::{ClientQuotaConfigs, QuotaEntity};
