//! The admin endpoint's port at start-up (issue 32: the README's three nodes all took the
//! default 127.0.0.1:9644, and two of them ran without metrics, `top` or shard moves). A
//! taken `--admin-listen` fails the start with status 1 and one line naming the address, as
//! Kafka fails on a taken listener; a taken default falls back to an ephemeral port and
//! says which at WARN.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Far above the broker's own 5 s wait for a port held by a dying predecessor: a bound for
/// a broker that wrongly keeps running, not a timing assertion.
const GIVE_UP: Duration = Duration::from_secs(60);

fn serve(data_dir: &std::path::Path, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .args(["serve", "--listen", "127.0.0.1:0", "--shards", "1", "--log-level", "info"])
        .arg("--data-dir")
        .arg(data_dir)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn shardlog")
}

/// The child's stderr lines, as they come.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[broker] {line}");
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

#[test]
fn a_taken_admin_listen_address_fails_the_start_naming_it() {
    let held = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = held.local_addr().expect("addr").to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = serve(dir.path(), &["--admin-listen", &addr]);
    let lines = lines_of(&mut child);
    let deadline = Instant::now() + GIVE_UP;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the broker kept running with its --admin-listen {addr} taken");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr: Vec<String> = lines.iter().collect();
    assert_eq!(status.code(), Some(1), "{stderr:?}");
    let errors: Vec<&String> = stderr.iter().filter(|l| l.starts_with("shardlog: ")).collect();
    assert_eq!(errors.len(), 1, "one error line: {stderr:?}");
    assert!(errors[0].contains(&addr) && errors[0].contains("admin"), "{stderr:?}");
    drop(held);
}

#[test]
fn a_taken_default_admin_port_falls_back_to_one_it_names() {
    // Held here unless another process holds it already: taken either way.
    let _held = TcpListener::bind("127.0.0.1:9644");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = serve(dir.path(), &[]);
    let lines = lines_of(&mut child);
    let deadline = Instant::now() + GIVE_UP;
    let mut seen = Vec::new();
    let listening = loop {
        let wait = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(wait) {
            Ok(line) => {
                let found = line
                    .split("admin HTTP (metrics) listening on ")
                    .nth(1)
                    .map(|rest| rest.split_whitespace().next().unwrap_or_default().to_string());
                seen.push(line);
                if let Some(addr) = found {
                    break Some(addr);
                }
            }
            Err(_) => break None,
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    let listening = listening.unwrap_or_else(|| panic!("no admin endpoint: {seen:?}"));
    let port = listening.rsplit(':').next().expect("port");
    assert_ne!(port, "9644", "{seen:?}");
    let warned = seen.iter().any(|l| {
        l.contains("WARN") && l.contains("127.0.0.1:9644") && l.contains(&format!("port {port}"))
    });
    assert!(warned, "a WARN names the default and the port chosen: {seen:?}");
}
