//! The quorum's wire frames between nodes (layout in `docs/format.md`, "Raft quorum wire
//! frames"): `[len u32][crc32c u32][kind u8][payload]`, big-endian, `len` counting the kind
//! byte and the payload, the CRC covering the same bytes.
//!
//! Pure functions, used by [`super::net`] on the controller shard. Nothing here panics on bad
//! input: every decoder returns an error string, and the connection that sent it is closed.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use protobuf::Message as _;
use raft::prelude::Message;

use super::FRAME_BYTES_MAX;

/// Bytes before a frame's kind byte: length and CRC.
pub const FRAME_HEADER_BYTES: usize = 8;
/// Longest string field (cluster id, one voter) in a hello.
const HELLO_STRING_BYTES_MAX: usize = 1024;
/// Most voters a hello may list.
const HELLO_VOTERS_MAX: usize = 1024;

const KIND_HELLO: u8 = 1;
const KIND_RAFT: u8 = 2;
const KIND_RPC_REQUEST: u8 = 3;
const KIND_RPC_RESPONSE: u8 = 4;

/// First frame on every connection, both ways: who is talking and which cluster it is in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub cluster_id: String,
    pub node_id: u64,
    /// The voters as `"id@host:port"`, sorted.
    pub voters: Vec<String>,
}

/// Status byte of an RPC response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RpcStatus {
    Ok = 0,
    /// The receiver has no handler registered.
    NoHandler = 1,
    /// The receiver is answering too many calls on this connection.
    Busy = 2,
}

/// One decoded frame.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    Hello(Hello),
    Raft(Box<Message>),
    RpcRequest { id: u64, body: Bytes },
    RpcResponse { id: u64, status: RpcStatus, body: Bytes },
}

fn put_str(b: &mut BytesMut, s: &str) {
    let len = s.len().min(HELLO_STRING_BYTES_MAX);
    b.put_u16(u16::try_from(len).unwrap_or(u16::MAX));
    b.put_slice(&s.as_bytes()[..len]);
}

fn get_str(b: &mut Bytes) -> Result<String, String> {
    if b.remaining() < 2 {
        return Err("truncated string length".to_string());
    }
    let len = usize::from(b.get_u16());
    if len > HELLO_STRING_BYTES_MAX || b.remaining() < len {
        return Err(format!("bad string length {len}"));
    }
    String::from_utf8(b.split_to(len).to_vec()).map_err(|_| "string is not UTF-8".to_string())
}

fn wrap(kind: u8, payload: &[u8]) -> Result<Vec<u8>, String> {
    let body_len = payload.len() + 1;
    if body_len > FRAME_BYTES_MAX {
        return Err(format!("frame of {body_len} bytes exceeds {FRAME_BYTES_MAX}"));
    }
    let mut out = Vec::with_capacity(FRAME_HEADER_BYTES + body_len);
    out.extend_from_slice(&u32::try_from(body_len).unwrap_or(u32::MAX).to_be_bytes());
    let mut crc = crc32c::crc32c(&[kind]);
    crc = crc32c::crc32c_append(crc, payload);
    out.extend_from_slice(&crc.to_be_bytes());
    out.push(kind);
    out.extend_from_slice(payload);
    Ok(out)
}

/// Encodes a frame; fails only if it would exceed [`FRAME_BYTES_MAX`].
pub fn encode(frame: &Frame) -> Result<Vec<u8>, String> {
    let mut b = BytesMut::new();
    match frame {
        Frame::Hello(h) => {
            put_str(&mut b, &h.cluster_id);
            b.put_u64(h.node_id);
            b.put_u32(u32::try_from(h.voters.len()).unwrap_or(u32::MAX));
            for v in &h.voters {
                put_str(&mut b, v);
            }
            wrap(KIND_HELLO, &b)
        }
        Frame::Raft(m) => {
            let bytes = m.write_to_bytes().map_err(|e| format!("encode raft message: {e}"))?;
            wrap(KIND_RAFT, &bytes)
        }
        Frame::RpcRequest { id, body } => {
            b.put_u64(*id);
            b.put_slice(body);
            wrap(KIND_RPC_REQUEST, &b)
        }
        Frame::RpcResponse { id, status, body } => {
            b.put_u64(*id);
            b.put_u8(*status as u8);
            b.put_slice(body);
            wrap(KIND_RPC_RESPONSE, &b)
        }
    }
}

/// Reads a frame header: the body length (kind + payload) and its CRC; refuses lengths
/// outside `1..=FRAME_BYTES_MAX` before anything is allocated.
pub fn parse_header(h: &[u8; FRAME_HEADER_BYTES]) -> Result<(usize, u32), String> {
    let len = u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize;
    let crc = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
    if len == 0 || len > FRAME_BYTES_MAX {
        return Err(format!("frame length {len} outside 1..={FRAME_BYTES_MAX}"));
    }
    Ok((len, crc))
}

/// Decodes a frame body (kind + payload) whose header announced `crc`.
pub fn decode_body(body: Bytes, crc: u32) -> Result<Frame, String> {
    if crc32c::crc32c(&body) != crc {
        return Err("frame CRC mismatch".to_string());
    }
    let mut b = body;
    let kind = b.get_u8();
    match kind {
        KIND_HELLO => {
            let cluster_id = get_str(&mut b)?;
            if b.remaining() < 12 {
                return Err("truncated hello".to_string());
            }
            let node_id = b.get_u64();
            let n = b.get_u32() as usize;
            if n > HELLO_VOTERS_MAX {
                return Err(format!("hello lists {n} voters"));
            }
            let voters = (0..n).map(|_| get_str(&mut b)).collect::<Result<Vec<_>, _>>()?;
            Ok(Frame::Hello(Hello { cluster_id, node_id, voters }))
        }
        KIND_RAFT => {
            check_shape(&b, Shape::Message)?;
            let m = Message::parse_from_bytes(&b).map_err(|e| format!("raft message: {e}"))?;
            Ok(Frame::Raft(Box::new(m)))
        }
        KIND_RPC_REQUEST => {
            if b.remaining() < 8 {
                return Err("truncated rpc request".to_string());
            }
            let id = b.get_u64();
            Ok(Frame::RpcRequest { id, body: b })
        }
        KIND_RPC_RESPONSE => {
            if b.remaining() < 9 {
                return Err("truncated rpc response".to_string());
            }
            let id = b.get_u64();
            let status = match b.get_u8() {
                0 => RpcStatus::Ok,
                1 => RpcStatus::NoHandler,
                2 => RpcStatus::Busy,
                s => return Err(format!("unknown rpc status {s}")),
            };
            Ok(Frame::RpcResponse { id, status, body: b })
        }
        k => Err(format!("unknown frame kind {k}")),
    }
}

/// The eraftpb messages a raft frame nests: which fields hold sub-messages.
#[derive(Clone, Copy)]
enum Shape {
    Message,
    Snapshot,
    SnapshotMetadata,
    /// Entry, ConfState: no sub-messages.
    Flat,
}

fn read_varint(b: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos).ok_or("truncated varint")?;
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint too long".to_string())
}

/// Walks a raft message's protobuf encoding (the known nesting, three levels deep) and
/// refuses group wire types anywhere. protobuf 2 skips unknown groups by unbounded recursion
/// (RUSTSEC-2024-0437: a crafted frame overflows the stack); raft messages never contain
/// groups, so refusing them before `parse_from_bytes` closes that path.
fn check_shape(b: &[u8], shape: Shape) -> Result<(), String> {
    let mut pos = 0;
    while pos < b.len() {
        let tag = read_varint(b, &mut pos)?;
        let (field, wire) = (tag >> 3, tag & 7);
        match wire {
            0 => {
                read_varint(b, &mut pos)?;
            }
            1 => pos += 8,
            5 => pos += 4,
            2 => {
                let len = usize::try_from(read_varint(b, &mut pos)?).map_err(|_| "length")?;
                let end =
                    pos.checked_add(len).filter(|e| *e <= b.len()).ok_or("truncated field")?;
                let inner = match (shape, field) {
                    (Shape::Message, 7) => Some(Shape::Flat),
                    (Shape::Message, 9) => Some(Shape::Snapshot),
                    (Shape::Snapshot, 2) => Some(Shape::SnapshotMetadata),
                    (Shape::SnapshotMetadata, 1) => Some(Shape::Flat),
                    _ => None,
                };
                if let Some(inner) = inner {
                    check_shape(&b[pos..end], inner)?;
                }
                pos = end;
            }
            w => return Err(format!("raft message field {field} has wire type {w}")),
        }
    }
    if pos > b.len() {
        return Err("truncated raft message".to_string());
    }
    Ok(())
}

/// Decodes one whole frame from the start of `buf`: the frame and the bytes it took, `None`
/// if `buf` holds only part of it.
pub fn decode(buf: &[u8]) -> Result<Option<(Frame, usize)>, String> {
    let Some(header) = buf.get(..FRAME_HEADER_BYTES) else { return Ok(None) };
    let header: &[u8; FRAME_HEADER_BYTES] = header.try_into().map_err(|_| "header")?;
    let (len, crc) = parse_header(header)?;
    let Some(body) = buf.get(FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + len) else {
        return Ok(None);
    };
    let frame = decode_body(Bytes::copy_from_slice(body), crc)?;
    Ok(Some((frame, FRAME_HEADER_BYTES + len)))
}

/// Why a peer's hello is refused, naming both sides' values; `None` if it is acceptable.
#[must_use]
pub fn check_hello(ours: &Hello, theirs: &Hello) -> Option<String> {
    if theirs.cluster_id != ours.cluster_id {
        return Some(format!(
            "cluster id mismatch: node {} has {:?}, node {} has {:?}",
            ours.node_id, ours.cluster_id, theirs.node_id, theirs.cluster_id
        ));
    }
    if theirs.voters != ours.voters {
        return Some(format!(
            "voter set mismatch: node {} has {:?}, node {} has {:?}",
            ours.node_id, ours.voters, theirs.node_id, theirs.voters
        ));
    }
    if theirs.node_id == ours.node_id || theirs.node_id == 0 {
        return Some(format!("peer claims node id {} (we are {})", theirs.node_id, ours.node_id));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::prelude::{Entry, MessageType};

    fn hello(cluster: &str, id: u64) -> Hello {
        Hello {
            cluster_id: cluster.into(),
            node_id: id,
            voters: vec!["1@127.0.0.1:1".into(), "2@127.0.0.1:2".into()],
        }
    }

    #[test]
    fn frames_round_trip() {
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgAppend);
        m.from = 1;
        m.to = 2;
        m.term = 7;
        m.entries =
            vec![Entry { index: 3, term: 7, data: b"x".to_vec().into(), ..Entry::default() }]
                .into();
        let mut snap = Message::default();
        snap.set_msg_type(MessageType::MsgSnapshot);
        snap.from = 1;
        let s = snap.mut_snapshot();
        s.data = b"state".to_vec().into();
        s.mut_metadata().index = 9;
        s.mut_metadata().mut_conf_state().voters = vec![1, 2, 3];
        s.mut_metadata().mut_conf_state().learners = vec![4];
        let frames = [
            Frame::Hello(hello("c", 1)),
            Frame::Raft(Box::new(m)),
            Frame::Raft(Box::new(snap)),
            Frame::RpcRequest { id: 9, body: Bytes::from_static(b"req") },
            Frame::RpcResponse { id: 9, status: RpcStatus::NoHandler, body: Bytes::new() },
        ];
        let mut stream = Vec::new();
        for f in &frames {
            stream.extend(encode(f).unwrap());
        }
        let mut pos = 0;
        for f in &frames {
            // Every strict prefix of a frame is "need more", never an error.
            let (got, used) = decode(&stream[pos..]).unwrap().unwrap();
            assert_eq!(&got, f);
            for cut in 0..used {
                assert!(decode(&stream[pos..pos + cut]).unwrap().is_none());
            }
            pos += used;
        }
        assert_eq!(pos, stream.len());
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let good = encode(&Frame::Hello(hello("c", 1))).unwrap();
        for i in FRAME_HEADER_BYTES..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            assert!(decode(&bad).is_err(), "flip at {i}");
        }
        let huge = [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0];
        assert!(decode(&huge).is_err());
        assert!(decode(&[0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        // Garbage with a valid CRC: every kind, random payloads.
        for kind in 0..6u8 {
            for len in 0..40usize {
                let payload: Vec<u8> =
                    (0..len).map(|i| (i * 37 + usize::from(kind)) as u8).collect();
                let f = wrap(kind, &payload).unwrap();
                let _ = decode(&f);
            }
        }
    }

    #[test]
    fn nested_groups_are_refused_before_protobuf_sees_them() {
        // A start-group tag (field 20, wire type 3) nested 100,000 deep: protobuf 2 would
        // recurse once per level.
        let bomb: Vec<u8> = [0xa3u8, 0x01].iter().copied().cycle().take(200_000).collect();
        let f = wrap(KIND_RAFT, &bomb).unwrap();
        let err = decode(&f).unwrap_err();
        assert!(err.contains("wire type 3"), "{err}");
        // The same inside an entry.
        let mut inner = vec![0x3a, 2, 0xa3, 0x01]; // field 7 (entries), len 2, group tag
        inner.extend_from_slice(&[0x10, 5]); // field 2 (to) = 5
        let err = decode(&wrap(KIND_RAFT, &inner).unwrap()).unwrap_err();
        assert!(err.contains("wire type 3"), "{err}");
    }

    #[test]
    fn hello_mismatch_names_both_values() {
        let ours = hello("alpha", 1);
        assert_eq!(check_hello(&ours, &hello("alpha", 2)), None);
        let why = check_hello(&ours, &hello("beta", 2)).unwrap();
        assert!(why.contains("alpha") && why.contains("beta"), "{why}");
        let mut other = hello("alpha", 2);
        other.voters.push("3@127.0.0.1:3".into());
        let why = check_hello(&ours, &other).unwrap();
        assert!(why.contains("voter set") && why.contains("3@127.0.0.1:3"), "{why}");
        assert!(check_hello(&ours, &hello("alpha", 1)).is_some());
    }
}
