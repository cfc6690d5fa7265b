//! The follower's fetcher for one (local shard, leader broker), sans-IO: which partitions
//! it follows and in which state, the Fetch it sends next (replica id and broker epoch,
//! KIP-903; each partition's log end as fetch offset and its latest epoch as
//! `last_fetched_epoch`, so the leader answers `diverging_epoch`, Fetch v12+), and what to do
//! with each partition's answer ([`Action`]). The driver (`replication::driver`) does the
//! I/O: sends the plan, runs the actions on the partition logs, makes appended data durable
//! before the next plan reports it.
//!
//! Lives on the shard that owns the followed partitions (one fetcher per leader broker
//! there); plain data, no I/O, time passed in as `now_ms`. Invariants: at most
//! [`FETCHER_PARTITIONS_MAX`] partitions; a partition is fetched only in state `Fetching`
//! (a leadership error parks it until the metadata version changes, any other error delays
//! it by the backoff); the fetch offset is always the local log end, never beyond it.
//!
//! Two states are said out loud, once each until they end, because each leaves the
//! partition one replica short without any error: a partition that truncates to the same
//! offset twice in a row (its log does not converge with the leader's), and one that keeps
//! fetching while out of the ISR for more than three times `replica.lag.time.max.ms`.

use std::collections::BTreeMap;

use bytes::Bytes;
use uuid::Uuid;

use super::truncation::{leader_answer, truncation_point};
use crate::constants::{
    FETCHER_PARTITIONS_MAX, REPLICA_FETCH_BACKOFF_MS_DEFAULT, REPLICA_FETCH_MAX_BYTES_DEFAULT,
    REPLICA_FETCH_MIN_BYTES_DEFAULT, REPLICA_FETCH_RESPONSE_MAX_BYTES_DEFAULT,
    REPLICA_FETCH_WAIT_MAX_MS_DEFAULT, REPLICA_LAG_TIME_MAX_MS_DEFAULT,
};

/// A follower fetching while out of the ISR for this many `replica.lag.time.max.ms` is
/// reported (once) as stuck.
const OUT_OF_ISR_WARN_LAG_TIMES: i64 = 3;
use crate::types::{Epoch, NodeId, Offset, TopicPartition};

/// Kafka error codes the fetcher tells apart (it receives them from the wire).
pub mod codes {
    pub const NONE: i16 = 0;
    pub const OFFSET_OUT_OF_RANGE: i16 = 1;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    pub const FENCED_LEADER_EPOCH: i16 = 74;
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
}

/// Settings of one fetcher (Kafka's `replica.fetch.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetcherConfig {
    pub replica: NodeId,
    pub broker_epoch: i64,
    /// `replica.fetch.wait.max.ms`.
    pub max_wait_ms: i32,
    /// `replica.fetch.min.bytes`.
    pub min_bytes: i32,
    /// `replica.fetch.response.max.bytes`.
    pub max_bytes: i32,
    /// `replica.fetch.max.bytes` (per partition).
    pub partition_max_bytes: i32,
    /// `replica.fetch.backoff.ms`.
    pub backoff_ms: i64,
    /// `replica.lag.time.max.ms` (only to judge when a follower out of the ISR is stuck).
    pub lag_time_max_ms: i64,
}

impl FetcherConfig {
    #[must_use]
    pub fn new(replica: NodeId, broker_epoch: i64) -> Self {
        FetcherConfig {
            replica,
            broker_epoch,
            max_wait_ms: REPLICA_FETCH_WAIT_MAX_MS_DEFAULT,
            min_bytes: REPLICA_FETCH_MIN_BYTES_DEFAULT,
            max_bytes: REPLICA_FETCH_RESPONSE_MAX_BYTES_DEFAULT,
            partition_max_bytes: REPLICA_FETCH_MAX_BYTES_DEFAULT,
            backoff_ms: REPLICA_FETCH_BACKOFF_MS_DEFAULT,
            lag_time_max_ms: REPLICA_LAG_TIME_MAX_MS_DEFAULT,
        }
    }
}

/// Where one followed partition stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionState {
    Fetching,
    /// FENCED_LEADER_EPOCH (the leader is past the epoch we named): wait
    /// for a metadata image newer than this version.
    AwaitingMetadata {
        seen_version: u64,
    },
    /// Any other error: retry at this time.
    Delayed {
        until_ms: i64,
    },
}

/// One followed partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Followed {
    pub topic_id: Uuid,
    /// The leader epoch the image names (sent as `current_leader_epoch`).
    pub leader_epoch: Epoch,
    pub state: PartitionState,
    pub health: Health,
}

/// What the fetcher watches to say when a partition is stuck (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Health {
    /// Whether the image lists this broker in the partition's ISR (assumed until told, so
    /// nothing is reported for a partition the coordinator says nothing about).
    pub in_isr: bool,
    /// When the fetcher first fetched the partition while it was out of the ISR.
    pub out_of_isr_since_ms: Option<i64>,
    /// The offset of the last truncation, until an append.
    pub last_truncation: Option<Offset>,
    pub warned_truncation_loop: bool,
    pub warned_out_of_isr: bool,
    /// Truncations to the same offset as the one before.
    pub repeated_truncations: u64,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            in_isr: true,
            out_of_isr_since_ms: None,
            last_truncation: None,
            warned_truncation_loop: false,
            warned_out_of_isr: false,
            repeated_truncations: 0,
        }
    }
}

/// The follower's log as the fetcher needs to see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalLog {
    pub log_start: Offset,
    pub log_end: Offset,
    pub latest_epoch: Option<Epoch>,
    pub high_watermark: Offset,
}

/// One partition of the next Fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionFetch {
    pub tp: TopicPartition,
    pub topic_id: Uuid,
    pub fetch_offset: Offset,
    pub last_fetched_epoch: Epoch,
    pub current_leader_epoch: Epoch,
    pub log_start_offset: Offset,
}

/// The next Fetch to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchPlan {
    pub replica: NodeId,
    pub broker_epoch: i64,
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub partition_max_bytes: i32,
    pub partitions: Vec<PartitionFetch>,
}

/// One partition of the leader's answer (wire values).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionReply {
    pub error_code: i16,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// (epoch, end offset) when the leader reports a divergence.
    pub diverging_epoch: Option<(i32, i64)>,
    pub records: Bytes,
}

/// What the driver does for one partition after an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Append the batches as they are, make them durable, then set the local high watermark
    /// to min(leader's, new log end).
    Append { records: Bytes, leader_high_watermark: Offset },
    /// No data: only the high watermark may move.
    Idle { leader_high_watermark: Offset },
    /// The logs diverge: truncate here, then fetch again.
    Truncate { offset: Offset },
    /// OFFSET_OUT_OF_RANGE: ask the leader for its log start and end
    /// ([`Fetcher::on_leader_offsets`]).
    NeedLeaderOffsets,
    /// Parked or delayed; nothing to do now.
    Wait,
}

/// What to do once the leader's log start and end are known (Kafka's
/// `fetchOffsetAndTruncate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reset {
    /// The leader's log ends below ours: truncate to its end.
    TruncateTo(Offset),
    /// The leader's log starts past our end: empty the log and start there.
    StartAt(Offset),
    /// Our end is inside the leader's log again: just fetch.
    Fetch,
}

/// Fetcher errors (API misuse, not I/O).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FetcherError {
    #[error("a fetcher follows at most {max} partitions")]
    TooManyPartitions { max: usize },
}

/// The follower side of one (local shard, leader broker).
#[derive(Clone, Debug)]
pub struct Fetcher {
    pub config: FetcherConfig,
    pub leader: NodeId,
    partitions: BTreeMap<TopicPartition, Followed>,
    metadata_version: u64,
}

impl Fetcher {
    #[must_use]
    pub fn new(config: FetcherConfig, leader: NodeId) -> Self {
        Fetcher { config, leader, partitions: BTreeMap::new(), metadata_version: 0 }
    }

    /// Starts following `tp` (or updates its leader epoch). A partition that becomes a
    /// follower needs no separate truncation step: its first Fetch carries its latest epoch
    /// and the leader answers with the divergence if there is one (Fetch v12+).
    pub fn add_partition(
        &mut self,
        tp: TopicPartition,
        topic_id: Uuid,
        leader_epoch: Epoch,
    ) -> Result<(), FetcherError> {
        if !self.partitions.contains_key(&tp) && self.partitions.len() >= FETCHER_PARTITIONS_MAX {
            return Err(FetcherError::TooManyPartitions { max: FETCHER_PARTITIONS_MAX });
        }
        let state = PartitionState::Fetching;
        let health = self.partitions.get(&tp).map(|p| p.health).unwrap_or_default();
        self.partitions.insert(tp, Followed { topic_id, leader_epoch, state, health });
        Ok(())
    }

    /// Whether the image lists this broker in `tp`'s ISR (for the out-of-ISR warning).
    pub fn set_in_isr(&mut self, tp: &TopicPartition, in_isr: bool) {
        if let Some(p) = self.partitions.get_mut(tp) {
            if in_isr {
                p.health.out_of_isr_since_ms = None;
                p.health.warned_out_of_isr = false;
            }
            p.health.in_isr = in_isr;
        }
    }

    /// Stops following `tp`; true if it was followed.
    pub fn remove_partition(&mut self, tp: &TopicPartition) -> bool {
        self.partitions.remove(tp).is_some()
    }

    #[must_use]
    pub fn partition(&self, tp: &TopicPartition) -> Option<&Followed> {
        self.partitions.get(tp)
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty()
    }

    pub fn partitions(&self) -> impl Iterator<Item = (&TopicPartition, &Followed)> {
        self.partitions.iter()
    }

    /// A new metadata image arrived: parked partitions fetch again.
    pub fn metadata_changed(&mut self, version: u64) {
        self.metadata_version = self.metadata_version.max(version);
        for p in self.partitions.values_mut() {
            if let PartitionState::AwaitingMetadata { seen_version } = p.state {
                if version > seen_version {
                    p.state = PartitionState::Fetching;
                }
            }
        }
    }

    /// The next Fetch: every partition ready at `now_ms` whose log `local` can describe.
    /// `None` when none is ready (the driver waits the backoff or for metadata).
    pub fn build(
        &mut self,
        now_ms: i64,
        local: impl Fn(&TopicPartition) -> Option<LocalLog>,
    ) -> Option<FetchPlan> {
        let mut partitions = Vec::new();
        for (tp, p) in &mut self.partitions {
            if let PartitionState::Delayed { until_ms } = p.state {
                if now_ms < until_ms {
                    continue;
                }
                p.state = PartitionState::Fetching;
            }
            if p.state != PartitionState::Fetching {
                continue;
            }
            let Some(log) = local(tp) else { continue };
            watch_out_of_isr(tp, p, &log, now_ms, self.config.lag_time_max_ms);
            partitions.push(PartitionFetch {
                tp: tp.clone(),
                topic_id: p.topic_id,
                fetch_offset: log.log_end,
                last_fetched_epoch: log.latest_epoch.unwrap_or(Epoch(-1)),
                current_leader_epoch: p.leader_epoch,
                log_start_offset: log.log_start,
            });
        }
        (!partitions.is_empty()).then_some(FetchPlan {
            replica: self.config.replica,
            broker_epoch: self.config.broker_epoch,
            max_wait_ms: self.config.max_wait_ms,
            min_bytes: self.config.min_bytes,
            max_bytes: self.config.max_bytes,
            partition_max_bytes: self.config.partition_max_bytes,
            partitions,
        })
    }

    /// Judges one partition's answer against the local log (Kafka's
    /// `processFetchRequest` per partition). `local_end_for` is the local log's
    /// `end_offset_for_epoch`.
    pub fn on_reply(
        &mut self,
        tp: &TopicPartition,
        reply: PartitionReply,
        local: &LocalLog,
        local_end_for: impl Fn(Epoch) -> Option<(Epoch, Offset)>,
        now_ms: i64,
    ) -> Action {
        let version = self.metadata_version;
        let backoff_ms = self.config.backoff_ms;
        let Some(p) = self.partitions.get_mut(tp) else { return Action::Wait };
        if p.state != PartitionState::Fetching {
            return Action::Wait;
        }
        match reply.error_code {
            codes::NONE => {}
            codes::OFFSET_OUT_OF_RANGE => return Action::NeedLeaderOffsets,
            // Kafka's `onPartitionFenced`: only a newer image can name the right epoch. The
            // other leadership errors (NOT_LEADER_OR_FOLLOWER, unknown topic or partition)
            // are retried after the backoff, as Kafka's fetcher does: the leader may simply
            // not have applied the image that made it leader yet.
            codes::FENCED_LEADER_EPOCH => {
                p.state = PartitionState::AwaitingMetadata { seen_version: version };
                return Action::Wait;
            }
            _ => {
                p.state = PartitionState::Delayed { until_ms: now_ms + backoff_ms };
                return Action::Wait;
            }
        }
        let leader_high_watermark = Offset(reply.high_watermark);
        if let Some((epoch, end)) = reply.diverging_epoch {
            // An incomplete answer needs no extra state: the next Fetch carries the new
            // latest epoch and the leader answers again.
            let t = truncation_point(
                leader_answer(epoch, end),
                local_end_for,
                local.log_end,
                local.high_watermark,
            );
            watch_truncation(tp, p, local, (epoch, end), t.offset);
            return Action::Truncate { offset: t.offset };
        }
        if reply.records.is_empty() {
            return Action::Idle { leader_high_watermark };
        }
        p.health.last_truncation = None;
        p.health.warned_truncation_loop = false;
        Action::Append { records: reply.records, leader_high_watermark }
    }

    /// The leader's log start and end after OFFSET_OUT_OF_RANGE (Kafka's
    /// `fetchOffsetAndTruncate`, without unclean election: a leader whose log ends below
    /// ours means ours holds records it never committed).
    #[must_use]
    pub fn on_leader_offsets(leader_start: Offset, leader_end: Offset, local: &LocalLog) -> Reset {
        if leader_end < local.log_end {
            return Reset::TruncateTo(leader_end);
        }
        if leader_start > local.log_end {
            return Reset::StartAt(leader_start);
        }
        Reset::Fetch
    }

    /// Delays a partition after a local failure (an append or truncation that failed).
    pub fn delay(&mut self, tp: &TopicPartition, now_ms: i64) {
        if let Some(p) = self.partitions.get_mut(tp) {
            p.state = PartitionState::Delayed { until_ms: now_ms + self.config.backoff_ms };
        }
    }
}

/// One WARN when a partition truncates to the offset of its previous truncation: the
/// truncation did not remove what made the logs diverge, so every fetch diverges again.
fn watch_truncation(
    tp: &TopicPartition,
    p: &mut Followed,
    local: &LocalLog,
    (leader_epoch, leader_end): (i32, i64),
    offset: Offset,
) {
    let h = &mut p.health;
    if h.last_truncation == Some(offset) {
        h.repeated_truncations += 1;
        if !h.warned_truncation_loop {
            h.warned_truncation_loop = true;
            tracing::warn!(
                partition = %tp,
                follower_epoch = local.latest_epoch.map_or(-1, |e| e.0),
                leader_epoch = p.leader_epoch.0,
                diverging_epoch = leader_epoch,
                diverging_end_offset = leader_end,
                truncated_to = offset.0,
                log_end = local.log_end.0,
                "follower truncated to the same offset twice in a row: its log does not \
                 converge with the leader's"
            );
        }
    }
    h.last_truncation = Some(offset);
}

/// One WARN when a partition keeps fetching while out of the ISR for more than
/// [`OUT_OF_ISR_WARN_LAG_TIMES`] × `replica.lag.time.max.ms`.
fn watch_out_of_isr(
    tp: &TopicPartition,
    p: &mut Followed,
    log: &LocalLog,
    now_ms: i64,
    lag_time_max_ms: i64,
) {
    let h = &mut p.health;
    if h.in_isr || h.warned_out_of_isr {
        return;
    }
    let since = *h.out_of_isr_since_ms.get_or_insert(now_ms);
    if now_ms - since > OUT_OF_ISR_WARN_LAG_TIMES * lag_time_max_ms {
        h.warned_out_of_isr = true;
        tracing::warn!(
            partition = %tp,
            follower_epoch = log.latest_epoch.map_or(-1, |e| e.0),
            leader_epoch = p.leader_epoch.0,
            log_end = log.log_end.0,
            high_watermark = log.high_watermark.0,
            out_of_isr_ms = now_ms - since,
            last_truncation = h.last_truncation.map_or(-1, |o| o.0),
            "follower has been fetching out of the ISR for more than {OUT_OF_ISR_WARN_LAG_TIMES} \
             times replica.lag.time.max.ms"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(start: i64, end: i64, epoch: Option<i32>) -> LocalLog {
        LocalLog {
            log_start: Offset(start),
            log_end: Offset(end),
            latest_epoch: epoch.map(Epoch),
            high_watermark: Offset(start),
        }
    }

    #[test]
    fn out_of_range_resets_as_kafka() {
        let l = local(0, 50, Some(3));
        assert_eq!(
            Fetcher::on_leader_offsets(Offset(0), Offset(40), &l),
            Reset::TruncateTo(Offset(40))
        );
        assert_eq!(
            Fetcher::on_leader_offsets(Offset(60), Offset(90), &l),
            Reset::StartAt(Offset(60))
        );
        assert_eq!(Fetcher::on_leader_offsets(Offset(10), Offset(90), &l), Reset::Fetch);
    }

    #[test]
    fn plans_carry_the_log_end_and_latest_epoch_and_skip_waiting_partitions() {
        let mut f = Fetcher::new(FetcherConfig::new(NodeId(2), 9), NodeId(1));
        let (a, b) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
        let id = Uuid::new_v4();
        f.add_partition(a.clone(), id, Epoch(4)).unwrap();
        f.add_partition(b.clone(), id, Epoch(4)).unwrap();
        let view = |tp: &TopicPartition| {
            Some(local(0, if tp.partition == 0 { 7 } else { 0 }, (tp.partition == 0).then_some(3)))
        };
        let plan = f.build(0, view).unwrap();
        assert_eq!((plan.replica, plan.broker_epoch), (NodeId(2), 9));
        let p0 = &plan.partitions[0];
        assert_eq!(
            (p0.fetch_offset, p0.last_fetched_epoch, p0.current_leader_epoch),
            (Offset(7), Epoch(3), Epoch(4))
        );
        assert_eq!(plan.partitions[1].last_fetched_epoch, Epoch(-1));
        // a: diverging epoch → truncate where the follower's epoch 3 data ends on the leader.
        let reply = PartitionReply { diverging_epoch: Some((3, 5)), ..PartitionReply::default() };
        let act = f.on_reply(&a, reply, &local(0, 7, Some(3)), |_| Some((Epoch(3), Offset(7))), 0);
        assert_eq!(act, Action::Truncate { offset: Offset(5) });
        // b: a storage error delays it by the backoff only.
        let reply = PartitionReply { error_code: 56, ..PartitionReply::default() };
        assert_eq!(f.on_reply(&b, reply, &local(0, 0, None), |_| None, 0), Action::Wait);
        let plan = f.build(10, view).unwrap();
        assert_eq!(plan.partitions.len(), 1);
        assert_eq!(f.build(f.config.backoff_ms, view).unwrap().partitions.len(), 2);
        assert!(f.remove_partition(&a));
        assert!(!f.remove_partition(&a));
    }

    #[test]
    fn a_truncation_to_the_same_offset_twice_is_counted_and_reported_once() {
        let mut f = Fetcher::new(FetcherConfig::new(NodeId(3), 1), NodeId(1));
        let a = TopicPartition::new("t", 2);
        f.add_partition(a.clone(), Uuid::new_v4(), Epoch(5)).unwrap();
        let diverging =
            || PartitionReply { diverging_epoch: Some((2, 15632)), ..PartitionReply::default() };
        let l = local(0, 15629, Some(2));
        // A leader end below the follower's own end for the epoch: cut there, twice.
        for _ in 0..3 {
            let act = f.on_reply(&a, diverging(), &l, |_| Some((Epoch(2), Offset(15629))), 0);
            assert_eq!(act, Action::Truncate { offset: Offset(15629) });
        }
        let h = f.partition(&a).unwrap().health;
        assert_eq!((h.repeated_truncations, h.warned_truncation_loop), (2, true));
        // Records again: the episode is over.
        let data =
            PartitionReply { records: Bytes::from_static(b"x"), ..PartitionReply::default() };
        f.on_reply(&a, data, &l, |_| None, 0);
        let h = f.partition(&a).unwrap().health;
        assert_eq!((h.last_truncation, h.warned_truncation_loop), (None, false));
    }

    #[test]
    fn a_follower_fetching_out_of_the_isr_is_reported_after_three_lag_times() {
        let mut f = Fetcher::new(FetcherConfig::new(NodeId(3), 1), NodeId(1));
        let lag = f.config.lag_time_max_ms;
        let a = TopicPartition::new("t", 0);
        f.add_partition(a.clone(), Uuid::new_v4(), Epoch(5)).unwrap();
        let view = |_: &TopicPartition| Some(local(0, 10, Some(5)));
        // In the ISR (the default until the image says otherwise): never reported.
        f.build(0, view).unwrap();
        f.build(10 * lag, view).unwrap();
        assert!(!f.partition(&a).unwrap().health.warned_out_of_isr);
        f.set_in_isr(&a, false);
        f.build(100 * lag, view).unwrap();
        f.build(103 * lag, view).unwrap();
        assert!(!f.partition(&a).unwrap().health.warned_out_of_isr, "exactly three lag times");
        f.build(103 * lag + 1, view).unwrap();
        assert!(f.partition(&a).unwrap().health.warned_out_of_isr);
        // Back in the ISR: the clock starts again next time it leaves.
        f.set_in_isr(&a, true);
        assert_eq!(f.partition(&a).unwrap().health.out_of_isr_since_ms, None);
    }
}
