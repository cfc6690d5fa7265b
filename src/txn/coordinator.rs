//! The transaction coordinator's state machine (Kafka's `TransactionCoordinator` and
//! `TransactionMetadata`, transaction.version 1): per transactional id its producer id and
//! epoch, timeout, state and the partitions of the open transaction.
//!
//! Pure: requests and a clock in; [`Transition`]s (the next meta to persist in
//! `__transaction_state`, and what follows once it is durable) out. Runs on the shard owning
//! the id's `__transaction_state` partition (`server::txn::driver`).
//!
//! States and transitions (Kafka's):
//! ```text
//! Empty ─AddPartitions→ Ongoing ─EndTxn(commit)→ PrepareCommit ─markers→ CompleteCommit
//!                          │    ─EndTxn(abort)/timeout/fence→ PrepareAbort ─markers→ CompleteAbort
//! Complete* ─AddPartitions→ Ongoing;  Empty/Complete* ─InitProducerId→ Empty (epoch + 1)
//! ```
//! Invariants: at most one transition per id is being persisted (`pending`; a request
//! meeting one gets CONCURRENT_TRANSACTIONS); the in-memory meta changes only once its record
//! is durable ([`Coordinator::apply`]); a bumped epoch fences every older producer instance.

use std::collections::{BTreeSet, HashMap};

use super::records::TxnRecord;

/// Kafka's `TransactionState` with its stored codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnState {
    #[must_use]
    pub fn code(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    #[must_use]
    pub fn from_code(code: i8) -> Option<TxnState> {
        Some(match code {
            0 => TxnState::Empty,
            1 => TxnState::Ongoing,
            2 => TxnState::PrepareCommit,
            3 => TxnState::PrepareAbort,
            4 => TxnState::CompleteCommit,
            5 => TxnState::CompleteAbort,
            6 => TxnState::Dead,
            7 => TxnState::PrepareEpochFence,
            _ => return None,
        })
    }

    /// Kafka's names (DescribeTransactions, ListTransactions).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    fn is_complete_or_empty(self) -> bool {
        matches!(self, TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort)
    }
}

/// One transactional id's state (Kafka's `TransactionMetadata`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnMeta {
    pub producer_id: i64,
    /// The producer id before the last change of id (in memory only).
    pub last_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump (in memory only): a retried InitProducerId with it is
    /// not a zombie.
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// Partitions of the open (or completing) transaction, by topic then partition.
    pub partitions: BTreeSet<(String, i32)>,
    pub start_ms: i64,
    pub last_update_ms: i64,
    /// The state of a transition being persisted (in memory only).
    pub pending: Option<TxnState>,
}

/// Why a coordinator request fails (mapped to Kafka codes at the protocol boundary).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    #[error("another transition of this transactional id is in progress")]
    ConcurrentTransactions,
    #[error("a newer producer with the same transactional id fenced this one")]
    ProducerFenced,
    #[error("the producer id does not match the transactional id")]
    InvalidProducerIdMapping,
    #[error("the request is not valid in the transaction's current state")]
    InvalidTxnState,
    #[error("the transaction timeout is larger than transaction.max.timeout.ms")]
    InvalidTransactionTimeout,
    #[error("the coordinator is not available")]
    CoordinatorNotAvailable,
    #[error("the coordinator is loading")]
    CoordinatorLoadInProgress,
    #[error("this shard does not coordinate the transactional id")]
    NotCoordinator,
}

/// What follows a durable transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    /// Answer the request.
    Reply,
    /// Write markers to every partition of the transaction, then [`Coordinator::complete`].
    /// The request that caused it (EndTxn) is answered at once.
    WriteMarkers { commit: bool },
}

/// A transition to persist: the id's next meta, and what follows once it is durable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    pub transactional_id: String,
    pub next: TxnMeta,
    pub then: Then,
}

/// The answer InitProducerId gets once its transition is durable, or at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitOutcome {
    /// Persist, then answer with `next`'s producer id and epoch.
    Ready(Transition),
    /// An open transaction is being aborted first (epoch bumped): persist and write its
    /// markers; the client gets CONCURRENT_TRANSACTIONS and retries.
    AbortFirst(Transition),
}

/// Every transactional id this shard coordinates.
#[derive(Debug, Default)]
pub struct Coordinator {
    txns: HashMap<String, TxnMeta>,
    max_timeout_ms: i32,
}

/// No producer epoch yet (a new id).
const NO_EPOCH: i16 = -1;

impl Coordinator {
    #[must_use]
    pub fn new(max_timeout_ms: i32) -> Self {
        Coordinator { txns: HashMap::new(), max_timeout_ms }
    }

    #[must_use]
    pub fn get(&self, transactional_id: &str) -> Option<&TxnMeta> {
        self.txns.get(transactional_id)
    }

    /// Every id with its meta, sorted by id.
    #[must_use]
    pub fn all(&self) -> Vec<(&String, &TxnMeta)> {
        let mut v: Vec<_> = self.txns.iter().collect();
        v.sort_by(|a, b| a.0.cmp(b.0));
        v
    }

    /// Whether InitProducerId for this id needs a fresh producer id from the controller
    /// (a new id, or an exhausted epoch).
    #[must_use]
    pub fn needs_producer_id(&self, transactional_id: &str) -> bool {
        self.txns.get(transactional_id).is_none_or(|m| m.producer_epoch >= i16::MAX - 1)
    }

    /// InitProducerId with a transactional id. `fresh_pid` is a new producer id when
    /// [`Self::needs_producer_id`] said so; `expected` the (producer id, epoch) a KIP-360
    /// client sends to keep its id.
    pub fn init_producer_id(
        &mut self,
        transactional_id: &str,
        timeout_ms: i32,
        fresh_pid: Option<i64>,
        expected: Option<(i64, i16)>,
        now_ms: i64,
    ) -> Result<InitOutcome, TxnError> {
        if timeout_ms <= 0 || timeout_ms > self.max_timeout_ms {
            return Err(TxnError::InvalidTransactionTimeout);
        }
        let Some(m) = self.txns.get(transactional_id) else {
            let pid = fresh_pid.ok_or(TxnError::CoordinatorNotAvailable)?;
            let next = TxnMeta {
                producer_id: pid,
                last_producer_id: -1,
                producer_epoch: 0,
                last_producer_epoch: NO_EPOCH,
                timeout_ms,
                state: TxnState::Empty,
                partitions: BTreeSet::new(),
                start_ms: -1,
                last_update_ms: now_ms,
                pending: None,
            };
            return Ok(InitOutcome::Ready(self.begin(transactional_id, next, Then::Reply)));
        };
        if m.pending.is_some() {
            return Err(TxnError::ConcurrentTransactions);
        }
        if let Some((pid, epoch)) = expected {
            // KIP-360: the instance holding the current epoch (or retrying the bump that
            // produced it) may keep its id; anyone else is a zombie.
            let known_id = pid == m.producer_id || pid == m.last_producer_id;
            let known_epoch = epoch == m.producer_epoch || epoch == m.last_producer_epoch;
            if !(known_id && known_epoch) {
                return Err(TxnError::ProducerFenced);
            }
        }
        match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
                Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Ongoing => {
                // Fence the old instance: bump the epoch and abort its transaction with it.
                let mut next = m.clone();
                next.last_producer_epoch = m.producer_epoch;
                next.producer_epoch = m.producer_epoch.saturating_add(1);
                next.state = TxnState::PrepareAbort;
                next.last_update_ms = now_ms;
                next.pending = None;
                let t = self.begin(transactional_id, next, Then::WriteMarkers { commit: false });
                Ok(InitOutcome::AbortFirst(t))
            }
            TxnState::Empty
            | TxnState::CompleteCommit
            | TxnState::CompleteAbort
            | TxnState::Dead => {
                let mut next = m.clone();
                if m.producer_epoch >= i16::MAX - 1 {
                    next.last_producer_id = m.producer_id;
                    next.producer_id = fresh_pid.ok_or(TxnError::CoordinatorNotAvailable)?;
                    next.last_producer_epoch = NO_EPOCH;
                    next.producer_epoch = 0;
                } else {
                    next.last_producer_epoch = m.producer_epoch;
                    next.producer_epoch = m.producer_epoch + 1;
                }
                next.timeout_ms = timeout_ms;
                next.state = TxnState::Empty;
                next.partitions.clear();
                next.start_ms = -1;
                next.last_update_ms = now_ms;
                next.pending = None;
                Ok(InitOutcome::Ready(self.begin(transactional_id, next, Then::Reply)))
            }
        }
    }

    /// The checks every request of a producer instance passes (Kafka's order).
    fn check_producer(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
    ) -> Result<&TxnMeta, TxnError> {
        let m = self.txns.get(transactional_id).ok_or(TxnError::InvalidProducerIdMapping)?;
        if m.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if m.producer_epoch != epoch {
            return Err(TxnError::ProducerFenced);
        }
        if m.pending.is_some() {
            return Err(TxnError::ConcurrentTransactions);
        }
        Ok(m)
    }

    /// KIP-890 part 1 (AddPartitionsToTxn v4 `verify_only`): whether `partition` belongs to
    /// the producer's ongoing transaction, so its leader may append a transactional batch.
    /// A pending transition of an ongoing transaction (adding more partitions) still counts.
    pub fn verify(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        partition: &(String, i32),
    ) -> Result<(), TxnError> {
        let m = self.txns.get(transactional_id).ok_or(TxnError::InvalidProducerIdMapping)?;
        if m.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if m.producer_epoch != epoch {
            return Err(TxnError::ProducerFenced);
        }
        if m.state == TxnState::Ongoing && m.partitions.contains(partition) {
            Ok(())
        } else {
            Err(TxnError::InvalidTxnState)
        }
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn, with the group's offsets partition).
    /// `Ok(None)`: every partition is already in the open transaction.
    pub fn add_partitions(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
        now_ms: i64,
    ) -> Result<Option<Transition>, TxnError> {
        let m = self.check_producer(transactional_id, producer_id, epoch)?;
        match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
                return Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Dead => return Err(TxnError::InvalidTxnState),
            _ => {}
        }
        if m.state == TxnState::Ongoing && partitions.iter().all(|p| m.partitions.contains(p)) {
            return Ok(None);
        }
        let mut next = m.clone();
        if m.state != TxnState::Ongoing {
            next.partitions.clear();
            next.start_ms = now_ms;
        }
        next.partitions.extend(partitions.iter().cloned());
        next.state = TxnState::Ongoing;
        next.last_update_ms = now_ms;
        Ok(Some(self.begin(transactional_id, next, Then::Reply)))
    }

    /// EndTxn. `Ok(None)`: the transaction already completed this way (a retry).
    pub fn end_txn(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        now_ms: i64,
    ) -> Result<Option<Transition>, TxnError> {
        let m = self.check_producer(transactional_id, producer_id, epoch)?;
        match (m.state, commit) {
            (TxnState::Ongoing, _) => {
                let mut next = m.clone();
                next.state = if commit { TxnState::PrepareCommit } else { TxnState::PrepareAbort };
                next.last_update_ms = now_ms;
                Ok(Some(self.begin(transactional_id, next, Then::WriteMarkers { commit })))
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(None),
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(TxnError::ConcurrentTransactions)
            }
            (TxnState::PrepareEpochFence, _) => Err(TxnError::ConcurrentTransactions),
            _ => Err(TxnError::InvalidTxnState),
        }
    }

    /// The markers of a Prepare* transaction are all written: complete it.
    pub fn complete(&mut self, transactional_id: &str, now_ms: i64) -> Option<Transition> {
        let m = self.txns.get(transactional_id)?;
        let state = match m.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            _ => return None,
        };
        let mut next = m.clone();
        next.state = state;
        next.partitions.clear();
        next.last_update_ms = now_ms;
        // The completion is the only transition a Prepare* state allows: it may replace a
        // failed attempt's pending mark.
        next.pending = None;
        Some(self.begin(transactional_id, next, Then::Reply))
    }

    /// Open transactions past their timeout at `now_ms`: each is aborted with a bumped
    /// epoch (fencing its producer, as Kafka's `abortTimedOutTransactions`).
    pub fn timed_out(&mut self, now_ms: i64) -> Vec<Transition> {
        let due: Vec<String> = self
            .txns
            .iter()
            .filter(|(_, m)| {
                m.state == TxnState::Ongoing
                    && m.pending.is_none()
                    && m.start_ms.saturating_add(i64::from(m.timeout_ms)) <= now_ms
            })
            .map(|(id, _)| id.clone())
            .collect();
        due.into_iter()
            .filter_map(|id| {
                let m = self.txns.get(&id)?;
                let mut next = m.clone();
                next.last_producer_epoch = m.producer_epoch;
                next.producer_epoch = m.producer_epoch.saturating_add(1);
                next.state = TxnState::PrepareAbort;
                next.last_update_ms = now_ms;
                Some(self.begin(&id, next, Then::WriteMarkers { commit: false }))
            })
            .collect()
    }

    /// Ids idle for `expiration_ms` with no open transaction: to be removed (tombstoned).
    /// Marks them pending.
    pub fn expired(&mut self, now_ms: i64, expiration_ms: i64) -> Vec<String> {
        let due: Vec<String> = self
            .txns
            .iter()
            .filter(|(_, m)| {
                m.state.is_complete_or_empty()
                    && m.pending.is_none()
                    && m.last_update_ms.saturating_add(expiration_ms) <= now_ms
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in &due {
            if let Some(m) = self.txns.get_mut(id) {
                m.pending = Some(TxnState::Dead);
            }
        }
        due
    }

    /// Transactions whose markers must be (re)written: every Prepare* id without a
    /// transition in flight (after a restart, or after a failed marker round).
    #[must_use]
    pub fn incomplete(&self) -> Vec<(String, bool)> {
        let mut v: Vec<(String, bool)> = self
            .txns
            .iter()
            .filter(|(_, m)| m.pending.is_none())
            .filter_map(|(id, m)| match m.state {
                TxnState::PrepareCommit => Some((id.clone(), true)),
                TxnState::PrepareAbort => Some((id.clone(), false)),
                _ => None,
            })
            .collect();
        v.sort();
        v
    }

    fn begin(&mut self, transactional_id: &str, mut next: TxnMeta, then: Then) -> Transition {
        next.pending = None;
        if let Some(m) = self.txns.get_mut(transactional_id) {
            m.pending = Some(next.state);
        } else {
            // A new id: a placeholder holds the pending mark until the record is durable.
            let mut placeholder = next.clone();
            placeholder.state = TxnState::Dead;
            placeholder.pending = Some(TxnState::Empty);
            self.txns.insert(transactional_id.to_string(), placeholder);
        }
        Transition { transactional_id: transactional_id.to_string(), next, then }
    }

    /// The transition's record is durable: it becomes the id's state.
    pub fn apply(&mut self, t: &Transition) {
        self.txns.insert(t.transactional_id.clone(), t.next.clone());
    }

    /// The transition's record could not be written: the id keeps its state.
    pub fn abandon(&mut self, t: &Transition) {
        let placeholder = self
            .txns
            .get(&t.transactional_id)
            .is_some_and(|m| m.state == TxnState::Dead && m.pending == Some(TxnState::Empty));
        if placeholder {
            self.txns.remove(&t.transactional_id);
        } else if let Some(m) = self.txns.get_mut(&t.transactional_id) {
            m.pending = None;
        }
    }

    /// The tombstone of an expired id is durable: forget it.
    pub fn remove(&mut self, transactional_id: &str) {
        self.txns.remove(transactional_id);
    }

    /// The tombstone of an expired id could not be written.
    pub fn keep(&mut self, transactional_id: &str) {
        if let Some(m) = self.txns.get_mut(transactional_id) {
            m.pending = None;
        }
    }

    /// Replays a record of `__transaction_state` (the latest record per id wins).
    pub fn replay(&mut self, record: TxnRecord) {
        match record.meta {
            Some(meta) => {
                let previous = self.txns.get(&record.transactional_id);
                let last_epoch = previous
                    .filter(|p| {
                        p.producer_id == meta.producer_id && p.producer_epoch != meta.producer_epoch
                    })
                    .map_or(NO_EPOCH, |p| p.producer_epoch);
                let meta = TxnMeta { last_producer_epoch: last_epoch, ..meta };
                self.txns.insert(record.transactional_id, meta);
            }
            None => {
                self.txns.remove(&record.transactional_id);
            }
        }
    }

    /// Forgets every id of the `__transaction_state` partition `partition` (it left this
    /// shard) — `partition_of` maps an id to its partition.
    pub fn unload(&mut self, partition: i32, partition_of: impl Fn(&str) -> i32) {
        self.txns.retain(|id, _| partition_of(id) != partition);
    }
}

#[cfg(test)]
mod tests;
