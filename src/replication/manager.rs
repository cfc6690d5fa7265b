//! Which follower fetchers run on this shard, kept in step with the metadata image: one
//! [`task`](super::task) per leader broker this shard follows partitions of, over a
//! [`TcpLink`] to the leader's first endpoint in `image.brokers`, fetching as this node with
//! its broker epoch from the same image (KIP-903). Each image adds the partitions this shard
//! now follows, removes those it no longer follows (it leads them, the leader changed, or
//! the leader is gone: leader -1 or fenced) and tells every fetcher the image version, so
//! partitions parked on a leadership error fetch again.
//!
//! Becoming a follower needs no truncation step here: the fetcher's first Fetch carries the
//! log's latest epoch and the leader answers with the divergence point (Fetch v12+, Kafka's
//! rule since KIP-320), which the driver truncates to.
//!
//! Lives on one shard inside its `partition::PartitionTable`; touched only by that shard,
//! no borrow held across `.await`. Invariants: at most one fetcher per leader broker; a
//! fetcher whose leader endpoint or our broker epoch changed is stopped and replaced; a
//! partition is followed by at most one fetcher.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use uuid::Uuid;

use super::fetcher::{Fetcher, FetcherConfig};
use super::link::TcpLink;
use super::task::{run, Command, FetcherHandle};
use crate::io::dma::DmaFileSystem;
use crate::io::FileSystem;
use crate::metadata::BrokerImage;
use crate::protocol::client_auth::ClientSecurity;
use crate::storage::PartitionLog;
use crate::types::{Epoch, NodeId, Offset, TopicPartition};

/// A partition this shard should follow, as the image says.
pub struct Follow<F: FileSystem = DmaFileSystem> {
    pub tp: TopicPartition,
    pub topic_id: Uuid,
    pub leader: NodeId,
    pub leader_epoch: Epoch,
    /// This broker is in the partition's ISR (the fetcher reports a follower stuck out of it).
    pub in_isr: bool,
    pub log: Rc<PartitionLog<F>>,
    /// The partition's follower high watermark, kept by the fetcher.
    pub high_watermark: Rc<Cell<Offset>>,
}

struct Running<F: FileSystem> {
    handle: Rc<FetcherHandle<F>>,
    addr: String,
    broker_epoch: i64,
    /// Followed partitions with the topic id, leader epoch and ISR membership last sent.
    partitions: HashMap<TopicPartition, (Uuid, Epoch, bool)>,
}

/// The fetchers of one shard.
pub struct FollowerSet<F: FileSystem = DmaFileSystem> {
    running: RefCell<BTreeMap<NodeId, Running<F>>>,
}

impl<F: FileSystem> Default for FollowerSet<F> {
    fn default() -> Self {
        FollowerSet { running: RefCell::default() }
    }
}

/// The address a follower dials for `broker`: its endpoint of the inter-broker `listener`
/// (a broker registered with one unnamed endpoint: that one).
#[must_use]
pub fn broker_addr(broker: &BrokerImage, listener: &str) -> Option<String> {
    broker.inter_broker_endpoint(listener).map(|e| format!("{}:{}", e.host, e.port))
}

impl<F: FileSystem> FollowerSet<F> {
    /// Brings the fetchers in line with `wanted`. `me` is this node, `brokers` the image's
    /// registrations, `security` how leaders are dialled (which listener, TLS, SASL);
    /// `spawn` starts a fetcher loop on this shard.
    pub fn reconcile(
        &self,
        me: NodeId,
        version: u64,
        brokers: &BTreeMap<NodeId, BrokerImage>,
        security: &Arc<ClientSecurity>,
        wanted: Vec<Follow<F>>,
        spawn: impl Fn(std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>),
    ) {
        let listener = security.listener.as_str();
        let broker_addr = |b: &BrokerImage| broker_addr(b, listener);
        let my_epoch = brokers.get(&me).map(|b| b.epoch);
        let mut by_leader: BTreeMap<NodeId, Vec<Follow<F>>> = BTreeMap::new();
        for f in wanted {
            let live = brokers.get(&f.leader).is_some_and(|b| !b.fenced);
            if live && f.leader != me {
                by_leader.entry(f.leader).or_default().push(f);
            }
        }
        let mut running = self.running.borrow_mut();
        // Stop fetchers whose leader no longer leads anything here, or whose connection
        // parameters changed.
        let stale: Vec<NodeId> = running
            .iter()
            .filter(|(leader, r)| {
                let addr = brokers.get(leader).and_then(broker_addr);
                !by_leader.contains_key(leader)
                    || addr.as_deref() != Some(r.addr.as_str())
                    || my_epoch != Some(r.broker_epoch)
            })
            .map(|(leader, _)| *leader)
            .collect();
        for leader in stale {
            if let Some(r) = running.remove(&leader) {
                tracing::info!(%leader, partitions = r.partitions.len(), "stopping fetcher");
                r.handle.stop();
            }
        }
        let Some(my_epoch) = my_epoch else {
            return; // not registered yet: nothing can be fetched as this broker
        };
        for (leader, follows) in by_leader {
            let Some(addr) = brokers.get(&leader).and_then(broker_addr) else { continue };
            let r = running.entry(leader).or_insert_with(|| {
                tracing::info!(%leader, %addr, "starting fetcher");
                let handle = Rc::new(FetcherHandle::default());
                let fetcher = Fetcher::new(FetcherConfig::new(me, my_epoch), leader);
                let link = TcpLink::new(addr.clone(), me, security.clone());
                let h = handle.clone();
                spawn(Box::pin(async move {
                    let stats = run(fetcher, h, link, crate::shard::now_ms).await;
                    tracing::info!(%leader, ?stats, "fetcher stopped");
                }));
                Running { handle, addr, broker_epoch: my_epoch, partitions: HashMap::new() }
            });
            let keep: HashMap<TopicPartition, (Uuid, Epoch, bool)> = follows
                .iter()
                .map(|f| (f.tp.clone(), (f.topic_id, f.leader_epoch, f.in_isr)))
                .collect();
            let mut commands = Vec::new();
            // Gone, or re-created under the same name (a new topic id, so a new log).
            for (tp, (id, _, _)) in &r.partitions {
                if keep.get(tp).is_none_or(|(kept, _, _)| kept != id) {
                    commands.push(Command::Remove { tp: tp.clone() });
                }
            }
            for f in follows {
                let sent = r.partitions.get(&f.tp);
                if sent.map(|(id, epoch, _)| (*id, *epoch)) != Some((f.topic_id, f.leader_epoch)) {
                    commands.push(Command::Add {
                        tp: f.tp,
                        topic_id: f.topic_id,
                        leader_epoch: f.leader_epoch,
                        in_isr: f.in_isr,
                        log: f.log,
                        high_watermark: f.high_watermark,
                    });
                } else if sent.is_some_and(|(_, _, in_isr)| *in_isr != f.in_isr) {
                    commands.push(Command::Isr { tp: f.tp, in_isr: f.in_isr });
                }
            }
            commands.push(Command::Metadata { version });
            let full = commands.into_iter().any(|c| r.handle.send(c).is_err());
            if full {
                // Rebuilt from the next image rather than left half-updated.
                tracing::warn!(%leader, "fetcher command queue full; restarting it");
                r.handle.stop();
                running.remove(&leader);
            } else {
                r.partitions = keep;
            }
        }
    }

    /// Whether `tp` is followed by some fetcher.
    #[must_use]
    pub fn follows(&self, tp: &TopicPartition) -> bool {
        self.running.borrow().values().any(|r| r.partitions.contains_key(tp))
    }

    /// The leaders this shard runs fetchers for, each with its followed partitions.
    #[must_use]
    pub fn leaders(&self) -> BTreeMap<NodeId, Vec<TopicPartition>> {
        self.running
            .borrow()
            .iter()
            .map(|(leader, r)| {
                let mut tps: Vec<TopicPartition> = r.partitions.keys().cloned().collect();
                tps.sort();
                (*leader, tps)
            })
            .collect()
    }

    /// Stops following `tp` (its log leaves this shard: a shard move); the fetcher drops
    /// its reference to the log with its next command. Returns whether it was followed.
    pub fn forget(&self, tp: &TopicPartition) -> bool {
        let mut running = self.running.borrow_mut();
        for r in running.values_mut() {
            if r.partitions.remove(tp).is_some() {
                let _ = r.handle.send(Command::Remove { tp: tp.clone() });
                return true;
            }
        }
        false
    }

    /// Stops every fetcher (shutdown).
    pub fn stop_all(&self) {
        for (_, r) in std::mem::take(&mut *self.running.borrow_mut()) {
            r.handle.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::mem::MemFileSystem;
    use crate::metadata::BrokerEndpoint;
    use crate::storage::{BatchCache, LogConfig};

    fn broker(port: u16, epoch: i64, fenced: bool) -> BrokerImage {
        BrokerImage {
            epoch,
            incarnation_id: Uuid::nil(),
            endpoints: vec![BrokerEndpoint {
                listener: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port,
                security_protocol: 0,
            }],
            rack: None,
            fenced,
        }
    }

    fn follow(
        log: &Rc<PartitionLog<MemFileSystem>>,
        p: i32,
        leader: i32,
        epoch: i32,
    ) -> Follow<MemFileSystem> {
        Follow {
            tp: TopicPartition::new("t", p),
            topic_id: Uuid::from_u128(7),
            leader: NodeId(leader),
            leader_epoch: Epoch(epoch),
            in_isr: true,
            log: log.clone(),
            high_watermark: Rc::default(),
        }
    }

    #[test]
    fn fetchers_follow_the_image() {
        crate::io::run_local(async {
            let fs = Rc::new(MemFileSystem::new());
            let cache = Rc::new(BatchCache::new(1 << 20));
            let dir = std::path::Path::new("/f/t-0");
            let log =
                Rc::new(PartitionLog::open(fs, dir, LogConfig::default(), cache).await.unwrap());
            let set: FollowerSet<MemFileSystem> = FollowerSet::default();
            let spawned = Cell::new(0);
            let spawn = |f: std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>| {
                drop(f); // never run: the test looks at the decisions only
                spawned.set(spawned.get() + 1);
            };
            let me = NodeId(1);
            let mut brokers: BTreeMap<NodeId, BrokerImage> = [
                (NodeId(1), broker(9001, 10, false)),
                (NodeId(2), broker(9002, 11, false)),
                (NodeId(3), broker(9003, 12, false)),
            ]
            .into();
            let tp = |p| TopicPartition::new("t", p);
            // Partition 0 led by 2, 1 by 3, 2 by this node (not followed), 3 leaderless.
            let wanted = vec![follow(&log, 0, 2, 1), follow(&log, 1, 3, 1), follow(&log, 2, 1, 1)];
            let mut leaderless = follow(&log, 3, 2, 1);
            leaderless.leader = NodeId(-1);
            let mut all = wanted;
            all.push(leaderless);
            set.reconcile(me, 1, &brokers, &Arc::default(), all, spawn);
            let expect: BTreeMap<NodeId, Vec<TopicPartition>> =
                [(NodeId(2), vec![tp(0)]), (NodeId(3), vec![tp(1)])].into();
            assert_eq!(set.leaders(), expect);
            assert_eq!(spawned.get(), 2);
            // Broker 3 fenced: its fetcher stops; partition 0 moves to leader 3 (fenced):
            // nothing followed from 3, and 2 keeps nothing either.
            brokers.get_mut(&NodeId(3)).unwrap().fenced = true;
            set.reconcile(me, 2, &brokers, &Arc::default(), vec![follow(&log, 0, 3, 2)], spawn);
            assert!(set.leaders().is_empty());
            // Back, with a new endpoint: a new fetcher; our own new broker epoch replaces it.
            brokers.insert(NodeId(3), broker(9333, 13, false));
            set.reconcile(me, 3, &brokers, &Arc::default(), vec![follow(&log, 0, 3, 2)], spawn);
            assert_eq!(set.leaders(), [(NodeId(3), vec![tp(0)])].into());
            assert_eq!(spawned.get(), 3);
            set.reconcile(me, 4, &brokers, &Arc::default(), vec![follow(&log, 0, 3, 2)], spawn);
            assert_eq!(spawned.get(), 3, "same leader, endpoint and epoch: same fetcher");
            brokers.insert(NodeId(1), broker(9001, 20, false));
            set.reconcile(me, 5, &brokers, &Arc::default(), vec![follow(&log, 0, 3, 2)], spawn);
            assert_eq!(spawned.get(), 4, "a new broker epoch of ours: a new fetcher");
            assert!(set.follows(&tp(0)));
            set.stop_all();
            assert!(!set.follows(&tp(0)));
        });
    }
}
