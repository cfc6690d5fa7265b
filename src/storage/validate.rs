//! Kafka's log-validator rules for a produced v2 batch, then offset assignment and epoch
//! (and LogAppendTime) stamping.
//!
//! Pure functions; run on the partition's owner shard inside `append`. A batch that fails any
//! check is rejected whole and nothing is written.

use bytes::{Bytes, BytesMut};

use super::batch::{self, BatchHeader};
use super::error::{RecordError, StorageError};
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
    // Kafka's `LogValidator.validateBatch`: an idempotent batch must carry a sequence.
    if h.producer_id >= 0 && h.base_sequence < 0 {
        return Err(StorageError::invalid_record(format!(
            "invalid sequence number {} in record batch with producerId {}",
            h.base_sequence, h.producer_id
        )));
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

/// The checks of a batch a coordinator built itself (markers, transactional offset
/// commits): one whole v2 batch with a valid CRC. Control batches are allowed here.
pub fn validate_coordinator(batch: &[u8]) -> Result<Validated, StorageError> {
    let h = BatchHeader::parse(batch)?;
    if h.total_size() != batch.len() || h.records_count <= 0 {
        return Err(StorageError::invalid_record("a coordinator batch must be one whole batch"));
    }
    batch::check_crc(&h, batch)?;
    Ok(Validated { header: h, max_timestamp_ms: h.max_timestamp, max_timestamp_delta: 0 })
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
    // Per-record rule breaks are collected, not returned at the first: Kafka names every bad
    // record of the batch (KIP-467), and clients fail exactly those.
    let mut errors = Vec::new();
    let mut invalid_timestamp = false;
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
        let batch_index = r.offset_delta;
        // -1 is Kafka's NO_TIMESTAMP and is never range-checked.
        if check_ts && ts != -1 && (ts < min_ms || ts > max_ms) {
            invalid_timestamp = true;
            errors.push(RecordError {
                batch_index,
                message: format!(
                    "Timestamp {ts} of message with offset {batch_index} is out of range. The \
                     timestamp should be within [{min_ms}, {max_ms}]"
                ),
            });
        } else if config.compacted && !r.has_key {
            errors.push(RecordError {
                batch_index,
                message: "Compacted topic cannot accept message without key.".to_string(),
            });
        }
        Ok(())
    })?;
    if errors.is_empty() {
        Ok(max)
    } else {
        Err(StorageError::RecordsRejected { invalid_timestamp, errors })
    }
}

/// Patches the offsets and epoch into a validated batch (and LogAppendTime when configured).
/// Returns the stored bytes: a copy of exactly the batch (one memcpy; the batch cache keeps
/// them, and must not keep more than it counts).
#[must_use]
pub fn assign(
    batch: Bytes,
    base_offset: i64,
    leader_epoch: i32,
    config: &LogConfig,
    now_ms: i64,
) -> Bytes {
    // Always a copy of exactly the batch: `batch` is a view of the request frame, and when it
    // is the frame's last view `BytesMut::from` would keep the whole frame (every partition's
    // records of the request) alive in the batch cache, which counts only the batch's bytes.
    let mut buf = BytesMut::from(&batch[..]);
    batch::patch_offset_and_epoch(&mut buf, base_offset, leader_epoch);
    if config.timestamp_type == TimestampType::LogAppendTime {
        batch::stamp_log_append_time(&mut buf, now_ms);
    }
    buf.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::batch::{self, Compression, OFFSET_CRC};
    use crate::storage::records::{build_batch, NewRecord};
    use bytes::BufMut;

    const NOW: i64 = 1_700_000_000_000;

    fn recs(n: usize, keyed: bool) -> Vec<NewRecord<'static>> {
        (0..n)
            .map(|i| NewRecord {
                key: keyed.then_some(b"key".as_slice()),
                value: Some(b"value-bytes".as_slice()),
                timestamp_ms: NOW - 10 + i as i64,
                headers: vec![("h", Some(b"v".as_slice()))],
            })
            .collect()
    }

    fn code(r: Result<Validated, StorageError>) -> i16 {
        r.map_or_else(|e| e.kafka_code(), |_| 0)
    }

    #[test]
    fn accepts_every_codec() {
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let b = build_batch(&recs(20, true), codec);
            let v = validate(&b, &LogConfig::default(), NOW).unwrap();
            assert_eq!(v.header.records_count, 20, "{codec:?}");
            assert_eq!(v.max_timestamp_ms, NOW + 9);
            assert_eq!(v.max_timestamp_delta, 19);
        }
    }

    #[test]
    fn accepts_xerial_snappy() {
        let raw = build_batch(&recs(3, true), Compression::None);
        let body = &raw[batch::BATCH_HEADER_BYTES..];
        let block = snap::raw::Encoder::new().compress_vec(body).unwrap();
        let mut payload = vec![0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1];
        payload.put_u32(block.len() as u32);
        payload.extend_from_slice(&block);
        let mut b = BytesMut::from(&raw[..batch::BATCH_HEADER_BYTES]);
        b.extend_from_slice(&payload);
        let len = (b.len() - 12) as i32;
        b[8..12].copy_from_slice(&len.to_be_bytes());
        b[21..23].copy_from_slice(&2i16.to_be_bytes());
        batch::recompute_crc(&mut b);
        validate(&b, &LogConfig::default(), NOW).unwrap();
    }

    #[test]
    fn rejects_like_kafka() {
        let cfg = LogConfig::default();
        let good = build_batch(&recs(3, false), Compression::None);
        // CRC
        let mut bad = BytesMut::from(&good[..]);
        bad[OFFSET_CRC] ^= 1;
        assert_eq!(code(validate(&bad, &cfg, NOW)), 2);
        // truncated / length mismatch
        assert_eq!(code(validate(&good[..good.len() - 1], &cfg, NOW)), 2);
        assert_eq!(code(validate(&good[..30], &cfg, NOW)), 2);
        // two batches in one request
        let mut two = BytesMut::from(&good[..]);
        two.extend_from_slice(&good);
        assert_eq!(code(validate(&two, &cfg, NOW)), 87);
        // magic
        let mut m = BytesMut::from(&good[..]);
        m[16] = 1;
        assert_eq!(code(validate(&m, &cfg, NOW)), 2);
        // too large
        let small = LogConfig { max_message_bytes: 50, ..LogConfig::default() };
        assert_eq!(code(validate(&good, &small, NOW)), 10);
        // recordsCount != lastOffsetDelta + 1
        let mut c = BytesMut::from(&good[..]);
        c[23..27].copy_from_slice(&5i32.to_be_bytes());
        batch::recompute_crc(&mut c);
        assert_eq!(code(validate(&c, &cfg, NOW)), 87);
        // timestamps
        let future = LogConfig { timestamp_after_max_ms: 1, ..LogConfig::default() };
        assert_eq!(code(validate(&good, &future, NOW - 1000)), 32);
        let past = LogConfig { timestamp_before_max_ms: 1, ..LogConfig::default() };
        assert_eq!(code(validate(&good, &past, NOW + 1000)), 32);
        // keys on compacted topics
        let compacted = LogConfig { compacted: true, ..LogConfig::default() };
        assert_eq!(code(validate(&good, &compacted, NOW)), 87);
        let keyed = build_batch(&recs(3, true), Compression::Zstd);
        assert_eq!(code(validate(&keyed, &compacted, NOW)), 0);
        // control batches from clients
        let mut ctl = BytesMut::from(&good[..]);
        ctl[21..23].copy_from_slice(&0x20i16.to_be_bytes());
        batch::recompute_crc(&mut ctl);
        assert_eq!(code(validate(&ctl, &cfg, NOW)), 87);
    }

    #[test]
    fn names_each_rejected_record() {
        let mut mixed = recs(4, true);
        mixed[1].key = None;
        mixed[3].key = None;
        let batch = build_batch(&mixed, Compression::Lz4);
        let compacted = LogConfig { compacted: true, ..LogConfig::default() };
        let Err(StorageError::RecordsRejected { invalid_timestamp, errors }) =
            validate(&batch, &compacted, NOW)
        else {
            panic!("expected per-record errors");
        };
        assert!(!invalid_timestamp);
        let indexes: Vec<i32> = errors.iter().map(|e| e.batch_index).collect();
        assert_eq!(indexes, vec![1, 3]);
        // One record far in the future: INVALID_TIMESTAMP naming only that record.
        let mut late = recs(3, true);
        late[2].timestamp_ms = NOW + 10 * 86_400_000;
        let batch = build_batch(&late, Compression::None);
        let err = validate(&batch, &LogConfig::default(), NOW).expect_err("future timestamp");
        assert_eq!(err.kafka_code(), 32);
        let StorageError::RecordsRejected { errors, .. } = err else { panic!("per-record") };
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].batch_index, 2);
        assert!(errors[0].message.contains("out of range"), "{}", errors[0].message);
    }

    #[test]
    fn rejects_non_contiguous_offset_deltas() {
        // Two one-record batches glued into one body: second record has delta 0 again.
        let r = recs(1, true);
        let one = build_batch(&r, Compression::None);
        let body = &one[batch::BATCH_HEADER_BYTES..];
        let mut b = BytesMut::from(&one[..]);
        b.extend_from_slice(body);
        let len = (b.len() - 12) as i32;
        b[8..12].copy_from_slice(&len.to_be_bytes());
        b[23..27].copy_from_slice(&1i32.to_be_bytes());
        b[57..61].copy_from_slice(&2i32.to_be_bytes());
        batch::recompute_crc(&mut b);
        assert_eq!(code(validate(&b, &LogConfig::default(), NOW)), 87);
    }

    #[test]
    fn log_append_time_recomputes_crc() {
        let cfg =
            LogConfig { timestamp_type: TimestampType::LogAppendTime, ..LogConfig::default() };
        let b = build_batch(&recs(2, true), Compression::Lz4);
        let v = validate(&b, &cfg, NOW).unwrap();
        assert_eq!(v.max_timestamp_ms, NOW);
        let stored = assign(b, 42, 7, &cfg, NOW);
        let h = BatchHeader::parse(&stored).unwrap();
        assert_eq!((h.base_offset, h.partition_leader_epoch, h.max_timestamp), (42, 7, NOW));
        assert!(h.is_log_append_time());
        batch::check_crc(&h, &stored).unwrap();
    }

    #[test]
    fn stored_batch_does_not_keep_the_request_frame() {
        // The batch is the last view of a larger frame: the stored bytes must be their own
        // allocation, or the batch cache would hold the whole frame while counting the batch.
        let b = build_batch(&recs(2, true), Compression::None);
        let mut frame = vec![0u8; 4096];
        frame.extend_from_slice(&b);
        let frame = Bytes::from(frame);
        let range = frame.as_ptr() as usize..frame.as_ptr() as usize + frame.len();
        let view = frame.slice(4096..);
        drop(frame);
        let stored = assign(view, 0, 0, &LogConfig::default(), NOW);
        assert_eq!(stored.len(), b.len());
        assert!(!range.contains(&(stored.as_ptr() as usize)), "stored bytes alias the frame");
    }
}
