//! [`FileSystem`] on glommio DMA files (O_DIRECT through io_uring).
//!
//! Lives on the shard whose executor created the handles. Writes copy the caller's parts into
//! one aligned DMA buffer, zero-padded to [`DIRECT_IO_ALIGNMENT_BYTES`]; reads widen the
//! request to the alignment, read aligned and cut the answer to the bytes asked for that the
//! file holds (never past its end). Directory
//! operations (create, list, rename, remove, directory fsync) are plain blocking syscalls:
//! they are rare (segment roll, checkpoints, open) and tiny.

use std::cell::RefCell;
use std::io;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use glommio::io::{DmaBuffer, DmaFile, OpenOptions};

use super::{align_down, align_up, DataFile, FileSystem, LocalTask, DIRECT_IO_ALIGNMENT_BYTES};

/// Name prefix of the probe files `probe` writes in each data directory (one per executor).
pub const PROBE_FILE_NAME: &str = ".shardlog-iopoll-probe";

/// The glommio DMA file system. Stateless: handles are per file.
#[derive(Clone, Copy, Debug, Default)]
pub struct DmaFileSystem;

/// The real [`super::Runtime`]: the process's clocks, glommio's timer and spawner (on the
/// current executor).
#[derive(Clone, Copy, Debug, Default)]
pub struct GlommioRuntime;

impl super::Runtime for GlommioRuntime {
    fn now_ms(&self) -> i64 {
        super::real_now_ms()
    }

    fn monotonic(&self) -> Duration {
        super::real_monotonic()
    }

    fn spawn(&self, task: LocalTask) {
        glommio::spawn_local(task).detach();
    }

    fn sleep(
        &self,
        duration: Duration,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
        Box::pin(async move {
            glommio::timer::sleep(duration).await;
        })
    }
}

/// An open DMA file. `close` takes the handle out, so later calls fail cleanly.
pub struct DmaDataFile {
    file: RefCell<Option<std::rc::Rc<DmaFile>>>,
    /// Buffers of completed writes, reused by later writes of the same padded size: a fresh
    /// multi-MiB buffer costs a page fault per 4 KiB, more than the copy into it.
    spare: RefCell<Vec<DmaBuffer>>,
    /// The device whose flushes `sync_overwrites` shares (`device_flush`); `None` on a file
    /// system whose fdatasync need not flush the device.
    device: Option<u64>,
}

thread_local! {
    /// The shard's zeroed buffer for [`DataFile::write_zeros`].
    static ZEROS: RefCell<Option<std::rc::Rc<DmaBuffer>>> = const { RefCell::new(None) };
}

/// Spare write buffers kept per file.
const SPARE_BUFFERS_MAX: usize = 2;

fn glommio_io(e: glommio::GlommioError<()>) -> io::Error {
    io::Error::from(e)
}

impl DmaDataFile {
    fn handle(&self) -> io::Result<std::rc::Rc<DmaFile>> {
        self.file.borrow().clone().ok_or_else(|| io::Error::other("file already closed"))
    }
}

impl DataFile for DmaDataFile {
    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        if len == 0 {
            return Ok(Bytes::new());
        }
        let file = self.handle()?;
        // The aligned read is sliced here, not by glommio's unaligned `read_at`: for a read
        // that runs past the end of the file from an unaligned position, glommio 0.9 keeps
        // `min(bytes read, len)` from the position, which counts the bytes before it too,
        // so up to an alignment unit of stale buffer came back past the end.
        let start = align_down(pos);
        let skip = usize::try_from(pos - start).map_err(io::Error::other)?;
        let span = usize::try_from(align_up(pos + len as u64) - start).map_err(io::Error::other)?;
        let res = file.read_at_aligned(start, span).await.map_err(glommio_io)?;
        if res.len() <= skip {
            return Ok(Bytes::new());
        }
        Ok(Bytes::copy_from_slice(&res[skip..res.len().min(skip + len)]))
    }

    async fn write_at(&self, pos: u64, parts: &[&[u8]]) -> io::Result<()> {
        debug_assert_eq!(pos % DIRECT_IO_ALIGNMENT_BYTES, 0, "unaligned DMA write");
        let file = self.handle()?;
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let padded = usize::try_from(align_up(len as u64)).map_err(io::Error::other)?;
        if padded == 0 {
            return Ok(());
        }
        let spare = {
            let mut spare = self.spare.borrow_mut();
            spare.iter().position(|b| b.len() == padded).map(|i| spare.swap_remove(i))
        };
        let mut buf = spare.unwrap_or_else(|| file.alloc_dma_buffer(padded));
        let dst = buf.as_bytes_mut();
        let mut at = 0;
        for p in parts {
            dst[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        dst[at..].fill(0);
        let buf = std::rc::Rc::new(buf);
        let written = file.write_rc_at(buf.clone(), pos).await.map_err(glommio_io)?;
        if let Ok(buf) = std::rc::Rc::try_unwrap(buf) {
            let mut spare = self.spare.borrow_mut();
            if spare.len() >= SPARE_BUFFERS_MAX {
                spare.remove(0);
            }
            spare.push(buf);
        }
        if written != padded {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short DMA write: {written} of {padded} bytes"),
            ));
        }
        Ok(())
    }

    async fn write_zeros(&self, pos: u64, len: u64) -> io::Result<()> {
        debug_assert_eq!(pos % DIRECT_IO_ALIGNMENT_BYTES, 0, "unaligned DMA write");
        let file = self.handle()?;
        // One zeroed buffer per shard, shared by every file: no copy, no fresh pages.
        let zeros = ZEROS.with(|z| {
            z.borrow_mut()
                .get_or_insert_with(|| {
                    let mut b = file.alloc_dma_buffer(super::ZERO_CHUNK_BYTES);
                    b.as_bytes_mut().fill(0);
                    std::rc::Rc::new(b)
                })
                .clone()
        });
        let mut at = 0;
        while at < len {
            let n = (len - at).min(super::ZERO_CHUNK_BYTES as u64);
            let written = if n == super::ZERO_CHUNK_BYTES as u64 {
                file.write_rc_at(zeros.clone(), pos + at).await.map_err(glommio_io)?
            } else {
                let padded = usize::try_from(align_up(n)).map_err(io::Error::other)?;
                let mut b = file.alloc_dma_buffer(padded);
                b.as_bytes_mut().fill(0);
                file.write_at(b, pos + at).await.map_err(glommio_io)?
            };
            if written as u64 != align_up(n) {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!("short DMA write: {written} of {n} zero bytes"),
                ));
            }
            at += n;
        }
        Ok(())
    }

    async fn sync(&self) -> io::Result<()> {
        self.handle()?.fdatasync().await.map_err(glommio_io)
    }

    async fn sync_overwrites(&self) -> io::Result<()> {
        match self.device {
            Some(device) => super::device_flush::flush(device, self.handle()?).await,
            None => self.sync().await,
        }
    }

    async fn truncate(&self, size_bytes: u64) -> io::Result<()> {
        self.handle()?.truncate(size_bytes).await.map_err(glommio_io)
    }

    async fn allocate(&self, size_bytes: u64) -> io::Result<()> {
        // fallocate mode 0: blocks in [0, size) that exist are left alone.
        self.handle()?.pre_allocate(size_bytes, false).await.map_err(glommio_io)
    }

    async fn size(&self) -> io::Result<u64> {
        self.handle()?.file_size().await.map_err(glommio_io)
    }

    async fn close(&self) -> io::Result<()> {
        let file = self.file.borrow_mut().take();
        if let Some(file) = file {
            file.close_rc().await.map_err(glommio_io)?;
        }
        Ok(())
    }
}

impl FileSystem for DmaFileSystem {
    type File = DmaDataFile;

    async fn open(&self, path: &Path, create: bool) -> io::Result<DmaDataFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .dma_open(path)
            .await
            .map_err(glommio_io)?;
        let device = super::device_flush::group_of(std::os::fd::AsRawFd::as_raw_fd(&file));
        Ok(DmaDataFile {
            file: RefCell::new(Some(std::rc::Rc::new(file))),
            spare: RefCell::new(Vec::new()),
            device,
        })
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    async fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        // Unlinking a large segment frees its extents: off the reactor thread.
        let path = path.to_path_buf();
        glommio::executor().spawn_blocking(move || std::fs::remove_file(path)).await
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    async fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        // A directory fsync waits for a journal commit, which takes milliseconds on a busy
        // disk: run it on glommio's blocking pool so requests on this shard keep flowing.
        let dir = dir.to_path_buf();
        glommio::executor().spawn_blocking(move || std::fs::File::open(dir)?.sync_all()).await
    }

    fn spawn(&self, task: LocalTask) {
        glommio::spawn_local(task).detach();
    }

    async fn sleep(&self, duration: Duration) {
        glommio::timer::sleep(duration).await;
    }

    async fn yield_if_needed(&self) {
        glommio::executor().yield_if_needed().await;
    }
}

/// See [`super::probe_data_dir`].
pub(super) async fn probe(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    // One file per executor: every shard probes the same directory at start, and a shared
    // file would let one shard's create (truncate) race another's read-back.
    let path = dir.join(format!("{PROBE_FILE_NAME}-{}", glommio::executor().id()));
    let len = usize::try_from(DIRECT_IO_ALIGNMENT_BYTES).map_err(io::Error::other)?;
    // Written with plain std I/O, so the first file glommio opens on this device is a
    // non-empty one opened for reading: its iopoll probe then reads real data (a write-only
    // `DmaFile::create` made the probe fail with EBADF and log an ERROR at every start).
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&path)?;
        file.write_all(&vec![0x5a; len])?;
        file.sync_all()?;
    }
    let file = DmaFile::open(&path).await.map_err(glommio_io)?;
    let read = file.read_at(0, len).await.map_err(glommio_io)?;
    file.close().await.map_err(glommio_io)?;
    if read.len() != len || read.iter().any(|b| *b != 0x5a) {
        return Err(io::Error::other(format!("iopoll probe read back wrong data in {dir:?}")));
    }
    Ok(())
}
