//! `shardlog doctor` against hosts that are wrong in known ways: a tmpfs data directory
//! (warning), a read-only bind mount (fatal; root ignores a chmod'ed directory, so a real
//! read-only mount is used) and a too-low locked-memory limit with CAP_SYS_RESOURCE
//! dropped (fatal). Mounts happen in a private mount namespace (`unshare -m`), so the
//! host's mount table is untouched.

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_shardlog");

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn can_unshare_mounts() -> bool {
    let ok = Command::new("unshare").args(["-m", "true"]).status().is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: `unshare -m` not permitted here (needs root/CAP_SYS_ADMIN)");
    }
    ok
}

/// Runs `doctor --data-dir <dir>` after `setup` (a shell snippet) in a private mount
/// namespace.
fn doctor_in_namespace(setup: &str, dir: &Path) -> Output {
    let script = format!("{setup} && exec \"$0\" doctor --data-dir \"$1\"");
    Command::new("unshare")
        .args(["-m", "sh", "-c", &script, BIN])
        .arg(dir)
        .output()
        .expect("run unshare")
}

#[test]
fn tmpfs_data_dir_is_a_warning_not_an_error() {
    if !can_unshare_mounts() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().display();
    let out = doctor_in_namespace(
        &format!("mount -t tmpfs -o size=512m shardlog-test '{d}'"),
        dir.path(),
    );
    let t = text(&out);
    assert!(t.contains("[ WARN] filesystem") && t.contains("is on tmpfs"), "{t}");
    assert!(t.contains("keeps nothing across a reboot"), "{t}");
    assert!(t.contains("[   ok] o_direct"), "tmpfs accepts O_DIRECT on Linux >= 6.6: {t}");
    assert!(!t.contains("[FATAL] filesystem"), "{t}");
}

#[test]
fn read_only_bind_mount_is_fatal() {
    if !can_unshare_mounts() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, ro) = (dir.path().join("src"), dir.path().join("ro"));
    std::fs::create_dir_all(&src).expect("src");
    std::fs::create_dir_all(&ro).expect("ro");
    let setup = format!(
        "mount --bind '{}' '{}' && mount -o remount,bind,ro '{}'",
        src.display(),
        ro.display(),
        ro.display()
    );
    let out = doctor_in_namespace(&setup, &ro);
    let t = text(&out);
    assert!(!out.status.success(), "doctor must fail: {t}");
    assert!(t.contains("[FATAL] writable") && t.contains("read-only filesystem"), "{t}");
    assert!(t.contains("serve would refuse to start"), "{t}");
}

#[test]
fn low_memlock_without_cap_sys_resource_is_fatal_with_the_fix() {
    let has = |tool: &str| Command::new(tool).arg("--version").output().is_ok();
    if !has("prlimit") || !has("setpriv") {
        eprintln!("skipped: prlimit/setpriv (util-linux) not installed");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new("prlimit")
        .args(["--memlock=65536:65536", "setpriv", "--bounding-set=-sys_resource"])
        .args(["--inh-caps=-sys_resource", BIN, "doctor", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("run prlimit");
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(
        t.contains("[FATAL] memlock")
            && t.contains("locked-memory limit is 64 KiB (hard 64 KiB; no CAP_SYS_RESOURCE)")
            && t.contains("cannot be raised to the minimum of 8 MiB"),
        "{t}"
    );
    assert!(t.contains("ulimit -l unlimited"), "the fix is printed: {t}");
}

#[test]
fn healthy_directory_passes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out =
        Command::new(BIN).args(["doctor", "--data-dir"]).arg(dir.path()).output().expect("run");
    let t = text(&out);
    assert!(t.contains("[   ok] kernel") && t.contains("[   ok] io_uring"), "{t}");
    assert!(t.contains("is writable with O_DIRECT"), "{t}");
    assert!(t.contains("checks: 0 fatal"), "{t}");
    assert!(out.status.success(), "{t}");
}
