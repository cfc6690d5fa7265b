//! OffsetDelete: removes committed offsets of partitions the group no longer consumes.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetDeleteRequest, OffsetDeleteResponse};

use super::{call_group, error_code, GroupAnswer, GroupCall};
use crate::group::types::GroupError;
use crate::protocol::decode_request;
use crate::server::dispatch::{respond, ResponseFuture};
use crate::shard::ShardCtx;

/// v0 only (Kafka 4's range).
pub const VERSIONS: (i16, i16) = (0, 0);

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
) -> Result<ResponseFuture, String> {
    let (header, req) = decode_request::<OffsetDeleteRequest>(frame, ApiKey::OffsetDelete, version)
        .map_err(|e| e.to_string())?;
    let partitions: Vec<(String, i32)> = req
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.to_string(), p.partition_index)))
        .collect();
    let call = GroupCall::OffsetDelete { group_id: req.group_id.0.to_string(), partitions };
    let answer = call_group(ctx, call).await;
    Ok(Box::pin(async move {
        let result = match answer.await {
            GroupAnswer::OffsetDelete(r) => r,
            GroupAnswer::Failed(e) => Err(e),
            _ => Err(GroupError::CoordinatorNotAvailable),
        };
        let mut response = OffsetDeleteResponse::default();
        match result {
            Err(e) => response.error_code = error_code(Some(e)),
            Ok(errors) => {
                let mut errors = errors.into_iter();
                for t in req.topics {
                    let partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            OffsetDeleteResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(error_code(errors.next().flatten()))
                        })
                        .collect();
                    response.topics.push(
                        OffsetDeleteResponseTopic::default()
                            .with_name(t.name)
                            .with_partitions(partitions),
                    );
                }
            }
        }
        respond(ApiKey::OffsetDelete, version, header.correlation_id, &response)
    }))
}
