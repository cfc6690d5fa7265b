//! AlterReplicaLogDirs (API key 34), v1–2 (Kafka 4's range): move replicas between the
//! broker's log directories. A Shardlog broker has one, so each partition is answered as
//! Kafka's `ReplicaManager.alterReplicaLogDirs` answers on a broker with one `log.dirs`
//! entry, checks in Kafka's order:
//! 1. INVALID_TOPIC_EXCEPTION when the future-log directory name would pass 255 bytes;
//! 2. LOG_DIR_NOT_FOUND for any path but the data directory's absolute path;
//! 3. UNKNOWN_TOPIC_OR_PARTITION for a partition the cluster does not have,
//!    REPLICA_NOT_AVAILABLE for one this broker does not host (Kafka's NOT_LEADER_OR_FOLLOWER,
//!    kept as REPLICA_NOT_AVAILABLE for this API);
//! 4. otherwise none: the replica already lives there, nothing moves.
//!
//! A partition named twice takes its last path (Kafka builds a map). Answered from this
//! shard's metadata image; no other shard is involved.

use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, ApiKey, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::controller::MetadataImage;
use crate::protocol::decode_request;
use crate::server::dispatch::{ready, respond, ResponseFuture};
use crate::shard::ShardCtx;

/// Kafka 4's range (v0 was removed by KIP-896).
pub const VERSIONS: (i16, i16) = (1, 2);

/// Kafka's limit on a log directory name (`logFutureDirName` must fit a file name).
const DIR_NAME_BYTES_MAX: usize = 255;
/// `.<32 hex digits of a UUID>-future`, appended to `<topic>-<partition>` for a future log.
const FUTURE_SUFFIX_BYTES: usize = 1 + 32 + "-future".len();

pub fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &crate::security::Session,
) -> Result<ResponseFuture, String> {
    let (header, req) =
        decode_request::<AlterReplicaLogDirsRequest>(frame, ApiKey::AlterReplicaLogDirs, version)
            .map_err(|e| e.to_string())?;
    let mut response = handle(&ctx.image(), &super::log_dir(ctx), &req);
    // Kafka: ALTER on the cluster, else every partition is refused.
    if !crate::server::authz::cluster(ctx, session, crate::authz::Operation::Alter) {
        let code = ResponseError::ClusterAuthorizationFailed.code();
        for p in response.results.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
            p.error_code = code;
        }
    }
    Ok(ready(respond(ApiKey::AlterReplicaLogDirs, version, header.correlation_id, &response)))
}

/// Answers every partition of `req` for a broker whose one log directory is `log_dir`.
#[must_use]
pub fn handle(
    image: &MetadataImage,
    log_dir: &Path,
    req: &AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse {
    let mut destinations: BTreeMap<(&str, i32), &str> = BTreeMap::new();
    for dir in &req.dirs {
        for topic in &dir.topics {
            for partition in &topic.partitions {
                destinations.insert((topic.name.0.as_str(), *partition), dir.path.as_str());
            }
        }
    }
    let mut results: Vec<AlterReplicaLogDirTopicResult> = Vec::new();
    for ((topic, partition), path) in destinations {
        let code = partition_error(image, log_dir, topic, partition, path).map_or(0, |e| e.code());
        let result = AlterReplicaLogDirPartitionResult::default()
            .with_partition_index(partition)
            .with_error_code(code);
        match results.last_mut() {
            Some(last) if last.topic_name.0.as_str() == topic => last.partitions.push(result),
            _ => results.push(
                AlterReplicaLogDirTopicResult::default()
                    .with_topic_name(TopicName(StrBytes::from_string(topic.to_string())))
                    .with_partitions(vec![result]),
            ),
        }
    }
    AlterReplicaLogDirsResponse::default().with_results(results)
}

/// One partition's answer (`None`: success, the replica stays where it is).
fn partition_error(
    image: &MetadataImage,
    log_dir: &Path,
    topic: &str,
    partition: i32,
    path: &str,
) -> Option<ResponseError> {
    let future_name_bytes = topic.len() + 1 + partition.to_string().len() + FUTURE_SUFFIX_BYTES;
    if future_name_bytes > DIR_NAME_BYTES_MAX {
        return Some(ResponseError::InvalidTopicException);
    }
    if !super::names_log_dir(path, log_dir) {
        return Some(ResponseError::LogDirNotFound);
    }
    match image.partition(topic, partition) {
        None => Some(ResponseError::UnknownTopicOrPartition),
        Some(p) if !p.hosted => Some(ResponseError::ReplicaNotAvailable),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kafka_protocol::messages::alter_replica_log_dirs_request::{
        AlterReplicaLogDir, AlterReplicaLogDirTopic,
    };

    use super::*;
    use crate::controller::{
        node_image, BrokerDefaults, ControllerState, NewTopic, ShardAssignment,
    };
    use crate::types::NodeId;

    const DIR: &str = "/data/shardlog";

    /// Topic `a` with two partitions, partition 1 hosted elsewhere.
    fn image() -> MetadataImage {
        let mut s =
            ControllerState::new("c".into(), NodeId(1), 1, BrokerDefaults::default()).unwrap();
        let spec = NewTopic { num_partitions: 2, ..NewTopic::with_defaults("a") };
        for r in s.create_topics(&[spec], false) {
            r.unwrap();
        }
        let committed = s.image();
        let mut assignment = ShardAssignment::new(1);
        assignment.reconcile(&committed, NodeId(1));
        let mut img = node_image(&committed, NodeId(1), NodeId(1), &assignment);
        let a = img.topics.get_mut("a").expect("topic a");
        Arc::make_mut(a).partitions[1].hosted = false;
        img
    }

    fn request(moves: &[(&str, &str, &[i32])]) -> AlterReplicaLogDirsRequest {
        let dirs = moves
            .iter()
            .map(|(path, topic, parts)| {
                AlterReplicaLogDir::default()
                    .with_path(StrBytes::from_string((*path).to_string()))
                    .with_topics(vec![AlterReplicaLogDirTopic::default()
                        .with_name(TopicName(StrBytes::from_string((*topic).to_string())))
                        .with_partitions(parts.to_vec())])
            })
            .collect();
        AlterReplicaLogDirsRequest::default().with_dirs(dirs)
    }

    fn codes(resp: &AlterReplicaLogDirsResponse) -> Vec<(String, i32, i16)> {
        resp.results
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.topic_name.0.to_string(), p.partition_index, p.error_code))
            })
            .collect()
    }

    #[test]
    fn same_dir_succeeds_other_paths_and_partitions_fail_as_kafka() {
        let img = image();
        let resp = handle(
            &img,
            Path::new(DIR),
            &request(&[(DIR, "a", &[0, 1, 5]), ("/elsewhere", "b", &[0]), (DIR, "zz", &[0])]),
        );
        let not_found = ResponseError::LogDirNotFound.code();
        assert_eq!(
            codes(&resp),
            [
                ("a".into(), 0, 0),
                ("a".into(), 1, ResponseError::ReplicaNotAvailable.code()),
                ("a".into(), 5, ResponseError::UnknownTopicOrPartition.code()),
                ("b".into(), 0, not_found),
                ("zz".into(), 0, ResponseError::UnknownTopicOrPartition.code()),
            ]
        );
        // The path is checked before the partition, and a later entry for a partition wins.
        let resp = handle(&img, Path::new(DIR), &request(&[(DIR, "a", &[0]), ("rel", "a", &[0])]));
        assert_eq!(codes(&resp), [("a".into(), 0, not_found)]);
    }

    #[test]
    fn a_topic_too_long_for_a_future_dir_is_invalid() {
        let long = "t".repeat(249);
        let resp = handle(&image(), Path::new(DIR), &request(&[("/x", &long, &[0])]));
        assert_eq!(codes(&resp)[0].2, ResponseError::InvalidTopicException.code());
    }
}
