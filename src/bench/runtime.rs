//! Bench executors: raising RLIMIT_MEMLOCK, one glommio executor per `--cpus` core of
//! the allowed CPU set, and splitting connections ("lanes") across them.
//!
//! Runs on the main thread, which only starts executors and joins them. Invariant: a
//! lane (one TCP connection and the partitions it carries) lives on exactly one
//! executor; nothing in a lane is shared across threads except the stats recorder.

use std::collections::BTreeMap;
use std::future::Future;

use glommio::{LocalExecutorBuilder, Placement};

/// Locked memory we ask for: glommio needs >= 512 KiB and registers its I/O buffers.
const MEMLOCK_BYTES: u64 = 64 * 1024 * 1024;
/// glommio's registered I/O memory per executor: the client does no file I/O.
const IO_MEMORY_BYTES: usize = 1024 * 1024;

/// Raises RLIMIT_MEMLOCK so glommio can start; explains how to fix it if we cannot.
pub fn raise_memlock() -> anyhow::Result<()> {
    let want = MEMLOCK_BYTES as libc::rlim_t;
    let mut cur = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read/write the struct we pass.
    unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut cur) };
    if cur.rlim_cur >= want {
        return Ok(());
    }
    let new = libc::rlimit { rlim_cur: want, rlim_max: cur.rlim_max.max(want) };
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &new) } == 0 {
        return Ok(());
    }
    // Not root: take what the hard limit allows, and fail only below glommio's floor.
    let soft = libc::rlimit { rlim_cur: cur.rlim_max, rlim_max: cur.rlim_max };
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &soft) };
    if cur.rlim_max >= 2 * IO_MEMORY_BYTES as libc::rlim_t {
        return Ok(());
    }
    anyhow::bail!(
        "RLIMIT_MEMLOCK is {} KiB and cannot be raised; run as root, or `ulimit -l 65536`, \
         or grant CAP_IPC_LOCK",
        cur.rlim_max / 1024
    )
}

fn builder(name: &str, cpu: Option<usize>) -> LocalExecutorBuilder {
    let placement = cpu.map_or(Placement::Unbound, Placement::Fixed);
    LocalExecutorBuilder::new(placement).name(name).io_memory(IO_MEMORY_BYTES)
}

/// Allowed cores of this process (respects `taskset`), in order.
fn allowed_cpus() -> Vec<usize> {
    core_affinity::get_core_ids().unwrap_or_default().into_iter().map(|c| c.id).collect()
}

/// Runs one future on a fresh executor and returns its output (control-plane work).
pub fn block_on<T, F, G>(make: G) -> anyhow::Result<T>
where
    G: FnOnce() -> F + Send + 'static,
    F: Future<Output = T> + 'static,
    T: Send + 'static,
{
    let handle = builder("bench-ctl", None)
        .spawn(make)
        .map_err(|e| anyhow::anyhow!("cannot start a glommio executor: {e}"))?;
    handle.join().map_err(|e| anyhow::anyhow!("bench executor failed: {e}"))
}

/// Runs `make(i)` on executor `i` for `i in 0..n`, each pinned to one allowed core.
pub fn run_executors<T, F, G>(n: usize, make: G) -> anyhow::Result<Vec<T>>
where
    G: Fn(usize) -> F + Send + Sync + Clone + 'static,
    F: Future<Output = T> + 'static,
    T: Send + 'static,
{
    let cpus = allowed_cpus();
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let cpu = (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
        let make = make.clone();
        let h = builder(&format!("bench-{i}"), cpu)
            .spawn(move || make(i))
            .map_err(|e| anyhow::anyhow!("cannot start a glommio executor: {e}"))?;
        handles.push(h);
    }
    handles
        .into_iter()
        .map(|h| h.join().map_err(|e| anyhow::anyhow!("bench executor failed: {e}")))
        .collect()
}

/// One connection of the load and the partitions it carries.
#[derive(Debug, Clone)]
pub struct Lane {
    pub executor: usize,
    pub addr: String,
    pub partitions: Vec<i32>,
}

/// Spreads partitions over `executors × connections` lanes per leader broker.
pub fn plan_lanes(
    leaders: &BTreeMap<i32, String>,
    executors: usize,
    connections: usize,
) -> Vec<Lane> {
    let mut by_broker: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (p, addr) in leaders {
        by_broker.entry(addr).or_default().push(*p);
    }
    let mut lanes = Vec::new();
    for (addr, parts) in by_broker {
        let n = executors * connections;
        let mut group: Vec<Lane> = (0..n)
            .map(|i| Lane { executor: i % executors, addr: addr.to_string(), partitions: vec![] })
            .collect();
        for (i, p) in parts.into_iter().enumerate() {
            group[i % n].partitions.push(p);
        }
        lanes.extend(group.into_iter().filter(|l| !l.partitions.is_empty()));
    }
    lanes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_cover_every_partition_once() {
        let leaders: BTreeMap<i32, String> =
            (0..10).map(|p| (p, format!("b{}:9092", p % 2))).collect();
        let lanes = plan_lanes(&leaders, 2, 2);
        assert_eq!(lanes.len(), 8);
        let mut all: Vec<i32> = lanes.iter().flat_map(|l| l.partitions.clone()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        assert!(lanes.iter().all(|l| l.partitions.iter().all(|p| leaders[p] == l.addr)));
        assert_eq!(plan_lanes(&leaders, 1, 64).len(), 10, "empty lanes are dropped");
    }
}
