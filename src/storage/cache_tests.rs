//! Unit tests of `storage::cache` (the chunks, eviction, adopted read-ahead buffers).

use super::*;

fn batch(len: usize, fill: u8) -> Bytes {
    Bytes::from(vec![fill; len])
}

#[test]
fn finds_the_containing_batch_and_drops_truncated_ones() {
    let c = BatchCache::new(1 << 20);
    c.insert(1, 0, 4, Bytes::from_static(b"aaaa"));
    c.insert(1, 5, 9, Bytes::from_static(b"bbbb"));
    c.insert(2, 0, 0, Bytes::from_static(b"other"));
    assert_eq!(c.get(1, 7).map(|e| (e.0, e.1, e.2)), Some((5, 9, Bytes::from_static(b"bbbb"))));
    assert_eq!(c.get(1, 4).map(|e| e.0), Some(0));
    assert!(c.get(1, 10).is_none() && c.get(3, 0).is_none());
    assert_eq!(c.cached_run(1, 0, 1 << 20), (10, 8));
    assert_eq!(c.cached_run(1, 2, 3), (5, 4), "stops once max_bytes is reached");
    c.invalidate_from(1, 9);
    assert!(c.get(1, 5).is_none() && c.get(1, 2).is_some() && c.get(2, 0).is_some());
    // Out-of-order inserts (a read-ahead behind the tail) keep each log sorted.
    c.insert(1, 20, 29, Bytes::from_static(b"d"));
    c.insert(1, 10, 19, Bytes::from_static(b"c"));
    assert_eq!(c.cached_run(1, 0, 1 << 20).0, 5);
    assert_eq!(c.get(1, 15).map(|e| e.0), Some(10));
    assert_eq!(c.cached_run(1, 10, 1 << 20), (30, 2));
}

#[test]
fn a_cached_batch_is_kept_when_the_same_or_an_overlapping_batch_is_inserted() {
    let c = BatchCache::new(1 << 20);
    c.insert(1, 0, 4, Bytes::from_static(b"first"));
    let used = c.used_bytes();
    c.insert(1, 0, 4, Bytes::from_static(b"again"));
    c.insert(1, 3, 6, Bytes::from_static(b"overlap"));
    assert!(c.contains(1, 0) && !c.contains(1, 3) && !c.contains(1, 5));
    assert_eq!(c.get(1, 2).map(|e| e.2), Some(Bytes::from_static(b"first")));
    assert_eq!(c.used_bytes(), used);
}

#[test]
fn evicts_the_oldest_chunk_whole_and_holds_its_bound() {
    // 100-byte batches (a low-linger producer's) go into 16 KiB chunks of a 1 MiB cache.
    let cap = 1 << 20;
    let c = BatchCache::new(cap);
    assert_eq!(c.chunk_bytes, 16 * 1024);
    for i in 0..100_000 {
        c.insert(1 + (i as u64 % 3), i, i, batch(100, i as u8));
        assert!(c.used_bytes() <= cap, "bound held after insert {i}");
    }
    let st = c.state.borrow();
    let live: usize = st.logs.values().map(VecDeque::len).sum();
    // Each chunk holds 163 batches; evicting whole chunks keeps at least 3/4 of the
    // batches the bound allows at ~260 B per batch (100 B + 160 B of bookkeeping).
    assert!(live > cap / 260 * 3 / 4, "{live} batches cached");
    assert!(st.chunks.len() <= cap / c.chunk_bytes);
    drop(st);
    // The newest are there, the oldest are gone, and a batch reads back intact.
    assert_eq!(c.get(1, 99_999).map(|e| e.2), Some(batch(100, 99_999u32 as u8)));
    assert!(c.get(1, 0).is_none());
    for log in 1..=3 {
        c.invalidate_from(log, 0);
    }
    // Truncated entries give back their bookkeeping; their bytes stay with their chunks.
    let st = c.state.borrow();
    assert!(st.logs.is_empty());
    assert_eq!(c.used_bytes(), st.chunks.iter().map(|ch| ch.buffer_bytes).sum::<usize>());
}

#[test]
fn large_batches_keep_their_allocation_and_are_charged_by_length() {
    let c = BatchCache::new(1 << 20);
    let big = batch(64 * 1024, 7);
    c.insert(1, 0, 9, big.clone());
    let got = c.get(1, 5).map(|e| e.2).unwrap_or_default();
    assert_eq!(got.as_ptr(), big.as_ptr(), "not copied");
    assert_eq!(c.used_bytes(), charge(64 * 1024));
    // A small one is copied into a chunk, whose whole buffer is charged.
    let small = batch(100, 1);
    c.insert(1, 10, 10, small.clone());
    let got = c.get(1, 10).map(|e| e.2).unwrap_or_default();
    assert_ne!(got.as_ptr(), small.as_ptr());
    assert_eq!(got, small);
    assert_eq!(
        c.used_bytes(),
        charge(64 * 1024) + BATCH_CACHE_ENTRY_OVERHEAD_BYTES + c.chunk_bytes
    );
    // A view of a larger buffer is copied out of it, whatever its size.
    let buffer = batch(200 * 1024, 3);
    c.insert_copy(3, 0, 0, &buffer[..64 * 1024]);
    c.insert_copy(3, 1, 1, &buffer[..100]);
    for off in [0, 1] {
        let got = c.get(3, off).map(|e| e.2).unwrap_or_default();
        assert!(!got.is_empty() && got.as_ptr() != buffer.as_ptr());
    }
    c.invalidate_from(3, 0);
    // Large batches alone fill the cache and are evicted oldest first.
    for i in 1..40 {
        c.insert(2, i * 10, i * 10 + 9, batch(64 * 1024, 0));
    }
    assert!(c.used_bytes() <= 1 << 20);
    assert!(c.get(1, 0).is_none() && c.get(2, 390).is_some());
}

#[test]
fn truncation_churn_keeps_the_bookkeeping_bounded() {
    // Large batches cached and truncated again and again cost no chunk buffer; the
    // chunk count bound still retires their eviction-queue slots.
    let c = BatchCache::new(1 << 20);
    for i in 0..10_000 {
        c.insert(1, i * 10, i * 10 + 9, batch(32 * 1024, 0));
        c.invalidate_from(1, i * 10);
    }
    let st = c.state.borrow();
    assert!(
        st.chunks.len() <= 2 * 64 + 2 && st.order.len() <= st.chunks.len(),
        "{}",
        st.order.len()
    );
    assert_eq!(c.used_bytes(), 0);
}

#[test]
fn an_entry_larger_than_the_bound_is_not_cached() {
    let tiny = BatchCache::new(BATCH_CACHE_ENTRY_OVERHEAD_BYTES);
    tiny.insert(1, 0, 0, Bytes::from_static(b"x"));
    assert_eq!((tiny.used_bytes(), tiny.get(1, 0).is_none()), (0, true));
    let off = BatchCache::new(0);
    off.insert(1, 0, 0, Bytes::from_static(b"x"));
    assert_eq!(off.used_bytes(), 0);
}

/// A read-ahead buffer of `n` batches of `len` bytes with offsets `first..`, each batch
/// covering `per` offsets, plus a partial batch's 10 bytes at the end.
fn readahead(first: i64, n: usize, len: usize, per: i64) -> (Bytes, Vec<(i64, i64, usize, usize)>) {
    let mut buf = Vec::new();
    let mut batches = Vec::new();
    for i in 0..n {
        let base = first + i as i64 * per;
        batches.push((base, base + per - 1, buf.len(), buf.len() + len));
        buf.extend(std::iter::repeat_n(i as u8, len));
    }
    buf.extend([0xee; 10]);
    (Bytes::from(buf), batches)
}

#[test]
fn an_adopted_read_ahead_is_charged_whole_and_served_as_one_slice() {
    let c = BatchCache::new(64 << 20);
    // A batch the tailing path cached first stays; the read-ahead's copy of it is skipped.
    c.insert(7, 0, 9, batch(1000, 0));
    let before = c.used_bytes();
    let (buf, batches) = readahead(0, 8, 1000, 10);
    c.insert_adopted(7, &buf, &batches);
    assert_eq!(c.used_bytes() - before, buf.len() + 7 * BATCH_CACHE_ENTRY_OVERHEAD_BYTES);
    // The first batch is not in the adopted buffer: no run from it.
    assert!(c.get_run(7, 5, 1 << 20, 1000).is_none());
    // From offset 15: batches 1..=7 (offsets 10..79) as one slice of the buffer, no copy.
    let (last, run) = c.get_run(7, 15, 1 << 20, 1000).expect("run");
    assert_eq!((last, run.len()), (79, 7000));
    assert_eq!(run.as_ptr(), buf[1000..].as_ptr(), "a slice of the read buffer");
    // Bounded by max_bytes (whole batches, at least one) and by the limit offset.
    assert_eq!(c.get_run(7, 10, 2500, 1000).map(|r| (r.0, r.1.len())), Some((29, 2000)));
    assert_eq!(c.get_run(7, 10, 10, 1000).map(|r| (r.0, r.1.len())), Some((19, 1000)));
    assert_eq!(c.get_run(7, 10, 1 << 20, 50).map(|r| (r.0, r.1.len())), Some((49, 4000)));
    assert!(c.get_run(7, 45, 1 << 20, 45).is_none(), "its first batch reaches the limit");
    // Single-batch lookups see the adopted entries too.
    assert_eq!(c.get(7, 42).map(|e| (e.0, e.2.len())), Some((40, 1000)));
    // Truncation drops entries; the buffer stays charged until its chunk is evicted.
    c.invalidate_from(7, 50);
    assert_eq!(c.get_run(7, 10, 1 << 20, 1000).map(|r| r.0), Some(49));
}

#[test]
fn adopted_buffers_are_evicted_whole_and_a_large_one_is_copied_instead() {
    // 2 MiB bound: a buffer may take at most an eighth (256 KiB).
    let c = BatchCache::new(2 << 20);
    let (big, batches) = readahead(0, 400, 1000, 1);
    c.insert_adopted(1, &big, &batches);
    assert!(c.get_run(1, 0, 1 << 20, 1 << 40).is_none(), "copied, not adopted");
    assert_eq!(c.get(1, 399).map(|e| e.0), Some(399));
    for round in 0..100i64 {
        let (buf, batches) = readahead(1000 + round * 100, 100, 2000, 1);
        c.insert_adopted(2, &buf, &batches);
        assert!(c.used_bytes() <= 2 << 20);
    }
    // The newest buffers are there, the oldest went whole with their entries.
    assert!(c.get_run(2, 1000 + 99 * 100, 1 << 20, 1 << 40).is_some());
    assert!(c.get(2, 1000).is_none() && c.get_run(2, 1000, 1 << 20, 1 << 40).is_none());
    let st = c.state.borrow();
    assert!(st.adopted.len() <= st.chunks.len());
}

#[test]
fn a_read_ahead_of_mostly_cached_batches_is_copied_not_adopted() {
    let c = BatchCache::new(64 << 20);
    for i in 0..6 {
        c.insert(3, i * 10, i * 10 + 9, batch(1000, 9));
    }
    let (buf, batches) = readahead(0, 8, 1000, 10);
    c.insert_adopted(3, &buf, &batches);
    assert!(c.state.borrow().adopted.is_empty(), "2 new batches of 8 do not pay for 8 KiB");
    assert_eq!(c.get(3, 75).map(|e| (e.0, e.2[0])), Some((70, 7)), "the new ones are cached");
    assert_eq!(c.get(3, 5).map(|e| e.2[0]), Some(9), "the cached ones stay");
}
