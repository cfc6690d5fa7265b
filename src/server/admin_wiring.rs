//! TEMPORARY: CreateTopics/DeleteTopics on the stand-in controller, replaced by the
//! controller's handlers in `server::admin` once they are on main.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
};

use super::control::ControllerReply;
use crate::protocol::{decode_request, encode_response};
use crate::shard::{Controller, MetadataImage, ShardCtx};

type Outcome = (ControllerReply, Option<Arc<MetadataImage>>);

pub(super) fn run(
    ctx: &Rc<ShardCtx>,
    controller: &RefCell<Controller>,
    api: ApiKey,
    version: i16,
    frame: Bytes,
) -> Outcome {
    let result = match api {
        ApiKey::CreateTopics => create_topics(ctx, controller, version, frame),
        ApiKey::DeleteTopics => delete_topics(controller, version, frame),
        other => Err(format!("{other:?} is not a controller API")),
    };
    result.unwrap_or_else(|reason| (ControllerReply::Rejected(reason), None))
}

fn create_topics(
    ctx: &ShardCtx,
    controller: &RefCell<Controller>,
    version: i16,
    frame: Bytes,
) -> Result<Outcome, String> {
    let (header, req) = decode_request::<CreateTopicsRequest>(frame, ApiKey::CreateTopics, version)
        .map_err(|e| e.to_string())?;
    let mut c = controller.borrow_mut();
    let mut changed = false;
    let mut topics = Vec::new();
    for t in &req.topics {
        let n = if t.num_partitions == -1 { ctx.config.num_partitions } else { t.num_partitions };
        let mut result = CreatableTopicResult::default().with_name(t.name.clone());
        if n < 1 {
            result.error_code = ResponseError::InvalidPartitions.code();
        } else if req.validate_only {
        } else if c.create_topic(&t.name, n) {
            changed = true;
            result.num_partitions = n;
            result.replication_factor = 1;
            if let Some(topic) = c.image().topics.get(t.name.as_str()) {
                result.topic_id = topic.topic_id;
            }
        } else {
            result.error_code = ResponseError::TopicAlreadyExists.code();
        }
        topics.push(result);
    }
    let resp = CreateTopicsResponse::default().with_topics(topics);
    let frame = encode_response(ApiKey::CreateTopics, version, header.correlation_id, &resp)
        .map_err(|e| e.to_string())?;
    Ok((ControllerReply::Encoded(frame), changed.then(|| c.image())))
}

fn delete_topics(
    controller: &RefCell<Controller>,
    version: i16,
    frame: Bytes,
) -> Result<Outcome, String> {
    let (header, req) = decode_request::<DeleteTopicsRequest>(frame, ApiKey::DeleteTopics, version)
        .map_err(|e| e.to_string())?;
    let mut c = controller.borrow_mut();
    let mut changed = false;
    let mut names: Vec<_> = req.topic_names.clone();
    names.extend(req.topics.iter().filter_map(|t| t.name.clone()));
    let responses = names
        .into_iter()
        .map(|name| {
            let mut r = DeletableTopicResult::default().with_name(Some(name.clone()));
            if c.delete_topic(&name) {
                changed = true;
            } else {
                r.error_code = ResponseError::UnknownTopicOrPartition.code();
            }
            r
        })
        .collect();
    let resp = DeleteTopicsResponse::default().with_responses(responses);
    let frame = encode_response(ApiKey::DeleteTopics, version, header.correlation_id, &resp)
        .map_err(|e| e.to_string())?;
    Ok((ControllerReply::Encoded(frame), changed.then(|| c.image())))
}
