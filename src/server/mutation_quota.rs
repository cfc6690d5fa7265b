//! `controller_mutation_rate` (KIP-599) at the door of the controller APIs: on the
//! connection's shard, before CreateTopics, CreatePartitions or DeleteTopics go to the
//! controller, counts the request's partition mutations against the client's budget
//! ([`crate::quota::mutation`]). Over quota, a strict version (CreateTopics ≥ v6,
//! CreatePartitions ≥ v3, DeleteTopics ≥ v5) is answered here, every topic with
//! THROTTLING_QUOTA_EXCEEDED and the response with `throttle_time_ms`; an older version is
//! forwarded and its response delayed by the throttle time. Never dropped.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    ApiKey, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
    CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::dispatch::{respond, Outcome};
use crate::protocol::decode_request;
use crate::quota::mutation::{MutationBuckets, Verdict};
use crate::quota::Principal;
use crate::shard::ShardCtx;

/// What the connection does with a mutating admin request.
pub enum Gate {
    /// Send it to the controller; delay the answer by this many ms (0: not at all).
    Forward { delay_ms: u64 },
    /// Answer this instead (strict version over quota).
    Answer(Outcome),
}

/// Builds the THROTTLING_QUOTA_EXCEEDED answer of a request, given its throttle time.
type Refusal = Box<dyn Fn(i32) -> Outcome>;

/// The first strict (KIP-599) version of each API.
fn strict_from(api: ApiKey) -> Option<i16> {
    match api {
        ApiKey::CreateTopics => Some(6),
        ApiKey::CreatePartitions => Some(3),
        ApiKey::DeleteTopics => Some(5),
        _ => None,
    }
}

fn message() -> Option<StrBytes> {
    Some(StrBytes::from_static_str("The throttling quota has been exceeded."))
}

/// Checks a CreateTopics, CreatePartitions or DeleteTopics request; any other passes.
pub fn gate(
    ctx: &ShardCtx,
    api: ApiKey,
    version: i16,
    frame: &Bytes,
    principal: &Principal,
) -> Result<Gate, String> {
    let Some(strict_version) = strict_from(api) else { return Ok(Gate::Forward { delay_ms: 0 }) };
    let image = ctx.image();
    if image.client_quotas.entities.is_empty() {
        return Ok(Gate::Forward { delay_ms: 0 });
    }
    let strict = version >= strict_version;
    let code = ResponseError::ThrottlingQuotaExceeded.code();
    let partitions_of = |name: &str| image.topic(name).map_or(0, |t| t.partitions.len());

    let (header_client, mutations, refuse): (Option<String>, usize, Refusal) = match api {
        ApiKey::CreateTopics => {
            let (h, r) = decode_request::<CreateTopicsRequest>(frame.clone(), api, version)
                .map_err(|e| e.to_string())?;
            let default = usize::try_from(image.broker_defaults.num_partitions).unwrap_or(1);
            let n = r
                .topics
                .iter()
                .map(|t| match usize::try_from(t.num_partitions) {
                    Ok(n) => n,
                    Err(_) if !t.assignments.is_empty() => t.assignments.len(),
                    Err(_) => default,
                })
                .sum();
            let cid = h.correlation_id;
            let refuse = move |ms: i32| {
                let topics = r
                    .topics
                    .iter()
                    .map(|t| {
                        CreatableTopicResult::default()
                            .with_name(t.name.clone())
                            .with_error_code(code)
                            .with_error_message(message())
                            .with_num_partitions(-1)
                            .with_replication_factor(-1)
                    })
                    .collect();
                let resp =
                    CreateTopicsResponse::default().with_throttle_time_ms(ms).with_topics(topics);
                respond(api, version, cid, &resp)
            };
            (h.client_id.map(|c| c.to_string()), n, Box::new(refuse))
        }
        ApiKey::CreatePartitions => {
            let (h, r) = decode_request::<CreatePartitionsRequest>(frame.clone(), api, version)
                .map_err(|e| e.to_string())?;
            let n = r
                .topics
                .iter()
                .map(|t| {
                    usize::try_from(t.count).unwrap_or(0).saturating_sub(partitions_of(&t.name))
                })
                .sum();
            let cid = h.correlation_id;
            let refuse = move |ms: i32| {
                let results = r
                    .topics
                    .iter()
                    .map(|t| {
                        CreatePartitionsTopicResult::default()
                            .with_name(t.name.clone())
                            .with_error_code(code)
                            .with_error_message(message())
                    })
                    .collect();
                let resp = CreatePartitionsResponse::default()
                    .with_throttle_time_ms(ms)
                    .with_results(results);
                respond(api, version, cid, &resp)
            };
            (h.client_id.map(|c| c.to_string()), n, Box::new(refuse))
        }
        _ => {
            let (h, r) = decode_request::<DeleteTopicsRequest>(frame.clone(), api, version)
                .map_err(|e| e.to_string())?;
            let names: Vec<(Option<TopicName>, uuid::Uuid)> = if r.topics.is_empty() {
                r.topic_names.iter().map(|n| (Some(n.clone()), Default::default())).collect()
            } else {
                r.topics.iter().map(|t| (t.name.clone(), t.topic_id)).collect()
            };
            let n = names
                .iter()
                .map(|(name, id)| match name {
                    Some(name) => partitions_of(name),
                    None => image.topic_by_id(id).map_or(0, |t| t.partitions.len()),
                })
                .sum();
            let cid = h.correlation_id;
            let refuse = move |ms: i32| {
                let responses = names
                    .iter()
                    .map(|(name, id)| {
                        DeletableTopicResult::default()
                            .with_name(name.clone())
                            .with_topic_id(*id)
                            .with_error_code(code)
                            .with_error_message(message())
                    })
                    .collect();
                let resp = DeleteTopicsResponse::default()
                    .with_throttle_time_ms(ms)
                    .with_responses(responses);
                respond(api, version, cid, &resp)
            };
            (h.client_id.map(|c| c.to_string()), n, Box::new(refuse))
        }
    };
    let who = (principal.name(), header_client.as_deref().unwrap_or(""));
    let mutations = u32::try_from(mutations).unwrap_or(u32::MAX);
    let now_ms = ctx.quota_clock_ms();
    let verdict = MutationBuckets::global().check(
        &image.client_quotas,
        ctx.config.quota_window,
        who,
        mutations,
        strict,
        now_ms,
    );
    Ok(match verdict {
        Verdict::Allow { throttle_ms } => Gate::Forward { delay_ms: throttle_ms },
        Verdict::Refuse { throttle_ms } => {
            Gate::Answer(refuse(super::throttle::as_field(throttle_ms)))
        }
    })
}
