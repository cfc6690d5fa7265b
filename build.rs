//! Embeds the commit the binary is built from as `SHARDLOG_GIT_COMMIT` (for `--version`):
//! `git rev-parse --short HEAD`, or "unknown" outside a git checkout or without git.
//! Reruns only when HEAD or the branch it points at moves, so ordinary builds skip it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=SHARDLOG_GIT_COMMIT={commit}");
    println!("cargo:rerun-if-changed=build.rs");
    // A worktree has its own HEAD (git-dir) but shares refs (git-common-dir).
    let (Some(git_dir), Some(common_dir)) = (
        git(&["rev-parse", "--absolute-git-dir"]),
        git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]),
    ) else {
        return;
    };
    let head = Path::new(&git_dir).join("HEAD");
    let mut watched: Vec<PathBuf> = vec![head.clone(), Path::new(&common_dir).join("packed-refs")];
    if let Some(branch) = std::fs::read_to_string(&head)
        .ok()
        .and_then(|h| h.strip_prefix("ref: ").map(|r| r.trim().to_string()))
    {
        watched.push(Path::new(&common_dir).join(branch));
    }
    // A path that does not exist would make cargo rerun this script on every build.
    for path in watched.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
