//! One client connection: a reader that frames, decodes and starts requests in order,
//! and a writer that awaits their outcomes strictly in request order and writes the
//! responses. Up to `CONNECTION_IN_FLIGHT_MAX` requests are in flight (pipelining);
//! beyond that the reader stops reading, which is the back-pressure.
//!
//! Lives on the shard that accepted the connection. Invariants: responses leave in
//! request order; bad input (malformed or oversize frame, unknown API, unsupported
//! version) closes the connection with a logged reason, after writing the responses of
//! the requests before it; on shutdown no new request is read and in-flight ones finish.
//! A connection with no request read, no response written and nothing in flight for
//! `connections.max.idle.ms` is closed, as Kafka's socket server does. A client over its
//! quota gets its response at once and the connection is then muted (not read) for the
//! throttle time (KIP-219; see [`super::throttle`]).

use std::cell::Cell;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures::channel::mpsc;
use futures::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use futures::{SinkExt, StreamExt};

use super::dispatch::{dispatch, Outcome, ResponseFuture};
use super::throttle::Mute;
use crate::constants::CONNECTION_IN_FLIGHT_MAX;
use crate::metrics::RequestTimer;
use crate::protocol::read_frame;
use crate::shard::{Notify, ShardCtx};

/// Serves a connection from `peer` until the client leaves, bad input arrives, or shutdown.
pub async fn run<S>(ctx: Rc<ShardCtx>, stream: S, peer: Option<IpAddr>)
where
    S: AsyncRead + AsyncWrite + Unpin + 'static,
{
    ctx.connections.set(ctx.connections.get() + 1);
    crate::metrics::adjust(crate::metrics::Level::ConnectionsActive, 1);
    let (mut reader, writer) = stream.split();
    let (tx, rx) = mpsc::channel::<(ResponseFuture, RequestTimer)>(CONNECTION_IN_FLIGHT_MAX);
    let closed = Rc::new(Notify::new());
    let activity = Rc::new(Activity::new());
    let mute = Rc::new(Mute::default());
    let writer_task =
        ctx.spawn(write_loop(writer, rx, closed.clone(), activity.clone(), mute.clone()));
    let conn = Conn { closed: &closed, peer, activity: &activity, mute: &mute };
    read_loop(&ctx, &mut reader, tx, &conn).await;
    let _ = writer_task.await;
    ctx.connections.set(ctx.connections.get() - 1);
    crate::metrics::adjust(crate::metrics::Level::ConnectionsActive, -1);
    ctx.connections_changed.notify_all();
}

/// The reader's view of its connection's shared state.
struct Conn<'a> {
    closed: &'a Notify,
    peer: Option<IpAddr>,
    activity: &'a Activity,
    mute: &'a Mute,
}

/// Waits out a mute, unless shutdown or the writer's close comes first (then `false`).
async fn unmuted(ctx: &ShardCtx, conn: &Conn<'_>) -> bool {
    let (shutdown_seen, closed_seen) = (ctx.shutdown.version(), conn.closed.version());
    let wait = conn.mute.wait();
    futures::pin_mut!(wait);
    let stop = futures::future::select(
        ctx.shutdown.changed_since(shutdown_seen),
        conn.closed.changed_since(closed_seen),
    );
    matches!(futures::future::select(wait, stop).await, futures::future::Either::Left(_))
}

async fn read_loop<R: AsyncRead + Unpin>(
    ctx: &Rc<ShardCtx>,
    reader: &mut R,
    mut tx: mpsc::Sender<(ResponseFuture, RequestTimer)>,
    conn: &Conn<'_>,
) {
    let (closed, peer, activity) = (conn.closed, conn.peer, conn.activity);
    let max_bytes = ctx.config.socket_request_max_bytes;
    let idle_limit = ctx.config.connections_max_idle_ms.map(Duration::from_millis);
    loop {
        if ctx.is_shutting_down() || closed.version() != 0 || !unmuted(ctx, conn).await {
            return;
        }
        let (shutdown_seen, closed_seen) = (ctx.shutdown.version(), closed.version());
        let frame = {
            let read = read_frame(reader, max_bytes);
            futures::pin_mut!(read);
            let stop = futures::future::select(
                ctx.shutdown.changed_since(shutdown_seen),
                closed.changed_since(closed_seen),
            );
            let idle = activity.idle_for(idle_limit);
            futures::pin_mut!(idle);
            match futures::future::select(read, futures::future::select(stop, idle)).await {
                futures::future::Either::Left((frame, _)) => frame,
                futures::future::Either::Right((futures::future::Either::Right(_), _)) => {
                    tracing::debug!(shard = %ctx.id, ?peer, "closing idle connection");
                    return;
                }
                futures::future::Either::Right(_) => return,
            }
        };
        let frame = match frame {
            Ok(Some(frame)) => frame,
            Ok(None) => return,
            Err(err) => {
                tracing::info!(shard = %ctx.id, "closing connection: {err}");
                return;
            }
        };
        // A request read while the writer muted the connection waits out the mute too.
        if !unmuted(ctx, conn).await {
            return;
        }
        activity.request_started();
        let api_key = crate::protocol::peek_api(&frame).map_or(-1, |p| p.api_key);
        let mut timer = RequestTimer::start(api_key, frame.len());
        timer.handler_started();
        match dispatch(ctx, frame, peer).await {
            Ok(fut) => {
                let fut: ResponseFuture = Box::pin(timer.watch(fut));
                if tx.send((fut, timer)).await.is_err() {
                    return;
                }
            }
            Err(reason) => {
                tracing::info!(shard = %ctx.id, "closing connection: {reason}");
                return;
            }
        }
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut rx: mpsc::Receiver<(ResponseFuture, RequestTimer)>,
    closed: Rc<Notify>,
    activity: Rc<Activity>,
    mute: Rc<Mute>,
) {
    while let Some((fut, mut timer)) = rx.next().await {
        let mut outcome = fut.await;
        let mut mute_ms = 0;
        if let Outcome::Throttled(inner, throttle) = outcome {
            if throttle.mute {
                mute_ms = throttle.ms;
            } else {
                // Before KIP-219 the broker held the response for the throttle time.
                crate::shard::sleep(std::time::Duration::from_millis(throttle.ms)).await;
            }
            outcome = *inner;
        }
        activity.request_finished();
        let send = timer.writer_took();
        if mute_ms > 0 {
            mute.mute_for(mute_ms);
        }
        match outcome {
            Outcome::Respond(frame) => {
                if let Err(err) = writer.write_all(&frame).await {
                    tracing::debug!("write failed, closing connection: {err}");
                    break;
                }
                timer.finish(send, frame.len());
            }
            Outcome::Silent | Outcome::Throttled(..) => timer.finish(send, 0),
            Outcome::Close(reason) => {
                tracing::info!("closing connection: {reason}");
                break;
            }
        }
    }
    closed.notify_all();
    let _ = writer.close().await;
}

/// When the connection last read a request or finished one, and how many are in flight:
/// what `connections.max.idle.ms` measures (a long-poll Fetch or a parked JoinGroup in
/// flight is not idleness).
struct Activity {
    last: Cell<Instant>,
    in_flight: Cell<usize>,
}

impl Activity {
    fn new() -> Self {
        Self { last: Cell::new(Instant::now()), in_flight: Cell::new(0) }
    }

    fn request_started(&self) {
        self.last.set(Instant::now());
        self.in_flight.set(self.in_flight.get() + 1);
    }

    fn request_finished(&self) {
        self.last.set(Instant::now());
        self.in_flight.set(self.in_flight.get().saturating_sub(1));
    }

    /// Completes once the connection has been idle for `limit` (never when `None`).
    async fn idle_for(&self, limit: Option<Duration>) {
        let Some(limit) = limit else { return futures::future::pending().await };
        loop {
            let idle = self.last.get().elapsed();
            if self.in_flight.get() == 0 && idle >= limit {
                return;
            }
            // Asleep until the earliest moment the limit could be reached; while requests
            // are in flight the clock restarts when the last of them finishes.
            let wait = if self.in_flight.get() > 0 { limit } else { limit.saturating_sub(idle) };
            crate::shard::sleep(wait.max(Duration::from_millis(1))).await;
        }
    }
}
