//! Zero-filled preallocation ahead of the active segment's end, so that a durable append's
//! fdatasync flushes data only.
//!
//! Why: on ext4 an O_DIRECT append that grows the file changes its size (and allocates
//! blocks), so the fdatasync that follows must commit the journal: fio measured 0.24–2.4 ms
//! p50 for a 4 KiB append + fdatasync against 20–40 µs for the same write over
//! zero-written blocks inside the file, and 0.14–0.26 ms over fallocated (unwritten)
//! extents, whose conversion to written is journalled too
//! (perf/results/2026-12-01-durable-latency.md).
//! So, under [`FlushPolicy::EveryBatch`](super::FlushPolicy::EveryBatch) only, the writer
//! keeps a zero-written, fsynced region ahead of its writes, as Redpanda's fallocation step
//! does: one journal commit per step instead of one per append.
//!
//! Runs on the partition's owner shard, as a task beside the writer (one per log at most,
//! `LogState::fill`). Invariants, which keep every acknowledged byte safe:
//! - a fill starts at or after `align_up(queued_bytes)` (past every byte handed to a write,
//!   the partial last page included), so zeros never cover data;
//! - while a fill runs, no write ending past its start is issued (`take_job` waits), and
//!   finalize, truncation and close wait for it (`drain(idle)` counts it);
//! - a segment's `prealloc_end` advances only after the zeros are written and fsynced, so
//!   the file size covering later appends is already durable.
//!
//! The trailing zeros are what recovery already handles (the scan stops at the first
//! invalid batch and truncates; finalize and close trim the file to its exact size). A fill
//! that runs out of space (ENOSPC, EDQUOT) only turns preallocation off for that segment:
//! appends then grow the file as before and meet the full disk themselves. Any other failed
//! write or sync of a fill takes the log offline, as an append's own would.

use std::rc::Rc;

use super::error::StorageError;
use super::log::LogInner;
use super::FlushPolicy;
use crate::constants::LOG_PREALLOCATE_BYTES_MIN;
use crate::io::{align_down, align_up, DataFile, FileSystem};

/// A fill to start: `[from, to)` of segment `seg_base`'s file.
pub(super) struct Fill<D> {
    pub seg_base: i64,
    pub file: Rc<D>,
    pub from: u64,
    pub to: u64,
}

/// The region to zero-fill after a write queued up to `queued_bytes`, if one is due: when
/// less than a step of preallocated space is left (with half a step, fills at 66,000
/// records/s over 8 partitions did not finish before the appends reached them, and the
/// appends waited: p99 16.5 ms against 9.9 ms with a whole step). The step grows with the segment
/// (its current size, between the minimum and `step_max`), capped at the segment size
/// limit. Writes that catch up with a running fill are cut at its start (`writer`).
#[must_use]
pub(super) fn next_fill(
    queued_bytes: u64,
    prealloc_end: u64,
    step_max: u64,
    segment_bytes: u64,
) -> Option<(u64, u64)> {
    if step_max == 0 {
        return None;
    }
    let data_end = align_up(queued_bytes);
    let step = align_down(
        data_end.clamp(LOG_PREALLOCATE_BYTES_MIN, step_max.max(LOG_PREALLOCATE_BYTES_MIN)),
    );
    if data_end + step < prealloc_end {
        return None;
    }
    let from = prealloc_end.max(data_end);
    let to = (from + step).min(align_up(segment_bytes));
    (to > from).then_some((from, to))
}

impl<F: FileSystem> LogInner<F> {
    /// Whether the writer keeps space preallocated for this log now.
    pub(super) fn prealloc_step(&self) -> u64 {
        let c = self.cfg();
        if c.flush == FlushPolicy::EveryBatch {
            c.preallocate_bytes
        } else {
            0
        }
    }

    /// Runs `fill` beside the writer: zeros, fdatasync, then `prealloc_end` moves and the
    /// writer is woken (writes waiting for the fill go on).
    pub(super) fn start_fill(self: &Rc<Self>, fill: Fill<F::File>) {
        let me = self.clone();
        self.fs.spawn(Box::pin(async move {
            let Fill { seg_base, file, from, to } = fill;
            let result = async {
                // The size and the blocks first, then the zeros: a zero write that grows the
                // file is an extending O_DIRECT write, which ext4 runs under the inode's
                // exclusive lock after waiting out every other write to the file, so each
                // chunk of a fill stalled the appends below it (p99 19 ms at 66,000
                // records/s, 109 ms with 64 MiB steps). Zeros written inside the size
                // overwrite allocated blocks, under the shared lock, beside the appends.
                // A file system without fallocate grows the file with the zeros, as before.
                match file.allocate(to).await {
                    Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {}
                    other => other?,
                }
                file.write_zeros(from, to - from).await?;
                file.sync().await
            }
            .await;
            let result = result.map_err(StorageError::io("write", &me.seg_path(seg_base), from));
            let mut st = me.st.borrow_mut();
            st.fill = None;
            match result {
                Ok(()) => {
                    if let Some(seg) = st.segments.get_mut(&seg_base) {
                        seg.prealloc_end = seg.prealloc_end.max(to);
                    }
                }
                Err(e) if e.is_out_of_space() => {
                    if let Some(seg) = st.segments.get_mut(&seg_base) {
                        seg.prealloc_off = true;
                    }
                    tracing::warn!(dir = %me.dir.display(), base = seg_base, error = %e, "preallocation failed; this segment's appends grow the file instead");
                }
                // Any other failed write or sync on the segment file: the file refuses
                // further writes, as after an append's own failure (`writer`).
                Err(e) => me.go_offline(&mut st, &e),
            }
            drop(st);
            me.progress.notify_all();
            me.kick_writer();
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn fills_start_past_the_data_and_grow_with_the_segment() {
        // Empty segment: the minimum step, from 0.
        assert_eq!(next_fill(0, 0, 8 * MIB, 1024 * MIB), Some((0, LOG_PREALLOCATE_BYTES_MIN)));
        // A partial page is never zero-filled: the fill starts at the next page.
        assert_eq!(next_fill(5000, 0, 8 * MIB, 1024 * MIB), Some((8192, 8192 + 256 * 1024)));
        // Plenty left (at least a step): nothing to do.
        assert_eq!(next_fill(MIB, 4 * MIB, 8 * MIB, 1024 * MIB), None);
        assert_eq!(next_fill(8192, 12288 + 256 * 1024, 8 * MIB, 1024 * MIB), None);
        // Less than a step left: the next step starts at the preallocated end.
        assert_eq!(
            next_fill(8192, 4096 + 256 * 1024, 8 * MIB, 1024 * MIB),
            Some((4096 + 256 * 1024, 4096 + 512 * 1024))
        );
        // Less left: the next step starts at the preallocated end.
        let three = 3 * MIB + 4096;
        assert_eq!(
            next_fill(3 * MIB + 1, 4 * MIB, 8 * MIB, 1024 * MIB),
            Some((4 * MIB, 4 * MIB + three))
        );
        // Steps stop at the segment size limit and at step_max.
        assert_eq!(
            next_fill(100 * MIB, 100 * MIB, 8 * MIB, 104 * MIB),
            Some((100 * MIB, 104 * MIB))
        );
        assert_eq!(next_fill(200 * MIB, 0, 8 * MIB, 1024 * MIB), Some((200 * MIB, 208 * MIB)));
        assert_eq!(next_fill(104 * MIB, 104 * MIB, 8 * MIB, 104 * MIB), None);
        // Off.
        assert_eq!(next_fill(0, 0, 0, 1024 * MIB), None);
    }
}
