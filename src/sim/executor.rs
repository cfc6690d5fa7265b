//! A single-threaded executor with virtual time, for simulations that run the shipped
//! storage and replication code (which spawn tasks and sleep through [`crate::io::Runtime`]).
//!
//! Runs on the test's thread, without glommio. Tasks run in spawn and wake order
//! (`futures`' `LocalPool`), and time moves only when every task waits: then the clock
//! jumps to the earliest timer and wakes it. So a run is a function of its inputs, and a
//! simulator that draws its inputs from a seeded RNG replays exactly.
//! Invariant: the clock never moves backwards; a timer fires no earlier than its deadline.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::executor::{LocalPool, LocalSpawner};
use futures::task::LocalSpawnExt;

use crate::io::{LocalTask, Runtime};

/// Wall-clock milliseconds at virtual time zero (any fixed value: records carry it).
const WALL_CLOCK_ORIGIN_MS: i64 = 1_700_000_000_000;

/// The virtual clock and its timers.
#[derive(Default)]
struct Clock {
    now_ms: Cell<u64>,
    /// Pending timers by (deadline, registration order).
    timers: RefCell<BTreeMap<(u64, u64), Waker>>,
    next_timer: Cell<u64>,
}

impl Clock {
    /// Moves the clock to `to_ms` (never backwards) and wakes every timer due by then.
    fn advance_to(&self, to_ms: u64) {
        self.now_ms.set(self.now_ms.get().max(to_ms));
        let now = self.now_ms.get();
        let mut timers = self.timers.borrow_mut();
        let later = timers.split_off(&(now + 1, 0));
        let due = std::mem::replace(&mut *timers, later);
        drop(timers);
        for waker in due.into_values() {
            waker.wake();
        }
    }

    fn next_deadline(&self) -> Option<u64> {
        self.timers.borrow().keys().next().map(|(deadline, _)| *deadline)
    }
}

/// A sleep on the virtual clock.
struct Sleep {
    clock: Rc<Clock>,
    deadline_ms: u64,
    key: Option<(u64, u64)>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.clock.now_ms.get() >= self.deadline_ms {
            if let Some(key) = self.key.take() {
                self.clock.timers.borrow_mut().remove(&key);
            }
            return Poll::Ready(());
        }
        let key = match self.key {
            Some(key) => key,
            None => {
                let n = self.clock.next_timer.get();
                self.clock.next_timer.set(n + 1);
                let key = (self.deadline_ms, n);
                self.key = Some(key);
                key
            }
        };
        self.clock.timers.borrow_mut().insert(key, cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.clock.timers.borrow_mut().remove(&key);
        }
    }
}

/// The [`Runtime`] a simulated node's file system uses: virtual time, tasks on the pool.
pub struct SimRuntime {
    clock: Rc<Clock>,
    spawner: LocalSpawner,
}

impl Runtime for SimRuntime {
    fn now_ms(&self) -> i64 {
        WALL_CLOCK_ORIGIN_MS + i64::try_from(self.clock.now_ms.get()).unwrap_or(i64::MAX / 2)
    }

    fn monotonic(&self) -> Duration {
        Duration::from_millis(self.clock.now_ms.get())
    }

    fn spawn(&self, task: LocalTask) {
        // Fails only once the pool is gone, when nothing would run the task anyway.
        let _ = self.spawner.spawn_local(task);
    }

    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Future<Output = ()>>> {
        let ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX / 2);
        let deadline_ms = self.clock.now_ms.get().saturating_add(ms);
        Box::pin(Sleep { clock: self.clock.clone(), deadline_ms, key: None })
    }
}

/// Why [`SimExecutor::block_on`] could not finish.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Stalled {
    #[error("every task waits and no timer is set: the simulated system is deadlocked")]
    Deadlock,
    #[error("not done after {0} ms of virtual time")]
    TimedOut(u64),
}

/// The executor: a pool of tasks and the virtual clock they share.
pub struct SimExecutor {
    pool: LocalPool,
    runtime: Rc<SimRuntime>,
}

impl Default for SimExecutor {
    fn default() -> Self {
        Self::new()
    }
}

impl SimExecutor {
    #[must_use]
    pub fn new() -> Self {
        let pool = LocalPool::new();
        let runtime = Rc::new(SimRuntime { clock: Rc::default(), spawner: pool.spawner() });
        SimExecutor { pool, runtime }
    }

    /// The runtime to hand to simulated file systems.
    #[must_use]
    pub fn runtime(&self) -> Rc<SimRuntime> {
        self.runtime.clone()
    }

    /// Virtual milliseconds since the start.
    #[must_use]
    pub fn now_ms(&self) -> u64 {
        self.runtime.clock.now_ms.get()
    }

    /// Runs every task until all wait, without moving the clock.
    pub fn run_until_stalled(&mut self) {
        self.pool.run_until_stalled();
    }

    /// Moves the clock forward by `ms`, running every task and timer due on the way.
    pub fn advance(&mut self, ms: u64) {
        let until = self.now_ms() + ms;
        loop {
            self.pool.run_until_stalled();
            match self.runtime.clock.next_deadline() {
                Some(deadline) if deadline <= until => self.runtime.clock.advance_to(deadline),
                _ => break,
            }
        }
        self.runtime.clock.advance_to(until);
        self.pool.run_until_stalled();
    }

    /// Runs `fut` (and every other task) to its end, moving the clock to the next timer
    /// whenever every task waits, for at most `limit_ms` of virtual time.
    pub fn block_on<T: 'static>(
        &mut self,
        fut: impl Future<Output = T> + 'static,
        limit_ms: u64,
    ) -> Result<T, Stalled> {
        let out: Rc<RefCell<Option<T>>> = Rc::default();
        let slot = out.clone();
        self.runtime.spawn(Box::pin(async move {
            let value = fut.await;
            *slot.borrow_mut() = Some(value);
        }));
        let until = self.now_ms().saturating_add(limit_ms);
        loop {
            self.pool.run_until_stalled();
            if let Some(value) = out.borrow_mut().take() {
                return Ok(value);
            }
            match self.runtime.clock.next_deadline() {
                None => return Err(Stalled::Deadlock),
                Some(deadline) if deadline > until => return Err(Stalled::TimedOut(limit_ms)),
                Some(deadline) => self.runtime.clock.advance_to(deadline),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_moves_only_to_the_next_timer_and_tasks_run_in_order() {
        let mut ex = SimExecutor::new();
        let rt = ex.runtime();
        let seen: Rc<RefCell<Vec<(u64, &str)>>> = Rc::default();
        for (name, ms) in [("b", 30), ("a", 10)] {
            let (rt2, seen2) = (rt.clone(), seen.clone());
            rt.spawn(Box::pin(async move {
                rt2.sleep(Duration::from_millis(ms)).await;
                let now = u64::try_from(rt2.monotonic().as_millis()).unwrap();
                seen2.borrow_mut().push((now, name));
            }));
        }
        let rt3 = rt.clone();
        let got = ex.block_on(
            async move {
                rt3.sleep(Duration::from_millis(20)).await;
                7
            },
            1_000,
        );
        assert_eq!(got, Ok(7));
        assert_eq!(*seen.borrow(), [(10, "a")]);
        ex.advance(100);
        assert_eq!(*seen.borrow(), [(10, "a"), (30, "b")]);
        assert_eq!(ex.now_ms(), 120);
        let never = ex.block_on(futures::future::pending::<()>(), 1_000);
        assert_eq!(never, Err(Stalled::Deadlock));
        let rt4 = rt.clone();
        let late = ex.block_on(async move { rt4.sleep(Duration::from_secs(10)).await }, 1_000);
        assert_eq!(late, Err(Stalled::TimedOut(1_000)));
    }
}
