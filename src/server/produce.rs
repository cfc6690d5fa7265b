//! Produce: each partition's batch goes to its owner shard, appended in request order;
//! acks 1 and -1 answer once the batch is durable per the flush policy (single node:
//! the two are the same), acks 0 gets no response — and a failure closes the
//! connection, as Kafka does. v0–2 are advertised (old clients need to see them) but
//! refused by closing: their message formats are gone since Kafka 4.0. From v13 topics
//! are named by topic id (KIP-516): an unknown id gets UNKNOWN_TOPIC_ID. v12 differs
//! from v11 only for transaction V2 producers (KIP-890), which need the
//! `transaction.version` feature this broker does not finalize. From v10 a
//! NOT_LEADER_OR_FOLLOWER partition names its current leader and endpoint (KIP-951).
//! The request's size counts against the client's `producer_byte_rate` on the connection's
//! shard; over quota, the response carries `throttle_time_ms` and the connection is muted
//! (v6+, KIP-219) or the response delayed (older versions); either way the connection is
//! muted from the moment the request is recorded, so no request pipelined behind a throttled
//! one is read before the throttle ends. Below `log.dir.reserved.bytes` of free disk space
//! every partition is answered KAFKA_STORAGE_ERROR (`server::limits`).

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    TopicProduceResponse,
};
use kafka_protocol::messages::{ApiKey, BrokerId, ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;

use super::authz;
use super::dispatch::{respond, Outcome, ResponseFuture};
use super::route::{self, PartitionOutcome, Scatter};
use crate::authz::Operation::Write;
use crate::authz::ResourceType::{Topic, TransactionalId};
use crate::controller::MetadataImage;
use crate::partition::ops::{PartitionOp, PartitionResult, ProduceError};
use crate::protocol::decode_request;
use crate::quota::QuotaKind;
use crate::shard::ShardCtx;

/// Advertised from 0 (librdkafka needs it for compression), served from 3; 13 (topic
/// ids) is Kafka 4.1's maximum.
pub const VERSIONS: (i16, i16) = (0, 13);
/// The first version actually served.
pub const SERVED_MIN_VERSION: i16 = 3;
/// The first version naming topics by id instead of by name (KIP-516).
pub const TOPIC_ID_VERSION: i16 = 13;

/// The first version carrying the current leader and node endpoints on leader errors.
const CURRENT_LEADER_VERSION: i16 = 10;
/// The first version whose clients throttle themselves on `throttle_time_ms` (KIP-219).
const CLIENT_THROTTLE_VERSION: i16 = 6;

/// Where a partition's answer goes: its topic's slot in the response, its name (for the
/// leader hint), its index.
struct Slot {
    topic: usize,
    name: String,
    partition: i32,
}

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &crate::security::Session,
    connection: &super::throttle::Mute,
) -> Result<ResponseFuture, String> {
    let principal = &session.principal();
    let listener = session.listener.clone();
    if version < SERVED_MIN_VERSION {
        return Err(format!("Produce v{version} uses a message format Kafka 4 no longer accepts"));
    }
    let request_bytes = frame.len() as u64;
    let (header, req) = decode_request::<ProduceRequest>(frame, ApiKey::Produce, version)
        .map_err(|e| e.to_string())?;
    let client_id = header.client_id.as_ref().map(|c| c.as_str());
    let who = (principal.name(), client_id);
    let throttle_ms = super::throttle::record(ctx, QuotaKind::Produce, who, request_bytes);
    // Kafka reads no request of a connection while one is processed, so a throttled one is
    // the last read before its mute; here the reader runs ahead (pipelining), so the mute
    // starts now, before the next frame is read, not when the response leaves (issue 32).
    connection.mute_for(throttle_ms);
    let mute = version >= CLIENT_THROTTLE_VERSION;
    let acks = req.acks;
    let acks_error = (![0, 1, -1].contains(&acks)).then_some(ResponseError::InvalidRequiredAcks);
    let mut scatter = Scatter::default();
    let mut topics = Vec::with_capacity(req.topic_data.len());
    let image = ctx.image();
    // Below `log.dir.reserved.bytes` of free space, client data waits (`server::limits`).
    let disk_low = super::limits::data_dir_low_on_space(ctx, request_bytes);
    // Kafka's order: transactional records need WRITE on their transactional id (else the
    // whole request fails), then each topic needs WRITE, before anything is verified or
    // written.
    let txn_denied = !transactional_write_allowed(ctx, session, &req, &image);
    // KIP-890 part 1: transactional batches outside the producer's ongoing transaction.
    let unverified = if txn_denied {
        Default::default()
    } else {
        super::txn::verify::check_produce(ctx, &req, version, &image).await
    };
    for (t, topic) in req.topic_data.into_iter().enumerate() {
        let (name, unknown_id) = if version >= TOPIC_ID_VERSION {
            match image.topic_by_id(&topic.topic_id) {
                Some(known) => (known.name.clone(), false),
                None => (String::new(), true),
            }
        } else {
            (topic.name.0.to_string(), false)
        };
        let refused = if txn_denied {
            Some(ResponseError::TransactionalIdAuthorizationFailed)
        } else if unknown_id {
            Some(ResponseError::UnknownTopicId)
        } else if !authz::allowed_in(ctx, session, &image.acls, (Write, Topic, &name)) {
            Some(ResponseError::TopicAuthorizationFailed)
        } else {
            acks_error
        };
        for p in topic.partition_data {
            let target = match (refused, unknown_id) {
                (Some(error), _) => Err(error),
                (None, true) => Err(ResponseError::UnknownTopicId),
                (None, false) if disk_low => Err(ResponseError::KafkaStorageError),
                (None, false) if !unverified.is_empty() => {
                    match unverified.get(&(name.clone(), p.index)) {
                        Some(error) => Err(*error),
                        None => route::owner(ctx, &name, p.index),
                    }
                }
                (None, false) => route::owner(ctx, &name, p.index),
            };
            let slot = Slot { topic: t, name: name.clone(), partition: p.index };
            scatter.push(slot, target, || PartitionOp::Produce {
                topic: name.clone(),
                partition: p.index,
                records: p.records,
                acks,
                timeout_ms: req.timeout_ms,
            });
        }
        topics.push((topic.name, topic.topic_id));
    }
    let in_flight = scatter.send(ctx).await;
    let correlation_id = header.correlation_id;
    let ctx = ctx.clone();
    Ok(Box::pin(async move {
        let mut response = ProduceResponse::default()
            .with_throttle_time_ms(super::throttle::as_field(throttle_ms));
        // The name before v13, the id from v13: the other keeps its default.
        response.responses = topics
            .into_iter()
            .map(|(name, id)| {
                if version >= TOPIC_ID_VERSION {
                    TopicProduceResponse::default().with_topic_id(id)
                } else {
                    TopicProduceResponse::default().with_name(name)
                }
            })
            .collect();
        let mut first_error = None;
        for (slot, outcome) in in_flight.gather().await {
            let mut part = partition_response(slot.partition, outcome, version);
            if version >= CURRENT_LEADER_VERSION
                && part.error_code == ResponseError::NotLeaderOrFollower.code()
            {
                let c = &ctx.config;
                let (host, port) = c.advertised(Some(&listener)).unwrap_or(("", 0));
                let me = (c.node_id.0, host, i32::from(port));
                let endpoints = &mut response.node_endpoints;
                point_at_leader(&ctx.image(), (me, &listener), &slot.name, &mut part, endpoints);
            }
            if part.error_code != 0 && first_error.is_none() {
                first_error = Some((slot.partition, part.error_code));
            }
            response.responses[slot.topic].partition_responses.push(part);
        }
        if acks == 0 {
            return match first_error {
                None => super::throttle::wrap(Outcome::Silent, throttle_ms, mute),
                Some((p, code)) => {
                    Outcome::Close(format!("acks=0 produce failed (partition {p}, error {code})"))
                }
            };
        }
        let outcome = respond(ApiKey::Produce, version, correlation_id, &response);
        super::throttle::wrap(outcome, throttle_ms, mute)
    }))
}

/// Kafka's first Produce check: a request carrying transactional batches needs a
/// transactional id and WRITE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise).
fn transactional_write_allowed(
    ctx: &ShardCtx,
    session: &crate::security::Session,
    req: &ProduceRequest,
    image: &MetadataImage,
) -> bool {
    if !authz::enabled(ctx) {
        return true;
    }
    let transactional = req.topic_data.iter().any(|t| {
        t.partition_data.iter().any(|p| {
            p.records.as_ref().and_then(super::txn::verify::transactional_producer).is_some()
        })
    });
    if !transactional {
        return true;
    }
    req.transactional_id.as_ref().is_some_and(|id| {
        authz::allowed_in(ctx, session, &image.acls, (Write, TransactionalId, id.0.as_str()))
    })
}

/// KIP-951: a NOT_LEADER_OR_FOLLOWER answer names the partition's current leader and
/// epoch from the image, and the leader's endpoint (this broker's, or the registered
/// leader's) once per response, so the client can retry there without a metadata round
/// trip.
fn point_at_leader(
    image: &MetadataImage,
    (me, listener): ((i32, &str, i32), &str),
    topic: &str,
    part: &mut PartitionProduceResponse,
    endpoints: &mut Vec<NodeEndpoint>,
) {
    let Some(p) = image.partition(topic, part.index) else { return };
    part.current_leader = LeaderIdAndEpoch::default()
        .with_leader_id(BrokerId(p.leader.0))
        .with_leader_epoch(p.leader_epoch.0);
    let leader = p.leader.0;
    if endpoints.iter().any(|n| n.node_id.0 == leader) {
        return;
    }
    if let Some((host, port, rack)) = super::fetch::node_endpoint(image, me, leader, listener) {
        endpoints.push(
            NodeEndpoint::default()
                .with_node_id(BrokerId(leader))
                .with_host(StrBytes::from_string(host))
                .with_port(port)
                .with_rack(rack.map(StrBytes::from_string)),
        );
    }
}

fn partition_response(
    index: i32,
    outcome: PartitionOutcome,
    version: i16,
) -> PartitionProduceResponse {
    // Fields newer than the request's version must keep their defaults.
    let message =
        |m: Option<String>| if version >= 8 { m.map(StrBytes::from_string) } else { None };
    let failed = |err: ProduceError| {
        // record_errors (v8+, KIP-467): clients fail exactly these records with the error.
        let record_errors = if version >= 8 { err.record_errors } else { Vec::new() };
        PartitionProduceResponse::default()
            .with_index(index)
            .with_error_code(err.code.code())
            .with_base_offset(-1)
            .with_log_append_time_ms(-1)
            .with_log_start_offset(-1)
            .with_error_message(message(err.message))
            .with_record_errors(
                record_errors
                    .into_iter()
                    .map(|e| {
                        BatchIndexAndErrorMessage::default()
                            .with_batch_index(e.batch_index)
                            .with_batch_index_error_message(Some(StrBytes::from_string(e.message)))
                    })
                    .collect(),
            )
    };
    match outcome {
        Ok(PartitionResult::Produce(Ok(ok))) => PartitionProduceResponse::default()
            .with_index(index)
            .with_base_offset(ok.base_offset)
            .with_log_append_time_ms(ok.log_append_time_ms)
            .with_log_start_offset(if version >= 5 { ok.log_start_offset } else { -1 }),
        Ok(PartitionResult::Produce(Err(err))) => failed(err),
        other => failed((route::error_of(other), None).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_leader_names_the_current_leader_once() {
        let image = super::super::fetch::one_partition_image();
        let mut endpoints = Vec::new();
        let mut parts: Vec<PartitionProduceResponse> = [0, 0, 5]
            .into_iter()
            .map(|i| PartitionProduceResponse::default().with_index(i))
            .collect();
        for part in &mut parts {
            point_at_leader(&image, ((1, "h", 9092), "PLAINTEXT"), "t", part, &mut endpoints);
        }
        let leaders: Vec<(i32, i32)> = parts
            .iter()
            .map(|p| (p.current_leader.leader_id.0, p.current_leader.leader_epoch))
            .collect();
        assert_eq!(leaders, vec![(1, 7), (1, 7), (-1, -1)], "unknown partition: no hint");
        assert_eq!(endpoints.len(), 1);
        assert_eq!((endpoints[0].node_id.0, endpoints[0].host.as_str()), (1, "h"));
    }

    /// Answered by a broker that is not the leader: the leader's registered endpoint.
    #[test]
    fn not_leader_points_at_a_remote_leader() {
        let image = super::super::fetch::remote_leader_image();
        let mut endpoints = Vec::new();
        let mut part = PartitionProduceResponse::default().with_index(0);
        point_at_leader(&image, ((3, "h3", 9292), "PLAINTEXT"), "t", &mut part, &mut endpoints);
        assert_eq!((part.current_leader.leader_id.0, part.current_leader.leader_epoch), (1, 7));
        let e = &endpoints[0];
        assert_eq!((e.node_id.0, e.host.as_str(), e.port), (1, "b1", 9192));
        // Encoded as v10 and decoded back, the hint survives.
        let response = ProduceResponse::default()
            .with_responses(vec![TopicProduceResponse::default()
                .with_name(kafka_protocol::messages::TopicName(StrBytes::from_static_str("t")))
                .with_partition_responses(vec![part])])
            .with_node_endpoints(endpoints);
        let mut buf = bytes::BytesMut::new();
        kafka_protocol::protocol::Encodable::encode(&response, &mut buf, 10).unwrap();
        let back: ProduceResponse =
            kafka_protocol::protocol::Decodable::decode(&mut buf.freeze(), 10).unwrap();
        assert_eq!(back, response);
        assert_eq!(back.node_endpoints[0].port, 9192);
    }
}
