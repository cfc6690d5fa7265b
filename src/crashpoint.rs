//! Named crash points for crash tests of a real broker process: when the environment
//! variable `SHARDLOG_CRASH_AT` names a point, the process SIGKILLs itself the first time
//! execution reaches it, leaving the disk exactly as a power-cut-free crash would.
//!
//! Lives on every shard (a process-wide, read-once setting). Invariant: with the variable
//! unset, [`hit`] is one relaxed load and a compare; it never changes behaviour.

use std::sync::OnceLock;

/// The environment variable naming the crash point.
pub const CRASH_AT_ENV: &str = "SHARDLOG_CRASH_AT";

/// Every crash point, in the order a compaction swap or a retention deletion reaches them.
pub const POINTS: &[&str] = &[
    "cleaner.cleaned_written",
    "cleaner.renamed_to_swap",
    "cleaner.old_renamed_to_deleted",
    "cleaner.swap_finished",
    "retention.log_start_written",
    "retention.log_renamed",
    "retention.all_renamed",
    "shard_move.source_closed",
    "shard_move.assignment_saved",
    "shard_move.target_opened",
];

fn armed() -> Option<&'static str> {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    AT.get_or_init(|| std::env::var(CRASH_AT_ENV).ok().filter(|s| !s.is_empty())).as_deref()
}

/// Kills the process with SIGKILL if `SHARDLOG_CRASH_AT` is `point`.
pub fn hit(point: &'static str) {
    debug_assert!(POINTS.contains(&point), "unregistered crash point {point}");
    if armed() == Some(point) {
        eprintln!("shardlog: crash point {point} reached, killing the process");
        // SAFETY: kill(2) on our own pid has no memory-safety preconditions.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}
