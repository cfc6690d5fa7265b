//! The coordinator's records in `__transaction_state`, byte for byte Kafka's: the key is
//! `TransactionLogKey` v0 (`int16 version = 0`, `string transactional_id`), the value
//! `TransactionLogValue` v0 (`int16 version = 0`, producer id, epoch, timeout, status,
//! nullable partitions array, last update and start timestamps); a null value (tombstone)
//! removes an expired transactional id. Version 1 values (flexible, Kafka 4 with
//! transaction.version 2) are decoded too, their tagged fields skipped.
//!
//! Pure code. Invariant: `decode(encode(m)) == m` for every meta without pending state.

use std::collections::BTreeSet;

use super::coordinator::{TxnMeta, TxnState};

/// One record of `__transaction_state`: a transactional id and its meta, or `None` (the id
/// was removed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnRecord {
    pub transactional_id: String,
    pub meta: Option<TxnMeta>,
}

/// Encodes the key.
#[must_use]
pub fn encode_key(transactional_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + transactional_id.len());
    out.extend_from_slice(&0i16.to_be_bytes());
    put_string(&mut out, transactional_id);
    out
}

/// Encodes a meta as a v0 value.
#[must_use]
pub fn encode_value(m: &TxnMeta) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&m.producer_id.to_be_bytes());
    out.extend_from_slice(&m.producer_epoch.to_be_bytes());
    out.extend_from_slice(&m.timeout_ms.to_be_bytes());
    out.push(m.state.code() as u8);
    // Kafka writes the partitions grouped by topic (empty array when there are none).
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for (t, p) in &m.partitions {
        match topics.last_mut() {
            Some((name, ps)) if *name == t.as_str() => ps.push(*p),
            _ => topics.push((t.as_str(), vec![*p])),
        }
    }
    out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for (t, ps) in topics {
        put_string(&mut out, t);
        out.extend_from_slice(&(ps.len() as i32).to_be_bytes());
        for p in ps {
            out.extend_from_slice(&p.to_be_bytes());
        }
    }
    out.extend_from_slice(&m.last_update_ms.to_be_bytes());
    out.extend_from_slice(&m.start_ms.to_be_bytes());
    out
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    let len = i16::try_from(s.len()).unwrap_or(i16::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&s.as_bytes()[..len as usize]);
}

/// Decodes a record (`value` `None`: a tombstone).
pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<TxnRecord, String> {
    let mut k = Reader(key);
    let kv = k.i16()?;
    if kv != 0 {
        return Err(format!("unknown transaction log key version {kv}"));
    }
    let transactional_id = k.string()?;
    let Some(value) = value else { return Ok(TxnRecord { transactional_id, meta: None }) };
    let mut r = Reader(value);
    let version = r.i16()?;
    let flexible = match version {
        0 => false,
        1 => true,
        v => return Err(format!("unknown transaction log value version {v}")),
    };
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    let status = r.take(1)?[0] as i8;
    let state = TxnState::from_code(status).ok_or_else(|| format!("unknown status {status}"))?;
    let mut partitions = BTreeSet::new();
    let n = if flexible { r.uvarint()? as i64 - 1 } else { i64::from(r.i32()?) };
    for _ in 0..n.max(0) {
        let topic = if flexible { r.compact_string()? } else { r.string()? };
        let count = if flexible { r.uvarint()? as i64 - 1 } else { i64::from(r.i32()?) };
        for _ in 0..count.max(0) {
            partitions.insert((topic.clone(), r.i32()?));
        }
        if flexible {
            r.skip_tags()?;
        }
    }
    let last_update_ms = r.i64()?;
    let start_ms = r.i64()?;
    let meta = TxnMeta {
        producer_id,
        last_producer_id: -1,
        producer_epoch,
        last_producer_epoch: -1,
        timeout_ms,
        state,
        partitions,
        start_ms,
        last_update_ms,
        pending: None,
    };
    Ok(TxnRecord { transactional_id, meta: Some(meta) })
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("transaction log record truncated".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn i16(&mut self) -> Result<i16, String> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().map_err(|_| "short")?))
    }
    fn i32(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().map_err(|_| "short")?))
    }
    fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().map_err(|_| "short")?))
    }
    fn string(&mut self) -> Result<String, String> {
        let len = usize::try_from(self.i16()?).map_err(|_| "null string")?;
        String::from_utf8(self.take(len)?.to_vec()).map_err(|e| e.to_string())
    }
    fn uvarint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }
    fn compact_string(&mut self) -> Result<String, String> {
        let len = usize::try_from(self.uvarint()?).map_err(|_| "bad length")?;
        let len = len.checked_sub(1).ok_or("null compact string")?;
        String::from_utf8(self.take(len)?.to_vec()).map_err(|e| e.to_string())
    }
    fn skip_tags(&mut self) -> Result<(), String> {
        let n = self.uvarint()?;
        for _ in 0..n {
            let _tag = self.uvarint()?;
            let len = usize::try_from(self.uvarint()?).map_err(|_| "bad length")?;
            self.take(len)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_matches_kafkas_layout() {
        let meta = TxnMeta {
            producer_id: 1000,
            last_producer_id: -1,
            producer_epoch: 3,
            last_producer_epoch: -1,
            timeout_ms: 60_000,
            state: TxnState::Ongoing,
            partitions: [("a".to_string(), 0), ("a".to_string(), 2), ("b".to_string(), 1)]
                .into_iter()
                .collect(),
            start_ms: 5,
            last_update_ms: 6,
            pending: None,
        };
        let key = encode_key("tx-1");
        assert_eq!(key, b"\x00\x00\x00\x04tx-1");
        let value = encode_value(&meta);
        // version, pid, epoch, timeout, status 1 (Ongoing), 2 topics.
        assert_eq!(&value[..2], &[0, 0]);
        assert_eq!(value[16], 1);
        assert_eq!(&value[17..21], &2i32.to_be_bytes());
        let back = decode(&key, Some(&value)).expect("decode");
        assert_eq!(back, TxnRecord { transactional_id: "tx-1".into(), meta: Some(meta) });
        let gone = decode(&key, None).expect("tombstone");
        assert_eq!(gone.meta, None);
        assert!(decode(&key, Some(&value[..20])).is_err());
    }
}
