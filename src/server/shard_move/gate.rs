//! The request side of a shard move: per-shard *gates* that park a moving partition's
//! requests in arrival order, and the one-hop forwarding of requests that reach a shard
//! the partition already left (see the parent module's steps).
//!
//! Runs on every shard; gates exist only while a move is under way on that shard.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;

use super::{MoveAnswer, MoveCall};
use crate::constants::{SHARD_MOVE_OPEN_WAIT_MS_MAX, SHARD_MOVE_PARK_WAIT_MS_MAX};
use crate::partition::ops::{self, FetchPart, PartitionOp, PartitionResult};
use crate::server::call::{ShardReply, ShardRequest};
use crate::shard::ShardCtx;
use crate::sync::{Notify, TicketLock};
use crate::types::TopicPartition;

/// Requests for a moving partition wait here, in arrival order.
pub(crate) struct Gate {
    order: TicketLock,
    open: Cell<bool>,
    opened: Notify,
    /// On the target: forwarded requests pass, direct ones wait.
    target: bool,
    /// Requests that entered the gate and have not been sent on or started yet.
    waiting: Cell<usize>,
    drained: Notify,
    /// On the source while it still holds a led partition: followers' fetches pass (run
    /// here), so acks=all produces in flight can complete before the partition leaves.
    replica_fetches_pass: Cell<bool>,
}

impl Gate {
    pub(super) fn new(target: bool) -> Rc<Self> {
        Rc::new(Gate {
            order: TicketLock::default(),
            open: Cell::new(false),
            opened: Notify::new(),
            target,
            waiting: Cell::new(0),
            drained: Notify::new(),
            replica_fetches_pass: Cell::new(false),
        })
    }

    /// Lets followers' fetches through (or not) while the gate is closed.
    pub(super) fn pass_replica_fetches(&self, pass: bool) {
        self.replica_fetches_pass.set(pass);
    }

    pub(super) fn open(&self) {
        self.open.set(true);
        self.opened.notify_all();
    }

    /// Waits (bounded) until every request that entered the gate moved on.
    pub(super) async fn drain(&self) {
        let deadline = Instant::now() + Duration::from_millis(SHARD_MOVE_PARK_WAIT_MS_MAX);
        while self.waiting.get() > 0 && Instant::now() < deadline {
            let seen = self.drained.version();
            if self.waiting.get() == 0 {
                break;
            }
            crate::shard::with_timeout(Duration::from_millis(50), self.drained.changed_since(seen))
                .await;
        }
    }
}

pub(super) fn gate_of(ctx: &ShardCtx, tp: &TopicPartition) -> Option<Rc<Gate>> {
    let broker = crate::server::broker::of(ctx);
    let gates = broker.move_gates.borrow();
    if gates.is_empty() {
        None
    } else {
        gates.get(tp).cloned()
    }
}

fn no_gates(ctx: &ShardCtx) -> bool {
    crate::server::broker::of(ctx).move_gates.borrow().is_empty()
}

pub(super) fn install_gate(ctx: &ShardCtx, tp: TopicPartition, gate: Rc<Gate>) -> bool {
    let broker = crate::server::broker::of(ctx);
    let mut gates = broker.move_gates.borrow_mut();
    if gates.contains_key(&tp) {
        return false;
    }
    gates.insert(tp, gate);
    true
}

pub(super) fn remove_gate(ctx: &ShardCtx, tp: &TopicPartition) -> Option<Rc<Gate>> {
    crate::server::broker::of(ctx).move_gates.borrow_mut().remove(tp)
}

/// Counts a request inside a gate until it moved on (sent, or started here).
struct InGate(Rc<Gate>);

impl InGate {
    fn enter(gate: Rc<Gate>) -> Self {
        gate.waiting.set(gate.waiting.get() + 1);
        InGate(gate)
    }
}

impl Drop for InGate {
    fn drop(&mut self) {
        self.0.waiting.set(self.0.waiting.get().saturating_sub(1));
        self.0.drained.notify_all();
    }
}

// ---- The request path --------------------------------------------------------------

/// The topic and partition a partition op addresses.
#[must_use]
pub fn tp_of(op: &PartitionOp) -> (&str, i32) {
    match op {
        PartitionOp::Produce { topic, partition, .. }
        | PartitionOp::Fetch { topic, partition, .. }
        | PartitionOp::ListOffsets { topic, partition, .. }
        | PartitionOp::EpochEnd { topic, partition, .. }
        | PartitionOp::DeleteRecords { topic, partition, .. }
        | PartitionOp::DescribeProducers { topic, partition }
        | PartitionOp::DescribeLogDir { topic, partition }
        | PartitionOp::WriteMarker { topic, partition, .. } => (topic, *partition),
        PartitionOp::ReplicaFetch(op) => (&op.topic, op.partition),
    }
}

/// Runs the partition ops of one request that reached this shard: directly when no move
/// touches them (the common case: one map lookup per op), else each through its gate and,
/// if its partition left this shard, forwarded to the owner once.
pub async fn run_partitions(ctx: &Rc<ShardCtx>, ops: Vec<PartitionOp>) -> Vec<PartitionResult> {
    run_gated(ctx, ops, false).await
}

pub(super) async fn run_gated(
    ctx: &Rc<ShardCtx>,
    ops: Vec<PartitionOp>,
    forwarded: bool,
) -> Vec<PartitionResult> {
    let broker = crate::server::broker::of(ctx);
    let local = |op: &PartitionOp| {
        let (topic, partition) = tp_of(op);
        broker.partitions.get(topic, partition).is_some()
            || !hosted_elsewhere(ctx, topic, partition)
    };
    if no_gates(ctx) && ops.iter().all(local) {
        return ops::run_ops(ctx, &broker.partitions, ops).await;
    }
    // join_all polls in order: each op takes its gate ticket in the request's order.
    let futures = ops.into_iter().map(|op| run_one(ctx, op, forwarded));
    futures::future::join_all(futures).await
}

/// Whether the partition is hosted here but this shard does not hold it (moved away, or
/// still opening on this shard).
fn hosted_elsewhere(ctx: &ShardCtx, topic: &str, partition: i32) -> bool {
    ctx.image().partition(topic, partition).is_some_and(|p| p.hosted)
}

async fn run_one(ctx: &Rc<ShardCtx>, op: PartitionOp, forwarded: bool) -> PartitionResult {
    let (topic, partition) = tp_of(&op);
    let tp = TopicPartition::new(topic, partition);
    let passes = |g: &Gate| {
        (forwarded && g.target)
            || (g.replica_fetches_pass.get() && matches!(op, PartitionOp::ReplicaFetch(_)))
    };
    let Some(gate) = gate_of(ctx, &tp).filter(|g| !passes(g)) else {
        return dispatch(ctx, op, forwarded).await;
    };
    let entered = InGate::enter(gate.clone());
    let _turn = gate.order.acquire().await;
    let deadline = Instant::now() + Duration::from_millis(SHARD_MOVE_PARK_WAIT_MS_MAX);
    while !gate.open.get() && Instant::now() < deadline {
        let seen = gate.opened.version();
        if gate.open.get() {
            break;
        }
        crate::shard::with_timeout(Duration::from_millis(100), gate.opened.changed_since(seen))
            .await;
    }
    // In turn: a forward is sent (queued on the mesh) or a local op started before the next
    // parked request goes, so parked requests keep their order.
    let broker = crate::server::broker::of(ctx);
    if broker.partitions.get(topic, partition).is_some() || forwarded {
        let result = ops::run_ops(ctx, &broker.partitions, vec![op]).await;
        drop(entered);
        return result.into_iter().next().unwrap_or_else(|| unreachable_result(Kind::Fetch));
    }
    let (kind, pending) = match forward(ctx, op).await {
        Ok(sent) => sent,
        Err(op) => {
            drop(entered);
            return local_after_open_wait(ctx, op).await;
        }
    };
    drop(entered);
    drop(_turn);
    await_forwarded(kind, pending).await
}

/// Runs an op here, forwarding it once when this shard's image names another owner.
async fn dispatch(ctx: &Rc<ShardCtx>, op: PartitionOp, forwarded: bool) -> PartitionResult {
    let (topic, partition) = tp_of(&op);
    if crate::server::broker::of(ctx).partitions.get(topic, partition).is_some() || forwarded {
        return local_after_open_wait(ctx, op).await;
    }
    match forward(ctx, op).await {
        Ok((kind, pending)) => await_forwarded(kind, pending).await,
        Err(op) => local_after_open_wait(ctx, op).await,
    }
}

/// Runs an op on this shard, first waiting (bounded) for its partition to open when the
/// image says this shard owns it (a move's target installs the image before it opens).
async fn local_after_open_wait(ctx: &Rc<ShardCtx>, op: PartitionOp) -> PartitionResult {
    let (topic, partition) = tp_of(&op);
    let mine = || {
        ctx.image().partition(topic, partition).is_some_and(|p| p.hosted && p.owner_shard == ctx.id)
    };
    let broker = crate::server::broker::of(ctx);
    let mut waited_ms = 0;
    while broker.partitions.get(topic, partition).is_none()
        && mine()
        && waited_ms < SHARD_MOVE_OPEN_WAIT_MS_MAX
        && !ctx.is_shutting_down()
    {
        crate::shard::sleep(Duration::from_millis(1)).await;
        waited_ms += 1;
    }
    let result = ops::run_ops(ctx, &broker.partitions, vec![op]).await;
    result.into_iter().next().unwrap_or_else(|| unreachable_result(Kind::Fetch))
}

type Pending = crate::server::call::Pending;

/// Sends an op to the owner in this shard's image (once: it runs where it lands). `Err`
/// gives the op back when this shard is the owner.
async fn forward(ctx: &Rc<ShardCtx>, op: PartitionOp) -> Result<(Kind, Pending), PartitionOp> {
    let (topic, partition) = tp_of(&op);
    let owner = match ctx.owner_of(topic, partition) {
        Some((owner, _)) if owner != ctx.id => owner,
        _ => return Err(op),
    };
    let kind = Kind::of(&op);
    let req = ShardRequest::ShardMove(MoveCall::Forwarded(vec![op]));
    Ok((kind, ctx.call(owner, req).await))
}

async fn await_forwarded(kind: Kind, pending: Pending) -> PartitionResult {
    match pending.await {
        Ok(ShardReply::ShardMove(MoveAnswer::Partitions(list))) => {
            list.into_iter().next().unwrap_or_else(|| unreachable_result(kind))
        }
        Ok(_) => unreachable_result(kind),
        Err(err) => {
            tracing::warn!("forwarded partition request lost: {err}");
            unreachable_result(kind)
        }
    }
}

/// The kind of result an op expects (to answer one that got lost on the way).
#[derive(Clone, Copy)]
enum Kind {
    Produce,
    Fetch,
    ListOffsets,
    EpochEnd,
    DeleteRecords,
    DescribeProducers,
    DescribeLogDir,
    WriteMarker,
}

impl Kind {
    fn of(op: &PartitionOp) -> Self {
        match op {
            PartitionOp::Produce { .. } => Kind::Produce,
            PartitionOp::Fetch { .. } | PartitionOp::ReplicaFetch(_) => Kind::Fetch,
            PartitionOp::ListOffsets { .. } => Kind::ListOffsets,
            PartitionOp::EpochEnd { .. } => Kind::EpochEnd,
            PartitionOp::DeleteRecords { .. } => Kind::DeleteRecords,
            PartitionOp::DescribeProducers { .. } => Kind::DescribeProducers,
            PartitionOp::DescribeLogDir { .. } => Kind::DescribeLogDir,
            PartitionOp::WriteMarker { .. } => Kind::WriteMarker,
        }
    }
}

/// A retriable answer for an op whose forward was lost (the mesh closed at shutdown).
fn unreachable_result(kind: Kind) -> PartitionResult {
    let e = || (ResponseError::NotLeaderOrFollower, None);
    match kind {
        Kind::Produce => PartitionResult::Produce(Err(e().into())),
        Kind::Fetch => PartitionResult::Fetch(FetchPart {
            error: Some(ResponseError::NotLeaderOrFollower),
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            records: crate::storage::SendRecords::default(),
            diverging_epoch: None,
            aborted: None,
        }),
        Kind::ListOffsets => PartitionResult::ListOffsets(Err(e())),
        Kind::EpochEnd => PartitionResult::EpochEnd(Err(e())),
        Kind::DeleteRecords => PartitionResult::DeleteRecords(Err(e())),
        Kind::DescribeProducers => PartitionResult::DescribeProducers(Err(e())),
        // Listed by no shard: omitted, as Kafka omits a log it does not hold.
        Kind::DescribeLogDir => PartitionResult::DescribeLogDir(None),
        Kind::WriteMarker => PartitionResult::WriteMarker(Err(e())),
    }
}
