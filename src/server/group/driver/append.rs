//! Writing the coordinator's records to `__consumer_offsets`: grouped per offsets
//! partition, encoded as one batch each (transactional for TxnOffsetCommit), and answered
//! only once the ISR holds them (`leader_write`).
//!
//! Runs on the group's coordinator shard. Invariant: every partition's append is issued
//! before the first wait, in the order the coordinator emitted the records.

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record as KafkaRecord, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use super::super::leader_write::{append_acks_all, WriteError};
use super::load::offsets_partition;
use crate::group::records::Record;
use crate::partition::OwnedPartition;
use crate::shard::{now_ms, ShardCtx};

/// Appends transactional offset commits (one offsets partition: the group's) as a
/// transactional batch of the producer and waits until it is durable. Returns the partition.
pub(super) async fn persist_txn(
    ctx: &Rc<ShardCtx>,
    records: &[Record],
    producer_id: i64,
    producer_epoch: i16,
) -> Result<i32, WriteError> {
    let Some(Record::Offset { group, .. } | Record::Group { group, .. }) = records.first() else {
        return Err(WriteError::Failed("nothing to persist".into()));
    };
    let (p, owned) = offsets_partition(ctx, group).map_err(|_| WriteError::NotLeader)?;
    let batch = encode_batch_as(records, now_ms(), Some((producer_id, producer_epoch)))
        .map_err(WriteError::Failed)?;
    append_acks_all(&owned, batch, true, now_ms()).await?;
    Ok(p)
}

/// Appends records (grouped per offsets partition) and waits until the ISR holds them.
pub(super) async fn persist(ctx: &Rc<ShardCtx>, records: Vec<Record>) -> Result<(), WriteError> {
    let mut by_partition: Vec<(Rc<OwnedPartition>, Vec<Record>)> = Vec::new();
    for record in records {
        let group = match &record {
            Record::Offset { group, .. } | Record::Group { group, .. } => group.clone(),
        };
        let (_, owned) = offsets_partition(ctx, &group).map_err(|_| WriteError::NotLeader)?;
        match by_partition.iter_mut().find(|(q, _)| Rc::ptr_eq(q, &owned)) {
            Some((_, list)) => list.push(record),
            None => by_partition.push((owned, vec![record])),
        }
    }
    // Every append is issued before the first wait (the coordinator's order per partition).
    let mut writes = Vec::new();
    for (owned, list) in by_partition {
        let batch = encode_batch(&list, now_ms()).map_err(WriteError::Failed)?;
        writes.push(async move { append_acks_all(&owned, batch, false, now_ms()).await });
    }
    for result in futures::future::join_all(writes).await {
        result?;
    }
    Ok(())
}

pub(super) fn encode_batch(records: &[Record], now: i64) -> Result<Bytes, String> {
    encode_batch_as(records, now, None)
}

/// The batch of `records`, transactional for `producer` (id, epoch) when given (base
/// sequence -1, as Kafka's coordinator writes transactional offset commits).
pub(super) fn encode_batch_as(
    records: &[Record],
    now: i64,
    producer: Option<(i64, i16)>,
) -> Result<Bytes, String> {
    let (producer_id, producer_epoch) = producer.unwrap_or((-1, -1));
    let kafka_records: Vec<KafkaRecord> = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let (key, value) = r.encode();
            KafkaRecord {
                transactional: producer.is_some(),
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id,
                producer_epoch,
                timestamp_type: TimestampType::Creation,
                offset: i64::try_from(i).unwrap_or(0),
                // The encoder starts a new batch whenever offset - sequence changes; this
                // keeps one batch with base sequence -1 (no producer id).
                sequence: i32::try_from(i).unwrap_or(0) - 1,
                timestamp: now,
                key: Some(key),
                value,
                headers: Default::default(),
            }
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, kafka_records.iter(), &options)
        .map_err(|e| e.to_string())?;
    Ok(buf.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::records::OffsetValue;
    use crate::group::Coordinator;
    use crate::group::GroupConfig;
    use crate::server::group::driver::load::replay_batches;
    use crate::server::group::driver::GroupShard;
    use crate::types::Offset;
    use std::cell::{Cell, RefCell};
    use std::collections::HashMap;

    #[test]
    fn encoded_batch_has_a_valid_crc_and_decodes_back() {
        let records: Vec<Record> = (0..6)
            .map(|p| Record::Offset {
                group: "g1".into(),
                topic: "t6".into(),
                partition: p,
                value: Some(OffsetValue {
                    offset: 10,
                    leader_epoch: 0,
                    metadata: String::new(),
                    commit_timestamp_ms: 1,
                    expire_timestamp_ms: -1,
                }),
            })
            .collect();
        let batch = encode_batch(&records, 1000).expect("encode");
        let crc = u32::from_be_bytes(batch[17..21].try_into().expect("crc"));
        assert_eq!(crc32c::crc32c(&batch[21..]), crc, "one batch of {} bytes", batch.len());
        assert_eq!(&batch[53..57], &(-1i32).to_be_bytes(), "base sequence");
        let state = GroupShard {
            coordinator: RefCell::new(Coordinator::new(GroupConfig::default())),
            pending_txn: RefCell::new(HashMap::new()),
            waiters: RefCell::new(HashMap::new()),
            next_token: Cell::new(1),
            loaded: RefCell::new(HashMap::new()),
            load_lock: futures::lock::Mutex::new(()),
        };
        let mut count = 0;
        let next = replay_batches(&state, batch, 2000, &mut count, 0).expect("replay");
        assert_eq!((next, count), (Offset(6), 6));
        assert_eq!(state.coordinator.borrow().fetch_all("g1").len(), 6);
    }
}
