//! Record-level decoding of a v2 batch, used only where a check needs it: validation
//! (offset deltas, timestamps, keys on compacted topics) and `offset_for_timestamp`.
//! Also a small batch builder for tests, benchmarks and internal topics.
//!
//! Pure functions; used on every shard. Records are walked in place (no allocation per
//! record); compressed record sets are decompressed once, bounded by
//! [`DECOMPRESSED_BATCH_BYTES_MAX`].

use std::io::Read;

use bytes::{BufMut, Bytes, BytesMut};

use super::batch::{recompute_crc, BatchHeader, Compression, BATCH_HEADER_BYTES, MAGIC_V2};
use super::error::StorageError;
use crate::constants::DECOMPRESSED_BATCH_BYTES_MAX;

/// What a walk needs from one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordInfo {
    pub offset_delta: i32,
    pub timestamp_delta: i64,
    pub has_key: bool,
}

fn bad(reason: &str) -> StorageError {
    StorageError::invalid_record(format!("malformed record: {reason}"))
}

fn read_varlong(buf: &mut &[u8]) -> Result<i64, StorageError> {
    let mut raw: u64 = 0;
    for shift in (0..70).step_by(7) {
        let (&b, rest) = buf.split_first().ok_or_else(|| bad("truncated varint"))?;
        *buf = rest;
        raw |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
        }
    }
    Err(bad("varint too long"))
}

fn read_varint(buf: &mut &[u8]) -> Result<i32, StorageError> {
    i32::try_from(read_varlong(buf)?).map_err(|_| bad("varint out of range"))
}

fn skip(buf: &mut &[u8], len: i32, nullable: bool) -> Result<bool, StorageError> {
    if len < 0 {
        return if nullable && len == -1 { Ok(false) } else { Err(bad("negative length")) };
    }
    let len = len as usize;
    if buf.len() < len {
        return Err(bad("field past the record end"));
    }
    *buf = &buf[len..];
    Ok(true)
}

/// Parses one record from `buf`, advancing it past the record.
fn next_record(buf: &mut &[u8]) -> Result<RecordInfo, StorageError> {
    let len = read_varint(buf)?;
    if len < 0 || len as usize > buf.len() {
        return Err(bad("record length past the batch end"));
    }
    let (mut rec, rest) = buf.split_at(len as usize);
    *buf = rest;
    let _attributes = rec.first().ok_or_else(|| bad("empty record"))?;
    rec = &rec[1..];
    let timestamp_delta = read_varlong(&mut rec)?;
    let offset_delta = read_varint(&mut rec)?;
    let key_len = read_varint(&mut rec)?;
    let has_key = skip(&mut rec, key_len, true)?;
    let value_len = read_varint(&mut rec)?;
    skip(&mut rec, value_len, true)?;
    let headers = read_varint(&mut rec)?;
    if headers < 0 {
        return Err(bad("negative header count"));
    }
    for _ in 0..headers {
        let k = read_varint(&mut rec)?;
        skip(&mut rec, k, false)?;
        let v = read_varint(&mut rec)?;
        skip(&mut rec, v, true)?;
    }
    if !rec.is_empty() {
        return Err(bad("bytes left after the last header"));
    }
    Ok(RecordInfo { offset_delta, timestamp_delta, has_key })
}

/// Calls `f` for every record of the batch (decompressing if needed) and checks that the
/// records fill the batch exactly.
pub fn for_each_record(
    header: &BatchHeader,
    batch: &[u8],
    mut f: impl FnMut(usize, RecordInfo) -> Result<(), StorageError>,
) -> Result<(), StorageError> {
    let payload = &batch[BATCH_HEADER_BYTES..header.total_size()];
    let codec = header
        .compression()
        .ok_or_else(|| StorageError::corrupt_message("unknown compression codec"))?;
    let owned;
    let mut records: &[u8] = if codec == Compression::None {
        payload
    } else {
        owned = decompress(codec, payload)?;
        &owned
    };
    for i in 0..usize::try_from(header.records_count).unwrap_or(0) {
        f(i, next_record(&mut records)?)?;
    }
    if !records.is_empty() {
        return Err(StorageError::invalid_record(format!(
            "{} bytes after recordsCount={} records",
            records.len(),
            header.records_count
        )));
    }
    Ok(())
}

/// Decompresses a record set, bounded by [`DECOMPRESSED_BATCH_BYTES_MAX`].
pub fn decompress(codec: Compression, data: &[u8]) -> Result<Vec<u8>, StorageError> {
    decompress_bounded(codec, data, DECOMPRESSED_BATCH_BYTES_MAX)
}

/// Decompresses a record set, refusing (without allocating it) output past `limit_bytes`:
/// a tiny compressed input may claim gigabytes.
fn decompress_bounded(
    codec: Compression,
    data: &[u8],
    limit_bytes: usize,
) -> Result<Vec<u8>, StorageError> {
    let limit = limit_bytes as u64;
    let fail = |e: std::io::Error| StorageError::corrupt_message(format!("{codec:?}: {e}"));
    let mut out = Vec::new();
    match codec {
        Compression::None => out.extend_from_slice(data),
        Compression::Gzip => {
            flate2::read::GzDecoder::new(data)
                .take(limit + 1)
                .read_to_end(&mut out)
                .map_err(fail)?;
        }
        Compression::Zstd => {
            let dec = zstd::stream::read::Decoder::new(data).map_err(fail)?;
            dec.take(limit + 1).read_to_end(&mut out).map_err(fail)?;
        }
        Compression::Lz4 => {
            let dec = lz4::Decoder::new(data).map_err(fail)?;
            dec.take(limit + 1).read_to_end(&mut out).map_err(fail)?;
        }
        Compression::Snappy => out = snappy_decompress(data, limit_bytes)?,
    }
    if out.len() as u64 > limit {
        return Err(StorageError::corrupt_message("decompressed batch exceeds the limit"));
    }
    Ok(out)
}

/// The Java client's xerial framing: magic, version, compatible version, then
/// (length i32, raw snappy block) pairs.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_BYTES: usize = 16;

fn snappy_block(block: &[u8], out: &mut Vec<u8>, limit_bytes: usize) -> Result<(), StorageError> {
    let fail = |e: snap::Error| StorageError::corrupt_message(format!("snappy: {e}"));
    let len = snap::raw::decompress_len(block).map_err(fail)?;
    if out.len().saturating_add(len) > limit_bytes {
        return Err(StorageError::corrupt_message("decompressed batch exceeds the limit"));
    }
    let start = out.len();
    out.resize(start + len, 0);
    snap::raw::Decoder::new().decompress(block, &mut out[start..]).map_err(fail)?;
    Ok(())
}

fn snappy_decompress(data: &[u8], limit_bytes: usize) -> Result<Vec<u8>, StorageError> {
    let mut out = Vec::new();
    if data.len() < XERIAL_HEADER_BYTES || data[..8] != XERIAL_MAGIC {
        snappy_block(data, &mut out, limit_bytes)?;
        return Ok(out);
    }
    let mut rest = &data[XERIAL_HEADER_BYTES..];
    while !rest.is_empty() {
        if rest.len() < 4 {
            return Err(StorageError::corrupt_message("xerial snappy: truncated block length"));
        }
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        rest = &rest[4..];
        if rest.len() < len {
            return Err(StorageError::corrupt_message("xerial snappy: truncated block"));
        }
        snappy_block(&rest[..len], &mut out, limit_bytes)?;
        rest = &rest[len..];
    }
    Ok(out)
}

/// First record of the batch with timestamp >= `target_ms`: (offset, timestamp).
pub fn first_record_at_or_after(
    header: &BatchHeader,
    batch: &[u8],
    target_ms: i64,
) -> Result<Option<(i64, i64)>, StorageError> {
    if header.is_log_append_time() {
        let found = header.max_timestamp >= target_ms;
        return Ok(found.then_some((header.base_offset, header.max_timestamp)));
    }
    let mut found = None;
    for_each_record(header, batch, |_, r| {
        let ts = header.base_timestamp.saturating_add(r.timestamp_delta);
        if found.is_none() && ts >= target_ms {
            found = Some((header.base_offset + i64::from(r.offset_delta), ts));
        }
        Ok(())
    })?;
    Ok(found)
}

// ---------------------------------------------------------------- builder

fn put_varlong(buf: &mut BytesMut, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        buf.put_u8((z as u8) | 0x80);
        z >>= 7;
    }
    buf.put_u8(z as u8);
}

fn put_bytes(buf: &mut BytesMut, b: Option<&[u8]>) {
    match b {
        None => put_varlong(buf, -1),
        Some(b) => {
            put_varlong(buf, b.len() as i64);
            buf.put_slice(b);
        }
    }
}

/// A record for [`build_batch`].
#[derive(Clone, Debug, Default)]
pub struct NewRecord<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub timestamp_ms: i64,
    pub headers: Vec<(&'a str, Option<&'a [u8]>)>,
}

fn compress(codec: Compression, data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    match codec {
        Compression::None => data.to_vec(),
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).expect("in-memory gzip");
            e.finish().expect("in-memory gzip")
        }
        Compression::Snappy => snap::raw::Encoder::new().compress_vec(data).expect("snappy"),
        Compression::Lz4 => {
            let mut e = lz4::EncoderBuilder::new().build(Vec::new()).expect("lz4");
            e.write_all(data).expect("in-memory lz4");
            let (out, res) = e.finish();
            res.expect("lz4 finish");
            out
        }
        Compression::Zstd => zstd::encode_all(data, 1).expect("in-memory zstd"),
    }
}

/// Builds a producer-style v2 batch (baseOffset 0, epoch -1, no producer id) with a valid
/// CRC. For tests, benchmarks and internal topics; never used on the produce path.
#[must_use]
pub fn build_batch(records: &[NewRecord<'_>], codec: Compression) -> Bytes {
    let base_ts = records.first().map_or(0, |r| r.timestamp_ms);
    let max_ts = records.iter().map(|r| r.timestamp_ms).max().unwrap_or(base_ts);
    let mut body = BytesMut::new();
    for (i, r) in records.iter().enumerate() {
        let mut rec = BytesMut::new();
        rec.put_u8(0);
        put_varlong(&mut rec, r.timestamp_ms - base_ts);
        put_varlong(&mut rec, i as i64);
        put_bytes(&mut rec, r.key);
        put_bytes(&mut rec, r.value);
        put_varlong(&mut rec, r.headers.len() as i64);
        for (k, v) in &r.headers {
            put_bytes(&mut rec, Some(k.as_bytes()));
            put_bytes(&mut rec, *v);
        }
        put_varlong(&mut body, rec.len() as i64);
        body.put_slice(&rec);
    }
    let payload = compress(codec, &body);
    let mut b = BytesMut::with_capacity(BATCH_HEADER_BYTES + payload.len());
    b.put_i64(0);
    b.put_i32((BATCH_HEADER_BYTES - 12 + payload.len()) as i32);
    b.put_i32(-1);
    b.put_i8(MAGIC_V2);
    b.put_u32(0);
    b.put_i16(codec.attribute_bits());
    b.put_i32(records.len().saturating_sub(1) as i32);
    b.put_i64(base_ts);
    b.put_i64(max_ts);
    b.put_i64(-1);
    b.put_i16(-1);
    b.put_i32(-1);
    b.put_i32(records.len() as i32);
    b.put_slice(&payload);
    recompute_crc(&mut b);
    b.freeze()
}

/// A batch of `count` records whose values are `value_bytes` of filler, with keys.
#[must_use]
pub fn build_simple_batch(count: usize, value_bytes: usize, timestamp_ms: i64) -> Bytes {
    let value = vec![0xabu8; value_bytes];
    let keys: Vec<String> = (0..count).map(|i| format!("k{i}")).collect();
    let recs: Vec<NewRecord<'_>> = keys
        .iter()
        .map(|k| NewRecord {
            key: Some(k.as_bytes()),
            value: Some(&value),
            timestamp_ms,
            headers: Vec::new(),
        })
        .collect();
    build_batch(&recs, Compression::None)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT_BYTES: usize = 1 << 20;

    /// A 4 MiB run of zeros with `codec`: the compressed form is a few KiB at most.
    fn bomb(codec: Compression) -> Vec<u8> {
        compress(codec, &vec![0u8; 4 * LIMIT_BYTES])
    }

    fn refused(codec: Compression, data: &[u8]) -> bool {
        matches!(
            decompress_bounded(codec, data, LIMIT_BYTES),
            Err(StorageError::CorruptMessage { reason }) if reason.contains("exceeds the limit")
        )
    }

    #[test]
    fn decompression_bombs_are_refused_at_the_limit() {
        for codec in [Compression::Gzip, Compression::Zstd, Compression::Lz4] {
            let data = bomb(codec);
            assert!(data.len() < 64 << 10, "{codec:?} bomb is {} bytes", data.len());
            assert!(refused(codec, &data), "{codec:?}");
            let fits = compress(codec, &vec![0u8; LIMIT_BYTES]);
            assert_eq!(
                decompress_bounded(codec, &fits, LIMIT_BYTES).expect("fits").len(),
                LIMIT_BYTES
            );
        }
        // Snappy's length header is checked before any allocation: a 6-byte block that
        // claims 4 GiB, and xerial framing whose blocks only together pass the limit.
        assert!(refused(Compression::Snappy, &[0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]));
        let block = compress(Compression::Snappy, &vec![0u8; LIMIT_BYTES / 2 + 1]);
        let mut xerial = XERIAL_MAGIC.to_vec();
        xerial.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
        for _ in 0..2 {
            xerial.extend_from_slice(&(block.len() as u32).to_be_bytes());
            xerial.extend_from_slice(&block);
        }
        assert!(refused(Compression::Snappy, &xerial));
    }
}
