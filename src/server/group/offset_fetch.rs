//! OffsetFetch: one group (v1–v7, all partitions when topics is null from v2) or several
//! groups in one request (v8+), each answered by its coordinator shard.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    ApiKey, GroupId, OffsetFetchRequest, OffsetFetchResponse, TopicName,
};

use super::{error_code, str_bytes, GroupAnswer, GroupCall};
use crate::authz::{Operation, ResourceType};
use crate::group::types::{Committed, GroupError};
use crate::protocol::decode_request;
use crate::server::authz::{Auth, Authorize};
use crate::server::dispatch::{respond, ResponseFuture};
use crate::shard::ShardCtx;

/// 1 is Kafka 4's floor; 10 (topic ids) is not served.
pub const VERSIONS: (i16, i16) = (1, 9);

/// Groups asked for, each with its partitions (`None`: all committed ones).
type Wanted = Vec<(String, Option<Vec<(String, i32)>>)>;

type Rows = Result<Vec<(String, i32, Option<Committed>)>, GroupError>;

/// A partition as answered: its committed offset (or none), or an error of its own.
type Answered = Result<Vec<(String, i32, Option<Result<Committed, i16>>)>, GroupError>;

/// A named partition of a topic the principal may not DESCRIBE.
const DENIED: i16 = kafka_protocol::error::ResponseError::TopicAuthorizationFailed.code();

/// Offset, epoch, metadata and error code of one answered partition.
fn answered(row: Option<&Result<Committed, i16>>) -> ((i64, i32, String), i16) {
    match row {
        Some(Ok(c)) => (values(Some(c)), unstable_code(Some(c))),
        Some(Err(code)) => (values(None), *code),
        None => (values(None), 0),
    }
}

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &std::rc::Rc<crate::security::Session>,
) -> Result<ResponseFuture, String> {
    let (header, req) = decode_request::<OffsetFetchRequest>(frame, ApiKey::OffsetFetch, version)
        .map_err(|e| e.to_string())?;
    let wanted: Wanted = if version >= 8 {
        req.groups
            .into_iter()
            .map(|g| {
                let topics = g.topics.map(|ts| {
                    ts.into_iter()
                        .flat_map(|t| {
                            t.partition_indexes.into_iter().map(move |p| (t.name.0.to_string(), p))
                        })
                        .collect()
                });
                (g.group_id.0.to_string(), topics)
            })
            .collect()
    } else {
        let topics = req.topics.map(|ts| {
            ts.into_iter()
                .flat_map(|t| {
                    t.partition_indexes.into_iter().map(move |p| (t.name.0.to_string(), p))
                })
                .collect()
        });
        vec![(req.group_id.0.to_string(), topics)]
    };
    // Kafka: DESCRIBE on each group; named partitions of topics without DESCRIBE are not
    // looked up but answered TOPIC_AUTHORIZATION_FAILED, and a group's "all partitions"
    // answer leaves such topics out.
    let auth = Auth::new(ctx, session);
    let mut pending = Vec::with_capacity(wanted.len());
    let mut refused: Vec<Vec<(String, i32)>> = Vec::with_capacity(wanted.len());
    for (group_id, partitions) in &wanted {
        let mut denied = Vec::new();
        let partitions = partitions.as_ref().map(|ps| {
            ps.iter()
                .filter(|(topic, p)| {
                    let ok = auth.allowed(Operation::Describe, ResourceType::Topic, topic);
                    if !ok {
                        denied.push((topic.clone(), *p));
                    }
                    ok
                })
                .cloned()
                .collect()
        });
        let call = GroupCall::Fetch {
            group_id: group_id.clone(),
            partitions,
            require_stable: version >= 7 && req.require_stable,
        };
        let call = super::if_allowed(ctx, session, (Operation::Describe, group_id), call);
        if call.is_err() {
            denied.clear();
        }
        refused.push(denied);
        pending.push(super::call_group_if(ctx, call).await);
    }
    let correlation_id = header.correlation_id;
    Ok(Box::pin(async move {
        let answers = futures::future::join_all(pending).await;
        let mut response = OffsetFetchResponse::default();
        for (((group_id, requested), answer), denied) in
            wanted.into_iter().zip(answers).zip(refused)
        {
            let rows: Rows = match answer {
                GroupAnswer::Fetch(rows) => rows,
                GroupAnswer::Failed(e) => Err(e),
                _ => Err(GroupError::CoordinatorNotAvailable),
            };
            let rows = rows.map(|rows| {
                let mut rows: Vec<_> = rows
                    .into_iter()
                    .filter(|(topic, ..)| {
                        auth.visible(Operation::Describe, ResourceType::Topic, topic)
                    })
                    .map(|(topic, p, c)| (topic, p, c.map(Ok)))
                    .collect();
                rows.extend(denied.into_iter().map(|(topic, p)| (topic, p, Some(Err(DENIED)))));
                rows
            });
            let rows: Answered = rows;
            if version >= 8 {
                response.groups.push(group_entry(group_id, rows));
            } else {
                single_group(&mut response, rows, version, requested.as_deref());
            }
        }
        respond(ApiKey::OffsetFetch, version, correlation_id, &response)
    }))
}

fn values(c: Option<&Committed>) -> (i64, i32, String) {
    match c {
        // Kafka answers an unstable partition with offset -1 and the error.
        Some(c) if c.unstable => (-1, -1, String::new()),
        Some(c) => (c.offset, c.leader_epoch, c.metadata.clone()),
        None => (-1, -1, String::new()),
    }
}

/// UNSTABLE_OFFSET_COMMIT (88) for a partition an open transaction holds offsets for.
fn unstable_code(c: Option<&Committed>) -> i16 {
    if c.is_some_and(|c| c.unstable) {
        kafka_protocol::error::ResponseError::UnstableOffsetCommit.code()
    } else {
        0
    }
}

fn group_entry(group_id: String, rows: Answered) -> OffsetFetchResponseGroup {
    let mut group =
        OffsetFetchResponseGroup::default().with_group_id(GroupId(str_bytes(&group_id)));
    match rows {
        Err(e) => group.error_code = error_code(Some(e)),
        Ok(rows) => {
            for (topic, partition, committed) in rows {
                let ((offset, epoch, metadata), code) = answered(committed.as_ref());
                let part = OffsetFetchResponsePartitions::default()
                    .with_partition_index(partition)
                    .with_committed_offset(offset)
                    .with_committed_leader_epoch(epoch)
                    .with_metadata(Some(str_bytes(&metadata)))
                    .with_error_code(code);
                match group.topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                    Some(t) => t.partitions.push(part),
                    None => group.topics.push(
                        OffsetFetchResponseTopics::default()
                            .with_name(TopicName(str_bytes(&topic)))
                            .with_partitions(vec![part]),
                    ),
                }
            }
        }
    }
    group
}

/// v0–7: one group. `requested`: the partitions the request named (`None`: all).
fn single_group(
    response: &mut OffsetFetchResponse,
    rows: Answered,
    version: i16,
    requested: Option<&[(String, i32)]>,
) {
    let rows = match rows {
        Err(e) if version >= 2 => {
            response.error_code = error_code(Some(e));
            return;
        }
        // v0–1 have no top-level error: Kafka's `OffsetFetchRequest.getErrorResponse` puts it
        // on every partition the request named (none when it asked for all).
        Err(e) => {
            let code = error_code(Some(e));
            requested
                .unwrap_or_default()
                .iter()
                .map(|(t, p)| (t.clone(), *p, Some(Err(code))))
                .collect()
        }
        Ok(rows) => rows,
    };
    for (topic, partition, committed) in rows {
        let ((offset, epoch, metadata), code) = answered(committed.as_ref());
        let part = OffsetFetchResponsePartition::default()
            .with_partition_index(partition)
            .with_committed_offset(offset)
            .with_committed_leader_epoch(if version >= 5 { epoch } else { -1 })
            .with_metadata(Some(str_bytes(&metadata)))
            .with_error_code(code);
        match response.topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(part),
            None => response.topics.push(
                OffsetFetchResponseTopic::default()
                    .with_name(TopicName(str_bytes(&topic)))
                    .with_partitions(vec![part]),
            ),
        }
    }
}
