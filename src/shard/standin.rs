//! TEMPORARY stand-ins for the storage engine and the controller, with the signatures
//! their briefs promise, so the data path runs end to end before those land on main.
//! Deleted (not extended) once `storage::DmaPartitionLog` and `controller::Controller`
//! are merged. Lives on the owner shard; in memory only, nothing persisted.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;
use uuid::Uuid;

use crate::types::{Epoch, NodeId, Offset, ShardId};

#[derive(Debug, Error)]
pub enum StorageError {
    #[error("corrupt message: {reason}")]
    CorruptMessage { reason: String },
    #[error("offset {requested} out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange { requested: Offset, log_start: Offset, log_end: Offset },
}

#[derive(Debug, Clone, Copy)]
pub struct AppendInfo {
    pub base_offset: Offset,
    pub last_offset: Offset,
    pub log_end_offset: Offset,
    pub log_append_time_ms: i64,
    pub log_start_offset: Offset,
}

/// In-memory partition log: a vector of (base offset, batch bytes).
#[derive(Default)]
pub struct MemLog {
    batches: RefCell<Vec<(Offset, i64, Bytes)>>,
    end: std::cell::Cell<i64>,
}

const BATCH_HEADER_BYTES: usize = 61;

impl MemLog {
    pub async fn append(
        &self,
        batch: Bytes,
        epoch: Epoch,
        _now_ms: i64,
    ) -> Result<AppendInfo, StorageError> {
        if batch.len() < BATCH_HEADER_BYTES {
            return Err(StorageError::CorruptMessage { reason: "short batch".into() });
        }
        let crc = u32::from_be_bytes([batch[17], batch[18], batch[19], batch[20]]);
        if crc32c::crc32c(&batch[21..]) != crc {
            return Err(StorageError::CorruptMessage { reason: "bad crc".into() });
        }
        let last_delta = i32::from_be_bytes([batch[23], batch[24], batch[25], batch[26]]);
        let max_ts = i64::from_be_bytes(batch[35..43].try_into().unwrap_or([0; 8]));
        let base = self.end.get();
        let mut owned = BytesMut::from(&batch[..]);
        owned[0..8].copy_from_slice(&base.to_be_bytes());
        owned[12..16].copy_from_slice(&epoch.0.to_be_bytes());
        self.batches.borrow_mut().push((Offset(base), max_ts, owned.freeze()));
        let last = base + i64::from(last_delta);
        self.end.set(last + 1);
        Ok(AppendInfo {
            base_offset: Offset(base),
            last_offset: Offset(last),
            log_end_offset: Offset(last + 1),
            log_append_time_ms: -1,
            log_start_offset: Offset(0),
        })
    }
    pub async fn wait_committed(&self, _offset: Offset) -> Result<(), StorageError> {
        Ok(())
    }
    pub fn committed_offset(&self) -> Offset {
        Offset(self.end.get())
    }
    pub fn log_end_offset(&self) -> Offset {
        Offset(self.end.get())
    }
    pub fn log_start_offset(&self) -> Offset {
        Offset(0)
    }
    pub async fn read(
        &self,
        offset: Offset,
        max_bytes: usize,
        max_offset: Offset,
    ) -> Result<Bytes, StorageError> {
        if offset.0 < 0 || offset.0 > self.end.get() {
            return Err(StorageError::OffsetOutOfRange {
                requested: offset,
                log_start: Offset(0),
                log_end: Offset(self.end.get()),
            });
        }
        let mut out = BytesMut::new();
        for (base, _, batch) in self.batches.borrow().iter() {
            let last = base.0
                + i64::from(i32::from_be_bytes([batch[23], batch[24], batch[25], batch[26]]));
            if last < offset.0 || base.0 >= max_offset.0 {
                continue;
            }
            if !out.is_empty() && out.len() + batch.len() > max_bytes {
                break;
            }
            out.put_slice(batch);
        }
        Ok(out.freeze())
    }
    pub async fn offset_for_timestamp(
        &self,
        ts: i64,
    ) -> Result<Option<(Offset, i64)>, StorageError> {
        Ok(self.batches.borrow().iter().find(|(_, max, _)| *max >= ts).map(|(b, m, _)| (*b, *m)))
    }
    pub fn max_timestamp(&self) -> Option<(i64, Offset)> {
        self.batches.borrow().iter().map(|(b, m, _)| (*m, *b)).max_by_key(|(m, _)| *m)
    }
    pub fn latest_epoch(&self) -> Option<Epoch> {
        (self.end.get() > 0).then_some(Epoch(0))
    }
    pub fn end_offset_for_epoch(&self, _epoch: Epoch) -> Option<(Epoch, Offset)> {
        Some((Epoch(0), Offset(self.end.get())))
    }
    pub async fn close(self) -> Result<(), StorageError> {
        Ok(())
    }
}

/// Stand-in metadata image (the controller's `MetadataImage` replaces it).
#[derive(Debug, Default, Clone)]
pub struct MetadataImage {
    pub cluster_id: String,
    pub node_id: NodeId,
    pub topics: BTreeMap<String, TopicImage>,
}

#[derive(Debug, Clone)]
pub struct TopicImage {
    pub topic_id: Uuid,
    pub internal: bool,
    pub partitions: Vec<PartitionImage>,
}

#[derive(Debug, Clone)]
pub struct PartitionImage {
    pub index: i32,
    pub owner_shard: ShardId,
    pub leader: NodeId,
    pub leader_epoch: Epoch,
}

/// Stand-in controller: creates topics in memory, round-robin placement.
pub struct Controller {
    image: Arc<MetadataImage>,
    shard_count: u32,
    next_shard: u32,
}

impl Controller {
    pub fn new(node_id: NodeId, shard_count: u32) -> Self {
        let image =
            MetadataImage { cluster_id: "standin-cluster".into(), node_id, ..Default::default() };
        Self { image: Arc::new(image), shard_count, next_shard: 0 }
    }
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.clone()
    }
    pub fn create_topic(&mut self, name: &str, partitions: i32) -> bool {
        if self.image.topics.contains_key(name) {
            return false;
        }
        let mut image = (*self.image).clone();
        let parts = (0..partitions)
            .map(|index| {
                let owner = ShardId(self.next_shard % self.shard_count);
                self.next_shard += 1;
                PartitionImage {
                    index,
                    owner_shard: owner,
                    leader: image.node_id,
                    leader_epoch: Epoch(0),
                }
            })
            .collect();
        image.topics.insert(
            name.to_string(),
            TopicImage { topic_id: Uuid::new_v4(), internal: false, partitions: parts },
        );
        self.image = Arc::new(image);
        true
    }
    pub fn delete_topic(&mut self, name: &str) -> bool {
        let mut image = (*self.image).clone();
        let removed = image.topics.remove(name).is_some();
        self.image = Arc::new(image);
        removed
    }
}
