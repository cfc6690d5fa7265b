//! Tiny single-threaded synchronisation primitives for one shard: a broadcast [`Notify`]
//! ("something changed": a high watermark advanced, shutdown began, a read-ahead finished)
//! and a FIFO [`TicketLock`] that keeps appends in call order even when one has to wait.
//!
//! Lives on one shard; `Cell`/`RefCell` only, never shared across threads (not `Send`).
//! Invariant: every waiter registered before a [`Notify::notify_all`] is woken by it, and a
//! waiter never misses a change made after it read the generation it waits on.
//! A waiter that is dropped before its turn gives its ticket up, so cancellation cannot
//! deadlock the queue. A [`NotifyWait`] dropped before it resolved (a long-poll fetch that
//! timed out) takes its waker back out of the list: a waker keeps its task's allocation alive,
//! and the shard's shutdown `Notify`, which every long-poll also waits on, fires only once,
//! so stale wakers grew the heap by ~20 MB in ten minutes of soak (issue 19).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Wakes every waiter registered before the next [`Notify::notify_all`].
#[derive(Default)]
pub struct Notify {
    generation: Cell<u64>,
    /// Registered waiters by key: one entry per pending [`NotifyWait`], removed when it is
    /// dropped, so the map holds only live waiters.
    wakers: RefCell<BTreeMap<u64, Waker>>,
    next_key: Cell<u64>,
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
        NotifyWait { notify: self, generation: seen, key: None }
    }

    pub fn notify_all(&self) {
        self.generation.set(self.generation.get().wrapping_add(1));
        let wakers = std::mem::take(&mut *self.wakers.borrow_mut());
        for w in wakers.into_values() {
            w.wake();
        }
    }

    /// Resolves at the next `notify_all` after this call. Check the condition, then create
    /// the future with no `.await` in between.
    pub fn wait(&self) -> NotifyWait<'_> {
        NotifyWait { notify: self, generation: self.generation.get(), key: None }
    }

    /// Waiters registered and not yet woken or dropped.
    #[must_use]
    pub fn waiters(&self) -> usize {
        self.wakers.borrow().len()
    }
}

pub struct NotifyWait<'a> {
    notify: &'a Notify,
    generation: u64,
    /// This waiter's entry in `notify.wakers` once it has been polled.
    key: Option<u64>,
}

impl Future for NotifyWait<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let notify = self.notify;
        if notify.generation.get() != self.generation {
            return Poll::Ready(());
        }
        let mut wakers = notify.wakers.borrow_mut();
        // A key whose entry is gone was taken by a `notify_all` of the same generation (the
        // generation moved, so this poll returned above); a fresh entry is needed otherwise.
        match self.key.and_then(|k| wakers.get_mut(&k)) {
            Some(w) if w.will_wake(cx.waker()) => {}
            Some(w) => w.clone_from(cx.waker()),
            None => {
                let key = notify.next_key.get();
                notify.next_key.set(key.wrapping_add(1));
                wakers.insert(key, cx.waker().clone());
                drop(wakers);
                self.key = Some(key);
            }
        }
        Poll::Pending
    }
}

impl Drop for NotifyWait<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.notify.wakers.borrow_mut().remove(&key);
        }
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

    #[test]
    fn a_dropped_waiter_leaves_no_waker_behind() {
        let notify = Notify::new();
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        // A thousand long-polls that time out: none is notified, each is dropped.
        for _ in 0..1000 {
            let mut fut = Box::pin(notify.wait());
            assert!(fut.as_mut().poll(&mut cx).is_pending());
            assert!(fut.as_mut().poll(&mut cx).is_pending(), "a second poll re-registers nothing");
            assert_eq!(notify.waiters(), 1);
        }
        assert_eq!(notify.waiters(), 0);
    }

    #[test]
    fn a_waiter_dropped_after_notify_and_a_live_one_are_both_handled() {
        let notify = Notify::new();
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut a = Box::pin(notify.wait());
        let mut b = Box::pin(notify.wait());
        assert!(a.as_mut().poll(&mut cx).is_pending());
        assert!(b.as_mut().poll(&mut cx).is_pending());
        assert_eq!(notify.waiters(), 2);
        drop(a);
        assert_eq!(notify.waiters(), 1);
        notify.notify_all();
        assert_eq!(notify.waiters(), 0);
        assert!(b.as_mut().poll(&mut cx).is_ready());
        // A waiter of the new generation registers again after the old entries were taken.
        let mut c = Box::pin(notify.wait());
        assert!(c.as_mut().poll(&mut cx).is_pending());
        assert_eq!(notify.waiters(), 1);
        drop(b);
        assert_eq!(notify.waiters(), 1, "b's entry was taken by notify_all, c's stays");
    }
}
