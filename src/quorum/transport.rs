//! The seam between the quorum driver ([`super::driver`]) and the network: [`Transport`]
//! sends raft messages and RPC calls to node ids and hands what arrives to the receiver and
//! RPC handler the driver registers. Two implementations: TCP ([`super::net::TcpTransport`])
//! and an in-process one ([`LocalNet`], for tests of the driver without sockets).
//!
//! Lives on the controller shard (shard 0); `Rc`, never shared across threads. Invariant: a
//! transport never blocks the caller: `send` queues or refuses at once (bounded queues, raft
//! retries what is lost), and a `call` resolves with an answer or an error within its timeout.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::LocalBoxFuture;
use futures::FutureExt;

use super::Message;

/// Where a transport hands the raft messages it receives.
pub type Receiver = Rc<dyn Fn(Message)>;
/// Answers an RPC from node `from`; the returned bytes go back to the caller.
pub type RpcHandler = Rc<dyn Fn(u64, Bytes) -> LocalBoxFuture<'static, Bytes>>;

/// What became of a message handed to [`Transport::send`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// Queued on a connection to the node (not yet known delivered).
    Queued,
    /// No connection to the node: raft should probe it instead of streaming.
    Unreachable,
    /// The node's send queue is full (or the message too large): dropped, raft retries.
    Dropped,
}

/// Why an RPC call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuorumRpcError {
    #[error("node {0} is unreachable")]
    Unreachable(u64),
    #[error("no answer within the timeout")]
    Timeout,
    #[error("connection closed before the answer")]
    Disconnected,
    #[error("too many calls in flight to node {0}")]
    Busy(u64),
    #[error("node {0} has no RPC handler")]
    NoHandler(u64),
    #[error("{0}")]
    Invalid(String),
}

/// Sends raft messages and RPCs to other nodes. See the module docs.
pub trait Transport {
    /// Queues `msg` for `msg.to`.
    fn send(&self, msg: Message) -> Sent;
    /// Calls node `to`'s RPC handler with `body`; an error after `timeout_ms` at the latest.
    fn call(
        &self,
        to: u64,
        body: Bytes,
        timeout_ms: u64,
    ) -> LocalBoxFuture<'static, Result<Bytes, QuorumRpcError>>;
    /// Where received raft messages go (messages arriving before this are dropped).
    fn set_receiver(&self, receiver: Receiver);
    /// Who answers incoming RPCs (calls arriving before this get `NoHandler`).
    fn set_rpc_handler(&self, handler: RpcHandler);
    /// Stops connecting and accepting; open connections close.
    fn shutdown(&self);
    /// Handshakes refused so far (mis-configured peers).
    fn refused_count(&self) -> u64 {
        0
    }
}

/// An in-process network of [`LocalEndpoint`]s on one executor: messages are delivered on
/// the next poll, in order; a node can be cut off (its messages and calls fail as
/// unreachable).
#[derive(Clone, Default)]
pub struct LocalNet {
    nodes: Rc<RefCell<HashMap<u64, Rc<LocalNode>>>>,
}

#[derive(Default)]
struct LocalNode {
    receiver: RefCell<Option<Receiver>>,
    handler: RefCell<Option<RpcHandler>>,
    cut: std::cell::Cell<bool>,
}

/// One node's view of a [`LocalNet`].
pub struct LocalEndpoint {
    id: u64,
    net: LocalNet,
    me: Rc<LocalNode>,
}

impl LocalNet {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds node `id` and returns its endpoint.
    #[must_use]
    pub fn endpoint(&self, id: u64) -> Rc<LocalEndpoint> {
        let me = Rc::new(LocalNode::default());
        self.nodes.borrow_mut().insert(id, me.clone());
        Rc::new(LocalEndpoint { id, net: self.clone(), me })
    }

    /// Cuts node `id` off (or reconnects it).
    pub fn set_cut(&self, id: u64, cut: bool) {
        if let Some(n) = self.nodes.borrow().get(&id) {
            n.cut.set(cut);
        }
    }

    fn peer(&self, from: u64, to: u64) -> Option<Rc<LocalNode>> {
        let nodes = self.nodes.borrow();
        let (a, b) = (nodes.get(&from)?, nodes.get(&to)?);
        (!a.cut.get() && !b.cut.get()).then(|| b.clone())
    }
}

impl Transport for LocalEndpoint {
    fn send(&self, msg: Message) -> Sent {
        let Some(peer) = self.net.peer(self.id, msg.to) else { return Sent::Unreachable };
        let Some(rx) = peer.receiver.borrow().clone() else { return Sent::Dropped };
        // Delivered from a task of its own, as a socket would: never re-entrantly.
        glommio::spawn_local(async move { rx(msg) }).detach();
        Sent::Queued
    }

    fn call(
        &self,
        to: u64,
        body: Bytes,
        timeout_ms: u64,
    ) -> LocalBoxFuture<'static, Result<Bytes, QuorumRpcError>> {
        let peer = self.net.peer(self.id, to);
        let from = self.id;
        async move {
            let peer = peer.ok_or(QuorumRpcError::Unreachable(to))?;
            let handler = peer.handler.borrow().clone().ok_or(QuorumRpcError::NoHandler(to))?;
            let answer = handler(from, body);
            let timer = glommio::timer::sleep(Duration::from_millis(timeout_ms));
            futures::select! {
                a = answer.fuse() => Ok(a),
                _ = FutureExt::fuse(timer) => Err(QuorumRpcError::Timeout),
            }
        }
        .boxed_local()
    }

    fn set_receiver(&self, receiver: Receiver) {
        *self.me.receiver.borrow_mut() = Some(receiver);
    }

    fn set_rpc_handler(&self, handler: RpcHandler) {
        *self.me.handler.borrow_mut() = Some(handler);
    }

    fn shutdown(&self) {
        self.me.cut.set(true);
    }
}
