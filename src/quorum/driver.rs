//! [`QuorumDriver`]: runs one [`QuorumNode`] in a real process — ticks it, steps what the
//! [`Transport`] delivers, persists readies through [`RaftStore`], sends, applies committed
//! entries to a [`StateMachine`], compacts — and [`QuorumHandle`], the cheap handle the
//! server uses (propose, status, add a learner, RPC, change signal).
//!
//! Lives on the controller shard (shard 0), one per process. One task (the loop) owns the
//! node, the store and the state machine; handles only queue work for it and read the
//! status it publishes, so the node is never touched while a ready is out.
//!
//! Invariants: an entry is applied only after it is durable here and committed (raft-rs
//! hands out nothing else), in index order, exactly once per process run; a proposal
//! resolves `Ok(index)` only once its entry (same index, same term) is applied locally; a
//! leader takes proposals only once it has applied its own term's first entry (so its state
//! is current); a store failure stops the loop (every later proposal fails) and an apply
//! failure stops applying (the last good state stays readable) — neither panics.
//!
//! Jitter: raft-rs's randomized election timeout is pinned (see the parent module), so a
//! node that is not a leader skips `0..election_ticks` ticks, drawn once per election
//! timeout, which spreads the candidates' timeouts over `[election, 2 × election)` ticks.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::channel::oneshot;
use futures::FutureExt;
use raft::prelude::{ConfState, EntryType, MessageType};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tracing::{error, info, warn};

use super::store::RaftStore;
use super::transport::{QuorumRpcError, RpcHandler, Sent, Transport};
use super::{Entry, Message, QuorumConfig, QuorumNode, StateRole};
use crate::io::FileSystem;
use crate::sync::Notify;

/// The replicated state the log drives.
pub trait StateMachine {
    /// A committed normal entry with data (empty entries and conf changes are not passed).
    fn apply(&mut self, index: u64, data: &[u8]) -> Result<(), String>;
    /// Replaces the whole state with a snapshot's data (taken at `index`).
    fn restore(&mut self, index: u64, data: &[u8]) -> Result<(), String>;
    /// The state's bytes for a local snapshot.
    fn snapshot(&self) -> Vec<u8>;
}

/// What the driver needs besides the store directory's file system and the transport.
#[derive(Clone, Debug)]
pub struct DriverConfig {
    pub quorum: QuorumConfig,
    /// The quorum store's directory.
    pub dir: PathBuf,
    /// The initial voters (a new store's membership).
    pub voters: Vec<u64>,
    pub tick_ms: u64,
    /// Take a local snapshot once this many entries were applied past the last one.
    pub snapshot_every_entries: u64,
    /// How long [`QuorumHandle::propose`] waits for its entry to be applied.
    pub propose_timeout_ms: u64,
    /// Seed of the election jitter (`None`: from the OS).
    pub jitter_seed: Option<u64>,
    /// A new store's bootstrap snapshot data (see [`RaftStore::open_with_data`]).
    pub bootstrap_data: Bytes,
}

impl DriverConfig {
    /// Defaults for node `id` among `voters`, storing in `dir`.
    #[must_use]
    pub fn new(id: u64, voters: Vec<u64>, dir: PathBuf) -> Self {
        Self {
            quorum: QuorumConfig::new(id),
            dir,
            voters,
            tick_ms: super::TICK_MS_DEFAULT,
            snapshot_every_entries: super::SNAPSHOT_EVERY_ENTRIES_DEFAULT,
            propose_timeout_ms: super::PROPOSE_TIMEOUT_MS_DEFAULT,
            jitter_seed: None,
            bootstrap_data: Bytes::new(),
        }
    }
}

/// Why a proposal did not make it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    #[error("not the leader (leader: {leader:?})")]
    NotLeader { leader: Option<u64> },
    #[error("not applied within the timeout")]
    Timeout,
    #[error("leadership lost or the entry was overwritten")]
    Superseded,
    #[error("quorum failed: {0}")]
    Failed(String),
}

/// A node's role as [`QuorumStatus`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuorumRole {
    Leader,
    Follower,
    Candidate,
    PreCandidate,
    Learner,
}

/// One member as the leader sees it (on a non-leader only its own row is exact).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaStatus {
    pub id: u64,
    /// The member's match index as the leader sees it; our own last index for ourselves.
    pub log_end_offset: u64,
    /// Wall-clock ms of its last append/heartbeat response (0: never).
    pub last_fetch_ms: u64,
    /// Wall-clock ms it was last seen holding the leader's whole log (0: never).
    pub last_caught_up_ms: u64,
}

/// A snapshot of the node's state, published after every step of the loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumStatus {
    pub node_id: u64,
    pub role: QuorumRole,
    pub term: u64,
    pub leader_id: Option<u64>,
    pub commit_index: u64,
    pub applied_index: u64,
    pub voters: Vec<u64>,
    pub learners: Vec<u64>,
    pub replicas: Vec<ReplicaStatus>,
    /// The leader has applied its term's first entry and takes proposals.
    pub leader_ready: bool,
}

/// What [`QuorumHandle::metrics`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumMetrics {
    pub role: QuorumRole,
    pub term: u64,
    pub commit_index: u64,
    pub applied_index: u64,
    /// On the leader: entries each voter is behind the leader's log (empty elsewhere).
    pub lag_by_voter: Vec<(u64, u64)>,
    pub messages_sent: u64,
    pub messages_dropped: u64,
    /// Handshakes refused (either side) since start.
    pub connections_refused: u64,
}

/// Driver counters, besides the transport's.
#[derive(Default, Debug)]
pub struct DriverCounters {
    pub messages_sent: Cell<u64>,
    /// Outgoing messages the transport refused, and incoming ones a full inbox dropped.
    pub messages_dropped: Cell<u64>,
    pub snapshots_taken: Cell<u64>,
    pub snapshots_restored: Cell<u64>,
}

enum Request {
    Propose(Vec<u8>, oneshot::Sender<Result<u64, ProposeError>>),
    AddLearner(u64, oneshot::Sender<Result<u64, ProposeError>>),
}

struct Shared {
    id: u64,
    inbox: RefCell<VecDeque<Message>>,
    requests: RefCell<VecDeque<Request>>,
    wake: Notify,
    changed: Notify,
    status: RefCell<QuorumStatus>,
    transport: Rc<dyn Transport>,
    stopped: Cell<bool>,
    /// Set by [`QuorumHandle::campaign`]; the loop starts an election at its next step.
    campaign: Cell<bool>,
    failed: RefCell<Option<String>>,
    propose_timeout_ms: u64,
    counters: DriverCounters,
}

/// The handle to a running driver. Cheap to clone; shard 0 only.
#[derive(Clone)]
pub struct QuorumHandle {
    shared: Rc<Shared>,
}

/// Starts drivers. See the module docs.
pub struct QuorumDriver;

fn now_ms() -> u64 {
    u64::try_from(crate::io::real_now_ms()).unwrap_or(0)
}

impl QuorumDriver {
    /// Opens the store, restores the state machine from its snapshot, restarts the node and
    /// spawns the loop on the current executor.
    pub async fn start<F: FileSystem, S: StateMachine + 'static>(
        config: DriverConfig,
        fs: F,
        mut sm: S,
        transport: Rc<dyn Transport>,
    ) -> Result<QuorumHandle, super::QuorumError> {
        let conf = ConfState { voters: config.voters.clone(), ..ConfState::default() };
        let (store, rec) =
            RaftStore::open_with_data(fs, &config.dir, &conf, config.bootstrap_data.clone())
                .await?;
        let snap_index = rec.snapshot.get_metadata().index;
        if snap_index > 0 || !rec.snapshot.data.is_empty() {
            sm.restore(snap_index, &rec.snapshot.data).map_err(|e| {
                super::QuorumError::Invalid(format!("restoring snapshot {snap_index}: {e}"))
            })?;
        }
        let node = QuorumNode::restart(&config.quorum, rec)?;
        let id = config.quorum.id;
        let shared = Rc::new(Shared {
            id,
            inbox: RefCell::new(VecDeque::new()),
            requests: RefCell::new(VecDeque::new()),
            wake: Notify::new(),
            changed: Notify::new(),
            status: RefCell::new(QuorumStatus {
                node_id: id,
                role: QuorumRole::Follower,
                term: 0,
                leader_id: None,
                commit_index: 0,
                applied_index: snap_index,
                voters: config.voters.clone(),
                learners: Vec::new(),
                replicas: Vec::new(),
                leader_ready: false,
            }),
            transport: transport.clone(),
            stopped: Cell::new(false),
            campaign: Cell::new(false),
            failed: RefCell::new(None),
            propose_timeout_ms: config.propose_timeout_ms,
            counters: DriverCounters::default(),
        });
        let weak = Rc::downgrade(&shared);
        transport.set_receiver(Rc::new(move |m: Message| {
            if let Some(s) = weak.upgrade() {
                if s.inbox.borrow().len() < super::INBOX_MESSAGES_MAX {
                    s.inbox.borrow_mut().push_back(m);
                    s.wake.notify_all();
                } else {
                    let d = &s.counters.messages_dropped;
                    d.set(d.get() + 1);
                }
            }
        }));
        let seed = config.jitter_seed.unwrap_or_else(|| rand::thread_rng().gen());
        let mut core = Core {
            shared: shared.clone(),
            node,
            store,
            sm,
            applied: snap_index,
            apply_failed: None,
            pending: BTreeMap::new(),
            rng: StdRng::seed_from_u64(seed),
            skip_ticks: 0,
            ticks_in_period: 0,
            contact: HashMap::new(),
            reports: Vec::new(),
            snapshot_soon: false,
            config,
        };
        core.publish();
        glommio::spawn_local(async move { core.run().await }).detach();
        Ok(QuorumHandle { shared })
    }
}

impl QuorumHandle {
    /// Proposes `data`; resolves with its index once it is committed and applied here.
    pub async fn propose(&self, data: Vec<u8>) -> Result<u64, ProposeError> {
        self.request(|tx| Request::Propose(data, tx)).await
    }

    /// Adds `id` as a learner through a conf change (no-op if it already is one).
    pub async fn add_learner(&self, id: u64) -> Result<(), ProposeError> {
        for _ in 0..3 {
            if self.status().learners.contains(&id) {
                return Ok(());
            }
            self.request(|tx| Request::AddLearner(id, tx)).await?;
        }
        if self.status().learners.contains(&id) {
            Ok(())
        } else {
            Err(ProposeError::Failed(format!("learner {id} not added (conf change dropped)")))
        }
    }

    async fn request(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<u64, ProposeError>>) -> Request,
    ) -> Result<u64, ProposeError> {
        let s = &self.shared;
        if let Some(why) = s.failed.borrow().clone() {
            return Err(ProposeError::Failed(why));
        }
        let st = self.status();
        if !st.leader_ready {
            return Err(ProposeError::NotLeader { leader: st.leader_id.filter(|l| *l != s.id) });
        }
        let (tx, rx) = oneshot::channel();
        s.requests.borrow_mut().push_back(make(tx));
        s.wake.notify_all();
        let timer = glommio::timer::sleep(Duration::from_millis(s.propose_timeout_ms));
        futures::select! {
            r = rx.fuse() => r.unwrap_or(Err(ProposeError::Superseded)),
            _ = FutureExt::fuse(timer) => Err(ProposeError::Timeout),
        }
    }

    /// Starts an election at once instead of after an election timeout: a single voter,
    /// which needs nobody's vote, becomes leader without waiting.
    pub fn campaign(&self) {
        self.shared.campaign.set(true);
        self.shared.wake.notify_all();
    }

    /// The node's state as of the loop's last step.
    #[must_use]
    pub fn status(&self) -> QuorumStatus {
        self.shared.status.borrow().clone()
    }

    /// Fires when the role, leader, term or applied index change.
    #[must_use]
    pub fn changed(&self) -> &Notify {
        &self.shared.changed
    }

    /// Calls node `to`'s RPC handler (see [`Transport::call`]).
    pub async fn call(
        &self,
        to: u64,
        body: Bytes,
        timeout_ms: u64,
    ) -> Result<Bytes, QuorumRpcError> {
        self.shared.transport.call(to, body, timeout_ms).await
    }

    /// Registers the handler of incoming RPCs.
    pub fn set_rpc_handler(&self, handler: RpcHandler) {
        self.shared.transport.set_rpc_handler(handler);
    }

    #[must_use]
    pub fn counters(&self) -> &DriverCounters {
        &self.shared.counters
    }

    /// The quorum's gauges and counters, for the metrics endpoint.
    #[must_use]
    pub fn metrics(&self) -> QuorumMetrics {
        let st = self.status();
        let me = st.replicas.iter().find(|r| r.id == st.node_id).map_or(0, |r| r.log_end_offset);
        let lag_by_voter = if st.role == QuorumRole::Leader {
            let lag = |r: &ReplicaStatus| (r.id, me.saturating_sub(r.log_end_offset));
            st.replicas.iter().filter(|r| st.voters.contains(&r.id)).map(lag).collect()
        } else {
            Vec::new()
        };
        let c = &self.shared.counters;
        QuorumMetrics {
            role: st.role,
            term: st.term,
            commit_index: st.commit_index,
            applied_index: st.applied_index,
            lag_by_voter,
            messages_sent: c.messages_sent.get(),
            messages_dropped: c.messages_dropped.get(),
            connections_refused: self.shared.transport.refused_count(),
        }
    }

    /// Stops the loop and the transport; pending proposals fail.
    pub fn shutdown(&self) {
        self.shared.stopped.set(true);
        self.shared.transport.shutdown();
        self.shared.wake.notify_all();
    }
}

enum Report {
    Unreachable,
    Snapshot(bool),
}

/// The loop's state: everything that touches the node.
struct Core<F: FileSystem, S: StateMachine> {
    shared: Rc<Shared>,
    node: QuorumNode,
    store: RaftStore<F>,
    sm: S,
    config: DriverConfig,
    /// Last index applied to the state machine (or covered by a restored snapshot).
    applied: u64,
    apply_failed: Option<String>,
    /// Proposals waiting to be applied: index → (term, reply).
    pending: BTreeMap<u64, (u64, oneshot::Sender<Result<u64, ProposeError>>)>,
    rng: StdRng,
    skip_ticks: usize,
    ticks_in_period: usize,
    /// Leader's view of each peer: (last response ms, last caught-up ms).
    contact: HashMap<u64, (u64, u64)>,
    reports: Vec<(u64, Report)>,
    /// A conf change was applied: snapshot soon, so a node added by it can be sent a
    /// snapshot that names it (raft-rs refuses one that does not).
    snapshot_soon: bool,
}

impl<F: FileSystem, S: StateMachine> Core<F, S> {
    async fn run(&mut self) {
        let tick = Duration::from_millis(self.config.tick_ms.max(1));
        let mut next_tick = Instant::now() + tick;
        info!("quorum node {} started (applied {})", self.node.id(), self.applied);
        // A lone voter has nobody to wait for: campaign now rather than after an election
        // timeout (a single-node broker is serving ~1-2 s sooner).
        if self.node.conf_state().voters == [self.node.id()] {
            if let Err(e) = self.node.campaign() {
                warn!("quorum node {}: campaign at start failed: {e}", self.node.id());
            }
        }
        while !self.shared.stopped.get() {
            let shared = self.shared.clone();
            let wait = shared.wake.wait();
            let idle = shared.inbox.borrow().is_empty() && shared.requests.borrow().is_empty();
            let now = Instant::now();
            if idle && now < next_tick {
                let timer = glommio::timer::sleep(next_tick - now);
                futures::select! {
                    () = wait.fuse() => {},
                    _ = FutureExt::fuse(timer) => {},
                }
            }
            let now = Instant::now();
            let mut ticks = 0;
            while now >= next_tick {
                next_tick += tick;
                ticks += 1;
                if ticks <= self.config.quorum.election_ticks {
                    self.tick();
                }
            }
            if let Err(why) = self.step_once().await {
                error!("quorum node {} stops: {why}", self.node.id());
                *self.shared.failed.borrow_mut() = Some(why.clone());
                self.fail_pending(&ProposeError::Failed(why));
                self.shared.changed.notify_all();
                return;
            }
        }
        self.fail_pending(&ProposeError::Failed("quorum shut down".to_string()));
    }

    fn tick(&mut self) {
        if self.node.role() != StateRole::Leader && self.skip_ticks > 0 {
            self.skip_ticks -= 1;
            return;
        }
        self.node.tick();
        self.ticks_in_period += 1;
        let election = self.config.quorum.election_ticks;
        if self.ticks_in_period >= election {
            self.ticks_in_period = 0;
            if self.node.role() != StateRole::Leader {
                self.skip_ticks = self.rng.gen_range(0..election.max(1));
            }
        }
    }

    async fn step_once(&mut self) -> Result<(), String> {
        let msgs: Vec<Message> = self.shared.inbox.borrow_mut().drain(..).collect();
        for m in msgs {
            let (from, ty) = (m.from, m.get_msg_type());
            if let Err(e) = self.node.step(m) {
                warn!("message from {from} not stepped: {e}");
            }
            if matches!(ty, MessageType::MsgAppendResponse | MessageType::MsgHeartbeatResponse)
                && self.node.role() == StateRole::Leader
            {
                let now = now_ms();
                let c = self.contact.entry(from).or_default();
                c.0 = now;
                if self.node.match_index(from) >= Some(self.node.last_index()) {
                    c.1 = now;
                }
            }
        }
        if self.shared.campaign.replace(false) && self.node.role() != StateRole::Leader {
            if let Err(e) = self.node.campaign() {
                warn!("campaign not started: {e}");
            }
        }
        let reqs: Vec<Request> = self.shared.requests.borrow_mut().drain(..).collect();
        for r in reqs {
            self.take_request(r);
        }
        self.handle_readies().await?;
        for (to, r) in std::mem::take(&mut self.reports) {
            match r {
                Report::Unreachable => self.node.report_unreachable(to),
                Report::Snapshot(ok) => self.node.report_snapshot(to, ok),
            }
        }
        if self.node.role() != StateRole::Leader && !self.pending.is_empty() {
            self.fail_pending(&ProposeError::Superseded);
        }
        self.maybe_compact().await?;
        self.publish();
        Ok(())
    }

    fn take_request(&mut self, r: Request) {
        let (res, tx) = match r {
            Request::Propose(data, tx) => (self.propose_checked(|n| n.propose(data)), tx),
            Request::AddLearner(id, tx) => {
                if self.node.conf_state().learners.contains(&id) {
                    let _ = tx.send(Ok(self.applied));
                    return;
                }
                if self.node.conf_state().voters.contains(&id) {
                    let _ = tx.send(Err(ProposeError::Failed(format!("node {id} is a voter"))));
                    return;
                }
                (self.propose_checked(|n| n.propose_add_learner(id)), tx)
            }
        };
        match res {
            Ok(index) => {
                self.pending.insert(index, (self.node.term(), tx));
            }
            Err(e) => {
                let _ = tx.send(Err(e));
            }
        }
    }

    fn propose_checked(
        &mut self,
        f: impl FnOnce(&mut QuorumNode) -> Result<(), super::QuorumError>,
    ) -> Result<u64, ProposeError> {
        if let Some(why) = &self.apply_failed {
            return Err(ProposeError::Failed(why.clone()));
        }
        let leader = Some(self.node.leader_id()).filter(|l| *l != 0 && *l != self.node.id());
        if !self.node.leader_ready() {
            return Err(ProposeError::NotLeader { leader });
        }
        let before = self.node.last_index();
        f(&mut self.node).map_err(|_| ProposeError::NotLeader { leader })?;
        let index = self.node.last_index();
        if index == before {
            return Err(ProposeError::NotLeader { leader });
        }
        Ok(index)
    }

    async fn handle_readies(&mut self) -> Result<(), String> {
        while let Some(mut rd) = self.node.ready() {
            let out = std::mem::take(&mut rd.messages);
            self.send(out);
            self.store.persist(&rd).await.map_err(|e| format!("store: {e}"))?;
            if let Some(snap) = &rd.snapshot {
                let index = snap.get_metadata().index;
                match self.sm.restore(index, &snap.data) {
                    Ok(()) => {
                        self.apply_failed = None;
                        self.applied = index;
                        self.shared
                            .counters
                            .snapshots_restored
                            .set(self.shared.counters.snapshots_restored.get() + 1);
                        info!("quorum node {} restored snapshot {index}", self.node.id());
                    }
                    Err(e) => self.stop_applying(format!("restoring snapshot {index}: {e}")),
                }
            }
            let committed = std::mem::take(&mut rd.committed);
            self.apply(committed);
            let adv = self.node.advance(rd);
            self.send(adv.messages);
            self.apply(adv.committed);
        }
        Ok(())
    }

    fn send(&mut self, msgs: Vec<Message>) {
        let c = &self.shared.counters;
        for m in msgs {
            let (to, snap) = (m.to, m.get_msg_type() == MessageType::MsgSnapshot);
            match self.shared.transport.send(m) {
                Sent::Queued => {
                    c.messages_sent.set(c.messages_sent.get() + 1);
                    if snap {
                        self.reports.push((to, Report::Snapshot(true)));
                    }
                }
                Sent::Unreachable | Sent::Dropped => {
                    c.messages_dropped.set(c.messages_dropped.get() + 1);
                    let r = if snap { Report::Snapshot(false) } else { Report::Unreachable };
                    self.reports.push((to, r));
                }
            }
        }
    }

    fn stop_applying(&mut self, why: String) {
        error!("quorum node {} stops applying: {why}", self.node.id());
        self.apply_failed = Some(why);
    }

    fn apply(&mut self, entries: Vec<Entry>) {
        for e in entries {
            if e.index <= self.applied {
                continue;
            }
            match e.get_entry_type() {
                EntryType::EntryNormal => {
                    if !e.data.is_empty() && self.apply_failed.is_none() {
                        if let Err(why) = self.sm.apply(e.index, &e.data) {
                            self.stop_applying(format!("entry {}: {why}", e.index));
                        }
                    }
                }
                ty => {
                    let v2 = ty == EntryType::EntryConfChangeV2;
                    match self.node.apply_conf_change(&e.data, v2) {
                        Ok(cs) => {
                            self.snapshot_soon = true;
                            info!(
                                "quorum node {}: membership {:?} learners {:?}",
                                self.node.id(),
                                cs.voters,
                                cs.learners
                            );
                        }
                        Err(err) => warn!("conf change at {} ignored: {err}", e.index),
                    }
                }
            }
            if self.apply_failed.is_some() {
                continue;
            }
            self.applied = e.index;
            // Proposals at or below this index are settled: ours if the term matches.
            while let Some(entry) = self.pending.first_entry() {
                if *entry.key() > e.index {
                    break;
                }
                let (index, (term, tx)) = entry.remove_entry();
                let r = if index == e.index && term == e.term {
                    Ok(index)
                } else {
                    Err(ProposeError::Superseded)
                };
                let _ = tx.send(r);
            }
        }
        if let Some(why) = self.apply_failed.clone() {
            self.fail_pending(&ProposeError::Failed(why));
        }
    }

    fn fail_pending(&mut self, why: &ProposeError) {
        for (_, (_, tx)) in std::mem::take(&mut self.pending) {
            let _ = tx.send(Err(why.clone()));
        }
        for r in self.shared.requests.borrow_mut().drain(..) {
            let (Request::Propose(_, tx) | Request::AddLearner(_, tx)) = r;
            let _ = tx.send(Err(why.clone()));
        }
    }

    async fn maybe_compact(&mut self) -> Result<(), String> {
        let every = self.config.snapshot_every_entries.max(1);
        let base = self.node.view().snapshot_index();
        let due = self.applied >= base + every || (self.snapshot_soon && self.applied > base);
        if self.apply_failed.is_some() || !due || self.applied > self.node.applied_index() {
            return Ok(());
        }
        let data = Bytes::from(self.sm.snapshot());
        let c = self.node.compaction(self.applied, data).map_err(|e| e.to_string())?;
        self.store.compact(&c).await.map_err(|e| format!("store: {e}"))?;
        self.node.compact(c);
        self.snapshot_soon = false;
        let n = &self.shared.counters.snapshots_taken;
        n.set(n.get() + 1);
        Ok(())
    }

    fn publish(&mut self) {
        let node = &self.node;
        let cs = node.conf_state();
        let me = node.id();
        let role = match node.role() {
            StateRole::Leader => QuorumRole::Leader,
            StateRole::Candidate => QuorumRole::Candidate,
            StateRole::PreCandidate => QuorumRole::PreCandidate,
            StateRole::Follower if !cs.voters.contains(&me) => QuorumRole::Learner,
            StateRole::Follower => QuorumRole::Follower,
        };
        let leader = role == QuorumRole::Leader;
        let now = now_ms();
        let replicas = cs
            .voters
            .iter()
            .chain(cs.learners.iter())
            .map(|&id| {
                if id == me {
                    let (f, c) = if leader { (now, now) } else { (0, 0) };
                    return ReplicaStatus {
                        id,
                        log_end_offset: node.last_index(),
                        last_fetch_ms: f,
                        last_caught_up_ms: c,
                    };
                }
                let (f, c) = self.contact.get(&id).copied().unwrap_or_default();
                ReplicaStatus {
                    id,
                    log_end_offset: node.match_index(id).unwrap_or(0),
                    last_fetch_ms: f,
                    last_caught_up_ms: c,
                }
            })
            .collect();
        let st = QuorumStatus {
            node_id: me,
            role,
            term: node.term(),
            leader_id: Some(node.leader_id()).filter(|l| *l != 0),
            commit_index: node.commit_index(),
            applied_index: self.applied,
            voters: cs.voters.clone(),
            learners: cs.learners.clone(),
            replicas,
            leader_ready: node.leader_ready() && self.apply_failed.is_none(),
        };
        let mut cur = self.shared.status.borrow_mut();
        let signal = cur.role != st.role
            || cur.leader_id != st.leader_id
            || cur.term != st.term
            || cur.applied_index != st.applied_index
            || cur.leader_ready != st.leader_ready
            || cur.learners != st.learners;
        *cur = st;
        drop(cur);
        if signal {
            self.shared.changed.notify_all();
        }
        if !leader {
            self.contact.clear();
        }
    }
}
