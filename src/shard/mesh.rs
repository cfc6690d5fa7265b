//! Cross-shard messages: a request carries an id and its sender; the reply travels back
//! on the mesh with the same id and completes the waiting future on the sender shard.
//!
//! The runtime carries the application's requests and replies without knowing them: a
//! [`Payload`] is type-erased, and the application registers the [`Handler`] that runs a
//! request when the shard starts (`runtime::App`), as Redpanda's sharded services never know
//! their callers. The server's typed messages and their dispatch are in `server::call`.
//!
//! Every message is `Send`. Invariants: a receiving shard never blocks its receive loop on a
//! send (each request is handled by its own task, spawned in arrival order, so
//! per-partition order is kept: glommio runs tasks of a queue first-in first-out); replies
//! to a dropped waiter are discarded.

use std::any::Any;
use std::rc::Rc;

use futures::future::LocalBoxFuture;
use glommio::channels::shared_channel::ConnectedReceiver;
use thiserror::Error;

use super::ctx::ShardCtx;
use crate::types::ShardId;

/// A request or reply body, opaque to the runtime.
pub type Payload = Box<dyn Any + Send>;

/// Runs a request addressed to this shard and produces its reply; registered at start.
pub type Handler = fn(Rc<ShardCtx>, Payload) -> LocalBoxFuture<'static, Payload>;

pub enum MeshMsg {
    Request { id: u64, from: ShardId, req: Payload },
    Reply { id: u64, reply: Payload },
}

#[derive(Debug, Error)]
pub enum MeshError {
    #[error("shard {0} is unreachable (mesh channel closed)")]
    Closed(ShardId),
    #[error("shard {0} dropped the request")]
    Dropped(ShardId),
}

/// Receives from one peer until its channel closes.
pub(crate) async fn receive_loop(ctx: Rc<ShardCtx>, rx: ConnectedReceiver<MeshMsg>) {
    while let Some(msg) = rx.recv().await {
        match msg {
            MeshMsg::Request { id, from, req } => {
                let ctx = ctx.clone();
                drop(ctx.clone().spawn(async move {
                    let reply = (ctx.handler())(ctx.clone(), req).await;
                    ctx.send_reply(from, id, reply).await;
                }));
            }
            MeshMsg::Reply { id, reply } => ctx.deliver_reply(id, reply),
        }
    }
}
