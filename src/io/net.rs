//! TCP for the broker's own Kafka clients (follower fetchers, the transaction coordinator's
//! markers, the load generator): the runtime's stream type and a bounded connect with
//! TCP_NODELAY, so that `protocol::client` and the layers above it name no runtime.
//!
//! Runs on the shard that opens the connection; a stream never leaves it.

use std::net::SocketAddr;
use std::time::Duration;

/// A connected TCP stream of the shard's runtime.
pub type TcpStream = glommio::net::TcpStream;

/// Connects to `addr` within `timeout`, with TCP_NODELAY (small requests must not wait for
/// Nagle).
pub async fn connect(addr: SocketAddr, timeout: Duration) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(addr, timeout)
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    stream.set_nodelay(true).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(stream)
}
