//! Transactions (issue 17): the transaction coordinator's pure state machine
//! ([`coordinator`]), its records in `__transaction_state` ([`records`], Kafka's
//! `TransactionLogKey`/`TransactionLogValue` schemas). The partition-side hooks that
//! markers and read_committed fetches use sit with the partition
//! (`partition::transactions`).
//!
//! A transactional id lives on the shard owning its `__transaction_state` partition
//! (`abs(javaHash(transactional.id)) % transaction.state.log.num.partitions`, as Kafka), like
//! a group on its `__consumer_offsets` partition; `server::txn::driver` runs the
//! coordinator there, persists its transitions, writes the markers (to each partition's owner
//! shard over the mesh) and replays the partition when the shard first serves it. The
//! partitions' own transaction state (open transactions, last stable offset, aborted
//! transactions) is in `storage::producer_state`.

pub mod coordinator;
pub mod records;

pub use coordinator::{Coordinator, TxnError, TxnMeta, TxnState};

/// Kafka's internal topic holding the transaction coordinator's state.
pub const TXN_TOPIC: &str = "__transaction_state";

/// The transaction coordinator's settings (Kafka's `transaction.*` broker configs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnConfig {
    /// Partitions `__transaction_state` is created with.
    pub state_log_num_partitions: i32,
    pub state_log_segment_bytes: i32,
    /// `transaction.state.log.replication.factor`, capped by the live brokers at creation.
    pub state_log_replication_factor: i32,
    /// `transaction.state.log.min.isr`: the topic's `min.insync.replicas`.
    pub state_log_min_isr: i32,
    /// `transaction.partition.verification.enable` (KIP-890 part 1).
    pub partition_verification_enable: bool,
    /// `transaction.max.timeout.ms`: InitProducerId asking more gets INVALID_TRANSACTION_TIMEOUT.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: an idle completed transactional id is forgotten.
    pub id_expiration_ms: i64,
    /// How often expired transactions are looked for and aborted.
    pub abort_check_interval_ms: i64,
    /// How often idle transactional ids are looked for and removed.
    pub expiry_check_interval_ms: i64,
}

impl Default for TxnConfig {
    fn default() -> Self {
        TxnConfig {
            state_log_num_partitions: 50,
            state_log_segment_bytes: 100 * 1024 * 1024,
            state_log_replication_factor: 3,
            state_log_min_isr: 2,
            partition_verification_enable: true,
            max_timeout_ms: 900_000,
            id_expiration_ms: 7 * 24 * 3600 * 1000,
            abort_check_interval_ms: 10_000,
            expiry_check_interval_ms: 3_600_000,
        }
    }
}
