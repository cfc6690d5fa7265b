//! Kafka wire-protocol glue around the `kafka-protocol` crate: length-prefixed framing
//! with `socket.request.max.bytes`, request header decoding, response encoding (with the
//! ApiVersions v0-header rule), the advertised version table built from every handler's
//! declared range, and the mapping of layer errors to Kafka error codes.
//!
//! Pure code with no runtime: runs on whichever shard owns the connection. Kafka error
//! codes are chosen here and nowhere deeper.

pub mod blocking;
pub mod errors;
pub mod frame;
pub mod header;
pub mod versions;

pub use frame::{read_frame, FrameError};
pub use header::{decode_request, encode_response, peek_api, DecodeError};
