//! Byte encoding of the quorum store's records (layout in `docs/format.md`, "Raft quorum").
//!
//! Pure functions, used by [`super::store`] on the controller shard. A frame is
//! `[body length u32][crc32 u32 of body][body]`, big-endian; a body starts with a kind byte
//! and a version byte, and a reader refuses versions it does not know. The codec is ours, not
//! protobuf's: the files stay readable without raft-rs's generated types, and no protobuf
//! parser runs on bytes read from disk.

use bytes::Bytes;
use raft::prelude::{ConfState, Entry, EntryType, HardState, Snapshot, SnapshotMetadata};

/// Bytes before a frame's body: length and CRC.
pub const FRAME_HEADER_BYTES: usize = 8;
const VERSION_0: u8 = 0;
const KIND_ENTRY: u8 = 1;
const KIND_HARD_STATE: u8 = 2;
const KIND_MARK: u8 = 3;
const KIND_SNAPSHOT: u8 = 4;

/// One record of the log file.
#[derive(Clone, Debug, PartialEq)]
pub enum Record {
    /// A log entry (a later entry with the same or a lower index replaces the tail).
    Entry(Entry),
    /// The latest term, vote and commit index.
    HardState(HardState),
    /// First record of a log file: the file continues the snapshot at (index, term).
    Mark { index: u64, term: u64 },
}

/// Wraps `body` in a frame.
#[must_use]
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FRAME_HEADER_BYTES + body.len());
    let len = u32::try_from(body.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&crc32fast::hash(body).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// What a frame at the start of `buf` holds: `Ok(Some((body, frame length)))`, `Ok(None)`
/// when `buf` is too short or the length is zero (the zero padding after the last write),
/// `Err` when the length exceeds `max` or the CRC does not match.
pub fn unframe(buf: &[u8], max: u64) -> Result<Option<(&[u8], usize)>, String> {
    let Some(header) = buf.get(..FRAME_HEADER_BYTES) else { return Ok(None) };
    let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
    let crc = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
    if len == 0 {
        return Ok(None);
    }
    if u64::from(len) > max {
        return Err(format!("frame length {len} exceeds {max}"));
    }
    let end = FRAME_HEADER_BYTES + len as usize;
    let Some(body) = buf.get(FRAME_HEADER_BYTES..end) else { return Ok(None) };
    if crc32fast::hash(body) != crc {
        return Err("frame CRC mismatch".to_string());
    }
    Ok(Some((body, end)))
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&u32::try_from(b.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(b);
}

fn put_ids(out: &mut Vec<u8>, ids: &[u64]) {
    out.extend_from_slice(&u32::try_from(ids.len()).unwrap_or(u32::MAX).to_be_bytes());
    for id in ids {
        out.extend_from_slice(&id.to_be_bytes());
    }
}

/// Encodes a log record's body.
#[must_use]
pub fn encode_record(rec: &Record) -> Vec<u8> {
    let mut out = Vec::new();
    match rec {
        Record::Entry(e) => {
            out.extend_from_slice(&[KIND_ENTRY, VERSION_0]);
            out.extend_from_slice(&e.term.to_be_bytes());
            out.extend_from_slice(&e.index.to_be_bytes());
            out.push(entry_type_byte(e.entry_type));
            put_bytes(&mut out, &e.data);
            put_bytes(&mut out, &e.context);
        }
        Record::HardState(hs) => {
            out.extend_from_slice(&[KIND_HARD_STATE, VERSION_0]);
            for v in [hs.term, hs.vote, hs.commit] {
                out.extend_from_slice(&v.to_be_bytes());
            }
        }
        Record::Mark { index, term } => {
            out.extend_from_slice(&[KIND_MARK, VERSION_0]);
            out.extend_from_slice(&index.to_be_bytes());
            out.extend_from_slice(&term.to_be_bytes());
        }
    }
    out
}

fn entry_type_byte(t: EntryType) -> u8 {
    match t {
        EntryType::EntryNormal => 0,
        EntryType::EntryConfChange => 1,
        EntryType::EntryConfChangeV2 => 2,
    }
}

/// Encodes a snapshot file's body: metadata, membership, the state machine's bytes.
#[must_use]
pub fn encode_snapshot(snap: &Snapshot) -> Vec<u8> {
    let meta = snap.get_metadata();
    let cs = meta.get_conf_state();
    let mut out = vec![KIND_SNAPSHOT, VERSION_0];
    out.extend_from_slice(&meta.index.to_be_bytes());
    out.extend_from_slice(&meta.term.to_be_bytes());
    for ids in [&cs.voters, &cs.learners, &cs.voters_outgoing, &cs.learners_next] {
        put_ids(&mut out, ids);
    }
    out.push(u8::from(cs.auto_leave));
    out.extend_from_slice(&(snap.data.len() as u64).to_be_bytes());
    out.extend_from_slice(&snap.data);
    out
}

/// A read cursor over a record body; every getter fails past the end.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("record body too short".to_string());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, String> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(a))
    }
    fn bytes(&mut self) -> Result<Bytes, String> {
        let n = self.u32()? as usize;
        Ok(Bytes::copy_from_slice(self.take(n)?))
    }
    fn ids(&mut self) -> Result<Vec<u64>, String> {
        let n = self.u32()? as usize;
        if n > self.0.len() / 8 {
            return Err(format!("{n} ids do not fit the record"));
        }
        (0..n).map(|_| self.u64()).collect()
    }
    fn kind(&mut self, want: Option<u8>) -> Result<u8, String> {
        let kind = self.u8()?;
        let version = self.u8()?;
        if version != VERSION_0 {
            return Err(format!("record kind {kind} has unknown version {version}"));
        }
        match want {
            Some(w) if w != kind => Err(format!("record kind {kind}, expected {w}")),
            _ => Ok(kind),
        }
    }
    fn end(&self) -> Result<(), String> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(format!("{} stray bytes after the record", self.0.len()))
        }
    }
}

/// Decodes a log record's body.
pub fn decode_record(body: &[u8]) -> Result<Record, String> {
    let mut c = Cursor(body);
    let rec = match c.kind(None)? {
        KIND_ENTRY => {
            let mut e = Entry { term: c.u64()?, index: c.u64()?, ..Entry::default() };
            e.entry_type = match c.u8()? {
                0 => EntryType::EntryNormal,
                1 => EntryType::EntryConfChange,
                2 => EntryType::EntryConfChangeV2,
                t => return Err(format!("unknown entry type {t}")),
            };
            e.data = c.bytes()?;
            e.context = c.bytes()?;
            Record::Entry(e)
        }
        KIND_HARD_STATE => Record::HardState(HardState {
            term: c.u64()?,
            vote: c.u64()?,
            commit: c.u64()?,
            ..HardState::default()
        }),
        KIND_MARK => Record::Mark { index: c.u64()?, term: c.u64()? },
        kind => return Err(format!("unknown record kind {kind}")),
    };
    c.end()?;
    Ok(rec)
}

/// Decodes a snapshot file's body.
pub fn decode_snapshot(body: &[u8]) -> Result<Snapshot, String> {
    let mut c = Cursor(body);
    c.kind(Some(KIND_SNAPSHOT))?;
    let mut meta = SnapshotMetadata { index: c.u64()?, term: c.u64()?, ..Default::default() };
    let cs = ConfState {
        voters: c.ids()?,
        learners: c.ids()?,
        voters_outgoing: c.ids()?,
        learners_next: c.ids()?,
        auto_leave: c.u8()? != 0,
        ..ConfState::default()
    };
    meta.set_conf_state(cs);
    let len = usize::try_from(c.u64()?).map_err(|_| "snapshot data too large".to_string())?;
    let data = Bytes::copy_from_slice(c.take(len)?);
    c.end()?;
    let mut snap = Snapshot { data, ..Snapshot::default() };
    snap.set_metadata(meta);
    Ok(snap)
}
