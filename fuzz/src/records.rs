//! Record batches: produce-time validation with every codec, raw decompression (bombs must
//! be refused within `DECOMPRESSED_BATCH_BYTES_MAX`), and the segment `.log` scan recovery
//! and the cleaner run over files read from disk.

use std::io;
use std::path::Path;

use bytes::Bytes;
use shardlog::constants::DECOMPRESSED_BATCH_BYTES_MAX;
use shardlog::io::DataFile;
use shardlog::storage::batch::{recompute_crc, BatchHeader, Compression, BATCH_HEADER_BYTES};
use shardlog::storage::records::{first_record_at_or_after, for_each_record};
use shardlog::storage::segment::scan_file;
use shardlog::storage::validate::validate;
use shardlog::storage::{LogConfig, TimestampType};

const NOW_MS: i64 = 1_700_000_000_000;

/// `data[0]` picks the topic config; the rest is one produced batch. Its CRC is recomputed
/// when bit 0x80 is set, so the fuzzer reaches record decoding behind the CRC check.
pub fn record_batch(data: &[u8]) {
    let Some((&mode, batch)) = data.split_first() else { return };
    let mut batch = batch.to_vec();
    if mode & 0x80 != 0 && batch.len() >= BATCH_HEADER_BYTES {
        recompute_crc(&mut batch);
    }
    let config = LogConfig {
        compacted: mode & 1 != 0,
        timestamp_type: if mode & 2 != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        },
        ..LogConfig::default()
    };
    let _ = validate(&batch, &config, NOW_MS);
    // The read path (ListOffsets by timestamp) walks records of stored batches.
    if let Ok(h) = BatchHeader::parse(&batch) {
        if h.total_size() <= batch.len() {
            let _ = first_record_at_or_after(&h, &batch, i64::from(mode));
            let _ = for_each_record(&h, &batch, |_, _| Ok(()));
        }
    }
}

/// `data[0] % 5` picks the codec; the rest is a compressed record set.
pub fn decompress(data: &[u8]) {
    let Some((&codec, payload)) = data.split_first() else { return };
    let codec = Compression::from_attributes(i16::from(codec % 5)).expect("codecs 0..=4");
    if let Ok(out) = shardlog::storage::records::decompress(codec, payload) {
        assert!(out.len() <= DECOMPRESSED_BATCH_BYTES_MAX, "{codec:?} output past the bound");
    }
}

/// A segment `.log` file as recovery scans it: length, magic, CRC, offsets increasing; then
/// each batch's records as the cleaner and the timestamp lookup walk them.
pub fn segment_scan(data: &[u8]) {
    let file = BytesFile(Bytes::copy_from_slice(data));
    let path = Path::new("00000000000000000000.log");
    let end = data.len() as u64;
    let Ok(scan) = crate::block_on(scan_file(&file, path, 0, end, 0)) else { return };
    assert!(scan.valid_bytes <= end, "scan claims {} of {end} bytes", scan.valid_bytes);
    for (pos, h) in scan.batches {
        let start = usize::try_from(pos).expect("position within the file");
        let batch = &data[start..start + h.total_size()];
        let _ = for_each_record(&h, batch, |_, _| Ok(()));
    }
}

/// A read-only file over bytes, as the scan sees a segment.
struct BytesFile(Bytes);

impl DataFile for BytesFile {
    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        let start = usize::try_from(pos).unwrap_or(usize::MAX).min(self.0.len());
        let end = start.saturating_add(len).min(self.0.len());
        Ok(self.0.slice(start..end))
    }
    async fn write_at(&self, _: u64, _: &[&[u8]]) -> io::Result<()> {
        Err(io::Error::other("read-only"))
    }
    async fn sync(&self) -> io::Result<()> {
        Ok(())
    }
    async fn truncate(&self, _: u64) -> io::Result<()> {
        Err(io::Error::other("read-only"))
    }
    async fn size(&self) -> io::Result<u64> {
        Ok(self.0.len() as u64)
    }
    async fn close(&self) -> io::Result<()> {
        Ok(())
    }
}
