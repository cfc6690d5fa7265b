//! AlterConfigs (API key 33), v0–2, for topics and brokers: replaces a topic's whole set of
//! explicit configs, or a BROKER resource's whole set of dynamic configs (one broker by node
//! id, or the cluster default by the empty name), with the given ones (configs not named
//! return to their defaults), validated as one change and persisted in the metadata log;
//! `validate_only`.
//!
//! Runs on the controller shard. Same advertising caveat as IncrementalAlterConfigs: only
//! with shards applying each published image's topic configs live.

use std::collections::HashSet;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource as IncrementalResource, AlterableConfig,
};
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};

use super::describe_configs::{RESOURCE_BROKER, RESOURCE_TOPIC};
use super::incremental_alter_configs::OP_DELETE;
use super::{sb, Mutation};
use crate::controller::{validate_topic_name, ControllerState, MetadataImage, TopicImage};
use crate::types::NodeId;

/// Every version Kafka 4.x defines.
pub const VERSIONS: (i16, i16) = (0, 2);

/// Replaces the configs of the requested topics.
pub fn handle(
    controller: &mut ControllerState,
    request: &AlterConfigsRequest,
    _version: i16,
) -> Mutation<AlterConfigsResponse> {
    let mut image_changed = false;
    let responses = request
        .resources
        .iter()
        .map(|r| {
            let resp = AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone())
                .with_error_message(None);
            match replace_one(controller, r, request.validate_only) {
                Ok(changed) => {
                    image_changed |= changed;
                    resp
                }
                Err((code, message)) => {
                    resp.with_error_code(code).with_error_message(Some(sb(message)))
                }
            }
        })
        .collect();
    Mutation { response: AlterConfigsResponse::default().with_responses(responses), image_changed }
}

/// Kafka's legacy semantics as incremental operations: each given config SET, each explicit
/// config of the resource not given DELETEd (back to its default). Kafka's legacy checks and
/// messages come first (duplicate keys, null values); the rest is IncrementalAlterConfigs'.
fn replace_one(
    controller: &mut ControllerState,
    r: &AlterConfigsResource,
    validate_only: bool,
) -> Result<bool, (i16, String)> {
    let invalid_request = |m: String| (ResponseError::InvalidRequest.code(), m);
    let name = r.resource_name.as_str();
    let broker = r.resource_type == RESOURCE_BROKER;
    let mut given = HashSet::new();
    let mut ops = Vec::with_capacity(r.configs.len());
    for c in &r.configs {
        let key = c.name.to_string();
        if !given.insert(key.clone()) {
            let message = if broker { String::new() } else { format!(": {key}") };
            return Err(invalid_request(format!("Error due to duplicate config keys{message}")));
        }
        let value = c
            .value
            .clone()
            .ok_or_else(|| invalid_request(format!("Null value not supported for : {key}")))?;
        ops.push(AlterableConfig::default().with_name(c.name.clone()).with_value(Some(value)));
    }
    let current: Vec<String> = if broker {
        let node = target_broker(controller, name)?;
        controller.dynamic_broker_configs(node).into_keys().collect()
    } else {
        target_topic(controller, r.resource_type, name)?.1.configs.keys().cloned().collect()
    };
    ops.extend(
        current
            .into_iter()
            .filter(|k| !given.contains(k))
            .map(|k| AlterableConfig::default().with_name(sb(k)).with_config_operation(OP_DELETE)),
    );
    let incremental = IncrementalResource::default()
        .with_resource_type(r.resource_type)
        .with_resource_name(r.resource_name.clone())
        .with_configs(ops);
    super::incremental_alter_configs::alter_one(controller, &incremental, validate_only)
}

/// The broker a BROKER resource names: `None` for the cluster default (the empty name),
/// else this node's or a registered broker's id; Kafka's errors (INVALID_REQUEST) for anything else.
pub(super) fn target_broker(
    controller: &ControllerState,
    name: &str,
) -> Result<Option<NodeId>, (i16, String)> {
    if name.is_empty() {
        return Ok(None);
    }
    let invalid_request = |m: String| (ResponseError::InvalidRequest.code(), m);
    let id: i32 = name
        .parse()
        .map_err(|_| invalid_request(format!("Node id must be an integer, but it is: {name}")))?;
    let me = controller.node_id();
    // Forwarded requests run here on the active controller, which may be another node than
    // the one the client addressed (Kafka checks the id on the receiving broker, then
    // forwards): any registered broker's resource is accepted, as Kafka's controller does.
    // kafka-reassign-partitions.sh sets and clears every broker's throttles this way.
    if id != me.0 && !controller.brokers().contains_key(&NodeId(id)) {
        return Err(invalid_request(format!(
            "Unexpected broker id, expected {me}, but received {name}"
        )));
    }
    Ok(Some(NodeId(id)))
}

/// The topic an AlterConfigs/IncrementalAlterConfigs resource names, with the image it was
/// found in; Kafka's errors for another resource type, an invalid name or an unknown topic.
pub(super) fn target_topic(
    controller: &ControllerState,
    resource_type: i8,
    name: &str,
) -> Result<(Arc<MetadataImage>, Arc<TopicImage>), (i16, String)> {
    let invalid_request = |m: String| (ResponseError::InvalidRequest.code(), m);
    if resource_type != RESOURCE_TOPIC {
        return Err(invalid_request(format!("Unknown resource type {resource_type}")));
    }
    validate_topic_name(name).map_err(|m| (ResponseError::InvalidTopicException.code(), m))?;
    let image = controller.image();
    let topic = image.topic(name).cloned().ok_or_else(|| {
        (
            ResponseError::UnknownTopicOrPartition.code(),
            format!("The topic '{name}' does not exist."),
        )
    })?;
    Ok((image, topic))
}
