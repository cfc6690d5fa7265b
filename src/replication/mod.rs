//! ISR replication (issue 15). What runs where:
//!
//! - [`truncation`] (pure): the leader's diverging-epoch check of a follower's Fetch (v12+)
//!   and where a follower truncates from the leader's answer and its own leader-epoch cache
//!   (Kafka's `getOffsetTruncationState`).
//! - [`fetcher`] (pure): the follower side of one (local shard, leader broker): which
//!   partitions it follows and in which state, the next Fetch, and what to do with each
//!   partition's answer.
//! - [`driver`]: runs a fetcher round through a [`driver::LeaderLink`], appending with
//!   `storage::PartitionLog::append_replicated` and waiting for durability before the next
//!   round; on the shard owning the followed partitions.
//! - [`link`]: the `LeaderLink` over TCP (Kafka's protocol: Fetch v15 with replica state,
//!   ListOffsets), on the same shard.
//! - [`task`]: the long-running loop of one fetcher and the handle the coordinator drives
//!   from metadata images (add/remove partition, metadata version, stop).
//! - [`manager`]: which fetchers run on a shard, reconciled with every image
//!   (`partition::table::apply_image`).
//! - Leader side, on the partition's owner shard: `partition::replicas` (follower progress,
//!   high watermark, ISR decisions, min.insync.replicas; pure), `partition::leader` (that
//!   state per partition, from the metadata image) and `partition::replica_fetch` (the answer
//!   to a follower's Fetch, and acks=all's wait).
//!
//! - [`throttle`]: Kafka's replication quotas (`*.replication.throttled.rate` and the
//!   topics' `*.replication.throttled.replicas`), per shard, for both sides.
//! - Wiring: `partition::table` reconciles the [`manager`] with every image; the leader's ISR
//!   decisions go to the controller as AlterPartition from `server::isr`.
//!
//! Invariants: a follower never appends where its log may diverge from the leader's (it
//! truncates first); the log end it reports is durable under the partition's flush policy;
//! the leader's high watermark never passes what every ISR member reported.

pub mod driver;
pub mod fetcher;
pub mod link;
pub mod manager;
pub mod task;
pub mod throttle;
pub mod truncation;
