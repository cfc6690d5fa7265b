//! [`RaftStore`]: the quorum's durable state through [`FileSystem`] — an append-only log file
//! of CRC-framed records (entries, hard states, a mark naming the snapshot the file follows)
//! and a snapshot file replaced atomically. Byte layout in `docs/format.md` ("Raft quorum").
//!
//! Lives beside its [`super::QuorumNode`] (the controller shard, once wired). Contract:
//! [`RaftStore::persist`] returns only after an fsync covered everything it wrote (when the
//! ready asks for one), so a vote or an append is acknowledged only once durable. After a
//! failed write or sync every later call fails with [`QuorumError::Failed`]: the file may end
//! in a torn record that only a replay can judge, so the node must restart.
//!
//! Invariants on disk: the log file's mark is at or below the snapshot's index (the snapshot
//! is written, synced and renamed into place before the log that follows it); entries in the
//! log are contiguous after the mark, a later entry with an index already present replaces
//! the tail from there; the file's bytes past the last whole, CRC-valid record are a torn
//! tail or the zero padding of an aligned write, and replay drops them.

use std::path::{Path, PathBuf};

use raft::prelude::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};

use super::codec::{self, Record};
use super::node::{Compaction, Ready};
use super::{QuorumError, RECORD_BYTES_MAX, SNAPSHOT_BYTES_MAX};
use crate::io::{align_down, DataFile, FileSystem};

/// The log file's name in the quorum directory.
pub const LOG_FILE: &str = "raft.log";
/// The snapshot file's name in the quorum directory.
pub const SNAPSHOT_FILE: &str = "raft.snapshot";

/// What a store held when it was opened: the input of [`super::QuorumNode::restart`].
#[derive(Clone, Debug, Default)]
pub struct Recovered {
    pub snapshot: Snapshot,
    pub hard_state: HardState,
    /// Entries after the snapshot, contiguous.
    pub entries: Vec<Entry>,
}

/// The durable Raft state of one node. See the module docs.
pub struct RaftStore<F: FileSystem> {
    fs: F,
    dir: PathBuf,
    log_path: PathBuf,
    file: F::File,
    /// Bytes of whole records in the log file.
    end: u64,
    /// The log's bytes from `align_down(end)` to `end`: rewritten with the next append,
    /// since every write starts at an aligned position.
    tail: Vec<u8>,
    /// The last hard state written (rewritten at the head of a compacted log).
    hard_state: HardState,
    failed: Option<String>,
}

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> QuorumError {
    let path = path.to_path_buf();
    move |source| QuorumError::Io { op, path, source }
}

/// The snapshot a new node starts from: index 0, no data, the initial membership.
#[must_use]
pub fn bootstrap_snapshot(conf_state: &ConfState) -> Snapshot {
    let mut meta = SnapshotMetadata::default();
    meta.set_conf_state(conf_state.clone());
    let mut snap = Snapshot::default();
    snap.set_metadata(meta);
    snap
}

impl<F: FileSystem> RaftStore<F> {
    /// Opens the store in `dir`, creating it with `bootstrap` as the membership if empty, and
    /// replays it (dropping a torn tail).
    pub async fn open(
        fs: F,
        dir: &Path,
        bootstrap: &ConfState,
    ) -> Result<(Self, Recovered), QuorumError> {
        Self::open_with_data(fs, dir, bootstrap, bytes::Bytes::new()).await
    }

    /// [`RaftStore::open`], and a new store's bootstrap snapshot (index 0) carries `data`:
    /// the state a fresh quorum starts from (an upgraded single-node data dir's metadata).
    /// Every voter must be given the same data. Ignored when the store already exists.
    pub async fn open_with_data(
        fs: F,
        dir: &Path,
        bootstrap: &ConfState,
        data: bytes::Bytes,
    ) -> Result<(Self, Recovered), QuorumError> {
        fs.create_dir_all(dir).await.map_err(io_err("create directory", dir))?;
        let snap_path = dir.join(SNAPSHOT_FILE);
        let log_path = dir.join(LOG_FILE);
        let snapshot = match fs.read_file(&snap_path).await.map_err(io_err("read", &snap_path))? {
            Some(bytes) => parse_snapshot(&snap_path, &bytes)?,
            None => {
                if fs.read_file(&log_path).await.map_err(io_err("read", &log_path))?.is_some() {
                    let reason = "log without a snapshot file".to_string();
                    return Err(QuorumError::Corrupt { path: snap_path, offset: 0, reason });
                }
                let mut snap = bootstrap_snapshot(bootstrap);
                snap.data = data;
                let bytes = codec::frame(&codec::encode_snapshot(&snap));
                fs.write_file_atomic(&snap_path, &bytes)
                    .await
                    .map_err(io_err("write", &snap_path))?;
                snap
            }
        };
        let log = fs.read_file(&log_path).await.map_err(io_err("read", &log_path))?;
        let replay = replay_log(&log_path, log.as_deref().unwrap_or_default(), &snapshot)?;
        let file = fs.open(&log_path, true).await.map_err(io_err("open", &log_path))?;
        let mut store = Self {
            fs,
            dir: dir.to_path_buf(),
            log_path,
            file,
            end: 0,
            tail: Vec::new(),
            hard_state: replay.hard_state.clone(),
            failed: None,
        };
        let rec = Recovered { snapshot, hard_state: replay.hard_state, entries: replay.entries };
        if replay.rewrite {
            // New, or the log still follows an older snapshot: start a log that follows this
            // one, so the on-disk invariant holds before anything is appended.
            store.rewrite_log(&rec.snapshot, &rec.entries).await?;
        } else {
            store.set_end(log.as_deref().unwrap_or_default(), replay.valid_end).await?;
        }
        Ok((store, rec))
    }

    /// Where this store keeps its files.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Makes a ready's snapshot, entries and hard state durable (one fsync when the ready asks
    /// for it). On error the store is failed: restart the node.
    pub async fn persist(&mut self, rd: &Ready) -> Result<(), QuorumError> {
        let (snap, hs) = (rd.snapshot.as_ref(), rd.hard_state.as_ref());
        self.save(snap, &rd.entries, hs, rd.must_sync).await
    }

    /// [`RaftStore::persist`] in parts: a received snapshot (which replaces the log), entries
    /// after it, a hard state; fsync if `sync`.
    pub async fn save(
        &mut self,
        snapshot: Option<&Snapshot>,
        entries: &[Entry],
        hard_state: Option<&HardState>,
        sync: bool,
    ) -> Result<(), QuorumError> {
        self.check()?;
        if let Some(snap) = snapshot {
            let hs = hard_state.unwrap_or(&self.hard_state).clone();
            return self.install(snap, entries, hs).await;
        }
        let mut bytes = Vec::new();
        for e in entries {
            bytes.extend(codec::frame(&codec::encode_record(&Record::Entry(e.clone()))));
        }
        if let Some(hs) = hard_state {
            bytes.extend(codec::frame(&codec::encode_record(&Record::HardState(hs.clone()))));
            self.hard_state = hs.clone();
        }
        if bytes.is_empty() {
            return Ok(());
        }
        let r = self.append(&bytes, sync).await;
        self.mark_failed(r)
    }

    /// Makes a local snapshot durable and drops the log it covers.
    pub async fn compact(&mut self, c: &Compaction) -> Result<(), QuorumError> {
        self.check()?;
        self.install(&c.snapshot, &c.entries, c.hard_state.clone()).await
    }

    fn check(&self) -> Result<(), QuorumError> {
        match &self.failed {
            Some(why) => Err(QuorumError::Failed(why.clone())),
            None => Ok(()),
        }
    }

    fn mark_failed(&mut self, r: Result<(), QuorumError>) -> Result<(), QuorumError> {
        if let Err(e) = &r {
            self.failed = Some(e.to_string());
        }
        r
    }

    /// Snapshot file first (synced, renamed, directory synced), then a new log that follows
    /// it: a crash in between leaves an older log, which replay reconciles.
    async fn install(
        &mut self,
        snap: &Snapshot,
        entries: &[Entry],
        mut hs: HardState,
    ) -> Result<(), QuorumError> {
        let body = codec::encode_snapshot(snap);
        if body.len() as u64 > SNAPSHOT_BYTES_MAX {
            return Err(QuorumError::Invalid(format!("snapshot of {} bytes", body.len())));
        }
        hs.commit = hs.commit.max(snap.get_metadata().index);
        self.hard_state = hs;
        let path = self.dir.join(SNAPSHOT_FILE);
        let r = self.fs.write_file_atomic(&path, &codec::frame(&body)).await;
        let r = r.map_err(io_err("write", &path));
        self.mark_failed(r)?;
        let r = self.rewrite_log(snap, entries).await;
        self.mark_failed(r)
    }

    /// Replaces the log file atomically with [mark, hard state, entries].
    async fn rewrite_log(&mut self, snap: &Snapshot, entries: &[Entry]) -> Result<(), QuorumError> {
        let meta = snap.get_metadata();
        let mut bytes = codec::frame(&codec::encode_record(&Record::Mark {
            index: meta.index,
            term: meta.term,
        }));
        bytes.extend(codec::frame(&codec::encode_record(&Record::HardState(
            self.hard_state.clone(),
        ))));
        for e in entries.iter().filter(|e| e.index > meta.index) {
            bytes.extend(codec::frame(&codec::encode_record(&Record::Entry(e.clone()))));
        }
        let path = self.log_path.clone();
        self.file.close().await.map_err(io_err("close", &path))?;
        self.fs.write_file_atomic(&path, &bytes).await.map_err(io_err("write", &path))?;
        self.file = self.fs.open(&path, false).await.map_err(io_err("open", &path))?;
        self.end = bytes.len() as u64;
        self.tail = bytes[usize::try_from(align_down(self.end)).unwrap_or(0)..].to_vec();
        Ok(())
    }

    /// After replay: remember where whole records end and cut whatever follows them (a torn
    /// record) so it cannot reappear behind a later, shorter write.
    async fn set_end(&mut self, log: &[u8], valid_end: usize) -> Result<(), QuorumError> {
        self.end = valid_end as u64;
        self.tail = log[usize::try_from(align_down(self.end)).unwrap_or(0)..valid_end].to_vec();
        if log[valid_end..].iter().any(|b| *b != 0) {
            let path = self.log_path.clone();
            self.file.truncate(self.end).await.map_err(io_err("truncate", &path))?;
            self.file.sync().await.map_err(io_err("fsync", &path))?;
        }
        Ok(())
    }

    async fn append(&mut self, bytes: &[u8], sync: bool) -> Result<(), QuorumError> {
        let start = align_down(self.end);
        let mut buf = std::mem::take(&mut self.tail);
        buf.extend_from_slice(bytes);
        let path = self.log_path.clone();
        self.file.write_at(start, &[&buf]).await.map_err(io_err("write", &path))?;
        if sync {
            self.file.sync().await.map_err(io_err("fsync", &path))?;
        }
        self.end = start + buf.len() as u64;
        let keep = usize::try_from(align_down(self.end) - start).unwrap_or(0);
        buf.drain(..keep);
        self.tail = buf;
        Ok(())
    }
}

fn parse_snapshot(path: &Path, bytes: &[u8]) -> Result<Snapshot, QuorumError> {
    let corrupt =
        |reason: String| QuorumError::Corrupt { path: path.to_path_buf(), offset: 0, reason };
    match codec::unframe(bytes, SNAPSHOT_BYTES_MAX).map_err(corrupt)? {
        Some((body, _)) => codec::decode_snapshot(body).map_err(corrupt),
        None => Err(corrupt("truncated snapshot file".to_string())),
    }
}

/// What replaying the log file found.
struct Replay {
    hard_state: HardState,
    entries: Vec<Entry>,
    /// Bytes of whole, valid records.
    valid_end: usize,
    /// The log must be rewritten to follow the snapshot (missing, or follows an older one).
    rewrite: bool,
}

fn replay_log(path: &Path, log: &[u8], snap: &Snapshot) -> Result<Replay, QuorumError> {
    let corrupt = |offset: usize, reason: String| QuorumError::Corrupt {
        path: path.to_path_buf(),
        offset: offset as u64,
        reason,
    };
    let (snap_index, snap_term) = (snap.get_metadata().index, snap.get_metadata().term);
    let mut r = Replay {
        hard_state: HardState::default(),
        entries: Vec::new(),
        valid_end: 0,
        rewrite: false,
    };
    let mut mark: Option<u64> = None;
    let mut pos = 0;
    // A torn tail ends the replay: a short frame, a zero length (padding) or a bad CRC.
    while let Ok(Some((body, len))) = codec::unframe(&log[pos..], u64::from(RECORD_BYTES_MAX)) {
        match (codec::decode_record(body).map_err(|e| corrupt(pos, e))?, mark) {
            (Record::Mark { index, .. }, None) if index <= snap_index => mark = Some(index),
            (Record::Mark { index, .. }, None) => {
                return Err(corrupt(pos, format!("log follows {index}, snapshot is {snap_index}")));
            }
            (_, None) => return Err(corrupt(pos, "log does not start with a mark".to_string())),
            (Record::Mark { .. }, Some(_)) => return Err(corrupt(pos, "second mark".to_string())),
            (Record::HardState(hs), Some(_)) => r.hard_state = hs,
            (Record::Entry(e), Some(m)) => {
                let next = m + 1 + r.entries.len() as u64;
                if e.index <= m || e.index > next {
                    return Err(corrupt(pos, format!("entry {} after {}", e.index, next - 1)));
                }
                r.entries.truncate(usize::try_from(e.index - m - 1).unwrap_or(0));
                r.entries.push(e);
            }
        }
        pos += len;
    }
    r.valid_end = pos;
    let mark = match mark {
        Some(m) => m,
        None if pos == 0 => {
            r.rewrite = true;
            snap_index
        }
        None => unreachable!("records are read only after a mark"),
    };
    if mark < snap_index {
        // The snapshot was installed but the log not yet rewritten. Entries after the
        // snapshot are kept only if the log agrees with it at its index (log matching).
        let at = usize::try_from(snap_index - mark).unwrap_or(usize::MAX);
        let agrees = r.entries.get(at - 1).is_some_and(|e| e.term == snap_term);
        r.entries = if agrees { r.entries.split_off(at) } else { Vec::new() };
        r.rewrite = true;
    }
    let last = snap_index + r.entries.len() as u64;
    r.hard_state.commit = r.hard_state.commit.clamp(snap_index, last);
    Ok(r)
}
