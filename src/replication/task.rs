//! The long-running fetcher of one (local shard, leader broker): a loop that owns its
//! [`Fetcher`] and the followed partitions' logs and runs [`fetch_round_assigned`]s, and the handle the
//! coordinator drives from metadata images (add/remove a partition, a new metadata version,
//! stop). Commands go through a bounded queue drained between rounds, so the loop never holds
//! a borrow across `.await` and a command never races a round in flight.
//!
//! Lives on the shard owning the followed partitions; the coordinator spawns [`run`] there
//! with a link to the leader. Invariants: at most [`FETCHER_COMMANDS_MAX`] queued commands (a
//! full queue refuses, the coordinator retries with the next image); after `stop` the loop
//! ends within one round plus its bounded wait.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

use uuid::Uuid;

use super::driver::{fetch_round_assigned, FollowerLog, LeaderLink};
use super::fetcher::Fetcher;
use crate::constants::FETCHER_COMMANDS_MAX;
use crate::io::FileSystem;
use crate::storage::PartitionLog;
use crate::sync::Notify;
use crate::types::{Epoch, Offset, TopicPartition};

/// A change the coordinator asks for.
pub enum Command<F: FileSystem> {
    /// Follow `tp` (or update its leader epoch); the follower high watermark is kept in
    /// `high_watermark`.
    Add {
        tp: TopicPartition,
        topic_id: Uuid,
        leader_epoch: Epoch,
        in_isr: bool,
        log: Rc<PartitionLog<F>>,
        high_watermark: Rc<Cell<Offset>>,
    },
    /// The image moved this broker into or out of `tp`'s ISR.
    Isr {
        tp: TopicPartition,
        in_isr: bool,
    },
    Remove {
        tp: TopicPartition,
    },
    Metadata {
        version: u64,
    },
}

/// The coordinator's side of a running fetcher.
pub struct FetcherHandle<F: FileSystem> {
    commands: RefCell<VecDeque<Command<F>>>,
    wake: Notify,
    stopped: Cell<bool>,
    /// The partitions the coordinator gives this fetcher now, with their leader epochs.
    /// Set synchronously as each image is applied (commands wait for the next round), so a
    /// round in flight can tell its answers went stale.
    assigned: RefCell<HashMap<TopicPartition, Epoch>>,
}

/// The command queue is full.
#[derive(Debug, thiserror::Error)]
#[error("the fetcher's command queue is full ({FETCHER_COMMANDS_MAX})")]
pub struct QueueFull;

impl<F: FileSystem> Default for FetcherHandle<F> {
    fn default() -> Self {
        FetcherHandle {
            commands: RefCell::default(),
            wake: Notify::new(),
            stopped: Cell::new(false),
            assigned: RefCell::default(),
        }
    }
}

impl<F: FileSystem> FetcherHandle<F> {
    /// Queues a command and wakes the loop. An `Add` or `Remove` changes the assignment at
    /// once: answers to a round in flight are judged by it (`driver::fetch_round_assigned`).
    pub fn send(&self, command: Command<F>) -> Result<(), QueueFull> {
        let mut q = self.commands.borrow_mut();
        if q.len() >= FETCHER_COMMANDS_MAX {
            return Err(QueueFull);
        }
        match &command {
            Command::Add { tp, leader_epoch, .. } => {
                self.assigned.borrow_mut().insert(tp.clone(), *leader_epoch);
            }
            Command::Remove { tp } => {
                self.assigned.borrow_mut().remove(tp);
            }
            Command::Isr { .. } | Command::Metadata { .. } => {}
        }
        q.push_back(command);
        drop(q);
        self.wake.notify_all();
        Ok(())
    }

    /// Asks the loop to end (its partitions stay as they are on disk). Answers in flight
    /// are dropped from now on.
    pub fn stop(&self) {
        self.stopped.set(true);
        self.assigned.borrow_mut().clear();
        self.wake.notify_all();
    }

    /// Whether `tp` is this fetcher's at leader epoch `epoch`.
    #[must_use]
    pub fn is_assigned(&self, tp: &TopicPartition, epoch: Epoch) -> bool {
        !self.stopped.get() && self.assigned.borrow().get(tp) == Some(&epoch)
    }

    #[must_use]
    pub fn is_stopped(&self) -> bool {
        self.stopped.get()
    }
}

/// What a finished loop did, for logs and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    pub rounds: u64,
    pub appended_batches: u64,
    pub truncations: u64,
    pub link_errors: u64,
    /// Answers dropped as stale (see `driver::fetch_round_assigned`).
    pub dropped: u64,
}

/// Runs the fetcher until [`FetcherHandle::stop`]. `now_ms` is the wall clock.
pub async fn run<F: FileSystem, L: LeaderLink>(
    mut fetcher: Fetcher,
    handle: Rc<FetcherHandle<F>>,
    link: L,
    now_ms: impl Fn() -> i64,
) -> RunStats {
    let mut logs: BTreeMap<TopicPartition, FollowerLog<F>> = BTreeMap::new();
    let mut stats = RunStats::default();
    let backoff = Duration::from_millis(u64::try_from(fetcher.config.backoff_ms).unwrap_or(0));
    while !handle.is_stopped() {
        let seen = handle.wake.version();
        apply_commands(&mut fetcher, &mut logs, &handle);
        let assigned = |tp: &TopicPartition, epoch| handle.is_assigned(tp, epoch);
        let round = fetch_round_assigned(&mut fetcher, &logs, &link, now_ms(), assigned).await;
        stats.rounds += 1;
        match round {
            Ok(Some(r)) => {
                stats.appended_batches += r.appended_batches as u64;
                stats.truncations += r.truncations as u64;
                stats.dropped += r.dropped as u64;
                // The leader long-polled already; only let the shard's other tasks run.
                futures_lite::future::yield_now().await;
                continue;
            }
            Ok(None) => {
                // Everything sat out over the follower throttle: the rate falls under the
                // bound within a sample, so check again soon, not after the whole backoff.
                if let Some(ms) = super::throttle::follower_recheck_ms() {
                    let wait = backoff.min(Duration::from_millis(ms));
                    crate::shard::with_timeout(wait, handle.wake.changed_since(seen)).await;
                    continue;
                }
            }
            Err(err) => {
                stats.link_errors += 1;
                tracing::warn!(leader = %fetcher.leader, "replica fetch failed: {err}");
            }
        }
        // Nothing to fetch or the leader unreachable: wait the backoff or for a command.
        crate::shard::with_timeout(backoff, handle.wake.changed_since(seen)).await;
    }
    stats
}

fn apply_commands<F: FileSystem>(
    fetcher: &mut Fetcher,
    logs: &mut BTreeMap<TopicPartition, FollowerLog<F>>,
    handle: &FetcherHandle<F>,
) {
    let commands: Vec<Command<F>> = handle.commands.borrow_mut().drain(..).collect();
    for command in commands {
        match command {
            Command::Add { tp, topic_id, leader_epoch, in_isr, log, high_watermark } => {
                match fetcher.add_partition(tp.clone(), topic_id, leader_epoch) {
                    Ok(()) => {
                        fetcher.set_in_isr(&tp, in_isr);
                        logs.entry(tp).or_insert_with(|| FollowerLog::shared(log, high_watermark));
                    }
                    Err(err) => tracing::warn!(partition = %tp, "cannot follow: {err}"),
                }
            }
            Command::Isr { tp, in_isr } => fetcher.set_in_isr(&tp, in_isr),
            Command::Remove { tp } => {
                fetcher.remove_partition(&tp);
                logs.remove(&tp);
            }
            Command::Metadata { version } => fetcher.metadata_changed(version),
        }
    }
}
