//! Placement: replicas across brokers, and partitions across this broker's shards.
//!
//! Brokers ([`striped`]): Kafka's striped idea (rotating start, replicas shifted across the
//! broker list) made exactly even: leaders and replicas per broker of one placement call
//! differ by at most one.
//!
//! Shards: a new partition goes to the shard that owns the fewest partitions (ties to the
//! lowest shard id); the broker keeps the choice in its [`super::ShardAssignment`].
//!
//! Pure functions used on the controller shard. Invariant: the returned shard is below the
//! shard count the load vector was built for; a replica list never repeats a broker.

use crate::types::{NodeId, ShardId};

/// Replica lists (leader first) for `count` partitions of replication factor `rf` over
/// `brokers` (sorted, non-empty; `rf` within `1..=brokers.len()`).
///
/// Replica slots are laid out row-major around the broker ring from `first_slot`: partition
/// `i` takes the `rf` consecutive brokers at slots `first_slot + i*rf ..`, so replicas per
/// broker differ by at most one. Leaders: within each group of `n` consecutive partitions
/// every partition gets a distinct leader from its window (a bipartite matching; it exists
/// because each broker lies in at most `rf` windows of a group and each window has `rf`
/// brokers, Hall's condition), so leaders per broker differ by at most one too.
pub(crate) fn striped(
    brokers: &[NodeId],
    first_slot: usize,
    count: usize,
    rf: usize,
) -> Vec<Vec<NodeId>> {
    let n = brokers.len();
    if n == 0 || rf == 0 {
        return vec![Vec::new(); count];
    }
    let rf = rf.min(n);
    let windows: Vec<Vec<usize>> =
        (0..count).map(|i| (0..rf).map(|j| (first_slot + i * rf + j) % n).collect()).collect();
    let mut out = Vec::with_capacity(count);
    for group in windows.chunks(n) {
        for (window, leader) in group.iter().zip(match_leaders(group, n)) {
            let at = window.iter().position(|b| *b == leader).unwrap_or(0);
            out.push((0..rf).map(|k| brokers[window[(at + k) % rf]]).collect());
        }
    }
    out
}

/// A distinct broker per window (Kuhn's augmenting paths), preferring earlier positions.
fn match_leaders(windows: &[Vec<usize>], n: usize) -> Vec<usize> {
    let mut owner: Vec<Option<usize>> = vec![None; n];
    for w in 0..windows.len() {
        let mut seen = vec![false; n];
        augment(w, windows, &mut owner, &mut seen);
    }
    let mut leader: Vec<Option<usize>> = vec![None; windows.len()];
    for (b, w) in owner.iter().enumerate() {
        if let Some(w) = w {
            leader[*w] = Some(b);
        }
    }
    leader.iter().zip(windows).map(|(l, w)| l.unwrap_or(w[0])).collect()
}

fn augment(
    w: usize,
    windows: &[Vec<usize>],
    owner: &mut [Option<usize>],
    seen: &mut [bool],
) -> bool {
    // A free broker first, so earlier partitions keep their first choice when possible.
    if let Some(&b) = windows[w].iter().find(|&&b| owner[b].is_none() && !seen[b]) {
        owner[b] = Some(w);
        return true;
    }
    for &b in &windows[w] {
        if seen[b] {
            continue;
        }
        seen[b] = true;
        let free = match owner[b] {
            None => true,
            Some(other) => augment(other, windows, owner, seen),
        };
        if free {
            owner[b] = Some(w);
            return true;
        }
    }
    false
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

    fn spread(counts: &std::collections::BTreeMap<NodeId, usize>, brokers: usize) -> usize {
        let v: Vec<usize> =
            (0..brokers).map(|b| counts.get(&NodeId(b as i32)).copied().unwrap_or(0)).collect();
        v.iter().max().unwrap() - v.iter().min().unwrap()
    }

    #[test]
    fn striped_leaders_and_replicas_are_within_one_per_broker() {
        for brokers in [3usize, 4, 5] {
            let ids: Vec<NodeId> = (0..brokers).map(|b| NodeId(b as i32)).collect();
            for rf in 1..=brokers {
                for partitions in 1..=13 {
                    for start in 0..brokers {
                        let mut leaders = std::collections::BTreeMap::new();
                        let mut replicas = std::collections::BTreeMap::new();
                        for r in striped(&ids, start, partitions, rf) {
                            assert_eq!(r.len(), rf);
                            let mut uniq = r.clone();
                            uniq.sort();
                            uniq.dedup();
                            assert_eq!(uniq.len(), rf, "{r:?}");
                            *leaders.entry(r[0]).or_insert(0) += 1;
                            for b in r {
                                *replicas.entry(b).or_insert(0) += 1;
                            }
                        }
                        let ctx = format!("brokers {brokers} rf {rf} partitions {partitions}");
                        assert!(spread(&leaders, brokers) <= 1, "leaders {ctx}: {leaders:?}");
                        assert!(spread(&replicas, brokers) <= 1, "replicas {ctx}: {replicas:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn striping_rotates_with_the_first_slot() {
        let ids: Vec<NodeId> = (0..3).map(NodeId).collect();
        assert_eq!(striped(&ids, 0, 1, 1), vec![vec![NodeId(0)]]);
        assert_eq!(striped(&ids, 1, 1, 1), vec![vec![NodeId(1)]]);
        assert_eq!(striped(&ids, 0, 2, 3)[0], vec![NodeId(0), NodeId(1), NodeId(2)]);
        assert_eq!(striped(&ids, 0, 2, 3)[1][0], NodeId(1), "the second leader differs");
    }

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
