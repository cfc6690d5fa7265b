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
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};

use super::describe_configs::{RESOURCE_BROKER, RESOURCE_TOPIC};
use super::{error_code, sb, Mutation};
use crate::controller::{
    validate_topic_name, BrokerChange, ControllerState, MetadataImage, TopicChange, TopicImage,
};
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

fn replace_one(
    controller: &mut ControllerState,
    r: &AlterConfigsResource,
    validate_only: bool,
) -> Result<bool, (i16, String)> {
    let invalid_request = |m: String| (ResponseError::InvalidRequest.code(), m);
    let name = r.resource_name.as_str();
    if r.resource_type == RESOURCE_BROKER {
        return replace_broker(controller, r, validate_only);
    }
    let (image, topic) = target_topic(controller, r.resource_type, name)?;
    let mut given = HashSet::new();
    let mut changes: Vec<TopicChange> = Vec::new();
    for c in &r.configs {
        let key = c.name.to_string();
        if !given.insert(key.clone()) {
            return Err(invalid_request(format!("Error due to duplicate config keys: {key}")));
        }
        let value = c
            .value
            .as_ref()
            .map(|v| v.to_string())
            .ok_or_else(|| invalid_request(format!("Null value not supported for : {key}")))?;
        changes.push((key, Some(value)));
    }
    changes.extend(topic.configs.keys().filter(|k| !given.contains(*k)).map(|k| (k.clone(), None)));
    let before = image.version;
    controller.alter_topic_configs(name, &changes, validate_only).map_err(|e| error_code(&e))?;
    Ok(controller.image().version != before)
}

/// Replaces the dynamic configs of a BROKER resource (Kafka's legacy AlterConfigs semantics).
fn replace_broker(
    controller: &mut ControllerState,
    r: &AlterConfigsResource,
    validate_only: bool,
) -> Result<bool, (i16, String)> {
    let invalid_request = |m: String| (ResponseError::InvalidRequest.code(), m);
    let node = target_broker(controller, r.resource_name.as_str())?;
    let mut given = HashSet::new();
    let mut changes: Vec<BrokerChange> = Vec::new();
    for c in &r.configs {
        let key = c.name.to_string();
        if !given.insert(key.clone()) {
            return Err(invalid_request("Error due to duplicate config keys".into()));
        }
        let value = c
            .value
            .as_ref()
            .map(|v| v.to_string())
            .ok_or_else(|| invalid_request(format!("Null value not supported for : {key}")))?;
        changes.push((key, Some(value)));
    }
    let current = controller.dynamic_broker_configs(node);
    changes.extend(current.keys().filter(|k| !given.contains(*k)).map(|k| (k.clone(), None)));
    controller.alter_broker_configs(node, &changes, validate_only).map_err(|e| error_code(&e))
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
