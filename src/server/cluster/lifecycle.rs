//! A broker's life as the active controller sees it, KRaft's way: register (a new
//! incarnation per process start, fenced until it has caught up with the metadata log),
//! heartbeat every `broker.heartbeat.interval.ms`, and on shutdown a controlled shutdown
//! (Kafka's `BrokerLifecycleManager.beginControlledShutdown`): heartbeats with
//! `want_shut_down` until the controller answers `should_shut_down` (it moved this broker's
//! leaderships to other ISR members and took it out of the ISRs), while the broker keeps
//! serving, holding the shards' shutdown ([`ShutdownHold`]); bounded by
//! `controlled.shutdown.timeout.ms`, after which it logs and stops anyway. On the active
//! controller, [`expiry_loop`] fences brokers silent for `broker.session.timeout.ms`.
//!
//! Runs on the controller shard. Every call is bounded; a failed one is retried after a
//! pause, and a STALE_BROKER_EPOCH answer (the controller no longer knows this incarnation)
//! starts a new registration.

use std::rc::Rc;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;

use super::rpc::{Call, Reply};
use super::{now_ms, ClusterNode};
use crate::controller::records::BrokerEndpoint;
use crate::controller::{BrokerEpoch, BrokerHeartbeat, BrokerRegistration};
use crate::shard::runtime::{shutdown_requested, ShutdownHold};
use crate::shard::ShardCtx;

/// Pause after a failed registration or heartbeat.
const RETRY_PAUSE_MS: u64 = 500;
/// Heartbeat interval while fenced (catching up): short, so unfencing follows quickly.
const FENCED_HEARTBEAT_MS: u64 = 100;
/// Bound on one registration or heartbeat round trip.
const CALL_LIMIT_MS: u64 = 5_000;
/// How often the active controller looks for expired broker sessions.
const EXPIRY_CHECK_MS: u64 = 500;
/// Pause between controlled-shutdown heartbeats the controller did not approve yet.
const SHUTDOWN_RETRY_MS: u64 = 100;
/// Step of the pauses between calls: a shutdown request is noticed within it.
const PAUSE_STEP_MS: u64 = 50;

fn heartbeat_interval_ms(ctx: &ShardCtx) -> u64 {
    u64::try_from(ctx.image().broker_defaults.long("broker.heartbeat.interval.ms"))
        .unwrap_or(2000)
        .max(10)
}

/// Whether this broker should stop heartbeating: a shutdown was requested (the shards may
/// still be serving, held by this task) or has begun.
fn stopping(ctx: &ShardCtx) -> bool {
    shutdown_requested() || ctx.is_shutting_down()
}

/// Sleeps `ms`, or less once a shutdown is requested.
async fn pause(ctx: &ShardCtx, ms: u64) {
    let until = Instant::now() + Duration::from_millis(ms);
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || stopping(ctx) {
            return;
        }
        crate::shard::sleep(left.min(Duration::from_millis(PAUSE_STEP_MS))).await;
    }
}

/// Registers this broker, heartbeats until shutdown, then runs the controlled shutdown.
pub async fn run(node: Rc<ClusterNode>, ctx: Rc<ShardCtx>) {
    // A broker of a multi-node cluster keeps serving after SIGTERM until its leaderships
    // have moved (or the controlled-shutdown deadline passed): the hold delays the shards'
    // shutdown until this task drops it.
    let hold = (!node.voters.is_empty()).then(ShutdownHold::new);
    let incarnation_id = node.incarnation_id;
    // Every listener, the inter-broker one first: other brokers dial the first endpoint.
    let listeners = &ctx.config.listeners;
    let inter = std::iter::once(&listeners.all[listeners.inter_broker]);
    let others = listeners.all.iter().enumerate().filter(|(i, _)| *i != listeners.inter_broker);
    let endpoints = inter
        .chain(others.map(|(_, l)| l))
        .map(|l| BrokerEndpoint {
            listener: l.name.clone(),
            host: l.advertised_host.clone(),
            port: l.advertised_port,
            security_protocol: l.protocol.code(),
        })
        .collect();
    let registration =
        BrokerRegistration { node: node.node_id, incarnation_id, endpoints, rack: None };
    let mut epoch: Option<BrokerEpoch> = None;
    // Asking to be fenced for lack of disk space (`disk_fence`).
    let mut disk_fence = false;
    while !stopping(&ctx) {
        let deadline = Instant::now() + Duration::from_millis(CALL_LIMIT_MS);
        let pause_ms = match epoch {
            None => {
                match node.to_controller(&ctx, Call::Register(registration.clone()), deadline).await
                {
                    Reply::Registered { epoch: e } => {
                        tracing::info!(broker_epoch = e.0, "registered with the active controller");
                        epoch = Some(e);
                        node.registration.set(Some((e.0, true)));
                        0
                    }
                    other => {
                        tracing::debug!("broker registration: {other:?}");
                        RETRY_PAUSE_MS
                    }
                }
            }
            Some(e) => {
                let others_live =
                    ctx.image().brokers.iter().any(|(id, b)| *id != node.node_id && !b.fenced);
                let reserved = ctx.config.log_dir_reserved_bytes;
                disk_fence = super::disk_fence::check(
                    &ctx.config.data_dir,
                    reserved,
                    disk_fence,
                    others_live,
                );
                let hb = BrokerHeartbeat {
                    node: node.node_id,
                    epoch: e,
                    metadata_offset: node.applied_index(),
                    want_fence: disk_fence,
                    want_shutdown: false,
                };
                match node.to_controller(&ctx, Call::Heartbeat(hb), deadline).await {
                    Reply::Heartbeat { is_fenced, .. } => {
                        let was = node.registration.get();
                        if was.map(|(_, f)| f) != Some(is_fenced) {
                            tracing::info!(fenced = is_fenced, "broker state changed");
                        }
                        node.registration.set(Some((e.0, is_fenced)));
                        if is_fenced {
                            FENCED_HEARTBEAT_MS
                        } else {
                            heartbeat_interval_ms(&ctx)
                        }
                    }
                    Reply::Error { code, message }
                        if code == ResponseError::StaleBrokerEpoch.code() =>
                    {
                        tracing::warn!("the controller no longer knows this broker epoch ({message}); registering again");
                        epoch = None;
                        node.registration.set(None);
                        0
                    }
                    other => {
                        tracing::debug!("broker heartbeat: {other:?}");
                        RETRY_PAUSE_MS
                    }
                }
            }
        };
        if pause_ms > 0 {
            pause(&ctx, pause_ms).await;
        }
    }
    let defaults = ctx.image().broker_defaults.clone();
    let enabled = defaults.current("controlled.shutdown.enable").as_deref() != Some("false");
    let timeout_ms = u64::try_from(defaults.long("controlled.shutdown.timeout.ms")).unwrap_or(0);
    // Alone, nobody could take the leaderships: stopping at once is as good (they come back
    // with this broker).
    let others_live = ctx.image().brokers.iter().any(|(id, b)| *id != node.node_id && !b.fenced);
    if let (Some(e), true, true) = (epoch, others_live, enabled) {
        controlled_shutdown(&node, &ctx, e, timeout_ms).await;
    }
    drop(hold);
}

/// Heartbeats with `want_shut_down` until the controller answers `should_shut_down`, or
/// until `timeout_ms` passed (then logs it: the session expiry moves the leaderships).
async fn controlled_shutdown(
    node: &Rc<ClusterNode>,
    ctx: &Rc<ShardCtx>,
    epoch: BrokerEpoch,
    timeout_ms: u64,
) {
    let started = Instant::now();
    let deadline = started + Duration::from_millis(timeout_ms);
    tracing::info!(timeout_ms, "controlled shutdown: asking the controller to move leaderships");
    loop {
        let now = Instant::now();
        if now >= deadline {
            tracing::warn!(
                timeout_ms,
                "controlled shutdown not approved in time (controlled.shutdown.timeout.ms); \
                 stopping anyway"
            );
            return;
        }
        let hb = BrokerHeartbeat {
            node: node.node_id,
            epoch,
            metadata_offset: node.applied_index(),
            want_fence: false,
            want_shutdown: true,
        };
        let call_deadline = deadline.min(now + Duration::from_millis(CALL_LIMIT_MS));
        let wait_ms = match node.to_controller(ctx, Call::Heartbeat(hb), call_deadline).await {
            Reply::Heartbeat { should_shutdown: true, .. } => {
                let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                tracing::info!(elapsed_ms, "controlled shutdown approved: leaderships moved");
                node.registration.set(Some((epoch.0, true)));
                return;
            }
            Reply::Heartbeat { .. } => SHUTDOWN_RETRY_MS,
            Reply::Error { code, message } if code == ResponseError::NotController.code() => {
                // No quorum leader known for a whole call: no controller will approve soon
                // (the last voters stopping); waiting out the deadline would only delay.
                tracing::warn!("controlled shutdown: no active controller ({message}); stopping");
                return;
            }
            Reply::Error { code, message } if code == ResponseError::StaleBrokerEpoch.code() => {
                tracing::info!(
                    "controlled shutdown: the controller no longer knows this broker ({message})"
                );
                return;
            }
            other => {
                tracing::debug!("controlled-shutdown heartbeat: {other:?}");
                RETRY_PAUSE_MS
            }
        };
        // Not `pause`: the shutdown request that started this must not cut the wait short.
        crate::shard::sleep(Duration::from_millis(wait_ms)).await;
    }
}

/// On the active controller: fences brokers whose session expired.
pub async fn expiry_loop(node: Rc<ClusterNode>, ctx: Rc<ShardCtx>) {
    while !ctx.is_shutting_down() {
        crate::shard::sleep(Duration::from_millis(EXPIRY_CHECK_MS)).await;
        if !node.is_ready_leader() {
            continue;
        }
        let now = now_ms();
        if let Err(err) = node.run_op(&ctx, |w, hb, extra| extra.extend(hb.expire(w, now))).await {
            tracing::debug!("broker session check: {err:?}");
        }
    }
}
