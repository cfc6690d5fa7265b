//! The active controller's side of the cluster simulation: a request to a node is served
//! there if it is the ready leader (queued behind the running operation, at most
//! `OP_QUEUE_MAX`), otherwise answered NOT_CONTROLLER with the leader it knows; an operation
//! runs on the working copy of `Active` as `server::cluster::ClusterNode::run_op` does, and
//! its proposals are answered once applied (see the parent module's doc for the invariants).
//!
//! Single-threaded, part of [`super::Cluster`].

use super::*;

impl Cluster {
    /// Node `i` handles a request as the active controller, or names the leader it knows.
    pub(super) fn serve(
        &mut self,
        i: usize,
        req: Rpc,
        nodes: &mut [SimNode],
        net: &mut Network,
        rng: &mut StdRng,
        now: u64,
    ) -> Result<(), String> {
        let now_ms = now * TICK_MS;
        if !self.ensure_active(i, nodes, now_ms) {
            let me = self.ids[i];
            let leader = nodes[i].quorum().map(|q| q.leader_id()).filter(|l| *l != 0 && *l != me);
            send(net, rng, now, reply(&req, Body::NotLeader(leader)));
            return Ok(());
        }
        let Some(a) = self.active[i].as_mut() else { return Ok(()) };
        if a.queue.len() < OP_QUEUE_MAX {
            a.queue.push_back(req);
        }
        self.run_queued(i, nodes, net, rng, now)
    }

    /// The registration epoch hint, by the server's own rule
    /// ([`registration_epoch_hint`]) on this node's status, taken when the operation runs.
    fn epoch_hint(node: &SimNode) -> i64 {
        let Some(q) = node.quorum() else { return 0 };
        let status = QuorumStatus {
            node_id: q.id(),
            role: if q.role() == StateRole::Leader {
                QuorumRole::Leader
            } else {
                QuorumRole::Follower
            },
            term: q.term(),
            leader_id: Some(q.leader_id()).filter(|l| *l != 0),
            commit_index: q.commit_index(),
            applied_index: q.applied_index(),
            voters: Vec::new(),
            learners: Vec::new(),
            replicas: vec![ReplicaStatus {
                id: q.id(),
                log_end_offset: q.last_index(),
                last_fetch_ms: 0,
                last_caught_up_ms: 0,
            }],
            leader_ready: q.leader_ready(),
        };
        registration_epoch_hint(&status)
    }

    /// Runs queued requests while no operation is running (`op_lock`).
    pub(super) fn run_queued(
        &mut self,
        i: usize,
        nodes: &mut [SimNode],
        net: &mut Network,
        rng: &mut StdRng,
        now: u64,
    ) -> Result<(), String> {
        loop {
            let Some(a) = self.active[i].as_mut() else { return Ok(()) };
            if a.running.is_some() {
                return Ok(());
            }
            let Some(req) = a.queue.pop_front() else { return Ok(()) };
            self.run_op(i, req, nodes, net, rng, now)?;
        }
    }

    /// One operation on the working copy (`run_op`), proposed; the answer is held until
    /// its proposals are applied here.
    #[allow(clippy::too_many_arguments)]
    fn run_op(
        &mut self,
        i: usize,
        req: Rpc,
        nodes: &mut [SimNode],
        net: &mut Network,
        rng: &mut StdRng,
        now: u64,
    ) -> Result<(), String> {
        let now_ms = now * TICK_MS;
        let hint = Self::epoch_hint(&nodes[i]);
        let Some(a) = self.active[i].as_mut() else { return Ok(()) };
        let (body, mut frames, extra) = match &req.body {
            Body::Register(r) => {
                let body = match a.heartbeats.register(&mut a.working, r, hint, now_ms) {
                    Ok(epoch) => Body::Registered(epoch),
                    Err(e) => error_body(&e),
                };
                (body, a.working.take_proposals(), Vec::new())
            }
            Body::Heartbeat(hb) => match a.heartbeats.heartbeat(&mut a.working, *hb, now_ms) {
                Ok(o) => {
                    if !o.is_fenced && o.records.iter().any(|f| !f.is_empty()) {
                        // This heartbeat unfenced the broker: it must have applied its own
                        // registration (KRaft's "caught up").
                        self.check.unfenced(hb.node, hb.epoch, hb.metadata_offset)?;
                    }
                    let body = Body::HeartbeatReply {
                        is_fenced: o.is_fenced,
                        should_shutdown: o.should_shutdown,
                    };
                    (body, a.working.take_proposals(), o.records)
                }
                Err(e) => (error_body(&e), a.working.take_proposals(), Vec::new()),
            },
            Body::CreateTopic(t) => {
                let result = a.working.create_topics(std::slice::from_ref(t), false);
                let body = match result.into_iter().next() {
                    Some(Ok(_)) => Body::Created,
                    Some(Err(e)) => error_body(&e),
                    None => error_body(&ControllerError::InvalidRequest("no result".into())),
                };
                (body, a.working.take_proposals(), Vec::new())
            }
            Body::DeleteTopic(name) => {
                let body = match a.working.delete_topic(name) {
                    Ok(_) => Body::Deleted,
                    Err(e) => error_body(&e),
                };
                (body, a.working.take_proposals(), Vec::new())
            }
            Body::AlterIsr(r) => {
                let body = match a.working.alter_partition(r) {
                    Ok(_) => Body::Altered,
                    Err(e) => {
                        Body::Failed { stale_epoch: false, exists: false, reason: e.to_string() }
                    }
                };
                (body, a.working.take_proposals(), Vec::new())
            }
            Body::Elect(kind) => {
                let body = match a.working.elect_leaders(*kind, &None) {
                    Ok(_) => Body::Elected,
                    Err(e) => error_body(&e),
                };
                (body, a.working.take_proposals(), Vec::new())
            }
            Body::Reassign { .. } | Body::ExpandIsr(_) => {
                let body = reassign::run(&mut a.working, &req.body);
                (body, a.working.take_proposals(), Vec::new())
            }
            _ => return Ok(()),
        };
        frames.extend(extra);
        self.propose(i, nodes, net, rng, now, frames, Some(reply(&req, body)));
        Ok(())
    }

    /// An answer reaches the broker or client on node `i`.
    pub(super) fn answer(
        &mut self,
        i: usize,
        rpc: Rpc,
        nodes: &[SimNode],
        net: &mut Network,
        rng: &mut StdRng,
        now: u64,
    ) -> Result<(), String> {
        let now_ms = now * TICK_MS;
        if rpc.caller == Caller::Client {
            let Some(call) = self.clients.remove(&rpc.id) else { return Ok(()) };
            let calm = matches!(&call.request, Body::CreateTopic(t) if t.name == CALM_TOPIC);
            match rpc.body {
                Body::Created => {
                    self.stats.topics_created += 1;
                    self.calm_created |= calm;
                }
                Body::Deleted => self.stats.topics_deleted += 1,
                Body::Elected => self.stats.elections += 1,
                Body::Altered => self.stats.isr_expansions += 1,
                Body::Done => self.stats.reassign_ops += 1,
                Body::Failed { exists: true, .. } => self.calm_created |= calm,
                Body::NotLeader(Some(l)) if call.hops > 0 => {
                    // Retried at once towards the named leader.
                    let body = call.request.clone();
                    self.clients.insert(rpc.id, ClientCall { hops: call.hops - 1, ..call });
                    let to = l;
                    send(
                        net,
                        rng,
                        now,
                        Rpc { from: rpc.to, to, id: rpc.id, caller: rpc.caller, body },
                    );
                }
                _ => {}
            }
            return Ok(());
        }
        let b = &mut self.brokers[i];
        if b.inflight.map(|(id, _)| id) != Some(rpc.id) {
            return Ok(());
        }
        b.inflight = None;
        let node = NodeId(i32::try_from(self.ids[i]).unwrap_or(i32::MAX));
        match rpc.body {
            Body::Registered(epoch) => {
                self.stats.registrations += 1;
                self.events.push(format!("broker {node} registered, epoch {}", epoch.0));
                self.check.broker_told(node, b.incarnation.unwrap_or_default(), epoch)?;
                b.epoch = Some(epoch);
                b.fenced = true;
                b.next_ms = now_ms;
            }
            Body::HeartbeatReply { is_fenced, should_shutdown } => {
                if should_shutdown && b.exit_ms.is_some() {
                    b.exit_ms = Some(now_ms);
                }
                b.fenced = is_fenced;
                b.next_ms = now_ms
                    + if b.exit_ms.is_some() {
                        SHUTDOWN_RETRY_MS
                    } else if is_fenced {
                        FENCED_HEARTBEAT_MS
                    } else {
                        HEARTBEAT_INTERVAL_MS
                    };
            }
            Body::Failed { stale_epoch: true, .. } => {
                b.epoch = None;
                b.next_ms = now_ms;
            }
            Body::NotLeader(l) => {
                b.hint = l;
                b.next_ms = now_ms + if l.is_some() { 0 } else { RETRY_PAUSE_MS };
            }
            _ => b.next_ms = now_ms + RETRY_PAUSE_MS,
        }
        let _ = nodes;
        Ok(())
    }
}
