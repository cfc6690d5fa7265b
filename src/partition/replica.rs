//! One replica of a partition on its owner shard, as Kafka keeps it in `Partition`: the log,
//! what this broker believes of the partition's leadership (leader or follower, at which
//! leader epoch), the follower high watermark, and the leader's view of its followers
//! ([`Replication`]: ISR, follower states, high watermark). The role transitions
//! ([`PartitionReplica::apply_role`], Kafka's `makeLeader`/`makeFollower`) and the leader's
//! produce path (append, then the acks=all decision) are here and nowhere else: the broker
//! (`partition::table`, `partition::ops`) and the deterministic simulator (`sim::replication`)
//! both run them, so the simulator checks the code that ships.
//!
//! Generic over the file system; lives on the partition's owner shard (`Cell`s, no locks).
//! Invariants: an acks=all batch is acknowledged only by the leader that appended it, still
//! leading at the epoch it appended in (a demoted leader's replica state describes a
//! follower, whose "committed" means only its own log); a leader stepping down keeps the
//! high watermark it reached as its follower high watermark.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::leader::Replication;
use super::ops::ProduceError;
use super::replica_fetch::replica_error;
use super::replicas::{AckState, ReplicaSettings};
use crate::io::FileSystem;
use crate::storage::{AppendInfo, PartitionLog, StorageError};
use crate::sync::Notify;
use crate::types::{Epoch, NodeId, Offset};

/// One partition's replica on this broker.
pub struct PartitionReplica<F: FileSystem> {
    /// Shared with this shard's follower fetcher while this broker follows the partition.
    pub log: Rc<PartitionLog<F>>,
    pub leader_epoch: Cell<Epoch>,
    /// Whether this broker leads the partition (the image's `leader`): only the leader
    /// takes produces and answers consumers; a follower's log is written by its fetcher.
    pub is_leader: Cell<bool>,
    /// The follower high watermark while this broker follows (min of the leader's and the
    /// local log end, kept by the fetcher): where the high watermark starts if it leads next.
    pub follower_hw: Rc<Cell<Offset>>,
    /// Notified whenever the high watermark may have moved (Fetch long-polls and acks=all
    /// waiters wait on it).
    pub hw_changed: Notify,
    /// Replicas, ISR and followers' progress while this broker leads (`partition::leader`).
    pub replication: Replication,
}

/// What the metadata says of one partition, as this broker applies it.
#[derive(Clone, Debug)]
pub struct Role {
    pub me: NodeId,
    pub leader: NodeId,
    pub leader_epoch: Epoch,
    pub replicas: Vec<NodeId>,
    pub isr: Vec<NodeId>,
    /// Replicas that may not join the ISR (fenced or unregistered brokers).
    pub ineligible: Vec<NodeId>,
    pub settings: ReplicaSettings,
}

/// A batch this leader appended: where it ends and the epoch it was appended in, which
/// [`PartitionReplica::ack_state`] checks the leadership against.
#[derive(Clone, Copy, Debug)]
pub struct Appended {
    pub info: AppendInfo,
    pub epoch: Epoch,
}

impl<F: FileSystem> PartitionReplica<F> {
    /// A replica just opened: a follower until the image says otherwise, starting its high
    /// watermark at `follower_hw` (the checkpoint's, capped at the log end).
    #[must_use]
    pub fn new(log: Rc<PartitionLog<F>>, epoch: Epoch, follower_hw: Rc<Cell<Offset>>) -> Self {
        PartitionReplica {
            log,
            leader_epoch: Cell::new(epoch),
            is_leader: Cell::new(false),
            follower_hw,
            hw_changed: Notify::new(),
            replication: Replication::single(NodeId(0), epoch),
        }
    }

    /// The high watermark: what consumers may read and acks=all waits for. The partition
    /// layer decides it, not storage: storage reports how far this replica's log is durable
    /// under the flush policy (`committed_offset`); with replication the leader takes the
    /// minimum of that over the ISR (`partition::leader`); for a single replica it is this
    /// log's own.
    #[must_use]
    pub fn high_watermark(&self) -> Offset {
        self.replication.high_watermark(&self.log, self.log.now_ms())
    }

    /// The last stable offset: the high watermark, or the first offset of the oldest open
    /// transaction if lower (read_committed consumers stop here).
    #[must_use]
    pub fn last_stable_offset(&self) -> Offset {
        let hw = self.high_watermark();
        self.log.first_unstable_offset(hw).map_or(hw, |first| first.min(hw))
    }

    /// Applies the metadata's view of the partition (Kafka's `makeLeader`/`makeFollower`):
    /// a leader stepping down keeps what it knew committed as its follower high watermark,
    /// so its checkpoint and a later leadership never start below it; the leader's replica
    /// state follows the replicas and ISR where this broker leads with followers, and is
    /// this broker alone otherwise. Returns whether this broker became leader or started a
    /// new leader epoch (the caller logs it and runs [`Self::start_leader_epoch`]).
    pub fn apply_role(&self, role: &Role) -> bool {
        let leads = role.leader == role.me;
        let was_leader = self.is_leader.get();
        if was_leader && !leads {
            let hw = self.high_watermark().min(self.log.log_end_offset());
            self.follower_hw.set(self.follower_hw.get().max(hw));
        }
        let new_leadership = leads && (!was_leader || self.leader_epoch.get() != role.leader_epoch);
        self.is_leader.set(leads);
        self.leader_epoch.set(role.leader_epoch);
        // Leader-side tracking only where this broker leads with followers; a single
        // replica and a follower track only themselves.
        let (replicas, isr) = if leads && role.replicas.len() > 1 {
            (role.replicas.clone(), role.isr.clone())
        } else {
            (vec![role.me], vec![role.me])
        };
        // A leader with followers starts from what it knew as a follower (the previous
        // leader's high watermark, capped at its own log end: Kafka's rule), at least the log
        // start, until a high-watermark checkpoint exists; never exposing records the ISR may
        // not hold. One replica starts from its own log.
        // A broker that led alone and now leads with followers (replicas added) keeps the
        // high watermark it served.
        let hw = if replicas.len() > 1 {
            let followed = self.follower_hw.get().min(self.log.log_end_offset());
            let served = if was_leader && !self.replication.has_followers() {
                self.log.committed_offset()
            } else {
                Offset(0)
            };
            self.log.log_start_offset().max(followed).max(served)
        } else {
            self.log.committed_offset()
        };
        let now_ms = self.log.now_ms();
        let epoch_start = self.log.log_end_offset();
        let (me, epoch, settings) = (role.me, role.leader_epoch, role.settings);
        self.replication.sync(me, epoch, epoch_start, &replicas, &isr, hw, settings, now_ms);
        let ineligible = role.ineligible.clone();
        self.replication.with(|st| st.ineligible = ineligible);
        new_leadership
    }

    /// A leader with followers records its epoch's start in the epoch cache at once (Kafka's
    /// `maybeAssignEpochStartOffset`), so followers of an older epoch learn where it ended. A
    /// single replica is left as before (its epoch is recorded by its first append).
    pub async fn start_leader_epoch(&self, epoch: Epoch) -> Result<(), StorageError> {
        if !self.replication.has_followers() || self.log.latest_epoch().is_some_and(|e| e >= epoch)
        {
            return Ok(());
        }
        self.log.assign_epoch_start(epoch).await
    }

    /// The leader's write of a produced batch at its current leader epoch: appended, the
    /// followers' long-polls woken at once (they read up to the log end), and, once the
    /// flush policy's durability is reached (a duplicate waits for its original, like
    /// Kafka's delayed produce), the high watermark's waiters woken.
    pub async fn append_as_leader(&self, batch: Bytes) -> Result<Appended, StorageError> {
        let epoch = self.leader_epoch.get();
        let info = self.log.append(batch, epoch, self.log.now_ms()).await?;
        self.replication.appended.notify_all();
        self.log.wait_committed(info.last_offset).await?;
        self.hw_changed.notify_all();
        Ok(Appended { info, epoch })
    }

    /// Whether this broker still leads at the epoch a batch was appended in. Demoted, or a
    /// new leader epoch, since: the ISR that was to hold the batch is not this one's any
    /// more and the new leader may not hold it, so the producer gets NOT_LEADER_OR_FOLLOWER
    /// and retries (Kafka appends as leader under its leader-ISR lock and answers a delayed
    /// produce of a demoted leader the same; acking it lost acknowledged records in rolling
    /// restarts).
    pub fn check_still_leader(&self, appended_epoch: Epoch) -> Result<(), ProduceError> {
        #[cfg(test)]
        if crate::planted::is(crate::planted::Bug::DemotedLeaderAck) {
            return Ok(());
        }
        if !self.is_leader.get() || self.leader_epoch.get() != appended_epoch {
            let why = "leadership changed while the batch was written".to_string();
            return Err((ResponseError::NotLeaderOrFollower, Some(why)).into());
        }
        Ok(())
    }

    /// Where a batch appended at `appended_epoch` and ending at `required_end` (exclusive)
    /// stands for acks=all: refused if the leadership moved since
    /// ([`Self::check_still_leader`]), else the ISR rule of [`Replication::ack_state`].
    pub fn ack_state(
        &self,
        appended_epoch: Epoch,
        required_end: Offset,
        now_ms: i64,
    ) -> Result<AckState, ProduceError> {
        self.check_still_leader(appended_epoch)?;
        self.replication.ack_state(&self.log, required_end, now_ms).map_err(replica_error)
    }

    /// acks=all after the leader's own write: waits until the high watermark passes
    /// `required_end`, the ISR shrinks below `min.insync.replicas`
    /// (NOT_ENOUGH_REPLICAS_AFTER_APPEND), the leadership moves (NOT_LEADER_OR_FOLLOWER), or
    /// `timeout_ms` passes (REQUEST_TIMED_OUT, as Kafka's expired delayed produce).
    pub async fn wait_acks(
        &self,
        appended_epoch: Epoch,
        required_end: Offset,
        timeout_ms: i32,
    ) -> Result<(), ProduceError> {
        let log = self.log.clone();
        self.wait_acks_at(appended_epoch, required_end, timeout_ms, move || log.now_ms()).await
    }

    /// [`Self::wait_acks`] with the wall clock the lag rule reads given (tests).
    pub async fn wait_acks_at(
        &self,
        appended_epoch: Epoch,
        required_end: Offset,
        timeout_ms: i32,
        now_ms: impl Fn() -> i64,
    ) -> Result<(), ProduceError> {
        let timeout = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let seen = self.hw_changed.version();
            match self.ack_state(appended_epoch, required_end, now_ms())? {
                AckState::Done => return Ok(()),
                AckState::Waiting => {}
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return Err((ResponseError::RequestTimedOut, None).into());
            }
            let changed = self.hw_changed.changed_since(seen);
            crate::shard::with_timeout(deadline - now, changed).await;
        }
    }
}
