//! Layer errors to Kafka error codes: the only place where a storage or routing failure
//! becomes a wire error code.

use kafka_protocol::error::ResponseError;

use crate::shard::StorageError;

/// The Kafka error a storage failure is reported as, for the partition it concerns.
#[must_use]
pub fn storage_error_code(err: &StorageError) -> ResponseError {
    match err {
        StorageError::CorruptMessage { .. } => ResponseError::CorruptMessage,
        StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
    }
}

/// Error code value of an optional error (0 = none).
#[must_use]
pub fn code(err: Option<ResponseError>) -> i16 {
    err.map_or(0, |e| e.code())
}
