//! The leader's answer to a follower's Fetch for one partition (Kafka's
//! `Partition.fetchRecords` for a follower): the replica must be in the replica set; with a
//! `last_fetched_epoch` (Fetch v12+) a follower whose log may diverge gets the diverging epoch
//! and no records; otherwise it gets data up to the log end (not the high watermark), its
//! fetch offset becomes its log end offset in [`super::replicas::LeaderReplicas`], and the
//! answer carries the high watermark after that update.
//!
//! Runs on the partition's owner shard; the core is generic over the file system so it runs
//! on the in-memory one in tests. Invariant: a follower's state is updated only by a fetch that
//! read without error and without divergence (Kafka does the same), so a diverging follower
//! never holds the high watermark at an offset it is about to truncate away.

use kafka_protocol::error::ResponseError;

use super::leader::Replication;
use super::ops::{check_epoch, owned, FetchPart, ProduceError};
use super::replicas::ReplicaError;
use super::PartitionTable;
use crate::io::FileSystem;
use crate::protocol::errors::storage_error_code;
use crate::replication::truncation::diverging_epoch;
use crate::storage::{PartitionLog, SendRecords, StorageError};
use crate::types::{Epoch, NodeId, Offset};

/// One partition of a follower's Fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaFetchRequest {
    pub replica: NodeId,
    /// KIP-903 broker epoch (v15+ `replica_state.replica_epoch`), -1 before v15.
    pub broker_epoch: i64,
    pub fetch_offset: Offset,
    /// v12+, -1 when absent.
    pub last_fetched_epoch: Epoch,
    pub max_bytes: usize,
    /// The request named a current leader epoch (>= 0): decides the not-a-replica code.
    pub epoch_given: bool,
}

/// The leader's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaFetchAnswer {
    /// Whole batches, possibly in pieces (see `SendRecords`).
    pub records: SendRecords,
    pub high_watermark: Offset,
    pub log_start_offset: Offset,
    pub log_end_offset: Offset,
    /// Kafka's `diverging_epoch` (wire values) when the follower must truncate first.
    pub diverging_epoch: Option<(i32, i64)>,
    /// The high watermark moved: acks=all waiters and consumer long-polls should look.
    pub high_watermark_moved: bool,
}

/// Why a replica fetch failed; Kafka codes at the protocol boundary.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaFetchError {
    #[error(transparent)]
    Replica(#[from] ReplicaError),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Serves one follower fetch against the leader's `log` and `replication` state.
pub async fn serve_replica_fetch<F: FileSystem>(
    log: &PartitionLog<F>,
    replication: &Replication,
    req: &ReplicaFetchRequest,
    now_ms: i64,
) -> Result<ReplicaFetchAnswer, ReplicaFetchError> {
    replication.with(|r| {
        if r.follower(req.replica).is_none() {
            return Err(ReplicaError::NotReplica {
                replica: req.replica,
                epoch_given: req.epoch_given,
            });
        }
        Ok(())
    })?;
    let hw_before = replication.high_watermark(log, now_ms);
    let out_of_range = || StorageError::OffsetOutOfRange {
        requested: req.fetch_offset,
        log_start: log.log_start_offset(),
        log_end: log.log_end_offset(),
    };
    // Kafka's order: an offset below the log start first, then the epoch check.
    if req.fetch_offset < log.log_start_offset() {
        return Err(out_of_range().into());
    }
    let end_for = |e| log.end_offset_for_epoch(e);
    if let Some(div) = diverging_epoch(end_for, req.last_fetched_epoch, req.fetch_offset) {
        if div.1 < 0 {
            // No end offset for the follower's epoch: Kafka answers OFFSET_OUT_OF_RANGE
            // ("could not determine the end offset of the last fetched epoch").
            return Err(out_of_range().into());
        }
        return Ok(ReplicaFetchAnswer {
            records: SendRecords::default(),
            high_watermark: hw_before,
            log_start_offset: log.log_start_offset(),
            log_end_offset: log.log_end_offset(),
            diverging_epoch: Some(div),
            high_watermark_moved: false,
        });
    }
    let log_end = log.log_end_offset();
    // max_bytes 0: a throttled fetch (`replication::throttle`), answered without records.
    let records = if req.max_bytes == 0 {
        SendRecords::default()
    } else {
        log.read_to_send(req.fetch_offset, req.max_bytes, log_end).await?
    };
    replication.with(|r| {
        r.on_follower_fetch(
            req.replica,
            req.broker_epoch,
            req.fetch_offset,
            log_end,
            log.durable_offset(),
            req.epoch_given,
            now_ms,
        )
    })?;
    let hw = replication.high_watermark(log, now_ms);
    Ok(ReplicaFetchAnswer {
        records,
        high_watermark: hw,
        log_start_offset: log.log_start_offset(),
        log_end_offset: log_end,
        diverging_epoch: None,
        high_watermark_moved: hw > hw_before,
    })
}

/// The answer as a follower's fetcher reads it off the wire (an in-process leader, in the
/// simulator and tests, hands it over without encoding).
#[must_use]
pub fn to_reply(
    answer: Result<ReplicaFetchAnswer, ReplicaFetchError>,
) -> crate::replication::fetcher::PartitionReply {
    use crate::replication::fetcher::PartitionReply;
    let fail = |code| PartitionReply { error_code: code, ..PartitionReply::default() };
    match answer {
        Ok(a) => PartitionReply {
            error_code: 0,
            high_watermark: a.high_watermark.0,
            log_start_offset: a.log_start_offset.0,
            diverging_epoch: a.diverging_epoch,
            records: a.records.to_bytes(),
        },
        Err(ReplicaFetchError::Replica(e)) => fail(e.kafka_code()),
        Err(ReplicaFetchError::Storage(e)) => fail(e.kafka_code()),
    }
}

/// A follower's Fetch for one partition, sent to its owner shard.
pub struct ReplicaFetchOp {
    pub topic: String,
    pub partition: i32,
    pub current_leader_epoch: i32,
    pub request: ReplicaFetchRequest,
}

/// The Kafka error of a replica-state refusal (protocol boundary).
#[must_use]
pub fn replica_error(err: ReplicaError) -> ProduceError {
    let code =
        ResponseError::try_from_code(err.kafka_code()).unwrap_or(ResponseError::UnknownServerError);
    ProduceError { code, message: Some(err.to_string()), record_errors: Vec::new() }
}

/// Runs a follower's fetch on the owner shard: the leader-epoch check as for consumers, then
/// [`serve_replica_fetch`]; wakes acks=all waiters and consumers if the high watermark moved.
pub async fn run(table: &PartitionTable, op: ReplicaFetchOp) -> FetchPart {
    let fail = |error: ResponseError| FetchPart {
        error: Some(error),
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
        records: SendRecords::default(),
        diverging_epoch: None,
        aborted: None,
    };
    let p = match owned(table, &op.topic, op.partition) {
        Ok(p) => p,
        Err((err, _)) => return fail(err),
    };
    if let Err((err, _)) = check_epoch(&p, op.current_leader_epoch) {
        return fail(err);
    }
    // Kafka's leader-side replication throttle: no records for a throttled out-of-sync
    // replica while the leader rate is over its bound (its position still counts).
    let mut request = op.request.clone();
    let throttled = crate::replication::throttle::leader_throttles(&p.tp, request.replica);
    if throttled {
        request.max_bytes = 0;
    }
    match serve_replica_fetch(&p.log, &p.replication, &request, p.log.now_ms()).await {
        Ok(answer) => {
            let bytes = answer.records.len();
            crate::replication::throttle::leader_sent(&p.tp, request.replica, bytes);
            if answer.high_watermark_moved {
                p.hw_changed.notify_all();
            }
            crate::metrics::fetched(&op.topic, answer.records.pieces());
            crate::metrics::replication::bytes_out(answer.records.len() as u64);
            FetchPart {
                error: None,
                high_watermark: answer.high_watermark.0,
                last_stable_offset: answer.high_watermark.0,
                log_start_offset: answer.log_start_offset.0,
                records: answer.records,
                diverging_epoch: answer.diverging_epoch,
                aborted: None,
            }
        }
        Err(ReplicaFetchError::Replica(err)) => fail(replica_error(err).code),
        Err(ReplicaFetchError::Storage(err)) => fail(storage_error_code(&err)),
    }
}
