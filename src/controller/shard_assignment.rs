//! [`ShardAssignment`]: which shard of this broker owns each replica it hosts — a broker-local
//! decision, kept out of the replicated metadata (brokers may run different `--shards`).
//!
//! Lives on the controller shard (shard 0) of every broker, next to its committed
//! [`super::ControllerState`]. Persisted in `<data>/shard-assignment` (CRC-checked, written to a
//! temporary file, fsynced, renamed, directory fsynced; format in `docs/format.md`).
//! [`node_image`] builds this node's [`MetadataImage`] from the committed image, this node's
//! id, the active controller and the assignment.
//!
//! Invariants: every assigned shard is below `shard_count`; only partitions this node hosts
//! (is a replica of) are assigned; entries of deleted topics are dropped at reconcile.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use uuid::Uuid;

use super::log::sync_dir;
use super::{ControllerError, MetadataImage};
use crate::types::{NodeId, ShardId};

/// The owner shard of a partition in the replicated state (no shard chosen): only the node
/// image ([`node_image`]) has real owner shards; version-0 records' shards are legacy hints.
pub const UNASSIGNED_SHARD: ShardId = ShardId(u32::MAX);

/// File name under the data directory.
pub const SHARD_ASSIGNMENT_FILE: &str = "shard-assignment";
const FORMAT_VERSION: u8 = 0;
const HEADER_BYTES: usize = 8;
const ENTRY_BYTES: usize = 24;

/// This broker's (topic id, partition) → shard map. See the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardAssignment {
    shard_count: u32,
    shards: BTreeMap<(Uuid, i32), ShardId>,
}

impl ShardAssignment {
    /// An empty assignment over `shard_count` shards (at least 1).
    #[must_use]
    pub fn new(shard_count: u32) -> Self {
        Self { shard_count: shard_count.max(1), shards: BTreeMap::new() }
    }

    /// The shard count the assignment places over.
    #[must_use]
    pub fn shard_count(&self) -> u32 {
        self.shard_count
    }

    /// The shard of a hosted partition.
    #[must_use]
    pub fn shard_of(&self, topic_id: &Uuid, partition: i32) -> Option<ShardId> {
        self.shards.get(&(*topic_id, partition)).copied()
    }

    /// Puts a hosted partition on `shard` (a shard move, `server::shard_move`) and returns
    /// its previous shard; refused for a shard beyond the count or a partition not hosted.
    pub fn set(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        shard: ShardId,
    ) -> Result<ShardId, String> {
        if shard.0 >= self.shard_count {
            return Err(format!("shard {shard} does not exist ({} shards)", self.shard_count));
        }
        match self.shards.get_mut(&(topic_id, partition)) {
            Some(s) => Ok(std::mem::replace(s, shard)),
            None => Err("the partition is not hosted by this broker".into()),
        }
    }

    /// Partitions per shard (index = shard id).
    #[must_use]
    pub fn load(&self) -> Vec<usize> {
        let mut load = vec![0usize; self.shard_count as usize];
        for s in self.shards.values() {
            if let Some(n) = load.get_mut(s.0 as usize) {
                *n += 1;
            }
        }
        load
    }

    /// Brings the assignment in line with the committed `image` for `node`: drops partitions
    /// no longer hosted (deleted topics, moved replicas), re-places those on shards that no
    /// longer exist, and places newly hosted ones on the least-loaded shard (a legacy
    /// owner-shard hint in the image is kept when it is a valid shard). Returns whether
    /// anything changed (then save it before publishing the image).
    pub fn reconcile(&mut self, image: &MetadataImage, node: NodeId) -> bool {
        let mut hosted: BTreeMap<(Uuid, i32), Option<ShardId>> = BTreeMap::new();
        for t in image.topics.values() {
            for p in t.partitions.iter().filter(|p| p.replicas.contains(&node)) {
                hosted.insert((t.topic_id, p.index), Some(p.owner_shard));
            }
        }
        let before = self.shards.clone();
        let count = self.shard_count;
        self.shards.retain(|k, s| hosted.contains_key(k) && s.0 < count);
        let mut load = self.load();
        for (key, hint) in hosted {
            if self.shards.contains_key(&key) {
                continue;
            }
            let shard = match hint.filter(|h| h.0 < count && !before.contains_key(&key)) {
                Some(h) => {
                    load[h.0 as usize] += 1;
                    h
                }
                None => super::placement::least_loaded(&mut load),
            };
            self.shards.insert(key, shard);
        }
        self.shards != before
    }

    /// An assignment holding every partition of `image` on its recorded owner shard: the
    /// shards of a single-node log written before owner shards left the replicated records.
    #[must_use]
    pub fn from_legacy(image: &MetadataImage) -> Self {
        let shards: BTreeMap<(Uuid, i32), ShardId> = image
            .topics
            .values()
            .flat_map(|t| t.partitions.iter().map(move |p| ((t.topic_id, p.index), p.owner_shard)))
            .filter(|(_, s)| *s != UNASSIGNED_SHARD)
            .collect();
        let shard_count = shards.values().map(|s| s.0.saturating_add(1)).max().unwrap_or(1);
        Self { shard_count, shards }
    }

    /// The CRC-checked encoding: `[length u32][crc32 u32][version u8][shard_count u32]
    /// [entries u32]([topic id uuid][partition i32][shard u32])*`.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut body = vec![FORMAT_VERSION];
        body.extend_from_slice(&self.shard_count.to_be_bytes());
        let n = u32::try_from(self.shards.len()).unwrap_or(u32::MAX);
        body.extend_from_slice(&n.to_be_bytes());
        for ((topic, partition), shard) in &self.shards {
            body.extend_from_slice(topic.as_bytes());
            body.extend_from_slice(&partition.to_be_bytes());
            body.extend_from_slice(&shard.0.to_be_bytes());
        }
        let mut out = Vec::with_capacity(HEADER_BYTES + body.len());
        out.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Decodes [`ShardAssignment::encode`]'s bytes; anything damaged is an error.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() < HEADER_BYTES + 9 {
            return Err("shorter than its header".into());
        }
        let len = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        let crc = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        let body = &bytes[HEADER_BYTES..];
        if len != body.len() || crc32fast::hash(body) != crc {
            return Err("length or CRC mismatch".into());
        }
        if body[0] != FORMAT_VERSION {
            return Err(format!("unknown version {}", body[0]));
        }
        let u32_at =
            |i: usize| u32::from_be_bytes([body[i], body[i + 1], body[i + 2], body[i + 3]]);
        let shard_count = u32_at(1);
        let n = u32_at(5) as usize;
        if shard_count == 0 || body.len() != 9 + n.saturating_mul(ENTRY_BYTES) {
            return Err("entry count does not match the size".into());
        }
        let mut shards = BTreeMap::new();
        for e in body[9..].chunks_exact(ENTRY_BYTES) {
            let mut id = [0u8; 16];
            id.copy_from_slice(&e[..16]);
            let partition = i32::from_be_bytes([e[16], e[17], e[18], e[19]]);
            let shard = u32::from_be_bytes([e[20], e[21], e[22], e[23]]);
            shards.insert((Uuid::from_bytes(id), partition), ShardId(shard));
        }
        Ok(Self { shard_count, shards })
    }

    /// Loads the assignment from `data_dir` (none yet: empty) for `shard_count` shards; a
    /// different recorded shard count is fine (reconcile re-places what no longer fits).
    pub fn load_from(data_dir: &Path, shard_count: u32) -> Result<Self, ControllerError> {
        let path = data_dir.join(SHARD_ASSIGNMENT_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Self::new(shard_count))
            }
            Err(source) => return Err(ControllerError::Io { op: "read", path, source }),
        };
        let mut a = Self::decode(&bytes).map_err(|reason| ControllerError::Corrupt {
            path,
            position: 0,
            reason,
        })?;
        a.shard_count = shard_count.max(1);
        Ok(a)
    }

    /// Writes the assignment atomically and durably: temporary file, fsync, rename, fsync of
    /// the directory.
    pub fn save(&self, data_dir: &Path) -> Result<(), ControllerError> {
        let path = data_dir.join(SHARD_ASSIGNMENT_FILE);
        let tmp = data_dir.join(format!("{SHARD_ASSIGNMENT_FILE}.tmp"));
        let io = |op: &'static str, p: &Path| {
            let p = p.to_path_buf();
            move |source| ControllerError::Io { op, path: p, source }
        };
        let mut f = File::create(&tmp).map_err(io("create", &tmp))?;
        f.write_all(&self.encode()).map_err(io("write", &tmp))?;
        f.sync_all().map_err(io("fsync", &tmp))?;
        drop(f);
        std::fs::rename(&tmp, &path).map_err(io("rename", &tmp))?;
        sync_dir(data_dir)
    }
}

/// A stable shard for a partition this node does not host, so requests for it reach a shard
/// that answers NOT_LEADER_OR_FOLLOWER (FNV-1a of name and index; not std's seeded hasher).
#[must_use]
pub fn stable_shard(topic: &str, partition: i32, shard_count: u32) -> ShardId {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in topic.as_bytes().iter().chain(&partition.to_be_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    ShardId(u32::try_from(h % u64::from(shard_count.max(1))).unwrap_or(0))
}

/// This node's image: the committed image with `node_id`, `controller_id`, the assignment's
/// shard count, and per partition `hosted` (this node is a replica) and `owner_shard` (the
/// assignment's shard when hosted, else [`stable_shard`]).
#[must_use]
pub fn node_image(
    committed: &MetadataImage,
    node_id: NodeId,
    controller_id: NodeId,
    assignment: &ShardAssignment,
) -> MetadataImage {
    node_image_since(committed, node_id, controller_id, assignment, None)
}

/// As [`node_image`], reusing the previous node image's topic `Arc`s where neither the
/// committed topic (`previous.0`, the committed image it was built from) nor its placement
/// changed, so image deltas stay small.
#[must_use]
pub fn node_image_since(
    committed: &MetadataImage,
    node_id: NodeId,
    controller_id: NodeId,
    assignment: &ShardAssignment,
    previous: Option<(&MetadataImage, &MetadataImage)>,
) -> MetadataImage {
    let mut image = committed.clone();
    image.node_id = node_id;
    image.controller_id = controller_id;
    image.shard_count = assignment.shard_count();
    for t in image.topics.values_mut() {
        let placed: Vec<(bool, ShardId)> = t
            .partitions
            .iter()
            .map(|p| {
                let hosted = p.replicas.contains(&node_id);
                let shard = match assignment.shard_of(&t.topic_id, p.index) {
                    Some(s) if hosted => s,
                    _ => stable_shard(&t.name, p.index, assignment.shard_count()),
                };
                (hosted, shard)
            })
            .collect();
        let same = |a: &[super::PartitionImage]| {
            a.len() == placed.len()
                && a.iter().zip(&placed).all(|(p, (h, s))| p.hosted == *h && p.owner_shard == *s)
        };
        if let Some((prev_committed, prev_node)) = previous {
            let unchanged = prev_committed.topics.get(&t.name).is_some_and(|p| Arc::ptr_eq(p, t));
            if let Some(prev) = prev_node.topics.get(&t.name) {
                if unchanged && same(&prev.partitions) {
                    *t = Arc::clone(prev);
                    continue;
                }
            }
        }
        if !same(&t.partitions) {
            for (p, (h, s)) in Arc::make_mut(t).partitions.iter_mut().zip(placed) {
                p.hosted = h;
                p.owner_shard = s;
            }
        }
    }
    image
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::{BrokerDefaults, ControllerState, NewTopic};

    fn state_with(topics: &[(&str, i32)]) -> ControllerState {
        let mut s =
            ControllerState::new("c".into(), NodeId(1), 4, BrokerDefaults::default()).unwrap();
        let specs: Vec<NewTopic> = topics
            .iter()
            .map(|(n, p)| NewTopic { num_partitions: *p, ..NewTopic::with_defaults(*n) })
            .collect();
        for r in s.create_topics(&specs, false) {
            r.unwrap();
        }
        s
    }

    #[test]
    fn new_partitions_go_to_the_least_loaded_shard_and_persist() {
        let dir = tempfile::tempdir().unwrap();
        let s = state_with(&[("a", 5), ("b", 3)]);
        let mut a = ShardAssignment::new(3);
        // Ignore the legacy hints (the state placed over 4 shards): a fresh node has none.
        let mut img = (*s.image()).clone();
        for t in img.topics.values_mut() {
            for p in &mut Arc::make_mut(t).partitions {
                p.owner_shard = ShardId(99);
            }
        }
        assert!(a.reconcile(&img, NodeId(1)));
        assert_eq!(a.load(), vec![3, 3, 2]);
        assert!(!a.reconcile(&img, NodeId(1)), "stable once placed");
        a.save(dir.path()).unwrap();
        let back = ShardAssignment::load_from(dir.path(), 3).unwrap();
        assert_eq!(back, a);
        // Another node hosts nothing: no entries, and non-hosted partitions get stable shards.
        let mut other = ShardAssignment::new(3);
        assert!(!other.reconcile(&img, NodeId(2)));
        let mine = node_image(&img, NodeId(1), NodeId(1), &a);
        assert_eq!(mine.partitions_of_shard(ShardId(0)).count(), 3);
        let theirs = node_image(&img, NodeId(2), NodeId(1), &other);
        assert_eq!(
            (0..3).map(|s| theirs.partitions_of_shard(ShardId(s)).count()).sum::<usize>(),
            0
        );
        let p = theirs.partition("a", 1).unwrap();
        assert!(!p.hosted);
        assert_eq!(p.owner_shard, stable_shard("a", 1, 3));
    }

    #[test]
    fn fewer_shards_re_place_and_deleted_topics_are_dropped() {
        let mut s = state_with(&[("a", 8), ("b", 2)]);
        let mut a = ShardAssignment::new(4);
        a.reconcile(&s.image(), NodeId(1));
        assert_eq!(a.load(), vec![3, 3, 2, 2]);
        let kept: Vec<_> = (0..8)
            .filter_map(|i| {
                let id = s.image().topic("a").unwrap().topic_id;
                a.shard_of(&id, i).filter(|s| s.0 < 2).map(|s| (i, s))
            })
            .collect();
        let mut smaller = a.clone();
        smaller.shard_count = 2;
        assert!(smaller.reconcile(&s.image(), NodeId(1)));
        assert_eq!(smaller.load(), vec![5, 5]);
        let id = s.image().topic("a").unwrap().topic_id;
        for (i, shard) in kept {
            assert_eq!(smaller.shard_of(&id, i), Some(shard), "partitions that fit stay put");
        }
        s.delete_topic("b").unwrap();
        assert!(smaller.reconcile(&s.image(), NodeId(1)));
        assert_eq!(smaller.load().iter().sum::<usize>(), 8);
    }

    #[test]
    fn damaged_files_are_errors_not_panics() {
        let s = state_with(&[("a", 2)]);
        let mut a = ShardAssignment::new(2);
        a.reconcile(&s.image(), NodeId(1));
        let bytes = a.encode();
        assert_eq!(ShardAssignment::decode(&bytes).unwrap(), a);
        for cut in 0..bytes.len() {
            assert!(ShardAssignment::decode(&bytes[..cut]).is_err());
        }
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(ShardAssignment::decode(&bad).is_err(), "flip at {i}");
        }
    }
}
