//! One device flush for the durable overwrites of many files: the group commit of
//! [`DataFile::sync_overwrites`](super::DataFile::sync_overwrites) on glommio DMA files.
//!
//! Why: under fsync-every-batch each partition's writer used to fdatasync its own segment
//! file, so a shard writing 8 partitions in one tick paid 8 device flushes where one does:
//! an O_DIRECT write that overwrites written blocks inside the file's durable size (the
//! zero-filled preallocation of `storage::prealloc`) changes no metadata fdatasync must
//! commit, so what makes it durable is the device's cache flush. On ext4 and XFS an
//! fdatasync of *any* file on the device issues that flush (`blkdev_issue_flush`) even when
//! the file itself has nothing to commit, and it covers every write that completed before it
//! was issued. The device does ~6,600 serial flushes a second here (fio, qd1), which was
//! the ceiling of durable appends over several partitions (perf/results).
//!
//! Lives on one shard (thread-local, one group per device id). Invariants:
//! - a caller registers only after its own write completed, and a flush covers exactly the
//!   callers registered before it was issued;
//! - at most [`DEVICE_FLUSHES_IN_FLIGHT_MAX`] flushes per device are in flight: a caller
//!   finding fewer starts one at once (an idle shard pays no wait), otherwise it waits for
//!   the next flush a running task issues, which covers everyone who waited meanwhile;
//! - the flush is an fdatasync of one of the covered callers' own files (kept open by the
//!   `Rc`), so its own metadata, if any, is committed too;
//! - a failed flush fails every caller it covered (each log then refuses writes), keeping
//!   the raw OS error so ENOSPC stays recognisable;
//! - on any other file system (tmpfs, btrfs, ...), and for a file whose writes do not go
//!   straight to the device (statx reports no direct-I/O alignment: ext4 data=journal),
//!   `sync_overwrites` is a plain fdatasync of the file (`DmaDataFile` decides at open).

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::rc::Rc;

use futures::channel::oneshot;
use glommio::io::DmaFile;

use crate::constants::DEVICE_FLUSHES_IN_FLIGHT_MAX;

/// `statfs` magic numbers of the file systems whose fdatasync always flushes the device.
const EXT4_SUPER_MAGIC: i64 = 0xEF53;
const XFS_SUPER_MAGIC: i64 = 0x5846_5342;

/// What a flush reports to each caller it covered (`io::Error` is not `Clone`).
type Outcome = Result<(), (Option<i32>, String)>;

#[derive(Default)]
struct Group {
    /// Flush tasks running (each takes `waiting` before each of its flushes).
    running: usize,
    waiting: Vec<(Rc<DmaFile>, oneshot::Sender<Outcome>)>,
}

thread_local! {
    static GROUPS: RefCell<HashMap<u64, Rc<RefCell<Group>>>> = RefCell::new(HashMap::new());
}

/// Whether shared flushes are on: `SHARDLOG_SHARED_FLUSH=0` turns them off (one fdatasync
/// per log sync, as before), read once per process: an operator's escape hatch and the A/B
/// switch of `perf/durable.sh`.
fn enabled() -> bool {
    static VALUE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *VALUE.get_or_init(|| std::env::var("SHARDLOG_SHARED_FLUSH").map_or(true, |v| v.trim() != "0"))
}

/// The device group of an open file: its device id when its file system flushes the device
/// on every fdatasync (ext4, XFS), `None` otherwise (then no sharing).
pub(super) fn group_of(fd: std::os::fd::RawFd) -> Option<u64> {
    if !enabled() {
        return None;
    }
    // SAFETY: plain fstatfs/statx on an open descriptor into zeroed out-parameters.
    unsafe {
        let mut fs: libc::statfs = std::mem::zeroed();
        if libc::fstatfs(fd, &mut fs) != 0 {
            return None;
        }
        #[allow(clippy::unnecessary_cast)] // f_type's width differs between libc targets
        let magic = fs.f_type as i64;
        if magic != EXT4_SUPER_MAGIC && magic != XFS_SUPER_MAGIC {
            return None;
        }
        // Only a file that really does direct I/O: with ext4's data=journal (or `chattr +j`)
        // writes fall back to the page cache, where another file's fdatasync writes
        // nothing of them. The kernel reports a direct-I/O alignment of 0 then (or no
        // alignment at all before Linux 6.1: no sharing either).
        let mut sx: libc::statx = std::mem::zeroed();
        let none = c"";
        if libc::statx(fd, none.as_ptr(), libc::AT_EMPTY_PATH, libc::STATX_DIOALIGN, &mut sx) != 0
            || sx.stx_mask & libc::STATX_DIOALIGN == 0
            || sx.stx_dio_offset_align == 0
        {
            return None;
        }
        Some(libc::makedev(sx.stx_dev_major, sx.stx_dev_minor))
    }
}

/// Makes `file`'s completed overwrites durable with the next device flush of `device`.
pub(super) async fn flush(device: u64, file: Rc<DmaFile>) -> io::Result<()> {
    let group = GROUPS.with(|g| g.borrow_mut().entry(device).or_default().clone());
    let (tx, rx) = oneshot::channel();
    let start = {
        let mut g = group.borrow_mut();
        g.waiting.push((file, tx));
        let start = g.running < DEVICE_FLUSHES_IN_FLIGHT_MAX;
        g.running += usize::from(start);
        start
    };
    if start {
        // A task of its own, not this caller's future: the callers it covers must be
        // answered even if this one is dropped.
        glommio::spawn_local(run(group)).detach();
    }
    match rx.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err((Some(code), _))) => Err(io::Error::from_raw_os_error(code)),
        Ok(Err((None, msg))) => Err(io::Error::other(msg)),
        Err(oneshot::Canceled) => Err(io::Error::other("device flush abandoned")),
    }
}

/// Flushes until nobody waits: each round takes every caller registered so far.
async fn run(group: Rc<RefCell<Group>>) {
    loop {
        let batch = {
            let mut g = group.borrow_mut();
            if g.waiting.is_empty() {
                g.running -= 1;
                return;
            }
            std::mem::take(&mut g.waiting)
        };
        let outcome: Outcome = match batch[0].0.fdatasync().await {
            Ok(()) => Ok(()),
            Err(e) => {
                let e = io::Error::from(e);
                Err((e.raw_os_error(), e.to_string()))
            }
        };
        crate::metrics::device_flush(batch.len() as u64);
        for (_, tx) in batch {
            let _ = tx.send(outcome.clone());
        }
    }
}
