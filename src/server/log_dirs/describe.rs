//! DescribeLogDirs (API key 35), v1–4 (Kafka 4's range; v4 adds the volume's total and
//! usable bytes): the broker's one log directory with, per hosted partition (leader or
//! follower), the bytes of its segments and its offset lag.
//!
//! Kafka's shape (`ReplicaManager.describeLogDirs`): every log in the directory is grouped
//! by topic, then its partitions filtered by the request (`topics` null: all), so a hosted
//! topic with no requested partition still appears with an empty list; a partition the
//! broker does not host is simply absent. Sizes come from the owner shards
//! ([`crate::partition::log_dir`]); a partition no shard holds a log of (still opening,
//! moving) is absent too.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{
    ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::partition::log_dir::ReplicaLogDir;
use crate::partition::ops::{PartitionOp, PartitionResult};
use crate::protocol::decode_request;
use crate::server::dispatch::{respond, ResponseFuture};
use crate::server::route::Scatter;
use crate::shard::ShardCtx;

/// Kafka 4's range (v0 was removed by KIP-896).
pub const VERSIONS: (i16, i16) = (1, 4);

/// One hosted partition: its topic, index, whether the request asked for it, and its
/// owner shard's figures (`None`: no shard holds its log).
pub type Entry = (String, i32, bool, Option<ReplicaLogDir>);

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &crate::security::Session,
) -> Result<ResponseFuture, String> {
    let (header, req) =
        decode_request::<DescribeLogDirsRequest>(frame, ApiKey::DescribeLogDirs, version)
            .map_err(|e| e.to_string())?;
    // Kafka: DESCRIBE on the cluster, else an empty answer with the error (v3+ carries it).
    if !crate::server::authz::cluster(ctx, session, crate::authz::Operation::Describe) {
        let mut response = DescribeLogDirsResponse::default();
        if version >= 3 {
            response.error_code = ResponseError::ClusterAuthorizationFailed.code();
        }
        let outcome = respond(ApiKey::DescribeLogDirs, version, header.correlation_id, &response);
        return Ok(crate::server::dispatch::ready(outcome));
    }
    let wanted = requested(&req);
    let image = ctx.image();
    // Every hosted partition is asked, wanted or not: whether a topic is listed depends on
    // whether any of its logs exists (Kafka groups the logs before filtering).
    let mut scatter = Scatter::default();
    for (name, topic) in &image.topics {
        for p in topic.partitions.iter().filter(|p| p.hosted) {
            let asked = wanted.as_ref().is_none_or(|w| w.contains(&(name.as_str(), p.index)));
            let op = || PartitionOp::DescribeLogDir { topic: name.clone(), partition: p.index };
            scatter.push((name.clone(), p.index, asked), Ok(p.owner_shard), op);
        }
    }
    let in_flight = scatter.send(ctx).await;
    let ctx = ctx.clone();
    Ok(Box::pin(async move {
        let entries: Vec<Entry> = in_flight
            .gather()
            .await
            .into_iter()
            .map(|((topic, index, asked), outcome)| {
                let figures = match outcome {
                    Ok(PartitionResult::DescribeLogDir(figures)) => figures,
                    _ => None,
                };
                (topic, index, asked, figures)
            })
            .collect();
        let result = dir_result(&super::log_dir(&ctx), entries);
        let response = DescribeLogDirsResponse::default().with_results(vec![result]);
        respond(ApiKey::DescribeLogDirs, version, header.correlation_id, &response)
    }))
}

/// The requested partitions, `None` for all (`topics` null).
fn requested(req: &DescribeLogDirsRequest) -> Option<HashSet<(&str, i32)>> {
    let topics = req.topics.as_ref()?;
    Some(
        topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.topic.0.as_str(), *p)))
            .collect(),
    )
}

/// The directory's result: its topics from `entries`, and the volume's sizes (a failed
/// statvfs is an error of the directory, as Kafka's failed `getFileStore`).
fn dir_result(dir: &std::path::Path, entries: Vec<Entry>) -> DescribeLogDirsResult {
    let result = DescribeLogDirsResult::default()
        .with_log_dir(StrBytes::from_string(dir.display().to_string()));
    match crate::io::host::space(dir) {
        Ok(space) => result
            .with_topics(topics(entries))
            .with_total_bytes(clamp_i64(space.total_bytes))
            .with_usable_bytes(clamp_i64(space.free_bytes)),
        Err(err) => {
            tracing::warn!("DescribeLogDirs: statvfs of {} failed: {err}", dir.display());
            result.with_error_code(ResponseError::UnknownServerError.code())
        }
    }
}

/// Kafka's `adjustForLargeFileSystems`: a size past `i64::MAX` is reported as `i64::MAX`.
fn clamp_i64(bytes: u64) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

/// Groups the existing logs by topic (sorted by name, partitions by index), keeping only
/// the requested partitions; a topic with a log but no requested partition is listed empty.
#[must_use]
pub fn topics(entries: Vec<Entry>) -> Vec<DescribeLogDirsTopic> {
    let mut by_topic: HashMap<String, Vec<DescribeLogDirsPartition>> = HashMap::new();
    for (topic, index, asked, figures) in entries {
        let Some(figures) = figures else { continue };
        let parts = by_topic.entry(topic).or_default();
        if asked {
            parts.push(
                DescribeLogDirsPartition::default()
                    .with_partition_index(index)
                    .with_partition_size(clamp_i64(figures.size_bytes))
                    .with_offset_lag(figures.offset_lag)
                    .with_is_future_key(false),
            );
        }
    }
    let mut out: Vec<DescribeLogDirsTopic> = by_topic
        .into_iter()
        .map(|(name, mut parts)| {
            parts.sort_by_key(|p| p.partition_index);
            DescribeLogDirsTopic::default()
                .with_name(TopicName(StrBytes::from_string(name)))
                .with_partitions(parts)
        })
        .collect();
    out.sort_by(|a, b| a.name.0.cmp(&b.name.0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(size_bytes: u64) -> Option<ReplicaLogDir> {
        Some(ReplicaLogDir { size_bytes, offset_lag: 0 })
    }

    #[test]
    fn groups_by_topic_and_filters_partitions_after_grouping() {
        let entries = vec![
            ("b".to_string(), 1, true, fig(20)),
            ("b".to_string(), 0, true, fig(10)),
            ("a".to_string(), 0, false, fig(5)),
            // No log on any shard: absent, and its topic with it.
            ("c".to_string(), 0, true, None),
        ];
        let out = topics(entries);
        let names: Vec<&str> = out.iter().map(|t| t.name.0.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(out[0].partitions.is_empty(), "a hosted topic not asked for is listed empty");
        let b: Vec<(i32, i64)> =
            out[1].partitions.iter().map(|p| (p.partition_index, p.partition_size)).collect();
        assert_eq!(b, [(0, 10), (1, 20)]);
        assert!(out[1].partitions.iter().all(|p| !p.is_future_key && p.offset_lag == 0));
    }

    #[test]
    fn null_topics_ask_for_everything_and_a_list_for_its_partitions() {
        let all = DescribeLogDirsRequest::default().with_topics(None);
        assert!(requested(&all).is_none());
        let some = DescribeLogDirsRequest::default().with_topics(Some(vec![
            kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![0, 2]),
        ]));
        let set = requested(&some).expect("a filter");
        assert!(set.contains(&("t", 0)) && set.contains(&("t", 2)) && !set.contains(&("t", 1)));
    }

    #[test]
    fn directory_reports_its_volume() {
        let dir = tempfile::tempdir().expect("temp dir");
        let r = dir_result(dir.path(), vec![("t".into(), 0, true, fig(1))]);
        assert_eq!(r.error_code, 0);
        assert!(r.total_bytes > 0 && r.usable_bytes >= 0 && r.usable_bytes <= r.total_bytes);
        assert_eq!(r.topics.len(), 1);
        let missing = dir_result(&dir.path().join("nope"), Vec::new());
        assert_eq!(missing.error_code, ResponseError::UnknownServerError.code());
    }
}
