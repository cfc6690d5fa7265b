//! Copies of batches carved out of large shared chunks, for the bytes the batch cache keeps.
//!
//! One per shard, inside the shard's [`super::cache::BatchCache`]; never crosses threads.
//! Why: the cache keeps every recent batch and frees them oldest first. With one heap
//! allocation per batch (~100 B each for a low-linger producer) that churn left jemalloc's
//! small-size slabs part-full, and RSS outside the live heap grew 6 → 20+ MiB within a
//! 10-minute soak lifetime (issue 19, perf/results/2026-12-02-allocator.md). Carved from
//! [`BATCH_ARENA_CHUNK_BYTES`] chunks filled in insertion order, batches cached together are
//! evicted together, and a chunk goes back to the allocator whole, as one large extent,
//! once its last piece is dropped.
//!
//! Invariants: a piece is a view of its chunk (`BytesMut::split` shares the allocation, so
//! a chunk lives while any piece does); batches over [`BATCH_ARENA_PIECE_MAX_BYTES`] get an
//! allocation of their own, so the tail a chunk leaves unused when the next piece does not
//! fit is at most that size, 1/16 of a chunk.

use std::cell::RefCell;

use bytes::BytesMut;

use crate::constants::{BATCH_ARENA_CHUNK_BYTES, BATCH_ARENA_PIECE_MAX_BYTES};

/// The chunk being filled; see the module doc.
#[derive(Default)]
pub struct BatchArena {
    chunk: RefCell<BytesMut>,
}

impl BatchArena {
    /// A copy of `src` in memory of its own (never a view of `src`'s buffer), writable before
    /// it is frozen (offsets and epoch are patched into a produced batch).
    pub fn copy(&self, src: &[u8]) -> BytesMut {
        if src.len() > BATCH_ARENA_PIECE_MAX_BYTES {
            return BytesMut::from(src);
        }
        let mut chunk = self.chunk.borrow_mut();
        if chunk.capacity() < src.len() {
            // The old chunk's pieces keep it alive; its unused tail goes with it.
            *chunk = BytesMut::with_capacity(BATCH_ARENA_CHUNK_BYTES);
        }
        // Fits in the remaining capacity, so this never reallocates the shared chunk.
        chunk.extend_from_slice(src);
        chunk.split()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(b: &[u8]) -> usize {
        b.as_ptr() as usize
    }

    #[test]
    fn small_copies_share_a_chunk_in_order_and_do_not_alias_the_source() {
        let arena = BatchArena::default();
        let src = vec![7u8; 100];
        let a = arena.copy(&src);
        let mut b = arena.copy(&[1, 2, 3]);
        assert_eq!((&a[..], &b[..]), (&src[..], &[1u8, 2, 3][..]));
        assert_eq!(addr(&b), addr(&a) + 100, "consecutive pieces of one chunk");
        assert_ne!(addr(&a), addr(&src));
        // A piece is writable without touching its neighbour.
        b[0] = 9;
        assert_eq!((a[99], b[0]), (7, 9));
        let frozen = a.freeze();
        drop(b);
        assert_eq!(frozen.len(), 100);
    }

    #[test]
    fn a_full_chunk_is_replaced_and_large_batches_get_their_own_allocation() {
        let arena = BatchArena::default();
        let piece = vec![1u8; BATCH_ARENA_PIECE_MAX_BYTES];
        let first = arena.copy(&piece);
        let mut pieces = vec![];
        for _ in 1..BATCH_ARENA_CHUNK_BYTES / BATCH_ARENA_PIECE_MAX_BYTES {
            pieces.push(arena.copy(&piece));
        }
        let next_chunk = arena.copy(&piece);
        let chunk = addr(&first)..addr(&first) + BATCH_ARENA_CHUNK_BYTES;
        assert!(pieces.iter().all(|p| chunk.contains(&addr(p))));
        assert!(!chunk.contains(&addr(&next_chunk)), "a new chunk once the first is full");
        let big = arena.copy(&vec![2u8; BATCH_ARENA_PIECE_MAX_BYTES + 1]);
        assert_eq!(big.len(), BATCH_ARENA_PIECE_MAX_BYTES + 1);
        let after = arena.copy(&[3]);
        assert_eq!(addr(&after), addr(&next_chunk) + BATCH_ARENA_PIECE_MAX_BYTES);
    }
}
