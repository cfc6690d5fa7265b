//! Typed errors of the storage layer. The server maps them to Kafka error codes at the
//! protocol boundary (see [`StorageError::kafka_code`] for the intended mapping).

use std::path::PathBuf;

use super::producer_state::SequenceError;
use crate::types::Offset;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// Bytes that do not form a valid batch (bad length, CRC, magic): CORRUPT_MESSAGE (2).
    #[error("corrupt message: {reason}")]
    CorruptMessage { reason: String },
    /// A well-formed batch that breaks a record rule: INVALID_RECORD (87).
    #[error("invalid record: {reason}")]
    InvalidRecord { reason: String },
    /// Some records of a well-formed batch break a per-record rule (KIP-467). The whole batch
    /// is refused; the response names each bad record so that clients fail only those with
    /// this error and retry or fail the rest with their own: INVALID_TIMESTAMP (32) if any
    /// record's timestamp is out of range, else INVALID_RECORD (87).
    #[error("{}", rejected_message(*.invalid_timestamp, .errors))]
    RecordsRejected { invalid_timestamp: bool, errors: Vec<RecordError> },
    /// MESSAGE_TOO_LARGE (10).
    #[error("batch of {size_bytes} bytes exceeds max.message.bytes {max_bytes}")]
    MessageTooLarge { size_bytes: usize, max_bytes: u32 },
    /// INVALID_TIMESTAMP (32).
    #[error("timestamp {timestamp_ms} out of range [{min_ms}, {max_ms}]")]
    InvalidTimestamp { timestamp_ms: i64, min_ms: i64, max_ms: i64 },
    /// OFFSET_OUT_OF_RANGE (1).
    #[error("offset {requested} out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange { requested: Offset, log_start: Offset, log_end: Offset },
    /// A write or sync failed earlier; the log refuses appends until reopened:
    /// KAFKA_STORAGE_ERROR (56).
    #[error("log {path:?} is read-only after an I/O failure: {reason}")]
    ReadOnly { path: PathBuf, reason: String },
    /// The disk is full: the log's writer keeps what it has not written and retries until
    /// space returns; appends meanwhile are refused: KAFKA_STORAGE_ERROR (56), retriable.
    #[error("log {path:?} is out of disk space, writes resume when space returns: {reason}")]
    OutOfSpace { path: PathBuf, reason: String },
    /// KAFKA_STORAGE_ERROR (56).
    #[error("I/O error during {op} on {path:?} at {offset}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        offset: u64,
        #[source]
        source: std::io::Error,
    },
    /// On-disk data that fails a check below the recovery point: KAFKA_STORAGE_ERROR (56).
    #[error("corrupt log file {path:?} at byte {position}: {reason}")]
    Corrupt { path: PathBuf, position: u64, reason: String },
    /// An idempotent producer's batch out of sequence or from a fenced epoch:
    /// OUT_OF_ORDER_SEQUENCE_NUMBER (45) or INVALID_PRODUCER_EPOCH (47).
    #[error("{0}")]
    Sequence(#[from] super::producer_state::SequenceError),
    /// The log was closed (or is closing): NOT_LEADER_OR_FOLLOWER-ish at the server's choice.
    #[error("log {path:?} is closed")]
    Closed { path: PathBuf },
    /// A follower append whose batch does not start at the log end (overlap, or a gap in a
    /// non-compacted log): Kafka's `UnexpectedAppendOffsetException`. Never sent to a client
    /// (the fetcher truncates and re-fetches); UNKNOWN_SERVER_ERROR (-1) if it ever is.
    #[error("replicated batch at offset {got}, expected {expected}")]
    ReplicaOffsetMismatch { expected: Offset, got: Offset },
}

impl StorageError {
    /// The Kafka error code this error maps to at the protocol boundary.
    #[must_use]
    pub fn kafka_code(&self) -> i16 {
        match self {
            StorageError::CorruptMessage { .. } => 2,
            StorageError::InvalidRecord { .. } => 87,
            StorageError::RecordsRejected { invalid_timestamp: true, .. } => 32,
            StorageError::RecordsRejected { invalid_timestamp: false, .. } => 87,
            StorageError::MessageTooLarge { .. } => 10,
            StorageError::InvalidTimestamp { .. } => 32,
            StorageError::OffsetOutOfRange { .. } => 1,
            StorageError::Sequence(SequenceError::OutOfOrder { .. }) => 45,
            StorageError::Sequence(SequenceError::InvalidEpoch { .. }) => 47,
            StorageError::Sequence(SequenceError::InvalidTxnState { .. }) => 48,
            StorageError::ReadOnly { .. }
            | StorageError::OutOfSpace { .. }
            | StorageError::Io { .. }
            | StorageError::Corrupt { .. }
            | StorageError::Closed { .. } => 56,
            StorageError::ReplicaOffsetMismatch { .. } => -1,
        }
    }

    /// Whether this is an I/O error meaning the disk (or the quota) is full: worth retrying
    /// once space is freed, unlike other I/O errors.
    #[must_use]
    pub fn is_out_of_space(&self) -> bool {
        // ENOSPC (28) and EDQUOT (122) on Linux.
        const OUT_OF_SPACE_ERRNOS: [i32; 2] = [28, 122];
        match self {
            StorageError::Io { op, source, .. } => {
                source.raw_os_error().is_some_and(|e| OUT_OF_SPACE_ERRNOS.contains(&e))
                    || source.kind() == std::io::ErrorKind::StorageFull
                    // A short write to a regular file: the device ran out of space part way
                    // (the error itself would come with the write of the rest).
                    || (*op == "write" && source.kind() == std::io::ErrorKind::WriteZero)
            }
            _ => false,
        }
    }

    pub(crate) fn corrupt_message(reason: impl Into<String>) -> Self {
        StorageError::CorruptMessage { reason: reason.into() }
    }

    pub(crate) fn invalid_record(reason: impl Into<String>) -> Self {
        StorageError::InvalidRecord { reason: reason.into() }
    }

    pub(crate) fn io(
        op: &'static str,
        path: &std::path::Path,
        offset: u64,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| StorageError::Io { op, path, offset, source }
    }
}

/// One rejected record of a batch: its index in the batch and why (Kafka's `RecordError`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordError {
    pub batch_index: i32,
    pub message: String,
}

/// Kafka's top-level message for a batch with rejected records (`LogValidator`'s
/// `processRecordErrors`), which clients log beside the per-record ones.
fn rejected_message(invalid_timestamp: bool, errors: &[RecordError]) -> String {
    if invalid_timestamp {
        return "One or more records have been rejected due to invalid timestamp".to_string();
    }
    let shown: Vec<String> = errors
        .iter()
        .take(3)
        .map(|e| format!("RecordError(batchIndex={}, message='{}')", e.batch_index, e.message))
        .collect();
    format!(
        "One or more records have been rejected due to {} record errors in total, and only \
         showing the first three errors at most: [{}]",
        errors.len(),
        shown.join(", ")
    )
}
