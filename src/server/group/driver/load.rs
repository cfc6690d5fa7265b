//! Loading and unloading the groups of the `__consumer_offsets` partitions a shard leads:
//! which partition serves a group (and why it cannot now), replaying a partition's records
//! into the coordinator at one leader epoch, following leadership each timer tick, and the
//! transactional offsets that wait for their transaction's marker.
//!
//! Runs on the offsets partition's owner shard, inside the group driver. Invariants: a
//! partition is replayed only once its high watermark covers its whole log, under the
//! shard's load lock; groups loaded at one leader epoch are dropped before another epoch's
//! are loaded, and when leadership moves their parked requests get NOT_COORDINATOR.

use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;

use super::GroupShard;
use crate::constants::GROUP_LOAD_WAIT_MS_MAX;
use crate::group::load::decode_stored_batch;
use crate::group::placement::{partition_for, OFFSETS_TOPIC};
use crate::group::records::Record;
use crate::group::types::GroupError;
use crate::partition::OwnedPartition;
use crate::shard::{now_ms, ShardCtx};
use crate::types::{Epoch, Offset};

/// Bytes read per step while replaying an offsets partition.
const REPLAY_READ_BYTES: usize = 1024 * 1024;

/// The offsets partition of `group_id`, if this broker leads it and this shard owns it:
/// NOT_COORDINATOR from a broker that does not lead it (the client asks FindCoordinator
/// again), COORDINATOR_LOAD_IN_PROGRESS while this shard is still opening or taking over the
/// partition the image says it leads, COORDINATOR_NOT_AVAILABLE without a leader.
pub(super) fn offsets_partition(
    ctx: &ShardCtx,
    group_id: &str,
) -> Result<(i32, Rc<OwnedPartition>), GroupError> {
    let n =
        super::super::route::offsets_partitions(ctx).ok_or(GroupError::CoordinatorNotAvailable)?;
    let p = partition_for(group_id, n);
    leading_partition(ctx, OFFSETS_TOPIC, p).map(|owned| (p, owned)).map_err(|e| match e {
        Leadership::NoLeader => GroupError::CoordinatorNotAvailable,
        Leadership::Elsewhere => GroupError::NotCoordinator,
        Leadership::Opening => GroupError::CoordinatorLoadInProgress,
    })
}

/// Why this shard cannot act as the leader of an internal-topic partition now.
pub(crate) enum Leadership {
    NoLeader,
    /// Another broker leads it (or another shard of this broker owns it).
    Elsewhere,
    /// The image names this broker leader, but the shard has not opened or promoted the
    /// partition yet.
    Opening,
}

/// The partition `topic`-`p` if this shard owns it and this broker leads it.
pub(crate) fn leading_partition(
    ctx: &ShardCtx,
    topic: &str,
    p: i32,
) -> Result<Rc<OwnedPartition>, Leadership> {
    let image = ctx.image();
    let pi = image.partition(topic, p).ok_or(Leadership::NoLeader)?;
    if pi.leader.0 < 0 {
        return Err(Leadership::NoLeader);
    }
    if pi.leader != image.node_id || pi.owner_shard != ctx.id {
        return Err(Leadership::Elsewhere);
    }
    match crate::server::broker::of(ctx).partitions.get(topic, p) {
        Some(owned) if owned.is_leader.get() && owned.leader_epoch.get() == pi.leader_epoch => {
            Ok(owned)
        }
        _ => Err(Leadership::Opening),
    }
}

/// Takes the shard's load lock, waiting at most `GROUP_LOAD_WAIT_MS_MAX`: a request for a
/// partition another request is replaying waits for it (most replays take milliseconds),
/// and past the bound answers COORDINATOR_LOAD_IN_PROGRESS as Kafka does while loading.
pub(super) async fn load_lock(
    s: &GroupShard,
) -> Result<futures::lock::MutexGuard<'_, ()>, GroupError> {
    crate::shard::with_timeout(Duration::from_millis(GROUP_LOAD_WAIT_MS_MAX), s.load_lock.lock())
        .await
        .ok_or(GroupError::CoordinatorLoadInProgress)
}

pub(super) async fn ensure_loaded(
    ctx: &Rc<ShardCtx>,
    s: &Rc<GroupShard>,
    group_id: &str,
) -> Result<(), GroupError> {
    let (p, owned) = offsets_partition(ctx, group_id)?;
    load_partition(ctx, s, p, &owned).await
}

/// Loads partition `p`'s groups at the partition's current leader epoch (unloading what an
/// older epoch loaded first). Bounded: the replay reads up to the high watermark, and starts
/// only once the high watermark covers the whole log (a new leader's high watermark catches
/// up as its followers fetch), so no record the ISR may still acknowledge is missed.
pub(super) async fn load_partition(
    ctx: &Rc<ShardCtx>,
    s: &Rc<GroupShard>,
    p: i32,
    owned: &Rc<OwnedPartition>,
) -> Result<(), GroupError> {
    let epoch = owned.leader_epoch.get();
    if s.loaded.borrow().get(&p) == Some(&epoch) {
        return Ok(());
    }
    let _guard = load_lock(s).await?;
    if s.loaded.borrow().get(&p) == Some(&epoch) {
        return Ok(());
    }
    if s.loaded.borrow().contains_key(&p) {
        s.unload(ctx, p);
    }
    if owned.high_watermark() < owned.log.log_end_offset() {
        return Err(GroupError::CoordinatorLoadInProgress);
    }
    replay(s, owned).await.map_err(|reason| {
        tracing::error!(partition = p, "replay of {OFFSETS_TOPIC} failed: {reason}");
        GroupError::CoordinatorNotAvailable
    })?;
    if !owned.is_leader.get() || owned.leader_epoch.get() != epoch {
        // Leadership moved during the replay: drop what it loaded.
        s.loaded.borrow_mut().insert(p, epoch);
        s.unload(ctx, p);
        return Err(GroupError::NotCoordinator);
    }
    s.loaded.borrow_mut().insert(p, epoch);
    tracing::info!(partition = p, leader_epoch = epoch.0, "group coordinator loaded");
    Ok(())
}

/// Loads every offsets partition this shard leads (before shard-wide calls like ListGroups).
pub(super) async fn load_all_owned(
    ctx: &Rc<ShardCtx>,
    s: &Rc<GroupShard>,
) -> Result<(), GroupError> {
    let Some(n) = super::super::route::offsets_partitions(ctx) else { return Ok(()) };
    let mut first_error = Ok(());
    for p in 0..n {
        let Ok(owned) = leading_partition(ctx, OFFSETS_TOPIC, p) else { continue };
        if let Err(e) = load_partition(ctx, s, p, &owned).await {
            first_error = first_error.and(Err(e));
        }
    }
    first_error
}

/// Follows leadership (each timer tick): unloads partitions this broker no longer leads at
/// the epoch they were loaded at, and loads those it now leads, so groups nobody asks about
/// still expire and a new coordinator is ready when clients come.
pub(super) async fn reconcile(ctx: &Rc<ShardCtx>, s: &Rc<GroupShard>) {
    let loaded: Vec<(i32, Epoch)> = s.loaded.borrow().iter().map(|(p, e)| (*p, *e)).collect();
    for (p, epoch) in loaded {
        let still = leading_partition(ctx, OFFSETS_TOPIC, p)
            .is_ok_and(|owned| owned.leader_epoch.get() == epoch);
        if !still {
            s.unload(ctx, p);
        }
    }
    if let Err(e) = load_all_owned(ctx, s).await {
        tracing::debug!("group state not loaded yet: {e:?}");
    }
}

impl GroupShard {
    /// Drops partition `p`'s groups and pending transactional offsets (leadership moved):
    /// their parked joins and syncs are answered NOT_COORDINATOR.
    pub(super) fn unload(&self, ctx: &ShardCtx, p: i32) {
        if self.loaded.borrow_mut().remove(&p).is_none() {
            return;
        }
        let n = super::super::route::offsets_partitions(ctx).unwrap_or(1);
        let tokens = self.coordinator.borrow_mut().unload(|g| partition_for(g, n) == p);
        self.release_tokens(&tokens);
        let mut pending = self.pending_txn.borrow_mut();
        for list in pending.values_mut() {
            list.retain(|(q, _)| *q != p);
        }
        pending.retain(|_, list| !list.is_empty());
        tracing::info!(partition = p, "group coordinator unloaded: leadership moved");
    }

    /// Partitions of `group_id` with offsets pending in an open transaction.
    pub(super) fn pending_partitions(&self, group_id: &str) -> Vec<(String, i32)> {
        self.pending_txn
            .borrow()
            .values()
            .flatten()
            .filter_map(|(_, r)| match r {
                Record::Offset { group, topic, partition, .. } if group == group_id => {
                    Some((topic.clone(), *partition))
                }
                _ => None,
            })
            .collect()
    }

    pub(super) fn complete_txn(&self, partition: i32, producer_id: i64, commit: bool, now: i64) {
        let mut pending = self.pending_txn.borrow_mut();
        let Some(list) = pending.get_mut(&producer_id) else { return };
        let (mine, rest): (Vec<_>, Vec<_>) = list.drain(..).partition(|(p, _)| *p == partition);
        *list = rest;
        if list.is_empty() {
            pending.remove(&producer_id);
        }
        drop(pending);
        if commit {
            let records = mine.into_iter().map(|(_, r)| r).collect();
            self.coordinator.borrow_mut().apply_durable(records, now);
        }
    }
}

/// Rebuilds groups and offsets from one `__consumer_offsets` partition.
pub(super) async fn replay(s: &GroupShard, owned: &OwnedPartition) -> Result<(), String> {
    let log = &owned.log;
    let end = owned.high_watermark();
    let mut offset = log.log_start_offset();
    let now = now_ms();
    let mut count = 0usize;
    while offset < end {
        let bytes = log.read(offset, REPLAY_READ_BYTES, end).await.map_err(|e| e.to_string())?;
        if bytes.is_empty() {
            break;
        }
        let next = replay_batches(s, bytes, now, &mut count, owned.tp.partition)?;
        if next <= offset {
            break;
        }
        offset = next;
    }
    tracing::info!(partition = %owned.tp, records = count, "replayed group records");
    Ok(())
}

/// Applies every record of a run of batches; returns the offset after the last batch.
pub(super) fn replay_batches(
    s: &GroupShard,
    mut bytes: Bytes,
    now: i64,
    count: &mut usize,
    partition: i32,
) -> Result<Offset, String> {
    let mut next = Offset(-1);
    while bytes.len() >= 12 {
        let base = i64::from_be_bytes(bytes[0..8].try_into().map_err(|_| "short batch")?);
        let len = i32::from_be_bytes(bytes[8..12].try_into().map_err(|_| "short batch")?);
        let size = 12 + usize::try_from(len).map_err(|_| "negative batch length")?;
        if size > bytes.len() || size < 27 {
            break;
        }
        let batch = bytes.split_to(size);
        let last_delta = i32::from_be_bytes(batch[23..27].try_into().map_err(|_| "short batch")?);
        next = Offset(base + i64::from(last_delta) + 1);
        // Bounded decompression (a bomb is refused, not allocated): `group::load`.
        let records = decode_stored_batch(&batch).map_err(|e| e.to_string())?;
        for r in records {
            let Some(key) = r.key else { continue };
            if r.control {
                // A transaction marker: COMMIT (type 1) applies the producer's pending
                // offsets, ABORT drops them.
                if key.len() >= 4 {
                    let commit = i16::from_be_bytes([key[2], key[3]]) == 1;
                    s.complete_txn(partition, r.producer_id, commit, now);
                }
                continue;
            }
            match Record::decode(&key, r.value.as_deref()) {
                Ok(record) if r.transactional => {
                    let mut pending = s.pending_txn.borrow_mut();
                    pending.entry(r.producer_id).or_default().push((partition, record));
                }
                Ok(record) => {
                    s.coordinator.borrow_mut().replay(record, now);
                    *count += 1;
                }
                // Keys of other record types (e.g. KIP-848 groups) are skipped, as a
                // classic-only coordinator cannot use them.
                Err(err) => tracing::debug!("skipping offsets record: {err}"),
            }
        }
    }
    Ok(next)
}
