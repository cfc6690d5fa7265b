//! Named crash points for crash tests of a real broker process: when the environment
//! variable `SHARDLOG_CRASH_AT` names a point, the process SIGKILLs itself the first time
//! execution reaches it (`point@N`: the Nth time), leaving the disk exactly as a
//! power-cut-free crash would.
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
    // A transaction's PrepareCommit/PrepareAbort is durable, its markers not yet written.
    "txn.prepare_persisted",
];

/// The armed point and the how-manieth reach of it kills (1: the first).
fn armed() -> Option<(&'static str, u64)> {
    static AT: OnceLock<Option<(String, u64)>> = OnceLock::new();
    AT.get_or_init(|| std::env::var(CRASH_AT_ENV).ok().and_then(|v| parse(&v)))
        .as_ref()
        .map(|(point, nth)| (point.as_str(), *nth))
}

/// `point` or `point@N` (N ≥ 1; anything else counts as 1); `None` for an empty value.
fn parse(value: &str) -> Option<(String, u64)> {
    if value.is_empty() {
        return None;
    }
    Some(match value.split_once('@') {
        Some((point, nth)) => (point.to_string(), nth.parse().unwrap_or(1).max(1)),
        None => (value.to_string(), 1),
    })
}

/// Kills the process with SIGKILL if `SHARDLOG_CRASH_AT` is `point` (or `point@N` and this
/// is the Nth reach).
pub fn hit(point: &'static str) {
    static REACHED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    debug_assert!(POINTS.contains(&point), "unregistered crash point {point}");
    let Some((armed, nth)) = armed() else { return };
    if armed == point
        && REACHED.fetch_add(1, std::sync::atomic::Ordering::Relaxed).saturating_add(1) >= nth
    {
        eprintln!("shardlog: crash point {point} reached, killing the process");
        // SAFETY: kill(2) on our own pid has no memory-safety preconditions.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn a_point_may_name_its_nth_reach() {
        assert_eq!(parse("txn.prepare_persisted"), Some(("txn.prepare_persisted".into(), 1)));
        assert_eq!(parse("txn.prepare_persisted@200"), Some(("txn.prepare_persisted".into(), 200)));
        assert_eq!(parse("txn.prepare_persisted@x"), Some(("txn.prepare_persisted".into(), 1)));
        assert_eq!(parse("txn.prepare_persisted@0"), Some(("txn.prepare_persisted".into(), 1)));
        assert_eq!(parse(""), None);
    }
}
