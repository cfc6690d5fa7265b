//! The [`LeaderLink`] over TCP: Kafka's own protocol to the leader broker, as Kafka's
//! replica fetcher speaks it (Fetch v15 with `replica_state`, KIP-903; topics by id; ListOffsets
//! for the leader's log start and end), on the inter-broker listener with its TLS and SASL
//! (`protocol::client_auth::ClientSecurity`). One connection, opened lazily and dropped on any
//! error (the next round reconnects); every call is bounded by
//! `replica.socket.timeout.ms` plus the fetch's own long-poll. A refused TLS handshake or
//! SASL login is a [`LinkError`] naming the reason, which the fetcher logs with every failed
//! round (`replication::task`): such a follower stays out of the ISR until it is fixed.
//!
//! Runs on the shard of the fetcher that owns it. Speaks through the shared Kafka client
//! (`protocol::client::Conn`); the connection is taken out of its cell for the duration of a
//! call, so no borrow is held across `.await`.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::driver::{LeaderLink, LinkError};
use super::fetcher::{FetchPlan, PartitionReply};
use crate::constants::REPLICA_SOCKET_TIMEOUT_MS_DEFAULT;
use crate::protocol::client::Conn;
use crate::protocol::client_auth::ClientSecurity;
use crate::types::{NodeId, Offset, TopicPartition};

/// The Fetch version followers send (the first with `replica_state`).
pub const REPLICA_FETCH_VERSION: i16 = 15;
/// The ListOffsets version followers send.
const LIST_OFFSETS_VERSION: i16 = 7;

/// A Kafka-protocol connection to one leader broker.
pub struct TcpLink {
    addr: String,
    replica: NodeId,
    security: Arc<ClientSecurity>,
    conn: Cell<Option<Conn>>,
}

impl TcpLink {
    #[must_use]
    pub fn new(addr: impl Into<String>, replica: NodeId, security: Arc<ClientSecurity>) -> Self {
        TcpLink { addr: addr.into(), replica, security, conn: Cell::new(None) }
    }

    /// Sends `req` on the connection (opened if needed) within `timeout`; the connection
    /// is kept only after a success.
    async fn call<R: kafka_protocol::protocol::Request>(
        &self,
        req: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response, LinkError> {
        let attempt = async {
            let mut conn = match self.conn.take() {
                Some(c) => c,
                None => Conn::connect_secure(&self.addr, &self.security)
                    .await
                    .map_err(|e| LinkError(e.to_string()))?,
            };
            let resp = conn.call(req, version).await.map_err(|e| LinkError(e.to_string()))?;
            self.conn.set(Some(conn));
            Ok(resp)
        };
        crate::shard::with_timeout(timeout, attempt).await.unwrap_or_else(|| {
            Err(LinkError(format!("{} did not answer in {timeout:?}", self.addr)))
        })
    }
}

/// The Fetch for `plan`, topics grouped by id in plan order. Linear in the plan's size (a
/// map from topic id to its entry: with thousands of topics a search per partition made
/// every round quadratic, issue 43).
fn fetch_request(plan: &FetchPlan) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    let mut index: HashMap<Uuid, usize> = HashMap::new();
    for p in &plan.partitions {
        let part = FetchPartition::default()
            .with_partition(p.tp.partition)
            .with_current_leader_epoch(p.current_leader_epoch.0)
            .with_fetch_offset(p.fetch_offset.0)
            .with_last_fetched_epoch(p.last_fetched_epoch.0)
            .with_log_start_offset(p.log_start_offset.0)
            .with_partition_max_bytes(plan.partition_max_bytes);
        match index.get(&p.topic_id) {
            Some(&i) => topics[i].partitions.push(part),
            None => {
                index.insert(p.topic_id, topics.len());
                topics.push(
                    FetchTopic::default().with_topic_id(p.topic_id).with_partitions(vec![part]),
                );
            }
        }
    }
    FetchRequest::default()
        .with_replica_state(
            ReplicaState::default()
                .with_replica_id(BrokerId(plan.replica.0))
                .with_replica_epoch(plan.broker_epoch),
        )
        .with_max_wait_ms(plan.max_wait_ms)
        .with_min_bytes(plan.min_bytes)
        .with_max_bytes(plan.max_bytes)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(topics)
}

/// Each planned partition's answer (a missing one gets UNKNOWN_SERVER_ERROR, -1); linear in
/// the answer's size (indexed by topic id and partition).
fn replies(plan: &FetchPlan, resp: &FetchResponse) -> Vec<(TopicPartition, PartitionReply)> {
    let mut index: HashMap<(Uuid, i32), &PartitionData> = HashMap::new();
    for t in &resp.responses {
        for d in &t.partitions {
            index.entry((t.topic_id, d.partition_index)).or_insert(d);
        }
    }
    plan.partitions
        .iter()
        .map(|p| {
            let data = index.get(&(p.topic_id, p.tp.partition)).copied();
            let reply = match (resp.error_code, data) {
                (0, Some(d)) => PartitionReply {
                    error_code: d.error_code,
                    high_watermark: d.high_watermark,
                    log_start_offset: d.log_start_offset,
                    diverging_epoch: (d.diverging_epoch.end_offset >= 0)
                        .then_some((d.diverging_epoch.epoch, d.diverging_epoch.end_offset)),
                    records: d.records.clone().unwrap_or_default(),
                },
                (0, None) => PartitionReply { error_code: -1, ..PartitionReply::default() },
                (code, _) => PartitionReply { error_code: code, ..PartitionReply::default() },
            };
            (p.tp.clone(), reply)
        })
        .collect()
}

impl LeaderLink for TcpLink {
    async fn fetch(
        &self,
        plan: &FetchPlan,
    ) -> Result<Vec<(TopicPartition, PartitionReply)>, LinkError> {
        let req = fetch_request(plan);
        let wait_ms = u64::try_from(plan.max_wait_ms).unwrap_or(0);
        let timeout = Duration::from_millis(REPLICA_SOCKET_TIMEOUT_MS_DEFAULT + wait_ms);
        let resp = self.call(&req, REPLICA_FETCH_VERSION, timeout).await?;
        Ok(replies(plan, &resp))
    }

    async fn log_offsets(&self, tp: &TopicPartition) -> Result<(Offset, Offset), LinkError> {
        let timeout = Duration::from_millis(REPLICA_SOCKET_TIMEOUT_MS_DEFAULT);
        let mut out = [0i64; 2];
        for (slot, timestamp) in out.iter_mut().zip([-2i64, -1]) {
            let part = ListOffsetsPartition::default()
                .with_partition_index(tp.partition)
                .with_timestamp(timestamp);
            let topic = ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(tp.topic.clone())))
                .with_partitions(vec![part]);
            let req = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(self.replica.0))
                .with_topics(vec![topic]);
            let resp: ListOffsetsResponse = self.call(&req, LIST_OFFSETS_VERSION, timeout).await?;
            let p = resp
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .ok_or_else(|| LinkError(format!("ListOffsets answer without {tp}")))?;
            if p.error_code != 0 {
                return Err(LinkError(format!("ListOffsets {tp}: error {}", p.error_code)));
            }
            *slot = p.offset;
        }
        Ok((Offset(out[0]), Offset(out[1])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::fetcher::PartitionFetch;
    use crate::types::Epoch;
    use kafka_protocol::messages::fetch_response::FetchableTopicResponse;

    fn plan(topics: u128, partitions: i32) -> FetchPlan {
        let mut parts = Vec::new();
        // Interleaved (partition-major), as a fetcher's sorted map never is: grouping must
        // not depend on order.
        for p in 0..partitions {
            for t in 0..topics {
                parts.push(PartitionFetch {
                    tp: TopicPartition::new(format!("t{t}"), p),
                    topic_id: Uuid::from_u128(t + 1),
                    fetch_offset: Offset(i64::from(p) * 10),
                    last_fetched_epoch: Epoch(-1),
                    current_leader_epoch: Epoch(3),
                    log_start_offset: Offset(0),
                });
            }
        }
        FetchPlan {
            replica: NodeId(2),
            broker_epoch: 5,
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 1 << 20,
            partition_max_bytes: 1 << 16,
            partitions: parts,
        }
    }

    /// One entry per topic id, in first-seen order, with its partitions in plan order; each
    /// planned partition finds its own answer, and a missing one gets -1.
    #[test]
    fn requests_group_by_topic_and_answers_match_by_topic_and_partition() {
        let plan = plan(300, 3);
        let req = fetch_request(&plan);
        assert_eq!(req.topics.len(), 300);
        assert_eq!(req.topics[7].topic_id, Uuid::from_u128(8));
        let offsets: Vec<i64> = req.topics[7].partitions.iter().map(|p| p.fetch_offset).collect();
        assert_eq!(offsets, vec![0, 10, 20]);
        let mut resp = FetchResponse::default();
        for t in req.topics.iter().rev() {
            let mut topic = FetchableTopicResponse::default().with_topic_id(t.topic_id);
            for p in t.partitions.iter().filter(|p| p.partition != 1 || t.topic_id.as_u128() != 8) {
                topic.partitions.push(
                    PartitionData::default()
                        .with_partition_index(p.partition)
                        .with_high_watermark(p.fetch_offset + 1),
                );
            }
            resp.responses.push(topic);
        }
        let got = replies(&plan, &resp);
        assert_eq!(got.len(), 900);
        for ((tp, reply), planned) in got.iter().zip(&plan.partitions) {
            assert_eq!(tp, &planned.tp);
            if planned.topic_id.as_u128() == 8 && tp.partition == 1 {
                assert_eq!(reply.error_code, -1, "no answer for it");
            } else {
                assert_eq!(reply.high_watermark, planned.fetch_offset.0 + 1);
            }
        }
    }
}
