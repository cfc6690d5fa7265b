//! What the replication simulation checks, read from the replicas' real logs: acknowledged
//! batches where they were acknowledged, no producer sequence twice, and in-sync replicas
//! whose logs are the leader's byte for byte (offsets, partitionLeaderEpoch, CRC).

use std::collections::BTreeMap;

use bytes::Bytes;

use super::node::Log;
use crate::storage::batch::BatchHeader;
use crate::types::{Epoch, Offset};

/// One batch of a log, as the checks need it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    pub base: i64,
    pub last: i64,
    pub epoch: i32,
    pub sequence: i32,
}

/// The whole log, from its start to its end.
pub async fn whole(log: &Log) -> Result<Bytes, String> {
    let end = log.log_end_offset();
    log.read(log.log_start_offset(), usize::MAX / 2, end)
        .await
        .map_err(|e| format!("reading {}: {e}", log.dir().display()))
}

/// Every batch of the log.
pub async fn batches(log: &Log) -> Result<Vec<Held>, String> {
    let data = whole(log).await?;
    let mut out = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let h = BatchHeader::parse(&data[at..]).map_err(|e| format!("batch at byte {at}: {e}"))?;
        out.push(Held {
            base: h.base_offset,
            last: h.last_offset(),
            epoch: h.partition_leader_epoch,
            sequence: h.base_sequence,
        });
        at += h.total_size();
    }
    Ok(out)
}

/// Every acknowledged batch (sequence -> base offset) is in `held` at its offset, and no
/// sequence appears twice (the producer is idempotent).
pub fn acked_present(held: &[Held], acked: &BTreeMap<i32, Offset>) -> Result<(), String> {
    let mut by_seq: BTreeMap<i32, i64> = BTreeMap::new();
    for b in held {
        if let Some(first) = by_seq.insert(b.sequence, b.base) {
            return Err(format!(
                "sequence {} written twice, at offsets {first} and {}",
                b.sequence, b.base
            ));
        }
    }
    for (seq, base) in acked {
        match by_seq.get(seq) {
            Some(at) if *at == base.0 => {}
            Some(at) => {
                return Err(format!("acknowledged sequence {seq} at {base} is at offset {at}"));
            }
            None => return Err(format!("acknowledged sequence {seq} at {base} is missing")),
        }
    }
    Ok(())
}

/// The follower's log is the leader's, byte for byte, with the same leader-epoch cache
/// (an epoch the leader started but wrote nothing in is not one a follower can learn).
pub async fn same_log(leader: &Log, follower: &Log) -> Result<(), String> {
    let (l, f) = (whole(leader).await?, whole(follower).await?);
    if leader.log_end_offset() != follower.log_end_offset() || l != f {
        let (lb, fb) = (batches(leader).await?, batches(follower).await?);
        let first = lb.iter().zip(&fb).find(|(a, b)| a != b);
        return Err(format!(
            "logs differ: leader ends at {}, follower at {}; first differing batch {first:?}",
            leader.log_end_offset(),
            follower.log_end_offset()
        ));
    }
    let end = leader.log_end_offset();
    let mut held: Vec<(Epoch, Offset)> = leader.epoch_entries();
    held.retain(|(_, start)| *start < end);
    if follower.epoch_entries() != held {
        return Err(format!(
            "leader-epoch caches differ: leader {held:?}, follower {:?}",
            follower.epoch_entries()
        ));
    }
    Ok(())
}
