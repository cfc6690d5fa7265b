//! FindCoordinator: this broker coordinates every group and transactional id (single node);
//! the first request of each key type creates `__consumer_offsets` or `__transaction_state`.
//! Batched keys from v4. Group keys (type 0) and transactional ids (type 1) are served; share
//! groups (type 2) are not implemented yet.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::find_coordinator_response::Coordinator as CoordinatorEntry;
use kafka_protocol::messages::{ApiKey, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::{ensure_offsets_topic, error_code};
use crate::group::types::GroupError;
use crate::protocol::decode_request;
use crate::server::dispatch::{respond, ResponseFuture};
use crate::shard::ShardCtx;

/// Kafka 4's range is 0–6; v6 only adds the share-group key type, answered with an error.
pub const VERSIONS: (i16, i16) = (0, 6);

const GROUP_KEY_TYPE: i8 = 0;
const TRANSACTION_KEY_TYPE: i8 = 1;

pub fn start(ctx: &Rc<ShardCtx>, frame: Bytes, version: i16) -> Result<ResponseFuture, String> {
    let (header, req) =
        decode_request::<FindCoordinatorRequest>(frame, ApiKey::FindCoordinator, version)
            .map_err(|e| e.to_string())?;
    let ctx = ctx.clone();
    Ok(Box::pin(async move {
        let keys: Vec<StrBytes> =
            if version >= 4 { req.coordinator_keys.clone() } else { vec![req.key.clone()] };
        let error = match req.key_type {
            GROUP_KEY_TYPE => ensure_offsets_topic(&ctx).await.err(),
            TRANSACTION_KEY_TYPE => crate::server::txn::ensure_txn_topic(&ctx)
                .await
                .err()
                .map(|_| GroupError::CoordinatorNotAvailable),
            _ => Some(GroupError::CoordinatorNotAvailable),
        };
        let node_id = BrokerId(ctx.config.node_id.0);
        let host = StrBytes::from_string(ctx.config.advertised_host.clone());
        let port = i32::from(ctx.config.advertised_port);
        let mut response = FindCoordinatorResponse::default();
        if version >= 4 {
            response.coordinators = keys
                .into_iter()
                .map(|key| {
                    let entry = CoordinatorEntry::default()
                        .with_key(key)
                        .with_error_code(error_code(error));
                    match error {
                        None => entry.with_node_id(node_id).with_host(host.clone()).with_port(port),
                        Some(_) => entry.with_node_id(BrokerId(-1)).with_port(-1),
                    }
                })
                .collect();
        } else {
            response.error_code = error_code(error);
            if error.is_none() {
                response = response.with_node_id(node_id).with_host(host).with_port(port);
            } else {
                response = response.with_node_id(BrokerId(-1)).with_port(-1);
            }
        }
        respond(ApiKey::FindCoordinator, version, header.correlation_id, &response)
    }))
}
