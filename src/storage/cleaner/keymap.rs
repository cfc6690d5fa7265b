//! The cleaner's bounded key → latest offset map (Kafka's `SkimpyOffsetMap`): keys are stored
//! as 128-bit hashes, so an entry costs a fixed [`KEY_MAP_ENTRY_BYTES`] whatever the key size,
//! and the map refuses new keys once `log.cleaner.dedupe.buffer.size` (this shard's share)
//! is used. The cleaner then cleans only up to the last offset it could map.
//!
//! Pure data structure, one per cleaner pass on the log's owner shard. Invariant: `len() <=
//! capacity()`; a refused `put` changes nothing. Two distinct keys sharing a 128-bit hash
//! would let the older one's records be removed, as with Kafka's MD5 map; at 2^-64 odds per
//! pair within one map, that is far below the disk's own error rate.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

/// Memory accounted per entry: the 16-byte hash, the 8-byte offset, and the hash table's
/// control byte and spare capacity, rounded up.
pub const KEY_MAP_ENTRY_BYTES: usize = 40;

/// A bounded map from key hash to the offset of the key's latest record.
#[derive(Debug)]
pub struct OffsetMap {
    entries: HashMap<u128, i64>,
    capacity: usize,
    /// The largest offset put so far (-1 when empty).
    latest_offset: i64,
}

fn key_hash(key: &[u8]) -> u128 {
    let half = |salt: u8| {
        let mut h = DefaultHasher::new();
        salt.hash(&mut h);
        key.hash(&mut h);
        h.finish()
    };
    (u128::from(half(0)) << 64) | u128::from(half(1))
}

impl OffsetMap {
    /// A map that uses at most about `memory_bytes` (at least one entry).
    #[must_use]
    pub fn with_memory(memory_bytes: usize) -> Self {
        OffsetMap {
            entries: HashMap::new(),
            capacity: (memory_bytes / KEY_MAP_ENTRY_BYTES).max(1),
            latest_offset: -1,
        }
    }

    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    #[must_use]
    pub fn latest_offset(&self) -> i64 {
        self.latest_offset
    }

    /// Records `offset` as `key`'s latest; false (and no change) when the key is new and the
    /// map is full. Offsets must be put in increasing order.
    pub fn put(&mut self, key: &[u8], offset: i64) -> bool {
        let h = key_hash(key);
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&h) {
            return false;
        }
        self.entries.insert(h, offset);
        self.latest_offset = self.latest_offset.max(offset);
        true
    }

    /// The offset of `key`'s latest mapped record.
    #[must_use]
    pub fn get(&self, key: &[u8]) -> Option<i64> {
        self.entries.get(&key_hash(key)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_latest_wins() {
        let mut m = OffsetMap::with_memory(3 * KEY_MAP_ENTRY_BYTES);
        assert_eq!(m.capacity(), 3);
        assert!(m.put(b"a", 0) && m.put(b"b", 1) && m.put(b"c", 2));
        assert!(!m.put(b"d", 3), "full: a new key is refused");
        assert_eq!(m.get(b"d"), None);
        assert!(m.put(b"a", 4), "an existing key is updated when full");
        assert_eq!(
            (m.get(b"a"), m.get(b"b"), m.len(), m.latest_offset()),
            (Some(4), Some(1), 3, 4)
        );
        assert_eq!(OffsetMap::with_memory(0).capacity(), 1);
    }
}
