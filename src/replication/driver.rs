//! Runs a [`Fetcher`] against its leader: sends the planned Fetch through a [`LeaderLink`],
//! then carries out each partition's [`Action`] on the follower's partition logs (append the
//! leader's batches as they are and wait until they are durable under the flush policy,
//! truncate on a diverging epoch, reset after OFFSET_OUT_OF_RANGE), and keeps each
//! partition's follower high watermark = min(leader's, local log end).
//!
//! Lives on the shard owning the followed partitions; the link is whatever transport the
//! coordinator gives (a Kafka-protocol connection to the leader, or an in-process leader in
//! tests). Invariants: the next Fetch is planned only after the previous round's appends are
//! durable, so the fetch offset a follower reports (its log end) is durable; a local failure
//! delays only its partition, a link failure delays every partition of the round.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use super::fetcher::{Action, FetchPlan, Fetcher, LocalLog, PartitionReply, Reset};
use crate::io::FileSystem;
use crate::storage::{PartitionLog, StorageError};
use crate::types::{Epoch, Offset, TopicPartition};

/// A failure to talk to the leader (connection, codec, timeout).
#[derive(Debug, thiserror::Error)]
#[error("leader link: {0}")]
pub struct LinkError(pub String);

/// The transport to one leader broker.
// Shard-local futures are never sent across threads (thread-per-core): no `Send` bound.
#[allow(async_fn_in_trait)]
pub trait LeaderLink {
    /// Sends one Fetch; returns each partition's answer.
    async fn fetch(
        &self,
        plan: &FetchPlan,
    ) -> Result<Vec<(TopicPartition, PartitionReply)>, LinkError>;

    /// The leader's log start and log end of a partition (ListOffsets earliest/latest).
    async fn log_offsets(&self, tp: &TopicPartition) -> Result<(Offset, Offset), LinkError>;
}

/// A link shared by reference (tests, or several loops on one connection).
impl<T: LeaderLink> LeaderLink for &T {
    async fn fetch(
        &self,
        plan: &FetchPlan,
    ) -> Result<Vec<(TopicPartition, PartitionReply)>, LinkError> {
        (**self).fetch(plan).await
    }

    async fn log_offsets(&self, tp: &TopicPartition) -> Result<(Offset, Offset), LinkError> {
        (**self).log_offsets(tp).await
    }
}

/// One followed partition's log and its follower high watermark (shared with the
/// partition's owner, so a follower that becomes leader starts from it, as Kafka's).
pub struct FollowerLog<F: FileSystem> {
    pub log: Rc<PartitionLog<F>>,
    pub high_watermark: Rc<Cell<Offset>>,
}

impl<F: FileSystem> FollowerLog<F> {
    #[must_use]
    pub fn new(log: Rc<PartitionLog<F>>) -> Self {
        Self::shared(log, Rc::new(Cell::new(Offset(0))))
    }

    /// A follower log whose high watermark lives in `high_watermark`.
    #[must_use]
    pub fn shared(log: Rc<PartitionLog<F>>, high_watermark: Rc<Cell<Offset>>) -> Self {
        FollowerLog { log, high_watermark }
    }

    fn view(&self) -> LocalLog {
        LocalLog {
            log_start: self.log.log_start_offset(),
            log_end: self.log.log_end_offset(),
            latest_epoch: self.log.latest_epoch(),
            high_watermark: self.high_watermark.get(),
        }
    }

    fn set_high_watermark(&self, leader_high_watermark: Offset) {
        let hw = leader_high_watermark.min(self.log.log_end_offset());
        self.high_watermark.set(hw);
        self.log.forget_stable_txns(hw);
    }
}

/// What one round did (for metrics and tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoundStats {
    pub partitions: usize,
    pub appended_batches: usize,
    pub appended_bytes: usize,
    pub truncations: usize,
    /// Answers dropped because the partition or its log changed while they were in flight.
    pub dropped: usize,
}

/// One fetch round. `Ok(None)`: no partition was ready (the caller waits the backoff or for
/// a metadata change). Every answer is applied: for a fetcher whose assignment cannot
/// change under it (tests, tools). The broker's fetchers use [`fetch_round_assigned`].
pub async fn fetch_round<F: FileSystem, L: LeaderLink>(
    fetcher: &mut Fetcher,
    logs: &BTreeMap<TopicPartition, FollowerLog<F>>,
    link: &L,
    now_ms: i64,
) -> Result<Option<RoundStats>, LinkError> {
    fetch_round_assigned(fetcher, logs, link, now_ms, |_, _| true).await
}

/// [`fetch_round`] for a fetcher whose partitions can move while its Fetch is in flight.
/// An answer is applied only if, when it arrives, `assigned(tp, epoch)` still gives the
/// partition to this fetcher at the leader epoch the request named, and the local log still
/// ends at the offset the request fetched from (Kafka's `processFetchRequest` drops the
/// answer otherwise). A fetcher stopped or replaced mid-flight, a partition handed to a new
/// leader, or one this broker now leads, is never written from a stale leader's answer.
pub async fn fetch_round_assigned<F: FileSystem, L: LeaderLink>(
    fetcher: &mut Fetcher,
    logs: &BTreeMap<TopicPartition, FollowerLog<F>>,
    link: &L,
    now_ms: i64,
    assigned: impl Fn(&TopicPartition, Epoch) -> bool,
) -> Result<Option<RoundStats>, LinkError> {
    // A throttled partition over the follower rate sits this round out (`throttle`).
    let local = |tp: &TopicPartition| {
        if super::throttle::follower_skips(tp) {
            return None;
        }
        logs.get(tp).map(FollowerLog::view)
    };
    let Some(plan) = fetcher.build(now_ms, local) else {
        return Ok(None);
    };
    let replies = match link.fetch(&plan).await {
        Ok(replies) => replies,
        Err(err) => {
            for p in &plan.partitions {
                fetcher.delay(&p.tp, now_ms);
            }
            return Err(err);
        }
    };
    let sent: BTreeMap<&TopicPartition, (Offset, Epoch)> =
        plan.partitions.iter().map(|p| (&p.tp, (p.fetch_offset, p.current_leader_epoch))).collect();
    let mut stats = RoundStats { partitions: plan.partitions.len(), ..RoundStats::default() };
    for (tp, reply) in replies {
        let Some(follower) = logs.get(&tp) else { continue };
        let Some(&(fetch_offset, epoch)) = sent.get(&tp) else { continue };
        // Checked per partition right before its step: an earlier partition's step awaited,
        // and the assignment or the log may have changed meanwhile.
        if !assigned(&tp, epoch) {
            tracing::debug!(partition = %tp, "answer dropped: the partition left this fetcher or its epoch changed");
            stats.dropped += 1;
            continue;
        }
        let local = follower.view();
        if local.log_end != fetch_offset {
            tracing::debug!(partition = %tp, fetched = fetch_offset.0, log_end = local.log_end.0, "answer dropped: the log changed while the fetch was in flight");
            stats.dropped += 1;
            continue;
        }
        if reply.error_code != 0 {
            tracing::debug!(partition = %tp, code = reply.error_code, "leader refused a fetch");
        }
        let end_for = |e| follower.log.end_offset_for_epoch(e);
        let action = fetcher.on_reply(&tp, reply, &local, end_for, now_ms);
        if let Err(err) = apply(follower, action, &tp, link, &local, &mut stats, now_ms).await {
            tracing::warn!(partition = %tp, "follower fetch step failed: {err}");
            fetcher.delay(&tp, now_ms);
        }
    }
    Ok(Some(stats))
}

/// Why a partition's step failed.
#[derive(Debug, thiserror::Error)]
enum StepError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Link(#[from] LinkError),
}

async fn apply<F: FileSystem, L: LeaderLink>(
    follower: &FollowerLog<F>,
    action: Action,
    tp: &TopicPartition,
    link: &L,
    local: &LocalLog,
    stats: &mut RoundStats,
    now_ms: i64,
) -> Result<(), StepError> {
    match action {
        Action::Append { records, leader_high_watermark } => {
            let info = match follower.log.append_replicated(records.clone(), now_ms).await {
                // An empty log restarted at the leader's log start inside a batch: the batch
                // begins below it. Kafka restarts the log at the batch's base and appends.
                Err(StorageError::ReplicaOffsetMismatch { expected, got })
                    if local.log_start == local.log_end && got < expected =>
                {
                    follower.log.truncate_fully_and_start_at(got).await?;
                    follower.log.append_replicated(records, now_ms).await?
                }
                other => other?,
            };
            if let Some(last) = info.last_offset {
                // Durable before the next Fetch reports this log end to the leader.
                follower.log.wait_committed(last).await?;
            }
            stats.appended_batches += info.batches;
            stats.appended_bytes += info.bytes;
            crate::metrics::replication::bytes_in(info.bytes as u64);
            super::throttle::follower_appended(tp, info.bytes);
            follower.set_high_watermark(leader_high_watermark);
        }
        Action::Idle { leader_high_watermark } => {
            follower.set_high_watermark(leader_high_watermark)
        }
        Action::Truncate { offset } => {
            follower.log.truncate_to(offset).await?;
            stats.truncations += 1;
            follower.set_high_watermark(follower.high_watermark.get());
        }
        Action::NeedLeaderOffsets => {
            let (start, end) = link.log_offsets(tp).await?;
            match Fetcher::on_leader_offsets(start, end, local) {
                Reset::TruncateTo(offset) => {
                    follower.log.truncate_to(offset).await?;
                    stats.truncations += 1;
                }
                Reset::StartAt(offset) => {
                    follower.log.truncate_fully_and_start_at(offset).await?;
                    stats.truncations += 1;
                }
                Reset::Fetch => {}
            }
            follower.set_high_watermark(follower.high_watermark.get());
        }
        Action::Wait => {}
    }
    Ok(())
}
