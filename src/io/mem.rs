//! An in-memory [`FileSystem`] for tests that can fail the Nth write or sync, tear a write at
//! any byte, and simulate a process crash or a power loss.
//!
//! Lives on one shard (`Rc`); clones share state. Each file keeps two images: `data` (what a
//! reader sees, i.e. what survives a process crash) and `durable` (what a completed sync
//! covered, i.e. what survives a power loss). Names work the same way: a create, rename or
//! remove is durable only after [`FileSystem::sync_dir`] on its directory. [`MemFileSystem::
//! power_loss`] and [`MemFileSystem::crash`] return a *new* file system built from one image,
//! so tasks of the "dead" process cannot touch it.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;

use super::{align_up, DataFile, FileSystem, LocalTask, Runtime};

/// Faults to inject; counts are 1-based and count only operations on files whose name ends
/// with `path_suffix` (all files when `None`).
#[derive(Clone, Debug, Default)]
pub struct FaultPlan {
    pub path_suffix: Option<String>,
    /// The Nth matching write fails without changing anything.
    pub fail_write: Option<u64>,
    /// The Nth matching write applies only its first `bytes` bytes, then fails.
    pub tear_write: Option<(u64, usize)>,
    /// The Nth matching sync fails without making anything durable.
    pub fail_sync: Option<u64>,
}

/// One file image: `data` holds the bytes up to the last written one; the file is `size`
/// bytes long, zeros past `data` (sparse, so preallocated indexes cost nothing).
#[derive(Clone, Default)]
struct Image {
    data: Vec<u8>,
    size: usize,
}

impl Image {
    fn write(&mut self, pos: usize, bytes: &[u8]) {
        let end = pos + bytes.len();
        if self.data.len() < end {
            self.data.resize(end, 0);
        }
        self.data[pos..end].copy_from_slice(bytes);
        self.size = self.size.max(end);
    }

    fn bytes(&self) -> Vec<u8> {
        let mut v = self.data.clone();
        v.resize(self.size, 0);
        v
    }
}

#[derive(Default)]
struct Inode {
    data: Image,
    durable: Image,
}

#[derive(Default)]
struct State {
    inodes: HashMap<u64, Inode>,
    next_inode: u64,
    names: BTreeMap<PathBuf, u64>,
    durable_names: BTreeMap<PathBuf, u64>,
    dirs: BTreeSet<PathBuf>,
    faults: FaultPlan,
    writes_seen: u64,
    syncs_seen: u64,
    /// Every write fails with ENOSPC while set (a full disk), whatever the plan.
    disk_full: bool,
    /// Handles neither closed nor dropped, by the path they were opened with (tests of
    /// bounded file descriptors), and how many opens there were.
    open_handles: BTreeMap<PathBuf, usize>,
    opens: u64,
}

/// The in-memory file system. Cloning shares the state. Its clocks, timer and spawner come
/// from a [`Runtime`] (glommio's by default; a simulator passes a virtual one), so this file
/// names no executor.
#[derive(Clone)]
pub struct MemFileSystem {
    state: Rc<RefCell<State>>,
    runtime: Rc<dyn Runtime>,
}

impl Default for MemFileSystem {
    fn default() -> Self {
        Self { state: Rc::default(), runtime: Rc::new(super::dma::GlommioRuntime) }
    }
}

/// A handle to an in-memory file (by inode, so renames keep it valid, as on Linux).
pub struct MemFile {
    state: Rc<RefCell<State>>,
    inode: u64,
    path: PathBuf,
    closed: Cell<bool>,
}

/// Linux's "No space left on device".
const ENOSPC: i32 = 28;

fn injected(what: &str) -> io::Error {
    io::Error::other(format!("injected fault: {what}"))
}

impl MemFileSystem {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty file system whose time and tasks come from `runtime` (a simulator's).
    #[must_use]
    pub fn with_runtime(runtime: Rc<dyn Runtime>) -> Self {
        Self { state: Rc::default(), runtime }
    }

    /// Replaces the fault plan and restarts its counters.
    pub fn set_faults(&self, plan: FaultPlan) {
        let mut st = self.state.borrow_mut();
        st.faults = plan;
        st.writes_seen = 0;
        st.syncs_seen = 0;
    }

    /// Fills the disk (every write fails with ENOSPC) or frees it again.
    pub fn set_disk_full(&self, full: bool) {
        self.state.borrow_mut().disk_full = full;
    }

    /// The file system a restarted process sees after a power loss: only synced data and
    /// names.
    #[must_use]
    pub fn power_loss(&self) -> MemFileSystem {
        let st = self.state.borrow();
        let mut new = State { dirs: st.dirs.clone(), ..State::default() };
        for (name, ino) in &st.durable_names {
            let durable = st.inodes.get(ino).map(|i| i.durable.clone()).unwrap_or_default();
            new.inodes.insert(*ino, Inode { data: durable.clone(), durable });
            new.names.insert(name.clone(), *ino);
        }
        new.durable_names = new.names.clone();
        new.next_inode = st.next_inode;
        MemFileSystem { state: Rc::new(RefCell::new(new)), runtime: self.runtime.clone() }
    }

    /// The file system a restarted process sees after SIGKILL: every completed write.
    #[must_use]
    pub fn crash(&self) -> MemFileSystem {
        let st = self.state.borrow();
        let mut new = State { dirs: st.dirs.clone(), ..State::default() };
        for (name, ino) in &st.names {
            let data = st.inodes.get(ino).map(|i| i.data.clone()).unwrap_or_default();
            new.inodes.insert(*ino, Inode { durable: data.clone(), data });
            new.names.insert(name.clone(), *ino);
        }
        new.durable_names = new.names.clone();
        new.next_inode = st.next_inode;
        MemFileSystem { state: Rc::new(RefCell::new(new)), runtime: self.runtime.clone() }
    }

    /// Open handles (neither closed nor dropped) of files whose path ends with `suffix`.
    #[must_use]
    pub fn open_handles(&self, suffix: &str) -> usize {
        let st = self.state.borrow();
        st.open_handles
            .iter()
            .filter(|(p, _)| p.to_string_lossy().ends_with(suffix))
            .map(|(_, n)| *n)
            .sum()
    }

    /// How many files were opened (or created) so far.
    #[must_use]
    pub fn opens(&self) -> u64 {
        self.state.borrow().opens
    }

    /// Current content of a file (test inspection), `None` if missing.
    #[must_use]
    pub fn file_content(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.state.borrow();
        st.names.get(path).and_then(|ino| st.inodes.get(ino)).map(|i| i.data.bytes())
    }

    /// Overwrites bytes of a file in both images (test corruption), growing it if needed.
    pub fn corrupt(&self, path: &Path, pos: usize, bytes: &[u8]) {
        let mut st = self.state.borrow_mut();
        let Some(ino) = st.names.get(path).copied() else { return };
        if let Some(inode) = st.inodes.get_mut(&ino) {
            for img in [&mut inode.data, &mut inode.durable] {
                img.write(pos, bytes);
            }
        }
    }
}

fn matches(plan: &FaultPlan, path: &Path) -> bool {
    match &plan.path_suffix {
        None => true,
        Some(s) => path.to_string_lossy().ends_with(s.as_str()),
    }
}

impl MemFile {
    fn check_open(&self) -> io::Result<()> {
        if self.closed.get() {
            return Err(io::Error::other("file already closed"));
        }
        Ok(())
    }

    fn with_inode<T>(&self, f: impl FnOnce(&mut Inode) -> T) -> io::Result<T> {
        self.check_open()?;
        let mut st = self.state.borrow_mut();
        let inode = st.inodes.get_mut(&self.inode).ok_or_else(|| io::Error::other("no inode"))?;
        Ok(f(inode))
    }
}

impl DataFile for MemFile {
    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        self.with_inode(|i| {
            let img = &i.data;
            let start = usize::try_from(pos).unwrap_or(usize::MAX).min(img.size);
            let end = start.saturating_add(len).min(img.size);
            let mut out = vec![0u8; end - start];
            let have = img.data.len().clamp(start, end);
            out[..have - start].copy_from_slice(&img.data[start..have]);
            Bytes::from(out)
        })
    }

    async fn write_at(&self, pos: u64, parts: &[&[u8]]) -> io::Result<()> {
        self.check_open()?;
        // Yield like a real device would, so other tasks (and crash snapshots) interleave.
        futures_lite::future::yield_now().await;
        let mut buf: Vec<u8> = parts.concat();
        buf.resize(usize::try_from(align_up(buf.len() as u64)).map_err(io::Error::other)?, 0);
        let mut keep = buf.len();
        {
            let mut st = self.state.borrow_mut();
            if st.disk_full {
                return Err(io::Error::from_raw_os_error(ENOSPC));
            }
            if matches(&st.faults, &self.path) {
                st.writes_seen += 1;
                let n = st.writes_seen;
                if st.faults.fail_write == Some(n) {
                    return Err(injected("failed write"));
                }
                if let Some((tn, bytes)) = st.faults.tear_write {
                    if tn == n {
                        keep = bytes.min(buf.len());
                    }
                }
            }
        }
        let pos = usize::try_from(pos).map_err(io::Error::other)?;
        self.with_inode(|i| i.data.write(pos, &buf[..keep]))?;
        if keep < buf.len() {
            return Err(injected("torn write"));
        }
        Ok(())
    }

    async fn sync(&self) -> io::Result<()> {
        self.check_open()?;
        futures_lite::future::yield_now().await;
        {
            let mut st = self.state.borrow_mut();
            if matches(&st.faults, &self.path) {
                st.syncs_seen += 1;
                if st.faults.fail_sync == Some(st.syncs_seen) {
                    return Err(injected("failed sync"));
                }
            }
        }
        self.with_inode(|i| i.durable.clone_from(&i.data))
    }

    async fn truncate(&self, size_bytes: u64) -> io::Result<()> {
        let size = usize::try_from(size_bytes).map_err(io::Error::other)?;
        self.with_inode(|i| {
            i.data.size = size;
            i.data.data.truncate(size);
        })
    }

    async fn size(&self) -> io::Result<u64> {
        self.with_inode(|i| i.data.size as u64)
    }

    async fn close(&self) -> io::Result<()> {
        self.release();
        Ok(())
    }
}

impl MemFile {
    /// Marks the handle closed and stops counting it as open (once).
    fn release(&self) {
        if self.closed.replace(true) {
            return;
        }
        if let Ok(mut st) = self.state.try_borrow_mut() {
            if let Some(n) = st.open_handles.get_mut(&self.path) {
                *n -= 1;
                if *n == 0 {
                    st.open_handles.remove(&self.path);
                }
            }
        }
    }
}

impl Drop for MemFile {
    /// A dropped handle is a closed one (as a dropped glommio file).
    fn drop(&mut self) {
        self.release();
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{} not found", path.display()))
}

impl FileSystem for MemFileSystem {
    type File = MemFile;

    async fn open(&self, path: &Path, create: bool) -> io::Result<MemFile> {
        let mut st = self.state.borrow_mut();
        let inode = match st.names.get(path) {
            Some(ino) => *ino,
            None if create => {
                let parent = path.parent().unwrap_or(Path::new(""));
                if !st.dirs.contains(parent) {
                    return Err(not_found(parent));
                }
                st.next_inode += 1;
                let ino = st.next_inode;
                st.inodes.insert(ino, Inode::default());
                st.names.insert(path.to_path_buf(), ino);
                ino
            }
            None => return Err(not_found(path)),
        };
        *st.open_handles.entry(path.to_path_buf()).or_default() += 1;
        st.opens += 1;
        Ok(MemFile {
            state: self.state.clone(),
            inode,
            path: path.to_path_buf(),
            closed: Cell::new(false),
        })
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.borrow_mut();
        for anc in path.ancestors() {
            st.dirs.insert(anc.to_path_buf());
        }
        Ok(())
    }

    async fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let st = self.state.borrow();
        if !st.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        Ok(st
            .names
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.borrow_mut();
        st.names.remove(path).map(|_| ()).ok_or_else(|| not_found(path))
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.state.borrow_mut();
        let ino = st.names.remove(from).ok_or_else(|| not_found(from))?;
        st.names.insert(to.to_path_buf(), ino);
        Ok(())
    }

    async fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.state.borrow_mut();
        let st = &mut *st;
        st.durable_names.retain(|p, _| p.parent() != Some(dir));
        for (p, ino) in &st.names {
            if p.parent() == Some(dir) {
                st.durable_names.insert(p.clone(), *ino);
            }
        }
        Ok(())
    }

    fn monotonic(&self) -> Duration {
        self.runtime.monotonic()
    }

    fn now_ms(&self) -> i64 {
        self.runtime.now_ms()
    }

    fn spawn(&self, task: LocalTask) {
        self.runtime.spawn(task);
    }

    async fn sleep(&self, duration: Duration) {
        self.runtime.sleep(duration).await;
    }
}

#[cfg(test)]
mod runtime_tests {
    use super::*;

    /// A virtual runtime: time moves only when the test says so; sleeps end at once.
    struct Virtual(Cell<u64>);

    impl Runtime for Virtual {
        fn now_ms(&self) -> i64 {
            1_000_000 + i64::try_from(self.0.get()).unwrap_or(0)
        }
        fn monotonic(&self) -> Duration {
            Duration::from_millis(self.0.get())
        }
        fn spawn(&self, task: LocalTask) {
            futures::executor::block_on(task);
        }
        fn sleep(
            &self,
            duration: Duration,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
            self.0.set(self.0.get() + u64::try_from(duration.as_millis()).unwrap_or(0));
            Box::pin(std::future::ready(()))
        }
    }

    #[test]
    fn clocks_timer_and_spawner_come_from_the_runtime() {
        let rt = Rc::new(Virtual(Cell::new(5)));
        let fs = MemFileSystem::with_runtime(rt.clone());
        assert_eq!(fs.monotonic(), Duration::from_millis(5));
        futures::executor::block_on(fs.sleep(Duration::from_secs(2)));
        assert_eq!(fs.monotonic(), Duration::from_millis(2005));
        assert_eq!(fs.now_ms(), 1_002_005);
        let ran = Rc::new(Cell::new(false));
        let flag = ran.clone();
        fs.spawn(Box::pin(async move { flag.set(true) }));
        assert!(ran.get());
        // A crashed copy keeps the runtime.
        assert_eq!(fs.crash().monotonic(), Duration::from_millis(2005));
    }
}
