//! Reads: whole batches from the batch containing an offset (memory first: unwritten batches,
//! then the shard's batch cache, which read-ahead fills for catch-up readers; then disk via
//! segment lookup, sparse-index binary search and a forward scan), and `offset_for_timestamp`
//! through the time index.
//!
//! Runs on the partition's owner shard. Disk reads stop at a segment's `written_bytes`: bytes
//! past it are either in flight or padding, and are served from memory instead. Every batch
//! read from disk is checked (length, magic, CRC) before it is returned.

use bytes::{Bytes, BytesMut};

use super::batch::{scan_batch_framing, BatchHeader, ScanStep};
use super::error::StorageError;
use super::log::LogInner;
use super::readahead::DiskTail;
use super::records::first_record_at_or_after;
use super::send_records::SendRecords;
use crate::constants::{
    CACHE_INLINE_MAX_BYTES, FETCH_RECORDS_COPY_MAX_BYTES, LOG_READ_CHUNK_BYTES_MIN,
    READAHEAD_BYTES_MAX, READAHEAD_MIN_READ_BYTES, READAHEAD_REQUESTS,
};
use crate::io::{DataFile, FileSystem};
use crate::types::Offset;

/// Where the batch containing an offset lives on disk.
struct DiskSpot {
    seg_base: i64,
    position: u64,
    limit_bytes: u64,
}

impl<F: FileSystem> LogInner<F> {
    fn memory_lookup(&self, offset: i64) -> Option<(i64, i64, Bytes)> {
        {
            let st = self.st.borrow();
            if st.unwritten.front().is_some_and(|(base, _, _)| *base <= offset) {
                let i = st.unwritten.partition_point(|(_, last, _)| *last < offset);
                if let Some((b, l, bytes)) = st.unwritten.get(i) {
                    return Some((*b, *l, bytes.clone()));
                }
            }
        }
        self.cache.get(self.log_id, offset)
    }

    fn disk_spot(&self, offset: i64) -> Option<DiskSpot> {
        let st = self.st.borrow();
        let (base, seg) = st.segments.range(..=offset).next_back()?;
        let (base, seg) = if offset >= seg.next_offset.0 {
            st.segments.range(base + 1..).next()?
        } else {
            (base, seg)
        };
        let position = u64::from(seg.index.lookup(seg.relative(Offset(offset.max(*base)))));
        Some(DiskSpot { seg_base: *base, position, limit_bytes: seg.written_bytes })
    }

    /// Reads whole batches from disk starting with the one containing `offset`: one
    /// contiguous slice, at most `budget` bytes unless the first batch alone is larger.
    async fn disk_read(
        &self,
        offset: i64,
        budget: usize,
    ) -> Result<Option<(i64, Bytes)>, StorageError> {
        // The file is leased for this read: the open-file cache does not close it under us.
        let mut tries = 0;
        let (spot, file) = loop {
            let Some(spot) = self.disk_spot(offset) else { return Ok(None) };
            match self.segment_file(spot.seg_base).await? {
                Some(file) => break (spot, file),
                // The segment left the log while its file was being opened (retention, a
                // cleaner swap): look the offset up again.
                None if tries < 2 => tries += 1,
                None => return Ok(None),
            }
        };
        let path = self.seg_path(spot.seg_base);
        let mut pos = spot.position;
        loop {
            if pos >= spot.limit_bytes {
                return Ok(None);
            }
            let room = usize::try_from(spot.limit_bytes - pos).unwrap_or(usize::MAX);
            let len = budget.max(LOG_READ_CHUNK_BYTES_MIN).min(room);
            let data =
                file.read_at(pos, len).await.map_err(StorageError::io("read", &path, pos))?;
            let mut at = 0usize;
            let mut first: Option<(usize, i64)> = None;
            let mut last_end = 0usize;
            let mut last_offset = -1;
            let mut skip = 0usize;
            loop {
                match scan_batch_framing(&data[at..]) {
                    ScanStep::Batch(h) => {
                        let size = h.total_size();
                        if h.last_offset() >= offset {
                            if let Some((start, _)) = first {
                                if at + size - start > budget {
                                    break;
                                }
                            } else {
                                first = Some((at, h.last_offset()));
                            }
                            last_end = at + size;
                            last_offset = h.last_offset();
                        }
                        at += size;
                        if at >= data.len() {
                            break;
                        }
                    }
                    ScanStep::Incomplete => {
                        if first.is_none() {
                            // The wanted batch (or the scan to it) runs past this chunk.
                            if let Ok(h) = BatchHeader::parse(&data[at..]) {
                                if h.last_offset() >= offset {
                                    let whole = file
                                        .read_at(pos + at as u64, h.total_size())
                                        .await
                                        .map_err(StorageError::io("read", &path, pos))?;
                                    if let ScanStep::Batch(_) = scan_batch_framing(&whole) {
                                        return Ok(Some((h.last_offset(), whole)));
                                    }
                                    return Err(self.corrupt(
                                        spot.seg_base,
                                        pos + at as u64,
                                        "incomplete batch",
                                    ));
                                }
                                // A batch wholly below `offset` that is larger than the chunk
                                // (the sparse index points at or before it): step over it.
                                // Stopping here answered an empty read for ever (KIP-74).
                                skip = h.total_size();
                            }
                        }
                        break;
                    }
                    ScanStep::Invalid(reason) => {
                        if first.is_some() {
                            break;
                        }
                        return Err(self.corrupt(spot.seg_base, pos + at as u64, &reason));
                    }
                }
            }
            if let Some((start, _)) = first {
                return Ok(Some((last_offset, data.slice(start..last_end))));
            }
            if at + skip == 0 {
                return Ok(None);
            }
            pos += (at + skip) as u64;
        }
    }

    /// A large read ended at `next`: the reader is catching up. Keep `len` bytes from `next`
    /// in memory: read what the cache lacks of them while the response is sent.
    fn read_ahead(self: &std::rc::Rc<Self>, next: i64, len: usize) {
        let (next, cached) = self.cache.cached_run(self.log_id, next, len);
        if cached >= len / 2 {
            return;
        }
        let len = len - cached;
        let Some(spot) = self.disk_spot(next) else { return };
        let tail =
            DiskTail { end_pos: spot.position, limit_bytes: spot.limit_bytes, next_offset: next };
        // The file is leased in the background task (a cold segment's open does not delay
        // this read's answer).
        let me = self.clone();
        let open = async move { me.segment_file(spot.seg_base).await.ok().flatten() };
        self.readahead.start::<F, _>(&*self.fs, &self.cache, self.log_id, tail, open, len);
    }

    fn corrupt(&self, seg_base: i64, position: u64, reason: &str) -> StorageError {
        StorageError::Corrupt {
            path: self.seg_path(seg_base),
            position,
            reason: reason.to_string(),
        }
    }

    /// Whole batches from the one containing `offset` (see `PartitionLog::read`). With
    /// `to_send`, batches are answered as slices of the buffers that hold them (a read-ahead
    /// buffer, cache chunks, a disk read), in pieces when there are several (no copy; the
    /// caller sends them and drops them); otherwise whatever comes from a shared buffer is
    /// copied into one, so a caller may keep the result.
    pub async fn read(
        self: &std::rc::Rc<Self>,
        offset: Offset,
        max_bytes: usize,
        max_offset: Offset,
        to_send: bool,
    ) -> Result<SendRecords, StorageError> {
        let (start, end) = {
            let st = self.st.borrow();
            (st.log_start, st.log_end)
        };
        if offset < start || offset > end {
            return Err(StorageError::OffsetOutOfRange {
                requested: offset,
                log_start: start,
                log_end: end,
            });
        }
        let limit = max_offset.min(end).0;
        let mut parts: Vec<Bytes> = Vec::new();
        let mut total = 0usize;
        let mut cur = offset.0;
        while cur < limit {
            if to_send && parts.is_empty() {
                if let Some((last, run)) = self.cache.get_run(self.log_id, cur, max_bytes, limit) {
                    total = run.len();
                    parts.push(run);
                    cur = last + 1;
                    // A run large enough to be sent from its buffer is the whole answer:
                    // adding the next batch would copy them all into one buffer.
                    if total >= FETCH_RECORDS_COPY_MAX_BYTES || total >= max_bytes {
                        break;
                    }
                    continue;
                }
            }
            let mut cached = self.memory_lookup(cur);
            if cached.is_none() && self.readahead.wait_if_reading(cur).await {
                if to_send && parts.is_empty() {
                    continue; // the read-ahead's buffer may now answer as one run
                }
                cached = self.memory_lookup(cur);
            }
            let (last, bytes) = match cached {
                Some((_, last, b)) => (last, b),
                None => match self.disk_read(cur, max_bytes.saturating_sub(total)).await? {
                    Some(found) => found,
                    None => break,
                },
            };
            let fits = parts.is_empty() || total + bytes.len() <= max_bytes;
            if !fits {
                break;
            }
            if last >= limit {
                // Cut a disk slice at the last batch wholly below the limit.
                let cut = cut_below(&bytes, limit);
                if cut > 0 {
                    parts.push(bytes.slice(..cut));
                }
                break;
            }
            total += bytes.len();
            parts.push(bytes);
            cur = last + 1;
            if total >= max_bytes {
                break;
            }
        }
        if total >= READAHEAD_MIN_READ_BYTES && cur < limit {
            self.read_ahead(
                cur,
                max_bytes.saturating_mul(READAHEAD_REQUESTS).min(READAHEAD_BYTES_MAX),
            );
        }
        if to_send && parts.len() > 1 && total >= FETCH_RECORDS_COPY_MAX_BYTES {
            // Sent back to back from where they are (`SendRecords`); a small answer is
            // cheaper copied than sent in pieces.
            return Ok(SendRecords::from_pieces(parts));
        }
        Ok(SendRecords::one(match parts.len() {
            0 => Bytes::new(),
            // A small batch from the cache is a slice of one of its chunks, and any batch
            // may be a slice of an adopted read-ahead buffer: a caller that kept it (a
            // loading coordinator, say) would hold the whole chunk alive outside the cache's
            // bound, so it leaves as a copy unless it is sent and dropped (`to_send`).
            // Several parts are copied below.
            1 => match parts.pop() {
                Some(p) if !to_send || p.len() <= CACHE_INLINE_MAX_BYTES => {
                    Bytes::copy_from_slice(&p)
                }
                p => p.unwrap_or_default(),
            },
            _ => {
                let mut out = BytesMut::with_capacity(total);
                for p in &parts {
                    out.extend_from_slice(p);
                }
                out.freeze()
            }
        }))
    }

    pub async fn offset_for_timestamp(
        self: &std::rc::Rc<Self>,
        timestamp_ms: i64,
    ) -> Result<Option<(Offset, i64)>, StorageError> {
        let committed = self.committed();
        let mut cur = {
            let st = self.st.borrow();
            let seg = st.segments.values().find(|s| s.max_timestamp_ms >= timestamp_ms);
            let Some(seg) = seg else { return Ok(None) };
            let from = seg.base.0 + i64::from(seg.time_index.lookup(timestamp_ms));
            from.max(st.log_start.0)
        };
        while cur < committed.0 {
            let data = self.read(Offset(cur), 1 << 20, committed, false).await?.to_bytes();
            if data.is_empty() {
                return Ok(None);
            }
            let mut at = 0;
            while at < data.len() {
                let h = BatchHeader::parse(&data[at..])?;
                let batch = &data[at..at + h.total_size()];
                if h.max_timestamp >= timestamp_ms {
                    if let Some((o, t)) = first_record_at_or_after(&h, batch, timestamp_ms)? {
                        return Ok(Some((Offset(o), t)));
                    }
                }
                cur = h.last_offset() + 1;
                at += h.total_size();
            }
        }
        Ok(None)
    }
}

/// Length of the prefix of `bytes` made of whole batches with last offset < `limit`.
fn cut_below(bytes: &[u8], limit: i64) -> usize {
    let mut at = 0;
    while let Ok(h) = BatchHeader::parse(&bytes[at..]) {
        if h.last_offset() >= limit || at + h.total_size() > bytes.len() {
            break;
        }
        at += h.total_size();
    }
    at
}
