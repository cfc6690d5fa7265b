//! CreateTopics (API key 19), v2–7: partitions and replication factor (-1 = broker
//! defaults), trivial manual assignments, validated configs, `validate_only`, the effective
//! configs in v5+ responses and the topic id in v7.
//!
//! Runs on the controller shard (mutates the [`ControllerState`]). Duplicate names in one request
//! get INVALID_REQUEST, as Kafka answers them.

use std::collections::HashMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};

use super::describe_configs::topic_config_entries;
use super::{error_code, sb, Mutation};
use crate::constants::ADMIN_REQUEST_TOPICS_MAX;
use crate::controller::{ControllerState, NewTopic, TopicImage};

/// Kafka 4.x's floor (KIP-896) to the newest schema; every field of v7 is implemented.
pub const VERSIONS: (i16, i16) = (2, 7);

/// Creates (or validates) the requested topics.
pub fn handle(
    controller: &mut ControllerState,
    request: &CreateTopicsRequest,
    version: i16,
) -> Mutation<CreateTopicsResponse> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for t in &request.topics {
        *seen.entry(t.name.0.as_str()).or_default() += 1;
    }
    // Refused topics keep their error; the others go to the controller in one call (one
    // fsync for the whole request), and their results are put back in request order.
    let mut slots: Vec<Result<usize, String>> = Vec::with_capacity(request.topics.len());
    let mut specs = Vec::new();
    for (i, t) in request.topics.iter().enumerate() {
        let name = t.name.0.as_str();
        if seen.get(name).copied().unwrap_or(0) > 1 {
            slots.push(Err("Found multiple entries for this topic.".to_string()));
        } else if i >= ADMIN_REQUEST_TOPICS_MAX {
            slots.push(Err(format!("At most {ADMIN_REQUEST_TOPICS_MAX} topics per request.")));
        } else {
            slots.push(Ok(specs.len()));
            specs.push(new_topic(t));
        }
    }
    let mut outcomes: Vec<Option<_>> =
        controller.create_topics(&specs, request.validate_only).into_iter().map(Some).collect();
    let image = controller.image();
    let mut image_changed = false;
    let results = request
        .topics
        .iter()
        .zip(slots)
        .map(|(t, slot)| {
            let name = t.name.0.as_str();
            let outcome = match slot {
                Err(message) => {
                    return error_result(name, ResponseError::InvalidRequest.code(), message)
                }
                Ok(i) => outcomes.get_mut(i).and_then(Option::take),
            };
            match outcome {
                Some(Ok(topic)) => {
                    image_changed |= !request.validate_only;
                    ok_result(&topic, &image.broker_defaults, version)
                }
                Some(Err(e)) => {
                    let (code, message) = error_code(&e);
                    error_result(name, code, message)
                }
                None => error_result(name, ResponseError::UnknownServerError.code(), String::new()),
            }
        })
        .collect();
    let response = CreateTopicsResponse::default().with_topics(results);
    Mutation { response, image_changed }
}

fn new_topic(t: &CreatableTopic) -> NewTopic {
    NewTopic {
        name: t.name.0.to_string(),
        num_partitions: t.num_partitions,
        replication_factor: t.replication_factor,
        assignments: t
            .assignments
            .iter()
            .map(|a| (a.partition_index, a.broker_ids.iter().map(|b| b.0).collect()))
            .collect(),
        configs: t
            .configs
            .iter()
            .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
            .collect(),
    }
}

fn ok_result(
    topic: &TopicImage,
    defaults: &crate::controller::BrokerDefaults,
    version: i16,
) -> CreatableTopicResult {
    let mut r = CreatableTopicResult::default()
        .with_name(sb(topic.name.clone()).into())
        .with_error_message(None);
    if version >= 5 {
        let configs = topic_config_entries(topic, defaults, None)
            .into_iter()
            .map(|e| {
                CreatableTopicConfigs::default()
                    .with_name(sb(e.name))
                    .with_value(e.value.map(sb))
                    .with_read_only(false)
                    .with_config_source(e.source)
                    .with_is_sensitive(false)
            })
            .collect();
        r = r
            .with_num_partitions(i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX))
            .with_replication_factor(
                i16::try_from(topic.partitions.first().map_or(1, |p| p.replicas.len()))
                    .unwrap_or(1),
            )
            .with_configs(Some(configs));
    } else {
        r = r.with_configs(None);
    }
    if version >= 7 {
        r = r.with_topic_id(topic.topic_id);
    }
    r
}

fn error_result(name: &str, code: i16, message: String) -> CreatableTopicResult {
    CreatableTopicResult::default()
        .with_name(sb(name).into())
        .with_error_code(code)
        .with_error_message(Some(sb(message)))
        .with_num_partitions(-1)
        .with_replication_factor(-1)
        .with_configs(None)
}
