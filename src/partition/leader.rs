//! The replication side of one `OwnedPartition`: its [`LeaderReplicas`] kept in step with the
//! metadata image (`replicas`, `isr`, `leader_epoch` of the `PartitionImage`), the high
//! watermark consumers and acks=all see, and the `appended` signal a follower's long-poll
//! waits on (so a follower hears of an append at once, not after
//! `replica.fetch.wait.max.ms`).
//!
//! Lives on the partition's owner shard; `RefCell`s never borrowed across `.await`.
//! Invariants: a partition whose replica set is this broker alone has exactly today's
//! behaviour (high watermark = the log's durable offset under its flush policy, no
//! `min.insync.replicas` check); a new leader epoch resets every follower's state, as
//! Kafka's `makeLeader`; the high watermark never moves backwards within a leader epoch.

use std::cell::RefCell;

use super::replicas::{AckState, LeaderReplicas, ReplicaError, ReplicaSettings};
use crate::io::FileSystem;
use crate::storage::PartitionLog;
use crate::sync::Notify;
use crate::types::{Epoch, NodeId, Offset};

/// Replication state of one partition on its owner shard.
pub struct Replication {
    state: RefCell<LeaderReplicas>,
    /// Notified after every append (follower long-polls wait on it).
    pub appended: Notify,
}

impl Replication {
    /// A partition whose only replica is `me` (today's single node).
    #[must_use]
    pub fn single(me: NodeId, epoch: Epoch) -> Self {
        Self::new(LeaderReplicas::new(
            me,
            epoch,
            Offset(0),
            &[me],
            &[me],
            Offset(0),
            ReplicaSettings::default(),
            0,
        ))
    }

    #[must_use]
    pub fn new(state: LeaderReplicas) -> Self {
        Replication { state: RefCell::new(state), appended: Notify::new() }
    }

    /// Whether any other broker holds a replica: the only case where anything differs from
    /// a single node.
    #[must_use]
    pub fn has_followers(&self) -> bool {
        !self.state.borrow().followers().is_empty()
    }

    /// Applies the image's view of the partition. A new leader epoch (or a different replica
    /// set) resets follower state as a new leader does; the same epoch only updates the ISR
    /// (an AlterPartition outcome). `epoch_start` is where this leader's epoch begins in its
    /// log (the log end when it became leader).
    #[allow(clippy::too_many_arguments)]
    pub fn sync(
        &self,
        me: NodeId,
        epoch: Epoch,
        epoch_start: Offset,
        replicas: &[NodeId],
        isr: &[NodeId],
        high_watermark: Offset,
        settings: ReplicaSettings,
        now_ms: i64,
    ) {
        let mut st = self.state.borrow_mut();
        st.settings = settings;
        if st.leader_epoch == epoch && st.replicas == replicas && st.me == me {
            if st.isr != isr {
                let shrink = st.isr.iter().any(|r| !isr.contains(r));
                crate::metrics::replication::isr_changed(shrink);
                st.apply_isr(isr);
            }
            return;
        }
        // Within one leadership the high watermark never moves back, so a leader with
        // followers keeps its own. A follower's state (this broker alone) holds no high
        // watermark worth keeping: it was its log end when it stepped down, records the ISR
        // may never have held and a truncation may since have removed. Carried into the next
        // leadership it acknowledged acks=all batches no follower had (issue 33, found by the
        // simulator once it ran this transition).
        let was_leading = st.me == me && st.replicas.len() > 1;
        #[cfg(test)]
        let was_leading = was_leading || crate::planted::is(crate::planted::Bug::FollowerHwCarried);
        let hw = if was_leading { st.high_watermark().max(high_watermark) } else { high_watermark };
        *st = LeaderReplicas::new(me, epoch, epoch_start, replicas, isr, hw, settings, now_ms);
    }

    /// The high watermark: the log's durable offset for a single replica (as before
    /// replication); otherwise the ISR rule of [`LeaderReplicas::update_high_watermark`].
    pub fn high_watermark<F: FileSystem>(&self, log: &PartitionLog<F>, now_ms: i64) -> Offset {
        if !self.has_followers() {
            return log.committed_offset();
        }
        let mut st = self.state.borrow_mut();
        st.update_high_watermark(log.log_end_offset(), log.durable_offset(), now_ms);
        st.high_watermark()
    }

    /// Runs `f` on the state (the replica fetch path and tests).
    pub fn with<T>(&self, f: impl FnOnce(&mut LeaderReplicas) -> T) -> T {
        f(&mut self.state.borrow_mut())
    }

    /// acks=all before appending; nothing to check for a single replica (as before).
    pub fn check_produce(&self) -> Result<(), ReplicaError> {
        if !self.has_followers() {
            return Ok(());
        }
        self.state.borrow().check_produce()
    }

    /// acks=all after appending: where a batch ending at `required_end` (exclusive) stands.
    pub fn ack_state<F: FileSystem>(
        &self,
        log: &PartitionLog<F>,
        required_end: Offset,
        now_ms: i64,
    ) -> Result<AckState, ReplicaError> {
        let hw = self.high_watermark(log, now_ms);
        if !self.has_followers() {
            return Ok(if hw >= required_end { AckState::Done } else { AckState::Waiting });
        }
        self.state.borrow().ack_state(required_end)
    }
}
