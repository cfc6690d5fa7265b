//! `serve --cpus LIST` pins the shards to the listed cores (so several brokers on one host
//! do not stack on core 0), checked on a running broker through its threads' affinity.

mod common;

use common::Broker;

/// The distinct affinity lists (`Cpus_allowed_list`) of the broker's shard threads (glommio
/// names them `shard-N`; an executor has a helper thread beside it, pinned the same way).
fn shard_affinities(pid: i32) -> Vec<String> {
    let mut out = std::collections::BTreeSet::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("tasks") {
        let dir = task.expect("task").path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !comm.starts_with("shard-") {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).expect("status");
        if let Some(line) = status.lines().find(|l| l.starts_with("Cpus_allowed_list:")) {
            out.insert(line["Cpus_allowed_list:".len()..].trim().to_string());
        }
    }
    out.into_iter().collect()
}

#[test]
fn shards_run_on_the_listed_cores() {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let last = cores - 1;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut broker = Broker::start_with(
        dir.path(),
        &["--cpus", &last.to_string(), "--spin-before-park-us", "0"],
    );
    // One core listed: one shard, pinned to it.
    assert_eq!(shard_affinities(broker.pid()), vec![last.to_string()]);
    broker.terminate();

    let dir = tempfile::tempdir().expect("tempdir");
    let list = if cores > 1 { format!("{last},0") } else { "0".to_string() };
    let mut broker = Broker::start_with(dir.path(), &["--cpus", &list, "--shards", "2"]);
    let mut want = vec![last.to_string(), "0".to_string()];
    want.sort();
    assert_eq!(shard_affinities(broker.pid()), want);
    broker.terminate();
}

#[test]
fn an_offline_core_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .args(["serve", "--listen", "127.0.0.1:0", "--cpus", "4095", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("core 4095 is not online"), "{err}");
}
