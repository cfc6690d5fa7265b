//! `shardlog doctor`: checks the host before serving and says what to fix.
//!
//! Checks: kernel version and io_uring availability, locked-memory and open-files limits
//! (and whether this process may raise them), the data directory's filesystem (tmpfs
//! keeps nothing across a reboot: a warning), whether it is writable, O_DIRECT support,
//! free disk, and the cores this process may run on. `serve` calls [`preflight`] at start
//! and refuses to start only on a [`Severity::Fatal`] finding.
//!
//! Runs on the main thread before any shard exists (plain syscalls through `libc`, no
//! executor). Invariant: checks never change the host; the only write is a probe file
//! inside the data directory, removed afterwards (a missing data directory is checked
//! through its nearest existing ancestor, where nothing is written).

mod checks;

pub use crate::io::host::memory_bytes;

use std::fmt;
use std::path::{Path, PathBuf};

pub use checks::{cores, data_dir, io_uring, kernel, limits};

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Ok,
    /// Works, but not as well or as safely as it could: say how to improve it.
    Warning,
    /// The broker cannot serve correctly: `serve` refuses to start.
    Fatal,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Severity::Ok => "ok",
            Severity::Warning => "WARN",
            Severity::Fatal => "FATAL",
        })
    }
}

/// One check's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub severity: Severity,
    /// Short name of the check (`kernel`, `memlock`, `filesystem`, ...).
    pub check: &'static str,
    pub message: String,
    /// What to do about it, for warnings and fatal findings.
    pub fix: Option<String>,
}

impl Finding {
    #[must_use]
    pub fn ok(check: &'static str, message: impl Into<String>) -> Self {
        Self { severity: Severity::Ok, check, message: message.into(), fix: None }
    }

    #[must_use]
    pub fn warn(check: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Self { severity: Severity::Warning, check, message: message.into(), fix: Some(fix.into()) }
    }

    #[must_use]
    pub fn fatal(check: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Self { severity: Severity::Fatal, check, message: message.into(), fix: Some(fix.into()) }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{:>5}] {:<11} {}", self.severity, self.check, self.message)?;
        if let Some(fix) = &self.fix {
            write!(f, "\n{:>20}fix: {fix}", "")?;
        }
        Ok(())
    }
}

/// Flags of `shardlog doctor`.
#[derive(clap::Args, Debug, Clone)]
pub struct DoctorArgs {
    /// Data directory the broker will use.
    #[arg(long, default_value = "./shardlog-data")]
    pub data_dir: PathBuf,
    /// Shards the broker will run (default: one per allowed core).
    #[arg(long)]
    pub shards: Option<u32>,
}

/// Every check, in the order they are printed.
#[must_use]
pub fn preflight(data_dir: &Path) -> Vec<Finding> {
    preflight_with_shards(data_dir, None)
}

/// [`preflight`] also checking that `shards` fit the allowed cores.
#[must_use]
pub fn preflight_with_shards(data_dir: &Path, shards: Option<u32>) -> Vec<Finding> {
    preflight_full(data_dir, shards, None)
}

/// Every check, with the shard count and per-shard cache the broker will run with (each
/// defaulted as `serve` defaults it when `None`).
#[must_use]
pub fn preflight_full(
    data_dir: &Path,
    shards: Option<u32>,
    cache_bytes: Option<u64>,
) -> Vec<Finding> {
    let mut findings = vec![kernel(), io_uring()];
    findings.extend(limits());
    findings.extend(checks::data_dir(data_dir));
    findings.push(cores(shards));
    findings.push(checks::memory(shards, cache_bytes));
    findings
}

/// The fatal findings of `findings`, as one message for `serve` to refuse with (`None`
/// when there is none).
#[must_use]
pub fn fatal_message(findings: &[Finding]) -> Option<String> {
    let fatal: Vec<String> = findings
        .iter()
        .filter(|f| f.severity == Severity::Fatal)
        .map(|f| match &f.fix {
            Some(fix) => format!("{}: {} (fix: {fix})", f.check, f.message),
            None => format!("{}: {}", f.check, f.message),
        })
        .collect();
    (!fatal.is_empty()).then(|| format!("host check failed: {}", fatal.join("; ")))
}

/// What `serve` runs before anything else: creates the data directory (serve would
/// anyway, and O_DIRECT can only be probed inside it), runs every check, logs warnings,
/// and refuses with one clear message when a finding is fatal.
pub fn serve_preflight(data_dir: &Path, shards: u32, cache_bytes: u64) -> anyhow::Result<()> {
    std::fs::create_dir_all(data_dir)
        .map_err(|e| anyhow::anyhow!("cannot create data dir {}: {e}", data_dir.display()))?;
    let findings = preflight_full(data_dir, Some(shards), Some(cache_bytes));
    for f in findings.iter().filter(|f| f.severity == Severity::Warning) {
        tracing::warn!("{}: {} (fix: {})", f.check, f.message, f.fix.as_deref().unwrap_or("-"));
    }
    match fatal_message(&findings) {
        Some(msg) => Err(anyhow::anyhow!("{msg}; run `shardlog doctor` for details")),
        None => Ok(()),
    }
}

/// `shardlog doctor`: prints every finding; fails when one is fatal.
pub fn run(args: &DoctorArgs) -> anyhow::Result<()> {
    let findings = preflight_with_shards(&args.data_dir, args.shards);
    for f in &findings {
        println!("{f}");
    }
    let warnings = findings.iter().filter(|f| f.severity == Severity::Warning).count();
    let fatal = findings.iter().filter(|f| f.severity == Severity::Fatal).count();
    println!("{} checks: {fatal} fatal, {warnings} warnings", findings.len());
    if fatal > 0 {
        anyhow::bail!("{fatal} fatal finding(s): shardlog serve would refuse to start");
    }
    Ok(())
}
