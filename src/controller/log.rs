//! The metadata log: an append-only file of CRC-checked frames, each holding the records of
//! one controller operation, so an operation is replayed entirely or not at all.
//!
//! Lives on the controller shard. Writes use plain `std::fs` and `fdatasync`, which blocks
//! the controller shard for one fsync (tens of microseconds here): metadata changes are rare
//! admin operations, and making the write synchronous keeps "answered" equal to "durable"
//! without an async I/O path for a file that sees a few writes a minute. The store sits
//! behind [`MetadataStore`] so tests can inject failures; after a failed write every later
//! append is refused (the file may hold a partial frame that only replay can judge).
//!
//! Frame: `[length u32][crc32 u32][frame version u8][record count u32][records...]`, where
//! `length` counts the bytes after the CRC and the CRC (IEEE, crc32fast) covers them.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::records::MetadataRecord;
use super::ControllerError;
use crate::constants::METADATA_FRAME_BYTES_MAX;

const FRAME_VERSION: u8 = 0;
const FRAME_HEADER_BYTES: usize = 8;
/// Directory of the metadata log under the data directory (Kafka's name for it).
pub const METADATA_DIR: &str = "__cluster_metadata-0";
/// The single log file (a future snapshot scheme adds files after it).
pub const METADATA_FILE: &str = "00000000000000000000.log";

/// Where the metadata log's bytes live.
pub trait MetadataStore {
    /// A name for error messages (the file path).
    fn path(&self) -> &Path;
    /// The whole log as stored.
    fn read_all(&mut self) -> Result<Vec<u8>, ControllerError>;
    /// Cuts the log to `len` bytes, durably (drops a torn tail).
    fn truncate(&mut self, len: u64) -> Result<(), ControllerError>;
    /// Appends `bytes` and makes them durable before returning.
    fn append_durable(&mut self, bytes: &[u8]) -> Result<(), ControllerError>;
}

/// The metadata log in `<data>/__cluster_metadata-0/00000000000000000000.log`.
pub struct FileStore {
    path: PathBuf,
    file: File,
}

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ControllerError {
    let path = path.to_path_buf();
    move |source| ControllerError::Io { op, path, source }
}

impl FileStore {
    /// Opens (creating if needed, with a durable directory entry) the log under `data_dir`.
    pub fn open(data_dir: &Path) -> Result<Self, ControllerError> {
        let dir = data_dir.join(METADATA_DIR);
        std::fs::create_dir_all(&dir).map_err(io_err("create directory", &dir))?;
        let path = dir.join(METADATA_FILE);
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(io_err("open", &path))?;
        if !existed {
            // The new file's directory entry must survive a crash along with its content.
            sync_dir(&dir)?;
            sync_dir(data_dir)?;
        }
        Ok(Self { path, file })
    }
}

/// Fsyncs a directory so entries created in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), ControllerError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_err("fsync directory", dir))
}

impl MetadataStore for FileStore {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_all(&mut self) -> Result<Vec<u8>, ControllerError> {
        let mut buf = Vec::new();
        self.file.seek(SeekFrom::Start(0)).map_err(io_err("seek", &self.path))?;
        self.file.read_to_end(&mut buf).map_err(io_err("read", &self.path))?;
        Ok(buf)
    }

    fn truncate(&mut self, len: u64) -> Result<(), ControllerError> {
        self.file.set_len(len).map_err(io_err("truncate", &self.path))?;
        self.file.sync_all().map_err(io_err("fsync", &self.path))
    }

    fn append_durable(&mut self, bytes: &[u8]) -> Result<(), ControllerError> {
        self.file.write_all(bytes).map_err(io_err("write", &self.path))?;
        self.file.sync_data().map_err(io_err("fdatasync", &self.path))
    }
}

/// An in-memory store for tests; `fail_appends` simulates a disk that rejects writes.
#[derive(Default)]
pub struct MemStore {
    pub bytes: Vec<u8>,
    pub fail_appends: bool,
    pub path: PathBuf,
}

impl MetadataStore for MemStore {
    fn path(&self) -> &Path {
        &self.path
    }
    fn read_all(&mut self) -> Result<Vec<u8>, ControllerError> {
        Ok(self.bytes.clone())
    }
    fn truncate(&mut self, len: u64) -> Result<(), ControllerError> {
        self.bytes.truncate(usize::try_from(len).unwrap_or(usize::MAX));
        Ok(())
    }
    fn append_durable(&mut self, bytes: &[u8]) -> Result<(), ControllerError> {
        if self.fail_appends {
            return Err(ControllerError::Io {
                op: "write",
                path: self.path.clone(),
                source: std::io::Error::other("injected failure"),
            });
        }
        self.bytes.extend_from_slice(bytes);
        Ok(())
    }
}

/// Encodes one operation's records as a frame.
#[must_use]
pub fn encode_frame(records: &[MetadataRecord]) -> Vec<u8> {
    let mut body = vec![FRAME_VERSION];
    // Frames are bounded by METADATA_FRAME_BYTES_MAX, so the count always fits.
    body.extend_from_slice(&u32::try_from(records.len()).unwrap_or(u32::MAX).to_be_bytes());
    for r in records {
        r.encode(&mut body);
    }
    let mut frame = Vec::with_capacity(FRAME_HEADER_BYTES + body.len());
    frame.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes());
    frame.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
    frame.extend_from_slice(&body);
    frame
}

/// What replay found: the operations in order and where valid data ends.
#[derive(Debug)]
pub struct Replayed {
    /// Each operation's records with the byte position of its frame.
    pub operations: Vec<(u64, Vec<MetadataRecord>)>,
    /// Bytes of whole, valid frames; anything after is a torn tail.
    pub valid_len: u64,
}

/// Parses a whole log. A frame cut short at the end, or a final frame whose CRC fails (a torn
/// write), ends replay at its start; a bad frame followed by more data is corruption.
pub fn parse_log(bytes: &[u8], path: &Path) -> Result<Replayed, ControllerError> {
    let mut operations = Vec::new();
    let mut pos = 0usize;
    let corrupt = |position: usize, reason: String| ControllerError::Corrupt {
        path: path.to_path_buf(),
        position: position as u64,
        reason,
    };
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        // A short remainder, or zeros (a file extended by a crash before its data landed),
        // is a torn tail. Note a zero header would otherwise pass: CRC-32 of nothing is 0.
        if rest.len() < FRAME_HEADER_BYTES || is_zeros(rest) {
            break;
        }
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let crc = u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]);
        let end = FRAME_HEADER_BYTES + len as usize;
        if len > METADATA_FRAME_BYTES_MAX || end > rest.len() {
            if len <= METADATA_FRAME_BYTES_MAX || is_zeros(&rest[FRAME_HEADER_BYTES..]) {
                break;
            }
            return Err(corrupt(pos, format!("frame length {len} exceeds the limit")));
        }
        let body = &rest[FRAME_HEADER_BYTES..end];
        if crc32fast::hash(body) != crc {
            if end == rest.len() {
                break;
            }
            return Err(corrupt(pos, "CRC mismatch with valid data after it".into()));
        }
        let records = parse_body(body).map_err(|reason| corrupt(pos, reason))?;
        operations.push((pos as u64, records));
        pos += end;
    }
    Ok(Replayed { operations, valid_len: pos as u64 })
}

/// Decodes exactly one frame (a Raft entry's data): header, CRC and records, nothing after.
pub fn decode_frame(data: &[u8]) -> Result<Vec<MetadataRecord>, String> {
    if data.len() < FRAME_HEADER_BYTES {
        return Err("entry shorter than a frame header".into());
    }
    let len = u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
    let crc = u32::from_be_bytes([data[4], data[5], data[6], data[7]]);
    let body = &data[FRAME_HEADER_BYTES..];
    if len > METADATA_FRAME_BYTES_MAX || len as usize != body.len() {
        return Err(format!("frame length {len} does not match the {} body bytes", body.len()));
    }
    if crc32fast::hash(body) != crc {
        return Err("CRC mismatch".into());
    }
    parse_body(body)
}

fn is_zeros(b: &[u8]) -> bool {
    b.iter().all(|&x| x == 0)
}

fn parse_body(body: &[u8]) -> Result<Vec<MetadataRecord>, String> {
    if body.len() < 5 {
        return Err("frame shorter than its header".into());
    }
    if body[0] != FRAME_VERSION {
        return Err(format!("unknown frame version {}", body[0]));
    }
    let count = u32::from_be_bytes([body[1], body[2], body[3], body[4]]);
    let mut pos = 5;
    // Every record takes at least 6 bytes: a larger count is corruption, not an allocation.
    let mut records = Vec::with_capacity((count as usize).min(body.len() / 6));
    for _ in 0..count {
        let (rec, used) = MetadataRecord::decode(&body[pos..]).map_err(|e| e.to_string())?;
        records.push(rec);
        pos += used;
    }
    if pos != body.len() {
        return Err(format!("{} bytes after the last record", body.len() - pos));
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(end: i64) -> Vec<MetadataRecord> {
        vec![MetadataRecord::ProducerIdsBlock { block_end: end }]
    }

    #[test]
    fn frames_round_trip() {
        let mut log = encode_frame(&op(1));
        let first_len = log.len() as u64;
        log.extend(encode_frame(&op(2)));
        let r = parse_log(&log, Path::new("m")).unwrap();
        assert_eq!(r.operations, vec![(0, op(1)), (first_len, op(2))]);
        assert_eq!(r.valid_len, log.len() as u64);
    }

    #[test]
    fn torn_tail_is_cut_at_the_last_whole_frame() {
        let first = encode_frame(&op(1));
        let second = encode_frame(&op(2));
        let mut log = first.clone();
        log.extend(&second);
        for cut in first.len()..log.len() {
            let r = parse_log(&log[..cut], Path::new("m")).unwrap();
            assert_eq!(r.operations, vec![(0, op(1))]);
            assert_eq!(r.valid_len, first.len() as u64);
        }
        // A final frame whose body was never written (zeros) is torn too.
        let mut zeroed = log.clone();
        for b in &mut zeroed[first.len() + FRAME_HEADER_BYTES..] {
            *b = 0;
        }
        assert_eq!(parse_log(&zeroed, Path::new("m")).unwrap().valid_len, first.len() as u64);
    }

    #[test]
    fn zero_filled_tail_is_torn_not_corrupt() {
        let mut log = encode_frame(&op(1));
        let valid = log.len() as u64;
        log.extend(std::iter::repeat_n(0u8, 4096));
        let r = parse_log(&log, Path::new("m")).unwrap();
        assert_eq!((r.operations.len(), r.valid_len), (1, valid));
        // Zeros followed by data are corruption, not a tail.
        log.extend(encode_frame(&op(2)));
        assert!(parse_log(&log, Path::new("m")).is_err());
    }

    #[test]
    fn bad_crc_in_the_middle_names_file_and_position() {
        let first = encode_frame(&op(1));
        let mut log = first.clone();
        log.extend(encode_frame(&op(2)));
        log.extend(encode_frame(&op(3)));
        let flip = first.len() + FRAME_HEADER_BYTES + 4;
        log[flip] ^= 0xff;
        let err = parse_log(&log, Path::new("/d/meta.log")).unwrap_err().to_string();
        assert!(err.contains("/d/meta.log"), "{err}");
        assert!(err.contains(&format!("byte {}", first.len())), "{err}");
    }

    #[test]
    fn file_store_appends_and_truncates() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::open(dir.path()).unwrap();
        s.append_durable(b"abc").unwrap();
        s.append_durable(b"def").unwrap();
        assert_eq!(s.read_all().unwrap(), b"abcdef");
        s.truncate(2).unwrap();
        s.append_durable(b"Z").unwrap();
        let mut again = FileStore::open(dir.path()).unwrap();
        assert_eq!(again.read_all().unwrap(), b"abZ");
    }
}
