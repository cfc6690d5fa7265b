//! The Raft quorum that will carry the metadata log: tikv's `raft` crate (raft-rs 0.7, a
//! sans-IO `RawNode`) wrapped as a pure state machine ([`QuorumNode`]), the in-memory log view
//! raft-rs reads ([`view::LogView`]), and its durable storage through [`crate::io::FileSystem`]
//! ([`store::RaftStore`], byte format in `docs/format.md`).
//!
//! It runs on the controller shard (shard 0) of every voter and of every broker that follows
//! the log as a learner: [`driver`] runs a node in a process over a [`transport::Transport`]
//! ([`net`]: TCP, frames in [`frame`]). The node itself does no I/O and reads no
//! clock: the caller ticks it, steps it with messages, persists what [`QuorumNode::
//! ready`] hands out through the store, sends the messages and applies the committed entries.
//! The deterministic simulator ([`crate::sim`]) is such a caller.
//!
//! The ready contract (raft-rs's order, enforced by the types):
//! 1. [`QuorumNode::ready`] returns a [`Ready`]: a snapshot, entries and a hard state to make
//!    durable, messages that may be sent at once (a leader's appends, Raft thesis 10.2.1), and
//!    committed entries to apply (already durable here: raft-rs 0.7 hands out only entries
//!    that are both committed and persisted);
//! 2. the caller persists it ([`store::RaftStore::persist`], one fsync) — a vote, a term or an
//!    append is acknowledged only by messages that come out of step 3;
//! 3. [`QuorumNode::advance`] returns the messages that depend on that persistence (votes,
//!    append responses) and more committed entries.
//!
//! Invariants: entries handed out for persistence are contiguous and follow the log view;
//! the view changes only in [`QuorumNode::advance`] and [`QuorumNode::compact`]; a store
//! that failed a write refuses every later call (the node must be restarted from disk).
//!
//! Randomness: raft-rs 0.7 draws its randomized election timeout from `rand::thread_rng()`.
//! [`QuorumConfig::raft_config`] pins `max_election_tick = min_election_tick + 1`, so that
//! draw has one possible value and a run is replayable; the caller adds jitter itself (the
//! simulator ticks each node 0, 1 or 2 times per virtual tick from its seeded RNG).

mod codec;
pub mod driver;
#[cfg(test)]
mod driver_tests;
pub mod frame;
mod logger;
pub mod net;
mod node;
#[cfg(test)]
mod node_tests;
pub mod store;
#[cfg(test)]
mod store_tests;
pub mod transport;
pub mod view;

pub use driver::{
    DriverConfig, ProposeError, QuorumDriver, QuorumHandle, QuorumMetrics, QuorumRole,
    QuorumStatus, ReplicaStatus, StateMachine,
};
pub use logger::raft_logger;
pub use net::{NetConfig, QuorumTls, TcpTransport};
pub use node::{Advanced, Compaction, QuorumNode, Ready};
pub use raft::prelude::{ConfState, Entry, EntryType, HardState, Message, Snapshot};
pub use raft::StateRole;
pub use transport::{LocalNet, QuorumRpcError, RpcHandler, Sent, Transport};

use std::path::PathBuf;

/// Largest record the store writes or accepts on replay (an entry, a hard state, a mark).
pub const RECORD_BYTES_MAX: u32 = 64 * 1024 * 1024;
/// Largest snapshot file the store writes or reads.
pub const SNAPSHOT_BYTES_MAX: u64 = 1024 * 1024 * 1024;
/// Largest total size of the entries one append message carries.
pub const APPEND_MESSAGE_BYTES_MAX: u64 = 1024 * 1024;
/// Append messages a leader keeps in flight to one follower.
pub const APPEND_INFLIGHT_MAX: usize = 256;

/// Largest wire frame between quorum nodes (kind byte + payload). A snapshot travels in one
/// `MsgSnapshot` frame, so this also caps the snapshot a leader can send.
pub const FRAME_BYTES_MAX: usize = 64 * 1024 * 1024;
/// Frames queued per connection before raft messages are dropped (raft retries).
pub const SEND_QUEUE_FRAMES_MAX: usize = 4096;
/// RPC calls in flight per connection, each way.
pub const RPC_INFLIGHT_MAX: usize = 64;
/// Reconnect backoff: first wait, doubling up to the cap.
pub const RECONNECT_BACKOFF_MS_MIN: u64 = 50;
pub const RECONNECT_BACKOFF_MS_MAX: u64 = 2_000;
/// A dial gives up after this long.
pub const CONNECT_TIMEOUT_MS: u64 = 2_000;
/// Both hellos must be exchanged within this long.
pub const HANDSHAKE_TIMEOUT_MS: u64 = 2_000;
/// A connection whose sent data stays unacknowledged this long is closed by the kernel
/// (`TCP_USER_TIMEOUT`), and an idle one probed after this long (keepalive): a link cut
/// without a reset (a dropped route, a firewall) is noticed in seconds and redialled,
/// instead of waiting out TCP's retransmission backoff (minutes). 3 election timeouts.
pub const PEER_DEAD_AFTER_MS: u32 = 3_000;
/// Raft messages waiting for the driver loop before new ones are dropped.
pub const INBOX_MESSAGES_MAX: usize = 16_384;
/// Driver tick (10-tick elections ≈ 1 s, 2-tick heartbeats).
pub const TICK_MS_DEFAULT: u64 = 100;
/// Local snapshot (and log compaction) every this many applied entries.
pub const SNAPSHOT_EVERY_ENTRIES_DEFAULT: u64 = 10_000;
/// How long a proposal waits to be applied.
pub const PROPOSE_TIMEOUT_MS_DEFAULT: u64 = 5_000;

/// What a node needs to know to start. Ticks are the caller's unit of time.
#[derive(Clone, Debug)]
pub struct QuorumConfig {
    /// This node's id (> 0; raft-rs reserves 0 for "none").
    pub id: u64,
    /// Ticks without hearing from a leader before a follower campaigns.
    pub election_ticks: usize,
    /// Ticks between a leader's heartbeats (< `election_ticks`).
    pub heartbeat_ticks: usize,
    /// Pre-vote: a node that was partitioned away asks before raising the term, so it does
    /// not depose a healthy leader when it comes back.
    pub pre_vote: bool,
    /// A leader that has not heard from a majority for an election timeout steps down.
    pub check_quorum: bool,
}

impl QuorumConfig {
    /// Defaults for node `id`: 10-tick elections, 2-tick heartbeats, pre-vote, check-quorum.
    #[must_use]
    pub fn new(id: u64) -> Self {
        Self { id, election_ticks: 10, heartbeat_ticks: 2, pre_vote: true, check_quorum: true }
    }

    /// The raft-rs configuration, with the election timeout's random range collapsed to one
    /// value (see the module docs) and `applied` set to the snapshot the node restarts from.
    #[must_use]
    pub fn raft_config(&self, applied: u64) -> raft::Config {
        raft::Config {
            id: self.id,
            election_tick: self.election_ticks,
            heartbeat_tick: self.heartbeat_ticks,
            min_election_tick: self.election_ticks,
            max_election_tick: self.election_ticks + 1,
            applied,
            max_size_per_msg: APPEND_MESSAGE_BYTES_MAX,
            max_inflight_msgs: APPEND_INFLIGHT_MAX,
            pre_vote: self.pre_vote,
            check_quorum: self.check_quorum,
            ..raft::Config::default()
        }
    }
}

/// Errors of the quorum and its store.
#[derive(Debug, thiserror::Error)]
pub enum QuorumError {
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} at byte {offset}: {reason}")]
    Corrupt { path: PathBuf, offset: u64, reason: String },
    /// An earlier write or sync failed: what is on disk is unknown until a restart replays it.
    #[error("quorum store failed earlier ({0}); restart to recover")]
    Failed(String),
    #[error("{0}")]
    Invalid(String),
}
