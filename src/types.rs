//! Newtypes shared by every subsystem: offsets, epochs, node, shard and producer ids,
//! and topic-partition names.
//!
//! Lives on every shard; plain values with no interior state. The point of the newtypes
//! is that an offset is never confused with a byte position or an epoch with a count:
//! conversions are explicit (`.0`, `From`).

use std::fmt;

/// A Kafka record offset within one partition (not a byte position).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Offset(pub i64);

impl Offset {
    pub const ZERO: Offset = Offset(0);

    #[must_use]
    pub fn next(self) -> Offset {
        Offset(self.0 + 1)
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A partition leader epoch (Kafka's `partitionLeaderEpoch`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Epoch(pub i32);

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A broker's node id (`node.id` / `broker.id`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub i32);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Index of a shard (one glommio executor pinned to one core) within this broker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShardId(pub u32);

impl fmt::Display for ShardId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shard-{}", self.0)
    }
}

/// A producer id handed out by InitProducerId.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProducerId(pub i64);

/// A partition index within a topic.
pub type PartitionIndex = i32;

/// A topic name plus a partition index: the unit of ownership and replication.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: PartitionIndex,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: PartitionIndex) -> Self {
        Self { topic: topic.into(), partition }
    }

    /// Directory name of this partition under the data directory: `<topic>-<partition>`.
    #[must_use]
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }
}

/// A topic and partition however held, so a map keyed by [`TopicPartition`] is searched
/// with a borrowed `(&str, index)` instead of an allocated key (the partition table's
/// lookup on every produce, fetch and follower-fetch partition).
pub trait TopicPartitionKey {
    fn topic(&self) -> &str;
    fn partition(&self) -> PartitionIndex;
}

impl TopicPartitionKey for TopicPartition {
    fn topic(&self) -> &str {
        &self.topic
    }
    fn partition(&self) -> PartitionIndex {
        self.partition
    }
}

impl TopicPartitionKey for (&str, PartitionIndex) {
    fn topic(&self) -> &str {
        self.0
    }
    fn partition(&self) -> PartitionIndex {
        self.1
    }
}

impl<'a> std::borrow::Borrow<dyn TopicPartitionKey + 'a> for TopicPartition {
    fn borrow(&self) -> &(dyn TopicPartitionKey + 'a) {
        self
    }
}

/// As the derived `Hash` of [`TopicPartition`] (its fields in order), which `Borrow` needs.
impl std::hash::Hash for dyn TopicPartitionKey + '_ {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.topic().hash(state);
        self.partition().hash(state);
    }
}

impl PartialEq for dyn TopicPartitionKey + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.partition() == other.partition() && self.topic() == other.topic()
    }
}

impl Eq for dyn TopicPartitionKey + '_ {}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_name_is_topic_dash_partition() {
        assert_eq!(TopicPartition::new("orders", 3).dir_name(), "orders-3");
        assert_eq!(Offset(41).next(), Offset(42));
    }

    #[test]
    fn a_borrowed_key_finds_what_an_owned_one_stored() {
        let mut m = std::collections::HashMap::new();
        for p in 0..64 {
            m.insert(TopicPartition::new(format!("t{}", p % 7), p), p);
        }
        for p in 0..64 {
            let name = format!("t{}", p % 7);
            let key: &dyn TopicPartitionKey = &(name.as_str(), p);
            assert_eq!(m.get(key), Some(&p));
        }
        assert_eq!(m.get(&("t1", 0) as &dyn TopicPartitionKey), None);
    }
}

/// Which byte rate a request counts against (Kafka's client quota kinds). Here, at the
/// bottom, because metrics label by it; the quota keys it maps to are `quota`'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    Produce,
    Fetch,
}
