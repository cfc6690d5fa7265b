//! The admin HTTP/1.1 endpoint (`--admin-listen`, default 127.0.0.1:9644):
//! - `GET /metrics`: Prometheus text of all shards merged ([`super::prom`]);
//! - `GET /v1/histograms/<api>[?stage=<stage>]`: the merged HDR histogram of an API
//!   (name like `Produce` or key like `0`; stage `total` by default) as `.hgrm` text;
//! - `GET /v1/shards`: the JSON [`View`] that `shardlog top` polls;
//! - `POST <target>` and `GET /v1/shards/<more>`: handed to the action the server
//!   registered ([`set_post_handler`]): `POST /v1/shards/move?partition=T-P&to=N` and
//!   `GET /v1/shards/partitions` (`server::shard_move`).
//!
//! With `--admin-require-auth` every request first passes the check the server registered
//! ([`set_auth_handler`]: HTTP Basic credentials of a broker user, then the cluster ACL).
//!
//! Runs on one shard, in its background task queue: a scrape is a handful of
//! milliseconds of merge work that must not delay requests. One request per connection
//! (`Connection: close`), heads capped at [`ADMIN_REQUEST_HEAD_BYTES_MAX`], at most
//! [`ADMIN_CONNECTIONS_MAX`] served concurrently. Socket code is glommio's `TcpListener`;
//! request parsing and routing are plain functions ([`route`]) tested without a socket.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use futures::io::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use glommio::TaskQueueHandle;

use super::view::View;
use super::{api_key_of, hub, Stage};
use crate::constants::{
    ADMIN_CONNECTIONS_MAX, ADMIN_PORT_DEFAULT, ADMIN_REQUEST_HEAD_BYTES_MAX,
    ADMIN_REQUEST_TIMEOUT_MS,
};

static STARTED: OnceLock<Instant> = OnceLock::new();

/// What a POST (or `GET /v1/shards/...`) runs: method and target in, (status, body) out. Set by the server on the
/// shard that serves the endpoint; the metrics module knows no server type.
pub type PostHandler =
    Box<dyn Fn(String, String) -> futures::future::LocalBoxFuture<'static, (u16, String)>>;

/// Whether a request may be served: (method, target, the `Authorization` header's value, the
/// peer's address) in; `Err((status, message))` refuses it (401 asks for credentials, 403
/// refuses the authenticated user). Set by the server when `--admin-require-auth` is on.
pub type AuthHandler =
    Box<dyn Fn(&str, &str, Option<&str>, Option<std::net::IpAddr>) -> Result<(), (u16, String)>>;

thread_local! {
    static POST: std::cell::RefCell<Option<Rc<PostHandler>>> = const { std::cell::RefCell::new(None) };
    static AUTH: std::cell::RefCell<Option<Rc<AuthHandler>>> = const { std::cell::RefCell::new(None) };
}

/// Set before the shards start when requests must be authenticated: until a shard's check
/// is registered (its broker still starting) its endpoint answers 503 rather than serve
/// anyone.
static AUTH_REQUIRED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes every admin request wait for the server's check (`--admin-require-auth`).
pub fn require_auth(required: bool) {
    AUTH_REQUIRED.store(required, std::sync::atomic::Ordering::SeqCst);
}

/// Registers the check every request of this shard's admin endpoint passes first.
pub fn set_auth_handler(handler: AuthHandler) {
    AUTH.with(|a| *a.borrow_mut() = Some(Rc::new(handler)));
}

/// The registered check's verdict on a complete request head (`Ok` without a check).
fn authorized(head: &[u8], peer: Option<std::net::IpAddr>) -> Result<(), Response> {
    let Some(check) = AUTH.with(|a| a.borrow().clone()) else {
        if AUTH_REQUIRED.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Response::text(503, "starting: credentials cannot be checked yet\n"));
        }
        return Ok(());
    };
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let mut parts = lines.next().unwrap_or_default().split(' ');
    let (method, target) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let authorization = lines.take_while(|l| !l.is_empty()).find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim().eq_ignore_ascii_case("authorization").then(|| value.trim())
    });
    check(method, target, authorization, peer)
        .map_err(|(status, body)| Response::text(status, body))
}

/// Registers the POST action of this shard's admin endpoint.
pub fn set_post_handler(handler: PostHandler) {
    POST.with(|p| *p.borrow_mut() = Some(Rc::new(handler)));
}

/// The method and target of a request the registered action serves: a POST, or a GET
/// below `/v1/shards/`.
fn post_action(head: &[u8]) -> Option<(Rc<PostHandler>, String, String)> {
    let line = head.split(|b| *b == b'\n').next()?;
    let line = String::from_utf8_lossy(line);
    let mut parts = line.trim_end().split(' ');
    let (method, target) = (parts.next()?, parts.next()?);
    if method != "POST" && !(method == "GET" && target.starts_with("/v1/shards/")) {
        return None;
    }
    let handler = POST.with(|p| p.borrow().clone())?;
    Some((handler, method.to_string(), target.to_string()))
}

/// An HTTP response to write.
#[derive(Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Response {
    fn text(status: u16, body: impl Into<String>) -> Self {
        Self { status, content_type: "text/plain; charset=utf-8", body: body.into() }
    }

    /// The whole response as bytes, head and body.
    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        let reason = match self.status {
            200 => "OK",
            400 => "Bad Request",
            401 => "Unauthorized",
            403 => "Forbidden",
            503 => "Service Unavailable",
            409 => "Conflict",
            404 => "Not Found",
            405 => "Method Not Allowed",
            _ => "Error",
        };
        // RFC 7617: a 401 names the scheme the client should answer with.
        let challenge =
            if self.status == 401 { "WWW-Authenticate: Basic realm=\"shardlog\"\r\n" } else { "" };
        let mut out = format!(
            "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
             {challenge}Connection: close\r\n\r\n",
            self.status,
            self.content_type,
            self.body.len()
        )
        .into_bytes();
        out.extend_from_slice(self.body.as_bytes());
        out
    }
}

/// The default admin address, 127.0.0.1:9644, served when `--admin-listen` is not given.
#[must_use]
pub fn default_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], ADMIN_PORT_DEFAULT))
}

/// Binds `addr` for the admin endpoint, without SO_REUSEPORT (glommio's own bind sets it):
/// a second broker on the same admin port must get "address in use", not silently share
/// the port with the first.
pub fn bind(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    std::net::TcpListener::bind(addr)
}

/// Serves the bound `listener` from the calling shard's `queue`; returns its address.
pub fn start(
    listener: std::net::TcpListener,
    queue: TaskQueueHandle,
) -> std::io::Result<SocketAddr> {
    let _ = STARTED.get_or_init(Instant::now);
    listener.set_nonblocking(true)?;
    let local = listener.local_addr()?;
    // SAFETY: the descriptor comes from a listening socket we own and hand over whole.
    let listener = unsafe {
        <TcpListener as std::os::fd::FromRawFd>::from_raw_fd(std::os::fd::IntoRawFd::into_raw_fd(
            listener,
        ))
    };
    glommio::spawn_local_into(accept_loop(listener), queue)
        .map_err(|e| std::io::Error::other(e.to_string()))?
        .detach();
    Ok(local)
}

async fn accept_loop(listener: TcpListener) {
    let active = Rc::new(Cell::new(0usize));
    loop {
        let stream = match listener.accept().await {
            Ok(stream) => stream,
            Err(err) => {
                tracing::debug!("admin accept failed: {err}");
                glommio::timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if active.get() >= ADMIN_CONNECTIONS_MAX {
            serve(stream).await; // at the cap: serve inline, which stops accepting
            continue;
        }
        active.set(active.get() + 1);
        let active = active.clone();
        glommio::spawn_local(async move {
            serve(stream).await;
            active.set(active.get() - 1);
        })
        .detach();
    }
}

async fn serve(mut stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(ADMIN_REQUEST_TIMEOUT_MS)));
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    let response = loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            let peer = stream.peer_addr().ok().map(|a| a.ip());
            if let Err(refused) = authorized(&head, peer) {
                break refused;
            }
            if let Some((action, method, target)) = post_action(&head) {
                let (status, body) = action(method, target).await;
                break Response::text(status, body);
            }
            break handle(&head);
        }
        if head.len() > ADMIN_REQUEST_HEAD_BYTES_MAX {
            break Response::text(400, "request head too large\n");
        }
    };
    if let Err(err) = stream.write_all(&response.to_bytes()).await {
        tracing::debug!("admin response not written: {err}");
    }
    let _ = stream.close().await;
}

/// Parses a request head and routes it.
#[must_use]
pub fn handle(head: &[u8]) -> Response {
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.trim_end().split(' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(method), Some(target), Some(version)) if version.starts_with("HTTP/1.") => {
            if method != "GET" {
                return Response::text(405, "only GET is served\n");
            }
            super::shard_task::publish_now();
            route(target)
        }
        _ => Response::text(400, "malformed request line\n"),
    }
}

/// Serves one GET target from the merged metrics of every shard.
#[must_use]
pub fn route(target: &str) -> Response {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    match path {
        "/metrics" => Response {
            status: 200,
            content_type: super::prom::CONTENT_TYPE,
            body: super::prom::render(hub::merged()),
        },
        "/v1/shards" => {
            let uptime = STARTED.get().map_or(0, |s| super::micros(s.elapsed()) / 1000);
            match serde_json::to_string(&View::of(&hub::merged(), uptime)) {
                Ok(body) => Response { status: 200, content_type: "application/json", body },
                Err(err) => Response::text(500, format!("cannot encode view: {err}\n")),
            }
        }
        _ => match path.strip_prefix("/v1/histograms/") {
            Some(api) => histogram(api, query),
            None => Response::text(404, "endpoints: /metrics, /v1/histograms/<api>, /v1/shards\n"),
        },
    }
}

fn histogram(api: &str, query: &str) -> Response {
    let Some(key) = api_key_of(api) else {
        return Response::text(404, format!("unknown API {api:?}\n"));
    };
    let stage_name =
        query.split('&').find_map(|kv| kv.strip_prefix("stage=")).unwrap_or(Stage::Total.name());
    let Some(stage) = Stage::parse(stage_name) else {
        return Response::text(400, format!("unknown stage {stage_name:?}\n"));
    };
    let merged = hub::merged();
    let body = match merged.histogram(key, stage) {
        Some(h) => super::hgrm::render(&h.hist),
        None => super::hgrm::render(&super::LatencyHist::new().hist),
    };
    Response::text(200, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_and_rejects() {
        assert_eq!(handle(b"POST /metrics HTTP/1.1\r\n\r\n").status, 405);
        assert_eq!(handle(b"garbage\r\n\r\n").status, 400);
        assert_eq!(handle(b"GET /nope HTTP/1.1\r\n\r\n").status, 404);
        assert_eq!(route("/v1/histograms/NoSuchApi").status, 404);
        assert_eq!(route("/v1/histograms/Produce?stage=bogus").status, 400);
        let h = route("/v1/histograms/produce?stage=send");
        assert_eq!(h.status, 200);
        assert!(h.body.contains("Total count"), "{}", h.body);
        let m = route("/metrics");
        assert_eq!((m.status, m.content_type), (200, super::super::prom::CONTENT_TYPE));
        let v: View = serde_json::from_str(&route("/v1/shards").body).expect("json view");
        assert!(v.apis.len() <= v.apis.len());
        let bytes = Response::text(200, "hi").to_bytes();
        assert!(bytes.starts_with(b"HTTP/1.1 200 OK\r\n"));
        assert!(bytes.ends_with(b"Content-Length: 2\r\nConnection: close\r\n\r\nhi"));
    }
}
