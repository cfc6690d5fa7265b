//! Replication throttles, as Kafka's `ReplicationQuotaManager`: a byte rate per broker for
//! leaders (`leader.replication.throttled.rate`) and for followers
//! (`follower.replication.throttled.rate`), applied only to the replicas a topic lists in
//! `leader.replication.throttled.replicas` / `follower.replication.throttled.replicas`
//! (`partition:broker` entries naming this broker, or `*`), and only while the follower
//! concerned is out of the ISR (Kafka's `shouldLeaderThrottle`/`shouldFollowerThrottle`):
//! - follower side (`replication::driver`): a throttled partition is left out of the next
//!   Fetch while the follower rate is over its bound; the bytes it appends are counted;
//! - leader side (`partition::replica_fetch`): a throttled follower's fetch is answered
//!   without records while the leader rate is over its bound; the bytes sent are counted.
//!
//! Per shard: each shard keeps its own two [`ReplicationQuota`]s (thread-local, refreshed
//! with every metadata image by [`install_image`]) with the broker's bound divided by the
//! number of shards where that side's throttle applies now (`ThrottledShards`), so the
//! broker as a whole stays within the configured rate and a single throttled partition
//! still gets all of it. The rate is
//! Kafka's sampled rate: `REPLICATION_QUOTA_SAMPLES` windows of
//! `REPLICATION_QUOTA_SAMPLE_MS` (Kafka's `replication.quota.window.num` = 11 and
//! `replication.quota.window.size.seconds` = 1). Invariants: nothing is throttled without an
//! explicit throttled-replicas entry; with the default rate (`Long.MAX_VALUE`) the quota is
//! never exceeded; state is bounded by the partitions this shard owns.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::metadata::{MetadataImage, TopicImage};
use crate::types::{NodeId, ShardId, TopicPartition};

/// Samples in the rate window (Kafka's `replication.quota.window.num` default).
pub const REPLICATION_QUOTA_SAMPLES: usize = 11;
/// Length of one sample (Kafka's `replication.quota.window.size.seconds` default).
pub const REPLICATION_QUOTA_SAMPLE_MS: u64 = 1_000;
/// How soon a follower fetcher whose every partition sat out over the follower rate checks
/// again (instead of the whole `replica.fetch.backoff.ms`, which kept the measured rate
/// about a sixth under the bound: 1.66 MiB/s at 2 MiB/s).
pub const REPLICATION_QUOTA_RECHECK_MS: u64 = 50;

const LEADER_RATE: &str = "leader.replication.throttled.rate";
const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";
const LEADER_REPLICAS: &str = "leader.replication.throttled.replicas";
const FOLLOWER_REPLICAS: &str = "follower.replication.throttled.replicas";

/// A byte rate measured over a sliding window of samples, with an upper bound.
#[derive(Clone, Debug, Default)]
pub struct ReplicationQuota {
    /// Bytes/s; `None`: unlimited.
    bound: Option<f64>,
    /// (sample start ms, bytes), oldest first.
    samples: VecDeque<(u64, u64)>,
    /// Bytes ever recorded (a metric).
    total_bytes: u64,
}

impl ReplicationQuota {
    /// Sets the bound in bytes/s (`i64::MAX`, Kafka's default, or less than 1: unlimited
    /// resp. nothing allowed once anything was recorded).
    pub fn set_bound(&mut self, bytes_per_sec: Option<f64>) {
        self.bound = bytes_per_sec.filter(|b| *b < i64::MAX as f64);
    }

    /// Counts `bytes` sent or received for throttled replicas at `now_ms`.
    pub fn record(&mut self, now_ms: u64, bytes: u64) {
        self.total_bytes = self.total_bytes.saturating_add(bytes);
        let start = now_ms - now_ms % REPLICATION_QUOTA_SAMPLE_MS;
        match self.samples.back_mut() {
            Some((s, b)) if *s == start => *b = b.saturating_add(bytes),
            _ => self.samples.push_back((start, bytes)),
        }
        self.expire(now_ms);
    }

    fn expire(&mut self, now_ms: u64) {
        let window = REPLICATION_QUOTA_SAMPLE_MS * REPLICATION_QUOTA_SAMPLES as u64;
        while self.samples.front().is_some_and(|(s, _)| s + window <= now_ms) {
            self.samples.pop_front();
        }
    }

    /// Kafka's `Rate`: the bytes in the window over the time it covers, counted as at least
    /// `samples - 1` full samples so a first burst is not measured over a few milliseconds.
    #[must_use]
    pub fn rate(&self, now_ms: u64) -> f64 {
        let window = REPLICATION_QUOTA_SAMPLE_MS * REPLICATION_QUOTA_SAMPLES as u64;
        let live = self.samples.iter().filter(|(s, _)| s + window > now_ms);
        let (mut oldest, mut bytes) = (now_ms, 0u64);
        for (s, b) in live {
            oldest = oldest.min(*s);
            bytes = bytes.saturating_add(*b);
        }
        let min_ms = REPLICATION_QUOTA_SAMPLE_MS * (REPLICATION_QUOTA_SAMPLES as u64 - 1);
        let elapsed_ms = (now_ms - oldest).max(min_ms).max(1);
        bytes as f64 * 1000.0 / elapsed_ms as f64
    }

    /// Whether the measured rate is above the bound (never without a bound).
    #[must_use]
    pub fn is_exceeded(&self, now_ms: u64) -> bool {
        self.bound.is_some_and(|b| self.rate(now_ms) > b)
    }

    /// Bytes recorded since start.
    #[must_use]
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }
}

/// Which partitions of a topic a throttled-replicas value names for broker `me`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ThrottledReplicas {
    All,
    Partitions(BTreeSet<i32>),
}

impl ThrottledReplicas {
    /// Parses `*` or `p:b,p:b,...` (already validated by the config registry); entries for
    /// other brokers are ignored, malformed ones skipped.
    #[must_use]
    pub fn parse(value: &str, me: NodeId) -> Self {
        if value.trim() == "*" {
            return ThrottledReplicas::All;
        }
        let parts = value
            .split(',')
            .filter_map(|e| {
                let (p, b) = e.trim().split_once(':')?;
                let (p, b): (i32, i32) = (p.trim().parse().ok()?, b.trim().parse().ok()?);
                (b == me.0).then_some(p)
            })
            .collect();
        ThrottledReplicas::Partitions(parts)
    }

    #[must_use]
    pub fn contains(&self, partition: i32) -> bool {
        match self {
            ThrottledReplicas::All => true,
            ThrottledReplicas::Partitions(p) => p.contains(&partition),
        }
    }
}

fn listed(topic: &TopicImage, key: &str, partition: i32, me: NodeId) -> bool {
    topic.configs.get(key).is_some_and(|v| ThrottledReplicas::parse(v, me).contains(partition))
}

/// One shard's throttle state.
#[derive(Debug, Default)]
struct ShardThrottle {
    leader: ReplicationQuota,
    follower: ReplicationQuota,
    /// Partitions this shard leads with leader-side throttling: their ISR.
    leader_throttled: BTreeMap<TopicPartition, Vec<NodeId>>,
    /// Partitions this shard follows, throttled and out of the ISR.
    follower_throttled: BTreeSet<TopicPartition>,
    /// Partitions this shard hosts as an adding replica of a reassignment (bytes moved).
    adding: BTreeSet<TopicPartition>,
}

thread_local! {
    static SHARD: RefCell<ShardThrottle> = RefCell::default();
}

fn now_ms() -> u64 {
    u64::try_from(crate::shard::now_ms()).unwrap_or(0)
}

/// Refreshes this shard's bounds and throttled partitions from an image (called by
/// `partition::table::apply_image` with every image).
pub fn install_image(image: &MetadataImage, shard: ShardId) {
    let me = image.node_id;
    let shares = ThrottledShards::of(image);
    let bound = |name: &str, sharing: usize| {
        let v = image.broker_defaults.long(name);
        (v < i64::MAX).then(|| v.max(0) as f64 / sharing.max(1) as f64)
    };
    let mut leader_throttled = BTreeMap::new();
    let mut follower_throttled = BTreeSet::new();
    let mut adding = BTreeSet::new();
    for ((topic_id, partition), r) in image.reassignments.iter() {
        let Some(t) = image.topic_by_id(topic_id) else { continue };
        let mine = t.partitions.get(usize::try_from(*partition).unwrap_or(usize::MAX));
        if r.adding.contains(&me) && mine.is_some_and(|p| p.owner_shard == shard) {
            adding.insert(TopicPartition::new(t.name.clone(), *partition));
        }
    }
    if shard == ShardId(0) {
        crate::metrics::reassign::set_in_progress(image.reassignments.len());
    }
    for t in image.topics.values() {
        let has_any =
            t.configs.contains_key(LEADER_REPLICAS) || t.configs.contains_key(FOLLOWER_REPLICAS);
        if !has_any {
            continue;
        }
        for p in t.partitions.iter().filter(|p| p.hosted && p.owner_shard == shard) {
            let tp = TopicPartition::new(t.name.clone(), p.index);
            if p.leader == me && listed(t, LEADER_REPLICAS, p.index, me) {
                leader_throttled.insert(tp, p.isr.clone());
            } else if p.leader != me
                && !p.isr.contains(&me)
                && listed(t, FOLLOWER_REPLICAS, p.index, me)
            {
                follower_throttled.insert(tp);
            }
        }
    }
    SHARD.with(|s| {
        let mut s = s.borrow_mut();
        s.leader.set_bound(bound(LEADER_RATE, shares.leader.len()));
        s.follower.set_bound(bound(FOLLOWER_RATE, shares.follower.len()));
        s.leader_throttled = leader_throttled;
        s.follower_throttled = follower_throttled;
        s.adding = adding;
    });
}

/// The shards of this broker where a throttle applies now: those owning a led partition
/// with a listed replica out of the ISR (leader side), or a followed partition listed for
/// this broker while it is out of the ISR (follower side). The broker's rate is split
/// among them only, so one throttled partition gets the whole rate wherever it lives
/// (split among all shards, it got rate / shard count: half the throttle on two shards).
/// Each shard computes the same sets from the same image.
#[derive(Debug, Default)]
struct ThrottledShards {
    leader: BTreeSet<ShardId>,
    follower: BTreeSet<ShardId>,
}

impl ThrottledShards {
    fn of(image: &MetadataImage) -> Self {
        let me = image.node_id;
        let mut out = ThrottledShards::default();
        for t in image.topics.values() {
            if !t.configs.contains_key(LEADER_REPLICAS)
                && !t.configs.contains_key(FOLLOWER_REPLICAS)
            {
                continue;
            }
            for p in t.partitions.iter().filter(|p| p.hosted) {
                if p.leader == me {
                    let lagging = p.replicas.iter().any(|r| !p.isr.contains(r));
                    if lagging && listed(t, LEADER_REPLICAS, p.index, me) {
                        out.leader.insert(p.owner_shard);
                    }
                } else if !p.isr.contains(&me) && listed(t, FOLLOWER_REPLICAS, p.index, me) {
                    out.follower.insert(p.owner_shard);
                }
            }
        }
        out
    }
}

/// Follower side: whether to leave `tp` out of the next Fetch now.
#[must_use]
pub fn follower_skips(tp: &TopicPartition) -> bool {
    SHARD.with(|s| {
        let s = s.borrow();
        s.follower_throttled.contains(tp) && s.follower.is_exceeded(now_ms())
    })
}

/// Follower side: how long to wait before the next round when this shard's follower rate
/// is over its bound with throttled partitions (`None`: not throttled now).
#[must_use]
pub fn follower_recheck_ms() -> Option<u64> {
    SHARD.with(|s| {
        let s = s.borrow();
        (!s.follower_throttled.is_empty() && s.follower.is_exceeded(now_ms()))
            .then_some(REPLICATION_QUOTA_RECHECK_MS)
    })
}

/// Follower side: counts bytes appended for `tp` if it is throttled, and as bytes moved if
/// this broker is one of its adding replicas.
pub fn follower_appended(tp: &TopicPartition, bytes: usize) {
    SHARD.with(|s| {
        let mut s = s.borrow_mut();
        if s.follower_throttled.contains(tp) {
            s.follower.record(now_ms(), bytes as u64);
            crate::metrics::reassign::add_throttled(false, bytes as u64);
        }
        if s.adding.contains(tp) {
            crate::metrics::reassign::add_bytes_moved(bytes as u64);
        }
    });
}

/// Leader side: whether `replica`'s fetch of `tp` gets no records now (a throttled
/// partition, the replica out of the ISR, the leader rate over its bound).
#[must_use]
pub fn leader_throttles(tp: &TopicPartition, replica: NodeId) -> bool {
    SHARD.with(|s| {
        let s = s.borrow();
        s.leader_throttled.get(tp).is_some_and(|isr| !isr.contains(&replica))
            && s.leader.is_exceeded(now_ms())
    })
}

/// Leader side: counts bytes sent to an out-of-sync replica of a throttled partition.
pub fn leader_sent(tp: &TopicPartition, replica: NodeId, bytes: usize) {
    SHARD.with(|s| {
        let mut s = s.borrow_mut();
        if s.leader_throttled.get(tp).is_some_and(|isr| !isr.contains(&replica)) {
            s.leader.record(now_ms(), bytes as u64);
            crate::metrics::reassign::add_throttled(true, bytes as u64);
        }
    });
}

/// This shard's throttled bytes so far: (leader side sent, follower side received).
#[must_use]
pub fn throttled_bytes() -> (u64, u64) {
    SHARD.with(|s| {
        let s = s.borrow();
        (s.leader.total_bytes(), s.follower.total_bytes())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_measured_over_the_window_and_bounded() {
        let mut q = ReplicationQuota::default();
        assert!(!q.is_exceeded(0), "no bound: never exceeded");
        q.set_bound(Some(i64::MAX as f64));
        q.record(0, u64::MAX / 2);
        assert!(!q.is_exceeded(0), "Kafka's default bound is unlimited");
        let mut q = ReplicationQuota::default();
        q.set_bound(Some(1_000.0));
        // 5 000 bytes at once: measured over at least 10 s, 500 B/s, under the bound.
        q.record(100, 5_000);
        assert!((q.rate(100) - 500.0).abs() < 1.0);
        assert!(!q.is_exceeded(100));
        // 20 000 bytes within the first second: 2 000 B/s over 10 s, exceeded.
        q.record(900, 15_000);
        assert!(q.is_exceeded(900));
        // After the window has passed the samples expire and the rate falls to zero.
        assert_eq!(q.rate(12_500), 0.0);
        assert!(!q.is_exceeded(12_500));
        assert_eq!(q.total_bytes(), 20_000);
        // A steady 1 500 B/s for 20 s measures about 1 500 B/s.
        let mut q = ReplicationQuota::default();
        q.set_bound(Some(1_000.0));
        for s in 0..20u64 {
            q.record(s * 1_000, 1_500);
        }
        let r = q.rate(19_999);
        assert!((1_300.0..1_700.0).contains(&r), "rate {r}");
        assert!(q.is_exceeded(19_999));
    }

    #[test]
    fn throttled_replicas_parse_for_this_broker_only() {
        let me = NodeId(2);
        assert_eq!(ThrottledReplicas::parse("*", me), ThrottledReplicas::All);
        let t = ThrottledReplicas::parse("0:1,0:2, 3:2,4:3,bad,5:x", me);
        assert!(t.contains(0) && t.contains(3));
        assert!(!t.contains(4) && !t.contains(5) && !t.contains(1));
        assert!(!ThrottledReplicas::parse("", me).contains(0));
    }

    #[test]
    fn only_listed_out_of_sync_replicas_are_throttled() {
        use crate::metadata::{MetadataImage, PartitionImage};
        use crate::types::Epoch;
        let mut image = crate::server::fetch::one_partition_image();
        // Node 1 leads t-0 with replicas {1, 2}, ISR {1}; 2 is catching up.
        let topic = std::sync::Arc::make_mut(image.topics.get_mut("t").unwrap());
        topic.partitions[0] = PartitionImage {
            replicas: vec![NodeId(1), NodeId(2)],
            isr: vec![NodeId(1)],
            leader_epoch: Epoch(1),
            ..topic.partitions[0].clone()
        };
        topic.configs.insert(LEADER_REPLICAS.into(), "0:1".into());
        let mut defaults = (*image.broker_defaults).clone();
        defaults.dynamic_broker.insert(LEADER_RATE.into(), "1".into());
        image.broker_defaults = std::sync::Arc::new(defaults);
        let image: MetadataImage = image;
        install_image(&image, ShardId(0));
        let tp = TopicPartition::new("t", 0);
        assert!(!leader_throttles(&tp, NodeId(2)), "under the bound until bytes flow");
        leader_sent(&tp, NodeId(2), 1_000);
        assert!(leader_throttles(&tp, NodeId(2)), "out of sync, listed, over the bound");
        assert!(!leader_throttles(&tp, NodeId(1)), "an ISR member is never throttled");
        assert!(!leader_throttles(&TopicPartition::new("t", 1), NodeId(2)));
        assert!(!follower_skips(&tp), "this broker leads t-0");
        assert_eq!(throttled_bytes().0, 1_000);
    }

    #[test]
    fn a_follower_over_its_rate_rechecks_soon() {
        use crate::metadata::{MetadataImage, PartitionImage};
        use crate::types::Epoch;
        let mut image = crate::server::fetch::one_partition_image();
        // Node 1 follows t-0 from 2 and is out of its ISR.
        let topic = std::sync::Arc::make_mut(image.topics.get_mut("t").unwrap());
        topic.partitions[0] = PartitionImage {
            leader: NodeId(2),
            replicas: vec![NodeId(2), NodeId(1)],
            isr: vec![NodeId(2)],
            leader_epoch: Epoch(1),
            ..topic.partitions[0].clone()
        };
        topic.configs.insert(FOLLOWER_REPLICAS.into(), "0:1".into());
        let mut defaults = (*image.broker_defaults).clone();
        defaults.dynamic_broker.insert(FOLLOWER_RATE.into(), "1".into());
        image.broker_defaults = std::sync::Arc::new(defaults);
        let image: MetadataImage = image;
        install_image(&image, ShardId(0));
        let tp = TopicPartition::new("t", 0);
        assert_eq!(follower_recheck_ms(), None, "under the bound: the usual backoff");
        follower_appended(&tp, 1_000);
        assert!(follower_skips(&tp));
        assert_eq!(follower_recheck_ms(), Some(REPLICATION_QUOTA_RECHECK_MS));
    }

    #[test]
    fn the_rate_is_shared_by_the_shards_holding_throttled_partitions_only() {
        use crate::metadata::PartitionImage;
        use crate::types::Epoch;
        let mut image = crate::server::fetch::one_partition_image();
        image.shard_count = 4;
        // Node 1 leads t-0 (on shard 3) with 2 catching up; 1 follows t-1 (shard 2) from 3,
        // out of its ISR; t-2 (shard 1) is listed but fully in sync.
        let topic = std::sync::Arc::make_mut(image.topics.get_mut("t").unwrap());
        let base = topic.partitions[0].clone();
        let part = |index, shard, leader: i32, isr: Vec<i32>| PartitionImage {
            index,
            owner_shard: ShardId(shard),
            hosted: true,
            leader: NodeId(leader),
            leader_epoch: Epoch(1),
            replicas: vec![NodeId(1), NodeId(2), NodeId(3)],
            isr: isr.into_iter().map(NodeId).collect(),
            ..base.clone()
        };
        topic.partitions = vec![
            part(0, 3, 1, vec![1, 3]),
            part(1, 2, 3, vec![3, 2]),
            part(2, 1, 1, vec![1, 2, 3]),
        ];
        topic.configs.insert(LEADER_REPLICAS.into(), "*".into());
        topic.configs.insert(FOLLOWER_REPLICAS.into(), "*".into());
        let shares = ThrottledShards::of(&image);
        assert_eq!(shares.leader, [ShardId(3)].into(), "one shard gets the whole leader rate");
        assert_eq!(shares.follower, [ShardId(2)].into());
        // Another lagging led partition on shard 0: the leader rate is split in two.
        let topic = std::sync::Arc::make_mut(image.topics.get_mut("t").unwrap());
        topic.partitions.push(part(3, 0, 1, vec![1]));
        assert_eq!(ThrottledShards::of(&image).leader, [ShardId(0), ShardId(3)].into());
    }
}
