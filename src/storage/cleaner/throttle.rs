//! The cleaner's I/O throttle (`log.cleaner.io.max.bytes.per.second`, Kafka's `Throttler`):
//! the cleaner reports every byte it reads or writes and is told how long to pause so its
//! average rate stays under the limit.
//!
//! One per shard, shared by the cleaner passes of that shard's logs (the broker-wide limit
//! is split evenly across shards). Pure: time is passed in, so it is tested without sleeping.
//! Invariant: within a window the bytes recorded divided by (elapsed + pauses returned) does
//! not exceed the rate.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// How long a measurement window lasts before the observed rate is checked and reset.
pub const THROTTLE_CHECK_INTERVAL_MS: u64 = 300;

#[derive(Debug)]
pub struct Throttler {
    /// `None`: unlimited.
    bytes_per_second: Option<f64>,
    window_start: Cell<Instant>,
    window_bytes: Cell<u64>,
    /// Total time this throttler asked the cleaner to pause (for metrics).
    paused: Cell<Duration>,
}

impl Throttler {
    /// A throttle at `bytes_per_second` (non-finite or non-positive: unlimited).
    #[must_use]
    pub fn new(bytes_per_second: f64, now: Instant) -> Self {
        let limit =
            (bytes_per_second.is_finite() && bytes_per_second > 0.0).then_some(bytes_per_second);
        Throttler {
            bytes_per_second: limit,
            window_start: Cell::new(now),
            window_bytes: Cell::new(0),
            paused: Cell::new(Duration::ZERO),
        }
    }

    #[must_use]
    pub fn unlimited() -> Self {
        Self::new(f64::INFINITY, Instant::now())
    }

    /// Records `bytes` more of cleaner I/O at `now`; returns how long to pause first, if at
    /// all. Checked on every call, so I/O is spread evenly (a pause after each chunk) rather
    /// than a full-speed burst per window, which would stall other writers' fsyncs on the
    /// same disk; the window restarts every `THROTTLE_CHECK_INTERVAL_MS` so an idle spell
    /// earns no burst credit.
    pub fn record(&self, bytes: u64, now: Instant) -> Option<Duration> {
        let rate = self.bytes_per_second?;
        let mut start = self.window_start.get();
        let mut total = self.window_bytes.get();
        if now.saturating_duration_since(start) > Duration::from_millis(THROTTLE_CHECK_INTERVAL_MS)
        {
            (start, total) = (now, 0);
        }
        total += bytes;
        let elapsed = now.saturating_duration_since(start);
        let needed = Duration::from_secs_f64(total as f64 / rate);
        let pause = needed.saturating_sub(elapsed);
        if pause.is_zero() {
            self.window_start.set(start);
            self.window_bytes.set(total);
            return None;
        }
        // The window ends after the pause: the next call starts a fresh one.
        self.window_start.set(now + pause);
        self.window_bytes.set(0);
        self.paused.set(self.paused.get() + pause);
        Some(pause)
    }

    /// Total pause time asked for so far.
    #[must_use]
    pub fn paused(&self) -> Duration {
        self.paused.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_average_rate_under_the_limit() {
        let t0 = Instant::now();
        let t = Throttler::new(1_000_000.0, t0);
        // 4 MB at once: four seconds' worth.
        let pause = t.record(4_000_000, t0).expect("pause");
        assert_eq!(pause, Duration::from_secs(4));
        // 100 kB chunks read instantly: 0.1 s pause after each, evenly spread.
        let mut now = t0 + pause;
        for _ in 0..5 {
            let p = t.record(100_000, now).expect("pause");
            assert_eq!(p, Duration::from_millis(100));
            now += p;
        }
        // A chunk that took longer than its budget: no pause.
        assert_eq!(t.record(1_000, now + Duration::from_millis(50)), None);
        assert_eq!(t.paused(), Duration::from_millis(4500));
    }

    #[test]
    fn unlimited_never_pauses() {
        let t = Throttler::unlimited();
        assert_eq!(t.record(u64::MAX / 2, Instant::now()), None);
        let t = Throttler::new(0.0, Instant::now());
        assert_eq!(t.record(1 << 40, Instant::now()), None);
    }
}
