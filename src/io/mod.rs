//! The I/O seam of the storage engine: a small file-system trait ([`FileSystem`], [`DataFile`])
//! with two implementations, glommio DMA files ([`dma`]) and a fault-injecting in-memory
//! file system ([`mem`]), plus the start-up workarounds this machine needs
//! ([`probe_data_dir`], [`raise_memlock_limit`]), and the socket wrapper whose vectored
//! writes are one `sendmsg` ([`vectored`]).
//!
//! Lives on every shard: each shard's executor creates its own file handles; nothing here is
//! shared across threads (`Rc`, not `Arc`). Only this module and the shard runtime import
//! glommio, so the storage logic runs unchanged on the in-memory backend in tests.
//!
//! Invariants of every implementation:
//! - [`DataFile::write_at`] takes a position aligned to [`DIRECT_IO_ALIGNMENT_BYTES`] and pads
//!   the written length up to that alignment with zeros (what an O_DIRECT write does);
//! - a completed `write_at` survives a process crash; only [`DataFile::sync`] makes it survive
//!   a power loss, and only [`FileSystem::sync_dir`] makes a created, renamed or removed name
//!   survive one.

mod device_flush;
pub mod dma;
pub mod host;
pub mod mem;
pub mod net;
pub mod vectored;

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;

pub use crate::constants::DIRECT_IO_ALIGNMENT_BYTES;

/// Largest single write of [`DataFile::write_zeros`].
pub const ZERO_CHUNK_BYTES: usize = 256 * 1024;

/// A boxed, non-`Send` future, as spawned on the current shard.
pub type LocalTask = Pin<Box<dyn Future<Output = ()> + 'static>>;

/// A file holding log or index data, opened for reading and writing.
pub trait DataFile: 'static {
    /// Reads up to `len` bytes at `pos`; shorter only at the end of the file.
    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes>;
    /// Writes the concatenation of `parts` at `pos` (aligned), padded with zeros to the
    /// alignment. The file grows to at least the padded end.
    async fn write_at(&self, pos: u64, parts: &[&[u8]]) -> io::Result<()>;
    /// Writes `len` zero bytes at `pos` (both aligned): preallocation with written extents.
    async fn write_zeros(&self, pos: u64, len: u64) -> io::Result<()> {
        static ZEROS: [u8; ZERO_CHUNK_BYTES] = [0; ZERO_CHUNK_BYTES];
        let mut at = 0;
        while at < len {
            let n = (len - at).min(ZERO_CHUNK_BYTES as u64);
            self.write_at(pos + at, &[&ZEROS[..n as usize]]).await?;
            at += n;
        }
        Ok(())
    }
    /// Makes every completed write and size change durable (fdatasync).
    async fn sync(&self) -> io::Result<()>;
    /// [`DataFile::sync`] for a file whose completed writes since its last sync all
    /// overwrote blocks that were written and made durable before, inside its durable size
    /// (a preallocated, fsynced region): there is no metadata to commit, only the device's
    /// write cache to flush, so one device flush may cover the calls of several files at
    /// once ([`dma`] does so on ext4 and XFS). The caller guarantees the precondition; the
    /// default is a plain `sync`.
    async fn sync_overwrites(&self) -> io::Result<()> {
        self.sync().await
    }
    /// Sets the file size (sparse when growing).
    async fn truncate(&self, size_bytes: u64) -> io::Result<()>;
    /// Grows the file to at least `size_bytes` with blocks allocated but not written
    /// (`fallocate`; they read as zeros); never shrinks it. The default grows it sparse.
    async fn allocate(&self, size_bytes: u64) -> io::Result<()> {
        if self.size().await? < size_bytes {
            self.truncate(size_bytes).await?;
        }
        Ok(())
    }
    /// Current file size in bytes.
    async fn size(&self) -> io::Result<u64>;
    /// Releases the handle; later calls fail.
    async fn close(&self) -> io::Result<()>;
}

/// Time and tasks as code that must also run under a deterministic simulator sees them: a
/// wall clock, a monotonic clock, a timer and a spawner. The real one is glommio's
/// ([`dma::GlommioRuntime`]); a simulator supplies a virtual one (e.g. to
/// [`mem::MemFileSystem::with_runtime`]), so storage logic never reads a clock or names an
/// executor itself.
pub trait Runtime {
    /// Wall-clock milliseconds since the Unix epoch (record timestamps, retention).
    fn now_ms(&self) -> i64;
    /// Monotonic time since an arbitrary origin (intervals, deadlines).
    fn monotonic(&self) -> Duration;
    /// Runs `task` concurrently on the current shard.
    fn spawn(&self, task: LocalTask);
    /// Completes after `duration` of this runtime's time.
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Future<Output = ()>>>;
}

/// The process's real clocks: wall time, and monotonic time since the first call.
#[must_use]
pub fn real_monotonic() -> Duration {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(std::time::Instant::now).elapsed()
}

/// Wall-clock milliseconds since the Unix epoch.
#[must_use]
pub fn real_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The directory-level operations plus the runtime hooks the storage engine needs
/// (clocks, spawning a background task on the current shard, sleeping): storage takes its
/// time from here, never from `Instant::now` directly.
pub trait FileSystem: 'static {
    /// Monotonic time since an arbitrary origin (the flush interval, write timings).
    fn monotonic(&self) -> Duration {
        real_monotonic()
    }
    /// Wall-clock milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64 {
        real_now_ms()
    }
    type File: DataFile;
    /// Opens `path` for read and write, creating it (empty) if `create` and missing.
    async fn open(&self, path: &Path, create: bool) -> io::Result<Self::File>;
    async fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// File names (not paths) in `dir`, unsorted.
    async fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>>;
    async fn remove_file(&self, path: &Path) -> io::Result<()>;
    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes the names created, renamed or removed in `dir` durable.
    async fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Runs `task` concurrently on the current shard.
    fn spawn(&self, task: LocalTask);
    async fn sleep(&self, duration: Duration);
    /// Lets higher-priority work on this shard run if this task has used its time slice
    /// (long CPU-bound background work, such as the log cleaner, calls it between batches).
    async fn yield_if_needed(&self) {
        futures_lite::future::yield_now().await;
    }

    /// The whole content of a small file, `None` if it does not exist.
    async fn read_file(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        let names = match path.parent() {
            Some(dir) => self.list_dir(dir).await?,
            None => return Ok(None),
        };
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if !names.iter().any(|n| Some(n) == name.as_ref()) {
            return Ok(None);
        }
        let file = self.open(path, false).await?;
        let size = file.size().await?;
        let len = usize::try_from(size).map_err(|_| io::Error::other("file too large"))?;
        let data = file.read_at(0, len).await?;
        file.close().await?;
        Ok(Some(data.to_vec()))
    }

    /// Replaces a small file atomically and durably: write `<path>.tmp`, sync, rename, sync
    /// the directory.
    async fn write_file_atomic(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let file = self.open(&tmp, true).await?;
        file.truncate(0).await?;
        file.write_at(0, &[data]).await?;
        file.truncate(data.len() as u64).await?;
        file.sync().await?;
        file.close().await?;
        self.rename(&tmp, path).await?;
        let dir = path.parent().ok_or_else(|| io::Error::other("path without parent"))?;
        self.sync_dir(dir).await
    }
}

/// Rounds `v` down to the direct I/O alignment.
#[must_use]
pub fn align_down(v: u64) -> u64 {
    v - v % DIRECT_IO_ALIGNMENT_BYTES
}

/// Rounds `v` up to the direct I/O alignment.
#[must_use]
pub fn align_up(v: u64) -> u64 {
    align_down(v + DIRECT_IO_ALIGNMENT_BYTES - 1)
}

/// Raises RLIMIT_MEMLOCK (glommio refuses to start below 512 KiB of locked memory and its
/// buffer registration fails under 8 MiB). Needs root or CAP_IPC_LOCK to go above the hard
/// limit; best effort otherwise.
pub fn raise_memlock_limit(bytes: u64) -> io::Result<()> {
    let wanted = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
    // SAFETY: setrlimit/getrlimit only read/write the struct we pass.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &raw const wanted) };
    if rc == 0 {
        return Ok(());
    }
    let mut current = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: as above.
    unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &raw mut current) };
    let capped = libc::rlimit { rlim_cur: current.rlim_max, rlim_max: current.rlim_max };
    // SAFETY: as above.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &raw const capped) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The iopoll-probe workaround (see `design.md`): the first DMA file an executor opens on a
/// device decides whether glommio polls it; if that file is empty the probe wrongly marks
/// the device pollable and every later DMA read fails with EOPNOTSUPP. So, on every executor
/// and before opening any log, write 4 KiB to a probe file in `dir`, sync it, reopen it with
/// `DmaFile::open` and read it back.
pub async fn probe_data_dir(dir: &Path) -> io::Result<()> {
    dma::probe(dir).await
}

/// Runs `fut` to completion on a fresh single-threaded glommio executor on the current
/// thread, after raising RLIMIT_MEMLOCK. For tests, benchmarks and tools; the broker uses the
/// shard runtime instead.
pub fn run_local<T, Fut: Future<Output = T>>(fut: Fut) -> T {
    let _ = raise_memlock_limit(512 * 1024 * 1024);
    let ex = glommio::LocalExecutorBuilder::default()
        .make()
        .unwrap_or_else(|e| panic!("cannot start a glommio executor: {e}"));
    ex.run(fut)
}
