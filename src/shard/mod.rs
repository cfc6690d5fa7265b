//! The shard runtime: one glommio executor per core, pinned, each with a latency-class
//! queue for requests and a low-share queue for background work; the SO_REUSEPORT
//! listener of each shard; the bounded cross-shard mesh with type-erased request/reply
//! messages run by the handler the application registers (`runtime::App`); partition →
//! owner-shard routing from the metadata image each shard caches. It knows no Kafka API
//! and holds no partition: the server and the partition layer sit above it, and the
//! server keeps each shard's partition table in the application state the context carries.
//!
//! Lives on every shard. Invariants: nothing here is shared between threads except the
//! mesh channels and immutable `Arc` snapshots (config, metadata image); a partition's
//! log is touched only by its owner shard. glommio is imported only here (and in `io/`),
//! so the server and protocol code stay runtime-agnostic.

pub mod ctx;
pub mod mesh;

pub mod runtime;

use std::future::Future;
use std::time::Duration;

pub use crate::sync::Notify;
pub use ctx::{Delivery, ShardCtx};
pub use mesh::{Handler, MeshError, Payload};

/// Sleeps on the current shard's timer.
pub async fn sleep(duration: Duration) {
    glommio::timer::sleep(duration).await;
}

/// Lets higher-priority work on this shard run if the current task used its time slice.
pub async fn yield_if_needed() {
    glommio::executor().yield_if_needed().await;
}

/// Runs a blocking call (a large directory removal) on the executor's thread pool, off the
/// reactor thread.
pub async fn spawn_blocking<R: Send + 'static>(call: impl FnOnce() -> R + Send + 'static) -> R {
    glommio::executor().spawn_blocking(call).await
}

/// Runs `fut` with a deadline; `None` if the deadline passed first.
pub async fn with_timeout<T>(duration: Duration, fut: impl Future<Output = T>) -> Option<T> {
    futures::pin_mut!(fut);
    let timer = sleep(duration);
    futures::pin_mut!(timer);
    match futures::future::select(fut, timer).await {
        futures::future::Either::Left((value, _)) => Some(value),
        futures::future::Either::Right(((), _)) => None,
    }
}

/// Wall-clock milliseconds since the Unix epoch (Kafka timestamps).
#[must_use]
pub fn now_ms() -> i64 {
    crate::io::real_now_ms()
}
