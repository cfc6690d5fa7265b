//! Switches that put fixed bugs back, for tests only: a test turns one on and expects the
//! deterministic simulator to fail, which shows the simulator would have found the bug.
//!
//! Compiled only under `cfg(test)` (the library's own unit tests), so a release or an
//! integration-test build has no switch at all. Thread-local, because tests run on parallel
//! threads and one test's planted bug must not leak into another's run.

use std::cell::Cell;

/// A bug that can be planted again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// Issue 41: a follower truncated to the leader's end of the common epoch, ignoring its
    /// own end of it, so a batch it wrote as leader of an epoch nobody else saw survived
    /// every truncation.
    LeaderEndTruncation,
    /// Issue 41: a truncation at or past the log end kept a trailing leader-epoch entry
    /// with no batch (an epoch the replica started as leader and wrote nothing in), so the
    /// follower named that epoch on every fetch and truncated without end.
    EmptyEpochKept,
    /// Issue 33 (first found by the fault matrix on real processes): a leader demoted, or at
    /// a new leader epoch, while its batch was written acknowledged acks=all by its replica
    /// state, which now described a follower of one replica.
    DemotedLeaderAck,
    /// Issue 33, found by the simulator once it ran the shipped role transitions: a broker
    /// that led, stepped down and led again started its new leadership at the high
    /// watermark of its follower state (its own log end when it stepped down), acknowledging
    /// acks=all batches no follower held.
    FollowerHwCarried,
}

thread_local! {
    static PLANTED: Cell<Option<Bug>> = const { Cell::new(None) };
}

/// Whether `bug` is planted on this thread.
#[must_use]
pub fn is(bug: Bug) -> bool {
    PLANTED.with(|p| p.get() == Some(bug))
}

/// Plants `bug` on this thread until the guard is dropped.
#[must_use]
pub fn plant(bug: Bug) -> Guard {
    PLANTED.with(|p| p.set(Some(bug)));
    Guard
}

/// Removes the planted bug when dropped.
pub struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        PLANTED.with(|p| p.set(None));
    }
}
