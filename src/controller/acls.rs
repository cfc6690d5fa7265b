//! ACLs of the [`ControllerState`] (Kafka's `AclControlManager`): CreateAcls and DeleteAcls
//! write `AccessControlEntryRecord`s and `RemoveAccessControlEntryRecord`s (by id), the
//! metadata log stores them, they are replayed at start and in snapshots, and published in
//! the metadata image, where every shard's authorizer reads them.
//!
//! Runs on the controller shard (changes) and every shard (the image's read-only copy).
//! Invariants: every stored ACL passed [`Acl::validate`]; no two ids hold equal ACLs (an ACL
//! created twice is written once, and both creations succeed, as in Kafka); ids are random
//! and never reused while their ACL exists.

use std::collections::BTreeSet;
use std::sync::Arc;

use uuid::Uuid;

use super::records::{AclRecord, MetadataRecord};
use super::{ControllerError, ControllerState};
use crate::authz::{Acl, AclError, AclFilter, AclSet};

/// The ACLs one DeleteAcls filter removed, or why the filter was refused (Kafka answers
/// INVALID_REQUEST).
pub type FilterResult = Result<Vec<Acl>, &'static str>;

impl ControllerState {
    /// The ACLs in force.
    #[must_use]
    pub fn acls(&self) -> &Arc<AclSet> {
        &self.acls
    }

    /// Creates ACLs as one operation: one result per ACL, in order. Invalid ACLs fail alone;
    /// an ACL that exists already (or twice in the request) succeeds without a record.
    pub fn create_acls(
        &mut self,
        acls: Vec<Acl>,
    ) -> Result<Vec<Result<(), AclError>>, ControllerError> {
        let mut results = Vec::with_capacity(acls.len());
        let mut records = Vec::new();
        let mut new_ids = BTreeSet::new();
        let mut added: Vec<Acl> = Vec::new();
        for acl in acls {
            if let Err(e) = acl.validate() {
                results.push(Err(e));
                continue;
            }
            if self.acls.id_of(&acl).is_none() && !added.contains(&acl) {
                let id = loop {
                    let id = Uuid::new_v4();
                    if self.acls.get(&id).is_none() && new_ids.insert(id) {
                        break id;
                    }
                };
                added.push(acl.clone());
                records.push(MetadataRecord::Acl(AclRecord { id, acl }));
            }
            results.push(Ok(()));
        }
        if !records.is_empty() {
            self.propose(records)?;
        }
        Ok(results)
    }

    /// Deletes the ACLs each filter matches, as one operation: one result per filter, in
    /// order, naming every ACL it matched (an ACL matched by two filters is named by both and
    /// removed once, as Kafka does).
    pub fn delete_acls(
        &mut self,
        filters: &[AclFilter],
    ) -> Result<Vec<FilterResult>, ControllerError> {
        let mut results = Vec::with_capacity(filters.len());
        let mut removed = BTreeSet::new();
        for filter in filters {
            if let Some(reason) = filter.unknown_element() {
                results.push(Err(reason));
                continue;
            }
            let mut matched = Vec::new();
            for (id, acl) in self.acls.matching(filter) {
                removed.insert(*id);
                matched.push(acl.clone());
            }
            results.push(Ok(matched));
        }
        if !removed.is_empty() {
            let records = removed.into_iter().map(|id| MetadataRecord::RemoveAcl { id }).collect();
            self.propose(records)?;
        }
        Ok(results)
    }

    /// Applies one recorded creation (replay and live alike).
    pub(super) fn apply_acl(&mut self, r: AclRecord) -> Result<(), String> {
        Arc::make_mut(&mut self.acls).insert(r.id, r.acl)
    }

    /// Applies one recorded removal; an unknown id is corruption (Kafka refuses it too).
    pub(super) fn apply_remove_acl(&mut self, id: Uuid) -> Result<(), String> {
        Arc::make_mut(&mut self.acls)
            .remove(&id)
            .map(|_| ())
            .ok_or_else(|| format!("removal of unknown ACL id {id}"))
    }

    /// The records that rebuild the ACLs (a snapshot's part).
    #[must_use]
    pub(super) fn acl_snapshot_records(&self) -> Vec<MetadataRecord> {
        self.acls
            .iter()
            .map(|(id, acl)| MetadataRecord::Acl(AclRecord { id: *id, acl: acl.clone() }))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authz::{Operation, PatternType, Permission, ResourceType};
    use crate::controller::configs::BrokerDefaults;
    use crate::types::NodeId;

    fn state() -> ControllerState {
        ControllerState::new("c".into(), NodeId(0), 1, BrokerDefaults::default()).unwrap()
    }

    fn acl(name: &str, pattern: PatternType) -> Acl {
        Acl {
            resource_type: ResourceType::Topic,
            resource_name: name.into(),
            pattern,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        }
    }

    #[test]
    fn create_delete_replay_and_snapshot() {
        let mut s = state();
        let results = s
            .create_acls(vec![
                acl("a", PatternType::Literal),
                acl("a", PatternType::Literal),
                acl("", PatternType::Literal),
                acl("p-", PatternType::Prefixed),
            ])
            .unwrap();
        assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 3);
        assert_eq!(results[2], Err(AclError::EmptyName));
        assert_eq!(s.acls().len(), 2);
        // Again: nothing new is written.
        let before = s.take_proposals().len();
        assert_eq!(before, 1);
        s.create_acls(vec![acl("a", PatternType::Literal)]).unwrap();
        assert!(s.take_proposals().is_empty());
        assert_eq!(s.image().acls.len(), 2);

        // A snapshot rebuilds the same set.
        let snap = s.snapshot();
        let mut other = state();
        other.restore_snapshot(7, &snap).unwrap();
        assert_eq!(*other.acls(), *s.acls());

        // Delete by filters: MATCH finds the prefixed one for a named topic.
        let by_match = AclFilter {
            resource_type: ResourceType::Topic,
            resource_name: Some("p-1".into()),
            pattern: PatternType::Match,
            ..AclFilter::any()
        };
        let bad = AclFilter { operation: Operation::Unknown, ..AclFilter::any() };
        let out = s.delete_acls(&[by_match, bad]).unwrap();
        assert_eq!(out[0].as_ref().unwrap(), &vec![acl("p-", PatternType::Prefixed)]);
        assert!(out[1].is_err());
        assert_eq!(s.acls().len(), 1);
        let frames = s.take_proposals();
        assert_eq!(frames.len(), 1);
        // The committed copy applying the frames reaches the same set.
        other.restore_snapshot(7, &snap).unwrap();
        for f in &frames {
            other.apply_entry(8, f).unwrap();
        }
        assert_eq!(*other.acls(), *s.acls());
        // Removing an unknown id is refused.
        assert!(other.apply_remove_acl(Uuid::from_u128(42)).is_err());
    }
}
