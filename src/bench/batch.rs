//! Kafka RecordBatch v2 encoding and scanning for the load generator's hot path.
//!
//! Lives on each bench executor (pure functions, no shared state). Our own encoder
//! rather than `kafka_protocol::records::RecordBatchEncoder`: it writes records straight
//! from a shared payload without building `Record` structs (measured below in the unit
//! tests' companion bench numbers of the report). Invariants: the CRC-32C covers
//! `attributes` to the end of the batch; `batchLength` counts from `partitionLeaderEpoch`
//! to the end; a batch carries no producer id (non-idempotent, like
//! `kafka-producer-perf-test` with `enable.idempotence=false`) unless the lane is
//! idempotent (`--idempotent`: producer id, epoch and base sequence set).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::compression::{Compressor, Decompressor, Gzip, Lz4, Snappy, Zstd};

use super::cli::CompressionArg;

/// Bytes of a v2 batch header before the first record.
pub const BATCH_HEADER_BYTES: usize = 61;
/// Where the CRC-covered part of a batch starts (the attributes field).
const CRC_START: usize = 21;
/// Bytes in a record value that carry the intended send time (e2e latency).
pub const VALUE_STAMP_BYTES: usize = 8;
/// Attribute bit of a control batch (transaction markers), not user records.
const CONTROL_BIT: i16 = 0x20;

/// One record to encode: its key (if any) and the stamp written at the front of its value.
#[derive(Clone, Copy, Debug)]
pub struct RecordSpec<'a> {
    pub key: Option<&'a [u8]>,
    pub stamp: u64,
}

/// Kafka attribute bits of a codec.
fn codec_bits(c: CompressionArg) -> i16 {
    match c {
        CompressionArg::None => 0,
        CompressionArg::Gzip => 1,
        CompressionArg::Snappy => 2,
        CompressionArg::Lz4 => 3,
        CompressionArg::Zstd => 4,
    }
}

fn put_varint(buf: &mut BytesMut, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        buf.put_u8((z as u8) | 0x80);
        z >>= 7;
    }
    buf.put_u8(z as u8);
}

fn varint_len(v: i64) -> usize {
    let z = ((v << 1) ^ (v >> 63)) as u64;
    (64 - (z | 1).leading_zeros() as usize).div_ceil(7)
}

/// Encodes one record. `value` is the payload template; its first [`VALUE_STAMP_BYTES`]
/// are replaced by `spec.stamp` (when the value is long enough).
fn put_record(buf: &mut BytesMut, offset_delta: i32, spec: &RecordSpec<'_>, value: &[u8]) {
    let key_len = spec.key.map_or(-1, |k| k.len() as i64);
    let body = 1
        + varint_len(0)
        + varint_len(i64::from(offset_delta))
        + varint_len(key_len)
        + spec.key.map_or(0, <[u8]>::len)
        + varint_len(value.len() as i64)
        + value.len()
        + varint_len(0);
    put_varint(buf, body as i64);
    buf.put_u8(0); // record attributes
    put_varint(buf, 0); // timestamp delta: every record of a batch shares its timestamp
    put_varint(buf, i64::from(offset_delta));
    put_varint(buf, key_len);
    if let Some(k) = spec.key {
        buf.put_slice(k);
    }
    put_varint(buf, value.len() as i64);
    if value.len() >= VALUE_STAMP_BYTES {
        buf.put_u64_le(spec.stamp);
        buf.put_slice(&value[VALUE_STAMP_BYTES..]);
    } else {
        buf.put_slice(value);
    }
    put_varint(buf, 0); // no headers
}

/// An idempotent producer's fields of a batch: producer id, epoch, base sequence.
pub type ProducerFields = Option<(i64, i16, i32)>;

/// Encodes one v2 batch of `records` (all with timestamp `timestamp_ms`) at the end of
/// `out`. `scratch` holds the uncompressed records when a codec is used.
pub fn encode_batch(
    out: &mut BytesMut,
    scratch: &mut BytesMut,
    records: &[RecordSpec<'_>],
    value: &[u8],
    timestamp_ms: i64,
    compression: CompressionArg,
    producer: ProducerFields,
) -> anyhow::Result<()> {
    anyhow::ensure!(!records.is_empty(), "empty batch");
    let start = out.len();
    out.put_i64(0); // base offset, assigned by the broker
    out.put_i32(0); // batch length, patched below
    out.put_i32(-1); // partition leader epoch, stamped by the broker
    out.put_i8(2); // magic
    out.put_u32(0); // crc, patched below
    out.put_i16(codec_bits(compression));
    out.put_i32(records.len() as i32 - 1); // last offset delta
    out.put_i64(timestamp_ms);
    out.put_i64(timestamp_ms);
    let (producer_id, epoch, base_sequence) = producer.unwrap_or((-1, -1, -1));
    out.put_i64(producer_id);
    out.put_i16(epoch);
    out.put_i32(base_sequence);
    out.put_i32(records.len() as i32);
    if compression == CompressionArg::None {
        for (i, r) in records.iter().enumerate() {
            put_record(out, i as i32, r, value);
        }
    } else {
        scratch.clear();
        for (i, r) in records.iter().enumerate() {
            put_record(scratch, i as i32, r, value);
        }
        let raw = scratch.split().freeze();
        compress(out, compression, raw)?;
    }
    let batch_len = i32::try_from(out.len() - start - 12)?;
    out[start + 8..start + 12].copy_from_slice(&batch_len.to_be_bytes());
    let crc = crc32c::crc32c(&out[start + CRC_START..]);
    out[start + 17..start + 21].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

fn compress(out: &mut BytesMut, c: CompressionArg, raw: Bytes) -> anyhow::Result<()> {
    let put = |b: &mut BytesMut| {
        b.put_slice(&raw);
        Ok(())
    };
    match c {
        CompressionArg::None => {
            out.put_slice(&raw);
            Ok(())
        }
        CompressionArg::Gzip => <Gzip as Compressor<BytesMut>>::compress(out, put),
        CompressionArg::Snappy => <Snappy as Compressor<BytesMut>>::compress(out, put),
        CompressionArg::Lz4 => <Lz4 as Compressor<BytesMut>>::compress(out, put),
        CompressionArg::Zstd => <Zstd as Compressor<BytesMut>>::compress(out, put),
    }
}

/// Header facts of one batch found in a fetch response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    pub record_count: i32,
    pub control: bool,
    pub attributes: i16,
    /// The whole batch, header included.
    pub bytes: Bytes,
}

/// Splits fetched record bytes into whole batches; a truncated trailing batch (the
/// broker may cut at max_bytes) is left out.
pub fn scan_batches(mut data: Bytes) -> impl Iterator<Item = BatchInfo> {
    std::iter::from_fn(move || {
        if data.len() < BATCH_HEADER_BYTES {
            return None;
        }
        let batch_len = (&data[8..12]).get_i32();
        let total = usize::try_from(batch_len).ok()? + 12;
        if total < BATCH_HEADER_BYTES || data.len() < total {
            return None;
        }
        let bytes = data.split_to(total);
        let base_offset = (&bytes[0..8]).get_i64();
        let attributes = (&bytes[21..23]).get_i16();
        let last_delta = (&bytes[23..27]).get_i32();
        let record_count = (&bytes[57..61]).get_i32();
        Some(BatchInfo {
            base_offset,
            last_offset: base_offset + i64::from(last_delta),
            record_count,
            control: attributes & CONTROL_BIT != 0,
            attributes,
            bytes,
        })
    })
}

fn get_varint(buf: &mut &[u8]) -> anyhow::Result<i64> {
    let mut z: u64 = 0;
    for shift in (0..64).step_by(7) {
        anyhow::ensure!(!buf.is_empty(), "truncated varint");
        let b = buf.get_u8();
        z |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok((z >> 1) as i64 ^ -((z & 1) as i64));
        }
    }
    anyhow::bail!("varint too long")
}

/// Calls `f(offset, value)` for every record of a (possibly compressed) batch.
pub fn for_each_record(batch: &BatchInfo, mut f: impl FnMut(i64, &[u8])) -> anyhow::Result<()> {
    let mut body = batch.bytes.slice(BATCH_HEADER_BYTES..);
    let raw = match batch.attributes & 0x7 {
        0 => body,
        1 => <Gzip as Decompressor<Bytes>>::decompress(&mut body, |b| Ok(b.split_off(0)))?,
        2 => <Snappy as Decompressor<Bytes>>::decompress(&mut body, |b| Ok(b.split_off(0)))?,
        3 => <Lz4 as Decompressor<Bytes>>::decompress(&mut body, |b| Ok(b.split_off(0)))?,
        4 => <Zstd as Decompressor<Bytes>>::decompress(&mut body, |b| Ok(b.split_off(0)))?,
        c => anyhow::bail!("unknown compression codec {c}"),
    };
    let mut buf: &[u8] = &raw;
    for _ in 0..batch.record_count {
        let len = usize::try_from(get_varint(&mut buf)?)?;
        anyhow::ensure!(buf.len() >= len, "truncated record");
        let mut rec = &buf[..len];
        buf = &buf[len..];
        rec.advance(1); // attributes
        get_varint(&mut rec)?; // timestamp delta
        let offset_delta = get_varint(&mut rec)?;
        let key_len = get_varint(&mut rec)?;
        if key_len > 0 {
            anyhow::ensure!(rec.len() >= key_len as usize, "truncated key");
            rec.advance(key_len as usize);
        }
        let value_len = get_varint(&mut rec)?;
        let value = if value_len >= 0 {
            anyhow::ensure!(rec.len() >= value_len as usize, "truncated value");
            &rec[..value_len as usize]
        } else {
            &[][..]
        };
        f(batch.base_offset + offset_delta, value);
    }
    Ok(())
}

/// Reads the stamp an encoder wrote at the front of a value.
pub fn value_stamp(value: &[u8]) -> Option<u64> {
    value.get(..VALUE_STAMP_BYTES).map(|mut b| b.get_u64_le())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::RecordBatchDecoder;

    fn encode(c: CompressionArg) -> Bytes {
        let key = b"key-0001".to_vec();
        let value = vec![b'x'; 100];
        let recs: Vec<_> = (0..10u64)
            .map(|i| RecordSpec { key: (i % 2 == 0).then_some(&key[..]), stamp: i * 1000 })
            .collect();
        let mut out = BytesMut::new();
        let mut scratch = BytesMut::new();
        encode_batch(&mut out, &mut scratch, &recs, &value, 1_700_000_000_000, c, None).unwrap();
        encode_batch(&mut out, &mut scratch, &recs[..3], &value, 1_700_000_000_001, c, None)
            .unwrap();
        out.freeze()
    }

    #[test]
    fn kafka_protocol_decodes_our_batches() {
        for c in [
            CompressionArg::None,
            CompressionArg::Gzip,
            CompressionArg::Snappy,
            CompressionArg::Lz4,
            CompressionArg::Zstd,
        ] {
            let mut bytes = encode(c);
            let sets = RecordBatchDecoder::decode_all(&mut bytes).unwrap();
            assert_eq!(sets.len(), 2, "{c:?}");
            let recs = &sets[0].records;
            assert_eq!(recs.len(), 10);
            assert_eq!(recs[2].key.as_deref(), Some(&b"key-0001"[..]));
            assert_eq!(recs[1].key, None);
            assert_eq!(recs[3].offset, 3);
            let v = recs[3].value.as_ref().unwrap();
            assert_eq!(value_stamp(v), Some(3000));
            assert_eq!(v.len(), 100);
        }
    }

    #[test]
    fn scan_and_walk_our_batches() {
        for c in [CompressionArg::None, CompressionArg::Zstd, CompressionArg::Lz4] {
            let bytes = encode(c);
            let mut truncated = bytes.clone();
            truncated.truncate(bytes.len() - 5);
            let batches: Vec<_> = scan_batches(bytes).collect();
            assert_eq!(batches.len(), 2);
            assert_eq!(batches[0].record_count, 10);
            assert_eq!(batches[0].last_offset, 9);
            let mut stamps = vec![];
            for_each_record(&batches[0], |off, v| stamps.push((off, value_stamp(v).unwrap())))
                .unwrap();
            assert_eq!(stamps[9], (9, 9000));
            assert_eq!(scan_batches(truncated).count(), 1, "partial batch is skipped");
        }
    }

    #[test]
    fn varint_lengths_match_encoding() {
        for v in [0i64, 1, -1, 63, 64, -65, 300, 1 << 20, -(1 << 40), i64::MAX, i64::MIN] {
            let mut b = BytesMut::new();
            put_varint(&mut b, v);
            assert_eq!(b.len(), varint_len(v), "{v}");
            assert_eq!(get_varint(&mut &b[..]).unwrap(), v);
        }
    }
}
