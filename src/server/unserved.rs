//! Answers for requests the broker knows but has no real implementation of: every API
//! the codec decodes but the broker does not serve and does not advertise. Those get Kafka's
//! answer where one exists without the feature (SASL on a plaintext listener: ILLEGAL_SASL_STATE;
//! delegation tokens there: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED), otherwise
//! UNSUPPORTED_VERSION in the response's top-level error code: a client learns the feature is
//! missing instead of seeing its connection dropped. APIs whose responses carry errors only
//! per entity (e.g. ConsumerGroupDescribe, the share-group state APIs) still close the
//! connection, as Kafka does for an API its listener does not enable.
//!
//! Pure encoding, no state: runs on the connection's shard.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    AddRaftVoterResponse, AllocateProducerIdsResponse, AlterPartitionResponse,
    AlterShareGroupOffsetsResponse, ApiKey, AssignReplicasToDirsResponse, BeginQuorumEpochResponse,
    BrokerHeartbeatResponse, BrokerRegistrationResponse, ConsumerGroupHeartbeatResponse,
    ControllerRegistrationResponse, CreateDelegationTokenResponse, DeleteShareGroupOffsetsResponse,
    DescribeDelegationTokenResponse, EndQuorumEpochResponse, EnvelopeResponse,
    ExpireDelegationTokenResponse, FetchSnapshotResponse, GetTelemetrySubscriptionsResponse,
    ListConfigResourcesResponse, PushTelemetryResponse, RemoveRaftVoterResponse,
    RenewDelegationTokenResponse, SaslAuthenticateResponse, SaslHandshakeResponse,
    ShareAcknowledgeResponse, ShareFetchResponse, ShareGroupHeartbeatResponse,
    UnregisterBrokerResponse, UpdateFeaturesResponse, UpdateRaftVoterResponse, VoteResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::dispatch::Outcome;
use crate::protocol::encode_response;

/// The answer to a request of an API this broker does not serve, or why the connection
/// must close instead (the version is unknown to the codec, or the API has no generic
/// answer).
pub fn answer(api: ApiKey, version: i16, correlation_id: i32) -> Result<Outcome, String> {
    let codec = api.valid_versions();
    if !(codec.min..=codec.max).contains(&version) {
        return Err(format!("unsupported api {api:?} v{version} (unknown version)"));
    }
    encode(api, version, correlation_id)
        .map(|frame| Outcome::Respond(frame.into()))
        .ok_or_else(|| format!("unsupported api {api:?}"))
}

/// The response frame: the API's response with only its top-level error set.
fn encode(api: ApiKey, version: i16, correlation_id: i32) -> Option<Bytes> {
    let unsupported = ResponseError::UnsupportedVersion;
    let no_token = ResponseError::DelegationTokenRequestNotAllowed;
    let message = || Some(StrBytes::from_string(format!("Shardlog does not serve {api:?}")));
    macro_rules! error {
        ($resp:ty, $code:expr) => {
            encode_response(
                api,
                version,
                correlation_id,
                &<$resp>::default().with_error_code($code.code()),
            )
        };
        ($resp:ty, $code:expr, $msg:expr) => {
            encode_response(
                api,
                version,
                correlation_id,
                &<$resp>::default().with_error_code($code.code()).with_error_message($msg),
            )
        };
    }
    let frame = match api {
        // Kafka's answers on a listener without SASL.
        ApiKey::SaslHandshake => error!(SaslHandshakeResponse, ResponseError::IllegalSaslState),
        ApiKey::SaslAuthenticate => error!(
            SaslAuthenticateResponse,
            ResponseError::IllegalSaslState,
            Some(StrBytes::from_static_str("SASL is not enabled on this listener"))
        ),
        ApiKey::CreateDelegationToken => error!(CreateDelegationTokenResponse, no_token),
        ApiKey::RenewDelegationToken => error!(RenewDelegationTokenResponse, no_token),
        ApiKey::ExpireDelegationToken => error!(ExpireDelegationTokenResponse, no_token),
        ApiKey::DescribeDelegationToken => error!(DescribeDelegationTokenResponse, no_token),
        ApiKey::UpdateFeatures => error!(UpdateFeaturesResponse, unsupported, message()),
        ApiKey::ConsumerGroupHeartbeat => {
            error!(ConsumerGroupHeartbeatResponse, unsupported, message())
        }
        ApiKey::ShareGroupHeartbeat => error!(ShareGroupHeartbeatResponse, unsupported, message()),
        ApiKey::ShareFetch => error!(ShareFetchResponse, unsupported, message()),
        ApiKey::ShareAcknowledge => error!(ShareAcknowledgeResponse, unsupported, message()),
        ApiKey::AlterShareGroupOffsets => {
            error!(AlterShareGroupOffsetsResponse, unsupported, message())
        }
        ApiKey::DeleteShareGroupOffsets => {
            error!(DeleteShareGroupOffsetsResponse, unsupported, message())
        }
        ApiKey::GetTelemetrySubscriptions => error!(GetTelemetrySubscriptionsResponse, unsupported),
        ApiKey::PushTelemetry => error!(PushTelemetryResponse, unsupported),
        ApiKey::ListConfigResources => error!(ListConfigResourcesResponse, unsupported),
        // Controller and inter-broker APIs of Kafka's own KRaft: Shardlog's quorum speaks
        // its own framing on its own port.
        ApiKey::Vote => error!(VoteResponse, unsupported),
        ApiKey::BeginQuorumEpoch => error!(BeginQuorumEpochResponse, unsupported),
        ApiKey::EndQuorumEpoch => error!(EndQuorumEpochResponse, unsupported),
        ApiKey::FetchSnapshot => error!(FetchSnapshotResponse, unsupported),
        ApiKey::AlterPartition => error!(AlterPartitionResponse, unsupported),
        ApiKey::Envelope => error!(EnvelopeResponse, unsupported),
        ApiKey::BrokerRegistration => error!(BrokerRegistrationResponse, unsupported),
        ApiKey::BrokerHeartbeat => error!(BrokerHeartbeatResponse, unsupported),
        ApiKey::UnregisterBroker => error!(UnregisterBrokerResponse, unsupported, message()),
        ApiKey::AllocateProducerIds => error!(AllocateProducerIdsResponse, unsupported),
        ApiKey::ControllerRegistration => {
            error!(ControllerRegistrationResponse, unsupported, message())
        }
        ApiKey::AssignReplicasToDirs => error!(AssignReplicasToDirsResponse, unsupported),
        ApiKey::AddRaftVoter => error!(AddRaftVoterResponse, unsupported, message()),
        ApiKey::RemoveRaftVoter => error!(RemoveRaftVoterResponse, unsupported, message()),
        ApiKey::UpdateRaftVoter => error!(UpdateRaftVoterResponse, unsupported),
        _ => return None,
    };
    frame.ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::versions::find;
    use crate::server::dispatch::API_TABLE;

    /// Every API the codec knows and the broker does not serve, at every codec version:
    /// answered with a frame carrying the correlation id, except the few listed without a
    /// generic answer. A new kafka-protocol release adding an API fails here until it is
    /// placed in one list or the other.
    #[test]
    fn every_unserved_api_is_answered_or_listed() {
        let closes = [
            ApiKey::ConsumerGroupDescribe,
            ApiKey::ShareGroupDescribe,
            ApiKey::InitializeShareGroupState,
            ApiKey::ReadShareGroupState,
            ApiKey::WriteShareGroupState,
            ApiKey::DeleteShareGroupState,
            ApiKey::ReadShareGroupStateSummary,
            ApiKey::DescribeShareGroupOffsets,
        ];
        for api in ApiKey::iter().filter(|a| find(API_TABLE, *a).is_none()) {
            let codec = api.valid_versions();
            for version in codec.min..=codec.max {
                let got = answer(api, version, 77);
                if closes.contains(&api) {
                    assert!(got.is_err(), "{api:?} v{version}");
                    continue;
                }
                let Ok(Outcome::Respond(frame)) = got else {
                    panic!("{api:?} v{version}: no answer");
                };
                assert_eq!(&frame.first()[4..8], &77_i32.to_be_bytes(), "{api:?} v{version}");
            }
            assert!(answer(api, codec.max + 1, 77).is_err(), "{api:?} unknown version");
        }
    }

    #[test]
    fn acl_apis_are_served_at_kafka_4_1_versions() {
        for api in [ApiKey::DescribeAcls, ApiKey::CreateAcls, ApiKey::DeleteAcls] {
            let range = find(API_TABLE, api).expect("advertised, as Kafka does");
            assert_eq!((range.min, range.max), super::super::admin::acls::VERSIONS, "{api:?}");
        }
    }
}
