//! A deterministic simulation of one partition's replication on the shipped code: three
//! replicas, each a real [`PartitionLog`](crate::storage::PartitionLog) on its own
//! in-memory file system, the real leader state and follower fetch answer
//! (`partition::{leader, replicas, replica_fetch}`) and the real fetcher and driver
//! (`replication::{fetcher, driver, truncation}`), under a controller model that elects
//! leaders from the ISR and accepts the leaders' AlterPartition, while an idempotent acks=all
//! producer writes. Faults: processes killed (completed writes survive) or powered off
//! (only synced data survives) and restarted, leadership moved, metadata applied late.
//!
//! Runs in tests, on one thread, on the virtual-time [`SimExecutor`]; a seed decides every
//! step, so a failure names its seed and `SHARDLOG_SIM_SEED=N` replays it.
//!
//! Checked after every step: a new leader holds every acknowledged batch at its offset; the
//! high watermark never moves back within a leader epoch; a batch is never acknowledged at
//! two offsets. Then a calm phase (every node up, no faults) in which the followers must
//! converge, each with at most one truncation per epoch it holds plus one, after which every
//! log is the leader's byte for byte, the ISR is whole, and the leader's log holds every
//! acknowledged batch once.

mod check;
pub mod node;

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use self::node::{fetch_once, Meta, Node};
use super::executor::{SimExecutor, SimRuntime};
use super::SimFailure;
use crate::io::mem::MemFileSystem;
use crate::io::Runtime;
use crate::partition::replicas::{AckState, ReplicaSettings};
use crate::storage::batch::recompute_crc;
use crate::storage::records::build_simple_batch;
use crate::types::{Epoch, NodeId, Offset};

/// Replicas of the simulated partition.
const REPLICAS: i32 = 3;
const PRODUCER_ID: i64 = 1000;
/// Kafka's default for an idempotent producer (`max.in.flight.requests.per.connection`).
const IN_FLIGHT_MAX: usize = 5;
/// `replica.lag.time.max.ms` in the simulation: short, so ISR changes happen.
const LAG_TIME_MAX_MS: i64 = 2_000;
const MIN_INSYNC_REPLICAS: i32 = 2;
/// Calm-phase rounds before the followers must have converged.
const SETTLE_ROUNDS_MAX: usize = 300;
/// Virtual time a whole run may take (a stuck run fails instead of spinning).
const RUN_TIME_MAX_MS: u64 = 24 * 3_600 * 1_000;
const TRACE_LINES_MAX: usize = 60;

/// The shape of one run.
#[derive(Clone, Debug)]
pub struct ReplicationSimConfig {
    pub seed: u64,
    /// Random steps before the calm phase.
    pub steps: usize,
}

impl ReplicationSimConfig {
    #[must_use]
    pub fn for_seed(seed: u64) -> Self {
        ReplicationSimConfig { seed, steps: 300 }
    }
}

/// What a successful run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplicationOutcome {
    pub acked_batches: usize,
    pub elections: usize,
    pub kills: usize,
    pub power_losses: usize,
    /// Truncations by every follower over the whole run.
    pub truncations: usize,
    /// The most truncations one follower made in the calm phase.
    pub settle_truncations_max: usize,
    pub settle_rounds: usize,
    /// The final log end.
    pub log_end: i64,
}

/// Runs one simulation.
pub fn run(cfg: &ReplicationSimConfig) -> Result<ReplicationOutcome, SimFailure> {
    let trace: Rc<RefCell<VecDeque<String>>> = Rc::default();
    let now = Rc::new(std::cell::Cell::new(0u64));
    let (t, n) = (trace.clone(), now.clone());
    let cfg2 = cfg.clone();
    let result = catch_unwind(AssertUnwindSafe(move || {
        let mut ex = SimExecutor::new();
        let world = World::new(&cfg2, ex.runtime(), t, n);
        ex.block_on(world.run(cfg2.steps), RUN_TIME_MAX_MS)
    }));
    let reason = match result {
        Ok(Ok(Ok(outcome))) => return Ok(outcome),
        Ok(Ok(Err(reason))) => reason,
        Ok(Err(stalled)) => stalled.to_string(),
        Err(panic) => super::panic_reason(&*panic),
    };
    let trace = trace.borrow().iter().cloned().collect();
    Err(SimFailure { seed: cfg.seed, test: "replication_sim", tick: now.get(), reason, trace })
}

/// One batch the producer sends (retried with the same sequence until acknowledged).
struct Batch {
    sequence: i32,
    bytes: Bytes,
    acked_at: Option<Offset>,
}

/// A batch appended by a leader, waiting for acks=all.
struct Pending {
    batch: usize,
    node: NodeId,
    epoch: Epoch,
    base: Offset,
    end: Offset,
}

struct World {
    rng: StdRng,
    rt: Rc<SimRuntime>,
    nodes: Vec<Node>,
    ctrl: Meta,
    batches: Vec<Batch>,
    pending: Vec<Pending>,
    /// Acknowledged batches: sequence -> base offset.
    acked: BTreeMap<i32, Offset>,
    /// Highest high watermark seen per (leader, epoch).
    hw_seen: BTreeMap<(NodeId, Epoch), Offset>,
    trace: Rc<RefCell<VecDeque<String>>>,
    now_out: Rc<std::cell::Cell<u64>>,
    out: ReplicationOutcome,
}

fn idx(id: NodeId) -> usize {
    usize::try_from(id.0 - 1).expect("node ids start at 1")
}

impl World {
    fn new(
        cfg: &ReplicationSimConfig,
        rt: Rc<SimRuntime>,
        trace: Rc<RefCell<VecDeque<String>>>,
        now_out: Rc<std::cell::Cell<u64>>,
    ) -> Self {
        let ids: Vec<NodeId> = (1..=REPLICAS).map(NodeId).collect();
        let ctrl = Meta {
            version: 1,
            leader: Some(NodeId(1)),
            epoch: Epoch(0),
            replicas: ids.clone(),
            isr: ids.clone(),
        };
        let settings = ReplicaSettings {
            lag_time_max_ms: LAG_TIME_MAX_MS,
            min_insync_replicas: MIN_INSYNC_REPLICAS,
        };
        let nodes = ids
            .iter()
            .map(|id| {
                let fs = Rc::new(MemFileSystem::with_runtime(rt.clone()));
                Node::new(*id, fs, &ctrl, settings)
            })
            .collect();
        World {
            rng: StdRng::seed_from_u64(cfg.seed),
            rt,
            nodes,
            ctrl,
            batches: Vec::new(),
            pending: Vec::new(),
            acked: BTreeMap::new(),
            hw_seen: BTreeMap::new(),
            trace,
            now_out,
            out: ReplicationOutcome::default(),
        }
    }

    fn now_ms(&self) -> i64 {
        self.rt.now_ms()
    }

    fn log(&self, line: String) {
        let mut t = self.trace.borrow_mut();
        if t.len() == TRACE_LINES_MAX {
            t.pop_front();
        }
        let ms = u64::try_from(self.rt.monotonic().as_millis()).unwrap_or(0);
        t.push_back(format!("t{ms} {line}"));
    }

    async fn run(mut self, steps: usize) -> Result<ReplicationOutcome, String> {
        for i in 0..self.nodes.len() {
            self.nodes[i].start().await.map_err(|e| e.to_string())?;
        }
        let meta = self.ctrl.clone();
        for i in 0..self.nodes.len() {
            self.apply(i, &meta).await?;
        }
        for _ in 0..steps {
            self.step().await?;
            self.after_step().await?;
        }
        self.settle().await?;
        self.out.log_end = self.leader_log()?.log_end_offset().0;
        Ok(self.out)
    }

    async fn step(&mut self) -> Result<(), String> {
        match self.rng.gen_range(0..100) {
            0..=29 => self.produce().await,
            30..=59 => self.fetch_some().await,
            60..=67 => self.alter_isr().await,
            68..=79 => self.apply_some().await,
            80..=83 => self.kill_some().await,
            84..=89 => self.restart_some().await,
            90..=93 => self.move_leader().await,
            _ => Ok(()),
        }
    }

    /// Lets every task run, moves the clock, settles acks and checks the high watermarks.
    async fn after_step(&mut self) -> Result<(), String> {
        let ms = self.rng.gen_range(1..60);
        self.rt.sleep(Duration::from_millis(ms)).await;
        self.now_out.set(u64::try_from(self.rt.monotonic().as_millis()).unwrap_or(0));
        self.settle_acks()?;
        let now = self.now_ms();
        for n in &self.nodes {
            let Some(log) = n.log().filter(|_| n.leads()) else { continue };
            let hw = n.replication().high_watermark(log, now);
            let seen = self.hw_seen.entry((n.id, n.seen.epoch)).or_insert(hw);
            if hw < *seen {
                return Err(format!(
                    "node {} epoch {}: high watermark went back from {} to {hw}",
                    n.id, n.seen.epoch, *seen
                ));
            }
            *seen = hw;
        }
        Ok(())
    }

    async fn apply(&mut self, i: usize, meta: &Meta) -> Result<(), String> {
        let now = self.now_ms();
        self.nodes[i].apply(meta, now).await.map_err(|e| format!("node {}: {e}", i + 1))
    }

    /// The next batch to send: the first unacknowledged one not already in flight to this
    /// leader epoch, in order; a new one past the end.
    fn next_batch(&mut self, node: NodeId, epoch: Epoch) -> Option<usize> {
        let in_flight = |p: &Pending, b: usize| p.batch == b && p.node == node && p.epoch == epoch;
        let first = self.batches.iter().position(|b| b.acked_at.is_none());
        let first = first.unwrap_or(self.batches.len());
        let flying = self.pending.iter().filter(|p| p.node == node && p.epoch == epoch).count();
        if flying >= IN_FLIGHT_MAX {
            return None;
        }
        let next =
            (first..self.batches.len()).find(|b| !self.pending.iter().any(|p| in_flight(p, *b)));
        if let Some(b) = next {
            return Some(b);
        }
        let sequence = self.batches.last().map_or(0, |b| b.sequence + record_count(&b.bytes));
        let count = self.rng.gen_range(1..4);
        self.batches.push(Batch {
            sequence,
            bytes: idempotent_batch(sequence, count),
            acked_at: None,
        });
        Some(self.batches.len() - 1)
    }

    async fn produce(&mut self) -> Result<(), String> {
        // Mostly to the controller's leader; sometimes to whichever node still believes it
        // leads (a producer with stale metadata).
        let target = if self.rng.gen_bool(0.8) {
            self.ctrl.leader
        } else {
            let believers: Vec<NodeId> =
                self.nodes.iter().filter(|n| n.leads()).map(|n| n.id).collect();
            pick(&mut self.rng, &believers)
        };
        let Some(id) = target else { return Ok(()) };
        let i = idx(id);
        if !self.nodes[i].leads() || self.nodes[i].replication().check_produce().is_err() {
            return Ok(());
        }
        let epoch = self.nodes[i].seen.epoch;
        let Some(b) = self.next_batch(id, epoch) else { return Ok(()) };
        let replica = self.nodes[i].replica.as_ref().expect("a leader is up");
        // The shipped leader write: append at the replica's leader epoch, wake the
        // followers, wait for the flush policy's durability.
        match replica.append_as_leader(self.batches[b].bytes.clone()).await {
            Ok(appended) => {
                let (info, epoch) = (appended.info, appended.epoch);
                let seq = self.batches[b].sequence;
                let dup = if info.duplicate { " (duplicate)" } else { "" };
                self.log(format!(
                    "node {id} epoch {epoch} appended seq {seq} at {}..={}{dup}",
                    info.base_offset, info.last_offset
                ));
                let end = Offset(info.last_offset.0 + 1);
                self.pending.push(Pending {
                    batch: b,
                    node: id,
                    epoch,
                    base: info.base_offset,
                    end,
                });
            }
            Err(e) => self.log(format!("node {id} refused seq {}: {e}", self.batches[b].sequence)),
        }
        Ok(())
    }

    /// acks=all: a batch is acknowledged once its leader's high watermark passed it, and
    /// fails if the leader lost its leadership first (the producer retries it).
    fn settle_acks(&mut self) -> Result<(), String> {
        let now = self.now_ms();
        let mut keep = Vec::new();
        for p in std::mem::take(&mut self.pending) {
            // A request to a process that died gets no answer (the producer retries).
            let Some(replica) = self.nodes[idx(p.node)].replica.as_ref() else { continue };
            // The shipped acks=all decision: refused once the leadership moved.
            match replica.ack_state(p.epoch, p.end, now) {
                Ok(AckState::Waiting) => keep.push(p),
                Ok(AckState::Done) => {
                    let b = &mut self.batches[p.batch];
                    if let Some(at) = b.acked_at.filter(|at| *at != p.base) {
                        return Err(format!(
                            "sequence {} acknowledged at {at} and again at {}",
                            b.sequence, p.base
                        ));
                    }
                    b.acked_at = Some(p.base);
                    self.acked.insert(b.sequence, p.base);
                    self.out.acked_batches = self.acked.len();
                }
                Err(_) => {}
            }
        }
        self.pending = keep;
        Ok(())
    }

    async fn fetch_some(&mut self) -> Result<(), String> {
        let followers: Vec<usize> = (0..self.nodes.len())
            .filter(|i| self.nodes[*i].is_up() && self.nodes[*i].fetcher.is_some())
            .collect();
        let Some(f) = pick(&mut self.rng, &followers) else { return Ok(()) };
        self.fetch(f).await
    }

    async fn fetch(&mut self, f: usize) -> Result<(), String> {
        let Some(leader) = self.nodes[f].fetcher.as_ref().map(|x| x.leader) else { return Ok(()) };
        let l = idx(leader);
        let now = self.now_ms();
        let (follower, leader_node) = pair(&mut self.nodes, f, l);
        let before = follower.truncations;
        match fetch_once(follower, leader_node, now).await {
            Ok(Some(stats)) if stats.truncations + stats.appended_batches > 0 => {
                let end = follower.log().map_or(-1, |l| l.log_end_offset().0);
                let line = format!(
                    "node {} fetched from {leader}: {} batches, {} truncations, log end {end}",
                    f + 1,
                    stats.appended_batches,
                    follower.truncations - before
                );
                self.log(line);
            }
            _ => {}
        }
        Ok(())
    }

    /// The leader proposes an ISR change; the controller takes it if the leader and its
    /// epoch are still current (Kafka's AlterPartition), and the leader learns the answer.
    async fn alter_isr(&mut self) -> Result<(), String> {
        let leaders: Vec<usize> =
            (0..self.nodes.len()).filter(|i| self.nodes[*i].leads()).collect();
        let Some(i) = pick(&mut self.rng, &leaders) else { return Ok(()) };
        let now = self.now_ms();
        let up: Vec<bool> = self.nodes.iter().map(Node::is_up).collect();
        let n = &self.nodes[i];
        let end = n.log().expect("a leader is up").log_end_offset();
        let Some(change) = n.replication().with(|r| r.isr_change(end, now, |id| up[idx(id)]))
        else {
            return Ok(());
        };
        // The request names the partition epoch the leader knows (here: the metadata
        // version); the controller refuses a stale one (INVALID_UPDATE_VERSION), so an ISR
        // built on an outdated view never replaces a newer one.
        let current = self.ctrl.leader == Some(n.id) && self.ctrl.version == n.seen.version;
        if current {
            self.log(format!("node {} ISR {:?} -> {:?}", n.id, self.ctrl.isr, change.new_isr()));
            self.ctrl.isr = change.new_isr().to_vec();
            self.ctrl.version += 1;
            let meta = self.ctrl.clone();
            return self.apply(i, &meta).await;
        }
        let isr = n.seen.isr.clone();
        n.replication().with(|r| r.apply_isr(&isr));
        Ok(())
    }

    async fn apply_some(&mut self) -> Result<(), String> {
        let stale: Vec<usize> = (0..self.nodes.len())
            .filter(|i| self.nodes[*i].is_up() && self.nodes[*i].seen.version < self.ctrl.version)
            .collect();
        let Some(i) = pick(&mut self.rng, &stale) else { return Ok(()) };
        let meta = self.ctrl.clone();
        self.apply(i, &meta).await
    }

    async fn kill_some(&mut self) -> Result<(), String> {
        let up: Vec<usize> = (0..self.nodes.len()).filter(|i| self.nodes[*i].is_up()).collect();
        let Some(i) = pick(&mut self.rng, &up) else { return Ok(()) };
        let power = self.rng.gen_bool(0.3);
        let disk = if power { self.nodes[i].fs.power_loss() } else { self.nodes[i].fs.crash() };
        let id = self.nodes[i].id;
        self.log(format!("node {id} {}", if power { "loses power" } else { "is killed" }));
        if power {
            self.out.power_losses += 1;
        } else {
            self.out.kills += 1;
        }
        self.nodes[i].stop(disk);
        self.pending.retain(|p| p.node != id);
        // The controller fences it: out of the ISR (never emptying it), a new leader if it led.
        if self.ctrl.leader == Some(id) {
            self.elect(Some(id)).await?;
        } else if self.ctrl.isr.len() > 1 && self.ctrl.isr.contains(&id) {
            self.ctrl.isr.retain(|r| *r != id);
            self.ctrl.version += 1;
        }
        Ok(())
    }

    async fn restart_some(&mut self) -> Result<(), String> {
        let down: Vec<usize> = (0..self.nodes.len()).filter(|i| !self.nodes[*i].is_up()).collect();
        let Some(i) = pick(&mut self.rng, &down) else { return Ok(()) };
        self.restart(i).await
    }

    async fn restart(&mut self, i: usize) -> Result<(), String> {
        self.nodes[i].start().await.map_err(|e| format!("node {} restart: {e}", i + 1))?;
        let end = self.nodes[i].log().map_or(0, |l| l.log_end_offset().0);
        self.log(format!("node {} restarted, log end {end}", i + 1));
        if self.ctrl.leader.is_none() && self.ctrl.isr.contains(&self.nodes[i].id) {
            self.elect(None).await?;
        }
        let meta = self.ctrl.clone();
        self.apply(i, &meta).await
    }

    async fn move_leader(&mut self) -> Result<(), String> {
        if self.ctrl.leader.is_some() {
            let current = self.ctrl.leader;
            self.elect_other(current).await?;
        }
        Ok(())
    }

    /// A new leader from the ISR's live members other than `fenced` (which leaves the ISR
    /// unless it is the last member); none if there is no such member.
    async fn elect(&mut self, fenced: Option<NodeId>) -> Result<(), String> {
        if let Some(f) = fenced {
            if self.ctrl.isr.len() > 1 {
                self.ctrl.isr.retain(|r| *r != f);
            }
        }
        self.elect_other(fenced).await
    }

    async fn elect_other(&mut self, not: Option<NodeId>) -> Result<(), String> {
        let candidates: Vec<NodeId> = self
            .ctrl
            .isr
            .iter()
            .copied()
            .filter(|r| Some(*r) != not && self.nodes[idx(*r)].is_up())
            .collect();
        self.ctrl.version += 1;
        let Some(leader) = pick(&mut self.rng, &candidates) else {
            if not.is_some() && not == self.ctrl.leader {
                self.ctrl.leader = None;
                self.log("no live ISR member: the partition is offline".into());
            }
            return Ok(());
        };
        self.ctrl.leader = Some(leader);
        self.ctrl.epoch = Epoch(self.ctrl.epoch.0 + 1);
        self.out.elections += 1;
        self.log(format!(
            "controller: leader {leader} epoch {} ISR {:?}",
            self.ctrl.epoch, self.ctrl.isr
        ));
        // Kafka's promise: a leader elected from the ISR holds everything acknowledged.
        let log = self.nodes[idx(leader)].log().cloned().expect("candidates are up");
        let held = check::batches(&log).await?;
        check::acked_present(&held, &self.acked)
            .map_err(|e| format!("new leader {leader} (epoch {}): {e}", self.ctrl.epoch))
    }

    fn leader_log(&self) -> Result<Rc<node::Log>, String> {
        let leader = self.ctrl.leader.ok_or("no leader after the calm phase")?;
        self.nodes[idx(leader)].log().cloned().ok_or_else(|| format!("leader {leader} is down"))
    }

    /// No faults: every node up and on the current metadata; the followers must converge.
    async fn settle(&mut self) -> Result<(), String> {
        self.log("calm phase".into());
        for i in 0..self.nodes.len() {
            if !self.nodes[i].is_up() {
                self.restart(i).await?;
            }
        }
        if self.ctrl.leader.is_none() {
            self.elect(None).await?;
        }
        let epochs_held: Vec<usize> =
            self.nodes.iter().map(|n| n.log().map_or(0, |l| l.epoch_entries().len())).collect();
        let truncations_before: Vec<usize> = self.nodes.iter().map(|n| n.truncations).collect();
        let mut converged = false;
        for round in 0..SETTLE_ROUNDS_MAX {
            let meta = self.ctrl.clone();
            for i in 0..self.nodes.len() {
                if self.nodes[i].seen != meta {
                    self.apply(i, &meta).await?;
                }
            }
            for i in 0..self.nodes.len() {
                self.fetch(i).await?;
            }
            self.alter_isr().await?;
            self.after_step().await?;
            self.out.settle_rounds = round + 1;
            if self.in_sync()? {
                converged = true;
                break;
            }
        }
        for (i, n) in self.nodes.iter().enumerate() {
            let made = n.truncations - truncations_before[i];
            self.out.settle_truncations_max = self.out.settle_truncations_max.max(made);
            if made > epochs_held[i] + 1 {
                return Err(format!(
                    "node {} truncated {made} times in the calm phase, holding {} epochs",
                    n.id, epochs_held[i]
                ));
            }
        }
        self.out.truncations = self.nodes.iter().map(|n| n.truncations).sum();
        if !converged {
            let ends: Vec<i64> =
                self.nodes.iter().map(|n| n.log().map_or(-1, |l| l.log_end_offset().0)).collect();
            return Err(format!(
                "no convergence in {SETTLE_ROUNDS_MAX} calm rounds: log ends {ends:?}, ISR {:?}",
                self.ctrl.isr
            ));
        }
        let leader = self.leader_log()?;
        for n in self.nodes.iter().filter(|n| Some(n.id) != self.ctrl.leader) {
            let log = n.log().expect("all up");
            check::same_log(&leader, log).await.map_err(|e| format!("node {}: {e}", n.id))?;
        }
        check::acked_present(&check::batches(&leader).await?, &self.acked)
    }

    /// Every follower in the ISR and, as the leader saw it at its last fetch, at the
    /// leader's log end. The leader's view counts, not the follower's log end: a follower
    /// whose diverging tail happens to end where the leader's log ends is not in step until
    /// a fetch without divergence says so.
    fn in_sync(&self) -> Result<bool, String> {
        let leader = self.ctrl.leader.ok_or("no leader after the calm phase")?;
        let n = &self.nodes[idx(leader)];
        let end = self.leader_log()?.log_end_offset();
        let all_there = n.replication().with(|r| r.followers().iter().all(|f| f.log_end == end));
        Ok(n.leads() && all_there && self.ctrl.isr.len() == self.nodes.len())
    }
}

/// A follower and its leader, borrowed together.
fn pair(nodes: &mut [Node], f: usize, l: usize) -> (&mut Node, &Node) {
    assert_ne!(f, l, "a node does not follow itself");
    if f < l {
        let (a, b) = nodes.split_at_mut(l);
        (&mut a[f], &b[0])
    } else {
        let (a, b) = nodes.split_at_mut(f);
        (&mut b[0], &a[l])
    }
}

fn pick<T: Copy>(rng: &mut StdRng, from: &[T]) -> Option<T> {
    (!from.is_empty()).then(|| from[rng.gen_range(0..from.len())])
}

fn record_count(batch: &[u8]) -> i32 {
    i32::from_be_bytes(batch[57..61].try_into().expect("a batch header"))
}

/// `count` records of producer [`PRODUCER_ID`] (epoch 0) from `sequence`.
fn idempotent_batch(sequence: i32, count: usize) -> Bytes {
    let mut b = build_simple_batch(count, 16, 1_000).to_vec();
    b[43..51].copy_from_slice(&PRODUCER_ID.to_be_bytes());
    b[51..53].copy_from_slice(&0i16.to_be_bytes());
    b[53..57].copy_from_slice(&sequence.to_be_bytes());
    recompute_crc(&mut b);
    b.into()
}

#[cfg(test)]
mod tests;
