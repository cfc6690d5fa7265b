//! CreatePartitions (API key 37), v0–3: grow a topic's partition count (never shrink),
//! trivial manual assignments only, `validate_only`.
//!
//! Runs on the controller shard. New partitions are placed on the least-loaded shards like
//! new topics; the server opens their logs on the owner shards before answering.

use std::collections::HashMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};

use super::{error_code, sb, Mutation};
use crate::controller::{validate_topic_name, ControllerError, ControllerState};

/// Every version Kafka 4.x defines (KIP-896 kept v0).
pub const VERSIONS: (i16, i16) = (0, 3);

/// Adds partitions to the requested topics.
pub fn handle(
    controller: &mut ControllerState,
    request: &CreatePartitionsRequest,
    _version: i16,
) -> Mutation<CreatePartitionsResponse> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for t in &request.topics {
        *seen.entry(t.name.0.as_str()).or_default() += 1;
    }
    let mut image_changed = false;
    let results = request
        .topics
        .iter()
        .map(|t| {
            let name = t.name.0.as_str();
            let result = CreatePartitionsTopicResult::default()
                .with_name(t.name.clone())
                .with_error_message(None);
            if seen.get(name).copied().unwrap_or(0) > 1 {
                return result
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(sb("Duplicate topic in request.")));
            }
            let assignments: Option<Vec<Vec<i32>>> = t
                .assignments
                .as_ref()
                .map(|a| a.iter().map(|x| x.broker_ids.iter().map(|b| b.0).collect()).collect());
            let outcome =
                validate_topic_name(name).map_err(ControllerError::InvalidTopic).and_then(|()| {
                    controller.create_partitions(
                        name,
                        t.count,
                        assignments.as_deref(),
                        request.validate_only,
                    )
                });
            match outcome {
                Ok(_) => {
                    image_changed |= !request.validate_only;
                    result
                }
                Err(e) => {
                    let (code, message) = error_code(&e);
                    result.with_error_code(code).with_error_message(Some(sb(message)))
                }
            }
        })
        .collect();
    Mutation { response: CreatePartitionsResponse::default().with_results(results), image_changed }
}
