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

/// The admin endpoint's socket, as the runtime hands it to the shard that serves it.
pub enum AdminSocket {
    /// `--admin-listen`, already bound at start-up: a taken configured port fails the
    /// start (as Kafka fails on its listener's), it never reaches a shard.
    Bound(std::net::TcpListener),
    /// No `--admin-listen`: the default address, bound here; if it stays taken (another
    /// broker on this host), an ephemeral port, logged at WARN, so no broker runs without
    /// its admin endpoint.
    Default(SocketAddr),
}

/// Starts metrics on the calling shard: must run inside the shard's executor, once.
/// With `admin` set, this shard also serves the admin HTTP endpoint there.
pub fn start_shard(shard: u32, background: TaskQueueHandle, admin: Option<AdminSocket>) {
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
    match admin {
        None => {}
        Some(AdminSocket::Bound(listener)) => match super::http::start(listener, background) {
            Ok(local) => tracing::info!(shard, "admin HTTP (metrics) listening on {local}"),
            Err(err) => tracing::warn!(shard, "admin HTTP listener not started: {err}"),
        },
        Some(AdminSocket::Default(addr)) => {
            match glommio::spawn_local_into(serve_default(shard, addr, background), background) {
                Ok(task) => drop(task.detach()),
                Err(err) => tracing::warn!(shard, "admin HTTP listener not started: {err}"),
            }
        }
    }
}

/// Binds the default admin address, retrying for a few seconds while it is in use: a
/// broker restarted right after a crash finds its predecessor's listener still open until
/// the kernel finishes tearing down that process's io_uring. Still taken after that, it
/// is another broker's: take an ephemeral port on the same address and say which.
async fn serve_default(shard: u32, addr: SocketAddr, background: TaskQueueHandle) {
    let deadline = Instant::now() + Duration::from_millis(ADMIN_BIND_WAIT_MS_MAX);
    let listener = loop {
        match super::http::bind(addr) {
            Ok(listener) => break Ok(listener),
            Err(err)
                if err.kind() == std::io::ErrorKind::AddrInUse && Instant::now() < deadline =>
            {
                glommio::timer::sleep(Duration::from_millis(200)).await;
            }
            Err(err) => break Err(err),
        }
    };
    let listener = match listener {
        Ok(listener) => listener,
        Err(err) => match super::http::bind(SocketAddr::new(addr.ip(), 0)) {
            Ok(listener) => {
                let port = listener.local_addr().map_or(0, |a| a.port());
                tracing::warn!(
                    shard,
                    "admin HTTP default address {addr} not available ({err}); listening on \
                     port {port} instead (set --admin-listen to choose one)"
                );
                listener
            }
            Err(err) => {
                tracing::warn!(shard, "admin HTTP listener not started on {addr}: {err}");
                return;
            }
        },
    };
    match super::http::start(listener, background) {
        Ok(local) => tracing::info!(shard, "admin HTTP (metrics) listening on {local}"),
        Err(err) => tracing::warn!(shard, "admin HTTP listener not started on {addr}: {err}"),
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
