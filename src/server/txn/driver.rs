//! The transaction coordinator driver on a transactional id's coordinator shard: keeps the
//! shard's [`Coordinator`], persists each transition in `__transaction_state` before it takes
//! effect, writes the markers of completing transactions to every partition's owner shard,
//! aborts timed-out transactions, removes idle ids, and moves with leadership: a
//! `__transaction_state` partition this broker leads is replayed (up to the high watermark,
//! once it covers the whole log) by the timer started with the shard (every tick) or by a
//! call that needs it first, completing the
//! PrepareCommit/PrepareAbort it finds, and unloaded when leadership moves away. The
//! coordinator epoch stamped on markers is the partition's leader epoch (as Kafka's), so a
//! partition refuses markers from a deposed coordinator.
//!
//! One instance per shard (thread-local). Invariants: an id is served only by the shard
//! owning its partition, while this broker leads it; a transition is answered only once the
//! ISR holds it; a transaction's markers are written by one task at a time (`writing`),
//! and it completes only after every marker is durable.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse};
use kafka_protocol::records::{
    Compression, Record as KafkaRecord, RecordBatchDecoder, RecordBatchEncoder,
    RecordEncodeOptions, TimestampType,
};

use super::{txn_partition_for, txn_partitions, TxnAnswer, TxnCall};
use crate::constants::{TXN_MARKER_RETRY_MS, TXN_TIMER_TICK_MS};
use crate::group::placement::partition_for;
use crate::partition::ops::{PartitionOp, PartitionResult};
use crate::partition::OwnedPartition;
use crate::server::call::{ShardReply, ShardRequest};
use crate::server::group::driver::{leading_partition, Leadership};
use crate::server::group::leader_write::{append_acks_all, WriteError};
use crate::shard::{now_ms, ShardCtx};
use crate::txn::coordinator::{InitOutcome, Then, Transition};
use crate::txn::records::{decode, encode_key, encode_value};
use crate::txn::{Coordinator, TxnError, TxnState, TXN_TOPIC};
use crate::types::{Epoch, Offset};

/// Bytes read per step while replaying a `__transaction_state` partition.
const REPLAY_READ_BYTES: usize = 1024 * 1024;

pub(crate) struct TxnShard {
    coordinator: RefCell<Coordinator>,
    /// Partitions loaded, with the leader epoch (= coordinator epoch) they were loaded at.
    loaded: RefCell<HashMap<i32, Epoch>>,
    load_lock: futures::lock::Mutex<()>,
    /// Ids whose markers a task is writing.
    writing: RefCell<HashSet<String>>,
    /// Open transactions last published to the metrics gauge.
    open_published: std::cell::Cell<i64>,
}

fn state(ctx: &Rc<ShardCtx>) -> Rc<TxnShard> {
    let broker = crate::server::broker::of(ctx);
    if let Some(s) = broker.txns.get() {
        return s.clone();
    }
    let s = Rc::new(TxnShard {
        coordinator: RefCell::new(Coordinator::new(ctx.config.txn.max_timeout_ms)),
        loaded: RefCell::new(HashMap::new()),
        load_lock: futures::lock::Mutex::new(()),
        writing: RefCell::new(HashSet::new()),
        open_published: std::cell::Cell::new(0),
    });
    let _ = broker.txns.set(s.clone());
    drop(ctx.spawn(timer_loop(ctx.clone(), s.clone())));
    s
}

/// Starts this shard's transaction coordinator at shard start-up: its timer loads every
/// `__transaction_state` partition the broker leads and completes the transactions a crash
/// left between PrepareCommit/PrepareAbort and their markers, as Kafka's coordinator does on
/// election. Started lazily by the first transactional call instead, a restart with only
/// read_committed consumers left such a transaction open, and its partitions' last stable
/// offset (so every read_committed consumer) stuck until some producer came.
pub fn start(ctx: &Rc<ShardCtx>) {
    let _ = state(ctx);
}

/// Runs a transaction call on this shard (the receiving side of the mesh).
pub async fn execute(ctx: &Rc<ShardCtx>, call: TxnCall) -> TxnAnswer {
    let s = state(ctx);
    let loaded = match call.transactional_id() {
        Some(id) if !matches!(call, TxnCall::Describe(_)) => ensure_loaded(ctx, &s, id).await,
        _ => load_all_owned(ctx, &s).await,
    };
    if let Err(e) = loaded {
        return TxnAnswer::Failed(e);
    }
    let now = now_ms();
    match call {
        TxnCall::InitProducerId { transactional_id, timeout_ms, expected } => TxnAnswer::Init(
            init_producer_id(ctx, &s, &transactional_id, timeout_ms, expected).await,
        ),
        TxnCall::AddPartitions { transactional_id, producer_id, producer_epoch, partitions } => {
            let r = s.coordinator.borrow_mut().add_partitions(
                &transactional_id,
                producer_id,
                producer_epoch,
                &partitions,
                now,
            );
            TxnAnswer::Done(match r {
                Ok(Some(t)) => run_transition(ctx, &s, t).await,
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            })
        }
        TxnCall::EndTxn { transactional_id, producer_id, producer_epoch, commit } => {
            let r = s.coordinator.borrow_mut().end_txn(
                &transactional_id,
                producer_id,
                producer_epoch,
                commit,
                now,
            );
            TxnAnswer::Done(match r {
                Ok(Some(t)) => run_transition(ctx, &s, t).await,
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            })
        }
        TxnCall::Verify { transactional_id, producer_id, producer_epoch, partitions } => {
            let c = s.coordinator.borrow();
            TxnAnswer::Verified(
                partitions
                    .iter()
                    .map(|tp| c.verify(&transactional_id, producer_id, producer_epoch, tp))
                    .collect(),
            )
        }
        TxnCall::Describe(ids) => {
            let c = s.coordinator.borrow();
            let rows = ids
                .into_iter()
                .map(|id| {
                    let owned = owned_partition(ctx, &id).is_ok();
                    let meta = match c.get(&id) {
                        _ if !owned => Err(TxnError::NotCoordinator),
                        Some(m) if m.state != TxnState::Dead => Ok(m.clone()),
                        _ => Err(TxnError::InvalidProducerIdMapping),
                    };
                    (id, meta)
                })
                .collect();
            TxnAnswer::Described(rows)
        }
        TxnCall::List => TxnAnswer::Listed(
            s.coordinator
                .borrow()
                .all()
                .into_iter()
                .filter(|(_, m)| m.state != TxnState::Dead)
                .map(|(id, m)| (id.clone(), m.clone()))
                .collect(),
        ),
    }
}

async fn init_producer_id(
    ctx: &Rc<ShardCtx>,
    s: &Rc<TxnShard>,
    transactional_id: &str,
    timeout_ms: i32,
    expected: Option<(i64, i16)>,
) -> Result<(i64, i16), TxnError> {
    let fresh = if s.coordinator.borrow().needs_producer_id(transactional_id) {
        Some(allocate_producer_id(ctx).await?)
    } else {
        None
    };
    let outcome = s.coordinator.borrow_mut().init_producer_id(
        transactional_id,
        timeout_ms,
        fresh,
        expected,
        now_ms(),
    )?;
    match outcome {
        InitOutcome::Ready(t) => {
            let answer = (t.next.producer_id, t.next.producer_epoch);
            run_transition(ctx, s, t).await?;
            Ok(answer)
        }
        InitOutcome::AbortFirst(t) => {
            tracing::info!(
                transactional_id,
                "fencing the previous producer: aborting its open transaction"
            );
            run_transition(ctx, s, t).await?;
            Err(TxnError::ConcurrentTransactions)
        }
    }
}

/// A producer id from the controller's allocator (an InitProducerId without transactional id
/// answered on the controller shard).
async fn allocate_producer_id(ctx: &Rc<ShardCtx>) -> Result<i64, TxnError> {
    use crate::server::control::{call_controller, ControllerReply, ControllerRequest};
    use kafka_protocol::messages::RequestHeader;
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
    const VERSION: i16 = 4;
    let unavailable = |_| TxnError::CoordinatorNotAvailable;
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::InitProducerId as i16)
        .with_request_api_version(VERSION)
        .with_client_id(Some(StrBytes::from_static_str("shardlog-txn-coordinator")));
    let body = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(-1);
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, ApiKey::InitProducerId.request_header_version(VERSION))
        .map_err(unavailable)?;
    body.encode(&mut buf, VERSION).map_err(unavailable)?;
    let req = ControllerRequest::Admin {
        api: ApiKey::InitProducerId,
        version: VERSION,
        frame: buf.freeze(),
    };
    let ControllerReply::Encoded(frame) = call_controller(ctx, req).await else {
        return Err(TxnError::CoordinatorNotAvailable);
    };
    let mut body = frame.slice(4.min(frame.len())..);
    kafka_protocol::messages::ResponseHeader::decode(
        &mut body,
        ApiKey::InitProducerId.response_header_version(VERSION),
    )
    .map_err(unavailable)?;
    let resp = InitProducerIdResponse::decode(&mut body, VERSION).map_err(unavailable)?;
    if resp.error_code != 0 || resp.producer_id.0 < 0 {
        return Err(TxnError::CoordinatorNotAvailable);
    }
    Ok(resp.producer_id.0)
}

/// Persists a transition, makes it the id's state, and starts what follows it.
async fn run_transition(
    ctx: &Rc<ShardCtx>,
    s: &Rc<TxnShard>,
    t: Transition,
) -> Result<(), TxnError> {
    if let Err(reason) = persist(ctx, &t.transactional_id, Some(&t.next)).await {
        tracing::warn!(transactional_id = %t.transactional_id, "transaction state not persisted: {reason}");
        s.coordinator.borrow_mut().abandon(&t);
        return Err(TxnError::CoordinatorNotAvailable);
    }
    s.coordinator.borrow_mut().apply(&t);
    publish_open(s);
    if let Then::WriteMarkers { commit } = t.then {
        // Crash tests: the Prepare state is on the ISR, no marker written, no answer sent;
        // the next coordinator must finish the transaction.
        crate::crashpoint::hit("txn.prepare_persisted");
        start_markers(ctx, s, t.transactional_id, commit);
    }
    Ok(())
}

/// Starts the task writing an id's markers (unless one runs).
fn start_markers(ctx: &Rc<ShardCtx>, s: &Rc<TxnShard>, transactional_id: String, commit: bool) {
    if !s.writing.borrow_mut().insert(transactional_id.clone()) {
        return;
    }
    let (ctx2, s2) = (ctx.clone(), s.clone());
    drop(ctx.spawn(async move {
        write_markers(&ctx2, &s2, &transactional_id, commit).await;
        s2.writing.borrow_mut().remove(&transactional_id);
    }));
}

/// Writes the COMMIT/ABORT marker to every partition of the transaction, retrying until
/// each is durable (a partition that no longer exists is skipped), then completes the
/// transaction. Partitions this broker leads get a `PartitionOp::WriteMarker` on their owner
/// shard; those led by another broker get WriteTxnMarkers over a client connection to its
/// advertised listener. A round that fails (NOT_LEADER_OR_FOLLOWER while leadership moves,
/// a broker down) is retried with the image of the next round, which names the new leaders.
async fn write_markers(ctx: &Rc<ShardCtx>, s: &Rc<TxnShard>, transactional_id: &str, commit: bool) {
    loop {
        if ctx.is_shutting_down() {
            return;
        }
        let Some(meta) = s.coordinator.borrow().get(transactional_id).cloned() else { return };
        let expected = if commit { TxnState::PrepareCommit } else { TxnState::PrepareAbort };
        if meta.state != expected {
            return;
        }
        let Some(coordinator_epoch) = coordinator_epoch(ctx, s, transactional_id) else { return };
        let marker = Marker {
            producer_id: meta.producer_id,
            producer_epoch: meta.producer_epoch,
            commit,
            coordinator_epoch,
        };
        let partitions: Vec<(String, i32)> = meta.partitions.iter().cloned().collect();
        if write_round(ctx, transactional_id, &marker, &partitions).await {
            let Some(t) = s.coordinator.borrow_mut().complete(transactional_id, now_ms()) else {
                return;
            };
            match persist(ctx, transactional_id, Some(&t.next)).await {
                Ok(()) => {
                    s.coordinator.borrow_mut().apply(&t);
                    publish_open(s);
                    return;
                }
                Err(reason) => {
                    tracing::warn!(transactional_id, "completion not persisted: {reason}");
                    s.coordinator.borrow_mut().abandon(&t);
                }
            }
        }
        crate::shard::sleep(Duration::from_millis(TXN_MARKER_RETRY_MS)).await;
    }
}

/// One transaction's marker.
struct Marker {
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
}

/// Where a partition's marker goes this round.
enum Target {
    /// This broker leads it: its owner shard.
    Local(crate::types::ShardId),
    /// Another broker leads it: its advertised address.
    Remote(String),
}

/// A target with the partitions it gets markers for this round.
type TargetPartitions = (Target, Vec<(String, i32)>);

/// One round of markers to every partition; whether all are durable (or gone).
async fn write_round(
    ctx: &Rc<ShardCtx>,
    transactional_id: &str,
    m: &Marker,
    partitions: &[(String, i32)],
) -> bool {
    let image = ctx.image();
    let mut targets: BTreeMap<(u8, String), TargetPartitions> = BTreeMap::new();
    let mut ok = true;
    for (topic, partition) in partitions {
        let Some(pi) = image.partition(topic, *partition) else {
            tracing::info!(
                transactional_id,
                topic,
                partition,
                "no marker for a partition that is gone"
            );
            continue;
        };
        let target = if pi.leader == image.node_id {
            Target::Local(pi.owner_shard)
        } else if let Some((_, host, port)) =
            crate::server::group::find_coordinator::leader_endpoint(ctx, &image, pi.leader.0, None)
        {
            Target::Remote(format!("{host}:{port}"))
        } else {
            // No live leader yet: the next round looks again.
            ok = false;
            continue;
        };
        let key = match &target {
            Target::Local(shard) => (0, shard.0.to_string()),
            Target::Remote(addr) => (1, addr.clone()),
        };
        targets.entry(key).or_insert((target, Vec::new())).1.push((topic.clone(), *partition));
    }
    let mut rounds = Vec::new();
    for (_, (target, list)) in targets {
        rounds.push(send_markers(ctx, transactional_id, m, target, list));
    }
    for done in futures::future::join_all(rounds).await {
        ok &= done;
    }
    ok
}

/// Sends one target's markers; whether all of them are durable (or their partition gone).
async fn send_markers(
    ctx: &Rc<ShardCtx>,
    transactional_id: &str,
    m: &Marker,
    target: Target,
    partitions: Vec<(String, i32)>,
) -> bool {
    use kafka_protocol::error::ResponseError;
    let codes: Vec<((String, i32), i16)> = match target {
        Target::Local(shard) => {
            let ops = partitions
                .iter()
                .map(|(topic, partition)| PartitionOp::WriteMarker {
                    topic: topic.clone(),
                    partition: *partition,
                    producer_id: m.producer_id,
                    producer_epoch: m.producer_epoch,
                    commit: m.commit,
                    coordinator_epoch: m.coordinator_epoch,
                })
                .collect();
            match ctx.call(shard, ShardRequest::Partitions(ops)).await.await {
                Ok(ShardReply::Partitions(results)) => partitions
                    .into_iter()
                    .zip(results)
                    .map(|(tp, r)| match r {
                        PartitionResult::WriteMarker(Ok(_)) => (tp, 0),
                        PartitionResult::WriteMarker(Err((code, _))) => (tp, code.code()),
                        _ => (tp, ResponseError::UnknownServerError.code()),
                    })
                    .collect(),
                _ => return false,
            }
        }
        Target::Remote(addr) => {
            let remote = super::broker_client::RemoteMarker {
                producer_id: m.producer_id,
                producer_epoch: m.producer_epoch,
                commit: m.commit,
                coordinator_epoch: m.coordinator_epoch,
                partitions: &partitions,
            };
            let security = &ctx.config.inter_broker_client;
            match super::broker_client::write_markers(&addr, security, &remote).await {
                Ok(codes) => codes,
                Err(reason) => {
                    tracing::warn!(transactional_id, %addr, "markers not sent: {reason}");
                    return false;
                }
            }
        }
    };
    let mut ok = true;
    for ((topic, partition), code) in codes {
        if code == 0 {
            continue;
        }
        // A partition deleted meanwhile: nothing to mark.
        if ctx.image().partition(&topic, partition).is_none() {
            continue;
        }
        tracing::debug!(transactional_id, topic, partition, code, "marker not written; retrying");
        ok = false;
    }
    ok
}

/// The `__transaction_state` partition of an id if this shard serves it as the leader, or
/// why it cannot be served here.
fn owned_partition(
    ctx: &ShardCtx,
    transactional_id: &str,
) -> Result<(i32, Rc<OwnedPartition>), TxnError> {
    let p = txn_partition_for(ctx, transactional_id).ok_or(TxnError::CoordinatorNotAvailable)?;
    leading_partition(ctx, TXN_TOPIC, p).map(|owned| (p, owned)).map_err(|e| match e {
        Leadership::NoLeader => TxnError::CoordinatorNotAvailable,
        Leadership::Elsewhere => TxnError::NotCoordinator,
        Leadership::Opening => TxnError::CoordinatorLoadInProgress,
    })
}

/// The coordinator epoch of an id's partition: the leader epoch it was loaded at (what
/// markers carry, so partitions refuse a deposed coordinator's markers).
fn coordinator_epoch(ctx: &ShardCtx, s: &TxnShard, transactional_id: &str) -> Option<i32> {
    let p = txn_partition_for(ctx, transactional_id)?;
    s.loaded.borrow().get(&p).map(|e| e.0)
}

/// Appends an id's record (`None`: a tombstone) and waits until the ISR holds it.
async fn persist(
    ctx: &Rc<ShardCtx>,
    transactional_id: &str,
    meta: Option<&crate::txn::TxnMeta>,
) -> Result<(), String> {
    let (_, owned) = owned_partition(ctx, transactional_id).map_err(|e| e.to_string())?;
    let now = now_ms();
    let record = KafkaRecord {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: 0,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: now,
        key: Some(Bytes::from(encode_key(transactional_id))),
        value: meta.map(|m| Bytes::from(encode_value(m))),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, std::iter::once(&record), &options)
        .map_err(|e| e.to_string())?;
    append_acks_all(&owned, buf.freeze(), false, now)
        .await
        .map_err(|e: WriteError| e.to_string())?;
    Ok(())
}

async fn load_lock(s: &TxnShard) -> Result<futures::lock::MutexGuard<'_, ()>, TxnError> {
    let wait = Duration::from_millis(crate::constants::GROUP_LOAD_WAIT_MS_MAX);
    crate::shard::with_timeout(wait, s.load_lock.lock())
        .await
        .ok_or(TxnError::CoordinatorLoadInProgress)
}

async fn ensure_loaded(
    ctx: &Rc<ShardCtx>,
    s: &Rc<TxnShard>,
    transactional_id: &str,
) -> Result<(), TxnError> {
    let (p, owned) = owned_partition(ctx, transactional_id)?;
    load_partition(ctx, s, p, &owned).await
}

async fn load_partition(
    ctx: &Rc<ShardCtx>,
    s: &Rc<TxnShard>,
    p: i32,
    owned: &Rc<OwnedPartition>,
) -> Result<(), TxnError> {
    let epoch = owned.leader_epoch.get();
    if s.loaded.borrow().get(&p) == Some(&epoch) {
        return Ok(());
    }
    let _guard = load_lock(s).await?;
    if s.loaded.borrow().get(&p) == Some(&epoch) {
        return Ok(());
    }
    if s.loaded.borrow().contains_key(&p) {
        unload(ctx, s, p);
    }
    // Bounded and complete: replay up to the high watermark once it covers the whole log.
    if owned.high_watermark() < owned.log.log_end_offset() {
        return Err(TxnError::CoordinatorLoadInProgress);
    }
    replay(s, owned).await.map_err(|reason| {
        tracing::error!(partition = p, "replay of {TXN_TOPIC} failed: {reason}");
        TxnError::CoordinatorNotAvailable
    })?;
    s.loaded.borrow_mut().insert(p, epoch);
    if !owned.is_leader.get() || owned.leader_epoch.get() != epoch {
        unload(ctx, s, p);
        return Err(TxnError::NotCoordinator);
    }
    publish_open(s);
    tracing::info!(partition = p, coordinator_epoch = epoch.0, "transaction coordinator loaded");
    // Transactions a crash or a failover left between prepare and complete: finish them
    // (Kafka's coordinator does the same when it loads a partition).
    let n = txn_partitions(ctx).unwrap_or(1);
    let incomplete = s.coordinator.borrow().incomplete();
    for (id, commit) in incomplete.into_iter().filter(|(id, _)| partition_for(id, n) == p) {
        tracing::info!(transactional_id = %id, commit, "completing a transaction found prepared at load");
        start_markers(ctx, s, id, commit);
    }
    Ok(())
}

/// Forgets partition `p`'s ids (leadership moved): their marker tasks stop at their next
/// round (the id is gone), and clients get NOT_COORDINATOR here.
fn unload(ctx: &ShardCtx, s: &TxnShard, p: i32) {
    if s.loaded.borrow_mut().remove(&p).is_none() {
        return;
    }
    let n = txn_partitions(ctx).unwrap_or(1);
    s.coordinator.borrow_mut().unload(p, |id| partition_for(id, n));
    publish_open(s);
    tracing::info!(partition = p, "transaction coordinator unloaded: leadership moved");
}

async fn load_all_owned(ctx: &Rc<ShardCtx>, s: &Rc<TxnShard>) -> Result<(), TxnError> {
    let Some(n) = txn_partitions(ctx) else { return Ok(()) };
    let mut first_error = Ok(());
    for p in 0..n {
        let Ok(owned) = leading_partition(ctx, TXN_TOPIC, p) else { continue };
        if let Err(e) = load_partition(ctx, s, p, &owned).await {
            first_error = first_error.and(Err(e));
        }
    }
    first_error
}

/// Follows leadership (each timer tick): unloads what this broker no longer leads at the
/// epoch it was loaded at, loads what it now leads.
async fn reconcile(ctx: &Rc<ShardCtx>, s: &Rc<TxnShard>) {
    let loaded: Vec<(i32, Epoch)> = s.loaded.borrow().iter().map(|(p, e)| (*p, *e)).collect();
    for (p, epoch) in loaded {
        let still = leading_partition(ctx, TXN_TOPIC, p)
            .is_ok_and(|owned| owned.leader_epoch.get() == epoch);
        if !still {
            unload(ctx, s, p);
        }
    }
    if let Err(e) = load_all_owned(ctx, s).await {
        tracing::debug!("transaction state not loaded yet: {e}");
    }
}

/// Rebuilds the ids of one `__transaction_state` partition (the latest record per id).
async fn replay(s: &TxnShard, owned: &OwnedPartition) -> Result<(), String> {
    let log = &owned.log;
    let end = owned.high_watermark();
    let mut offset = log.log_start_offset();
    let mut count = 0usize;
    while offset < end {
        let mut bytes =
            log.read(offset, REPLAY_READ_BYTES, end).await.map_err(|e| e.to_string())?;
        if bytes.is_empty() {
            break;
        }
        let mut next = offset;
        while bytes.len() >= 27 {
            let base = i64::from_be_bytes(bytes[0..8].try_into().map_err(|_| "short batch")?);
            let len = i32::from_be_bytes(bytes[8..12].try_into().map_err(|_| "short batch")?);
            let size = 12 + usize::try_from(len).map_err(|_| "negative batch length")?;
            if size > bytes.len() {
                break;
            }
            let mut batch = bytes.split_to(size);
            let last_delta =
                i32::from_be_bytes(batch[23..27].try_into().map_err(|_| "short batch")?);
            next = Offset(base + i64::from(last_delta) + 1);
            let set = RecordBatchDecoder::decode(&mut batch).map_err(|e| e.to_string())?;
            for r in set.records {
                let Some(key) = r.key else { continue };
                match decode(&key, r.value.as_deref()) {
                    Ok(record) => {
                        s.coordinator.borrow_mut().replay(record);
                        count += 1;
                    }
                    Err(err) => tracing::warn!("skipping a {TXN_TOPIC} record: {err}"),
                }
            }
        }
        if next <= offset {
            break;
        }
        offset = next;
    }
    tracing::info!(partition = %owned.tp, records = count, "replayed transaction records");
    Ok(())
}

/// Publishes the number of open transactions this shard coordinates.
fn publish_open(s: &TxnShard) {
    let open = s
        .coordinator
        .borrow()
        .all()
        .iter()
        .filter(|(_, m)| {
            matches!(m.state, TxnState::Ongoing | TxnState::PrepareCommit | TxnState::PrepareAbort)
        })
        .count() as i64;
    crate::metrics::open_transactions(open - s.open_published.replace(open));
}

/// Aborts timed-out transactions every `transaction.abort.timed.out.transaction.cleanup
/// .interval.ms`, removes idle ids every `transaction.remove.expired.transaction.cleanup
/// .interval.ms`, and retries completions that failed.
async fn timer_loop(ctx: Rc<ShardCtx>, s: Rc<TxnShard>) {
    if let Err(e) = load_all_owned(&ctx, &s).await {
        tracing::warn!("loading transaction state failed: {e}");
    }
    let c = ctx.config.txn.clone();
    let mut next_abort = now_ms() + c.abort_check_interval_ms;
    let mut next_expiry = now_ms() + c.expiry_check_interval_ms;
    while !ctx.is_shutting_down() {
        crate::shard::sleep(Duration::from_millis(TXN_TIMER_TICK_MS)).await;
        reconcile(&ctx, &s).await;
        let now = now_ms();
        if now >= next_abort {
            next_abort = now + c.abort_check_interval_ms;
            if let Err(e) = load_all_owned(&ctx, &s).await {
                tracing::debug!("transaction state not loaded yet: {e}");
            }
            let due = s.coordinator.borrow_mut().timed_out(now);
            for t in due {
                tracing::info!(transactional_id = %t.transactional_id, "aborting a transaction past its timeout");
                let (ctx2, s2) = (ctx.clone(), s.clone());
                drop(ctx.spawn(async move {
                    let _ = run_transition(&ctx2, &s2, t).await;
                }));
            }
            let incomplete = s.coordinator.borrow().incomplete();
            for (id, commit) in incomplete {
                start_markers(&ctx, &s, id, commit);
            }
        }
        if now >= next_expiry {
            next_expiry = now + c.expiry_check_interval_ms;
            let gone = s.coordinator.borrow_mut().expired(now, c.id_expiration_ms);
            for id in gone {
                match persist(&ctx, &id, None).await {
                    Ok(()) => s.coordinator.borrow_mut().remove(&id),
                    Err(_) => s.coordinator.borrow_mut().keep(&id),
                }
            }
        }
    }
}
