//! Fetch: reads every requested partition on its owner shard; if fewer than `min_bytes`
//! came back, waits (up to `max_wait_ms`) for an append on any of them, then reads
//! again. Stored batches are returned as-is (no re-encoding). `max_bytes` bounds the
//! response except for the first non-empty partition, which always gets at least one
//! whole batch (KIP-74). No fetch sessions: the answer carries session id 0, which tells
//! clients to keep sending full requests.
//!
//! From v13 topics are named by topic id (KIP-516), resolved through this shard's image;
//! an unknown id gets UNKNOWN_TOPIC_ID. From v16, a partition failing with
//! NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carries its current leader and the
//! leader's endpoint (KIP-951).
//!
//! A fetch from a follower (`replica_id >= 0` before v15, `replica_state.replica_id` with its
//! broker epoch from v15, KIP-903) goes to `partition::replica_fetch` instead: data up to the
//! log end, the follower's progress recorded, `diverging_epoch` (v12+) when its log may
//! diverge, a long-poll woken by appends, and no client quota. Directory id (v17) and the
//! replica's high watermark (v18) are read and ignored.
//!
//! Client quotas: `max_bytes` is capped at one quota window of the client's
//! `consumer_byte_rate` share, and the response's size counts against that rate on the
//! connection's shard; over quota, the data is taken back and an empty response carries
//! `throttle_time_ms`, the connection then muted (v8+, KIP-219) or the response delayed.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{
    EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::call::{ShardReply, ShardRequest};
use super::dispatch::{respond, Outcome, ResponseFuture};
use super::route::{self, Scatter};
use crate::authz::Operation::{self, Read};
use crate::authz::ResourceType::Topic;
use crate::constants::FETCH_MAX_WAIT_MS_CAP;
use crate::partition::ops::{FetchPart, PartitionOp, PartitionResult, WaitSpec};
use crate::partition::replica_fetch::{ReplicaFetchOp, ReplicaFetchRequest};
use crate::protocol::decode_request;
use crate::protocol::fetch_encode::{encode_fetch_response, SplicedRecords};
use crate::quota::QuotaKind;
use crate::shard::ShardCtx;
use crate::storage::SendRecords;
use crate::types::{Epoch, NodeId, Offset, ShardId};

/// 4 is the Kafka 4 floor (and what librdkafka needs to use v2 batches); 18 is Kafka
/// 4.1's maximum (13+ name topics by id).
pub const VERSIONS: (i16, i16) = (4, 18);
/// The first version naming topics by id instead of by name (KIP-516).
pub const TOPIC_ID_VERSION: i16 = 13;
/// The first version carrying the current leader and node endpoints on leader errors.
const CURRENT_LEADER_VERSION: i16 = 16;
/// The first version whose clients throttle themselves on `throttle_time_ms` (KIP-219).
const CLIENT_THROTTLE_VERSION: i16 = 8;
/// The first version carrying `replica_state` (KIP-903) instead of `replica_id`.
const REPLICA_STATE_VERSION: i16 = 15;
/// The first version with `last_fetched_epoch` and `diverging_epoch`.
const DIVERGING_EPOCH_VERSION: i16 = 12;

struct Wanted {
    topic: usize,
    name: String,
    partition: i32,
    fetch_offset: i64,
    max_bytes: usize,
    current_leader_epoch: i32,
    /// v12+, -1 when absent.
    last_fetched_epoch: i32,
    owner: Option<ShardId>,
    /// Answered without a read: UNKNOWN_TOPIC_ID (v13+: the topic id matches no topic) or
    /// TOPIC_AUTHORIZATION_FAILED (no READ on the topic; for a follower, no CLUSTER_ACTION).
    refused: Option<ResponseError>,
}

/// A requested topic as the response names it: by name before v13, by id from v13.
struct TopicKey {
    name: TopicName,
    id: Uuid,
}

struct Plan {
    version: i16,
    correlation_id: i32,
    topics: Vec<TopicKey>,
    wanted: Vec<Wanted>,
    min_bytes: usize,
    max_bytes: usize,
    max_wait: Duration,
    session_error: Option<ResponseError>,
    client_id: Option<String>,
    /// isolation_level = 1 (transactions: stop at the last stable offset).
    read_committed: bool,
    /// The connection's principal name (the `user` of user quotas).
    user: String,
    /// The connection's listener (leader hints name endpoints of this listener).
    listener: std::rc::Rc<str>,
    /// A follower's fetch: its broker id and broker epoch (-1 before v15).
    replica: Option<(NodeId, i64)>,
}

/// The follower behind a Fetch, if it is one: `replica_state` from v15 (KIP-903), the
/// top-level `replica_id` before (consumers send -1).
fn replica_of(req: &FetchRequest, version: i16) -> Option<(NodeId, i64)> {
    let (id, epoch) = if version >= REPLICA_STATE_VERSION {
        (req.replica_state.replica_id.0, req.replica_state.replica_epoch)
    } else {
        (req.replica_id.0, -1)
    };
    (id >= 0).then_some((NodeId(id), epoch))
}

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &crate::security::Session,
) -> Result<ResponseFuture, String> {
    let principal = &session.principal();
    let (header, req) =
        decode_request::<FetchRequest>(frame, ApiKey::Fetch, version).map_err(|e| e.to_string())?;
    let client_id = header.client_id.as_ref().map(ToString::to_string);
    let replica = replica_of(&req, version);
    let image = ctx.image();
    let quota_window_bytes =
        crate::server::broker::of(ctx).quotas(ctx).borrow().max_bytes_in_window(
            &image.client_quotas,
            QuotaKind::Fetch,
            (principal.name(), client_id.as_deref().unwrap_or("")),
        );
    let max_bytes = usize::try_from(req.max_bytes)
        .unwrap_or(0)
        .min(quota_window_bytes.map_or(usize::MAX, |b| usize::try_from(b).unwrap_or(usize::MAX)));
    let mut wanted = Vec::new();
    let mut topics = Vec::with_capacity(req.topics.len());
    // Kafka's checks: a follower needs CLUSTER_ACTION on the cluster, a consumer READ on
    // each topic; both are answered TOPIC_AUTHORIZATION_FAILED per partition.
    let replica_denied =
        replica.is_some() && !super::authz::cluster(ctx, session, Operation::ClusterAction);
    for (t, topic) in req.topics.into_iter().enumerate() {
        let (name, unknown_id) = if version >= TOPIC_ID_VERSION {
            match image.topic_by_id(&topic.topic_id) {
                Some(known) => (known.name.clone(), false),
                None => (String::new(), true),
            }
        } else {
            (topic.topic.0.to_string(), false)
        };
        let refused = if unknown_id {
            Some(ResponseError::UnknownTopicId)
        } else if replica_denied
            || (replica.is_none()
                && !super::authz::allowed_in(ctx, session, &image.acls, (Read, Topic, &name)))
        {
            Some(ResponseError::TopicAuthorizationFailed)
        } else {
            None
        };
        for p in topic.partitions {
            wanted.push(Wanted {
                topic: t,
                owner: if refused.is_some() {
                    None
                } else {
                    ctx.owner_of(&name, p.partition).map(|(shard, _)| shard)
                },
                name: name.clone(),
                partition: p.partition,
                fetch_offset: p.fetch_offset,
                max_bytes: usize::try_from(p.partition_max_bytes).unwrap_or(0).min(max_bytes),
                current_leader_epoch: p.current_leader_epoch,
                last_fetched_epoch: p.last_fetched_epoch,
                refused,
            });
        }
        topics.push(TopicKey { name: topic.topic, id: topic.topic_id });
    }
    let plan = Plan {
        version,
        correlation_id: header.correlation_id,
        topics,
        wanted,
        min_bytes: usize::try_from(req.min_bytes).unwrap_or(0),
        max_bytes,
        max_wait: Duration::from_millis(req.max_wait_ms.clamp(0, FETCH_MAX_WAIT_MS_CAP) as u64),
        // Without sessions, only "no session" (id 0) is valid.
        session_error: (req.session_id != 0).then_some(ResponseError::FetchSessionIdNotFound),
        client_id,
        user: principal.name().to_string(),
        listener: session.listener.clone(),
        replica,
        read_committed: req.isolation_level == 1,
    };
    let ctx = ctx.clone();
    Ok(Box::pin(async move { run(&ctx, plan).await }))
}

async fn run(ctx: &Rc<ShardCtx>, plan: Plan) -> Outcome {
    let deadline = Instant::now() + plan.max_wait;
    let mut parts =
        if plan.session_error.is_some() { Vec::new() } else { read_all(ctx, &plan).await };
    while plan.session_error.is_none() && !ctx.is_shutting_down() {
        let bytes: usize = parts.iter().map(|p| p.records.len()).sum();
        let any_error = parts.iter().any(|p| p.error.is_some());
        let now = Instant::now();
        if bytes >= plan.min_bytes || any_error || now >= deadline {
            break;
        }
        wait_for_data(ctx, &plan, deadline - now).await;
        parts = read_all(ctx, &plan).await;
    }
    trim_to_max_bytes(&mut parts, plan.max_bytes);
    let leaders = Leaders::of(ctx, &plan.listener);
    let (version, correlation_id) = (plan.version, plan.correlation_id);
    let client_id = plan.client_id.clone();
    let user = plan.user.clone();
    let from_replica = plan.replica.is_some();
    let mut spliced = Vec::new();
    let response = build_response(plan, parts, &leaders, &mut spliced);
    let outcome = match encode_fetch_response(version, correlation_id, response, spliced) {
        Ok(frame) => Outcome::Respond(frame),
        Err(err) => Outcome::Close(err.to_string()),
    };
    if from_replica {
        // Replication traffic is not a client's: no consumer_byte_rate (Kafka has separate
        // replication quotas).
        return outcome;
    }
    apply_quota(ctx, outcome, (version, correlation_id), (&user, client_id.as_deref()))
}

/// Counts the response against the client's `consumer_byte_rate`; over quota, the data is
/// taken back and an empty response carries the throttle time (Kafka's throttled fetch:
/// the client fetches the same offsets again once unmuted).
fn apply_quota(
    ctx: &ShardCtx,
    outcome: Outcome,
    (version, correlation_id): (i16, i32),
    who: (&str, Option<&str>),
) -> Outcome {
    use super::throttle;
    let Outcome::Respond(frame) = &outcome else { return outcome };
    let bytes = frame.len() as u64;
    let ms = throttle::record(ctx, QuotaKind::Fetch, who, bytes);
    if ms == 0 {
        return outcome;
    }
    throttle::unrecord(ctx, QuotaKind::Fetch, who, bytes);
    let empty =
        FetchResponse::default().with_session_id(0).with_throttle_time_ms(throttle::as_field(ms));
    let empty = respond(ApiKey::Fetch, version, correlation_id, &empty);
    throttle::wrap(empty, ms, version >= CLIENT_THROTTLE_VERSION)
}

async fn read_all(ctx: &Rc<ShardCtx>, plan: &Plan) -> Vec<FetchPart> {
    let mut scatter = Scatter::default();
    for w in &plan.wanted {
        let target = match (w.refused, w.owner) {
            (Some(error), _) => Err(error),
            (None, Some(owner)) => Ok(owner),
            (None, None) => Err(ResponseError::UnknownTopicOrPartition),
        };
        scatter.push((), target, || fetch_op(plan, w));
    }
    let outcomes = scatter.send(ctx).await.gather().await;
    outcomes
        .into_iter()
        .map(|((), outcome)| match outcome {
            Ok(PartitionResult::Fetch(part)) => part,
            other => FetchPart {
                error: Some(route::error_of(other)),
                high_watermark: -1,
                last_stable_offset: -1,
                log_start_offset: -1,
                records: SendRecords::default(),
                diverging_epoch: None,
                aborted: None,
            },
        })
        .collect()
}

/// The partition-level operation for one wanted partition: a consumer's or a follower's.
fn fetch_op(plan: &Plan, w: &Wanted) -> PartitionOp {
    let Some((replica, broker_epoch)) = plan.replica else {
        return PartitionOp::Fetch {
            topic: w.name.clone(),
            partition: w.partition,
            fetch_offset: w.fetch_offset,
            max_bytes: w.max_bytes,
            current_leader_epoch: w.current_leader_epoch,
            read_committed: plan.read_committed,
        };
    };
    PartitionOp::ReplicaFetch(ReplicaFetchOp {
        topic: w.name.clone(),
        partition: w.partition,
        current_leader_epoch: w.current_leader_epoch,
        request: ReplicaFetchRequest {
            replica,
            broker_epoch,
            fetch_offset: Offset(w.fetch_offset),
            last_fetched_epoch: Epoch(w.last_fetched_epoch),
            max_bytes: w.max_bytes,
            epoch_given: w.current_leader_epoch >= 0,
        },
    })
}

/// Asks each owner shard to report when one of its partitions has new data; returns at
/// the first report or when `wait` elapses.
async fn wait_for_data(ctx: &Rc<ShardCtx>, plan: &Plan, wait: Duration) {
    let mut by_shard: BTreeMap<ShardId, Vec<(String, i32, i64)>> = BTreeMap::new();
    for w in &plan.wanted {
        if let Some(owner) = w.owner {
            by_shard.entry(owner).or_default().push((w.name.clone(), w.partition, w.fetch_offset));
        }
    }
    let max_wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
    let mut pending = Vec::with_capacity(by_shard.len());
    for (shard, partitions) in by_shard {
        let spec = WaitSpec {
            partitions,
            max_wait_ms,
            replica: plan.replica.is_some(),
            read_committed: plan.read_committed,
        };
        pending.push(ctx.call(shard, ShardRequest::WaitForData(spec)).await);
    }
    if pending.is_empty() {
        crate::shard::sleep(wait).await;
        return;
    }
    let first = futures::future::select_all(pending);
    match crate::shard::with_timeout(wait, first).await {
        Some((Ok(ShardReply::DataReady), _, _)) | None => {}
        Some((_, _, _)) => tracing::debug!("fetch wait ended by an unreachable shard"),
    }
}

/// Drops data beyond the response budget, except the first non-empty partition's.
fn trim_to_max_bytes(parts: &mut [FetchPart], max_bytes: usize) {
    let mut budget = max_bytes;
    let mut first = true;
    for part in parts.iter_mut().filter(|p| !p.records.is_empty()) {
        if first || part.records.len() <= budget {
            budget = budget.saturating_sub(part.records.len());
            first = false;
        } else {
            part.records = SendRecords::default();
        }
    }
}

/// KIP-951: the advertised endpoint (host, port, rack) of `node` for a leader hint: this
/// broker's own from its config, another broker's from its registration in the image (its
/// endpoint of the client's `listener`, as Metadata advertises; none while fenced or
/// unregistered).
pub(crate) fn node_endpoint(
    image: &crate::controller::MetadataImage,
    (me, host, port): (i32, &str, i32),
    node: i32,
    listener: &str,
) -> Option<(String, i32, Option<String>)> {
    if node == me {
        return Some((host.to_string(), port, None));
    }
    let b = image.brokers.get(&crate::types::NodeId(node)).filter(|b| !b.fenced)?;
    let e = b.endpoint(listener)?;
    Some((e.host.clone(), i32::from(e.port), b.rack.clone()))
}

/// What KIP-951 needs to point a client at a partition's leader: read from the image
/// when the response is built.
struct Leaders {
    image: std::sync::Arc<crate::controller::MetadataImage>,
    /// This broker's advertised endpoint of the client's listener.
    node: (i32, String, i32),
    /// The client's listener.
    listener: std::rc::Rc<str>,
}

impl Leaders {
    fn of(ctx: &ShardCtx, listener: &std::rc::Rc<str>) -> Self {
        let c = &ctx.config;
        let (host, port) = c.advertised(Some(listener)).unwrap_or(("", 0));
        Self {
            image: ctx.image(),
            node: (c.node_id.0, host.to_string(), i32::from(port)),
            listener: listener.clone(),
        }
    }

    /// The current leader and epoch of a partition, if the image knows it.
    fn leader(&self, topic: &str, partition: i32) -> Option<(i32, i32)> {
        self.image.partition(topic, partition).map(|p| (p.leader.0, p.leader_epoch.0))
    }

    /// The endpoint of `node`: this broker or a live registered one.
    fn endpoint(&self, node: i32) -> Option<NodeEndpoint> {
        let (id, host, port) = &self.node;
        let (host, port, rack) =
            node_endpoint(&self.image, (*id, host, *port), node, &self.listener)?;
        Some(
            NodeEndpoint::default()
                .with_node_id(BrokerId(node))
                .with_host(StrBytes::from_string(host))
                .with_port(port)
                .with_rack(rack.map(StrBytes::from_string)),
        )
    }
}

/// The response for `parts`; records in several pieces go to `spliced` (by topic and
/// partition index, in response order) for the encoder to write in place, not into the
/// response.
fn build_response(
    plan: Plan,
    parts: Vec<FetchPart>,
    leaders: &Leaders,
    spliced: &mut SplicedRecords,
) -> FetchResponse {
    let mut response = FetchResponse::default()
        .with_session_id(0)
        .with_error_code(plan.session_error.map_or(0, |e| e.code()));
    if plan.session_error.is_some() {
        return response;
    }
    // Fields outside the request's version must keep their defaults (the codec refuses
    // to encode them otherwise): the name before v13, the id from v13.
    response.responses = plan
        .topics
        .into_iter()
        .map(|topic| {
            if plan.version >= TOPIC_ID_VERSION {
                FetchableTopicResponse::default().with_topic_id(topic.id)
            } else {
                FetchableTopicResponse::default().with_topic(topic.name)
            }
        })
        .collect();
    for (w, part) in plan.wanted.iter().zip(parts) {
        let mut data = PartitionData::default()
            .with_partition_index(w.partition)
            .with_error_code(part.error.map_or(0, |e| e.code()))
            .with_high_watermark(part.high_watermark)
            .with_last_stable_offset(part.last_stable_offset)
            .with_log_start_offset(if plan.version >= 5 { part.log_start_offset } else { -1 })
            .with_preferred_read_replica(BrokerId(-1))
            .with_aborted_transactions(crate::partition::transactions::aborted_field(part.aborted));
        if part.records.pieces().len() > 1 {
            data.records = Some(Bytes::new());
            let index = response.responses[w.topic].partitions.len();
            spliced.push(((w.topic, index), part.records));
        } else {
            data.records = Some(part.records.to_bytes());
        }
        if let (Some((epoch, end)), true) =
            (part.diverging_epoch, plan.version >= DIVERGING_EPOCH_VERSION)
        {
            data.diverging_epoch = EpochEndOffset::default().with_epoch(epoch).with_end_offset(end);
        }
        let leader_error = matches!(
            part.error,
            Some(ResponseError::NotLeaderOrFollower | ResponseError::FencedLeaderEpoch)
        );
        if plan.version >= CURRENT_LEADER_VERSION && leader_error {
            if let Some((leader, epoch)) = leaders.leader(&w.name, w.partition) {
                data = data.with_current_leader(
                    LeaderIdAndEpoch::default()
                        .with_leader_id(BrokerId(leader))
                        .with_leader_epoch(epoch),
                );
                let listed = response.node_endpoints.iter().any(|n| n.node_id.0 == leader);
                if let (false, Some(endpoint)) = (listed, leaders.endpoint(leader)) {
                    response.node_endpoints.push(endpoint);
                }
            }
        }
        response.responses[w.topic].partitions.push(data);
    }
    response
}

/// An image of one topic "t" (partition 0 led by node 1 at epoch 7), for unit tests.
#[cfg(test)]
pub(crate) fn one_partition_image() -> crate::controller::MetadataImage {
    use crate::controller::{MetadataImage, PartitionImage, TopicImage};
    use crate::types::{Epoch, NodeId};
    let id = Uuid::new_v4();
    let topic = TopicImage {
        name: "t".into(),
        topic_id: id,
        internal: false,
        configs: BTreeMap::new(),
        config: Default::default(),
        partitions: vec![PartitionImage {
            index: 0,
            owner_shard: ShardId(0),
            hosted: true,
            leader: NodeId(1),
            leader_epoch: Epoch(7),
            replicas: vec![NodeId(1)],
            isr: vec![NodeId(1)],
            elr: Vec::new(),
            last_known_elr: Vec::new(),
        }],
    };
    MetadataImage {
        scram_credentials: std::sync::Arc::default(),
        acls: std::sync::Arc::default(),
        version: 1,
        cluster_id: "c".into(),
        node_id: NodeId(1),
        controller_id: NodeId(1),
        shard_count: 1,
        topics: [("t".to_string(), std::sync::Arc::new(topic))].into_iter().collect(),
        topic_ids: [(id, "t".to_string())].into_iter().collect(),
        broker_defaults: Default::default(),
        client_quotas: Default::default(),
        brokers: Default::default(),
        reassignments: Default::default(),
    }
}

/// [`one_partition_image`] seen from another broker: node 1 (the leader) registered with
/// endpoint b1:9192 in rack r1, node 2 registered but fenced.
#[cfg(test)]
pub(crate) fn remote_leader_image() -> crate::controller::MetadataImage {
    use crate::controller::records::BrokerEndpoint;
    use crate::controller::BrokerImage;
    use crate::types::NodeId;
    let broker = |host: &str, fenced| BrokerImage {
        epoch: 1,
        incarnation_id: Uuid::nil(),
        endpoints: vec![BrokerEndpoint {
            listener: "PLAINTEXT".into(),
            host: host.into(),
            port: 9192,
            security_protocol: 0,
        }],
        rack: Some("r1".into()),
        fenced,
    };
    let mut image = one_partition_image();
    image.brokers = std::sync::Arc::new(
        [(NodeId(1), broker("b1", false)), (NodeId(2), broker("b2", true))].into(),
    );
    image
}

#[cfg(test)]
mod tests {
    use super::*;

    /// KIP-951 from a broker that is not the leader: the leader's registered endpoint; a
    /// fenced or unknown broker gives none.
    #[test]
    fn leader_hint_names_a_remote_leader_from_its_registration() {
        let l = Leaders {
            image: std::sync::Arc::new(remote_leader_image()),
            node: (3, "h3".into(), 9292),
            listener: "PLAINTEXT".into(),
        };
        let e = l.endpoint(1).unwrap();
        assert_eq!((e.node_id.0, e.host.as_str(), e.port), (1, "b1", 9192));
        assert_eq!(e.rack.as_ref().map(|r| r.as_str()), Some("r1"));
        assert!(l.endpoint(2).is_none(), "fenced");
        assert!(l.endpoint(4).is_none(), "unknown");
        assert_eq!(l.endpoint(3).unwrap().host.as_str(), "h3", "itself");
        let r = build_response(
            plan(16, &[0]),
            vec![failed(ResponseError::NotLeaderOrFollower)],
            &l,
            &mut Vec::new(),
        );
        let p = &r.responses[0].partitions[0];
        assert_eq!((p.current_leader.leader_id.0, p.current_leader.leader_epoch), (1, 7));
        assert_eq!(r.node_endpoints.len(), 1);
        assert_eq!(r.node_endpoints[0].host.as_str(), "b1");
    }

    fn part(len: usize) -> FetchPart {
        FetchPart {
            error: None,
            high_watermark: 0,
            last_stable_offset: 0,
            log_start_offset: 0,
            records: SendRecords::one(Bytes::from(vec![0u8; len])),
            diverging_epoch: None,
            aborted: None,
        }
    }

    fn leaders() -> Leaders {
        Leaders {
            image: std::sync::Arc::new(one_partition_image()),
            node: (1, "h".into(), 9092),
            listener: "PLAINTEXT".into(),
        }
    }

    fn plan(version: i16, partitions: &[i32]) -> Plan {
        Plan {
            listener: "PLAINTEXT".into(),
            version,
            correlation_id: 1,
            topics: vec![TopicKey {
                name: TopicName(StrBytes::from_static_str("t")),
                id: Uuid::nil(),
            }],
            wanted: partitions
                .iter()
                .map(|&partition| Wanted {
                    topic: 0,
                    name: "t".into(),
                    partition,
                    fetch_offset: 0,
                    max_bytes: 100,
                    current_leader_epoch: -1,
                    last_fetched_epoch: -1,
                    owner: Some(ShardId(0)),
                    refused: None,
                })
                .collect(),
            min_bytes: 0,
            max_bytes: 100,
            max_wait: Duration::ZERO,
            session_error: None,
            client_id: None,
            user: String::new(),
            replica: None,
            read_committed: false,
        }
    }

    fn failed(error: ResponseError) -> FetchPart {
        FetchPart { error: Some(error), ..part(0) }
    }

    /// KIP-951: from v16 a leader error names the current leader and its endpoint, once
    /// per node; other errors, and older versions, leave both at their defaults.
    #[test]
    fn leader_errors_carry_the_current_leader_from_v16() {
        let parts = || {
            vec![
                failed(ResponseError::FencedLeaderEpoch),
                failed(ResponseError::NotLeaderOrFollower),
                failed(ResponseError::UnknownLeaderEpoch),
            ]
        };
        let r = build_response(plan(16, &[0, 0, 0]), parts(), &leaders(), &mut Vec::new());
        let current: Vec<(i32, i32)> = r.responses[0]
            .partitions
            .iter()
            .map(|p| (p.current_leader.leader_id.0, p.current_leader.leader_epoch))
            .collect();
        assert_eq!(current, vec![(1, 7), (1, 7), (-1, -1)]);
        assert_eq!(r.node_endpoints.len(), 1);
        assert_eq!((r.node_endpoints[0].node_id.0, r.node_endpoints[0].port), (1, 9092));
        assert_eq!(r.responses[0].topic_id, Uuid::nil(), "v13+ answers by id");
        assert!(r.responses[0].topic.0.is_empty());

        let r = build_response(
            plan(15, &[0]),
            vec![failed(ResponseError::FencedLeaderEpoch)],
            &leaders(),
            &mut Vec::new(),
        );
        assert_eq!(r.responses[0].partitions[0].current_leader.leader_id.0, -1);
        assert!(r.node_endpoints.is_empty());
        let r = build_response(plan(12, &[0]), vec![part(1)], &leaders(), &mut Vec::new());
        assert_eq!(r.responses[0].topic.0.as_str(), "t", "v12 answers by name");
    }

    #[test]
    fn first_non_empty_partition_is_kept_whole() {
        let mut parts = vec![part(0), part(100), part(30), part(50)];
        trim_to_max_bytes(&mut parts, 60);
        let lens: Vec<usize> = parts.iter().map(|p| p.records.len()).collect();
        assert_eq!(lens, vec![0, 100, 0, 0]);
        let mut parts = vec![part(10), part(30), part(50)];
        trim_to_max_bytes(&mut parts, 60);
        let lens: Vec<usize> = parts.iter().map(|p| p.records.len()).collect();
        assert_eq!(lens, vec![10, 30, 0]);
    }
}
