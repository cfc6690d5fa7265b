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

use uuid::Uuid;

use super::fetcher::{Fetcher, FetcherConfig};
use super::link::TcpLink;
use super::task::{run, Command, FetcherHandle};
use crate::controller::BrokerImage;
use crate::io::dma::DmaFileSystem;
use crate::storage::DmaPartitionLog;
use crate::types::{Epoch, NodeId, Offset, TopicPartition};

/// A partition this shard should follow, as the image says.
pub struct Follow {
    pub tp: TopicPartition,
    pub topic_id: Uuid,
    pub leader: NodeId,
    pub leader_epoch: Epoch,
    pub log: Rc<DmaPartitionLog>,
    /// The partition's follower high watermark, kept by the fetcher.
    pub high_watermark: Rc<Cell<Offset>>,
}

struct Running {
    handle: Rc<FetcherHandle<DmaFileSystem>>,
    addr: String,
    broker_epoch: i64,
    /// Followed partitions and the leader epoch last sent.
    partitions: HashMap<TopicPartition, Epoch>,
}

/// The fetchers of one shard.
#[derive(Default)]
pub struct FollowerSet {
    running: RefCell<BTreeMap<NodeId, Running>>,
}

/// The address a follower dials for `broker` (its first listener).
#[must_use]
pub fn broker_addr(broker: &BrokerImage) -> Option<String> {
    broker.endpoints.first().map(|e| format!("{}:{}", e.host, e.port))
}

impl FollowerSet {
    /// Brings the fetchers in line with `wanted`. `me` is this node, `brokers` the image's
    /// registrations; `spawn` starts a fetcher loop on this shard.
    pub fn reconcile(
        &self,
        me: NodeId,
        version: u64,
        brokers: &BTreeMap<NodeId, BrokerImage>,
        wanted: Vec<Follow>,
        spawn: impl Fn(std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>),
    ) {
        let my_epoch = brokers.get(&me).map(|b| b.epoch);
        let mut by_leader: BTreeMap<NodeId, Vec<Follow>> = BTreeMap::new();
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
                let link = TcpLink::new(addr.clone(), me);
                let h = handle.clone();
                spawn(Box::pin(async move {
                    let stats = run(fetcher, h, link, crate::shard::now_ms).await;
                    tracing::info!(%leader, ?stats, "fetcher stopped");
                }));
                Running { handle, addr, broker_epoch: my_epoch, partitions: HashMap::new() }
            });
            let keep: HashMap<TopicPartition, Epoch> =
                follows.iter().map(|f| (f.tp.clone(), f.leader_epoch)).collect();
            let mut commands = Vec::new();
            for tp in r.partitions.keys().filter(|tp| !keep.contains_key(*tp)) {
                commands.push(Command::Remove { tp: tp.clone() });
            }
            for f in follows {
                if r.partitions.get(&f.tp) != Some(&f.leader_epoch) {
                    commands.push(Command::Add {
                        tp: f.tp,
                        topic_id: f.topic_id,
                        leader_epoch: f.leader_epoch,
                        log: f.log,
                        high_watermark: f.high_watermark,
                    });
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

    /// Stops every fetcher (shutdown).
    pub fn stop_all(&self) {
        for (_, r) in std::mem::take(&mut *self.running.borrow_mut()) {
            r.handle.stop();
        }
    }
}
