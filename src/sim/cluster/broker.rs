//! The brokers of the cluster simulation: one per node, registering through the leader (a
//! new incarnation per process start), heartbeating with its node's applied index, and
//! sometimes shutting down in a controlled way (heartbeats until approved or its deadline;
//! sometimes dying midway), as `server::cluster::lifecycle` does.
//!
//! Single-threaded, part of [`super::Cluster`]; one call in flight per broker.

use super::*;

impl Cluster {
    pub(super) fn broker_step(
        &mut self,
        i: usize,
        nodes: &mut [SimNode],
        net: &mut Network,
        rng: &mut StdRng,
        now: u64,
        chaos: bool,
    ) {
        if !nodes[i].is_up() {
            return;
        }
        let now_ms = now * TICK_MS;
        let id = self.ids[i];
        if self.brokers[i].incarnation.is_none() {
            self.brokers[i] = Broker {
                incarnation: Some(Uuid::from_u128(rng.gen())),
                next_ms: now_ms,
                ..Broker::default()
            };
        }
        if chaos && self.brokers[i].exit_ms.is_none() && rng.gen_range(0..1000) < 3 {
            // Controlled shutdown (`lifecycle::controlled_shutdown`): shutdown heartbeats
            // until approved, bounded by `controlled.shutdown.timeout.ms`.
            self.stats.shutdowns += 1;
            self.events.push(format!("broker {id} starts a controlled shutdown"));
            let b = &mut self.brokers[i];
            b.exit_ms = Some(now_ms + CONTROLLED_SHUTDOWN_TIMEOUT_MS);
            b.inflight = None;
            b.next_ms = now_ms;
        }
        if !chaos {
            // Faults stopped: a shutdown under way is called off (the node stays up).
            self.brokers[i].exit_ms = None;
        }
        if chaos && self.brokers[i].exit_ms.is_some() && rng.gen_range(0..100) < 3 {
            // The broker dies (power loss, SIGKILL) in the middle of its controlled shutdown:
            // its session expiry must finish what the shutdown started.
            self.stats.shutdown_deaths += 1;
            self.events.push(format!("broker {id} dies during its controlled shutdown"));
            nodes[i].crash();
            self.notice_restarts(nodes);
            return;
        }
        let b = &self.brokers[i];
        if let Some(exit) = b.exit_ms {
            if now_ms >= exit || b.epoch.is_none() {
                // The process exits; its disk keeps every completed write.
                nodes[i].crash();
                self.notice_restarts(nodes);
                return;
            }
        }
        if b.inflight.is_some_and(|(_, deadline)| now_ms < deadline) || now_ms < b.next_ms {
            return;
        }
        let node = NodeId(i32::try_from(id).unwrap_or(i32::MAX));
        let body = match b.epoch {
            None => Body::Register(BrokerRegistration {
                node,
                incarnation_id: b.incarnation.unwrap_or_default(),
                endpoints: vec![BrokerEndpoint {
                    listener: "PLAINTEXT".into(),
                    host: format!("node{id}"),
                    port: 9092,
                    security_protocol: 0,
                }],
                rack: None,
            }),
            Some(epoch) => Body::Heartbeat(BrokerHeartbeat {
                node,
                epoch,
                metadata_offset: nodes[i].applied_index(),
                want_fence: false,
                want_shutdown: b.exit_ms.is_some(),
            }),
        };
        let to = self.controller_guess(id, nodes, b.hint, rng);
        self.next_rpc += 1;
        let rpc_id = self.next_rpc;
        self.brokers[i].inflight = Some((rpc_id, now_ms + CALL_LIMIT_MS));
        send(net, rng, now, Rpc { from: id, to, id: rpc_id, caller: Caller::Broker, body });
    }
}
