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

use super::{call_group, error_code, str_bytes, GroupAnswer, GroupCall};
use crate::group::types::{Committed, GroupError};
use crate::protocol::decode_request;
use crate::server::dispatch::{respond, ResponseFuture};
use crate::shard::ShardCtx;

/// 1 is Kafka 4's floor; 10 (topic ids) is not served.
pub const VERSIONS: (i16, i16) = (1, 9);

/// Groups asked for, each with its partitions (`None`: all committed ones).
type Wanted = Vec<(String, Option<Vec<(String, i32)>>)>;

type Rows = Result<Vec<(String, i32, Option<Committed>)>, GroupError>;

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
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
    let mut pending = Vec::with_capacity(wanted.len());
    for (group_id, partitions) in &wanted {
        let call = GroupCall::Fetch {
            group_id: group_id.clone(),
            partitions: partitions.clone(),
            require_stable: version >= 7 && req.require_stable,
        };
        pending.push(call_group(ctx, call).await);
    }
    let correlation_id = header.correlation_id;
    Ok(Box::pin(async move {
        let answers = futures::future::join_all(pending).await;
        let mut response = OffsetFetchResponse::default();
        for ((group_id, _), answer) in wanted.into_iter().zip(answers) {
            let rows: Rows = match answer {
                GroupAnswer::Fetch(rows) => rows,
                GroupAnswer::Failed(e) => Err(e),
                _ => Err(GroupError::CoordinatorNotAvailable),
            };
            if version >= 8 {
                response.groups.push(group_entry(group_id, rows));
            } else {
                single_group(&mut response, rows, version);
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

fn group_entry(group_id: String, rows: Rows) -> OffsetFetchResponseGroup {
    let mut group =
        OffsetFetchResponseGroup::default().with_group_id(GroupId(str_bytes(&group_id)));
    match rows {
        Err(e) => group.error_code = error_code(Some(e)),
        Ok(rows) => {
            for (topic, partition, committed) in rows {
                let (offset, epoch, metadata) = values(committed.as_ref());
                let part = OffsetFetchResponsePartitions::default()
                    .with_partition_index(partition)
                    .with_committed_offset(offset)
                    .with_committed_leader_epoch(epoch)
                    .with_metadata(Some(str_bytes(&metadata)))
                    .with_error_code(unstable_code(committed.as_ref()));
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

fn single_group(response: &mut OffsetFetchResponse, rows: Rows, version: i16) {
    match rows {
        // v1 has no top-level error: it goes on every partition (none listed here).
        Err(e) if version >= 2 => response.error_code = error_code(Some(e)),
        Err(_) => {}
        Ok(rows) => {
            for (topic, partition, committed) in rows {
                let (offset, epoch, metadata) = values(committed.as_ref());
                let part = OffsetFetchResponsePartition::default()
                    .with_partition_index(partition)
                    .with_committed_offset(offset)
                    .with_committed_leader_epoch(if version >= 5 { epoch } else { -1 })
                    .with_metadata(Some(str_bytes(&metadata)))
                    .with_error_code(unstable_code(committed.as_ref()));
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
    }
}
