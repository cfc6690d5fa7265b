//! Tiny single-threaded synchronisation primitives for one shard: a broadcast [`Notify`]
//! ("something changed": a high watermark advanced, shutdown began, a read-ahead finished)
//! and a FIFO [`TicketLock`] that keeps appends in call order even when one has to wait.
//!
//! Lives on one shard; `Cell`/`RefCell` only, never shared across threads (not `Send`).
//! Invariant: every waiter registered before a [`Notify::notify_all`] is woken by it, and a
//! waiter never misses a change made after it read the generation it waits on.
//! A waiter that is dropped before its turn gives its ticket up, so cancellation cannot
//! deadlock the queue.

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Wakes every waiter registered before the next [`Notify::notify_all`].
#[derive(Default)]
pub struct Notify {
    generation: Cell<u64>,
    wakers: RefCell<Vec<Waker>>,
}

impl Notify {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The current generation; pass it to [`Notify::changed_since`] to wait across awaits.
    #[must_use]
    pub fn version(&self) -> u64 {
        self.generation.get()
    }

    /// Resolves once the generation differs from `seen`.
    pub fn changed_since(&self, seen: u64) -> NotifyWait<'_> {
        NotifyWait { notify: self, generation: seen }
    }

    pub fn notify_all(&self) {
        self.generation.set(self.generation.get().wrapping_add(1));
        let wakers = std::mem::take(&mut *self.wakers.borrow_mut());
        for w in wakers {
            w.wake();
        }
    }

    /// Resolves at the next `notify_all` after this call. Check the condition, then create
    /// the future with no `.await` in between.
    pub fn wait(&self) -> NotifyWait<'_> {
        NotifyWait { notify: self, generation: self.generation.get() }
    }
}

pub struct NotifyWait<'a> {
    notify: &'a Notify,
    generation: u64,
}

impl Future for NotifyWait<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.notify.generation.get() != self.generation {
            return Poll::Ready(());
        }
        let mut wakers = self.notify.wakers.borrow_mut();
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// A FIFO async lock: holders are served strictly in the order they called `acquire`.
#[derive(Default)]
pub struct TicketLock {
    next: Cell<u64>,
    serving: Cell<u64>,
    abandoned: RefCell<BTreeSet<u64>>,
    changed: Notify,
}

pub struct TicketGuard<'a> {
    lock: &'a TicketLock,
    ticket: u64,
    held: bool,
}

impl TicketLock {
    pub async fn acquire(&self) -> TicketGuard<'_> {
        let ticket = self.next.get();
        self.next.set(ticket + 1);
        let mut guard = TicketGuard { lock: self, ticket, held: false };
        while self.serving.get() != ticket {
            self.changed.wait().await;
        }
        guard.held = true;
        guard
    }

    fn advance(&self) {
        let mut next = self.serving.get() + 1;
        let mut abandoned = self.abandoned.borrow_mut();
        while abandoned.remove(&next) {
            next += 1;
        }
        self.serving.set(next);
        drop(abandoned);
        self.changed.notify_all();
    }
}

impl Drop for TicketGuard<'_> {
    fn drop(&mut self) {
        if self.held || self.lock.serving.get() == self.ticket {
            self.lock.advance();
        } else {
            self.lock.abandoned.borrow_mut().insert(self.ticket);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiter_resolves_after_notify() {
        let notify = Notify::new();
        let seen = notify.version();
        let mut fut = Box::pin(notify.changed_since(seen));
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        notify.notify_all();
        assert!(fut.as_mut().poll(&mut cx).is_ready());
    }
}
