//! `shardlog top --admin host:port`: a live view of per-shard load (busy %, requests/s,
//! bytes/s, partitions, connections) and per-API latency percentiles, refreshed every
//! second, plus each client's byte rates and throttling, read from the broker's admin
//! endpoint (`GET /v1/shards`).
//!
//! Runs on the main thread of the `top` process (blocking std sockets, no executor).
//! On a terminal each frame redraws the screen; otherwise (pipes, SSH without a TTY,
//! tests) frames are printed one after another, separated by a blank line.

mod clients;
mod render;

use std::io::{IsTerminal, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};

pub use clients::{section as clients_section, ClientRates};
pub use render::{frame, rates, ShardRates};

use crate::cli::{units, AdminArgs};
use crate::metrics::view::View;

/// Largest admin response `top` accepts.
const RESPONSE_BYTES_MAX: u64 = 16 * 1024 * 1024;

/// Flags of `shardlog top`.
#[derive(clap::Args, Debug, Clone)]
pub struct TopArgs {
    /// The broker's admin endpoint (`--admin`, its --admin-listen; not the Kafka port).
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Time between refreshes, ms (`2s` works).
    #[arg(long, default_value = "1000", value_name = "MS", value_parser = units::millis::<u64>)]
    pub interval_ms: u64,
    /// Frames to show before exiting (0: until interrupted).
    #[arg(long, default_value_t = 0)]
    pub iterations: u64,
    /// Print frames one after another even on a terminal.
    #[arg(long)]
    pub plain: bool,
}

/// `shardlog top`: polls and renders until `iterations` frames were shown.
pub fn run(args: &TopArgs) -> anyhow::Result<()> {
    let tty = std::io::stdout().is_terminal() && !args.plain;
    let interval = Duration::from_millis(args.interval_ms.max(100));
    let mut before: Option<View> = None;
    let mut shown = 0u64;
    loop {
        let now = fetch_view(args.admin.admin())?;
        let text = frame(args.admin.admin(), before.as_ref(), &now);
        let mut out = std::io::stdout().lock();
        if tty {
            write!(out, "\x1b[H\x1b[2J{text}")?;
        } else {
            writeln!(out, "{text}")?;
        }
        out.flush()?;
        shown += 1;
        if args.iterations != 0 && shown >= args.iterations {
            return Ok(());
        }
        before = Some(now);
        std::thread::sleep(interval);
    }
}

/// GETs `/v1/shards` from `admin` and decodes it.
pub fn fetch_view(admin: &str) -> anyhow::Result<View> {
    let body = http_get(admin, "/v1/shards")?;
    serde_json::from_str(&body).map_err(|e| anyhow!("{admin} sent an unexpected view: {e}"))
}

/// A minimal blocking HTTP/1.1 GET (the admin endpoint closes after each response).
pub fn http_get(admin: &str, path: &str) -> anyhow::Result<String> {
    let addr = admin
        .to_socket_addrs()
        .with_context(|| format!("bad admin address {admin:?}"))?
        .next()
        .ok_or_else(|| anyhow!("admin address {admin:?} resolves to nothing"))?;
    let timeout = Duration::from_secs(5);
    let mut stream = TcpStream::connect_timeout(&addr, timeout).with_context(|| {
        format!("cannot reach the admin endpoint at {admin} (is --admin-listen set?)")
    })?;
    stream.set_read_timeout(Some(timeout))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n")?;
    let mut raw = Vec::new();
    stream.take(RESPONSE_BYTES_MAX).read_to_end(&mut raw)?;
    let text = String::from_utf8(raw).map_err(|_| anyhow!("{admin} sent a non-UTF-8 response"))?;
    let (head, body) =
        text.split_once("\r\n\r\n").ok_or_else(|| anyhow!("{admin} sent no HTTP head"))?;
    let status = head.split(' ').nth(1).unwrap_or("");
    if status != "200" {
        bail!("{admin}{path} answered {}: {}", head.lines().next().unwrap_or(""), body.trim());
    }
    Ok(body.to_owned())
}
