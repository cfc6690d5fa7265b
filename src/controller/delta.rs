//! [`ImageDelta`]: what changed between two metadata images, partition by partition, so each
//! shard knows which logs to open, close (and rename for deletion) or reconfigure when a new
//! image is published.
//!
//! Pure computation over two immutable images; runs on any shard. Topics are matched by topic
//! id, so a topic deleted and re-created under the same name shows as removed and added.

use std::sync::Arc;

use uuid::Uuid;

use super::{MetadataImage, TopicImage};
use crate::types::{ShardId, TopicPartition};

/// One partition of one topic incarnation (topic id), with its owner shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionRef {
    pub tp: TopicPartition,
    pub topic_id: Uuid,
    pub owner_shard: ShardId,
}

/// The difference between an older and a newer image.
#[derive(Clone, Debug, Default)]
pub struct ImageDelta {
    /// Partitions to create/open on their owner shard (new topics, added partitions).
    pub added: Vec<PartitionRef>,
    /// Partitions to close and remove (`<topic>-<p>.<uuid>-delete`) on their old owner shard.
    pub removed: Vec<PartitionRef>,
    /// Partitions whose owner shard changed: (old location, new owner).
    pub moved: Vec<(PartitionRef, ShardId)>,
    /// Topics present in both images whose explicit or effective configs changed (a topic
    /// override, or a broker default it inherits): apply `config` live.
    pub reconfigured: Vec<Arc<TopicImage>>,
}

impl ImageDelta {
    /// Whether nothing changed that a shard must act on.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.moved.is_empty()
            && self.reconfigured.is_empty()
    }
}

fn refs(topic: &TopicImage) -> impl Iterator<Item = PartitionRef> + '_ {
    topic.partitions.iter().map(|p| PartitionRef {
        tp: TopicPartition::new(topic.name.clone(), p.index),
        topic_id: topic.topic_id,
        owner_shard: p.owner_shard,
    })
}

impl MetadataImage {
    /// What changed from `old` to `self`.
    #[must_use]
    pub fn delta_from(&self, old: &MetadataImage) -> ImageDelta {
        let mut d = ImageDelta::default();
        for old_topic in old.topics.values() {
            if self.topic_by_id(&old_topic.topic_id).is_none() {
                d.removed.extend(refs(old_topic));
            }
        }
        for topic in self.topics.values() {
            let Some(before) = old.topic_by_id(&topic.topic_id) else {
                d.added.extend(refs(topic));
                continue;
            };
            if Arc::ptr_eq(topic, before) {
                continue;
            }
            for (i, new_ref) in refs(topic).enumerate() {
                match before.partitions.get(i) {
                    None => d.added.push(new_ref),
                    Some(p) if p.owner_shard != new_ref.owner_shard => {
                        let old_ref =
                            PartitionRef { owner_shard: p.owner_shard, ..new_ref.clone() };
                        d.moved.push((old_ref, new_ref.owner_shard));
                    }
                    Some(_) => {}
                }
            }
            if topic.configs != before.configs || topic.config != before.config {
                d.reconfigured.push(Arc::clone(topic));
            }
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::super::{BrokerDefaults, Controller, NewTopic};
    use crate::types::NodeId;

    #[test]
    fn delta_tracks_creation_growth_config_and_recreation() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Controller::open(dir.path(), NodeId(1), 2, BrokerDefaults::default()).unwrap();
        let empty = c.image();
        let spec = |n: &str, p: i32| NewTopic { num_partitions: p, ..NewTopic::with_defaults(n) };
        c.create_topics(&[spec("a", 2), spec("b", 1)], false);
        let one = c.image();
        let d = one.delta_from(&empty);
        assert_eq!(d.added.len(), 3);
        assert!(d.removed.is_empty() && d.moved.is_empty() && d.reconfigured.is_empty());
        assert!(one.delta_from(&one).is_empty());

        c.create_partitions("a", 3, None, false).unwrap();
        c.alter_topic_configs("b", &[("retention.ms".into(), Some("1".into()))], false).unwrap();
        let two = c.image();
        let d = two.delta_from(&one);
        assert_eq!(d.added.len(), 1);
        assert_eq!(d.added[0].tp.partition, 2);
        assert_eq!(d.reconfigured.len(), 1);
        assert_eq!(d.reconfigured[0].name, "b");

        let old_id = two.topic("a").unwrap().topic_id;
        c.delete_topic("a").unwrap();
        c.create_topics(&[spec("a", 1)], false);
        let three = c.image();
        let d = three.delta_from(&two);
        assert_eq!(d.removed.len(), 3);
        assert!(d.removed.iter().all(|r| r.topic_id == old_id));
        assert_eq!(d.added.len(), 1);
        assert_ne!(d.added[0].topic_id, old_id);
    }
}
