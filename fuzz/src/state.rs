//! Files a broker reads back at start-up or from internal topics: indexes, checkpoints,
//! producer-state snapshots, the metadata log, group and offset records, the raft store.
//! Where a decoder has an encoder, what decodes must re-encode to the same value.

use std::path::Path;

use shardlog::controller::log::parse_log;
use shardlog::controller::records::MetadataRecord;
use shardlog::group::load::decode_stored_batch;
use shardlog::group::records::Record;
use shardlog::io::mem::MemFileSystem;
use shardlog::io::FileSystem;
use shardlog::quorum::store::{RaftStore, LOG_FILE, SNAPSHOT_FILE};
use shardlog::quorum::ConfState;
use shardlog::storage::checkpoint;
use shardlog::storage::epoch::EpochCache;
use shardlog::storage::index::{OffsetIndex, TimeIndex};
use shardlog::storage::producer_state::ProducerStateMap;
use shardlog::storage::txn_index;
use shardlog::types::Offset;

/// Splits `data` at a position taken from its first byte, for targets with two inputs.
fn split(data: &[u8]) -> (&[u8], &[u8]) {
    let Some((&at, rest)) = data.split_first() else { return (&[], &[]) };
    rest.split_at(usize::from(at).min(rest.len()))
}

/// `.index`: the first 8 bytes are the log size it is checked against.
pub fn offset_index(data: &[u8]) {
    let (size, body) = data.split_at(8.min(data.len()));
    let log_size = size.iter().fold(0u64, |acc, b| acc << 8 | u64::from(*b));
    if let Ok(idx) = OffsetIndex::from_bytes(body, log_size) {
        assert_eq!(OffsetIndex::from_bytes(&idx.to_bytes(), log_size).as_ref(), Ok(&idx));
        for rel in [0, 1, u32::MAX / 2, u32::MAX] {
            let _ = idx.lookup(rel);
        }
    }
}

/// `.timeindex`.
pub fn time_index(data: &[u8]) {
    if let Ok(idx) = TimeIndex::from_bytes(data) {
        assert_eq!(TimeIndex::from_bytes(&idx.to_bytes()).as_ref(), Ok(&idx));
        for ts in [i64::MIN, -1, 0, 1_700_000_000_000, i64::MAX] {
            let _ = idx.lookup(ts);
        }
    }
}

/// `.txnindex`: what decodes re-encodes to the same bytes, and stays valid when truncated.
pub fn txn_index(data: &[u8]) {
    if let Ok(entries) = txn_index::decode(data) {
        assert_eq!(txn_index::encode(&entries), data);
        let mut cut = entries.clone();
        let at = entries.get(entries.len() / 2).map_or(0, |a| a.last_offset);
        txn_index::truncate_from(&mut cut, at);
        assert!(cut.iter().all(|a| a.last_offset < at));
        assert_eq!(txn_index::decode(&txn_index::encode(&cut)).as_ref(), Ok(&cut));
    }
}

/// `leader-epoch-checkpoint`, read as recovery does (lossy UTF-8).
pub fn epoch_checkpoint(data: &[u8]) {
    if let Ok(cache) = EpochCache::from_text(&String::from_utf8_lossy(data)) {
        assert_eq!(EpochCache::from_text(&cache.to_text()).as_ref(), Ok(&cache));
        let _ = cache.end_offset_for(shardlog::types::Epoch(0), Offset(i64::MAX));
    }
}

/// `cleaner-offset-checkpoint` (and the other offset checkpoints of the same format).
pub fn cleaner_checkpoint(data: &[u8]) {
    if let Some(offset) = checkpoint::decode(data) {
        assert_eq!(checkpoint::decode(checkpoint::encode(offset).as_bytes()), Some(offset));
    }
}

/// A producer-state `.snapshot` file.
pub fn producer_snapshot(data: &[u8]) {
    if let Ok((offset, map)) = ProducerStateMap::decode(data) {
        let again = ProducerStateMap::decode(&map.encode(offset)).expect("re-encoded snapshot");
        assert_eq!(again.0, offset);
        assert_eq!(again.1.entries(), map.entries());
    }
}

/// The controller's metadata log, whole, then as bare records.
pub fn metadata_log(data: &[u8]) {
    let _ = parse_log(data, Path::new("metadata.log"));
    let mut rest = data;
    while let Ok((_, used)) = MetadataRecord::decode(rest) {
        assert!(used > 0 && used <= rest.len(), "record of {used} bytes in {}", rest.len());
        rest = &rest[used..];
    }
}

/// `__consumer_offsets` records: a key and value directly (bit 0 of the split byte clear),
/// or a stored batch decoded as the group driver loads it, then each record.
pub fn group_records(data: &[u8]) {
    let (key, value) = split(data);
    let _ = Record::decode(key, (!value.is_empty()).then_some(value));
    let batch = bytes::Bytes::copy_from_slice(data);
    if let Ok(records) = decode_stored_batch(&batch) {
        for r in records {
            if let Some(key) = r.key {
                let _ = Record::decode(&key, r.value.as_deref());
            }
        }
    }
}

/// The raft store's snapshot and log files, opened as a restarting controller does.
pub fn raft_store(data: &[u8]) {
    let (snapshot, log) = split(data);
    let fs = MemFileSystem::new();
    let dir = Path::new("/raft");
    crate::block_on(async {
        fs.create_dir_all(dir).await.expect("in-memory mkdir");
        fs.write_file_atomic(&dir.join(SNAPSHOT_FILE), snapshot).await.expect("in-memory write");
        fs.write_file_atomic(&dir.join(LOG_FILE), log).await.expect("in-memory write");
        let _ = RaftStore::open(fs, dir, &ConfState::default()).await;
    });
}
