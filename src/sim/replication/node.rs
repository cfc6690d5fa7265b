//! One simulated replica of the partition: its in-memory file system and the shipped
//! [`PartitionReplica`] (the [`PartitionLog`], the role transitions a broker applies from its
//! metadata, the leader's produce path and acks=all decision, and the leader state
//! [`Replication`], answering follower fetches through [`serve_replica_fetch`]) and, while it follows, the shipped [`Fetcher`] driven by
//! [`fetch_round_assigned`] over a [`SimLink`] to the leader it believes in.
//!
//! What a node believes comes from the metadata it has applied ([`Meta`]), which lags the
//! controller's, as a broker's image lags the metadata log.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use uuid::Uuid;

use crate::io::mem::MemFileSystem;
use crate::partition::leader::Replication;
use crate::partition::replica::{PartitionReplica, Role};
use crate::partition::replica_fetch::{serve_replica_fetch, to_reply, ReplicaFetchRequest};
use crate::partition::replicas::ReplicaSettings;
use crate::replication::driver::{
    fetch_round_assigned, FollowerLog, LeaderLink, LinkError, RoundStats,
};
use crate::replication::fetcher::{FetchPlan, Fetcher, FetcherConfig, PartitionReply};
use crate::storage::{BatchCache, LogConfig, PartitionLog, StorageError};
use crate::types::{Epoch, NodeId, Offset, TopicPartition};

pub type Log = PartitionLog<MemFileSystem>;

/// Kafka error codes the simulated leader answers with.
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75;

/// The partition as the controller decided it, or as a node last applied it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub version: u64,
    pub leader: Option<NodeId>,
    pub epoch: Epoch,
    pub replicas: Vec<NodeId>,
    pub isr: Vec<NodeId>,
}

/// The simulated partition's name and id.
#[must_use]
pub fn tp() -> TopicPartition {
    TopicPartition::new("sim", 0)
}

fn topic_id() -> Uuid {
    Uuid::from_u128(0x5157_0000_0000_0000_0000_0000_0000_0001)
}

fn log_config() -> LogConfig {
    LogConfig {
        // Small segments, so truncation and recovery cross segment boundaries.
        segment_bytes: 8 * 1024,
        index_interval_bytes: 512,
        timestamp_after_max_ms: i64::MAX,
        timestamp_before_max_ms: i64::MAX,
        preallocate_bytes: 0,
        ..LogConfig::default()
    }
}

pub struct Node {
    pub id: NodeId,
    pub fs: Rc<MemFileSystem>,
    /// The shipped replica (log, role, leader state); `None` while the process is down.
    pub replica: Option<PartitionReplica<MemFileSystem>>,
    /// The follower high watermark, shared with the replica and the fetcher, and kept
    /// across restarts as the broker's high-watermark checkpoint keeps it.
    pub hw: Rc<Cell<Offset>>,
    pub seen: Meta,
    /// Bumped at every start (KIP-903's broker epoch).
    pub broker_epoch: i64,
    pub fetcher: Option<Fetcher>,
    pub follower_logs: BTreeMap<TopicPartition, FollowerLog<MemFileSystem>>,
    /// Truncations this node's fetchers made, in all.
    pub truncations: usize,
    pub settings: ReplicaSettings,
}

impl Node {
    pub fn new(id: NodeId, fs: Rc<MemFileSystem>, meta: &Meta, settings: ReplicaSettings) -> Self {
        Node {
            id,
            fs,
            replica: None,
            hw: Rc::new(Cell::new(Offset(0))),
            seen: Meta { version: 0, leader: None, epoch: Epoch(-1), ..meta.clone() },
            broker_epoch: 0,
            fetcher: None,
            follower_logs: BTreeMap::new(),
            truncations: 0,
            settings,
        }
    }

    #[must_use]
    pub fn is_up(&self) -> bool {
        self.replica.is_some()
    }

    /// The log, while the process is up.
    #[must_use]
    pub fn log(&self) -> Option<&Rc<Log>> {
        self.replica.as_ref().map(|r| &r.log)
    }

    /// The leader state of a node that is up.
    ///
    /// # Panics
    /// If the node is down (callers ask only nodes that lead or are up).
    #[must_use]
    pub fn replication(&self) -> &Replication {
        &self.replica.as_ref().expect("the node is up").replication
    }

    /// Whether this node leads, as far as it knows.
    #[must_use]
    pub fn leads(&self) -> bool {
        self.is_up() && self.seen.leader == Some(self.id)
    }

    /// Starts the process: opens (and recovers) the log from what its disk holds, as the
    /// broker's partition table opens a replica (high watermark from the checkpoint, capped
    /// at the log end).
    pub async fn start(&mut self) -> Result<(), StorageError> {
        let dir = std::path::PathBuf::from(format!("/node-{}/{}", self.id, tp().dir_name()));
        let cache = Rc::new(BatchCache::new(1 << 20));
        let log = PartitionLog::open(self.fs.clone(), &dir, log_config(), cache).await?;
        self.hw.set(self.hw.get().min(log.log_end_offset()));
        self.replica = Some(PartitionReplica::new(Rc::new(log), Epoch(-1), self.hw.clone()));
        self.broker_epoch += 1;
        self.seen = Meta { version: 0, leader: None, epoch: Epoch(-1), ..self.seen.clone() };
        Ok(())
    }

    /// The process dies; `disk` is what the restarted process will find.
    pub fn stop(&mut self, disk: MemFileSystem) {
        self.replica = None;
        self.fetcher = None;
        self.follower_logs.clear();
        self.fs = Rc::new(disk);
    }

    /// Applies the controller's view of the partition, as a broker applies a new image:
    /// fetchers first (a partition this node now leads stops being written by its fetcher),
    /// then the shipped role transition and leader-epoch start
    /// ([`PartitionReplica::apply_role`]), then a follower (re)points its fetcher.
    pub async fn apply(&mut self, meta: &Meta, _now_ms: i64) -> Result<(), StorageError> {
        let Some(replica) = self.replica.as_ref() else { return Ok(()) };
        let log = replica.log.clone();
        self.seen = meta.clone();
        let leads = meta.leader == Some(self.id);
        if leads || meta.leader.is_none() {
            self.fetcher = None;
            self.follower_logs.clear();
        }
        let role = Role {
            me: self.id,
            leader: meta.leader.unwrap_or(NodeId(-1)),
            leader_epoch: meta.epoch,
            replicas: meta.replicas.clone(),
            isr: meta.isr.clone(),
            ineligible: Vec::new(),
            settings: self.settings,
        };
        replica.apply_role(&role);
        replica.start_leader_epoch(meta.epoch).await?;
        replica.hw_changed.notify_all();
        let Some(leader) = meta.leader.filter(|_| !leads) else { return Ok(()) };
        if self.fetcher.as_ref().is_none_or(|f| f.leader != leader) {
            self.fetcher =
                Some(Fetcher::new(FetcherConfig::new(self.id, self.broker_epoch), leader));
        }
        let fetcher = self.fetcher.as_mut().expect("set above");
        if fetcher.partition(&tp()).is_none_or(|p| p.leader_epoch != meta.epoch) {
            // Cannot fail: one partition, far below the fetcher's bound.
            let _ = fetcher.add_partition(tp(), topic_id(), meta.epoch);
        }
        fetcher.metadata_changed(meta.version);
        self.follower_logs
            .entry(tp())
            .or_insert_with(|| FollowerLog::shared(log.clone(), self.hw.clone()));
        Ok(())
    }
}

/// The leader broker as a follower's fetcher reaches it: the leader-epoch checks a broker
/// makes before [`serve_replica_fetch`], then the shipped leader code.
pub struct SimLink<'a> {
    pub leader: &'a Node,
    pub now_ms: i64,
}

impl LeaderLink for SimLink<'_> {
    async fn fetch(
        &self,
        plan: &FetchPlan,
    ) -> Result<Vec<(TopicPartition, PartitionReply)>, LinkError> {
        let node = self.leader;
        let Some(log) = node.log() else {
            return Err(LinkError(format!("node {} is down", node.id)));
        };
        let mut out = Vec::new();
        for p in &plan.partitions {
            let fail = |code| PartitionReply { error_code: code, ..PartitionReply::default() };
            let code = if !node.leads() {
                Some(NOT_LEADER_OR_FOLLOWER)
            } else if p.current_leader_epoch < node.seen.epoch {
                Some(FENCED_LEADER_EPOCH)
            } else if p.current_leader_epoch > node.seen.epoch {
                Some(UNKNOWN_LEADER_EPOCH)
            } else {
                None
            };
            if let Some(code) = code {
                out.push((p.tp.clone(), fail(code)));
                continue;
            }
            let req = ReplicaFetchRequest {
                replica: plan.replica,
                broker_epoch: plan.broker_epoch,
                fetch_offset: p.fetch_offset,
                last_fetched_epoch: p.last_fetched_epoch,
                max_bytes: usize::try_from(plan.partition_max_bytes).unwrap_or(usize::MAX),
                epoch_given: true,
            };
            let reply =
                to_reply(serve_replica_fetch(log, node.replication(), &req, self.now_ms).await);
            out.push((p.tp.clone(), reply));
        }
        Ok(out)
    }

    async fn log_offsets(&self, _tp: &TopicPartition) -> Result<(Offset, Offset), LinkError> {
        let log = self.leader.log().ok_or_else(|| LinkError("leader down".into()))?;
        Ok((log.log_start_offset(), log.log_end_offset()))
    }
}

/// One fetch round of `follower` against `leader` with the shipped fetcher and driver. An
/// answer is applied only while the follower still follows that leader at the epoch asked.
pub async fn fetch_once(
    follower: &mut Node,
    leader: &Node,
    now_ms: i64,
) -> Result<Option<RoundStats>, LinkError> {
    let Some(mut fetcher) = follower.fetcher.take() else { return Ok(None) };
    let link = SimLink { leader, now_ms };
    // Steps do not interleave: the follower's view cannot change while its fetch is in
    // flight, so only the epoch asked is checked.
    let seen_epoch = follower.seen.epoch;
    let assigned = |_: &TopicPartition, epoch: Epoch| seen_epoch == epoch;
    let result =
        fetch_round_assigned(&mut fetcher, &follower.follower_logs, &link, now_ms, assigned).await;
    follower.fetcher = Some(fetcher);
    if let Ok(Some(stats)) = &result {
        follower.truncations += stats.truncations;
    }
    result
}
