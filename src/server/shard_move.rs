//! Moving a partition between the shards of this broker, online (`shardlog shards move`,
//! `POST /v1/shards/move`, and the automatic balancer `server::shard_balance`).
//!
//! Shard 0 coordinates ([`move_partition`], one move at a time, under the cluster node's
//! publication lock so no other image is published meanwhile):
//! 1. **Release** on the source shard S: a closed *gate* parks every new request for the
//!    partition (in arrival order, a ticket each); the partition leaves S's table (its
//!    follower fetcher lets go); in-flight requests finish (bounded, else the move is given
//!    up and the partition stays); the log is flushed and closed (producer-state snapshot);
//!    its high watermark is handed over.
//! 2. **Adopt** on the target shard T: a closed gate for requests arriving at T directly
//!    (T learns the new owner first), and the handed-over high watermark.
//! 3. The broker's `shard-assignment` file records T (durable: fsync, rename, dir fsync).
//! 4. The new node image goes to T (it opens the log: producer state, leader state,
//!    follower fetcher), then to S.
//! 5. **Unpark** on S: parked requests are forwarded to T in arrival order, then S opens
//!    T's gate with a message on the same S→T channel, so T runs the parked requests
//!    before any that reached it directly.
//! 6. The image goes to the other shards.
//!
//! A request that reaches a shard the partition already left is forwarded once, to the
//! owner in this shard's image: clients never see NOT_LEADER_OR_FOLLOWER for a local move.
//! A crash at any step recovers to one owner: the assignment file names exactly one shard
//! and only that shard opens the log at start (the source closed it cleanly first).
//!
//! Group and transaction coordinator partitions are refused: their coordinator state lives
//! on the owner shard and is not handed over.
//!
//! Runs on every shard (gates, forwarding) and on shard 0 (coordination). Invariants: at
//! most one move at a time; a gate exists only during a move; a request is forwarded at
//! most once (a forwarded request runs where it lands).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;

use super::call::{ShardReply, ShardRequest};
use crate::constants::{
    SHARD_MOVE_DRAIN_WAIT_MS_MAX, SHARD_MOVE_OPEN_WAIT_MS_MAX, SHARD_MOVE_PARK_WAIT_MS_MAX,
};
use crate::partition::ops::{self, FetchPart, PartitionOp, PartitionResult};
use crate::shard::{MetadataImage, OwnedPartition, ShardCtx};
use crate::sync::{Notify, TicketLock};
use crate::types::{Offset, ShardId, TopicPartition};

/// A step of a move, sent to one shard.
pub enum MoveCall {
    /// Shard 0: move a partition (from the admin endpoint).
    Move { topic: String, partition: i32, to: ShardId, trigger: Trigger },
    /// Source: park, drain and close; answered with the high watermark.
    Release { tp: TopicPartition },
    /// Target: gate the partition and remember the high watermark it starts from.
    Adopt { tp: TopicPartition, high_watermark: Offset },
    /// Source: forward the parked requests to `to`, then open `to`'s gate.
    Unpark { tp: TopicPartition, to: ShardId },
    /// Target: let requests that reached it directly run (sent by the source).
    Open { tp: TopicPartition },
    /// Source or target of an aborted move: drop the gate, parked requests run where the
    /// image says.
    Abort { tp: TopicPartition },
    /// Requests forwarded by a shard the partition left: run here, never forwarded again.
    Forwarded(Vec<PartitionOp>),
    /// Per-partition byte counters of this shard (the balancer's sample).
    Load,
}

/// Who asked for a move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    Manual,
    Auto,
}

pub enum MoveAnswer {
    Moved(Result<MoveReport, MoveError>),
    Released(Result<Offset, String>),
    Done,
    Partitions(Vec<PartitionResult>),
    Load(Vec<PartitionBytes>),
}

/// One partition's cumulative byte counters on its owner shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionBytes {
    pub tp: TopicPartition,
    pub shard: ShardId,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// What a finished move reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveReport {
    pub tp: TopicPartition,
    pub from: ShardId,
    pub to: ShardId,
    /// Time from parking to the last shard holding the new image.
    pub elapsed_ms: u64,
    /// The partition was already on the target shard: nothing moved.
    pub unchanged: bool,
}

/// Why a move was refused or failed (the partition then stays on its shard).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MoveError {
    #[error("unknown topic or partition {0}")]
    Unknown(TopicPartition),
    #[error("{0} is not hosted by this broker")]
    NotHosted(TopicPartition),
    #[error("shard {} does not exist (this broker runs {count} shards: 0..{count})", to.0)]
    NoSuchShard { to: ShardId, count: u32 },
    #[error(
        "{0} is a coordinator partition: its group/transaction coordinator state lives on its \
         shard and is not moved; move other partitions instead"
    )]
    Coordinator(TopicPartition),
    #[error("another shard move is under way; try again when it finished")]
    Busy,
    #[error("move of {tp} failed, the partition stays on shard {from}: {reason}")]
    Failed { tp: TopicPartition, from: ShardId, reason: String },
}

// ---- Gates: per shard, only during a move ------------------------------------------

/// Requests for a moving partition wait here, in arrival order.
struct Gate {
    order: TicketLock,
    open: Cell<bool>,
    opened: Notify,
    /// On the target: forwarded requests pass, direct ones wait.
    target: bool,
    /// Requests that entered the gate and have not been sent on or started yet.
    waiting: Cell<usize>,
    drained: Notify,
}

impl Gate {
    fn new(target: bool) -> Rc<Self> {
        Rc::new(Gate {
            order: TicketLock::default(),
            open: Cell::new(false),
            opened: Notify::new(),
            target,
            waiting: Cell::new(0),
            drained: Notify::new(),
        })
    }

    fn open(&self) {
        self.open.set(true);
        self.opened.notify_all();
    }

    /// Waits (bounded) until every request that entered the gate moved on.
    async fn drain(&self) {
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

thread_local! {
    static GATES: RefCell<HashMap<TopicPartition, Rc<Gate>>> = RefCell::new(HashMap::new());
    static MOVING: Cell<bool> = const { Cell::new(false) };
}

fn gate_of(tp: &TopicPartition) -> Option<Rc<Gate>> {
    GATES.with(|g| {
        let g = g.borrow();
        if g.is_empty() {
            None
        } else {
            g.get(tp).cloned()
        }
    })
}

fn no_gates() -> bool {
    GATES.with(|g| g.borrow().is_empty())
}

fn install_gate(tp: TopicPartition, gate: Rc<Gate>) -> bool {
    GATES.with(|g| {
        let mut g = g.borrow_mut();
        if g.contains_key(&tp) {
            return false;
        }
        g.insert(tp, gate);
        true
    })
}

fn remove_gate(tp: &TopicPartition) -> Option<Rc<Gate>> {
    GATES.with(|g| g.borrow_mut().remove(tp))
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

async fn run_gated(
    ctx: &Rc<ShardCtx>,
    ops: Vec<PartitionOp>,
    forwarded: bool,
) -> Vec<PartitionResult> {
    let local = |op: &PartitionOp| {
        let (topic, partition) = tp_of(op);
        ctx.partitions.get(topic, partition).is_some() || !hosted_elsewhere(ctx, topic, partition)
    };
    if no_gates() && ops.iter().all(local) {
        return ops::run_ops(ctx, ops).await;
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
    let Some(gate) = gate_of(&tp).filter(|g| !(forwarded && g.target)) else {
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
    if ctx.partitions.get(topic, partition).is_some() || forwarded {
        let result = ops::run_ops(ctx, vec![op]).await;
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
    if ctx.partitions.get(topic, partition).is_some() || forwarded {
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
    let mut waited_ms = 0;
    while ctx.partitions.get(topic, partition).is_none()
        && mine()
        && waited_ms < SHARD_MOVE_OPEN_WAIT_MS_MAX
        && !ctx.is_shutting_down()
    {
        crate::shard::sleep(Duration::from_millis(1)).await;
        waited_ms += 1;
    }
    let result = ops::run_ops(ctx, vec![op]).await;
    result.into_iter().next().unwrap_or_else(|| unreachable_result(Kind::Fetch))
}

type Pending = super::call::Pending;

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
            records: bytes::Bytes::new(),
            diverging_epoch: None,
            aborted: None,
        }),
        Kind::ListOffsets => PartitionResult::ListOffsets(Err(e())),
        Kind::EpochEnd => PartitionResult::EpochEnd(Err(e())),
        Kind::DeleteRecords => PartitionResult::DeleteRecords(Err(e())),
        Kind::DescribeProducers => PartitionResult::DescribeProducers(Err(e())),
        Kind::WriteMarker => PartitionResult::WriteMarker(Err(e())),
    }
}

// ---- The steps, on the shard each addresses -----------------------------------------

/// Runs a move step addressed to this shard.
pub async fn execute(ctx: &Rc<ShardCtx>, call: MoveCall) -> MoveAnswer {
    match call {
        MoveCall::Move { topic, partition, to, trigger } => {
            MoveAnswer::Moved(move_partition(ctx, &topic, partition, to, trigger).await)
        }
        MoveCall::Release { tp } => MoveAnswer::Released(release(ctx, tp).await),
        MoveCall::Adopt { tp, high_watermark } => {
            ctx.partitions.hand_over(tp.clone(), high_watermark);
            if !install_gate(tp.clone(), Gate::new(true)) {
                tracing::warn!(partition = %tp, "a gate was already installed for the target");
            }
            MoveAnswer::Done
        }
        MoveCall::Unpark { tp, to } => {
            unpark(ctx, &tp, to).await;
            MoveAnswer::Done
        }
        MoveCall::Open { tp } | MoveCall::Abort { tp } => {
            if let Some(gate) = remove_gate(&tp) {
                gate.open();
            }
            MoveAnswer::Done
        }
        MoveCall::Forwarded(ops) => MoveAnswer::Partitions(run_gated(ctx, ops, true).await),
        MoveCall::Load => MoveAnswer::Load(
            ctx.partitions
                .all()
                .iter()
                .filter(|p| p.is_leader.get())
                .map(|p| PartitionBytes {
                    tp: p.tp.clone(),
                    shard: ctx.id,
                    bytes_in: p.bytes_in.get(),
                    bytes_out: p.bytes_out.get(),
                })
                .collect(),
        ),
    }
}

/// Source, step 1: gate, detach, drain, close. On a drain timeout the partition goes back
/// into the table and the gate opens (parked requests run here).
async fn release(ctx: &Rc<ShardCtx>, tp: TopicPartition) -> Result<Offset, String> {
    if ctx.partitions.get(&tp.topic, tp.partition).is_none() {
        return Err(format!("{tp} is not open on {}", ctx.id));
    }
    let gate = Gate::new(false);
    if !install_gate(tp.clone(), gate.clone()) {
        return Err(format!("{tp} is already moving"));
    }
    let Some(p) = ctx.partitions.detach(&tp) else {
        remove_gate(&tp);
        gate.open();
        return Err(format!("{tp} left {} meanwhile", ctx.id));
    };
    let p = match wait_in_flight(p).await {
        Ok(p) => p,
        Err(p) => {
            ctx.partitions.reattach(p);
            remove_gate(&tp);
            gate.open();
            return Err(format!(
                "requests on {tp} still in flight after {SHARD_MOVE_DRAIN_WAIT_MS_MAX} ms"
            ));
        }
    };
    let high_watermark = if p.is_leader.get() { p.high_watermark() } else { p.follower_hw.get() };
    let owned = match Rc::try_unwrap(p) {
        Ok(owned) => owned,
        Err(p) => {
            ctx.partitions.reattach(p);
            remove_gate(&tp);
            gate.open();
            return Err(format!("{tp} is still referenced"));
        }
    };
    // A failed close leaves the log as a crash would: the target's open recovers it.
    if let Err(err) = crate::partition::table::close_log(owned).await {
        tracing::warn!(partition = %tp, "close before the shard move failed: {err}");
    }
    crate::crashpoint::hit("shard_move.source_closed");
    Ok(high_watermark)
}

/// Waits (bounded) until no request holds the partition any more.
async fn wait_in_flight(p: Rc<OwnedPartition>) -> Result<Rc<OwnedPartition>, Rc<OwnedPartition>> {
    let mut waited_ms = 0;
    while Rc::strong_count(&p) > 1 {
        if waited_ms >= SHARD_MOVE_DRAIN_WAIT_MS_MAX {
            return Err(p);
        }
        // Long-polls hold the partition until woken: wake them again (cheap).
        p.hw_changed.notify_all();
        p.replication.appended.notify_all();
        crate::shard::sleep(Duration::from_millis(1)).await;
        waited_ms += 1;
    }
    Ok(p)
}

/// Source, step 5: parked requests go to `to` in order, then `to`'s gate opens, by a
/// message on the same channel after them.
async fn unpark(ctx: &Rc<ShardCtx>, tp: &TopicPartition, to: ShardId) {
    let Some(gate) = gate_of(tp) else { return };
    gate.open();
    gate.drain().await;
    remove_gate(tp);
    let open = ctx.call(to, ShardRequest::ShardMove(MoveCall::Open { tp: tp.clone() })).await;
    if let Err(err) = open.await {
        tracing::warn!(partition = %tp, "cannot open the target's gate: {err}");
    }
}

// ---- Coordination on shard 0 ---------------------------------------------------------

/// Moves `topic`-`partition` to shard `to` of this broker (see the module docs). Runs on
/// shard 0; one move at a time.
pub async fn move_partition(
    ctx: &Rc<ShardCtx>,
    topic: &str,
    partition: i32,
    to: ShardId,
    trigger: Trigger,
) -> Result<MoveReport, MoveError> {
    let tp = TopicPartition::new(topic, partition);
    let image = ctx.image();
    let from = check_move(&image, &tp, to)?;
    if from == to {
        return Ok(MoveReport { tp, from, to, elapsed_ms: 0, unchanged: true });
    }
    let Some(node) = super::cluster::node(ctx) else {
        return Err(MoveError::Failed { tp, from, reason: "not the controller shard".into() });
    };
    if MOVING.with(|m| m.replace(true)) {
        return Err(MoveError::Busy);
    }
    crate::metrics::set(crate::metrics::Level::ShardMovesInProgress, 1);
    let started = Instant::now();
    let result = {
        let _publication = node.lock_publication().await;
        run_move(ctx, &node, &tp, to).await
    };
    MOVING.with(|m| m.set(false));
    crate::metrics::set(crate::metrics::Level::ShardMovesInProgress, 0);
    let from = result?;
    let counter = match trigger {
        Trigger::Manual => crate::metrics::Count::ShardMovesManual,
        Trigger::Auto => crate::metrics::Count::ShardMovesAuto,
    };
    crate::metrics::count(counter, 1);
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    tracing::info!(partition = %tp, %from, %to, ?trigger, elapsed_ms, "moved partition between shards");
    Ok(MoveReport { tp, from, to, elapsed_ms, unchanged: false })
}

/// Which shard owns `tp` now, or why it may not move to `to`.
pub fn check_move(
    image: &MetadataImage,
    tp: &TopicPartition,
    to: ShardId,
) -> Result<ShardId, MoveError> {
    if crate::controller::is_internal(&tp.topic) {
        return Err(MoveError::Coordinator(tp.clone()));
    }
    let p =
        image.partition(&tp.topic, tp.partition).ok_or_else(|| MoveError::Unknown(tp.clone()))?;
    if !p.hosted {
        return Err(MoveError::NotHosted(tp.clone()));
    }
    if to.0 >= image.shard_count {
        return Err(MoveError::NoSuchShard { to, count: image.shard_count });
    }
    Ok(p.owner_shard)
}

/// The steps under the publication lock; returns the source shard.
async fn run_move(
    ctx: &Rc<ShardCtx>,
    node: &super::cluster::ClusterNode,
    tp: &TopicPartition,
    to: ShardId,
) -> Result<ShardId, MoveError> {
    // Re-read under the lock: a publication may have changed the owner meanwhile.
    let image = ctx.image();
    let from = check_move(&image, tp, to)?;
    let fail = |reason: String| MoveError::Failed { tp: tp.clone(), from, reason };
    let topic_id =
        image.topic(&tp.topic).map(|t| t.topic_id).ok_or_else(|| fail("no topic".into()))?;
    let t0 = Instant::now();
    let hw = match step(ctx, from, MoveCall::Release { tp: tp.clone() }).await {
        MoveAnswer::Released(Ok(hw)) => hw,
        MoveAnswer::Released(Err(reason)) => return Err(fail(reason)),
        _ => return Err(fail(format!("{from} did not answer the release"))),
    };
    step(ctx, to, MoveCall::Adopt { tp: tp.clone(), high_watermark: hw }).await;
    let moved = match node.reassign_shard(ctx, topic_id, tp.partition, to) {
        Ok(image) => image,
        Err(reason) => {
            // Nothing recorded: the source reopens the log from the image it holds.
            step(ctx, to, MoveCall::Abort { tp: tp.clone() }).await;
            let reopened = apply(ctx, from, image.clone()).await;
            step(ctx, from, MoveCall::Abort { tp: tp.clone() }).await;
            if let Err(err) = reopened {
                tracing::error!(partition = %tp, "reopening after a failed move: {err}");
            }
            return Err(fail(reason));
        }
    };
    crate::crashpoint::hit("shard_move.assignment_saved");
    let released_ms = t0.elapsed().as_millis();
    if let Err(reason) = apply(ctx, to, moved.clone()).await {
        // The target cannot open it: put it back where it was.
        tracing::error!(partition = %tp, "target shard cannot open the partition: {reason}");
        let back = node.reassign_shard(ctx, topic_id, tp.partition, from).map_err(fail)?;
        let _ = apply(ctx, from, back.clone()).await;
        step(ctx, from, MoveCall::Abort { tp: tp.clone() }).await;
        step(ctx, to, MoveCall::Abort { tp: tp.clone() }).await;
        publish_rest(ctx, &back, &[from]).await;
        return Err(fail(reason));
    }
    crate::crashpoint::hit("shard_move.target_opened");
    let opened_ms = t0.elapsed().as_millis();
    if let Err(reason) = apply(ctx, from, moved.clone()).await {
        tracing::warn!(partition = %tp, "source shard's image install failed: {reason}");
    }
    step(ctx, from, MoveCall::Unpark { tp: tp.clone(), to }).await;
    let unparked_ms = t0.elapsed().as_millis();
    publish_rest(ctx, &moved, &[from, to]).await;
    tracing::info!(partition = %tp, released_ms, opened_ms, unparked_ms, "shard move steps");
    Ok(from)
}

/// Sends a step and waits for its answer (`Done` when it could not be delivered).
async fn step(ctx: &Rc<ShardCtx>, shard: ShardId, call: MoveCall) -> MoveAnswer {
    match ctx.call(shard, ShardRequest::ShardMove(call)).await.await {
        Ok(ShardReply::ShardMove(answer)) => answer,
        Ok(_) => MoveAnswer::Done,
        Err(err) => {
            tracing::warn!(%shard, "shard move step not delivered: {err}");
            MoveAnswer::Released(Err(err.to_string()))
        }
    }
}

async fn apply(
    ctx: &Rc<ShardCtx>,
    shard: ShardId,
    image: std::sync::Arc<MetadataImage>,
) -> Result<(), String> {
    match ctx.call(shard, ShardRequest::ApplyImage(image)).await.await {
        Ok(ShardReply::ImageApplied) => Ok(()),
        Ok(ShardReply::Failed(reason)) => Err(reason),
        Ok(_) => Err("unexpected reply".into()),
        Err(err) => Err(err.to_string()),
    }
}

/// Installs `image` on every shard not in `done`.
async fn publish_rest(ctx: &Rc<ShardCtx>, image: &std::sync::Arc<MetadataImage>, done: &[ShardId]) {
    for shard in (0..ctx.shard_count).map(ShardId).filter(|s| !done.contains(s)) {
        if let Err(reason) = apply(ctx, shard, image.clone()).await {
            tracing::warn!(%shard, "image install after a shard move failed: {reason}");
        }
    }
}

// ---- The admin endpoint ----------------------------------------------------------------

/// `POST /v1/shards/move?partition=TOPIC-P&to=N`: runs the move on shard 0 and answers
/// 200 with a line of text, 400/404/409 with the reason. `GET /v1/shards/partitions`: the
/// JSON list of hosted partitions with their owner shard and byte counters.
pub async fn admin_post(ctx: Rc<ShardCtx>, method: String, target: String) -> (u16, String) {
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    match (method.as_str(), path) {
        ("GET", "/v1/shards/partitions") => return (200, partitions_json(&ctx).await),
        ("POST", "/v1/shards/move") => {}
        _ => return (404, format!("no {method} action at {path}\n")),
    }
    let (topic, partition, to) = match parse_move_query(query) {
        Ok(v) => v,
        Err(reason) => return (400, format!("{reason}\n")),
    };
    let call = MoveCall::Move { topic, partition, to, trigger: Trigger::Manual };
    match step(&ctx, ShardId(0), call).await {
        MoveAnswer::Moved(Ok(r)) if r.unchanged => {
            (200, format!("{} is already on shard {}\n", r.tp, r.to.0))
        }
        MoveAnswer::Moved(Ok(r)) => (
            200,
            format!(
                "moved {} from shard {} to shard {} in {} ms\n",
                r.tp, r.from.0, r.to.0, r.elapsed_ms
            ),
        ),
        MoveAnswer::Moved(Err(err)) => {
            let status = match err {
                MoveError::Unknown(_) | MoveError::NotHosted(_) => 404,
                MoveError::NoSuchShard { .. } | MoveError::Coordinator(_) => 400,
                MoveError::Busy | MoveError::Failed { .. } => 409,
            };
            (status, format!("{err}\n"))
        }
        _ => (409, "shard 0 did not answer the move\n".into()),
    }
}

/// One hosted partition as `GET /v1/shards/partitions` lists it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartitionPlacement {
    pub topic: String,
    pub partition: i32,
    pub shard: u32,
    pub leader: bool,
    /// Cumulative record bytes since the partition opened on its shard (0 for followers).
    pub bytes_in: u64,
    pub bytes_out: u64,
}

async fn partitions_json(ctx: &Rc<ShardCtx>) -> String {
    let mut counters: HashMap<TopicPartition, PartitionBytes> = HashMap::new();
    for shard in (0..ctx.shard_count).map(ShardId) {
        if let MoveAnswer::Load(list) = step(ctx, shard, MoveCall::Load).await {
            counters.extend(list.into_iter().map(|p| (p.tp.clone(), p)));
        }
    }
    let image = ctx.image();
    let mut out = Vec::new();
    for (name, t) in &image.topics {
        for p in t.partitions.iter().filter(|p| p.hosted) {
            let c = counters.get(&TopicPartition::new(name.clone(), p.index));
            out.push(PartitionPlacement {
                topic: name.clone(),
                partition: p.index,
                shard: p.owner_shard.0,
                leader: p.leader == image.node_id,
                bytes_in: c.map_or(0, |c| c.bytes_in),
                bytes_out: c.map_or(0, |c| c.bytes_out),
            });
        }
    }
    out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    serde_json::to_string(&out).unwrap_or_else(|_| "[]".into())
}

/// `partition=TOPIC-P&to=N` (percent-encoding of the topic is not needed: Kafka topic
/// names are `[a-zA-Z0-9._-]`).
pub fn parse_move_query(query: &str) -> Result<(String, i32, ShardId), String> {
    let mut tp = None;
    let mut to = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("partition", v)) => tp = Some(parse_topic_partition(v)?),
            Some(("to", v)) => {
                to = Some(v.parse::<u32>().map_err(|_| format!("bad shard {v:?}"))?);
            }
            _ => return Err(format!("unknown parameter {pair:?}")),
        }
    }
    let (topic, partition) = tp.ok_or("missing partition=TOPIC-PARTITION")?;
    let to = to.ok_or("missing to=SHARD")?;
    Ok((topic, partition, ShardId(to)))
}

/// `TOPIC-PARTITION` (the topic may contain dashes: the partition is after the last one).
pub fn parse_topic_partition(s: &str) -> Result<(String, i32), String> {
    let (topic, p) = s.rsplit_once('-').ok_or_else(|| format!("{s:?} is not TOPIC-PARTITION"))?;
    let p = p.parse::<i32>().map_err(|_| format!("{s:?} is not TOPIC-PARTITION"))?;
    if topic.is_empty() || p < 0 {
        return Err(format!("{s:?} is not TOPIC-PARTITION"));
    }
    Ok((topic.to_string(), p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parsing() {
        assert_eq!(
            parse_move_query("partition=my-topic-3&to=1").unwrap(),
            ("my-topic".to_string(), 3, ShardId(1))
        );
        assert!(parse_move_query("partition=t&to=1").is_err());
        assert!(parse_move_query("partition=t-1").is_err());
        assert!(parse_move_query("partition=t-1&to=x").is_err());
        assert!(parse_move_query("partition=t--1&to=0").is_err());
        assert!(parse_move_query("what=1").is_err());
    }
}
