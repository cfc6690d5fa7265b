//! The broker on one shard as one value: [`ShardBroker`] holds the Kafka server's per-shard
//! state that used to hide in `thread_local!`s, so what a shard holds is visible in one
//! struct and goes away with it.
//!
//! Lives on every shard, one per shard, in the runtime's type-erased application slot
//! (`ShardCtx::app`: the runtime names no application type); [`of`] creates it on first use
//! (the controller shard's start-up runs before any other server code on that shard; on
//! the other shards the first image or cross-shard request does), with an empty partition
//! table that the images applied then fill. Never shared across threads. Invariants: each
//! coordinator and the cluster node are set at most once (`OnceCell`); a shard-move gate
//! exists only while its partition moves.
//!
//! Issue 33 moves state here step by step. Held today: the partition table (the logs this
//! shard owns: `shard` sits below `partition` and so cannot hold it; the partition layer's
//! functions take it as a parameter from the server), the cluster node (controller shard),
//! the group and transaction coordinators, the internal topics' readiness, whether the ISR
//! loop runs, the shard-move lock and gates, this shard's connection and disk limits and
//! client-quota meters. Still elsewhere: the transaction marker connections
//! (`server::txn::broker_client`), the replication throttle.

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use super::cluster::ClusterNode;
use super::group::driver::GroupShard;
use super::shard_move::Gate;
use super::txn::driver::TxnShard;
use crate::partition::PartitionTable;
use crate::quota::ShardQuotas;
use crate::shard::ShardCtx;
use crate::types::TopicPartition;

/// The Kafka server's state on one shard (see the module docs).
pub struct ShardBroker {
    /// The partitions this shard owns (`partition::table`), kept in step with the image by
    /// `server::control`; checkpointed and closed by `server::stop_shard` once drained.
    pub(crate) partitions: PartitionTable,
    /// This node's part of the cluster: the controller shard only, set at start-up.
    pub(crate) cluster: OnceCell<Rc<ClusterNode>>,
    /// The group coordinator of this shard (`group::driver`), started on first need.
    pub(crate) groups: OnceCell<Rc<GroupShard>>,
    /// The transaction coordinator of this shard (`txn::driver`), started with the shard.
    pub(crate) txns: OnceCell<Rc<TxnShard>>,
    /// `__consumer_offsets` exists and every shard opened it (set once; never deleted).
    pub(crate) offsets_topic_ready: Cell<bool>,
    /// `__transaction_state` exists and every shard opened it.
    pub(crate) txn_topic_ready: Cell<bool>,
    /// This shard's ISR loop runs (`server::isr`).
    pub(crate) isr_loop_running: Cell<bool>,
    /// Controller shard: a shard move is under way (one at a time).
    pub(crate) shard_move_running: Cell<bool>,
    /// Partitions moving to or from this shard, and the gate their requests wait at.
    pub(crate) move_gates: RefCell<HashMap<TopicPartition, Rc<Gate>>>,
    /// This shard's connection-creation rate, request-bytes budget and free-space sample.
    pub(crate) limits: super::limits::ShardLimits,
    /// Measured client rates against their quotas (`crate::quota`), created on first use.
    quotas: OnceCell<RefCell<ShardQuotas>>,
    /// This shard's budget of authorization-denial log lines (`server::authz`).
    pub(crate) denial_log: super::authz::DenialLog,
    /// TLS configs rebuilt from dynamic key and trust store settings (KIP-226).
    pub(crate) tls: super::tls_reload::ShardTls,
}

impl ShardBroker {
    /// An empty broker for this shard: no partitions open yet, nothing started.
    fn new(ctx: &ShardCtx) -> Self {
        Self {
            partitions: PartitionTable::new(ctx.config.data_dir.clone(), ctx.config.cache_bytes),
            cluster: OnceCell::new(),
            groups: OnceCell::new(),
            txns: OnceCell::new(),
            offsets_topic_ready: Cell::new(false),
            txn_topic_ready: Cell::new(false),
            isr_loop_running: Cell::new(false),
            shard_move_running: Cell::new(false),
            move_gates: RefCell::new(HashMap::new()),
            limits: super::limits::ShardLimits::default(),
            quotas: OnceCell::new(),
            denial_log: super::authz::DenialLog::default(),
            tls: super::tls_reload::ShardTls::default(),
        }
    }

    /// This shard's client-quota meters (window and share board from the config).
    pub(crate) fn quotas(&self, ctx: &ShardCtx) -> &RefCell<ShardQuotas> {
        self.quotas.get_or_init(|| {
            RefCell::new(ShardQuotas::new(
                ctx.config.quota_window,
                ctx.id.0 as usize,
                crate::quota::ShareBoard::global(ctx.config.shards),
            ))
        })
    }
}

/// This shard's broker value, created on first use.
#[must_use]
pub fn of(ctx: &ShardCtx) -> Rc<ShardBroker> {
    if let Some(b) = ctx.app().and_then(|a| a.downcast::<ShardBroker>().ok()) {
        return b;
    }
    let b = Rc::new(ShardBroker::new(ctx));
    ctx.set_app(b.clone());
    b
}
