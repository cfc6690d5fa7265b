//! Client-quota enforcement on the request path (KIP-219): a handler records a request's
//! bytes against the client's quota on its connection's shard ([`record`]), puts the throttle
//! time in its response, and wraps its outcome in [`Outcome::Throttled`]; the connection's
//! writer then sends the response at once and mutes the connection ([`Mute`]) so no further
//! request is read until the throttle time has passed. Versions older than KIP-219's
//! (Produce < 6, Fetch < 8) get the response delayed by the throttle time instead.
//!
//! Produce also mutes the connection the moment it records a throttled request, before the
//! reader reads the next frame (issue 32). Kafka processes one request per connection at a
//! time, so the throttled request is the last one it reads before the mute; our reader runs
//! ahead of the writer (pipelining), and a mute that began only when the response left let
//! it read and record the requests queued behind the throttled one meanwhile (librdkafka
//! keeps up to `queue.buffering.max.kbytes` in flight): their throttles then outran the span
//! the rate remembers, their bytes were forgotten unpaid, and a 1 MiB/s quota let 1.2-2.1
//! MiB/s through. Fetch needs no such early mute: a fetch recorded over quota is answered
//! empty, so fetches pipelined behind a throttled one cannot carry bytes past the quota.
//!
//! Runs on the connection's shard, touching only that shard's `ShardQuotas` (no lock).
//! Throttling never drops a request or its data: a muted connection keeps its requests in
//! the socket buffer (or, one already read, waiting to be dispatched).

use std::cell::Cell;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::dispatch::{dispatch, Outcome, ResponseFuture};
use crate::quota::{QuotaKind, REQUEST_PERCENTAGE};
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
    let ms = crate::server::broker::of(ctx).quotas(ctx).borrow_mut().record(
        &image.client_quotas,
        kind,
        (user, client),
        bytes,
        now_ms,
    );
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
    crate::server::broker::of(ctx).quotas(ctx).borrow_mut().unrecord(
        &image.client_quotas,
        kind,
        (user, client),
        bytes,
        now_ms,
    );
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
        crate::server::broker::of(&ctx).quotas(&ctx).borrow_mut().exchange_shares(now_ms);
    }
}

/// The client id of a request frame (header v1+: after api key, version and correlation id,
/// a nullable int16-length string; `""` when absent or malformed).
fn client_id_of(frame: &[u8]) -> &str {
    let Some(len) = frame.get(8..10).map(|b| i16::from_be_bytes([b[0], b[1]])) else { return "" };
    let Ok(len) = usize::try_from(len) else { return "" };
    frame.get(10..10 + len).and_then(|b| std::str::from_utf8(b).ok()).unwrap_or("")
}

/// A future that adds up the time spent polling it: the shard's time on the request.
struct Timed<'a, T> {
    fut: Pin<Box<dyn Future<Output = T> + 'a>>,
    spent: Duration,
}

impl<T> Future for Timed<'_, T> {
    type Output = (T, Duration);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let start = Instant::now();
        let polled = self.fut.as_mut().poll(cx);
        self.spent += start.elapsed();
        polled.map(|v| (v, self.spent))
    }
}

/// Dispatches a request and, when any `request_percentage` quota exists, counts the shard's
/// time on it (polling its start and its response; not other shards' time on its parts)
/// against the client's quota; over it, the connection is muted after the response
/// (KIP-219's mechanism), and the throttle goes into the response's `throttle_time_ms` where
/// that field leads the body ([`super::throttle_field`]; Produce keeps its byte-quota value).
pub async fn dispatch_timed(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    peer: Option<IpAddr>,
    (session, mute): (&Rc<crate::security::Session>, &Mute),
) -> Result<ResponseFuture, String> {
    if !ctx.image().client_quotas.uses(REQUEST_PERCENTAGE) {
        return dispatch(ctx, frame, peer, (session, mute)).await;
    }
    let who = (session.principal().name().to_string(), client_id_of(&frame).to_string());
    let (api, version) = api_and_version(&frame);
    let timed =
        Timed { fut: Box::pin(dispatch(ctx, frame, peer, (session, mute))), spent: Duration::ZERO };
    let (started, spent) = timed.await;
    let fut = started?;
    let ctx = ctx.clone();
    Ok(Box::pin(async move {
        let (outcome, more) = Timed { fut, spent: Duration::ZERO }.await;
        let busy_ns = u64::try_from((spent + more).as_nanos()).unwrap_or(u64::MAX);
        let image = ctx.image();
        let now_ms = ctx.quota_clock_ms();
        let ms = crate::server::broker::of(&ctx).quotas(&ctx).borrow_mut().record_request_time(
            &image.client_quotas,
            (&who.0, &who.1),
            busy_ns,
            now_ms,
        );
        match outcome {
            Outcome::Throttled(inner, t) => Outcome::Throttled(
                Box::new(with_field(*inner, api, version, ms)),
                Throttle { ms: t.ms.max(ms), mute: t.mute },
            ),
            other => wrap(with_field(other, api, version, ms), ms, true),
        }
    }))
}

/// `outcome` with its response's `throttle_time_ms` raised to `ms` where it has that field.
fn with_field(outcome: Outcome, api: i16, version: i16, ms: u64) -> Outcome {
    match outcome {
        Outcome::Respond(frame) if ms > 0 => {
            // The field sits in the first piece (`ResponseFrame`'s invariant).
            match super::throttle_field::raise(frame.first(), api, version, ms) {
                Some(raised) => Outcome::Respond(frame.with_first(raised)),
                None => Outcome::Respond(frame),
            }
        }
        other => other,
    }
}

/// The api key and version of a request frame (`-1` when it is too short to say).
fn api_and_version(frame: &[u8]) -> (i16, i16) {
    match frame.get(..4) {
        Some(b) => (i16::from_be_bytes([b[0], b[1]]), i16::from_be_bytes([b[2], b[3]])),
        None => (-1, -1),
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
    /// Mutes for `ms` from now (extending, never shortening, a mute in force; 0: no mute).
    pub fn mute_for(&self, ms: u64) {
        if ms == 0 {
            return;
        }
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
