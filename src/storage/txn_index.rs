//! `.txnindex`: the aborted transactions of one segment, Kafka's `TransactionIndex` file byte
//! for byte (so `kafka-dump-log.sh --files N.txnindex` reads it), and the log's side of
//! keeping those files true.
//!
//! Lives on the partition's owner shard. The aborted transactions themselves are kept in
//! memory by `storage::producer_state` (what read_committed fetches answer from); these files
//! are their durable copy, one per segment that holds ABORT markers: `<base>.txnindex` holds
//! the aborted transactions whose marker (lastOffset) lies in `[base, next segment's base)`,
//! ordered by lastOffset. Entries are 34 bytes, big-endian (Kafka's `AbortedTxn`):
//! `version i16 = 0, producerId i64, firstOffset i64, lastOffset i64, lastStableOffset i64`.
//!
//! Durability (see `docs/format.md`): a segment's file is written whole (atomically: temp,
//! fsync, rename, dir fsync) when the segment rolls, *before* the roll's producer snapshot,
//! and at close; at open and after truncation every file is reconciled with the state
//! rebuilt from the snapshot and the log. Invariant: every segment wholly below the latest
//! producer snapshot has its `.txnindex` on disk (absent = no aborted transaction), so the
//! snapshot (version 3) need not carry aborted transactions and recovery rebuilds those above
//! it from the markers in the log: an acknowledged abort is never lost from the index.

use std::path::PathBuf;

use bytes::{Buf, BufMut};

use super::error::StorageError;
use super::log::LogInner;
use super::producer_state::AbortedTxn;
use super::segment::{segment_path, TXN_INDEX_SUFFIX};
use crate::io::FileSystem;
use crate::types::Offset;

/// Bytes of one entry (Kafka's `AbortedTxn.TOTAL_SIZE`).
pub const TXN_INDEX_ENTRY_BYTES: usize = 34;
/// The only entry version Kafka writes and reads (`AbortedTxn.CURRENT_VERSION`).
pub const TXN_INDEX_VERSION: i16 = 0;

/// The file's bytes for `entries` (already ordered by lastOffset).
#[must_use]
pub fn encode(entries: &[AbortedTxn]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * TXN_INDEX_ENTRY_BYTES);
    for a in entries {
        out.put_i16(TXN_INDEX_VERSION);
        out.put_i64(a.producer_id);
        out.put_i64(a.first_offset);
        out.put_i64(a.last_offset);
        out.put_i64(a.last_stable_offset);
    }
    out
}

/// Parses and sanity-checks a `.txnindex`: whole entries of version 0, producer ids >= 0,
/// `firstOffset <= lastOffset` (both >= 0), lastOffset strictly increasing (Kafka's
/// `TransactionIndex.append` rule). `Err` names the first bad entry.
pub fn decode(mut b: &[u8]) -> Result<Vec<AbortedTxn>, String> {
    if b.len() % TXN_INDEX_ENTRY_BYTES != 0 {
        return Err(format!("size {} is not a multiple of {TXN_INDEX_ENTRY_BYTES}", b.len()));
    }
    let mut out: Vec<AbortedTxn> = Vec::with_capacity(b.len() / TXN_INDEX_ENTRY_BYTES);
    while b.has_remaining() {
        let at = out.len();
        let version = b.get_i16();
        if version != TXN_INDEX_VERSION {
            return Err(format!("entry {at}: version {version}"));
        }
        let a = AbortedTxn {
            producer_id: b.get_i64(),
            first_offset: b.get_i64(),
            last_offset: b.get_i64(),
            last_stable_offset: b.get_i64(),
        };
        if a.producer_id < 0 || a.first_offset < 0 || a.first_offset > a.last_offset {
            return Err(format!("entry {at}: {a:?}"));
        }
        if out.last().is_some_and(|l| l.last_offset >= a.last_offset) {
            return Err(format!("entry {at}: lastOffset {} does not increase", a.last_offset));
        }
        out.push(a);
    }
    Ok(out)
}

/// Drops the entries whose marker is at or past `offset` (log truncation).
pub fn truncate_from(entries: &mut Vec<AbortedTxn>, offset: i64) {
    let keep = entries.partition_point(|a| a.last_offset < offset);
    entries.truncate(keep);
}

impl<F: FileSystem> LogInner<F> {
    fn txn_index_path(&self, base: i64) -> PathBuf {
        segment_path(&self.dir, Offset(base), TXN_INDEX_SUFFIX)
    }

    /// The aborted transactions whose marker lies in `[base, end)`, from the in-memory state.
    fn txn_entries(&self, base: i64, end: i64) -> Vec<AbortedTxn> {
        self.st.borrow().producers.aborted_in(base, end).to_vec()
    }

    /// Writes segment `base`'s `.txnindex` (markers in `[base, end)`) durably if it has any
    /// entry; a segment without aborted transactions has no file. Called at roll (before the
    /// producer snapshot) and at close, under the append lock, where the segment's file can
    /// only have been missing or a prefix of these entries.
    pub(super) async fn write_txn_index(&self, base: i64, end: i64) -> Result<(), StorageError> {
        let entries = self.txn_entries(base, end);
        if entries.is_empty() {
            return Ok(());
        }
        let path = self.txn_index_path(base);
        self.fs
            .write_file_atomic(&path, &encode(&entries))
            .await
            .map_err(StorageError::io("write", &path, 0))
    }

    /// Every segment's `.txnindex` entries with a marker below `below`, merged in order, or
    /// `Err` naming a file that fails its checks. Entries past their segment's end (written
    /// at a roll whose batches a crash then lost) are dropped.
    pub(super) async fn read_txn_indexes(
        &self,
        below: i64,
    ) -> Result<Result<Vec<AbortedTxn>, String>, StorageError> {
        let names =
            self.fs.list_dir(&self.dir).await.map_err(StorageError::io("list", &self.dir, 0))?;
        let ranges: Vec<(i64, i64)> =
            self.st.borrow().segments.values().map(|s| (s.base.0, s.next_offset.0)).collect();
        let mut out = Vec::new();
        for (base, end) in ranges {
            if base >= below {
                break;
            }
            let path = self.txn_index_path(base);
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            if !name.is_some_and(|n| names.contains(&n)) {
                continue;
            }
            let Some(data) =
                self.fs.read_file(&path).await.map_err(StorageError::io("read", &path, 0))?
            else {
                continue;
            };
            match decode(&data) {
                Ok(mut entries) => {
                    truncate_from(&mut entries, end.min(below));
                    out.extend(entries.into_iter().filter(|a| a.last_offset >= base));
                }
                Err(why) => return Ok(Err(format!("{}: {why}", path.display()))),
            }
        }
        Ok(Ok(out))
    }

    /// Makes every segment's `.txnindex` say what the in-memory state says (at open and
    /// after truncation: a file written before a crash or a truncation may hold entries the
    /// log no longer has, and a data dir from before `.txnindex` files has none). Files are
    /// read only where they exist; rewritten (or removed) only where they differ.
    pub(super) async fn reconcile_txn_indexes(&self) -> Result<(), StorageError> {
        let names =
            self.fs.list_dir(&self.dir).await.map_err(StorageError::io("list", &self.dir, 0))?;
        let ranges: Vec<(i64, i64)> =
            self.st.borrow().segments.values().map(|s| (s.base.0, s.next_offset.0)).collect();
        let mut removed = false;
        for (base, end) in ranges {
            let path = self.txn_index_path(base);
            let want = encode(&self.txn_entries(base, end));
            let present = path
                .file_name()
                .is_some_and(|n| names.iter().any(|m| m.as_str() == n.to_string_lossy()));
            if !present && want.is_empty() {
                continue;
            }
            let have = if present {
                self.fs.read_file(&path).await.map_err(StorageError::io("read", &path, 0))?
            } else {
                None
            };
            if have.as_deref() == Some(&want[..]) {
                continue;
            }
            if want.is_empty() {
                match self.fs.remove_file(&path).await {
                    Ok(()) => removed = true,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(StorageError::io("remove", &path, 0)(e)),
                }
                continue;
            }
            tracing::info!(file = %path.display(), entries = want.len() / TXN_INDEX_ENTRY_BYTES, "rewriting a transaction index");
            self.fs
                .write_file_atomic(&path, &want)
                .await
                .map_err(StorageError::io("write", &path, 0))?;
        }
        if removed {
            self.fs
                .sync_dir(&self.dir)
                .await
                .map_err(StorageError::io("sync dir", &self.dir, 0))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(pid: i64, first: i64, last: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: first,
        }
    }

    #[test]
    fn entries_are_kafkas_34_bytes_and_round_trip() {
        let entries = vec![txn(7, 10, 14), txn(8, 12, 20), txn(7, 21, 21)];
        let b = encode(&entries);
        assert_eq!(b.len(), 3 * TXN_INDEX_ENTRY_BYTES);
        // Kafka's layout: version, producerId, firstOffset, lastOffset, lastStableOffset.
        assert_eq!(&b[..2], &0i16.to_be_bytes());
        assert_eq!(&b[2..10], &7i64.to_be_bytes());
        assert_eq!(&b[10..18], &10i64.to_be_bytes());
        assert_eq!(&b[18..26], &14i64.to_be_bytes());
        assert_eq!(&b[26..34], &10i64.to_be_bytes());
        assert_eq!(decode(&b), Ok(entries));
        assert_eq!(decode(&[]), Ok(vec![]));
    }

    #[test]
    fn bad_files_are_refused() {
        let good = encode(&[txn(7, 10, 14), txn(8, 12, 20)]);
        assert!(decode(&good[..good.len() - 1]).is_err(), "partial entry");
        let mut v = good.clone();
        v[1] = 1;
        assert!(decode(&v).unwrap_err().contains("version"));
        assert!(decode(&encode(&[txn(8, 12, 20), txn(7, 10, 14)])).is_err(), "out of order");
        assert!(decode(&encode(&[txn(7, 10, 14), txn(7, 10, 14)])).is_err(), "repeated");
        assert!(decode(&encode(&[txn(-1, 10, 14)])).is_err(), "no producer");
        assert!(decode(&encode(&[txn(7, 15, 14)])).is_err(), "first past last");
    }

    #[test]
    fn truncation_drops_markers_at_or_past_the_offset() {
        let mut e = vec![txn(7, 10, 14), txn(8, 12, 20), txn(7, 21, 25)];
        truncate_from(&mut e, 21);
        assert_eq!(e.iter().map(|a| a.last_offset).collect::<Vec<_>>(), vec![14, 20]);
        truncate_from(&mut e, 20);
        assert_eq!(e.len(), 1);
        truncate_from(&mut e, 100);
        assert_eq!(e.len(), 1);
        truncate_from(&mut e, 0);
        assert!(e.is_empty());
    }
}
