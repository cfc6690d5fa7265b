//! Crash-safe replacement of a sealed segment by its cleaned copy, as Kafka's
//! `LogCleaner`/`LogLoader` do: write `<base>.{log,index,timeindex,txnindex}.cleaned`
//! (synced), rename them to `.swap` (the `.log` last: its `.swap` is the commit mark), rename
//! the old files to `.deleted`, rename the `.swap` files to their final names (the `.log`
//! last), sync the dir.
//!
//! Runs on the log's owner shard. Recovery ([`recover_swaps`], before the log is listed):
//! `.cleaned` files and `.swap` indexes without a `<base>.log.swap` are an unfinished clean
//! and are removed; a `<base>.log.swap` means the new segment is complete, so the swap is
//! finished: the old files at `<base>` are replaced and, for a merge, the old segments whose
//! base lies inside the swap's offset range are removed.

use std::path::{Path, PathBuf};

use crate::io::{DataFile, FileSystem};
use crate::storage::error::StorageError;
use crate::storage::segment::{
    scan_file, segment_path, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX,
};
use crate::types::Offset;

pub const CLEANED_SUFFIX: &str = ".cleaned";
pub const SWAP_SUFFIX: &str = ".swap";
/// Index files first, the `.log` last (see the module docs). The cleaned segment's
/// `.txnindex` (possibly empty) holds the aborted transactions whose markers it kept.
pub const SWAP_ORDER: [&str; 4] = [INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX];

/// Where a crash test stops a swap (the steps of the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SwapStep {
    CleanedWritten,
    RenamedToSwap,
    OldRenamedToDeleted,
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

#[must_use]
pub fn suffixed(dir: &Path, base: Offset, file_suffix: &str, extra: &str) -> PathBuf {
    with_suffix(&segment_path(dir, base, file_suffix), extra)
}

/// Writes and syncs one whole file, replacing any previous content.
pub async fn write_whole<F: FileSystem>(
    fs: &F,
    path: &Path,
    data: &[u8],
) -> Result<F::File, StorageError> {
    let f = fs.open(path, true).await.map_err(StorageError::io("create", path, 0))?;
    f.truncate(0).await.map_err(StorageError::io("truncate", path, 0))?;
    if !data.is_empty() {
        f.write_at(0, &[data]).await.map_err(StorageError::io("write", path, 0))?;
    }
    let len = data.len() as u64;
    f.truncate(len).await.map_err(StorageError::io("truncate", path, len))?;
    f.sync().await.map_err(StorageError::io("fsync", path, len))?;
    Ok(f)
}

pub async fn rename<F: FileSystem>(fs: &F, from: &Path, to: &Path) -> Result<(), StorageError> {
    fs.rename(from, to).await.map_err(StorageError::io("rename", from, 0))
}

pub async fn sync_dir<F: FileSystem>(fs: &F, dir: &Path) -> Result<(), StorageError> {
    fs.sync_dir(dir).await.map_err(StorageError::io("sync dir", dir, 0))
}

async fn remove_if_present<F: FileSystem>(fs: &F, path: &Path) -> Result<(), StorageError> {
    match fs.remove_file(path).await {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StorageError::io("remove", path, 0)(e)),
    }
}

/// The offset after the last batch of the complete `.log.swap` at `path` (`None` if empty).
async fn swap_end<F: FileSystem>(fs: &F, path: &Path) -> Result<Option<i64>, StorageError> {
    let file = fs.open(path, false).await.map_err(StorageError::io("open", path, 0))?;
    let size = file.size().await.map_err(StorageError::io("size", path, 0))?;
    let scan = scan_file(&file, path, 0, size, i64::MIN).await?;
    let _ = file.close().await;
    if let Some(reason) = scan.stop_reason {
        // The .log.swap was synced before it was named: a bad one is corruption, not a crash.
        return Err(StorageError::Corrupt {
            path: path.to_path_buf(),
            position: scan.valid_bytes,
            reason,
        });
    }
    Ok(scan.batches.last().map(|(_, h)| h.last_offset() + 1))
}

/// Finishes or rolls back swaps a crash interrupted. See the module docs.
pub async fn recover_swaps<F: FileSystem>(fs: &F, dir: &Path) -> Result<(), StorageError> {
    let names = fs.list_dir(dir).await.map_err(StorageError::io("list", dir, 0))?;
    let mut changed = false;
    for n in &names {
        let p = dir.join(n);
        if n.ends_with(CLEANED_SUFFIX) {
            tracing::info!(file = %p.display(), "removing leftover of an unfinished clean");
            remove_if_present(fs, &p).await?;
            changed = true;
            continue;
        }
        let Some(stem) = n.strip_suffix(SWAP_SUFFIX) else { continue };
        let Some(base) = SWAP_ORDER
            .iter()
            .find_map(|s| stem.strip_suffix(s))
            .filter(|b| b.len() == 20 && b.bytes().all(|c| c.is_ascii_digit()))
        else {
            continue;
        };
        if names.iter().any(|m| *m == format!("{base}{LOG_SUFFIX}{SWAP_SUFFIX}")) {
            continue; // handled below, with its log
        }
        tracing::info!(file = %p.display(), "removing swap index of an unfinished clean");
        remove_if_present(fs, &p).await?;
        changed = true;
    }
    for n in &names {
        let Some(base) = n.strip_suffix(&format!("{LOG_SUFFIX}{SWAP_SUFFIX}")) else { continue };
        // A swap may merge several segments: the later ones it covers go too.
        let (Ok(first), Some(end)) = (base.parse::<i64>(), swap_end(fs, &dir.join(n)).await?)
        else {
            continue;
        };
        for m in &names {
            let covered = m
                .strip_suffix(LOG_SUFFIX)
                .and_then(|b| b.parse::<i64>().ok())
                .is_some_and(|b| b > first && b < end);
            if covered {
                let stem = m.trim_end_matches(LOG_SUFFIX);
                tracing::info!(dir = %dir.display(), segment = stem, "removing a segment an interrupted merge replaced");
                for suffix in SWAP_ORDER {
                    remove_if_present(fs, &dir.join(format!("{stem}{suffix}"))).await?;
                }
            }
        }
        for suffix in SWAP_ORDER {
            let swap = dir.join(format!("{base}{suffix}{SWAP_SUFFIX}"));
            let fin = dir.join(format!("{base}{suffix}"));
            if names.iter().any(|m| dir.join(m) == swap) {
                remove_if_present(fs, &fin).await?;
                rename(fs, &swap, &fin).await?;
            }
        }
        tracing::info!(dir = %dir.display(), segment = base, "completed an interrupted segment swap");
        changed = true;
    }
    if changed {
        sync_dir(fs, dir).await?;
    }
    Ok(())
}
