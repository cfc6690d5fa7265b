//! Finding a group's coordinator shard and calling it; creating `__consumer_offsets` on
//! first use through the controller (as a CreateTopics request with Kafka's settings for
//! the topic: `offsets.topic.num.partitions` partitions, `offsets.topic.segment.bytes`
//! segments, compacted).
//!
//! Runs on the connection's shard.

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::{GroupAnswer, GroupCall};
use crate::constants::OFFSETS_TOPIC_READY_WAIT_MS_MAX;
use crate::group::placement::{partition_for, OFFSETS_TOPIC};
use crate::group::types::GroupError;
use crate::server::call::{Pending, ShardReply, ShardRequest};
use crate::server::control::{call_controller, ControllerReply, ControllerRequest};
use crate::shard::ShardCtx;
use crate::types::ShardId;

/// CreateTopics version used for the internal request.
const CREATE_TOPICS_VERSION: i16 = 2;

/// Partition count of `__consumer_offsets`, if it exists.
#[must_use]
pub fn offsets_partitions(ctx: &ShardCtx) -> Option<i32> {
    let image = ctx.image();
    let topic = image.topics.get(OFFSETS_TOPIC)?;
    i32::try_from(topic.partitions.len()).ok().filter(|n| *n > 0)
}

/// The shard coordinating `group_id`, per the cached metadata image.
pub fn coordinator_shard(ctx: &ShardCtx, group_id: &str) -> Result<ShardId, GroupError> {
    let n = offsets_partitions(ctx).ok_or(GroupError::CoordinatorNotAvailable)?;
    let partition = partition_for(group_id, n);
    ctx.owner_of(OFFSETS_TOPIC, partition)
        .map(|(shard, _)| shard)
        .ok_or(GroupError::CoordinatorNotAvailable)
}

/// Sends `call` to the group's coordinator shard; the returned future gathers the answer.
/// The send happens before this returns, so calls keep the connection's order.
pub async fn call_group(
    ctx: &Rc<ShardCtx>,
    call: GroupCall,
) -> impl std::future::Future<Output = GroupAnswer> {
    call_group_if(ctx, Ok(call)).await
}

/// [`call_group`] for a call its principal may make (`Ok`); otherwise (`Err`: the
/// authorization error) nothing is sent and the answer is that error.
pub async fn call_group_if(
    ctx: &Rc<ShardCtx>,
    call: Result<GroupCall, GroupError>,
) -> impl std::future::Future<Output = GroupAnswer> {
    let shard = match &call {
        Ok(call) => match call.group_id() {
            Some(group) => coordinator_shard(ctx, group),
            None => Err(GroupError::CoordinatorNotAvailable),
        },
        Err(e) => Err(*e),
    };
    let pending: Result<Pending, GroupError> = match (shard, call) {
        (Ok(shard), Ok(call)) => Ok(ctx.call(shard, ShardRequest::Group(call)).await),
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    async move {
        match pending {
            Ok(pending) => answer(pending.await),
            Err(e) => GroupAnswer::Failed(e),
        }
    }
}

/// Sends a shard-wide call to one shard.
pub async fn call_shard(ctx: &Rc<ShardCtx>, shard: ShardId, call: GroupCall) -> GroupAnswer {
    answer(ctx.call(shard, ShardRequest::Group(call)).await.await)
}

fn answer(reply: Result<ShardReply, crate::shard::MeshError>) -> GroupAnswer {
    match reply {
        Ok(ShardReply::Group(answer)) => answer,
        Ok(_) => GroupAnswer::Failed(GroupError::CoordinatorNotAvailable),
        Err(err) => {
            tracing::warn!("group coordinator unreachable: {err}");
            GroupAnswer::Failed(GroupError::CoordinatorNotAvailable)
        }
    }
}

/// Makes sure `__consumer_offsets` exists and every shard has opened its partitions, creating
/// it on first use (Kafka creates it lazily too, on the first FindCoordinator).
///
/// The metadata image reaches a shard *before* the shards open the new partitions, so the
/// topic being in the image is not enough: a FindCoordinator answered then sent clients to
/// a coordinator that answered NOT_COORDINATOR (issue 12). Instead each shard asks the
/// controller once (a CreateTopics that may find the topic there): the controller runs one
/// operation at a time, publication to every shard included, so its answer comes only once
/// every partition is open. Kafka answers COORDINATOR_NOT_AVAILABLE at once while it creates
/// the topic and lets the client retry; we hold the first FindCoordinator until the topic is
/// ready instead (usually well under a second), so clients see no error and skip a retry
/// backoff (librdkafka waits about a second between coordinator queries). Past
/// `OFFSETS_TOPIC_READY_WAIT_MS_MAX` the answer is COORDINATOR_NOT_AVAILABLE, as from Kafka.
pub async fn ensure_offsets_topic(ctx: &Rc<ShardCtx>) -> Result<(), GroupError> {
    if crate::server::broker::of(ctx).offsets_topic_ready.get() {
        return Ok(());
    }
    let wait = std::time::Duration::from_millis(OFFSETS_TOPIC_READY_WAIT_MS_MAX);
    crate::shard::with_timeout(wait, create_offsets_topic(ctx))
        .await
        .unwrap_or(Err(GroupError::CoordinatorNotAvailable))?;
    if offsets_partitions(ctx).is_none() {
        return Err(GroupError::CoordinatorNotAvailable);
    }
    crate::server::broker::of(ctx).offsets_topic_ready.set(true);
    Ok(())
}

/// CreateTopics for `__consumer_offsets` through the controller; TOPIC_ALREADY_EXISTS is
/// success (another shard or an earlier run created it). Kafka's settings for the topic:
/// compacted, `compression.type=producer`, and no `min.insync.replicas` of its own (the
/// broker's applies).
async fn create_offsets_topic(ctx: &Rc<ShardCtx>) -> Result<(), GroupError> {
    let config = &ctx.config;
    let topic = InternalTopic {
        name: OFFSETS_TOPIC,
        partitions: config.offsets_topic_num_partitions,
        replication_factor: config.offsets_topic_replication_factor,
        segment_bytes: config.offsets_topic_segment_bytes,
        min_insync_replicas: None,
    };
    create_internal_topic(ctx, &topic).await
}

/// How an internal topic is created (Kafka's `offsets.topic.*` / `transaction.state.log.*`).
pub struct InternalTopic {
    pub name: &'static str,
    pub partitions: i32,
    /// The configured factor; capped by the live unfenced brokers at creation, as Kafka.
    pub replication_factor: i32,
    pub segment_bytes: i32,
    /// The topic's `min.insync.replicas` (`transaction.state.log.min.isr`), if set.
    pub min_insync_replicas: Option<i32>,
}

/// The replication factor an internal topic gets: the configured one, at most the number
/// of live unfenced brokers in the image (one while no broker registered: a single node).
#[must_use]
pub fn capped_replication_factor(ctx: &ShardCtx, configured: i32) -> i16 {
    let image = ctx.image();
    let live = image.brokers.values().filter(|b| !b.fenced).count().max(1);
    let live = i32::try_from(live).unwrap_or(i32::MAX);
    i16::try_from(configured.clamp(1, live)).unwrap_or(1)
}

/// CreateTopics for an internal compacted topic (`__consumer_offsets`,
/// `__transaction_state`) through the controller; TOPIC_ALREADY_EXISTS is success.
pub async fn create_internal_topic(
    ctx: &Rc<ShardCtx>,
    topic: &InternalTopic,
) -> Result<(), GroupError> {
    let rf = capped_replication_factor(ctx, topic.replication_factor);
    let name = topic.name;
    let frame = create_request(topic, rf).map_err(|_| GroupError::CoordinatorNotAvailable)?;
    let req = ControllerRequest::Admin {
        api: ApiKey::CreateTopics,
        version: CREATE_TOPICS_VERSION,
        frame,
    };
    match call_controller(ctx, req).await {
        ControllerReply::Encoded(frame) => check_created(frame),
        ControllerReply::Done => Ok(()),
        ControllerReply::Rejected(reason) => {
            tracing::warn!("creating {name} failed: {reason}");
            Err(GroupError::CoordinatorNotAvailable)
        }
    }
}

fn create_request(t: &InternalTopic, replication_factor: i16) -> anyhow::Result<Bytes> {
    let config = |name: &str, value: &str| {
        CreatableTopicConfig::default()
            .with_name(StrBytes::from_string(name.into()))
            .with_value(Some(StrBytes::from_string(value.into())))
    };
    let mut configs = vec![
        config("cleanup.policy", "compact"),
        config("compression.type", "producer"),
        config("segment.bytes", &t.segment_bytes.to_string()),
    ];
    if let Some(min_isr) = t.min_insync_replicas {
        configs.push(config("min.insync.replicas", &min_isr.to_string()));
    }
    let topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_static_str(t.name)))
        .with_num_partitions(t.partitions)
        .with_replication_factor(replication_factor)
        .with_configs(configs);
    let body = CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(30_000);
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::CreateTopics as i16)
        .with_request_api_version(CREATE_TOPICS_VERSION)
        .with_client_id(Some(StrBytes::from_static_str("shardlog-group-coordinator")));
    let mut buf = BytesMut::new();
    header.encode(&mut buf, ApiKey::CreateTopics.request_header_version(CREATE_TOPICS_VERSION))?;
    body.encode(&mut buf, CREATE_TOPICS_VERSION)?;
    Ok(buf.freeze())
}

/// Accepts success and TOPIC_ALREADY_EXISTS (a concurrent creation).
fn check_created(frame: Bytes) -> Result<(), GroupError> {
    let mut body = frame.slice(4.min(frame.len())..);
    let version = CREATE_TOPICS_VERSION;
    let decoded =
        ResponseHeader::decode(&mut body, ApiKey::CreateTopics.response_header_version(version))
            .and_then(|_| CreateTopicsResponse::decode(&mut body, version));
    let Ok(response) = decoded else { return Err(GroupError::CoordinatorNotAvailable) };
    let already_exists = kafka_protocol::error::ResponseError::TopicAlreadyExists.code();
    match response.topics.first().map(|t| t.error_code) {
        Some(0) => Ok(()),
        Some(code) if code == already_exists => Ok(()),
        other => {
            tracing::warn!("creating {OFFSETS_TOPIC} failed with error {other:?}");
            Err(GroupError::CoordinatorNotAvailable)
        }
    }
}
