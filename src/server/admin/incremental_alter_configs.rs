//! IncrementalAlterConfigs (API key 44), v0–1, for topics and brokers: SET, DELETE, APPEND
//! and SUBTRACT (the last two on LIST configs only), validated as one change per resource and
//! persisted in the metadata log; `validate_only`. This is what `kafka-configs.sh --alter`
//! sends. A BROKER resource is one broker (its node id) or the cluster default (the empty
//! name, `--entity-default`); only the settings whose update mode is dynamic may change.
//!
//! Runs on the controller shard. Advertise it only together with shards applying each
//! published image's topic configs to open logs; otherwise a change to an acting config (e.g.
//! `segment.bytes`, or the broker's `log.segment.bytes`) would be stored but take effect only
//! after a restart.

use std::collections::HashSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};

use super::alter_configs::{target_broker, target_topic};
use super::describe_configs::RESOURCE_BROKER;
use super::{error_code, sb, Mutation};
use crate::controller::configs::{
    broker_config_def, effective_value, topic_config_def, ConfigType,
};
use crate::controller::{BrokerChange, ControllerState, TopicChange};

/// Every version Kafka 4.x defines.
pub const VERSIONS: (i16, i16) = (0, 1);

const OP_SET: i8 = 0;
pub(super) const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// Applies the requested config operations.
pub fn handle(
    controller: &mut ControllerState,
    request: &IncrementalAlterConfigsRequest,
    _version: i16,
) -> Mutation<IncrementalAlterConfigsResponse> {
    let mut seen = HashSet::new();
    let duplicates: HashSet<(i8, String)> = request
        .resources
        .iter()
        .map(|r| (r.resource_type, r.resource_name.to_string()))
        .filter(|k| !seen.insert(k.clone()))
        .collect();
    let mut image_changed = false;
    let responses = request
        .resources
        .iter()
        .map(|r| {
            let key = (r.resource_type, r.resource_name.to_string());
            let outcome = if duplicates.contains(&key) {
                Err((ResponseError::InvalidRequest.code(), "Duplicate resource in request.".into()))
            } else {
                alter_one(controller, r, request.validate_only)
            };
            let resp = AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone())
                .with_error_message(None);
            match outcome {
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
    let response = IncrementalAlterConfigsResponse::default().with_responses(responses);
    Mutation { response, image_changed }
}

/// Alters one resource; `Ok(true)` when the image changed (AlterConfigs runs here too).
pub(super) fn alter_one(
    controller: &mut ControllerState,
    r: &AlterConfigsResource,
    validate_only: bool,
) -> Result<bool, (i16, String)> {
    let invalid_request = |m: String| (ResponseError::InvalidRequest.code(), m);
    let name = r.resource_name.as_str();
    if r.resource_type == RESOURCE_BROKER {
        return alter_broker(controller, r, validate_only);
    }
    let (image, topic) = target_topic(controller, r.resource_type, name)?;
    let mut names = HashSet::new();
    let mut changes: Vec<TopicChange> = Vec::new();
    for c in &r.configs {
        let config = c.name.to_string();
        if !names.insert(config.clone()) {
            return Err(invalid_request(format!("Error due to duplicate config keys: {config}")));
        }
        let value = c.value.as_ref().map(|v| v.to_string());
        let change = match c.config_operation {
            OP_SET => {
                let v = value.ok_or_else(|| {
                    invalid_request(format!("Null value not supported for : {config}"))
                })?;
                Some(v)
            }
            OP_DELETE => None,
            op @ (OP_APPEND | OP_SUBTRACT) => {
                let def = topic_config_def(&config).ok_or_else(|| {
                    (
                        ResponseError::InvalidConfig.code(),
                        format!("Unknown topic config name: {config}"),
                    )
                })?;
                if def.kind != ConfigType::List {
                    let verb = if op == OP_APPEND { "append" } else { "subtract" };
                    return Err(invalid_request(format!(
                        "Config value {verb} is not allowed for config key: {config}"
                    )));
                }
                let current = effective_value(def, &topic.configs, &image.broker_defaults).0;
                Some(edit_list(current.as_deref(), value.as_deref(), op == OP_APPEND))
            }
            other => return Err(invalid_request(format!("Unknown config operation {other}"))),
        };
        changes.push((config, change));
    }
    let before = controller.image().version;
    controller.alter_topic_configs(name, &changes, validate_only).map_err(|e| error_code(&e))?;
    Ok(controller.image().version != before)
}

/// Alters the dynamic configs of one BROKER resource; `Ok(true)` when the image changed.
fn alter_broker(
    controller: &mut ControllerState,
    r: &AlterConfigsResource,
    validate_only: bool,
) -> Result<bool, (i16, String)> {
    let invalid_request = |m: String| (ResponseError::InvalidRequest.code(), m);
    let invalid_config = |m: String| (ResponseError::InvalidConfig.code(), m);
    let node = target_broker(controller, r.resource_name.as_str())?;
    let mut names = HashSet::new();
    if !r.configs.iter().all(|c| names.insert(c.name.to_string())) {
        return Err(invalid_request("Error due to duplicate config keys".into()));
    }
    let nulls: Vec<String> = r
        .configs
        .iter()
        .filter(|c| c.config_operation != OP_DELETE && c.value.is_none())
        .map(|c| c.name.to_string())
        .collect();
    if !nulls.is_empty() {
        return Err(invalid_request(format!(
            "Null value not supported for : {}",
            nulls.join(", ")
        )));
    }
    let current = controller.dynamic_broker_configs(node);
    let mut changes: Vec<BrokerChange> = Vec::new();
    for c in &r.configs {
        let config = c.name.to_string();
        let value = c.value.as_ref().map(|v| v.to_string());
        let change = match c.config_operation {
            OP_SET => value,
            OP_DELETE => None,
            op @ (OP_APPEND | OP_SUBTRACT) => {
                let (kind, _, default, _) = broker_config_def(&config)
                    .ok_or_else(|| invalid_config(format!("Unknown config name: {config}")))?;
                if kind != ConfigType::List {
                    let verb = if op == OP_APPEND { "append" } else { "subtract" };
                    return Err(invalid_config(format!(
                        "Config value {verb} is not allowed for config key: {config}"
                    )));
                }
                // Kafka edits the resource's own dynamic value, else the config's default.
                let base = current.get(&config).cloned().or(default.map(str::to_string));
                Some(edit_list(base.as_deref(), value.as_deref(), op == OP_APPEND))
            }
            other => return Err(invalid_request(format!("Unknown operations type {other}"))),
        };
        changes.push((config, change));
    }
    controller.alter_broker_configs(node, &changes, validate_only).map_err(|e| error_code(&e))
}

/// APPEND adds items not yet present; SUBTRACT removes them (Kafka's list semantics).
fn edit_list(current: Option<&str>, value: Option<&str>, append: bool) -> String {
    let split = |s: Option<&str>| -> Vec<String> {
        s.unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(String::from)
            .collect()
    };
    let mut items = split(current);
    for v in split(value) {
        if append {
            if !items.contains(&v) {
                items.push(v);
            }
        } else {
            items.retain(|x| *x != v);
        }
    }
    items.join(",")
}
