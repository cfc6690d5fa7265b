//! Thin, safe wrappers over the host's syscalls: uname, rlimits, capabilities,
//! statfs/statvfs, an io_uring setup probe and an O_DIRECT write/read probe. `doctor` checks
//! the host with them; the broker reads a data directory's free space with [`space`].
//!
//! Any thread; the probes run on the main thread before shards start. Every `unsafe` block is a plain syscall on a
//! zeroed or stack-owned struct; errors come back as `std::io::Error`.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// (soft, hard) limit of `resource`; `u64::MAX` means unlimited.
pub fn rlimit(resource: libc::__rlimit_resource_t) -> io::Result<(u64, u64)> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the stack struct it is given.
    if unsafe { libc::getrlimit(resource, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((lim.rlim_cur, lim.rlim_max))
}

/// Whether capability number `cap` is in this process's effective set.
#[must_use]
pub fn has_capability(cap: u32) -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|mask| cap < 64 && mask & (1u64 << cap) != 0)
}

/// CAP_SYS_RESOURCE (linux/capability.h): lets a process raise hard rlimits.
pub const CAP_SYS_RESOURCE: u32 = 24;

/// The kernel release string (`uname -r`).
pub fn kernel_release() -> io::Result<String> {
    // SAFETY: uname fills a zeroed struct of fixed-size arrays.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut uts) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let bytes: Vec<u8> =
        uts.release.iter().take_while(|c| **c != 0).map(|c| c.to_ne_bytes()[0]).collect();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Tries to create a small io_uring and closes it.
pub fn io_uring_probe() -> io::Result<()> {
    // io_uring_params is 120 bytes of plain integers; zero means "defaults".
    let mut params = [0u8; 120];
    // SAFETY: io_uring_setup reads/writes `params`, which is large enough; the returned
    // descriptor is closed right away.
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 4u32, params.as_mut_ptr()) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a descriptor we own.
    unsafe { libc::close(fd as libc::c_int) };
    Ok(())
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput.into())
}

/// Filesystem magic number of `path` (statfs `f_type`).
pub fn fs_type(path: &Path) -> io::Result<i64> {
    let c = c_path(path)?;
    // SAFETY: statfs writes into a zeroed struct; `c` is a valid C string.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)]
    Ok(st.f_type as i64)
}

/// Space and mount flags of the filesystem holding `path`.
pub struct Space {
    pub free_bytes: u64,
    pub total_bytes: u64,
    pub read_only: bool,
}

pub fn space(path: &Path) -> io::Result<Space> {
    let c = c_path(path)?;
    // SAFETY: statvfs writes into a zeroed struct; `c` is a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let frsize = st.f_frsize;
    Ok(Space {
        free_bytes: st.f_bavail.saturating_mul(frsize),
        total_bytes: st.f_blocks.saturating_mul(frsize),
        read_only: st.f_flag & libc::ST_RDONLY != 0,
    })
}

/// Writes one aligned 4 KiB block with O_DIRECT to `file`, fsyncs, reads it back and
/// compares; removes the file whatever happens.
pub fn o_direct_probe(file: &Path) -> io::Result<()> {
    let result = o_direct_round_trip(file);
    let _ = std::fs::remove_file(file);
    result
}

fn o_direct_round_trip(file: &Path) -> io::Result<()> {
    use std::fs::OpenOptions;
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    const BLOCK: usize = 4096;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(file)?;
    // An aligned buffer: allocate one block more and start at the aligned offset.
    let mut raw = vec![0u8; BLOCK * 2];
    let start = raw.as_ptr().align_offset(BLOCK);
    let buf = &mut raw[start..start + BLOCK];
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    f.write_all_at(buf, 0)?;
    f.sync_all()?;
    let expected = buf.to_vec();
    buf.fill(0);
    f.read_exact_at(buf, 0)?;
    if *buf != expected[..] {
        return Err(io::Error::other("O_DIRECT read returned other bytes than written"));
    }
    Ok(())
}

/// Number of CPUs online (may exceed the allowed set).
#[must_use]
pub fn cpus_online() -> usize {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}

/// The memory this process may use: the host's `MemTotal`, or its cgroup's `memory.max`
/// (v2) or `memory.limit_in_bytes` (v1) when that is lower. `None` when neither can be read.
#[must_use]
pub fn memory_bytes() -> Option<u64> {
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|text| {
        let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        kib.checked_mul(1024)
    })?;
    let limit = ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .filter_map(|v| v.trim().parse::<u64>().ok())
        .min();
    Some(limit.map_or(total, |l| l.min(total)))
}
