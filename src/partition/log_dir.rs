//! One replica's entry in DescribeLogDirs: the bytes of its segments and its offset lag,
//! read on the partition's owner shard (reached through [`super::ops`], so a partition
//! being moved between shards is answered by whichever shard holds it).
//!
//! Lives on the owner shard; reads only (no await, no borrow held). Invariant: a replica
//! this shard does not hold (not open yet, closed, moved away) yields `None`, never an
//! error: Kafka lists only the logs that exist in the directory.

use super::PartitionTable;
use crate::types::Offset;

/// What DescribeLogDirs reports for one local replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaLogDir {
    /// Bytes of the replica's segment files (Kafka's `partition_size`).
    pub size_bytes: u64,
    /// Kafka's `offset_lag` for a current (not future) log.
    pub offset_lag: i64,
}

/// Kafka's `ReplicaManager.getLogEndOffsetLag` for a current log: how far the log end is
/// behind the replica's own high watermark, never negative. The high watermark of a replica
/// never passes its log end (a follower's is the minimum of the leader's and its own log
/// end), so this is 0 in practice, as on Kafka; only a future log (a move between log
/// directories, which a one-directory broker never has) reports a real lag.
#[must_use]
pub fn offset_lag(high_watermark: Offset, log_end: Offset) -> i64 {
    high_watermark.0.saturating_sub(log_end.0).max(0)
}

/// The entry of `topic`-`partition` if this shard holds its log, leader or follower.
#[must_use]
pub fn describe(table: &PartitionTable, topic: &str, partition: i32) -> Option<ReplicaLogDir> {
    let p = table.get(topic, partition)?;
    let high_watermark = if p.is_leader.get() { p.high_watermark() } else { p.follower_hw.get() };
    Some(ReplicaLogDir {
        size_bytes: p.log.size_bytes(),
        offset_lag: offset_lag(high_watermark, p.log.log_end_offset()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_high_watermark_past_log_end_never_negative() {
        assert_eq!(offset_lag(Offset(10), Offset(10)), 0);
        // A follower behind the leader: its own high watermark is at most its log end.
        assert_eq!(offset_lag(Offset(4), Offset(10)), 0);
        assert_eq!(offset_lag(Offset(12), Offset(10)), 2);
        assert_eq!(offset_lag(Offset(i64::MAX), Offset(-1)), i64::MAX);
        assert_eq!(offset_lag(Offset(-1), Offset(0)), 0);
    }
}
