//! The individual host checks of `doctor`, each returning findings with a fix.
//!
//! Main thread only. Thresholds come from `constants.rs` (the same ones `serve` uses when
//! it raises limits), so doctor and serve agree on what is fatal.

use std::io;
use std::path::{Path, PathBuf};

use super::Finding;
use crate::constants::{
    DOCTOR_FREE_DISK_BYTES_MIN, DOCTOR_FREE_DISK_RATIO_WARN, MEMLOCK_BYTES_MIN,
    MEMLOCK_BYTES_WANTED, NOFILE_MIN, NOFILE_WANTED,
};
use crate::io::host::{self as sys, CAP_SYS_RESOURCE};

/// Oldest kernel glommio 0.9 supports (io_uring features it relies on).
const KERNEL_MIN: (u32, u32) = (5, 8);
/// First kernel whose tmpfs accepts O_DIRECT.
const KERNEL_TMPFS_O_DIRECT: (u32, u32) = (6, 6);
/// Name of the probe file written inside the data directory.
const PROBE_FILE: &str = ".shardlog-doctor-probe";

fn parse_release(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Kernel version against glommio's minimum.
#[must_use]
pub fn kernel() -> Finding {
    let release = match sys::kernel_release() {
        Ok(r) => r,
        Err(err) => return Finding::warn("kernel", format!("cannot read uname: {err}"), "none"),
    };
    match parse_release(&release) {
        Some(v) if v >= KERNEL_MIN => Finding::ok("kernel", format!("Linux {release}")),
        Some(_) => Finding::fatal(
            "kernel",
            format!(
                "Linux {release} is older than {}.{}, which glommio needs",
                KERNEL_MIN.0, KERNEL_MIN.1
            ),
            "run on Linux 5.8 or later (6.x recommended)",
        ),
        None => Finding::warn(
            "kernel",
            format!("cannot parse kernel release {release:?}"),
            "check that the kernel is Linux 5.8 or later",
        ),
    }
}

/// Whether this process may create an io_uring.
#[must_use]
pub fn io_uring() -> Finding {
    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(0);
    match sys::io_uring_probe() {
        Ok(()) => Finding::ok(
            "io_uring",
            "available (kernel.io_uring_disabled = ".to_owned() + &disabled.to_string() + ")",
        ),
        Err(err) => {
            let fix = match err.raw_os_error() {
                Some(libc::ENOSYS) => "use a kernel built with CONFIG_IO_URING".to_owned(),
                Some(libc::EPERM) if disabled > 0 => format!(
                    "io_uring is disabled by sysctl kernel.io_uring_disabled = {disabled}: set it \
                     to 0 (or add this user to kernel.io_uring_group)"
                ),
                Some(libc::EPERM) => "a seccomp profile blocks io_uring (docker: run with a \
                                      profile that allows io_uring_setup/enter/register)"
                    .to_owned(),
                Some(libc::ENOMEM) => "raise the locked-memory limit (older kernels charge \
                                       rings to RLIMIT_MEMLOCK)"
                    .to_owned(),
                _ => "check kernel io_uring support".to_owned(),
            };
            Finding::fatal("io_uring", format!("cannot create an io_uring: {err}"), fix)
        }
    }
}

/// Memlock and open-files limits, and whether this process may raise them.
#[must_use]
pub fn limits() -> Vec<Finding> {
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(NOFILE_WANTED);
    vec![
        limit(&LimitSpec {
            check: "memlock",
            what: "locked-memory limit",
            resource: libc::RLIMIT_MEMLOCK,
            wanted: MEMLOCK_BYTES_WANTED,
            min: MEMLOCK_BYTES_MIN,
            ceiling: u64::MAX,
            bytes: true,
            why: "glommio cannot start below it",
            fix: "run as root with CAP_SYS_RESOURCE, or raise it before starting: \
                  `ulimit -l unlimited` (shell), LimitMEMLOCK=infinity (systemd), \
                  `--ulimit memlock=-1` (docker)",
        }),
        limit(&LimitSpec {
            check: "nofile",
            what: "open-files limit",
            resource: libc::RLIMIT_NOFILE,
            wanted: NOFILE_WANTED.min(nr_open),
            min: NOFILE_MIN,
            ceiling: nr_open,
            bytes: false,
            why: "each segment holds three descriptors",
            fix: "raise it before starting: `ulimit -n 1048576` (shell), \
                  LimitNOFILE=1048576 (systemd), `--ulimit nofile=1048576` (docker)",
        }),
    ]
}

struct LimitSpec {
    check: &'static str,
    what: &'static str,
    resource: libc::__rlimit_resource_t,
    wanted: u64,
    min: u64,
    /// The kernel's own cap on the hard limit (fs.nr_open for files).
    ceiling: u64,
    bytes: bool,
    why: &'static str,
    fix: &'static str,
}

fn limit(s: &LimitSpec) -> Finding {
    let (soft, hard) = match sys::rlimit(s.resource) {
        Ok(v) => v,
        Err(err) => {
            return Finding::fatal(s.check, format!("cannot read {}: {err}", s.what), s.fix)
        }
    };
    let show = |v: u64| if s.bytes { human_bytes(v) } else { human_count(v) };
    let privileged = sys::has_capability(CAP_SYS_RESOURCE);
    // What `serve` will reach: up to the hard limit, or beyond it with the capability.
    let reachable = if privileged {
        s.wanted.min(s.ceiling).max(hard.min(s.wanted))
    } else {
        hard.min(s.wanted)
    };
    let reachable = reachable.max(soft.min(s.wanted));
    let cap_note = if privileged { "with CAP_SYS_RESOURCE" } else { "no CAP_SYS_RESOURCE" };
    let now = format!("{} is {} (hard {}; {cap_note})", s.what, show(soft), show(hard));
    if soft >= s.wanted {
        Finding::ok(s.check, now)
    } else if reachable >= s.wanted {
        Finding::ok(s.check, format!("{now}; serve raises it to {}", show(s.wanted)))
    } else if reachable >= s.min {
        Finding::warn(
            s.check,
            format!(
                "{now}; serve can raise it only to {}, below the {} it asks for",
                show(reachable),
                show(s.wanted)
            ),
            s.fix,
        )
    } else {
        Finding::fatal(
            s.check,
            format!("{now} and cannot be raised to the minimum of {} ({})", show(s.min), s.why),
            s.fix,
        )
    }
}

/// The data directory: existence, filesystem, writability, O_DIRECT, free space.
#[must_use]
pub fn data_dir(dir: &Path) -> Vec<Finding> {
    let mut out = Vec::new();
    // Compared in absolute form: `nearest_existing` answers with an absolute path, so a
    // relative `--data-dir data-1` would never equal it and would pass for missing.
    let found = std::path::absolute(dir).and_then(|abs| Ok((nearest_existing(&abs)?, abs)));
    let (existing, exists) = match found {
        Ok((p, abs)) => {
            let exists = p == abs;
            (p, exists)
        }
        Err(err) => {
            out.push(Finding::fatal(
                "data-dir",
                format!("{}: {err}", dir.display()),
                "choose a valid path",
            ));
            return out;
        }
    };
    if exists && !dir.is_dir() {
        out.push(Finding::fatal(
            "data-dir",
            format!("{} exists and is not a directory", dir.display()),
            "point --data-dir at a directory",
        ));
        return out;
    }
    out.push(filesystem(&existing));
    match sys::space(&existing) {
        Ok(space) if space.read_only => out.push(Finding::fatal(
            "writable",
            format!("{} is on a read-only filesystem", existing.display()),
            "use a directory on a writable mount (remount rw or pick another path)",
        )),
        Ok(space) => {
            out.push(writable(dir, exists));
            out.push(free_disk(&existing, space.free_bytes, space.total_bytes));
        }
        Err(err) => {
            out.push(Finding::fatal("writable", format!("statvfs failed: {err}"), "check the path"))
        }
    }
    out
}

/// The nearest existing path at or above `abs` (an absolute path).
fn nearest_existing(abs: &Path) -> io::Result<PathBuf> {
    let mut p = abs;
    loop {
        if p.exists() {
            return Ok(p.to_path_buf());
        }
        p = p.parent().ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
    }
}

fn fs_name(magic: i64) -> &'static str {
    match magic {
        0xEF53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x2FC1_2FC1 => "zfs",
        0x0102_1994 => "tmpfs",
        0x8584_58f6 => "ramfs",
        0x794c_7630 => "overlayfs",
        0x6969 => "nfs",
        0xFF53_4D42 | 0xFE53_4D42 => "cifs/smb",
        0x6573_5546 => "fuse",
        _ => "unknown",
    }
}

fn filesystem(existing: &Path) -> Finding {
    let magic = match sys::fs_type(existing) {
        Ok(m) => m,
        Err(err) => {
            return Finding::warn("filesystem", format!("statfs failed: {err}"), "check the path")
        }
    };
    let name = fs_name(magic);
    let at = existing.display();
    match name {
        "tmpfs" | "ramfs" => Finding::warn(
            "filesystem",
            format!(
                "{at} is on {name}: it accepts O_DIRECT (Linux >= {}.{}) but keeps nothing across \
                 a reboot or power loss, so acknowledged records are not durable",
                KERNEL_TMPFS_O_DIRECT.0, KERNEL_TMPFS_O_DIRECT.1
            ),
            "use a disk-backed filesystem (ext4 or xfs) for anything but tests",
        ),
        "overlayfs" | "nfs" | "cifs/smb" | "fuse" => Finding::warn(
            "filesystem",
            format!("{at} is on {name}: direct I/O and fsync semantics are weaker or slower there"),
            "mount a local ext4/xfs volume for the data directory",
        ),
        "unknown" => Finding::warn(
            "filesystem",
            format!("{at} is on an unrecognized filesystem (magic {magic:#x})"),
            "prefer ext4 or xfs",
        ),
        _ => Finding::ok("filesystem", format!("{at} is on {name}")),
    }
}

fn writable(dir: &Path, exists: bool) -> Finding {
    if !exists {
        return Finding::warn(
            "o_direct",
            format!(
                "{} does not exist yet (serve creates it); O_DIRECT not checked",
                dir.display()
            ),
            format!("create it (`mkdir -p {}`) and run doctor again", dir.display()),
        );
    }
    match sys::o_direct_probe(&dir.join(PROBE_FILE)) {
        Ok(()) => Finding::ok("o_direct", format!("{} is writable with O_DIRECT", dir.display())),
        Err(err) => match err.raw_os_error() {
            Some(libc::EROFS) => Finding::fatal(
                "writable",
                format!("{} is on a read-only filesystem: {err}", dir.display()),
                "use a directory on a writable mount",
            ),
            Some(libc::EACCES | libc::EPERM) => Finding::fatal(
                "writable",
                format!("cannot write in {}: {err}", dir.display()),
                "fix the directory's owner/permissions for the broker's user",
            ),
            Some(libc::EINVAL | libc::EOPNOTSUPP) => Finding::fatal(
                "o_direct",
                format!("{} does not support O_DIRECT: {err}", dir.display()),
                "use ext4/xfs (tmpfs needs Linux >= 6.6); Shardlog writes with direct I/O only",
            ),
            _ => Finding::fatal(
                "writable",
                format!("O_DIRECT write/read probe in {} failed: {err}", dir.display()),
                "check the disk and the directory",
            ),
        },
    }
}

fn free_disk(at: &Path, free: u64, total: u64) -> Finding {
    let pct = if total == 0 { 0.0 } else { free as f64 / total as f64 };
    let msg = format!(
        "{} free of {} ({:.0}%) at {}",
        human_bytes(free),
        human_bytes(total),
        pct * 100.0,
        at.display()
    );
    if free < DOCTOR_FREE_DISK_BYTES_MIN {
        Finding::fatal(
            "disk",
            msg,
            format!("free at least {}", human_bytes(DOCTOR_FREE_DISK_BYTES_MIN)),
        )
    } else if pct < DOCTOR_FREE_DISK_RATIO_WARN {
        Finding::warn("disk", msg, "free space or set retention (retention.bytes/retention.ms)")
    } else {
        Finding::ok("disk", msg)
    }
}

/// Cores this process may run on, against the shard count.
#[must_use]
pub fn cores(shards: Option<u32>) -> Finding {
    let allowed: Vec<usize> = core_affinity::get_core_ids()
        .map(|ids| ids.into_iter().map(|c| c.id).collect())
        .unwrap_or_default();
    let online = sys::cpus_online();
    let n = allowed.len().max(1);
    let msg = format!("{n} of {online} online cores allowed ({allowed:?})");
    match shards {
        Some(s) if s as usize > n => Finding::warn(
            "cores",
            format!("{msg}; --shards {s} puts several spinning shards on one core"),
            format!("use --shards {n} or fewer, or widen the affinity (taskset/cpuset)"),
        ),
        _ => Finding::ok("cores", msg),
    }
}

/// The memory the process may use against what the shards' batch caches may hold (they are
/// heap, not page cache: never given back under pressure). A warning past half of it.
#[must_use]
pub fn memory(shards: Option<u32>, cache_bytes: Option<u64>) -> Finding {
    let shards = shards.unwrap_or_else(|| {
        u32::try_from(crate::shard::runtime::allowed_cores().len()).unwrap_or(1)
    });
    let Some(memory) = sys::memory_bytes() else {
        return Finding::ok("memory", "could not read /proc/meminfo; caches not checked");
    };
    let per_shard =
        cache_bytes.unwrap_or_else(|| crate::config::default_cache_bytes(Some(memory), shards));
    let total = per_shard.saturating_mul(u64::from(shards.max(1)));
    let msg = format!(
        "{} usable; batch caches up to {} ({shards} × {})",
        human_bytes(memory),
        human_bytes(total),
        human_bytes(per_shard)
    );
    if total > memory / 2 {
        return Finding::warn(
            "memory",
            format!("{msg}, more than half of it"),
            format!(
                "lower --cache-bytes to at most {}",
                human_bytes(memory / 2 / u64::from(shards.max(1)))
            ),
        );
    }
    Finding::ok("memory", msg)
}

fn human_bytes(v: u64) -> String {
    if v == u64::MAX {
        return "unlimited".into();
    }
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = v as f64;
    let mut i = 0;
    while x >= 1024.0 && i + 1 < UNITS.len() {
        x /= 1024.0;
        i += 1;
    }
    if x.fract() == 0.0 {
        format!("{x:.0} {}", UNITS[i])
    } else {
        format!("{x:.1} {}", UNITS[i])
    }
}

fn human_count(v: u64) -> String {
    if v == u64::MAX {
        "unlimited".into()
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Severity;

    #[test]
    fn kernel_release_parses() {
        assert_eq!(parse_release("6.18.44-fc-v657"), Some((6, 18)));
        assert_eq!(parse_release("5.4.0-150-generic"), Some((5, 4)));
        assert_eq!(parse_release("x"), None);
        assert!(parse_release("5.4.0").expect("parse") < KERNEL_MIN);
    }

    #[test]
    fn caches_past_half_of_memory_are_a_warning() {
        assert_eq!(memory(Some(2), Some(64 << 20)).severity, Severity::Ok);
        let f = memory(Some(1), Some(u64::MAX / 2));
        assert_eq!(f.severity, Severity::Warning, "{f}");
        assert!(f.fix.as_deref().is_some_and(|x| x.contains("--cache-bytes")), "{f}");
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(human_bytes(8 * 1024 * 1024), "8 MiB");
        assert_eq!(human_bytes(65_536), "64 KiB");
        assert_eq!(human_bytes(u64::MAX), "unlimited");
    }

    #[test]
    fn a_real_directory_passes_and_a_missing_one_is_a_warning() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = data_dir(dir.path());
        assert!(f.iter().all(|x| x.severity != Severity::Fatal), "{f:?}");
        assert!(!dir.path().join(PROBE_FILE).exists(), "probe file removed");
        let missing = dir.path().join("not/yet");
        let f = data_dir(&missing);
        assert!(
            f.iter().any(|x| x.check == "o_direct" && x.severity == Severity::Warning),
            "{f:?}"
        );
        assert!(!missing.exists(), "doctor creates nothing");
    }

    /// `serve --data-dir data-1` on a directory `shardlog format` made: a relative path
    /// that exists is checked, not taken for one "serve creates" (issue 32).
    #[test]
    fn a_relative_existing_directory_is_checked_not_called_missing() {
        let dir = tempfile::tempdir_in("target").expect("tempdir in target/");
        let name = dir.path().file_name().expect("name");
        let relative = Path::new("target").join(name);
        assert!(relative.is_relative() && relative.is_dir());
        let f = data_dir(&relative);
        assert!(f.iter().all(|x| !x.message.contains("does not exist yet")), "{f:?}");
        assert!(f.iter().any(|x| x.check == "o_direct" || x.check == "writable"), "{f:?}");
        let file = relative.join("a-file");
        std::fs::write(&file, b"x").expect("write");
        assert_eq!(data_dir(&file)[0].severity, Severity::Fatal, "a relative file is no dir");
    }

    #[test]
    fn a_file_is_not_a_data_dir() {
        let file = tempfile::NamedTempFile::new().expect("file");
        let f = data_dir(file.path());
        assert_eq!(f[0].severity, Severity::Fatal, "{f:?}");
    }
}
