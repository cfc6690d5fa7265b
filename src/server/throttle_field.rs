//! Puts a request-quota throttle into an already encoded response's `throttle_time_ms`
//! (KIP-219: the client learns the throttle from the response and backs off itself, as the
//! Java client does, on top of the broker muting the connection).
//!
//! `request_percentage` is known only once the response is built (the time the shard spent
//! on the request includes building it), so the field is patched in the frame rather than
//! set in the response struct. Only responses whose first body field is `throttle_time_ms`
//! are patched; which (api, version) pairs those are is not written by hand but probed once
//! from the codec itself: a default response with a marker in `throttle_time_ms` is encoded
//! and the marker looked for at the body's start. Produce (whose field comes last) and the
//! APIs without the field keep their byte-quota value or none; the connection is muted
//! either way.
//!
//! Pure functions; the probe table is built once per process and shared read-only.

use std::collections::HashSet;
use std::sync::OnceLock;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Encodable;

/// A value no default response has in its first four body bytes.
const MARKER: i32 = 0x5A17_7E11;

/// (api key, version) pairs whose response body starts with `throttle_time_ms`.
fn table() -> &'static HashSet<(i16, i16)> {
    static TABLE: OnceLock<HashSet<(i16, i16)>> = OnceLock::new();
    TABLE.get_or_init(probe_all)
}

fn first_field_is_marker<R: Encodable>(response: &R, version: i16) -> bool {
    let mut buf = BytesMut::new();
    response.encode(&mut buf, version).is_ok() && buf.get(..4) == Some(&MARKER.to_be_bytes()[..])
}

macro_rules! probe {
    ($set:ident; $($api:ident => $ty:ty),* $(,)?) => {$(
        let versions = ApiKey::$api.valid_versions();
        let response = <$ty>::default().with_throttle_time_ms(MARKER);
        for version in versions.min..=versions.max {
            if first_field_is_marker(&response, version) {
                $set.insert((ApiKey::$api as i16, version));
            }
        }
    )*};
}

fn probe_all() -> HashSet<(i16, i16)> {
    let mut set = HashSet::new();
    probe!(set;
        Fetch => FetchResponse,
        ListOffsets => ListOffsetsResponse,
        Metadata => MetadataResponse,
        OffsetForLeaderEpoch => OffsetForLeaderEpochResponse,
        DeleteRecords => DeleteRecordsResponse,
        DescribeProducers => DescribeProducersResponse,
        CreateTopics => CreateTopicsResponse,
        DeleteTopics => DeleteTopicsResponse,
        CreatePartitions => CreatePartitionsResponse,
        InitProducerId => InitProducerIdResponse,
        AlterConfigs => AlterConfigsResponse,
        IncrementalAlterConfigs => IncrementalAlterConfigsResponse,
        DescribeConfigs => DescribeConfigsResponse,
        DescribeCluster => DescribeClusterResponse,
        DescribeClientQuotas => DescribeClientQuotasResponse,
        AlterClientQuotas => AlterClientQuotasResponse,
        DescribeUserScramCredentials => DescribeUserScramCredentialsResponse,
        FindCoordinator => FindCoordinatorResponse,
        JoinGroup => JoinGroupResponse,
        SyncGroup => SyncGroupResponse,
        Heartbeat => HeartbeatResponse,
        LeaveGroup => LeaveGroupResponse,
        OffsetCommit => OffsetCommitResponse,
        OffsetFetch => OffsetFetchResponse,
        ListGroups => ListGroupsResponse,
        DescribeGroups => DescribeGroupsResponse,
        DeleteGroups => DeleteGroupsResponse,
        OffsetDelete => OffsetDeleteResponse,
        AddPartitionsToTxn => AddPartitionsToTxnResponse,
        AddOffsetsToTxn => AddOffsetsToTxnResponse,
        EndTxn => EndTxnResponse,
        TxnOffsetCommit => TxnOffsetCommitResponse,
        DescribeTransactions => DescribeTransactionsResponse,
        ListTransactions => ListTransactionsResponse,
        ElectLeaders => ElectLeadersResponse,
        AlterPartitionReassignments => AlterPartitionReassignmentsResponse,
        ListPartitionReassignments => ListPartitionReassignmentsResponse,
        DescribeLogDirs => DescribeLogDirsResponse,
        AlterReplicaLogDirs => AlterReplicaLogDirsResponse,
        DescribeTopicPartitions => DescribeTopicPartitionsResponse,
    );
    set
}

/// Whether responses of `api` at `version` start their body with `throttle_time_ms`.
#[must_use]
pub fn has_leading_field(api: i16, version: i16) -> bool {
    table().contains(&(api, version))
}

/// `frame` (a whole response frame: length, header, body) with its `throttle_time_ms` raised
/// to at least `ms`; `None` when the response has no leading throttle field, the frame is
/// too short, or the field already says as much.
#[must_use]
pub fn raise(frame: &Bytes, api: i16, version: i16, ms: u64) -> Option<Bytes> {
    if !has_leading_field(api, version) {
        return None;
    }
    let header_tags = match ApiKey::try_from(api) {
        Ok(ApiKey::ApiVersions) | Err(_) => 0,
        Ok(key) => usize::from(key.response_header_version(version) >= 1),
    };
    // Length prefix, correlation id, then (flexible headers) an empty tagged-field section,
    // the only one our encoder writes.
    let at = 4 + 4 + header_tags;
    let field = frame.get(at..at + 4)?;
    let current = i32::from_be_bytes([field[0], field[1], field[2], field[3]]);
    let wanted = i32::try_from(ms).unwrap_or(i32::MAX);
    if current >= wanted {
        return None;
    }
    let mut out = BytesMut::with_capacity(frame.len());
    out.put_slice(&frame[..at]);
    out.put_i32(wanted);
    out.put_slice(&frame[at + 4..]);
    Some(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::header::encode_response;

    #[test]
    fn probe_finds_the_field_where_kafkas_schemas_put_it_first() {
        // Metadata has it from v3, Fetch from v1 (the codec knows v4+); ApiVersions and Produce never lead with it.
        assert!(!has_leading_field(ApiKey::Metadata as i16, 2));
        assert!(has_leading_field(ApiKey::Metadata as i16, 3));
        assert!(has_leading_field(ApiKey::Metadata as i16, 12));
        assert!(has_leading_field(ApiKey::Fetch as i16, 4));
        assert!(has_leading_field(ApiKey::FindCoordinator as i16, 4));
        assert!(!has_leading_field(ApiKey::Produce as i16, 9));
        assert!(!has_leading_field(ApiKey::ApiVersions as i16, 3));
        // OffsetDelete starts with its error code.
        assert!(!has_leading_field(ApiKey::OffsetDelete as i16, 0));
    }

    #[test]
    fn raised_frames_decode_with_the_throttle_and_everything_else_unchanged() {
        use kafka_protocol::protocol::Decodable;
        for version in [3i16, 9, 12] {
            let response = MetadataResponse::default()
                .with_cluster_id(Some("c".into()))
                .with_controller_id(BrokerId(1));
            let frame = encode_response(ApiKey::Metadata, version, 77, &response).expect("enc");
            let raised = raise(&frame, ApiKey::Metadata as i16, version, 250).expect("raised");
            let header_version = ApiKey::Metadata.response_header_version(version);
            let mut body = raised.slice(4..);
            let header = ResponseHeader::decode(&mut body, header_version).expect("header decodes");
            assert_eq!(header.correlation_id, 77);
            let back = MetadataResponse::decode(&mut body, version).expect("body decodes");
            assert_eq!(back.throttle_time_ms, 250);
            assert_eq!(back.controller_id, BrokerId(1));
            assert!(body.is_empty());
            // Never lowered.
            assert!(raise(&raised, ApiKey::Metadata as i16, version, 100).is_none());
        }
    }

    #[test]
    fn frames_without_the_field_or_too_short_are_left_alone() {
        let frame = Bytes::from_static(&[0, 0, 0, 4, 0, 0, 0, 1]);
        assert!(raise(&frame, ApiKey::Metadata as i16, 3, 10).is_none());
        assert!(raise(&frame, ApiKey::Produce as i16, 9, 10).is_none());
        assert!(raise(&frame, 9999, 0, 10).is_none());
    }
}
