//! Requests the broker knows but does not implement, against the real binary over raw
//! frames (issue 32: kafka-python's admin client sent DescribeAcls and the broker closed the
//! connection). The ACL APIs are advertised and answered as Kafka answers them without an
//! authorizer (SECURITY_DISABLED, error 54); an unserved API gets an error response (here
//! UNSUPPORTED_VERSION 35, or ILLEGAL_SASL_STATE 34 for SASL on a plaintext listener). The
//! connection stays open after each.

mod common;

use common::{Broker, Wire};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest,
    DeleteAclsResponse, DescribeAclsRequest, DescribeAclsResponse, SaslHandshakeRequest,
    SaslHandshakeResponse, UpdateFeaturesRequest, UpdateFeaturesResponse,
};
use kafka_protocol::protocol::StrBytes;

const SECURITY_DISABLED: i16 = 54;
const UNSUPPORTED_VERSION: i16 = 35;
const ILLEGAL_SASL_STATE: i16 = 34;
const NO_AUTHORIZER: &str = "No Authorizer is configured.";

/// The connection still answers (ApiVersions v3): the request before did not close it.
fn still_open(wire: &mut Wire) -> ApiVersionsResponse {
    let resp: ApiVersionsResponse =
        wire.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(resp.error_code, 0);
    resp
}

#[test]
fn acl_requests_are_security_disabled_and_keep_the_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    let mut wire = Wire::connect(&broker.addr);
    let versions = still_open(&mut wire);
    for api in [ApiKey::DescribeAcls, ApiKey::CreateAcls, ApiKey::DeleteAcls] {
        let k = versions.api_keys.iter().find(|k| k.api_key == api as i16);
        let range = k.map(|k| (k.min_version, k.max_version));
        assert_eq!(range, Some((1, 3)), "{api:?} advertised as Kafka 4.1 does");
    }
    // kafka-python's describe_acls sends v1; the flexible v2+ too.
    for version in 1..=3 {
        let resp: DescribeAclsResponse =
            wire.call(ApiKey::DescribeAcls, version, &DescribeAclsRequest::default());
        assert_eq!(resp.error_code, SECURITY_DISABLED, "v{version}");
        assert_eq!(resp.error_message.as_deref(), Some(NO_AUTHORIZER), "v{version}");
        assert!(resp.resources.is_empty());
        still_open(&mut wire);
    }
    let creations = vec![AclCreation::default(); 2];
    let resp: CreateAclsResponse =
        wire.call(ApiKey::CreateAcls, 3, &CreateAclsRequest::default().with_creations(creations));
    let codes: Vec<i16> = resp.results.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, [SECURITY_DISABLED; 2]);
    assert_eq!(resp.results[0].error_message.as_deref(), Some(NO_AUTHORIZER));
    let filters = vec![DeleteAclsFilter::default()];
    let resp: DeleteAclsResponse =
        wire.call(ApiKey::DeleteAcls, 1, &DeleteAclsRequest::default().with_filters(filters));
    assert_eq!(resp.filter_results.len(), 1);
    assert_eq!(resp.filter_results[0].error_code, SECURITY_DISABLED);
    still_open(&mut wire);
}

#[test]
fn an_unserved_api_gets_an_error_response_not_a_closed_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    let mut wire = Wire::connect(&broker.addr);
    let advertised = still_open(&mut wire);
    let served = |api: ApiKey| advertised.api_keys.iter().any(|k| k.api_key == api as i16);
    assert!(!served(ApiKey::UpdateFeatures) && !served(ApiKey::ConsumerGroupHeartbeat));

    let resp: UpdateFeaturesResponse =
        wire.call(ApiKey::UpdateFeatures, 1, &UpdateFeaturesRequest::default());
    assert_eq!(resp.error_code, UNSUPPORTED_VERSION);
    still_open(&mut wire);
    let heartbeat = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(StrBytes::from_static_str("g").into())
        .with_member_id(StrBytes::from_static_str("m"));
    let resp: ConsumerGroupHeartbeatResponse =
        wire.call(ApiKey::ConsumerGroupHeartbeat, 0, &heartbeat);
    assert_eq!(resp.error_code, UNSUPPORTED_VERSION);
    still_open(&mut wire);
    let sasl = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    let resp: SaslHandshakeResponse = wire.call(ApiKey::SaslHandshake, 1, &sasl);
    assert_eq!(resp.error_code, ILLEGAL_SASL_STATE);
    still_open(&mut wire);
}
