//! Partition placement across this broker's shards: a new partition goes to the shard that
//! owns the fewest partitions (ties to the lowest shard id), and the choice is recorded in the
//! metadata log so restarts keep it.
//!
//! Pure functions used on the controller shard. Invariant: the returned shard is below the
//! shard count the load vector was built for.

use std::sync::Arc;

use super::TopicImage;
use crate::types::ShardId;

/// Partitions per shard (index = shard id); owners beyond `shard_count` are not counted.
pub(crate) fn load_of<'a>(
    topics: impl Iterator<Item = &'a Arc<TopicImage>>,
    shard_count: u32,
) -> Vec<usize> {
    let mut load = vec![0usize; shard_count as usize];
    for p in topics.flat_map(|t| t.partitions.iter()) {
        if let Some(n) = load.get_mut(p.owner_shard.0 as usize) {
            *n += 1;
        }
    }
    load
}

/// Picks the least-loaded shard and counts the new partition on it.
pub(crate) fn least_loaded(load: &mut [usize]) -> ShardId {
    let (index, _) = load.iter().enumerate().min_by_key(|&(i, n)| (*n, i)).unwrap_or((0, &0));
    if let Some(n) = load.get_mut(index) {
        *n += 1;
    }
    ShardId(u32::try_from(index).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_evenly_and_fills_the_emptiest_first() {
        let mut load = vec![0, 0, 0];
        let picks: Vec<u32> = (0..6).map(|_| least_loaded(&mut load).0).collect();
        assert_eq!(picks, vec![0, 1, 2, 0, 1, 2]);
        let mut load = vec![5, 1, 3];
        assert_eq!(least_loaded(&mut load), ShardId(1));
        assert_eq!(least_loaded(&mut load), ShardId(1));
        assert_eq!(least_loaded(&mut load), ShardId(1));
        assert_eq!(load, vec![5, 4, 3]);
        assert_eq!(least_loaded(&mut load), ShardId(2));
    }
}
