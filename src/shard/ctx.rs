//! Per-shard context: identity, config, the cached metadata image, the mesh senders with
//! the table of replies awaited, task queues, the shutdown signal, and the application's
//! state, type-erased (the server keeps the partition table there, in its broker value:
//! the runtime holds no partition). One `Rc<ShardCtx>` per shard, never sent to another
//! thread.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use futures::channel::oneshot;
use glommio::channels::channel_mesh::Senders;
use glommio::TaskQueueHandle;

use super::mesh::{Handler, MeshError, MeshMsg, Payload};
use crate::config::ServeConfig;
use crate::metadata::MetadataImage;
use crate::sync::Notify;
use crate::types::{Epoch, ShardId};

/// A reply on its way from a shard, still type-erased (`server::call` gives it its type).
pub type Delivery = Pin<Box<dyn Future<Output = Result<Payload, MeshError>>>>;

pub struct ShardCtx {
    pub id: ShardId,
    pub shard_count: u32,
    pub config: Arc<ServeConfig>,
    image: RefCell<Arc<MetadataImage>>,
    senders: Senders<MeshMsg>,
    handler: Handler,
    pending: RefCell<HashMap<u64, oneshot::Sender<Payload>>>,
    next_request_id: Cell<u64>,
    /// The application's state on this shard (the server's broker value: the partition
    /// table, the cluster node on the controller shard), type-erased so the runtime names no
    /// application module.
    app: RefCell<Option<Rc<dyn std::any::Any>>>,
    shutting_down: Cell<bool>,
    pub shutdown: Notify,
    pub connections: Cell<usize>,
    pub connections_changed: Notify,
    /// The zero of [`ShardCtx::quota_clock_ms`].
    clock_zero: std::time::Instant,
    latency_queue: TaskQueueHandle,
    background_queue: TaskQueueHandle,
}

/// The process-wide zero of the quota clock.
fn quota_clock_zero() -> std::time::Instant {
    static ZERO: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *ZERO.get_or_init(std::time::Instant::now)
}

pub(crate) struct CtxParts {
    pub senders: Senders<MeshMsg>,
    pub handler: Handler,
    pub config: Arc<ServeConfig>,
    pub latency_queue: TaskQueueHandle,
    pub background_queue: TaskQueueHandle,
}

impl ShardCtx {
    pub(crate) fn new(parts: CtxParts) -> Self {
        let id = ShardId(u32::try_from(parts.senders.peer_id()).unwrap_or(u32::MAX));
        let image = Arc::new(placeholder_image(&parts.config));
        Self {
            id,
            shard_count: parts.config.shards,
            config: parts.config,
            image: RefCell::new(image),
            senders: parts.senders,
            handler: parts.handler,
            pending: RefCell::new(HashMap::new()),
            next_request_id: Cell::new(1),
            app: RefCell::new(None),
            shutting_down: Cell::new(false),
            shutdown: Notify::new(),
            connections: Cell::new(0),
            connections_changed: Notify::new(),
            clock_zero: quota_clock_zero(),
            latency_queue: parts.latency_queue,
            background_queue: parts.background_queue,
        }
    }

    /// Monotonic milliseconds since the process's first shard started: the clock quota math
    /// runs on, one for all shards because they compare each other's share reports by it.
    #[must_use]
    pub fn quota_clock_ms(&self) -> u64 {
        u64::try_from(self.clock_zero.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The metadata image this shard currently serves from.
    #[must_use]
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.borrow().clone()
    }

    /// Installs `image` unless this shard already holds a newer one (publications from
    /// the controller shard may overtake each other on the mesh).
    pub(crate) fn set_image(&self, image: Arc<MetadataImage>) -> bool {
        let mut current = self.image.borrow_mut();
        let newer = image.version >= current.version || current.cluster_id.is_empty();
        if newer {
            *current = image;
        }
        newer
    }

    /// Installs the application's state for this shard (once, at start).
    pub fn set_app(&self, app: Rc<dyn std::any::Any>) {
        *self.app.borrow_mut() = Some(app);
    }

    /// The application's state installed with [`ShardCtx::set_app`].
    #[must_use]
    pub fn app(&self) -> Option<Rc<dyn std::any::Any>> {
        self.app.borrow().clone()
    }

    /// True once the first image from the controller is installed.
    #[must_use]
    pub fn has_image(&self) -> bool {
        !self.image.borrow().cluster_id.is_empty()
    }

    /// Owner shard and leader epoch of a partition, per the cached image.
    #[must_use]
    pub fn owner_of(&self, topic: &str, partition: i32) -> Option<(ShardId, Epoch)> {
        let image = self.image.borrow();
        let p = image.partition(topic, partition)?;
        Some((p.owner_shard, p.leader_epoch))
    }

    #[must_use]
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.get()
    }

    pub(crate) fn begin_shutdown(&self) {
        self.shutting_down.set(true);
        self.shutdown.notify_all();
    }

    /// Spawns request-path work on the latency queue; the task runs to completion even
    /// if the returned handle is dropped.
    pub fn spawn<T: 'static>(
        &self,
        fut: impl Future<Output = T> + 'static,
    ) -> impl Future<Output = Option<T>> {
        spawn_into(fut, self.latency_queue)
    }

    /// Spawns background work (deletion, cleanup) on the low-share queue.
    pub fn spawn_background(&self, fut: impl Future<Output = ()> + 'static) {
        drop(spawn_into(fut, self.background_queue));
    }

    /// The application's handler of requests addressed to this shard.
    pub(crate) fn handler(&self) -> Handler {
        self.handler
    }

    /// Sends `req` to `target` (or runs it here if `target` is this shard) and returns the
    /// reply's future; `api` labels the hop's latency. Awaiting this call only waits for
    /// room in the mesh channel, so calls issued in order reach the target in order.
    pub async fn send(
        self: &Rc<Self>,
        target: ShardId,
        req: Payload,
        api: Option<i16>,
    ) -> Delivery {
        if target == self.id {
            let ctx = self.clone();
            let task = self.spawn(async move { (ctx.handler)(ctx.clone(), req).await });
            let id = self.id;
            return Box::pin(async move { task.await.ok_or(MeshError::Dropped(id)) });
        }
        let id = self.next_request_id.get();
        self.next_request_id.set(id.wrapping_add(1));
        let (tx, rx) = oneshot::channel();
        self.pending.borrow_mut().insert(id, tx);
        let msg = MeshMsg::Request { id, from: self.id, req };
        if self.senders.send_to(target.0 as usize, msg).await.is_err() {
            self.pending.borrow_mut().remove(&id);
            return Box::pin(async move { Err(MeshError::Closed(target)) });
        }
        let reply = async move { rx.await.map_err(|_| MeshError::Dropped(target)) };
        Box::pin(crate::metrics::hop(api, reply))
    }

    pub(crate) async fn send_reply(&self, to: ShardId, id: u64, reply: Payload) {
        let msg = MeshMsg::Reply { id, reply };
        if self.senders.send_to(to.0 as usize, msg).await.is_err() {
            tracing::debug!(shard = %self.id, to = %to, "reply dropped: mesh closed");
        }
    }

    pub(crate) fn deliver_reply(&self, id: u64, reply: Payload) {
        if let Some(tx) = self.pending.borrow_mut().remove(&id) {
            // The waiter may be gone (connection closed): the reply is simply dropped.
            let _ = tx.send(reply);
        }
    }

    pub(crate) fn close_mesh(&self) {
        self.senders.close();
    }
}

/// The image a shard holds before the controller's first publication: no cluster id, no
/// topics (requests are not served until the real one arrives).
fn placeholder_image(config: &ServeConfig) -> MetadataImage {
    MetadataImage {
        version: 0,
        cluster_id: String::new(),
        node_id: config.node_id,
        controller_id: config.node_id,
        shard_count: config.shards,
        topics: std::collections::BTreeMap::new(),
        topic_ids: HashMap::new(),
        // The static settings until the controller's first image (cleaner settings are read
        // from the image).
        broker_defaults: Arc::new(config.broker_defaults()),
        client_quotas: Arc::default(),
        scram_credentials: Arc::default(),
        acls: Arc::default(),
        brokers: Arc::default(),
        reassignments: Arc::default(),
    }
}

fn spawn_into<T: 'static>(
    fut: impl Future<Output = T> + 'static,
    queue: TaskQueueHandle,
) -> impl Future<Output = Option<T>> {
    match glommio::spawn_local_into(fut, queue) {
        Ok(task) => futures::future::Either::Left(task.detach()),
        // Only fails for an unknown queue, which is a bug in this module.
        Err(err) => {
            tracing::error!("spawn failed: {err}");
            futures::future::Either::Right(futures::future::ready(None))
        }
    }
}
