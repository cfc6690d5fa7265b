//! The command line as people type it, against a real broker: `--bootstrap-server` (and
//! `--bootstrap`, `-b`) before or after the subcommand and its sub-subcommand, durations
//! and sizes with units, `--version` with the commit, and exit statuses: 2 with one line
//! for usage errors (clap's and our own validation's), 1 with one line naming the address
//! for an unreachable broker.

mod common;

use std::net::TcpListener;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::Broker;

fn shardlog(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shardlog")).args(args).output().expect("run shardlog")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs a command that must succeed; returns its stdout.
fn ok(args: &[&str]) -> String {
    let out = shardlog(args);
    assert!(out.status.success(), "{args:?} failed: {}", text(&out.stderr));
    text(&out.stdout)
}

/// Runs a command that must fail with `status`; returns its stderr, checked to be one line.
fn fails(args: &[&str], status: i32) -> String {
    let out = shardlog(args);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(status), "{args:?}: {err}{}", text(&out.stdout));
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: one line: {err}");
    assert!(err.starts_with("shardlog: "), "{err}");
    err
}

/// A 127.0.0.1 address nothing listens on (bound, then released).
fn closed_addr() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    drop(listener);
    addr
}

#[test]
fn bootstrap_server_anywhere_units_version_and_exit_statuses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start_with(dir.path(), &["--shards", "1"]);
    let b = broker.addr.as_str();

    // Before, between and after the subcommand and its sub-subcommand, under three names.
    for args in [
        &["groups", "list", "--bootstrap-server", b][..],
        &["--bootstrap-server", b, "groups", "list"],
        &["groups", "--bootstrap-server", b, "list"],
        &["groups", "list", "-b", b],
        &["-b", b, "groups", "list"],
        &["groups", "list", "--bootstrap", b],
    ] {
        assert!(ok(args).starts_with("GROUP"), "{args:?}");
    }
    let report = ok(&["groups", "describe", "absent-group", "--bootstrap-server", b]);
    assert!(report.contains("absent-group"), "{report}");
    ok(&["configs", "describe", "--broker", "0", "-b", b]);
    ok(&["--bootstrap", b, "configs", "describe", "--broker", "0"]);

    // Durations and sizes with units; the run stops after about 2 s.
    let json = dir.path().join("produce.json");
    let started = Instant::now();
    ok(&[
        "bench",
        "produce",
        "--duration",
        "2s",
        "--warmup",
        "200ms",
        "--topic",
        "units",
        "--partitions",
        "1",
        "--record-size",
        "1KiB",
        "--batch-bytes",
        "16KiB",
        "--linger-ms",
        "1ms",
        "--quiet",
        "--json",
        json.to_str().expect("utf-8 path"),
        "-b",
        b,
    ]);
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_secs(2) && elapsed < Duration::from_secs(30), "{elapsed:?}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parse");
    let records = summary["records"].as_u64().expect("records");
    assert!(records > 0, "{summary}");
    assert_eq!(summary["bytes"].as_u64(), Some(records * 1024), "1KiB records: {summary}");
    let duration_s = summary["duration_s"].as_f64().expect("duration_s");
    assert!((1.5..10.0).contains(&duration_s), "measured about 2 s: {duration_s}");
    // A plain number keeps the flag's unit (seconds for --duration, bytes for sizes).
    ok(&["bench", "produce", "-b", b, "--topic", "units", "--duration", "1", "--quiet"]);

    // Usage errors: exit 2, one line saying what to write instead.
    let err = fails(&["bench", "produce", "-b", b, "--duration", "5x"], 2);
    assert!(err.contains("--duration") && err.contains("10s"), "{err}");
    let err = fails(&["bench", "produce", "-b", b, "--record-size", "1K"], 2);
    assert!(err.contains("KiB"), "{err}");
    let err = fails(&["bench", "produce", "-b", b, "--duration", "0s"], 2);
    assert!(err.contains("--duration must be > 0"), "{err}");
    let err = fails(&["groups", "list", "--bogus", "-b", b], 2);
    assert!(err.contains("--bogus") && err.contains("shardlog groups list --help"), "{err}");
    let err = fails(&["configs", "alter", "--topic", "units", "--add-config", "nokey", "-b", b], 2);
    assert!(err.contains("key=val"), "{err}");
    let unknown = ["configs", "alter", "--topic", "units", "--add-config", "no.such.config=1"];
    let err = fails(&[&unknown[..], &["-b", b]].concat(), 2);
    assert!(err.contains("INVALID_CONFIG") && err.contains("no.such.config"), "{err}");
    // A Kafka address is not silently taken for top's admin endpoint.
    let err = fails(&["top", "--bootstrap-server", b], 2);
    assert!(err.contains("--admin"), "{err}");
    let err = fails(&["--bootstrap-server", b, "serve"], 2);
    assert!(err.contains("serve"), "{err}");

    // Runtime failures: exit 1, one line naming the address.
    let closed = closed_addr();
    let err = fails(&["groups", "list", "-b", &closed], 1);
    assert!(err.contains(&closed), "{err}");
    let err = fails(&["--bootstrap-server", &closed, "bench", "produce", "--duration", "1s"], 1);
    assert!(err.contains(&closed), "{err}");
    for args in [&["top", "--admin", &closed][..], &["--admin", &closed, "top"]] {
        let err = fails(args, 1);
        assert!(err.contains(&closed) && err.contains("admin endpoint"), "{args:?}: {err}");
    }
}

#[test]
fn version_names_the_commit() {
    let out = ok(&["--version"]);
    let version = out.trim();
    let rest = version.strip_prefix(concat!("shardlog ", env!("CARGO_PKG_VERSION"), " (commit "));
    let commit = rest.and_then(|r| r.strip_suffix(')')).unwrap_or_else(|| panic!("{version}"));
    let hex = !commit.is_empty() && commit.chars().all(|c| c.is_ascii_hexdigit());
    assert!(hex || commit == "unknown", "{version}");
    assert_eq!(ok(&["-V"]), out);
}
