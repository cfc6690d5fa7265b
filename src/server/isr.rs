//! The leader side of ISR changes: every [`ISR_CHECK_INTERVAL_MS`] each shard asks every
//! partition it leads with followers whether its ISR should change
//! (`partition::replicas::LeaderReplicas::isr_change`: shrink out followers not caught up
//! for `replica.lag.time.max.ms`, expand with one that reached the high watermark and this
//! epoch's start), marks the change pending and sends it as AlterPartition to the active
//! controller: over the mesh to shard 0 (`control::call_controller`), which forwards it
//! with the cluster calls (`server::cluster::rpc::Call::AlterPartition`). The answer's ISR
//! is applied at once (the image carrying it follows); a refusal clears the pending change
//! and the next check decides again once an image changed the ISR, or after
//! `ISR_CHANGE_RETRY_MS` (no storm of requests built on the same stale ISR).
//!
//! One loop per shard, started with the shard's first image, ended at shutdown; touches only
//! its shard's partitions. Invariants: at most one change in flight per partition (the
//! pending state of `LeaderReplicas`); an answer for an older leader epoch is ignored.

use std::rc::Rc;
use std::time::Duration;

use super::cluster::rpc::Reply;
use super::control::{call_controller, ControllerReply, ControllerRequest};
use crate::constants::ISR_CHECK_INTERVAL_MS;
use crate::controller::AlterPartitionRequest;
use crate::partition::table::OwnedPartition;
use crate::shard::ShardCtx;

/// Starts this shard's ISR loop once (called as each image is installed).
pub fn ensure_started(ctx: &Rc<ShardCtx>) {
    if crate::server::broker::of(ctx).isr_loop_running.replace(true) {
        return;
    }
    drop(ctx.spawn(isr_loop(ctx.clone())));
}

async fn isr_loop(ctx: Rc<ShardCtx>) {
    while !ctx.is_shutting_down() {
        crate::shard::sleep(Duration::from_millis(ISR_CHECK_INTERVAL_MS)).await;
        for p in crate::server::broker::of(&ctx).partitions.all() {
            if p.is_leader.get() && p.replication.has_followers() {
                check(&ctx, p);
            }
        }
    }
    crate::server::broker::of(&ctx).isr_loop_running.set(false);
}

/// Decides and, if there is one, sends this partition's ISR change.
fn check(ctx: &Rc<ShardCtx>, p: Rc<OwnedPartition>) {
    let image = ctx.image();
    let eligible = |id| image.brokers.get(&id).is_some_and(|b| !b.fenced);
    let now_ms = crate::shard::now_ms();
    let leader_end = p.log.log_end_offset();
    let req = p.replication.with(|st| {
        let change = st.isr_change(leader_end, now_ms, eligible)?;
        let req = AlterPartitionRequest {
            topic_id: p.topic_id,
            partition: p.tp.partition,
            leader: st.me,
            leader_epoch: st.leader_epoch,
            current_isr: st.isr.clone(),
            new_isr: change.new_isr().to_vec(),
        };
        st.mark_pending(change);
        Some(req)
    });
    let Some(req) = req else { return };
    tracing::info!(partition = %p.tp, isr = ?req.current_isr, new_isr = ?req.new_isr, "AlterPartition");
    let ctx2 = ctx.clone();
    drop(ctx.spawn(async move {
        let epoch = req.leader_epoch;
        let answer = call_controller(&ctx2, ControllerRequest::AlterPartition(req)).await;
        let isr = match answer {
            ControllerReply::Encoded(bytes) => match Reply::decode(bytes) {
                Ok(Reply::PartitionAltered { isr, .. }) => Some(isr),
                other => {
                    tracing::info!(partition = %p.tp, "AlterPartition refused: {other:?}");
                    None
                }
            },
            ControllerReply::Done => None,
            ControllerReply::Rejected(reason) => {
                tracing::info!(partition = %p.tp, "AlterPartition failed: {reason}");
                None
            }
        };
        p.replication.with(|st| {
            if st.leader_epoch != epoch {
                return;
            }
            match isr {
                Some(isr) => st.apply_isr(&isr),
                // Refused: drop the pending change; the next one waits for the image that
                // brings the ISR in force, or the retry delay.
                None => st.refused(crate::shard::now_ms()),
            }
        });
        // acks=all waiters re-check: the ISR (so the high watermark) may have changed.
        p.hw_changed.notify_all();
    }));
}
