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

use futures::channel::oneshot;

use super::leader_write::WriteError;
use super::{GroupAnswer, GroupCall};
use crate::constants::{GROUP_LAG_PARTITIONS_MAX, GROUP_LAG_PUBLISH_INTERVAL_MS};
use crate::group::records::Record;
use crate::group::types::{Effects, GroupError, JoinResponse, Reply, SyncResponse, Token};
use crate::group::Coordinator;
use crate::shard::{now_ms, ShardCtx};
use crate::types::Epoch;

mod append;
mod load;

use append::{persist, persist_txn};
use load::{ensure_loaded, load_all_owned, reconcile};
pub(crate) use load::{leading_partition, Leadership};

/// Longest the timer loop sleeps, so a deadline added meanwhile is at most this late.
const TIMER_TICK_MS_MAX: i64 = 100;

/// A parked request: the member id of a join (`None` for a sync) and its answer channel.
type Parked = (Option<String>, oneshot::Sender<Reply>);

/// Offsets of an open transaction (TxnOffsetCommit): written to `__consumer_offsets` as a
/// transactional batch, applied when the COMMIT marker lands on that partition.
type PendingTxnOffsets = HashMap<i64, Vec<(i32, Record)>>;

pub(crate) struct GroupShard {
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

fn state(ctx: &Rc<ShardCtx>) -> Rc<GroupShard> {
    let broker = crate::server::broker::of(ctx);
    if let Some(s) = broker.groups.get() {
        return s.clone();
    }
    let s = Rc::new(GroupShard {
        coordinator: RefCell::new(Coordinator::new(ctx.config.group.clone())),
        pending_txn: RefCell::new(HashMap::new()),
        waiters: RefCell::new(HashMap::new()),
        next_token: Cell::new(1),
        loaded: RefCell::new(HashMap::new()),
        load_lock: futures::lock::Mutex::new(()),
    });
    let _ = broker.groups.set(s.clone());
    drop(ctx.spawn(timer_loop(ctx.clone(), s.clone())));
    s
}

/// Starts this shard's coordinator (its timer loop: loads and unloads with leadership,
/// offset expiry) once the shard leads a `__consumer_offsets` partition, instead of at its
/// first group request: a restarted broker that leads offsets partitions but is never asked
/// about a group still expires their offsets.
pub fn ensure_started(ctx: &Rc<ShardCtx>, image: &crate::controller::MetadataImage) {
    if crate::server::broker::of(ctx).groups.get().is_some() {
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

/// A transaction marker closed `producer_id`'s transaction on offsets partition
/// `partition` of this shard (durably): its pending offsets are applied (COMMIT) or
/// dropped (ABORT). Called by `partition::transactions::marker_written` on the owner shard.
pub fn complete_txn_offsets(ctx: &ShardCtx, partition: i32, producer_id: i64, commit: bool) {
    let Some(s) = crate::server::broker::of(ctx).groups.get().cloned() else { return };
    s.complete_txn(partition, producer_id, commit, now_ms());
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
