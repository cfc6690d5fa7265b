//! Measurement: the shared recorder (latency histogram, counters, errors by code), the
//! live progress line, CPU accounting and the final summary in text, `.hgrm` and JSON.
//!
//! One [`Recorder`] per run behind a mutex shared by all bench executors; each executor
//! locks it once per response (not per record), so contention stays negligible. A
//! plain std thread prints the live line once per second. Invariants: nothing is
//! recorded before the warm-up ends; latencies are microseconds, 3 significant digits.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use kafka_protocol::error::ResponseError;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::rate::now_ns;
use crate::constants::{BENCH_LATENCY_US_MAX, BENCH_STALL_TIMEOUT_MS};

/// Counters and histogram of the measured part of a run.
pub struct Recorder {
    pub latency_us: Histogram<u64>,
    /// Per produce request: how late its first record left after its intended time
    /// (open loop only): the client's own scheduling, outside any broker.
    pub send_lag_us: Histogram<u64>,
    /// Per produce request: send to response read (loopback, broker, client wake-up).
    pub round_trip_us: Histogram<u64>,
    pub records: u64,
    pub bytes: u64,
    pub requests: u64,
    pub errors: BTreeMap<i16, u64>,
    /// When measuring started (end of warm-up), bench clock ns.
    pub measure_start_ns: u64,
    /// When the last measured unit was recorded, bench clock ns.
    pub last_ns: u64,
    /// Process CPU times (user, sys) and bench-clock time when measuring began, so
    /// warm-up and connection set-up are not charged to the measured run.
    pub cpu_at_start: Option<(f64, f64, u64)>,
    /// When the controller stopped a `--duration` run; a stalled broker's silence
    /// until then counts in the run's duration.
    pub stop_ns: u64,
}

impl Recorder {
    fn new() -> Recorder {
        Recorder {
            latency_us: histogram(),
            send_lag_us: histogram(),
            round_trip_us: histogram(),
            records: 0,
            bytes: 0,
            requests: 0,
            errors: BTreeMap::new(),
            measure_start_ns: 0,
            last_ns: 0,
            cpu_at_start: None,
            stop_ns: 0,
        }
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, BENCH_LATENCY_US_MAX, 3)
        .expect("static histogram bounds are valid")
}

/// Client-side stages of one produce request, in µs.
#[derive(Clone, Copy, Debug)]
pub struct RequestStages {
    /// Its first record's intended send time to the send (open loop only).
    pub send_lag_us: Option<u64>,
    /// The send to the response read.
    pub round_trip_us: u64,
}

/// State shared by the executors and the progress thread.
pub struct Shared {
    pub rec: Mutex<Recorder>,
    /// Bench-clock time at which the warm-up ends; units sent earlier are discarded.
    measure_from_ns: AtomicU64,
    /// Set when the run must stop (duration or record count reached, or fatal error).
    pub stop: AtomicBool,
    /// Records to measure before stopping, if `--records` was given.
    pub records_target: Option<u64>,
    /// Records of the `--records` budget already handed to senders.
    claimed: AtomicU64,
    /// Set when the controller stopped the run because nothing was acknowledged for
    /// `BENCH_STALL_TIMEOUT_MS`.
    pub stalled: AtomicBool,
}

impl Shared {
    pub fn new(records_target: Option<u64>) -> Arc<Shared> {
        Arc::new(Shared {
            rec: Mutex::new(Recorder::new()),
            measure_from_ns: AtomicU64::new(u64::MAX),
            stop: AtomicBool::new(false),
            records_target,
            claimed: AtomicU64::new(0),
            stalled: AtomicBool::new(false),
        })
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Sets when measuring starts; senders compare their send time against it, so the
    /// boundary is exact rather than as late as the controller thread notices it.
    pub fn measure_from(&self, ns: u64) {
        self.rec.lock().measure_start_ns = ns;
        self.measure_from_ns.store(ns, Ordering::Release);
    }

    /// Grants up to `want` records of the `--records` budget to a sender about to send
    /// measured records; 0 means the budget is spent and the sender should stop.
    pub fn claim(&self, want: u64) -> u64 {
        let Some(target) = self.records_target else { return want };
        let prev = self.claimed.fetch_add(want, Ordering::Relaxed);
        want.min(target.saturating_sub(prev))
    }

    /// Records one acknowledged unit of `records` records with their latencies as
    /// (latency µs, count) pairs, and a produce request's client-side `stages`, under one
    /// lock. Units sent during warm-up (`measured` false) are dropped.
    pub fn record(
        &self,
        measured: bool,
        records: u64,
        bytes: u64,
        latencies: impl IntoIterator<Item = (u64, u64)>,
        stages: Option<RequestStages>,
    ) {
        if !measured {
            return;
        }
        let now = now_ns();
        let mut rec = self.rec.lock();
        rec.records += records;
        rec.bytes += bytes;
        rec.requests += 1;
        rec.last_ns = rec.last_ns.max(now);
        for (us, n) in latencies {
            rec.latency_us.saturating_record_n(us.max(1), n);
        }
        if let Some(st) = stages {
            if let Some(lag) = st.send_lag_us {
                rec.send_lag_us.saturating_record(lag.max(1));
            }
            rec.round_trip_us.saturating_record(st.round_trip_us.max(1));
        }
        if self.records_target.is_some_and(|t| rec.records >= t) {
            self.stop.store(true, Ordering::Relaxed);
        }
    }

    pub fn record_error(&self, measured: bool, code: i16, records: u64) {
        if measured {
            *self.rec.lock().errors.entry(code).or_default() += records.max(1);
        }
    }

    pub fn is_measuring(&self) -> bool {
        now_ns() >= self.measure_from_ns.load(Ordering::Acquire)
    }
}

/// Timing of a run: measuring starts at `start_ns + warmup`, stops `duration` later.
#[derive(Clone, Copy, Debug)]
pub struct RunClock {
    pub start_ns: u64,
    pub warmup_s: f64,
    pub duration_s: Option<f64>,
}

/// Starts the controller thread: it begins measuring after the warm-up, stops the run
/// after the duration, and prints one progress line per second about `shareds[0]`.
/// It exits once every recorder is stopped.
pub fn spawn_controller(
    shareds: Vec<Arc<Shared>>,
    clock: RunClock,
    quiet: bool,
) -> std::thread::JoinHandle<()> {
    let measure_ns = clock.start_ns + (clock.warmup_s * 1e9) as u64;
    shareds.iter().for_each(|s| s.measure_from(measure_ns));
    std::thread::spawn(move || {
        let main = &shareds[0];
        let stop_ns = clock.duration_s.map(|d| measure_ns + (d * 1e9) as u64);
        let (mut last_records, mut last_bytes, mut last_ns) = (0u64, 0u64, now_ns());
        while !shareds.iter().all(|s| s.stopped()) {
            std::thread::sleep(Duration::from_millis(5));
            let now = now_ns();
            let measuring = now >= measure_ns;
            if measuring && main.rec.lock().cpu_at_start.is_none() {
                let (u, s) = cpu_times_s();
                shareds.iter().for_each(|x| x.rec.lock().cpu_at_start = Some((u, s, now)));
            }
            let last_ack_ns = shareds.iter().map(|s| s.rec.lock().last_ns).max().unwrap_or(0);
            let stalled = measuring
                && now.saturating_sub(last_ack_ns.max(measure_ns))
                    > BENCH_STALL_TIMEOUT_MS * 1_000_000;
            if stalled {
                eprintln!(
                    "no acknowledgement for {} s: stopping (is the broker stalled?)",
                    BENCH_STALL_TIMEOUT_MS / 1000
                );
                shareds.iter().for_each(|s| s.stalled.store(true, Ordering::Relaxed));
            }
            let interrupted = INTERRUPTED.load(Ordering::Relaxed);
            if stalled || interrupted || stop_ns.is_some_and(|t| now >= t) {
                stop_now(&shareds, now);
            }
            if now - last_ns < 1_000_000_000 || quiet {
                continue;
            }
            let (records, bytes, p99, errors) = {
                let r = main.rec.lock();
                let errs: u64 = r.errors.values().sum();
                let p99 =
                    if r.latency_us.is_empty() { 0 } else { r.latency_us.value_at_quantile(0.99) };
                (r.records, r.bytes, p99, errs)
            };
            let secs = (now - last_ns) as f64 / 1e9;
            let rps = (records - last_records) as f64 / secs;
            let mibps = (bytes - last_bytes) as f64 / secs / 1048576.0;
            let bar = main.records_target.map(|t| progress_bar(records, t)).unwrap_or_default();
            let phase = if measuring { "" } else { " (warm-up)" };
            eprintln!(
                "{rps:>10.0} rec/s {mibps:>8.1} MiB/s  p99 so far {p99:>7} us  errors {errors}{bar}{phase}"
            );
            (last_records, last_bytes, last_ns) = (records, bytes, now);
        }
    })
}

/// Stops every recorder, remembering when (the end of a run cut short or timed).
fn stop_now(shareds: &[Arc<Shared>], now: u64) {
    for s in shareds {
        let mut rec = s.rec.lock();
        if rec.stop_ns == 0 {
            rec.stop_ns = now;
        }
        s.stop.store(true, Ordering::Relaxed);
    }
}

/// Set by SIGINT/SIGTERM: the run stops early and still prints its summary.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Routes SIGINT and SIGTERM to [`INTERRUPTED`] (a second Ctrl-C still kills: the
/// handler is reset by `SA_RESETHAND`).
pub fn install_signal_handlers() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESETHAND;
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
}

fn progress_bar(done: u64, target: u64) -> String {
    let frac = (done as f64 / target as f64).min(1.0);
    let filled = (frac * 20.0) as usize;
    format!("  [{}{}] {:>3.0}%", "#".repeat(filled), ".".repeat(20 - filled), frac * 100.0)
}

/// CPU time of this process so far (user, system) in seconds.
pub fn cpu_times_s() -> (f64, f64) {
    // SAFETY: getrusage writes into the zeroed struct we pass and has no other effects.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } == 0;
    if !ok {
        return (0.0, 0.0);
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// Latency percentiles in microseconds.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct Percentiles {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub p9999: u64,
    pub max: u64,
    pub mean: f64,
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        let q = |x: f64| if h.is_empty() { 0 } else { h.value_at_quantile(x) };
        Percentiles {
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p999: q(0.999),
            p9999: q(0.9999),
            max: h.max(),
            mean: h.mean(),
        }
    }
}

/// The machine-readable result of one run (`--json`).
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Summary {
    pub mode: String,
    pub label: String,
    pub bootstrap: String,
    pub topic: String,
    /// "open-loop" (latency from intended send time) or "closed-loop".
    pub load: String,
    pub target_rate: Option<f64>,
    pub duration_s: f64,
    pub records: u64,
    pub bytes: u64,
    pub requests: u64,
    pub records_per_s: f64,
    pub mib_per_s: f64,
    pub errors: BTreeMap<String, u64>,
    pub latency_us: Percentiles,
    /// (percentile, latency µs) pairs of the distribution, for plots.
    pub distribution: Vec<(f64, u64)>,
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    /// Client CPU time as a percentage of one core over the measured duration.
    pub cpu_pct_of_core: f64,
    /// Produce only: per request, the send's lag behind the schedule (open loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_lag_us: Option<Percentiles>,
    /// Produce only: per request, send to response read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_trip_us: Option<Percentiles>,
}

/// Builds the summary from the recorder at the end of a run.
pub struct SummaryInput<'a> {
    pub mode: &'a str,
    pub label: Option<&'a str>,
    pub bootstrap: &'a str,
    pub topic: &'a str,
    pub rate: Option<f64>,
    pub end_ns: u64,
    pub cpu_start: (f64, f64),
}

pub fn summarize(rec: &Recorder, input: &SummaryInput<'_>) -> Summary {
    // The run ends with its last acknowledgement or, for a --duration run, when the
    // duration was up (whichever is later, so a stalled broker is not flattered).
    let end_ns = match rec.last_ns.max(rec.stop_ns) {
        0 => input.end_ns,
        t => t,
    };
    let duration_s = (end_ns.saturating_sub(rec.measure_start_ns) as f64 / 1e9).max(1e-9);
    let (u, s) = cpu_times_s();
    let (cu, cs, cpu_from_ns) =
        rec.cpu_at_start.unwrap_or((input.cpu_start.0, input.cpu_start.1, rec.measure_start_ns));
    let (cpu_user_s, cpu_sys_s) = (u - cu, s - cs);
    // CPU is counted until now (drain included), so divide by the same wall time.
    let cpu_wall_s = (input.end_ns.saturating_sub(cpu_from_ns) as f64 / 1e9).max(duration_s);
    let h = &rec.latency_us;
    let distribution = if h.is_empty() {
        Vec::new()
    } else {
        h.iter_quantiles(5).map(|v| (v.percentile(), v.value_iterated_to())).collect()
    };
    Summary {
        mode: input.mode.to_string(),
        label: input.label.map_or_else(|| input.mode.to_string(), str::to_string),
        bootstrap: input.bootstrap.to_string(),
        topic: input.topic.to_string(),
        load: if input.rate.is_some() { "open-loop" } else { "closed-loop" }.to_string(),
        target_rate: input.rate,
        duration_s,
        records: rec.records,
        bytes: rec.bytes,
        requests: rec.requests,
        records_per_s: rec.records as f64 / duration_s,
        mib_per_s: rec.bytes as f64 / duration_s / 1048576.0,
        errors: rec.errors.iter().map(|(c, n)| (error_name(*c), *n)).collect(),
        latency_us: Percentiles::of(h),
        distribution,
        cpu_user_s,
        cpu_sys_s,
        cpu_pct_of_core: (cpu_user_s + cpu_sys_s) / cpu_wall_s * 100.0,
        send_lag_us: (!rec.send_lag_us.is_empty()).then(|| Percentiles::of(&rec.send_lag_us)),
        round_trip_us: (!rec.round_trip_us.is_empty()).then(|| Percentiles::of(&rec.round_trip_us)),
    }
}

/// `NAME(code)` of a Kafka error code; negative codes are client-side failures.
pub fn error_name(code: i16) -> String {
    match code {
        CLIENT_ERROR_TIMEOUT => "CLIENT_TIMEOUT(-2)".to_string(),
        _ => match ResponseError::try_from_code(code) {
            Some(ResponseError::Unknown(_)) | None => format!("CODE({code})"),
            Some(e) => format!("{e:?}({code})"),
        },
    }
}

/// Client-side error code: a request got no answer in time.
pub const CLIENT_ERROR_TIMEOUT: i16 = -2;

impl Summary {
    /// Human-readable block plus one `SUMMARY key=value ...` line for scripts.
    pub fn print(&self, out: &mut impl Write) -> std::io::Result<()> {
        let l = &self.latency_us;
        writeln!(
            out,
            "--- {} ({}) {} on {} topic {}",
            self.label, self.mode, self.load, self.bootstrap, self.topic
        )?;
        writeln!(
            out,
            "records {}  in {:.2} s  = {:.0} rec/s  {:.2} MiB/s  ({} requests)",
            self.records, self.duration_s, self.records_per_s, self.mib_per_s, self.requests
        )?;
        let errors: Vec<String> = self.errors.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        writeln!(
            out,
            "errors  {}",
            if errors.is_empty() { "none".into() } else { errors.join(", ") }
        )?;
        writeln!(
            out,
            "latency us  p50 {}  p90 {}  p99 {}  p99.9 {}  p99.99 {}  max {}  (mean {:.0})",
            l.p50, l.p90, l.p99, l.p999, l.p9999, l.max, l.mean
        )?;
        let stage = |name: &str, p: &Option<Percentiles>| match p {
            Some(p) => format!("  {name} p50 {} p99 {} p99.9 {}", p.p50, p.p99, p.p999),
            None => String::new(),
        };
        let stages =
            stage("send lag", &self.send_lag_us) + &stage("round trip", &self.round_trip_us);
        if !stages.is_empty() {
            writeln!(out, "per request us{stages}")?;
        }
        writeln!(
            out,
            "client cpu  user {:.2} s  sys {:.2} s  = {:.1}% of one core",
            self.cpu_user_s, self.cpu_sys_s, self.cpu_pct_of_core
        )?;
        writeln!(
            out,
            "SUMMARY mode={} records={} duration_s={:.3} records_per_s={:.1} mib_per_s={:.3} \
             errors={} p50_us={} p90_us={} p99_us={} p999_us={} p9999_us={} max_us={} \
             cpu_pct={:.1}",
            self.mode,
            self.records,
            self.duration_s,
            self.records_per_s,
            self.mib_per_s,
            self.errors.values().sum::<u64>(),
            l.p50,
            l.p90,
            l.p99,
            l.p999,
            l.p9999,
            l.max,
            self.cpu_pct_of_core
        )
    }
}

/// Writes the percentile distribution in HdrHistogram's `.hgrm` text format
/// (values in milliseconds, as wrk2 and the HdrHistogram plotter expect).
pub fn write_hgrm(h: &Histogram<u64>, path: &Path) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    )?;
    if !h.is_empty() {
        for v in h.iter_quantiles(5) {
            let q = v.quantile_iterated_to();
            let inv = if q < 1.0 { format!("{:>14.2}", 1.0 / (1.0 - q)) } else { String::new() };
            writeln!(
                out,
                "{:>12.3} {:>14.12} {:>10} {inv}",
                v.value_iterated_to() as f64 / 1000.0,
                q,
                v.count_since_last_iteration()
            )?;
        }
    }
    writeln!(
        out,
        "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]",
        h.mean() / 1000.0,
        h.stdev() / 1000.0
    )?;
    writeln!(
        out,
        "#[Max     = {:>12.3}, Total count    = {:>12}]",
        h.max() as f64 / 1000.0,
        h.len()
    )?;
    writeln!(
        out,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        h.buckets(),
        h.distinct_values()
    )?;
    out.flush()
}

pub fn write_json(s: &Summary, path: &Path) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(s)?;
    std::fs::write(path, text + "\n")
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_round_trips_through_json_and_text() {
        let shared = Shared::new(Some(3));
        shared.measure_from(now_ns());
        assert_eq!(shared.claim(2), 2);
        assert_eq!(shared.claim(2), 1, "budget of 3 records");
        assert_eq!(shared.claim(2), 0);
        let stages = |lag, rtt| Some(RequestStages { send_lag_us: lag, round_trip_us: rtt });
        shared.record(true, 2, 2048, [(100, 1), (200, 1)], stages(Some(40), 900));
        shared.record(false, 5, 5, [(1, 5)], stages(Some(9_000), 9_000));
        shared.record(true, 1, 1024, [(5000, 1)], stages(None, 1100));
        shared.record_error(true, 7, 1);
        assert!(shared.stopped(), "record target reached");
        let s = summarize(
            &shared.rec.lock(),
            &SummaryInput {
                mode: "produce",
                label: None,
                bootstrap: "x:1",
                topic: "t",
                rate: None,
                end_ns: now_ns(),
                cpu_start: (0.0, 0.0),
            },
        );
        assert_eq!(s.records, 3);
        assert_eq!(s.errors.get("RequestTimedOut(7)"), Some(&1));
        assert!(s.latency_us.max >= 4990);
        let lag = s.send_lag_us.as_ref().expect("open-loop requests have a send lag");
        assert_eq!((lag.p50, lag.max), (40, 40), "warm-up stages are dropped");
        let rtt = s.round_trip_us.as_ref().expect("round trips recorded");
        assert!(rtt.p50 >= 899 && rtt.max >= 1099 && rtt.max < 1200, "{rtt:?}");
        let back: Summary = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back.latency_us.p50, s.latency_us.p50);
        let mut text = Vec::new();
        s.print(&mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("SUMMARY mode=produce records=3 "), "{text}");
        assert!(text.contains("per request us  send lag p50 40"), "{text}");
        let dir = tempfile::tempdir().unwrap();
        write_hgrm(&shared.rec.lock().latency_us, &dir.path().join("h.hgrm")).unwrap();
        let hgrm = std::fs::read_to_string(dir.path().join("h.hgrm")).unwrap();
        assert!(hgrm.contains("Total count    =            3"), "{hgrm}");
    }
}
