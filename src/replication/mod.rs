//! ISR replication (in progress; issue 15). What runs where:
//!
//! - [`truncation`] (pure): where a follower truncates its log when it becomes a follower
//!   or a Fetch answers with a diverging epoch, from the leader's (epoch, end offset) answer
//!   and the follower's own leader-epoch cache (Kafka's `getOffsetTruncationState`).
//! - Follower appends are `storage::PartitionLog::append_replicated` (the partition's owner
//!   shard); the leader-side per-follower state, the high watermark and the ISR decisions
//!   are `partition::replicas` (pure, on the partition's owner shard).
//!
//! Invariants: a follower never appends past a point where its log may diverge from the
//! leader's (it truncates first); the log end offset it reports is durable under the
//! partition's flush policy.

pub mod driver;
pub mod fetcher;
pub mod truncation;
