//! `shardlog shards list|move`: which shard of a broker owns each partition, and moving one
//! to another shard online (`server::shard_move`). Talks to the broker's admin endpoint
//! (`--admin`, its `--admin-listen`): a shard move is this broker's own decision, not
//! cluster metadata, so it is not a Kafka API (no Kafka tool could send it, and a private
//! API key would have to be kept out of every Kafka client's version negotiation).
//!
//! Runs on the main thread of the CLI process (blocking std sockets).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};

use crate::cli::AdminArgs;
use crate::server::shard_move::{parse_topic_partition, PartitionPlacement};

/// How long `shards move` waits for the broker's answer (a move drains in-flight requests
/// for at most 10 s, then closes one log and opens it on the other shard).
const MOVE_TIMEOUT_S: u64 = 60;
/// Largest admin response the CLI accepts.
const RESPONSE_BYTES_MAX: u64 = 16 * 1024 * 1024;

#[derive(clap::Args, Debug, Clone)]
pub struct ShardsArgs {
    #[command(flatten)]
    pub admin: AdminArgs,
    #[command(subcommand)]
    pub command: ShardsCommand,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum ShardsCommand {
    /// Each hosted partition with its owner shard and bytes in/out since it opened there.
    List,
    /// Move a partition to another shard of the broker, online.
    Move {
        /// The partition, as TOPIC-PARTITION (e.g. orders-3).
        partition: String,
        /// The shard to move it to.
        #[arg(long = "to-shard", value_name = "N")]
        to_shard: u32,
    },
}

/// Runs `shardlog shards ...`.
pub fn run(args: &ShardsArgs) -> anyhow::Result<()> {
    let admin = args.admin.admin();
    match &args.command {
        ShardsCommand::List => {
            let body = request(admin, "GET", "/v1/shards/partitions", 5)?;
            let list: Vec<PartitionPlacement> = serde_json::from_str(&body)
                .map_err(|e| anyhow!("{admin} sent an unexpected list: {e}"))?;
            println!(
                "{:<40} {:>9} {:>5} {:>6} {:>14} {:>14}",
                "TOPIC", "PARTITION", "SHARD", "LEADER", "BYTES IN", "BYTES OUT"
            );
            for p in list {
                println!(
                    "{:<40} {:>9} {:>5} {:>6} {:>14} {:>14}",
                    p.topic, p.partition, p.shard, p.leader, p.bytes_in, p.bytes_out
                );
            }
            Ok(())
        }
        ShardsCommand::Move { partition, to_shard } => {
            let (topic, p) = parse_topic_partition(partition)
                .map_err(|e| crate::cli::UsageError(e.to_string()))?;
            let path = format!("/v1/shards/move?partition={topic}-{p}&to={to_shard}");
            let body = request(admin, "POST", &path, MOVE_TIMEOUT_S)?;
            print!("{body}");
            Ok(())
        }
    }
}

/// One blocking HTTP/1.1 request; a non-200 answer is an error carrying the body.
fn request(admin: &str, method: &str, path: &str, timeout_s: u64) -> anyhow::Result<String> {
    let addr = admin
        .to_socket_addrs()
        .with_context(|| format!("bad admin address {admin:?}"))?
        .next()
        .ok_or_else(|| anyhow!("admin address {admin:?} resolves to nothing"))?;
    let timeout = Duration::from_secs(timeout_s);
    let mut stream =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).with_context(|| {
            format!("cannot reach the admin endpoint at {admin} (is --admin-listen set?)")
        })?;
    stream.set_read_timeout(Some(timeout))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {admin}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    stream.take(RESPONSE_BYTES_MAX).read_to_end(&mut raw)?;
    let text = String::from_utf8(raw).map_err(|_| anyhow!("{admin} sent a non-UTF-8 response"))?;
    let (head, body) =
        text.split_once("\r\n\r\n").ok_or_else(|| anyhow!("{admin} sent no HTTP head"))?;
    let status = head.split(' ').nth(1).unwrap_or("");
    if status != "200" {
        bail!("{}", body.trim());
    }
    Ok(body.to_owned())
}
