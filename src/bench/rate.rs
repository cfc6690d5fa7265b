//! Open-loop schedule and coordinated-omission correction (the wrk2 method).
//!
//! Pure arithmetic, used by every bench executor. Under `--rate R` record `i` of a lane
//! is *intended* to be sent at `start + i / R`, whether or not the broker kept up. Its
//! latency is measured from that intended time to its acknowledgement, so a stalled
//! broker shows up as the queueing delay every later record suffers, instead of as one
//! slow request (coordinated omission). Invariants: intended times are monotonic in the
//! sequence number and never depend on when sends actually happened.

use std::sync::OnceLock;
use std::time::Instant;

/// Nanoseconds since the process's bench clock anchor (monotonic, same for all threads).
pub fn now_ns() -> u64 {
    static ANCHOR: OnceLock<Instant> = OnceLock::new();
    let anchor = *ANCHOR.get_or_init(Instant::now);
    u64::try_from(anchor.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The constant-rate schedule of one lane: record `seq` is due at `start_ns + seq / rate`.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    start_ns: u64,
    interval_ns: f64,
}

impl Schedule {
    /// `rate_per_s` must be positive and finite (validated at the CLI).
    pub fn new(start_ns: u64, rate_per_s: f64) -> Schedule {
        Schedule { start_ns, interval_ns: 1e9 / rate_per_s }
    }

    /// When record `seq` is intended to be sent.
    pub fn intended_ns(&self, seq: u64) -> u64 {
        self.start_ns + (seq as f64 * self.interval_ns) as u64
    }

    /// How many records are due at `now_ns` (records `0..n` have intended time <= now).
    pub fn due_count(&self, now_ns: u64) -> u64 {
        if now_ns < self.start_ns {
            return 0;
        }
        let n = ((now_ns - self.start_ns) as f64 / self.interval_ns).floor() as u64 + 1;
        // Float rounding may put the boundary record on either side; settle it exactly.
        if self.intended_ns(n) <= now_ns {
            n + 1
        } else if n > 0 && self.intended_ns(n - 1) > now_ns {
            n - 1
        } else {
            n
        }
    }
}

/// Latency of a record in microseconds, measured from its intended send time (open
/// loop) or its actual send time (closed loop) to its acknowledgement.
pub fn latency_us(from_ns: u64, ack_ns: u64) -> u64 {
    ack_ns.saturating_sub(from_ns) / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_spaces_records_evenly() {
        let s = Schedule::new(1_000, 1000.0); // one per millisecond
        assert_eq!(s.intended_ns(0), 1_000);
        assert_eq!(s.intended_ns(5), 5_001_000);
        assert_eq!(s.due_count(999), 0);
        assert_eq!(s.due_count(1_000), 1);
        assert_eq!(s.due_count(1_000_999), 1);
        assert_eq!(s.due_count(1_001_000), 2);
        assert_eq!(s.due_count(10_001_000), 11);
    }

    #[test]
    fn due_count_agrees_with_intended_times() {
        for rate in [1.0, 3.0, 7.5, 1e3, 123_457.0, 2e6] {
            let s = Schedule::new(5, rate);
            for now in (0..50_000_000u64).step_by(999_983) {
                let n = s.due_count(now);
                assert!(n == 0 || s.intended_ns(n - 1) <= now, "rate {rate} now {now}");
                assert!(s.intended_ns(n) > now, "rate {rate} now {now}");
            }
        }
    }

    #[test]
    fn stalled_sender_latency_counts_from_intended_time() {
        // 1,000 rec/s; the sender stalls 100 ms, then sends everything due at once.
        let s = Schedule::new(0, 1000.0);
        let resume_ns = 100_000_000;
        let ack_ns = resume_ns + 1_000_000;
        let due = s.due_count(resume_ns);
        assert_eq!(due, 101);
        let lat: Vec<u64> = (0..due).map(|i| latency_us(s.intended_ns(i), ack_ns)).collect();
        // The first record waited the whole stall; the last only the 1 ms round trip.
        assert_eq!(lat[0], 101_000);
        assert_eq!(lat[100], 1_000);
        // Naive (send-time) measurement would have reported 1 ms for all of them.
        assert_eq!(latency_us(resume_ns, ack_ns), 1_000);
    }
}
