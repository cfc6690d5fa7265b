//! Decoding of stored `__consumer_offsets` batches for the coordinator's loader: each
//! record's key and value, as zero-copy slices of the (decompressed) record set.
//!
//! Pure functions; run on the shard that owns the offsets partition being replayed.
//! Invariants: a compressed record set is decompressed through
//! [`crate::storage::records::decompress`], so its output is bounded by
//! [`crate::constants::DECOMPRESSED_BATCH_BYTES_MAX`] and a decompression bomb is refused
//! before it is allocated (the codec crate's own decoder sizes buffers from the input's
//! claims); nothing is allocated per record beyond the returned slices, so memory is bounded
//! by the record set whatever `recordsCount` claims.

use bytes::Bytes;

use crate::storage::batch::{check_crc, BatchHeader, Compression, BATCH_HEADER_BYTES};
use crate::storage::records::decompress;
use crate::storage::StorageError;

/// One record of a stored batch: key and value (`None` = tombstone), sharing the batch's
/// (or the decompressed set's) memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRecord {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    /// The batch is a control batch (a transaction marker).
    pub control: bool,
    /// The batch belongs to a transaction (its offsets apply at the COMMIT marker).
    pub transactional: bool,
    pub producer_id: i64,
}

fn bad(reason: &str) -> StorageError {
    StorageError::CorruptMessage { reason: format!("offsets record: {reason}") }
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

/// A nullable length-prefixed field ending at or before `end`.
fn field(set: &Bytes, at: &mut usize, end: usize) -> Result<Option<Bytes>, StorageError> {
    let len = varlong(set, at)?;
    if len == -1 {
        return Ok(None);
    }
    let len = usize::try_from(len).map_err(|_| bad("negative length"))?;
    let stop = at.checked_add(len).filter(|s| *s <= end).ok_or_else(|| bad("field too long"))?;
    let r = set.slice(*at..stop);
    *at = stop;
    Ok(Some(r))
}

/// Decodes one whole stored batch (exactly `batch.len()` bytes, CRC-checked) into its
/// records. Errors are typed storage errors: CORRUPT_MESSAGE for bad bytes or a record set
/// that decompresses past the bound.
pub fn decode_stored_batch(batch: &Bytes) -> Result<Vec<StoredRecord>, StorageError> {
    let h = BatchHeader::parse(batch)?;
    if h.total_size() != batch.len() {
        return Err(bad("batch length does not match the bytes read"));
    }
    check_crc(&h, batch)?;
    let codec = h.compression().ok_or_else(|| bad("unknown compression codec"))?;
    let payload = batch.slice(BATCH_HEADER_BYTES..);
    let set = if codec == Compression::None {
        payload
    } else {
        Bytes::from(decompress(codec, &payload)?)
    };
    let mut out = Vec::new();
    let mut at = 0usize;
    for _ in 0..h.records_count.max(0) {
        let len = usize::try_from(varlong(&set, &mut at)?).map_err(|_| bad("negative length"))?;
        let end = at.checked_add(len).filter(|e| *e <= set.len());
        let end = end.ok_or_else(|| bad("record past the batch end"))?;
        at += 1; // attributes
        varlong(&set, &mut at)?; // timestamp delta
        varlong(&set, &mut at)?; // offset delta
        let key = field(&set, &mut at, end)?;
        let value = field(&set, &mut at, end)?;
        if at > end {
            return Err(bad("record fields past the record end"));
        }
        out.push(StoredRecord {
            key,
            value,
            control: h.is_control(),
            transactional: h.is_transactional(),
            producer_id: h.producer_id,
        });
        at = end;
    }
    if at != set.len() {
        return Err(bad("bytes after the last record"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::batch::{recompute_crc, ATTR_COMPRESSION_MASK, OFFSET_ATTRIBUTES};
    use crate::storage::records::{build_batch, NewRecord};

    /// A batch of `records` whose record set is replaced by `payload` compressed as `codec`.
    fn with_payload(codec: Compression, payload: &[u8], records_count: i32) -> Bytes {
        let one =
            [NewRecord { key: Some(&b"k"[..]), value: None, timestamp_ms: 0, headers: vec![] }];
        let base = build_batch(&one, Compression::None);
        let mut b = base[..BATCH_HEADER_BYTES].to_vec();
        b.extend_from_slice(payload);
        let len = i32::try_from(b.len() - 12).unwrap();
        b[8..12].copy_from_slice(&len.to_be_bytes());
        let attrs = i16::from_be_bytes([b[OFFSET_ATTRIBUTES], b[OFFSET_ATTRIBUTES + 1]]);
        let attrs = (attrs & !ATTR_COMPRESSION_MASK) | codec.attribute_bits();
        b[OFFSET_ATTRIBUTES..OFFSET_ATTRIBUTES + 2].copy_from_slice(&attrs.to_be_bytes());
        b[BATCH_HEADER_BYTES - 4..BATCH_HEADER_BYTES].copy_from_slice(&records_count.to_be_bytes());
        recompute_crc(&mut b);
        Bytes::from(b)
    }

    #[test]
    fn records_of_every_codec_decode() {
        let recs = [
            NewRecord {
                key: Some(&b"k1"[..]),
                value: Some(&b"v1"[..]),
                timestamp_ms: 1,
                headers: vec![],
            },
            NewRecord { key: Some(&b"k2"[..]), value: None, timestamp_ms: 2, headers: vec![] },
        ];
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let got = decode_stored_batch(&build_batch(&recs, codec)).expect("decodes");
            assert_eq!(got.len(), 2, "{codec:?}");
            assert_eq!(got[0].key.as_deref(), Some(&b"k1"[..]));
            assert_eq!(got[0].value.as_deref(), Some(&b"v1"[..]));
            assert_eq!(got[1].value, None);
        }
    }

    /// A zstd frame of RLE blocks (4 bytes per 128 KiB of zeros, the densest zstd encodes)
    /// that expands to 1 GiB is refused at the bound, with memory bounded by it, instead of
    /// being decompressed whole.
    #[test]
    fn a_zstd_bomb_is_refused() {
        const BLOCK_BYTES: u32 = 128 * 1024;
        let blocks = (1u32 << 30) / BLOCK_BYTES;
        let mut bomb = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 7 << 3];
        for i in 0..blocks {
            let header = u32::from(i + 1 == blocks) | (1 << 1) | (BLOCK_BYTES << 3);
            bomb.extend_from_slice(&header.to_le_bytes()[..3]);
            bomb.push(0);
        }
        let err = decode_stored_batch(&with_payload(Compression::Zstd, &bomb, 1)).unwrap_err();
        assert!(err.to_string().contains("exceeds the limit"), "{err}");
        assert_eq!(err.kafka_code(), 2);
    }

    /// Raw snappy whose header claims 4 GiB: refused before anything is allocated (the
    /// codec crate would allocate the claimed length zeroed).
    #[test]
    fn a_snappy_length_claim_is_refused() {
        let claim = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x00];
        let err = decode_stored_batch(&with_payload(Compression::Snappy, &claim, 1)).unwrap_err();
        assert_eq!(err.kafka_code(), 2, "{err}");
    }

    /// A huge recordsCount over a tiny record set reserves nothing: it fails at the end of
    /// the bytes.
    #[test]
    fn a_record_count_claim_is_refused() {
        let b = with_payload(Compression::None, &[0x02, 0, 0], i32::MAX);
        assert!(decode_stored_batch(&b).is_err());
    }
}
