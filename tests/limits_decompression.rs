//! Decompression bombs through the produce path of a real broker process: a produced batch
//! whose zstd record set expands past the bound is refused with CORRUPT_MESSAGE (2), quickly
//! and without the broker's memory growing by anything near the claimed size; the broker
//! keeps serving (a normal batch on the same connection is accepted).
//!
//! Two bombs: a 1 KiB zstd frame that declares a 10 GiB content size (its RLE blocks, the
//! densest zstd can encode, expand to ~32 MiB before the input ends), and a ~320 KiB frame
//! of RLE blocks that really expands to 10 GiB (zstd caps a block at 128 KiB of output, so
//! 4 bytes per 128 KiB is the best ratio a valid frame reaches). Figures are printed.

mod common;

use std::time::Instant;

use bytes::Bytes;
use common::{Broker, Wire};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use shardlog::storage::batch::{
    recompute_crc, Compression, ATTR_COMPRESSION_MASK, BATCH_HEADER_BYTES, OFFSET_ATTRIBUTES,
};
use shardlog::storage::records::{build_batch, NewRecord};

const TOPIC: &str = "bombs";
const GIB: u64 = 1 << 30;
const ZSTD_BLOCK_BYTES_MAX: u64 = 128 * 1024;

/// A zstd frame declaring `content_bytes` with `blocks` RLE blocks of 128 KiB of zeros.
fn zstd_rle_frame(content_bytes: u64, blocks: u64) -> Vec<u8> {
    let mut f = vec![0x28, 0xb5, 0x2f, 0xfd]; // magic, little endian
    f.push(0xc0); // 8-byte Frame_Content_Size, no single segment, no checksum, no dict
    f.push(7 << 3); // Window_Descriptor: 2^(10+7) = 128 KiB window
    f.extend_from_slice(&content_bytes.to_le_bytes());
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        // Block_Header: Last_Block (bit 0), Block_Type 1 = RLE (bits 1-2), Block_Size.
        let header = last | (1 << 1) | ((ZSTD_BLOCK_BYTES_MAX as u32) << 3);
        f.extend_from_slice(&header.to_le_bytes()[..3]);
        f.push(0); // the byte repeated
    }
    f
}

/// A one-record batch whose record set is replaced by `payload`, marked zstd.
fn zstd_batch(payload: &[u8]) -> Bytes {
    let one =
        [NewRecord { key: None, value: Some(&b"v"[..]), timestamp_ms: now_ms(), headers: vec![] }];
    let base = build_batch(&one, Compression::None);
    let mut b = base[..BATCH_HEADER_BYTES].to_vec();
    b.extend_from_slice(payload);
    let len = i32::try_from(b.len() - 12).expect("small batch");
    b[8..12].copy_from_slice(&len.to_be_bytes());
    let attrs = i16::from_be_bytes([b[OFFSET_ATTRIBUTES], b[OFFSET_ATTRIBUTES + 1]]);
    let attrs = (attrs & !ATTR_COMPRESSION_MASK) | Compression::Zstd.attribute_bits();
    b[OFFSET_ATTRIBUTES..OFFSET_ATTRIBUTES + 2].copy_from_slice(&attrs.to_be_bytes());
    recompute_crc(&mut b);
    Bytes::from(b)
}

fn now_ms() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    i64::try_from(now.expect("clock").as_millis()).expect("ms")
}

fn produce(wire: &mut Wire, batch: Bytes) -> i16 {
    let part = PartitionProduceData::default().with_index(0).with_records(Some(batch));
    let topic = TopicProduceData::default()
        .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
        .with_partition_data(vec![part]);
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![topic]);
    let resp: ProduceResponse = wire.call(ApiKey::Produce, 9, &req);
    resp.responses[0].partition_responses[0].error_code
}

/// Peak resident memory of a process (VmHWM), KiB.
fn peak_rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("number")
}

#[test]
fn zstd_bombs_are_refused_through_produce_with_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start_with(dir.path(), &["--shards", "1"]);
    let mut wire = Wire::connect(&broker.addr);
    wire.create_topic(TOPIC, 1, &[]);
    let normal = || {
        let r = [NewRecord {
            key: None,
            value: Some(&b"ok"[..]),
            timestamp_ms: now_ms(),
            headers: vec![],
        }];
        build_batch(&r, Compression::Zstd)
    };
    assert_eq!(produce(&mut wire, normal()), 0, "a normal zstd batch");
    let rss_before_kib = peak_rss_kib(broker.pid());

    // 1 KiB that claims 10 GiB.
    let small = zstd_rle_frame(10 * GIB, 250);
    assert!(small.len() <= 1024, "frame of {} bytes", small.len());
    let started = Instant::now();
    assert_eq!(produce(&mut wire, zstd_batch(&small)), 2, "CORRUPT_MESSAGE");
    let small_ms = started.elapsed().as_millis();

    // ~320 KiB that really expands to 10 GiB.
    let big = zstd_rle_frame(10 * GIB, 10 * GIB / ZSTD_BLOCK_BYTES_MAX);
    let started = Instant::now();
    assert_eq!(produce(&mut wire, zstd_batch(&big)), 2, "CORRUPT_MESSAGE");
    let big_ms = started.elapsed().as_millis();

    let grown_kib = peak_rss_kib(broker.pid()).saturating_sub(rss_before_kib);
    eprintln!(
        "1 KiB bomb ({} B) refused in {small_ms} ms; {} KiB bomb refused in {big_ms} ms; \
         peak RSS grew {grown_kib} KiB",
        small.len(),
        big.len() / 1024
    );
    // Loose: the bound is 64 MiB of output; 10 GiB would be far beyond this.
    assert!(grown_kib < 512 * 1024, "peak RSS grew {grown_kib} KiB");
    // The broker keeps serving on the same connection.
    assert_eq!(produce(&mut wire, normal()), 0, "a normal batch after the bombs");
    let fetched = wire.fetch(TOPIC, 0, 0);
    assert_eq!(fetched.high_watermark, 2, "only the two normal batches were stored");
}
