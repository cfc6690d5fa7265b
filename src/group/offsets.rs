//! Committed offsets and the group-level admin operations: OffsetCommit (including the
//! generation -1 / empty member commits of `assign()` consumers and Admin resets, only
//! for groups without active members), OffsetFetch, OffsetDelete, DeleteGroups,
//! ListGroups, DescribeGroups, retention expiry, and replay of `__consumer_offsets`.
//!
//! Pure functions on the group's coordinator shard. Invariant: every change to the
//! durable state emits the record that reproduces it on replay.

use super::coordinator::{validate_member, Coordinator};
use super::records::{OffsetValue, Record};
use super::state::Group;
use super::types::{CommitRequest, Committed, GroupError, GroupState, GroupSummary};

/// Result of OffsetCommit: an error per partition (in request order) and the records.
pub struct CommitOutcome {
    pub errors: Vec<Option<GroupError>>,
    pub records: Vec<Record>,
}

impl Coordinator {
    /// OffsetCommit: validated as Kafka does; returns one record per partition. Nothing
    /// changes until the driver hands the records back through [`Self::apply_durable`]
    /// once they are durable, so OffsetFetch never shows a commit that could be lost.
    pub fn commit(&mut self, req: &CommitRequest, now_ms: i64) -> CommitOutcome {
        let n = req.partitions.len();
        let all = |e: GroupError| CommitOutcome { errors: vec![Some(e); n], records: Vec::new() };
        if req.group_id.is_empty() {
            return all(GroupError::InvalidGroupId);
        }
        let delay_ms = self.config.initial_rebalance_delay_ms;
        if !self.groups.contains_key(&req.group_id) {
            if req.generation_id >= 0 {
                return all(GroupError::IllegalGeneration);
            }
            self.groups.insert(req.group_id.clone(), Group::new(&req.group_id, now_ms, delay_ms));
        }
        let metadata_max = self.config.offset_metadata_bytes_max;
        let retention_ms = self.config.offsets_retention_ms;
        let group = self.groups.get_mut(&req.group_id).expect("present");
        if let Err(e) = validate_commit(group, req) {
            return all(e);
        }
        let mut errors = Vec::with_capacity(n);
        let mut records = Vec::with_capacity(n);
        for p in &req.partitions {
            let metadata = p.metadata.clone().unwrap_or_default();
            if metadata.len() > metadata_max {
                errors.push(Some(GroupError::OffsetMetadataTooLarge));
                continue;
            }
            let expire_timestamp_ms =
                if req.retention_time_ms >= 0 && req.retention_time_ms != retention_ms {
                    now_ms.saturating_add(req.retention_time_ms)
                } else {
                    -1
                };
            let value = OffsetValue {
                offset: p.offset,
                leader_epoch: p.leader_epoch,
                metadata,
                commit_timestamp_ms: now_ms,
                expire_timestamp_ms,
            };
            records.push(Record::Offset {
                group: req.group_id.clone(),
                topic: p.topic.clone(),
                partition: p.partition,
                value: Some(value),
            });
            errors.push(None);
        }
        CommitOutcome { errors, records }
    }

    /// OffsetFetch of listed partitions: offset -1 where nothing is committed.
    #[must_use]
    pub fn fetch(&self, group_id: &str, partitions: &[(String, i32)]) -> Vec<Option<Committed>> {
        let group = self.groups.get(group_id);
        partitions
            .iter()
            .map(|(t, p)| group.and_then(|g| g.offsets.get(&(t.clone(), *p))).map(committed))
            .collect()
    }

    /// OffsetFetch with no topics: every committed offset of the group.
    #[must_use]
    pub fn fetch_all(&self, group_id: &str) -> Vec<(String, i32, Committed)> {
        self.groups
            .get(group_id)
            .map(|g| g.offsets.iter().map(|((t, p), v)| (t.clone(), *p, committed(v))).collect())
            .unwrap_or_default()
    }

    /// ListGroups: (group id, protocol type, state) of every live group.
    #[must_use]
    pub fn list(&self) -> Vec<(String, String, GroupState)> {
        self.groups
            .values()
            .filter(|g| !g.is(GroupState::Dead))
            .map(|g| (g.group_id.clone(), g.protocol_type.clone().unwrap_or_default(), g.state))
            .collect()
    }

    /// DescribeGroups: Kafka reports an unknown group as Dead with no error; member
    /// metadata and assignments only for a Stable group.
    #[must_use]
    pub fn describe(&self, group_id: &str) -> GroupSummary {
        match self.groups.get(group_id) {
            None => GroupSummary {
                group_id: group_id.into(),
                state: GroupState::Dead,
                protocol_type: String::new(),
                protocol: String::new(),
                members: Vec::new(),
            },
            Some(g) => {
                let stable = g.is(GroupState::Stable);
                GroupSummary {
                    group_id: group_id.into(),
                    state: g.state,
                    protocol_type: g.protocol_type.clone().unwrap_or_default(),
                    protocol: if stable {
                        g.protocol.clone().unwrap_or_default()
                    } else {
                        String::new()
                    },
                    members: g.member_summaries(stable),
                }
            }
        }
    }

    /// DeleteGroups for one group: only an empty group, all its offsets tombstoned.
    pub fn delete_group(&mut self, group_id: &str) -> Result<Vec<Record>, GroupError> {
        let group = self.groups.get(group_id).ok_or(GroupError::GroupIdNotFound)?;
        match group.state {
            GroupState::Dead => return Err(GroupError::GroupIdNotFound),
            GroupState::Empty => {}
            _ => return Err(GroupError::NonEmptyGroup),
        }
        let group = self.groups.remove(group_id).expect("present");
        Ok(tombstones(&group, group.offsets.keys(), true))
    }

    /// OffsetDelete: per-partition results; a partition of a topic the active group is
    /// subscribed to cannot be deleted.
    pub fn offset_delete(
        &mut self,
        group_id: &str,
        partitions: &[(String, i32)],
        subscribed: impl Fn(&Group, &str) -> bool,
    ) -> Result<(Vec<Option<GroupError>>, Vec<Record>), GroupError> {
        let group = self.groups.get_mut(group_id).ok_or(GroupError::GroupIdNotFound)?;
        if group.is(GroupState::Dead) {
            return Err(GroupError::GroupIdNotFound);
        }
        let consumer = group.protocol_type.as_deref() == Some("consumer");
        if !group.is(GroupState::Empty) && !consumer {
            return Err(GroupError::NonEmptyGroup);
        }
        let mut errors = Vec::with_capacity(partitions.len());
        let mut removed = Vec::new();
        for (topic, partition) in partitions {
            if !group.is(GroupState::Empty) && subscribed(group, topic) {
                errors.push(Some(GroupError::GroupSubscribedToTopic));
                continue;
            }
            if group.offsets.remove(&(topic.clone(), *partition)).is_some() {
                removed.push((topic.clone(), *partition));
            }
            errors.push(None);
        }
        let records = tombstones(group, removed.iter(), false);
        Ok((errors, records))
    }

    /// Offsets past retention (and of topics that no longer exist) are dropped with
    /// tombstones; an empty group left with no offsets is removed with a group tombstone
    /// (`offsets.retention.check.interval.ms` paces the calls).
    pub fn expire(&mut self, now_ms: i64, topic_exists: impl Fn(&str) -> bool) -> Vec<Record> {
        let retention_ms = self.config.offsets_retention_ms;
        let mut records = Vec::new();
        let mut dead = Vec::new();
        for group in self.groups.values_mut() {
            let expired = expired_offsets(group, now_ms, retention_ms, &topic_exists);
            for key in &expired {
                group.offsets.remove(key);
            }
            records.extend(tombstones(group, expired.iter(), false));
            // As Kafka: an empty group without offsets is removed at the next check.
            if group.is(GroupState::Empty)
                && group.offsets.is_empty()
                && group.pending_members.is_empty()
            {
                dead.push(group.group_id.clone());
            }
        }
        for id in dead {
            self.groups.remove(&id);
            records.push(Record::Group { group: id, value: None });
        }
        records
    }

    /// Applies records that are now durable (commits the driver persisted).
    pub fn apply_durable(&mut self, records: Vec<Record>, now_ms: i64) {
        for record in records {
            self.replay(record, now_ms);
        }
    }

    /// Applies one replayed `__consumer_offsets` record.
    pub fn replay(&mut self, record: Record, now_ms: i64) {
        let delay_ms = self.config.initial_rebalance_delay_ms;
        match record {
            Record::Offset { group, topic, partition, value } => {
                let entry = self
                    .groups
                    .entry(group.clone())
                    .or_insert_with(|| Group::new(&group, now_ms, delay_ms));
                match value {
                    Some(v) => entry.offsets.insert((topic, partition), v),
                    None => entry.offsets.remove(&(topic, partition)),
                };
            }
            Record::Group { group, value: Some(value) } => {
                let entry = self
                    .groups
                    .entry(group.clone())
                    .or_insert_with(|| Group::new(&group, now_ms, delay_ms));
                entry.load(value, now_ms);
            }
            Record::Group { group, value: None } => {
                self.groups.remove(&group);
            }
        }
    }

    /// Groups with their committed offsets (for lag reporting).
    pub fn offsets_of(&self, group_id: &str) -> Vec<((String, i32), i64)> {
        self.groups
            .get(group_id)
            .map(|g| g.offsets.iter().map(|(k, v)| (k.clone(), v.offset)).collect())
            .unwrap_or_default()
    }
}

fn committed(v: &OffsetValue) -> Committed {
    Committed {
        offset: v.offset,
        leader_epoch: v.leader_epoch,
        metadata: v.metadata.clone(),
        unstable: false,
    }
}

/// Kafka's classic validateOffsetCommit.
fn validate_commit(group: &Group, req: &CommitRequest) -> Result<(), GroupError> {
    if group.is(GroupState::Dead) {
        return Err(GroupError::CoordinatorNotAvailable);
    }
    if req.generation_id < 0 && req.member_id.is_empty() && group.is(GroupState::Empty) {
        return Ok(());
    }
    if group.is(GroupState::Empty) && req.generation_id < 0 {
        return Err(GroupError::UnknownMemberId);
    }
    validate_member(group, &req.member_id, req.group_instance_id.as_deref())?;
    if req.generation_id != group.generation {
        return Err(GroupError::IllegalGeneration);
    }
    if group.is(GroupState::CompletingRebalance) {
        return Err(GroupError::RebalanceInProgress);
    }
    Ok(())
}

fn expired_offsets(
    group: &Group,
    now_ms: i64,
    retention_ms: i64,
    topic_exists: &impl Fn(&str) -> bool,
) -> Vec<(String, i32)> {
    // A consumer group's offsets age from the moment it became empty; a standalone
    // group's (no protocol) from each commit; an explicit expire timestamp wins.
    let group_expired = group.protocol_type.is_some()
        && group.is(GroupState::Empty)
        && now_ms - group.state_timestamp_ms >= retention_ms;
    group
        .offsets
        .iter()
        .filter(|((topic, _), v)| {
            let by_commit = if v.expire_timestamp_ms >= 0 {
                v.expire_timestamp_ms <= now_ms
            } else {
                group.protocol_type.is_none() && now_ms - v.commit_timestamp_ms >= retention_ms
            };
            let idle = group.is(GroupState::Empty) && by_commit;
            group_expired || idle || !topic_exists(topic)
        })
        .map(|(k, _)| k.clone())
        .collect()
}

fn tombstones<'a>(
    group: &Group,
    keys: impl Iterator<Item = &'a (String, i32)>,
    with_group: bool,
) -> Vec<Record> {
    let mut out: Vec<Record> = keys
        .map(|(t, p)| Record::Offset {
            group: group.group_id.clone(),
            topic: t.clone(),
            partition: *p,
            value: None,
        })
        .collect();
    if with_group {
        out.push(Record::Group { group: group.group_id.clone(), value: None });
    }
    out
}
