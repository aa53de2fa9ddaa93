//! End-to-end tests of the real-time mode with real hosts: real programs
//! (ping, iperf3, traceroute, a raw-socket frame injector) in network
//! namespaces that `netloop run` creates, talking through simulated routers.
//!
//! Every test needs root (it creates network namespaces) and says so and
//! returns when it is not root; a test that needs a program that is not
//! installed says which and returns. The tests run one at a time (a global
//! lock), each identifies its run by the run id netloop prints
//! (`h1: namespace nl-<id>-h1, …`), and each checks at its end that the run
//! left nothing behind: no namespace `nl-<id>-*`, no device `nl<id>h*`, no
//! record `/run/netloop/<id>.json`. Processes are only ever signalled by pid:
//! the netloop child a test spawned.
//!
//! Addresses are all from 198.18.0.0/15; nothing is sent anywhere else.
//! Timing assertions are loose: they catch gross errors (a delay missing or
//! applied twice), not microseconds.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const NETLOOP: &str = env!("CARGO_BIN_EXE_netloop");

/// How long a run may take to set up its namespaces and say it is running.
const START_TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// Preconditions, serialisation, scratch space
// ---------------------------------------------------------------------------

/// The tests share the machine's namespaces and /run/netloop: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn have_root() -> bool {
    if nix::unistd::geteuid().is_root() {
        true
    } else {
        println!("skipped: needs root (creates network namespaces)");
        false
    }
}

/// Whether every program is installed; prints which one is missing if not.
fn have(programs: &[&str]) -> bool {
    for p in programs {
        if !netloop_io::netns::command_exists(p) {
            println!("skipped: needs `{p}`, which is not installed");
            return false;
        }
    }
    true
}

/// A directory for one test's topology, results and logs; removed at the end
/// unless the test failed (then kept for inspection).
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "netloop-realtime-test-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_string()
    }

    fn write(&self, name: &str, text: &str) -> String {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept {} for inspection", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

// ---------------------------------------------------------------------------
// Running netloop
// ---------------------------------------------------------------------------

fn netloop(args: &[&str]) -> Output {
    Command::new(NETLOOP)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("netloop runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A command that must succeed; returns its stdout.
fn must(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "`{program} {}` failed ({}): {}{}",
        args.join(" "),
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// The run id in a line like `h1: namespace nl-1a2b3c-h1, …`.
fn run_id_in(line: &str) -> Option<String> {
    const MARK: &str = "namespace nl-";
    let i = line.find(MARK)? + MARK.len();
    let id = line.get(i..i + 6)?;
    (id.bytes().all(|b| b.is_ascii_hexdigit()) && line[i + 6..].starts_with('-'))
        .then(|| id.to_string())
}

/// A `netloop` process this test started, its output read as it comes.
/// Dropping it while netloop still runs (a failed assertion) ends it with
/// SIGINT — or, if that does not work, SIGKILL and `netloop clean` — so that
/// a failing test leaves nothing behind either.
struct LiveRun {
    child: Child,
    status: Option<ExitStatus>,
    lines: Receiver<String>,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
    run_id: Option<String>,
}

impl LiveRun {
    fn start(args: &[&str]) -> LiveRun {
        let mut child = Command::new(NETLOOP)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("netloop starts");
        let (tx, lines) = channel();
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let out = child.stdout.take().expect("piped stdout");
        let err = child.stderr.take().expect("piped stderr");
        let so = Arc::clone(&stdout);
        let se = Arc::clone(&stderr);
        let readers = vec![
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    let mut s = so.lock().unwrap();
                    s.push_str(&line);
                    s.push('\n');
                    drop(s);
                    let _ = tx.send(line);
                }
            }),
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines() {
                    let Ok(line) = line else { break };
                    let mut s = se.lock().unwrap();
                    s.push_str(&line);
                    s.push('\n');
                }
            }),
        ];
        LiveRun {
            child,
            status: None,
            lines,
            stdout,
            stderr,
            readers,
            run_id: None,
        }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Both outputs, for assertion messages.
    fn output(&self) -> String {
        format!(
            "--- stdout ---\n{}--- stderr ---\n{}",
            self.stdout(),
            self.stderr()
        )
    }

    /// Reads stdout until netloop says it runs in real time; returns the run
    /// id (from the `namespace nl-<id>-…` line before it).
    fn wait_running(&mut self) -> String {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if self.run_id.is_none() {
                        self.run_id = run_id_in(&line);
                    }
                    if line.contains("running in real time") {
                        return self
                            .run_id
                            .clone()
                            .unwrap_or_else(|| panic!("no run id printed:\n{}", self.output()));
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "netloop did not start running within {START_TIMEOUT:?}\n{}",
                        self.output()
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let st = self.wait_exit(Duration::from_secs(10));
                    panic!("netloop exited ({st}) before running\n{}", self.output())
                }
            }
        }
    }

    fn signal(&self, s: Signal) {
        kill(self.pid(), s).unwrap_or_else(|e| panic!("cannot send {s} to netloop: {e}"));
    }

    /// Waits for netloop to exit (and for its output to be read).
    fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        if let Some(s) = self.status {
            return s;
        }
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                break s;
            }
            assert!(
                Instant::now() < deadline,
                "netloop did not exit within {timeout:?}\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        self.status = Some(status);
        // The readers end at EOF; nothing else holds the pipes (programs on
        // real hosts write to their logs), but never hang on it.
        let until = Instant::now() + Duration::from_secs(5);
        while self.readers.iter().any(|r| !r.is_finished()) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        if self.run_id.is_none() {
            self.run_id = self.stdout().lines().find_map(run_id_in);
        }
        status
    }

    /// Runs until netloop exits by itself (within `timeout`); returns the run
    /// id and the exit status.
    fn finish(mut self, timeout: Duration) -> (LiveRun, String, ExitStatus) {
        let id = self.wait_running();
        let st = self.wait_exit(timeout);
        (self, id, st)
    }
}

impl Drop for LiveRun {
    fn drop(&mut self) {
        if self.status.is_some() || matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let pid = self.pid();
        let _ = kill(pid, Signal::SIGINT);
        let until = Instant::now() + Duration::from_secs(15);
        while Instant::now() < until {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("netloop {pid} ignored SIGINT: SIGKILL and `netloop clean`");
        let _ = kill(pid, Signal::SIGKILL);
        let _ = self.child.wait();
        let _ = Command::new(NETLOOP).arg("clean").output();
    }
}

// ---------------------------------------------------------------------------
// What a run leaves behind
// ---------------------------------------------------------------------------

/// Names of the network namespaces (`ip netns list`).
fn namespaces() -> BTreeSet<String> {
    must("ip", &["netns", "list"])
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Names of the interfaces of the root namespace (`ip -br link`, without
/// the `@peer` suffix).
fn devices() -> BTreeSet<String> {
    must("ip", &["-br", "link"])
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .collect()
}

/// Entries of /run/netloop.
fn records() -> BTreeSet<String> {
    std::fs::read_dir("/run/netloop")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// What run `id` still has: namespaces, devices, record files.
fn leftovers(id: &str) -> Vec<String> {
    let ns = format!("nl-{id}-");
    let dev = format!("nl{id}h");
    let mut left: Vec<String> = namespaces()
        .into_iter()
        .filter(|n| n.starts_with(&ns))
        .map(|n| format!("namespace {n}"))
        .collect();
    left.extend(
        devices()
            .into_iter()
            .filter(|d| d.starts_with(&dev))
            .map(|d| format!("device {d}")),
    );
    left.extend(
        records()
            .into_iter()
            .filter(|r| r.starts_with(id))
            .map(|r| format!("record /run/netloop/{r}")),
    );
    left
}

/// Asserts that run `id` left no namespace, device or record. (Devices get
/// two seconds: a veth's root end goes with its namespace, asynchronously.)
fn assert_nothing_left(id: &str) {
    assert_eq!(id.len(), 6, "run id '{id}'");
    let start = Instant::now();
    let first = leftovers(id);
    let mut left = first.clone();
    while !left.is_empty() && start.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(50));
        left = leftovers(id);
    }
    assert!(left.is_empty(), "run {id} left behind: {left:?}");
    if !first.is_empty() {
        println!(
            "note: run {id}: {first:?} still existed after netloop exited, gone {:?} later",
            start.elapsed()
        );
    }
}

/// Everything netloop-looking on the machine: for tests where no run id
/// exists (a run that failed before it started).
fn snapshot() -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
    (
        namespaces()
            .into_iter()
            .filter(|n| n.starts_with("nl-"))
            .collect(),
        devices()
            .into_iter()
            .filter(|d| d.starts_with("nl"))
            .collect(),
        records(),
    )
}

/// The record of run `id` as it stands.
fn record(id: &str) -> Value {
    let p = format!("/run/netloop/{id}.json");
    let t = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
    serde_json::from_str(&t).unwrap_or_else(|e| panic!("{p}: {e}: {t}"))
}

/// Waits until run `id`'s record lists `n` processes; returns the record.
fn record_with_processes(id: &str, n: usize) -> Value {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let r = record(id);
        if r["processes"].as_array().map_or(0, Vec::len) >= n {
            return r;
        }
        assert!(
            Instant::now() < until,
            "run {id}'s record never listed {n} processes: {r}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Fields of /proc/PID/stat after the command name: (state, pgrp,
/// start time).
fn proc_stat(pid: i64) -> Option<(char, i64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    Some((
        rest.first()?.chars().next()?,
        rest.get(2)?.parse().ok()?,
        rest.get(19)?.parse().ok()?,
    ))
}

/// A process identified by pid and start time (so a reused pid is another).
#[derive(Clone, Copy, Debug)]
struct ProcId {
    pid: i64,
    start: u64,
}

impl ProcId {
    fn of(pid: i64) -> Option<ProcId> {
        proc_stat(pid).map(|(_, _, start)| ProcId { pid, start })
    }

    /// Still there (a zombie waiting for a reaper counts as gone).
    fn alive(&self) -> bool {
        matches!(proc_stat(self.pid), Some((state, _, start)) if start == self.start && state != 'Z')
    }
}

/// The processes inside namespace `ns` (`ip netns pids`).
fn namespace_processes(ns: &str) -> Vec<ProcId> {
    must("ip", &["netns", "pids", ns])
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter_map(ProcId::of)
        .collect()
}

/// Live processes in process group `pgrp` (other than zombies).
fn group_members(pgrp: i64) -> Vec<i64> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i64>().ok())
        .filter(|&pid| matches!(proc_stat(pid), Some((s, g, _)) if g == pgrp && s != 'Z'))
        .collect()
}

/// Asserts that every process in `procs` is gone, and that nothing is left
/// in the process groups of the recorded programs.
fn assert_processes_gone(procs: &[ProcId], recorded: &[ProcId]) {
    let until = Instant::now() + Duration::from_secs(3);
    loop {
        let alive: Vec<_> = procs.iter().filter(|p| p.alive()).collect();
        let groups: Vec<i64> = recorded.iter().flat_map(|p| group_members(p.pid)).collect();
        if alive.is_empty() && groups.is_empty() {
            return;
        }
        assert!(
            Instant::now() < until,
            "processes still running: {alive:?}, in the programs' groups: {groups:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The processes of a record: (pid, start time).
fn recorded_processes(rec: &Value) -> Vec<ProcId> {
    rec["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| ProcId {
            pid: p["pid"].as_i64().unwrap(),
            start: p["start_time"].as_u64().unwrap(),
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------

fn load_json(path: &str) -> Value {
    let t = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&t).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not an unsigned integer: {v}"))
}

fn node<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("no node {name}"))
}

fn link<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name)
        .unwrap_or_else(|| panic!("no link {name}"))
}

fn port<'a>(r: &'a Value, host: &str) -> &'a Value {
    r["realtime"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["host"] == host)
        .unwrap_or_else(|| panic!("no real port of {host}: {}", r["realtime"]))
}

fn command<'a>(r: &'a Value, host: &str, k: usize) -> &'a Value {
    r["realtime"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["host"] == host)
        .nth(k)
        .unwrap_or_else(|| panic!("no command {k} of {host}"))
}

/// A count map (`{"malformed": 3, …}`) as a BTreeMap.
fn counts(v: &Value) -> BTreeMap<String, u64> {
    v.as_object()
        .unwrap_or_else(|| panic!("not a map: {v}"))
        .iter()
        .map(|(k, n)| (k.clone(), u(n)))
        .collect()
}

/// What every real-time run's results must satisfy: the realtime block is
/// there and of this run, packet conservation holds, and the model's ledger
/// agrees with the boundary counters (every frame read entered the model as
/// origin `external`; every frame the model handed to a real node was
/// written or counted as a boundary drop).
fn check_realtime_results(r: &Value, id: &str) {
    assert_eq!(r["schema"], "netloop-results");
    assert_eq!(r["meta"]["mode"], "realtime");
    let rt = &r["realtime"];
    assert_eq!(rt["run_id"], id);
    assert!(rt["kept_up"].is_boolean(), "{rt}");
    for f in ["p50_ns", "p99_ns", "max_ns", "count"] {
        assert!(rt["event_lateness"][f].is_u64(), "event_lateness.{f}: {rt}");
    }
    let c = &r["conservation"];
    assert_eq!(c["unaccounted"], 0, "conservation: {c}");
    let ports = rt["ports"].as_array().unwrap();
    let sum = |f: &str| ports.iter().map(|p| u(&p[f])).sum::<u64>();
    for f in [
        "rx_frames",
        "tx_frames",
        "rx_kernel_drops",
        "tx_drops",
        "rx_truncated",
        "rx_malformed",
    ] {
        for p in ports {
            assert!(p[f].is_u64(), "ports[].{f}: {p}");
            assert!(p["host"].is_string() && p["interface"].is_string(), "{p}");
        }
    }
    assert_eq!(u(&rt["rx_frames"]), sum("rx_frames"));
    assert_eq!(u(&rt["tx_frames"]), sum("tx_frames"));
    assert_eq!(u(&rt["rx_malformed"]), sum("rx_malformed"));
    assert_eq!(
        u(&rt["boundary_lost"]),
        sum("rx_kernel_drops") + sum("tx_drops") + sum("rx_truncated")
    );
    let created_ext = c["created"]["external"].as_u64().unwrap_or(0);
    let delivered_ext = c["delivered"]["external"].as_u64().unwrap_or(0);
    assert_eq!(
        created_ext,
        u(&rt["rx_frames"]),
        "frames read from real interfaces = frames created with origin external"
    );
    assert_eq!(
        delivered_ext,
        u(&rt["tx_frames"]) + sum("tx_drops"),
        "frames delivered to real nodes = frames written + dropped at the boundary"
    );
}

/// Ping's replies: icmp_seq → round-trip time in ms.
fn ping_replies(log: &str) -> BTreeMap<u32, f64> {
    let mut out = BTreeMap::new();
    for l in log.lines() {
        let field = |key: &str| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .map(str::to_string)
        };
        if let (Some(seq), Some(time)) = (field("icmp_seq="), field("time=")) {
            out.insert(seq.parse().unwrap(), time.parse().unwrap());
        }
    }
    out
}

/// Ping's summary: (transmitted, received).
fn ping_summary(log: &str) -> Option<(u32, u32)> {
    let l = log.lines().find(|l| l.contains("packets transmitted"))?;
    let n: Vec<u32> = l
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .take(2)
        .map(|s| s.parse().unwrap())
        .collect();
    Some((n[0], n[1]))
}

fn read_log(r: &Value, host: &str, k: usize) -> String {
    let path = command(r, host, k)["log"].as_str().unwrap().to_string();
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

// ---------------------------------------------------------------------------
// Topologies
// ---------------------------------------------------------------------------

/// h1 — r1 ══ 10 ms ══ r2 — h2, fixed addresses: h1 198.18.1.2, r1
/// 198.18.1.1 (towards h1) and 198.18.3.1, r2 198.18.3.2 (towards h1) and
/// 198.18.2.1, h2 198.18.2.2. `{h1}` and `{h2}` are the hosts' commands,
/// `{extra}` more tables (events).
fn two_routers(duration: &str, wan_delay: &str, h1: &str, h2: &str, extra: &str) -> String {
    format!(
        r#"[run]
duration = "{duration}"

[defaults.link]
rate = "1Gbps"
delay = "10us"

[[node]]
name = "h1"
kind = "namespace"
{h1}

[[node]]
name = "r1"
kind = "router"

[[node]]
name = "r2"
kind = "router"

[[node]]
name = "h2"
kind = "namespace"
{h2}

[[link]]
endpoints = ["h1", "r1"]
addresses = ["198.18.1.2/24", "198.18.1.1/24"]

[[link]]
endpoints = ["r1", "r2"]
delay = "{wan_delay}"
addresses = ["198.18.3.1/24", "198.18.3.2/24"]

[[link]]
endpoints = ["r2", "h2"]
addresses = ["198.18.2.1/24", "198.18.2.2/24"]
{extra}
"#
    )
}

fn cmd(cmd: &str, start: &str, wait: bool) -> String {
    format!("[[node.command]]\ncmd = \"{cmd}\"\nstart = \"{start}\"\nwait = {wait}\n")
}

/// h1 — r1 — h2 with fixed addresses (h1 198.18.1.2, h2 198.18.2.2); h1 is
/// joined by `h1_via`.
fn one_router(duration: &str, h1_via: &str, h1: &str, h2: &str) -> String {
    format!(
        r#"[run]
duration = "{duration}"

[[node]]
name = "h1"
kind = "namespace"
via = "{h1_via}"
{h1}

[[node]]
name = "r1"
kind = "router"

[[node]]
name = "h2"
kind = "namespace"
{h2}

[[link]]
endpoints = ["h1", "r1"]
addresses = ["198.18.1.2/24", "198.18.1.1/24"]

[[link]]
endpoints = ["r1", "h2"]
addresses = ["198.18.2.1/24", "198.18.2.2/24"]
"#
    )
}

// ---------------------------------------------------------------------------
// 1. ping and TCP through two simulated routers
// ---------------------------------------------------------------------------

#[test]
fn ping_and_tcp_between_two_real_hosts_through_two_simulated_routers() {
    let _serial = serial();
    if !have_root() || !have(&["ping", "iperf3"]) {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("ping-tcp");
    let topo = s.write(
        "t.toml",
        &two_routers(
            "15s",
            "10ms",
            &(cmd("ping -c 5 -i 0.2 198.18.2.2", "200ms", true)
                + &cmd("iperf3 -c 198.18.2.2 -t 2 -J", "1500ms", true)),
            &cmd("iperf3 -s -1", "0s", false),
            "",
        ),
    );
    let json = s.path("out.json");
    let logs = s.path("logs");
    let (run, id, st) = LiveRun::start(&["run", &topo, "--json", &json, "--log-dir", &logs])
        .finish(Duration::from_secs(40));
    assert_nothing_left(&id);
    assert_eq!(st.code(), Some(0), "{}", run.output());
    let r = load_json(&json);
    check_realtime_results(&r, &id);
    let rt = &r["realtime"];
    assert_eq!(rt["end"], "control", "ends when h1's programs have exited");

    // ping: five replies, each a little over 2 × 10 ms.
    let ping = command(&r, "h1", 0);
    assert_eq!(ping["exit_code"], 0, "{ping}");
    assert_eq!(ping["wait"], true);
    assert!(ping["started_s"].as_f64().unwrap() >= 0.2);
    let log = read_log(&r, "h1", 0);
    assert_eq!(ping_summary(&log), Some((5, 5)), "{log}");
    let rtts = ping_replies(&log);
    assert_eq!(rtts.len(), 5, "{log}");
    for (seq, rtt) in &rtts {
        assert!(
            (19.9..60.0).contains(rtt),
            "icmp_seq={seq}: RTT {rtt} ms, expected about 20 ms\n{log}"
        );
    }

    // iperf3: more than a megabyte across.
    let iperf = command(&r, "h1", 1);
    assert_eq!(iperf["exit_code"], 0, "{iperf}");
    let log = read_log(&r, "h1", 1);
    let j: Value = serde_json::from_str(&log[log.find('{').expect("iperf3 JSON")..])
        .unwrap_or_else(|e| panic!("iperf3 -J output: {e}\n{log}"));
    let received = j["end"]["sum_received"]["bytes"].as_f64().unwrap_or(0.0);
    assert!(received > 1e6, "iperf3 received {received} bytes\n{log}");
    let mbps = j["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0)
        / 1e6;
    assert!(
        mbps < 1000.0,
        "faster than the 1 Gbit/s links: {mbps} Mbit/s"
    );

    // The model's side of it.
    assert_eq!(u(&link(&r, "r1-r2")["a_to_b"]["delay_ns"]), 10_000_000);
    let r1 = &node(&r, "r1")["stats"];
    assert!(u(&r1["forwarded"]) > 1000, "{r1}");
    assert_eq!(node(&r, "h1")["kind"], "namespace");
    assert!(node(&r, "h1")["stats"].is_null());
    assert!(
        u(&rt["rx_frames"]) > 1000 && u(&rt["tx_frames"]) > 1000,
        "{rt}"
    );
    for h in ["h1", "h2"] {
        let p = port(&r, h);
        assert!(u(&p["rx_frames"]) > 0 && u(&p["tx_frames"]) > 0, "{p}");
        assert_eq!(u(&p["rx_malformed"]), 0, "{p}");
        assert_eq!(u(&p["rx_truncated"]), 0, "{p}");
    }
    let hosts = rt["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 2);
    assert_eq!(hosts[0]["namespace"], format!("nl-{id}-h1"));
    assert_eq!(hosts[0]["address"], "198.18.1.2/24");
    assert_eq!(hosts[1]["address"], "198.18.2.2/24");
    println!(
        "ping RTTs {:?} ms; iperf3 {mbps:.0} Mbit/s; kept up: {}, lateness max {} ns; boundary lost {}; test took {:.1} s",
        rtts.values().collect::<Vec<_>>(),
        rt["kept_up"],
        rt["event_lateness"]["max_ns"],
        rt["boundary_lost"],
        t0.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------
// 2. traceroute sees each simulated router
// ---------------------------------------------------------------------------

/// traceroute's hops: (hop, address or "*", RTT in ms if any).
fn traceroute_hops(log: &str) -> Vec<(u32, String, Option<f64>)> {
    log.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let hop = w.first()?.parse().ok()?;
            let addr = w.get(1)?.to_string();
            let rtt = w.get(2).and_then(|t| t.parse().ok());
            Some((hop, addr, rtt))
        })
        .collect()
}

#[test]
fn traceroute_lists_each_simulated_router_then_the_host() {
    let _serial = serial();
    if !have_root() || !have(&["traceroute"]) {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("traceroute");
    let topo = s.write(
        "t.toml",
        &two_routers(
            "15s",
            "10ms",
            &(cmd(
                "traceroute -n -q 1 -w 1 -N 1 -m 6 198.18.2.2",
                "100ms",
                true,
            ) + &cmd(
                "traceroute -I -n -q 1 -w 1 -N 1 -m 6 198.18.2.2",
                "100ms",
                true,
            )),
            "",
            "",
        ),
    );
    let json = s.path("out.json");
    let logs = s.path("logs");
    let (run, id, st) = LiveRun::start(&["run", &topo, "--json", &json, "--log-dir", &logs])
        .finish(Duration::from_secs(40));
    assert_nothing_left(&id);
    assert_eq!(st.code(), Some(0), "{}", run.output());
    let r = load_json(&json);
    check_realtime_results(&r, &id);
    assert_eq!(r["realtime"]["boundary_lost"], 0);
    for (k, how) in [(0, "UDP"), (1, "ICMP")] {
        assert_eq!(command(&r, "h1", k)["exit_code"], 0);
        let log = read_log(&r, "h1", k);
        let hops = traceroute_hops(&log);
        let addrs: Vec<&str> = hops.iter().map(|h| h.1.as_str()).collect();
        // r1 and r2 answer from the interfaces facing h1, then h2 itself.
        assert_eq!(
            addrs,
            ["198.18.1.1", "198.18.3.2", "198.18.2.2"],
            "traceroute ({how}):\n{log}"
        );
        let rtt = |i: usize| hops[i].2.unwrap_or_else(|| panic!("no RTT:\n{log}"));
        assert!(rtt(0) < 10.0, "hop 1 is 20 us away:\n{log}");
        for i in [1, 2] {
            assert!(
                (19.9..60.0).contains(&rtt(i)),
                "hop {} is behind the 10 ms link:\n{log}",
                i + 1
            );
        }
    }
    for router in ["r1", "r2"] {
        let st = &node(&r, router)["stats"];
        assert!(
            u(&st["icmp_sent"]["time_exceeded"]) >= 2,
            "{router} sent time-exceeded for both traceroutes: {st}"
        );
    }
    println!("test took {:.1} s", t0.elapsed().as_secs_f64());
}

// ---------------------------------------------------------------------------
// 3. an attached interface (one end of a veth pair) works like a host
// ---------------------------------------------------------------------------

/// The test's own namespace `nlt-<pid>-a` holding `nltv<pid>b`, the peer of
/// `nltv<pid>a` in the root namespace (marker `nlt`: not netloop's), with
/// 198.18.50.2/24 and a default route via 198.18.50.1; removed on drop.
struct TestNetns {
    ns: String,
    root_end: String,
}

impl TestNetns {
    /// Creates it, with every offload off on both ends if `offloads_off`
    /// (else as the kernel makes a veth: checksum and segmentation offloads
    /// on).
    fn create(offloads_off: bool) -> TestNetns {
        let pid = std::process::id();
        let ns = format!("nlt-{pid}-a");
        let a = format!("nltv{pid}a");
        let b = format!("nltv{pid}b");
        TestNetns::delete(&ns, &a);
        must("ip", &["netns", "add", &ns]);
        let guard = TestNetns {
            ns: ns.clone(),
            root_end: a.clone(),
        };
        must(
            "ip",
            &["link", "add", &a, "type", "veth", "peer", "name", &b],
        );
        if offloads_off {
            for end in [&a, &b] {
                netloop_io::packet::disable_offloads(end)
                    .unwrap_or_else(|e| panic!("disabling offloads on {end}: {e}"));
            }
        }
        // No IPv6 chatter on either end (it would be dropped as unsupported).
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{a}/disable_ipv6"), "1");
        must(
            "ip",
            &[
                "netns",
                "exec",
                &ns,
                "/bin/sh",
                "-c",
                "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; \
                 echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6",
            ],
        );
        must("ip", &["link", "set", &b, "netns", &ns]);
        must("ip", &["-n", &ns, "link", "set", "lo", "up"]);
        must(
            "ip",
            &["-n", &ns, "addr", "add", "198.18.50.2/24", "dev", &b],
        );
        must("ip", &["-n", &ns, "link", "set", &b, "up"]);
        must(
            "ip",
            &["-n", &ns, "route", "add", "default", "via", "198.18.50.1"],
        );
        must("ip", &["link", "set", &a, "up"]);
        guard
    }

    fn delete(ns: &str, root_end: &str) {
        if namespaces().contains(ns) {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
        if Path::new("/sys/class/net").join(root_end).exists() {
            let _ = Command::new("ip").args(["link", "del", root_end]).output();
        }
    }
}

impl Drop for TestNetns {
    fn drop(&mut self) {
        TestNetns::delete(&self.ns, &self.root_end);
    }
}

/// a1 (attached: `interface`, 198.18.50.2) — r1 — h2 (a TAP host,
/// 198.18.51.2).
fn attached_topology(interface: &str, h2: &str) -> String {
    format!(
        r#"[run]
duration = "30s"

[[node]]
name = "a1"
kind = "attached"
interface = "{interface}"

[[node]]
name = "r1"
kind = "router"

[[node]]
name = "h2"
kind = "namespace"
via = "tap"
{h2}

[[link]]
endpoints = ["a1", "r1"]
addresses = ["198.18.50.2/24", "198.18.50.1/24"]

[[link]]
endpoints = ["r1", "h2"]
addresses = ["198.18.51.1/24", "198.18.51.2/24"]
"#
    )
}

#[test]
fn an_attached_veth_interface_reaches_a_tap_host_through_a_router() {
    let _serial = serial();
    if !have_root() || !have(&["ping"]) {
        return;
    }
    let t0 = Instant::now();
    let guard = TestNetns::create(true);
    let (ns, a) = (guard.ns.clone(), guard.root_end.clone());
    let s = Scratch::new("attached");
    let topo = s.write(
        "t.toml",
        &attached_topology(&a, &cmd("ping -c 3 -i 0.2 198.18.50.2", "200ms", false)),
    );
    let json = s.path("out.json");
    let logs = s.path("logs");
    let mut run = LiveRun::start(&["run", &topo, "--json", &json, "--log-dir", &logs]);
    let id = run.wait_running();
    assert!(
        run.stdout()
            .contains(&format!("a1: interface {a} attached (198.18.50.2/24)")),
        "{}",
        run.output()
    );
    // From behind the attached interface, through r1, to the TAP host.
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns,
            "ping",
            "-c",
            "3",
            "-i",
            "0.2",
            "-W",
            "3",
            "198.18.51.2",
        ])
        .output()
        .unwrap();
    let ping_log = text(&out.stdout);
    // And h2's own ping of the host behind the interface: wait for it to end.
    let h2_log = Path::new(&logs).join("h2.0.log");
    let until = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&h2_log).is_ok_and(|l| l.contains("packets transmitted"))
        && Instant::now() < until
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    run.signal(Signal::SIGINT);
    let st = run.wait_exit(Duration::from_secs(15));
    assert_nothing_left(&id);
    assert_eq!(st.code(), Some(130), "{}", run.output());
    assert!(
        Path::new("/sys/class/net").join(&a).exists(),
        "netloop removed the attached interface {a}, which is not its own"
    );
    assert!(
        out.status.success(),
        "ping from the attached side failed: {ping_log}{}",
        text(&out.stderr)
    );
    assert_eq!(ping_summary(&ping_log), Some((3, 3)), "{ping_log}");

    let r = load_json(&json);
    check_realtime_results(&r, &id);
    let rt = &r["realtime"];
    assert_eq!(rt["end"], "interrupted");
    let h2_ping = command(&r, "h2", 0);
    let log = read_log(&r, "h2", 0);
    assert_eq!(h2_ping["exit_code"], 0, "{h2_ping}\n{log}");
    assert_eq!(ping_summary(&log), Some((3, 3)), "{log}");
    let hosts = rt["hosts"].as_array().unwrap();
    let a1 = hosts.iter().find(|h| h["name"] == "a1").unwrap();
    assert_eq!(a1["kind"], "attached");
    assert_eq!(a1["interface"], a.as_str());
    assert!(a1["namespace"].is_null());
    let h2 = hosts.iter().find(|h| h["name"] == "h2").unwrap();
    assert_eq!(h2["via"], "tap");
    for h in ["a1", "h2"] {
        let p = port(&r, h);
        assert!(u(&p["rx_frames"]) >= 6 && u(&p["tx_frames"]) >= 6, "{p}");
    }
    assert_eq!(node(&r, "a1")["kind"], "attached");
    drop(guard);
    assert!(!namespaces().contains(&ns));
    assert!(!Path::new("/sys/class/net").join(&a).exists());
    println!(
        "ping from behind {a}: {:?} ms; test took {:.1} s",
        ping_replies(&ping_log).values().collect::<Vec<_>>(),
        t0.elapsed().as_secs_f64()
    );
}

/// The same with the veth pair as the kernel makes it except for
/// segmentation (checksum offload on, TSO/GSO off as docs/realtime.md asks):
/// the peer's stack sends TCP segments with partial checksums
/// (TP_STATUS_CSUMNOTREADY in the RX ring), which netloop must complete, or
/// the receiving kernel drops every one (TcpInCsumErrors) and TCP never
/// connects.
#[test]
fn tcp_through_an_attached_veth_with_default_offloads() {
    let _serial = serial();
    if !have_root() || !have(&["iperf3", "ethtool"]) {
        return;
    }
    let guard = TestNetns::create(false);
    let peer = format!("nltv{}b", std::process::id());
    must(
        "ip",
        &[
            "netns", "exec", &guard.ns, "ethtool", "-K", &peer, "tso", "off", "gso", "off",
        ],
    );
    let s = Scratch::new("attached-offloads");
    let topo = s.write(
        "t.toml",
        &attached_topology(&guard.root_end, &cmd("iperf3 -s -1", "0s", false)),
    );
    let json = s.path("out.json");
    let logs = s.path("logs");
    let mut run = LiveRun::start(&["run", &topo, "--json", &json, "--log-dir", &logs]);
    let id = run.wait_running();
    std::thread::sleep(Duration::from_millis(300));
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &guard.ns,
            "iperf3",
            "-c",
            "198.18.51.2",
            "-t",
            "1",
            "--connect-timeout",
            "2000",
            "-J",
        ])
        .output()
        .unwrap();
    let log = text(&out.stdout);
    let csum_errors = Command::new("ip")
        .args([
            "netns",
            "exec",
            &format!("nl-{id}-h2"),
            "nstat",
            "-az",
            "TcpInCsumErrors",
        ])
        .output()
        .map(|o| text(&o.stdout))
        .unwrap_or_default();
    run.signal(Signal::SIGINT);
    let st = run.wait_exit(Duration::from_secs(15));
    assert_nothing_left(&id);
    assert_eq!(st.code(), Some(130), "{}", run.output());
    let j: Value = serde_json::from_str(&log).unwrap_or(Value::Null);
    let received = j["end"]["sum_received"]["bytes"].as_f64().unwrap_or(0.0);
    assert!(
        out.status.success() && received > 1e6,
        "iperf3 from behind the attached veth received {received} bytes: {}\nh2's kernel: {csum_errors}",
        j["error"]
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let completed: u64 = r["realtime"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rx_checksums_completed"].as_u64().unwrap_or(0))
        .sum();
    assert!(
        completed > 100,
        "netloop completed only {completed} checksums"
    );
}

// ---------------------------------------------------------------------------
// 4. link events at run time
// ---------------------------------------------------------------------------

#[test]
fn link_delay_change_and_down_period_take_effect_at_run_time() {
    let _serial = serial();
    if !have_root() || !have(&["ping"]) {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("events");
    // Ping every 200 ms from 0.3 s: request k (1-based) leaves at about
    // 0.3 + 0.2 (k - 1) s. The r1-r2 delay goes from 5 ms to 50 ms at 2 s;
    // the link is down from 3.5 s to 4.3 s.
    let events = r#"
[[event]]
at = "2s"
link = "r1-r2"
action = "set"
delay = "50ms"

[[event]]
at = "3500ms"
link = "r1-r2"
action = "down"

[[event]]
at = "4300ms"
link = "r1-r2"
action = "up"
"#;
    let topo = s.write(
        "t.toml",
        &two_routers(
            "8s",
            "5ms",
            &cmd("ping -i 0.2 -c 25 198.18.2.2", "300ms", true),
            "",
            events,
        ),
    );
    let json = s.path("out.json");
    let logs = s.path("logs");
    let (run, id, st) = LiveRun::start(&["run", &topo, "--json", &json, "--log-dir", &logs])
        .finish(Duration::from_secs(40));
    assert_nothing_left(&id);
    assert_eq!(st.code(), Some(0), "{}", run.output());
    let r = load_json(&json);
    check_realtime_results(&r, &id);
    let log = read_log(&r, "h1", 0);
    let replies = ping_replies(&log);
    let sent_at = |seq: u32| 0.3 + 0.2 * f64::from(seq - 1);
    let mut before = Vec::new();
    let mut after = Vec::new();
    for seq in 1..=25u32 {
        let t = sent_at(seq);
        let rtt = replies.get(&seq).copied();
        if t <= 1.85 {
            // Old delay: 2 × 5 ms.
            let rtt = rtt.unwrap_or_else(|| panic!("no reply to icmp_seq={seq}\n{log}"));
            assert!(
                (9.9..40.0).contains(&rtt),
                "icmp_seq={seq} (sent at {t:.1} s): RTT {rtt} ms, expected about 10 ms\n{log}"
            );
            before.push(rtt);
        } else if (2.15..=3.2).contains(&t) || t >= 4.45 {
            // New delay: 2 × 50 ms.
            let rtt = rtt.unwrap_or_else(|| panic!("no reply to icmp_seq={seq}\n{log}"));
            assert!(
                (99.9..150.0).contains(&rtt),
                "icmp_seq={seq} (sent at {t:.1} s): RTT {rtt} ms, expected about 100 ms\n{log}"
            );
            after.push(rtt);
        } else if (3.55..=4.2).contains(&t) {
            assert!(
                rtt.is_none(),
                "icmp_seq={seq} (sent at {t:.1} s, link down) got a reply\n{log}"
            );
        }
    }
    let (sent, received) = ping_summary(&log).unwrap_or_else(|| panic!("{log}"));
    assert_eq!(sent, 25, "{log}");
    assert!(
        (19..=22).contains(&received),
        "{received} replies: 3 to 6 requests fall in the down period\n{log}"
    );
    let wan = link(&r, "r1-r2");
    for dir in ["a_to_b", "b_to_a"] {
        assert_eq!(u(&wan[dir]["delay_ns"]), 50_000_000, "{wan}");
        assert_eq!(wan[dir]["up"], true, "{wan}");
    }
    let link_down = wan["a_to_b"]["drops"]["link_down"].as_u64().unwrap_or(0)
        + wan["b_to_a"]["drops"]["link_down"].as_u64().unwrap_or(0);
    assert!(link_down >= 3, "link_down drops on r1-r2: {wan}");
    assert_eq!(
        r["conservation"]["dropped"]["link_down"]
            .as_u64()
            .unwrap_or(0),
        link_down
    );
    println!(
        "RTTs before {before:?} ms, after {after:?} ms; {} of 25 replies; {link_down} link_down drops; test took {:.1} s",
        received,
        t0.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------
// 5. SIGINT and SIGTERM end a run cleanly
// ---------------------------------------------------------------------------

/// A long run: `sleep 1000` on h1, an endless ping on h2.
fn long_run(s: &Scratch, via: &str) -> String {
    s.write(
        "long.toml",
        &one_router(
            "30s",
            via,
            &cmd("sleep 1000", "0s", false),
            &cmd("ping -i 0.2 198.18.1.2", "0s", false),
        ),
    )
}

/// Starts a long run and waits until both its programs are recorded and
/// running; returns the run, its id, the recorded programs and every
/// process in its namespaces.
fn start_long_run(
    topo: &str,
    json: &str,
    logs: &str,
) -> (LiveRun, String, Vec<ProcId>, Vec<ProcId>) {
    let mut run = LiveRun::start(&["run", topo, "--json", json, "--log-dir", logs]);
    let id = run.wait_running();
    let rec = record_with_processes(&id, 2);
    assert_eq!(rec["run_id"], id.as_str());
    assert_eq!(rec["owner_pid"], i64::from(run.pid().as_raw()));
    let recorded = recorded_processes(&rec);
    // Every process of both hosts (the shell, and what it started).
    let until = Instant::now() + Duration::from_secs(5);
    let inside = loop {
        let mut all = Vec::new();
        for h in ["h1", "h2"] {
            all.extend(namespace_processes(&format!("nl-{id}-{h}")));
        }
        if all.len() >= 2 {
            break all;
        }
        assert!(
            Instant::now() < until,
            "no programs in run {id}'s namespaces"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    for p in &recorded {
        assert!(p.alive(), "recorded program {p:?} is not running");
    }
    (run, id, recorded, inside)
}

#[test]
fn sigint_and_sigterm_end_the_run_and_leave_nothing_behind() {
    let _serial = serial();
    if !have_root() || !have(&["ping"]) {
        return;
    }
    let s = Scratch::new("signals");
    let topo = long_run(&s, "veth");
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        let t0 = Instant::now();
        let json = s.path(&format!("{sig}.json"));
        let logs = s.path(&format!("{sig}-logs"));
        let (mut run, id, recorded, inside) = start_long_run(&topo, &json, &logs);
        // Let the ping run a little.
        std::thread::sleep(Duration::from_millis(500));
        let sent = Instant::now();
        run.signal(sig);
        let st = run.wait_exit(Duration::from_secs(15));
        let took = sent.elapsed();
        assert_nothing_left(&id);
        assert_processes_gone(&inside, &recorded);
        assert_eq!(st.code(), Some(130), "{sig}: {}", run.output());
        assert!(
            took < Duration::from_secs(6),
            "{sig}: netloop took {took:?} to exit"
        );
        assert!(run.stderr().contains("interrupted at"), "{}", run.output());
        let r = load_json(&json);
        check_realtime_results(&r, &id);
        assert_eq!(r["realtime"]["end"], "interrupted");
        assert!(u(&r["meta"]["sim_time_reached_ns"]) < u(&r["meta"]["duration_ns"]));
        let sleep = command(&r, "h1", 0);
        assert!(sleep["started_s"].is_f64(), "{sleep}");
        assert!(
            sleep["exited_s"].is_null() && sleep["exit_code"].is_null(),
            "sleep 1000 was stopped at the end: {sleep}"
        );
        let log = read_log(&r, "h2", 0);
        assert!(
            !ping_replies(&log).is_empty(),
            "h2's ping got no reply\n{log}"
        );
        println!(
            "{sig}: exit 130 after {took:?}; {} processes in the namespaces, all gone; test part took {:.1} s",
            inside.len(),
            t0.elapsed().as_secs_f64()
        );
    }
}

// ---------------------------------------------------------------------------
// 6. netloop clean after SIGKILL, leaving a running run alone
// ---------------------------------------------------------------------------

/// Runs `netloop clean` when dropped during a panic.
struct CleanOnPanic;

impl Drop for CleanOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = Command::new(NETLOOP).arg("clean").output();
        }
    }
}

#[test]
fn clean_removes_what_a_killed_run_left_and_nothing_of_a_running_one() {
    let _serial = serial();
    if !have_root() || !have(&["ping"]) {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("clean");
    let topo = long_run(&s, "veth");
    let (json_a, logs_a) = (s.path("a.json"), s.path("a-logs"));
    let (json_b, logs_b) = (s.path("b.json"), s.path("b-logs"));
    let (mut a, id_a, recorded_a, inside_a) = start_long_run(&topo, &json_a, &logs_a);
    let (mut b, id_b, _, _) = start_long_run(&topo, &json_b, &logs_b);
    assert_ne!(id_a, id_b);

    // If an assertion fails from here on, `netloop clean` still removes
    // what the killed run left.
    let _clean = CleanOnPanic;
    a.signal(Signal::SIGKILL);
    let st = a.wait_exit(Duration::from_secs(10));
    assert_eq!(st.signal(), Some(9), "{st}");
    // SIGKILL leaves everything behind, and the record says what.
    let left = leftovers(&id_a);
    for h in ["h1", "h2"] {
        assert!(
            left.contains(&format!("namespace nl-{id_a}-{h}")),
            "after SIGKILL: {left:?}"
        );
    }
    assert!(
        left.iter()
            .any(|l| l.starts_with(&format!("device nl{id_a}h"))),
        "after SIGKILL the veths' root ends remain: {left:?}"
    );
    assert!(
        left.contains(&format!("record /run/netloop/{id_a}.json")),
        "{left:?}"
    );
    let rec = record(&id_a);
    assert_eq!(rec["namespaces"].as_array().unwrap().len(), 2, "{rec}");
    assert_eq!(rec["devices"].as_array().unwrap().len(), 2, "{rec}");
    let survivors: Vec<_> = inside_a.iter().filter(|p| p.alive()).collect();

    let out = netloop(&["clean"]);
    let report = text(&out.stdout);
    assert!(
        out.status.success(),
        "netloop clean: {report}{}",
        text(&out.stderr)
    );
    assert!(
        report.contains("cleaned") && report.contains(&id_a),
        "clean's report: {report}"
    );
    assert!(
        report.contains(&format!("run {id_b} is still running")),
        "clean's report: {report}"
    );
    assert_nothing_left(&id_a);
    assert_processes_gone(&inside_a, &recorded_a);

    // The running run is untouched by clean.
    let left_b = leftovers(&id_b);
    for h in ["h1", "h2"] {
        assert!(
            left_b.contains(&format!("namespace nl-{id_b}-{h}")),
            "clean touched the running run {id_b}: {left_b:?}"
        );
    }
    assert!(
        left_b.contains(&format!("record /run/netloop/{id_b}.json")),
        "{left_b:?}"
    );
    assert!(
        recorded_processes(&record(&id_b)).iter().all(ProcId::alive),
        "clean killed programs of the running run"
    );
    assert!(matches!(b.child.try_wait(), Ok(None)), "run {id_b} died");

    b.signal(Signal::SIGINT);
    let st = b.wait_exit(Duration::from_secs(15));
    assert_nothing_left(&id_b);
    assert_eq!(st.code(), Some(130), "{}", b.output());
    let out = netloop(&["clean"]);
    assert!(out.status.success());
    println!(
        "after SIGKILL {} of {} processes outlived netloop (clean removed them); clean said: {}; test took {:.1} s",
        survivors.len(),
        inside_a.len(),
        report.trim().replace('\n', " / "),
        t0.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------
// 7. malformed frames from a TAP host are dropped and counted
// ---------------------------------------------------------------------------

/// Sends hand-made bad frames from an AF_PACKET socket on an interface;
/// prints what it sent and the drop reason the model should give each.
const INJECT_PY: &str = r#"
import json, random, socket, struct, sys

ifname, r1_mac = sys.argv[1], bytes.fromhex(sys.argv[2].replace("-", "").replace(":", ""))
src_ip, dst_ip = socket.inet_aton(sys.argv[3]), socket.inet_aton(sys.argv[4])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((ifname, 0))
my_mac = s.getsockname()[4]
sent = []

def csum(b):
    if len(b) % 2:
        b += b"\0"
    t = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while t >> 16:
        t = (t & 0xFFFF) + (t >> 16)
    return ~t & 0xFFFF

def eth(ethertype, payload, dst=None):
    return (dst or r1_mac) + my_mac + struct.pack("!H", ethertype) + payload

def ipv4(ver_ihl=0x45, total=46, good_csum=True, length=46):
    # A 20-byte header (UDP, TTL 64, h1 -> h2), then zeros up to `length`.
    h = bytearray(struct.pack("!BBHHHBBH4s4s", ver_ihl, 0, total, 1, 0, 64, 17, 0, src_ip, dst_ip))
    c = csum(bytes(h))
    h[10:12] = struct.pack("!H", c if good_csum else c ^ 0x5A5A)
    return bytes(h) + bytes(length - 20)

def send(label, reason, frame):
    n = s.send(frame)
    assert n == len(frame), (label, n, len(frame))
    sent.append({"label": label, "reason": reason, "len": len(frame)})

send("ipv4 bad checksum", "bad_checksum", eth(0x0800, ipv4(good_csum=False)))
send("ipv4 bad version, IHL, checksum and total length", "bad_checksum",
     eth(0x0800, ipv4(0x73, total=1400, good_csum=False)))
send("ipv4 version 6", "malformed", eth(0x0800, ipv4(0x65)))
send("ipv4 IHL 3", "malformed", eth(0x0800, ipv4(0x43)))
send("ipv4 IHL 15, beyond the frame", "malformed", eth(0x0800, ipv4(0x4F)))
send("ipv4 total length beyond the frame", "malformed", eth(0x0800, ipv4(total=1400)))
send("ipv4 total length below the header", "malformed", eth(0x0800, ipv4(total=10)))
send("ipv4 header cut at 10 bytes", "malformed", eth(0x0800, ipv4()[:10]))
send("ethernet header only, ipv4", "malformed", eth(0x0800, b""))
send("arp with hardware length 7, protocol length 3", "malformed",
     eth(0x0806, struct.pack("!HHBBH", 1, 0x0800, 7, 3, 1) + bytes(38)))
send("arp cut after its fixed header", "malformed",
     eth(0x0806, struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1)))
send("unknown ethertype 0x88b5", "unsupported", eth(0x88B5, bytes(46)))
send("ethernet header only, unknown ethertype", "unsupported", eth(0x88B5, b""))
rng = random.Random(7)
for i in range(3):
    dst = bytes([rng.randrange(256) & 0xFE | 0x02]) + bytes(rng.randrange(256) for _ in range(5))
    assert dst != r1_mac
    body = bytes(rng.randrange(256) for _ in range(rng.randrange(8, 200)))
    send("random bytes to another MAC #%d" % i, "not_for_us", dst + body)
for i in range(3):
    et = rng.choice([t for t in range(0x0600, 0x10000, 0x0101) if t not in (0x0800, 0x0806)])
    body = bytes(rng.randrange(256) for _ in range(rng.randrange(6, 200)))
    send("random bytes to r1, ethertype %#06x #%d" % (et, i), "unsupported",
         r1_mac + body[:6] + struct.pack("!H", et) + body[6:])
# Larger than the link's MTU (eth0's MTU was raised to let it out): the
# link h1-r1 drops it, not the router.
big = ipv4(total=4000 - 14, length=4000 - 14)
send("ipv4 of 4000 bytes, over the link's MTU", "mtu_exceeded@h1-r1", eth(0x0800, big))
try:
    s.send(r1_mac[:5])
    runt = "sent"
except OSError as e:
    runt = "refused: " + e.strerror
print(json.dumps({"sent": sent, "runt": runt}))
"#;

#[test]
fn malformed_frames_from_a_tap_host_are_dropped_and_counted() {
    let _serial = serial();
    if !have_root() || !have(&["ping", "python3"]) {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("malformed");
    let topo = s.write("t.toml", &one_router("6s", "tap", "", ""));
    let script = s.write("inject.py", INJECT_PY);
    // r1's MAC on h1's link, from `netloop check --verbose`.
    let out = netloop(&["check", &topo, "--verbose"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let check = text(&out.stdout);
    let r1_mac = check
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("r1: eth0 "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("r1's MAC in:\n{check}"))
        .to_string();

    let json = s.path("out.json");
    let logs = s.path("logs");
    let mut run = LiveRun::start(&["run", &topo, "--json", &json, "--log-dir", &logs]);
    let id = run.wait_running();
    let h1 = format!("nl-{id}-h1");
    // Let a frame larger than the link's MTU out of h1's interface.
    must(
        "ip",
        &["-n", &h1, "link", "set", "dev", "eth0", "mtu", "9000"],
    );
    let inject = Command::new("ip")
        .args([
            "netns",
            "exec",
            &h1,
            "python3",
            &script,
            "eth0",
            &r1_mac,
            "198.18.1.2",
            "198.18.2.2",
        ])
        .output()
        .unwrap();
    assert!(
        inject.status.success(),
        "injector: {}{}",
        text(&inject.stdout),
        text(&inject.stderr)
    );
    let injected: Value = serde_json::from_slice(&inject.stdout).unwrap();
    // The run still works: ping through netloop exec.
    let ping = Command::new(NETLOOP)
        .args([
            "exec",
            "--run",
            &id,
            "h1",
            "--",
            "ping",
            "-c",
            "3",
            "-i",
            "0.2",
            "-W",
            "3",
            "198.18.2.2",
        ])
        .output()
        .unwrap();
    let ping_log = text(&ping.stdout);
    let ping_done = Instant::now();
    let st = run.wait_exit(Duration::from_secs(20));
    assert_nothing_left(&id);
    assert_eq!(st.code(), Some(0), "{}", run.output());
    assert!(!run.stderr().contains("panic"), "{}", run.output());
    assert!(
        ping.status.success(),
        "ping after the garbage failed: {ping_log}{}",
        text(&ping.stderr)
    );
    assert_eq!(ping_summary(&ping_log), Some((3, 3)), "{ping_log}");
    assert!(
        ping_done.elapsed() > Duration::from_millis(500),
        "the run ended too soon after the ping: the test's steps did not fit in its duration"
    );

    let r = load_json(&json);
    check_realtime_results(&r, &id);
    let rt = &r["realtime"];
    assert_eq!(rt["end"], "duration", "the run went on to its end");
    let sent = injected["sent"].as_array().unwrap();
    // Drops by the router ("reason"), and by the link h1-r1
    // ("reason@h1-r1").
    let mut at_r1: BTreeMap<String, u64> = BTreeMap::new();
    let mut on_link: BTreeMap<String, u64> = BTreeMap::new();
    let mut everywhere: BTreeMap<String, u64> = BTreeMap::new();
    for f in sent {
        let reason = f["reason"].as_str().unwrap();
        match reason.split_once('@') {
            Some((reason, "h1-r1")) => *on_link.entry(reason.into()).or_default() += 1,
            Some(other) => panic!("unexpected place {other:?}"),
            None => *at_r1.entry(reason.into()).or_default() += 1,
        }
        let reason = reason.split('@').next().unwrap();
        *everywhere.entry(reason.into()).or_default() += 1;
    }
    // Every bad frame crossed the boundary (nothing there checks more than
    // the length) and was dropped by the router or the link for the expected
    // reason; nothing else was dropped anywhere.
    let r1 = &node(&r, "r1")["stats"];
    assert_eq!(counts(&r1["drops"]), at_r1, "r1's drops; sent {sent:#?}");
    let access = link(&r, "h1-r1");
    assert_eq!(counts(&access["a_to_b"]["drops"]), on_link, "{access}");
    assert_eq!(
        counts(&r["conservation"]["dropped"]),
        everywhere,
        "conservation.dropped"
    );
    let expected = everywhere;
    let p = port(&r, "h1");
    assert!(
        u(&p["rx_frames"]) >= sent.len() as u64 + 3,
        "h1's port read {p}, {} bad frames were sent",
        sent.len()
    );
    // The kernel refuses frames shorter than an Ethernet header, so none
    // reached netloop's runt counter.
    assert_eq!(
        injected["runt"].as_str().unwrap().starts_with("refused"),
        u(&p["rx_malformed"]) == 0,
        "{injected} / {p}"
    );
    assert_eq!(u(&p["rx_truncated"]), 0, "{p}");
    assert!(
        u(&r1["received"]) >= sent.len() as u64 - 1 + 6,
        "r1 received every bad frame but the oversized one, and the pings: {r1}"
    );
    println!(
        "sent {} bad frames; dropped (r1 and link h1-r1) {:?}; rx_malformed {} (runt of 5 bytes: {}); test took {:.1} s",
        sent.len(),
        expected,
        p["rx_malformed"],
        injected["runt"],
        t0.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------
// 8. clear errors, before anything is created
// ---------------------------------------------------------------------------

/// Whether a netloop run (of anyone) is running on this machine.
fn some_run_is_running() -> bool {
    records().iter().filter(|r| r.ends_with(".json")).any(|r| {
        std::fs::read_to_string(format!("/run/netloop/{r}"))
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v["owner_pid"].as_i64())
            .is_some_and(|pid| proc_stat(pid).is_some())
    })
}

#[test]
fn errors_are_clear_and_come_before_anything_is_created() {
    let _serial = serial();
    if !have_root() {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("errors");

    // A program that is not installed: refused before any namespace exists.
    let before = snapshot();
    let topo = s.write(
        "missing-program.toml",
        &one_router(
            "5s",
            "veth",
            &cmd("definitely-not-installed-xyz --flag", "0s", true),
            "",
        ),
    );
    let out = netloop(&["run", &topo, "--log-dir", &s.path("logs")]);
    let err = text(&out.stderr);
    assert!(
        !out.status.success() && out.status.code() != Some(130),
        "{}",
        out.status
    );
    assert!(
        err.contains("'definitely-not-installed-xyz'") && err.contains("'h1'"),
        "the error names the program and the host: {err}"
    );
    assert!(
        !text(&out.stdout).contains("namespace nl-"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(snapshot(), before, "a failed start created something");

    // An attached interface that does not exist.
    let ifname = format!("nltx{}", std::process::id());
    let topo = s.write(
        "missing-interface.toml",
        &format!(
            r#"[[node]]
name = "nic"
kind = "attached"
interface = "{ifname}"

[[node]]
name = "r1"
kind = "router"

[[node]]
name = "h2"
kind = "namespace"

[[link]]
endpoints = ["nic", "r1"]

[[link]]
endpoints = ["r1", "h2"]
"#
        ),
    );
    let out = netloop(&["run", &topo, "--log-dir", &s.path("logs")]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{}", out.status);
    assert!(
        err.contains("does not exist") && err.contains(&ifname),
        "the error names the interface: {err}"
    );
    assert_eq!(snapshot(), before, "a failed start created something");

    // `netloop exec` without a run.
    if some_run_is_running() {
        println!("skipped the `netloop exec` part: another netloop run is running on this machine");
    } else {
        let out = netloop(&["exec", "nosuchhost", "--", "true"]);
        let err = text(&out.stderr);
        assert!(!out.status.success());
        assert!(err.contains("no netloop run is running"), "{err}");
        let out = netloop(&["exec", "--run", "ffffff", "h1", "--", "true"]);
        let err = text(&out.stderr);
        assert!(!out.status.success());
        assert!(
            err.contains("no netloop run with id 'ffffff' is running"),
            "{err}"
        );
    }
    println!("test took {:.1} s", t0.elapsed().as_secs_f64());
}
