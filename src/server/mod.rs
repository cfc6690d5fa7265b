//! The Kafka-facing server: the per-connection pipeline, one handler per Kafka API, the
//! typed cross-shard messages ([`call`]), and the wiring of metadata operations to the
//! controller shard (partition work on the owner shard is [`crate::partition`]). Admin handlers themselves live in [`admin`] (controller work).
//!
//! Runs on every shard: a connection is served entirely by the shard that accepted it;
//! partition work runs on each partition's owner shard.

pub mod acl_apis;
pub mod admin;
mod admin_auth;
mod admin_wiring;
pub mod api_versions;
pub mod authz;
pub mod broker;
pub mod call;
pub mod cluster;
pub mod connection;
pub mod control;
mod controller_authz;
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
pub mod tls_reload;
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
    start_controller: |ctx| Box::pin(start_controller(ctx)),
    serve_connection: |ctx, stream, peer, listener| {
        connection::serve(ctx, crate::io::vectored::VectoredStream::new(stream), peer, listener)
    },
    accept_gate: |ctx| Box::pin(limits::accept_gate(ctx)),
    admin_post: |ctx, method, target| Box::pin(shard_move::admin_post(ctx, method, target)),
    start_shard,
    stop_shard: |ctx| Box::pin(stop_shard(ctx)),
};

/// On the controller shard before any listener opens: finish interrupted deletions, then
/// open the cluster node and publish the first image.
async fn start_controller(ctx: std::rc::Rc<crate::shard::ShardCtx>) -> anyhow::Result<()> {
    for path in crate::partition::table::leftover_deletions(&ctx.config.data_dir) {
        tracing::info!(dir = %path.display(), "removing directory left from a deletion");
        let _ = std::fs::remove_dir_all(&path);
    }
    cluster::start(ctx).await
}

/// The broker's per-shard background work: retention, cleaning, checkpoints, replication
/// and LSO gauges, the transaction marker driver, quota share reports.
fn start_shard(ctx: std::rc::Rc<crate::shard::ShardCtx>) {
    admin_auth::install(&ctx);
    use crate::partition::maintenance as m;
    // The partition layer's loops borrow the table: each task keeps the broker value alive.
    let (c, b) = (ctx.clone(), broker::of(&ctx));
    ctx.spawn_background(async move { m::retention_loop(c, &b.partitions).await });
    let (c, b) = (ctx.clone(), broker::of(&ctx));
    ctx.spawn_background(async move { m::cleaner_loop(c, &b.partitions).await });
    let (c, b) = (ctx.clone(), broker::of(&ctx));
    ctx.spawn_background(async move { m::hw_checkpoint_loop(c, &b.partitions).await });
    let (c, b) = (ctx.clone(), broker::of(&ctx));
    ctx.spawn_background(async move { m::replication_metrics_loop(c, &b.partitions).await });
    ctx.spawn_background(txn::lso_metrics::lso_metrics_loop(ctx.clone()));
    txn::driver::start(&ctx);
    ctx.spawn_background(throttle::share_loop(ctx.clone()));
}

/// After the shard drained: the last high-watermark checkpoint, then every log closed.
async fn stop_shard(ctx: std::rc::Rc<crate::shard::ShardCtx>) {
    let broker = broker::of(&ctx);
    crate::partition::maintenance::write_hw_checkpoint(&ctx, &broker.partitions).await;
    broker.partitions.close_all().await;
}

/// Runs the broker until SIGTERM/SIGINT, then shuts it down cleanly.
pub fn serve(config: ServeConfig) -> anyhow::Result<()> {
    check_formatted(&config)?;
    crate::metrics::http::require_auth(config.admin_require_auth);
    sasl_gate::log_settings(&config);
    crate::partition::transactions::register_offsets_completion(
        group::driver::complete_txn_offsets,
    );
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
