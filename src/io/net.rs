//! TCP and TLS for the broker's own Kafka clients (follower fetchers, the transaction
//! coordinator's markers, the load generator): the runtime's stream type, a bounded connect
//! with TCP_NODELAY, and the client side of a TLS handshake (rustls through
//! `futures-rustls`), so that `protocol::client` and the layers above it name no runtime.
//!
//! Runs on the shard that opens the connection; a stream, and the TLS session inside it,
//! never leaves it: the handshake and every record's encryption run in that shard's event
//! loop. The `rustls::ClientConfig` is built once at start-up and shared read-only.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_lite::io::{AsyncRead, AsyncWrite};

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

/// A client connection: plain TCP, or TLS over it.
pub enum Stream {
    Plain(TcpStream),
    /// Boxed: a TLS session is a few KiB, a plain stream a few words.
    Tls(Box<futures_rustls::client::TlsStream<TcpStream>>),
}

/// The server name a TLS client checks the broker's certificate against: `host` as given
/// (an IP address is matched against the certificate's IP SANs, a name against its DNS ones).
pub fn server_name(host: &str) -> std::io::Result<rustls::pki_types::ServerName<'static>> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    rustls::pki_types::ServerName::try_from(bare.to_string()).map_err(|e| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("server name {host}: {e}"))
    })
}

/// Runs the client side of a TLS handshake over `tcp` within `timeout`; `host` is what the
/// certificate is checked against. A refused handshake (an untrusted certificate, a name
/// that does not match, a protocol or cipher suite in common with none) is an error whose
/// text names rustls' reason.
pub async fn tls_handshake(
    tcp: TcpStream,
    host: &str,
    config: Arc<rustls::ClientConfig>,
    timeout: Duration,
) -> std::io::Result<Stream> {
    let name = server_name(host)?;
    let connect = futures_rustls::TlsConnector::from(config).connect(name, tcp);
    futures_lite::pin!(connect);
    let timer = glommio::timer::sleep(timeout);
    futures_lite::pin!(timer);
    match futures::future::select(connect, timer).await {
        futures::future::Either::Left((Ok(tls), _)) => Ok(Stream::Tls(Box::new(tls))),
        futures::future::Either::Left((Err(e), _)) => {
            Err(std::io::Error::new(e.kind(), format!("TLS handshake: {e}")))
        }
        futures::future::Either::Right(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("TLS handshake not done within {timeout:?}"),
        )),
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_close(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_close(cx),
        }
    }
}
