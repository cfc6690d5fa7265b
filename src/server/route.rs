//! Splitting a request's partitions by owner shard and gathering the replies back into
//! request order.
//!
//! Runs on the connection's shard. Invariant: the sends happen in [`Routed::send`], in
//! shard order, before any reply is awaited; each result returns to the slot its
//! partition occupies in the request.

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::partition::ops::{PartitionOp, PartitionResult};
use crate::server::call::{Pending, ShardReply, ShardRequest};
use crate::shard::ShardCtx;
use crate::types::ShardId;

/// Partition operations grouped by owner shard, each tagged with its response slot.
#[derive(Default)]
pub struct Routed {
    groups: BTreeMap<ShardId, (Vec<PartitionOp>, Vec<usize>)>,
}

/// Sent operations whose replies are on their way.
pub struct InFlight {
    pending: Vec<(Vec<usize>, Pending)>,
}

impl Routed {
    pub fn push(&mut self, shard: ShardId, slot: usize, op: PartitionOp) {
        let group = self.groups.entry(shard).or_default();
        group.0.push(op);
        group.1.push(slot);
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Sends every group to its shard.
    pub async fn send(self, ctx: &Rc<ShardCtx>) -> InFlight {
        let mut pending = Vec::with_capacity(self.groups.len());
        for (shard, (ops, slots)) in self.groups {
            pending.push((slots, ctx.call(shard, ShardRequest::Partitions(ops)).await));
        }
        InFlight { pending }
    }
}

impl InFlight {
    /// Waits for every reply; `results[slot]` is `None` when the owner shard failed.
    pub async fn gather(self, slots: usize) -> Vec<Option<PartitionResult>> {
        let mut results: Vec<Option<PartitionResult>> = (0..slots).map(|_| None).collect();
        let (slot_lists, futures): (Vec<_>, Vec<_>) = self.pending.into_iter().unzip();
        let replies = futures::future::join_all(futures).await;
        for (slot_list, reply) in slot_lists.into_iter().zip(replies) {
            match reply {
                Ok(ShardReply::Partitions(list)) => {
                    for (slot, result) in slot_list.into_iter().zip(list) {
                        if let Some(cell) = results.get_mut(slot) {
                            *cell = Some(result);
                        }
                    }
                }
                Ok(_) => tracing::error!("owner shard sent an unexpected reply"),
                Err(err) => tracing::warn!("owner shard unreachable: {err}"),
            }
        }
        results
    }
}
