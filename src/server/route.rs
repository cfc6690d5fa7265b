//! The one scatter/gather of per-partition requests (Produce, Fetch, ListOffsets,
//! DeleteRecords, OffsetForLeaderEpoch, DescribeProducers, DescribeLogDirs): each partition of a request is either refused
//! up front (unknown topic, bad acks, ...) or sent to its owner shard, ops for one shard in
//! one mesh message; the results come back in the request's order, each beside the caller's
//! tag for its partition.
//!
//! Runs on the connection's shard. Invariants: the sends happen in [`Scatter::send`], in
//! shard order, before any reply is awaited (so a connection's requests reach each owner in
//! the order they were read); every pushed partition gets exactly one outcome.

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::error::ResponseError;

use super::call::{Pending, ShardReply, ShardRequest};
use crate::partition::ops::{PartitionOp, PartitionResult};
use crate::shard::ShardCtx;
use crate::types::ShardId;

/// Why a partition has no result from its owner shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    /// Refused before routing, with this error.
    Refused(ResponseError),
    /// Its owner shard did not answer (mesh closed, task dropped) or answered something
    /// else: the client refreshes metadata and retries, as after a leader move.
    Unreachable,
}

impl Missing {
    /// The partition's error in the response.
    #[must_use]
    pub fn error(self) -> ResponseError {
        match self {
            Missing::Refused(error) => error,
            Missing::Unreachable => ResponseError::NotLeaderOrFollower,
        }
    }
}

/// One partition's outcome: its owner shard's result, or why there is none.
pub type PartitionOutcome = Result<PartitionResult, Missing>;

/// The error of an outcome that is not the result kind the caller expected.
#[must_use]
pub fn error_of(outcome: PartitionOutcome) -> ResponseError {
    match outcome {
        Err(missing) => missing.error(),
        Ok(_) => ResponseError::NotLeaderOrFollower,
    }
}

/// The owner shard of a partition per this shard's image, or UNKNOWN_TOPIC_OR_PARTITION.
pub fn owner(ctx: &ShardCtx, topic: &str, partition: i32) -> Result<ShardId, ResponseError> {
    ctx.owner_of(topic, partition)
        .map(|(shard, _)| shard)
        .ok_or(ResponseError::UnknownTopicOrPartition)
}

/// A request's partitions, each tagged with `T` (where its answer goes), being routed.
pub struct Scatter<T> {
    groups: BTreeMap<ShardId, (Vec<PartitionOp>, Vec<usize>)>,
    slots: Vec<(T, Option<ResponseError>)>,
}

impl<T> Default for Scatter<T> {
    fn default() -> Self {
        Self { groups: BTreeMap::new(), slots: Vec::new() }
    }
}

/// The sent part of a [`Scatter`], whose replies are on their way.
pub struct InFlight<T> {
    pending: Vec<(Vec<usize>, Pending)>,
    slots: Vec<(T, Option<ResponseError>)>,
}

impl<T> Scatter<T> {
    /// Adds one partition: `op()` goes to the owner shard, or, when `target` is an error,
    /// the partition is answered with it and nothing is sent.
    pub fn push(
        &mut self,
        tag: T,
        target: Result<ShardId, ResponseError>,
        op: impl FnOnce() -> PartitionOp,
    ) {
        let slot = self.slots.len();
        match target {
            Ok(shard) => {
                let group = self.groups.entry(shard).or_default();
                group.0.push(op());
                group.1.push(slot);
                self.slots.push((tag, None));
            }
            Err(error) => self.slots.push((tag, Some(error))),
        }
    }

    /// Sends every shard's ops (awaiting only room in the mesh channels).
    pub async fn send(self, ctx: &Rc<ShardCtx>) -> InFlight<T> {
        let mut pending = Vec::with_capacity(self.groups.len());
        for (shard, (ops, slots)) in self.groups {
            pending.push((slots, ctx.call(shard, ShardRequest::Partitions(ops)).await));
        }
        InFlight { pending, slots: self.slots }
    }
}

impl<T> InFlight<T> {
    /// Waits for every reply; the outcomes come in the order the partitions were pushed.
    pub async fn gather(self) -> Vec<(T, PartitionOutcome)> {
        let mut results: Vec<Option<PartitionResult>> =
            (0..self.slots.len()).map(|_| None).collect();
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
        self.slots
            .into_iter()
            .zip(results)
            .map(|((tag, refused), result)| {
                let outcome = match (refused, result) {
                    (Some(error), _) => Err(Missing::Refused(error)),
                    (None, Some(result)) => Ok(result),
                    (None, None) => Err(Missing::Unreachable),
                };
                (tag, outcome)
            })
            .collect()
    }
}
