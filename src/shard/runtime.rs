//! Process start-up and shutdown: resource limits, signal handling, the executor pool
//! (one pinned glommio executor per shard), and each shard's life: join the mesh, load
//! metadata (the application opens the partitions the shard owns as it installs the
//! image), accept connections, drain, and have the application close its logs
//! (`App::stop_shard`).
//!
//! Runs on the main thread (limits, signals, pool) and then on every shard. Invariant:
//! a shard starts accepting only after it has installed the first metadata image and shard
//! 0's start-up (controller, registration, unfence) has finished, and closes its logs only after every shard has drained its connections (another shard's
//! in-flight request may still target this shard's partitions).

use std::os::fd::{FromRawFd, IntoRawFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use futures::future::LocalBoxFuture;
use glommio::channels::channel_mesh::MeshBuilder;
use glommio::net::{TcpListener, TcpStream};
use glommio::{CpuSet, Latency, LocalExecutorPoolBuilder, PoolPlacement, Shares};

use super::ctx::{CtxParts, ShardCtx};
use super::mesh::{receive_loop, Handler, MeshMsg};
use crate::config::ServeConfig;
use crate::constants::{
    BLOCKING_THREADS_PER_SHARD, MEMLOCK_BYTES_MIN, MEMLOCK_BYTES_WANTED, MESH_CHANNEL_CAPACITY,
    NOFILE_MIN, NOFILE_WANTED, PORT_FREE_WAIT_MS_MAX, SHUTDOWN_DRAIN_TIMEOUT_MS,
    SHUTDOWN_HARD_LIMIT_MS, SHUTDOWN_POLL_INTERVAL_MS, STARTUP_STALL_LIMIT_MS,
};
use crate::types::ShardId;

/// Set by the signal thread on SIGTERM/SIGINT; every shard polls it.
static SHUTDOWN_REQUESTED: AtomicBool = AtomicBool::new(false);
/// Live [`ShutdownHold`]s: while any, shards keep serving after a shutdown request.
static SHUTDOWN_HOLDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Whether SIGTERM/SIGINT arrived (the shards may still be serving: see [`ShutdownHold`]).
#[must_use]
pub fn shutdown_requested() -> bool {
    SHUTDOWN_REQUESTED.load(Ordering::SeqCst)
}

/// Delays the start of shutdown on every shard while it lives, so work that must happen
/// while the broker still serves (a clustered broker's controlled shutdown: its leaderships
/// move first) can finish. The holder bounds how long it keeps it; the process-wide hard
/// limit (`SHUTDOWN_HARD_LIMIT_MS`) applies regardless.
#[derive(Debug)]
pub struct ShutdownHold(());

impl ShutdownHold {
    #[must_use]
    pub fn new() -> Self {
        SHUTDOWN_HOLDS.fetch_add(1, Ordering::SeqCst);
        ShutdownHold(())
    }
}

impl Default for ShutdownHold {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for ShutdownHold {
    fn drop(&mut self) {
        SHUTDOWN_HOLDS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Core ids this process may run on (its affinity mask), e.g. as narrowed by `taskset`.
#[must_use]
pub fn allowed_cores() -> Vec<usize> {
    core_affinity::get_core_ids()
        .map(|ids| ids.into_iter().map(|c| c.id).collect())
        .filter(|ids: &Vec<usize>| !ids.is_empty())
        .unwrap_or_else(|| vec![0])
}

/// What the application above the runtime provides: the handler of cross-shard requests,
/// how the controller shard publishes the first metadata image to every shard, and how an
/// accepted connection is served. Plain function pointers: `Copy` and `Send`, so every
/// executor gets the same ones and the runtime names no application module.
#[derive(Clone, Copy)]
pub struct App {
    pub handle: Handler,
    pub start_controller: StartController,
    pub serve_connection: ServeConnection,
    /// Awaited before each accept: holds the accept loop while the application's limits
    /// (connection count, creation rate) say so; connections then wait in the kernel.
    pub accept_gate: AcceptGate,
    /// Runs a POST (or `GET /v1/shards/...`) on the admin endpoint (method and target in,
    /// status and body out), on the shard that serves the endpoint.
    pub admin_post: AdminPost,
    /// Starts the application's per-shard background work, once the listener is bound.
    pub start_shard: StartShard,
    /// Runs after the shard drained its connections: saves and closes what the application
    /// keeps open on the shard (checkpoints, logs).
    pub stop_shard: StopShard,
}

/// See [`App::start_shard`].
pub type StartShard = fn(Rc<ShardCtx>);
/// See [`App::stop_shard`].
pub type StopShard = fn(Rc<ShardCtx>) -> LocalBoxFuture<'static, ()>;

/// Runs one admin POST (e.g. a shard move) with the serving shard's context.
pub type AdminPost = fn(Rc<ShardCtx>, String, String) -> LocalBoxFuture<'static, (u16, String)>;

/// Starts the controller-shard side of the application (on shard 0, before the listener
/// opens) and installs the first metadata image on every shard.
pub type StartController = fn(Rc<ShardCtx>) -> LocalBoxFuture<'static, anyhow::Result<()>>;
/// Serves one accepted connection (with its peer's address and the index of its listener in
/// `config.listeners.all`) until it closes.
pub type ServeConnection =
    fn(Rc<ShardCtx>, TcpStream, Option<std::net::IpAddr>, usize) -> LocalBoxFuture<'static, ()>;

/// Resolves when the shard may accept its next connection.
pub type AcceptGate = fn(Rc<ShardCtx>) -> LocalBoxFuture<'static, ()>;

/// Runs the broker until SIGTERM/SIGINT, then shuts it down cleanly.
pub fn serve(config: ServeConfig, app: App) -> anyhow::Result<()> {
    raise_limits()?;
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("cannot create data dir {}", config.data_dir.display()))?;
    start_signal_thread()?;
    for l in &config.listeners.all {
        ensure_port_free(l.bind)?;
    }
    // A configured admin port is bound before anything starts, so a taken one fails the
    // start like a taken Kafka port; the default is bound later, with a fallback.
    let admin = match config.admin_listen {
        Some(addr) => {
            let context = || format!("cannot listen on the admin address {addr} (--admin-listen)");
            Some(bind_exclusive_waiting(addr).with_context(context)?)
        }
        None => None,
    };
    let (first_listeners, config) = bind_first_listeners(config)?;
    let shard_count = config.shards as usize;
    let config = Arc::new(config);
    let shared = Arc::new(Shared {
        first_listeners: Mutex::new(first_listeners.into_iter().map(Some).collect()),
        admin: Mutex::new(admin),
        started: AtomicBool::new(false),
        ready: AtomicUsize::new(0),
        drained: AtomicUsize::new(0),
        stages: (0..shard_count).map(|_| AtomicU8::new(0)).collect(),
    });
    start_watchdog(shared.clone())?;
    let mesh = MeshBuilder::<MeshMsg, _>::full(shard_count, MESH_CHANNEL_CAPACITY);
    let spin = Duration::from_micros(config.spin_before_park_us);
    let cores = shard_cores(shard_count, config.cpus.as_deref())?;
    // Each blocking thread pinned to one of the shards' cores: several brokers on one host
    // stay on their own cores (`--cpus`).
    let blocking: Vec<CpuSet> =
        (0..BLOCKING_THREADS_PER_SHARD).map(|i| cores[i % cores.len()].clone()).collect();
    let handles = LocalExecutorPoolBuilder::new(PoolPlacement::Custom(cores))
        .name("shard")
        .spin_before_park(spin)
        // glommio's default is one blocking thread per pool, pinned to the first shard's
        // core: every fsync of a directory or small file (new partitions, checkpoints)
        // queued behind one another (issue 43: 300 new partitions took 0.5–0.9 s per node).
        .blocking_thread_pool_placement(PoolPlacement::Custom(blocking))
        .on_all_shards(move || async move { shard_main(config, mesh, shared, app).await })
        .map_err(|err| anyhow!("cannot start shard executors: {err}"))?;
    let mut failure = None;
    for result in handles.join_all() {
        match result {
            Ok(Ok(())) => {}
            Ok(Err(err)) => failure = Some(err),
            Err(err) => failure = Some(anyhow!("shard executor failed: {err}")),
        }
    }
    match failure {
        Some(err) => Err(err),
        None => {
            tracing::info!("shut down cleanly");
            Ok(())
        }
    }
}

struct Shared {
    /// Each listener's first socket (index: `config.listeners.all`), until a shard takes it;
    /// the other shards bind the same address with SO_REUSEPORT.
    first_listeners: Mutex<Vec<Option<socket2::Socket>>>,
    /// The configured admin endpoint's listener, until the shard serving it takes it.
    admin: Mutex<Option<std::net::TcpListener>>,
    /// Shard 0's start-up (controller, registration, the image that follows it) finished:
    /// no shard accepts a connection before (issue 19, see `shard_main`).
    started: AtomicBool,
    ready: AtomicUsize,
    drained: AtomicUsize,
    /// Each shard's start-up stage (index: shard id), read by the start-up watchdog.
    stages: Vec<AtomicU8>,
}

/// Start-up stages of a shard, in order.
const STAGES: [&str; 5] = [
    "joining the shard mesh",
    "probing the data dir",
    "installing the first metadata image",
    "taking its listener",
    "listening",
];
const STAGE_PROBING: u8 = 1;
const STAGE_IMAGE: u8 = 2;
const STAGE_LISTENER: u8 = 3;
const STAGE_LISTENING: u8 = 4;

impl Shared {
    fn reached(&self, shard: ShardId, stage: u8) {
        if let Some(s) = self.stages.get(shard.0 as usize) {
            s.store(stage, Ordering::SeqCst);
        }
    }
}

/// Exits with the stage every shard is at if the start does not finish in time: a stall
/// (seen under heavy load on a 2-core machine, never reproduced alone) must be an error
/// that names where it stopped, not a broker that silently never listens.
fn start_watchdog(shared: Arc<Shared>) -> anyhow::Result<()> {
    let shards = shared.stages.len();
    std::thread::Builder::new().name("start-watchdog".into()).spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_millis(STARTUP_STALL_LIMIT_MS);
        while shared.ready.load(Ordering::SeqCst) < shards {
            if SHUTDOWN_REQUESTED.load(Ordering::SeqCst) {
                return;
            }
            if std::time::Instant::now() >= deadline {
                let at: Vec<String> = (shared.stages.iter().enumerate())
                    .map(|(i, s)| {
                        let stage = STAGES.get(s.load(Ordering::SeqCst) as usize);
                        format!("shard-{i}: {}", stage.unwrap_or(&"?"))
                    })
                    .collect();
                fatal(&format!(
                    "start-up stalled for {} s ({}); exiting",
                    STARTUP_STALL_LIMIT_MS / 1000,
                    at.join(", ")
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    })?;
    Ok(())
}

/// Shard i runs on the i-th core of `--cpus` or, without it, on allowed core i (wrapping
/// when there are more shards than cores).
fn shard_cores(shard_count: usize, cpus: Option<&[usize]>) -> anyhow::Result<Vec<CpuSet>> {
    let cores = cpus.map_or_else(allowed_cores, <[usize]>::to_vec);
    let online = CpuSet::online().map_err(|err| anyhow!("cannot read CPU topology: {err}"))?;
    let mut sets = Vec::with_capacity(shard_count);
    for i in 0..shard_count {
        let core = cores[i % cores.len()];
        let set = online.clone().filter(|loc| loc.cpu == core);
        if set.is_empty() {
            bail!("--cpus: core {core} is not online on this host (see `nproc`, lscpu)");
        }
        sets.push(set);
    }
    Ok(sets)
}

/// Every shard binds the Kafka port with SO_REUSEPORT, which would also let a second broker
/// process silently share a port already in use; an exclusive bind first refuses that, as
/// Kafka does ("address already in use").
fn ensure_port_free(addr: std::net::SocketAddr) -> anyhow::Result<()> {
    if addr.port() == 0 {
        return Ok(());
    }
    let probe = bind_exclusive_waiting(addr)
        .with_context(|| format!("cannot listen on {addr} (is another broker using it?)"))?;
    drop(probe);
    Ok(())
}

/// Binds `addr` without SO_REUSEPORT. A broker killed a moment ago can still hold its
/// listener: io_uring tears a dead process's ring down asynchronously, and a pending
/// accept keeps the socket open until then. So wait a little before concluding the port
/// belongs to a live broker.
fn bind_exclusive_waiting(addr: std::net::SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let deadline = std::time::Instant::now() + Duration::from_millis(PORT_FREE_WAIT_MS_MAX);
    loop {
        match std::net::TcpListener::bind(addr) {
            Err(err)
                if err.kind() == std::io::ErrorKind::AddrInUse
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            result => return result,
        }
    }
}

/// Binds each listener once on the main thread; a `:0` port becomes the one bound, in the
/// listener's bind address and (when it was 0 too) its advertised port.
fn bind_first_listeners(
    mut config: ServeConfig,
) -> anyhow::Result<(Vec<socket2::Socket>, ServeConfig)> {
    let mut sockets = Vec::new();
    for l in &mut config.listeners.all {
        let socket = bind_listener(l.bind)
            .with_context(|| format!("cannot listen on {} (listener {})", l.bind, l.name))?;
        let local =
            socket.local_addr()?.as_socket().ok_or_else(|| anyhow!("not an inet socket"))?;
        l.bind = local;
        if l.advertised_port == 0 {
            l.advertised_port = local.port();
        }
        sockets.push(socket);
    }
    let inter = &config.listeners.all[config.listeners.inter_broker];
    config.listen = inter.bind;
    config.advertised_port = inter.advertised_port;
    Ok((sockets, config))
}

fn bind_listener(addr: std::net::SocketAddr) -> std::io::Result<socket2::Socket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket)
}

async fn shard_main(
    config: Arc<ServeConfig>,
    mesh: MeshBuilder<MeshMsg, glommio::channels::channel_mesh::Full>,
    shared: Arc<Shared>,
    app: App,
) -> anyhow::Result<()> {
    let (senders, mut receivers) =
        mesh.join().await.map_err(|err| anyhow!("cannot join the shard mesh: {err}"))?;
    let me = ShardId(u32::try_from(senders.peer_id()).unwrap_or(u32::MAX));
    tracing::debug!(shard = %me, "joined the mesh");
    shared.reached(me, STAGE_PROBING);
    let exec = glommio::executor();
    let latency_queue = exec.create_task_queue(
        Shares::Static(1000),
        Latency::Matters(Duration::from_millis(1)),
        "requests",
    );
    let background_queue =
        exec.create_task_queue(Shares::Static(50), Latency::NotImportant, "background");
    let admin = (me.0 + 1 == config.shards).then(|| {
        use crate::metrics::shard_task::AdminSocket;
        match shared.admin.lock().ok().and_then(|mut a| a.take()) {
            Some(listener) => AdminSocket::Bound(listener),
            None => AdminSocket::Default(crate::metrics::http::default_addr()),
        }
    });
    let serves_admin = admin.is_some();
    crate::metrics::shard_task::start_shard(me.0, background_queue, admin);
    // The iopoll probe must run on every executor before it opens any log (design.md §5).
    if let Err(err) = crate::io::probe_data_dir(&config.data_dir).await {
        fatal(&format!("data dir {} failed the I/O probe: {err}", config.data_dir.display()));
    }
    shared.reached(me, STAGE_IMAGE);
    let ctx = Rc::new(ShardCtx::new(CtxParts {
        senders,
        handler: app.handle,
        config: config.clone(),
        latency_queue,
        background_queue,
    }));
    for (_, rx) in receivers.streams() {
        drop(ctx.spawn(receive_loop(ctx.clone(), rx)));
    }
    if serves_admin {
        let post_ctx = ctx.clone();
        crate::metrics::http::set_post_handler(Box::new(move |method, target| {
            (app.admin_post)(post_ctx.clone(), method, target)
        }));
    }
    if me.0 == 0 {
        if let Err(err) = publish_initial_image(&ctx, app).await {
            fatal(&format!("cannot open partitions at start: {err:#}"));
        }
        shared.started.store(true, Ordering::SeqCst);
    } else {
        // Not just the first image: that one is replayed from the metadata log and still
        // names this broker leader at its old epochs. Shard 0 then registers, is fenced (the
        // leaderships go, a new epoch) and unfenced (they come back, another epoch) before
        // it opens its listener. A shard serving meanwhile appended produces under the old
        // epoch and then answered NOT_LEADER_OR_FOLLOWER for them and for their retries
        // (librdkafka: "not persisted"), and OUT_OF_ORDER_SEQUENCE_NUMBER for requests
        // pipelined behind them once leading again; the client then bumps its epoch and
        // renumbers what it holds, writing records already in the log a second time
        // (issue 19, the soak's duplicates).
        while !ctx.has_image() || !shared.started.load(Ordering::SeqCst) {
            super::sleep(Duration::from_millis(1)).await;
        }
    }
    tracing::debug!(shard = %me, "metadata image installed");
    shared.reached(me, STAGE_LISTENER);
    let listeners = (0..config.listeners.all.len())
        .map(|i| take_listener(&shared, i, config.listeners.all[i].bind))
        .collect::<anyhow::Result<Vec<_>>>()?;
    shared.reached(me, STAGE_LISTENING);
    if shared.ready.fetch_add(1, Ordering::SeqCst) + 1 == config.shards as usize {
        let first = config.listeners.all[0].bind;
        tracing::info!(listen = %first, shards = config.shards, cache_mib_per_shard = config.cache_bytes >> 20, "shardlog listening on {first}");
        for l in &config.listeners.all {
            tracing::info!(listener = %l.name, protocol = l.protocol.name(), "listener {} listening on {} (advertised {}:{})", l.name, l.bind, l.advertised_host, l.advertised_port);
        }
    }
    drop(ctx.spawn(watch_shutdown_flag(ctx.clone())));
    (app.start_shard)(ctx.clone());
    let loops = listeners.into_iter().enumerate().map(|(i, l)| accept_loop(&ctx, i, l, app));
    futures::future::join_all(loops).await;
    drain(&ctx, &shared).await;
    (app.stop_shard)(ctx.clone()).await;
    ctx.close_mesh();
    Ok(())
}

async fn publish_initial_image(ctx: &Rc<ShardCtx>, app: App) -> anyhow::Result<()> {
    (app.start_controller)(ctx.clone()).await
}

fn take_listener(
    shared: &Shared,
    index: usize,
    addr: std::net::SocketAddr,
) -> anyhow::Result<TcpListener> {
    let first = shared.first_listeners.lock().map(|mut s| s.get_mut(index).and_then(Option::take));
    let socket = match first {
        Ok(Some(socket)) => socket,
        _ => bind_listener(addr).with_context(|| format!("cannot listen on {addr}"))?,
    };
    socket.set_nonblocking(true)?;
    // SAFETY: the descriptor comes from a listening socket we own and hand over whole.
    Ok(unsafe { TcpListener::from_raw_fd(socket.into_raw_fd()) })
}

/// Accepts connections of listener `index` (of `config.listeners.all`) until shutdown.
async fn accept_loop(ctx: &Rc<ShardCtx>, index: usize, listener: TcpListener, app: App) {
    loop {
        let seen = ctx.shutdown.version();
        if ctx.is_shutting_down() {
            break;
        }
        let accepted = {
            let gate = (app.accept_gate)(ctx.clone());
            let accept = async {
                gate.await;
                listener.accept().await
            };
            futures::pin_mut!(accept);
            let stop = ctx.shutdown.changed_since(seen);
            futures::pin_mut!(stop);
            match futures::future::select(accept, stop).await {
                futures::future::Either::Left((result, _)) => result,
                futures::future::Either::Right(_) => break,
            }
        };
        match accepted {
            Ok(stream) => {
                let peer = stream.peer_addr().ok().map(|a| a.ip());
                tracing::debug!(shard = %ctx.id, ?peer, "accepted connection");
                if let Err(err) = stream.set_nodelay(true) {
                    tracing::debug!("TCP_NODELAY failed: {err}");
                }
                let ctx2 = ctx.clone();
                crate::metrics::count(crate::metrics::Count::ConnectionsAccepted, 1);
                drop(ctx.spawn((app.serve_connection)(ctx2, stream, peer, index)));
            }
            Err(err) => {
                tracing::warn!(shard = %ctx.id, "accept failed: {err}");
                super::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    tracing::debug!(shard = %ctx.id, "stopped accepting");
}

async fn watch_shutdown_flag(ctx: Rc<ShardCtx>) {
    while !SHUTDOWN_REQUESTED.load(Ordering::SeqCst) || SHUTDOWN_HOLDS.load(Ordering::SeqCst) > 0 {
        super::sleep(Duration::from_millis(SHUTDOWN_POLL_INTERVAL_MS)).await;
    }
    ctx.begin_shutdown();
}

/// Waits for this shard's connections to finish, then for every shard to get there.
async fn drain(ctx: &Rc<ShardCtx>, shared: &Shared) {
    let deadline = std::time::Instant::now() + Duration::from_millis(SHUTDOWN_DRAIN_TIMEOUT_MS);
    while ctx.connections.get() > 0 && std::time::Instant::now() < deadline {
        let seen = ctx.connections_changed.version();
        super::with_timeout(Duration::from_millis(50), ctx.connections_changed.changed_since(seen))
            .await;
    }
    if ctx.connections.get() > 0 {
        tracing::warn!(shard = %ctx.id, open = ctx.connections.get(), "connections still open at shutdown");
    }
    shared.drained.fetch_add(1, Ordering::SeqCst);
    while shared.drained.load(Ordering::SeqCst) < ctx.shard_count as usize
        && std::time::Instant::now() < deadline
    {
        super::sleep(Duration::from_millis(5)).await;
    }
}

/// An environment failure no shard can recover from: say why and exit, rather than leave
/// the other shards serving a half-started broker.
fn fatal(message: &str) -> ! {
    tracing::error!("{message}");
    eprintln!("shardlog: {message}");
    std::process::exit(1);
}

/// Raises RLIMIT_MEMLOCK and RLIMIT_NOFILE, or explains how to.
fn raise_limits() -> anyhow::Result<()> {
    let memlock = raise_limit(libc::RLIMIT_MEMLOCK, MEMLOCK_BYTES_WANTED);
    if memlock < MEMLOCK_BYTES_MIN {
        bail!(
            "locked-memory limit is {memlock} bytes; glommio needs at least {MEMLOCK_BYTES_MIN}. \
             Run as root, or raise it: `ulimit -l unlimited` (shell), LimitMEMLOCK=infinity \
             (systemd), or `--ulimit memlock=-1` (docker)"
        );
    }
    let nofile = raise_limit(libc::RLIMIT_NOFILE, NOFILE_WANTED);
    if nofile < NOFILE_MIN {
        bail!(
            "open-files limit is {nofile}; Shardlog needs at least {NOFILE_MIN}. Raise it: \
             `ulimit -n 1048576` (shell) or LimitNOFILE=1048576 (systemd)"
        );
    }
    Ok(())
}

/// Tries to set the soft (and if allowed the hard) limit to `wanted`; returns the soft
/// limit in force afterwards.
fn raise_limit(resource: libc::__rlimit_resource_t, wanted: u64) -> u64 {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain syscalls on a stack struct.
    unsafe {
        if libc::getrlimit(resource, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur >= wanted {
            return lim.rlim_cur;
        }
        let both = libc::rlimit { rlim_cur: wanted, rlim_max: wanted.max(lim.rlim_max) };
        if libc::setrlimit(resource, &both) == 0 {
            return wanted;
        }
        let soft = libc::rlimit { rlim_cur: wanted.min(lim.rlim_max), rlim_max: lim.rlim_max };
        if libc::setrlimit(resource, &soft) == 0 {
            return soft.rlim_cur;
        }
        lim.rlim_cur
    }
}

/// Blocks SIGTERM/SIGINT in every thread (the executors inherit the mask) and waits for
/// them on a dedicated thread. A second signal exits at once; so does a shutdown still
/// unfinished `SHUTDOWN_HARD_LIMIT_MS` after the first (a stuck disk or a wedged task must
/// not leave a broker that ignores SIGTERM; recovery handles the unclean exit).
fn start_signal_thread() -> anyhow::Result<()> {
    // SAFETY: signal-mask manipulation on a zeroed sigset_t.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            bail!("cannot block SIGTERM/SIGINT");
        }
        set
    };
    std::thread::Builder::new().name("signals".into()).spawn(move || loop {
        if SHUTDOWN_REQUESTED.load(Ordering::SeqCst) {
            let limit = libc::timespec {
                tv_sec: (SHUTDOWN_HARD_LIMIT_MS / 1000) as libc::time_t,
                tv_nsec: ((SHUTDOWN_HARD_LIMIT_MS % 1000) * 1_000_000) as libc::c_long,
            };
            // SAFETY: `set` and `limit` are valid; a null siginfo pointer is allowed.
            let got = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &limit) };
            if got < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
                continue;
            }
            if got < 0 {
                tracing::error!(
                    limit_ms = SHUTDOWN_HARD_LIMIT_MS,
                    "shutdown did not finish in time: exiting without a clean shutdown"
                );
            } else {
                tracing::warn!("second signal: exiting without a clean shutdown");
            }
            std::process::exit(1);
        }
        let mut signal: libc::c_int = 0;
        // SAFETY: `set` is a valid, initialized signal set.
        if unsafe { libc::sigwait(&set, &mut signal) } != 0 {
            continue;
        }
        SHUTDOWN_REQUESTED.store(true, Ordering::SeqCst);
        tracing::info!(signal, "shutdown requested: finishing in-flight requests");
    })?;
    Ok(())
}
