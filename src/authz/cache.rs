//! [`DecisionCache`]: one connection's authorization decisions, keyed by resource type,
//! resource name and operation, valid while the ACL set's stamp is unchanged.
//!
//! Lives in a connection's state on the connection's shard. A hit is one hash lookup by
//! `&str` (no allocation); a miss stores the name once. Invariants: every cached decision was
//! made against the set whose stamp the cache holds (a new stamp clears it); at most
//! `AUTHZ_CACHE_NAMES_MAX` names per connection (then the cache starts over), so a client
//! naming endless topics cannot grow it without bound.

use std::collections::HashMap;

use super::model::{Operation, ResourceType, CONCRETE_TYPES};
use crate::constants::AUTHZ_CACHE_NAMES_MAX;

/// Which operations have been decided for a name, and which of them were allowed (bit =
/// operation code).
#[derive(Clone, Copy, Debug, Default)]
struct Known {
    decided: u32,
    allowed: u32,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct DecisionCache {
    stamp: u64,
    names: [HashMap<Box<str>, Known>; CONCRETE_TYPES.len()],
    count: usize,
}

impl DecisionCache {
    /// The cached decision, if one was made against the set with this stamp.
    pub fn get(&mut self, stamp: u64, rt: ResourceType, name: &str, op: Operation) -> Option<bool> {
        if stamp != self.stamp {
            self.clear(stamp);
            return None;
        }
        let known = self.names[rt.slot()?].get(name)?;
        let bit = 1u32 << op.code();
        (known.decided & bit != 0).then_some(known.allowed & bit != 0)
    }

    /// Remembers a decision made against the set with this stamp.
    pub fn put(&mut self, stamp: u64, rt: ResourceType, name: &str, op: Operation, allowed: bool) {
        let Some(slot) = rt.slot() else { return };
        if stamp != self.stamp {
            self.clear(stamp);
        }
        let bit = 1u32 << op.code();
        if let Some(known) = self.names[slot].get_mut(name) {
            known.decided |= bit;
            if allowed {
                known.allowed |= bit;
            }
            return;
        }
        if self.count >= AUTHZ_CACHE_NAMES_MAX {
            self.clear(stamp);
        }
        let allowed = if allowed { bit } else { 0 };
        self.names[slot].insert(name.into(), Known { decided: bit, allowed });
        self.count += 1;
    }

    fn clear(&mut self, stamp: u64) {
        for m in &mut self.names {
            m.clear();
        }
        self.count = 0;
        self.stamp = stamp;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_live_until_the_stamp_changes() {
        let mut c = DecisionCache::default();
        let t = ResourceType::Topic;
        assert_eq!(c.get(5, t, "a", Operation::Read), None);
        c.put(5, t, "a", Operation::Read, true);
        c.put(5, t, "a", Operation::Write, false);
        assert_eq!(c.get(5, t, "a", Operation::Read), Some(true));
        assert_eq!(c.get(5, t, "a", Operation::Write), Some(false));
        assert_eq!(c.get(5, t, "a", Operation::Describe), None);
        assert_eq!(c.get(5, ResourceType::Group, "a", Operation::Read), None);
        assert_eq!(c.get(6, t, "a", Operation::Read), None);
        assert_eq!(c.get(6, t, "a", Operation::Write), None);
    }

    #[test]
    fn the_cache_is_bounded() {
        let mut c = DecisionCache::default();
        for i in 0..=AUTHZ_CACHE_NAMES_MAX {
            c.put(1, ResourceType::Topic, &format!("t{i}"), Operation::Read, true);
        }
        assert!(c.count <= AUTHZ_CACHE_NAMES_MAX);
        assert_eq!(c.get(1, ResourceType::Topic, "t0", Operation::Read), None);
    }
}
