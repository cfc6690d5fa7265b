//! InitProducerId with a transactional id: sent to the id's transaction coordinator, which
//! bumps the epoch (fencing older instances, aborting their open transaction first) or hands
//! out a producer id for a new id. Requests without a transactional id stay on the controller
//! shard (`server::admin::init_producer_id`).
//!
//! Runs on the connection's shard; the answer comes from the coordinator shard.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::{call_txn, error_code, TxnAnswer, TxnCall};
use crate::authz::Operation::Write;
use crate::authz::ResourceType::TransactionalId;
use crate::protocol::decode_request;
use crate::server::authz;
use crate::server::dispatch::{ready, respond, ResponseFuture};
use crate::shard::ShardCtx;
use crate::txn::TxnError;

/// PRODUCER_FENCED from this version (KIP-588), INVALID_PRODUCER_EPOCH before.
const FENCED_FROM: i16 = 4;

/// Whether this InitProducerId names a (non-empty) transactional id: those go to the
/// transaction coordinator.
#[must_use]
pub fn is_transactional(frame: &Bytes, version: i16) -> bool {
    decode_request::<InitProducerIdRequest>(frame.clone(), ApiKey::InitProducerId, version)
        .is_ok_and(|(_, r)| r.transactional_id.is_some_and(|t| !t.0.is_empty()))
}

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &crate::security::Session,
) -> Result<ResponseFuture, String> {
    let (header, req) =
        decode_request::<InitProducerIdRequest>(frame, ApiKey::InitProducerId, version)
            .map_err(|e| e.to_string())?;
    let transactional_id = req.transactional_id.map(|t| t.0.to_string()).unwrap_or_default();
    // Kafka: WRITE on the transactional id, before anything else.
    if !authz::allowed(ctx, session, Write, TransactionalId, &transactional_id) {
        let response = InitProducerIdResponse::default()
            .with_error_code(
                kafka_protocol::error::ResponseError::TransactionalIdAuthorizationFailed.code(),
            )
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        return Ok(ready(respond(
            ApiKey::InitProducerId,
            version,
            header.correlation_id,
            &response,
        )));
    }
    let expected =
        (version >= 3 && req.producer_id.0 >= 0).then_some((req.producer_id.0, req.producer_epoch));
    let ctx = ctx.clone();
    Ok(Box::pin(async move {
        let result = match super::ensure_txn_topic(&ctx).await {
            Ok(()) => {
                let call = TxnCall::InitProducerId {
                    transactional_id,
                    timeout_ms: req.transaction_timeout_ms,
                    expected,
                };
                match call_txn(&ctx, call).await.await {
                    TxnAnswer::Init(r) => r,
                    TxnAnswer::Failed(e) => Err(e),
                    _ => Err(TxnError::CoordinatorNotAvailable),
                }
            }
            Err(e) => Err(e),
        };
        let response = match result {
            Ok((pid, epoch)) => InitProducerIdResponse::default()
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch),
            Err(e) => InitProducerIdResponse::default()
                .with_error_code(error_code(Some(e), FENCED_FROM, version))
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        };
        respond(ApiKey::InitProducerId, version, header.correlation_id, &response)
    }))
}
