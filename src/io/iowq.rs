//! Where io_uring's worker threads run. glommio submits fsync (and any operation the kernel
//! cannot complete inline) to the calling thread's io-wq workers, which inherit the shard
//! thread's pinning: a durable acknowledgement's fdatasync then waits for the same core the
//! busy reactor holds. `SHARDLOG_IOWQ_CPUS` (a cpu list, e.g. `0-1`) lets the workers of
//! every shard run on those cores instead (`IORING_REGISTER_IOWQ_AFF`, Linux 5.14+).
//!
//! Called on each shard thread (the setting is per task: the calling thread's io-wq);
//! touches no ring state. Invariant: on failure nothing changes and the reason is returned.

use std::io;

/// `io_uring_register` opcode that sets the calling task's io-wq worker affinity.
const IORING_REGISTER_IOWQ_AFF: libc::c_uint = 17;

/// Parses a cpu list such as `0,2-3`.
pub fn parse_cpu_list(list: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let lo: usize = lo.parse().map_err(|_| format!("bad cpu `{part}` in `{list}`"))?;
        let hi: usize = hi.parse().map_err(|_| format!("bad cpu `{part}` in `{list}`"))?;
        if lo > hi || hi >= libc::CPU_SETSIZE as usize {
            return Err(format!("bad cpu range `{part}` in `{list}`"));
        }
        out.extend(lo..=hi);
    }
    if out.is_empty() {
        return Err(format!("empty cpu list `{list}`"));
    }
    Ok(out)
}

/// Lets the calling thread's io-wq workers run on `cpus`. Needs one of this process's
/// io_uring file descriptors (any: the setting belongs to the calling task).
pub fn set_worker_cpus(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET only write inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: c < CPU_SETSIZE (parse_cpu_list).
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no io_uring file descriptor found");
    for fd in ring_fds() {
        // SAFETY: the kernel reads size_of::<cpu_set_t>() bytes from &set.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                fd,
                IORING_REGISTER_IOWQ_AFF,
                std::ptr::addr_of!(set),
                std::mem::size_of::<libc::cpu_set_t>(),
            )
        };
        if rc == 0 {
            return Ok(());
        }
        last = io::Error::last_os_error();
    }
    Err(last)
}

/// This process's io_uring file descriptors.
fn ring_fds() -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return Vec::new() };
    dir.filter_map(Result::ok)
        .filter(|e| {
            std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().contains("io_uring"))
        })
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_and_bad_ones_are_named() {
        assert_eq!(parse_cpu_list("0-1").unwrap(), vec![0, 1]);
        assert_eq!(parse_cpu_list("3, 0,5-6").unwrap(), vec![3, 0, 5, 6]);
        assert!(parse_cpu_list("").unwrap_err().contains("empty"));
        assert!(parse_cpu_list("2-1").unwrap_err().contains("2-1"));
        assert!(parse_cpu_list("x").unwrap_err().contains("`x`"));
    }
}
