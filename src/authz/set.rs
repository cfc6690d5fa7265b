//! [`AclSet`]: every ACL of the cluster by id, indexed for the authorizer: per concrete
//! resource type, LITERAL ACLs by exact name (the `*` wildcard under its own name) and
//! PREFIXED ACLs by prefix, with the distinct prefix lengths kept sorted, so a check looks up
//! one exact name, the wildcard, and one prefix per distinct length: no scan over ACLs of
//! other resources and no allocation.
//!
//! Built on the controller shard (replayed records, snapshots, live CreateAcls/DeleteAcls)
//! and published read-only in every shard's metadata image. Invariants: `by_id`, `ids` and
//! the index hold the same ACLs; no two ids hold equal ACLs (CreateAcls of an existing ACL
//! adds nothing, as Kafka's `AclControlManager`); every change takes a new process-wide
//! [`AclSet::stamp`], so a cached decision keyed by the stamp is never stale.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use uuid::Uuid;

use super::model::{Acl, AclFilter, Operation, PatternType, Permission, ResourceType, WILDCARD};

/// Source of [`AclSet::stamp`]s: distinct for every set content this process builds.
static NEXT_STAMP: AtomicU64 = AtomicU64::new(1);

fn next_stamp() -> u64 {
    NEXT_STAMP.fetch_add(1, Ordering::Relaxed)
}

/// The part of an ACL the authorizer compares, stored under its resource pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub id: Uuid,
    pub principal: Box<str>,
    pub host: Box<str>,
    pub operation: Operation,
    pub permission: Permission,
}

/// The ACLs of one resource type.
#[derive(Clone, Debug, Default)]
struct TypeIndex {
    literal: HashMap<Box<str>, Vec<Entry>>,
    prefixed: HashMap<Box<str>, Vec<Entry>>,
    /// How many prefixed names have each byte length.
    prefix_len_counts: BTreeMap<usize, usize>,
    /// The keys of `prefix_len_counts`, ascending.
    prefix_lens: Vec<usize>,
    count: usize,
}

impl TypeIndex {
    fn add(&mut self, name: &str, pattern: PatternType, entry: Entry) {
        let map =
            if pattern == PatternType::Prefixed { &mut self.prefixed } else { &mut self.literal };
        let list = map.entry(name.into()).or_default();
        let new_name = list.is_empty();
        list.push(entry);
        self.count += 1;
        if pattern == PatternType::Prefixed && new_name {
            *self.prefix_len_counts.entry(name.len()).or_default() += 1;
            self.prefix_lens = self.prefix_len_counts.keys().copied().collect();
        }
    }

    fn remove(&mut self, name: &str, pattern: PatternType, id: Uuid) {
        let prefixed = pattern == PatternType::Prefixed;
        let map = if prefixed { &mut self.prefixed } else { &mut self.literal };
        let Some(list) = map.get_mut(name) else { return };
        let before = list.len();
        list.retain(|e| e.id != id);
        self.count -= before - list.len();
        if !list.is_empty() {
            return;
        }
        map.remove(name);
        if prefixed {
            if let Some(n) = self.prefix_len_counts.get_mut(&name.len()) {
                *n -= 1;
                if *n == 0 {
                    self.prefix_len_counts.remove(&name.len());
                }
            }
            self.prefix_lens = self.prefix_len_counts.keys().copied().collect();
        }
    }
}

/// Every ACL of the cluster. See the module docs.
#[derive(Clone, Debug)]
pub struct AclSet {
    by_id: BTreeMap<Uuid, Acl>,
    ids: HashMap<Acl, Uuid>,
    index: [TypeIndex; 6],
    stamp: u64,
}

impl Default for AclSet {
    fn default() -> Self {
        Self {
            by_id: BTreeMap::new(),
            ids: HashMap::new(),
            index: Default::default(),
            stamp: next_stamp(),
        }
    }
}

impl PartialEq for AclSet {
    /// Equal contents (the stamps may differ).
    fn eq(&self, other: &Self) -> bool {
        self.by_id == other.by_id
    }
}

impl AclSet {
    /// Changes whenever the contents change (distinct across every set of this process).
    #[must_use]
    pub fn stamp(&self) -> u64 {
        self.stamp
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The id of an ACL equal to `acl`, if one exists.
    #[must_use]
    pub fn id_of(&self, acl: &Acl) -> Option<Uuid> {
        self.ids.get(acl).copied()
    }

    #[must_use]
    pub fn get(&self, id: &Uuid) -> Option<&Acl> {
        self.by_id.get(id)
    }

    /// Every ACL with its id, by id.
    pub fn iter(&self) -> impl Iterator<Item = (&Uuid, &Acl)> {
        self.by_id.iter()
    }

    /// The ACLs a filter matches, by id.
    pub fn matching<'a>(
        &'a self,
        filter: &'a AclFilter,
    ) -> impl Iterator<Item = (&'a Uuid, &'a Acl)> {
        self.by_id.iter().filter(|(_, acl)| filter.matches(acl))
    }

    /// Adds `acl` under `id` (a record replayed or a creation). An id already present is
    /// replaced; an equal ACL under another id is an error (the controller never writes one).
    pub fn insert(&mut self, id: Uuid, acl: Acl) -> Result<(), String> {
        let Some(slot) = acl.resource_type.slot() else {
            return Err(format!("ACL {id} has resource type {}", acl.resource_type));
        };
        if !matches!(acl.pattern, PatternType::Literal | PatternType::Prefixed) {
            return Err(format!("ACL {id} has pattern type {}", acl.pattern));
        }
        if let Some(other) = self.ids.get(&acl) {
            if *other != id {
                return Err(format!("ACL {id} repeats ACL {other}: {acl}"));
            }
        }
        self.remove(&id);
        let entry = Entry {
            id,
            principal: acl.principal.as_str().into(),
            host: acl.host.as_str().into(),
            operation: acl.operation,
            permission: acl.permission,
        };
        self.index[slot].add(&acl.resource_name, acl.pattern, entry);
        self.ids.insert(acl.clone(), id);
        self.by_id.insert(id, acl);
        self.stamp = next_stamp();
        Ok(())
    }

    /// Removes the ACL with this id.
    pub fn remove(&mut self, id: &Uuid) -> Option<Acl> {
        let acl = self.by_id.remove(id)?;
        self.ids.remove(&acl);
        if let Some(slot) = acl.resource_type.slot() {
            self.index[slot].remove(&acl.resource_name, acl.pattern, *id);
        }
        self.stamp = next_stamp();
        Some(acl)
    }

    /// How many ACLs name resources of this type (any pattern).
    #[must_use]
    pub fn count_of(&self, resource_type: ResourceType) -> usize {
        resource_type.slot().map_or(0, |s| self.index[s].count)
    }

    /// Calls `visit` with the entries of every ACL whose pattern covers resource `name` of
    /// `resource_type`: LITERAL `name`, PREFIXED prefixes of `name`, then LITERAL `*`.
    /// `visit` returns `false` to stop.
    pub fn for_each_covering(
        &self,
        resource_type: ResourceType,
        name: &str,
        mut visit: impl FnMut(&Entry) -> bool,
    ) {
        let Some(slot) = resource_type.slot() else { return };
        let index = &self.index[slot];
        if index.count == 0 {
            return;
        }
        let mut each = |list: Option<&Vec<Entry>>| list.is_none_or(|l| l.iter().all(&mut visit));
        if !each(index.literal.get(name)) {
            return;
        }
        for &len in &index.prefix_lens {
            if len > name.len() {
                break;
            }
            if name.is_char_boundary(len) && !each(index.prefixed.get(&name[..len])) {
                return;
            }
        }
        if name != WILDCARD {
            each(index.literal.get(WILDCARD));
        }
    }

    /// Every ACL of a resource type with its pattern (Kafka's `authorizeByResourceType`
    /// walks these).
    pub fn of_type(&self, resource_type: ResourceType) -> impl Iterator<Item = &Acl> {
        self.by_id.values().filter(move |a| a.resource_type == resource_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(name: &str, pattern: PatternType, op: Operation) -> Acl {
        Acl {
            resource_type: ResourceType::Topic,
            resource_name: name.into(),
            pattern,
            principal: "User:a".into(),
            host: "*".into(),
            operation: op,
            permission: Permission::Allow,
        }
    }

    fn covering(set: &AclSet, name: &str) -> Vec<Uuid> {
        let mut out = Vec::new();
        set.for_each_covering(ResourceType::Topic, name, |e| {
            out.push(e.id);
            true
        });
        out.sort();
        out
    }

    #[test]
    fn index_follows_inserts_and_removals() {
        let mut set = AclSet::default();
        let ids: Vec<Uuid> = (1..=5).map(Uuid::from_u128).collect();
        set.insert(ids[0], acl("orders", PatternType::Literal, Operation::Read)).unwrap();
        set.insert(ids[1], acl("ord", PatternType::Prefixed, Operation::Read)).unwrap();
        set.insert(ids[2], acl("*", PatternType::Literal, Operation::Read)).unwrap();
        set.insert(ids[3], acl("orders-x", PatternType::Prefixed, Operation::Read)).unwrap();
        set.insert(ids[4], acl("o", PatternType::Prefixed, Operation::Write)).unwrap();
        assert_eq!(covering(&set, "orders"), vec![ids[0], ids[1], ids[2], ids[4]]);
        assert_eq!(covering(&set, "orders-x1"), vec![ids[1], ids[2], ids[3], ids[4]]);
        assert_eq!(covering(&set, "x"), vec![ids[2]]);
        let stamp = set.stamp();
        assert!(set.remove(&ids[4]).is_some());
        assert_ne!(set.stamp(), stamp);
        assert_eq!(covering(&set, "orders"), vec![ids[0], ids[1], ids[2]]);
        assert_eq!(set.index[0].prefix_lens, vec![3, 8]);
        // An equal ACL under a new id is refused; re-inserting under its own id is not.
        let dup = acl("orders", PatternType::Literal, Operation::Read);
        assert!(set.insert(Uuid::from_u128(9), dup.clone()).is_err());
        assert!(set.insert(ids[0], dup.clone()).is_ok());
        assert_eq!(set.id_of(&dup), Some(ids[0]));
        assert_eq!(set.len(), 4);
        assert_eq!(set.count_of(ResourceType::Topic), 4);
        assert_eq!(set.count_of(ResourceType::Group), 0);
    }

    #[test]
    fn non_ascii_names_cut_only_at_char_boundaries() {
        let mut set = AclSet::default();
        set.insert(Uuid::from_u128(1), acl("é", PatternType::Prefixed, Operation::Read)).unwrap();
        set.insert(Uuid::from_u128(2), acl("a", PatternType::Prefixed, Operation::Read)).unwrap();
        assert_eq!(covering(&set, "éa"), vec![Uuid::from_u128(1)]);
        assert_eq!(covering(&set, "aé"), vec![Uuid::from_u128(2)]);
    }
}
