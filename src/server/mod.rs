//! The Kafka-facing server: the per-connection pipeline, one handler per Kafka API, the
//! typed cross-shard messages ([`call`]), and the wiring of metadata operations to the
//! controller shard (partition work on the owner shard is [`crate::partition`]). Admin handlers themselves live in [`admin`] (controller work).
//!
//! Runs on every shard: a connection is served entirely by the shard that accepted it;
//! partition work runs on each partition's owner shard.

pub mod admin;
mod admin_wiring;
pub mod api_versions;
pub mod call;
pub mod cluster;
pub mod connection;
pub mod control;
pub mod delete_records;
pub mod describe_producers;
pub mod dispatch;
pub mod fetch;
pub mod group;
pub mod limits;
pub mod list_offsets;
pub mod log_dirs;
pub mod metadata;
mod mutation_quota;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod route;
pub mod sasl_gate;
pub mod shard_balance;
pub mod shard_move;
pub mod throttle;
pub mod throttle_field;
pub mod txn;
pub mod unserved;

// Replication wiring: partition leaders' ISR changes (AlterPartition).
pub mod isr;

use crate::config::ServeConfig;
use crate::shard::runtime::App;

/// What the runtime needs of the Kafka server: its cross-shard handler, how the controller
/// shard publishes the first metadata image, and how a connection is served.
const APP: App = App {
    handle: call::handle,
    start_controller: |ctx| Box::pin(cluster::start(ctx)),
    serve_connection: |ctx, stream, peer, listener| {
        connection::serve(ctx, crate::io::vectored::VectoredStream::new(stream), peer, listener)
    },
    accept_gate: |ctx| Box::pin(limits::accept_gate(ctx)),
    admin_post: |ctx, method, target| Box::pin(shard_move::admin_post(ctx, method, target)),
};

/// Runs the broker until SIGTERM/SIGINT, then shuts it down cleanly.
pub fn serve(config: ServeConfig) -> anyhow::Result<()> {
    check_formatted(&config)?;
    crate::shard::runtime::serve(config, APP)
}

/// A cluster node starts only from a data directory `shardlog format` gave the cluster's id:
/// a first start that invented one would form a cluster of its own. A single node may
/// create its identity on first start, as before.
fn check_formatted(config: &ServeConfig) -> anyhow::Result<()> {
    if config.cluster.is_single_node() {
        return Ok(());
    }
    let path = config.data_dir.join("meta.properties");
    if !path.exists() {
        anyhow::bail!(
            "{} is not formatted: a cluster node needs the cluster's id first; run `shardlog \
             format --cluster-id ID --data-dir {} --node-id {}` with the same ID on every node \
             (`shardlog format --print-random-uuid` prints a new one)",
            config.data_dir.display(),
            config.data_dir.display(),
            config.node_id
        );
    }
    Ok(())
}
