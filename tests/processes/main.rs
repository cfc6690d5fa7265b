//! The integration tests that run broker processes (clusters of three or four, crash loops,
//! real clients through SIGKILLs): one test binary, so libtest runs them side by side.
//!
//! Why one binary: each of these spends most of its time waiting (session timeouts,
//! elections, JVM start-ups, fsyncs), and `cargo test` runs test binaries one after another,
//! so as twenty binaries they took 750 s of a 900-s `cargo test` on two cores. Here they run
//! two at a time (libtest's default, one per core) in about half that.
//!
//! Invariants the modules keep so that they can share a process:
//! - every fixed port block (controller ports `base + 100 * id`) is distinct across modules;
//!   Kafka listeners are ephemeral;
//! - no module changes the process environment or current directory (a broker's extra
//!   environment goes to its `Command`);
//! - each test owns its temp dirs and stops every process it started, also on panic.
//!
//! Run one: `cargo test --test processes cluster_reassign` (a module name filters).

#[path = "../common/mod.rs"]
mod common;
#[path = "../metrics_support/mod.rs"]
mod metrics_support;

mod client_quotas;
mod client_quotas_shards;
mod cluster_acls;
mod cluster_coordinators;
mod cluster_failover;
mod cluster_leadership;
mod cluster_quorum;
mod cluster_reassign;
mod cluster_scale_isr;
mod cluster_shard_move;
mod group_coordinator_failover;
mod idempotence_codecs_kill;
mod maintenance_crash;
mod replication_cluster;
mod replication_elr;
mod replication_visibility;
mod security_cluster;
mod shard_move;
mod storage_crash;
mod transactions_cluster;
mod transactions_coordinator_kill;
mod transactions_markers;
mod transactions_prepared_restart;
mod transactions_txnindex;
