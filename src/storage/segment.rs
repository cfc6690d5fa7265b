//! One segment of a partition log: the `.log` file handle (or its key in the shard's open-file
//! cache), its in-memory indexes, and the writer's staging state for bytes not yet written.
//! Also file naming and the batch-by-batch scan that recovery and the reader share.
//!
//! Owned by the partition log on its owner shard. Invariants: `pinned_file` is `Some` for
//! every segment that is not `finalized` (the active one, and sealed ones the writer has not
//! finalized: the writer and recovery use it directly); a finalized sealed segment has none
//! and is opened on demand through `storage::open_files` (`LogInner::segment_file`), so file
//! descriptors stay bounded. `written_bytes <= queued_bytes
//! <= size_bytes`; `staged` holds exactly the bytes `queued_bytes..size_bytes` not yet handed
//! to a write (each part tagged with the batch end offset when it completes a batch: a large
//! backlog is cut at page boundaries, splitting batches); `page_prefix` is the content from
//! `align_down(queued_bytes)` to `queued_bytes`, rewritten by the next write (the partial
//! last page).

use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::Bytes;

use super::batch::{scan_batch, BatchHeader, ScanStep};
use super::error::StorageError;
use super::index::{OffsetIndex, TimeIndex, OFFSET_INDEX_ENTRY_BYTES, TIME_INDEX_ENTRY_BYTES};
use super::open_files::FileSlot;
use crate::io::{DataFile, FileSystem};
use crate::types::Offset;

pub const LOG_SUFFIX: &str = ".log";
pub const INDEX_SUFFIX: &str = ".index";
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";
/// Reserved for idempotence/transactions: producer-state snapshot and aborted-txn index.
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
pub const TXN_INDEX_SUFFIX: &str = ".txnindex";

/// `<dir>/<20-digit base offset><suffix>`.
#[must_use]
pub fn segment_path(dir: &Path, base: Offset, suffix: &str) -> PathBuf {
    dir.join(format!("{:020}{suffix}", base.0))
}

/// Base offset of a `*.log` file name, if it is one.
#[must_use]
pub fn parse_log_name(name: &str) -> Option<Offset> {
    let digits = name.strip_suffix(LOG_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(Offset)
}

pub struct Segment<F: FileSystem> {
    pub base: Offset,
    pub path: PathBuf,
    /// The segment's own open file: always for an unfinalized segment, `None` once a sealed
    /// segment is finalized (then it is opened through the shard's open-file cache).
    pub pinned_file: Option<Rc<F::File>>,
    /// The key of this segment's file in the shard's open-file cache, made on first use;
    /// dropping the segment drops the cached file with it.
    pub slot: Option<FileSlot>,
    pub size_bytes: u64,
    pub next_offset: Offset,
    pub index: OffsetIndex,
    pub time_index: TimeIndex,
    pub bytes_since_index: u64,
    /// Largest timestamp in the segment and the offset of its first record (-1, -1 if empty).
    pub max_timestamp_ms: i64,
    pub offset_of_max_timestamp: Offset,
    pub first_append_ms: Option<i64>,
    /// The first batch's max timestamp (Kafka's `getFirstBatchTimestamp`, used by
    /// `max.compaction.lag.ms`); `None` until known (segments loaded from disk learn it lazily).
    pub first_batch_timestamp_ms: Option<i64>,
    pub written_bytes: u64,
    pub queued_bytes: u64,
    pub page_prefix: Vec<u8>,
    pub staged: std::collections::VecDeque<(Bytes, Option<Offset>)>,
    pub staged_end: Offset,
    pub sealed: bool,
    pub finalized: bool,
    /// The file holds zero-written, durably sized space up to here (`storage::prealloc`);
    /// 0 when unknown. Always aligned.
    pub prealloc_end: u64,
    /// A preallocation of this segment failed: its appends grow the file instead.
    pub prealloc_off: bool,
}

impl<F: FileSystem> Segment<F> {
    pub fn new(base: Offset, path: PathBuf, file: F::File) -> Self {
        Self::pinned(base, path, Rc::new(file))
    }

    /// A segment whose own open file is `file` (see `pinned_file`).
    pub fn pinned(base: Offset, path: PathBuf, file: Rc<F::File>) -> Self {
        Segment {
            base,
            path,
            pinned_file: Some(file),
            slot: None,
            size_bytes: 0,
            next_offset: base,
            index: OffsetIndex::default(),
            time_index: TimeIndex::default(),
            bytes_since_index: 0,
            max_timestamp_ms: -1,
            offset_of_max_timestamp: Offset(-1),
            first_append_ms: None,
            first_batch_timestamp_ms: None,
            written_bytes: 0,
            queued_bytes: 0,
            page_prefix: Vec::new(),
            staged: std::collections::VecDeque::new(),
            staged_end: base,
            sealed: false,
            finalized: false,
            prealloc_end: 0,
            prealloc_off: false,
        }
    }

    /// The open file of a segment the writer still works on (not finalized). `None` breaks
    /// the module invariant; callers turn it into an error.
    #[must_use]
    pub fn writer_file(&self) -> Option<Rc<F::File>> {
        debug_assert!(self.pinned_file.is_some() || self.finalized, "unfinalized segment unpinned");
        self.pinned_file.clone()
    }

    /// Gives up the segment's own file handle (it was finalized): closed now unless a reader
    /// still holds it (then when the last one drops it). Later reads go through the cache.
    pub async fn unpin(&mut self) {
        if let Some(file) = self.pinned_file.take() {
            release(file).await;
        }
    }

    #[must_use]
    pub fn relative(&self, offset: Offset) -> u32 {
        u32::try_from(offset.0 - self.base.0).unwrap_or(u32::MAX)
    }

    /// Accounts for a batch placed at `size_bytes`, as Kafka's `LogSegment.append`: update
    /// the max timestamp, then, when more than `index_interval_bytes` were added since the
    /// last entry, index the batch (keyed by its last offset) and the max timestamp so far.
    pub fn track_batch(&mut self, h: &BatchHeader, max_ts: (i64, Offset), interval_bytes: u32) {
        let last = Offset(h.last_offset());
        if self.size_bytes == 0 {
            self.first_batch_timestamp_ms = Some(h.max_timestamp);
        }
        if max_ts.0 > self.max_timestamp_ms {
            self.max_timestamp_ms = max_ts.0;
            self.offset_of_max_timestamp = max_ts.1;
        }
        if self.bytes_since_index > u64::from(interval_bytes) {
            self.index.push(self.relative(last), self.size_bytes as u32);
            self.seal_time_index();
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += h.total_size() as u64;
        self.size_bytes += h.total_size() as u64;
        self.next_offset = Offset(h.last_offset() + 1);
    }

    /// Appends (max timestamp so far, its offset) to the time index if it grew; also the final
    /// entry Kafka writes when a segment becomes inactive.
    pub fn seal_time_index(&mut self) {
        if self.max_timestamp_ms >= 0 {
            let rel = self.relative(self.offset_of_max_timestamp);
            self.time_index.push(self.max_timestamp_ms, rel);
        }
    }

    #[must_use]
    pub fn index_full(&self, index_bytes: u32) -> bool {
        let max = index_bytes as usize;
        (self.index.entries.len() + 1) * OFFSET_INDEX_ENTRY_BYTES > max
            || (self.time_index.entries.len() + 1) * TIME_INDEX_ENTRY_BYTES > max
    }
}

/// Closes `file` if this is its last handle, else lets the last holder's drop close it (a
/// read in flight keeps its file open).
pub async fn release<D: DataFile>(file: Rc<D>) {
    if let Ok(file) = Rc::try_unwrap(file) {
        let _ = file.close().await;
    }
}

/// Result of scanning a segment's bytes batch by batch.
pub struct ScanResult {
    /// Bytes of whole valid batches from the scan start.
    pub valid_bytes: u64,
    pub batches: Vec<(u64, BatchHeader)>,
    /// Why the scan stopped before the end, if it did.
    pub stop_reason: Option<String>,
}

/// Scans `file` from `start` to `end` batch by batch (length + CRC), stopping at the first
/// invalid or incomplete batch or an offset that goes backwards.
pub async fn scan_file<D: DataFile>(
    file: &D,
    path: &Path,
    start: u64,
    end: u64,
    mut expected_min_offset: i64,
) -> Result<ScanResult, StorageError> {
    const CHUNK: usize = 1 << 20;
    let mut pos = start;
    let mut buf = Bytes::new();
    let mut buf_pos = start;
    let mut batches = Vec::new();
    let mut stop_reason = None;
    while pos < end {
        let in_buf = (pos - buf_pos) as usize;
        let step = scan_batch(&buf[in_buf.min(buf.len())..]);
        match step {
            ScanStep::Batch(h) if h.base_offset >= expected_min_offset => {
                batches.push((pos, h));
                pos += h.total_size() as u64;
                expected_min_offset = h.last_offset() + 1;
            }
            ScanStep::Batch(h) => {
                stop_reason = Some(format!("offset {} goes backwards", h.base_offset));
                break;
            }
            ScanStep::Invalid(reason) => {
                stop_reason = Some(reason);
                break;
            }
            ScanStep::Incomplete => {
                let have = buf.len() - in_buf.min(buf.len());
                let need = if have >= super::batch::BATCH_HEADER_BYTES {
                    BatchHeader::parse(&buf[in_buf..]).map_or(CHUNK, |h| h.total_size().max(CHUNK))
                } else {
                    CHUNK
                };
                let want = need.min(usize::try_from(end - pos).unwrap_or(usize::MAX));
                if have >= want {
                    stop_reason = Some("incomplete batch at the end".into());
                    break;
                }
                buf = file.read_at(pos, want).await.map_err(StorageError::io("scan", path, pos))?;
                buf_pos = pos;
                if buf.len() < want.min(super::batch::BATCH_HEADER_BYTES) || buf.len() == have {
                    stop_reason = Some("incomplete batch at the end".into());
                    break;
                }
            }
        }
    }
    Ok(ScanResult { valid_bytes: pos - start, batches, stop_reason })
}
