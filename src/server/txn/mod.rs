//! Kafka's transaction APIs (issue 17): one handler file per API, the routing of a
//! transactional id's requests to its coordinator shard (the owner of its
//! `__transaction_state` partition, created on first use like `__consumer_offsets`), and the
//! driver that runs the pure [`crate::txn::Coordinator`] there.
//!
//! Handlers run on the connection's shard and send a [`TxnCall`] over the mesh; the
//! coordinator shard answers with a [`TxnAnswer`]. Kafka error codes are chosen here
//! ([`error_code`], with each API's version rules), never in `crate::txn`.

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod broker_client;
pub mod describe_transactions;
pub mod driver;
pub mod end_txn;
pub mod init_producer_id;
pub mod list_transactions;
pub mod lso_metrics;
pub mod txn_offset_commit;
pub mod verify;
pub mod write_txn_markers;

use std::rc::Rc;

use kafka_protocol::error::ResponseError;

use crate::group::placement::partition_for;
use crate::server::call::{ShardReply, ShardRequest};
use crate::shard::ShardCtx;
use crate::txn::{TxnError, TxnMeta, TXN_TOPIC};
use crate::types::ShardId;

pub use driver::execute;

/// A transaction-coordinator operation, sent to the transactional id's coordinator shard.
pub enum TxnCall {
    InitProducerId {
        transactional_id: String,
        timeout_ms: i32,
        /// KIP-360: the producer id and epoch the client holds (v3+), if any.
        expected: Option<(i64, i16)>,
    },
    AddPartitions {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<(String, i32)>,
    },
    EndTxn {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    },
    /// KIP-890 part 1 (AddPartitionsToTxn v4 `verify_only`): whether each partition is in
    /// the producer's ongoing transaction.
    Verify {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<(String, i32)>,
    },
    /// DescribeTransactions for ids coordinated by the target shard.
    Describe(Vec<String>),
    /// ListTransactions on one shard: every id it coordinates.
    List,
}

impl TxnCall {
    fn transactional_id(&self) -> Option<&str> {
        match self {
            TxnCall::InitProducerId { transactional_id, .. }
            | TxnCall::AddPartitions { transactional_id, .. }
            | TxnCall::EndTxn { transactional_id, .. }
            | TxnCall::Verify { transactional_id, .. } => Some(transactional_id),
            TxnCall::Describe(ids) => ids.first().map(String::as_str),
            TxnCall::List => None,
        }
    }
}

/// The coordinator shard's answer.
pub enum TxnAnswer {
    /// Producer id and epoch.
    Init(Result<(i64, i16), TxnError>),
    Done(Result<(), TxnError>),
    /// Per partition of a `Verify`, in order.
    Verified(Vec<Result<(), TxnError>>),
    Described(Vec<(String, Result<TxnMeta, TxnError>)>),
    Listed(Vec<(String, TxnMeta)>),
    Failed(TxnError),
}

/// The Kafka error for a coordinator error under `api` at `version`: KIP-588's
/// PRODUCER_FENCED exists from InitProducerId v4, AddPartitionsToTxn v2, AddOffsetsToTxn v2,
/// EndTxn v2 and TxnOffsetCommit v3; older versions get INVALID_PRODUCER_EPOCH.
#[must_use]
pub fn error_code(err: Option<TxnError>, fenced_from_version: i16, version: i16) -> i16 {
    let Some(err) = err else { return 0 };
    let e = match err {
        TxnError::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
        TxnError::ProducerFenced if version >= fenced_from_version => ResponseError::ProducerFenced,
        TxnError::ProducerFenced => ResponseError::InvalidProducerEpoch,
        TxnError::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
        TxnError::InvalidTxnState => ResponseError::InvalidTxnState,
        TxnError::InvalidTransactionTimeout => ResponseError::InvalidTransactionTimeout,
        TxnError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        TxnError::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        TxnError::NotCoordinator => ResponseError::NotCoordinator,
    };
    e.code()
}

/// Partition count of `__transaction_state`, if it exists.
#[must_use]
pub fn txn_partitions(ctx: &ShardCtx) -> Option<i32> {
    let image = ctx.image();
    let topic = image.topics.get(TXN_TOPIC)?;
    i32::try_from(topic.partitions.len()).ok().filter(|n| *n > 0)
}

/// The `__transaction_state` partition of a transactional id.
#[must_use]
pub fn txn_partition_for(ctx: &ShardCtx, transactional_id: &str) -> Option<i32> {
    txn_partitions(ctx).map(|n| partition_for(transactional_id, n))
}

/// The shard coordinating `transactional_id`, per the cached image.
pub fn coordinator_shard(ctx: &ShardCtx, transactional_id: &str) -> Result<ShardId, TxnError> {
    let p = txn_partition_for(ctx, transactional_id).ok_or(TxnError::CoordinatorNotAvailable)?;
    ctx.owner_of(TXN_TOPIC, p).map(|(shard, _)| shard).ok_or(TxnError::CoordinatorNotAvailable)
}

/// Makes sure `__transaction_state` exists and every shard opened it (created on the first
/// FindCoordinator of a transactional id, as Kafka does).
pub async fn ensure_txn_topic(ctx: &Rc<ShardCtx>) -> Result<(), TxnError> {
    if crate::server::broker::of(ctx).txn_topic_ready.get() {
        return Ok(());
    }
    let c = &ctx.config.txn;
    let wait = std::time::Duration::from_millis(crate::constants::OFFSETS_TOPIC_READY_WAIT_MS_MAX);
    // Kafka's settings: compacted, `min.insync.replicas = transaction.state.log.min.isr`.
    let topic = crate::server::group::InternalTopic {
        name: TXN_TOPIC,
        partitions: c.state_log_num_partitions,
        replication_factor: c.state_log_replication_factor,
        segment_bytes: c.state_log_segment_bytes,
        min_insync_replicas: Some(c.state_log_min_isr),
    };
    let created = crate::server::group::create_internal_topic(ctx, &topic);
    crate::shard::with_timeout(wait, created)
        .await
        .unwrap_or(Err(crate::group::types::GroupError::CoordinatorNotAvailable))
        .map_err(|_| TxnError::CoordinatorNotAvailable)?;
    if txn_partitions(ctx).is_none() {
        return Err(TxnError::CoordinatorNotAvailable);
    }
    crate::server::broker::of(ctx).txn_topic_ready.set(true);
    Ok(())
}

/// Sends `call` to its coordinator shard; the returned future gathers the answer. The send
/// happens before this returns, so calls keep the connection's order.
pub async fn call_txn(
    ctx: &Rc<ShardCtx>,
    call: TxnCall,
) -> impl std::future::Future<Output = TxnAnswer> {
    let shard = match call.transactional_id() {
        Some(id) => coordinator_shard(ctx, id),
        None => Err(TxnError::CoordinatorNotAvailable),
    };
    let pending = match shard {
        Ok(shard) => Ok(ctx.call(shard, ShardRequest::Txn(call)).await),
        Err(e) => Err(e),
    };
    async move {
        match pending {
            Ok(pending) => answer(pending.await),
            Err(e) => TxnAnswer::Failed(e),
        }
    }
}

/// Sends a shard-wide call to one shard.
pub async fn call_shard(ctx: &Rc<ShardCtx>, shard: ShardId, call: TxnCall) -> TxnAnswer {
    answer(ctx.call(shard, ShardRequest::Txn(call)).await.await)
}

fn answer(reply: Result<ShardReply, crate::shard::MeshError>) -> TxnAnswer {
    match reply {
        Ok(ShardReply::Txn(answer)) => answer,
        Ok(_) => TxnAnswer::Failed(TxnError::CoordinatorNotAvailable),
        Err(err) => {
            tracing::warn!("transaction coordinator unreachable: {err}");
            TxnAnswer::Failed(TxnError::CoordinatorNotAvailable)
        }
    }
}

/// The answer of a call that expects [`TxnAnswer::Done`].
fn done(answer: TxnAnswer) -> Option<TxnError> {
    match answer {
        TxnAnswer::Done(r) => r.err(),
        TxnAnswer::Failed(e) => Some(e),
        _ => Some(TxnError::CoordinatorNotAvailable),
    }
}
