//! `__consumer_offsets` record encoding with Kafka's own key/value schemas, so Kafka's
//! tools can read the topic and compaction keeps the latest record per key.
//!
//! Keys start with an i16 schema version: 0 and 1 are `OffsetCommitKey` (group, topic,
//! partition), 2 is `GroupMetadataKey` (group). Values: `OffsetCommitValue` v0–v4 and
//! `GroupMetadataValue` v0–v4 (v4 is flexible: compact strings and tagged fields). A
//! record with a null value is a tombstone. We write OffsetCommitValue v3 (v1 when an
//! expire timestamp is set, as Kafka does) and GroupMetadataValue v3, the versions every
//! Kafka 2.x+ tool reads; we read all versions.
//!
//! Pure code, runs on the group's coordinator shard.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use thiserror::Error;

/// Key schema versions in `__consumer_offsets`.
pub const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
pub const GROUP_METADATA_KEY_VERSION: i16 = 2;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum RecordError {
    #[error("record truncated while reading {0}")]
    Truncated(&'static str),
    #[error("unknown key version {0}")]
    UnknownKeyVersion(i16),
    #[error("unknown value version {0}")]
    UnknownValueVersion(i16),
    #[error("invalid {0}")]
    Invalid(&'static str),
}

/// The key of a `__consumer_offsets` record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RecordKey {
    Offset { group: String, topic: String, partition: i32 },
    Group { group: String },
}

/// A committed offset as stored (OffsetCommitValue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
    /// -1 when the commit carries no explicit expiry.
    pub expire_timestamp_ms: i64,
}

/// One member as stored in GroupMetadataValue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

/// A group's membership as stored (GroupMetadataValue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub current_state_timestamp_ms: i64,
    pub members: Vec<StoredMember>,
}

/// A decoded record: key and value, `None` value for a tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Offset { group: String, topic: String, partition: i32, value: Option<OffsetValue> },
    Group { group: String, value: Option<GroupValue> },
}

impl Record {
    /// Encodes to (key, value) bytes; a tombstone has no value.
    #[must_use]
    pub fn encode(&self) -> (Bytes, Option<Bytes>) {
        match self {
            Record::Offset { group, topic, partition, value } => {
                let mut key = BytesMut::new();
                key.put_i16(OFFSET_COMMIT_KEY_VERSION);
                put_str(&mut key, group);
                put_str(&mut key, topic);
                key.put_i32(*partition);
                (key.freeze(), value.as_ref().map(encode_offset_value))
            }
            Record::Group { group, value } => {
                let mut key = BytesMut::new();
                key.put_i16(GROUP_METADATA_KEY_VERSION);
                put_str(&mut key, group);
                (key.freeze(), value.as_ref().map(encode_group_value))
            }
        }
    }

    /// Decodes a record from its key and optional value.
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Record, RecordError> {
        match decode_key(key)? {
            RecordKey::Offset { group, topic, partition } => {
                let value = value.map(decode_offset_value).transpose()?;
                Ok(Record::Offset { group, topic, partition, value })
            }
            RecordKey::Group { group } => {
                let value = value.map(decode_group_value).transpose()?;
                Ok(Record::Group { group, value })
            }
        }
    }
}

pub fn decode_key(mut buf: &[u8]) -> Result<RecordKey, RecordError> {
    let version = get_i16(&mut buf, "key version")?;
    match version {
        0 | 1 => Ok(RecordKey::Offset {
            group: get_str(&mut buf, false)?,
            topic: get_str(&mut buf, false)?,
            partition: get_i32(&mut buf, "partition")?,
        }),
        2 => Ok(RecordKey::Group { group: get_str(&mut buf, false)? }),
        v => Err(RecordError::UnknownKeyVersion(v)),
    }
}

fn encode_offset_value(v: &OffsetValue) -> Bytes {
    let mut buf = BytesMut::new();
    if v.expire_timestamp_ms >= 0 {
        buf.put_i16(1);
        buf.put_i64(v.offset);
        put_str(&mut buf, &v.metadata);
        buf.put_i64(v.commit_timestamp_ms);
        buf.put_i64(v.expire_timestamp_ms);
    } else {
        buf.put_i16(3);
        buf.put_i64(v.offset);
        buf.put_i32(v.leader_epoch);
        put_str(&mut buf, &v.metadata);
        buf.put_i64(v.commit_timestamp_ms);
    }
    buf.freeze()
}

pub fn decode_offset_value(mut buf: &[u8]) -> Result<OffsetValue, RecordError> {
    let version = get_i16(&mut buf, "value version")?;
    if !(0..=4).contains(&version) {
        return Err(RecordError::UnknownValueVersion(version));
    }
    let flexible = version >= 4;
    let offset = get_i64(&mut buf, "offset")?;
    let leader_epoch = if version >= 3 { get_i32(&mut buf, "leader epoch")? } else { -1 };
    let metadata = get_str(&mut buf, flexible)?;
    let commit_timestamp_ms = get_i64(&mut buf, "commit timestamp")?;
    let expire_timestamp_ms =
        if version == 1 { get_i64(&mut buf, "expire timestamp")? } else { -1 };
    if flexible {
        skip_tagged(&mut buf)?;
    }
    Ok(OffsetValue { offset, leader_epoch, metadata, commit_timestamp_ms, expire_timestamp_ms })
}

fn encode_group_value(v: &GroupValue) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(3);
    put_str(&mut buf, &v.protocol_type);
    buf.put_i32(v.generation);
    put_nullable_str(&mut buf, v.protocol.as_deref());
    put_nullable_str(&mut buf, v.leader.as_deref());
    buf.put_i64(v.current_state_timestamp_ms);
    buf.put_i32(i32::try_from(v.members.len()).unwrap_or(i32::MAX));
    for m in &v.members {
        put_str(&mut buf, &m.member_id);
        put_nullable_str(&mut buf, m.group_instance_id.as_deref());
        put_str(&mut buf, &m.client_id);
        put_str(&mut buf, &m.client_host);
        buf.put_i32(m.rebalance_timeout_ms);
        buf.put_i32(m.session_timeout_ms);
        put_bytes(&mut buf, &m.subscription);
        put_bytes(&mut buf, &m.assignment);
    }
    buf.freeze()
}

pub fn decode_group_value(mut buf: &[u8]) -> Result<GroupValue, RecordError> {
    let version = get_i16(&mut buf, "value version")?;
    if !(0..=4).contains(&version) {
        return Err(RecordError::UnknownValueVersion(version));
    }
    let flex = version >= 4;
    let protocol_type = get_str(&mut buf, flex)?;
    let generation = get_i32(&mut buf, "generation")?;
    let protocol = get_nullable_str(&mut buf, flex)?;
    let leader = get_nullable_str(&mut buf, flex)?;
    let current_state_timestamp_ms =
        if version >= 2 { get_i64(&mut buf, "timestamp")? } else { -1 };
    let count = get_array_len(&mut buf, flex)?;
    let mut members = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        members.push(decode_member(&mut buf, version)?);
    }
    if flex {
        skip_tagged(&mut buf)?;
    }
    Ok(GroupValue {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp_ms,
        members,
    })
}

fn decode_member(buf: &mut &[u8], version: i16) -> Result<StoredMember, RecordError> {
    let flex = version >= 4;
    let member_id = get_str(buf, flex)?;
    let group_instance_id = if version >= 3 { get_nullable_str(buf, flex)? } else { None };
    let client_id = get_str(buf, flex)?;
    let client_host = get_str(buf, flex)?;
    let session_or_rebalance = get_i32(buf, "timeout")?;
    let (rebalance_timeout_ms, session_timeout_ms) = if version >= 1 {
        (session_or_rebalance, get_i32(buf, "session timeout")?)
    } else {
        (session_or_rebalance, session_or_rebalance)
    };
    let subscription = get_bytes(buf, flex)?;
    let assignment = get_bytes(buf, flex)?;
    if flex {
        skip_tagged(buf)?;
    }
    Ok(StoredMember {
        member_id,
        group_instance_id,
        client_id,
        client_host,
        rebalance_timeout_ms,
        session_timeout_ms,
        subscription,
        assignment,
    })
}

// ------------------------------------------------------------------ primitives

fn put_str(buf: &mut BytesMut, s: &str) {
    buf.put_i16(i16::try_from(s.len()).unwrap_or(i16::MAX));
    buf.put_slice(&s.as_bytes()[..s.len().min(i16::MAX as usize)]);
}

fn put_nullable_str(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_str(buf, s),
        None => buf.put_i16(-1),
    }
}

fn put_bytes(buf: &mut BytesMut, b: &[u8]) {
    buf.put_i32(i32::try_from(b.len()).unwrap_or(i32::MAX));
    buf.put_slice(b);
}

fn need(buf: &[u8], n: usize, what: &'static str) -> Result<(), RecordError> {
    if buf.len() < n {
        Err(RecordError::Truncated(what))
    } else {
        Ok(())
    }
}

fn get_i16(buf: &mut &[u8], what: &'static str) -> Result<i16, RecordError> {
    need(buf, 2, what)?;
    Ok(buf.get_i16())
}

fn get_i32(buf: &mut &[u8], what: &'static str) -> Result<i32, RecordError> {
    need(buf, 4, what)?;
    Ok(buf.get_i32())
}

fn get_i64(buf: &mut &[u8], what: &'static str) -> Result<i64, RecordError> {
    need(buf, 8, what)?;
    Ok(buf.get_i64())
}

fn get_varint_u(buf: &mut &[u8]) -> Result<u64, RecordError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        need(buf, 1, "varint")?;
        let byte = buf.get_u8();
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(RecordError::Invalid("varint"))
}

/// Length of a string/bytes/array: `None` for null.
fn get_len(buf: &mut &[u8], flexible: bool, wide: bool) -> Result<Option<usize>, RecordError> {
    if flexible {
        let n = get_varint_u(buf)?;
        return Ok(n.checked_sub(1).map(|n| usize::try_from(n).unwrap_or(usize::MAX)));
    }
    let n = if wide { get_i32(buf, "length")? } else { i32::from(get_i16(buf, "length")?) };
    Ok(usize::try_from(n).ok())
}

fn get_raw<'a>(buf: &mut &'a [u8], n: usize, what: &'static str) -> Result<&'a [u8], RecordError> {
    need(buf, n, what)?;
    let (head, tail) = buf.split_at(n);
    *buf = tail;
    Ok(head)
}

fn get_nullable_str(buf: &mut &[u8], flexible: bool) -> Result<Option<String>, RecordError> {
    match get_len(buf, flexible, false)? {
        None => Ok(None),
        Some(n) => {
            let raw = get_raw(buf, n, "string")?;
            String::from_utf8(raw.to_vec()).map(Some).map_err(|_| RecordError::Invalid("utf-8"))
        }
    }
}

fn get_str(buf: &mut &[u8], flexible: bool) -> Result<String, RecordError> {
    get_nullable_str(buf, flexible)?.ok_or(RecordError::Invalid("null string"))
}

fn get_bytes(buf: &mut &[u8], flexible: bool) -> Result<Bytes, RecordError> {
    match get_len(buf, flexible, true)? {
        None => Ok(Bytes::new()),
        Some(n) => Ok(Bytes::copy_from_slice(get_raw(buf, n, "bytes")?)),
    }
}

fn get_array_len(buf: &mut &[u8], flexible: bool) -> Result<usize, RecordError> {
    Ok(get_len(buf, flexible, true)?.unwrap_or(0))
}

fn skip_tagged(buf: &mut &[u8]) -> Result<(), RecordError> {
    let count = get_varint_u(buf)?;
    for _ in 0..count {
        get_varint_u(buf)?;
        let size = usize::try_from(get_varint_u(buf)?).map_err(|_| RecordError::Invalid("tag"))?;
        get_raw(buf, size, "tagged field")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset_record(expire: i64) -> Record {
        Record::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
            value: Some(OffsetValue {
                offset: 42,
                leader_epoch: if expire >= 0 { -1 } else { 7 },
                metadata: "meta".into(),
                commit_timestamp_ms: 1000,
                expire_timestamp_ms: expire,
            }),
        }
    }

    #[test]
    fn offset_commit_round_trips_v3_and_v1() {
        for expire in [-1, 5000] {
            let rec = offset_record(expire);
            let (key, value) = rec.encode();
            assert_eq!(&key[..2], &[0, 1]);
            let value = value.expect("value");
            assert_eq!(value[1], if expire >= 0 { 1 } else { 3 });
            assert_eq!(Record::decode(&key, Some(&value)), Ok(rec));
        }
    }

    #[test]
    fn offset_commit_key_matches_kafka_bytes() {
        let (key, _) = offset_record(-1).encode();
        // version 1, "g", "t", partition 3
        assert_eq!(&key[..], &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3]);
    }

    #[test]
    fn group_metadata_round_trips_and_tombstones() {
        let value = GroupValue {
            protocol_type: "consumer".into(),
            generation: 5,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            current_state_timestamp_ms: 99,
            members: vec![StoredMember {
                member_id: "m1".into(),
                group_instance_id: Some("i1".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"asg"),
            }],
        };
        let rec = Record::Group { group: "g".into(), value: Some(value) };
        let (key, val) = rec.encode();
        assert_eq!(&key[..], &[0, 2, 0, 1, b'g']);
        assert_eq!(Record::decode(&key, val.as_deref()), Ok(rec));
        let tomb = Record::Group { group: "g".into(), value: None };
        let (key, val) = tomb.encode();
        assert!(val.is_none());
        assert_eq!(Record::decode(&key, None), Ok(tomb));
    }

    #[test]
    fn decodes_flexible_v4_offset_value() {
        // v4: offset, epoch, compact string "m", timestamp, no tags.
        let mut buf = BytesMut::new();
        buf.put_i16(4);
        buf.put_i64(10);
        buf.put_i32(2);
        buf.put_u8(2);
        buf.put_u8(b'm');
        buf.put_i64(77);
        buf.put_u8(0);
        let v = decode_offset_value(&buf).expect("v4");
        assert_eq!(
            (v.offset, v.leader_epoch, v.metadata.as_str(), v.commit_timestamp_ms),
            (10, 2, "m", 77)
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(Record::decode(&[0, 9, 0, 0], None).is_err());
        assert!(Record::decode(&[0, 1, 0, 5, b'a'], None).is_err());
        assert!(decode_group_value(&[0, 3, 0, 1]).is_err());
        assert!(decode_offset_value(&[0, 7]).is_err());
    }
}
