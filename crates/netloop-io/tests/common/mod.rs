//! Helpers shared by the root tests of netloop-io: the root check, unique
//! device names, and running `ip`.
#![allow(dead_code)]

use netloop_io::sys;
use std::process::Command;

/// Whether the test can run (it creates devices and namespaces); says why
/// not if it can't.
pub fn root() -> bool {
    if sys::is_root() {
        true
    } else {
        skip("needs root (creates network devices and namespaces)")
    }
}

/// Says why a test does not run and returns false, or fails it where it
/// must run (`NETLOOP_REQUIRE_REAL=1`, set by scripts/test as root, so that
/// CI cannot pass by skipping).
pub fn skip(why: &str) -> bool {
    assert!(
        std::env::var_os("NETLOOP_REQUIRE_REAL").is_none(),
        "NETLOOP_REQUIRE_REAL is set, but this test would be skipped: it {why}"
    );
    println!("skipped: {why}");
    false
}

/// A unique device name: "nlt" + a per-test tag + the process id.
pub fn devname(tag: &str) -> String {
    let n = format!("nlt{tag}{}", std::process::id());
    assert!(n.len() <= 15, "{n} is too long for an interface name");
    n
}

/// Runs `ip ARGS`, panicking on failure; returns stdout.
pub fn ip(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
