//! The server's cross-shard messages: what one shard asks another to do (partition work,
//! long-poll waits, controller operations, image installs, group calls), the typed
//! [`ShardCtx::call`] that sends one over the runtime's type-erased mesh, and [`handle`], the
//! handler the runtime runs for every request that reaches a shard.
//!
//! Runs on every shard: the caller's side on the connection's shard, [`execute`] on the
//! target. Invariant: every request yields exactly one reply, of the kind that answers it
//! (or `Failed`); a payload of another type is a bug reported as `Failed`, not a panic.

use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use futures::future::LocalBoxFuture;

use super::control::{ControllerReply, ControllerRequest};
use super::group::{GroupAnswer, GroupCall};
use crate::controller::MetadataImage;
use crate::partition::ops::{self, PartitionOp, PartitionResult, WaitSpec};
use crate::shard::{MeshError, Payload, ShardCtx};
use crate::types::ShardId;

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
    Group(GroupCall),
    /// A transaction-coordinator operation for the transactional id's coordinator shard.
    Txn(super::txn::TxnCall),
    /// A step of moving a partition between this broker's shards (`server::shard_move`).
    ShardMove(super::shard_move::MoveCall),
}

pub enum ShardReply {
    Partitions(Vec<PartitionResult>),
    DataReady,
    Controller(ControllerReply),
    ImageApplied,
    Failed(String),
    Group(GroupAnswer),
    Txn(super::txn::TxnAnswer),
    ShardMove(super::shard_move::MoveAnswer),
}

/// A typed reply on its way from a shard.
pub type Pending = Pin<Box<dyn std::future::Future<Output = Result<ShardReply, MeshError>>>>;

impl ShardCtx {
    /// Sends `req` to `target` (or runs it here if `target` is this shard) and returns the
    /// reply's future. Awaiting this call only waits for room in the mesh channel, so
    /// calls issued in order reach the target in order.
    pub async fn call(self: &Rc<Self>, target: ShardId, req: ShardRequest) -> Pending {
        let api = api_of(&req);
        let delivery = self.send(target, Box::new(req), api).await;
        Box::pin(async move { delivery.await.map(reply_of) })
    }
}

/// The runtime's handler for this application: runs a request that reached this shard.
pub fn handle(ctx: Rc<ShardCtx>, req: Payload) -> LocalBoxFuture<'static, Payload> {
    Box::pin(async move {
        let reply = match req.downcast::<ShardRequest>() {
            Ok(req) => execute(&ctx, *req).await,
            Err(_) => ShardReply::Failed("a cross-shard request of an unknown type".into()),
        };
        Box::new(reply) as Payload
    })
}

fn reply_of(payload: Payload) -> ShardReply {
    match payload.downcast::<ShardReply>() {
        Ok(reply) => *reply,
        Err(_) => ShardReply::Failed("a cross-shard reply of an unknown type".into()),
    }
}

/// Executes a request addressed to this shard (from the mesh or from a local caller).
pub async fn execute(ctx: &Rc<ShardCtx>, req: ShardRequest) -> ShardReply {
    match req {
        // Through the shard-move gate: parked while the partition changes shard, forwarded
        // when it already left this shard (`server::shard_move`).
        ShardRequest::Partitions(ops) => {
            ShardReply::Partitions(super::shard_move::run_partitions(ctx, ops).await)
        }
        ShardRequest::WaitForData(spec) => {
            ops::wait_for_data(ctx, &super::broker::of(ctx).partitions, spec).await;
            ShardReply::DataReady
        }
        ShardRequest::Controller(req) => {
            ShardReply::Controller(super::control::execute(ctx, req).await)
        }
        ShardRequest::ApplyImage(image) => super::control::apply_image(ctx, image).await,
        ShardRequest::Group(call) => ShardReply::Group(super::group::execute(ctx, call).await),
        ShardRequest::Txn(call) => ShardReply::Txn(super::txn::execute(ctx, call).await),
        ShardRequest::ShardMove(call) => {
            ShardReply::ShardMove(super::shard_move::execute(ctx, call).await)
        }
    }
}

const PRODUCE: i16 = 0;
const FETCH: i16 = 1;
const LIST_OFFSETS: i16 = 2;
const DELETE_RECORDS: i16 = 21;
const DESCRIBE_PRODUCERS: i16 = 61;
const DESCRIBE_LOG_DIRS: i16 = 35;
const OFFSET_FOR_LEADER_EPOCH: i16 = 23;
const WRITE_TXN_MARKERS: i16 = 27;

/// The Kafka API a cross-shard request serves, when it serves one (its hop is recorded
/// under that API); long-poll waits and metadata traffic have none.
fn api_of(req: &ShardRequest) -> Option<i16> {
    match req {
        ShardRequest::Partitions(ops) => ops.first().map(|op| match op {
            PartitionOp::Produce { .. } => PRODUCE,
            PartitionOp::Fetch { .. } | PartitionOp::ReplicaFetch(_) => FETCH,
            PartitionOp::ListOffsets { .. } => LIST_OFFSETS,
            PartitionOp::EpochEnd { .. } => OFFSET_FOR_LEADER_EPOCH,
            PartitionOp::DeleteRecords { .. } => DELETE_RECORDS,
            PartitionOp::DescribeProducers { .. } => DESCRIBE_PRODUCERS,
            PartitionOp::DescribeLogDir { .. } => DESCRIBE_LOG_DIRS,
            PartitionOp::WriteMarker { .. } => WRITE_TXN_MARKERS,
        }),
        _ => None,
    }
}
