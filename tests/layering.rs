//! The top-level modules of `src/` in layers that point one way (issue 33). A module may
//! name (`crate::x`) modules of its own layer or the layers below it; a lower layer that
//! must call up takes a trait or a callback from above. Modules of one layer must not form
//! a cycle among themselves.
//!
//! The graph is not there yet: `UPWARD_TODAY` lists the upward imports main still has, as
//! (from, to) module pairs. The test fails, naming the file and line, on any upward import
//! not in that list, and also when a listed pair has gone (delete it from the list), so the
//! list only shrinks until it is empty. Test modules (`#[cfg(test)] mod …`, `tests.rs`,
//! `*_tests.rs`) may import anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Lowest first. ARCHITECTURE.md names the same order.
const LAYERS: &[&[&str]] = &[
    &["types", "constants", "sync", "crashpoint", "planted", "authz"],
    &["metrics"],
    &["io"],
    &["storage"],
    &["protocol"],
    &["metadata"],
    &["shard"],
    &["replication"],
    &["partition"],
    &["quorum", "controller"],
    &["group", "txn", "quota", "security"],
    &["config"],
    &["server"],
    &["cli", "bench", "top", "doctor", "sim"],
];

/// Upward imports that main still has (from, to). Remove a pair when its last import goes.
const UPWARD_TODAY: &[(&str, &str)] = &[("shard", "config")];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The part of a file that is not a test module: up to its first `#[cfg(test)]` that opens
/// a `mod` (inline or `#[path]`/file), which by convention closes the file.
fn production_lines(text: &str) -> Vec<(usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim() == "#[cfg(test)]" {
            let next = lines[i + 1..].iter().find(|l| !l.trim().starts_with("#["));
            if next.is_some_and(|l| l.trim_start().starts_with("mod ")) {
                break;
            }
        }
        out.push((i + 1, *line));
    }
    out
}

/// Every `crate::name` on a line, comments removed.
fn crate_refs(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let name: String =
            rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        out.push(name);
    }
    out
}

#[test]
fn top_level_modules_point_down_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let allowed: BTreeSet<(&str, &str)> = UPWARD_TODAY.iter().copied().collect();
    let mut seen_upward: BTreeSet<(String, String)> = BTreeSet::new();
    let mut same_layer: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut errors = Vec::new();
    for path in &files {
        let rel = path.strip_prefix(&src).expect("under src");
        let first = rel.components().next().expect("a path").as_os_str().to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        let name = rel.file_name().unwrap_or_default().to_string_lossy();
        if module == "lib" || module == "main" || name == "tests.rs" || name.ends_with("_tests.rs")
        {
            continue;
        }
        let Some(from) = layer_of(&module) else {
            errors.push(format!("src/{}: module `{module}` has no layer in LAYERS", rel.display()));
            continue;
        };
        let text = std::fs::read_to_string(path).expect("read a source file");
        for (line_no, line) in production_lines(&text) {
            for target in crate_refs(line) {
                let Some(to) = layer_of(&target) else { continue };
                if target == module {
                    continue;
                }
                if to == from {
                    same_layer.entry(module.clone()).or_default().insert(target.clone());
                } else if to > from {
                    seen_upward.insert((module.clone(), target.clone()));
                    if !allowed.contains(&(module.as_str(), target.as_str())) {
                        errors.push(format!(
                            "src/{}:{line_no}: `{module}` (layer {from}) imports `crate::{target}` \
                             (layer {to}), up the layers",
                            rel.display()
                        ));
                    }
                }
            }
        }
    }
    for (a, b) in UPWARD_TODAY {
        if !seen_upward.contains(&((*a).to_string(), (*b).to_string())) {
            errors.push(format!(
                "`{a}` no longer imports `{b}`: remove (\"{a}\", \"{b}\") from UPWARD_TODAY"
            ));
        }
    }
    for (a, targets) in &same_layer {
        for b in targets {
            if same_layer.get(b).is_some_and(|t| t.contains(a)) && a < b {
                errors.push(format!("`{a}` and `{b}` (one layer) import each other: a cycle"));
            }
        }
    }
    assert!(errors.is_empty(), "layering:\n{}", errors.join("\n"));
}
