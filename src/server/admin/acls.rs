//! DescribeAcls, CreateAcls and DeleteAcls (API keys 29–31), v1–v3, as Kafka's `AclApis`
//! answers them.
//!
//! - Without an authorizer: SECURITY_DISABLED ("No Authorizer is configured.") for the
//!   request (DescribeAcls), each creation or each filter ([`disabled_describe`] and kin).
//! - A principal without DESCRIBE (DescribeAcls) or ALTER (CreateAcls, DeleteAcls) on the
//!   cluster: CLUSTER_AUTHORIZATION_FAILED the same way ([`describe_error`] and kin).
//! - Otherwise DescribeAcls answers from the image's ACLs on any shard ([`describe`]), grouped
//!   by resource pattern; CreateAcls and DeleteAcls run on the active controller
//!   ([`create`], [`delete`]) and answer once their records are committed. A bad creation
//!   (ANY or UNKNOWN element, empty name, a CLUSTER name other than `kafka-cluster`) or a
//!   filter with an UNKNOWN element fails alone with INVALID_REQUEST.
//!
//! The server (`server::acl_apis`) decides which of these applies.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{error_code, sb, Mutation};
use crate::authz::{Acl, AclFilter, AclSet, Operation, PatternType, Permission, ResourceType};
use crate::controller::ControllerState;

/// Kafka 4.1's range for each of the three (KIP-896 removed v0).
pub const VERSIONS: (i16, i16) = (1, 3);

/// Kafka's message for every ACL request when no authorizer is configured.
pub const NO_AUTHORIZER: &str = "No Authorizer is configured.";

/// The message of a request refused for want of a cluster permission.
pub const NOT_AUTHORIZED: &str = "Cluster authorization failed.";

/// DescribeAcls answered with one error for the whole request.
#[must_use]
pub fn describe_error(code: i16, message: &str) -> DescribeAclsResponse {
    DescribeAclsResponse::default().with_error_code(code).with_error_message(Some(sb(message)))
}

/// One failed result per requested creation, in order (Kafka's `getErrorResponse`).
#[must_use]
pub fn create_error(request: &CreateAclsRequest, code: i16, message: &str) -> CreateAclsResponse {
    let failed =
        || AclCreationResult::default().with_error_code(code).with_error_message(Some(sb(message)));
    CreateAclsResponse::default().with_results(request.creations.iter().map(|_| failed()).collect())
}

/// One failed result per filter, in order, matching nothing.
#[must_use]
pub fn delete_error(request: &DeleteAclsRequest, code: i16, message: &str) -> DeleteAclsResponse {
    let failed = || {
        DeleteAclsFilterResult::default()
            .with_error_code(code)
            .with_error_message(Some(sb(message)))
    };
    DeleteAclsResponse::default()
        .with_filter_results(request.filters.iter().map(|_| failed()).collect())
}

/// Without an authorizer.
#[must_use]
pub fn disabled_describe(_request: &DescribeAclsRequest) -> DescribeAclsResponse {
    describe_error(ResponseError::SecurityDisabled.code(), NO_AUTHORIZER)
}

#[must_use]
pub fn disabled_create(request: &CreateAclsRequest) -> CreateAclsResponse {
    create_error(request, ResponseError::SecurityDisabled.code(), NO_AUTHORIZER)
}

#[must_use]
pub fn disabled_delete(request: &DeleteAclsRequest) -> DeleteAclsResponse {
    delete_error(request, ResponseError::SecurityDisabled.code(), NO_AUTHORIZER)
}

/// A filter as the request carries it.
fn filter_of(
    (rt, name, pattern): (i8, Option<&StrBytes>, i8),
    (principal, host, op, permission): (Option<&StrBytes>, Option<&StrBytes>, i8, i8),
) -> AclFilter {
    AclFilter {
        resource_type: ResourceType::from_code(rt),
        resource_name: name.map(ToString::to_string),
        pattern: PatternType::from_code(pattern),
        principal: principal.map(ToString::to_string),
        host: host.map(ToString::to_string),
        operation: Operation::from_code(op),
        permission: Permission::from_code(permission),
    }
}

/// The ACLs `request` names, grouped by resource pattern (Kafka's `aclsResources`). A
/// filter with an UNKNOWN element is INVALID_REQUEST.
#[must_use]
pub fn describe(acls: &AclSet, request: &DescribeAclsRequest) -> DescribeAclsResponse {
    let r = request;
    let filter = filter_of(
        (r.resource_type_filter, r.resource_name_filter.as_ref(), r.pattern_type_filter),
        (r.principal_filter.as_ref(), r.host_filter.as_ref(), r.operation, r.permission_type),
    );
    if let Some(reason) = filter.unknown_element() {
        return describe_error(ResponseError::InvalidRequest.code(), reason);
    }
    let mut by_pattern: BTreeMap<(i8, &str, i8), Vec<AclDescription>> = BTreeMap::new();
    for (_, acl) in acls.matching(&filter) {
        let key = (acl.resource_type.code(), acl.resource_name.as_str(), acl.pattern.code());
        by_pattern.entry(key).or_default().push(
            AclDescription::default()
                .with_principal(sb(acl.principal.clone()))
                .with_host(sb(acl.host.clone()))
                .with_operation(acl.operation.code())
                .with_permission_type(acl.permission.code()),
        );
    }
    let resources = by_pattern
        .into_iter()
        .map(|((rt, name, pattern), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(rt)
                .with_resource_name(sb(name))
                .with_pattern_type(pattern)
                .with_acls(acls)
        })
        .collect();
    DescribeAclsResponse::default().with_resources(resources)
}

fn acl_of(c: &AclCreation) -> Acl {
    Acl {
        resource_type: ResourceType::from_code(c.resource_type),
        resource_name: c.resource_name.to_string(),
        pattern: PatternType::from_code(c.resource_pattern_type),
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation: Operation::from_code(c.operation),
        permission: Permission::from_code(c.permission_type),
    }
}

/// Creates the requested ACLs (active controller). One result per creation, in order.
pub fn create(
    controller: &mut ControllerState,
    request: &CreateAclsRequest,
) -> Mutation<CreateAclsResponse> {
    let acls: Vec<Acl> = request.creations.iter().map(acl_of).collect();
    let invalid = ResponseError::InvalidRequest.code();
    match controller.create_acls(acls) {
        Ok(results) => {
            let image_changed = results.iter().any(Result::is_ok);
            let results = results
                .into_iter()
                .map(|r| match r {
                    Ok(()) => AclCreationResult::default(),
                    Err(e) => AclCreationResult::default()
                        .with_error_code(invalid)
                        .with_error_message(Some(sb(e.to_string()))),
                })
                .collect();
            Mutation {
                response: CreateAclsResponse::default().with_results(results),
                image_changed,
            }
        }
        Err(e) => {
            let (code, message) = error_code(&e);
            Mutation { response: create_error(request, code, &message), image_changed: false }
        }
    }
}

fn filter_of_delete(f: &DeleteAclsFilter) -> AclFilter {
    filter_of(
        (f.resource_type_filter, f.resource_name_filter.as_ref(), f.pattern_type_filter),
        (f.principal_filter.as_ref(), f.host_filter.as_ref(), f.operation, f.permission_type),
    )
}

fn matching_acl(acl: &Acl) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_resource_type(acl.resource_type.code())
        .with_resource_name(sb(acl.resource_name.clone()))
        .with_pattern_type(acl.pattern.code())
        .with_principal(sb(acl.principal.clone()))
        .with_host(sb(acl.host.clone()))
        .with_operation(acl.operation.code())
        .with_permission_type(acl.permission.code())
}

/// Deletes the ACLs each filter matches (active controller). One result per filter.
pub fn delete(
    controller: &mut ControllerState,
    request: &DeleteAclsRequest,
) -> Mutation<DeleteAclsResponse> {
    let filters: Vec<AclFilter> = request.filters.iter().map(filter_of_delete).collect();
    match controller.delete_acls(&filters) {
        Ok(results) => {
            let image_changed = results.iter().any(|r| r.as_ref().is_ok_and(|m| !m.is_empty()));
            let results = results
                .into_iter()
                .map(|r| match r {
                    Ok(matched) => DeleteAclsFilterResult::default()
                        .with_matching_acls(matched.iter().map(matching_acl).collect()),
                    Err(reason) => DeleteAclsFilterResult::default()
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_error_message(Some(sb(reason))),
                })
                .collect();
            Mutation {
                response: DeleteAclsResponse::default().with_filter_results(results),
                image_changed,
            }
        }
        Err(e) => {
            let (code, message) = error_code(&e);
            Mutation { response: delete_error(request, code, &message), image_changed: false }
        }
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::create_acls_request::AclCreation;

    use super::*;
    use crate::controller::configs::BrokerDefaults;
    use crate::types::NodeId;

    fn creation(name: &str, pattern: PatternType, principal: &str) -> AclCreation {
        AclCreation::default()
            .with_resource_type(ResourceType::Topic.code())
            .with_resource_name(sb(name))
            .with_resource_pattern_type(pattern.code())
            .with_principal(sb(principal))
            .with_host(sb("*"))
            .with_operation(Operation::Read.code())
            .with_permission_type(Permission::Allow.code())
    }

    #[test]
    fn without_an_authorizer_every_acl_request_is_security_disabled() {
        let d = disabled_describe(&DescribeAclsRequest::default());
        assert_eq!(d.error_code, 54);
        assert_eq!(d.error_message.as_deref(), Some(NO_AUTHORIZER));
        let c = disabled_create(
            &CreateAclsRequest::default()
                .with_creations(vec![AclCreation::default(), AclCreation::default()]),
        );
        assert_eq!(c.results.iter().map(|r| r.error_code).collect::<Vec<_>>(), [54, 54]);
        let x = disabled_delete(
            &DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()]),
        );
        assert_eq!(
            (x.filter_results[0].error_code, x.filter_results[0].matching_acls.len()),
            (54, 0)
        );
    }

    #[test]
    fn create_describe_delete() {
        let mut c =
            ControllerState::new("c".into(), NodeId(0), 1, BrokerDefaults::default()).unwrap();
        let bad_cluster = creation("x", PatternType::Literal, "User:a")
            .with_resource_type(ResourceType::Cluster.code());
        let req = CreateAclsRequest::default().with_creations(vec![
            creation("orders", PatternType::Literal, "User:a"),
            creation("ord", PatternType::Prefixed, "User:b"),
            bad_cluster,
            creation("t", PatternType::Match, "User:a"),
        ]);
        let m = create(&mut c, &req);
        assert!(m.image_changed);
        let codes: Vec<i16> = m.response.results.iter().map(|r| r.error_code).collect();
        assert_eq!(codes, [0, 0, 42, 42]);

        let everything = DescribeAclsRequest::default()
            .with_resource_type_filter(ResourceType::Any.code())
            .with_resource_name_filter(None)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_pattern_type_filter(PatternType::Any.code())
            .with_operation(Operation::Any.code())
            .with_permission_type(Permission::Any.code());
        let d = describe(&c.image().acls, &everything);
        assert_eq!(d.error_code, 0);
        assert_eq!(d.resources.len(), 2);
        let by_match = everything
            .clone()
            .with_resource_type_filter(ResourceType::Topic.code())
            .with_resource_name_filter(Some(sb("orders")))
            .with_pattern_type_filter(PatternType::Match.code());
        assert_eq!(describe(&c.image().acls, &by_match).resources.len(), 2);
        let unknown = everything.clone().with_operation(0);
        assert_eq!(describe(&c.image().acls, &unknown).error_code, 42);

        let del = DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
            .with_resource_type_filter(ResourceType::Topic.code())
            .with_resource_name_filter(None)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_pattern_type_filter(PatternType::Prefixed.code())
            .with_operation(Operation::Any.code())
            .with_permission_type(Permission::Any.code())]);
        let m = delete(&mut c, &del);
        assert!(m.image_changed);
        let r = &m.response.filter_results[0];
        assert_eq!((r.error_code, r.matching_acls.len()), (0, 1));
        assert_eq!(r.matching_acls[0].resource_name.as_str(), "ord");
        assert_eq!(describe(&c.image().acls, &everything).resources.len(), 1);
    }
}
