//! Partition-level work executed on a partition's owner shard: append, read, offset
//! lookups, epoch lookups and the wait for new data behind Fetch long-polls.
//!
//! Runs on the owner shard only (reached through the mesh or directly when the
//! connection lives there). Invariants: the appends of one request are issued in the
//! request's order, and requests are started in arrival order, so appends to a partition
//! take effect in the order a connection sent them; a produce is answered only once the
//! flush policy's durability is reached, and then wakes the partition's long-polls.

use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::{OwnedPartition, PartitionTable};
use crate::protocol::errors::storage_error_code;
use crate::shard::ShardCtx;
use crate::storage::error::RecordError;
use crate::storage::{SendRecords, StorageError};
use crate::types::{Epoch, Offset};

/// One partition's part of a request, sent to its owner shard.
pub enum PartitionOp {
    Produce {
        topic: String,
        partition: i32,
        records: Option<Bytes>,
        /// 1 or -1 (0 is answered like 1 and the reply dropped by the connection).
        acks: i16,
        /// The request's `timeout_ms`: how long acks=all waits for the ISR.
        timeout_ms: i32,
    },
    Fetch {
        topic: String,
        partition: i32,
        fetch_offset: i64,
        max_bytes: usize,
        current_leader_epoch: i32,
        /// isolation_level=read_committed: read up to the last stable offset and report
        /// the aborted transactions in range.
        read_committed: bool,
    },
    ListOffsets {
        topic: String,
        partition: i32,
        timestamp: i64,
        current_leader_epoch: i32,
        /// read_committed: "latest" is the last stable offset.
        read_committed: bool,
    },
    EpochEnd {
        topic: String,
        partition: i32,
        leader_epoch: i32,
        current_leader_epoch: i32,
    },
    DeleteRecords {
        topic: String,
        partition: i32,
        offset: i64,
    },
    DescribeProducers {
        topic: String,
        partition: i32,
    },
    /// DescribeLogDirs: the replica's size and lag, leader or follower (`log_dir`).
    DescribeLogDir {
        topic: String,
        partition: i32,
    },
    /// A follower's Fetch (`partition::replica_fetch`).
    ReplicaFetch(super::replica_fetch::ReplicaFetchOp),
    /// A transaction marker from the transaction coordinator (WriteTxnMarkers).
    WriteMarker {
        topic: String,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    },
}

/// A partition-level error with the message Kafka clients log.
pub type OpError = (ResponseError, Option<String>);

/// A refused produce: the partition's error, the message clients log and, for a batch with
/// rejected records (KIP-467), each one's index in the batch and reason.
pub struct ProduceError {
    pub code: ResponseError,
    pub message: Option<String>,
    pub record_errors: Vec<RecordError>,
}

impl From<OpError> for ProduceError {
    fn from((code, message): OpError) -> Self {
        ProduceError { code, message, record_errors: Vec::new() }
    }
}

impl From<StorageError> for ProduceError {
    fn from(err: StorageError) -> Self {
        let record_errors = match &err {
            StorageError::RecordsRejected { errors, .. } => errors.clone(),
            _ => Vec::new(),
        };
        ProduceError {
            code: storage_error_code(&err),
            message: Some(err.to_string()),
            record_errors,
        }
    }
}

pub enum PartitionResult {
    Produce(Result<ProduceOk, ProduceError>),
    Fetch(FetchPart),
    ListOffsets(Result<OffsetAnswer, OpError>),
    EpochEnd(Result<(i32, i64), OpError>),
    /// The low watermark after a DeleteRecords.
    DeleteRecords(Result<i64, OpError>),
    DescribeProducers(Result<Vec<ProducerInfo>, OpError>),
    /// `None`: this shard holds no log of the partition.
    DescribeLogDir(Option<super::log_dir::ReplicaLogDir>),
    /// The transaction the marker closed (None: the producer had none open here).
    WriteMarker(Result<Option<crate::storage::producer_state::CompletedTxn>, OpError>),
}

/// One idempotent producer of a partition, as DescribeProducers reports it.
pub struct ProducerInfo {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_sequence: i32,
    pub last_timestamp_ms: i64,
    /// First offset of its open transaction on the partition, -1 if none (what
    /// `kafka-transactions.sh find-hanging` looks at).
    pub current_txn_start_offset: i64,
}

pub struct ProduceOk {
    pub base_offset: i64,
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
}

pub struct FetchPart {
    pub error: Option<ResponseError>,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// Whole batches, possibly in pieces (sent, then dropped: they may pin cache buffers).
    pub records: SendRecords,
    /// Fetch v12+ for a follower whose log may diverge: (epoch, end offset).
    pub diverging_epoch: Option<(i32, i64)>,
    /// read_committed: the aborted transactions in the returned range (producer id, first
    /// offset); `None` for read_uncommitted.
    pub aborted: Option<Vec<(i64, i64)>>,
}

pub struct OffsetAnswer {
    pub timestamp: i64,
    pub offset: i64,
    pub leader_epoch: i32,
}

/// Partitions a Fetch waits on, each with the offset it wants data beyond.
pub struct WaitSpec {
    pub partitions: Vec<(String, i32, i64)>,
    pub max_wait_ms: u64,
    /// A follower's fetch: wait for the log end (woken by appends), not the high watermark.
    pub replica: bool,
    /// Wait for the last stable offset rather than the high watermark.
    pub read_committed: bool,
}

/// Runs the operations of one request on this (their owner) shard, against its partition
/// table (held by the layer above, which passes it in).
pub async fn run_ops(
    ctx: &Rc<ShardCtx>,
    table: &PartitionTable,
    ops: Vec<PartitionOp>,
) -> Vec<PartitionResult> {
    // join_all polls in order, so the appends start in the request's order.
    let futures = ops.into_iter().map(|op| run_op(ctx, table, op));
    futures::future::join_all(futures).await
}

async fn run_op(ctx: &Rc<ShardCtx>, table: &PartitionTable, op: PartitionOp) -> PartitionResult {
    match op {
        PartitionOp::Produce { topic, partition, records, acks, timeout_ms } => {
            let wait = AckWait { acks, timeout_ms };
            PartitionResult::Produce(produce(table, &topic, partition, records, wait).await)
        }
        PartitionOp::Fetch {
            topic,
            partition,
            fetch_offset,
            max_bytes,
            current_leader_epoch,
            read_committed,
        } => PartitionResult::Fetch(
            fetch(
                table,
                &topic,
                partition,
                (fetch_offset, max_bytes),
                current_leader_epoch,
                read_committed,
            )
            .await,
        ),
        PartitionOp::ListOffsets {
            topic,
            partition,
            timestamp,
            current_leader_epoch,
            read_committed,
        } => PartitionResult::ListOffsets(
            list_offsets(table, &topic, partition, timestamp, current_leader_epoch, read_committed)
                .await,
        ),
        PartitionOp::WriteMarker {
            topic,
            partition,
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
        } => {
            // A deposed transaction coordinator's marker is refused (Kafka's rule), by the
            // leader only: a refused op must not move the epoch either.
            let fenced = owned(table, &topic, partition).and_then(|p| {
                p.coordinator_epochs.borrow_mut().check(producer_id, coordinator_epoch)
            });
            if let Err(e) = fenced {
                return PartitionResult::WriteMarker(Err(e));
            }
            let marker = crate::storage::producer_state::encode_marker(
                producer_id,
                producer_epoch,
                commit,
                coordinator_epoch,
                table.now_ms(),
            );
            PartitionResult::WriteMarker(write_marker(ctx, table, &topic, partition, marker).await)
        }
        PartitionOp::EpochEnd { topic, partition, leader_epoch, current_leader_epoch } => {
            PartitionResult::EpochEnd(epoch_end(
                table,
                &topic,
                partition,
                leader_epoch,
                current_leader_epoch,
            ))
        }
        PartitionOp::DeleteRecords { topic, partition, offset } => {
            PartitionResult::DeleteRecords(delete_records(table, &topic, partition, offset).await)
        }
        PartitionOp::DescribeProducers { topic, partition } => {
            PartitionResult::DescribeProducers(describe_producers(table, &topic, partition))
        }
        PartitionOp::DescribeLogDir { topic, partition } => {
            PartitionResult::DescribeLogDir(super::log_dir::describe(table, &topic, partition))
        }
        PartitionOp::ReplicaFetch(op) => {
            PartitionResult::Fetch(super::replica_fetch::run(table, op).await)
        }
    }
}

pub(super) fn owned(
    table: &PartitionTable,
    topic: &str,
    partition: i32,
) -> Result<Rc<OwnedPartition>, OpError> {
    // A follower's log is written by its fetcher: produces, consumers, ListOffsets and
    // replica fetches all belong to the leader (Kafka: NOT_LEADER_OR_FOLLOWER).
    table
        .get(topic, partition)
        .filter(|p| p.is_leader.get())
        .ok_or((ResponseError::NotLeaderOrFollower, None))
}

/// Kafka's current_leader_epoch rule: older → fenced, newer → unknown, -1 → unchecked.
pub(super) fn check_epoch(p: &OwnedPartition, current_leader_epoch: i32) -> Result<(), OpError> {
    let epoch = p.leader_epoch.get().0;
    if current_leader_epoch == -1 || current_leader_epoch == epoch {
        Ok(())
    } else if current_leader_epoch < epoch {
        Err((ResponseError::FencedLeaderEpoch, None))
    } else {
        Err((ResponseError::UnknownLeaderEpoch, None))
    }
}

/// Produce v3+ carries exactly one record batch per partition.
fn check_single_batch(records: Option<&Bytes>) -> Result<(), OpError> {
    let invalid = |reason: &str| Err((ResponseError::InvalidRecord, Some(reason.to_string())));
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        return invalid("produce request carries no record batch");
    };
    if records.len() < 12 {
        return Err((ResponseError::CorruptMessage, Some("truncated record batch".into())));
    }
    let batch_len = i32::from_be_bytes([records[8], records[9], records[10], records[11]]);
    let total = usize::try_from(batch_len).ok().map(|n| n + 12);
    match total {
        Some(total) if total == records.len() => Ok(()),
        Some(total) if total < records.len() => {
            invalid("produce requests v3+ must carry exactly one record batch per partition")
        }
        _ => Err((ResponseError::CorruptMessage, Some("record batch length exceeds data".into()))),
    }
}

/// What a produce waits for after its own write: acks and the request's bound.
struct AckWait {
    acks: i16,
    timeout_ms: i32,
}

async fn produce(
    table: &PartitionTable,
    topic: &str,
    partition: i32,
    records: Option<Bytes>,
    wait: AckWait,
) -> Result<ProduceOk, ProduceError> {
    let p = owned(table, topic, partition)?;
    check_single_batch(records.as_ref())?;
    if wait.acks == -1 {
        p.replication.check_produce().map_err(super::replica_fetch::replica_error)?;
    }
    let batch = records.unwrap_or_default();
    let (started, batch_bytes) = (std::time::Instant::now(), batch.len());
    let appended = p.append_as_leader(batch).await?;
    let info = appended.info;
    if !info.duplicate {
        p.bytes_in.set(p.bytes_in.get() + batch_bytes as u64);
        let records = u64::try_from(info.last_offset.0 - info.base_offset.0 + 1).unwrap_or(0);
        crate::metrics::produced(topic, batch_bytes, records, started);
    }
    if wait.acks == -1 && p.replication.has_followers() {
        p.wait_acks(appended.epoch, info.last_offset.next(), wait.timeout_ms).await?;
    } else {
        p.check_still_leader(appended.epoch)?;
    }
    Ok(ProduceOk {
        base_offset: info.base_offset.0,
        log_append_time_ms: info.log_append_time_ms,
        log_start_offset: info.log_start_offset.0,
    })
}

async fn fetch(
    table: &PartitionTable,
    topic: &str,
    partition: i32,
    (fetch_offset, max_bytes): (i64, usize),
    current_leader_epoch: i32,
    read_committed: bool,
) -> FetchPart {
    let fail = |error: ResponseError| FetchPart {
        error: Some(error),
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
        records: SendRecords::default(),
        diverging_epoch: None,
        aborted: None,
    };
    let p = match owned(table, topic, partition) {
        Ok(p) => p,
        Err((err, _)) => return fail(err),
    };
    if let Err((err, _)) = check_epoch(&p, current_leader_epoch) {
        return fail(err);
    }
    let hw = p.high_watermark();
    let lso = p.last_stable_offset();
    let upper = if read_committed { lso } else { hw };
    let read = p.log.read_to_send(Offset(fetch_offset), max_bytes, upper).await;
    let (error, records) = match read {
        Ok(records) => (None, records),
        Err(err) => (Some(storage_error_code(&err)), SendRecords::default()),
    };
    p.bytes_out.set(p.bytes_out.get() + records.len() as u64);
    crate::metrics::fetched(topic, records.pieces());
    let aborted = read_committed.then(|| {
        // Every piece holds whole batches: the last one ends the range.
        let last = records.pieces().last().cloned().unwrap_or_default();
        let end = super::transactions::records_end(&last).unwrap_or(upper);
        p.log.aborted_between(Offset(fetch_offset), end)
    });
    FetchPart {
        error,
        high_watermark: hw.0,
        last_stable_offset: lso.0,
        log_start_offset: p.log.log_start_offset().0,
        records,
        diverging_epoch: None,
        aborted,
    }
}

async fn list_offsets(
    table: &PartitionTable,
    topic: &str,
    partition: i32,
    timestamp: i64,
    current_leader_epoch: i32,
    read_committed: bool,
) -> Result<OffsetAnswer, OpError> {
    let p = owned(table, topic, partition)?;
    check_epoch(&p, current_leader_epoch)?;
    let latest = if read_committed { p.last_stable_offset() } else { p.high_watermark() };
    let epoch = p.leader_epoch.get().0;
    let answer = |timestamp, offset| OffsetAnswer { timestamp, offset, leader_epoch: epoch };
    let none = OffsetAnswer { timestamp: -1, offset: -1, leader_epoch: -1 };
    Ok(match timestamp {
        // -2 earliest, -4 earliest local (no tiering: the same).
        -2 | -4 => answer(-1, p.log.log_start_offset().0),
        -1 => answer(-1, latest.0),
        // -5 latest tiered: without remote storage Kafka answers offset -1, epoch -1.
        -5 => none,
        -3 => match p.log.max_timestamp() {
            Some((ts, offset)) => answer(ts, offset.0),
            None => none,
        },
        ts => match p.log.offset_for_timestamp(ts).await {
            Ok(Some((offset, ts))) if offset < latest => answer(ts, offset.0),
            Ok(_) => none,
            Err(err) => return Err((storage_error_code(&err), Some(err.to_string()))),
        },
    })
}

fn epoch_end(
    table: &PartitionTable,
    topic: &str,
    partition: i32,
    leader_epoch: i32,
    current_leader_epoch: i32,
) -> Result<(i32, i64), OpError> {
    let p = owned(table, topic, partition)?;
    check_epoch(&p, current_leader_epoch)?;
    Ok(match p.log.end_offset_for_epoch(Epoch(leader_epoch)) {
        Some((epoch, offset)) => (epoch.0, offset.0),
        None => (-1, -1),
    })
}

/// Resolves when any listed partition has committed data beyond the wanted offset, the
/// wait expires, a listed partition goes away, or the shard shuts down.
/// Returns once a listed partition has data past its offset, one is gone, shutdown begins,
/// or the wait's deadline passes.
pub async fn wait_for_data(ctx: &ShardCtx, table: &PartitionTable, spec: WaitSpec) {
    let mut parts = Vec::with_capacity(spec.partitions.len());
    for (topic, partition, offset) in &spec.partitions {
        let Some(p) = table.get(topic, *partition) else { return };
        let end = if spec.replica {
            p.log.log_end_offset()
        } else if spec.read_committed {
            p.last_stable_offset()
        } else {
            p.high_watermark()
        };
        if end.0 > *offset {
            return;
        }
        let seen = wake_signal(&p, spec.replica).version();
        parts.push((p, seen));
    }
    if parts.is_empty() || ctx.is_shutting_down() {
        return;
    }
    let shutdown_seen = ctx.shutdown.version();
    let replica = spec.replica;
    let mut waits: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>>> = parts
        .iter()
        .map(|(p, seen)| Box::pin(wake_signal(p, replica).changed_since(*seen)) as _)
        .collect();
    waits.push(Box::pin(ctx.shutdown.changed_since(shutdown_seen)));
    let any = futures::future::select_all(waits);
    crate::shard::with_timeout(Duration::from_millis(spec.max_wait_ms), any).await;
}

/// What a long-poll waits on: appends for a follower, the high watermark for a consumer.
fn wake_signal(p: &OwnedPartition, replica: bool) -> &crate::sync::Notify {
    if replica {
        &p.replication.appended
    } else {
        &p.hw_changed
    }
}

/// The partition's idempotent producers, by producer id (DescribeProducers).
fn describe_producers(
    table: &PartitionTable,
    topic: &str,
    partition: i32,
) -> Result<Vec<ProducerInfo>, OpError> {
    let p = owned(table, topic, partition)?;
    Ok(p.log
        .producers()
        .into_iter()
        .map(|(producer_id, e)| ProducerInfo {
            producer_id,
            epoch: e.epoch,
            last_sequence: e.last_seq(),
            last_timestamp_ms: e.last_timestamp_ms(),
            current_txn_start_offset: e.txn_first_offset,
        })
        .collect())
}

/// Appends a transaction marker and waits until it is durable (the coordinator completes
/// the transaction only then), then wakes the partition's long-polls: the last stable
/// offset may have moved.
async fn write_marker(
    ctx: &ShardCtx,
    table: &PartitionTable,
    topic: &str,
    partition: i32,
    marker: Bytes,
) -> Result<Option<crate::storage::producer_state::CompletedTxn>, OpError> {
    let p = owned(table, topic, partition)?;
    let storage = |err: StorageError| (storage_error_code(&err), Some(err.to_string()));
    let (info, done) = p
        .log
        .append_coordinator(marker, p.leader_epoch.get(), p.log.now_ms())
        .await
        .map_err(storage)?;
    p.log.wait_committed(info.last_offset).await.map_err(storage)?;
    p.hw_changed.notify_all();
    if let Some(txn) = &done {
        super::transactions::marker_written(ctx, topic, partition, txn);
    }
    Ok(done)
}

/// Kafka's "delete up to the high watermark" sentinel.
const HIGH_WATERMARK: i64 = -1;

/// Advances the partition's log start to `offset` (-1: the high watermark) and returns the
/// low watermark. Kafka's rules: an offset above the high watermark or below -1 is
/// OFFSET_OUT_OF_RANGE; one at or below the current log start changes nothing.
async fn delete_records(
    table: &PartitionTable,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<i64, OpError> {
    let p = owned(table, topic, partition)?;
    let hw = p.high_watermark();
    let target = if offset == HIGH_WATERMARK { hw } else { Offset(offset) };
    if target.0 < 0 || target > hw {
        let why = format!("offset {offset} is outside [-1, high watermark {hw}]");
        return Err((ResponseError::OffsetOutOfRange, Some(why)));
    }
    p.log
        .advance_log_start(target)
        .await
        .map_err(|err| (storage_error_code(&err), Some(err.to_string())))?;
    let low = p.log.log_start_offset();
    tracing::info!(partition = %p.tp, log_start = low.0, "DeleteRecords advanced the log start");
    Ok(low.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_batch_rule() {
        assert_eq!(check_single_batch(None).unwrap_err().0, ResponseError::InvalidRecord);
        let mut batch = vec![0u8; 70];
        batch[8..12].copy_from_slice(&58i32.to_be_bytes());
        assert!(check_single_batch(Some(&Bytes::from(batch.clone()))).is_ok());
        batch.extend_from_slice(&[0u8; 70]);
        assert_eq!(
            check_single_batch(Some(&Bytes::from(batch))).unwrap_err().0,
            ResponseError::InvalidRecord
        );
        let mut short = vec![0u8; 20];
        short[8..12].copy_from_slice(&100i32.to_be_bytes());
        assert_eq!(
            check_single_batch(Some(&Bytes::from(short))).unwrap_err().0,
            ResponseError::CorruptMessage
        );
    }
}
