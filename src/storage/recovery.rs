//! Opening a partition log, with recovery as Kafka does it.
//!
//! Runs on the partition's owner shard before the log serves anything. Procedure (see
//! `docs/format.md`): read the checkpoints; after a clean shutdown trust every segment (load
//! its indexes, scan only from the last index entry to find its end); otherwise trust only
//! segments wholly below the recovery point (same, after an index sanity check) and scan every
//! later segment batch by batch (length + CRC), truncating the torn tail, rebuilding its
//! indexes and deleting any segment after a torn one. Corruption in a trusted segment is an
//! error naming the file and position. The clean-shutdown marker is removed (durably) before
//! the log accepts appends. Each finalized sealed segment's file is closed once scanned (it
//! is reopened on first read through the shard's open-file cache): open files stay bounded
//! however many segments a shard recovers.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::rc::Rc;

use super::cache::BatchCache;
use super::checkpoint::{
    self, CLEANER_CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE, LEADER_EPOCH_FILE, LOG_START_FILE,
    RECOVERY_POINT_FILE,
};
use super::epoch::EpochCache;
use super::error::StorageError;
use super::index::{OffsetIndex, TimeIndex};
use super::log::{LogInner, LogState};
use super::producers::ProducerFold;
use super::segment::{
    parse_log_name, scan_file, segment_path, Segment, INDEX_SUFFIX, TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
};
use super::LogConfig;
use crate::io::{align_down, DataFile, FileSystem};
use crate::sync::{Notify, TicketLock};
use crate::types::{Epoch, Offset};

struct Loaded<F: FileSystem> {
    seg: Segment<F>,
    /// The scan stopped before the file end (torn tail or zeros after the log, truncated).
    torn: bool,
    epochs: Vec<(Epoch, Offset)>,
}

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StorageError {
    StorageError::io(op, path, 0)
}

async fn read_checkpoint<F: FileSystem>(fs: &F, dir: &Path, name: &str) -> Option<Offset> {
    match checkpoint::read(fs, dir, name).await {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), file = name, error = %e, "ignoring unreadable checkpoint");
            None
        }
    }
}

pub(super) async fn open<F: FileSystem>(
    fs: Rc<F>,
    dir: &Path,
    config: LogConfig,
    cache: Rc<BatchCache>,
) -> Result<Rc<LogInner<F>>, StorageError> {
    fs.create_dir_all(dir).await.map_err(io_err("create dir", dir))?;
    // A cleaner swap a crash interrupted: finish or roll back before the listing.
    super::cleaner::swap::recover_swaps(&*fs, dir).await?;
    let names = fs.list_dir(dir).await.map_err(io_err("list", dir))?;
    for n in names.iter().filter(|n| n.ends_with(".tmp")) {
        let _ = fs.remove_file(&dir.join(n)).await;
    }
    // Retention's pending deletions (their delay restarts from zero: just remove them now).
    for n in names.iter().filter(|n| super::retention::is_leftover(n, &names)) {
        tracing::info!(dir = %dir.display(), file = %n, "removing leftover of a segment deletion");
        let _ = fs.remove_file(&dir.join(n)).await;
    }
    let mut bases: Vec<Offset> = names.iter().filter_map(|n| parse_log_name(n)).collect();
    bases.sort();
    let clean = read_checkpoint(&*fs, dir, CLEAN_SHUTDOWN_FILE).await.is_some();
    let recovery_point = read_checkpoint(&*fs, dir, RECOVERY_POINT_FILE).await.unwrap_or(Offset(0));
    let start_ckpt = read_checkpoint(&*fs, dir, LOG_START_FILE).await;
    let cleaner_checkpoint =
        read_checkpoint(&*fs, dir, CLEANER_CHECKPOINT_FILE).await.unwrap_or(Offset(0));
    let mut epochs = load_epochs(&*fs, dir).await;

    // The latest producer snapshot, extended by the batches the scan below reads anyway.
    let snapshot = super::producers::latest_snapshot(&*fs, dir, i64::MAX).await?;
    let mut fold = ProducerFold::new(snapshot, bases.first().map_or(0, |b| b.0));
    let mut segments = BTreeMap::new();
    let mut scanned_epochs = Vec::new();
    let mut torn_before: Option<Offset> = None;
    let mut doomed = Vec::new();
    for (i, base) in bases.iter().enumerate() {
        if torn_before.is_some() {
            doomed.push(*base);
            continue;
        }
        let next = bases.get(i + 1);
        let trusted = clean || next.is_some_and(|n| *n <= recovery_point);
        let mut loaded = load_segment(&*fs, dir, *base, trusted, &config, &mut fold).await?;
        // The writer finalizes a segment before writing the next, so a scanned segment that
        // ends short of the next one's base lost its tail, and nothing after it was written.
        if !trusted && next.is_some_and(|n| loaded.seg.next_offset < *n) {
            loaded.torn = true;
        }
        if loaded.torn && next.is_some() {
            tracing::warn!(file = %loaded.seg.path.display(), end = loaded.seg.next_offset.0, "segment ends short; dropping later segments");
            torn_before = Some(*base);
        }
        scanned_epochs.extend(loaded.epochs);
        let mut seg = loaded.seg;
        seg.written_bytes = seg.size_bytes;
        seg.queued_bytes = seg.size_bytes;
        seg.staged_end = seg.next_offset;
        let is_last = next.is_none() || loaded.torn;
        seg.sealed = !is_last;
        // A sealed segment that had to be scanned may never have been finalized: let the
        // writer redo it (sync, trim, write indexes, advance the recovery point).
        seg.finalized = !is_last && trusted;
        if seg.finalized {
            // Bounded file descriptors: a finalized sealed segment is opened again on first
            // read, through the shard's open-file cache.
            seg.unpin().await;
        }
        segments.insert(base.0, seg);
    }
    for base in doomed {
        tracing::warn!(dir = %dir.display(), base = base.0, "deleting segment after a torn one");
        for suffix in
            [super::segment::LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX]
        {
            let _ = fs.remove_file(&segment_path(dir, base, suffix)).await;
        }
    }
    let log_id = cache.register_log();
    let inner = Rc::new(LogInner {
        fs: fs.clone(),
        dir: dir.to_path_buf(),
        config: RefCell::new(Rc::new(config)),
        cache,
        log_id,
        st: RefCell::new(LogState {
            segments: BTreeMap::new(),
            log_start: Offset(0),
            log_end: Offset(0),
            written: Offset(0),
            durable: Offset(0),
            unwritten: VecDeque::new(),
            unwritten_bytes: 0,
            writer_running: false,
            syncer_scheduled: false,
            sync_requested: false,
            force_sync: 0,
            last_sync: fs.monotonic(),
            first_staged_at: None,
            fill: None,
            committed_at: fs.monotonic(),
            failed: None,
            out_of_space: None,
            closed: false,
            epochs: EpochCache::default(),
            max_timestamp: None,
            recovery_point,
            cleaner_checkpoint,
            latest_delete_horizon_ms: None,
            producers: super::producer_state::ProducerStateMap::default(),
        }),
        append_lock: TicketLock::default(),
        progress: Notify::default(),
        readahead: Rc::default(),
    });
    if segments.is_empty() {
        let base = start_ckpt.unwrap_or(Offset(0)).max(Offset(0));
        segments.insert(base.0, inner.create_segment(base).await?);
    }
    finish_active(&mut segments).await?;
    let log_end = segments.values().next_back().map_or(Offset(0), |s| s.next_offset);
    let first_base = segments.keys().next().copied().unwrap_or(0);
    let log_start = start_ckpt.unwrap_or(Offset(first_base)).max(Offset(first_base)).min(log_end);
    let mut epochs_changed = epochs.truncate_from_end(log_end);
    for (e, o) in scanned_epochs {
        epochs_changed |= epochs.assign(e, o);
    }
    {
        let mut st = inner.st.borrow_mut();
        st.max_timestamp = segments
            .values()
            .filter(|s| s.max_timestamp_ms >= 0)
            .map(|s| (s.max_timestamp_ms, s.offset_of_max_timestamp))
            .max_by_key(|(t, _)| *t);
        st.segments = segments;
        st.log_start = log_start;
        st.log_end = log_end;
        st.written = log_end;
        st.durable = log_end;
        st.epochs = epochs;
    }
    if epochs_changed {
        inner.write_epochs().await?;
    }
    if clean {
        let marker = dir.join(CLEAN_SHUTDOWN_FILE);
        fs.remove_file(&marker).await.map_err(io_err("remove", &marker))?;
    }
    fs.sync_dir(dir).await.map_err(io_err("sync dir", dir))?;
    // Segments below the log start whose deletion a crash interrupted.
    inner.advance_log_start_after_open(log_start).await?;
    // The producer state: the latest snapshot plus the scanned batches when they cover
    // everything above it; otherwise (a snapshot past the log end, or trusted segments above
    // it) the latest snapshot at or below the log end and a replay of the batches above it.
    match fold.finish(log_end.0) {
        Some((from, state, applied)) => {
            inner.install_producer_state(from, state, log_end, applied).await?;
        }
        None => inner.load_producer_state(log_end).await?,
    }
    inner.kick_writer();
    Ok(inner)
}

async fn load_epochs<F: FileSystem>(fs: &F, dir: &Path) -> EpochCache {
    let path = dir.join(LEADER_EPOCH_FILE);
    match fs.read_file(&path).await {
        Ok(Some(data)) => match EpochCache::from_text(&String::from_utf8_lossy(&data)) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "rebuilding leader-epoch cache");
                EpochCache::default()
            }
        },
        _ => EpochCache::default(),
    }
}

/// The last segment becomes the active one: trim padding past its valid end, sync it, and
/// keep its partial last page for the next write.
async fn finish_active<F: FileSystem>(
    segments: &mut BTreeMap<i64, Segment<F>>,
) -> Result<(), StorageError> {
    let Some(seg) = segments.values_mut().next_back() else { return Ok(()) };
    let path = seg.path.clone();
    let size = seg.size_bytes;
    // The last segment is never finalized at open, so it kept its file.
    let file = seg.writer_file().ok_or_else(|| StorageError::Closed { path: path.clone() })?;
    let file_size = file.size().await.map_err(io_err("stat", &path))?;
    if file_size != size {
        file.truncate(size).await.map_err(StorageError::io("truncate", &path, size))?;
    }
    file.sync().await.map_err(StorageError::io("fsync", &path, size))?;
    let aligned = align_down(size);
    let prefix = file
        .read_at(aligned, (size - aligned) as usize)
        .await
        .map_err(StorageError::io("read", &path, aligned))?;
    seg.page_prefix = prefix.to_vec();
    seg.written_bytes = size;
    seg.queued_bytes = size;
    seg.staged_end = seg.next_offset;
    Ok(())
}

async fn load_segment<F: FileSystem>(
    fs: &F,
    dir: &Path,
    base: Offset,
    trusted: bool,
    config: &LogConfig,
    fold: &mut ProducerFold,
) -> Result<Loaded<F>, StorageError> {
    let path = segment_path(dir, base, super::segment::LOG_SUFFIX);
    let file = Rc::new(fs.open(&path, false).await.map_err(io_err("open", &path))?);
    let file_size = file.size().await.map_err(io_err("stat", &path))?;
    let mut seg = Segment::pinned(base, path.clone(), file.clone());
    if trusted {
        if let Some((index, time_index)) = load_indexes(fs, dir, base, file_size).await {
            seg.index = index;
            seg.time_index = time_index;
            let start = seg.index.entries.last().map_or(0, |(_, p)| u64::from(*p));
            let scan = scan_file(&*file, &path, start, file_size, base.0).await?;
            if scan.valid_bytes + start != file_size {
                return Err(StorageError::Corrupt {
                    path,
                    position: start + scan.valid_bytes,
                    reason: scan.stop_reason.unwrap_or_else(|| "short segment".into()),
                });
            }
            seg.size_bytes = file_size;
            seg.bytes_since_index = file_size - start;
            if let Some((t, o)) = seg.time_index.entries.last() {
                seg.max_timestamp_ms = *t;
                seg.offset_of_max_timestamp = Offset(base.0 + i64::from(*o));
            }
            for (_, h) in &scan.batches {
                if h.max_timestamp > seg.max_timestamp_ms {
                    seg.max_timestamp_ms = h.max_timestamp;
                    seg.offset_of_max_timestamp = Offset(h.base_offset);
                }
            }
            seg.next_offset =
                scan.batches.last().map_or(base, |(_, h)| Offset(h.last_offset() + 1));
            fold.skipped(seg.next_offset.0);
            return Ok(Loaded { seg, torn: false, epochs: Vec::new() });
        }
        tracing::warn!(file = %path.display(), "index fails its sanity check; rebuilding from the log");
    }
    let scan = scan_file(&*file, &path, 0, file_size, base.0).await?;
    // The headers are here anyway: rebuild the producer state from them as well.
    let end = scan.batches.last().map_or(base.0, |(_, h)| h.last_offset() + 1);
    fold.scanned(base.0, scan.batches.iter().map(|(_, h)| h), end);
    let mut epochs = Vec::new();
    for (_, h) in &scan.batches {
        let max_ts = (h.max_timestamp, Offset(h.base_offset));
        seg.track_batch(h, max_ts, config.index_interval_bytes);
        epochs.push((Epoch(h.partition_leader_epoch), Offset(h.base_offset)));
    }
    let torn = scan.valid_bytes < file_size;
    if torn {
        let valid = scan.valid_bytes;
        let data_end = nonzero_end(&*file, &path, valid, file_size).await?;
        let reason = scan.stop_reason.as_deref().unwrap_or("");
        if data_end == valid {
            // Only zeros follow the last batch: the O_DIRECT page padding or the space
            // `storage::prealloc` filled ahead of the log. Nothing written is lost.
            tracing::info!(
                file = %path.display(),
                offset = seg.next_offset.0,
                position = valid,
                zero_bytes_trimmed = file_size - valid,
                "end of the written log: trimming the zeros after it (preallocation, padding)"
            );
        } else {
            tracing::warn!(
                file = %path.display(),
                offset = seg.next_offset.0,
                position = valid,
                bytes_dropped = data_end - valid,
                zero_bytes_trimmed = file_size - data_end,
                reason,
                "truncating torn tail"
            );
        }
        file.truncate(valid).await.map_err(StorageError::io("truncate", &path, valid))?;
        file.sync().await.map_err(StorageError::io("fsync", &path, valid))?;
    }
    Ok(Loaded { seg, torn, epochs })
}

/// The end of the last non-zero byte in `[from, to)` of `file`, or `from` if that range
/// is all zeros: tells a torn write (data cut short or damaged) from the zeros the writer
/// leaves past the end of the log, which an operator must not read as data loss.
async fn nonzero_end<D: DataFile>(
    file: &D,
    path: &Path,
    from: u64,
    to: u64,
) -> Result<u64, StorageError> {
    const CHUNK_BYTES: u64 = 1 << 20;
    let mut end = from;
    let mut pos = from;
    while pos < to {
        let want = usize::try_from((to - pos).min(CHUNK_BYTES)).unwrap_or(usize::MAX);
        let buf = file.read_at(pos, want).await.map_err(StorageError::io("scan", path, pos))?;
        if buf.is_empty() {
            break;
        }
        if let Some(i) = buf.iter().rposition(|b| *b != 0) {
            end = pos + i as u64 + 1;
        }
        pos += buf.len() as u64;
    }
    Ok(end)
}

async fn load_indexes<F: FileSystem>(
    fs: &F,
    dir: &Path,
    base: Offset,
    log_size: u64,
) -> Option<(OffsetIndex, TimeIndex)> {
    let idx = fs.read_file(&segment_path(dir, base, INDEX_SUFFIX)).await.ok()??;
    let tidx = fs.read_file(&segment_path(dir, base, TIME_INDEX_SUFFIX)).await.ok()??;
    let index = OffsetIndex::from_bytes(&idx, log_size).ok()?;
    let time_index = TimeIndex::from_bytes(&tidx).ok()?;
    Some((index, time_index))
}
