//! EndTxn: commits or aborts the producer's open transaction. Answered once the
//! PrepareCommit/PrepareAbort record is durable; the markers follow in the background and
//! the transaction completes when they are all durable (a request meanwhile gets
//! CONCURRENT_TRANSACTIONS, which clients retry).
//!
//! Runs on the connection's shard; the answer comes from the coordinator shard.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, EndTxnRequest, EndTxnResponse};

use super::{call_txn, done, error_code, TxnCall};
use crate::authz::Operation::Write;
use crate::authz::ResourceType::TransactionalId;
use crate::protocol::decode_request;
use crate::server::authz;
use crate::server::dispatch::{ready, respond, ResponseFuture};
use crate::shard::ShardCtx;

/// 0–4: v5 (transaction.version 2, KIP-890 part 2) is not served.
pub const VERSIONS: (i16, i16) = (0, 4);
const FENCED_FROM: i16 = 2;

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &crate::security::Session,
) -> Result<ResponseFuture, String> {
    let (header, req) = decode_request::<EndTxnRequest>(frame, ApiKey::EndTxn, version)
        .map_err(|e| e.to_string())?;
    if !authz::allowed(ctx, session, Write, TransactionalId, &req.transactional_id.0) {
        let response = EndTxnResponse::default().with_error_code(
            kafka_protocol::error::ResponseError::TransactionalIdAuthorizationFailed.code(),
        );
        return Ok(ready(respond(ApiKey::EndTxn, version, header.correlation_id, &response)));
    }
    let call = TxnCall::EndTxn {
        transactional_id: req.transactional_id.0.to_string(),
        producer_id: req.producer_id.0,
        producer_epoch: req.producer_epoch,
        commit: req.committed,
    };
    let answer = call_txn(ctx, call).await;
    Ok(Box::pin(async move {
        let error = done(answer.await);
        let response =
            EndTxnResponse::default().with_error_code(error_code(error, FENCED_FROM, version));
        respond(ApiKey::EndTxn, version, header.correlation_id, &response)
    }))
}
