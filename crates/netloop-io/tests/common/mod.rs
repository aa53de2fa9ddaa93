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
        println!("skipped: needs root (creates network devices and namespaces)");
        false
    }
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
