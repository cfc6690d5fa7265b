//! [`TcpTransport`]: the quorum's node-to-node network on glommio TCP (our own framing,
//! [`super::frame`], not Kafka's), on the controller shard (shard 0).
//!
//! Connections: a listener on the node's controller address (if it has one), and one
//! outbound connection per other voter, redialled with capped exponential backoff. With
//! [`QuorumTls`] (`controller.listener.names` naming an SSL listener) every connection is
//! TLS first, mutual by default: the dialler checks the voter's certificate against the trust
//! store and the voter's host, the listener asks for the dialler's; a refused handshake is an
//! ERROR line naming rustls' reason on the side that refused and counted in
//! [`NetCounters::refused`]. The handshake and the encryption run on the controller shard, in
//! its event loop. Every connection then starts with a [`Hello`] each way; a peer whose cluster id or voter set differs
//! is refused by both sides (ERROR log naming both values, counted in
//! [`NetCounters::refused`]), so a mis-configured node never joins. After the handshake a
//! connection carries frames both ways: raft messages and RPC requests/responses.
//!
//! Routing: a message or call to node N goes over our outbound connection to N if it is up,
//! else over the connection N opened to us (a learner has no address the voters know, so
//! its traffic rides on the connections it opened). Each connection has a bounded send
//! queue ([`SEND_QUEUE_FRAMES_MAX`]); a full queue drops raft messages (raft retries) and
//! counts them. Bad frames close the connection; nothing here panics on input.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::channel::oneshot;
use futures::future::LocalBoxFuture;
use futures::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use futures::FutureExt;
use glommio::net::{TcpListener, TcpStream};
use tracing::{debug, error, info};

use super::frame::{self, Frame, Hello, RpcStatus, FRAME_HEADER_BYTES};
use super::transport::{QuorumRpcError, Receiver, RpcHandler, Sent, Transport};
use super::{
    Message, CONNECT_TIMEOUT_MS, HANDSHAKE_TIMEOUT_MS, PEER_DEAD_AFTER_MS,
    RECONNECT_BACKOFF_MS_MAX, RECONNECT_BACKOFF_MS_MIN, RPC_INFLIGHT_MAX, SEND_QUEUE_FRAMES_MAX,
};
use crate::sync::Notify;

/// Who this node is on the quorum network.
#[derive(Clone, Debug)]
pub struct NetConfig {
    pub cluster_id: String,
    pub node_id: u64,
    /// Where to listen for other nodes (`None`: a broker-only learner, reachable only over
    /// the connections it opens).
    pub listen: Option<SocketAddr>,
    /// Every voter's id and controller address (this node included if it is a voter).
    pub voters: BTreeMap<u64, SocketAddr>,
    /// TLS on every connection (`None`: plain TCP).
    pub tls: Option<QuorumTls>,
}

/// The quorum's TLS: built once at start-up from the controller listener's `ssl.*`
/// settings and shared read-only.
#[derive(Clone)]
pub struct QuorumTls {
    /// The listener's side (asks for the dialler's certificate unless configured not to).
    pub server: Arc<rustls::ServerConfig>,
    /// The dialler's side (presents this node's key store).
    pub client: Arc<rustls::ClientConfig>,
    /// Each voter's host as `controller.quorum.voters` names it: what its certificate is
    /// checked against.
    pub voter_hosts: BTreeMap<u64, String>,
}

impl std::fmt::Debug for QuorumTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuorumTls").field("voter_hosts", &self.voter_hosts).finish_non_exhaustive()
    }
}

impl NetConfig {
    /// The hello this node sends: voters as sorted `"id@host:port"`.
    #[must_use]
    pub fn hello(&self) -> Hello {
        let mut voters: Vec<String> =
            self.voters.iter().map(|(id, addr)| format!("{id}@{addr}")).collect();
        voters.sort();
        Hello { cluster_id: self.cluster_id.clone(), node_id: self.node_id, voters }
    }
}

/// Counters of the transport (read by the driver's metrics).
#[derive(Default, Debug)]
pub struct NetCounters {
    pub sent: Cell<u64>,
    /// Raft messages dropped: full queue, too large, or no connection.
    pub dropped: Cell<u64>,
    /// Handshakes refused (cluster id, voter set or node id mismatch), either side.
    pub refused: Cell<u64>,
    pub connects: Cell<u64>,
    pub bad_frames: Cell<u64>,
}

/// One established connection's state shared by its reader, writer and the router.
struct Conn {
    peer: u64,
    queue: RefCell<VecDeque<Vec<u8>>>,
    wake: Notify,
    closed: Cell<bool>,
    calls: RefCell<HashMap<u64, oneshot::Sender<Result<Bytes, QuorumRpcError>>>>,
    /// Incoming requests being answered.
    serving: Cell<usize>,
}

impl Conn {
    fn new(peer: u64) -> Rc<Self> {
        Rc::new(Self {
            peer,
            queue: RefCell::new(VecDeque::new()),
            wake: Notify::new(),
            closed: Cell::new(false),
            calls: RefCell::new(HashMap::new()),
            serving: Cell::new(0),
        })
    }

    /// Queues an encoded frame; `false` if closed or full.
    fn push(&self, bytes: Vec<u8>) -> bool {
        let mut q = self.queue.borrow_mut();
        if self.closed.get() || q.len() >= SEND_QUEUE_FRAMES_MAX {
            return false;
        }
        q.push_back(bytes);
        drop(q);
        self.wake.notify_all();
        true
    }

    fn close(&self) {
        self.closed.set(true);
        self.wake.notify_all();
        for (_, tx) in self.calls.borrow_mut().drain() {
            let _ = tx.send(Err(QuorumRpcError::Disconnected));
        }
    }
}

#[derive(Default)]
struct PeerConns {
    out: Option<Rc<Conn>>,
    inbound: Option<Rc<Conn>>,
}

struct Inner {
    cfg: NetConfig,
    hello: Hello,
    peers: RefCell<HashMap<u64, PeerConns>>,
    receiver: RefCell<Option<Receiver>>,
    handler: RefCell<Option<RpcHandler>>,
    counters: NetCounters,
    next_call: Cell<u64>,
    stopped: Cell<bool>,
    stop: Notify,
}

/// The TCP transport. See the module docs. Cheap to clone.
#[derive(Clone)]
pub struct TcpTransport {
    inner: Rc<Inner>,
}

impl TcpTransport {
    /// Binds the listener (if any) and starts dialling the other voters, on the current
    /// glommio executor.
    pub fn start(cfg: NetConfig) -> std::io::Result<Self> {
        let listener = match cfg.listen {
            Some(addr) => Some(bind_exclusive(addr)?),
            None => None,
        };
        let inner = Rc::new(Inner {
            hello: cfg.hello(),
            cfg,
            peers: RefCell::new(HashMap::new()),
            receiver: RefCell::new(None),
            handler: RefCell::new(None),
            counters: NetCounters::default(),
            next_call: Cell::new(1),
            stopped: Cell::new(false),
            stop: Notify::new(),
        });
        if let Some(l) = listener {
            glommio::spawn_local(accept_loop(inner.clone(), l)).detach();
        }
        for (&id, &addr) in &inner.cfg.voters {
            if id != inner.cfg.node_id {
                glommio::spawn_local(dial_loop(inner.clone(), id, addr)).detach();
            }
        }
        Ok(Self { inner })
    }

    #[must_use]
    pub fn counters(&self) -> &NetCounters {
        &self.inner.counters
    }

    /// The address the listener is bound to.
    #[must_use]
    pub fn config(&self) -> &NetConfig {
        &self.inner.cfg
    }

    /// Node ids with an established connection (either direction).
    #[must_use]
    pub fn connected(&self) -> Vec<u64> {
        let peers = self.inner.peers.borrow();
        let mut ids: Vec<u64> =
            peers.iter().filter(|(_, p)| route(p).is_some()).map(|(id, _)| *id).collect();
        ids.sort_unstable();
        ids
    }
}

/// Binds without SO_REUSEPORT (glommio's own bind sets it): a second node on the same
/// controller address must get "address in use", not silently share the port.
fn bind_exclusive(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let exclusive = std::net::TcpListener::bind(addr)?;
    exclusive.set_nonblocking(true)?;
    // SAFETY: the descriptor comes from a listening socket we own and hand over whole.
    Ok(unsafe {
        <TcpListener as std::os::fd::FromRawFd>::from_raw_fd(std::os::fd::IntoRawFd::into_raw_fd(
            exclusive,
        ))
    })
}

fn route(p: &PeerConns) -> Option<Rc<Conn>> {
    let open = |c: &Option<Rc<Conn>>| c.as_ref().filter(|c| !c.closed.get()).cloned();
    open(&p.out).or_else(|| open(&p.inbound))
}

impl Inner {
    fn conn_to(&self, to: u64) -> Option<Rc<Conn>> {
        self.peers.borrow().get(&to).and_then(route)
    }
}

impl Transport for TcpTransport {
    fn send(&self, msg: Message) -> Sent {
        let c = &self.inner.counters;
        let Some(conn) = self.inner.conn_to(msg.to) else {
            c.dropped.set(c.dropped.get() + 1);
            return Sent::Unreachable;
        };
        let bytes = match frame::encode(&Frame::Raft(Box::new(msg))) {
            Ok(b) => b,
            Err(e) => {
                error!("raft message not sent: {e}");
                c.dropped.set(c.dropped.get() + 1);
                return Sent::Dropped;
            }
        };
        if conn.push(bytes) {
            c.sent.set(c.sent.get() + 1);
            Sent::Queued
        } else {
            c.dropped.set(c.dropped.get() + 1);
            Sent::Dropped
        }
    }

    fn call(
        &self,
        to: u64,
        body: Bytes,
        timeout_ms: u64,
    ) -> LocalBoxFuture<'static, Result<Bytes, QuorumRpcError>> {
        let inner = self.inner.clone();
        async move {
            let conn = inner.conn_to(to).ok_or(QuorumRpcError::Unreachable(to))?;
            if conn.calls.borrow().len() >= RPC_INFLIGHT_MAX {
                return Err(QuorumRpcError::Busy(to));
            }
            let id = inner.next_call.get();
            inner.next_call.set(id + 1);
            let bytes =
                frame::encode(&Frame::RpcRequest { id, body }).map_err(QuorumRpcError::Invalid)?;
            let (tx, rx) = oneshot::channel();
            conn.calls.borrow_mut().insert(id, tx);
            if !conn.push(bytes) {
                conn.calls.borrow_mut().remove(&id);
                return Err(QuorumRpcError::Busy(to));
            }
            let timer = glommio::timer::sleep(Duration::from_millis(timeout_ms));
            let answer = futures::select! {
                r = rx.fuse() => r.unwrap_or(Err(QuorumRpcError::Disconnected)),
                _ = FutureExt::fuse(timer) => Err(QuorumRpcError::Timeout),
            };
            conn.calls.borrow_mut().remove(&id);
            answer
        }
        .boxed_local()
    }

    fn set_receiver(&self, receiver: Receiver) {
        *self.inner.receiver.borrow_mut() = Some(receiver);
    }

    fn set_rpc_handler(&self, handler: RpcHandler) {
        *self.inner.handler.borrow_mut() = Some(handler);
    }

    fn refused_count(&self) -> u64 {
        self.inner.counters.refused.get()
    }

    fn shutdown(&self) {
        self.inner.stopped.set(true);
        self.inner.stop.notify_all();
        for p in self.inner.peers.borrow().values() {
            for c in p.out.iter().chain(p.inbound.iter()) {
                c.close();
            }
        }
    }
}

/// Races `fut` against a timer and the transport's stop signal.
async fn bounded<T>(
    inner: &Inner,
    ms: u64,
    fut: impl std::future::Future<Output = T>,
) -> Option<T> {
    let timer = glommio::timer::sleep(Duration::from_millis(ms));
    futures::select! {
        r = fut.fuse() => Some(r),
        _ = FutureExt::fuse(timer) => None,
        () = inner.stop.wait().fuse() => None,
    }
}

async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> Result<Frame, String> {
    let mut header = [0u8; FRAME_HEADER_BYTES];
    r.read_exact(&mut header).await.map_err(|e| format!("read: {e}"))?;
    let (len, crc) = frame::parse_header(&header)?;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await.map_err(|e| format!("read: {e}"))?;
    frame::decode_body(Bytes::from(body), crc)
}

async fn write_all<W: AsyncWrite + Unpin>(w: &mut W, bytes: &[u8]) -> Result<(), String> {
    w.write_all(bytes).await.map_err(|e| format!("write: {e}"))?;
    w.flush().await.map_err(|e| format!("flush: {e}"))
}

/// Exchanges hellos (ours first when dialling); the peer's hello if acceptable.
async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    inner: &Inner,
    stream: &mut S,
    expect: Option<u64>,
) -> Result<Hello, String> {
    let ours = frame::encode(&Frame::Hello(inner.hello.clone()))?;
    if expect.is_some() {
        write_all(stream, &ours).await?;
    }
    let theirs = match read_frame(stream).await? {
        Frame::Hello(h) => h,
        other => return Err(format!("expected a hello, got {other:?}")),
    };
    if expect.is_none() {
        // Answer before judging, so the dialler can log the mismatch with both values too.
        write_all(stream, &ours).await?;
    }
    let mut refusal = frame::check_hello(&inner.hello, &theirs);
    if let (None, Some(id)) = (&refusal, expect) {
        if theirs.node_id != id {
            refusal = Some(format!("dialled node {id}, node {} answered", theirs.node_id));
        }
    }
    if let Some(why) = refusal {
        let c = &inner.counters;
        c.refused.set(c.refused.get() + 1);
        error!("refusing quorum connection: {why}");
        return Err(why);
    }
    Ok(theirs)
}

async fn dial_loop(inner: Rc<Inner>, peer: u64, addr: SocketAddr) {
    let mut backoff_ms = RECONNECT_BACKOFF_MS_MIN;
    while !inner.stopped.get() {
        let refused_before = inner.counters.refused.get();
        let connected = bounded(&inner, CONNECT_TIMEOUT_MS + HANDSHAKE_TIMEOUT_MS, async {
            let s = TcpStream::connect(addr).await.map_err(|e| format!("connect: {e}"))?;
            let _ = s.set_nodelay(true);
            detect_dead_peer(&s);
            let mut s = match &inner.cfg.tls {
                None => Stream::Plain(s),
                Some(tls) => Stream::Client(Box::new(dial_tls(&inner, tls, peer, addr, s).await?)),
            };
            handshake(&inner, &mut s, Some(peer)).await.map(|_| s)
        })
        .await;
        match connected {
            Some(Ok(stream)) => {
                info!("connected to quorum node {peer} at {addr}");
                backoff_ms = RECONNECT_BACKOFF_MS_MIN;
                let conn = Conn::new(peer);
                let old =
                    inner.peers.borrow_mut().entry(peer).or_default().out.replace(conn.clone());
                if let Some(old) = old {
                    old.close();
                }
                run_conn(&inner, stream, &conn).await;
            }
            Some(Err(why)) => debug!("quorum node {peer} at {addr}: {why}"),
            None => debug!("quorum node {peer} at {addr}: timed out"),
        }
        if inner.stopped.get() {
            break;
        }
        if inner.counters.refused.get() != refused_before {
            // A mis-configured peer will not fix itself soon: retry slowly (and log less).
            backoff_ms = RECONNECT_BACKOFF_MS_MAX;
        }
        let _ = bounded(&inner, backoff_ms, futures::future::pending::<()>()).await;
        backoff_ms = (backoff_ms * 2).min(RECONNECT_BACKOFF_MS_MAX);
    }
}

async fn accept_loop(inner: Rc<Inner>, listener: TcpListener) {
    while !inner.stopped.get() {
        let accepted = futures::select! {
            r = listener.accept().fuse() => r,
            () = inner.stop.wait().fuse() => break,
        };
        match accepted {
            Ok(stream) => {
                glommio::spawn_local(serve_inbound(inner.clone(), stream)).detach();
            }
            Err(e) => {
                error!("quorum listener: accept failed: {e}");
                glommio::timer::sleep(Duration::from_millis(RECONNECT_BACKOFF_MS_MIN)).await;
            }
        }
    }
}

async fn serve_inbound(inner: Rc<Inner>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    detect_dead_peer(&stream);
    let peer_addr =
        stream.peer_addr().map_or_else(|_| "an unknown address".into(), |a| a.to_string());
    let secured = bounded(&inner, HANDSHAKE_TIMEOUT_MS, async {
        let mut stream = match &inner.cfg.tls {
            None => Stream::Plain(stream),
            Some(tls) => {
                let accept = futures_rustls::TlsAcceptor::from(tls.server.clone()).accept(stream);
                match accept.await {
                    Ok(s) => Stream::Server(Box::new(s)),
                    Err(e) => {
                        tls_refused(&inner, &e, || format!("from {peer_addr}"));
                        return Err(format!("TLS: {e}"));
                    }
                }
            }
        };
        handshake(&inner, &mut stream, None).await.map(|h| (h, stream))
    })
    .await;
    let Some(Ok((theirs, stream))) = secured else { return };
    let peer = theirs.node_id;
    debug!("quorum node {peer} connected to us");
    let conn = Conn::new(peer);
    let old = inner.peers.borrow_mut().entry(peer).or_default().inbound.replace(conn.clone());
    if let Some(old) = old {
        old.close();
    }
    run_conn(&inner, stream, &conn).await;
}

/// [`PEER_DEAD_AFTER_MS`] on a socket: `TCP_USER_TIMEOUT` plus keepalive probes, so the
/// kernel fails a connection whose peer went silent (after a network cut the old connection
/// otherwise hangs in retransmission backoff for minutes while the dial loop, thinking it
/// connected, never redials; a node cut off for 15 s stayed out of the quorum after the cut
/// healed). Best effort: a failed setsockopt is logged and the connection used as is.
fn detect_dead_peer(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let fd = stream.as_raw_fd();
    let idle_s = i32::try_from(PEER_DEAD_AFTER_MS / 1000).unwrap_or(1).max(1);
    let timeout_ms = i32::try_from(PEER_DEAD_AFTER_MS).unwrap_or(i32::MAX);
    let options = [
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, idle_s),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 1),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3),
        (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, timeout_ms),
    ];
    for (level, name, value) in options {
        // SAFETY: setsockopt on a socket we own, with a pointer to a live c_int and its size.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                std::ptr::addr_of!(value).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            debug!("quorum socket option {name}: {}", std::io::Error::last_os_error());
        }
    }
}

/// The client side of the TLS handshake with voter `peer` at `addr`, checking its certificate
/// against its host in `controller.quorum.voters`.
async fn dial_tls(
    inner: &Inner,
    tls: &QuorumTls,
    peer: u64,
    addr: SocketAddr,
    tcp: TcpStream,
) -> Result<futures_rustls::client::TlsStream<TcpStream>, String> {
    let host = tls.voter_hosts.get(&peer).cloned().unwrap_or_else(|| addr.ip().to_string());
    let name = rustls::pki_types::ServerName::try_from(host.clone())
        .map_err(|e| format!("server name {host}: {e}"))?;
    let connect = futures_rustls::TlsConnector::from(tls.client.clone()).connect(name, tcp);
    connect.await.map_err(|e| {
        tls_refused(inner, &e, || format!("to node {peer} at {addr}"));
        format!("TLS: {e}")
    })
}

/// Logs and counts a TLS handshake that rustls refused (a certificate, a protocol version
/// or cipher suite); an EOF or reset mid-handshake is a peer restarting, not a refusal.
fn tls_refused(inner: &Inner, e: &std::io::Error, whom: impl FnOnce() -> String) {
    if e.kind() == std::io::ErrorKind::InvalidData {
        let c = &inner.counters;
        c.refused.set(c.refused.get() + 1);
        error!("refusing quorum connection {}: TLS handshake failed: {e}", whom());
    } else {
        debug!("quorum TLS handshake {} ended: {e}", whom());
    }
}

/// A quorum connection: plain TCP, or TLS as the dialler or the listener.
enum Stream {
    Plain(TcpStream),
    Client(Box<futures_rustls::client::TlsStream<TcpStream>>),
    Server(Box<futures_rustls::server::TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut [u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_read(cx, buf),
            Stream::Client(s) => std::pin::Pin::new(s.as_mut()).poll_read(cx, buf),
            Stream::Server(s) => std::pin::Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_write(cx, buf),
            Stream::Client(s) => std::pin::Pin::new(s.as_mut()).poll_write(cx, buf),
            Stream::Server(s) => std::pin::Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_flush(cx),
            Stream::Client(s) => std::pin::Pin::new(s.as_mut()).poll_flush(cx),
            Stream::Server(s) => std::pin::Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_close(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_close(cx),
            Stream::Client(s) => std::pin::Pin::new(s.as_mut()).poll_close(cx),
            Stream::Server(s) => std::pin::Pin::new(s.as_mut()).poll_close(cx),
        }
    }
}

/// Runs an established connection until either direction fails or it is closed, then
/// forgets it.
async fn run_conn(inner: &Rc<Inner>, stream: Stream, conn: &Rc<Conn>) {
    inner.counters.connects.set(inner.counters.connects.get() + 1);
    let (rh, wh) = stream.split();
    let reader = read_loop(inner, futures::io::BufReader::new(rh), conn);
    let writer = write_loop(wh, conn);
    futures::select! {
        why = reader.fuse() => debug!("quorum node {}: {why}", conn.peer),
        why = writer.fuse() => debug!("quorum node {}: {why}", conn.peer),
    }
    conn.close();
    let mut peers = inner.peers.borrow_mut();
    if let Some(p) = peers.get_mut(&conn.peer) {
        for slot in [&mut p.out, &mut p.inbound] {
            if slot.as_ref().is_some_and(|c| Rc::ptr_eq(c, conn)) {
                *slot = None;
            }
        }
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(mut w: W, conn: &Conn) -> String {
    let mut batch = Vec::new();
    loop {
        if conn.closed.get() {
            return "closed".to_string();
        }
        let wait = conn.wake.wait();
        batch.clear();
        {
            let mut q = conn.queue.borrow_mut();
            while let Some(f) = q.pop_front() {
                batch.extend_from_slice(&f);
                if batch.len() >= 1024 * 1024 {
                    break;
                }
            }
        }
        if batch.is_empty() {
            wait.await;
            continue;
        }
        if let Err(e) = write_all(&mut w, &batch).await {
            return e;
        }
    }
}

async fn read_loop<R: AsyncRead + Unpin>(inner: &Rc<Inner>, mut r: R, conn: &Rc<Conn>) -> String {
    loop {
        let f = match read_frame(&mut r).await {
            Ok(f) => f,
            Err(e) => {
                if !e.starts_with("read:") {
                    let c = &inner.counters;
                    c.bad_frames.set(c.bad_frames.get() + 1);
                    error!("bad frame from quorum node {}: {e}", conn.peer);
                }
                return e;
            }
        };
        match f {
            Frame::Hello(_) => return "second hello".to_string(),
            Frame::Raft(m) => {
                if m.from != conn.peer {
                    return format!(
                        "raft message from {} on node {}'s connection",
                        m.from, conn.peer
                    );
                }
                let rx = inner.receiver.borrow().clone();
                if let Some(rx) = rx {
                    rx(*m);
                }
            }
            Frame::RpcRequest { id, body } => serve_call(inner, conn, id, body),
            Frame::RpcResponse { id, status, body } => {
                if let Some(tx) = conn.calls.borrow_mut().remove(&id) {
                    let r = match status {
                        RpcStatus::Ok => Ok(body),
                        RpcStatus::NoHandler => Err(QuorumRpcError::NoHandler(conn.peer)),
                        RpcStatus::Busy => Err(QuorumRpcError::Busy(conn.peer)),
                    };
                    let _ = tx.send(r);
                }
            }
        }
    }
}

/// Answers an incoming call from a task of its own; the answer goes back on `conn`.
fn serve_call(inner: &Rc<Inner>, conn: &Rc<Conn>, id: u64, body: Bytes) {
    let handler = inner.handler.borrow().clone();
    let respond = |status, body| {
        if let Ok(b) = frame::encode(&Frame::RpcResponse { id, status, body }) {
            conn.push(b);
        }
    };
    let Some(h) = handler else { return respond(RpcStatus::NoHandler, Bytes::new()) };
    if conn.serving.get() >= RPC_INFLIGHT_MAX {
        return respond(RpcStatus::Busy, Bytes::new());
    }
    conn.serving.set(conn.serving.get() + 1);
    let conn = conn.clone();
    let from = conn.peer;
    glommio::spawn_local(async move {
        let answer = h(from, body).await;
        conn.serving.set(conn.serving.get() - 1);
        match frame::encode(&Frame::RpcResponse { id, status: RpcStatus::Ok, body: answer }) {
            Ok(b) => {
                conn.push(b);
            }
            Err(e) => error!("rpc answer to node {from} not sent: {e}"),
        }
    })
    .detach();
}
