//! Metadata: answered from this shard's cached image; unknown topics are auto-created
//! through the controller shard when the request and the broker allow it, and the
//! answer is built after every shard has the new image (so the client can produce at
//! once).
//!
//! TEMPORARY builder: replaced by the controller's `build_metadata` once it is on main.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{ApiKey, BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::control::{call_controller, ControllerRequest};
use super::dispatch::{respond, ResponseFuture};
use crate::protocol::decode_request;
use crate::shard::{MetadataImage, ShardCtx};

pub const VERSIONS: (i16, i16) = (0, 12);

pub fn start(ctx: &Rc<ShardCtx>, frame: Bytes, version: i16) -> Result<ResponseFuture, String> {
    let (header, req) = decode_request::<MetadataRequest>(frame, ApiKey::Metadata, version)
        .map_err(|e| e.to_string())?;
    let ctx = ctx.clone();
    Ok(Box::pin(async move {
        let requested: Option<Vec<String>> = match &req.topics {
            Some(list) if !(version == 0 && list.is_empty()) => {
                Some(list.iter().filter_map(|t| t.name.as_ref().map(|n| n.0.to_string())).collect())
            }
            _ => None,
        };
        let allow = (version < 4 || req.allow_auto_topic_creation) && ctx.config.auto_create_topics;
        if let (Some(names), true) = (&requested, allow) {
            let image = ctx.image();
            let missing: Vec<String> =
                names.iter().filter(|n| !image.topics.contains_key(*n)).cloned().collect();
            if !missing.is_empty() {
                call_controller(&ctx, ControllerRequest::AutoCreate(missing)).await;
            }
        }
        let response = build(&ctx, &ctx.image(), requested.as_deref(), version);
        respond(ApiKey::Metadata, version, header.correlation_id, &response)
    }))
}

fn build(
    ctx: &ShardCtx,
    image: &MetadataImage,
    requested: Option<&[String]>,
    version: i16,
) -> MetadataResponse {
    let node = image.node_id.0;
    let broker = MetadataResponseBroker::default()
        .with_node_id(BrokerId(node))
        .with_host(StrBytes::from_string(ctx.config.advertised_host.clone()))
        .with_port(i32::from(ctx.config.advertised_port));
    let names: Vec<String> = match requested {
        Some(names) => names.to_vec(),
        None => image.topics.keys().cloned().collect(),
    };
    let topics = names
        .into_iter()
        .map(|name| {
            let out = MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(name.clone()))));
            match image.topics.get(&name) {
                None => out.with_error_code(ResponseError::UnknownTopicOrPartition.code()),
                Some(topic) => out
                    .with_topic_id(if version >= 10 { topic.topic_id } else { uuid::Uuid::nil() })
                    .with_is_internal(topic.internal)
                    .with_partitions(
                        topic
                            .partitions
                            .iter()
                            .map(|p| {
                                MetadataResponsePartition::default()
                                    .with_partition_index(p.index)
                                    .with_leader_id(BrokerId(p.leader.0))
                                    .with_leader_epoch(if version >= 7 {
                                        p.leader_epoch.0
                                    } else {
                                        -1
                                    })
                                    .with_replica_nodes(vec![BrokerId(node)])
                                    .with_isr_nodes(vec![BrokerId(node)])
                            })
                            .collect(),
                    ),
            }
        })
        .collect();
    MetadataResponse::default()
        .with_brokers(vec![broker])
        .with_cluster_id((version >= 2).then(|| StrBytes::from_string(image.cluster_id.clone())))
        .with_controller_id(BrokerId(if version >= 1 { node } else { -1 }))
        .with_topics(topics)
}
