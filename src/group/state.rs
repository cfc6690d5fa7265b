//! One classic group's in-memory state: members, generation, the chosen protocol, static
//! instance ids, pending (MEMBER_ID_REQUIRED) members, rebalance deadlines and the
//! committed offsets.
//!
//! Pure data plus small queries; mutated only by the coordinator on the group's
//! coordinator shard. Invariants: every static member's instance id maps to its current
//! member id in `static_members`; `leader`, when set, names a member.

use std::collections::{BTreeMap, HashMap, HashSet};

use bytes::Bytes;
use indexmap::IndexMap;

use super::records::{GroupValue, OffsetValue, StoredMember};
use super::types::{GroupState, JoinMember, MemberSummary, Protocol, Token};

#[derive(Debug, Clone)]
pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<Protocol>,
    pub assignment: Bytes,
    pub awaiting_join: Option<Token>,
    pub awaiting_sync: Option<Token>,
    /// The member is removed when this passes without a heartbeat (unless it is parked
    /// in a join or sync, which keeps it alive).
    pub heartbeat_deadline_ms: i64,
}

impl Member {
    #[must_use]
    pub fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|p| p.name == protocol)
            .map(|p| p.metadata.clone())
            .unwrap_or_default()
    }

    #[must_use]
    pub fn same_protocols(&self, protocols: &[Protocol]) -> bool {
        self.protocols == protocols
    }
}

/// The initial-rebalance delay of a group that was empty (`group.initial.rebalance.delay.ms`).
#[derive(Debug, Clone, Copy)]
pub struct InitialDelay {
    pub remaining_ms: i64,
    pub new_member_added: bool,
}

#[derive(Debug, Clone)]
pub struct Group {
    pub group_id: String,
    pub state: GroupState,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: IndexMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, with their expiry.
    pub pending_members: HashMap<String, i64>,
    /// group.instance.id → member id.
    pub static_members: HashMap<String, String>,
    /// Members that got a join response but have not synced yet (removed at the deadline).
    pub pending_sync: HashSet<String>,
    /// PreparingRebalance: when the join phase ends; CompletingRebalance: sync deadline.
    pub phase_deadline_ms: Option<i64>,
    pub initial_delay: Option<InitialDelay>,
    pub state_timestamp_ms: i64,
    pub offsets: BTreeMap<(String, i32), OffsetValue>,
    /// `group.initial.rebalance.delay.ms` for this group's first rebalance out of Empty.
    pub initial_rebalance_delay_ms: i64,
}

impl Group {
    #[must_use]
    pub fn new(group_id: &str, now_ms: i64, initial_rebalance_delay_ms: i64) -> Self {
        Self {
            group_id: group_id.into(),
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: IndexMap::new(),
            pending_members: HashMap::new(),
            static_members: HashMap::new(),
            pending_sync: HashSet::new(),
            phase_deadline_ms: None,
            initial_delay: None,
            state_timestamp_ms: now_ms,
            offsets: BTreeMap::new(),
            initial_rebalance_delay_ms,
        }
    }

    pub fn transition(&mut self, state: GroupState, now_ms: i64) {
        self.state = state;
        self.state_timestamp_ms = now_ms;
    }

    #[must_use]
    pub fn is(&self, state: GroupState) -> bool {
        self.state == state
    }

    /// Whether a member with this type and protocols may join (Kafka's supportsProtocols):
    /// an empty group takes any non-empty set; otherwise the type must match and at least
    /// one protocol must be supported by every current member.
    #[must_use]
    pub fn supports(&self, protocol_type: &str, protocols: &[Protocol]) -> bool {
        if protocol_type.is_empty() || protocols.is_empty() {
            return false;
        }
        if self.members.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        protocols
            .iter()
            .any(|p| self.members.values().all(|m| m.protocols.iter().any(|q| q.name == p.name)))
    }

    /// Protocol voted by the members among those all of them support.
    #[must_use]
    pub fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let candidates: Vec<&str> = first
            .protocols
            .iter()
            .map(|p| p.name.as_str())
            .filter(|name| {
                self.members.values().all(|m| m.protocols.iter().any(|q| q.name == *name))
            })
            .collect();
        let mut votes: Vec<(&str, usize)> = candidates.iter().map(|c| (*c, 0)).collect();
        for m in self.members.values() {
            let choice = m.protocols.iter().find(|p| candidates.contains(&p.name.as_str()));
            if let Some(choice) = choice {
                if let Some(v) = votes.iter_mut().find(|(c, _)| *c == choice.name) {
                    v.1 += 1;
                }
            }
        }
        // Ties go to the first member's preference (max_by_key keeps the last max).
        votes.iter().rev().max_by_key(|(_, n)| *n).map(|(c, _)| (*c).to_string())
    }

    #[must_use]
    pub fn all_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some())
    }

    #[must_use]
    pub fn max_rebalance_timeout_ms(&self) -> i64 {
        self.members.values().map(|m| i64::from(m.rebalance_timeout_ms)).max().unwrap_or(0)
    }

    /// The member list a leader receives, with each member's metadata for the protocol.
    #[must_use]
    pub fn join_members(&self) -> Vec<JoinMember> {
        let protocol = self.protocol.clone().unwrap_or_default();
        self.members
            .values()
            .map(|m| JoinMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata_for(&protocol),
            })
            .collect()
    }

    #[must_use]
    pub fn member_summaries(&self, with_data: bool) -> Vec<MemberSummary> {
        let protocol = self.protocol.clone().unwrap_or_default();
        self.members
            .values()
            .map(|m| MemberSummary {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: if with_data { m.metadata_for(&protocol) } else { Bytes::new() },
                assignment: if with_data { m.assignment.clone() } else { Bytes::new() },
            })
            .collect()
    }

    /// The GroupMetadataValue to persist for the current generation.
    #[must_use]
    pub fn to_value(&self) -> GroupValue {
        let protocol = self.protocol.clone().unwrap_or_default();
        GroupValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            current_state_timestamp_ms: self.state_timestamp_ms,
            members: self
                .members
                .values()
                .map(|m| StoredMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata_for(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// Restores membership from a replayed GroupMetadataValue: members come back as a
    /// Stable group and must heartbeat within their session timeout, as in Kafka.
    pub fn load(&mut self, value: GroupValue, now_ms: i64) {
        self.generation = value.generation;
        self.protocol_type = (!value.protocol_type.is_empty()).then_some(value.protocol_type);
        self.protocol = value.protocol;
        self.leader = value.leader;
        self.members.clear();
        self.static_members.clear();
        let protocol = self.protocol.clone().unwrap_or_default();
        for m in value.members {
            if let Some(instance) = &m.group_instance_id {
                self.static_members.insert(instance.clone(), m.member_id.clone());
            }
            let member = Member {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                protocol_type: self.protocol_type.clone().unwrap_or_default(),
                protocols: vec![Protocol { name: protocol.clone(), metadata: m.subscription }],
                assignment: m.assignment,
                awaiting_join: None,
                awaiting_sync: None,
                heartbeat_deadline_ms: now_ms + i64::from(m.session_timeout_ms),
            };
            self.members.insert(m.member_id, member);
        }
        let state = if self.members.is_empty() { GroupState::Empty } else { GroupState::Stable };
        self.state = state;
        self.state_timestamp_ms = if value.current_state_timestamp_ms > 0 {
            value.current_state_timestamp_ms
        } else {
            now_ms
        };
    }
}
