//! Timers the request path holds: [`RequestTimer`] follows one request through its
//! connection (read → handler → response ready → written), [`hop`] times a cross-shard
//! call. Without the `metrics` feature both are empty shells that read no clock.
//!
//! Live on the connection's shard; never sent. Invariant: the in-flight and mesh-depth
//! gauges go back down even when a request or call is dropped unfinished.

use std::future::Future;
#[cfg(feature = "metrics")]
use std::{cell::Cell, rc::Rc, time::Instant};

#[cfg(feature = "metrics")]
use super::{with, Count, Level, Stage};

/// Times one request through a connection. See the module doc.
pub struct RequestTimer {
    #[cfg(feature = "metrics")]
    inner: Option<Inner>,
}

#[cfg(feature = "metrics")]
struct Inner {
    api_key: i16,
    read_at: Instant,
    queued: std::time::Duration,
    ready_at: Rc<Cell<Option<Instant>>>,
}

/// The instant the writer took a response (opaque without the feature).
#[derive(Clone, Copy)]
pub struct SendStart(#[cfg(feature = "metrics")] Instant);

impl RequestTimer {
    /// A request frame of `frame_bytes` for `api_key` has just been read.
    #[must_use]
    pub fn start(api_key: i16, frame_bytes: usize) -> Self {
        #[cfg(feature = "metrics")]
        {
            with(|r| {
                r.count(Count::Requests, 1);
                r.count(Count::RequestBytes, frame_bytes as u64);
                r.adjust(Level::RequestsInFlight, 1);
            });
            Self {
                inner: Some(Inner {
                    api_key,
                    read_at: Instant::now(),
                    queued: std::time::Duration::ZERO,
                    ready_at: Rc::new(Cell::new(None)),
                }),
            }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = (api_key, frame_bytes);
            Self {}
        }
    }

    /// The request's handler starts now: the wait since the read is queue time.
    pub fn handler_started(&mut self) {
        #[cfg(feature = "metrics")]
        if let Some(i) = self.inner.as_mut() {
            i.queued += i.read_at.elapsed();
        }
    }

    /// Wraps the response future so that the moment it completes is known: a response
    /// ready while the writer is busy with earlier ones waits, and that wait is queue time.
    pub fn watch<F: Future>(&self, fut: F) -> impl Future<Output = F::Output> {
        #[cfg(feature = "metrics")]
        let ready = self.inner.as_ref().map(|i| i.ready_at.clone());
        async move {
            let out = fut.await;
            #[cfg(feature = "metrics")]
            if let Some(ready) = ready {
                ready.set(Some(Instant::now()));
            }
            out
        }
    }

    /// The writer takes the response now; pass the result to [`RequestTimer::finish`].
    #[must_use]
    pub fn writer_took(&mut self) -> SendStart {
        #[cfg(feature = "metrics")]
        {
            let now = Instant::now();
            if let Some(i) = self.inner.as_mut() {
                if let Some(ready) = i.ready_at.get() {
                    i.queued += now.saturating_duration_since(ready);
                }
            }
            SendStart(now)
        }
        #[cfg(not(feature = "metrics"))]
        SendStart()
    }

    /// The response (`response_bytes`, 0 for none) has been written.
    pub fn finish(mut self, send: SendStart, response_bytes: usize) {
        #[cfg(feature = "metrics")]
        if let Some(i) = self.inner.take() {
            let now = Instant::now();
            with(|r| {
                r.count(Count::ResponseBytes, response_bytes as u64);
                r.record(i.api_key, Stage::Send, now.saturating_duration_since(send.0));
                r.record(i.api_key, Stage::Queue, i.queued);
                r.record(i.api_key, Stage::Total, now.saturating_duration_since(i.read_at));
                r.adjust(Level::RequestsInFlight, -1);
            });
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (&mut self, send, response_bytes);
    }
}

impl Drop for RequestTimer {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        if self.inner.take().is_some() {
            with(|r| r.adjust(Level::RequestsInFlight, -1));
        }
    }
}

/// Times a cross-shard call for `api_key` (None: not a request's call, only counted):
/// counts the message, holds the mesh-depth gauge up while the reply is awaited, and
/// records the round trip as [`Stage::Hop`](super::Stage::Hop).
pub fn hop<F: Future>(api_key: Option<i16>, fut: F) -> impl Future<Output = F::Output> {
    #[cfg(feature = "metrics")]
    {
        struct Depth;
        impl Drop for Depth {
            fn drop(&mut self) {
                with(|r| r.adjust(Level::MeshQueueDepth, -1));
            }
        }
        with(|r| {
            r.count(Count::MeshMessages, 1);
            r.adjust(Level::MeshQueueDepth, 1);
        });
        let depth = Depth;
        let sent = Instant::now();
        async move {
            let out = fut.await;
            if let Some(api) = api_key {
                with(|r| r.record(api, Stage::Hop, sent.elapsed()));
            }
            drop(depth);
            out
        }
    }
    #[cfg(not(feature = "metrics"))]
    {
        let _ = api_key;
        fut
    }
}
