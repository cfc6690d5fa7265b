//! Fetch responses without copying their records: the response is encoded by the codec
//! with each large `records` field replaced by a 16-byte random marker, and the encoded
//! frame is then cut at the markers, so the frame's pieces are the (small) encoded fields
//! and, between them, the record buffers themselves. The connection writes the pieces back
//! to back (`ResponseFrame::Pieces`).
//!
//! Why: a catch-up Fetch carries megabytes of records. Copying them into a freshly
//! allocated frame cost a memcpy plus the page faults of the new allocation and its unmap,
//! about a fifth of the broker's CPU while serving catch-up reads
//! (perf/results/2026-12-03-catchup-reads.md).
//!
//! Pure code, run by the shard that answers the Fetch. Invariants: the pieces' bytes are
//! exactly what the codec would have encoded (a marker is only replaced where the codec put
//! it, checked by its length prefix; otherwise the whole response is encoded the plain way);
//! records smaller than [`FETCH_RECORDS_COPY_MAX_BYTES`] are copied (a piece costs a send).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, FetchResponse};

use super::header::{encode_response, DecodeError};
use super::response::ResponseFrame;
use crate::constants::FETCH_RECORDS_COPY_MAX_BYTES;
use crate::storage::SendRecords;

/// First Fetch version with flexible (compact) encoding: records carry a varint length.
const FLEXIBLE_VERSION: i16 = 12;
const MARKER_BYTES: usize = 16;

/// The marker of the `index`th replaced records field: a per-response random half, so no
/// topic id, name or other field of the response can hold it, and the index.
fn marker(nonce: u64, index: usize) -> [u8; MARKER_BYTES] {
    let mut m = [0u8; MARKER_BYTES];
    m[..8].copy_from_slice(&nonce.to_be_bytes());
    m[8..].copy_from_slice(&(index as u64).to_be_bytes());
    m
}

/// The codec's length prefix of a records field of `len` bytes at `version`.
fn put_records_len(out: &mut BytesMut, len: usize, version: i16) {
    if version >= FLEXIBLE_VERSION {
        // Compact: unsigned varint of length + 1 (0 is null).
        let mut v = len as u64 + 1;
        while v >= 0x80 {
            out.put_u8((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        out.put_u8(v as u8);
    } else {
        out.put_i32(i32::try_from(len).unwrap_or(i32::MAX));
    }
}

/// How many bytes `put_records_len` writes for `len`.
fn records_len_size(len: usize, version: i16) -> usize {
    if version >= FLEXIBLE_VERSION {
        // 7 bits per varint byte.
        let bits = 64 - (len as u64 + 1).leading_zeros() as usize;
        bits.div_ceil(7).max(1)
    } else {
        4
    }
}

/// Records of the partition at (topic index, partition index) of a response, kept out of
/// it and written in place of its `records` field, in their pieces.
pub type SplicedRecords = Vec<((usize, usize), SendRecords)>;

/// Encodes a Fetch response as a frame whose large record buffers are referenced, not
/// copied: the `records` of each partition in `spliced` (whose own field is ignored) and
/// any other `records` of at least [`FETCH_RECORDS_COPY_MAX_BYTES`].
pub fn encode_fetch_response(
    version: i16,
    correlation_id: i32,
    mut response: FetchResponse,
    spliced: SplicedRecords,
) -> Result<ResponseFrame, DecodeError> {
    let nonce: u64 = rand::random();
    let mut taken: Vec<SendRecords> = Vec::new();
    let mut at: Vec<(usize, usize)> = Vec::new();
    let mut spliced = spliced;
    spliced.sort_by_key(|(where_, _)| *where_);
    let mut spliced = spliced.into_iter().peekable();
    for (t, topic) in response.responses.iter_mut().enumerate() {
        for (p, part) in topic.partitions.iter_mut().enumerate() {
            let real = match spliced.next_if(|(where_, _)| *where_ == (t, p)) {
                Some((_, records)) => records,
                None if part
                    .records
                    .as_ref()
                    .is_some_and(|r| r.len() >= FETCH_RECORDS_COPY_MAX_BYTES) =>
                {
                    SendRecords::one(part.records.take().unwrap_or_default())
                }
                None => continue,
            };
            part.records = Some(Bytes::copy_from_slice(&marker(nonce, taken.len())));
            taken.push(real);
            at.push((t, p));
        }
    }
    if taken.is_empty() {
        return encode_response(ApiKey::Fetch, version, correlation_id, &response)
            .map(ResponseFrame::One);
    }
    let encoded = encode_response(ApiKey::Fetch, version, correlation_id, &response)?;
    if let Some(frame) = splice(&encoded, &taken, nonce, version) {
        return Ok(frame);
    }
    // The markers were not where the codec puts records: encode the plain way.
    for ((t, p), real) in at.into_iter().zip(taken) {
        response.responses[t].partitions[p].records = Some(real.to_bytes());
    }
    encode_response(ApiKey::Fetch, version, correlation_id, &response).map(ResponseFrame::One)
}

/// Cuts `encoded` (a whole frame with markers for records) into pieces around `taken`;
/// `None` if a marker is missing or not preceded by the records length prefix.
fn splice(
    encoded: &Bytes,
    taken: &[SendRecords],
    nonce: u64,
    version: i16,
) -> Option<ResponseFrame> {
    let marker_prefix = records_len_size(MARKER_BYTES, version);
    let mut expected_prefix = BytesMut::with_capacity(8);
    put_records_len(&mut expected_prefix, MARKER_BYTES, version);
    let body_bytes = encoded.len().checked_sub(4)? - taken.len() * (marker_prefix + MARKER_BYTES)
        + taken.iter().map(|r| records_len_size(r.len(), version) + r.len()).sum::<usize>();
    let mut meta = BytesMut::with_capacity(encoded.len() + taken.len() * 5);
    meta.put_u32(u32::try_from(body_bytes).ok()?);
    let pieces_total: usize = taken.iter().map(|r| r.pieces().len()).sum();
    let mut pieces = Vec::with_capacity(taken.len() + pieces_total + 1);
    let mut from = 4;
    for (i, real) in taken.iter().enumerate() {
        let m = marker(nonce, i);
        let at = from + encoded[from..].windows(MARKER_BYTES).position(|w| w == m)?;
        let prefix_at = at.checked_sub(marker_prefix).filter(|p| *p >= from)?;
        if encoded[prefix_at..at] != expected_prefix[..] {
            return None;
        }
        meta.put_slice(&encoded[from..prefix_at]);
        put_records_len(&mut meta, real.len(), version);
        pieces.push(meta.split().freeze());
        pieces.extend(real.pieces().iter().cloned());
        from = at + MARKER_BYTES;
    }
    meta.put_slice(&encoded[from..]);
    pieces.push(meta.freeze());
    Some(ResponseFrame::Pieces(pieces))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::{ResponseHeader, TopicName};
    use kafka_protocol::protocol::{Decodable, StrBytes};

    fn response(sizes: &[usize], version: i16) -> FetchResponse {
        let mut r = FetchResponse::default().with_throttle_time_ms(3);
        if version >= 7 {
            r.session_id = 7;
        }
        let mut t = if version >= 13 {
            FetchableTopicResponse::default().with_topic_id(uuid::Uuid::from_u128(42))
        } else {
            FetchableTopicResponse::default()
                .with_topic(TopicName(StrBytes::from_static_str("catch-up")))
        };
        for (i, n) in sizes.iter().enumerate() {
            let records: Vec<u8> = (0..*n).map(|b| (b * 7 + i) as u8).collect();
            t.partitions.push(
                PartitionData::default()
                    .with_partition_index(i as i32)
                    .with_high_watermark(1000 + i as i64)
                    .with_records(Some(Bytes::from(records))),
            );
        }
        r.responses.push(t);
        r
    }

    #[test]
    fn pieces_equal_the_plain_encoding_at_every_version() {
        let sizes =
            [FETCH_RECORDS_COPY_MAX_BYTES, 10, 0, 200_000, FETCH_RECORDS_COPY_MAX_BYTES - 1];
        for version in 4..=18 {
            let plain =
                encode_response(ApiKey::Fetch, version, 99, &response(&sizes, version)).unwrap();
            let frame =
                encode_fetch_response(version, 99, response(&sizes, version), Vec::new()).unwrap();
            assert!(matches!(frame, ResponseFrame::Pieces(ref p) if p.len() == 5), "v{version}");
            assert_eq!(frame.to_bytes(), plain, "v{version}");
            // And the codec reads it back.
            let mut body = frame.to_bytes().slice(4..);
            let hv = ApiKey::Fetch.response_header_version(version);
            ResponseHeader::decode(&mut body, hv).unwrap();
            let back = FetchResponse::decode(&mut body, version).unwrap();
            assert_eq!(back.responses[0].partitions[3].records.as_ref().unwrap().len(), 200_000);
        }
    }

    #[test]
    fn the_length_prefix_size_matches_what_is_written() {
        for len in [0, 1, 126, 127, 128, 16_383, 16_384, 1 << 20, (1 << 28) - 1, 1 << 28] {
            for version in [11, 12] {
                let mut out = BytesMut::new();
                put_records_len(&mut out, len, version);
                assert_eq!(records_len_size(len, version), out.len(), "{len} at v{version}");
            }
        }
    }

    #[test]
    fn small_records_stay_in_one_buffer() {
        let frame = encode_fetch_response(12, 1, response(&[100, 2000], 12), Vec::new()).unwrap();
        assert!(matches!(frame, ResponseFrame::One(_)));
    }

    #[test]
    fn a_marker_that_is_not_where_records_go_falls_back_to_the_plain_encoding() {
        let r = response(&[FETCH_RECORDS_COPY_MAX_BYTES], 12);
        let encoded = encode_response(ApiKey::Fetch, 12, 1, &r).unwrap();
        // No marker in the frame at all: the splice refuses.
        assert!(splice(&encoded, &[SendRecords::one(Bytes::from_static(b"x"))], 5, 12).is_none());
    }

    /// Records in pieces are written in place of their partition's field, the pieces
    /// themselves in the frame, and the frame equals the plain encoding of the joined bytes.
    #[test]
    fn records_in_pieces_are_spliced_whole() {
        for version in [4, 11, 12, 16] {
            let sizes = [30_000, 10, 50_000];
            let plain =
                encode_response(ApiKey::Fetch, version, 7, &response(&sizes, version)).unwrap();
            let whole = response(&sizes, version);
            let cut = |i: usize, at: &[usize]| {
                let b = whole.responses[0].partitions[i].records.clone().unwrap();
                let mut pieces = Vec::new();
                let mut from = 0;
                for &to in at.iter().chain(std::iter::once(&b.len())) {
                    pieces.push(b.slice(from..to));
                    from = to;
                }
                SendRecords::from_pieces(pieces)
            };
            let spliced = vec![((0, 0), cut(0, &[1, 20_000])), ((0, 1), cut(1, &[3]))];
            let mut r = response(&sizes, version);
            r.responses[0].partitions[0].records = Some(Bytes::from_static(b"ignored"));
            let frame = encode_fetch_response(version, 7, r, spliced).unwrap();
            // Partition 0 in three pieces, 1 in two, 2 whole, around four metadata pieces.
            assert!(matches!(frame, ResponseFrame::Pieces(ref p) if p.len() == 10), "v{version}");
            assert_eq!(frame.to_bytes(), plain, "v{version}");
        }
    }
}
