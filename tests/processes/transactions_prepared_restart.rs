//! A transaction a crash left prepared is completed after the restart without any
//! transactional client: the broker dies between the durable PrepareCommit and the markers
//! (crash point `txn.prepare_persisted`), restarts, and a read_committed consumer alone must
//! see the committed records. The transaction coordinator used to start on the first
//! transactional call, so the transaction stayed open and the partition's last stable
//! offset (with every read_committed consumer) stuck (seen once in `transactions_txnindex`
//! under load). Kafka's coordinator loads its partitions when elected. Needs
//! `tests/interop/install.sh` (skipped otherwise, said on stderr).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{killed_by_sigkill, Broker, Wire};

const TOPIC: &str = "prepared";

fn py(python: &Path, addr: &str, args: &[&str]) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/transactions/prepared.py");
    let out = Command::new(python)
        .arg(&script)
        .args([addr, TOPIC])
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .expect("run prepared.py");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "prepared.py {args:?} failed: {stdout}");
    stdout.trim().to_string()
}

#[test]
fn a_prepared_transaction_completes_after_a_restart_with_only_consumers() {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".interop-cache/venv/bin/python3");
    if !python.exists() {
        eprintln!("[prepared] interop clients not installed (tests/interop/install.sh): skipped");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let one_shard = ["--shards", "1"];
    let mut armed = Broker::start_env(
        dir.path(),
        &one_shard,
        &[(shardlog::crashpoint::CRASH_AT_ENV, "txn.prepare_persisted")],
    );
    Wire::connect(&armed.addr).create_topic(TOPIC, 1, &[]);
    assert_eq!(py(&python, &armed.addr, &["commit"]), "sent");
    let status = armed.wait_for_exit(Duration::from_secs(30));
    assert!(killed_by_sigkill(&status), "the broker did not die at txn.prepare_persisted");
    let broker = Broker::start_with(dir.path(), &one_shard);
    let started = Instant::now();
    let got = py(&python, &broker.addr, &["read"]);
    eprintln!(
        "[prepared] read_committed after the restart: {got} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(got, r#"["p0", "p1", "p2"]"#, "the prepared commit was completed");
}
