//! The active controller of the cluster simulation: a ready leader's working copy and
//! heartbeat tracker (made for its term, dropped on a new term, a superseded or refused
//! proposal, or a restart), its proposals and their timeouts, session expiry and leader
//! rebalancing, as `server::cluster` runs them (see the parent module's doc for the
//! invariants).
//!
//! Single-threaded, part of [`super::Cluster`].

use super::*;

impl Cluster {
    /// Makes sure a ready leader has its active controller for its term; `false` if `i` is
    /// not a ready leader (its active controller, if any, is dropped then).
    pub(super) fn ensure_active(&mut self, i: usize, nodes: &[SimNode], now_ms: u64) -> bool {
        let (Some(q), Some(committed)) = (nodes[i].quorum(), nodes[i].machine()) else {
            self.active[i] = None;
            return false;
        };
        if q.role() != StateRole::Leader || !q.leader_ready() {
            return false;
        }
        if self.active[i].as_ref().is_some_and(|a| a.term == q.term()) {
            return true;
        }
        let mut working = committed.clone();
        working.become_active();
        let mut heartbeats = BrokerHeartbeats::new(working.broker_session_timeout_ms());
        heartbeats.activate(&working, now_ms);
        self.events.push(format!(
            "node {} is the active controller of term {}",
            self.ids[i],
            q.term()
        ));
        self.active[i] = Some(Active {
            term: q.term(),
            working,
            heartbeats,
            proposed: BTreeMap::new(),
            running: None,
            running_deadline_ms: 0,
            queue: VecDeque::new(),
            next_expiry_ms: now_ms + EXPIRY_CHECK_MS,
            next_rebalance_ms: now_ms + REBALANCE_CHECK_MS,
        });
        true
    }

    /// `run_op` on `ProposeError::Timeout`: the caller gets REQUEST_TIMED_OUT, the working
    /// copy stays (its proposals are still in the log and may commit), `op_lock` is released.
    pub(super) fn time_out(
        &mut self,
        i: usize,
        nodes: &mut [SimNode],
        net: &mut Network,
        rng: &mut StdRng,
        now: u64,
    ) -> Result<(), String> {
        let Some(a) = self.active[i].as_mut() else { return Ok(()) };
        if a.running.is_none() || now * TICK_MS < a.running_deadline_ms {
            return Ok(());
        }
        self.stats.timeouts += 1;
        if let Some((_, Some(held))) = a.running.take() {
            let body =
                Body::Failed { stale_epoch: false, exists: false, reason: "timed out".into() };
            send(net, rng, now, Rpc { body, ..held });
        }
        self.run_queued(i, nodes, net, rng, now)
    }

    pub(super) fn expiry(
        &mut self,
        i: usize,
        nodes: &mut [SimNode],
        net: &mut Network,
        rng: &mut StdRng,
        now: u64,
    ) {
        let now_ms = now * TICK_MS;
        let Some(a) = self.active[i].as_mut() else { return };
        if now_ms < a.next_expiry_ms || a.running.is_some() {
            return;
        }
        a.next_expiry_ms = now_ms + EXPIRY_CHECK_MS;
        let extra = a.heartbeats.expire(&mut a.working, now_ms);
        let mut frames = a.working.take_proposals();
        frames.extend(extra);
        self.propose(i, nodes, net, rng, now, frames, None);
    }

    /// The automatic leader rebalance on the active controller, one operation per check
    /// (skipped while another runs, as it would wait for `op_lock`).
    pub(super) fn rebalance(
        &mut self,
        i: usize,
        nodes: &mut [SimNode],
        net: &mut Network,
        rng: &mut StdRng,
        now: u64,
    ) {
        let now_ms = now * TICK_MS;
        let Some(a) = self.active[i].as_mut() else { return };
        if now_ms < a.next_rebalance_ms || a.running.is_some() {
            return;
        }
        a.next_rebalance_ms = now_ms + REBALANCE_CHECK_MS;
        match a.working.rebalance_leaders() {
            Ok(0) => {}
            Ok(moved) => {
                self.stats.rebalance_moves += moved as u64;
                self.events.push(format!("node {} rebalances {moved} leaders", self.ids[i]));
            }
            Err(e) => self.events.push(format!("rebalance refused: {e}")),
        }
        let frames = a.working.take_proposals();
        self.propose(i, nodes, net, rng, now, frames, None);
    }

    /// Proposes `frames` from node `i`'s working copy; `answer` goes out once they are
    /// applied here. A refused proposal drops the working copy (as `run_op` does).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn propose(
        &mut self,
        i: usize,
        nodes: &mut [SimNode],
        net: &mut Network,
        rng: &mut StdRng,
        now: u64,
        frames: Vec<Vec<u8>>,
        answer: Option<Rpc>,
    ) {
        let Some(a) = self.active[i].as_mut() else { return };
        let Some(q) = nodes[i].node() else { return };
        let mut last = None;
        for frame in frames {
            let before = q.last_index();
            if q.propose(frame.clone()).is_err() || q.last_index() == before {
                self.drop_active(i, net, rng, now);
                if let Some(r) = answer {
                    send(net, rng, now, Rpc { body: Body::NotLeader(None), ..r });
                }
                return;
            }
            last = Some(q.last_index());
            a.proposed.insert(q.last_index(), (a.term, frame));
        }
        match (answer, last) {
            (answer, Some(index)) => {
                a.running = Some((index, answer));
                a.running_deadline_ms = now * TICK_MS + PROPOSE_TIMEOUT_MS_DEFAULT;
            }
            (Some(r), None) => send(net, rng, now, r),
            (None, None) => {}
        }
    }

    /// Drops node `i`'s active controller; held answers become NOT_LEADER.
    pub(super) fn drop_active(&mut self, i: usize, net: &mut Network, rng: &mut StdRng, now: u64) {
        if let Some(a) = self.active[i].take() {
            if a.running.is_some() || !a.proposed.is_empty() {
                self.stats.dropped_in_flight += 1;
            }
            self.events
                .push(format!("node {} drops its working copy (term {})", self.ids[i], a.term));
            if let Some((_, Some(held))) = a.running {
                send(net, rng, now, Rpc { body: Body::NotLeader(None), ..held });
            }
            for req in a.queue {
                send(net, rng, now, reply(&req, Body::NotLeader(None)));
            }
        }
    }
}
