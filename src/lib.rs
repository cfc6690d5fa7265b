//! Shardlog: a Kafka-compatible streaming broker, thread-per-core on io_uring.
//!
//! Module map (a record's path: [`server`] decodes a Produce request with [`protocol`],
//! [`shard`] routes the partition's batch to its owner shard, [`storage`] validates and
//! appends it through [`io`], and Fetch reads it back the same way; [`controller`] owns
//! cluster metadata and publishes it as the [`metadata`] image every shard reads;
//! [`bench`](mod@bench) is the bundled load generator):
//!
//! - [`authz`]: Kafka's ACL model, the indexed ACL set, the `StandardAuthorizer` decision
//!   and a connection's decision cache (pure; the controller stores ACLs, the server checks).
//! - [`types`]: newtypes for offsets, epochs, node/shard/producer ids, topic-partitions.
//! - [`constants`]: every limit and default with its unit.
//! - [`io`]: the file trait, the glommio DMA implementation and a fault-injecting
//!   in-memory implementation.
//! - [`storage`]: partition logs: segments, sparse indexes, recovery, cache.
//! - [`sync`]: single-shard `Notify` and FIFO `TicketLock`.
//! - [`protocol`]: Kafka codec glue, framing, version table, error-code mapping.
//! - [`metadata`]: the immutable metadata image every shard reads (topics, partitions,
//!   brokers, client quotas, SCRAM credentials, reassignments) and the config registry it
//!   carries; built on the controller shard.
//! - [`server`]: listener, connection pipeline, one handler per Kafka API.
//! - [`shard`]: the runtime: glommio executors, routing, the type-erased cross-shard mesh.
//! - [`partition`]: a partition's state and operations on its owner shard, retention and
//!   cleaning loops.
//! - [`replication`]: ISR replication (in progress): follower fetch decisions, truncation to
//!   the divergence point.
//! - [`controller`]: metadata log and state, topic config changes, placement.
//! - [`quorum`]: the Raft quorum (raft-rs `RawNode` as a pure state machine) and its durable
//!   store through [`io`]; not wired into the broker yet.
//! - [`sim`]: the deterministic simulator of the quorum, and of the controller and broker
//!   lifecycle on top of it (seeded RNG, virtual ticks, faulty network, crashes and power
//!   loss on the in-memory file system).
//! - [`group`]: consumer group coordinator, committed offsets, `__consumer_offsets` codec.
//! - [`txn`]: transaction coordinator state machine, `__transaction_state` codec, partition hooks.
//! - [`bench`](mod@bench): the `shardlog bench` load generator.
//! - [`cli`]: what the subcommands share on the command line: address flags, duration and
//!   size units, one-line errors and exit statuses.
//! - [`doctor`]: host checks (`shardlog doctor`, and `serve`'s preflight).
//! - [`crashpoint`]: named SIGKILL points for crash tests of a real broker.
//! - [`top`]: `shardlog top`, a live per-shard view read from the admin endpoint.
//! - [`quota`]: client byte-rate quotas: Kafka's windowed rate and throttle math, per-shard
//!   client state.
//! - [`security`]: TLS (rustls) and SASL (PLAIN, SCRAM, OAUTHBEARER) of Kafka listeners:
//!   per-listener material, the SASL exchange and KIP-368's session lifetime, the principal of
//!   each connection ([`security::Session`]);
//!   the client side of both for connections to other brokers ([`security::client`]).
//! - [`metrics`]: per-shard recorders, Prometheus/`.hgrm` rendering, the admin HTTP endpoint.
#![warn(rustdoc::broken_intra_doc_links)]
#![allow(async_fn_in_trait)]

pub mod authz;
pub mod bench;
pub mod cli;
pub mod config;
pub mod constants;
pub mod controller;
pub mod crashpoint;
pub mod doctor;
pub mod group;
pub mod io;
pub mod metadata;
pub mod metrics;
pub mod partition;
#[cfg(test)]
pub mod planted;
pub mod protocol;
pub mod quorum;
pub mod quota;
pub mod replication;
pub mod security;
pub mod server;
pub mod shard;
pub mod sim;
pub mod storage;
pub mod sync;
pub mod top;
pub mod txn;
pub mod types;
