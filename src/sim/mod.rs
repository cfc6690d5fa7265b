//! A deterministic simulator of the Raft quorum ([`crate::quorum`]): several nodes (3 or 5
//! voters and a learner) in one thread, a seeded RNG, virtual time in ticks, a network that
//! loses, delays, duplicates, reorders and partitions ([`net`]), and nodes that crash, lose
//! power or hit disk faults on the in-memory file system ([`node`]), while clients propose
//! entries throughout. Invariants ([`check`]) are checked after every step.
//!
//! Runs in tests only, on one thread, without glommio: the in-memory file system's
//! operations never wait on anything, so `futures::executor::block_on` drives them. The seed
//! decides everything (raft-rs's own election randomness is pinned, see [`crate::quorum`]),
//! so a failure names its seed and `SHARDLOG_SIM_SEED=N` replays it exactly.
//!
//! A run: `chaos_ticks` of faults, then a calm phase (partitions healed, every node up, no
//! loss) in which a leader must emerge and a new proposal must reach every node within
//! `calm_ticks` (liveness).
//!
//! A *cluster* run ([`SimConfig::cluster_for_seed`], [`cluster`]) puts the controller on
//! top: every node's state machine is a real `ControllerState`, the leader runs the active
//! controller as the server does, brokers register and heartbeat, clients create topics;
//! its liveness is every broker registered and unfenced, and a new topic led, everywhere.

pub mod check;
pub mod cluster;
mod cluster_check;
pub mod executor;
pub mod net;
pub mod node;
pub mod replication;

use std::collections::VecDeque;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use self::check::Checker;
use self::cluster::{Cluster, ClusterStats};
use self::net::{NetFaults, Network, Packet};
use self::node::{NodeError, SimNode, MARKER_PREFIX};
use crate::io::mem::FaultPlan;
use crate::quorum::{ConfState, Message, StateRole};
use raft::prelude::MessageType;

/// Trace lines kept for a failure report.
const TRACE_LINES_MAX: usize = 40;

/// The shape of one run.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    pub voters: u64,
    pub learners: u64,
    pub chaos_ticks: u64,
    pub calm_ticks: u64,
    /// Run the controller and broker lifecycle on top ([`cluster`]).
    pub cluster: bool,
}

impl SimConfig {
    /// Even seeds run 3 voters, odd ones 5; one learner each.
    #[must_use]
    pub fn for_seed(seed: u64) -> Self {
        let voters = if seed % 2 == 0 { 3 } else { 5 };
        Self { seed, voters, learners: 1, chaos_ticks: 400, calm_ticks: 300, cluster: false }
    }

    /// A cluster run: as [`SimConfig::for_seed`], with the controller and brokers on top.
    #[must_use]
    pub fn cluster_for_seed(seed: u64) -> Self {
        Self { cluster: true, ..Self::for_seed(seed) }
    }
}

/// What a successful run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub ticks: u64,
    pub committed: usize,
    pub leader_terms: usize,
    pub crashes: u64,
    pub power_losses: u64,
    pub disk_faults: u64,
    pub partitions: u64,
    pub snapshots_sent: u64,
    /// Cluster runs: broker registrations answered, topics created, brokers fenced in the
    /// committed log, working copies dropped because a proposal was superseded.
    pub cluster: ClusterStats,
    /// Digest of the committed log and the leaders: equal for equal seeds.
    pub digest: u64,
}

/// A failed run: its seed, when, why, and the events that led there.
#[derive(Debug)]
pub struct SimFailure {
    pub seed: u64,
    /// The integration test that replays it.
    pub test: &'static str,
    pub tick: u64,
    pub reason: String,
    pub trace: Vec<String>,
}

impl fmt::Display for SimFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} simulation failed: seed {} at tick {}: {}",
            match self.test {
                "cluster_sim" => "cluster",
                "replication_sim" => "replication",
                _ => "quorum",
            },
            self.seed,
            self.tick,
            self.reason
        )?;
        writeln!(f, "replay: SHARDLOG_SIM_SEED={} cargo test --test {}", self.seed, self.test)?;
        writeln!(f, "last events:")?;
        for line in &self.trace {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

/// The seeds a simulation test runs: `SHARDLOG_SIM_SEED=N` replays one; otherwise
/// `SHARDLOG_SIM_SEEDS` (default `default_count`) from `SHARDLOG_SIM_SEED_BASE` (default 0).
#[must_use]
pub fn seeds_from_env(default_count: u64) -> std::ops::Range<u64> {
    if let Some(seed) = env_u64("SHARDLOG_SIM_SEED") {
        return seed..seed + 1;
    }
    let base = env_u64("SHARDLOG_SIM_SEED_BASE").unwrap_or(0);
    base..base + env_u64("SHARDLOG_SIM_SEEDS").unwrap_or(default_count)
}

/// A numeric environment variable; a value that is not a number is a test setup error.
#[must_use]
pub fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(v.parse().unwrap_or_else(|_| panic!("{name}={v} is not a number")))
}

/// A caught panic as a failure reason.
pub(crate) fn panic_reason(panic: &(dyn std::any::Any + Send)) -> String {
    let msg = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_string()))
        .unwrap_or_default();
    format!("panic: {msg}")
}

/// Runs one simulation.
pub fn run(cfg: &SimConfig) -> Result<Outcome, SimFailure> {
    let mut sim = Sim::new(cfg.clone());
    let result = catch_unwind(AssertUnwindSafe(|| sim.run()));
    let reason = match result {
        Ok(Ok(())) => return Ok(sim.outcome()),
        Ok(Err(reason)) => reason,
        Err(panic) => panic_reason(&*panic),
    };
    let test = if cfg.cluster { "cluster_sim" } else { "quorum_sim" };
    Err(SimFailure { seed: cfg.seed, test, tick: sim.now, reason, trace: sim.trace.into() })
}

struct Sim {
    cfg: SimConfig,
    rng: StdRng,
    now: u64,
    nodes: Vec<SimNode>,
    conf: ConfState,
    net: Network,
    check: Checker,
    next_value: u64,
    trace: VecDeque<String>,
    stats: Outcome,
    cluster: Option<Cluster>,
}

impl Sim {
    fn new(cfg: SimConfig) -> Self {
        let mut rng = StdRng::seed_from_u64(cfg.seed);
        let ids: Vec<u64> = (1..=cfg.voters + cfg.learners).collect();
        let conf = ConfState::from((
            ids[..cfg.voters as usize].to_vec(),
            ids[cfg.voters as usize..].to_vec(),
        ));
        let nodes = ids
            .iter()
            .map(|id| {
                let template = cfg.cluster.then(|| cluster::fresh_state(*id));
                SimNode::new(*id, rng.gen_range(4..40), template)
            })
            .collect();
        let cluster = cfg.cluster.then(|| Cluster::new(&ids, cfg.voters));
        Self {
            cluster,
            cfg,
            rng,
            now: 0,
            nodes,
            conf,
            net: Network::new(NetFaults::hostile()),
            check: Checker::default(),
            next_value: 0,
            trace: VecDeque::new(),
            stats: Outcome::default(),
        }
    }

    fn log(&mut self, line: String) {
        if self.trace.len() == TRACE_LINES_MAX {
            self.trace.pop_front();
        }
        self.trace.push_back(format!("t{} {line}", self.now));
    }

    fn outcome(&self) -> Outcome {
        Outcome {
            ticks: self.now,
            committed: self.check.committed_len(),
            leader_terms: self.check.terms_with_leader(),
            digest: self.check.digest(),
            cluster: self.cluster.as_ref().map_or_else(ClusterStats::default, |c| ClusterStats {
                fences: c.check.fences,
                reassign_elections: c.check.reassign_elections,
                ..c.stats.clone()
            }),
            ..self.stats.clone()
        }
    }

    fn run(&mut self) -> Result<(), String> {
        for i in 0..self.nodes.len() {
            self.nodes[i].start(&self.conf, &self.check)?;
        }
        while self.now < self.cfg.chaos_ticks {
            self.inject_faults()?;
            self.step(true)?;
        }
        self.calm()
    }

    /// Stops the faults and waits for a leader and a committed marker on every node.
    fn calm(&mut self) -> Result<(), String> {
        self.log("calm: faults stop".to_string());
        self.net.heal();
        self.net.faults = NetFaults::calm();
        for i in 0..self.nodes.len() {
            self.nodes[i].set_disk_fault(FaultPlan::default());
            if !self.nodes[i].is_up() {
                self.nodes[i].start(&self.conf, &self.check)?;
            }
        }
        let end = self.now + self.cfg.calm_ticks;
        while self.now < end {
            if let Some(c) = self.cluster.as_mut() {
                c.calm_step(&mut self.nodes, &mut self.net, &mut self.rng, self.now);
            } else if self.now % 5 == 0 {
                self.propose_marker();
            }
            self.step(false)?;
            let done = match &self.cluster {
                Some(c) => c.settled(&self.nodes),
                None => self.nodes.iter().all(|n| n.markers > 0),
            };
            if done {
                return Ok(());
            }
        }
        let leaders: Vec<(u64, u64)> = (0..self.nodes.len())
            .filter_map(|i| self.nodes[i].node().map(|n| (n.id(), n.leader_id())))
            .collect();
        let cluster = self.cluster.as_ref().map(|c| c.describe(&self.nodes)).unwrap_or_default();
        Err(format!(
            "no progress {} ticks after faults stopped: (node, leader) {leaders:?} {cluster}",
            self.cfg.calm_ticks
        ))
    }

    fn propose_marker(&mut self) {
        self.next_value += 1;
        let data = [MARKER_PREFIX, self.next_value.to_string().as_bytes()].concat();
        for n in &mut self.nodes {
            if let Some(node) = n.node().filter(|q| q.role() == StateRole::Leader) {
                let _ = node.propose(data.clone());
            }
        }
    }

    /// One virtual tick: jittered raft ticks, client proposals, deliveries, readies.
    fn step(&mut self, chaos: bool) -> Result<(), String> {
        self.now += 1;
        for i in 0..self.nodes.len() {
            // 0, 1 or 2 raft ticks: the seeded jitter raft-rs's pinned timeout lacks.
            let ticks = match self.rng.gen_range(0..10) {
                0 => 0,
                9 => 2,
                _ => 1,
            };
            if let Some(node) = self.nodes[i].node() {
                for _ in 0..ticks {
                    node.tick();
                }
            }
            self.check_leader(i)?;
        }
        if let Some(c) = self.cluster.as_mut() {
            let stepped = c.step(&mut self.nodes, &mut self.net, &mut self.rng, self.now, chaos);
            for line in std::mem::take(&mut c.events) {
                self.log(line);
            }
            stepped?;
        } else if chaos && self.rng.gen_range(0..100) < 30 {
            let i = self.rng.gen_range(0..self.nodes.len());
            self.next_value += 1;
            let data = format!("v{}", self.next_value).into_bytes();
            if let Some(node) = self.nodes[i].node() {
                let _ = node.propose(data);
            }
        }
        for (msg, connected) in self.net.due(self.now) {
            self.deliver(msg, connected)?;
        }
        for i in 0..self.nodes.len() {
            self.drain(i, chaos)?;
        }
        if let Some(c) = self.cluster.as_mut() {
            let events = std::mem::take(&mut c.events);
            let checked = c.check.check(&self.check, &self.nodes);
            for line in events {
                self.log(line);
            }
            checked?;
        }
        Ok(())
    }

    fn index(id: u64) -> usize {
        usize::try_from(id - 1).unwrap_or(usize::MAX)
    }

    fn deliver(&mut self, packet: Packet, connected: bool) -> Result<(), String> {
        let msg = match packet {
            Packet::Raft(m) => m,
            Packet::Rpc(rpc) => {
                let Some(c) = self.cluster.as_mut() else { return Ok(()) };
                return c.deliver(
                    rpc,
                    connected,
                    &mut self.nodes,
                    &mut self.net,
                    &mut self.rng,
                    self.now,
                );
            }
        };
        let (from, to) = (msg.from, msg.to);
        let snapshot = msg.get_msg_type() == MessageType::MsgSnapshot;
        let i = Self::index(to);
        let delivered = match self.nodes[i].node() {
            Some(node) if connected => {
                // Errors here are raft-rs refusing a message (e.g. from an unknown peer).
                let _ = node.step(msg);
                true
            }
            _ => false,
        };
        self.check_leader(i)?;
        if snapshot {
            if let Some(sender) = self.nodes[Self::index(from)].node() {
                sender.report_snapshot(to, delivered);
            }
        }
        Ok(())
    }

    fn drain(&mut self, i: usize, chaos: bool) -> Result<(), String> {
        let voted = self.nodes[i].acked_term_vote();
        match self.nodes[i].drain(&mut self.check) {
            Ok(msgs) => {
                for m in msgs {
                    self.send(m);
                }
            }
            Err(NodeError::Disk(e)) => {
                let id = self.nodes[i].id;
                self.log(format!("node {id} disk error, crashes: {e}"));
                self.nodes[i].crash();
            }
            Err(NodeError::Invariant(e)) => return Err(e),
        }
        self.check_leader(i)?;
        if let Some(c) = self.cluster.as_mut() {
            c.after_drain(i, &mut self.nodes, &self.check, &mut self.net, &mut self.rng, self.now)?;
        }
        let now_voted = self.nodes[i].acked_term_vote();
        if chaos && now_voted != voted && now_voted.1 != 0 && self.rng.gen_range(0..100) < 10 {
            // The moment a forgotten vote would do harm: crash right after voting, come back
            // at once, still in the same election.
            self.restart_at_once(i)?;
        }
        Ok(())
    }

    fn restart_at_once(&mut self, i: usize) -> Result<(), String> {
        let id = self.nodes[i].id;
        if self.rng.gen_range(0..2) == 0 {
            self.stats.crashes += 1;
            self.log(format!("node {id} crashes after voting and restarts"));
            self.nodes[i].crash();
        } else {
            self.stats.power_losses += 1;
            self.log(format!("node {id} loses power after voting and restarts"));
            self.nodes[i].power_loss();
        }
        self.nodes[i].start(&self.conf, &self.check)
    }

    fn send(&mut self, m: Message) {
        let (from, to) = (m.from, m.to);
        let snapshot = m.get_msg_type() == MessageType::MsgSnapshot;
        if snapshot {
            self.stats.snapshots_sent += 1;
        }
        if !self.net.send(&mut self.rng, self.now, Packet::Raft(m)) && snapshot {
            if let Some(sender) = self.nodes[Self::index(from)].node() {
                sender.report_snapshot(to, false);
            }
        }
    }

    fn check_leader(&mut self, i: usize) -> Result<(), String> {
        let Some(node) = self.nodes[i].node() else { return Ok(()) };
        if node.role() != StateRole::Leader {
            return Ok(());
        }
        let (term, id) = (node.term(), node.id());
        self.check.leader(term, id)
    }

    fn inject_faults(&mut self) -> Result<(), String> {
        let up: Vec<usize> = (0..self.nodes.len()).filter(|i| self.nodes[*i].is_up()).collect();
        let victim = (!up.is_empty()).then(|| up[self.rng.gen_range(0..up.len())]);
        match (self.rng.gen_range(0..1000), victim) {
            (0..=3, Some(i)) => {
                self.stats.crashes += 1;
                self.log(format!("node {} crashes", self.nodes[i].id));
                self.nodes[i].crash();
            }
            (4..=6, Some(i)) => {
                self.stats.power_losses += 1;
                self.log(format!("node {} loses power", self.nodes[i].id));
                self.nodes[i].power_loss();
            }
            (7..=9, Some(i)) => self.arm_disk_fault(i),
            (10..=14, Some(i)) => {
                let id = self.nodes[i].id;
                self.log(format!("node {id} campaigns"));
                if let Some(node) = self.nodes[i].node() {
                    let _ = node.campaign();
                }
            }
            (15..=24, _) => {
                self.stats.partitions += 1;
                let ids: Vec<u64> = self.nodes.iter().map(|n| n.id).collect();
                let line = self.net.partition(&mut self.rng, &ids);
                self.log(line);
            }
            (25..=54, _) if self.net.partitioned() => {
                self.net.heal();
                self.log("network heals".to_string());
            }
            _ => {}
        }
        for i in 0..self.nodes.len() {
            if !self.nodes[i].is_up() && self.rng.gen_range(0..100) < 5 {
                self.log(format!("node {} restarts", self.nodes[i].id));
                self.nodes[i].start(&self.conf, &self.check)?;
            }
        }
        Ok(())
    }

    fn arm_disk_fault(&mut self, i: usize) {
        self.stats.disk_faults += 1;
        let plan = match self.rng.gen_range(0..3) {
            0 => FaultPlan {
                tear_write: Some((1, self.rng.gen_range(0..8192))),
                ..FaultPlan::default()
            },
            1 => FaultPlan { fail_sync: Some(1), ..FaultPlan::default() },
            _ => FaultPlan { fail_write: Some(1), ..FaultPlan::default() },
        };
        self.log(format!("node {} disk fault armed: {plan:?}", self.nodes[i].id));
        self.nodes[i].set_disk_fault(plan);
    }
}
