//! A transaction a crash left prepared is completed after the restart without any
//! transactional client: the broker dies between the durable PrepareCommit and the markers
//! (crash point `txn.prepare_persisted`), restarts, and a read_committed consumer alone must
//! see the committed records. The transaction coordinator used to start on the first
//! transactional call, so the transaction stayed open and the partition's last stable
//! offset (with every read_committed consumer) stuck (seen once in `transactions_txnindex`
//! under load). Kafka's coordinator loads its partitions when elected. Needs
//! `tests/interop/install.sh` (skipped otherwise, said on stderr). Ports 127.0.0.1:32900-32901.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::Wire;

const TOPIC: &str = "prepared";
const ADDR: &str = "127.0.0.1:32900";

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(dir: &Path, crash_at: Option<&str>) -> Server {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_shardlog"));
    cmd.arg("serve")
        .args(["--listen", ADDR, "--admin-listen", "127.0.0.1:32901", "--shards", "1"])
        .arg("--data-dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(point) = crash_at {
        cmd.env(shardlog::crashpoint::CRASH_AT_ENV, point);
    }
    let mut child = cmd.spawn().expect("spawn shardlog");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("shardlog listening on") {
                let _ = tx.send(());
            }
            if line.contains("transaction") || line.contains("crash point") {
                eprintln!("[broker] {line}");
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(90)).expect("broker started");
    Server(child)
}

fn py(python: &Path, args: &[&str]) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/transactions/prepared.py");
    let out = Command::new(python)
        .arg(&script)
        .args([ADDR, TOPIC])
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
    let mut armed = start(dir.path(), Some("txn.prepare_persisted"));
    Wire::connect(ADDR).create_topic(TOPIC, 1, &[]);
    assert_eq!(py(&python, &["commit"]), "sent");
    let deadline = Instant::now() + Duration::from_secs(30);
    while armed.0.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "the broker did not reach txn.prepare_persisted");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(armed);
    let _server = start(dir.path(), None);
    let started = Instant::now();
    let got = py(&python, &["read"]);
    eprintln!(
        "[prepared] read_committed after the restart: {got} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(got, r#"["p0", "p1", "p2"]"#, "the prepared commit was completed");
}
