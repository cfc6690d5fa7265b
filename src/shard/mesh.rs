//! Cross-shard messages: a request carries an id and its sender; the reply travels back
//! on the mesh with the same id and completes the waiting future on the sender shard.
//!
//! Every message is `Send` (bytes, decoded requests, `Arc` snapshots). Invariants: a
//! receiving shard never blocks its receive loop on a send (each request is handled by
//! its own task, spawned in arrival order, so per-partition order is kept: glommio runs
//! tasks of a queue first-in first-out); replies to a dropped waiter are discarded.

use std::rc::Rc;
use std::sync::Arc;

use glommio::channels::shared_channel::ConnectedReceiver;
use thiserror::Error;

use super::ctx::ShardCtx;
use super::MetadataImage;
use crate::server::control::{ControllerReply, ControllerRequest};
use crate::server::owner::{PartitionOp, PartitionResult, WaitSpec};
use crate::types::ShardId;

pub enum MeshMsg {
    Request { id: u64, from: ShardId, req: ShardRequest },
    Reply { id: u64, reply: ShardReply },
}

/// Work a shard asks another shard (or itself) to do.
pub enum ShardRequest {
    /// Partition-level operations, all owned by the target shard.
    Partitions(Vec<PartitionOp>),
    /// Resolve when any listed partition's high watermark passes the given offset, or at
    /// the deadline.
    WaitForData(WaitSpec),
    /// A metadata operation for the controller shard.
    Controller(ControllerRequest),
    /// Install a new metadata image and open/close owned partitions to match it.
    ApplyImage(Arc<MetadataImage>),
    /// A consumer-group operation for the group's coordinator shard.
    Group(crate::server::group::GroupCall),
}

pub enum ShardReply {
    Partitions(Vec<PartitionResult>),
    DataReady,
    Controller(ControllerReply),
    ImageApplied,
    Failed(String),
    Group(crate::server::group::GroupAnswer),
}

#[derive(Debug, Error)]
pub enum MeshError {
    #[error("shard {0} is unreachable (mesh channel closed)")]
    Closed(ShardId),
    #[error("shard {0} dropped the request")]
    Dropped(ShardId),
}

/// Receives from one peer until its channel closes.
pub(crate) async fn receive_loop(ctx: Rc<ShardCtx>, rx: ConnectedReceiver<MeshMsg>) {
    while let Some(msg) = rx.recv().await {
        match msg {
            MeshMsg::Request { id, from, req } => {
                let ctx = ctx.clone();
                drop(ctx.clone().spawn(async move {
                    let reply = crate::server::execute(&ctx, req).await;
                    ctx.send_reply(from, id, reply).await;
                }));
            }
            MeshMsg::Reply { id, reply } => ctx.deliver_reply(id, reply),
        }
    }
}
