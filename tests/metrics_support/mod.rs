//! Shared by the metrics tests: parse Prometheus text with Python's
//! `prometheus_client.parser` (the reference parser), falling back to a strict line
//! parser of the 0.0.4 format when that package is not installed.

#![allow(dead_code)]

pub mod broker;

use std::io::Write as _;
use std::process::{Command, Stdio};

/// One sample: metric name, labels, value.
pub type Sample = (String, Vec<(String, String)>, f64);

const PY: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for fam in text_string_to_metric_families(sys.stdin.read()):
    for s in fam.samples:
        out.append([s.name, sorted(s.labels.items()), s.value])
print(json.dumps(out))
"#;

/// Parses `text`, panicking with the parser's message if it is not valid.
pub fn parse_prometheus(text: &str) -> Vec<Sample> {
    match python_parse(text) {
        Some(samples) => samples,
        None => {
            eprintln!("python3 prometheus_client not installed: using the built-in line parser");
            strict_parse(text)
        }
    }
}

fn python_parse(text: &str) -> Option<Vec<Sample>> {
    let ok = Command::new("python3")
        .args(["-c", "import prometheus_client"])
        .stderr(Stdio::null())
        .status()
        .ok()?
        .success();
    if !ok {
        return None;
    }
    let mut child = Command::new("python3")
        .args(["-c", PY])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(text.as_bytes()).ok()?;
    let out = child.wait_with_output().ok()?;
    assert!(
        out.status.success(),
        "prometheus_client rejected the text: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Sample> = serde_json::from_slice(&out.stdout).expect("parser output is JSON");
    Some(rows)
}

/// Checks every line is a comment (`# HELP`/`# TYPE`) or `name{labels} value`.
fn strict_parse(text: &str) -> Vec<Sample> {
    let mut samples = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# ") {
            assert!(rest.starts_with("HELP ") || rest.starts_with("TYPE "), "bad comment {line}");
            continue;
        }
        let (name_labels, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value in {line}")),
        };
        let (name, labels) = match name_labels.split_once('{') {
            Some((n, l)) => (n, parse_labels(l.strip_suffix('}').expect("closing brace"))),
            None => (name_labels, Vec::new()),
        };
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad name {name}"
        );
        samples.push((name.to_owned(), labels, value));
    }
    samples
}

fn parse_labels(mut s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    while !s.is_empty() {
        let (key, rest) = s.split_once("=\"").expect("label key");
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next().expect("unterminated label value") {
                (i, '"') => break i,
                (_, '\\') => match chars.next().expect("escape").1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (_, c) => value.push(c),
            }
        };
        out.push((key.to_owned(), value));
        s = rest[end + 1..].trim_start_matches(',');
    }
    out.sort();
    out
}

/// The value of the sample `name` whose labels include all of `labels`.
pub fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|(n, ls, _)| {
            n == name && labels.iter().all(|(k, v)| ls.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|s| s.2)
}
