//! A blocking Kafka request/response connection for the admin CLIs (`shardlog groups`,
//! `shardlog configs`): connect with a timeout, send one request with its header, read the
//! length-prefixed response, check its correlation id and decode it.
//!
//! Runs in the CLI process only (std sockets, no runtime), never inside the broker, and
//! speaks to any Kafka-compatible broker. Invariants: one request in flight per connection
//! (each call reads its own response before returning), correlation ids increase from 1,
//! every socket operation is bounded by [`CLI_REQUEST_TIMEOUT_MS`], and no response larger
//! than [`CLI_RESPONSE_BYTES_MAX`] is buffered.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::constants::{CLI_REQUEST_TIMEOUT_MS, CLI_RESPONSE_BYTES_MAX};

/// What can go wrong talking to a broker from the CLI.
#[derive(Debug, thiserror::Error)]
pub enum BlockingError {
    #[error("connecting to {addr}: {source}")]
    Connect { addr: String, source: std::io::Error },
    #[error("{addr} resolves to no address")]
    NoAddress { addr: String },
    #[error("{api:?} request to {addr}: {source}")]
    Io { api: ApiKey, addr: String, source: std::io::Error },
    #[error("encoding the {api:?} v{version} request: {reason}")]
    Encode { api: ApiKey, version: i16, reason: String },
    #[error("{api:?} response of {size_bytes} bytes exceeds the {max_bytes}-byte limit")]
    TooLarge { api: ApiKey, size_bytes: usize, max_bytes: usize },
    #[error("{api:?} response carries correlation id {got} instead of {want}")]
    Correlation { api: ApiKey, got: i32, want: i32 },
    #[error("decoding the {api:?} v{version} response: {reason}")]
    Decode { api: ApiKey, version: i16, reason: String },
}

/// One blocking connection to a broker.
pub struct BlockingConn {
    stream: TcpStream,
    addr: String,
    client_id: &'static str,
    next_correlation_id: i32,
}

impl BlockingConn {
    /// Connects to `addr` (`host:port`); `client_id` goes in every request header.
    pub fn open(addr: &str, client_id: &'static str) -> Result<Self, BlockingError> {
        let timeout = Duration::from_millis(CLI_REQUEST_TIMEOUT_MS);
        let connect = |source| BlockingError::Connect { addr: addr.to_string(), source };
        let sock = addr
            .to_socket_addrs()
            .map_err(connect)?
            .next()
            .ok_or_else(|| BlockingError::NoAddress { addr: addr.to_string() })?;
        let stream = TcpStream::connect_timeout(&sock, timeout).map_err(connect)?;
        stream.set_read_timeout(Some(timeout)).map_err(connect)?;
        stream.set_write_timeout(Some(timeout)).map_err(connect)?;
        stream.set_nodelay(true).map_err(connect)?;
        Ok(Self { stream, addr: addr.to_string(), client_id, next_correlation_id: 1 })
    }

    /// The address this connection was opened to.
    #[must_use]
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends `req` as `api` version `version` and returns the decoded response.
    pub fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        req: &Req,
    ) -> Result<Resp, BlockingError> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1).max(1);
        let frame = self.request_frame(api, version, correlation_id, req)?;
        let io = |source| BlockingError::Io { api, addr: self.addr.clone(), source };
        self.stream.write_all(&frame).map_err(io)?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).map_err(io)?;
        // A u32 always fits in usize on the 32/64-bit targets Shardlog builds for.
        let size_bytes = u32::from_be_bytes(size) as usize;
        if size_bytes > CLI_RESPONSE_BYTES_MAX {
            return Err(BlockingError::TooLarge {
                api,
                size_bytes,
                max_bytes: CLI_RESPONSE_BYTES_MAX,
            });
        }
        let mut buf = vec![0u8; size_bytes];
        self.stream.read_exact(&mut buf).map_err(io)?;
        decode_response(api, version, correlation_id, Bytes::from(buf))
    }

    fn request_frame<Req: Encodable>(
        &self,
        api: ApiKey,
        version: i16,
        correlation_id: i32,
        req: &Req,
    ) -> Result<BytesMut, BlockingError> {
        let encode =
            |e: anyhow::Error| BlockingError::Encode { api, version, reason: format!("{e:#}") };
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str(self.client_id)));
        let mut frame = BytesMut::new();
        frame.put_u32(0); // the length, patched below
        header.encode(&mut frame, api.request_header_version(version)).map_err(encode)?;
        req.encode(&mut frame, version).map_err(encode)?;
        let body_bytes = u32::try_from(frame.len() - 4).map_err(|_| BlockingError::Encode {
            api,
            version,
            reason: format!("request of {} bytes", frame.len()),
        })?;
        frame[..4].copy_from_slice(&body_bytes.to_be_bytes());
        Ok(frame)
    }
}

/// Decodes a response frame (without its length prefix), checking the correlation id.
pub fn decode_response<Resp: Decodable>(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    mut buf: Bytes,
) -> Result<Resp, BlockingError> {
    let decode =
        |e: anyhow::Error| BlockingError::Decode { api, version, reason: format!("{e:#}") };
    let header =
        ResponseHeader::decode(&mut buf, api.response_header_version(version)).map_err(decode)?;
    if header.correlation_id != correlation_id {
        return Err(BlockingError::Correlation {
            api,
            got: header.correlation_id,
            want: correlation_id,
        });
    }
    Resp::decode(&mut buf, version).map_err(decode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{ListGroupsRequest, ListGroupsResponse};
    use std::net::TcpListener;

    /// A one-shot fake broker thread is a real socket peer, not a mock of the client: it
    /// checks the request frame the client wrote and answers with `reply(correlation_id)`.
    fn serve_once(reply: impl FnOnce(i32) -> Vec<u8> + Send + 'static) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            let mut size = [0u8; 4];
            s.read_exact(&mut size).expect("size");
            let mut body = vec![0u8; u32::from_be_bytes(size) as usize];
            s.read_exact(&mut body).expect("body");
            let mut buf = Bytes::from(body);
            let header =
                RequestHeader::decode(&mut buf, ApiKey::ListGroups.request_header_version(4))
                    .expect("header");
            assert_eq!(header.client_id.as_deref(), Some("test-cli"));
            let _ = s.write_all(&reply(header.correlation_id));
        });
        addr
    }

    fn frame(correlation_id: i32, body: &ListGroupsResponse) -> Vec<u8> {
        let mut buf = BytesMut::new();
        let header = ResponseHeader::default().with_correlation_id(correlation_id);
        header.encode(&mut buf, ApiKey::ListGroups.response_header_version(4)).expect("header");
        body.encode(&mut buf, 4).expect("body");
        let mut out = (buf.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(&buf);
        out
    }

    #[test]
    fn call_round_trips_and_checks_the_correlation_id() {
        let addr = serve_once(|id| frame(id, &ListGroupsResponse::default().with_error_code(15)));
        let mut conn = BlockingConn::open(&addr, "test-cli").expect("open");
        let resp: ListGroupsResponse =
            conn.call(ApiKey::ListGroups, 4, &ListGroupsRequest::default()).expect("call");
        assert_eq!(resp.error_code, 15);

        let addr = serve_once(|id| frame(id + 7, &ListGroupsResponse::default()));
        let mut conn = BlockingConn::open(&addr, "test-cli").expect("open");
        let err = conn
            .call::<_, ListGroupsResponse>(ApiKey::ListGroups, 4, &ListGroupsRequest::default())
            .expect_err("mismatch");
        assert!(matches!(err, BlockingError::Correlation { .. }), "{err}");
    }

    #[test]
    fn oversized_responses_are_refused_before_buffering() {
        let addr = serve_once(|_| (u32::MAX).to_be_bytes().to_vec());
        let mut conn = BlockingConn::open(&addr, "test-cli").expect("open");
        let err = conn
            .call::<_, ListGroupsResponse>(ApiKey::ListGroups, 4, &ListGroupsRequest::default())
            .expect_err("too large");
        assert!(matches!(err, BlockingError::TooLarge { .. }), "{err}");
    }

    #[test]
    fn connect_errors_name_the_address() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        drop(listener);
        let err = BlockingConn::open(&addr, "test-cli").err().expect("refused");
        assert!(err.to_string().contains(&addr), "{err}");
    }
}
