//! Sessions against the real kernel: a namespace host is created, configured,
//! runs programs, and is removed again — at `teardown`, and on a panic. These
//! tests create network namespaces and devices, so they need root; they skip
//! themselves otherwise. Every name they use carries the session's run id
//! (chosen by `Session::new`, which refuses ids already in use), and the only
//! addresses are in 198.18.0.0/15 with no route out of the machine.

mod common;
use common::*;

use netloop_io::netns;
use netloop_io::registry::{self, RunRecord};
use netloop_io::session::Session;
use netloop_io::tap::TapDevice;
use netloop_model::build::RealNode;
use netloop_model::node::{mac_for, PortInfo};
use netloop_model::routing::Route;
use netloop_model::spec::{HostLink, Ipv4Cidr, NamespaceSpec, NodeKind};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A namespace host `name` (node index `node`) on 198.18.`net`.2/24 with a
/// default route via .1, as the model would export it.
fn real_node(name: &str, node: usize, net: u8, via: HostLink) -> RealNode {
    RealNode {
        node,
        name: name.into(),
        kind: NodeKind::Namespace(NamespaceSpec {
            commands: vec![],
            via,
        }),
        port: PortInfo {
            mac: mac_for(node, 0),
            addr: Some(Ipv4Cidr {
                addr: Ipv4Addr::new(198, 18, net, 2),
                prefix: 24,
            }),
            addr6: None,
            mtu: 1400,
            link: 0,
            name: "eth0".into(),
        },
        routes: vec![Route {
            prefix: Ipv4Cidr {
                addr: Ipv4Addr::UNSPECIFIED,
                prefix: 0,
            },
            via: Some(Ipv4Addr::new(198, 18, net, 1)),
            port: 0,
        }],
        routes6: vec![],
    }
}

fn record_path(run_id: &str) -> PathBuf {
    Path::new(registry::RUN_DIR).join(format!("{run_id}.json"))
}

/// Whether process `pid` is gone (or a zombie: dead, waiting for a parent
/// that is not us to reap it), or its pid now names a different process.
fn gone(pid: i32, start_time: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let rest = &stat[stat.rfind(')').expect("stat has a comm") + 1..];
            let state = rest.split_whitespace().next();
            state == Some("Z") || registry::start_time(pid) != Some(start_time)
        }
    }
}

/// Waits up to 5 s for the launcher thread to record `n` processes.
fn wait_for_processes(s: &Session, n: usize) -> Vec<registry::ProcEntry> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let procs = s.record().processes;
        if procs.len() >= n {
            return procs;
        }
        assert!(Instant::now() < deadline, "programs not started: {procs:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Polls until every started program has exited; returns (host, cmd, code).
fn wait_for_exits(s: &mut Session, n: usize) -> Vec<(String, String, Option<i32>)> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut out = Vec::new();
    while out.len() < n {
        assert!(s.take_errors().is_empty());
        out.extend(s.poll_commands());
        assert!(Instant::now() < deadline, "programs did not exit: {out:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    out
}

fn log_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("netloop-session-test-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("log dir");
    d
}

/// Asserts that nothing of run `run_id` is left: no namespace or root device
/// carrying its id, no record.
fn assert_nothing_left(run_id: &str) {
    let list = ip(&["netns", "list"]);
    assert!(
        !list.contains(&format!("nl-{run_id}-")),
        "namespaces left: {list}"
    );
    let links = ip(&["-br", "link"]);
    assert!(
        !links.contains(&format!("nl{run_id}h")),
        "devices left: {links}"
    );
    assert!(!record_path(run_id).exists(), "record left");
}

#[test]
fn veth_host_is_configured_runs_programs_and_is_removed() {
    if !root() {
        return;
    }
    let logs = log_dir("veth");
    let mut s = Session::new().expect("session");
    let run = s.run_id().to_string();
    assert!(record_path(&run).exists(), "the record is written up front");
    let r = real_node("h1", 7, 210, HostLink::Veth);
    let h = s.add_namespace_host(&r).expect("namespace host");
    assert_eq!(h.namespace, format!("nl-{run}-h1"));
    assert_eq!(h.root_device, format!("nl{run}h7"));
    let ns = h.namespace.as_str();

    // What the namespace looks like from outside.
    let addr = ip(&["-n", ns, "-4", "addr", "show", "dev", "eth0"]);
    assert!(addr.contains("inet 198.18.210.2/24"), "{addr}");
    let link = ip(&["-n", ns, "link", "show", "dev", "eth0"]);
    assert!(link.contains("02:00:00:07:00:00"), "{link}");
    assert!(link.contains("mtu 1400"), "{link}");
    assert!(link.contains("state UP") || link.contains(",UP"), "{link}");
    let lo = ip(&["-n", ns, "link", "show", "dev", "lo"]);
    assert!(lo.contains(",UP"), "{lo}");
    let route = ip(&["-n", ns, "route"]);
    assert!(
        route.contains("default via 198.18.210.1 dev eth0"),
        "{route}"
    );
    // No IPv6 inside (the model does not carry it).
    let v6 = ip(&["-n", ns, "-6", "addr"]);
    assert!(
        v6.trim().is_empty(),
        "IPv6 addresses in the namespace: {v6}"
    );
    // The root end exists, is up, and matches the MTU.
    let root_link = ip(&["link", "show", "dev", &h.root_device]);
    assert!(root_link.contains("mtu 1400"), "{root_link}");
    assert!(root_link.contains(",UP"), "{root_link}");
    // The record names the host's namespace (what `netloop exec` reads).
    let rec = registry::find_running(Some(&run)).expect("our run is running");
    assert_eq!(rec.namespace_of("h1"), Some(ns));
    assert!(rec.devices.contains(&h.root_device));
    // ... and the init of its PID namespace, which lives in the namespace.
    let init = rec.namespace_entry("h1").unwrap().init.expect("h1's init");
    assert_eq!(registry::start_time(init.pid), Some(init.start_time));
    assert!(netns::pids(ns).expect("pids").contains(&init.pid));
    let init_pid_ns = std::fs::read_link(format!("/proc/{}/ns/pid", init.pid)).expect("init's ns");
    assert_ne!(
        Some(&init_pid_ns),
        std::fs::read_link("/proc/self/ns/pid").ok().as_ref(),
        "the init is in our own PID namespace"
    );

    // A program runs inside the namespace; its output lands in its log.
    let log = logs.join("h1.0.log");
    s.start_command(
        "h1",
        "echo hello-from-h1; ip -br -4 addr show dev eth0",
        &log,
    )
    .expect("start");
    let exits = wait_for_exits(&mut s, 1);
    assert_eq!(exits[0].0, "h1");
    assert_eq!(exits[0].2, Some(0));
    let out = std::fs::read_to_string(&log).expect("log");
    assert!(out.contains("hello-from-h1"), "{out}");
    assert!(out.contains("198.18.210.2/24"), "{out}");

    // Programs run in the host's PID namespace, with a /proc of it.
    let log = logs.join("h1.pidns.log");
    s.start_command(
        "h1",
        "readlink /proc/self/ns/pid; echo $$; exec cut -d' ' -f1 /proc/self/stat",
        &log,
    )
    .expect("start");
    let exits = wait_for_exits(&mut s, 1);
    assert_eq!(exits[0].2, Some(0));
    let out = std::fs::read_to_string(&log).expect("log");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(Path::new(lines[0]), init_pid_ns, "{out}");
    assert_eq!(lines[1], lines[2], "/proc inside is not the host's: {out}");

    // A program that is not installed: exit 127, and the log says which.
    let log = logs.join("h1.1.log");
    s.start_command("h1", "definitely-not-a-program-xyz --now", &log)
        .expect("start");
    let exits = wait_for_exits(&mut s, 1);
    assert_eq!(exits[0].2, Some(127));
    let out = std::fs::read_to_string(&log).expect("log");
    assert!(out.contains("definitely-not-a-program-xyz"), "{out}");

    // Long-running programs, one of which escapes our process group (only
    // the namespace still finds it).
    s.start_command("h1", "sleep 1000", &logs.join("h1.2.log"))
        .expect("start");
    s.start_command(
        "h1",
        "setsid sleep 1001 & exec sleep 1002",
        &logs.join("h1.3.log"),
    )
    .expect("start");
    let procs = wait_for_processes(&s, 5);
    let sleeps: Vec<_> = procs.iter().filter(|p| p.cmd.contains("sleep")).collect();
    assert_eq!(sleeps.len(), 2);
    // Wait until the escaped sleep shows up in the namespace (with the init
    // and the two programs).
    let deadline = Instant::now() + Duration::from_secs(5);
    let in_ns = loop {
        let pids = netns::pids(ns).expect("pids");
        if pids.len() >= 4 {
            break pids;
        }
        assert!(Instant::now() < deadline, "pids in namespace: {pids:?}");
        std::thread::sleep(Duration::from_millis(10));
    };
    let in_ns: Vec<(i32, u64)> = in_ns
        .into_iter()
        .filter_map(|p| registry::start_time(p).map(|t| (p, t)))
        .collect();

    let rep = s.teardown();
    assert!(rep.failures.is_empty(), "{rep}");
    assert_eq!(rep.namespaces, 1, "{rep}");
    for p in &sleeps {
        assert!(gone(p.pid, p.start_time), "program {} still runs", p.pid);
    }
    for (pid, t) in in_ns {
        assert!(gone(pid, t), "process {pid} in the namespace still runs");
    }
    assert_nothing_left(&run);
    // A second tear-down (and the Drop after it) does nothing.
    let again = s.teardown();
    assert!(again.failures.is_empty() && again.namespaces == 0);
    drop(s);
    let _ = std::fs::remove_dir_all(&logs);
}

#[test]
fn tap_host_is_configured_and_removed() {
    if !root() {
        return;
    }
    let mut s = Session::new().expect("session");
    let run = s.run_id().to_string();
    let r = real_node("t1", 3, 211, HostLink::Tap);
    let name = s.device_name(&r);
    assert!(name.len() <= 15, "{name}");
    s.record_device(&name).expect("record");
    let tap = TapDevice::create(&name).expect("tap");
    let h = s.add_tap_host(&r, &name).expect("tap host");
    let ns = h.namespace.as_str();
    let addr = ip(&["-n", ns, "-4", "addr", "show", "dev", "eth0"]);
    assert!(addr.contains("inet 198.18.211.2/24"), "{addr}");
    let route = ip(&["-n", ns, "route"]);
    assert!(
        route.contains("default via 198.18.211.1 dev eth0"),
        "{route}"
    );
    // Moved: no longer in the root namespace.
    let links = ip(&["-br", "link"]);
    assert!(!links.contains(&name), "{links}");
    // Interfaces close before the session tears down, as in a live run.
    drop(tap);
    let rep = s.teardown();
    assert!(rep.failures.is_empty(), "{rep}");
    assert_nothing_left(&run);
}

#[test]
fn a_panic_still_removes_everything() {
    if !root() {
        return;
    }
    let run = std::sync::Mutex::new(String::new());
    let result = std::panic::catch_unwind(|| {
        let mut s = Session::new().expect("session");
        *run.lock().unwrap() = s.run_id().to_string();
        let r = real_node("p1", 1, 212, HostLink::Veth);
        let h = s.add_namespace_host(&r).expect("namespace host");
        s.start_command("p1", "sleep 1000", Path::new("/dev/null"))
            .expect("start");
        let procs = wait_for_processes(&s, 1);
        assert!(Path::new("/run/netns").join(&h.namespace).exists());
        *run.lock().unwrap() = format!("{} {} {}", s.run_id(), procs[0].pid, procs[0].start_time);
        panic!("a failure while the session is up");
    });
    assert!(result.is_err());
    let text = run.into_inner().unwrap();
    let mut parts = text.split(' ');
    let run_id = parts.next().unwrap().to_string();
    let pid: i32 = parts.next().expect("pid").parse().unwrap();
    let start: u64 = parts.next().expect("start time").parse().unwrap();
    assert!(gone(pid, start), "the program still runs after the panic");
    assert_nothing_left(&run_id);
}

#[test]
fn an_existing_namespace_is_not_adopted_or_removed() {
    if !root() {
        return;
    }
    let mut s = Session::new().expect("session");
    let run = s.run_id().to_string();
    let r = real_node("c1", 2, 213, HostLink::Veth);
    let taken = RunRecord::namespace_name(&run, "c1");
    ip(&["netns", "add", &taken]);
    // Whatever happens below, the namespace we made goes at the end.
    struct Del(String);
    impl Drop for Del {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }
    let _del = Del(taken.clone());

    let err = s
        .add_namespace_host(&r)
        .expect_err("name clash")
        .to_string();
    assert!(
        err.contains(&format!(
            "a network namespace named '{taken}' already exists; netloop will not adopt it"
        )),
        "{err}"
    );
    // Nothing else was created, nor recorded.
    assert!(
        s.record().namespaces.is_empty(),
        "{:?}",
        s.record().namespaces
    );
    assert!(!ip(&["-br", "link"]).contains(&format!("nl{run}h")));
    let rep = s.teardown();
    assert!(rep.failures.is_empty(), "{rep}");
    assert_eq!(rep.namespaces, 0);
    // The pre-existing namespace is still there: not ours to delete.
    assert!(ip(&["netns", "list"]).contains(&taken));
    assert!(!record_path(&run).exists());
}

#[test]
fn programs_that_are_not_installed_are_named_with_a_hint() {
    assert!(!netns::command_exists("definitely-not-a-program-xyz"));
    assert!(netns::command_exists("sh"));
    assert!(netns::command_exists("/bin/sh"));
    let e = netns::missing_program_error("definitely-not-a-program-xyz", "h1").to_string();
    assert!(e.contains("definitely-not-a-program-xyz"), "{e}");
    assert!(e.contains("'h1'"), "{e}");
    let e = netns::missing_program_error("iperf3", "h1").to_string();
    assert!(e.contains("apt-get install iperf3"), "{e}");
    let e = netns::missing_program_error("ping", "h1").to_string();
    assert!(e.contains("apt-get install iputils-ping"), "{e}");
}
