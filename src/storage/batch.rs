//! Kafka RecordBatch v2 header parsing, CRC checks and in-place patching, without decoding
//! records (see `docs/format.md` for the byte layout).
//!
//! Pure functions on byte slices; used on every shard. Patching baseOffset and
//! partitionLeaderEpoch keeps the CRC valid (it covers `attributes` onward); changing
//! attributes or maxTimestamp requires [`recompute_crc`].

use bytes::{Buf, BytesMut};

use super::error::StorageError;

/// Bytes before the records: baseOffset .. recordsCount.
pub const BATCH_HEADER_BYTES: usize = 61;
/// baseOffset (8) + batchLength (4): the part of a batch not counted by batchLength.
pub const BATCH_LOG_OVERHEAD_BYTES: usize = 12;
pub const OFFSET_BASE_OFFSET: usize = 0;
pub const OFFSET_BATCH_LENGTH: usize = 8;
pub const OFFSET_LEADER_EPOCH: usize = 12;
pub const OFFSET_MAGIC: usize = 16;
pub const OFFSET_CRC: usize = 17;
pub const OFFSET_ATTRIBUTES: usize = 21;
pub const OFFSET_BASE_TIMESTAMP: usize = 27;
pub const OFFSET_MAX_TIMESTAMP: usize = 35;
pub const OFFSET_PRODUCER_ID: usize = 43;
pub const OFFSET_PRODUCER_EPOCH: usize = 51;
pub const OFFSET_BASE_SEQUENCE: usize = 53;
pub const MAGIC_V2: i8 = 2;
pub const ATTR_COMPRESSION_MASK: i16 = 0x07;
pub const ATTR_TIMESTAMP_TYPE: i16 = 0x08;
pub const ATTR_TRANSACTIONAL: i16 = 0x10;
pub const ATTR_CONTROL: i16 = 0x20;
/// KIP-534: the batch's baseTimestamp holds the delete horizon set by the log cleaner; record
/// timestamp deltas are relative to it, so record timestamps read back unchanged.
pub const ATTR_DELETE_HORIZON: i16 = 0x40;

/// Compression codec of a batch (attributes bits 0..2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    /// The codec for an attributes value; `None` for the reserved values 5..7.
    #[must_use]
    pub fn from_attributes(attributes: i16) -> Option<Compression> {
        match attributes & ATTR_COMPRESSION_MASK {
            0 => Some(Compression::None),
            1 => Some(Compression::Gzip),
            2 => Some(Compression::Snappy),
            3 => Some(Compression::Lz4),
            4 => Some(Compression::Zstd),
            _ => None,
        }
    }

    #[must_use]
    pub fn attribute_bits(self) -> i16 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }
}

/// The fixed 61-byte header of a v2 record batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Parses the header at the start of `buf`. Checks only what is needed to trust the
    /// lengths: at least 61 bytes, magic 2 and a batchLength that covers the header.
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, StorageError> {
        if buf.len() < BATCH_HEADER_BYTES {
            return Err(StorageError::corrupt_message(format!(
                "batch of {} bytes is shorter than the {BATCH_HEADER_BYTES}-byte header",
                buf.len()
            )));
        }
        let mut b = &buf[..BATCH_HEADER_BYTES];
        let h = BatchHeader {
            base_offset: b.get_i64(),
            batch_length: b.get_i32(),
            partition_leader_epoch: b.get_i32(),
            magic: b.get_i8(),
            crc: b.get_u32(),
            attributes: b.get_i16(),
            last_offset_delta: b.get_i32(),
            base_timestamp: b.get_i64(),
            max_timestamp: b.get_i64(),
            producer_id: b.get_i64(),
            producer_epoch: b.get_i16(),
            base_sequence: b.get_i32(),
            records_count: b.get_i32(),
        };
        if h.magic != MAGIC_V2 {
            return Err(StorageError::corrupt_message(format!(
                "unsupported magic {} (only v2 record batches)",
                h.magic
            )));
        }
        let min_len = (BATCH_HEADER_BYTES - BATCH_LOG_OVERHEAD_BYTES) as i32;
        if h.batch_length < min_len {
            return Err(StorageError::corrupt_message(format!(
                "batchLength {} is below the minimum {min_len}",
                h.batch_length
            )));
        }
        Ok(h)
    }

    /// Whole batch size in bytes, including baseOffset and batchLength.
    #[must_use]
    pub fn total_size(&self) -> usize {
        self.batch_length as usize + BATCH_LOG_OVERHEAD_BYTES
    }

    #[must_use]
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    #[must_use]
    pub fn compression(&self) -> Option<Compression> {
        Compression::from_attributes(self.attributes)
    }

    #[must_use]
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & ATTR_TIMESTAMP_TYPE != 0
    }

    /// The KIP-534 delete horizon, if the cleaner has set one.
    #[must_use]
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        (self.attributes & ATTR_DELETE_HORIZON != 0).then_some(self.base_timestamp)
    }

    #[must_use]
    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }

    #[must_use]
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }
}

/// CRC-32C of a whole batch's checksummed part (attributes to the end).
#[must_use]
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[OFFSET_ATTRIBUTES..])
}

/// Checks the stored CRC against the content.
pub fn check_crc(header: &BatchHeader, batch: &[u8]) -> Result<(), StorageError> {
    let actual = compute_crc(batch);
    if actual != header.crc {
        return Err(StorageError::corrupt_message(format!(
            "CRC mismatch: stored {:#010x}, computed {actual:#010x}",
            header.crc
        )));
    }
    Ok(())
}

/// Patches baseOffset and partitionLeaderEpoch (outside the CRC).
pub fn patch_offset_and_epoch(batch: &mut [u8], base_offset: i64, leader_epoch: i32) {
    batch[OFFSET_BASE_OFFSET..OFFSET_BASE_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
    batch[OFFSET_LEADER_EPOCH..OFFSET_LEADER_EPOCH + 4]
        .copy_from_slice(&leader_epoch.to_be_bytes());
}

/// Stamps LogAppendTime: sets the timestamp-type attribute and maxTimestamp, then recomputes
/// the CRC, since both fields are inside it.
pub fn stamp_log_append_time(batch: &mut BytesMut, now_ms: i64) {
    let attrs = i16::from_be_bytes([batch[OFFSET_ATTRIBUTES], batch[OFFSET_ATTRIBUTES + 1]]);
    let attrs = attrs | ATTR_TIMESTAMP_TYPE;
    batch[OFFSET_ATTRIBUTES..OFFSET_ATTRIBUTES + 2].copy_from_slice(&attrs.to_be_bytes());
    batch[OFFSET_MAX_TIMESTAMP..OFFSET_MAX_TIMESTAMP + 8].copy_from_slice(&now_ms.to_be_bytes());
    recompute_crc(batch);
}

/// Makes `batch` one a transactional producer sent: the transactional bit, the producer id,
/// epoch and base sequence, and a new CRC. For tests and tools that build a batch with
/// `build_batch` and need it from a transaction; the broker itself never rewrites these.
pub fn set_transactional_producer(
    batch: &mut [u8],
    producer_id: i64,
    epoch: i16,
    base_sequence: i32,
) {
    let attrs = i16::from_be_bytes([batch[OFFSET_ATTRIBUTES], batch[OFFSET_ATTRIBUTES + 1]]);
    let attrs = attrs | ATTR_TRANSACTIONAL;
    batch[OFFSET_ATTRIBUTES..OFFSET_ATTRIBUTES + 2].copy_from_slice(&attrs.to_be_bytes());
    batch[OFFSET_PRODUCER_ID..OFFSET_PRODUCER_ID + 8].copy_from_slice(&producer_id.to_be_bytes());
    batch[OFFSET_PRODUCER_EPOCH..OFFSET_PRODUCER_EPOCH + 2].copy_from_slice(&epoch.to_be_bytes());
    batch[OFFSET_BASE_SEQUENCE..OFFSET_BASE_SEQUENCE + 4]
        .copy_from_slice(&base_sequence.to_be_bytes());
    recompute_crc(batch);
}

/// Rewrites the CRC field from the content.
pub fn recompute_crc(batch: &mut [u8]) {
    let crc = compute_crc(batch);
    batch[OFFSET_CRC..OFFSET_CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Outcome of looking for a batch at the start of a byte range read from disk.
#[derive(Debug, PartialEq, Eq)]
pub enum ScanStep {
    /// A complete batch with a valid header and CRC of this header.
    Batch(BatchHeader),
    /// Fewer bytes than the header or the batch needs.
    Incomplete,
    /// A header or CRC that cannot be a batch (torn or zero-filled tail, or corruption).
    Invalid(String),
}

/// Checks the batch at the start of `buf` as recovery does: length, magic and CRC.
#[must_use]
pub fn scan_batch(buf: &[u8]) -> ScanStep {
    match scan_batch_framing(buf) {
        ScanStep::Batch(h) => match check_crc(&h, &buf[..h.total_size()]) {
            Ok(()) => ScanStep::Batch(h),
            Err(e) => ScanStep::Invalid(e.to_string()),
        },
        other => other,
    }
}

/// Checks the batch at the start of `buf` by its framing only (length, magic, offsets),
/// not its CRC: for reads of bytes this log wrote below its written end, whose batches were
/// CRC-checked when appended (and again by recovery above the recovery point after a
/// crash). Kafka's fetch path does not recompute CRCs either; consumers check them
/// (`check.crcs`). The CRC was 16 % of the broker's CPU on a catch-up read.
#[must_use]
pub fn scan_batch_framing(buf: &[u8]) -> ScanStep {
    if buf.len() < BATCH_HEADER_BYTES {
        return ScanStep::Incomplete;
    }
    let h = match BatchHeader::parse(buf) {
        Ok(h) => h,
        Err(e) => return ScanStep::Invalid(e.to_string()),
    };
    if h.last_offset_delta < 0 || h.records_count < 0 {
        return ScanStep::Invalid("negative lastOffsetDelta or recordsCount".into());
    }
    // baseOffset is outside the CRC: a damaged one near i64::MAX must not make the next
    // expected offset overflow (a panic in debug, a wrap to negative offsets in release).
    if h.base_offset.checked_add(i64::from(h.last_offset_delta) + 1).is_none() {
        return ScanStep::Invalid(format!(
            "baseOffset {} + lastOffsetDelta {} overflows",
            h.base_offset, h.last_offset_delta
        ));
    }
    if buf.len() < h.total_size() {
        return ScanStep::Incomplete;
    }
    ScanStep::Batch(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::records::build_simple_batch;

    #[test]
    fn framing_scan_skips_the_crc_and_the_recovery_scan_checks_it() {
        let mut b = build_simple_batch(3, 100, 0).to_vec();
        let last = b.len() - 1;
        b[last] ^= 0xff;
        assert!(matches!(scan_batch(&b), ScanStep::Invalid(r) if r.contains("CRC")));
        assert!(matches!(scan_batch_framing(&b), ScanStep::Batch(h) if h.records_count == 3));
        // Framing is still checked: a zero-filled tail and a short buffer are not batches.
        assert!(matches!(scan_batch_framing(&[0u8; 128]), ScanStep::Invalid(_)));
        assert_eq!(scan_batch_framing(&b[..b.len() - 1]), ScanStep::Incomplete);
    }

    /// Replayed by the `segment_scan` fuzz target (corpus/crash-base-offset-max): a valid batch whose baseOffset (not covered
    /// by the CRC) is i64::MAX made recovery's next-offset arithmetic overflow.
    #[test]
    fn scan_refuses_a_last_offset_that_overflows() {
        let mut b = build_simple_batch(3, 8, 0).to_vec();
        assert!(matches!(scan_batch(&b), ScanStep::Batch(_)));
        b[..8].copy_from_slice(&(i64::MAX - 2).to_be_bytes());
        assert!(matches!(scan_batch(&b), ScanStep::Invalid(r) if r.contains("overflows")));
        b[..8].copy_from_slice(&(i64::MAX - 3).to_be_bytes());
        assert!(matches!(scan_batch(&b), ScanStep::Batch(h) if h.last_offset() == i64::MAX - 1));
    }
}
