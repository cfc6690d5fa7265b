//! Metadata-log records and their binary encoding (format in `docs/metadata.md`).
//!
//! Pure encode/decode, used on the controller shard. Every record carries a type byte and a
//! version byte so later versions (multi-broker replication) can add fields; a reader refuses
//! versions it does not know rather than guessing. All integers are big-endian.

use uuid::Uuid;

pub use crate::metadata::BrokerEndpoint;
use crate::types::{Epoch, NodeId, ShardId};

/// One part of a quota entity: Kafka's entity type (`client-id`, later `user`) and name
/// (`None`: the `<default>` entity of that type).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntityPart {
    pub kind: String,
    pub name: Option<String>,
}

/// A client quota value set (`value: Some`) or removed (`None`) for an entity (one part for
/// client-id quotas; user + client-id entities have two). Kafka's `ClientQuotaRecord`.
/// Layout: `[parts u32]([kind str][present u8][name str])*[key str][present u8][value f64]`.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientQuotaRecord {
    pub entity: Vec<EntityPart>,
    pub key: String,
    pub value: Option<f64>,
}

// Values are whole positive numbers (validated), so equality is exact.
impl Eq for ClientQuotaRecord {}

/// One change to cluster metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetadataRecord {
    Topic(TopicRecord),
    Partition(PartitionRecord),
    Config(ConfigRecord),
    RemoveTopic {
        topic_id: Uuid,
    },
    /// Producer ids below `block_end` (exclusive) are handed out or reserved.
    ProducerIdsBlock {
        block_end: i64,
    },
    BrokerConfig(BrokerConfigRecord),
    ClientQuota(ClientQuotaRecord),
    /// A broker registered (Kafka's `RegisterBrokerRecord`); also a snapshot's broker entry.
    RegisterBroker(RegisterBrokerRecord),
    /// The broker with this epoch is fenced: no new leadership (`FenceBrokerRecord`).
    FenceBroker(BrokerEpochRecord),
    /// The broker with this epoch caught up and may lead (`UnfenceBrokerRecord`).
    UnfenceBroker(BrokerEpochRecord),
    /// The broker with this epoch left the cluster (`UnregisterBrokerRecord`).
    UnregisterBroker(BrokerEpochRecord),
    /// A partition's ongoing reassignment (Kafka's `addingReplicas`/`removingReplicas` of
    /// `PartitionRecord`/`PartitionChangeRecord`); both lists empty: none. Always follows the
    /// partition's `Partition` record in the same frame.
    PartitionReassignment(PartitionReassignmentRecord),
    /// A user's SCRAM credential for one mechanism, set or removed (Kafka's
    /// `UserScramCredentialRecord` / `RemoveUserScramCredentialRecord`).
    ScramCredential(ScramCredentialRecord),
    /// An ACL created under an id (Kafka's `AccessControlEntryRecord`, type 23 there too).
    Acl(AclRecord),
    /// The ACL with this id removed (Kafka's `RemoveAccessControlEntryRecord`, type 24).
    RemoveAcl {
        id: Uuid,
    },
}

/// An ACL and its id. Layout: `[id uuid][resource type i8][resource name str]
/// [pattern type i8][principal str][host str][operation i8][permission i8]`, codes as
/// Kafka's (`crate::authz::model`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclRecord {
    pub id: Uuid,
    pub acl: crate::authz::Acl,
}

/// A SCRAM credential set (`credential: Some`) or removed (`None`).
/// Layout: `[user str][mechanism i8][present u8]([salt bytes][stored_key bytes]
/// [server_key bytes][iterations i32])?`, each `bytes` a u32 length then the bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScramCredentialRecord {
    pub user: String,
    pub mechanism: super::scram::ScramMechanism,
    pub credential: Option<super::scram::ScramCredential>,
}

/// The adding and removing replicas of one partition. Kept as its own record type (rather
/// than a new `PartitionRecord` version) so older readers of partition records stay valid.
/// Layout: `[topic uuid][partition i32][adding nodes][removing nodes]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionReassignmentRecord {
    pub topic_id: Uuid,
    pub partition: i32,
    pub adding: Vec<NodeId>,
    pub removing: Vec<NodeId>,
}

/// A broker registration. Layout: `[node i32][broker_epoch i64][incarnation uuid]
/// [endpoints u32]([listener str][host str][port u16][protocol i16])*[rack opt str][fenced u8]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisterBrokerRecord {
    pub node: NodeId,
    pub broker_epoch: i64,
    pub incarnation_id: Uuid,
    pub endpoints: Vec<BrokerEndpoint>,
    pub rack: Option<String>,
    pub fenced: bool,
}

/// The broker and epoch a fence, unfence or unregister applies to: `[node i32][epoch i64]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BrokerEpochRecord {
    pub node: NodeId,
    pub broker_epoch: i64,
}

/// A topic came into existence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicRecord {
    pub name: String,
    pub topic_id: Uuid,
    pub internal: bool,
}

/// A partition's full state: a new partition (creation or CreatePartitions), or a change of
/// leader, epoch or replica set of an existing one (last record wins). Version 1 (written
/// now) has no owner shard: which shard hosts a replica is each broker's own decision
/// ([`super::ShardAssignment`]). Version 0 (single-node logs) carried one; it is read as
/// `owner_shard_hint`, used only when importing such a log. Version 2 adds KIP-966's
/// eligible leader replicas and last known ELR (two node lists after the ISR); it is
/// written only when either is non-empty, so a partition without ELR keeps the version-1
/// bytes older readers know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionRecord {
    pub topic_id: Uuid,
    pub partition: i32,
    /// The owner shard of a version-0 record (never written any more).
    pub owner_shard_hint: Option<ShardId>,
    pub leader: NodeId,
    pub leader_epoch: Epoch,
    pub replicas: Vec<NodeId>,
    pub isr: Vec<NodeId>,
    /// KIP-966 eligible leader replicas (Kafka's `EligibleLeaderReplicas`).
    pub elr: Vec<NodeId>,
    /// KIP-966 `LastKnownElr`.
    pub last_known_elr: Vec<NodeId>,
}

/// A topic config set (`value: Some`) or removed (`None`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigRecord {
    pub topic_id: Uuid,
    pub name: String,
    pub value: Option<String>,
}

/// A dynamic broker config set (`value: Some`) or removed (`None`): for one broker
/// (`node: Some(id)`, Kafka's DYNAMIC_BROKER_CONFIG) or for every broker (`node: None`, the
/// cluster default, DYNAMIC_DEFAULT_BROKER_CONFIG). Encoded with node -1 for the default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerConfigRecord {
    pub node: Option<NodeId>,
    pub name: String,
    pub value: Option<String>,
}

const TYPE_TOPIC: u8 = 1;
const TYPE_PARTITION: u8 = 2;
const TYPE_CONFIG: u8 = 3;
const TYPE_REMOVE_TOPIC: u8 = 4;
const TYPE_PRODUCER_IDS: u8 = 5;
const TYPE_BROKER_CONFIG: u8 = 6;
const TYPE_CLIENT_QUOTA: u8 = 7;
const TYPE_REGISTER_BROKER: u8 = 8;
const TYPE_FENCE_BROKER: u8 = 9;
const TYPE_UNFENCE_BROKER: u8 = 10;
const TYPE_UNREGISTER_BROKER: u8 = 11;
/// Numbered apart from the others so concurrent additions of record types do not collide.
const TYPE_PARTITION_REASSIGNMENT: u8 = 20;
const TYPE_SCRAM_CREDENTIAL: u8 = 21;
/// Kafka's own numbers for `AccessControlEntryRecord` and `RemoveAccessControlEntryRecord`.
const TYPE_ACL: u8 = 23;
const TYPE_REMOVE_ACL: u8 = 24;
/// The `node` field of a cluster-default broker config (Kafka's empty resource name).
const NODE_CLUSTER_DEFAULT: i32 = -1;
const VERSION_0: u8 = 0;
/// PartitionRecord without the owner shard.
const PARTITION_VERSION_1: u8 = 1;
/// PartitionRecord with ELR and last known ELR.
const PARTITION_VERSION_2: u8 = 2;

/// Why a record could not be decoded.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("record truncated")]
    Truncated,
    #[error("unknown record type {0}")]
    UnknownType(u8),
    #[error("record type {kind} has unknown version {version}")]
    UnknownVersion { kind: u8, version: u8 },
    #[error("invalid UTF-8 in a string field")]
    BadString,
    #[error("{0} trailing bytes after the record")]
    Trailing(usize),
    #[error("unknown SCRAM mechanism {0}")]
    UnknownMechanism(i8),
}

impl MetadataRecord {
    /// Appends `[type u8][version u8][payload length u32][payload]` to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut p = Vec::new();
        let kind = match self {
            MetadataRecord::Topic(t) => {
                put_str(&mut p, &t.name);
                p.extend_from_slice(t.topic_id.as_bytes());
                p.push(u8::from(t.internal));
                TYPE_TOPIC
            }
            MetadataRecord::Partition(r) => {
                p.extend_from_slice(r.topic_id.as_bytes());
                p.extend_from_slice(&r.partition.to_be_bytes());
                p.extend_from_slice(&r.leader.0.to_be_bytes());
                p.extend_from_slice(&r.leader_epoch.0.to_be_bytes());
                put_nodes(&mut p, &r.replicas);
                put_nodes(&mut p, &r.isr);
                if r.has_elr() {
                    put_nodes(&mut p, &r.elr);
                    put_nodes(&mut p, &r.last_known_elr);
                }
                TYPE_PARTITION
            }
            MetadataRecord::Config(c) => {
                p.extend_from_slice(c.topic_id.as_bytes());
                put_str(&mut p, &c.name);
                put_opt_str(&mut p, c.value.as_deref());
                TYPE_CONFIG
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                p.extend_from_slice(topic_id.as_bytes());
                TYPE_REMOVE_TOPIC
            }
            MetadataRecord::ProducerIdsBlock { block_end } => {
                p.extend_from_slice(&block_end.to_be_bytes());
                TYPE_PRODUCER_IDS
            }
            MetadataRecord::BrokerConfig(c) => {
                let node = c.node.map_or(NODE_CLUSTER_DEFAULT, |n| n.0);
                p.extend_from_slice(&node.to_be_bytes());
                put_str(&mut p, &c.name);
                put_opt_str(&mut p, c.value.as_deref());
                TYPE_BROKER_CONFIG
            }
            MetadataRecord::ClientQuota(q) => {
                let parts = u32::try_from(q.entity.len()).unwrap_or(u32::MAX);
                p.extend_from_slice(&parts.to_be_bytes());
                for part in &q.entity {
                    put_str(&mut p, &part.kind);
                    put_opt_str(&mut p, part.name.as_deref());
                }
                put_str(&mut p, &q.key);
                match q.value {
                    Some(v) => {
                        p.push(1);
                        p.extend_from_slice(&v.to_bits().to_be_bytes());
                    }
                    None => p.push(0),
                }
                TYPE_CLIENT_QUOTA
            }
            MetadataRecord::RegisterBroker(b) => {
                p.extend_from_slice(&b.node.0.to_be_bytes());
                p.extend_from_slice(&b.broker_epoch.to_be_bytes());
                p.extend_from_slice(b.incarnation_id.as_bytes());
                let count = u32::try_from(b.endpoints.len()).unwrap_or(u32::MAX);
                p.extend_from_slice(&count.to_be_bytes());
                for e in &b.endpoints {
                    put_str(&mut p, &e.listener);
                    put_str(&mut p, &e.host);
                    p.extend_from_slice(&e.port.to_be_bytes());
                    p.extend_from_slice(&e.security_protocol.to_be_bytes());
                }
                put_opt_str(&mut p, b.rack.as_deref());
                p.push(u8::from(b.fenced));
                TYPE_REGISTER_BROKER
            }
            MetadataRecord::FenceBroker(b) => put_broker_epoch(&mut p, b, TYPE_FENCE_BROKER),
            MetadataRecord::UnfenceBroker(b) => put_broker_epoch(&mut p, b, TYPE_UNFENCE_BROKER),
            MetadataRecord::UnregisterBroker(b) => {
                put_broker_epoch(&mut p, b, TYPE_UNREGISTER_BROKER)
            }
            MetadataRecord::PartitionReassignment(r) => {
                p.extend_from_slice(r.topic_id.as_bytes());
                p.extend_from_slice(&r.partition.to_be_bytes());
                put_nodes(&mut p, &r.adding);
                put_nodes(&mut p, &r.removing);
                TYPE_PARTITION_REASSIGNMENT
            }
            MetadataRecord::ScramCredential(r) => {
                put_str(&mut p, &r.user);
                p.push(r.mechanism.code().to_be_bytes()[0]);
                match &r.credential {
                    Some(c) => {
                        p.push(1);
                        put_bytes(&mut p, &c.salt);
                        put_bytes(&mut p, &c.stored_key);
                        put_bytes(&mut p, &c.server_key);
                        p.extend_from_slice(&c.iterations.to_be_bytes());
                    }
                    None => p.push(0),
                }
                TYPE_SCRAM_CREDENTIAL
            }
            MetadataRecord::Acl(r) => {
                let a = &r.acl;
                p.extend_from_slice(r.id.as_bytes());
                p.push(a.resource_type.code().to_be_bytes()[0]);
                put_str(&mut p, &a.resource_name);
                p.push(a.pattern.code().to_be_bytes()[0]);
                put_str(&mut p, &a.principal);
                put_str(&mut p, &a.host);
                p.push(a.operation.code().to_be_bytes()[0]);
                p.push(a.permission.code().to_be_bytes()[0]);
                TYPE_ACL
            }
            MetadataRecord::RemoveAcl { id } => {
                p.extend_from_slice(id.as_bytes());
                TYPE_REMOVE_ACL
            }
        };
        out.push(kind);
        out.push(match self {
            MetadataRecord::Partition(r) if r.has_elr() => PARTITION_VERSION_2,
            MetadataRecord::Partition(_) => PARTITION_VERSION_1,
            _ => VERSION_0,
        });
        // Payloads are bounded by topic-name and config-value sizes, far below 4 GiB.
        out.extend_from_slice(&u32::try_from(p.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(&p);
    }

    /// Decodes one record from the front of `buf`; returns it and the bytes consumed.
    pub fn decode(buf: &[u8]) -> Result<(MetadataRecord, usize), DecodeError> {
        let mut r = Reader { buf, pos: 0 };
        let kind = r.u8()?;
        let version = r.u8()?;
        let len = r.u32()? as usize;
        let payload = r.take(len)?;
        let known = match kind {
            TYPE_PARTITION => version <= PARTITION_VERSION_2,
            _ => version == VERSION_0,
        };
        if !known {
            return Err(DecodeError::UnknownVersion { kind, version });
        }
        let mut p = Reader { buf: payload, pos: 0 };
        let record = match kind {
            TYPE_TOPIC => MetadataRecord::Topic(TopicRecord {
                name: p.string()?,
                topic_id: p.uuid()?,
                internal: p.u8()? != 0,
            }),
            TYPE_PARTITION => MetadataRecord::Partition(PartitionRecord {
                topic_id: p.uuid()?,
                partition: p.i32()?,
                owner_shard_hint: if version == VERSION_0 { Some(ShardId(p.u32()?)) } else { None },
                leader: NodeId(p.i32()?),
                leader_epoch: Epoch(p.i32()?),
                replicas: p.nodes()?,
                isr: p.nodes()?,
                elr: if version >= PARTITION_VERSION_2 { p.nodes()? } else { Vec::new() },
                last_known_elr: if version >= PARTITION_VERSION_2 {
                    p.nodes()?
                } else {
                    Vec::new()
                },
            }),
            TYPE_CONFIG => {
                let topic_id = p.uuid()?;
                let name = p.string()?;
                let value = if p.u8()? == 0 { None } else { Some(p.string()?) };
                MetadataRecord::Config(ConfigRecord { topic_id, name, value })
            }
            TYPE_REMOVE_TOPIC => MetadataRecord::RemoveTopic { topic_id: p.uuid()? },
            TYPE_PRODUCER_IDS => MetadataRecord::ProducerIdsBlock { block_end: p.i64()? },
            TYPE_BROKER_CONFIG => {
                let node = p.i32()?;
                let name = p.string()?;
                let value = if p.u8()? == 0 { None } else { Some(p.string()?) };
                let node = (node != NODE_CLUSTER_DEFAULT).then_some(NodeId(node));
                MetadataRecord::BrokerConfig(BrokerConfigRecord { node, name, value })
            }
            TYPE_CLIENT_QUOTA => MetadataRecord::ClientQuota(decode_client_quota(&mut p)?),
            TYPE_REGISTER_BROKER => MetadataRecord::RegisterBroker(decode_register(&mut p)?),
            TYPE_FENCE_BROKER => MetadataRecord::FenceBroker(p.broker_epoch()?),
            TYPE_UNFENCE_BROKER => MetadataRecord::UnfenceBroker(p.broker_epoch()?),
            TYPE_UNREGISTER_BROKER => MetadataRecord::UnregisterBroker(p.broker_epoch()?),
            TYPE_PARTITION_REASSIGNMENT => {
                MetadataRecord::PartitionReassignment(PartitionReassignmentRecord {
                    topic_id: p.uuid()?,
                    partition: p.i32()?,
                    adding: p.nodes()?,
                    removing: p.nodes()?,
                })
            }
            TYPE_SCRAM_CREDENTIAL => MetadataRecord::ScramCredential(decode_scram(&mut p)?),
            TYPE_ACL => MetadataRecord::Acl(decode_acl(&mut p)?),
            TYPE_REMOVE_ACL => MetadataRecord::RemoveAcl { id: p.uuid()? },
            other => return Err(DecodeError::UnknownType(other)),
        };
        if p.pos != payload.len() {
            return Err(DecodeError::Trailing(payload.len() - p.pos));
        }
        Ok((record, r.pos))
    }
}

impl PartitionRecord {
    /// Whether the record needs version 2 (either ELR list non-empty).
    #[must_use]
    pub fn has_elr(&self) -> bool {
        !self.elr.is_empty() || !self.last_known_elr.is_empty()
    }
}

fn decode_client_quota(p: &mut Reader<'_>) -> Result<ClientQuotaRecord, DecodeError> {
    let parts = p.u32()? as usize;
    // Each part takes at least 9 bytes: a count beyond the payload is corruption.
    if parts > p.buf.len().saturating_sub(p.pos) / 9 {
        return Err(DecodeError::Truncated);
    }
    let mut entity = Vec::with_capacity(parts);
    for _ in 0..parts {
        let kind = p.string()?;
        let name = if p.u8()? == 0 { None } else { Some(p.string()?) };
        entity.push(EntityPart { kind, name });
    }
    let key = p.string()?;
    let value = if p.u8()? == 0 { None } else { Some(f64::from_bits(p.u64()?)) };
    Ok(ClientQuotaRecord { entity, key, value })
}

fn decode_scram(p: &mut Reader<'_>) -> Result<ScramCredentialRecord, DecodeError> {
    use super::scram::{ScramCredential, ScramMechanism};
    let user = p.string()?;
    let code = i8::from_be_bytes([p.u8()?]);
    let mechanism = ScramMechanism::from_code(code).ok_or(DecodeError::UnknownMechanism(code))?;
    let credential = if p.u8()? == 0 {
        None
    } else {
        Some(ScramCredential {
            salt: p.bytes()?,
            stored_key: p.bytes()?,
            server_key: p.bytes()?,
            iterations: p.i32()?,
        })
    };
    Ok(ScramCredentialRecord { user, mechanism, credential })
}

fn decode_acl(p: &mut Reader<'_>) -> Result<AclRecord, DecodeError> {
    use crate::authz::{Acl, Operation, PatternType, Permission, ResourceType};
    let code = |p: &mut Reader<'_>| p.u8().map(|b| i8::from_be_bytes([b]));
    let id = p.uuid()?;
    let resource_type = ResourceType::from_code(code(p)?);
    let resource_name = p.string()?;
    let pattern = PatternType::from_code(code(p)?);
    let principal = p.string()?;
    let host = p.string()?;
    let operation = Operation::from_code(code(p)?);
    let permission = Permission::from_code(code(p)?);
    let acl = Acl { resource_type, resource_name, pattern, principal, host, operation, permission };
    Ok(AclRecord { id, acl })
}

fn decode_register(p: &mut Reader<'_>) -> Result<RegisterBrokerRecord, DecodeError> {
    let node = NodeId(p.i32()?);
    let broker_epoch = p.i64()?;
    let incarnation_id = p.uuid()?;
    let count = p.u32()? as usize;
    // Each endpoint takes at least 12 bytes: a count beyond the payload is corruption.
    if count > p.buf.len().saturating_sub(p.pos) / 12 {
        return Err(DecodeError::Truncated);
    }
    let mut endpoints = Vec::with_capacity(count);
    for _ in 0..count {
        let listener = p.string()?;
        let host = p.string()?;
        let port = u16::from_be_bytes(p.array()?);
        let security_protocol = i16::from_be_bytes(p.array()?);
        endpoints.push(BrokerEndpoint { listener, host, port, security_protocol });
    }
    let rack = if p.u8()? == 0 { None } else { Some(p.string()?) };
    let fenced = p.u8()? != 0;
    Ok(RegisterBrokerRecord { node, broker_epoch, incarnation_id, endpoints, rack, fenced })
}

/// Writes a `[node i32][epoch i64]` payload and returns the record type.
fn put_broker_epoch(out: &mut Vec<u8>, b: &BrokerEpochRecord, kind: u8) -> u8 {
    out.extend_from_slice(&b.node.0.to_be_bytes());
    out.extend_from_slice(&b.broker_epoch.to_be_bytes());
    kind
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&u32::try_from(b.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(b);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&u32::try_from(s.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// `[present u8]` then the string when present.
fn put_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(v) => {
            out.push(1);
            put_str(out, v);
        }
        None => out.push(0),
    }
}

fn put_nodes(out: &mut Vec<u8>, nodes: &[NodeId]) {
    out.extend_from_slice(&u32::try_from(nodes.len()).unwrap_or(u32::MAX).to_be_bytes());
    for n in nodes {
        out.extend_from_slice(&n.0.to_be_bytes());
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).ok_or(DecodeError::Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(DecodeError::Truncated)?;
        self.pos = end;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }
    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array()?))
    }
    fn uuid(&mut self) -> Result<Uuid, DecodeError> {
        Ok(Uuid::from_bytes(self.array()?))
    }
    fn bytes(&mut self) -> Result<Vec<u8>, DecodeError> {
        let len = self.u32()? as usize;
        Ok(self.take(len)?.to_vec())
    }
    fn string(&mut self) -> Result<String, DecodeError> {
        let len = self.u32()? as usize;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::BadString)
    }
    fn broker_epoch(&mut self) -> Result<BrokerEpochRecord, DecodeError> {
        Ok(BrokerEpochRecord { node: NodeId(self.i32()?), broker_epoch: self.i64()? })
    }
    fn nodes(&mut self) -> Result<Vec<NodeId>, DecodeError> {
        let count = self.u32()? as usize;
        // A count larger than the remaining bytes allow is corruption, not an allocation.
        if count > self.buf.len().saturating_sub(self.pos) / 4 {
            return Err(DecodeError::Truncated);
        }
        (0..count).map(|_| self.i32().map(NodeId)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<MetadataRecord> {
        let id = Uuid::from_u128(0x1234);
        vec![
            MetadataRecord::Topic(TopicRecord {
                name: "orders".into(),
                topic_id: id,
                internal: false,
            }),
            MetadataRecord::Partition(PartitionRecord {
                topic_id: id,
                partition: 3,
                owner_shard_hint: None,
                leader: NodeId(1),
                leader_epoch: Epoch(7),
                replicas: vec![NodeId(1)],
                isr: vec![NodeId(1)],
                elr: Vec::new(),
                last_known_elr: Vec::new(),
            }),
            MetadataRecord::Partition(PartitionRecord {
                topic_id: id,
                partition: 4,
                owner_shard_hint: None,
                leader: NodeId(2),
                leader_epoch: Epoch(8),
                replicas: vec![NodeId(1), NodeId(2), NodeId(3)],
                isr: vec![NodeId(2)],
                elr: vec![NodeId(1)],
                last_known_elr: vec![NodeId(3)],
            }),
            MetadataRecord::Config(ConfigRecord {
                topic_id: id,
                name: "retention.ms".into(),
                value: Some("1000".into()),
            }),
            MetadataRecord::Config(ConfigRecord { topic_id: id, name: "x".into(), value: None }),
            MetadataRecord::RemoveTopic { topic_id: id },
            MetadataRecord::ProducerIdsBlock { block_end: 5000 },
            MetadataRecord::BrokerConfig(BrokerConfigRecord {
                node: Some(NodeId(3)),
                name: "log.retention.bytes".into(),
                value: Some("1048576".into()),
            }),
            MetadataRecord::BrokerConfig(BrokerConfigRecord {
                node: None,
                name: "log.cleaner.backoff.ms".into(),
                value: None,
            }),
            MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                node: NodeId(2),
                broker_epoch: 17,
                incarnation_id: Uuid::from_u128(0xabcd),
                endpoints: vec![BrokerEndpoint {
                    listener: "PLAINTEXT".into(),
                    host: "127.0.0.1".into(),
                    port: 9192,
                    security_protocol: 0,
                }],
                rack: Some("r1".into()),
                fenced: true,
            }),
            MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                node: NodeId(3),
                broker_epoch: 18,
                incarnation_id: Uuid::from_u128(1),
                endpoints: Vec::new(),
                rack: None,
                fenced: false,
            }),
            MetadataRecord::FenceBroker(BrokerEpochRecord { node: NodeId(2), broker_epoch: 17 }),
            MetadataRecord::UnfenceBroker(BrokerEpochRecord { node: NodeId(2), broker_epoch: 17 }),
            MetadataRecord::UnregisterBroker(BrokerEpochRecord {
                node: NodeId(2),
                broker_epoch: 17,
            }),
            MetadataRecord::ClientQuota(ClientQuotaRecord {
                entity: vec![EntityPart { kind: "client-id".into(), name: Some("app".into()) }],
                key: "producer_byte_rate".into(),
                value: Some(1024.0),
            }),
            MetadataRecord::ClientQuota(ClientQuotaRecord {
                entity: vec![EntityPart { kind: "client-id".into(), name: None }],
                key: "consumer_byte_rate".into(),
                value: None,
            }),
            MetadataRecord::PartitionReassignment(PartitionReassignmentRecord {
                topic_id: id,
                partition: 2,
                adding: vec![NodeId(4)],
                removing: vec![NodeId(1)],
            }),
            MetadataRecord::Acl(AclRecord {
                id: Uuid::from_u128(0x77),
                acl: crate::authz::Acl {
                    resource_type: crate::authz::ResourceType::Topic,
                    resource_name: "orders-".into(),
                    pattern: crate::authz::PatternType::Prefixed,
                    principal: "User:alice".into(),
                    host: "*".into(),
                    operation: crate::authz::Operation::Write,
                    permission: crate::authz::Permission::Allow,
                },
            }),
            MetadataRecord::RemoveAcl { id: Uuid::from_u128(0x77) },
        ]
    }

    #[test]
    fn every_record_round_trips() {
        for rec in samples() {
            let mut buf = Vec::new();
            rec.encode(&mut buf);
            let (back, used) = MetadataRecord::decode(&buf).unwrap();
            assert_eq!(back, rec);
            assert_eq!(used, buf.len());
        }
    }

    #[test]
    fn truncation_and_unknown_versions_are_errors_not_panics() {
        for rec in samples() {
            let mut buf = Vec::new();
            rec.encode(&mut buf);
            for cut in 0..buf.len() {
                assert!(MetadataRecord::decode(&buf[..cut]).is_err());
            }
            buf[1] = 9;
            assert!(matches!(
                MetadataRecord::decode(&buf),
                Err(DecodeError::UnknownVersion { version: 9, .. })
            ));
        }
        assert_eq!(MetadataRecord::decode(&[77, 0, 0, 0, 0, 0]), Err(DecodeError::UnknownType(77)));
    }

    /// The bytes of each record type as released, so a later version proves it still reads
    /// data directories written before it (type 6 came with dynamic broker configs, type 7 with
    /// client quotas).
    #[test]
    fn partition_v0_keeps_its_owner_shard_as_a_hint() {
        let id = Uuid::from_u128(0x1234);
        let mut v0 = vec![2, 0, 0, 0, 0, 0];
        v0.extend_from_slice(id.as_bytes());
        v0.extend_from_slice(&[0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 7]);
        v0.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1]);
        v0[5] = u8::try_from(v0.len() - 6).unwrap();
        let (rec, used) = MetadataRecord::decode(&v0).unwrap();
        assert_eq!(used, v0.len());
        let expected = PartitionRecord {
            topic_id: id,
            partition: 3,
            owner_shard_hint: Some(ShardId(1)),
            leader: NodeId(1),
            leader_epoch: Epoch(7),
            replicas: vec![NodeId(1)],
            isr: vec![NodeId(1)],
            elr: Vec::new(),
            last_known_elr: Vec::new(),
        };
        assert_eq!(rec, MetadataRecord::Partition(expected.clone()));
        // Written again it is version 1, without the shard.
        let mut v1 = Vec::new();
        rec.encode(&mut v1);
        assert_eq!((v1[1], v1.len()), (1, v0.len() - 4));
        let (back, _) = MetadataRecord::decode(&v1).unwrap();
        assert_eq!(
            back,
            MetadataRecord::Partition(PartitionRecord { owner_shard_hint: None, ..expected })
        );
    }

    #[test]
    fn released_encodings_still_decode() {
        let topic_id = Uuid::from_u128(0x1234);
        let mut config_v0 = vec![3, 0, 0, 0, 0, 36];
        config_v0.extend_from_slice(topic_id.as_bytes());
        config_v0.extend_from_slice(&[0, 0, 0, 1, b'x', 1, 0, 0, 0, 2, b'4', b'2']);
        config_v0[5] = u8::try_from(config_v0.len() - 6).unwrap();
        let (rec, _) = MetadataRecord::decode(&config_v0).unwrap();
        assert_eq!(
            rec,
            MetadataRecord::Config(ConfigRecord {
                topic_id,
                name: "x".into(),
                value: Some("42".into())
            })
        );
        let broker_v0 =
            [6, 0, 0, 0, 0, 15, 255, 255, 255, 255, 0, 0, 0, 5, b'a', b'.', b'b', b'.', b'c', 1];
        let mut broker_v0 = broker_v0.to_vec();
        broker_v0.extend_from_slice(&[0, 0, 0, 1, b'7']);
        broker_v0[5] = u8::try_from(broker_v0.len() - 6).unwrap();
        let (rec, used) = MetadataRecord::decode(&broker_v0).unwrap();
        assert_eq!(used, broker_v0.len());
        assert_eq!(
            rec,
            MetadataRecord::BrokerConfig(BrokerConfigRecord {
                node: None,
                name: "a.b.c".into(),
                value: Some("7".into())
            })
        );
        // Type 7 (client quotas), version 0: client-id "a", producer_byte_rate = 1024.
        let mut quota_v0 = vec![7, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9];
        quota_v0.extend_from_slice(b"client-id");
        quota_v0.extend_from_slice(&[1, 0, 0, 0, 1, b'a', 0, 0, 0, 18]);
        quota_v0.extend_from_slice(b"producer_byte_rate");
        quota_v0.extend_from_slice(&[1, 0x40, 0x90, 0, 0, 0, 0, 0, 0]);
        quota_v0[5] = u8::try_from(quota_v0.len() - 6).unwrap();
        let (rec, used) = MetadataRecord::decode(&quota_v0).unwrap();
        assert_eq!(used, quota_v0.len());
        assert_eq!(
            rec,
            MetadataRecord::ClientQuota(ClientQuotaRecord {
                entity: vec![EntityPart { kind: "client-id".into(), name: Some("a".into()) }],
                key: "producer_byte_rate".into(),
                value: Some(1024.0),
            })
        );
    }

    /// The ACL records' bytes as first written (issue 35), so later versions keep reading
    /// them: type 23, version 0, then id, codes and strings.
    #[test]
    fn acl_record_bytes_are_fixed() {
        let mut want = vec![23, 0, 0, 0, 0, 0];
        want.extend_from_slice(Uuid::from_u128(1).as_bytes());
        want.extend_from_slice(&[2, 0, 0, 0, 1, b't', 3, 0, 0, 0, 6]);
        want.extend_from_slice(b"User:a");
        want.extend_from_slice(&[0, 0, 0, 1, b'*', 3, 3]);
        want[5] = u8::try_from(want.len() - 6).unwrap();
        let (rec, used) = MetadataRecord::decode(&want).unwrap();
        assert_eq!(used, want.len());
        let mut again = Vec::new();
        rec.encode(&mut again);
        assert_eq!(again, want);
        let MetadataRecord::Acl(r) = rec else { panic!("not an ACL record: {rec:?}") };
        assert_eq!(r.acl.to_string(), "(principal=User:a, host=*, operation=READ, permissionType=ALLOW) on ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)");
    }
}
