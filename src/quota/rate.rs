//! Kafka's windowed rate (`org.apache.kafka.common.metrics.stats.Rate` over a
//! `SampledTotal`) and the throttle time `QuotaUtils.throttleTime` derives from it.
//!
//! Pure logic with the clock passed in (`now_ms`, any monotonic milliseconds), used on every
//! shard by [`super::ShardQuotas`]. Invariants: at most `samples` samples are kept; a sample
//! older than `samples * window_ms` counts as empty; the window a rate divides by is never
//! shorter than `samples - 1` whole windows (Kafka's rule, which lets a new client burst up
//! to `(samples - 1) * window` worth of its quota before it is throttled).

/// `quota.window.num` and `quota.window.size.seconds`, in the units the math uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaWindow {
    pub samples: u32,
    pub window_ms: u64,
}

impl QuotaWindow {
    /// Kafka's defaults: 11 samples of 1 s.
    pub const KAFKA_DEFAULT: QuotaWindow = QuotaWindow { samples: 11, window_ms: 1000 };

    /// From the broker settings; both are at least 1 (validated by the config registry).
    #[must_use]
    pub fn new(samples: u32, window_seconds: u32) -> Self {
        Self { samples: samples.max(1), window_ms: u64::from(window_seconds.max(1)) * 1000 }
    }
}

#[derive(Clone, Copy, Debug)]
struct Sample {
    start_ms: u64,
    total: f64,
}

/// A rate measured over the last `samples` windows, as Kafka's `Rate` measures it.
#[derive(Clone, Debug, Default)]
pub struct SampledRate {
    samples: Vec<Sample>,
    current: usize,
}

impl SampledRate {
    /// Adds `value` (bytes) at `now_ms`, opening a new sample when the current one is a
    /// whole window old (`SampledStat.record`).
    pub fn record(&mut self, w: QuotaWindow, value: f64, now_ms: u64) {
        if self.samples.is_empty() {
            self.samples.push(Sample { start_ms: now_ms, total: 0.0 });
            self.current = 0;
        }
        if now_ms.saturating_sub(self.samples[self.current].start_ms) >= w.window_ms {
            self.current = (self.current + 1) % w.samples as usize;
            let fresh = Sample { start_ms: now_ms, total: 0.0 };
            if self.current >= self.samples.len() {
                self.samples.push(fresh);
            } else {
                self.samples[self.current] = fresh;
            }
        }
        self.samples[self.current].total += value;
    }

    /// The rate per second at `now_ms` (`Rate.measure` with unit SECONDS).
    pub fn measure(&mut self, w: QuotaWindow, now_ms: u64) -> f64 {
        self.purge(w, now_ms);
        let total: f64 = self.samples.iter().map(|s| s.total).sum();
        #[allow(clippy::cast_precision_loss)] // windows are far below 2^52 ms
        let seconds = self.window_size_ms(w, now_ms) as f64 / 1000.0;
        total / seconds
    }

    /// The span the rate divides by (`Rate.windowSize`): from the oldest live sample to now,
    /// at least `samples - 1` whole windows.
    pub fn window_size_ms(&mut self, w: QuotaWindow, now_ms: u64) -> u64 {
        self.purge(w, now_ms);
        let oldest = self.samples.iter().map(|s| s.start_ms).min().unwrap_or(now_ms);
        let mut elapsed = now_ms.saturating_sub(oldest);
        let full = elapsed / w.window_ms;
        let min_full = u64::from(w.samples - 1);
        if full < min_full {
            elapsed += (min_full - full) * w.window_ms;
        }
        elapsed
    }

    /// Resets samples older than the whole measured span (`purgeObsoleteSamples`).
    fn purge(&mut self, w: QuotaWindow, now_ms: u64) {
        let expire_ms = u64::from(w.samples) * w.window_ms;
        for s in &mut self.samples {
            if now_ms.saturating_sub(s.start_ms) >= expire_ms {
                *s = Sample { start_ms: now_ms, total: 0.0 };
            }
        }
    }
}

/// Records `value` against `bound` (bytes/s) and returns the throttle time in ms, 0 when
/// the rate stays within the bound: Kafka's `Sensor.record` with quota checking followed by
/// `QuotaUtils.throttleTime` — `(rate - bound) / bound * window`, rounded. Like Kafka's
/// byte-rate quotas (unlike its request quota) the result is not capped.
pub fn record_and_throttle_ms(
    rate: &mut SampledRate,
    w: QuotaWindow,
    bound: f64,
    value: f64,
    now_ms: u64,
) -> u64 {
    rate.record(w, value, now_ms);
    let measured = rate.measure(w, now_ms);
    if measured <= bound || bound <= 0.0 {
        return 0;
    }
    #[allow(clippy::cast_precision_loss)]
    let window = rate.window_size_ms(w, now_ms) as f64;
    let throttle = (measured - bound) / bound * window;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let ms = throttle.round().min(u64::MAX as f64) as u64;
    ms
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: QuotaWindow = QuotaWindow::KAFKA_DEFAULT;

    /// Kafka's `ClientQuotaManagerTest` quota-violation numbers: quota 500 B/s, ten 400-byte
    /// records a second apart pass; a 2300-byte spike half a second later is throttled by
    /// `(rate - quota) / quota * window`.
    #[test]
    fn matches_kafkas_quota_violation_test() {
        let mut r = SampledRate::default();
        let mut now = 0;
        // Ten requests of 400 bytes one second apart: 4000 bytes over a 10 s window.
        for _ in 0..10 {
            assert_eq!(record_and_throttle_ms(&mut r, W, 500.0, 400.0, now), 0);
            now += 1000;
        }
        // Kafka: "Create a spike. 400*10 + 2000 + 300 = 6300/10.5 = 600 bytes per second.
        // (600 - quota)/quota*window-size = (600-500)/500*10.5 seconds = 2100".
        now += 500;
        let throttle = record_and_throttle_ms(&mut r, W, 500.0, 2300.0, now);
        assert_eq!(throttle, 2100);
    }

    #[test]
    fn a_new_client_divides_by_ten_windows() {
        let mut r = SampledRate::default();
        // 5000 bytes at t=0 over a 10 s minimum window: 500 B/s, exactly the bound.
        assert_eq!(record_and_throttle_ms(&mut r, W, 500.0, 5000.0, 0), 0);
        // One more byte: (500.1 - 500)/500 * 10000 = 2 ms.
        assert_eq!(record_and_throttle_ms(&mut r, W, 500.0, 1.0, 0), 2);
        assert_eq!(r.window_size_ms(W, 0), 10_000);
        assert_eq!(r.window_size_ms(W, 10_500), 10_500);
    }

    #[test]
    fn old_samples_expire() {
        let mut r = SampledRate::default();
        r.record(W, 11_000.0, 0);
        assert!((r.measure(W, 0) - 1100.0).abs() < 1e-9);
        // 11 windows later the sample is gone.
        assert!(r.measure(W, 11_000).abs() < 1e-9);
    }

    #[test]
    fn steady_sender_is_held_to_the_bound() {
        // A client that sends 1000 B every 10 ms (100 kB/s) against 10 kB/s, waiting out each
        // throttle as a muted connection does, averages the bound once past the burst.
        let mut r = SampledRate::default();
        let (mut now, mut sent) = (0u64, 0.0);
        while now < 60_000 {
            let t = record_and_throttle_ms(&mut r, W, 10_000.0, 1000.0, now);
            sent += 1000.0;
            now += 10 + t;
        }
        #[allow(clippy::cast_precision_loss)]
        let rate = sent / (now as f64 / 1000.0);
        // The first 10 s burst adds 10 windows' worth; steady state is the bound.
        assert!(rate > 10_000.0 && rate < 10_000.0 * 70.0 / 60.0 * 1.05, "{rate}");
    }
}
