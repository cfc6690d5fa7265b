//! Client-quota enforcement on the request path (KIP-219): a handler records a request's
//! bytes against the client's quota on its connection's shard ([`record`]), puts the throttle
//! time in its response, and wraps its outcome in [`Outcome::Throttled`]; the connection's
//! writer then sends the response at once and mutes the connection ([`Mute`]) so no further
//! request is read until the throttle time has passed. Versions older than KIP-219's
//! (Produce < 6, Fetch < 8) get the response delayed by the throttle time instead.
//!
//! Runs on the connection's shard, touching only that shard's `ShardQuotas` (no lock).
//! Throttling never drops a request or its data: a muted connection keeps its requests in
//! the socket buffer (or, one already read, waiting to be dispatched).

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::dispatch::Outcome;
use crate::quota::QuotaKind;
use crate::shard::ShardCtx;

/// What the writer does with a throttled outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Throttle {
    pub ms: u64,
    /// KIP-219 (client-side throttling): send at once, then mute. Else delay the response.
    pub mute: bool,
}

/// Records `bytes` of `kind` for a request of `user` (the connection's principal name) with
/// `client_id` on this shard and returns the throttle time in ms (0: within quota or no
/// quota). Counts the bytes moved and the throttle time in the per-client metrics too.
pub fn record(
    ctx: &ShardCtx,
    kind: QuotaKind,
    (user, client_id): (&str, Option<&str>),
    bytes: u64,
) -> u64 {
    let client = client_id.unwrap_or("");
    let image = ctx.image();
    let now_ms = ctx.quota_clock_ms();
    let ms =
        ctx.quotas.borrow_mut().record(&image.client_quotas, kind, (user, client), bytes, now_ms);
    // A throttled fetch is answered empty: its bytes never reach the client.
    let moved = if kind == QuotaKind::Fetch && ms > 0 { 0 } else { bytes };
    crate::metrics::client_quota(kind, client, moved, ms);
    ms
}

/// Takes back bytes recorded for a response that is replaced by an empty throttled one
/// (Kafka's `unrecordQuotaSensor`), so the data not sent does not count.
pub fn unrecord(
    ctx: &ShardCtx,
    kind: QuotaKind,
    (user, client_id): (&str, Option<&str>),
    bytes: u64,
) {
    let client = client_id.unwrap_or("");
    let image = ctx.image();
    let now_ms = ctx.quota_clock_ms();
    ctx.quotas.borrow_mut().unrecord(&image.client_quotas, kind, (user, client), bytes, now_ms);
}

/// The shard's share task: once per quota window, exchanges this shard's per-budget demand
/// with the other shards and takes its new fractions of each quota ([`crate::quota::share`]).
/// Runs on the shard's background queue; the request path never waits for it.
pub async fn share_loop(ctx: Rc<ShardCtx>) {
    let window = Duration::from_millis(ctx.config.quota_window.window_ms.max(1));
    loop {
        crate::shard::sleep(window).await;
        if ctx.is_shutting_down() {
            return;
        }
        let now_ms = ctx.quota_clock_ms();
        ctx.quotas.borrow_mut().exchange_shares(now_ms);
    }
}

/// Wraps `outcome` with its throttle when there is one.
#[must_use]
pub fn wrap(outcome: Outcome, ms: u64, mute: bool) -> Outcome {
    if ms == 0 {
        return outcome;
    }
    Outcome::Throttled(Box::new(outcome), Throttle { ms, mute })
}

/// The throttle time as the response's `throttle_time_ms`.
#[must_use]
pub fn as_field(ms: u64) -> i32 {
    i32::try_from(ms).unwrap_or(i32::MAX)
}

/// Until when a connection is not read (Kafka's muted channel).
#[derive(Debug, Default)]
pub struct Mute {
    until: Cell<Option<Instant>>,
}

impl Mute {
    /// Mutes for `ms` from now (extending, never shortening, a mute in force).
    pub fn mute_for(&self, ms: u64) {
        let until = Instant::now() + Duration::from_millis(ms);
        if self.until.get().is_none_or(|u| u < until) {
            self.until.set(Some(until));
        }
    }

    /// Sleeps until the connection is unmuted (at once when not muted).
    pub async fn wait(&self) {
        while let Some(until) = self.until.get() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.until.set(None);
                return;
            }
            crate::shard::sleep(left).await;
        }
    }
}
