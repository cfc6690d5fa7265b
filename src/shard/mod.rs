//! The shard runtime: one glommio executor per core, pinned, each with a latency-class
//! queue for requests and a low-share queue for background work; the SO_REUSEPORT
//! listener of each shard; the bounded cross-shard mesh with request/reply messages;
//! partition → owner-shard routing from the metadata image each shard caches; the table
//! of partition logs a shard owns, opened and closed as the image changes.
//!
//! Lives on every shard. Invariants: nothing here is shared between threads except the
//! mesh channels and immutable `Arc` snapshots (config, metadata image); a partition's
//! log is touched only by its owner shard. glommio is imported only here (and in `io/`),
//! so the server and protocol code stay runtime-agnostic.

pub mod ctx;
pub mod maintenance;
pub mod mesh;

pub mod partitions;
pub mod runtime;

use std::future::Future;
use std::time::Duration;

pub use crate::controller::{Controller, MetadataImage, PartitionImage, TopicImage};
pub use crate::storage::{AppendInfo, StorageError};
pub use crate::sync::Notify;
pub use ctx::{Delivery, ShardCtx};
pub use mesh::{Handler, MeshError, Payload};
pub use partitions::OwnedPartition;

/// The partition log every shard opens: the storage engine on glommio DMA files.
pub type Log = crate::storage::DmaPartitionLog;

/// Sleeps on the current shard's timer.
pub async fn sleep(duration: Duration) {
    glommio::timer::sleep(duration).await;
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
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}
