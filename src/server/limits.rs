//! Connection and request-memory limits, with Kafka's setting names:
//!
//! - `max.connections`: at the cap the shard stops accepting, so new connections wait in
//!   the kernel's accept queue (Kafka's acceptor does the same) until one closes
//!   ([`accept_gate`]).
//! - `max.connection.creation.rate`: accepts are paced by a token bucket holding one
//!   second's worth; each shard holds an equal share of the rate ([`accept_gate`]).
//! - `max.connections.per.ip` and `max.connections.per.ip.overrides`: a connection over its
//!   address's limit is closed at once ([`admit`]).
//! - `queued.max.request.bytes`: each shard holds an equal share of a budget of request
//!   bytes read but not yet answered; when it is spent, the shard's connections stop reading
//!   (after a frame's size, before its body) until answers free it ([`RequestBudget`]). One
//!   request is always admitted on an idle shard, so a request larger than a share still
//!   gets served.
//! - `request.receive.timeout.ms` (Shardlog's own; Kafka has no such bound): a frame whose
//!   first byte arrived must be whole within this time, or the connection is closed.
//! - `log.dir.reserved.bytes` (Shardlog's own): below this much free space in the data
//!   directory, client produce is refused with KAFKA_STORAGE_ERROR, so the broker's own
//!   writes (offset commits, group metadata, the metadata log) still find room
//!   ([`data_dir_low_on_space`]; measured once a second per shard, and sooner as the
//!   headroom above the reserve shrinks).
//!
//! Where it lives: the connection counts are process-wide (one broker per process), behind a
//! mutex taken once per accept and per close, never per request; the rate bucket and the
//! request budget are per shard (thread-local: a shard is a thread). Invariants: every admitted connection holds a [`ConnectionPermit`] whose
//! drop gives its counts back; every byte charged to a budget is given back when its
//! [`QueuedBytes`] drops (after the response is written, or when the connection dies).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::ConnectionLimits;
use crate::constants::{ACCEPT_RECHECK_MS, DISK_SPACE_CHECK_INTERVAL_MS};
use crate::shard::{Notify, ShardCtx};

/// Open connections of the whole broker, in total and per peer address.
#[derive(Default)]
struct Counts {
    total: usize,
    per_ip: HashMap<IpAddr, u32>,
}

static COUNTS: Mutex<Option<Counts>> = Mutex::new(None);

fn with_counts<T>(f: impl FnOnce(&mut Counts) -> T) -> T {
    let mut guard = COUNTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    f(guard.get_or_insert_with(Counts::default))
}

/// Open connections of the broker (all shards).
#[must_use]
pub fn open_connections() -> usize {
    with_counts(|c| c.total)
}

/// This shard's side of the limits, held in its broker value (`server::broker`).
#[derive(Default)]
pub struct ShardLimits {
    /// This shard's share of `max.connection.creation.rate` (created on first accept).
    accept_rate: RefCell<Option<TokenBucket>>,
    /// This shard's share of `queued.max.request.bytes` (created on first use).
    request_budget: RefCell<Option<Rc<RequestBudget>>>,
    /// The last measurement of the data directory's free space on this shard.
    disk: Cell<Option<DiskSample>>,
}

/// One statvfs of the data directory and what this shard accepted since.
#[derive(Clone, Copy)]
struct DiskSample {
    at: Instant,
    free_bytes: u64,
    low: bool,
    /// Produce request bytes this shard accepted since `at`.
    accepted_bytes: u64,
}

/// Whether the data directory has less free space than `log.dir.reserved.bytes`.
/// `incoming_bytes` is the produce request about to be written. The free space is measured
/// at most once every [`DISK_SPACE_CHECK_INTERVAL_MS`] per shard, and sooner once this shard
/// has accepted its share (1/2 over the shard count) of the headroom left above the
/// reserve: a fast producer would otherwise write far into the reserve between two
/// measurements. A statvfs is a short blocking syscall on the reactor.
#[must_use]
pub fn data_dir_low_on_space(ctx: &ShardCtx, incoming_bytes: u64) -> bool {
    let reserved = ctx.config.log_dir_reserved_bytes;
    if reserved == 0 {
        return false;
    }
    let now = Instant::now();
    let broker = crate::server::broker::of(ctx);
    let disk = &broker.limits.disk;
    let previous = disk.get();
    if let Some(mut sample) = previous {
        let headroom = sample.free_bytes.saturating_sub(reserved);
        let share = headroom / (2 * u64::from(ctx.shard_count.max(1)));
        let fresh =
            now.duration_since(sample.at) < Duration::from_millis(DISK_SPACE_CHECK_INTERVAL_MS);
        if fresh && (sample.low || sample.accepted_bytes + incoming_bytes <= share) {
            if !sample.low {
                sample.accepted_bytes += incoming_bytes;
                disk.set(Some(sample));
            }
            return sample.low;
        }
    }
    let (free_bytes, low) = match crate::io::host::space(&ctx.config.data_dir) {
        Ok(space) => (space.free_bytes, space.free_bytes < reserved),
        Err(err) => {
            tracing::debug!("statvfs of the data directory failed: {err}");
            (u64::MAX, false)
        }
    };
    let accepted_bytes = if low { 0 } else { incoming_bytes };
    disk.set(Some(DiskSample { at: now, free_bytes, low, accepted_bytes }));
    let was = previous.is_some_and(|p| p.low);
    if low && !was {
        tracing::warn!(shard = %ctx.id, reserved, "free space of the data directory is below log.dir.reserved.bytes: refusing produce with KAFKA_STORAGE_ERROR until space is freed");
    } else if was && !low {
        tracing::info!(shard = %ctx.id, "free space is back above log.dir.reserved.bytes: produce accepted again");
    }
    low
}

/// Awaited by the shard's accept loop before each accept: holds it while the broker is at
/// `max.connections` (clients queue in the kernel) or the shard is over its share of
/// `max.connection.creation.rate`.
pub async fn accept_gate(ctx: Rc<ShardCtx>) {
    let limits = &ctx.config.connection_limits;
    let mut logged = false;
    loop {
        let seen = ctx.connections_changed.version();
        if open_connections() < limits.max_connections {
            break;
        }
        if !logged {
            tracing::info!(shard = %ctx.id, max = limits.max_connections, "max.connections reached: not accepting until a connection closes");
            logged = true;
        }
        let wait = Duration::from_millis(ACCEPT_RECHECK_MS);
        crate::shard::with_timeout(wait, ctx.connections_changed.changed_since(seen)).await;
    }
    let rate = limits.max_connection_creation_rate_per_shard(ctx.shard_count);
    let wait = crate::server::broker::of(&ctx)
        .limits
        .accept_rate
        .borrow_mut()
        .get_or_insert_with(|| TokenBucket::new(rate, Instant::now()))
        .take(Instant::now());
    if !wait.is_zero() {
        tracing::debug!(shard = %ctx.id, ?wait, "max.connection.creation.rate: delaying accept");
        crate::shard::sleep(wait).await;
    }
}

/// Why an accepted connection is closed at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{ip} has {open} connections, its max.connections.per.ip limit is {limit}")]
    PerIp { ip: IpAddr, open: u32, limit: u32 },
}

/// An admitted connection's place in the counts, given back on drop: its address's count
/// from the accept, and a `max.connections` slot once it holds one.
pub struct ConnectionPermit {
    ip: Option<IpAddr>,
    has_slot: bool,
}

impl ConnectionPermit {
    /// Takes a `max.connections` slot if the broker is under the cap.
    fn try_take_slot(&mut self, max: usize) -> bool {
        if !self.has_slot {
            self.has_slot = with_counts(|c| {
                let free = c.total < max;
                c.total += usize::from(free);
                free
            });
        }
        self.has_slot
    }

    /// Waits, without reading the connection, until a slot frees (a close on this shard
    /// wakes it at once, one on another shard within [`ACCEPT_RECHECK_MS`]). Returns
    /// `false` if the shard shuts down first.
    pub async fn wait_for_slot(&mut self, ctx: &ShardCtx) -> bool {
        let max = ctx.config.connection_limits.max_connections;
        loop {
            let seen = ctx.connections_changed.version();
            if self.try_take_slot(max) {
                return true;
            }
            if ctx.is_shutting_down() {
                return false;
            }
            let wait = Duration::from_millis(ACCEPT_RECHECK_MS);
            crate::shard::with_timeout(wait, ctx.connections_changed.changed_since(seen)).await;
        }
    }
}

impl Drop for ConnectionPermit {
    fn drop(&mut self) {
        with_counts(|c| {
            if self.has_slot {
                c.total = c.total.saturating_sub(1);
            }
            if let Some(ip) = self.ip {
                if let Some(n) = c.per_ip.get_mut(&ip) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        c.per_ip.remove(&ip);
                    }
                }
            }
        });
    }
}

/// Admits a connection just accepted from `peer`: checks and counts its address, and takes
/// a `max.connections` slot if one is free. Called synchronously right after the accept,
/// before the accept loop passes its gate again. A shard whose gate let it into `accept`
/// while the broker was under the cap may get a connection after the cap was reached on
/// other shards: that connection is accepted but not read until a slot frees
/// ([`ConnectionPermit::wait_for_slot`]), so at most one per shard waits that way, and the
/// client sees what the kernel's accept queue would show it.
pub fn admit(limits: &ConnectionLimits, peer: Option<IpAddr>) -> Result<ConnectionPermit, Refusal> {
    let mut permit = with_counts(|c| {
        if let Some(ip) = peer {
            let limit = limits.per_ip_limit(ip);
            let open = c.per_ip.get(&ip).copied().unwrap_or(0);
            if open >= limit {
                return Err(Refusal::PerIp { ip, open, limit });
            }
            c.per_ip.insert(ip, open + 1);
        }
        Ok(ConnectionPermit { ip: peer, has_slot: false })
    })?;
    permit.try_take_slot(limits.max_connections);
    Ok(permit)
}

/// Pacing of accepts: `rate` tokens a second, at most one second's worth (and at least one)
/// saved up.
#[derive(Debug)]
struct TokenBucket {
    rate_per_s: f64,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    fn new(rate_per_s: f64, now: Instant) -> Self {
        Self { rate_per_s, tokens: rate_per_s.max(1.0), at: now }
    }

    /// Takes a token (possibly going into debt); how long to wait before using it.
    fn take(&mut self, now: Instant) -> Duration {
        if !self.rate_per_s.is_finite() {
            return Duration::ZERO;
        }
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        self.tokens = (self.tokens + elapsed * self.rate_per_s).min(self.rate_per_s.max(1.0));
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate_per_s)
        }
    }
}

/// A shard's share of `queued.max.request.bytes`: bytes of requests read and not yet
/// answered.
pub struct RequestBudget {
    /// `None`: unbounded.
    limit_bytes: Option<u64>,
    used_bytes: Cell<u64>,
    freed: Notify,
}

impl RequestBudget {
    fn new(limit_bytes: Option<u64>) -> Self {
        Self { limit_bytes, used_bytes: Cell::new(0), freed: Notify::new() }
    }

    /// This shard's budget (created from the config on first use).
    #[must_use]
    pub fn of_shard(ctx: &ShardCtx) -> Rc<RequestBudget> {
        crate::server::broker::of(ctx)
            .limits
            .request_budget
            .borrow_mut()
            .get_or_insert_with(|| {
                let share =
                    ctx.config.connection_limits.queued_request_bytes_per_shard(ctx.shard_count);
                Rc::new(RequestBudget::new(share))
            })
            .clone()
    }

    /// Bytes charged now.
    #[must_use]
    pub fn used_bytes(&self) -> u64 {
        self.used_bytes.get()
    }

    /// Whether `bytes` more may be charged now: within the limit, or the shard has nothing
    /// charged (a request larger than the share is still served, alone).
    fn fits(&self, bytes: u64) -> bool {
        let used = self.used_bytes.get();
        self.limit_bytes.is_none_or(|limit| used == 0 || used.saturating_add(bytes) <= limit)
    }

    /// Waits until `bytes` fit, then charges them; the charge lasts as long as the guard.
    pub async fn charge(self: &Rc<Self>, bytes: u64) -> QueuedBytes {
        let mut logged = false;
        loop {
            let seen = self.freed.version();
            if self.fits(bytes) {
                break;
            }
            if !logged {
                tracing::debug!(
                    bytes,
                    used = self.used_bytes.get(),
                    "queued.max.request.bytes spent: connection waits before reading"
                );
                logged = true;
            }
            self.freed.changed_since(seen).await;
        }
        self.used_bytes.set(self.used_bytes.get().saturating_add(bytes));
        QueuedBytes { budget: self.clone(), bytes }
    }
}

/// Bytes of one request charged to its shard's budget until dropped.
pub struct QueuedBytes {
    budget: Rc<RequestBudget>,
    bytes: u64,
}

impl Drop for QueuedBytes {
    fn drop(&mut self) {
        let b = &self.budget;
        b.used_bytes.set(b.used_bytes.get().saturating_sub(self.bytes));
        b.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_bucket_paces_after_one_second_of_burst() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(2.0, t0);
        assert_eq!(b.take(t0), Duration::ZERO);
        assert_eq!(b.take(t0), Duration::ZERO);
        assert_eq!(b.take(t0), Duration::from_millis(500));
        // Half a second later the debt is paid; the next token costs another 500 ms.
        assert_eq!(b.take(t0 + Duration::from_millis(500)), Duration::from_millis(500));
        let mut free = TokenBucket::new(f64::INFINITY, t0);
        assert_eq!(free.take(t0), Duration::ZERO);
    }

    #[test]
    fn budget_admits_one_request_alone_and_frees_on_drop() {
        let budget = Rc::new(RequestBudget::new(Some(100)));
        let run = futures::executor::block_on;
        let a = run(budget.charge(60));
        assert!(budget.fits(40));
        assert!(!budget.fits(41));
        drop(a);
        assert_eq!(budget.used_bytes(), 0);
        let big = run(budget.charge(1_000));
        assert_eq!(budget.used_bytes(), 1_000, "an oversize request on an idle shard");
        assert!(!budget.fits(1));
        drop(big);
        assert!(Rc::new(RequestBudget::new(None)).fits(u64::MAX));
    }

    #[test]
    fn per_ip_limit_and_release() {
        let ip: IpAddr = "10.9.8.7".parse().unwrap();
        let limits = ConnectionLimits { max_connections_per_ip: 2, ..ConnectionLimits::default() };
        let before = open_connections();
        let a = admit(&limits, Some(ip)).expect("first");
        let b = admit(&limits, Some(ip)).expect("second");
        assert!(a.has_slot && b.has_slot);
        assert_eq!(admit(&limits, Some(ip)).err(), Some(Refusal::PerIp { ip, open: 2, limit: 2 }));
        assert!(open_connections() >= before + 2);
        drop((a, b));
        let _c = admit(&limits, Some(ip)).expect("after release");
    }

    #[test]
    fn a_connection_over_max_connections_waits_for_a_slot() {
        // Relative to what other tests hold: the cap is the current count plus one.
        let max = open_connections() + 1;
        let limits = ConnectionLimits { max_connections: max, ..ConnectionLimits::default() };
        let first = admit(&limits, None).expect("first");
        let mut second = admit(&limits, None).expect("accepted, not refused");
        assert!(first.has_slot);
        assert!(!second.has_slot, "held at the cap");
        drop(first);
        assert!(second.try_take_slot(max), "a slot freed by the close");
    }
}
