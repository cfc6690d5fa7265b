//! DescribeAcls, CreateAcls and DeleteAcls (API keys 29–31), v1–v3: answered as Kafka
//! answers them without an authorizer (SECURITY_DISABLED, "No Authorizer is configured.")
//! until authorization exists. Kafka advertises them in ApiVersions all the same, and
//! kafka-python's admin client sends DescribeAcls; refusing them closed its connection.
//!
//! Read-only, no state: runs on any shard.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};

use super::sb;

/// Kafka 4.1's range for each of the three (KIP-896 removed v0).
pub const VERSIONS: (i16, i16) = (1, 3);

/// Kafka's message for every ACL request when no authorizer is configured.
pub const NO_AUTHORIZER: &str = "No Authorizer is configured.";

const SECURITY_DISABLED: ResponseError = ResponseError::SecurityDisabled;

#[must_use]
pub fn describe(_request: &DescribeAclsRequest) -> DescribeAclsResponse {
    DescribeAclsResponse::default()
        .with_error_code(SECURITY_DISABLED.code())
        .with_error_message(Some(sb(NO_AUTHORIZER)))
}

/// One failed result per requested creation, in order (Kafka's `getErrorResponse`).
#[must_use]
pub fn create(request: &CreateAclsRequest) -> CreateAclsResponse {
    let failed = || {
        AclCreationResult::default()
            .with_error_code(SECURITY_DISABLED.code())
            .with_error_message(Some(sb(NO_AUTHORIZER)))
    };
    CreateAclsResponse::default().with_results(request.creations.iter().map(|_| failed()).collect())
}

/// One failed result per filter, in order, matching nothing.
#[must_use]
pub fn delete(request: &DeleteAclsRequest) -> DeleteAclsResponse {
    let failed = || {
        DeleteAclsFilterResult::default()
            .with_error_code(SECURITY_DISABLED.code())
            .with_error_message(Some(sb(NO_AUTHORIZER)))
    };
    DeleteAclsResponse::default()
        .with_filter_results(request.filters.iter().map(|_| failed()).collect())
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::create_acls_request::AclCreation;
    use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;

    use super::*;

    #[test]
    fn every_acl_request_is_security_disabled() {
        let d = describe(&DescribeAclsRequest::default());
        assert_eq!(d.error_code, 54);
        assert_eq!(d.error_message.as_deref(), Some(NO_AUTHORIZER));
        let c = create(
            &CreateAclsRequest::default()
                .with_creations(vec![AclCreation::default(), AclCreation::default()]),
        );
        assert_eq!(c.results.iter().map(|r| r.error_code).collect::<Vec<_>>(), [54, 54]);
        let x =
            delete(&DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()]));
        assert_eq!(
            (x.filter_results[0].error_code, x.filter_results[0].matching_acls.len()),
            (54, 0)
        );
    }
}
