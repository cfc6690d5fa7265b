//! The Kafka client the broker and its tools share: request encoding with headers, response
//! frames read off a TCP or TLS stream (`io::net`), the negotiated API versions, and a
//! connection secured as a listener asks ([`Conn::connect_secure`]: TLS, then SASL, see
//! [`super::client_auth`]). Follower fetchers (`replication::link`), the transaction
//! coordinator's markers (`server::txn::broker_client`) and the load generator (`bench`) all
//! speak through it.
//!
//! Lives on the shard (or bench executor) that opened it; a [`Conn`] is never shared across
//! threads. Invariant: Kafka answers a connection's requests in
//! order, so a pipelined connection matches responses to requests with a FIFO and checks
//! each correlation id; a mismatch is a protocol error, never silently skipped.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures_lite::io::{AsyncReadExt, AsyncWriteExt, BufReader, ReadHalf, WriteHalf};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

use super::client_auth::{self, ClientSecurity};
use crate::constants::BENCH_RESPONSE_BYTES_MAX;
use crate::io::net::{self, Stream};

/// Client id sent in every request header.
pub const CLIENT_ID: &str = "shardlog-bench";
/// How long a connect may take before the broker counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Read buffer of a connection: large enough for a fetch response's bulk copies.
const READ_BUFFER_BYTES: usize = 256 * 1024;

/// Errors of the client layer (framing, transport, codec).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    // `err` (not `source`): the cause is in the one-line message already, and `{:#}`
    // printing must not repeat it.
    #[error("cannot connect to broker {addr}: {err}")]
    Connect { addr: String, err: std::io::Error },
    #[error("connection to {addr} failed: {err}")]
    Io { addr: String, err: std::io::Error },
    #[error("protocol error from {addr}: {msg}")]
    Protocol { addr: String, msg: String },
    #[error("broker {addr} does not support {api:?} in versions {ours_min}..={ours_max}")]
    Unsupported { addr: String, api: ApiKey, ours_min: i16, ours_max: i16 },
    /// The broker refused our TLS handshake or SASL credentials (or we refused its
    /// certificate): not retried sooner than any other failure, but logged as what it is.
    #[error("authentication with broker {addr} failed: {msg}")]
    Authentication { addr: String, msg: String },
}

/// Versions picked for each API this client uses: the highest both sides implement.
#[derive(Debug, Clone, Copy)]
pub struct Versions {
    pub produce: i16,
    pub fetch: i16,
    pub metadata: i16,
    pub list_offsets: i16,
    pub create_topics: i16,
}

/// Our supported range per API: no topic-id versions (Produce/Fetch >= 13), so any broker
/// that only knows topic names works.
const OUR_RANGES: [(ApiKey, i16, i16); 5] = [
    (ApiKey::Produce, 3, 12),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::Metadata, 1, 12),
    (ApiKey::ListOffsets, 1, 8),
    (ApiKey::CreateTopics, 2, 7),
];

impl Versions {
    /// Intersects our ranges with the broker's ApiVersions answer.
    pub fn negotiate(resp: &ApiVersionsResponse, addr: &str) -> Result<Versions, ClientError> {
        let mut picked = [0i16; 5];
        for (i, (api, min, max)) in OUR_RANGES.iter().enumerate() {
            picked[i] = pick_version(resp, *api, *min, *max, addr)?;
        }
        Ok(Versions {
            produce: picked[0],
            fetch: picked[1],
            metadata: picked[2],
            list_offsets: picked[3],
            create_topics: picked[4],
        })
    }
}

/// The highest version of `api` in both our range `min..=max` and the broker's.
pub fn pick_version(
    resp: &ApiVersionsResponse,
    api: ApiKey,
    min: i16,
    max: i16,
    addr: &str,
) -> Result<i16, ClientError> {
    let theirs = resp.api_keys.iter().find(|k| k.api_key == api as i16);
    theirs
        .map(|k| k.max_version.min(max))
        .filter(|v| theirs.is_some_and(|k| *v >= k.min_version.max(min)))
        .ok_or(ClientError::Unsupported {
            addr: addr.to_string(),
            api,
            ours_min: min,
            ours_max: max,
        })
}

/// Encodes one request frame (length prefix, header, body) into `buf`.
pub fn encode_request<R: Request>(
    buf: &mut BytesMut,
    req: &R,
    version: i16,
    correlation_id: i32,
) -> Result<(), ClientError> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
    let start = buf.len();
    buf.put_u32(0);
    let codec = |e: anyhow::Error| ClientError::Protocol {
        addr: String::new(),
        msg: format!("encode {:?} v{version}: {e}", R::KEY),
    };
    header.encode(buf, R::header_version(version)).map_err(codec)?;
    req.encode(buf, version).map_err(codec)?;
    let len = u32::try_from(buf.len() - start - 4).map_err(|_| ClientError::Protocol {
        addr: String::new(),
        msg: "request frame over 4 GiB".into(),
    })?;
    buf[start..start + 4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// Decodes a response body (after the length prefix), checking the correlation id.
pub fn decode_response<R: Request>(
    mut frame: Bytes,
    version: i16,
    correlation_id: i32,
    addr: &str,
) -> Result<R::Response, ClientError> {
    let proto = |msg: String| ClientError::Protocol { addr: addr.to_string(), msg };
    // ApiVersions answers always carry the v0 response header, whatever the version.
    let header_version =
        if R::KEY == ApiKey::ApiVersions as i16 { 0 } else { R::Response::header_version(version) };
    let header = ResponseHeader::decode(&mut frame, header_version)
        .map_err(|e| proto(format!("response header: {e}")))?;
    if header.correlation_id != correlation_id {
        return Err(proto(format!(
            "correlation id {} where {correlation_id} was expected",
            header.correlation_id
        )));
    }
    R::Response::decode(&mut frame, version)
        .map_err(|e| proto(format!("decode {:?} v{version} response: {e}", R::KEY)))
}

/// The sending half of a connection.
pub struct ConnWriter {
    inner: WriteHalf<Stream>,
    pub addr: String,
}

/// The receiving half of a connection.
pub struct ConnReader {
    inner: BufReader<ReadHalf<Stream>>,
    pub addr: String,
}

impl ConnWriter {
    pub async fn send(&mut self, frame: &[u8]) -> Result<(), ClientError> {
        let io = |source| ClientError::Io { addr: self.addr.clone(), err: source };
        self.inner.write_all(frame).await.map_err(io)?;
        // TLS may hold the last record until flushed; plain TCP's flush does nothing.
        let io = |source| ClientError::Io { addr: self.addr.clone(), err: source };
        self.inner.flush().await.map_err(io)
    }
}

impl ConnReader {
    /// Reads one response frame body (without its length prefix).
    pub async fn recv(&mut self) -> Result<Bytes, ClientError> {
        let io = |source| ClientError::Io { addr: self.addr.clone(), err: source };
        let mut len = [0u8; 4];
        self.inner.read_exact(&mut len).await.map_err(io)?;
        let len = u32::from_be_bytes(len) as usize;
        if len > BENCH_RESPONSE_BYTES_MAX {
            return Err(ClientError::Protocol {
                addr: self.addr.clone(),
                msg: format!("response frame of {len} bytes exceeds the limit"),
            });
        }
        let mut body = BytesMut::zeroed(len);
        let io = |source| ClientError::Io { addr: self.addr.clone(), err: source };
        self.inner.read_exact(&mut body).await.map_err(io)?;
        Ok(body.freeze())
    }
}

/// A request/response connection for control traffic (metadata, topic creation,
/// offsets); the data path splits it into [`ConnWriter`] and [`ConnReader`].
pub struct Conn {
    pub writer: ConnWriter,
    pub reader: ConnReader,
    next_correlation_id: i32,
    buf: BytesMut,
}

impl Conn {
    /// Connects with TCP_NODELAY (small produce requests must not wait for Nagle).
    pub async fn connect(addr: &str) -> Result<Conn, ClientError> {
        let connect_err = |source| ClientError::Connect { addr: addr.to_string(), err: source };
        let sock: SocketAddr = resolve(addr).map_err(connect_err)?;
        let stream = net::connect(sock, CONNECT_TIMEOUT).await.map_err(connect_err)?;
        Ok(Conn::over(Stream::Plain(stream), addr))
    }

    /// Connects as `security` says: TCP, then a TLS handshake (checking the broker's
    /// certificate against `addr`'s host), then a SASL exchange (SaslHandshake v1,
    /// SaslAuthenticate v2) before the connection is handed out. A refused handshake or
    /// credential is [`ClientError::Authentication`] naming the reason.
    pub async fn connect_secure(
        addr: &str,
        security: &ClientSecurity,
    ) -> Result<Conn, ClientError> {
        let connect_err = |source| ClientError::Connect { addr: addr.to_string(), err: source };
        let sock: SocketAddr = resolve(addr).map_err(connect_err)?;
        let tcp = net::connect(sock, CONNECT_TIMEOUT).await.map_err(connect_err)?;
        let stream = match &security.tls {
            None => Stream::Plain(tcp),
            Some(tls) => {
                let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
                net::tls_handshake(tcp, host, tls.clone(), CONNECT_TIMEOUT).await.map_err(|e| {
                    ClientError::Authentication { addr: addr.to_string(), msg: e.to_string() }
                })?
            }
        };
        let mut conn = Conn::over(stream, addr);
        if let Some(sasl) = &security.sasl {
            client_auth::authenticate(&mut conn, sasl).await?;
        }
        Ok(conn)
    }

    fn over(stream: Stream, addr: &str) -> Conn {
        let (r, w) = futures_lite::io::split(stream);
        Conn {
            writer: ConnWriter { inner: w, addr: addr.to_string() },
            reader: ConnReader {
                inner: BufReader::with_capacity(READ_BUFFER_BYTES, r),
                addr: addr.to_string(),
            },
            next_correlation_id: 1,
            buf: BytesMut::with_capacity(4096),
        }
    }

    pub fn addr(&self) -> &str {
        &self.writer.addr
    }

    /// Takes the next correlation id (for pipelined senders that bypass [`Conn::call`]).
    pub fn take_correlation_id(&mut self) -> i32 {
        let id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        id
    }

    /// Sends one request and waits for its response.
    pub async fn call<R: Request>(
        &mut self,
        req: &R,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        let id = self.take_correlation_id();
        self.buf.clear();
        encode_request(&mut self.buf, req, version, id).map_err(|e| self.with_addr(e))?;
        let frame = self.buf.split().freeze();
        self.writer.send(&frame).await?;
        let body = self.reader.recv().await?;
        decode_response::<R>(body, version, id, self.addr())
    }

    /// Asks for the broker's API versions and intersects them with ours.
    pub async fn negotiate(&mut self) -> Result<Versions, ClientError> {
        let resp = self.api_versions().await?;
        Versions::negotiate(&resp, self.addr())
    }

    /// The broker's ApiVersions answer.
    pub async fn api_versions(&mut self) -> Result<ApiVersionsResponse, ClientError> {
        // v3 is flexible and every Kafka >= 2.4 and Shardlog answer it; a broker that
        // does not still answers in v0 format with its ranges (error 35).
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str(CLIENT_ID))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let r = self.call(&req, 3).await?;
        if r.error_code != 0 {
            return Err(ClientError::Protocol {
                addr: self.addr().to_string(),
                msg: format!("ApiVersions error code {}", r.error_code),
            });
        }
        Ok(r)
    }

    fn with_addr(&self, e: ClientError) -> ClientError {
        match e {
            ClientError::Protocol { msg, .. } => {
                ClientError::Protocol { addr: self.addr().to_string(), msg }
            }
            other => other,
        }
    }
}

fn resolve(addr: &str) -> std::io::Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    addr.to_socket_addrs()?.next().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, "address resolves to nothing")
    })
}

/// Reads a big-endian i32 at `pos` of a byte slice, if present.
pub fn peek_i32(buf: &[u8], pos: usize) -> Option<i32> {
    buf.get(pos..pos + 4).map(|mut b| b.get_i32())
}
