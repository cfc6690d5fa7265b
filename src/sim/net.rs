//! The simulated network: messages in flight with a delivery tick, lost, duplicated, delayed
//! (so reordered) and cut by partitions, all drawn from the simulation's seeded RNG.
//!
//! Single-threaded, owned by the simulation ([`super::run`]). Invariant: delivery order is a function of the
//! seed alone (a `BTreeMap` keyed by delivery tick and send sequence).

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::Rng;

use super::cluster::Rpc;
use crate::quorum::Message;

/// What travels between simulated nodes: Raft messages, and the cluster layer's RPCs
/// (broker registration and heartbeats, client requests, their answers).
#[derive(Clone, Debug)]
pub enum Packet {
    Raft(Message),
    Rpc(Rpc),
}

impl Packet {
    #[must_use]
    pub fn from(&self) -> u64 {
        match self {
            Packet::Raft(m) => m.from,
            Packet::Rpc(r) => r.from,
        }
    }

    #[must_use]
    pub fn to(&self) -> u64 {
        match self {
            Packet::Raft(m) => m.to,
            Packet::Rpc(r) => r.to,
        }
    }
}

/// How hostile the network is.
#[derive(Clone, Debug)]
pub struct NetFaults {
    /// Percent of messages lost.
    pub loss_pct: u32,
    /// Percent of messages delivered twice.
    pub duplicate_pct: u32,
    /// Usual delay: 1..=this many ticks.
    pub delay_ticks_max: u64,
    /// Percent of messages delayed up to `slow_delay_ticks_max` instead.
    pub slow_pct: u32,
    pub slow_delay_ticks_max: u64,
}

impl NetFaults {
    /// Lossy, duplicating, reordering.
    #[must_use]
    pub fn hostile() -> Self {
        Self {
            loss_pct: 5,
            duplicate_pct: 3,
            delay_ticks_max: 3,
            slow_pct: 5,
            slow_delay_ticks_max: 15,
        }
    }

    /// Every message arrives, after 1 or 2 ticks.
    #[must_use]
    pub fn calm() -> Self {
        Self {
            loss_pct: 0,
            duplicate_pct: 0,
            delay_ticks_max: 2,
            slow_pct: 0,
            slow_delay_ticks_max: 2,
        }
    }
}

/// Messages in flight and the current partition.
pub struct Network {
    pub faults: NetFaults,
    queue: BTreeMap<(u64, u64), Packet>,
    seq: u64,
    /// Partition group of each node id; nodes talk only within a group.
    groups: BTreeMap<u64, u32>,
}

impl Network {
    #[must_use]
    pub fn new(faults: NetFaults) -> Self {
        Self { faults, queue: BTreeMap::new(), seq: 0, groups: BTreeMap::new() }
    }

    /// Queues `msg` sent at tick `now`; `false` if the network lost it at once.
    pub fn send(&mut self, rng: &mut StdRng, now: u64, msg: Packet) -> bool {
        let f = &self.faults;
        if rng.gen_range(0..100) < f.loss_pct || !self.connected(msg.from(), msg.to()) {
            return false;
        }
        let copies = if rng.gen_range(0..100) < f.duplicate_pct { 2 } else { 1 };
        for _ in 0..copies {
            let delay = if rng.gen_range(0..100) < self.faults.slow_pct {
                rng.gen_range(1..=self.faults.slow_delay_ticks_max)
            } else {
                rng.gen_range(1..=self.faults.delay_ticks_max)
            };
            self.seq += 1;
            self.queue.insert((now + delay, self.seq), msg.clone());
        }
        true
    }

    /// Removes and returns the messages due at or before `now`, in delivery order; a message
    /// whose link the partition cut meanwhile is returned with `false`.
    pub fn due(&mut self, now: u64) -> Vec<(Packet, bool)> {
        let later = self.queue.split_off(&(now + 1, 0));
        let due = std::mem::replace(&mut self.queue, later);
        due.into_values()
            .map(|m| {
                let ok = self.connected(m.from(), m.to());
                (m, ok)
            })
            .collect()
    }

    #[must_use]
    pub fn connected(&self, a: u64, b: u64) -> bool {
        self.groups.get(&a).copied().unwrap_or(0) == self.groups.get(&b).copied().unwrap_or(0)
    }

    /// Splits the nodes into two random groups.
    pub fn partition(&mut self, rng: &mut StdRng, ids: &[u64]) -> String {
        self.groups = ids.iter().map(|id| (*id, rng.gen_range(0..2))).collect();
        format!("partition {:?}", self.groups)
    }

    pub fn heal(&mut self) {
        self.groups.clear();
    }

    #[must_use]
    pub fn partitioned(&self) -> bool {
        !self.groups.is_empty()
    }

    #[must_use]
    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }
}
