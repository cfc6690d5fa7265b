//! Wiring of metadata operations to the controller shard (shard 0): requests arrive over
//! the mesh, run through the cluster node (locally as the active controller, or forwarded), and every new metadata image is published to
//! all shards — each opens or closes the partition logs it owns — before the client is
//! answered, so a topic is usable on every shard once CreateTopics returns.
//!
//! Runs on the controller shard (execution) and on every shard (forwarding). Invariant:
//! controller operations run one at a time, image publication included.

use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;

use super::call::{ShardReply, ShardRequest};
use crate::controller::MetadataImage;
use crate::shard::ShardCtx;
use crate::types::ShardId;

/// The controller shard.
pub const CONTROLLER_SHARD: ShardId = ShardId(0);

pub enum ControllerRequest {
    /// Auto-create these topics with the broker defaults (Metadata with auto-create).
    AutoCreate(Vec<String>),
    /// An admin request, decoded and answered on the controller shard.
    Admin { api: ApiKey, version: i16, frame: Bytes },
    /// A partition leader's ISR change (`server::isr`); answered `Encoded` with the cluster
    /// call's reply (`server::cluster::rpc::Reply`).
    AlterPartition(crate::controller::AlterPartitionRequest),
}

pub enum ControllerReply {
    Done,
    /// A whole response frame, ready to write.
    Encoded(Bytes),
    /// The request could not be processed; the connection is closed with this reason.
    Rejected(String),
}

/// Sends a controller request to the controller shard and waits for its answer.
pub async fn call_controller(ctx: &Rc<ShardCtx>, req: ControllerRequest) -> ControllerReply {
    let pending = ctx.call(CONTROLLER_SHARD, ShardRequest::Controller(req)).await;
    match pending.await {
        Ok(ShardReply::Controller(reply)) => reply,
        Ok(_) => ControllerReply::Rejected("unexpected reply from the controller shard".into()),
        Err(err) => ControllerReply::Rejected(err.to_string()),
    }
}

/// Runs a controller request on the controller shard: as the active controller, or by
/// forwarding it to the active controller (see [`super::cluster`]).
pub async fn execute(ctx: &Rc<ShardCtx>, req: ControllerRequest) -> ControllerReply {
    let Some(node) = super::cluster::node(ctx) else {
        return ControllerReply::Rejected(format!("{} is not the controller shard", ctx.id));
    };
    match req {
        ControllerRequest::AutoCreate(names) => node.auto_create(ctx, names).await,
        ControllerRequest::Admin { api, version, frame } => {
            node.admin(ctx, api, version, frame).await
        }
        ControllerRequest::AlterPartition(req) => {
            ControllerReply::Encoded(node.alter_partition(ctx, req).await.encode())
        }
    }
}

/// Installs `image` on every shard and waits until each has opened/closed its logs.
pub async fn publish_image(ctx: &Rc<ShardCtx>, image: Arc<MetadataImage>) -> Result<(), String> {
    let mut pending = Vec::with_capacity(ctx.shard_count as usize);
    for shard in 0..ctx.shard_count {
        pending.push(ctx.call(ShardId(shard), ShardRequest::ApplyImage(image.clone())).await);
    }
    for (shard, reply) in futures::future::join_all(pending).await.into_iter().enumerate() {
        match reply {
            Ok(ShardReply::ImageApplied) => {}
            Ok(ShardReply::Failed(reason)) => return Err(format!("shard-{shard}: {reason}")),
            Ok(_) => return Err(format!("shard-{shard}: unexpected reply")),
            Err(err) => return Err(err.to_string()),
        }
    }
    Ok(())
}

/// Installs an image on this shard (the receiving side of [`publish_image`]).
pub async fn apply_image(ctx: &Rc<ShardCtx>, image: Arc<MetadataImage>) -> ShardReply {
    if image.version < ctx.image().version {
        return ShardReply::ImageApplied; // an older publication overtaken by a newer one
    }
    // Installed before the logs open so routing matches what the controller decided;
    // partitions that fail to open answer NOT_LEADER_OR_FOLLOWER until reopened.
    ctx.set_image(image.clone());
    super::tls_reload::on_image(ctx);
    let broker = super::broker::of(ctx);
    let result = broker.partitions.apply_image(ctx, &image).await;
    super::isr::ensure_started(ctx);
    super::group::driver::ensure_started(ctx, &image);
    // Leaders: the hosted partitions this shard owns whose leader is this broker (in a
    // cluster not every owned partition is led here).
    let leaders = image
        .topics
        .values()
        .flat_map(|t| t.partitions.iter())
        .filter(|p| p.hosted && p.owner_shard == ctx.id && p.leader == image.node_id)
        .count();
    crate::metrics::owned_partitions(broker.partitions.len(), leaders);
    match result {
        Ok(()) => ShardReply::ImageApplied,
        Err(reason) => ShardReply::Failed(reason),
    }
}
