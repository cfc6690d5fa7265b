//! DeleteTopics (API key 20), v1–6: by name, and by topic id in v6.
//!
//! Runs on the controller shard. The controller only removes the topic from metadata; the
//! server renames the partition directories (`<topic>-<p>.<uuid>-delete`) on the owner shards
//! once the new image is published, using the removed topics' last state from the old image.

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};
use uuid::Uuid;

use super::{error_code, sb, Mutation};
use crate::controller::{validate_topic_name, ControllerError, ControllerState};

/// Kafka 4.x's floor (KIP-896) to v6 (topic ids, which Shardlog has).
pub const VERSIONS: (i16, i16) = (1, 6);

/// Deletes the requested topics.
pub fn handle(
    controller: &mut ControllerState,
    request: &DeleteTopicsRequest,
    version: i16,
) -> Mutation<DeleteTopicsResponse> {
    // v6 names topics in `topics` (name or id); older versions in `topic_names`.
    let targets: Vec<(Option<String>, Uuid)> = if version >= 6 {
        request
            .topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id))
            .collect()
    } else {
        request.topic_names.iter().map(|n| (Some(n.0.to_string()), Uuid::nil())).collect()
    };
    let mut image_changed = false;
    let responses = targets
        .into_iter()
        .map(|(name, id)| {
            let outcome = match (&name, id.is_nil()) {
                (Some(_), false) => Err(ControllerError::InvalidRequest(
                    "Only one of topic name or topic id may be set".into(),
                )),
                (Some(n), true) => validate_topic_name(n)
                    .map_err(ControllerError::InvalidTopic)
                    .and_then(|()| controller.delete_topic(n)),
                (None, false) => controller.delete_topic_by_id(&id),
                (None, true) => Err(ControllerError::InvalidRequest(
                    "Neither topic name nor topic id was set".into(),
                )),
            };
            let result = DeletableTopicResult::default().with_error_message(None);
            match outcome {
                Ok(topic) => {
                    image_changed = true;
                    let r = result.with_name(Some(sb(topic.name.clone()).into()));
                    if version >= 6 {
                        r.with_topic_id(topic.topic_id)
                    } else {
                        r
                    }
                }
                Err(e) => {
                    let (code, message) = error_code(&e);
                    let r = result.with_name(name.map(|n| sb(n).into())).with_error_code(code);
                    let r = if version >= 5 { r.with_error_message(Some(sb(message))) } else { r };
                    if version >= 6 {
                        r.with_topic_id(id)
                    } else {
                        r
                    }
                }
            }
        })
        .collect();
    Mutation { response: DeleteTopicsResponse::default().with_responses(responses), image_changed }
}
