//! Fetch: reads every requested partition on its owner shard; if fewer than `min_bytes`
//! came back, waits (up to `max_wait_ms`) for an append on any of them, then reads
//! again. Stored batches are returned as-is (no re-encoding). `max_bytes` bounds the
//! response except for the first non-empty partition, which always gets at least one
//! whole batch (KIP-74). No fetch sessions: the answer carries session id 0, which tells
//! clients to keep sending full requests.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName};

use super::call::{ShardReply, ShardRequest};
use super::dispatch::{respond, Outcome, ResponseFuture};
use super::route::Routed;
use crate::constants::FETCH_MAX_WAIT_MS_CAP;
use crate::partition::ops::{FetchPart, PartitionOp, PartitionResult, WaitSpec};
use crate::protocol::decode_request;
use crate::shard::ShardCtx;
use crate::types::ShardId;

/// 4 is the Kafka 4 floor (and what librdkafka needs to use v2 batches); 13 needs
/// topic ids.
pub const VERSIONS: (i16, i16) = (4, 12);

struct Wanted {
    topic: usize,
    name: String,
    partition: i32,
    fetch_offset: i64,
    max_bytes: usize,
    current_leader_epoch: i32,
    owner: Option<ShardId>,
}

struct Plan {
    version: i16,
    correlation_id: i32,
    topics: Vec<TopicName>,
    wanted: Vec<Wanted>,
    min_bytes: usize,
    max_bytes: usize,
    max_wait: Duration,
    session_error: Option<ResponseError>,
}

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
) -> Result<ResponseFuture, String> {
    let (header, req) =
        decode_request::<FetchRequest>(frame, ApiKey::Fetch, version).map_err(|e| e.to_string())?;
    let max_bytes = usize::try_from(req.max_bytes).unwrap_or(0);
    let mut wanted = Vec::new();
    let mut topics = Vec::with_capacity(req.topics.len());
    for (t, topic) in req.topics.into_iter().enumerate() {
        let name = topic.topic.0.to_string();
        for p in topic.partitions {
            wanted.push(Wanted {
                topic: t,
                owner: ctx.owner_of(&name, p.partition).map(|(shard, _)| shard),
                name: name.clone(),
                partition: p.partition,
                fetch_offset: p.fetch_offset,
                max_bytes: usize::try_from(p.partition_max_bytes).unwrap_or(0).min(max_bytes),
                current_leader_epoch: p.current_leader_epoch,
            });
        }
        topics.push(topic.topic);
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
    respond(ApiKey::Fetch, plan.version, plan.correlation_id, &build_response(plan, parts))
}

async fn read_all(ctx: &Rc<ShardCtx>, plan: &Plan) -> Vec<FetchPart> {
    let mut routed = Routed::default();
    for (slot, w) in plan.wanted.iter().enumerate() {
        if let Some(owner) = w.owner {
            let op = PartitionOp::Fetch {
                topic: w.name.clone(),
                partition: w.partition,
                fetch_offset: w.fetch_offset,
                max_bytes: w.max_bytes,
                current_leader_epoch: w.current_leader_epoch,
            };
            routed.push(owner, slot, op);
        }
    }
    let results = routed.send(ctx).await.gather(plan.wanted.len()).await;
    plan.wanted
        .iter()
        .zip(results)
        .map(|(w, result)| match result {
            Some(PartitionResult::Fetch(part)) => part,
            _ => FetchPart {
                error: Some(if w.owner.is_none() {
                    ResponseError::UnknownTopicOrPartition
                } else {
                    ResponseError::NotLeaderOrFollower
                }),
                high_watermark: -1,
                log_start_offset: -1,
                records: Bytes::new(),
            },
        })
        .collect()
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
        let spec = WaitSpec { partitions, max_wait_ms };
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
            part.records = Bytes::new();
        }
    }
}

fn build_response(plan: Plan, parts: Vec<FetchPart>) -> FetchResponse {
    let mut response = FetchResponse::default()
        .with_session_id(0)
        .with_error_code(plan.session_error.map_or(0, |e| e.code()));
    if plan.session_error.is_some() {
        return response;
    }
    response.responses = plan
        .topics
        .into_iter()
        .map(|topic| FetchableTopicResponse::default().with_topic(topic))
        .collect();
    for (w, part) in plan.wanted.iter().zip(parts) {
        let data = PartitionData::default()
            .with_partition_index(w.partition)
            .with_error_code(part.error.map_or(0, |e| e.code()))
            .with_high_watermark(part.high_watermark)
            .with_last_stable_offset(part.high_watermark)
            .with_log_start_offset(if plan.version >= 5 { part.log_start_offset } else { -1 })
            .with_preferred_read_replica(BrokerId(-1))
            .with_records(Some(part.records));
        response.responses[w.topic].partitions.push(data);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(len: usize) -> FetchPart {
        FetchPart {
            error: None,
            high_watermark: 0,
            log_start_offset: 0,
            records: Bytes::from(vec![0u8; len]),
        }
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
