//! Start-up of the cluster node on the controller shard: read the node's identity, import a
//! pre-quorum single-node metadata log once, open the quorum over the controller state
//! machine, publish the first image, then keep publishing, registering and (as the active
//! controller) fencing silent brokers in the background.
//!
//! Bounded: a single node waits for its own quorum and registration before the Kafka
//! listener opens (so "listening" still means "ready", as before the quorum); a cluster node
//! that cannot reach a quorum opens its listener after a short wait anyway, says so, and
//! serves what it can.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;

use super::{lifecycle, now_ms, ClusterNode, Committed, RaftIds};
use crate::controller::{
    import_legacy_log, mark_legacy_log_imported, ControllerState, MetaProperties, ShardAssignment,
};
use crate::io::dma::DmaFileSystem;
use crate::quorum::net::{NetConfig, TcpTransport};
use crate::quorum::transport::{LocalNet, Transport};
use crate::quorum::{DriverConfig, QuorumDriver, QuorumRole};
use crate::shard::ShardCtx;

/// How long a single node waits for its own quorum and registration at start.
const SINGLE_NODE_READY_LIMIT_MS: u64 = 30_000;
/// How long a cluster node waits for a quorum before opening its listener anyway.
const CLUSTER_READY_LIMIT_MS: u64 = 5_000;

/// Opens the cluster node on the controller shard and publishes the first image.
pub async fn start(ctx: Rc<ShardCtx>) -> anyhow::Result<()> {
    let node = open(&ctx).await?;
    if crate::server::broker::of(&ctx).cluster.set(node.clone()).is_err() {
        bail!("the cluster node started twice on this shard");
    }
    let handler_node = node.clone();
    let handler_ctx = ctx.clone();
    node.quorum.set_rpc_handler(Rc::new(move |_from, body: Bytes| {
        let node = handler_node.clone();
        let ctx = handler_ctx.clone();
        Box::pin(async move {
            match super::rpc::Call::decode(body) {
                Ok(call) => node.handle_local(&ctx, call).await.encode(),
                Err(err) => super::rpc::Reply::Error { code: -1, message: err }.encode(),
            }
        })
    }));
    // A single node is its only voter: the driver campaigns at start, no timeout to wait.
    let single = node.voters.is_empty();
    let limit = Duration::from_millis(if single {
        SINGLE_NODE_READY_LIMIT_MS
    } else {
        CLUSTER_READY_LIMIT_MS
    });
    let deadline = Instant::now() + limit;
    // What this node already committed is applied before its first image.
    while Instant::now() < deadline {
        let st = node.quorum.status();
        let caught_up = st.applied_index >= st.commit_index;
        if (single && st.role == QuorumRole::Leader && st.leader_ready)
            || (!single && caught_up && st.leader_id.is_some())
        {
            break;
        }
        let seen = node.quorum.changed().version();
        crate::shard::with_timeout(
            Duration::from_millis(50),
            node.quorum.changed().changed_since(seen),
        )
        .await;
    }
    node.publish(&ctx).await.map_err(|e| anyhow!("cannot open partitions at start: {e}"))?;
    ctx.spawn_background(publish_loop(node.clone(), ctx.clone()));
    // Every node: the cluster and leadership gauges; rebalancing on the active controller.
    ctx.spawn_background(super::election::rebalance_loop(node.clone(), ctx.clone()));
    ctx.spawn_background(crate::server::shard_balance::run(ctx.clone()));
    ctx.spawn_background(super::bootstrap::apply_scram(node.clone(), ctx.clone()));
    if node.controller_role {
        ctx.spawn_background(lifecycle::expiry_loop(node.clone(), ctx.clone()));
    }
    if node.is_broker {
        drop(ctx.spawn(lifecycle::run(node.clone(), ctx.clone())));
        // Serve once registered and unfenced (leaderships come back), within the bound: the
        // unfence applied here, not only answered, so the image below already leads.
        while Instant::now() < deadline {
            if node.unfenced_in_committed() {
                break;
            }
            crate::shard::sleep(Duration::from_millis(20)).await;
        }
        if !node.unfenced_in_committed() {
            tracing::warn!(
                "no active controller has unfenced this broker yet (is a quorum of voters \
                 running?); serving what this node holds meanwhile"
            );
        }
    }
    node.publish(&ctx).await.map_err(|e| anyhow!("cannot publish metadata: {e}"))?;
    Ok(())
}

async fn open(ctx: &Rc<ShardCtx>) -> anyhow::Result<Rc<ClusterNode>> {
    let config = &ctx.config;
    let cluster = &config.cluster;
    let data_dir = &config.data_dir;
    let meta = MetaProperties::load_or_create(data_dir, config.node_id)
        .with_context(|| format!("cannot read the identity of {}", data_dir.display()))?;
    let single = cluster.is_single_node();
    // Only a node whose id is 0 needs another Raft id (Raft reserves 0).
    let ids = RaftIds { zero_is_one: single && config.node_id.0 == 0 };
    let state = ControllerState::new(
        meta.cluster_id.clone(),
        config.node_id,
        config.shards,
        config.broker_defaults(),
    )?;
    let dir = data_dir.join(crate::controller::log::METADATA_DIR);
    let fresh = !dir.join(crate::quorum::store::SNAPSHOT_FILE).exists();
    let legacy = if fresh { import_legacy_log(data_dir)? } else { None };
    if legacy.is_some() && !single {
        bail!(
            "{} holds the metadata log of a single node from before the controller quorum: \
             start it once as a single node (without --controller-quorum-voters) to upgrade it",
            data_dir.display()
        );
    }
    let me = ids.raft(config.node_id);
    let voters: Vec<u64> =
        if single { vec![me] } else { cluster.voters.iter().map(|v| ids.raft(v.id)).collect() };
    let mut dc = DriverConfig::new(me, voters, dir);
    let tick_ms = dc.tick_ms.max(1);
    dc.quorum.election_ticks =
        usize::try_from(cluster.election_timeout_ms / tick_ms).unwrap_or(10).max(3);
    dc.quorum.heartbeat_ticks = (dc.quorum.election_ticks / 5).max(1);
    if let Some(data) = &legacy {
        dc.bootstrap_data = Bytes::from(data.clone());
    }
    let transport: Rc<dyn Transport> = if single && cluster.controller_listen.is_none() {
        LocalNet::new().endpoint(me)
    } else {
        let voters: BTreeMap<u64, std::net::SocketAddr> =
            cluster.voters.iter().map(|v| (ids.raft(v.id), v.addr)).collect();
        let net = TcpTransport::start(NetConfig {
            cluster_id: meta.cluster_id.clone(),
            node_id: me,
            listen: cluster.controller_listen,
            voters,
            tls: config.controller_tls.clone(),
        })
        .with_context(|| {
            format!("cannot start the controller quorum's listener {:?}", cluster.controller_listen)
        })?;
        Rc::new(net)
    };
    // After a legacy import, which seeds it with the old owner shards.
    let assignment = ShardAssignment::load_from(data_dir, config.shards)?;
    let committed = Rc::new(std::cell::RefCell::new(state));
    let quorum = QuorumDriver::start(dc, DmaFileSystem, Committed(committed.clone()), transport)
        .await
        .map_err(|e| anyhow!("cannot open the metadata quorum in {}: {e}", data_dir.display()))?;
    if legacy.is_some() {
        mark_legacy_log_imported(data_dir)?;
        tracing::info!("imported the single-node metadata log into the controller quorum");
    }
    tracing::info!(
        node = %config.node_id,
        voters = %if single { "itself".to_string() } else { cluster.voters_text() },
        cluster_id = %meta.cluster_id,
        "controller quorum started (t={})",
        now_ms()
    );
    Ok(Rc::new(ClusterNode {
        node_id: config.node_id,
        ids,
        quorum,
        voters: cluster.voters.clone(),
        is_broker: cluster.broker,
        controller_role: cluster.controller,
        committed,
        active: std::cell::RefCell::new(None),
        op_lock: futures::lock::Mutex::new(()),
        publish_lock: futures::lock::Mutex::new(()),
        published_applied: std::cell::Cell::new(0),
        assignment: std::cell::RefCell::new(assignment),
        image_version: std::cell::Cell::new(0),
        last_published: std::cell::Cell::new(None),
        previous: std::cell::RefCell::new(None),
        hinted_leader: std::cell::Cell::new(None),
        next_voter: std::cell::Cell::new(0),
        registration: std::cell::Cell::new(None),
        incarnation_id: uuid::Uuid::new_v4(),
    }))
}

/// Publishes every change the quorum applies (and every leader change) to this node's shards.
async fn publish_loop(node: Rc<ClusterNode>, ctx: Rc<ShardCtx>) {
    while !ctx.is_shutting_down() {
        let seen = node.quorum.changed().version();
        if let Err(err) = node.publish(&ctx).await {
            tracing::error!("publishing metadata failed: {err}");
        }
        crate::shard::with_timeout(
            Duration::from_secs(1),
            node.quorum.changed().changed_since(seen),
        )
        .await;
    }
}
