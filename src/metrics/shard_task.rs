//! The per-shard metrics task: installs the shard's recorder, publishes it every
//! [`METRICS_PUBLISH_INTERVAL_MS`] with the reactor's busy ratio, starts the shard's stall
//! probe ([`super::stall`]) and (on one shard) the admin HTTP listener.
//!
//! Runs on every shard, in the shard's low-share background task queue, so publishing
//! never delays requests. This file and [`super::http`] are the only glommio users of the
//! metrics module: `executor_stats()` (busy time; glommio resets it on each read, so this
//! task must be its only reader), `timer::sleep` and `spawn_local_into`.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use glommio::TaskQueueHandle;

use super::hub::{self, Slot};
use super::recorder::{self, ShardRecorder};
use crate::constants::{ADMIN_BIND_WAIT_MS_MAX, METRICS_PUBLISH_INTERVAL_MS};

/// Busy-ratio window: the ratio shown is busy time over the last window.
const BUSY_WINDOW: Duration = Duration::from_secs(1);

/// Starts metrics on the calling shard: must run inside the shard's executor, once.
/// With `admin` set, this shard also serves the admin HTTP endpoint there.
pub fn start_shard(shard: u32, background: TaskQueueHandle, admin: Option<SocketAddr>) {
    let recorder = recorder::install(ShardRecorder::new(shard));
    let slot = hub::register(shard);
    let publisher = publish_loop(recorder, slot);
    // Detached: the publisher lives as long as the shard's executor.
    match glommio::spawn_local_into(publisher, background) {
        Ok(task) => drop(task.detach()),
        Err(err) => tracing::warn!(shard, "metrics publisher not started: {err}"),
    }
    // In the default (request) queue: its lateness is what requests wait too.
    drop(glommio::spawn_local(super::stall::probe(shard)).detach());
    if let Some(addr) = admin {
        match glommio::spawn_local_into(serve_admin(shard, addr, background), background) {
            Ok(task) => drop(task.detach()),
            Err(err) => tracing::warn!(shard, "admin HTTP listener not started on {addr}: {err}"),
        }
    }
}

/// Binds the admin endpoint, retrying for a few seconds while the port is in use: a broker
/// restarted right after a crash finds its predecessor's listener still open until the
/// kernel finishes tearing down that process's io_uring.
async fn serve_admin(shard: u32, addr: SocketAddr, background: TaskQueueHandle) {
    let deadline = Instant::now() + Duration::from_millis(ADMIN_BIND_WAIT_MS_MAX);
    loop {
        match super::http::start(addr, background) {
            Ok(local) => {
                tracing::info!(shard, "admin HTTP (metrics) listening on {local}");
                return;
            }
            Err(err)
                if err.kind() == std::io::ErrorKind::AddrInUse && Instant::now() < deadline =>
            {
                glommio::timer::sleep(Duration::from_millis(200)).await;
            }
            Err(err) => {
                tracing::warn!(shard, "admin HTTP listener not started on {addr}: {err}");
                return;
            }
        }
    }
}

/// Installs a recorder on the calling thread without a runtime (benchmarks and tests
/// that time the hooks outside a shard).
pub fn install_for_bench(shard: u32) {
    let _ = recorder::install(ShardRecorder::new(shard));
}

/// Publishes this shard's recordings now, if this thread is a shard (scrapes call it so
/// the serving shard's own figures are current).
pub fn publish_now() {
    LOCAL_SLOT.with(|s| {
        if let Some(slot) = s.get() {
            recorder::with_local(|r| r.publish(&mut slot.snapshot.lock()));
        }
    });
}

thread_local! {
    static LOCAL_SLOT: std::cell::OnceCell<Arc<Slot>> = const { std::cell::OnceCell::new() };
}

async fn publish_loop(recorder: Rc<ShardRecorder>, slot: Arc<Slot>) {
    LOCAL_SLOT.with(|s| {
        let _ = s.set(slot.clone());
    });
    let interval = Duration::from_millis(METRICS_PUBLISH_INTERVAL_MS);
    let mut window_start = Instant::now();
    let mut window_busy = Duration::ZERO;
    // Discard the busy time accumulated before metrics started.
    let _ = glommio::executor().executor_stats();
    loop {
        glommio::timer::sleep(interval).await;
        let busy = glommio::executor().executor_stats().total_runtime();
        window_busy += busy;
        let mut snap = slot.snapshot.lock();
        snap.busy_ns = snap.busy_ns.saturating_add(super::micros(busy).saturating_mul(1000));
        let elapsed = window_start.elapsed();
        if elapsed >= BUSY_WINDOW {
            snap.busy_ratio = (window_busy.as_secs_f64() / elapsed.as_secs_f64()).min(1.0);
            window_start = Instant::now();
            window_busy = Duration::ZERO;
        }
        recorder.publish(&mut snap);
    }
}
