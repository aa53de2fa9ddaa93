//! What the end-to-end tests of `netloop run` share (realtime.rs, faults.rs):
//! preconditions and serialisation, scratch directories, [`LiveRun`] (a
//! `netloop run` child read as it goes, ended cleanly if a test fails),
//! checks that a run left nothing behind, readers of the results and of
//! programs' logs, and the topologies the tests run.
//!
//! Every helper that signals a process does so by pid, and only processes a
//! test started. Addresses are all from 198.18.0.0/15.

#![allow(dead_code)]

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub const NETLOOP: &str = env!("CARGO_BIN_EXE_netloop");

/// How long a run may take to set up its namespaces and say it is running.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// Preconditions, serialisation, scratch space
// ---------------------------------------------------------------------------

/// The tests share the machine's namespaces and /run/netloop: one at a time.
pub static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn have_root() -> bool {
    if nix::unistd::geteuid().is_root() {
        true
    } else {
        skip("needs root (creates network namespaces)")
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

/// Whether every program is installed; prints which one is missing if not.
pub fn have(programs: &[&str]) -> bool {
    for p in programs {
        if !netloop_io::netns::command_exists(p) {
            return skip(&format!("needs `{p}`, which is not installed"));
        }
    }
    true
}

/// A directory for one test's topology, results and logs; removed at the end
/// unless the test failed (then kept for inspection).
pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("netloop-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch { dir }
    }

    pub fn path(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_string()
    }

    pub fn write(&self, name: &str, text: &str) -> String {
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

pub fn netloop(args: &[&str]) -> Output {
    Command::new(NETLOOP)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("netloop runs")
}

/// Runs examples/dumbbell.toml for `duration` (6 s and longer: a flow
/// starts at 5 s) sampled every `interval`: its results at `json`, its
/// series beside them (`<json stem>.series.jsonl`). Fails the test if the
/// run fails.
#[allow(dead_code)]
pub fn run_dumbbell_sampled(json: &str, duration: &str, interval: &str) {
    let out = netloop(&[
        "run",
        &repo_file("examples/dumbbell.toml"),
        "--duration",
        duration,
        "--json",
        json,
        "--stats-interval",
        interval,
        "-q",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// A file of the repository (e.g. `examples/dumbbell.toml`), as a path
/// `netloop` can open from the test's directory.
pub fn repo_file(path: &str) -> String {
    format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"))
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A command that must succeed; returns its stdout.
pub fn must(program: &str, args: &[&str]) -> String {
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
pub fn run_id_in(line: &str) -> Option<String> {
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
pub struct LiveRun {
    child: Child,
    status: Option<ExitStatus>,
    lines: Receiver<String>,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
    run_id: Option<String>,
}

impl LiveRun {
    pub fn start(args: &[&str]) -> LiveRun {
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

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    pub fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Both outputs, for assertion messages.
    pub fn output(&self) -> String {
        format!(
            "--- stdout ---\n{}--- stderr ---\n{}",
            self.stdout(),
            self.stderr()
        )
    }

    /// Reads stdout until netloop says it runs in real time; returns the run
    /// id (from the `namespace nl-<id>-…` line before it).
    pub fn wait_running(&mut self) -> String {
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

    /// Whether netloop is still running.
    pub fn is_running(&mut self) -> bool {
        self.status.is_none() && matches!(self.child.try_wait(), Ok(None))
    }

    pub fn signal(&self, s: Signal) {
        kill(self.pid(), s).unwrap_or_else(|e| panic!("cannot send {s} to netloop: {e}"));
    }

    /// Waits for netloop to exit (and for its output to be read).
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
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
    pub fn finish(mut self, timeout: Duration) -> (LiveRun, String, ExitStatus) {
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
pub fn namespaces() -> BTreeSet<String> {
    must("ip", &["netns", "list"])
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Names of the interfaces of the root namespace (`ip -br link`, without
/// the `@peer` suffix).
pub fn devices() -> BTreeSet<String> {
    must("ip", &["-br", "link"])
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .collect()
}

/// Entries of /run/netloop.
pub fn records() -> BTreeSet<String> {
    std::fs::read_dir("/run/netloop")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// What run `id` still has: namespaces, devices, record files.
pub fn leftovers(id: &str) -> Vec<String> {
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
pub fn assert_nothing_left(id: &str) {
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

/// Everything netloop-looking on the machine (namespaces `nl-…`, devices
/// `nl…`, entries of /run/netloop): for tests where no run id exists (a run
/// that failed before it started). Compare with [`appeared_since`], not
/// with `==`: other netloop runs may start and end meanwhile.
pub fn snapshot() -> BTreeSet<String> {
    let mut all: BTreeSet<String> = namespaces()
        .into_iter()
        .filter(|n| n.starts_with("nl-"))
        .map(|n| format!("namespace {n}"))
        .collect();
    all.extend(
        devices()
            .into_iter()
            .filter(|d| d.starts_with("nl"))
            .map(|d| format!("device {d}")),
    );
    all.extend(records().into_iter().map(|r| format!("record {r}")));
    all
}

/// The ids of the runs whose netloop process is alive (by their records).
pub fn live_run_ids() -> BTreeSet<String> {
    records()
        .iter()
        .filter_map(|r| r.strip_suffix(".json"))
        .filter(|id| {
            std::fs::read_to_string(format!("/run/netloop/{id}.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .and_then(|v| v["owner_pid"].as_i64())
                .is_some_and(|pid| proc_stat(pid).is_some())
        })
        .map(str::to_string)
        .collect()
}

/// The run id in an entry of [`snapshot`], if its name carries one.
fn run_id_of(entry: &str) -> Option<&str> {
    let (kind, name) = entry.split_once(' ')?;
    let id = match kind {
        "namespace" => name.get(3..9),
        "device" => name.get(2..8),
        _ => name.strip_suffix(".json"),
    }?;
    Some(id)
}

/// What appeared on the machine since `before` (a [`snapshot`]) and belongs
/// to no running netloop: what a netloop that has exited left behind.
/// Another run that starts meanwhile (its record names a live process) is
/// not counted, so the tests hold while other runs come and go.
pub fn appeared_since(before: &BTreeSet<String>) -> Vec<String> {
    let live = live_run_ids();
    snapshot()
        .difference(before)
        .filter(|e| !run_id_of(e).is_some_and(|id| live.contains(id)))
        .cloned()
        .collect()
}

/// The record of run `id` as it stands.
pub fn record(id: &str) -> Value {
    let p = format!("/run/netloop/{id}.json");
    let t = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
    serde_json::from_str(&t).unwrap_or_else(|e| panic!("{p}: {e}: {t}"))
}

/// Waits until run `id`'s record lists `n` processes; returns the record.
pub fn record_with_processes(id: &str, n: usize) -> Value {
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
pub fn proc_stat(pid: i64) -> Option<(char, i64, u64)> {
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
pub struct ProcId {
    pub pid: i64,
    pub start: u64,
}

impl ProcId {
    pub fn of(pid: i64) -> Option<ProcId> {
        proc_stat(pid).map(|(_, _, start)| ProcId { pid, start })
    }

    /// Still there (a zombie waiting for a reaper counts as gone).
    pub fn alive(&self) -> bool {
        matches!(proc_stat(self.pid), Some((state, _, start)) if start == self.start && state != 'Z')
    }
}

/// The processes inside namespace `ns` (`ip netns pids`).
pub fn namespace_processes(ns: &str) -> Vec<ProcId> {
    must("ip", &["netns", "pids", ns])
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter_map(ProcId::of)
        .collect()
}

/// Live processes in process group `pgrp` (other than zombies).
pub fn group_members(pgrp: i64) -> Vec<i64> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i64>().ok())
        .filter(|&pid| matches!(proc_stat(pid), Some((s, g, _)) if g == pgrp && s != 'Z'))
        .collect()
}

/// Asserts that every process in `procs` is gone, and that nothing is left
/// in the process groups of the recorded programs.
pub fn assert_processes_gone(procs: &[ProcId], recorded: &[ProcId]) {
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
pub fn recorded_processes(rec: &Value) -> Vec<ProcId> {
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

pub fn load_json(path: &str) -> Value {
    let t = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&t).unwrap_or_else(|e| panic!("{path}: {e}"))
}

pub fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not an unsigned integer: {v}"))
}

pub fn node<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("no node {name}"))
}

pub fn link<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name)
        .unwrap_or_else(|| panic!("no link {name}"))
}

pub fn port<'a>(r: &'a Value, host: &str) -> &'a Value {
    r["realtime"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["host"] == host)
        .unwrap_or_else(|| panic!("no real port of {host}: {}", r["realtime"]))
}

pub fn command<'a>(r: &'a Value, host: &str, k: usize) -> &'a Value {
    r["realtime"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["host"] == host)
        .nth(k)
        .unwrap_or_else(|| panic!("no command {k} of {host}"))
}

/// A count map (`{"malformed": 3, …}`) as a BTreeMap.
pub fn counts(v: &Value) -> BTreeMap<String, u64> {
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
/// written, or counted as a boundary drop or as still unsent at the end).
pub fn check_realtime_results(r: &Value, id: &str) {
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
        "tx_unsent",
        "rx_truncated",
        "rx_malformed",
        "faults",
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
        sum("rx_kernel_drops") + sum("tx_drops") + sum("tx_unsent") + sum("rx_truncated")
    );
    let hist = rt["event_lateness_histogram"].as_array().unwrap();
    assert_eq!(
        hist.iter().map(|b| u(&b["count"])).sum::<u64>(),
        u(&rt["event_lateness"]["count"]),
        "the lateness histogram holds every event: {hist:?}"
    );
    for p in ports {
        assert_eq!(
            u(&p["entered"]),
            u(&p["rx_frames"]),
            "frames read from {} that entered the model, against those read: {p}",
            p["interface"]
        );
    }
    let created_ext = c["created"]["external"].as_u64().unwrap_or(0);
    let delivered_ext = c["delivered"]["external"].as_u64().unwrap_or(0);
    assert_eq!(
        created_ext,
        u(&rt["rx_frames"]),
        "frames read from real interfaces = frames created with origin external; ports: {ports:?}"
    );
    assert_eq!(
        delivered_ext,
        u(&rt["tx_frames"]) + sum("tx_drops") + sum("tx_unsent"),
        "frames delivered to real nodes = frames written + dropped at the boundary + unsent"
    );
}

/// Ping's replies: icmp_seq → round-trip time in ms.
pub fn ping_replies(log: &str) -> BTreeMap<u32, f64> {
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
pub fn ping_summary(log: &str) -> Option<(u32, u32)> {
    let l = log.lines().find(|l| l.contains("packets transmitted"))?;
    let n: Vec<u32> = l
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .take(2)
        .map(|s| s.parse().unwrap())
        .collect();
    Some((n[0], n[1]))
}

pub fn read_log(r: &Value, host: &str, k: usize) -> String {
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
pub fn two_routers(duration: &str, wan_delay: &str, h1: &str, h2: &str, extra: &str) -> String {
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

/// Runs topology file `topo` with its results (`out.json`) and logs
/// (`logs/`) in `s`, waits up to 40 s for it to end, and checks that it
/// exited 0 and left nothing behind; returns its results and run id.
pub fn run_to_end(s: &Scratch, topo: &str) -> (Value, String) {
    let json = s.path("out.json");
    let logs = s.path("logs");
    let (run, id, st) = LiveRun::start(&["run", topo, "--json", &json, "--log-dir", &logs])
        .finish(std::time::Duration::from_secs(40));
    assert_nothing_left(&id);
    assert_eq!(st.code(), Some(0), "{}", run.output());
    (load_json(&json), id)
}

/// The report `iperf3 -J` wrote into a program's log, and the Mbit/s its
/// receiver saw.
pub fn iperf3_report(log: &str) -> (Value, f64) {
    let j: Value = serde_json::from_str(&log[log.find('{').expect("iperf3 JSON")..])
        .unwrap_or_else(|e| panic!("iperf3 -J output: {e}\n{log}"));
    let mbps = j["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0)
        / 1e6;
    (j, mbps)
}

pub fn cmd(cmd: &str, start: &str, wait: bool) -> String {
    format!("[[node.command]]\ncmd = \"{cmd}\"\nstart = \"{start}\"\nwait = {wait}\n")
}

/// h1 — r1 — h2 with fixed addresses (h1 198.18.1.2, h2 198.18.2.2); h1 is
/// joined by `h1_via`.
pub fn one_router(duration: &str, h1_via: &str, h1: &str, h2: &str) -> String {
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
// Long runs, and clean-up after a failed test
// ---------------------------------------------------------------------------

/// A long run: `sleep 1000` on h1, an endless ping on h2.
pub fn long_run(s: &Scratch, via: &str) -> String {
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
pub fn start_long_run(
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

/// Runs `netloop clean` when dropped during a panic.
pub struct CleanOnPanic;

impl Drop for CleanOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = Command::new(NETLOOP).arg("clean").output();
        }
    }
}
