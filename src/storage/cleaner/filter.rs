//! Pure batch filtering for the cleaner: walks the records of a v2 batch (decompressing if
//! needed), reports each record's key and offset, and re-encodes a batch that keeps only the
//! chosen records.
//!
//! Used on the owner shard of the log being cleaned. Invariants of a re-encoded batch: the
//! original baseOffset, lastOffsetDelta, max timestamp, leader epoch, producer id, epoch and
//! base sequence are kept, so offsets are preserved (with gaps) and producer state survives;
//! the CRC-32C is recomputed. Without a new delete horizon, record bytes are copied verbatim
//! (their deltas stay relative to the unchanged baseTimestamp). Setting a KIP-534 delete
//! horizon sets attribute bit 6 and stores the horizon as baseTimestamp, so every record's
//! timestamp delta is re-encoded against it: each record's timestamp reads back unchanged.

use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};

use crate::storage::batch::{
    recompute_crc, BatchHeader, Compression, ATTR_COMPRESSION_MASK, ATTR_DELETE_HORIZON,
    BATCH_HEADER_BYTES, BATCH_LOG_OVERHEAD_BYTES, OFFSET_ATTRIBUTES, OFFSET_BASE_TIMESTAMP,
};
use crate::storage::error::StorageError;
use crate::storage::records::decompress;

/// One record of a batch as the cleaner sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CleanRecord {
    pub offset: i64,
    /// `None` for a keyless record (never removed).
    pub key: Option<Vec<u8>>,
    /// A null value: a tombstone.
    pub tombstone: bool,
    /// The record's bytes (length varint included) inside the decompressed record set.
    pub raw: Range<usize>,
    /// The record's attributes byte and timestamp delta (relative to baseTimestamp).
    pub attributes: u8,
    pub timestamp_delta: i64,
    /// The record's bytes after its timestamp delta (offset delta, key, value, headers).
    pub tail: Range<usize>,
}

fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn bad(reason: &str) -> StorageError {
    StorageError::corrupt_message(format!("cleaner: malformed record: {reason}"))
}

fn varlong(buf: &[u8], at: &mut usize) -> Result<i64, StorageError> {
    let mut raw: u64 = 0;
    for shift in (0..70).step_by(7) {
        let b = *buf.get(*at).ok_or_else(|| bad("truncated varint"))?;
        *at += 1;
        raw |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
        }
    }
    Err(bad("varint too long"))
}

fn field(buf: &[u8], at: &mut usize, end: usize) -> Result<Option<Range<usize>>, StorageError> {
    let len = varlong(buf, at)?;
    if len == -1 {
        return Ok(None);
    }
    let len = usize::try_from(len).map_err(|_| bad("negative length"))?;
    if *at + len > end {
        return Err(bad("field past the record end"));
    }
    let r = *at..*at + len;
    *at += len;
    Ok(Some(r))
}

/// The decompressed record set of a batch and its records.
pub fn records_of(
    h: &BatchHeader,
    batch: &[u8],
) -> Result<(Bytes, Vec<CleanRecord>), StorageError> {
    let payload = batch
        .get(BATCH_HEADER_BYTES..h.total_size())
        .ok_or_else(|| bad("batch shorter than its length"))?;
    let codec = h.compression().ok_or_else(|| bad("unknown compression codec"))?;
    let set = if codec == Compression::None {
        Bytes::copy_from_slice(payload)
    } else {
        Bytes::from(decompress(codec, payload)?)
    };
    let mut out = Vec::new();
    let mut at = 0usize;
    for _ in 0..h.records_count.max(0) {
        let start = at;
        let len = usize::try_from(varlong(&set, &mut at)?).map_err(|_| bad("negative length"))?;
        let end = at + len;
        if end > set.len() {
            return Err(bad("record past the batch end"));
        }
        let attributes = *set.get(at).ok_or_else(|| bad("truncated record"))?;
        at += 1;
        let timestamp_delta = varlong(&set, &mut at)?;
        let tail_start = at;
        let offset_delta = varlong(&set, &mut at)?;
        let key = field(&set, &mut at, end)?.map(|r| set[r].to_vec());
        let tombstone = field(&set, &mut at, end)?.is_none();
        out.push(CleanRecord {
            offset: h.base_offset + offset_delta,
            key,
            tombstone,
            raw: start..end,
            attributes,
            timestamp_delta,
            tail: tail_start..end,
        });
        at = end;
    }
    Ok((set, out))
}

/// Re-encodes `batch` with only the records `keep` (in order, from `set`), compressed with
/// the batch's codec (uncompressed when empty), and with the KIP-534 delete horizon
/// `new_horizon_ms` if given. An empty result keeps the header alone: a valid batch of 0
/// records that still marks the batch's offset range.
pub fn rebuild(
    h: &BatchHeader,
    batch: &[u8],
    set: &[u8],
    keep: &[&CleanRecord],
    new_horizon_ms: Option<i64>,
) -> Result<Bytes, StorageError> {
    let codec = h.compression().ok_or_else(|| bad("unknown compression codec"))?;
    let mut body = Vec::with_capacity(keep.iter().map(|r| r.raw.len() + 8).sum());
    for r in keep {
        match new_horizon_ms {
            None => body.extend_from_slice(&set[r.raw.clone()]),
            Some(horizon) => {
                // The record's absolute timestamp, re-expressed against the new base.
                let delta = h.base_timestamp.saturating_add(r.timestamp_delta) - horizon;
                let mut inner = vec![r.attributes];
                put_varlong(&mut inner, delta);
                inner.extend_from_slice(&set[r.tail.clone()]);
                put_varlong(&mut body, inner.len() as i64);
                body.extend_from_slice(&inner);
            }
        }
    }
    let (codec, payload) = if keep.is_empty() {
        (Compression::None, Vec::new())
    } else {
        (codec, compress(codec, &body)?)
    };
    let mut b = BytesMut::with_capacity(BATCH_HEADER_BYTES + payload.len());
    b.put_slice(&batch[..BATCH_HEADER_BYTES]);
    let batch_length = i32::try_from(BATCH_HEADER_BYTES - BATCH_LOG_OVERHEAD_BYTES + payload.len())
        .map_err(|_| bad("batch too large"))?;
    b[8..12].copy_from_slice(&batch_length.to_be_bytes());
    let mut attrs = (h.attributes & !ATTR_COMPRESSION_MASK) | codec.attribute_bits();
    if let Some(horizon) = new_horizon_ms {
        attrs |= ATTR_DELETE_HORIZON;
        b[OFFSET_BASE_TIMESTAMP..OFFSET_BASE_TIMESTAMP + 8].copy_from_slice(&horizon.to_be_bytes());
    }
    b[OFFSET_ATTRIBUTES..OFFSET_ATTRIBUTES + 2].copy_from_slice(&attrs.to_be_bytes());
    let count = i32::try_from(keep.len()).map_err(|_| bad("too many records"))?;
    b[BATCH_HEADER_BYTES - 4..BATCH_HEADER_BYTES].copy_from_slice(&count.to_be_bytes());
    b.put_slice(&payload);
    recompute_crc(&mut b);
    Ok(b.freeze())
}

fn compress(codec: Compression, data: &[u8]) -> Result<Vec<u8>, StorageError> {
    use std::io::Write;
    let fail = |e: std::io::Error| StorageError::corrupt_message(format!("cleaner {codec:?}: {e}"));
    Ok(match codec {
        Compression::None => data.to_vec(),
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).map_err(fail)?;
            e.finish().map_err(fail)?
        }
        Compression::Snappy => snap::raw::Encoder::new()
            .compress_vec(data)
            .map_err(|e| StorageError::corrupt_message(format!("cleaner snappy: {e}")))?,
        Compression::Lz4 => {
            let mut e = lz4::EncoderBuilder::new().build(Vec::new()).map_err(fail)?;
            e.write_all(data).map_err(fail)?;
            let (out, res) = e.finish();
            res.map_err(fail)?;
            out
        }
        Compression::Zstd => zstd::encode_all(data, 1).map_err(fail)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::batch::{scan_batch, ScanStep};
    use crate::storage::records::{build_batch, NewRecord};

    fn rec<'a>(k: &'a [u8], v: Option<&'a [u8]>) -> NewRecord<'a> {
        NewRecord { key: Some(k), value: v, timestamp_ms: 5, headers: vec![("h", Some(b"x"))] }
    }

    #[test]
    fn rebuild_keeps_chosen_records_with_valid_crc() {
        for codec in [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Zstd]
        {
            let b = build_batch(
                &[rec(b"a", Some(b"1")), rec(b"b", None), rec(b"a", Some(b"2"))],
                codec,
            );
            let h = BatchHeader::parse(&b).unwrap();
            let (set, recs) = records_of(&h, &b).unwrap();
            assert_eq!(recs.len(), 3);
            assert!(recs[1].tombstone);
            assert_eq!(recs[2].offset, 2);
            let out = rebuild(&h, &b, &set, &[&recs[1], &recs[2]], None).unwrap();
            let ScanStep::Batch(nh) = scan_batch(&out) else { panic!("invalid rebuilt batch") };
            assert_eq!(nh.last_offset_delta, 2);
            assert_eq!(nh.records_count, 2);
            let (_, kept) = records_of(&nh, &out).unwrap();
            assert_eq!(kept[0].offset, 1);
            assert_eq!(kept[1].key.as_deref(), Some(&b"a"[..]));
            let empty = rebuild(&h, &b, &set, &[], None).unwrap();
            let ScanStep::Batch(eh) = scan_batch(&empty) else { panic!("invalid empty batch") };
            assert_eq!((eh.records_count, eh.last_offset_delta), (0, 2));
        }
    }

    #[test]
    fn delete_horizon_keeps_record_timestamps() {
        for codec in [Compression::None, Compression::Lz4] {
            let recs = [
                NewRecord { key: Some(b"a"), value: None, timestamp_ms: 1_000, headers: vec![] },
                NewRecord {
                    key: Some(b"b"),
                    value: Some(b"v"),
                    timestamp_ms: 900,
                    headers: vec![],
                },
            ];
            let b = build_batch(&recs, codec);
            let h = BatchHeader::parse(&b).unwrap();
            let (set, parsed) = records_of(&h, &b).unwrap();
            let horizon = 86_400_000 + 1_000;
            let out = rebuild(&h, &b, &set, &[&parsed[0], &parsed[1]], Some(horizon)).unwrap();
            let ScanStep::Batch(nh) = scan_batch(&out) else { panic!("invalid batch") };
            assert_eq!(nh.delete_horizon_ms(), Some(horizon));
            assert_eq!(nh.max_timestamp, h.max_timestamp);
            let (_, kept) = records_of(&nh, &out).unwrap();
            let ts: Vec<i64> = kept.iter().map(|r| nh.base_timestamp + r.timestamp_delta).collect();
            assert_eq!(ts, vec![1_000, 900]);
            assert!(kept[0].tombstone && kept[1].key.as_deref() == Some(&b"b"[..]));
        }
    }
}
