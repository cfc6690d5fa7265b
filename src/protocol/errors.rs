//! Layer errors to Kafka error codes: the only place where a storage or routing failure
//! becomes a wire error code.

use kafka_protocol::error::ResponseError;

use crate::storage::StorageError;

/// The Kafka error a storage failure is reported as, for the partition it concerns.
#[must_use]
pub fn storage_error_code(err: &StorageError) -> ResponseError {
    match err {
        // A log closing under a request (topic deleted, shutdown): the client refreshes
        // metadata and retries, as after a leader move.
        StorageError::Closed { .. } => ResponseError::NotLeaderOrFollower,
        other => ResponseError::try_from_code(other.kafka_code())
            .unwrap_or(ResponseError::UnknownServerError),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Offset;

    #[test]
    fn storage_errors_map_to_kafka_codes() {
        let corrupt = StorageError::CorruptMessage { reason: "crc".into() };
        assert_eq!(storage_error_code(&corrupt), ResponseError::CorruptMessage);
        let range = StorageError::OffsetOutOfRange {
            requested: Offset(9),
            log_start: Offset(0),
            log_end: Offset(3),
        };
        assert_eq!(storage_error_code(&range), ResponseError::OffsetOutOfRange);
        let closed = StorageError::Closed { path: "x".into() };
        assert_eq!(storage_error_code(&closed), ResponseError::NotLeaderOrFollower);
        let too_large = StorageError::MessageTooLarge { size_bytes: 2, max_bytes: 1 };
        assert_eq!(storage_error_code(&too_large), ResponseError::MessageTooLarge);
    }
}
