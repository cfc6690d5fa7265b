//! `shardlog bench produce` and `bench consume` against the real broker binary: record
//! counts match, and the summary line and the JSON result parse.
//!
//! Starts `shardlog serve --shards 1` on a free 127.0.0.1 port with a temp data dir and
//! drives it through the bench library entry point, and through `shardlog bench` as a
//! separate process, as a user would.

use std::collections::HashMap;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_shardlog");

struct Broker {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

fn start_broker() -> Broker {
    let dir = tempfile::tempdir().expect("tempdir");
    let addr = format!("127.0.0.1:{}", free_port());
    let child = Command::new(BIN)
        .args(["serve", "--shards", "1", "--listen", &addr, "--data-dir"])
        .arg(dir.path().join("data"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn shardlog serve");
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(&addr).is_err() {
        assert!(Instant::now() < deadline, "broker did not listen on {addr}");
        std::thread::sleep(Duration::from_millis(50));
    }
    Broker { child, addr, _dir: dir }
}

/// Runs `shardlog bench ARGS`; returns stdout after checking the exit status.
fn bench(args: &[&str]) -> String {
    let out = Command::new(BIN).arg("bench").args(args).output().expect("run shardlog bench");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "bench {args:?} failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Parses the `SUMMARY key=value ...` line.
fn summary_line(stdout: &str) -> HashMap<String, String> {
    let line = stdout.lines().find(|l| l.starts_with("SUMMARY ")).expect("SUMMARY line");
    line.split_whitespace()
        .skip(1)
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("json file")).expect("json")
}

/// Runs `bench ARGS` in-process through the library entry point.
fn bench_in_process(args: &[&str]) {
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: shardlog::bench::BenchArgs,
    }
    let argv = std::iter::once("bench").chain(args.iter().copied());
    let cli = <Cli as clap::Parser>::try_parse_from(argv).expect("valid bench arguments");
    shardlog::bench::run(cli.args).expect("bench run");
}

#[test]
fn produce_then_consume_counts_every_record() {
    let broker = start_broker();
    let out = tempfile::tempdir().expect("tempdir");
    let pj = out.path().join("produce.json");
    bench_in_process(&[
        "produce",
        "--bootstrap",
        &broker.addr,
        "--topic",
        "it",
        "--partitions",
        "4",
        "--records",
        "5000",
        "--record-size",
        "200",
        "--keys",
        "100",
        "--key-size",
        "16",
        "--quiet",
        "--json",
        pj.to_str().expect("path"),
    ]);
    let j = json(&pj);
    assert_eq!(j["records"], 5000);
    assert_eq!(j["errors"].as_object().map(|e| e.len()), Some(0), "{j}");
    assert!(j["records_per_s"].as_f64().expect("rate") > 0.0);
    assert!(j["latency_us"]["p99"].as_u64().expect("p99") > 0);

    let cj = out.path().join("consume.json");
    bench_in_process(&[
        "consume",
        "--bootstrap",
        &broker.addr,
        "--topic",
        "it",
        "--from",
        "earliest",
        "--to-end",
        "--quiet",
        "--json",
        cj.to_str().expect("path"),
    ]);
    assert_eq!(json(&cj)["records"], 5000);

    // e2e: every measured record made the round trip from producer to consumer.
    let ej = out.path().join("e2e.json");
    bench_in_process(&[
        "e2e",
        "--bootstrap",
        &broker.addr,
        "--topic",
        "it",
        "--rate",
        "2000",
        "--records",
        "1000",
        "--quiet",
        "--json",
        ej.to_str().expect("path"),
    ]);
    let e = json(&ej);
    assert_eq!(e["mode"], "e2e");
    assert_eq!(e["records"], 1000);
}

/// The `shardlog bench` subcommand as users run it: summary line, JSON, exit codes.
#[test]
fn cli_summary_parses_and_errors_are_one_line() {
    let broker = start_broker();
    let out = tempfile::tempdir().expect("tempdir");
    let pj = out.path().join("produce.json");
    let stdout = bench(&[
        "produce",
        "--bootstrap",
        &broker.addr,
        "--topic",
        "cli",
        "--partitions",
        "2",
        "--records",
        "2000",
        "--quiet",
        "--json",
        pj.to_str().expect("path"),
    ]);
    let s = summary_line(&stdout);
    assert_eq!(s["mode"], "produce");
    assert_eq!(s["records"], "2000");
    assert_eq!(s["errors"], "0");
    assert_eq!(json(&pj)["records"], 2000);
    let stdout = bench(&["consume", "--bootstrap", &broker.addr, "--topic", "cli", "--to-end"]);
    assert_eq!(summary_line(&stdout)["records"], "2000");
    for args in [
        vec![
            "produce",
            "--bootstrap",
            broker.addr.as_str(),
            "--topic",
            "missing",
            "--records",
            "1",
        ],
        vec!["produce", "--bootstrap", "127.0.0.1:1", "--records", "1"],
        vec!["produce", "--bootstrap", broker.addr.as_str(), "--record-size", "999999999"],
    ] {
        let out = Command::new(BIN).arg("bench").args(&args).output().expect("run");
        assert!(!out.status.success(), "{args:?} should fail");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: one line, got:\n{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// `bench consume --group`: two members consume exactly what was produced and commit it;
/// a second run in the same group finds nothing new, and `shardlog groups describe`
/// shows lag 0 on every partition.
#[test]
fn group_consume_commits_and_resumes() {
    let broker = start_broker();
    let out = tempfile::tempdir().expect("tempdir");
    let addr = broker.addr.as_str();
    bench(&[
        "produce",
        "--bootstrap",
        addr,
        "--topic",
        "grp",
        "--partitions",
        "4",
        "--records",
        "3000",
        "--quiet",
    ]);
    let consume = |json_name: &str| {
        let j = out.path().join(json_name);
        let stdout = bench(&[
            "consume",
            "--bootstrap",
            addr,
            "--topic",
            "grp",
            "--group",
            "bg",
            "--connections",
            "2",
            "--cpus",
            "1",
            "--to-end",
            "--quiet",
            "--json",
            j.to_str().expect("path"),
        ]);
        (summary_line(&stdout), json(&j))
    };
    let (first, j) = consume("first.json");
    assert_eq!(first["records"], "3000", "{first:?}");
    assert_eq!(j["errors"].as_object().map(|e| e.len()), Some(0), "{j}");
    let (second, _) = consume("second.json");
    assert_eq!(second["records"], "0", "offsets were committed: {second:?}");

    let desc = Command::new(BIN)
        .args(["groups", "--bootstrap-server", addr, "describe", "bg"])
        .output()
        .expect("run shardlog groups");
    let text = String::from_utf8_lossy(&desc.stdout).to_string();
    assert!(desc.status.success(), "{text}{}", String::from_utf8_lossy(&desc.stderr));
    let rows: Vec<Vec<&str>> = text
        .lines()
        .filter(|l| l.starts_with("bg "))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 4, "{text}");
    let committed: i64 = rows.iter().map(|r| r[3].parse::<i64>().expect("offset")).sum();
    assert_eq!(committed, 3000, "{text}");
    assert!(rows.iter().all(|r| r[5] == "0"), "lag 0 everywhere:\n{text}");
}
