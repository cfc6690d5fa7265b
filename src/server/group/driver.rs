//! The coordinator driver on a group's coordinator shard: keeps the shard's
//! [`Coordinator`], parks JoinGroup/SyncGroup requests until the coordinator answers
//! them, persists the records it emits in `__consumer_offsets` (answering only once the
//! ISR holds them: `leader_write`), runs its timers, expires offsets, and moves with
//! leadership: an offsets partition this broker leads is replayed (up to the high
//! watermark, once it covers the whole log; COORDINATOR_LOAD_IN_PROGRESS meanwhile) the
//! first time it is used or at the next timer tick, and unloaded when leadership moves
//! away or to a new leader epoch (parked requests answered NOT_COORDINATOR).
//!
//! One instance per shard (thread-local: a shard is a thread and the state never leaves
//! it). Invariants: a group request is served only by the shard owning its partition, and
//! only while this broker leads it; appends for one partition are issued in the order the
//! coordinator emitted them; state loaded at one leader epoch is never served at another.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::channel::oneshot;
use kafka_protocol::records::{
    Compression, Record as KafkaRecord, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use super::leader_write::{append_acks_all, WriteError};
use super::{GroupAnswer, GroupCall};
use crate::constants::{
    GROUP_LAG_PARTITIONS_MAX, GROUP_LAG_PUBLISH_INTERVAL_MS, GROUP_LOAD_WAIT_MS_MAX,
};
use crate::group::load::decode_stored_batch;
use crate::group::placement::{partition_for, OFFSETS_TOPIC};
use crate::group::records::Record;
use crate::group::types::{Effects, GroupError, JoinResponse, Reply, SyncResponse, Token};
use crate::group::Coordinator;
use crate::shard::{now_ms, OwnedPartition, ShardCtx};
use crate::types::{Epoch, Offset};

/// Longest the timer loop sleeps, so a deadline added meanwhile is at most this late.
const TIMER_TICK_MS_MAX: i64 = 100;
/// Bytes read per step while replaying an offsets partition.
const REPLAY_READ_BYTES: usize = 1024 * 1024;

/// A parked request: the member id of a join (`None` for a sync) and its answer channel.
type Parked = (Option<String>, oneshot::Sender<Reply>);

/// Offsets of an open transaction (TxnOffsetCommit): written to `__consumer_offsets` as a
/// transactional batch, applied when the COMMIT marker lands on that partition.
type PendingTxnOffsets = HashMap<i64, Vec<(i32, Record)>>;

struct GroupShard {
    coordinator: RefCell<Coordinator>,
    /// Producer id → (offsets partition, record) of its open transaction's offset commits.
    pending_txn: RefCell<PendingTxnOffsets>,
    /// Parked joins (with the member id they carried) and syncs.
    waiters: RefCell<HashMap<Token, Parked>>,
    next_token: Cell<Token>,
    /// Offsets partitions whose groups are loaded, with the leader epoch they were loaded
    /// at.
    loaded: RefCell<HashMap<i32, Epoch>>,
    load_lock: futures::lock::Mutex<()>,
}

thread_local! {
    static SHARD_STATE: RefCell<Option<Rc<GroupShard>>> = const { RefCell::new(None) };
}

fn state(ctx: &Rc<ShardCtx>) -> Rc<GroupShard> {
    if let Some(s) = SHARD_STATE.with(|s| s.borrow().clone()) {
        return s;
    }
    let s = Rc::new(GroupShard {
        coordinator: RefCell::new(Coordinator::new(ctx.config.group.clone())),
        pending_txn: RefCell::new(HashMap::new()),
        waiters: RefCell::new(HashMap::new()),
        next_token: Cell::new(1),
        loaded: RefCell::new(HashMap::new()),
        load_lock: futures::lock::Mutex::new(()),
    });
    SHARD_STATE.with(|cell| *cell.borrow_mut() = Some(s.clone()));
    drop(ctx.spawn(timer_loop(ctx.clone(), s.clone())));
    s
}

/// Starts this shard's coordinator (its timer loop: loads and unloads with leadership,
/// offset expiry) once the shard leads a `__consumer_offsets` partition, instead of at its
/// first group request: a restarted broker that leads offsets partitions but is never asked
/// about a group still expires their offsets.
pub fn ensure_started(ctx: &Rc<ShardCtx>, image: &crate::controller::MetadataImage) {
    if SHARD_STATE.with(|s| s.borrow().is_some()) {
        return;
    }
    let leads_offsets = image.topic(crate::group::placement::OFFSETS_TOPIC).is_some_and(|t| {
        t.partitions
            .iter()
            .any(|p| p.hosted && p.owner_shard == ctx.id && p.leader == image.node_id)
    });
    if leads_offsets {
        drop(state(ctx));
    }
}

/// Runs a group call on this shard (the receiving side of the mesh).
pub async fn execute(ctx: &Rc<ShardCtx>, call: GroupCall) -> GroupAnswer {
    let s = state(ctx);
    if let Some(group_id) = call.group_id() {
        if let Err(e) = ensure_loaded(ctx, &s, group_id).await {
            return GroupAnswer::Failed(e);
        }
    } else if let Err(e) = load_all_owned(ctx, &s).await {
        return GroupAnswer::Failed(e);
    }
    run_call(ctx, &s, call).await
}

async fn run_call(ctx: &Rc<ShardCtx>, s: &Rc<GroupShard>, call: GroupCall) -> GroupAnswer {
    let now = now_ms();
    match call {
        GroupCall::Join(req) => {
            let member_id = req.member_id.clone();
            let (token, rx) = s.park(Some(member_id.clone()));
            let effects = s.coordinator.borrow_mut().join(token, req, now);
            s.apply(ctx, effects);
            match rx.await {
                Ok(Reply::Join(r)) => GroupAnswer::Join(r),
                _ => GroupAnswer::Join(JoinResponse::error(
                    GroupError::CoordinatorNotAvailable,
                    &member_id,
                )),
            }
        }
        GroupCall::Sync(req) => {
            let (token, rx) = s.park(None);
            let effects = s.coordinator.borrow_mut().sync(token, req, now);
            s.apply(ctx, effects);
            match rx.await {
                Ok(Reply::Sync(r)) => GroupAnswer::Sync(r),
                _ => GroupAnswer::Sync(SyncResponse::error(GroupError::CoordinatorNotAvailable)),
            }
        }
        GroupCall::Heartbeat(req) => {
            GroupAnswer::Heartbeat(s.coordinator.borrow_mut().heartbeat(&req, now).err())
        }
        GroupCall::Leave { group_id, members } => {
            let (result, effects) = s.coordinator.borrow_mut().leave(&group_id, &members, now);
            s.apply(ctx, effects);
            GroupAnswer::Leave(result)
        }
        GroupCall::Commit(req) => {
            let outcome = s.coordinator.borrow_mut().commit(&req, now);
            if outcome.records.is_empty() {
                return GroupAnswer::Commit(outcome.errors);
            }
            match persist(ctx, outcome.records.clone()).await {
                Ok(()) => {
                    s.coordinator.borrow_mut().apply_durable(outcome.records, now_ms());
                    GroupAnswer::Commit(outcome.errors)
                }
                Err(err) => {
                    tracing::warn!(group = %req.group_id, "offset commit not persisted: {err}");
                    let code = write_error(&err);
                    GroupAnswer::Commit(outcome.errors.iter().map(|_| Some(code)).collect())
                }
            }
        }
        GroupCall::TxnCommit { req, producer_id, producer_epoch } => {
            let outcome = s.coordinator.borrow_mut().commit(&req, now);
            if outcome.records.is_empty() {
                return GroupAnswer::Commit(outcome.errors);
            }
            match persist_txn(ctx, &outcome.records, producer_id, producer_epoch).await {
                Ok(partition) => {
                    let mut pending = s.pending_txn.borrow_mut();
                    let list = pending.entry(producer_id).or_default();
                    list.extend(outcome.records.into_iter().map(|r| (partition, r)));
                    GroupAnswer::Commit(outcome.errors)
                }
                Err(err) => {
                    tracing::warn!(group = %req.group_id, "txn offset commit not persisted: {err}");
                    let code = write_error(&err);
                    GroupAnswer::Commit(outcome.errors.iter().map(|_| Some(code)).collect())
                }
            }
        }
        GroupCall::Fetch { group_id, partitions, require_stable } => {
            let c = s.coordinator.borrow();
            let pending = if require_stable { s.pending_partitions(&group_id) } else { Vec::new() };
            let mut rows: Vec<(String, i32, Option<crate::group::types::Committed>)> =
                match partitions {
                    Some(list) => {
                        let found = c.fetch(&group_id, &list);
                        list.into_iter().zip(found).map(|((t, p), v)| (t, p, v)).collect()
                    }
                    None => c
                        .fetch_all(&group_id)
                        .into_iter()
                        .map(|(t, p, v)| (t, p, Some(v)))
                        .collect(),
                };
            for (topic, partition, committed) in &mut rows {
                if pending.iter().any(|(t, p)| t == topic && p == partition) {
                    let mut c = committed.take().unwrap_or(crate::group::types::Committed {
                        offset: -1,
                        leader_epoch: -1,
                        metadata: String::new(),
                        unstable: false,
                    });
                    c.unstable = true;
                    *committed = Some(c);
                }
            }
            GroupAnswer::Fetch(Ok(rows))
        }
        GroupCall::List => GroupAnswer::List(s.coordinator.borrow().list()),
        GroupCall::Describe(group_id) => {
            GroupAnswer::Describe(Ok(s.coordinator.borrow().describe(&group_id)))
        }
        GroupCall::Delete(group_id) => {
            let result = s.coordinator.borrow_mut().delete_group(&group_id);
            match result {
                Ok(records) => {
                    GroupAnswer::Delete(persist(ctx, records).await.err().map(|e| write_error(&e)))
                }
                Err(e) => GroupAnswer::Delete(Some(e)),
            }
        }
        GroupCall::OffsetDelete { group_id, partitions } => {
            let result =
                s.coordinator.borrow_mut().offset_delete(&group_id, &partitions, subscribed_to);
            match result {
                Ok((errors, records)) => match persist(ctx, records).await {
                    Ok(()) => GroupAnswer::OffsetDelete(Ok(errors)),
                    Err(e) => GroupAnswer::OffsetDelete(Err(write_error(&e))),
                },
                Err(e) => GroupAnswer::OffsetDelete(Err(e)),
            }
        }
    }
}

/// The client's error for a coordinator write that did not reach the ISR.
fn write_error(err: &WriteError) -> GroupError {
    match err {
        WriteError::NotLeader => GroupError::NotCoordinator,
        WriteError::Failed(_) => GroupError::CoordinatorNotAvailable,
    }
}

/// Whether the group's members subscribe to `topic` (consumer protocol subscriptions).
fn subscribed_to(group: &crate::group::state::Group, topic: &str) -> bool {
    use kafka_protocol::messages::ConsumerProtocolSubscription;
    use kafka_protocol::protocol::Decodable;
    let protocol = group.protocol.clone().unwrap_or_default();
    group.members.values().any(|m| {
        let mut meta = m.metadata_for(&protocol);
        if meta.len() < 2 {
            return false;
        }
        let version = i16::from_be_bytes([meta[0], meta[1]]);
        bytes::Buf::advance(&mut meta, 2);
        ConsumerProtocolSubscription::decode(&mut meta, version)
            .map(|s| s.topics.iter().any(|t| t.as_str() == topic))
            .unwrap_or(false)
    })
}

impl GroupShard {
    /// Parks a join (`Some(member id)`) or a sync (`None`) until the coordinator answers.
    fn park(&self, join_member: Option<String>) -> (Token, oneshot::Receiver<Reply>) {
        let token = self.next_token.get();
        self.next_token.set(token.wrapping_add(1));
        let (tx, rx) = oneshot::channel();
        self.waiters.borrow_mut().insert(token, (join_member, tx));
        (token, rx)
    }

    fn answer(&self, token: Token, reply: Reply) {
        if let Some((_, tx)) = self.waiters.borrow_mut().remove(&token) {
            let _ = tx.send(reply);
        }
    }

    /// Answers every parked request with NOT_COORDINATOR (shutdown): clients look for the
    /// coordinator again instead of holding their connection until it closes.
    fn release_all(&self) {
        let parked: Vec<_> = self.waiters.borrow_mut().drain().collect();
        Self::release(parked);
    }

    /// Answers the given parked requests NOT_COORDINATOR (their group was unloaded).
    fn release_tokens(&self, tokens: &[Token]) {
        let parked: Vec<_> = {
            let mut waiters = self.waiters.borrow_mut();
            tokens.iter().filter_map(|t| waiters.remove(t).map(|w| (*t, w))).collect()
        };
        Self::release(parked);
    }

    fn release(parked: Vec<(Token, Parked)>) {
        for (_, (join_member, tx)) in parked {
            let reply = match join_member {
                Some(member_id) => {
                    Reply::Join(JoinResponse::error(GroupError::NotCoordinator, &member_id))
                }
                None => Reply::Sync(SyncResponse::error(GroupError::NotCoordinator)),
            };
            let _ = tx.send(reply);
        }
    }

    /// Sends immediate replies; persists records then sends the replies that wait on them.
    fn apply(self: &Rc<Self>, ctx: &Rc<ShardCtx>, effects: Effects) {
        for (token, reply) in effects.replies {
            self.answer(token, reply);
        }
        if effects.records.is_empty() {
            for (token, reply) in effects.after_persist {
                self.answer(token, reply);
            }
            return;
        }
        let s = self.clone();
        let ctx2 = ctx.clone();
        drop(ctx.spawn(async move {
            let result = persist(&ctx2, effects.records).await;
            for (token, reply) in effects.after_persist {
                let reply = match (&result, reply) {
                    (Ok(()), reply) => reply,
                    (Err(e), Reply::Join(j)) => {
                        Reply::Join(JoinResponse::error(write_error(e), &j.member_id))
                    }
                    (Err(e), Reply::Sync(_)) => Reply::Sync(SyncResponse::error(write_error(e))),
                };
                s.answer(token, reply);
            }
            if let Err(reason) = result {
                tracing::warn!("group metadata not persisted: {reason}");
            }
        }));
    }
}

/// The offsets partition of `group_id`, if this broker leads it and this shard owns it:
/// NOT_COORDINATOR from a broker that does not lead it (the client asks FindCoordinator
/// again), COORDINATOR_LOAD_IN_PROGRESS while this shard is still opening or taking over the
/// partition the image says it leads, COORDINATOR_NOT_AVAILABLE without a leader.
fn offsets_partition(
    ctx: &ShardCtx,
    group_id: &str,
) -> Result<(i32, Rc<OwnedPartition>), GroupError> {
    let n = super::route::offsets_partitions(ctx).ok_or(GroupError::CoordinatorNotAvailable)?;
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
    match ctx.partitions.get(topic, p) {
        Some(owned) if owned.is_leader.get() && owned.leader_epoch.get() == pi.leader_epoch => {
            Ok(owned)
        }
        _ => Err(Leadership::Opening),
    }
}

/// Takes the shard's load lock, waiting at most `GROUP_LOAD_WAIT_MS_MAX`: a request for a
/// partition another request is replaying waits for it (most replays take milliseconds),
/// and past the bound answers COORDINATOR_LOAD_IN_PROGRESS as Kafka does while loading.
async fn load_lock(s: &GroupShard) -> Result<futures::lock::MutexGuard<'_, ()>, GroupError> {
    crate::shard::with_timeout(Duration::from_millis(GROUP_LOAD_WAIT_MS_MAX), s.load_lock.lock())
        .await
        .ok_or(GroupError::CoordinatorLoadInProgress)
}

async fn ensure_loaded(
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
async fn load_partition(
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
async fn load_all_owned(ctx: &Rc<ShardCtx>, s: &Rc<GroupShard>) -> Result<(), GroupError> {
    let Some(n) = super::route::offsets_partitions(ctx) else { return Ok(()) };
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
async fn reconcile(ctx: &Rc<ShardCtx>, s: &Rc<GroupShard>) {
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

/// A transaction marker closed `producer_id`'s transaction on offsets partition
/// `partition` of this shard (durably): its pending offsets are applied (COMMIT) or
/// dropped (ABORT). Called by `txn::partition::marker_written` on the owner shard.
pub fn complete_txn_offsets(ctx: &ShardCtx, partition: i32, producer_id: i64, commit: bool) {
    let _ = ctx;
    let Some(s) = SHARD_STATE.with(|s| s.borrow().clone()) else { return };
    s.complete_txn(partition, producer_id, commit, now_ms());
}

impl GroupShard {
    /// Drops partition `p`'s groups and pending transactional offsets (leadership moved):
    /// their parked joins and syncs are answered NOT_COORDINATOR.
    fn unload(&self, ctx: &ShardCtx, p: i32) {
        if self.loaded.borrow_mut().remove(&p).is_none() {
            return;
        }
        let n = super::route::offsets_partitions(ctx).unwrap_or(1);
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
    fn pending_partitions(&self, group_id: &str) -> Vec<(String, i32)> {
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

    fn complete_txn(&self, partition: i32, producer_id: i64, commit: bool, now: i64) {
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

/// Appends transactional offset commits (one offsets partition: the group's) as a
/// transactional batch of the producer and waits until it is durable. Returns the partition.
async fn persist_txn(
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

/// Rebuilds groups and offsets from one `__consumer_offsets` partition.
async fn replay(s: &GroupShard, owned: &OwnedPartition) -> Result<(), String> {
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
fn replay_batches(
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

/// Appends records (grouped per offsets partition) and waits until the ISR holds them.
async fn persist(ctx: &Rc<ShardCtx>, records: Vec<Record>) -> Result<(), WriteError> {
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

fn encode_batch(records: &[Record], now: i64) -> Result<Bytes, String> {
    encode_batch_as(records, now, None)
}

/// The batch of `records`, transactional for `producer` (id, epoch) when given (base
/// sequence -1, as Kafka's coordinator writes transactional offset commits).
fn encode_batch_as(
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

/// Drives the coordinator's timers and offset expiry on this shard.
async fn timer_loop(ctx: Rc<ShardCtx>, s: Rc<GroupShard>) {
    // Load every offsets partition of this shard, so groups nobody asks about still
    // expire and their members' sessions still time out.
    if let Err(e) = load_all_owned(&ctx, &s).await {
        tracing::warn!("loading group state failed: {e}");
    }
    let expiry_interval_ms =
        i64::try_from(ctx.config.offsets_retention_check_interval_ms).unwrap_or(i64::MAX);
    let mut next_expiry = now_ms().saturating_add(expiry_interval_ms);
    let mut next_lag = now_ms() + GROUP_LAG_PUBLISH_INTERVAL_MS;
    while !ctx.is_shutting_down() {
        let now = now_ms();
        let next = s.coordinator.borrow().next_deadline();
        let wait_ms = next.map_or(TIMER_TICK_MS_MAX, |d| (d - now).clamp(1, TIMER_TICK_MS_MAX));
        crate::shard::sleep(Duration::from_millis(u64::try_from(wait_ms).unwrap_or(1))).await;
        reconcile(&ctx, &s).await;
        let now = now_ms();
        let effects = s.coordinator.borrow_mut().tick(now);
        s.apply(&ctx, effects);
        if now >= next_lag {
            next_lag = now + GROUP_LAG_PUBLISH_INTERVAL_MS;
            drop(ctx.spawn(publish_lag(ctx.clone(), s.clone())));
        }
        if now >= next_expiry {
            next_expiry = now.saturating_add(expiry_interval_ms);
            let image = ctx.image();
            let records = s.coordinator.borrow_mut().expire(now, |t| image.topics.contains_key(t));
            if !records.is_empty() {
                s.apply(&ctx, Effects { records, ..Effects::default() });
            }
        }
    }
    s.release_all();
}

/// Publishes `log end offset - committed offset` of every committed partition of the
/// groups this shard coordinates to the metrics endpoint (ListOffsets -1 on each
/// partition's owner shard).
async fn publish_lag(ctx: Rc<ShardCtx>, s: Rc<GroupShard>) {
    use crate::partition::ops::{PartitionOp, PartitionResult};
    use crate::server::call::{ShardReply, ShardRequest};
    let committed: Vec<(String, String, i32, i64)> = {
        let c = s.coordinator.borrow();
        let ids: Vec<String> = c.group_ids().cloned().collect();
        ids.into_iter()
            .flat_map(|g| c.offsets_of(&g).into_iter().map(move |((t, p), o)| (g.clone(), t, p, o)))
            .take(GROUP_LAG_PARTITIONS_MAX)
            .collect()
    };
    let mut by_shard: HashMap<crate::types::ShardId, Vec<(String, String, i32, i64)>> =
        HashMap::new();
    for row in committed {
        if let Some((shard, _)) = ctx.owner_of(&row.1, row.2) {
            by_shard.entry(shard).or_default().push(row);
        }
    }
    for (shard, rows) in by_shard {
        let ops = rows
            .iter()
            .map(|(_, t, p, _)| PartitionOp::ListOffsets {
                topic: t.clone(),
                partition: *p,
                timestamp: -1,
                current_leader_epoch: -1,
                read_committed: false,
            })
            .collect();
        let Ok(ShardReply::Partitions(results)) =
            ctx.call(shard, ShardRequest::Partitions(ops)).await.await
        else {
            continue;
        };
        for ((group, topic, partition, offset), result) in rows.into_iter().zip(results) {
            if let PartitionResult::ListOffsets(Ok(end)) = result {
                crate::metrics::consumer_lag(
                    &group,
                    &topic,
                    partition,
                    (end.offset - offset).max(0),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::records::OffsetValue;
    use crate::group::GroupConfig;

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
