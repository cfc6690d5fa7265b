//! DescribeAcls, CreateAcls and DeleteAcls at the protocol boundary: SECURITY_DISABLED
//! without an authorizer, CLUSTER_AUTHORIZATION_FAILED without DESCRIBE (DescribeAcls) or
//! ALTER (CreateAcls, DeleteAcls) on the cluster, as Kafka's `AclApis`; otherwise
//! DescribeAcls is answered from this shard's image and the other two go to the controller
//! like every metadata write (`server::admin_wiring`), answered once committed.
//!
//! Runs on the connection's shard.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiKey, CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};

use super::admin::acls;
use super::authz;
use super::dispatch::{ready, respond, ResponseFuture};
use crate::authz::Operation;
use crate::protocol::decode_request;
use crate::security::Session;
use crate::shard::ShardCtx;

/// Starts one ACL request.
pub fn start(
    ctx: &Rc<ShardCtx>,
    api: ApiKey,
    frame: Bytes,
    version: i16,
    session: &Session,
) -> Result<ResponseFuture, String> {
    let op = if api == ApiKey::DescribeAcls { Operation::Describe } else { Operation::Alter };
    let refusal = if !authz::enabled(ctx) {
        Some((ResponseError::SecurityDisabled.code(), acls::NO_AUTHORIZER))
    } else if !authz::cluster(ctx, session, op) {
        Some((ResponseError::ClusterAuthorizationFailed.code(), acls::NOT_AUTHORIZED))
    } else {
        None
    };
    macro_rules! decoded {
        ($req:ty) => {
            decode_request::<$req>(frame.clone(), api, version).map_err(|e| e.to_string())?
        };
    }
    let outcome = match (api, refusal) {
        (ApiKey::DescribeAcls, refusal) => {
            let (h, req) = decoded!(DescribeAclsRequest);
            let response = match refusal {
                Some((code, message)) => acls::describe_error(code, message),
                None => acls::describe(&ctx.image().acls, &req),
            };
            respond(api, version, h.correlation_id, &response)
        }
        (ApiKey::CreateAcls, Some((code, message))) => {
            let (h, req) = decoded!(CreateAclsRequest);
            respond(api, version, h.correlation_id, &acls::create_error(&req, code, message))
        }
        (ApiKey::DeleteAcls, Some((code, message))) => {
            let (h, req) = decoded!(DeleteAclsRequest);
            respond(api, version, h.correlation_id, &acls::delete_error(&req, code, message))
        }
        (ApiKey::CreateAcls | ApiKey::DeleteAcls, None) => {
            return Ok(super::dispatch::controller_api(ctx, api, version, frame));
        }
        (other, _) => return Err(format!("{other:?} is not an ACL API")),
    };
    Ok(ready(outcome))
}
