//! The classic group protocol as a pure state machine: JoinGroup and SyncGroup here,
//! heartbeats, leaves and timers in [`super::membership`], offsets in [`super::offsets`].
//!
//! One `Coordinator` per shard holds the groups whose `__consumer_offsets` partition the
//! shard owns. No I/O and no clock: every call takes `now_ms` and returns [`Effects`]
//! (replies, records to persist, replies to send once they are durable); the driver in
//! `server::group` runs timers at [`Coordinator::next_deadline`] and does the I/O.

use std::collections::HashMap;

use uuid::Uuid;

use super::records::Record;
use super::state::{Group, InitialDelay, Member};
use super::types::{
    Effects, GroupError, GroupState, JoinRequest, JoinResponse, Reply, SyncRequest, SyncResponse,
    Token,
};
use super::GroupConfig;

pub struct Coordinator {
    pub config: GroupConfig,
    pub(super) groups: HashMap<String, Group>,
}

impl Coordinator {
    #[must_use]
    pub fn new(config: GroupConfig) -> Self {
        Self { config, groups: HashMap::new() }
    }

    #[must_use]
    pub fn group(&self, group_id: &str) -> Option<&Group> {
        self.groups.get(group_id)
    }

    pub fn group_ids(&self) -> impl Iterator<Item = &String> {
        self.groups.keys()
    }

    /// Drops every group `selected` picks (this broker no longer leads its
    /// `__consumer_offsets` partition): their state now lives with the new leader's
    /// coordinator. Returns the tokens of their parked joins and syncs, which the driver
    /// answers NOT_COORDINATOR so the members look for the new coordinator.
    pub fn unload(&mut self, mut selected: impl FnMut(&str) -> bool) -> Vec<Token> {
        let gone: Vec<String> = self.groups.keys().filter(|g| selected(g)).cloned().collect();
        let mut tokens = Vec::new();
        for group_id in gone {
            let Some(group) = self.groups.remove(&group_id) else { continue };
            for member in group.members.values() {
                tokens.extend(member.awaiting_join);
                tokens.extend(member.awaiting_sync);
            }
        }
        tokens
    }

    /// JoinGroup: the reply to `token` comes now (errors, MEMBER_ID_REQUIRED, a member
    /// rejoining a stable group) or when the join phase completes.
    pub fn join(&mut self, token: Token, req: JoinRequest, now_ms: i64) -> Effects {
        let fail = |e| Effects::reply(token, Reply::Join(JoinResponse::error(e, &req.member_id)));
        if let Err(e) = self.validate_join(&req) {
            return fail(e);
        }
        let exists = self.groups.contains_key(&req.group_id);
        if !exists && !req.member_id.is_empty() {
            return fail(GroupError::UnknownMemberId);
        }
        let delay_ms = self.config.initial_rebalance_delay_ms;
        let group = self
            .groups
            .entry(req.group_id.clone())
            .or_insert_with(|| Group::new(&req.group_id, now_ms, delay_ms));
        if !group.supports(&req.protocol_type, &req.protocols) {
            return fail(GroupError::InconsistentGroupProtocol);
        }
        let config = &self.config;
        if req.member_id.is_empty() {
            join_unknown(config, group, token, req, now_ms)
        } else {
            join_known(config, group, token, req, now_ms)
        }
    }

    fn validate_join(&self, req: &JoinRequest) -> Result<(), GroupError> {
        if req.group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let c = &self.config;
        if req.session_timeout_ms < c.min_session_timeout_ms
            || req.session_timeout_ms > c.max_session_timeout_ms
        {
            return Err(GroupError::InvalidSessionTimeout);
        }
        let metadata_bytes: usize =
            req.protocols.iter().map(|p| p.metadata.len() + p.name.len()).sum();
        if metadata_bytes > c.member_metadata_bytes_max {
            return Err(GroupError::MetadataTooLarge);
        }
        Ok(())
    }

    /// SyncGroup: the leader's assignment moves the group to Stable; every member parked
    /// in sync gets its assignment once the group record is durable.
    pub fn sync(&mut self, token: Token, req: SyncRequest, now_ms: i64) -> Effects {
        let fail = |e| Effects::reply(token, Reply::Sync(SyncResponse::error(e)));
        let Some(group) = self.groups.get_mut(&req.group_id) else {
            return fail(GroupError::UnknownMemberId);
        };
        if let Err(e) = validate_member(group, &req.member_id, req.group_instance_id.as_deref()) {
            return fail(e);
        }
        if req.generation_id != group.generation {
            return fail(GroupError::IllegalGeneration);
        }
        let type_ok =
            req.protocol_type.as_ref().is_none_or(|t| group.protocol_type.as_ref() == Some(t));
        let name_ok = req.protocol_name.as_ref().is_none_or(|n| group.protocol.as_ref() == Some(n));
        if !type_ok || !name_ok {
            return fail(GroupError::InconsistentGroupProtocol);
        }
        match group.state {
            GroupState::Empty | GroupState::Dead => fail(GroupError::UnknownMemberId),
            GroupState::PreparingRebalance => fail(GroupError::RebalanceInProgress),
            GroupState::Stable => {
                let member = &group.members[&req.member_id];
                Effects::reply(token, Reply::Sync(sync_ok(group, member.assignment.clone())))
            }
            GroupState::CompletingRebalance => {
                let limit = self.config.group_metadata_bytes_max;
                complete_sync(group, token, req, limit, now_ms)
            }
        }
    }
}

fn sync_ok(group: &Group, assignment: bytes::Bytes) -> SyncResponse {
    SyncResponse {
        error: None,
        protocol_type: group.protocol_type.clone(),
        protocol_name: group.protocol.clone(),
        assignment,
    }
}

fn complete_sync(
    group: &mut Group,
    token: Token,
    req: SyncRequest,
    limit: usize,
    now_ms: i64,
) -> Effects {
    group.pending_sync.remove(&req.member_id);
    if let Some(m) = group.members.get_mut(&req.member_id) {
        m.awaiting_sync = Some(token);
        m.heartbeat_deadline_ms = now_ms + i64::from(m.session_timeout_ms);
    }
    if group.leader.as_deref() != Some(req.member_id.as_str()) {
        return Effects::default();
    }
    let mut assignments: HashMap<String, bytes::Bytes> = req.assignments.into_iter().collect();
    for m in group.members.values_mut() {
        m.assignment = assignments.remove(&m.member_id).unwrap_or_default();
    }
    let value = group.to_value();
    let record = Record::Group { group: group.group_id.clone(), value: Some(value) };
    if record.encode().1.is_some_and(|v| v.len() > limit) {
        // Kafka fails the store with MESSAGE_TOO_LARGE and answers UNKNOWN_SERVER_ERROR,
        // then rebalances; here the parked syncs get the error and the group rebalances.
        let mut effects = Effects::default();
        for m in group.members.values_mut() {
            m.assignment = bytes::Bytes::new();
            if let Some(t) = m.awaiting_sync.take() {
                effects
                    .replies
                    .push((t, Reply::Sync(SyncResponse::error(GroupError::MetadataTooLarge))));
            }
        }
        super::membership::prepare_rebalance(group, now_ms, &mut effects);
        return effects;
    }
    group.transition(GroupState::Stable, now_ms);
    group.phase_deadline_ms = None;
    group.pending_sync.clear();
    let mut effects = Effects { records: vec![record], ..Effects::default() };
    let replies: Vec<(Token, Reply)> = group
        .members
        .values_mut()
        .filter_map(|m| m.awaiting_sync.take().map(|t| (t, m.assignment.clone())))
        .collect::<Vec<_>>()
        .into_iter()
        .map(|(t, a)| (t, Reply::Sync(sync_ok(group, a))))
        .collect();
    effects.after_persist = replies;
    effects
}

/// Checks a member id (and static instance id) against the group.
pub(super) fn validate_member(
    group: &Group,
    member_id: &str,
    instance: Option<&str>,
) -> Result<(), GroupError> {
    if group.is(GroupState::Dead) {
        return Err(GroupError::CoordinatorNotAvailable);
    }
    if let Some(instance) = instance {
        return match group.static_members.get(instance) {
            Some(current) if current == member_id => Ok(()),
            Some(_) => Err(GroupError::FencedInstanceId),
            None => Err(GroupError::UnknownMemberId),
        };
    }
    if group.members.contains_key(member_id) {
        Ok(())
    } else {
        Err(GroupError::UnknownMemberId)
    }
}

fn new_member_id(client_id: &str) -> String {
    format!("{client_id}-{}", Uuid::new_v4())
}

fn new_member(req: &JoinRequest, member_id: String, token: Token, now_ms: i64) -> Member {
    Member {
        member_id,
        group_instance_id: req.group_instance_id.clone(),
        client_id: req.client_id.clone(),
        client_host: req.client_host.clone(),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        protocol_type: req.protocol_type.clone(),
        protocols: req.protocols.clone(),
        assignment: bytes::Bytes::new(),
        awaiting_join: Some(token),
        awaiting_sync: None,
        heartbeat_deadline_ms: now_ms + i64::from(req.session_timeout_ms),
    }
}

fn join_unknown(
    config: &GroupConfig,
    group: &mut Group,
    token: Token,
    req: JoinRequest,
    now_ms: i64,
) -> Effects {
    if group.is(GroupState::Dead) {
        return Effects::reply(
            token,
            Reply::Join(JoinResponse::error(GroupError::CoordinatorNotAvailable, "")),
        );
    }
    if let Some(instance) = req.group_instance_id.clone() {
        if let Some(old_id) = group.static_members.get(&instance).cloned() {
            return rejoin_static(group, token, req, old_id, now_ms);
        }
    }
    if group.members.len() + group.pending_members.len() >= config.group_max_size {
        return Effects::reply(
            token,
            Reply::Join(JoinResponse::error(GroupError::GroupMaxSizeReached, "")),
        );
    }
    let member_id = new_member_id(&req.client_id);
    if req.group_instance_id.is_none() && req.require_known_member_id {
        group.pending_members.insert(member_id.clone(), now_ms + i64::from(req.session_timeout_ms));
        return Effects::reply(
            token,
            Reply::Join(JoinResponse::error(GroupError::MemberIdRequired, &member_id)),
        );
    }
    add_member_and_rebalance(group, token, &req, member_id, now_ms)
}

fn add_member_and_rebalance(
    group: &mut Group,
    token: Token,
    req: &JoinRequest,
    member_id: String,
    now_ms: i64,
) -> Effects {
    let member = new_member(req, member_id.clone(), token, now_ms);
    if let Some(instance) = &req.group_instance_id {
        group.static_members.insert(instance.clone(), member_id.clone());
    }
    if group.members.is_empty() {
        group.protocol_type = Some(req.protocol_type.clone());
    }
    group.members.insert(member_id, member);
    if let Some(delay) = group.initial_delay.as_mut() {
        delay.new_member_added = true;
    }
    let mut effects = Effects::default();
    maybe_prepare_rebalance(group, now_ms, &mut effects);
    super::membership::try_complete_join(group, now_ms, &mut effects);
    effects
}

fn maybe_prepare_rebalance(group: &mut Group, now_ms: i64, effects: &mut Effects) {
    if matches!(
        group.state,
        GroupState::Stable | GroupState::CompletingRebalance | GroupState::Empty
    ) {
        super::membership::prepare_rebalance(group, now_ms, effects);
    }
}

/// A static member (known instance id) rejoining with a new member id: the old id is
/// fenced, the member keeps its place and, if nothing changed, its assignment.
fn rejoin_static(
    group: &mut Group,
    token: Token,
    req: JoinRequest,
    old_id: String,
    now_ms: i64,
) -> Effects {
    let mut effects = Effects::default();
    let Some(mut member) = group.members.shift_remove(&old_id) else {
        group.static_members.remove(req.group_instance_id.as_deref().unwrap_or_default());
        return add_member_and_rebalance(group, token, &req, new_member_id(&req.client_id), now_ms);
    };
    if let Some(t) = member.awaiting_join.take() {
        effects
            .replies
            .push((t, Reply::Join(JoinResponse::error(GroupError::FencedInstanceId, &old_id))));
    }
    if let Some(t) = member.awaiting_sync.take() {
        effects.replies.push((t, Reply::Sync(SyncResponse::error(GroupError::FencedInstanceId))));
    }
    let new_id = new_member_id(&req.client_id);
    let was_leader = group.leader.as_deref() == Some(old_id.as_str());
    let unchanged = member.same_protocols(&req.protocols);
    member.member_id = new_id.clone();
    member.session_timeout_ms = req.session_timeout_ms;
    member.rebalance_timeout_ms = req.rebalance_timeout_ms;
    member.client_id = req.client_id.clone();
    member.client_host = req.client_host.clone();
    member.protocols = req.protocols.clone();
    member.heartbeat_deadline_ms = now_ms + i64::from(req.session_timeout_ms);
    if was_leader {
        group.leader = Some(new_id.clone());
    }
    if group.pending_sync.remove(&old_id) {
        group.pending_sync.insert(new_id.clone());
    }
    if let Some(instance) = &req.group_instance_id {
        group.static_members.insert(instance.clone(), new_id.clone());
    }
    if group.is(GroupState::Stable) && unchanged && !was_leader {
        group.members.insert(new_id.clone(), member);
        // Persist the new member id so a restart does not resurrect the fenced one.
        let value = group.to_value();
        effects.records.push(Record::Group { group: group.group_id.clone(), value: Some(value) });
        let response = join_response(group, &new_id, false);
        effects.after_persist.push((token, Reply::Join(response)));
        return effects;
    }
    member.awaiting_join = Some(token);
    group.members.insert(new_id, member);
    match group.state {
        GroupState::PreparingRebalance => {
            super::membership::try_complete_join(group, now_ms, &mut effects)
        }
        _ => {
            maybe_prepare_rebalance(group, now_ms, &mut effects);
            super::membership::try_complete_join(group, now_ms, &mut effects);
        }
    }
    effects
}

fn join_known(
    config: &GroupConfig,
    group: &mut Group,
    token: Token,
    req: JoinRequest,
    now_ms: i64,
) -> Effects {
    let fail = |e| Effects::reply(token, Reply::Join(JoinResponse::error(e, &req.member_id)));
    if group.is(GroupState::Dead) {
        return fail(GroupError::CoordinatorNotAvailable);
    }
    if group.pending_members.remove(&req.member_id).is_some() {
        if group.members.len() >= config.group_max_size {
            return fail(GroupError::GroupMaxSizeReached);
        }
        let member_id = req.member_id.clone();
        return add_member_and_rebalance(group, token, &req, member_id, now_ms);
    }
    if let Err(e) = validate_member(group, &req.member_id, req.group_instance_id.as_deref()) {
        return fail(e);
    }
    let mut effects = Effects::default();
    let is_leader = group.leader.as_deref() == Some(req.member_id.as_str());
    let state = group.state;
    let Some(member) = group.members.get_mut(&req.member_id) else {
        return fail(GroupError::UnknownMemberId);
    };
    let unchanged = member.same_protocols(&req.protocols);
    member.heartbeat_deadline_ms = now_ms + i64::from(req.session_timeout_ms);
    // A stable leader rejoining asks for a new assignment (e.g. metadata changed).
    let leader_wants_rebalance = is_leader && state == GroupState::Stable;
    match state {
        GroupState::PreparingRebalance => {
            update_member(member, &req, token, &mut effects);
            super::membership::try_complete_join(group, now_ms, &mut effects);
        }
        GroupState::CompletingRebalance | GroupState::Stable
            if unchanged && !leader_wants_rebalance =>
        {
            // A duplicate join (lost response): answer with the current generation.
            let response = join_response(group, &req.member_id, true);
            effects.replies.push((token, Reply::Join(response)));
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            update_member(member, &req, token, &mut effects);
            super::membership::prepare_rebalance(group, now_ms, &mut effects);
            super::membership::try_complete_join(group, now_ms, &mut effects);
        }
        GroupState::Empty | GroupState::Dead => return fail(GroupError::UnknownMemberId),
    }
    effects
}

fn update_member(member: &mut Member, req: &JoinRequest, token: Token, effects: &mut Effects) {
    if let Some(old) = member.awaiting_join.replace(token) {
        // Kafka answers the superseded join with the error of a stale request.
        effects.replies.push((
            old,
            Reply::Join(JoinResponse::error(GroupError::UnknownMemberId, &req.member_id)),
        ));
    }
    member.protocols = req.protocols.clone();
    member.session_timeout_ms = req.session_timeout_ms;
    member.rebalance_timeout_ms = req.rebalance_timeout_ms;
}

/// The join response of `member_id` for the current generation.
pub(super) fn join_response(
    group: &Group,
    member_id: &str,
    with_members_for_leader: bool,
) -> JoinResponse {
    let leader = group.leader.clone().unwrap_or_default();
    let members = if with_members_for_leader && leader == member_id {
        group.join_members()
    } else {
        Vec::new()
    };
    JoinResponse {
        error: None,
        generation_id: group.generation,
        protocol_type: group.protocol_type.clone(),
        protocol_name: group.protocol.clone(),
        leader,
        member_id: member_id.into(),
        members,
    }
}

pub(super) fn start_initial_delay(group: &mut Group, now_ms: i64) {
    let rebalance_ms = group.max_rebalance_timeout_ms();
    let delay = group.initial_rebalance_delay_ms.min(rebalance_ms);
    group.phase_deadline_ms = Some(now_ms + delay);
    group.initial_delay =
        Some(InitialDelay { remaining_ms: (rebalance_ms - delay).max(0), new_member_added: false });
}
