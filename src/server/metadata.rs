//! Metadata, DescribeConfigs, DescribeCluster, DescribeTopicPartitions and
//! DescribeClientQuotas: answered on the connection's shard from
//! its cached image with the controller's pure builders. Unknown topics that Metadata may
//! auto-create go to the controller shard; the answer is rebuilt after every shard holds
//! the new image, so the client can produce at once.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, DescribeClientQuotasRequest, DescribeClientQuotasResponse, DescribeClusterRequest,
    DescribeConfigsRequest, DescribeTopicPartitionsRequest, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse, MetadataRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::admin::{self, Advertised};
use super::authz::{Auth, Authorize};
use super::control::{call_controller, ControllerRequest};
use super::dispatch::{ready, respond, ResponseFuture};
use crate::authz::{Operation, ResourceType, CLUSTER_NAME};
use crate::protocol::decode_request;
use crate::security::Session;
use crate::shard::ShardCtx;

/// This broker's endpoint of `listener`, for the answers before it registered.
fn advertised(ctx: &ShardCtx, listener: &str) -> Vec<Advertised> {
    let c = &ctx.config;
    c.advertised(Some(listener))
        .map(|(host, port)| (c.node_id, host.to_string(), i32::from(port)))
        .into_iter()
        .collect()
}

/// Metadata for a client that came in on `listener`: each broker's endpoint of that listener.
pub fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &Rc<Session>,
) -> Result<ResponseFuture, String> {
    let (header, req) = decode_request::<MetadataRequest>(frame, ApiKey::Metadata, version)
        .map_err(|e| e.to_string())?;
    let ctx = ctx.clone();
    let listener = session.listener.clone();
    let auth = Auth::new(&ctx, session);
    Ok(Box::pin(async move {
        let own = advertised(&ctx, &listener);
        let listeners = (own.as_slice(), &*listener);
        let (mut response, to_create) =
            admin::metadata::build_metadata(&ctx.image(), &req, version, listeners, &auth);
        if !to_create.is_empty() {
            call_controller(&ctx, ControllerRequest::AutoCreate(to_create)).await;
            let image = ctx.image();
            response = admin::metadata::build_metadata(&image, &req, version, listeners, &auth).0;
        }
        respond(ApiKey::Metadata, version, header.correlation_id, &response)
    }))
}

/// DescribeConfigs, DescribeCluster, DescribeTopicPartitions, DescribeClientQuotas and
/// DescribeUserScramCredentials: read-only, from this shard's image, with Kafka's checks:
/// DESCRIBE_CONFIGS on each config resource (broker resources on the cluster), DESCRIBE on
/// the cluster for its authorized operations, DESCRIBE on each topic, DESCRIBE_CONFIGS on the
/// cluster for quotas and DESCRIBE on it for SCRAM credentials.
pub fn start_read_only(
    ctx: &Rc<ShardCtx>,
    api: ApiKey,
    frame: Bytes,
    version: i16,
    session: &Rc<Session>,
) -> Result<ResponseFuture, String> {
    let image = ctx.image();
    let auth = Auth::new(ctx, session);
    let listener = &*session.listener;
    let outcome = match api {
        ApiKey::DescribeConfigs => {
            let (header, req) = decode_request::<DescribeConfigsRequest>(frame, api, version)
                .map_err(|e| e.to_string())?;
            let response = describe_configs(&image, req, version, &auth);
            respond(api, version, header.correlation_id, &response)
        }
        ApiKey::DescribeCluster => {
            let (header, req) = decode_request::<DescribeClusterRequest>(frame, api, version)
                .map_err(|e| e.to_string())?;
            let mut response = admin::describe_cluster::handle(
                &image,
                &req,
                version,
                (&advertised(ctx, listener), listener),
            );
            if req.include_cluster_authorized_operations {
                response.cluster_authorized_operations = if auth.cluster(Operation::Describe) {
                    auth.operations(ResourceType::Cluster, CLUSTER_NAME)
                } else {
                    0
                };
            }
            respond(api, version, header.correlation_id, &response)
        }
        ApiKey::DescribeTopicPartitions => {
            let (header, req) =
                decode_request::<DescribeTopicPartitionsRequest>(frame, api, version)
                    .map_err(|e| e.to_string())?;
            let response = admin::describe_topic_partitions::handle(&image, &req, &auth);
            respond(api, version, header.correlation_id, &response)
        }
        ApiKey::DescribeClientQuotas => {
            let (header, req) = decode_request::<DescribeClientQuotasRequest>(frame, api, version)
                .map_err(|e| e.to_string())?;
            let response = if auth.cluster(Operation::DescribeConfigs) {
                admin::describe_client_quotas::handle(&image, &req, version)
            } else {
                DescribeClientQuotasResponse::default()
                    .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
                    .with_error_message(Some(StrBytes::from_static_str(CLUSTER_DENIED)))
                    .with_entries(None)
            };
            respond(api, version, header.correlation_id, &response)
        }
        ApiKey::DescribeUserScramCredentials => {
            let (header, req) =
                decode_request::<DescribeUserScramCredentialsRequest>(frame, api, version)
                    .map_err(|e| e.to_string())?;
            let response = if auth.cluster(Operation::Describe) {
                admin::describe_user_scram_credentials::handle(
                    &image.scram_credentials,
                    &req,
                    version,
                )
            } else {
                DescribeUserScramCredentialsResponse::default()
                    .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
                    .with_error_message(Some(StrBytes::from_static_str(CLUSTER_DENIED)))
            };
            respond(api, version, header.correlation_id, &response)
        }
        other => return Err(format!("{other:?} is not a read-only metadata API")),
    };
    Ok(ready(outcome))
}

/// Kafka's messages of the authorization errors (`Errors.*.message`).
pub const CLUSTER_DENIED: &str = "Cluster authorization failed.";
pub const TOPIC_DENIED: &str = "Topic authorization failed.";
pub const GROUP_DENIED: &str = "Group authorization failed.";

/// Kafka's `ConfigHelper.handleDescribeConfigsRequest`: resources the principal may not
/// DESCRIBE_CONFIGS are answered with the resource type's authorization error, after the
/// others.
fn describe_configs(
    image: &crate::controller::MetadataImage,
    mut req: DescribeConfigsRequest,
    version: i16,
    auth: &Auth,
) -> kafka_protocol::messages::DescribeConfigsResponse {
    use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
    let mut denied = Vec::new();
    req.resources.retain(|r| {
        let (rt, name, code, message) = match r.resource_type {
            2 => (
                ResourceType::Topic,
                r.resource_name.as_str(),
                ResponseError::TopicAuthorizationFailed,
                TOPIC_DENIED,
            ),
            32 => (
                ResourceType::Group,
                r.resource_name.as_str(),
                ResponseError::GroupAuthorizationFailed,
                GROUP_DENIED,
            ),
            4 | 8 | 16 => (
                ResourceType::Cluster,
                CLUSTER_NAME,
                ResponseError::ClusterAuthorizationFailed,
                CLUSTER_DENIED,
            ),
            // Unknown types: the handler answers them.
            _ => return true,
        };
        if auth.allowed(Operation::DescribeConfigs, rt, name) {
            return true;
        }
        denied.push(
            DescribeConfigsResult::default()
                .with_error_code(code.code())
                .with_error_message(Some(StrBytes::from_static_str(message)))
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone()),
        );
        false
    });
    let mut response = admin::describe_configs::handle(image, &req, version);
    response.results.extend(denied);
    response
}
