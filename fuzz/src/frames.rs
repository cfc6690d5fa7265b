//! Request frames, through the broker's own path: the frame reader, `peek_api`, the
//! advertised version table (`API_TABLE`), then `decode_request` with the message type the
//! API's handler decodes, and for Produce the validation every partition's records get.

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;
use shardlog::protocol::{decode_request, frame::read_frame, peek_api};
use shardlog::server::api_versions;
use shardlog::server::dispatch::{Outcome, API_TABLE};
use shardlog::storage::{validate::validate, LogConfig};

/// The broker's default `socket.request.max.bytes` is far larger; a small cap keeps the
/// reader's refusal path in reach of the fuzzer.
const FRAME_BYTES_MAX: u32 = 1 << 20;

/// `data` is what a client sent on a fresh connection: size-prefixed frames. For the
/// fuzzer's sake the whole input is also decoded as one frame body.
pub fn request_frame(data: &[u8]) {
    let mut reader = data;
    while let Ok(Some(frame)) = crate::block_on(read_frame(&mut reader, FRAME_BYTES_MAX)) {
        decode_frame(frame);
    }
    decode_frame(Bytes::copy_from_slice(data));
}

/// What `dispatch` does before a handler runs: refuse what is not advertised, then decode.
fn decode_frame(frame: Bytes) {
    let Ok(peek) = peek_api(&frame) else { return };
    let Ok(api) = ApiKey::try_from(peek.api_key) else { return };
    if api == ApiKey::ApiVersions {
        // Always answered, even for versions it does not know, so it must encode.
        let outcome = api_versions::respond(frame, peek);
        assert!(matches!(outcome, Outcome::Respond(_)), "ApiVersions must always answer");
        return;
    }
    let Some(range) = API_TABLE.iter().find(|r| r.api == api) else { return };
    if range.contains(peek.version) {
        decode_body(api, peek.version, frame);
    }
}

fn decode_body(api: ApiKey, v: i16, f: Bytes) {
    match api {
        ApiKey::Produce => {
            if let Ok((_, req)) = decode_request::<ProduceRequest>(f, api, v) {
                validate_produce(&req);
            }
        }
        ApiKey::Fetch => decode::<FetchRequest>(f, api, v),
        ApiKey::ListOffsets => decode::<ListOffsetsRequest>(f, api, v),
        ApiKey::Metadata => decode::<MetadataRequest>(f, api, v),
        ApiKey::OffsetForLeaderEpoch => decode::<OffsetForLeaderEpochRequest>(f, api, v),
        ApiKey::DeleteRecords => decode::<DeleteRecordsRequest>(f, api, v),
        ApiKey::DescribeProducers => decode::<DescribeProducersRequest>(f, api, v),
        ApiKey::CreateTopics => decode::<CreateTopicsRequest>(f, api, v),
        ApiKey::DeleteTopics => decode::<DeleteTopicsRequest>(f, api, v),
        ApiKey::CreatePartitions => decode::<CreatePartitionsRequest>(f, api, v),
        ApiKey::InitProducerId => decode::<InitProducerIdRequest>(f, api, v),
        ApiKey::AlterConfigs => decode::<AlterConfigsRequest>(f, api, v),
        ApiKey::IncrementalAlterConfigs => decode::<IncrementalAlterConfigsRequest>(f, api, v),
        ApiKey::DescribeConfigs => decode::<DescribeConfigsRequest>(f, api, v),
        ApiKey::DescribeCluster => decode::<DescribeClusterRequest>(f, api, v),
        ApiKey::FindCoordinator => decode::<FindCoordinatorRequest>(f, api, v),
        ApiKey::JoinGroup => decode::<JoinGroupRequest>(f, api, v),
        ApiKey::SyncGroup => decode::<SyncGroupRequest>(f, api, v),
        ApiKey::Heartbeat => decode::<HeartbeatRequest>(f, api, v),
        ApiKey::LeaveGroup => decode::<LeaveGroupRequest>(f, api, v),
        ApiKey::OffsetCommit => decode::<OffsetCommitRequest>(f, api, v),
        ApiKey::OffsetFetch => decode::<OffsetFetchRequest>(f, api, v),
        ApiKey::ListGroups => decode::<ListGroupsRequest>(f, api, v),
        ApiKey::DescribeGroups => decode::<DescribeGroupsRequest>(f, api, v),
        ApiKey::DeleteGroups => decode::<DeleteGroupsRequest>(f, api, v),
        ApiKey::OffsetDelete => decode::<OffsetDeleteRequest>(f, api, v),
        ApiKey::AddOffsetsToTxn => decode::<AddOffsetsToTxnRequest>(f, api, v),
        ApiKey::AddPartitionsToTxn => decode::<AddPartitionsToTxnRequest>(f, api, v),
        ApiKey::AlterClientQuotas => decode::<AlterClientQuotasRequest>(f, api, v),
        ApiKey::AlterPartitionReassignments => {
            decode::<AlterPartitionReassignmentsRequest>(f, api, v)
        }
        ApiKey::AlterReplicaLogDirs => decode::<AlterReplicaLogDirsRequest>(f, api, v),
        ApiKey::DescribeClientQuotas => decode::<DescribeClientQuotasRequest>(f, api, v),
        ApiKey::DescribeLogDirs => decode::<DescribeLogDirsRequest>(f, api, v),
        ApiKey::DescribeQuorum => decode::<DescribeQuorumRequest>(f, api, v),
        ApiKey::DescribeTopicPartitions => decode::<DescribeTopicPartitionsRequest>(f, api, v),
        ApiKey::DescribeTransactions => decode::<DescribeTransactionsRequest>(f, api, v),
        ApiKey::DescribeUserScramCredentials => {
            decode::<DescribeUserScramCredentialsRequest>(f, api, v)
        }
        ApiKey::ElectLeaders => decode::<ElectLeadersRequest>(f, api, v),
        ApiKey::EndTxn => decode::<EndTxnRequest>(f, api, v),
        ApiKey::ListPartitionReassignments => {
            decode::<ListPartitionReassignmentsRequest>(f, api, v)
        }
        ApiKey::ListTransactions => decode::<ListTransactionsRequest>(f, api, v),
        ApiKey::TxnOffsetCommit => decode::<TxnOffsetCommitRequest>(f, api, v),
        ApiKey::WriteTxnMarkers => decode::<WriteTxnMarkersRequest>(f, api, v),
        // A new entry in API_TABLE needs its type here, or this target stops covering it.
        other => panic!("{other:?} is advertised but the fuzz target does not decode it"),
    }
}

fn decode<R: Decodable>(frame: Bytes, api: ApiKey, version: i16) {
    let _ = decode_request::<R>(frame, api, version);
}

/// Every partition's records, validated as the owner shard does before appending.
fn validate_produce(req: &ProduceRequest) {
    let config = LogConfig::default();
    for topic in &req.topic_data {
        for p in &topic.partition_data {
            if let Some(records) = &p.records {
                let _ = validate(records, &config, 1_700_000_000_000);
            }
        }
    }
}
