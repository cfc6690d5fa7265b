//! How a coordinator (group or transaction) writes to its internal-topic partition: only
//! while this broker leads the partition, and answered only once the high watermark covers
//! the write (acks=all: Kafka's `offsets.commit.required.acks=-1`), so a record a client was
//! told about survives the loss of this broker.
//!
//! Runs on the partition's owner shard (the coordinator's shard). Invariant: nothing is
//! appended to a partition this broker follows (its fetcher writes it).

use std::rc::Rc;

use bytes::Bytes;

use crate::constants::COORDINATOR_WRITE_TIMEOUT_MS;
use crate::partition::OwnedPartition;
use crate::types::{Epoch, Offset};

/// Why a coordinator write did not become durable on the ISR.
#[derive(Debug)]
pub enum WriteError {
    /// This broker does not lead the partition (any more): clients look for the new
    /// coordinator (NOT_COORDINATOR).
    NotLeader,
    /// The write failed or timed out (COORDINATOR_NOT_AVAILABLE, as Kafka maps a failed or
    /// timed-out append of the coordinator).
    Failed(String),
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::NotLeader => write!(f, "not the partition leader"),
            WriteError::Failed(why) => write!(f, "{why}"),
        }
    }
}

/// Appends `batch` as the partition's leader (`coordinator`: a transactional batch or a
/// marker, through the coordinator append path) and waits until the ISR holds it. Returns
/// the offset after the batch.
pub async fn append_acks_all(
    owned: &Rc<OwnedPartition>,
    batch: Bytes,
    transactional: bool,
    now_ms: i64,
) -> Result<Offset, WriteError> {
    if !owned.is_leader.get() {
        return Err(WriteError::NotLeader);
    }
    let epoch: Epoch = owned.leader_epoch.get();
    let failed = |e: crate::storage::StorageError| WriteError::Failed(e.to_string());
    if owned.replication.has_followers() {
        owned.replication.check_produce().map_err(|e| WriteError::Failed(e.to_string()))?;
    }
    let last = if transactional {
        owned.log.append_coordinator(batch, epoch, now_ms).await.map_err(failed)?.0.last_offset
    } else {
        owned.log.append(batch, epoch, now_ms).await.map_err(failed)?.last_offset
    };
    // Followers' long-polls hear of the write at once.
    owned.replication.appended.notify_all();
    owned.log.wait_committed(last).await.map_err(failed)?;
    owned.hw_changed.notify_all();
    if owned.replication.has_followers() {
        let timeout_ms = i32::try_from(COORDINATOR_WRITE_TIMEOUT_MS).unwrap_or(i32::MAX);
        owned.wait_acks(epoch, last.next(), timeout_ms).await.map_err(|e| {
            if e.code == kafka_protocol::error::ResponseError::NotLeaderOrFollower {
                WriteError::NotLeader
            } else {
                WriteError::Failed(format!("{:?}: {:?}", e.code, e.message))
            }
        })?;
    }
    if !owned.is_leader.get() || owned.leader_epoch.get() != epoch {
        return Err(WriteError::NotLeader);
    }
    Ok(last.next())
}
