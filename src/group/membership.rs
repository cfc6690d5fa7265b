//! Rebalance mechanics of the classic protocol: entering PreparingRebalance, completing
//! the join phase (new generation, protocol vote, leader, join responses), heartbeats,
//! LeaveGroup, and the timers (join deadline with the initial delay, sync deadline,
//! session expiry, expiry of MEMBER_ID_REQUIRED ids).
//!
//! Pure functions over a [`Group`], on the group's coordinator shard.

use super::coordinator::{join_response, start_initial_delay, validate_member, Coordinator};
use super::records::Record;
use super::state::Group;
use super::types::{
    Effects, GroupError, GroupState, HeartbeatRequest, JoinResponse, LeavingMember, Reply,
    SyncResponse,
};

/// Moves a group to PreparingRebalance: parked syncs are told REBALANCE_IN_PROGRESS and
/// the join deadline is set (the initial delay when the group was empty).
pub(super) fn prepare_rebalance(group: &mut Group, now_ms: i64, effects: &mut Effects) {
    if group.is(GroupState::CompletingRebalance) {
        for m in group.members.values_mut() {
            m.assignment = bytes::Bytes::new();
            if let Some(t) = m.awaiting_sync.take() {
                effects
                    .replies
                    .push((t, Reply::Sync(SyncResponse::error(GroupError::RebalanceInProgress))));
            }
        }
    }
    group.pending_sync.clear();
    let was_empty = group.is(GroupState::Empty);
    group.transition(GroupState::PreparingRebalance, now_ms);
    if was_empty {
        start_initial_delay(group, now_ms);
    } else {
        group.initial_delay = None;
        group.phase_deadline_ms = Some(now_ms + group.max_rebalance_timeout_ms());
    }
}

/// Completes the join phase early once every member has rejoined (never during the
/// initial delay, which exists to let more members arrive).
pub(super) fn try_complete_join(group: &mut Group, now_ms: i64, effects: &mut Effects) {
    if group.is(GroupState::PreparingRebalance)
        && group.initial_delay.is_none()
        && group.all_joined()
    {
        complete_join(group, now_ms, effects);
    }
}

/// Ends the join phase: members that did not rejoin (dynamic ones) are dropped, the
/// generation advances and every parked join is answered; the leader gets the members.
fn complete_join(group: &mut Group, now_ms: i64, effects: &mut Effects) {
    let gone: Vec<String> = group
        .members
        .values()
        .filter(|m| m.awaiting_join.is_none() && m.group_instance_id.is_none())
        .map(|m| m.member_id.clone())
        .collect();
    for id in gone {
        group.members.shift_remove(&id);
    }
    group.pending_members.clear();
    group.initial_delay = None;
    group.generation += 1;
    if group.members.is_empty() {
        group.protocol = None;
        group.leader = None;
        group.transition(GroupState::Empty, now_ms);
        group.phase_deadline_ms = None;
        let value = group.to_value();
        effects.records.push(Record::Group { group: group.group_id.clone(), value: Some(value) });
        return;
    }
    group.protocol = group.select_protocol();
    if group.leader.as_ref().is_none_or(|l| !group.members.contains_key(l)) {
        let first_joined = group.members.values().find(|m| m.awaiting_join.is_some());
        group.leader =
            first_joined.or_else(|| group.members.values().next()).map(|m| m.member_id.clone());
    }
    group.transition(GroupState::CompletingRebalance, now_ms);
    group.phase_deadline_ms = Some(now_ms + group.max_rebalance_timeout_ms());
    let ids: Vec<String> = group.members.keys().cloned().collect();
    for id in ids {
        let response = join_response(group, &id, true);
        let m = group.members.get_mut(&id).expect("listed member");
        m.heartbeat_deadline_ms = now_ms + i64::from(m.session_timeout_ms);
        if let Some(t) = m.awaiting_join.take() {
            effects.replies.push((t, Reply::Join(response)));
            group.pending_sync.insert(id);
        }
    }
}

/// Removes a member (leave, expiry, sync timeout) and moves the group on.
pub(super) fn remove_member(
    group: &mut Group,
    member_id: &str,
    now_ms: i64,
    effects: &mut Effects,
) {
    let Some(mut m) = group.members.shift_remove(member_id) else { return };
    if let Some(t) = m.awaiting_join.take() {
        effects
            .replies
            .push((t, Reply::Join(JoinResponse::error(GroupError::UnknownMemberId, member_id))));
    }
    if let Some(t) = m.awaiting_sync.take() {
        effects.replies.push((t, Reply::Sync(SyncResponse::error(GroupError::UnknownMemberId))));
    }
    if let Some(instance) = &m.group_instance_id {
        if group.static_members.get(instance).map(String::as_str) == Some(member_id) {
            group.static_members.remove(instance);
        }
    }
    group.pending_sync.remove(member_id);
    if group.leader.as_deref() == Some(member_id) {
        group.leader = None;
    }
    match group.state {
        GroupState::Stable | GroupState::CompletingRebalance => {
            prepare_rebalance(group, now_ms, effects);
            try_complete_join(group, now_ms, effects);
        }
        GroupState::PreparingRebalance => try_complete_join(group, now_ms, effects),
        GroupState::Empty | GroupState::Dead => {}
    }
}

impl Coordinator {
    /// Heartbeat: keeps a member alive and tells it when to rejoin.
    pub fn heartbeat(&mut self, req: &HeartbeatRequest, now_ms: i64) -> Result<(), GroupError> {
        let group = self.groups.get_mut(&req.group_id).ok_or(GroupError::UnknownMemberId)?;
        validate_member(group, &req.member_id, req.group_instance_id.as_deref())?;
        if group.is(GroupState::Empty) {
            return Err(GroupError::UnknownMemberId);
        }
        if req.generation_id != group.generation {
            return Err(GroupError::IllegalGeneration);
        }
        if let Some(m) = group.members.get_mut(&req.member_id) {
            m.heartbeat_deadline_ms = now_ms + i64::from(m.session_timeout_ms);
        }
        if group.is(GroupState::PreparingRebalance) {
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    /// LeaveGroup (batched): per-member results, or a group-level error.
    pub fn leave(
        &mut self,
        group_id: &str,
        leaving: &[LeavingMember],
        now_ms: i64,
    ) -> (Result<Vec<Option<GroupError>>, GroupError>, Effects) {
        let mut effects = Effects::default();
        let Some(group) = self.groups.get_mut(group_id) else {
            let all = leaving.iter().map(|_| Some(GroupError::UnknownMemberId)).collect();
            return (Ok(all), effects);
        };
        if group.is(GroupState::Dead) {
            return (Err(GroupError::CoordinatorNotAvailable), effects);
        }
        let mut results = Vec::with_capacity(leaving.len());
        for l in leaving {
            results.push(leave_one(group, l, now_ms, &mut effects).err());
        }
        (Ok(results), effects)
    }

    /// Runs every timer due at `now_ms`.
    pub fn tick(&mut self, now_ms: i64) -> Effects {
        let mut effects = Effects::default();
        for group in self.groups.values_mut() {
            tick_group(group, now_ms, &mut effects);
        }
        effects
    }

    /// The earliest time a timer is due, if any.
    #[must_use]
    pub fn next_deadline(&self) -> Option<i64> {
        self.groups.values().filter_map(group_deadline).min()
    }
}

fn leave_one(
    group: &mut Group,
    l: &LeavingMember,
    now_ms: i64,
    effects: &mut Effects,
) -> Result<(), GroupError> {
    let member_id = match &l.group_instance_id {
        Some(instance) => {
            let current = group.static_members.get(instance).ok_or(GroupError::UnknownMemberId)?;
            if !l.member_id.is_empty() && *current != l.member_id {
                return Err(GroupError::FencedInstanceId);
            }
            current.clone()
        }
        None => l.member_id.clone(),
    };
    if group.pending_members.remove(&member_id).is_some() {
        try_complete_join(group, now_ms, effects);
        return Ok(());
    }
    if !group.members.contains_key(&member_id) {
        return Err(GroupError::UnknownMemberId);
    }
    remove_member(group, &member_id, now_ms, effects);
    Ok(())
}

fn group_deadline(group: &Group) -> Option<i64> {
    let members = group
        .members
        .values()
        .filter(|m| m.awaiting_join.is_none() && m.awaiting_sync.is_none())
        .map(|m| m.heartbeat_deadline_ms);
    let pending = group.pending_members.values().copied();
    members.chain(pending).chain(group.phase_deadline_ms).min()
}

fn tick_group(group: &mut Group, now_ms: i64, effects: &mut Effects) {
    group.pending_members.retain(|_, deadline| *deadline > now_ms);
    if group.phase_deadline_ms.is_some_and(|d| d <= now_ms) {
        on_phase_deadline(group, now_ms, effects);
    }
    let expired: Vec<String> = group
        .members
        .values()
        .filter(|m| {
            m.awaiting_join.is_none()
                && m.awaiting_sync.is_none()
                && m.heartbeat_deadline_ms <= now_ms
        })
        .map(|m| m.member_id.clone())
        .collect();
    for id in expired {
        tracing::debug!(group = %group.group_id, member = %id, "session expired");
        remove_member(group, &id, now_ms, effects);
    }
    // A pending member that expired may have been the last one awaited.
    try_complete_join(group, now_ms, effects);
}

fn on_phase_deadline(group: &mut Group, now_ms: i64, effects: &mut Effects) {
    match group.state {
        GroupState::PreparingRebalance => {
            if let Some(delay) = group.initial_delay {
                if delay.new_member_added && delay.remaining_ms > 0 {
                    let step = group.initial_rebalance_delay_ms.min(delay.remaining_ms);
                    group.phase_deadline_ms = Some(now_ms + step);
                    group.initial_delay = Some(super::state::InitialDelay {
                        remaining_ms: delay.remaining_ms - step,
                        new_member_added: false,
                    });
                    return;
                }
            }
            complete_join(group, now_ms, effects);
        }
        GroupState::CompletingRebalance => {
            // Members that never synced within the rebalance timeout are dropped.
            let laggards: Vec<String> = group.pending_sync.iter().cloned().collect();
            group.phase_deadline_ms = None;
            for id in laggards {
                remove_member(group, &id, now_ms, effects);
            }
        }
        _ => group.phase_deadline_ms = None,
    }
}
