//! AddOffsetsToTxn: adds the group's `__consumer_offsets` partition to the producer's open
//! transaction, so the COMMIT/ABORT marker reaches the offsets written by TxnOffsetCommit.
//!
//! Runs on the connection's shard; the answer comes from the coordinator shard.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, ApiKey};

use super::{call_txn, done, error_code, TxnCall};
use crate::authz::Operation::{Read, Write};
use crate::authz::ResourceType::{Group, TransactionalId};
use crate::group::placement::{partition_for, OFFSETS_TOPIC};
use crate::protocol::decode_request;
use crate::server::authz;
use crate::server::dispatch::{ready, respond, ResponseFuture};
use crate::shard::ShardCtx;
use crate::txn::TxnError;

/// Kafka 4's range is 0–4.
pub const VERSIONS: (i16, i16) = (0, 4);
const FENCED_FROM: i16 = 2;

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &crate::security::Session,
) -> Result<ResponseFuture, String> {
    let (header, req) =
        decode_request::<AddOffsetsToTxnRequest>(frame, ApiKey::AddOffsetsToTxn, version)
            .map_err(|e| e.to_string())?;
    // Kafka: WRITE on the transactional id, then READ on the group.
    let refused = if !authz::allowed(ctx, session, Write, TransactionalId, &req.transactional_id.0)
    {
        Some(kafka_protocol::error::ResponseError::TransactionalIdAuthorizationFailed)
    } else if !authz::allowed(ctx, session, Read, Group, &req.group_id.0) {
        Some(kafka_protocol::error::ResponseError::GroupAuthorizationFailed)
    } else {
        None
    };
    if let Some(error) = refused {
        let response = AddOffsetsToTxnResponse::default().with_error_code(error.code());
        return Ok(ready(respond(
            ApiKey::AddOffsetsToTxn,
            version,
            header.correlation_id,
            &response,
        )));
    }
    let ctx = ctx.clone();
    Ok(Box::pin(async move {
        let error = match crate::server::group::ensure_offsets_topic(&ctx).await {
            Ok(()) => {
                let n = crate::server::group::offsets_partitions(&ctx).unwrap_or(1);
                let call = TxnCall::AddPartitions {
                    transactional_id: req.transactional_id.0.to_string(),
                    producer_id: req.producer_id.0,
                    producer_epoch: req.producer_epoch,
                    partitions: vec![(
                        OFFSETS_TOPIC.to_string(),
                        partition_for(&req.group_id.0, n),
                    )],
                };
                done(call_txn(&ctx, call).await.await)
            }
            Err(_) => Some(TxnError::CoordinatorNotAvailable),
        };
        let response = AddOffsetsToTxnResponse::default().with_error_code(error_code(
            error,
            FENCED_FROM,
            version,
        ));
        respond(ApiKey::AddOffsetsToTxn, version, header.correlation_id, &response)
    }))
}
