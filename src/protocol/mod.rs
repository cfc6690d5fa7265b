//! Kafka wire-protocol glue around the `kafka-protocol` crate: length-prefixed framing
//! with `socket.request.max.bytes`, request header decoding, response encoding (with the
//! ApiVersions v0-header rule) into [`ResponseFrame`]s (a large Fetch response in pieces
//! that reference its records, `fetch_encode`), the advertised version table built from
//! every handler's declared range, and the mapping of layer errors to Kafka error codes.
//!
//! Pure code with no runtime: runs on whichever shard owns the connection. Kafka error
//! codes are chosen here and nowhere deeper.

pub mod blocking;
pub mod client;
pub mod client_auth;
pub mod errors;
pub mod fetch_encode;
pub mod frame;
pub mod header;
pub mod response;
pub mod versions;

pub use frame::{read_frame, FrameError};
pub use header::{
    decode_request, decode_response_frame, encode_request_frame, encode_response, peek_api,
    DecodeError,
};
pub use response::ResponseFrame;
