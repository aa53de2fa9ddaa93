//! Network namespaces and interfaces, through iproute2's `ip` command: what a
//! real host is made of. Every call runs `ip` and turns a failure into an
//! error that quotes the command line and what `ip` said.
//!
//! Why `ip` rather than netlink by hand: it is on every Linux machine, it
//! implements `ip netns` (the bind mount under /run/netns that makes a
//! namespace outlive its first process and visible to `ip netns exec`, which
//! users will reach for), and set-up is not on any fast path.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use crate::error::{Error, Result};

/// Runs `ip ARGS`, failing with its stderr.
pub fn ip(args: &[&str]) -> Result<()> {
    ip_output(args).map(drop)
}

/// Runs `ip ARGS` and returns its stdout. `ip` runs in a process group of
/// its own, so a Ctrl-C meant for netloop does not kill it half-way through
/// a set-up or tear-down step.
fn ip_output(args: &[&str]) -> Result<String> {
    let out = Command::new("ip")
        .args(args)
        .process_group(0)
        .output()
        .map_err(|e| Error::os(format!("running `ip {}`", args.join(" ")), e).hint(IP_HINT))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let why = if why.is_empty() {
        format!("{}", out.status)
    } else {
        why
    };
    Err(Error::msg(format!("`ip {}` failed: {why}", args.join(" "))))
}

const IP_HINT: &str = "netloop needs iproute2's `ip`: apt-get install iproute2";

/// Checks that `ip` can be run.
pub fn check_ip() -> Result<()> {
    if command_exists("ip") {
        Ok(())
    } else {
        Err(Error::msg("the `ip` command (iproute2) is not installed").hint(IP_HINT))
    }
}

/// Whether namespace `name` exists.
pub fn exists(name: &str) -> bool {
    Path::new("/run/netns").join(name).exists()
}

/// Creates namespace `name`; refuses one that exists already.
pub fn add(name: &str) -> Result<()> {
    if exists(name) {
        return Err(Error::msg(format!(
            "a network namespace named '{name}' already exists; netloop will not adopt it"
        ))
        .hint(format!(
            "if it is left over from a killed netloop run, `netloop clean` removes it; \
             otherwise remove it with `ip netns del {name}`"
        )));
    }
    ip(&["netns", "add", name])
}

/// Deletes namespace `name` (its interfaces go with it).
pub fn del(name: &str) -> Result<()> {
    ip(&["netns", "del", name])
}

/// The processes inside namespace `name`.
pub fn pids(name: &str) -> Result<Vec<i32>> {
    Ok(ip_output(&["netns", "pids", name])?
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect())
}

/// Runs `sh -c SCRIPT` inside namespace `ns` (for sysctls).
pub fn sh_in(ns: &str, script: &str) -> Result<()> {
    ip(&["netns", "exec", ns, "/bin/sh", "-c", script])
}

/// Whether interface `dev` exists in this (the root) namespace.
pub fn link_exists(dev: &str) -> bool {
    Path::new("/sys/class/net").join(dev).exists()
}

/// Whether `program` is found on PATH (like `command -v`).
pub fn command_exists(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path).any(|d| {
        let p = d.join(program);
        p.is_file()
            && std::fs::metadata(&p)
                .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0)
                .unwrap_or(false)
    })
}

/// The Debian package that provides a program, for install hints.
fn package_of(program: &str) -> Option<&'static str> {
    Some(match program {
        "iperf3" => "iperf3",
        "iperf" => "iperf",
        "ping" => "iputils-ping",
        "traceroute" => "traceroute",
        "tracepath" => "iputils-tracepath",
        "tshark" => "tshark",
        "tcpdump" => "tcpdump",
        "nc" | "netcat" => "netcat-openbsd",
        "python3" => "python3",
        "curl" => "curl",
        "socat" => "socat",
        "ethtool" => "ethtool",
        "ss" | "ip" => "iproute2",
        _ => return None,
    })
}

/// The error for a program that is not installed.
pub fn missing_program_error(program: &str, host: &str) -> Error {
    let e = Error::msg(format!(
        "'{program}' (a command of real host '{host}') is not installed on this machine"
    ));
    match package_of(program) {
        Some(p) => e.hint(format!("install it with: apt-get install {p}")),
        None => e.hint(format!("install '{program}' or give its full path")),
    }
}
