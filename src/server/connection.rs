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
//! throttle time (KIP-219; see [`super::throttle`]). The limits of [`super::limits`] apply
//! here: a connection over its address's `max.connections.per.ip` is closed at once; a
//! frame's size is read, then its bytes are charged to the shard's share of
//! `queued.max.request.bytes` (waiting, unread, while it is spent) until its response is
//! written; a frame whose first byte arrived must be whole within
//! `request.receive.timeout.ms`.

use std::cell::Cell;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures::channel::mpsc;
use futures::future::{Either, LocalBoxFuture};
use futures::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use futures::{SinkExt, StreamExt};

use super::dispatch::{Outcome, ResponseFuture};
use super::limits::{self, ConnectionPermit, QueuedBytes, RequestBudget};
use super::sasl_gate::{SaslGate, Verdict};
use super::throttle::Mute;
use crate::constants::{CONNECTION_IN_FLIGHT_MAX, TLS_HANDSHAKE_TIMEOUT_MS};
use crate::metrics::RequestTimer;
use crate::security::Session;
use crate::shard::{Notify, ShardCtx};

/// A request on its way to the writer, with its bytes' charge on the shard's budget.
type InFlight = (ResponseFuture, RequestTimer, QueuedBytes);

/// Admits a connection just accepted from `peer` on listener `listener` (an index of
/// `config.listeners.all`) synchronously, so it is counted before the accept loop checks
/// `max.connections` again, and serves it; a connection over its address's limit is closed
/// at once, as Kafka does. On a TLS listener the handshake comes first, bounded by
/// `TLS_HANDSHAKE_TIMEOUT_MS`.
pub fn serve<S>(
    ctx: Rc<ShardCtx>,
    stream: S,
    peer: Option<IpAddr>,
    listener: usize,
) -> LocalBoxFuture<'static, ()>
where
    S: AsyncRead + AsyncWrite + Unpin + 'static,
{
    match limits::admit(&ctx.config.connection_limits, peer) {
        Ok(mut permit) => Box::pin(async move {
            // Accepted just as the broker reached max.connections: not read until a slot
            // frees, as if it still waited in the kernel's accept queue.
            if permit.wait_for_slot(&ctx).await {
                secure_then_run(ctx, stream, peer, listener, permit).await;
            }
        }),
        Err(refusal) => {
            tracing::info!(shard = %ctx.id, "closing new connection: {refusal}");
            drop(stream);
            Box::pin(async {})
        }
    }
}

/// Serves a connection from `peer` on the first listener until the client leaves, bad input
/// arrives, or shutdown.
pub async fn run<S>(ctx: Rc<ShardCtx>, stream: S, peer: Option<IpAddr>)
where
    S: AsyncRead + AsyncWrite + Unpin + 'static,
{
    serve(ctx, stream, peer, 0).await;
}

/// The TLS handshake (on a TLS listener), then the connection's requests.
async fn secure_then_run<S>(
    ctx: Rc<ShardCtx>,
    stream: S,
    peer: Option<IpAddr>,
    listener: usize,
    permit: ConnectionPermit,
) where
    S: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let name: Rc<str> =
        ctx.config.listeners.all.get(listener).map_or("PLAINTEXT", |l| &l.name).into();
    // The key and trust stores in force now (KIP-226: dynamic broker configs may change them).
    let security = super::tls_reload::listener_security(&ctx, listener);
    let session = Session::new(name, crate::quota::Principal::anonymous()).with_peer(peer);
    let gate = security.sasl.clone().map(SaslGate::new);
    let Some(tls) = security.tls.clone() else {
        return run_admitted(ctx, stream, peer, permit, (session, gate)).await;
    };
    let limit = Duration::from_millis(TLS_HANDSHAKE_TIMEOUT_MS);
    let accept = futures_rustls::TlsAcceptor::from(tls).accept(stream);
    let tls_stream = match crate::shard::with_timeout(limit, accept).await {
        Some(Ok(s)) => s,
        Some(Err(err)) => {
            tracing::info!(shard = %ctx.id, ?peer, listener = %session.listener, "closing connection: TLS handshake failed: {err}");
            return;
        }
        None => {
            tracing::info!(shard = %ctx.id, ?peer, listener = %session.listener, "closing connection: TLS handshake not done within {TLS_HANDSHAKE_TIMEOUT_MS} ms");
            return;
        }
    };
    let certificate = tls_stream.get_ref().1.peer_certificates().and_then(|c| c.first());
    match certificate.and_then(crate::security::tls::subject_dn) {
        Some(dn) => {
            // Kafka fails the authentication of a DN no ssl.principal.mapping.rules apply to.
            let name = match security.principal_mapping.name(&dn) {
                Ok(name) => name,
                Err(why) => {
                    tracing::info!(shard = %ctx.id, ?peer, listener = %session.listener, "closing connection: TLS client certificate refused: {why}");
                    return;
                }
            };
            session.authenticated(crate::quota::Principal::named(&name));
            tracing::info!(shard = %ctx.id, ?peer, listener = %session.listener, principal = %format_args!("User:{name}"), dn = %dn, "TLS client certificate accepted");
        }
        None => {
            tracing::debug!(shard = %ctx.id, ?peer, listener = %session.listener, "TLS handshake done");
        }
    }
    run_admitted(ctx, tls_stream, peer, permit, (session, gate)).await;
}

async fn run_admitted<S>(
    ctx: Rc<ShardCtx>,
    stream: S,
    peer: Option<IpAddr>,
    permit: ConnectionPermit,
    (session, sasl): (Session, Option<SaslGate>),
) where
    S: AsyncRead + AsyncWrite + Unpin + 'static,
{
    ctx.connections.set(ctx.connections.get() + 1);
    crate::metrics::adjust(crate::metrics::Level::ConnectionsActive, 1);
    let (mut reader, writer) = stream.split();
    let (tx, rx) = mpsc::channel::<InFlight>(CONNECTION_IN_FLIGHT_MAX);
    let closed = Rc::new(Notify::new());
    let activity = Rc::new(Activity::new());
    let mute = Rc::new(Mute::default());
    let writer_task =
        ctx.spawn(write_loop(writer, rx, closed.clone(), activity.clone(), mute.clone()));
    let session = Rc::new(session);
    let conn = Conn { closed: &closed, peer, activity: &activity, mute: &mute, session, sasl };
    read_loop(&ctx, &mut reader, tx, &conn).await;
    let _ = writer_task.await;
    drop(permit);
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
    /// The listener and the principal the connection authenticated as (user quotas are
    /// keyed by its name; `User:ANONYMOUS` without authentication).
    session: Rc<Session>,
    /// On a SASL listener: the exchange, until the connection authenticated.
    sasl: Option<SaslGate>,
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
    mut tx: mpsc::Sender<InFlight>,
    conn: &Conn<'_>,
) {
    let (closed, peer, activity) = (conn.closed, conn.peer, conn.activity);
    let budget = RequestBudget::of_shard(ctx);
    loop {
        if ctx.is_shutting_down() || closed.version() != 0 || !unmuted(ctx, conn).await {
            return;
        }
        let (frame, charge) = match next_frame(ctx, reader, conn, &budget).await {
            Ok(Some(read)) => read,
            Ok(None) => return,
            Err(reason) => {
                tracing::info!(shard = %ctx.id, ?peer, principal = %principal_of(conn), "closing connection: {reason}");
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
        let verdict =
            conn.sasl.as_ref().map_or(Verdict::Pass, |g| g.on_frame(ctx, &frame, &conn.session));
        match verdict {
            Verdict::Pass => {}
            Verdict::Answer(outcome) => {
                let fut: ResponseFuture = Box::pin(timer.watch(super::dispatch::ready(outcome)));
                if tx.send((fut, timer, charge)).await.is_err() {
                    return;
                }
                continue;
            }
            Verdict::Close { outcome, delay_ms, reason } => {
                tracing::info!(shard = %ctx.id, ?peer, listener = %conn.session.listener, "closing connection: {reason}");
                if let Some(outcome) = outcome {
                    let fut: ResponseFuture =
                        Box::pin(timer.watch(super::dispatch::ready(outcome)));
                    let _ = tx.send((fut, timer, charge)).await;
                }
                // Kafka's connection.failed.authentication.delay.ms: the close comes late,
                // so a password guesser gets few tries per connection slot.
                if delay_ms > 0 {
                    let _ = unless_stopped(
                        ctx,
                        closed,
                        crate::shard::sleep(Duration::from_millis(delay_ms)),
                    )
                    .await;
                }
                return;
            }
        }
        match super::throttle::dispatch_timed(ctx, frame, peer, (&conn.session, conn.mute)).await {
            Ok(fut) => {
                let fut: ResponseFuture = Box::pin(timer.watch(fut));
                if tx.send((fut, timer, charge)).await.is_err() {
                    return;
                }
            }
            Err(reason) => {
                tracing::info!(shard = %ctx.id, ?peer, principal = %principal_of(conn), "closing connection: {reason}");
                return;
            }
        }
    }
}

/// `User:<name>` of a connection, for its log lines.
fn principal_of(conn: &Conn<'_>) -> String {
    format!("User:{}", conn.session.principal().name())
}

/// Races `fut` against shutdown and the writer's close (`None` when one of them wins).
async fn unless_stopped<T>(
    ctx: &ShardCtx,
    closed: &Notify,
    fut: impl std::future::Future<Output = T>,
) -> Option<T> {
    let stop = futures::future::select(
        ctx.shutdown.changed_since(ctx.shutdown.version()),
        closed.changed_since(closed.version()),
    );
    futures::pin_mut!(fut);
    match futures::future::select(fut, stop).await {
        Either::Left((value, _)) => Some(value),
        Either::Right(_) => None,
    }
}

/// Reads `buf` whole within the receive timeout; the error says why not.
async fn read_within<R: AsyncRead + Unpin>(
    ctx: &ShardCtx,
    reader: &mut R,
    buf: &mut [u8],
    what: &str,
) -> Result<(), String> {
    let limit_ms = ctx.config.connection_limits.request_receive_timeout_ms;
    match crate::shard::with_timeout(Duration::from_millis(limit_ms), reader.read_exact(buf)).await
    {
        Some(Ok(())) => Ok(()),
        Some(Err(err)) if err.kind() == std::io::ErrorKind::UnexpectedEof => {
            Err(format!("connection closed in the middle of a {what}"))
        }
        Some(Err(err)) => Err(format!("read failed: {err}")),
        None => Err(format!(
            "{what} of {} bytes not received within request.receive.timeout.ms={limit_ms}",
            buf.len()
        )),
    }
}

/// The next frame and its charge on the shard's budget: `Ok(None)` on a clean end of stream
/// between frames, idleness past `connections.max.idle.ms`, shutdown or the writer's close.
/// The first byte is awaited as long as the connection may idle; the rest of the size and
/// the body must each come within `request.receive.timeout.ms`; between them the frame's
/// size is charged to the budget (waiting, unread, while it is spent).
async fn next_frame<R: AsyncRead + Unpin>(
    ctx: &ShardCtx,
    reader: &mut R,
    conn: &Conn<'_>,
    budget: &Rc<RequestBudget>,
) -> Result<Option<(Bytes, QueuedBytes)>, String> {
    let mut size = [0u8; 4];
    let idle_limit = ctx.config.connections_max_idle_ms.map(Duration::from_millis);
    let first = {
        let idle = conn.activity.idle_for(idle_limit);
        futures::pin_mut!(idle);
        // Up to the whole size at once: one read per frame header, as before the limits.
        let read = reader.read(&mut size);
        match unless_stopped(ctx, conn.closed, futures::future::select(read, idle)).await {
            None => return Ok(None),
            Some(Either::Right(_)) => {
                tracing::debug!(shard = %ctx.id, peer = ?conn.peer, "closing idle connection");
                return Ok(None);
            }
            Some(Either::Left((read, _))) => read.map_err(|err| format!("read failed: {err}"))?,
        }
    };
    if first == 0 {
        return Ok(None);
    }
    if first < size.len() {
        let rest = read_within(ctx, reader, &mut size[first..], "frame size");
        let Some(read) = unless_stopped(ctx, conn.closed, rest).await else { return Ok(None) };
        read?;
    }
    let size_bytes = i32::from_be_bytes(size);
    let max_bytes = ctx.config.socket_request_max_bytes;
    let len = usize::try_from(size_bytes).ok().filter(|n| *n as u64 <= u64::from(max_bytes));
    let len = len.ok_or_else(|| {
        format!("frame of {size_bytes} bytes exceeds socket.request.max.bytes={max_bytes}")
    })?;
    let Some(charge) = unless_stopped(ctx, conn.closed, budget.charge(len as u64)).await else {
        return Ok(None);
    };
    let mut body = BytesMut::zeroed(len);
    let read = read_within(ctx, reader, &mut body, "frame");
    let Some(read) = unless_stopped(ctx, conn.closed, read).await else { return Ok(None) };
    read?;
    Ok(Some((body.freeze(), charge)))
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut rx: mpsc::Receiver<InFlight>,
    closed: Rc<Notify>,
    activity: Rc<Activity>,
    mute: Rc<Mute>,
) {
    // Each request's budget charge is dropped (given back) once its response is written.
    while let Some((fut, mut timer, _charge)) = rx.next().await {
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
                if let Err(err) = write_frame(&mut writer, &frame).await {
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

/// Writes a response frame's pieces back to back (a large Fetch response references its
/// records instead of copying them into one buffer: `protocol::fetch_encode`). A large piece
/// is written by itself; a run of small ones (records gathered from cache chunks, the
/// encoded fields between them) goes in vectored writes (`io::vectored`: one `sendmsg`).
/// Measured: one `sendmsg` for whole multi-megabyte frames made reads from read-ahead
/// buffers 10 % slower than a write per piece, while many 16 KiB pieces are faster gathered
/// (perf/results/2026-12-03-fetch-pieces.md).
async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    frame: &crate::protocol::ResponseFrame,
) -> std::io::Result<()> {
    use crate::constants::{FRAME_PIECE_ALONE_BYTES, FRAME_VECTORED_WRITE_BYTES_MAX};
    let pieces = frame.pieces();
    // The first unsent piece and how much of it is sent.
    let (mut next, mut sent) = (0usize, 0usize);
    loop {
        while next < pieces.len() && pieces[next].len() == sent {
            next += 1;
            sent = 0;
        }
        if next == pieces.len() {
            return Ok(());
        }
        let rest = &pieces[next][sent..];
        if rest.len() >= FRAME_PIECE_ALONE_BYTES || next + 1 == pieces.len() {
            writer.write_all(rest).await?;
            (next, sent) = (next + 1, 0);
            continue;
        }
        let mut slices = vec![std::io::IoSlice::new(rest)];
        let mut total = rest.len();
        for p in &pieces[next + 1..] {
            if p.len() >= FRAME_PIECE_ALONE_BYTES
                || slices.len() == crate::io::vectored::IOVECS_MAX
                || total >= FRAME_VECTORED_WRITE_BYTES_MAX
            {
                break;
            }
            total += p.len();
            slices.push(std::io::IoSlice::new(p));
        }
        let mut n = writer.write_vectored(&slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while n > 0 && next < pieces.len() {
            let left = pieces[next].len() - sent;
            if n < left {
                sent += n;
                n = 0;
            } else {
                n -= left;
                (next, sent) = (next + 1, 0);
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ResponseFrame;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// A writer that takes at most `step` bytes per call, vectored or not, and is pending
    /// every other call: partial writes at every boundary.
    struct Trickle {
        out: Vec<u8>,
        step: usize,
        calls: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            self.calls += 1;
            if self.calls % 2 == 0 {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let n = buf.len().min(self.step);
            self.out.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }

        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[std::io::IoSlice<'_>],
        ) -> Poll<std::io::Result<usize>> {
            let joined: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            self.as_mut().poll_write(cx, &joined)
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn a_frame_in_pieces_is_written_whole_through_partial_writes() {
        let large = Bytes::from(vec![b'L'; crate::constants::FRAME_PIECE_ALONE_BYTES]);
        let mut pieces: Vec<Bytes> = ["", "abc", "", "defghij", "k", "", "lmnopqrstu", ""]
            .iter()
            .map(|s| Bytes::from_static(s.as_bytes()))
            .collect();
        pieces.insert(4, large.clone());
        let mut want = b"abcdefghij".to_vec();
        want.extend_from_slice(&large);
        want.extend_from_slice(b"klmnopqrstu");
        for step in [1, 2, 3, 5, 8, 100, 1 << 20] {
            let mut w = Trickle { out: Vec::new(), step, calls: 0 };
            let frame = ResponseFrame::Pieces(pieces.clone());
            futures::executor::block_on(write_frame(&mut w, &frame)).expect("write");
            assert!(w.out == want, "step {step}");
        }
    }
}
