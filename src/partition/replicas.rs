//! Leader-side replica state of one partition, pure: each follower's log end offset (its
//! fetch offset), last fetch and last caught-up times (Kafka's `Replica`), the high
//! watermark over the ISR, the ISR shrink/expand decision to send to the controller as
//! AlterPartition, and the `min.insync.replicas` checks of an acks=all produce.
//!
//! Lives on the partition's owner shard (inside its `OwnedPartition` once wired); time comes
//! in as `now_ms` arguments, so the simulator drives it. Invariants: the high watermark never
//! moves backwards and never passes the leader's own durable offset; at most one ISR change
//! is in flight (Kafka's pending ISR state) and, while one is, the high watermark counts the
//! larger of the current and proposed ISR (Kafka's "maximal ISR"); a single-replica
//! partition's high watermark is its own durable offset, exactly as before replication;
//! while the ISR is below the effective `min.insync.replicas` the high watermark does not
//! move (KIP-966).

use crate::constants::ISR_CHANGE_RETRY_MS;
use crate::types::{Epoch, NodeId, Offset};

/// What the leader needs from the topic and broker configs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaSettings {
    /// `replica.lag.time.max.ms`.
    pub lag_time_max_ms: i64,
    /// `min.insync.replicas` (topic, else broker).
    pub min_insync_replicas: i32,
}

impl Default for ReplicaSettings {
    fn default() -> Self {
        ReplicaSettings {
            lag_time_max_ms: crate::constants::REPLICA_LAG_TIME_MAX_MS_DEFAULT,
            min_insync_replicas: crate::constants::MIN_INSYNC_REPLICAS_DEFAULT,
        }
    }
}

/// Typed errors of the leader-side replica logic; Kafka codes at the protocol boundary.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplicaError {
    /// A replica fetch from a broker outside the replica set. Kafka 4.1's
    /// `Partition.followerReplicaOrThrow`: UNKNOWN_LEADER_EPOCH (75) when the request named a
    /// current leader epoch (the follower retries: it may be a replica being added), else
    /// NOT_LEADER_OR_FOLLOWER (6).
    #[error("broker {replica} is not a replica of this partition")]
    NotReplica { replica: NodeId, epoch_given: bool },
    /// A fetch from an older broker epoch of this follower (KIP-903): NOT_LEADER_OR_FOLLOWER.
    #[error("stale fetch from broker {replica}: broker epoch {got} < {stored}")]
    StaleBrokerEpoch { replica: NodeId, got: i64, stored: i64 },
    /// NOT_ENOUGH_REPLICAS (19): acks=all refused before appending.
    #[error("the ISR has {isr} replicas, below min.insync.replicas {min}")]
    NotEnoughReplicas { isr: usize, min: i32 },
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND (20): the ISR shrank while acks=all waited.
    #[error("appended, but the ISR shrank to {isr} replicas, below min.insync.replicas {min}")]
    NotEnoughReplicasAfterAppend { isr: usize, min: i32 },
}

impl ReplicaError {
    /// The Kafka error code at the protocol boundary.
    #[must_use]
    pub fn kafka_code(&self) -> i16 {
        match self {
            ReplicaError::NotReplica { epoch_given: true, .. } => 75,
            ReplicaError::NotReplica { epoch_given: false, .. }
            | ReplicaError::StaleBrokerEpoch { .. } => 6,
            ReplicaError::NotEnoughReplicas { .. } => 19,
            ReplicaError::NotEnoughReplicasAfterAppend { .. } => 20,
        }
    }
}

/// One follower as the leader sees it (Kafka's `ReplicaState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowerState {
    pub id: NodeId,
    /// The follower's log end: its last fetch offset (durable on the follower, which reports
    /// only what its flush policy made durable). -1 until its first fetch as our follower.
    pub log_end: Offset,
    /// -1 until the first fetch.
    pub broker_epoch: i64,
    pub last_fetch_ms: i64,
    pub last_caught_up_ms: i64,
    /// The leader's log end at the follower's previous fetch (Kafka's
    /// `lastFetchLeaderLogEndOffset`).
    pub prev_fetch_leader_end: Offset,
}

impl FollowerState {
    fn new(id: NodeId, now_ms: i64, in_isr: bool) -> Self {
        // Kafka's `resetReplicaState` for a new leader: an ISR member gets a full lag window
        // to fetch; any other replica must first catch up.
        FollowerState {
            id,
            log_end: Offset(-1),
            broker_epoch: -1,
            last_fetch_ms: 0,
            last_caught_up_ms: if in_isr { now_ms } else { 0 },
            prev_fetch_leader_end: Offset(-1),
        }
    }

    /// Kafka's `isCaughtUp`.
    #[must_use]
    pub fn is_caught_up(&self, leader_end: Offset, now_ms: i64, lag_time_max_ms: i64) -> bool {
        self.log_end == leader_end || now_ms - self.last_caught_up_ms <= lag_time_max_ms
    }
}

/// An ISR change for the controller (AlterPartition), decided by the leader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IsrChange {
    /// Followers that have not caught up for `replica.lag.time.max.ms`.
    Shrink { remove: Vec<NodeId>, new_isr: Vec<NodeId> },
    /// A follower that reached the high watermark (and the current epoch's start).
    Expand { add: NodeId, new_isr: Vec<NodeId> },
}

impl IsrChange {
    #[must_use]
    pub fn new_isr(&self) -> &[NodeId] {
        match self {
            IsrChange::Shrink { new_isr, .. } | IsrChange::Expand { new_isr, .. } => new_isr,
        }
    }
}

/// Where an acks=all produce stands (Kafka's `checkEnoughReplicasReachOffset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckState {
    /// The high watermark has not passed the batch yet.
    Waiting,
    Done,
}

/// Leader-side state of one partition's replicas.
#[derive(Clone, Debug)]
pub struct LeaderReplicas {
    pub me: NodeId,
    pub leader_epoch: Epoch,
    /// First offset of the leader's current epoch: a follower must have reached it to join.
    pub epoch_start: Offset,
    pub replicas: Vec<NodeId>,
    pub isr: Vec<NodeId>,
    /// An AlterPartition in flight: its proposed ISR.
    pub pending: Option<IsrChange>,
    followers: Vec<FollowerState>,
    high_watermark: Offset,
    pub settings: ReplicaSettings,
    /// Replicas the controller would refuse in the ISR (fenced or unregistered: Kafka's
    /// `isReplicaIsrEligible`): a caught-up one does not hold the high watermark back as
    /// "about to join", so a dead follower fenced out of the ISR stops delaying acks=all.
    pub ineligible: Vec<NodeId>,
    /// After a refused or failed AlterPartition: no new change before this time unless the
    /// ISR in force changes first (Kafka waits for the next metadata on
    /// INVALID_UPDATE_VERSION instead of resending from the same stale ISR).
    retry_at_ms: i64,
}

impl LeaderReplicas {
    /// State on becoming leader (or on a new leader epoch). `high_watermark` is the
    /// partition's last known one (its own durable offset for a single replica).
    #[allow(clippy::too_many_arguments)]
    #[must_use]
    pub fn new(
        me: NodeId,
        leader_epoch: Epoch,
        epoch_start: Offset,
        replicas: &[NodeId],
        isr: &[NodeId],
        high_watermark: Offset,
        settings: ReplicaSettings,
        now_ms: i64,
    ) -> Self {
        let followers = replicas
            .iter()
            .filter(|r| **r != me)
            .map(|r| FollowerState::new(*r, now_ms, isr.contains(r)))
            .collect();
        LeaderReplicas {
            me,
            leader_epoch,
            epoch_start,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            pending: None,
            followers,
            high_watermark,
            settings,
            ineligible: Vec::new(),
            retry_at_ms: 0,
        }
    }

    #[must_use]
    pub fn high_watermark(&self) -> Offset {
        self.high_watermark
    }

    #[must_use]
    pub fn follower(&self, id: NodeId) -> Option<&FollowerState> {
        self.followers.iter().find(|f| f.id == id)
    }

    #[must_use]
    pub fn followers(&self) -> &[FollowerState] {
        &self.followers
    }

    /// The ISR the high watermark and min.insync.replicas count: the current one plus any
    /// replica a pending expansion adds (Kafka's `maximalIsr`).
    #[must_use]
    pub fn maximal_isr(&self) -> Vec<NodeId> {
        let mut isr = self.isr.clone();
        if let Some(IsrChange::Expand { add, .. }) = &self.pending {
            if !isr.contains(add) {
                isr.push(*add);
            }
        }
        isr
    }

    /// A fetch from follower `id` at `fetch_offset` (Kafka's `updateFollowerFetchState`):
    /// records its position and times, then recomputes the high watermark from the leader's
    /// own `leader_durable` offset. Returns whether the high watermark moved.
    #[allow(clippy::too_many_arguments)]
    pub fn on_follower_fetch(
        &mut self,
        id: NodeId,
        broker_epoch: i64,
        fetch_offset: Offset,
        leader_end: Offset,
        leader_durable: Offset,
        epoch_given: bool,
        now_ms: i64,
    ) -> Result<bool, ReplicaError> {
        let f = self
            .followers
            .iter_mut()
            .find(|f| f.id == id)
            .ok_or(ReplicaError::NotReplica { replica: id, epoch_given })?;
        if broker_epoch != -1 && f.broker_epoch > broker_epoch {
            return Err(ReplicaError::StaleBrokerEpoch {
                replica: id,
                got: broker_epoch,
                stored: f.broker_epoch,
            });
        }
        if fetch_offset >= leader_end {
            f.last_caught_up_ms = f.last_caught_up_ms.max(now_ms);
        } else if fetch_offset >= f.prev_fetch_leader_end && f.prev_fetch_leader_end.0 >= 0 {
            f.last_caught_up_ms = f.last_caught_up_ms.max(f.last_fetch_ms);
        }
        f.log_end = fetch_offset;
        f.broker_epoch = broker_epoch;
        f.prev_fetch_leader_end = leader_end;
        f.last_fetch_ms = now_ms;
        Ok(self.update_high_watermark(leader_end, leader_durable, now_ms))
    }

    /// Recomputes the high watermark (also after the leader's own log became more durable):
    /// the minimum of the leader's durable offset and the log ends of the maximal ISR, plus
    /// those of caught-up replicas about to join it (Kafka's `maybeIncrementLeaderHW`, so
    /// a joining replica is never below the high watermark it joins at). Never backwards.
    /// KIP-966: nothing moves while the ISR is below the effective `min.insync.replicas`
    /// ([`LeaderReplicas::is_under_min_isr`]), so a replica that left the ISR meanwhile
    /// (the controller's ELR) still holds everything committed and may lead cleanly.
    pub fn update_high_watermark(
        &mut self,
        leader_end: Offset,
        leader_durable: Offset,
        now_ms: i64,
    ) -> bool {
        if self.is_under_min_isr() {
            return false;
        }
        let isr = self.maximal_isr();
        let lag = self.settings.lag_time_max_ms;
        let mut hw = leader_durable;
        for f in &self.followers {
            let joining = f.log_end.0 >= 0
                && f.is_caught_up(leader_end, now_ms, lag)
                && !self.ineligible.contains(&f.id);
            let counts = isr.contains(&f.id) || joining;
            if counts && f.log_end < hw {
                hw = f.log_end;
            }
        }
        if hw > self.high_watermark {
            self.high_watermark = hw;
            return true;
        }
        false
    }

    /// The ISR change to propose now, if any and if none is in flight: first a shrink of
    /// every ISR follower not caught up for `replica.lag.time.max.ms`, else an expansion by
    /// one follower that reached the high watermark and the current epoch's start (Kafka's
    /// `getOutOfSyncReplicas` / `isFollowerInSync`). `eligible` filters brokers the
    /// controller would refuse (fenced, shutting down: KIP-841).
    pub fn isr_change(
        &self,
        leader_end: Offset,
        now_ms: i64,
        eligible: impl Fn(NodeId) -> bool,
    ) -> Option<IsrChange> {
        if self.pending.is_some() || now_ms < self.retry_at_ms {
            return None;
        }
        let lag = self.settings.lag_time_max_ms;
        let out: Vec<NodeId> = self
            .followers
            .iter()
            .filter(|f| self.isr.contains(&f.id) && !f.is_caught_up(leader_end, now_ms, lag))
            .map(|f| f.id)
            .collect();
        if !out.is_empty() {
            let new_isr = self.isr.iter().copied().filter(|r| !out.contains(r)).collect();
            return Some(IsrChange::Shrink { remove: out, new_isr });
        }
        let joiner = self.followers.iter().find(|f| {
            !self.isr.contains(&f.id)
                && f.log_end >= self.high_watermark
                && f.log_end >= self.epoch_start
                && eligible(f.id)
        })?;
        let mut new_isr = self.isr.clone();
        new_isr.push(joiner.id);
        Some(IsrChange::Expand { add: joiner.id, new_isr })
    }

    /// Kafka's `effectiveMinIsr`: `min.insync.replicas`, capped by the replica count (a
    /// topic with fewer replicas than its minimum still advances).
    #[must_use]
    pub fn effective_min_isr(&self) -> usize {
        let min = usize::try_from(self.settings.min_insync_replicas).unwrap_or(1);
        min.min(self.replicas.len()).max(1)
    }

    /// Kafka's `isUnderMinIsr` (the committed ISR, not the maximal one): the high watermark
    /// is frozen while this holds.
    #[must_use]
    pub fn is_under_min_isr(&self) -> bool {
        self.isr.len() < self.effective_min_isr()
    }

    /// Notes that `change` was sent to the controller.
    pub fn mark_pending(&mut self, change: IsrChange) {
        self.pending = Some(change);
    }

    /// The controller refused the pending change or could not be reached: it is dropped,
    /// and the next one waits [`ISR_CHANGE_RETRY_MS`] or until an ISR change is applied
    /// ([`LeaderReplicas::apply_isr`]), whichever comes first, so a leader whose ISR is
    /// stale does not resend the same refused request every check (issue 43's storm).
    pub fn refused(&mut self, now_ms: i64) {
        self.pending = None;
        self.retry_at_ms = now_ms.saturating_add(ISR_CHANGE_RETRY_MS);
    }

    /// The controller's answer arrived (or a new image): the ISR in force.
    pub fn apply_isr(&mut self, isr: &[NodeId]) {
        // A replica taken out of the ISR (fenced or shutting down, or a shrink) must catch
        // up again before it counts as about to rejoin: otherwise a dead broker's stale log
        // end holds the high watermark, so every acks=all produce, for up to
        // `replica.lag.time.max.ms` after its last fetch (Kafka's `maybeIncrementLeaderHW`
        // skips replicas that are not ISR-eligible; the same rule as a new leader's
        // `FollowerState::new`).
        for f in &mut self.followers {
            if self.isr.contains(&f.id) && !isr.contains(&f.id) {
                f.last_caught_up_ms = 0;
            }
        }
        if self.isr != isr {
            self.retry_at_ms = 0;
        }
        self.isr = isr.to_vec();
        self.pending = None;
    }

    /// acks=all before appending (Kafka: `Partition.appendRecordsToLeader`).
    pub fn check_produce(&self) -> Result<(), ReplicaError> {
        let isr = self.isr.len();
        let min = self.settings.min_insync_replicas;
        if (isr as i64) < i64::from(min) {
            return Err(ReplicaError::NotEnoughReplicas { isr, min });
        }
        Ok(())
    }

    /// acks=all while waiting for offsets below `required_end` (the batch's last + 1).
    pub fn ack_state(&self, required_end: Offset) -> Result<AckState, ReplicaError> {
        if self.high_watermark < required_end {
            return Ok(AckState::Waiting);
        }
        let isr = self.maximal_isr().len();
        let min = self.settings.min_insync_replicas;
        if (isr as i64) < i64::from(min) {
            return Err(ReplicaError::NotEnoughReplicasAfterAppend { isr, min });
        }
        Ok(AckState::Done)
    }
}

#[cfg(test)]
#[path = "replicas_tests.rs"]
mod tests;
