//! A broker's life as the active controller sees it, KRaft's way: register (a new
//! incarnation per process start, fenced until it has caught up with the metadata log),
//! heartbeat every `broker.heartbeat.interval.ms`, and on shutdown ask to be fenced so its
//! leaderships move first. On the active controller, [`expiry_loop`] fences brokers silent
//! for `broker.session.timeout.ms`.
//!
//! Runs on the controller shard. Every call is bounded; a failed one is retried after a
//! pause, and a STALE_BROKER_EPOCH answer (the controller no longer knows this incarnation)
//! starts a new registration.

use std::rc::Rc;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::rpc::{Call, Reply};
use super::{now_ms, ClusterNode};
use crate::controller::records::BrokerEndpoint;
use crate::controller::{BrokerEpoch, BrokerHeartbeat, BrokerRegistration};
use crate::shard::ShardCtx;

/// Pause after a failed registration or heartbeat.
const RETRY_PAUSE_MS: u64 = 500;
/// Heartbeat interval while fenced (catching up): short, so unfencing follows quickly.
const FENCED_HEARTBEAT_MS: u64 = 100;
/// Bound on one registration or heartbeat round trip.
const CALL_LIMIT_MS: u64 = 5_000;
/// How often the active controller looks for expired broker sessions.
const EXPIRY_CHECK_MS: u64 = 500;
/// Bound on the shutdown heartbeat.
const SHUTDOWN_HEARTBEAT_MS: u64 = 2_000;

fn heartbeat_interval_ms(ctx: &ShardCtx) -> u64 {
    u64::try_from(ctx.image().broker_defaults.long("broker.heartbeat.interval.ms"))
        .unwrap_or(2000)
        .max(10)
}

/// Registers this broker and heartbeats until shutdown.
pub async fn run(node: Rc<ClusterNode>, ctx: Rc<ShardCtx>) {
    let incarnation_id = Uuid::new_v4();
    let endpoints = vec![BrokerEndpoint {
        listener: "PLAINTEXT".into(),
        host: ctx.config.advertised_host.clone(),
        port: ctx.config.advertised_port,
        security_protocol: 0,
    }];
    let registration =
        BrokerRegistration { node: node.node_id, incarnation_id, endpoints, rack: None };
    let mut epoch: Option<BrokerEpoch> = None;
    while !ctx.is_shutting_down() {
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
                let hb = BrokerHeartbeat {
                    node: node.node_id,
                    epoch: e,
                    metadata_offset: node.applied_index(),
                    want_fence: false,
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
            let seen = ctx.shutdown.version();
            crate::shard::with_timeout(
                Duration::from_millis(pause_ms),
                ctx.shutdown.changed_since(seen),
            )
            .await;
        }
    }
    // Controlled shutdown: fenced first, so the controller moves leaderships away now
    // rather than after a session timeout — when another live broker can take them.
    let others_live = ctx.image().brokers.iter().any(|(id, b)| *id != node.node_id && !b.fenced);
    if let (Some(e), true) = (epoch, others_live) {
        let hb = BrokerHeartbeat {
            node: node.node_id,
            epoch: e,
            metadata_offset: node.applied_index(),
            want_fence: false,
            want_shutdown: true,
        };
        let deadline = Instant::now() + Duration::from_millis(SHUTDOWN_HEARTBEAT_MS);
        let reply = node.to_controller(&ctx, Call::Heartbeat(hb), deadline).await;
        tracing::debug!("shutdown heartbeat: {reply:?}");
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
