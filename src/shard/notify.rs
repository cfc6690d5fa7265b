//! A single-threaded "something changed" signal: a version counter plus the wakers of the
//! tasks waiting for it to move.
//!
//! Lives on one shard (not `Send`): used for "a partition's high watermark advanced" (Fetch
//! long-poll) and "shutdown began". Invariant: every waker registered before a
//! [`Notify::notify`] is woken by it; a waiter never misses a change that happened after it
//! read the version it waits on.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
pub struct Notify {
    version: Cell<u64>,
    wakers: RefCell<Vec<Waker>>,
}

impl Notify {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The current version; pass it to [`Notify::changed_since`].
    #[must_use]
    pub fn version(&self) -> u64 {
        self.version.get()
    }

    /// Moves the version and wakes every waiter.
    pub fn notify(&self) {
        self.version.set(self.version.get().wrapping_add(1));
        let wakers = std::mem::take(&mut *self.wakers.borrow_mut());
        for waker in wakers {
            waker.wake();
        }
    }

    /// Resolves once the version differs from `seen`.
    pub fn changed_since(&self, seen: u64) -> Changed<'_> {
        Changed { notify: self, seen }
    }
}

/// Future returned by [`Notify::changed_since`].
pub struct Changed<'a> {
    notify: &'a Notify,
    seen: u64,
}

impl Future for Changed<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.notify.version.get() != self.seen {
            return Poll::Ready(());
        }
        let mut wakers = self.notify.wakers.borrow_mut();
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
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
        notify.notify();
        assert!(fut.as_mut().poll(&mut cx).is_ready());
    }
}
