//! Optional periodic `malloc_trim(0)`: hands the heap's free pages back to the kernel.
//!
//! Process-wide, on its own plain thread (no shard, no glommio): glibc keeps freed memory in
//! its arenas (one per thread that allocates: each shard, the mesh and helper threads), so RSS
//! can stay at a burst's high-water mark after the burst's memory is freed. Off by default;
//! `SHARDLOG_MALLOC_TRIM_INTERVAL_MS` (tuning.md) turns it on for hosts that want RSS to
//! follow live memory. perf/results/2026-12-02-rss.md has the figures with and without it.

use std::time::Duration;

/// The trim interval from `SHARDLOG_MALLOC_TRIM_INTERVAL_MS`; `None` (off) when unset or 0.
fn interval() -> Option<Duration> {
    std::env::var("SHARDLOG_MALLOC_TRIM_INTERVAL_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
}

/// Starts the trimming thread when configured; a failure to start it only logs.
pub(crate) fn start() {
    let Some(every) = interval() else { return };
    let spawned = std::thread::Builder::new().name("heap-trim".into()).spawn(move || loop {
        std::thread::sleep(every);
        trim();
    });
    match spawned {
        Ok(_) => tracing::info!(interval_ms = every.as_millis() as u64, "malloc_trim on a timer"),
        Err(err) => tracing::warn!(%err, "cannot start the malloc_trim thread"),
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim takes each arena's lock itself; any thread may call it.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
