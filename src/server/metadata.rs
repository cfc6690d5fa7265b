//! Metadata, DescribeConfigs, DescribeCluster, DescribeTopicPartitions and
//! DescribeClientQuotas: answered on the connection's shard from
//! its cached image with the controller's pure builders. Unknown topics that Metadata may
//! auto-create go to the controller shard; the answer is rebuilt after every shard holds
//! the new image, so the client can produce at once.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, DescribeClientQuotasRequest, DescribeClusterRequest, DescribeConfigsRequest,
    DescribeTopicPartitionsRequest, DescribeUserScramCredentialsRequest, MetadataRequest,
};

use super::admin::{self, Advertised};
use super::control::{call_controller, ControllerRequest};
use super::dispatch::{ready, respond, ResponseFuture};
use crate::protocol::decode_request;
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
    listener: &Rc<str>,
) -> Result<ResponseFuture, String> {
    let (header, req) = decode_request::<MetadataRequest>(frame, ApiKey::Metadata, version)
        .map_err(|e| e.to_string())?;
    let ctx = ctx.clone();
    let listener = listener.clone();
    Ok(Box::pin(async move {
        let own = advertised(&ctx, &listener);
        let listeners = (own.as_slice(), &*listener);
        let (mut response, to_create) =
            admin::metadata::build_metadata(&ctx.image(), &req, version, listeners);
        if !to_create.is_empty() {
            call_controller(&ctx, ControllerRequest::AutoCreate(to_create)).await;
            response = admin::metadata::build_metadata(&ctx.image(), &req, version, listeners).0;
        }
        respond(ApiKey::Metadata, version, header.correlation_id, &response)
    }))
}

/// DescribeConfigs and DescribeCluster: read-only, from this shard's image.
pub fn start_read_only(
    ctx: &Rc<ShardCtx>,
    api: ApiKey,
    frame: Bytes,
    version: i16,
    listener: &str,
) -> Result<ResponseFuture, String> {
    let image = ctx.image();
    let outcome = match api {
        ApiKey::DescribeConfigs => {
            let (header, req) = decode_request::<DescribeConfigsRequest>(frame, api, version)
                .map_err(|e| e.to_string())?;
            let response = admin::describe_configs::handle(&image, &req, version);
            respond(api, version, header.correlation_id, &response)
        }
        ApiKey::DescribeCluster => {
            let (header, req) = decode_request::<DescribeClusterRequest>(frame, api, version)
                .map_err(|e| e.to_string())?;
            let response = admin::describe_cluster::handle(
                &image,
                &req,
                version,
                (&advertised(ctx, listener), listener),
            );
            respond(api, version, header.correlation_id, &response)
        }
        ApiKey::DescribeTopicPartitions => {
            let (header, req) =
                decode_request::<DescribeTopicPartitionsRequest>(frame, api, version)
                    .map_err(|e| e.to_string())?;
            let response = admin::describe_topic_partitions::handle(&image, &req);
            respond(api, version, header.correlation_id, &response)
        }
        ApiKey::DescribeClientQuotas => {
            let (header, req) = decode_request::<DescribeClientQuotasRequest>(frame, api, version)
                .map_err(|e| e.to_string())?;
            let response = admin::describe_client_quotas::handle(&image, &req, version);
            respond(api, version, header.correlation_id, &response)
        }
        ApiKey::DescribeUserScramCredentials => {
            let (header, req) =
                decode_request::<DescribeUserScramCredentialsRequest>(frame, api, version)
                    .map_err(|e| e.to_string())?;
            let response = admin::describe_user_scram_credentials::handle(
                &image.scram_credentials,
                &req,
                version,
            );
            respond(api, version, header.correlation_id, &response)
        }
        other => return Err(format!("{other:?} is not a read-only metadata API")),
    };
    Ok(ready(outcome))
}
