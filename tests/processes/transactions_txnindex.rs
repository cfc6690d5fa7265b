//! Per-segment `.txnindex` files (issue 17) against Kafka's own reader: a confluent-kafka
//! transactional producer commits and aborts transactions on one broker with small segments;
//! after a clean stop, and again after a SIGKILL and a restart, Kafka's `DumpLogSegments`
//! reads every `.txnindex` and `.log` of the partition, and the index entries must be exactly
//! the aborted transactions the log's ABORT markers say, each in the file of the segment that
//! holds its marker. After each restart a read_committed consumer still sees no aborted record
//! (and a read_uncommitted one sees all of them).
//!
//! Needs `.interop-cache` (the venv with confluent-kafka and the Kafka 4.1.2 jars); skipped
//! with a message without it.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use common::{Broker, Wire};

const TOPIC: &str = "txi";
/// Transactions per producing run (every third is aborted).
const TXNS: usize = 12;

struct Tools {
    python: PathBuf,
    classpath: String,
    driver: PathBuf,
}

fn tools() -> Option<Tools> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let cache = root.join(".interop-cache");
    let python = cache.join("venv/bin/python3");
    let libs = cache.join("kafka-4.1.2/libs");
    (python.exists() && libs.exists()).then(|| Tools {
        python,
        classpath: format!("{}/*", libs.display()),
        driver: root.join("tests/transactions/txnindex.py"),
    })
}

fn driver(t: &Tools, bootstrap: &str, args: &[&str]) -> String {
    let started = Instant::now();
    let out = Command::new(&t.python)
        .arg(&t.driver)
        .args([bootstrap, TOPIC])
        .args(args)
        .output()
        .expect("run txnindex.py");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!(
        "[txnindex] {args:?} in {:.1}s: {stdout}{}",
        started.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "txnindex.py {args:?} failed");
    stdout
}

/// One aborted transaction: (producer id, first offset, last offset).
type Entry = (i64, i64, i64);

fn field(line: &str, name: &str) -> Option<i64> {
    let mut words = line.split_whitespace();
    while let Some(w) = words.next() {
        if w == name {
            return words.next()?.parse().ok();
        }
    }
    None
}

/// What `DumpLogSegments` says about the partition directory: the `.txnindex` entries by
/// file base (with lastStableOffset), and the aborted transactions the `.log` files' markers
/// imply, by the base of the segment holding the marker.
struct Dump {
    index: BTreeMap<i64, Vec<(Entry, i64)>>,
    from_log: BTreeMap<i64, Vec<Entry>>,
    markers: usize,
}

fn dump(t: &Tools, dir: &Path) -> Dump {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("partition dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".log") || n.ends_with(".txnindex"))
        .collect();
    names.sort();
    let files: Vec<String> = names.iter().map(|n| dir.join(n).display().to_string()).collect();
    let started = Instant::now();
    let out = Command::new("java")
        .args(["-Xmx256m", "-cp", &t.classpath, "kafka.tools.DumpLogSegments"])
        .args(["--deep-iteration", "--files", &files.join(",")])
        .output()
        .expect("run DumpLogSegments");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!(
        "[txnindex] DumpLogSegments of {} files in {:.1}s",
        files.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(out.status.success(), "DumpLogSegments: {}", String::from_utf8_lossy(&out.stderr));
    let mut d = Dump { index: BTreeMap::new(), from_log: BTreeMap::new(), markers: 0 };
    // Producer id -> first offset of its open transaction.
    let mut open: HashMap<i64, i64> = HashMap::new();
    let (mut file_base, mut is_txnindex) = (0i64, false);
    // The current batch: (producer id, base offset, transactional, control).
    let mut batch: Option<(i64, i64, bool, bool)> = None;
    for line in text.lines() {
        if let Some(path) = line.strip_prefix("Dumping ") {
            let name = Path::new(path.trim()).file_name().expect("name").to_string_lossy();
            file_base = name[..20].parse().expect("base offset in the file name");
            is_txnindex = name.ends_with(".txnindex");
            if is_txnindex {
                d.index.entry(file_base).or_default();
            }
            continue;
        }
        if is_txnindex {
            if let (Some(pid), Some(first), Some(last), Some(lso)) = (
                field(line, "producerId:"),
                field(line, "firstOffset:"),
                field(line, "lastOffset:"),
                field(line, "lastStableOffset:"),
            ) {
                d.index.entry(file_base).or_default().push(((pid, first, last), lso));
            }
            continue;
        }
        if line.starts_with("baseOffset:") {
            let pid = field(line, "producerId:").expect("producerId");
            let base = field(line, "baseOffset:").expect("baseOffset");
            let txn = line.contains("isTransactional: true");
            let control = line.contains("isControl: true");
            if txn && !control {
                open.entry(pid).or_insert(base);
            }
            batch = Some((pid, base, txn, control));
        } else if line.trim_start().starts_with("| offset:") {
            let Some((pid, _, true, true)) = batch else { continue };
            let offset = field(line, "offset:").expect("offset");
            let first = open.remove(&pid).unwrap_or(offset);
            if line.contains("endTxnMarker: ABORT") {
                d.from_log.entry(file_base).or_default().push((pid, first, offset));
            }
            d.markers += 1;
        }
    }
    d
}

/// The `.txnindex` files say exactly what the markers in the `.log` files say.
fn check(t: &Tools, dir: &Path, aborted_want: usize) {
    let d = dump(t, dir);
    let index: BTreeMap<i64, Vec<Entry>> = d
        .index
        .iter()
        .map(|(b, v)| (*b, v.iter().map(|(e, _)| *e).collect::<Vec<_>>()))
        .filter(|(_, v)| !v.is_empty())
        .collect();
    let total: usize = index.values().map(Vec::len).sum();
    eprintln!(
        "[txnindex] {} markers, {total} index entries in {} files: {index:?}",
        d.markers,
        index.len()
    );
    assert_eq!(index, d.from_log, "the .txnindex files disagree with the log's ABORT markers");
    assert_eq!(total, aborted_want, "aborted transactions");
    for ((_, first, last), lso) in d.index.values().flatten() {
        assert!(*lso >= *first && *lso <= last + 1, "lastStableOffset {lso} of ({first}, {last})");
    }
    assert!(d.from_log.len() > 1, "the aborted transactions span several segments");
}

#[test]
fn txnindex_files_match_the_markers_across_restarts() {
    let Some(t) = tools() else {
        eprintln!("[txnindex] interop clients not installed (.interop-cache): skipped");
        return;
    };
    let data = tempfile::tempdir().expect("tempdir");
    let part = data.path().join(format!("{TOPIC}-0"));
    let mut b = Broker::start_with(data.path(), &["--shards", "1"]);
    // Small segments: a roll every few batches (the time index fills its 80 bytes).
    Wire::connect(&b.addr).create_topic(
        TOPIC,
        1,
        &[("index.interval.bytes", "0"), ("segment.index.bytes", "80")],
    );
    let n = TXNS.to_string();
    let out = driver(&t, &b.addr, &["produce", &n, "0"]);
    assert!(out.contains(&format!("aborted {}", TXNS / 3)), "{out}");
    b.terminate();
    check(&t, &part, TXNS / 3);

    // Restart: read_committed still hides the aborted data; more transactions, then a crash:
    // the active segment's entries are rebuilt from the log at the next open.
    let mut b = Broker::start_with(data.path(), &["--shards", "1"]);
    driver(&t, &b.addr, &["check", &n]);
    driver(&t, &b.addr, &["produce", &n, &n]);
    b.kill();
    let mut b = Broker::start_with(data.path(), &["--shards", "1"]);
    let all = (2 * TXNS).to_string();
    let out = driver(&t, &b.addr, &["check", &all]);
    assert!(out.contains(&format!("read_committed {}", 2 * TXNS * 2)), "{out}");
    b.terminate();
    check(&t, &part, 2 * TXNS / 3);
}
