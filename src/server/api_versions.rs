//! ApiVersions: the advertised table, always in a v0 response header; a version we do
//! not support gets error 35 (UNSUPPORTED_VERSION) in v0 format and the connection
//! stays open, so the client can retry with a version from the table.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

use super::dispatch::{respond as encode, Outcome, API_TABLE};
use crate::protocol::decode_request;
use crate::protocol::header::ApiPeek;

/// v4 (Kafka 4.1's maximum) only lets SupportedFeatures carry a MinVersion of 0; this
/// broker lists no features, so v4 answers as v3 does.
pub const VERSIONS: (i16, i16) = (0, 4);

pub fn respond_table(version: i16, correlation_id: i32, error: Option<ResponseError>) -> Outcome {
    let api_keys = API_TABLE
        .iter()
        .map(|r| {
            ApiVersion::default()
                .with_api_key(r.api as i16)
                .with_min_version(r.min)
                .with_max_version(r.max)
        })
        .collect();
    let response = ApiVersionsResponse::default()
        .with_error_code(error.map_or(0, |e| e.code()))
        .with_api_keys(api_keys);
    encode(ApiKey::ApiVersions, version, correlation_id, &response)
}

pub fn respond(frame: Bytes, peek: ApiPeek) -> Outcome {
    if !(VERSIONS.0..=VERSIONS.1).contains(&peek.version) {
        return respond_table(0, peek.correlation_id, Some(ResponseError::UnsupportedVersion));
    }
    match decode_request::<ApiVersionsRequest>(frame, ApiKey::ApiVersions, peek.version) {
        Ok((header, _)) => respond_table(peek.version, header.correlation_id, None),
        // Kafka answers a malformed v3+ body with INVALID_REQUEST rather than closing.
        Err(_) => respond_table(0, peek.correlation_id, Some(ResponseError::InvalidRequest)),
    }
}
