//! Request header decoding and response encoding.
//!
//! Invariant: a response frame is `size | response header | body`, with the header
//! version Kafka pairs with the request's API and version (ApiVersions always uses the
//! v0 header, so that a client that sent a version we reject can still parse it).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum DecodeError {
    #[error("frame of {size_bytes} bytes is too short for a request header")]
    ShortHeader { size_bytes: usize },
    #[error("unknown api key {0}")]
    UnknownApiKey(i16),
    #[error("malformed {api:?} v{version} request: {reason}")]
    Malformed { api: ApiKey, version: i16, reason: String },
    #[error("cannot encode {api:?} v{version} response: {reason}")]
    Encode { api: ApiKey, version: i16, reason: String },
}

/// The fixed prefix every request header version shares.
#[derive(Debug, Clone, Copy)]
pub struct ApiPeek {
    pub api_key: i16,
    pub version: i16,
    pub correlation_id: i32,
}

/// Reads api key, version and correlation id without decoding the rest.
pub fn peek_api(frame: &[u8]) -> Result<ApiPeek, DecodeError> {
    if frame.len() < 8 {
        return Err(DecodeError::ShortHeader { size_bytes: frame.len() });
    }
    Ok(ApiPeek {
        api_key: i16::from_be_bytes([frame[0], frame[1]]),
        version: i16::from_be_bytes([frame[2], frame[3]]),
        correlation_id: i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]),
    })
}

/// Decodes header and body of a request whose version the caller already accepted.
pub fn decode_request<R: Decodable>(
    mut frame: Bytes,
    api: ApiKey,
    version: i16,
) -> Result<(RequestHeader, R), DecodeError> {
    let malformed =
        |err: anyhow::Error| DecodeError::Malformed { api, version, reason: format!("{err:#}") };
    let header = RequestHeader::decode(&mut frame, api.request_header_version(version))
        .map_err(malformed)?;
    let body = R::decode(&mut frame, version).map_err(malformed)?;
    Ok((header, body))
}

/// Encodes a whole response frame, size prefix included.
pub fn encode_response<R: Encodable>(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    response: &R,
) -> Result<Bytes, DecodeError> {
    let encode_err =
        |err: anyhow::Error| DecodeError::Encode { api, version, reason: format!("{err:#}") };
    let header_version =
        if api == ApiKey::ApiVersions { 0 } else { api.response_header_version(version) };
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let size = header.compute_size(header_version).map_err(encode_err)?
        + response.compute_size(version).map_err(encode_err)?;
    let mut buf = BytesMut::with_capacity(4 + size);
    buf.put_u32(u32::try_from(size).unwrap_or(u32::MAX));
    header.encode(&mut buf, header_version).map_err(encode_err)?;
    response.encode(&mut buf, version).map_err(encode_err)?;
    Ok(buf.freeze())
}

/// Encodes a request as the dispatcher receives it (header then body, no size prefix): a
/// request rewritten before it is forwarded (e.g. without the topics a principal may not
/// touch).
pub fn encode_request_frame<R: Encodable>(
    header: &kafka_protocol::messages::RequestHeader,
    api: ApiKey,
    version: i16,
    body: &R,
) -> Result<Bytes, DecodeError> {
    let encode_err =
        |err: anyhow::Error| DecodeError::Encode { api, version, reason: format!("{err:#}") };
    let mut buf = BytesMut::new();
    header.encode(&mut buf, api.request_header_version(version)).map_err(encode_err)?;
    body.encode(&mut buf, version).map_err(encode_err)?;
    Ok(buf.freeze())
}

/// Decodes a whole response frame as [`encode_response`] makes it: its correlation id and
/// body.
pub fn decode_response_frame<R: Decodable>(
    mut frame: Bytes,
    api: ApiKey,
    version: i16,
) -> Result<(i32, R), DecodeError> {
    use bytes::Buf;
    let malformed =
        |err: anyhow::Error| DecodeError::Malformed { api, version, reason: format!("{err:#}") };
    if frame.len() < 4 {
        return Err(DecodeError::ShortHeader { size_bytes: frame.len() });
    }
    frame.advance(4);
    let header_version =
        if api == ApiKey::ApiVersions { 0 } else { api.response_header_version(version) };
    let header = ResponseHeader::decode(&mut frame, header_version).map_err(malformed)?;
    let body = R::decode(&mut frame, version).map_err(malformed)?;
    Ok((header.correlation_id, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::ApiVersionsResponse;

    #[test]
    fn peek_rejects_short_frames() {
        assert!(peek_api(&[0, 18, 0, 3]).is_err());
        let peek = peek_api(&[0, 18, 0, 3, 0, 0, 0, 9]).expect("peek");
        assert_eq!((peek.api_key, peek.version, peek.correlation_id), (18, 3, 9));
    }

    #[test]
    fn api_versions_response_uses_v0_header() {
        let frame = encode_response(ApiKey::ApiVersions, 3, 42, &ApiVersionsResponse::default())
            .expect("encode");
        // size, then correlation id directly (no tagged-field byte), then error code 0.
        assert_eq!(&frame[4..8], &42i32.to_be_bytes());
        assert_eq!(&frame[8..10], &0i16.to_be_bytes());
    }
}
