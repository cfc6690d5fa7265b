//! FindCoordinator: a group's or transactional id's coordinator is the broker leading its
//! `__consumer_offsets` / `__transaction_state` partition (the first request of each key
//! type creates the topic through the controller). The answer is that leader's advertised
//! endpoint from the image; COORDINATOR_NOT_AVAILABLE while the partition has no leader (or
//! the leader has no known endpoint). Batched keys from v4. Group keys (type 0) and
//! transactional ids (type 1) are served; share groups (type 2) are not implemented yet.
//!
//! Runs on the connection's shard, from its cached image.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::find_coordinator_response::Coordinator as CoordinatorEntry;
use kafka_protocol::messages::{ApiKey, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::{ensure_offsets_topic, error_code};
use crate::authz::Operation::Describe;
use crate::authz::ResourceType::{Group, TransactionalId};
use crate::controller::MetadataImage;
use crate::group::placement::{partition_for, OFFSETS_TOPIC};
use crate::group::types::GroupError;
use crate::protocol::decode_request;
use crate::server::authz::Authorize;
use crate::server::dispatch::{respond, ResponseFuture};
use crate::shard::ShardCtx;
use crate::txn::TXN_TOPIC;

/// Kafka 4's range is 0–6; v6 only adds the share-group key type, answered with an error.
pub const VERSIONS: (i16, i16) = (0, 6);

const GROUP_KEY_TYPE: i8 = 0;
const TRANSACTION_KEY_TYPE: i8 = 1;

/// A coordinator's node id, host and port.
type Endpoint = (i32, StrBytes, i32);

pub fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &Rc<crate::security::Session>,
) -> Result<ResponseFuture, String> {
    let listener = session.listener.clone();
    let auth = crate::server::authz::Auth::new(ctx, session);
    let (header, req) =
        decode_request::<FindCoordinatorRequest>(frame, ApiKey::FindCoordinator, version)
            .map_err(|e| e.to_string())?;
    let ctx = ctx.clone();
    Ok(Box::pin(async move {
        let keys: Vec<StrBytes> =
            if version >= 4 { req.coordinator_keys.clone() } else { vec![req.key.clone()] };
        // Kafka: DESCRIBE on the group or transactional id, before the coordinator lookup
        // (and before the internal topic is created for it).
        let refusals: Vec<Option<GroupError>> = keys
            .iter()
            .map(|key| match req.key_type {
                GROUP_KEY_TYPE => (!auth.allowed(Describe, Group, key))
                    .then_some(GroupError::GroupAuthorizationFailed),
                TRANSACTION_KEY_TYPE => (!auth.allowed(Describe, TransactionalId, key))
                    .then_some(GroupError::TransactionalIdAuthorizationFailed),
                _ => None,
            })
            .collect();
        let (topic, ready) = match req.key_type {
            _ if !keys.is_empty() && refusals.iter().all(Option::is_some) => (OFFSETS_TOPIC, None),
            GROUP_KEY_TYPE => (OFFSETS_TOPIC, ensure_offsets_topic(&ctx).await.err()),
            TRANSACTION_KEY_TYPE => (
                TXN_TOPIC,
                crate::server::txn::ensure_txn_topic(&ctx)
                    .await
                    .err()
                    .map(|_| GroupError::CoordinatorNotAvailable),
            ),
            _ => (OFFSETS_TOPIC, Some(GroupError::CoordinatorNotAvailable)),
        };
        let image = ctx.image();
        let lookup = |(key, refused): (&StrBytes, &Option<GroupError>)| match (*refused, ready) {
            (Some(e), _) | (None, Some(e)) => Err(e),
            (None, None) => coordinator_for(&ctx, &image, topic, key.as_str(), &listener),
        };
        let mut response = FindCoordinatorResponse::default();
        if version >= 4 {
            response.coordinators = keys
                .into_iter()
                .zip(&refusals)
                .map(|(key, refused)| {
                    let found = lookup((&key, refused));
                    let entry = CoordinatorEntry::default().with_key(key);
                    match found {
                        Ok((node, host, port)) => {
                            entry.with_node_id(BrokerId(node)).with_host(host).with_port(port)
                        }
                        Err(e) => entry
                            .with_error_code(error_code(Some(e)))
                            .with_node_id(BrokerId(-1))
                            .with_port(-1),
                    }
                })
                .collect();
        } else {
            let first = keys.first().zip(refusals.first());
            match first.map_or(Err(GroupError::CoordinatorNotAvailable), lookup) {
                Ok((node, host, port)) => {
                    response =
                        response.with_node_id(BrokerId(node)).with_host(host).with_port(port);
                }
                Err(e) => {
                    response.error_code = error_code(Some(e));
                    response = response.with_node_id(BrokerId(-1)).with_port(-1);
                }
            }
        }
        respond(ApiKey::FindCoordinator, version, header.correlation_id, &response)
    }))
}

/// The leader of `key`'s partition of `topic`, with its advertised endpoint.
fn coordinator_for(
    ctx: &ShardCtx,
    image: &MetadataImage,
    topic: &str,
    key: &str,
    listener: &str,
) -> Result<Endpoint, GroupError> {
    let n = image
        .topic(topic)
        .and_then(|t| i32::try_from(t.partitions.len()).ok())
        .filter(|n| *n > 0)
        .ok_or(GroupError::CoordinatorNotAvailable)?;
    let leader = image
        .partition(topic, partition_for(key, n))
        .map(|p| p.leader)
        .filter(|l| l.0 >= 0)
        .ok_or(GroupError::CoordinatorNotAvailable)?;
    leader_endpoint(ctx, image, leader.0, Some(listener)).ok_or(GroupError::CoordinatorNotAvailable)
}

/// A broker's advertised endpoint of `listener` from the image (`None`: the inter-broker
/// listener, for broker-to-broker calls); this node's own listener while no broker
/// registered (a single node).
pub fn leader_endpoint(
    ctx: &ShardCtx,
    image: &MetadataImage,
    node: i32,
    listener: Option<&str>,
) -> Option<Endpoint> {
    if image.brokers.is_empty() && node == ctx.config.node_id.0 {
        let (host, port) = ctx.config.advertised(listener)?;
        return Some((node, StrBytes::from_string(host.to_string()), i32::from(port)));
    }
    let broker = image.brokers.get(&crate::types::NodeId(node)).filter(|b| !b.fenced)?;
    let e = match listener {
        Some(name) => broker.endpoint(name)?,
        None => broker.inter_broker_endpoint(&ctx.config.inter_broker_client.listener)?,
    };
    Some((node, StrBytes::from_string(e.host.clone()), i32::from(e.port)))
}
