//! The node-to-node calls the cluster makes over the quorum's connections (not Kafka's
//! protocol): a Kafka controller request forwarded to the active controller, auto-creation,
//! broker registration and heartbeats, a partition leader's ISR change (AlterPartition).
//! Pure encode/decode, versioned by a kind byte; a reader
//! refuses what it does not know. Integers big-endian.
//!
//! Request: `[kind u8][payload]`. Reply: `[status u8][payload]` where status 0 is done,
//! 1 "not the active controller" (payload: the leader this node knows, i32, -1 none) and
//! 2 an error (payload: Kafka error code i16, message string).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use uuid::Uuid;

use crate::controller::records::BrokerEndpoint;
use crate::controller::{AlterPartitionRequest, BrokerEpoch, BrokerHeartbeat, BrokerRegistration};
use crate::types::{Epoch, NodeId};

const KIND_KAFKA: u8 = 1;
const KIND_AUTO_CREATE: u8 = 2;
const KIND_REGISTER: u8 = 3;
const KIND_HEARTBEAT: u8 = 4;
const KIND_ALTER_PARTITION: u8 = 5;

const STATUS_DONE: u8 = 0;
const STATUS_NOT_LEADER: u8 = 1;
const STATUS_ERROR: u8 = 2;

/// Longest string field accepted (topic names, hosts, messages are far shorter).
const STRING_BYTES_MAX: usize = 64 * 1024;
/// Most topics one auto-create call names, endpoints one registration lists.
const LIST_ITEMS_MAX: usize = 100_000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    /// A Kafka request frame (header included) the active controller answers.
    Kafka {
        api: i16,
        version: i16,
        frame: Bytes,
    },
    AutoCreate(Vec<String>),
    Register(BrokerRegistration),
    Heartbeat(BrokerHeartbeat),
    AlterPartition(AlterPartitionRequest),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// A Kafka response frame, and the metadata index the answer reflects (the caller waits
    /// until its own image has reached it, so its client reads its own writes).
    Kafka {
        frame: Bytes,
        applied_index: u64,
    },
    AutoCreated {
        applied_index: u64,
    },
    Registered {
        epoch: BrokerEpoch,
    },
    Heartbeat {
        is_caught_up: bool,
        is_fenced: bool,
        should_shutdown: bool,
    },
    /// AlterPartition done: the ISR in force and the metadata index that holds it.
    PartitionAltered {
        isr: Vec<NodeId>,
        applied_index: u64,
    },
    NotLeader {
        leader: Option<NodeId>,
    },
    Error {
        code: i16,
        message: String,
    },
}

fn put_str(out: &mut BytesMut, s: &str) {
    out.put_u32(u32::try_from(s.len()).unwrap_or(u32::MAX));
    out.put_slice(s.as_bytes());
}

fn put_nodes(out: &mut BytesMut, nodes: &[NodeId]) {
    out.put_u32(u32::try_from(nodes.len()).unwrap_or(u32::MAX));
    for n in nodes {
        out.put_i32(n.0);
    }
}

struct Reader(Bytes);

impl Reader {
    fn need(&self, n: usize) -> Result<(), String> {
        if self.0.remaining() < n {
            return Err("truncated cluster call".into());
        }
        Ok(())
    }
    fn u8(&mut self) -> Result<u8, String> {
        self.need(1)?;
        Ok(self.0.get_u8())
    }
    fn i16(&mut self) -> Result<i16, String> {
        self.need(2)?;
        Ok(self.0.get_i16())
    }
    fn i32(&mut self) -> Result<i32, String> {
        self.need(4)?;
        Ok(self.0.get_i32())
    }
    fn i64(&mut self) -> Result<i64, String> {
        self.need(8)?;
        Ok(self.0.get_i64())
    }
    fn u64(&mut self) -> Result<u64, String> {
        self.need(8)?;
        Ok(self.0.get_u64())
    }
    fn count(&mut self) -> Result<usize, String> {
        self.need(4)?;
        let n = self.0.get_u32() as usize;
        if n > LIST_ITEMS_MAX {
            return Err(format!("list of {n} items"));
        }
        Ok(n)
    }
    fn string(&mut self) -> Result<String, String> {
        self.need(4)?;
        let n = self.0.get_u32() as usize;
        if n > STRING_BYTES_MAX {
            return Err(format!("string of {n} bytes"));
        }
        self.need(n)?;
        let b = self.0.split_to(n);
        String::from_utf8(b.to_vec()).map_err(|_| "invalid UTF-8".to_string())
    }
    fn uuid(&mut self) -> Result<Uuid, String> {
        self.need(16)?;
        let b = self.0.split_to(16);
        Uuid::from_slice(&b).map_err(|e| e.to_string())
    }
    fn rest(self) -> Bytes {
        self.0
    }
    fn nodes(&mut self) -> Result<Vec<NodeId>, String> {
        let n = self.count()?;
        self.need(n.saturating_mul(4))?;
        Ok((0..n).map(|_| NodeId(self.0.get_i32())).collect())
    }
}

impl Call {
    #[must_use]
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        match self {
            Call::Kafka { api, version, frame } => {
                out.put_u8(KIND_KAFKA);
                out.put_i16(*api);
                out.put_i16(*version);
                out.put_slice(frame);
            }
            Call::AutoCreate(names) => {
                out.put_u8(KIND_AUTO_CREATE);
                out.put_u32(u32::try_from(names.len()).unwrap_or(u32::MAX));
                for n in names {
                    put_str(&mut out, n);
                }
            }
            Call::Register(r) => {
                out.put_u8(KIND_REGISTER);
                out.put_i32(r.node.0);
                out.put_slice(r.incarnation_id.as_bytes());
                match &r.rack {
                    Some(rack) => {
                        out.put_u8(1);
                        put_str(&mut out, rack);
                    }
                    None => out.put_u8(0),
                }
                out.put_u32(u32::try_from(r.endpoints.len()).unwrap_or(u32::MAX));
                for e in &r.endpoints {
                    put_str(&mut out, &e.listener);
                    put_str(&mut out, &e.host);
                    out.put_u16(e.port);
                    out.put_i16(e.security_protocol);
                }
            }
            Call::Heartbeat(h) => {
                out.put_u8(KIND_HEARTBEAT);
                out.put_i32(h.node.0);
                out.put_i64(h.epoch.0);
                out.put_u64(h.metadata_offset);
                out.put_u8(u8::from(h.want_fence));
                out.put_u8(u8::from(h.want_shutdown));
            }
            Call::AlterPartition(a) => {
                out.put_u8(KIND_ALTER_PARTITION);
                out.put_slice(a.topic_id.as_bytes());
                out.put_i32(a.partition);
                out.put_i32(a.leader.0);
                out.put_i32(a.leader_epoch.0);
                put_nodes(&mut out, &a.current_isr);
                put_nodes(&mut out, &a.new_isr);
            }
        }
        out.freeze()
    }

    pub fn decode(body: Bytes) -> Result<Call, String> {
        let mut r = Reader(body);
        match r.u8()? {
            KIND_KAFKA => {
                let api = r.i16()?;
                let version = r.i16()?;
                Ok(Call::Kafka { api, version, frame: r.rest() })
            }
            KIND_AUTO_CREATE => {
                let n = r.count()?;
                let mut names = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    names.push(r.string()?);
                }
                Ok(Call::AutoCreate(names))
            }
            KIND_REGISTER => {
                let node = NodeId(r.i32()?);
                let incarnation_id = r.uuid()?;
                let rack = if r.u8()? == 1 { Some(r.string()?) } else { None };
                let n = r.count()?;
                let mut endpoints = Vec::with_capacity(n.min(16));
                for _ in 0..n {
                    let listener = r.string()?;
                    let host = r.string()?;
                    r.need(4)?;
                    let port = r.0.get_u16();
                    let security_protocol = r.0.get_i16();
                    endpoints.push(BrokerEndpoint { listener, host, port, security_protocol });
                }
                Ok(Call::Register(BrokerRegistration { node, incarnation_id, endpoints, rack }))
            }
            KIND_HEARTBEAT => Ok(Call::Heartbeat(BrokerHeartbeat {
                node: NodeId(r.i32()?),
                epoch: BrokerEpoch(r.i64()?),
                metadata_offset: r.u64()?,
                want_fence: r.u8()? != 0,
                want_shutdown: r.u8()? != 0,
            })),
            KIND_ALTER_PARTITION => Ok(Call::AlterPartition(AlterPartitionRequest {
                topic_id: r.uuid()?,
                partition: r.i32()?,
                leader: NodeId(r.i32()?),
                leader_epoch: Epoch(r.i32()?),
                current_isr: r.nodes()?,
                new_isr: r.nodes()?,
            })),
            other => Err(format!("unknown cluster call kind {other}")),
        }
    }
}

const REPLY_KAFKA: u8 = 1;
const REPLY_AUTO_CREATED: u8 = 2;
const REPLY_REGISTERED: u8 = 3;
const REPLY_HEARTBEAT: u8 = 4;
const REPLY_PARTITION_ALTERED: u8 = 5;

impl Reply {
    #[must_use]
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        match self {
            Reply::NotLeader { leader } => {
                out.put_u8(STATUS_NOT_LEADER);
                out.put_i32(leader.map_or(-1, |n| n.0));
            }
            Reply::Error { code, message } => {
                out.put_u8(STATUS_ERROR);
                out.put_i16(*code);
                put_str(&mut out, message);
            }
            Reply::Kafka { frame, applied_index } => {
                out.put_u8(STATUS_DONE);
                out.put_u8(REPLY_KAFKA);
                out.put_u64(*applied_index);
                out.put_slice(frame);
            }
            Reply::AutoCreated { applied_index } => {
                out.put_u8(STATUS_DONE);
                out.put_u8(REPLY_AUTO_CREATED);
                out.put_u64(*applied_index);
            }
            Reply::Registered { epoch } => {
                out.put_u8(STATUS_DONE);
                out.put_u8(REPLY_REGISTERED);
                out.put_i64(epoch.0);
            }
            Reply::Heartbeat { is_caught_up, is_fenced, should_shutdown } => {
                out.put_u8(STATUS_DONE);
                out.put_u8(REPLY_HEARTBEAT);
                out.put_u8(u8::from(*is_caught_up));
                out.put_u8(u8::from(*is_fenced));
                out.put_u8(u8::from(*should_shutdown));
            }
            Reply::PartitionAltered { isr, applied_index } => {
                out.put_u8(STATUS_DONE);
                out.put_u8(REPLY_PARTITION_ALTERED);
                out.put_u64(*applied_index);
                put_nodes(&mut out, isr);
            }
        }
        out.freeze()
    }

    pub fn decode(body: Bytes) -> Result<Reply, String> {
        let mut r = Reader(body);
        match r.u8()? {
            STATUS_NOT_LEADER => {
                let leader = r.i32()?;
                Ok(Reply::NotLeader { leader: (leader >= 0).then_some(NodeId(leader)) })
            }
            STATUS_ERROR => Ok(Reply::Error { code: r.i16()?, message: r.string()? }),
            STATUS_DONE => match r.u8()? {
                REPLY_KAFKA => {
                    let applied_index = r.u64()?;
                    Ok(Reply::Kafka { frame: r.rest(), applied_index })
                }
                REPLY_AUTO_CREATED => Ok(Reply::AutoCreated { applied_index: r.u64()? }),
                REPLY_REGISTERED => Ok(Reply::Registered { epoch: BrokerEpoch(r.i64()?) }),
                REPLY_HEARTBEAT => Ok(Reply::Heartbeat {
                    is_caught_up: r.u8()? != 0,
                    is_fenced: r.u8()? != 0,
                    should_shutdown: r.u8()? != 0,
                }),
                REPLY_PARTITION_ALTERED => {
                    let applied_index = r.u64()?;
                    Ok(Reply::PartitionAltered { isr: r.nodes()?, applied_index })
                }
                other => Err(format!("unknown cluster reply kind {other}")),
            },
            other => Err(format!("unknown cluster reply status {other}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_replies_round_trip() {
        let calls = vec![
            Call::Kafka { api: 19, version: 5, frame: Bytes::from_static(b"frame") },
            Call::AutoCreate(vec!["a".into(), "b".into()]),
            Call::Register(BrokerRegistration {
                node: NodeId(3),
                incarnation_id: Uuid::new_v4(),
                endpoints: vec![BrokerEndpoint {
                    listener: "PLAINTEXT".into(),
                    host: "127.0.0.1".into(),
                    port: 9092,
                    security_protocol: 0,
                }],
                rack: Some("r1".into()),
            }),
            Call::Heartbeat(BrokerHeartbeat {
                node: NodeId(2),
                epoch: BrokerEpoch(17),
                metadata_offset: 99,
                want_fence: false,
                want_shutdown: true,
            }),
            Call::AlterPartition(AlterPartitionRequest {
                topic_id: Uuid::new_v4(),
                partition: 2,
                leader: NodeId(1),
                leader_epoch: Epoch(4),
                current_isr: vec![NodeId(1), NodeId(2), NodeId(3)],
                new_isr: vec![NodeId(1), NodeId(3)],
            }),
        ];
        for c in calls {
            assert_eq!(Call::decode(c.encode()).unwrap(), c);
        }
        let replies = vec![
            Reply::Kafka { frame: Bytes::from_static(b"resp"), applied_index: 4 },
            Reply::AutoCreated { applied_index: 5 },
            Reply::Registered { epoch: BrokerEpoch(8) },
            Reply::Heartbeat { is_caught_up: true, is_fenced: false, should_shutdown: false },
            Reply::PartitionAltered { isr: vec![NodeId(1), NodeId(3)], applied_index: 12 },
            Reply::NotLeader { leader: Some(NodeId(2)) },
            Reply::NotLeader { leader: None },
            Reply::Error { code: 41, message: "no".into() },
        ];
        for r in replies {
            assert_eq!(Reply::decode(r.encode()).unwrap(), r);
        }
    }

    #[test]
    fn garbage_is_refused_not_panicked() {
        for bytes in [&b""[..], b"\x09", b"\x03\x00", b"\x02\xff\xff\xff\xff", b"\x00\x07"] {
            let _ = Call::decode(Bytes::copy_from_slice(bytes));
            let _ = Reply::decode(Bytes::copy_from_slice(bytes));
        }
        assert!(Call::decode(Bytes::from_static(b"\x02\xff\xff\xff\xff")).is_err());
    }
}
