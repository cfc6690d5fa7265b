//! What OffsetCommit and TxnOffsetCommit share on the connection's shard: sorting a commit's
//! partitions into those answered here (refused by authorization, or of an unknown topic or
//! partition) and those sent to the group's coordinator, then putting the coordinator's
//! per-partition answers back in the request's order.
//!
//! Runs on the connection's shard. Invariant: the answers of the sent partitions come back in
//! the order they were sent ([`GroupAnswer::Commit`] is positional), so each slot gets its own.

use std::future::Future;

use crate::group::types::{CommitPartition, GroupError};
use crate::metadata::MetadataImage;

use super::GroupAnswer;

/// One partition of a request: (topic's index in the request, partition, error decided
/// here, or `None`: sent to the coordinator).
pub(crate) type Slot = (usize, i32, Option<GroupError>);

/// A commit's partitions, sorted.
#[derive(Default)]
pub(crate) struct Sorted {
    pub slots: Vec<Slot>,
    /// What goes to the coordinator, in slot order.
    pub partitions: Vec<CommitPartition>,
}

/// One partition as a commit request carries it: index, offset, leader epoch, metadata.
pub(crate) type Given = (i32, i64, i32, Option<String>);

impl Sorted {
    /// Topic `t` of the request, named `name`: every partition refused with `refused` if
    /// given (Kafka refuses a whole topic, or the whole request), else sent if the image
    /// knows the topic and partition, else UNKNOWN_TOPIC_OR_PARTITION.
    pub fn topic(
        &mut self,
        image: &MetadataImage,
        (t, name): (usize, &str),
        refused: Option<GroupError>,
        partitions: impl Iterator<Item = Given>,
    ) {
        let count = image.topics.get(name).map(|ti| ti.partitions.len());
        for (partition, offset, leader_epoch, metadata) in partitions {
            if refused.is_some() {
                self.slots.push((t, partition, refused));
                continue;
            }
            let known = count.is_some_and(|n| usize::try_from(partition).is_ok_and(|i| i < n));
            if known {
                self.partitions.push(CommitPartition {
                    topic: name.to_string(),
                    partition,
                    offset,
                    leader_epoch,
                    metadata,
                });
                self.slots.push((t, partition, None));
            } else {
                self.slots.push((t, partition, Some(GroupError::UnknownTopicOrPartition)));
            }
        }
    }
}

/// Every slot with its error, in request order: the error decided here, else the
/// coordinator's answer for it (`answer`: `None` when nothing was sent).
pub(crate) async fn answered(
    slots: Vec<Slot>,
    answer: Option<impl Future<Output = GroupAnswer>>,
) -> Vec<Slot> {
    let sent = slots.iter().filter(|s| s.2.is_none()).count();
    let mut results = match answer {
        Some(answer) => match answer.await {
            GroupAnswer::Commit(errors) => errors,
            GroupAnswer::Failed(e) => vec![Some(e); sent],
            _ => vec![Some(GroupError::CoordinatorNotAvailable); sent],
        },
        None => Vec::new(),
    }
    .into_iter();
    slots
        .into_iter()
        .map(|(t, partition, decided)| {
            let error = decided.or_else(|| results.next().flatten());
            (t, partition, error)
        })
        .collect()
}
