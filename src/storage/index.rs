//! Sparse offset index (`.index`) and time index (`.timeindex`) of one segment, kept in
//! memory and written whole when a segment is sealed or the log closes.
//!
//! Owned by the segment, on the partition's owner shard. Entries are big-endian as in Kafka:
//! `.index` = (relative offset u32, position u32), one per `index.interval.bytes`, keyed by the
//! batch's *last* offset; `.timeindex` = (timestamp i64, relative offset u32) with strictly
//! increasing timestamps. Invariant: both are sorted by every field.

use bytes::{Buf, BufMut};

pub const OFFSET_INDEX_ENTRY_BYTES: usize = 8;
pub const TIME_INDEX_ENTRY_BYTES: usize = 12;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OffsetIndex {
    pub entries: Vec<(u32, u32)>,
}

impl OffsetIndex {
    /// Position to start scanning from for relative offset `rel`: the largest entry whose
    /// offset is <= `rel` (0 if none).
    #[must_use]
    pub fn lookup(&self, rel: u32) -> u32 {
        let i = self.entries.partition_point(|(o, _)| *o <= rel);
        if i == 0 {
            0
        } else {
            self.entries[i - 1].1
        }
    }

    pub fn push(&mut self, rel: u32, position: u32) {
        if self.entries.last().is_none_or(|(o, p)| *o < rel && *p < position) {
            self.entries.push((rel, position));
        }
    }

    /// Drops entries at or past byte `position` (truncation).
    pub fn truncate_to_position(&mut self, position: u32) {
        self.entries.retain(|(_, p)| *p < position);
    }

    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * OFFSET_INDEX_ENTRY_BYTES);
        for (o, p) in &self.entries {
            out.put_u32(*o);
            out.put_u32(*p);
        }
        out
    }

    /// Parses and sanity-checks an index file: whole entries, strictly increasing, positions
    /// below `log_size`.
    pub fn from_bytes(mut b: &[u8], log_size: u64) -> Result<OffsetIndex, String> {
        if b.len() % OFFSET_INDEX_ENTRY_BYTES != 0 {
            return Err(format!("size {} is not a multiple of 8", b.len()));
        }
        let mut idx = OffsetIndex::default();
        while b.has_remaining() {
            let (o, p) = (b.get_u32(), b.get_u32());
            if idx.entries.last().is_some_and(|(lo, lp)| *lo >= o || *lp >= p) {
                return Err(format!("entry ({o}, {p}) is not increasing"));
            }
            if u64::from(p) >= log_size {
                return Err(format!("position {p} past the log size {log_size}"));
            }
            idx.entries.push((o, p));
        }
        Ok(idx)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimeIndex {
    pub entries: Vec<(i64, u32)>,
}

impl TimeIndex {
    /// Relative offset to start scanning from for the first record with timestamp >=
    /// `target_ms`: the last entry with a timestamp strictly below it (every record up to
    /// that entry's offset is older), else 0.
    #[must_use]
    pub fn lookup(&self, target_ms: i64) -> u32 {
        let i = self.entries.partition_point(|(t, _)| *t < target_ms);
        if i == 0 {
            0
        } else {
            self.entries[i - 1].1
        }
    }

    pub fn push(&mut self, timestamp_ms: i64, rel: u32) {
        if self.entries.last().is_none_or(|(t, o)| *t < timestamp_ms && *o <= rel) {
            self.entries.push((timestamp_ms, rel));
        }
    }

    /// Drops entries for relative offsets >= `rel` (truncation).
    pub fn truncate_to_offset(&mut self, rel: u32) {
        self.entries.retain(|(_, o)| *o < rel);
    }

    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * TIME_INDEX_ENTRY_BYTES);
        for (t, o) in &self.entries {
            out.put_i64(*t);
            out.put_u32(*o);
        }
        out
    }

    pub fn from_bytes(mut b: &[u8]) -> Result<TimeIndex, String> {
        if b.len() % TIME_INDEX_ENTRY_BYTES != 0 {
            return Err(format!("size {} is not a multiple of 12", b.len()));
        }
        let mut idx = TimeIndex::default();
        while b.has_remaining() {
            let (t, o) = (b.get_i64(), b.get_u32());
            if idx.entries.last().is_some_and(|(lt, lo)| *lt >= t || *lo > o) {
                return Err(format!("entry ({t}, {o}) is not increasing"));
            }
            idx.entries.push((t, o));
        }
        Ok(idx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_index_lookup_and_roundtrip() {
        let mut idx = OffsetIndex::default();
        for i in 1..100u32 {
            idx.push(i * 10, i * 4096);
        }
        assert_eq!(idx.lookup(5), 0);
        assert_eq!(idx.lookup(10), 4096);
        assert_eq!(idx.lookup(15), 4096);
        assert_eq!(idx.lookup(10_000), 99 * 4096);
        let back = OffsetIndex::from_bytes(&idx.to_bytes(), 1 << 30).unwrap();
        assert_eq!(back, idx);
        assert!(OffsetIndex::from_bytes(&idx.to_bytes(), 4096).is_err());
        idx.truncate_to_position(8192);
        assert_eq!(idx.entries.len(), 1);
    }

    #[test]
    fn time_index_lookup_is_strictly_below() {
        let mut t = TimeIndex::default();
        t.push(100, 5);
        t.push(200, 9);
        t.push(150, 12); // not increasing: ignored
        assert_eq!(t.lookup(100), 0);
        assert_eq!(t.lookup(101), 5);
        assert_eq!(t.lookup(1000), 9);
        assert_eq!(TimeIndex::from_bytes(&t.to_bytes()).unwrap(), t);
    }
}
