//! Kafka's log-validator rules for a produced v2 batch, then offset assignment and epoch
//! (and LogAppendTime) stamping.
//!
//! Pure functions; run on the partition's owner shard inside `append`. A batch that fails any
//! check is rejected whole and nothing is written.

use bytes::{Bytes, BytesMut};

use super::batch::{self, BatchHeader};
use super::error::StorageError;
use super::records::for_each_record;
use super::{LogConfig, TimestampType};

/// A batch that passed validation.
#[derive(Clone, Copy, Debug)]
pub struct Validated {
    pub header: BatchHeader,
    /// Largest record timestamp (as stored: LogAppendTime replaces it) and the offset delta of
    /// the first record carrying it.
    pub max_timestamp_ms: i64,
    pub max_timestamp_delta: i32,
}

/// Validates one produced batch (exactly one v2 batch) against `config` at `now_ms`.
pub fn validate(batch: &[u8], config: &LogConfig, now_ms: i64) -> Result<Validated, StorageError> {
    let h = BatchHeader::parse(batch)?;
    if h.total_size() != batch.len() {
        return Err(if h.total_size() < batch.len() {
            StorageError::invalid_record("a produce request must hold exactly one batch")
        } else {
            StorageError::corrupt_message(format!(
                "batchLength says {} bytes, got {}",
                h.total_size(),
                batch.len()
            ))
        });
    }
    if batch.len() > config.max_message_bytes as usize {
        return Err(StorageError::MessageTooLarge {
            size_bytes: batch.len(),
            max_bytes: config.max_message_bytes,
        });
    }
    batch::check_crc(&h, batch)?;
    if h.compression().is_none() {
        return Err(StorageError::corrupt_message("unknown compression codec"));
    }
    if h.is_control() {
        return Err(StorageError::invalid_record("clients may not write control batches"));
    }
    if h.records_count <= 0 {
        return Err(StorageError::invalid_record("batch without records"));
    }
    if i64::from(h.records_count) != i64::from(h.last_offset_delta) + 1 {
        return Err(StorageError::invalid_record(format!(
            "recordsCount {} != lastOffsetDelta {} + 1",
            h.records_count, h.last_offset_delta
        )));
    }
    let (max_ts, max_delta) = check_records(&h, batch, config, now_ms)?;
    if config.timestamp_type == TimestampType::LogAppendTime {
        return Ok(Validated { header: h, max_timestamp_ms: now_ms, max_timestamp_delta: 0 });
    }
    Ok(Validated { header: h, max_timestamp_ms: max_ts, max_timestamp_delta: max_delta })
}

fn check_records(
    h: &BatchHeader,
    batch: &[u8],
    config: &LogConfig,
    now_ms: i64,
) -> Result<(i64, i32), StorageError> {
    let mut max = (-1i64, 0i32);
    let check_ts = config.timestamp_type == TimestampType::CreateTime;
    let min_ms = now_ms.saturating_sub(config.timestamp_before_max_ms);
    let max_ms = now_ms.saturating_add(config.timestamp_after_max_ms);
    for_each_record(h, batch, |i, r| {
        if i64::from(r.offset_delta) != i as i64 {
            return Err(StorageError::invalid_record(format!(
                "record {i} has offset delta {} (deltas must be contiguous from 0)",
                r.offset_delta
            )));
        }
        let ts = h.base_timestamp.saturating_add(r.timestamp_delta);
        if ts > max.0 {
            max = (ts, r.offset_delta);
        }
        if check_ts {
            // -1 is Kafka's NO_TIMESTAMP and is never range-checked.
            if ts != -1 && (ts < min_ms || ts > max_ms) {
                return Err(StorageError::InvalidTimestamp { timestamp_ms: ts, min_ms, max_ms });
            }
        }
        if config.compacted && !r.has_key {
            return Err(StorageError::invalid_record(
                "compacted topic cannot accept a record without key",
            ));
        }
        Ok(())
    })?;
    Ok(max)
}

/// Patches the offsets and epoch into a validated batch (and LogAppendTime when configured).
/// Returns the stored bytes; zero-copy unless the bytes are shared, in which case they are
/// copied once.
#[must_use]
pub fn assign(
    batch: Bytes,
    base_offset: i64,
    leader_epoch: i32,
    config: &LogConfig,
    now_ms: i64,
) -> Bytes {
    let mut buf = BytesMut::from(batch);
    batch::patch_offset_and_epoch(&mut buf, base_offset, leader_epoch);
    if config.timestamp_type == TimestampType::LogAppendTime {
        batch::stamp_log_append_time(&mut buf, now_ms);
    }
    buf.freeze()
}
