//! The cluster layer of the simulator: the controller and the broker lifecycle on top of the
//! quorum, as `server::cluster` runs them, driven by virtual time ([`TICK_MS`] per tick).
//!
//! - Every node's state machine is a real committed [`ControllerState`] ([`super::node`]).
//! - The ready leader keeps an `Active` controller as `server::cluster::ClusterNode::run_op`
//!   does: a working copy (`committed.clone()` + `become_active()`) and [`BrokerHeartbeats`]
//!   (`activate` at once), both replaced on a new term, when a proposal is superseded or
//!   refused, or when the process restarts. Operations run one at a time (`op_lock`) on the
//!   working copy; its `take_proposals()` frames (plus the heartbeat/expiry frames) are
//!   proposed, and the caller is answered once they are applied here (NOT_LEADER if the
//!   leadership went meanwhile, REQUEST_TIMED_OUT after the propose timeout, the working copy
//!   kept). Expiry runs every `EXPIRY_CHECK_MS`.
//! - One broker per node (the learner included) registers through the leader (a new
//!   incarnation per process start), heartbeats with its node's applied index and sometimes
//!   shuts down in a controlled way (heartbeats until approved or its deadline; sometimes it
//!   dies midway), as `server::cluster::lifecycle` does; clients create topics (replication
//!   factor 1..3, names reused), delete them and run ElectLeaders (preferred, sometimes
//!   unclean) on every partition; the active controller rebalances leaders every
//!   `REBALANCE_CHECK_MS`, as `server::cluster::election` does. Requests and answers
//!   are [`Rpc`]s over the simulated network: lost, delayed, duplicated, cut by partitions.
//!
//! Single-threaded, owned by `super::Sim`. Invariants checked ([`ClusterCheck`] and
//! [`Cluster::after_drain`]): every node's committed state equals a replay of the committed
//! log up to its applied index; applying a committed entry never fails; in every committed
//! state a partition's leader is -1 or an unfenced registered broker among its replicas and
//! in its ISR; a node's broker epoch never goes backwards (in the log and as brokers are
//! told); a heartbeat unfences a broker only once its offset covers its registration entry;
//! a working copy whose proposals are all applied equals the committed state; a partition
//! has one leader per leader epoch and its epoch never goes back.

mod active;
mod broker;
mod reassign;
mod serve;

use std::collections::{BTreeMap, VecDeque};

use rand::rngs::StdRng;
use rand::Rng;
use uuid::Uuid;

use super::check::Checker;
use super::cluster_check::masked_snapshot;
pub use super::cluster_check::ClusterCheck;
use super::net::{Network, Packet};
use super::node::SimNode;
use crate::controller::election::ElectionType;
use crate::controller::records::BrokerEndpoint;
use crate::controller::AlterPartitionRequest;
use crate::controller::{
    BrokerDefaults, BrokerEpoch, BrokerHeartbeat, BrokerHeartbeats, BrokerRegistration,
    ControllerError, ControllerState, NewTopic, NO_LEADER,
};
use crate::quorum::{
    QuorumRole, QuorumStatus, ReplicaStatus, StateRole, PROPOSE_TIMEOUT_MS_DEFAULT,
};
use crate::server::cluster::registration_epoch_hint;
use crate::types::NodeId;

/// Virtual milliseconds per tick (the driver's tick: 10-tick elections ≈ 1 s).
pub const TICK_MS: u64 = 100;
/// `broker.session.timeout.ms` in the simulation: short, so sessions expire under faults.
pub const SESSION_TIMEOUT_MS: u64 = 3_000;
/// `broker.heartbeat.interval.ms` in the simulation.
pub const HEARTBEAT_INTERVAL_MS: u64 = 1_000;
/// As `server::cluster::lifecycle`.
const FENCED_HEARTBEAT_MS: u64 = 100;
const RETRY_PAUSE_MS: u64 = 500;
const CALL_LIMIT_MS: u64 = 5_000;
/// `controlled.shutdown.timeout.ms` in the simulation: the broker exits by then at the latest.
const CONTROLLED_SHUTDOWN_TIMEOUT_MS: u64 = 5_000;
/// As `lifecycle::SHUTDOWN_RETRY_MS`: heartbeats of a shutdown the controller did not approve.
const SHUTDOWN_RETRY_MS: u64 = 100;
/// `leader.imbalance.check.interval.seconds` in the simulation (short, so it runs often).
const REBALANCE_CHECK_MS: u64 = 2_000;
const EXPIRY_CHECK_MS: u64 = 500;
const CLUSTER_ID: &str = "sim-cluster";
/// Requests queued behind the running operation (the server's `op_lock` waiters).
const OP_QUEUE_MAX: usize = 64;
/// The topic the calm phase creates (liveness).
pub const CALM_TOPIC: &str = "calm";

/// Who sent a request (the answer goes back to the same node and role).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    Broker,
    Client,
}

/// A request or an answer between nodes.
#[derive(Clone, Debug)]
pub struct Rpc {
    pub from: u64,
    pub to: u64,
    pub id: u64,
    pub caller: Caller,
    pub body: Body,
}

#[derive(Clone, Debug)]
pub enum Body {
    Register(BrokerRegistration),
    Heartbeat(BrokerHeartbeat),
    CreateTopic(NewTopic),
    DeleteTopic(String),
    /// ElectLeaders on every partition (`None` targets), preferred or unclean.
    Elect(ElectionType),
    /// A partition leader adds a caught-up follower back to the ISR (AlterPartition).
    AlterIsr(AlterPartitionRequest),
    Registered(BrokerEpoch),
    HeartbeatReply {
        is_fenced: bool,
        should_shutdown: bool,
    },
    Created,
    Deleted,
    Elected,
    Altered,
    Failed {
        stale_epoch: bool,
        exists: bool,
        reason: String,
    },
    NotLeader(Option<u64>),
    /// Start/replace (`Some`) or cancel (`None`) a reassignment (`sim::cluster::reassign`).
    Reassign {
        topic: String,
        partition: i32,
        target: Option<Vec<NodeId>>,
    },
    /// An ISR expansion as a partition leader would send it (`sim::cluster::reassign`).
    ExpandIsr(crate::controller::AlterPartitionRequest),
    /// A reassignment request or ISR expansion accepted.
    Done,
}

/// The active controller of one node for one term (`server::cluster::Active`).
struct Active {
    term: u64,
    working: ControllerState,
    heartbeats: BrokerHeartbeats,
    /// Proposals of this working copy not yet applied here: index → (term, frame).
    proposed: BTreeMap<u64, (u64, Vec<u8>)>,
    /// The running operation's last proposal and its held answer (none for expiry): while
    /// set, later requests queue, as they wait for `op_lock` in the server.
    running: Option<(u64, Option<Rpc>)>,
    /// When the running operation's caller gives up (`PROPOSE_TIMEOUT_MS_DEFAULT`).
    running_deadline_ms: u64,
    /// Requests waiting for the running operation.
    queue: VecDeque<Rpc>,
    next_expiry_ms: u64,
    /// Next automatic leader rebalance (`server::cluster::election::rebalance_loop`).
    next_rebalance_ms: u64,
}

/// One node's broker process.
#[derive(Default)]
struct Broker {
    incarnation: Option<Uuid>,
    epoch: Option<BrokerEpoch>,
    fenced: bool,
    next_ms: u64,
    inflight: Option<(u64, u64)>,
    hint: Option<u64>,
    /// Controlled shutdown under way: the process exits at this time at the latest.
    exit_ms: Option<u64>,
}

/// A client request in flight: the request (to send again after NOT_LEADER), hops left.
struct ClientCall {
    request: Body,
    hops: u32,
}

/// Counters for the outcome.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterStats {
    pub registrations: u64,
    pub topics_created: u64,
    pub topics_deleted: u64,
    /// Operations answered REQUEST_TIMED_OUT while their proposals stayed in the log.
    pub timeouts: u64,
    pub fences: u64,
    pub supersessions: u64,
    /// Working copies dropped with an operation in flight (leadership lost meanwhile).
    pub dropped_in_flight: u64,
    /// Controlled shutdowns (shutdown heartbeats, then the process exits).
    pub shutdowns: u64,
    /// Brokers that died (crashed) while their controlled shutdown was under way.
    pub shutdown_deaths: u64,
    /// ElectLeaders requests answered, and leaders the automatic rebalance moved.
    pub elections: u64,
    pub rebalance_moves: u64,
    /// ISR expansions (AlterPartition) the controller accepted.
    pub isr_expansions: u64,
    /// Reassignment requests and ISR expansions accepted (`sim::cluster::reassign`).
    pub reassign_ops: u64,
    /// Leader changes (elections) of partitions while under reassignment.
    pub reassign_elections: u64,
}

/// The cluster layer; see the module docs.
pub struct Cluster {
    ids: Vec<u64>,
    voters: u64,
    active: Vec<Option<Active>>,
    brokers: Vec<Broker>,
    /// Process starts seen per node: a change means the process restarted.
    starts: Vec<u64>,
    clients: BTreeMap<u64, ClientCall>,
    next_rpc: u64,
    next_topic: u64,
    pub calm_created: bool,
    pub stats: ClusterStats,
    pub check: ClusterCheck,
    /// Lines for the failure trace, drained by the simulation every step.
    pub events: Vec<String>,
}

/// The defaults every simulated node runs with.
#[must_use]
pub fn sim_defaults() -> BrokerDefaults {
    BrokerDefaults::from_settings([
        ("broker.session.timeout.ms", SESSION_TIMEOUT_MS.to_string()),
        ("broker.heartbeat.interval.ms", HEARTBEAT_INTERVAL_MS.to_string()),
    ])
    .unwrap_or_default()
}

/// A fresh committed state for node `id`.
#[must_use]
pub fn fresh_state(id: u64) -> ControllerState {
    let node = NodeId(i32::try_from(id).unwrap_or(i32::MAX));
    ControllerState::new(CLUSTER_ID.to_string(), node, 1, sim_defaults())
        .expect("one shard is a valid state")
}

fn send(net: &mut Network, rng: &mut StdRng, now: u64, rpc: Rpc) {
    net.send(rng, now, Packet::Rpc(rpc));
}

fn reply(req: &Rpc, body: Body) -> Rpc {
    Rpc { from: req.to, to: req.from, id: req.id, caller: req.caller, body }
}

fn error_body(err: &ControllerError) -> Body {
    Body::Failed {
        stale_epoch: matches!(err, ControllerError::StaleBrokerEpoch { .. }),
        exists: matches!(err, ControllerError::TopicAlreadyExists(_)),
        reason: err.to_string(),
    }
}

impl Cluster {
    #[must_use]
    pub fn new(ids: &[u64], voters: u64) -> Self {
        let n = ids.len();
        Self {
            ids: ids.to_vec(),
            voters,
            active: (0..n).map(|_| None).collect(),
            brokers: (0..n).map(|_| Broker::default()).collect(),
            starts: vec![0; n],
            clients: BTreeMap::new(),
            next_rpc: 0,
            next_topic: 0,
            calm_created: false,
            stats: ClusterStats::default(),
            check: ClusterCheck::new(),
            events: Vec::new(),
        }
    }

    /// Forgets the process state of nodes that went down or restarted since the last look.
    fn notice_restarts(&mut self, nodes: &[SimNode]) {
        for (i, n) in nodes.iter().enumerate() {
            if !n.is_up() || n.starts != self.starts[i] {
                self.active[i] = None;
                self.brokers[i] = Broker::default();
                if n.is_up() {
                    self.starts[i] = n.starts;
                }
            }
        }
    }

    /// Per tick, before deliveries: brokers send, clients create topics, leaders expire
    /// sessions.
    pub fn step(
        &mut self,
        nodes: &mut [SimNode],
        net: &mut Network,
        rng: &mut StdRng,
        now: u64,
        clients: bool,
    ) -> Result<(), String> {
        self.notice_restarts(nodes);
        let now_ms = now * TICK_MS;
        for i in 0..nodes.len() {
            self.broker_step(i, nodes, net, rng, now, clients);
            if self.ensure_active(i, nodes, now_ms) {
                self.time_out(i, nodes, net, rng, now)?;
                self.expiry(i, nodes, net, rng, now);
                self.rebalance(i, nodes, net, rng, now);
            }
        }
        if clients && rng.gen_range(0..100) < 8 {
            self.client_create(nodes, net, rng, now, None);
        }
        if clients && rng.gen_range(0..100) < 2 {
            // ElectLeaders on every partition; unclean now and then.
            let host = self.ids[rng.gen_range(0..self.ids.len())];
            let kind = if rng.gen_range(0..4) == 0 {
                ElectionType::Unclean
            } else {
                ElectionType::Preferred
            };
            self.client_send(host, nodes, net, rng, now, Body::Elect(kind));
        }
        if clients && rng.gen_range(0..100) < 10 {
            self.isr_expansion(nodes, net, rng, now);
        }
        if clients && rng.gen_range(0..100) < 6 {
            self.client_reassign(nodes, net, rng, now);
        }
        Ok(())
    }

    /// The calm phase's client: creates [`CALM_TOPIC`] until it is answered.
    pub fn calm_step(
        &mut self,
        nodes: &mut [SimNode],
        net: &mut Network,
        rng: &mut StdRng,
        now: u64,
    ) {
        if !self.calm_created && now % 10 == 0 {
            let rf = i16::try_from(self.ids.len().min(3)).unwrap_or(1);
            let topic = NewTopic {
                name: CALM_TOPIC.to_string(),
                num_partitions: 2,
                replication_factor: rf,
                ..NewTopic::default()
            };
            self.client_create(nodes, net, rng, now, Some(topic));
        }
    }

    /// A partition leader's ISR expansion, from its node's committed view (the data plane is
    /// not simulated: a live follower counts as caught up). Stale views are refused by the
    /// controller, as they are in the server.
    fn isr_expansion(&mut self, nodes: &[SimNode], net: &mut Network, rng: &mut StdRng, now: u64) {
        let i = rng.gen_range(0..nodes.len());
        let Some(m) = nodes[i].machine() else { return };
        let me = NodeId(i32::try_from(self.ids[i]).unwrap_or(i32::MAX));
        let image = m.image();
        let live = |r: &NodeId| m.brokers().get(r).is_some_and(|b| !b.fenced);
        let found = image.topics.values().find_map(|t| {
            t.partitions.iter().find_map(|p| {
                let joiner = p.replicas.iter().find(|r| !p.isr.contains(r) && live(r))?;
                (p.leader == me).then(|| {
                    let mut new_isr = p.isr.clone();
                    new_isr.push(*joiner);
                    AlterPartitionRequest {
                        topic_id: t.topic_id,
                        partition: p.index,
                        leader: me,
                        leader_epoch: p.leader_epoch,
                        current_isr: p.isr.clone(),
                        new_isr,
                    }
                })
            })
        });
        if let Some(req) = found {
            let host = self.ids[i];
            self.client_send(host, nodes, net, rng, now, Body::AlterIsr(req));
        }
    }

    fn client_create(
        &mut self,
        nodes: &[SimNode],
        net: &mut Network,
        rng: &mut StdRng,
        now: u64,
        topic: Option<NewTopic>,
    ) {
        let host = self.ids[rng.gen_range(0..self.ids.len())];
        if topic.is_none() && self.next_topic > 0 && rng.gen_range(0..100) < 25 {
            // Deletions, so names come back: a recreated topic gets a new id.
            let name = format!("t{}", rng.gen_range(1..=self.next_topic));
            self.client_send(host, nodes, net, rng, now, Body::DeleteTopic(name));
            return;
        }
        let topic = topic.unwrap_or_else(|| {
            // Names are sometimes reused: a topic created twice must be refused, never
            // recorded twice (which would make every node fail to apply it).
            if self.next_topic == 0 || rng.gen_range(0..100) >= 20 {
                self.next_topic += 1;
            }
            let name = format!("t{}", rng.gen_range(1..=self.next_topic.max(1)));
            NewTopic {
                name,
                num_partitions: rng.gen_range(1..=3),
                replication_factor: rng.gen_range(1..=3),
                ..NewTopic::default()
            }
        });
        self.client_send(host, nodes, net, rng, now, Body::CreateTopic(topic));
    }

    fn client_send(
        &mut self,
        host: u64,
        nodes: &[SimNode],
        net: &mut Network,
        rng: &mut StdRng,
        now: u64,
        body: Body,
    ) {
        let to = self.controller_guess(host, nodes, None, rng);
        self.next_rpc += 1;
        let id = self.next_rpc;
        self.clients.insert(id, ClientCall { request: body.clone(), hops: 3 });
        send(net, rng, now, Rpc { from: host, to, id, caller: Caller::Client, body });
    }

    /// Where a request from `host` goes: its node's leader, a hint, or a random voter.
    fn controller_guess(
        &self,
        host: u64,
        nodes: &[SimNode],
        hint: Option<u64>,
        rng: &mut StdRng,
    ) -> u64 {
        let known = nodes[Self::index(host)].quorum().map_or(0, |q| q.leader_id());
        if known != 0 {
            return known;
        }
        hint.unwrap_or_else(|| rng.gen_range(1..=self.voters))
    }

    fn index(id: u64) -> usize {
        usize::try_from(id - 1).unwrap_or(usize::MAX)
    }

    /// After node `i` handled its readies: settle its proposals against what it applied.
    pub fn after_drain(
        &mut self,
        i: usize,
        nodes: &mut [SimNode],
        check: &Checker,
        net: &mut Network,
        rng: &mut StdRng,
        now: u64,
    ) -> Result<(), String> {
        self.notice_restarts(nodes);
        let Some(a) = self.active[i].as_mut() else { return Ok(()) };
        let Some(q) = nodes[i].quorum() else { return Ok(()) };
        if q.role() != StateRole::Leader || q.term() != a.term {
            // The driver fails pending proposals with Superseded when the node steps down.
            self.drop_active(i, net, rng, now);
            return Ok(());
        }
        let applied = nodes[i].applied_index();
        let settled: Vec<u64> = a.proposed.range(..=applied).map(|(k, _)| *k).collect();
        let any_settled = !settled.is_empty();
        for index in settled {
            let Some((term, frame)) = a.proposed.remove(&index) else { continue };
            let ours = check.entry(index).is_some_and(|(t, d)| *t == term && d[..] == frame[..]);
            if !ours {
                self.stats.supersessions += 1;
                self.drop_active(i, net, rng, now);
                return Ok(());
            }
        }
        if any_settled && a.proposed.is_empty() {
            // Everything the working copy proposed is applied: it must now equal the
            // committed copy (operations applied at once = their frames replayed).
            if let Some(committed) = nodes[i].machine() {
                if masked_snapshot(&a.working) != masked_snapshot(committed) {
                    return Err(format!(
                        "node {}: the working copy of term {} differs from the committed state \
                         once all its proposals are applied (index {applied})",
                        self.ids[i], a.term
                    ));
                }
            }
        }
        if a.running.as_ref().is_some_and(|(index, _)| *index <= applied) {
            if let Some((_, Some(r))) = a.running.take() {
                send(net, rng, now, r);
            }
        }
        self.run_queued(i, nodes, net, rng, now)
    }

    /// A cluster RPC arrives at its destination (`connected`: the partition let it through).
    pub fn deliver(
        &mut self,
        rpc: Rpc,
        connected: bool,
        nodes: &mut [SimNode],
        net: &mut Network,
        rng: &mut StdRng,
        now: u64,
    ) -> Result<(), String> {
        let i = Self::index(rpc.to);
        if !connected || !nodes[i].is_up() {
            return Ok(());
        }
        self.notice_restarts(nodes);
        match rpc.body {
            Body::Register(_)
            | Body::Heartbeat(_)
            | Body::CreateTopic(_)
            | Body::DeleteTopic(_)
            | Body::Elect(_)
            | Body::AlterIsr(_)
            | Body::Reassign { .. }
            | Body::ExpandIsr(_) => self.serve(i, rpc, nodes, net, rng, now),
            _ => self.answer(i, rpc, nodes, net, rng, now),
        }
    }

    /// What each node's committed state holds of the brokers and the calm topic, and what
    /// each broker believes (for a liveness failure report).
    #[must_use]
    pub fn describe(&self, nodes: &[SimNode]) -> String {
        let mut out = Vec::new();
        for (n, b) in nodes.iter().zip(&self.brokers) {
            let state = n.machine().map(|m| {
                let brokers: Vec<_> =
                    m.brokers().iter().map(|(id, r)| (id.0, r.epoch, r.fenced)).collect();
                let calm = m
                    .image()
                    .topics
                    .get(CALM_TOPIC)
                    .map(|t| t.partitions.iter().map(|p| p.leader.0).collect::<Vec<_>>());
                format!("applied {} brokers {brokers:?} calm leaders {calm:?}", n.applied_index())
            });
            out.push(format!(
                "node {}: {} | broker epoch {:?} fenced {}",
                n.id,
                state.unwrap_or_else(|| "down".to_string()),
                b.epoch.map(|e| e.0),
                b.fenced
            ));
        }
        out.join("; ")
    }

    /// Calm-phase liveness: every node up and holding every broker registered (its current
    /// incarnation), unfenced, and the calm topic with a leader for each partition.
    #[must_use]
    pub fn settled(&self, nodes: &[SimNode]) -> bool {
        nodes.iter().all(|n| {
            let Some(m) = n.machine() else { return false };
            let brokers_ok = self.ids.iter().zip(&self.brokers).all(|(id, b)| {
                let node = NodeId(i32::try_from(*id).unwrap_or(i32::MAX));
                m.brokers().get(&node).is_some_and(|r| {
                    !r.fenced && Some(r.incarnation_id) == b.incarnation && !b.fenced
                })
            });
            let image = m.image();
            let topic_ok = image
                .topics
                .get(CALM_TOPIC)
                .is_some_and(|t| t.partitions.iter().all(|p| p.leader != NO_LEADER));
            brokers_ok && topic_ok
        })
    }
}
