//! ListTransactions (API 66): every transactional id this broker coordinates, gathered from
//! every shard, filtered by state, producer id (v0), minimum duration (v1) and id pattern
//! (v2, a Java regular expression; served for patterns without regex syntax beyond `.*`,
//! as a prefix/suffix/substring match) — `kafka-transactions.sh list`.
//!
//! Runs on the connection's shard.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ApiKey, ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::{call_shard, TxnAnswer, TxnCall};
use crate::authz::{Operation, ResourceType};
use crate::protocol::decode_request;
use crate::server::authz::{Auth, Authorize};
use crate::server::dispatch::{respond, ResponseFuture};
use crate::shard::{now_ms, ShardCtx};
use crate::txn::TxnState;
use crate::types::ShardId;

pub const VERSIONS: (i16, i16) = (0, 2);

const STATES: [TxnState; 8] = [
    TxnState::Empty,
    TxnState::Ongoing,
    TxnState::PrepareCommit,
    TxnState::PrepareAbort,
    TxnState::CompleteCommit,
    TxnState::CompleteAbort,
    TxnState::Dead,
    TxnState::PrepareEpochFence,
];

pub async fn start(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    version: i16,
    session: &std::rc::Rc<crate::security::Session>,
) -> Result<ResponseFuture, String> {
    let (header, req) =
        decode_request::<ListTransactionsRequest>(frame, ApiKey::ListTransactions, version)
            .map_err(|e| e.to_string())?;
    let ctx = ctx.clone();
    // Kafka lists only the transactional ids the principal may DESCRIBE.
    let auth = Auth::new(&ctx, session);
    Ok(Box::pin(async move {
        let mut response = ListTransactionsResponse::default();
        let mut states = Vec::new();
        for f in &req.state_filters {
            match STATES.iter().find(|s| s.name() == f.as_str()) {
                Some(s) => states.push(*s),
                None => response.unknown_state_filters.push(f.clone()),
            }
        }
        let now = now_ms();
        for shard in 0..ctx.shard_count {
            let TxnAnswer::Listed(rows) = call_shard(&ctx, ShardId(shard), TxnCall::List).await
            else {
                continue;
            };
            for (id, m) in rows {
                let state_ok = req.state_filters.is_empty() || states.contains(&m.state);
                let pid_ok = req.producer_id_filters.is_empty()
                    || req.producer_id_filters.iter().any(|p| p.0 == m.producer_id);
                let duration_ok = req.duration_filter < 0
                    || (m.state == TxnState::Ongoing
                        && now.saturating_sub(m.start_ms) >= req.duration_filter);
                let id_ok = req.transactional_id_pattern.as_ref().is_none_or(|p| matches(p, &id));
                let visible =
                    || auth.visible(Operation::Describe, ResourceType::TransactionalId, &id);
                if state_ok && pid_ok && duration_ok && id_ok && visible() {
                    response.transaction_states.push(
                        TransactionState::default()
                            .with_transactional_id(TransactionalId(StrBytes::from_string(id)))
                            .with_producer_id(ProducerId(m.producer_id))
                            .with_transaction_state(StrBytes::from_static_str(m.state.name())),
                    );
                }
            }
        }
        respond(ApiKey::ListTransactions, version, header.correlation_id, &response)
    }))
}

/// A Java regex of the simple kinds the CLI sends: literal text with `.*` wildcards.
fn matches(pattern: &str, id: &str) -> bool {
    let parts: Vec<&str> = pattern.split(".*").collect();
    if parts.len() == 1 {
        return pattern == id;
    }
    let mut rest = id;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part) else { return false };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            let Some(at) = rest.find(part) else { return false };
            rest = &rest[at + part.len()..];
        }
    }
    true
}

#[cfg(test)]
mod tests {
    #[test]
    fn patterns() {
        assert!(super::matches("tx-.*", "tx-1"));
        assert!(super::matches(".*", "anything"));
        assert!(super::matches("a.*b.*c", "axxbyyc"));
        assert!(!super::matches("tx-.*", "ty-1"));
        assert!(super::matches("exact", "exact"));
    }
}
