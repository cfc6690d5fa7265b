//! Moving a partition between the shards of this broker, online (`shardlog shards move`,
//! `POST /v1/shards/move`, and the automatic balancer `server::shard_balance`).
//!
//! Shard 0 coordinates ([`move_partition`], one move at a time, under the cluster node's
//! publication lock so no other image is published meanwhile):
//! 1. **Release** on the source shard S: a closed *gate* parks every new request for the
//!    partition (in arrival order, a ticket each); if S leads it with followers, their
//!    fetches still pass the gate until every appended record is committed (so acks=all
//!    produces in flight complete instead of timing out); the partition leaves S's table
//!    (its follower fetcher lets go); in-flight requests finish (bounded, else the move is
//!    given up, the partition stays and S's fetchers are reconciled again); the log is
//!    flushed and closed (producer-state snapshot); its high watermark is handed over.
//! 2. **Adopt** on the target shard T: a closed gate for requests arriving at T directly
//!    (T learns the new owner first), and the handed-over high watermark.
//! 3. The broker's `shard-assignment` file records T (durable: fsync, rename, dir fsync).
//! 4. The new node image goes to T (it opens the log: producer state, leader state,
//!    follower fetcher), then to S, then to the other shards.
//! 5. **Barrier**: every shard but S sends a flush to S and waits for its answer. Requests
//!    it routed to S before it learned the new owner travel on that same channel ahead of
//!    the flush and are handled in order, so they are parked in S's gate by then.
//! 6. **Unpark** on S: parked requests are forwarded to T in arrival order, then S opens
//!    T's gate with a message on the same S→T channel, so T runs the parked requests
//!    before any that reached it directly.
//!
//! A request that reaches a shard the partition already left is forwarded once, to the
//! owner in this shard's image: clients never see NOT_LEADER_OR_FOLLOWER for a local move.
//! Every request of a connection reaches the target in the order it was read, whichever
//! shard the connection is on: one it sent to S before its shard learned the new owner is
//! parked at S before S unparks (step 5), and one it sends to T afterwards waits behind
//! T's gate until S's parked requests were forwarded ahead of it. (Before the barrier, a
//! connection on a third shard could have its next request overtake one still on its way
//! to S.)
//! A crash at any step recovers to one owner: the assignment file names exactly one shard
//! and only that shard opens the log at start (the source closed it cleanly first).
//!
//! Group and transaction coordinator partitions are refused: their coordinator state lives
//! on the owner shard and is not handed over.
//!
//! Runs on every shard (gates, forwarding) and on shard 0 (coordination). Invariants: at
//! most one move at a time; a gate exists only during a move; a request is forwarded at
//! most once (a forwarded request runs where it lands).

mod admin;
mod gate;

use std::rc::Rc;
use std::time::{Duration, Instant};

pub(crate) use self::gate::Gate;
use self::gate::{gate_of, install_gate, remove_gate};
use super::call::{ShardReply, ShardRequest};
use crate::constants::{
    SHARD_MOVE_COMMIT_PHASES_MAX, SHARD_MOVE_COMMIT_STALL_MS_MAX, SHARD_MOVE_DRAIN_WAIT_MS_MAX,
};
use crate::controller::MetadataImage;
use crate::partition::ops::{PartitionOp, PartitionResult};
use crate::partition::OwnedPartition;
use crate::shard::ShardCtx;
use crate::types::{Offset, ShardId, TopicPartition};

pub use self::admin::{admin_post, parse_move_query, parse_topic_partition, PartitionPlacement};
pub use self::gate::{run_partitions, tp_of};

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
    /// A shard that installed the new image: sends [`MoveCall::Flush`] to the source `via`
    /// and waits for it, so every request it routed to the source before the image is
    /// parked there (same channel, handled in order) before the source unparks.
    Barrier { via: ShardId },
    /// Answered at once (behind everything sent before it on the same channel).
    Flush,
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

// ---- The steps, on the shard each addresses -----------------------------------------

/// Runs a move step addressed to this shard.
pub async fn execute(ctx: &Rc<ShardCtx>, call: MoveCall) -> MoveAnswer {
    match call {
        MoveCall::Move { topic, partition, to, trigger } => {
            MoveAnswer::Moved(move_partition(ctx, &topic, partition, to, trigger).await)
        }
        MoveCall::Release { tp } => MoveAnswer::Released(release(ctx, tp).await),
        MoveCall::Adopt { tp, high_watermark } => {
            super::broker::of(ctx).partitions.hand_over(tp.clone(), high_watermark);
            if !install_gate(ctx, tp.clone(), Gate::new(true)) {
                tracing::warn!(partition = %tp, "a gate was already installed for the target");
            }
            MoveAnswer::Done
        }
        MoveCall::Unpark { tp, to } => {
            unpark(ctx, &tp, to).await;
            MoveAnswer::Done
        }
        MoveCall::Open { tp } | MoveCall::Abort { tp } => {
            if let Some(gate) = remove_gate(ctx, &tp) {
                gate.open();
            }
            MoveAnswer::Done
        }
        MoveCall::Forwarded(ops) => MoveAnswer::Partitions(gate::run_gated(ctx, ops, true).await),
        MoveCall::Barrier { via } => {
            step(ctx, via, MoveCall::Flush).await;
            MoveAnswer::Done
        }
        MoveCall::Flush => MoveAnswer::Done,
        MoveCall::Load => MoveAnswer::Load(
            super::broker::of(ctx)
                .partitions
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

/// Source, step 1: gate, drain, detach, close. On a drain timeout the partition goes back
/// into the table and the gate opens (parked requests run here).
///
/// A led partition with followers drains in two phases, because an acks=all produce in
/// flight waits for the followers' next fetches: first the partition stays in the table
/// and only followers' fetches pass the closed gate, until every appended record is
/// committed (high watermark at the log end); then it is detached and the rest drains.
/// A produce that appended after the first phase sends it back to the first phase.
async fn release(ctx: &Rc<ShardCtx>, tp: TopicPartition) -> Result<Offset, String> {
    let broker = super::broker::of(ctx);
    let table = &broker.partitions;
    if table.get(&tp.topic, tp.partition).is_none() {
        return Err(format!("{tp} is not open on {}", ctx.id));
    }
    let gate = Gate::new(false);
    if !install_gate(ctx, tp.clone(), gate.clone()) {
        return Err(format!("{tp} is already moving"));
    }
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_millis(SHARD_MOVE_DRAIN_WAIT_MS_MAX);
    let give_up = |reason: String| {
        remove_gate(ctx, &tp);
        gate.open();
        Err(reason)
    };
    let mut phases = 0u32;
    let p = loop {
        phases += 1;
        gate.pass_replica_fetches(true);
        let Some(attached) = table.get(&tp.topic, tp.partition) else {
            return give_up(format!("{tp} left {} meanwhile", ctx.id));
        };
        wait_committed(&attached, deadline).await;
        drop(attached);
        gate.pass_replica_fetches(false);
        let Some(p) = table.detach(&tp) else {
            return give_up(format!("{tp} left {} meanwhile", ctx.id));
        };
        let retry = phases < SHARD_MOVE_COMMIT_PHASES_MAX;
        match wait_in_flight(p, deadline, retry).await {
            Drained::Yes(p) => break p,
            Drained::Uncommitted(p) => table.reattach(p),
            Drained::TimedOut(p) => {
                table.reattach(p);
                refollow(ctx, &tp).await;
                return give_up(format!(
                    "requests on {tp} still in flight after {SHARD_MOVE_DRAIN_WAIT_MS_MAX} ms"
                ));
            }
        }
    };
    let drained_ms = t0.elapsed().as_millis();
    let high_watermark = if p.is_leader.get() { p.high_watermark() } else { p.follower_hw.get() };
    let owned = match Rc::try_unwrap(p) {
        Ok(owned) => owned,
        Err(p) => {
            table.reattach(p);
            refollow(ctx, &tp).await;
            return give_up(format!("{tp} is still referenced"));
        }
    };
    // A failed close leaves the log as a crash would: the target's open recovers it.
    if let Err(err) = crate::partition::table::close_log(owned).await {
        tracing::warn!(partition = %tp, "close before the shard move failed: {err}");
    }
    tracing::debug!(partition = %tp, drained_ms, phases, closed_ms = t0.elapsed().as_millis(), "released");
    crate::crashpoint::hit("shard_move.source_closed");
    Ok(high_watermark)
}

/// Whether `p` is led here with followers and holds appended records the ISR has not
/// committed yet (an acks=all produce may be waiting for them).
fn uncommitted(p: &OwnedPartition) -> bool {
    p.is_leader.get()
        && p.replication.has_followers()
        && p.high_watermark() < p.log.log_end_offset()
}

/// First phase of a leader's drain: waits (until `deadline`) for the high watermark to
/// reach the log end while followers' fetches still reach the partition; gives up earlier
/// when the high watermark stops moving (frozen below `min.insync.replicas`: waiting would
/// not help, and the produces waiting on it end by their own timeout or error).
async fn wait_committed(p: &OwnedPartition, deadline: Instant) {
    let stall = Duration::from_millis(SHARD_MOVE_COMMIT_STALL_MS_MAX);
    let (mut hw, mut moved) = (p.high_watermark(), Instant::now());
    while uncommitted(p) && Instant::now() < deadline && moved.elapsed() < stall {
        crate::shard::sleep(Duration::from_millis(1)).await;
        let now_hw = p.high_watermark();
        if now_hw != hw {
            (hw, moved) = (now_hw, Instant::now());
        }
    }
}

/// How a detached partition's drain ended.
enum Drained {
    /// No request holds it any more.
    Yes(Rc<OwnedPartition>),
    /// A produce appended after the first phase and waits for followers: back to it.
    Uncommitted(Rc<OwnedPartition>),
    TimedOut(Rc<OwnedPartition>),
}

/// Waits (until `deadline`) until no request holds the partition any more; with `retry`,
/// hands it back as soon as it holds uncommitted records while requests hold it.
async fn wait_in_flight(p: Rc<OwnedPartition>, deadline: Instant, retry: bool) -> Drained {
    while Rc::strong_count(&p) > 1 {
        if retry && uncommitted(&p) && Instant::now() < deadline {
            return Drained::Uncommitted(p);
        }
        if Instant::now() >= deadline {
            return Drained::TimedOut(p);
        }
        // Long-polls hold the partition until woken: wake them again (cheap).
        p.hw_changed.notify_all();
        p.replication.appended.notify_all();
        crate::shard::sleep(Duration::from_millis(1)).await;
    }
    Drained::Yes(p)
}

/// A follower partition put back after a given-up move: its fetcher let go of it at the
/// detach, so this shard's fetchers are reconciled with the image again.
async fn refollow(ctx: &Rc<ShardCtx>, tp: &TopicPartition) {
    let broker = super::broker::of(ctx);
    if let Err(err) = broker.partitions.apply_image(ctx, &ctx.image()).await {
        tracing::warn!(partition = %tp, "re-applying the image after a given-up move: {err}");
    }
}

/// Source, step 5: parked requests go to `to` in order, then `to`'s gate opens, by a
/// message on the same channel after them.
async fn unpark(ctx: &Rc<ShardCtx>, tp: &TopicPartition, to: ShardId) {
    let Some(gate) = gate_of(ctx, tp) else { return };
    gate.open();
    gate.drain().await;
    remove_gate(ctx, tp);
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
    let broker = crate::server::broker::of(ctx);
    if broker.shard_move_running.replace(true) {
        return Err(MoveError::Busy);
    }
    crate::metrics::set(crate::metrics::Level::ShardMovesInProgress, 1);
    let started = Instant::now();
    let result = {
        let _publication = node.lock_publication().await;
        run_move(ctx, &node, &tp, to).await
    };
    broker.shard_move_running.set(false);
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
    // Every other shard learns the owner before the source unparks, and flushes its
    // channel to the source: a request it routed there before is parked and forwarded
    // ahead of any it now sends to the target (which waits behind the target's gate).
    publish_rest(ctx, &moved, &[from, to]).await;
    for shard in (0..ctx.shard_count).map(ShardId).filter(|s| *s != from) {
        step(ctx, shard, MoveCall::Barrier { via: from }).await;
    }
    let published_ms = t0.elapsed().as_millis();
    step(ctx, from, MoveCall::Unpark { tp: tp.clone(), to }).await;
    let unparked_ms = t0.elapsed().as_millis();
    tracing::debug!(partition = %tp, released_ms, opened_ms, published_ms, unparked_ms, "shard move steps");
    Ok(from)
}

/// Sends a step and waits for its answer (`Done` when it could not be delivered).
pub(super) async fn step(ctx: &Rc<ShardCtx>, shard: ShardId, call: MoveCall) -> MoveAnswer {
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

#[cfg(test)]
mod tests;
