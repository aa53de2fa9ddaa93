//! Faults during `netloop run` with real hosts: a program that crashes, a
//! real host's device deleted from outside, a pcap disk that fills up,
//! results that cannot be written, two runs of one topology at once.
//!
//! Each test ends with a clear message from netloop, nothing left behind
//! (no namespace `nl-<id>-*`, no device `nl<id>h*`, no record
//! `/run/netloop/<id>.json`) and a results file that is either complete,
//! valid JSON or not there at all. SIGINT, SIGTERM and SIGKILL followed by
//! `netloop clean` are tested in realtime.rs; here, that a SIGKILL of netloop
//! takes every process of its real hosts with it, grandchildren and daemons
//! included.
//!
//! Like realtime.rs, every test needs root and says so and returns without
//! it; they run one at a time; processes are only signalled by pid (the
//! netloop children a test spawned); addresses are all from 198.18.0.0/15;
//! timing assertions are loose (the machine may be busy with other work).
//! The tmpfs mounts a test makes are unmounted when it ends, also when it
//! fails.

mod common;

use common::*;
use nix::sys::signal::Signal;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A small tmpfs mounted on a directory of the test's scratch space,
/// unmounted when dropped (also when the test fails).
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs with `options` (e.g. `size=256k`, `ro,size=64k`) on
    /// `dir`, which is created.
    fn mount(dir: &str, options: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        must(
            "mount",
            &["-t", "tmpfs", "-o", options, "netloop-test", dir],
        );
        let t = Tmpfs { dir: dir.into() };
        assert!(t.mounted(), "{dir} is not a mount point after mount");
        t
    }

    fn mounted(&self) -> bool {
        let dir = self.dir.canonicalize().unwrap_or_else(|_| self.dir.clone());
        std::fs::read_to_string("/proc/self/mounts")
            .unwrap_or_default()
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some(dir.to_str().unwrap()))
    }

    /// Fills it up with one file (`filler`).
    fn fill(&self) {
        let _ = Command::new("dd")
            .args([
                "if=/dev/zero",
                &format!("of={}", self.dir.join("filler").display()),
                "bs=4k",
            ])
            .output();
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        if !self.mounted() {
            return;
        }
        let ok = Command::new("umount")
            .arg(&self.dir)
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            // Something still has a file open there: detach it now, it goes
            // when the last user closes.
            let _ = Command::new("umount").arg("-l").arg(&self.dir).output();
        }
        if self.mounted() {
            eprintln!("could not unmount {}", self.dir.display());
        }
    }
}

/// The names of the files in `dir`.
fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The root-namespace device of real host `host`, from netloop's
/// `h2: namespace nl-<id>-h2, nl<id>h1 198.18.2.2/24 via veth — …` line.
fn device_of(stdout: &str, host: &str) -> String {
    stdout
        .lines()
        .find_map(|l| {
            let rest = l.strip_prefix(&format!("{host}: namespace "))?;
            let (_, after) = rest.split_once(", ")?;
            after.split_whitespace().next().map(str::to_string)
        })
        .unwrap_or_else(|| panic!("no device of {host} in:\n{stdout}"))
}

/// CPU time (user + system) of process `pid` so far, in seconds.
fn cpu_seconds(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some(i) = stat.rfind(')') else { return 0.0 };
    let f: Vec<u64> = stat[i + 1..]
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the line (11 and 12 after
    // the command name), in clock ticks of 1/100 s (USER_HZ on Linux).
    (f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)) as f64 / 100.0
}

/// `netloop exec --run ID HOST -- ping -c N …`: (replies, output).
fn exec_ping(id: &str, host: &str, to: &str, n: u32) -> (u32, String) {
    let out = netloop(&[
        "exec",
        "--run",
        id,
        host,
        "--",
        "ping",
        "-c",
        &n.to_string(),
        "-i",
        "0.2",
        "-W",
        "2",
        to,
    ]);
    let log = format!("{}{}", text(&out.stdout), text(&out.stderr));
    (ping_summary(&log).map_or(0, |(_, r)| r), log)
}

// ---------------------------------------------------------------------------
// 1. a real host's program crashes
// ---------------------------------------------------------------------------

#[test]
fn crashing_programs_are_reported_and_the_run_goes_on_to_its_end() {
    let _serial = serial();
    if !have_root() || !have(&["ping"]) {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("crash");
    // On h1: a shell that kills itself with SIGSEGV; a program that exits 3;
    // a shell whose child dies of SIGABRT (the shell then exits 134). No
    // core files. On h2: a ping of h1 all along.
    let segv = "ulimit -c 0; sleep 0.3; kill -SEGV $$";
    let exit3 = "sleep 0.4; exit 3";
    let abrt = "ulimit -c 0; sleep 0.5; sh -c 'kill -ABRT $$'";
    let topo = s.write(
        "t.toml",
        &one_router(
            "3s",
            "veth",
            &(cmd(segv, "0s", false) + &cmd(exit3, "0s", false) + &cmd(abrt, "0s", false)),
            &cmd("ping -i 0.2 198.18.1.2", "0s", false),
        ),
    );
    let json = s.path("out.json");
    let logs = s.path("logs");
    let (run, id, st) = LiveRun::start(&["run", &topo, "--json", &json, "--log-dir", &logs])
        .finish(Duration::from_secs(30));
    assert_nothing_left(&id);
    assert_eq!(st.code(), Some(0), "{}", run.output());
    let err = run.stderr();
    assert!(!err.contains("panic"), "{}", run.output());

    let r = load_json(&json);
    check_realtime_results(&r, &id);
    let rt = &r["realtime"];
    assert_eq!(rt["end"], "duration", "the run went on to its end");
    assert_eq!(
        u(&r["meta"]["sim_time_reached_ns"]),
        u(&r["meta"]["duration_ns"])
    );
    // What each program did, in the results.
    let c = command(&r, "h1", 0);
    assert_eq!(c["signal"], "SIGSEGV", "{c}");
    assert!(c["exit_code"].is_null(), "{c}");
    let t = c["exited_s"].as_f64().unwrap();
    assert!((0.29..1.5).contains(&t), "SIGSEGV seen at {t} s: {c}");
    let c = command(&r, "h1", 1);
    assert_eq!(c["exit_code"], 3, "{c}");
    assert!(c["signal"].is_null(), "{c}");
    // A shell that does not exec its last command reports its child's
    // SIGABRT as status 134; one that does dies of it itself.
    let c = command(&r, "h1", 2);
    let abrt_direct = c["signal"] == "SIGABRT";
    assert!(abrt_direct || c["exit_code"] == 128 + 6, "{c}");
    let c = command(&r, "h2", 0);
    assert!(
        c["exited_s"].is_null() && c["exit_code"].is_null() && c["signal"].is_null(),
        "the ping ran to the end and was stopped then: {c}"
    );
    // And in netloop's messages, naming host and program.
    for want in [
        format!("program `{segv}` on real host 'h1' was killed by SIGSEGV"),
        format!("program `{exit3}` on real host 'h1' exited with status 3"),
        if abrt_direct {
            format!("program `{abrt}` on real host 'h1' was killed by SIGABRT")
        } else {
            format!(
                "program `{abrt}` on real host 'h1' exited with status 134 \
                 (the shell's status for a program killed by SIGABRT)"
            )
        },
    ] {
        assert!(err.contains(&want), "no '{want}' in:\n{}", run.output());
    }
    assert!(
        !err.contains("real host 'h2'"),
        "the ping was not a failure: {err}"
    );
    // The other host was reachable all along, also after the crashes.
    let log = read_log(&r, "h2", 0);
    let replies = ping_replies(&log);
    assert!(
        replies.len() >= 8 && replies.keys().any(|&s| s >= 10),
        "h2's ping of h1: {log}"
    );
    println!(
        "SIGSEGV seen {:.3} s, exit 3 seen {:.3} s, SIGABRT seen {:.3} s into the run; \
         h2's ping got {} replies; test took {:.1} s",
        command(&r, "h1", 0)["exited_s"].as_f64().unwrap(),
        command(&r, "h1", 1)["exited_s"].as_f64().unwrap(),
        command(&r, "h1", 2)["exited_s"].as_f64().unwrap(),
        replies.len(),
        t0.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------
// 2. a real host's device deleted from outside
// ---------------------------------------------------------------------------

/// r1 with four real hosts: h1 (TAP, 198.18.1.2) and h2 (veth, 198.18.2.2)
/// lose their devices during the run; h3 (TAP, 198.18.3.2) and h4 (veth,
/// 198.18.4.2) keep theirs and ping h1 and h2 all along.
fn four_hosts(duration: &str) -> String {
    let mut t = format!("[run]\nduration = \"{duration}\"\n");
    for (h, via, command) in [
        ("h1", "tap", String::new()),
        ("h2", "veth", String::new()),
        ("h3", "tap", cmd("ping -i 0.1 198.18.1.2", "0s", false)),
        ("h4", "veth", cmd("ping -i 0.1 198.18.2.2", "0s", false)),
    ] {
        t += &format!(
            "\n[[node]]\nname = \"{h}\"\nkind = \"namespace\"\nvia = \"{via}\"\n{command}"
        );
    }
    t += "\n[[node]]\nname = \"r1\"\nkind = \"router\"\n";
    for k in 1..=4 {
        t += &format!(
            "\n[[link]]\nendpoints = [\"h{k}\", \"r1\"]\naddresses = [\"198.18.{k}.2/24\", \"198.18.{k}.1/24\"]\n"
        );
    }
    t
}

#[test]
fn deleted_tap_and_veth_devices_are_reported_and_the_other_hosts_keep_working() {
    let _serial = serial();
    if !have_root() || !have(&["ping"]) {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("deleted");
    let topo = s.write("t.toml", &four_hosts("6s"));
    let json = s.path("out.json");
    let logs = s.path("logs");
    let mut run = LiveRun::start(&["run", &topo, "--json", &json, "--log-dir", &logs]);
    let id = run.wait_running();
    let running = Instant::now();
    let stdout = run.stdout();
    let tap = device_of(&stdout, "h1");
    let veth = device_of(&stdout, "h2");
    assert!(
        stdout.contains(&format!("{tap} 198.18.1.2/24 via tap")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("{veth} 198.18.2.2/24 via veth")),
        "{stdout}"
    );
    let (ns1, ns2) = (format!("nl-{id}-h1"), format!("nl-{id}-h2"));

    // h1's TAP device, from inside its namespace (where it is eth0).
    // (Moments from when the test read "running", about when netloop's
    // clock started: from just before the deletion to just after it.)
    std::thread::sleep(Duration::from_millis(700));
    let tap_deleting = running.elapsed().as_secs_f64();
    must("ip", &["-n", &ns1, "link", "del", "eth0"]);
    let tap_deleted = running.elapsed().as_secs_f64();
    let (after_tap, log1) = exec_ping(&id, "h3", "198.18.4.2", 3);
    // h2's veth, by its root end (which takes the end in h2 with it).
    let veth_deleting = running.elapsed().as_secs_f64();
    must("ip", &["link", "del", &veth]);
    let veth_deleted = running.elapsed().as_secs_f64();
    assert!(
        !must("ip", &["-n", &ns2, "-br", "link"]).contains("eth0"),
        "h2's end of the veth outlived its root end"
    );
    // netloop goes on without them, and does not spin on their errors.
    let cpu0 = cpu_seconds(run.pid().as_raw());
    let w0 = Instant::now();
    let (after_veth, log2) = exec_ping(&id, "h3", "198.18.4.2", 3);
    std::thread::sleep(Duration::from_millis(300));
    let cpu = (cpu_seconds(run.pid().as_raw()) - cpu0) / w0.elapsed().as_secs_f64();
    let st = run.wait_exit(Duration::from_secs(20));
    assert_nothing_left(&id);
    assert_eq!(st.code(), Some(0), "{}", run.output());
    assert!(!run.stderr().contains("panic"), "{}", run.output());
    assert_eq!(after_tap, 3, "h3 → h4 after h1's TAP went:\n{log1}");
    assert_eq!(after_veth, 3, "h3 → h4 after h2's veth went:\n{log2}");
    assert!(
        cpu < 0.5,
        "netloop used {:.0} % of a CPU with two deleted devices",
        cpu * 100.0
    );

    let r = load_json(&json);
    check_realtime_results(&r, &id);
    let rt = &r["realtime"];
    assert_eq!(rt["end"], "duration", "the run went on to its end");
    let err = run.stderr();
    let mut firsts = Vec::new();
    for (h, dev, kind, deleting, deleted) in [
        ("h1", &tap, "tap", tap_deleting, tap_deleted),
        ("h2", &veth, "packet", veth_deleting, veth_deleted),
    ] {
        let p = port(&r, h);
        assert_eq!(p["gone"], true, "{p}");
        assert!(u(&p["faults"]) > 0, "{p}");
        let first = p["first_fault_s"].as_f64().unwrap();
        assert!(
            // The run's clock starts a moment after it says it runs (the
            // times here are from that line): a loose lower bound.
            first > deleting - 1.0 && first < deleted + 2.0,
            "{h}'s device deleted from {deleting:.3} s to {deleted:.3} s, first fault at {first:.3} s: {p}"
        );
        firsts.push(first);
        let want = format!("interface {kind} {dev} of real host '{h}' was deleted during the run");
        assert!(err.contains(&want), "no '{want}' in:\n{}", run.output());
        assert!(err.contains("the run went on without it"), "{err}");
    }
    for h in ["h3", "h4"] {
        let p = port(&r, h);
        assert_eq!(p["gone"], false, "{p}");
        assert_eq!(u(&p["faults"]), 0, "{p}");
        assert!(p["first_fault_s"].is_null(), "{p}");
    }
    // The pings of the lost hosts went on to the end: their requests were
    // answered until the devices went, then lost at the boundary.
    for (h, to, deleted) in [("h3", "h1", tap_deleted), ("h4", "h2", veth_deleted)] {
        let log = read_log(&r, h, 0);
        let replies = ping_replies(&log);
        assert!(
            replies.len() >= 3,
            "{h}'s ping of {to} before it lost its device:\n{log}"
        );
        let last = *replies.keys().max().unwrap();
        assert!(
            f64::from(last) < (deleted + 0.5) * 10.0 + 2.0,
            "{h}'s ping of {to} got a reply (icmp_seq={last}) after {to}'s device was deleted at {deleted:.1} s:\n{log}"
        );
    }
    let lost_h1 = port(&r, "h1");
    let lost_h2 = port(&r, "h2");
    assert!(
        u(&lost_h1["tx_drops"]) + u(&lost_h1["tx_unsent"]) > 0,
        "h3's pings of h1 after the deletion were lost at the boundary: {lost_h1}"
    );
    assert!(
        u(&lost_h2["tx_drops"]) + u(&lost_h2["tx_unsent"]) > 0,
        "h4's pings of h2 after the deletion were lost at the boundary: {lost_h2}"
    );
    let out = netloop(&["clean"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !text(&out.stdout).contains(&id),
        "clean found something of run {id}: {}",
        text(&out.stdout)
    );
    println!(
        "TAP deleted at {tap_deleted:.2} s (first fault {:.3} s, {} faults), veth deleted at \
         {veth_deleted:.2} s (first fault {:.3} s, {} faults); netloop's CPU after both: {:.1} %; \
         boundary lost {}; survivors' pings 3/3 and 3/3; test took {:.1} s",
        firsts[0],
        lost_h1["faults"],
        firsts[1],
        lost_h2["faults"],
        cpu * 100.0,
        rt["boundary_lost"],
        t0.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------
// 3. the pcap disk fills up
// ---------------------------------------------------------------------------

/// Frames in a pcap file that was cut short: whole records up to the cut.
fn pcap_records(path: &str) -> (usize, bool) {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut reader = pcap_file::pcap::PcapReader::new(file)
        .unwrap_or_else(|e| panic!("{path}: no pcap header: {e}"));
    let mut n = 0;
    while let Some(p) = reader.next_packet() {
        match p {
            Ok(_) => n += 1,
            Err(_) => return (n, true),
        }
    }
    (n, false)
}

#[test]
fn a_full_pcap_disk_cuts_the_capture_and_the_run_completes() {
    let _serial = serial();
    if !have_root() || !have(&["ping", "mount", "umount", "dd"]) {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("pcap-full");
    let pcap_dir = s.path("pcap");
    let disk = Tmpfs::mount(&pcap_dir, "size=256k");
    // 150 pings of 1400 bytes, each frame captured on both links: over
    // 800 kB of pcap for 256 kB of disk.
    let topo = s.write(
        "t.toml",
        &one_router(
            "10s",
            "veth",
            &cmd("ping -c 150 -i 0.01 -s 1400 198.18.2.2", "100ms", true),
            "",
        ),
    );
    let json = s.path("out.json");
    let logs = s.path("logs");
    let (run, id, st) = LiveRun::start(&[
        "run",
        &topo,
        "--json",
        &json,
        "--log-dir",
        &logs,
        "--pcap",
        "all",
        "--pcap-dir",
        &pcap_dir,
    ])
    .finish(Duration::from_secs(30));
    assert_nothing_left(&id);
    // The run completed, but an output it was asked for is incomplete.
    assert_eq!(st.code(), Some(1), "{}", run.output());
    let err = run.stderr();
    assert!(!err.contains("panic"), "{}", run.output());
    let r = load_json(&json);
    check_realtime_results(&r, &id);
    assert_eq!(r["realtime"]["end"], "control", "ended when the ping did");
    let log = read_log(&r, "h1", 0);
    assert_eq!(ping_summary(&log), Some((150, 150)), "{log}");

    // The results say which captures were cut, where, and what they hold.
    let caps = r["pcap"].as_array().expect("the captures in the results");
    assert_eq!(caps.len(), 2, "{caps:?}");
    let mut measured = Vec::new();
    for (c, name) in caps.iter().zip(["h1-r1.pcap", "r1-h2.pcap"]) {
        let path = format!("{pcap_dir}/{name}");
        assert_eq!(c["file"], name, "{c}");
        let e = c["error"]
            .as_str()
            .unwrap_or_else(|| panic!("not cut: {c}"));
        assert!(
            e.starts_with(&path) && e.contains("No space left on device"),
            "{c}"
        );
        let want = format!("error: pcap capture cut short: {path}: No space left on device");
        assert!(err.contains(&want), "no '{want}' in:\n{}", run.output());
        // The file holds a readable prefix of the capture, as many frames
        // as reported.
        let (records, cut) = pcap_records(&path);
        assert!(records > 10, "{path}: {records} frames");
        assert!(
            !cut,
            "{path} ends with part of a record after {records} frames"
        );
        assert_eq!(records as u64, u(&c["frames"]), "{path}: {c}");
        assert!(
            e.contains(&format!("the file holds the {records} frames before")),
            "{c}"
        );
        assert!(
            (records as u64) < 4 * 150,
            "{path} holds {records} frames: every frame fit?"
        );
        measured.push(format!(
            "{name}: {records} frames as reported, {} bytes",
            std::fs::metadata(&path).unwrap().len()
        ));
    }
    drop(disk);
    assert!(
        !files_in(Path::new(&pcap_dir))
            .iter()
            .any(|f| f.ends_with(".pcap")),
        "the tmpfs is still mounted"
    );
    println!(
        "pcap on 256 kB: {}; the run completed (exit 1); test took {:.1} s",
        measured.join("; "),
        t0.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------
// 4. the results cannot be written
// ---------------------------------------------------------------------------

#[test]
fn results_that_cannot_be_written_give_a_clear_error_and_no_partial_file() {
    let _serial = serial();
    if !have_root() || !have(&["ping", "mount", "umount", "dd"]) {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("results-unwritable");
    let topo = s.write(
        "t.toml",
        &one_router(
            "2s",
            "veth",
            &cmd("ping -c 3 -i 0.2 198.18.2.2", "0s", true),
            "",
        ),
    );
    let logs = s.path("logs");

    // A full disk: found only when the results are written, at the end.
    let full_dir = s.path("full");
    let full = Tmpfs::mount(&full_dir, "size=64k");
    full.fill();
    let json = format!("{full_dir}/out.json");
    let (run, id, st) = LiveRun::start(&["run", &topo, "--json", &json, "--log-dir", &logs])
        .finish(Duration::from_secs(30));
    assert_nothing_left(&id);
    assert_eq!(st.code(), Some(1), "{}", run.output());
    let want = format!("error: cannot write {json}: No space left on device");
    assert!(
        run.stderr().contains(&want),
        "no '{want}' in:\n{}",
        run.output()
    );
    assert!(!run.stderr().contains("panic"), "{}", run.output());
    assert_eq!(
        files_in(Path::new(&full_dir)),
        ["filler"],
        "a partial or temporary results file was left"
    );
    let full_took = t0.elapsed();
    drop(full);

    // A read-only directory: refused before the run starts.
    let ro_dir = s.path("ro");
    let ro = Tmpfs::mount(&ro_dir, "ro,size=64k");
    for json in [
        format!("{ro_dir}/out.json"),
        format!("{ro_dir}/sub/out.json"),
    ] {
        let t = Instant::now();
        let out = netloop(&["run", &topo, "--json", &json, "--log-dir", &logs]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        let (what, path) = if json.contains("/sub/") {
            ("create", format!("{ro_dir}/sub"))
        } else {
            ("write", json.clone())
        };
        let want = format!("error: cannot {what} {path}: Read-only file system");
        assert!(err.contains(&want), "no '{want}' in:\n{err}");
        assert!(
            !text(&out.stdout).contains("namespace nl-"),
            "the run started: {}",
            text(&out.stdout)
        );
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "refused only after {:?}",
            t.elapsed()
        );
        assert!(files_in(Path::new(&ro_dir)).is_empty());
    }
    drop(ro);
    println!(
        "full disk: the run's results were refused at its end ({:.1} s), no file left; \
         read-only: refused before the run; test took {:.1} s",
        full_took.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------
// 5. two runs of one topology at once
// ---------------------------------------------------------------------------

/// Checks that run `id` still has everything: its namespaces, devices,
/// record, and running programs.
fn assert_intact(id: &str, devices: &[&str], why: &str) {
    let left = leftovers(id);
    for h in ["h1", "h2"] {
        assert!(
            left.contains(&format!("namespace nl-{id}-{h}")),
            "{why}: run {id} lost a namespace: {left:?}"
        );
    }
    for d in devices {
        assert!(
            left.contains(&format!("device {d}")),
            "{why}: run {id} lost its device {d}: {left:?}"
        );
    }
    assert!(
        left.contains(&format!("record /run/netloop/{id}.json")),
        "{why}: run {id} lost its record: {left:?}"
    );
    let procs = recorded_processes(&record(id));
    assert!(!procs.is_empty());
    assert!(
        procs.iter().all(ProcId::alive),
        "{why}: programs of run {id} were killed"
    );
}

#[test]
fn two_runs_of_one_topology_at_once_stay_apart() {
    let _serial = serial();
    if !have_root() || !have(&["ping"]) {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("two-runs");
    // Both hosts veth-joined; h1 pings h2 all along.
    let topo = s.write(
        "t.toml",
        &one_router(
            "30s",
            "veth",
            &cmd("ping -i 0.2 198.18.2.2", "0s", false),
            &cmd("sleep 1000", "0s", false),
        ),
    );
    let (json_a, json_b) = (s.path("a.json"), s.path("b.json"));
    let (logs_a, logs_b) = (s.path("a-logs"), s.path("b-logs"));
    // The same file, A shortened to end first.
    let mut a = LiveRun::start(&[
        "run",
        &topo,
        "--json",
        &json_a,
        "--log-dir",
        &logs_a,
        "--duration",
        "6s",
    ]);
    let mut b = LiveRun::start(&[
        "run",
        &topo,
        "--json",
        &json_b,
        "--log-dir",
        &logs_b,
        "--duration",
        "10s",
    ]);
    let id_a = a.wait_running();
    let id_b = b.wait_running();
    let _clean = CleanOnPanic;
    assert_ne!(id_a, id_b);
    let (out_a, out_b) = (a.stdout(), b.stdout());
    let devs_a = [device_of(&out_a, "h1"), device_of(&out_a, "h2")];
    let devs_b = [device_of(&out_b, "h1"), device_of(&out_b, "h2")];
    for d in devs_a.iter().chain(&devs_b) {
        assert!(devices().contains(d), "no device {d}");
    }
    assert!(
        devs_a.iter().all(|d| !devs_b.contains(d)),
        "{devs_a:?} {devs_b:?}"
    );
    assert_ne!(
        record(&id_a)["namespaces"],
        record(&id_b)["namespaces"],
        "the two runs share namespaces"
    );
    record_with_processes(&id_a, 2);
    record_with_processes(&id_b, 2);
    let dev_refs_a: Vec<&str> = devs_a.iter().map(String::as_str).collect();
    let dev_refs_b: Vec<&str> = devs_b.iter().map(String::as_str).collect();

    // Both work: the same addresses, in different namespaces.
    let (ra, log_a) = exec_ping(&id_a, "h1", "198.18.2.2", 3);
    let (rb, log_b) = exec_ping(&id_b, "h1", "198.18.2.2", 3);
    assert_eq!(ra, 3, "in run {id_a}:\n{log_a}");
    assert_eq!(rb, 3, "in run {id_b}:\n{log_b}");

    // `netloop clean` while both run removes nothing of either.
    let out = netloop(&["clean"]);
    let report = text(&out.stdout);
    assert!(out.status.success(), "{report}{}", text(&out.stderr));
    for id in [&id_a, &id_b] {
        assert!(
            report.contains(&format!("run {id} is still running")),
            "clean's report: {report}"
        );
    }
    assert_intact(&id_a, &dev_refs_a, "after netloop clean");
    assert_intact(&id_b, &dev_refs_b, "after netloop clean");

    // A ends by itself; its tear-down leaves B alone, which still works.
    let st_a = a.wait_exit(Duration::from_secs(20));
    let a_ended = t0.elapsed();
    assert_nothing_left(&id_a);
    assert_eq!(st_a.code(), Some(0), "{}", a.output());
    assert!(
        b.is_running(),
        "run {id_b} ended with {id_a}:\n{}",
        b.output()
    );
    assert_intact(&id_b, &dev_refs_b, "after the other run's tear-down");
    let (rb2, log_b2) = exec_ping(&id_b, "h1", "198.18.2.2", 2);
    assert_eq!(rb2, 2, "in run {id_b} after {id_a} ended:\n{log_b2}");
    let st_b = b.wait_exit(Duration::from_secs(20));
    assert_nothing_left(&id_b);
    assert_eq!(st_b.code(), Some(0), "{}", b.output());

    let mut replies = Vec::new();
    for (json, id) in [(&json_a, &id_a), (&json_b, &id_b)] {
        let r = load_json(json);
        check_realtime_results(&r, id);
        assert_eq!(r["realtime"]["end"], "duration");
        assert_eq!(
            r["realtime"]["hosts"][0]["namespace"],
            format!("nl-{id}-h1")
        );
        let log = read_log(&r, "h1", 0);
        let n = ping_replies(&log).len();
        assert!(n >= 10, "run {id}'s own ping: {log}");
        replies.push(n);
    }
    println!(
        "runs {id_a} ({}) and {id_b} ({}) side by side: exec pings 3/3 and 3/3, 2/2 after {id_a} \
         ended at {:.1} s; own pings {} and {} replies; clean touched neither; test took {:.1} s",
        devs_a.join(", "),
        devs_b.join(", "),
        a_ended.as_secs_f64(),
        replies[0],
        replies[1],
        t0.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------
// 6. netloop killed with SIGKILL: every process of its real hosts dies too
// ---------------------------------------------------------------------------

/// A process's command line, its arguments joined by spaces.
fn cmdline(pid: i64) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// The session id of a process (field 6 of /proc/PID/stat).
fn session_of(pid: i64) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()
}

#[test]
fn a_sigkill_of_netloop_ends_every_process_of_its_real_hosts() {
    let _serial = serial();
    if !have_root() || !have(&["setsid"]) {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("sigkill-tree");
    // h1's program forks a grandchild that stays in its process group; h2's
    // starts a daemon the classic way (a new session, its parent gone), then
    // sleeps itself.
    let topo = s.write(
        "t.toml",
        &one_router(
            "60s",
            "veth",
            &cmd("sleep 1000 & sleep 1000", "0s", false),
            &cmd("setsid sh -c 'sleep 1001 &'; sleep 1002", "0s", false),
        ),
    );
    let mut run = LiveRun::start(&["run", &topo, "--log-dir", &s.path("logs")]);
    let id = run.wait_running();
    let _clean = CleanOnPanic;
    let recorded = recorded_processes(&record_with_processes(&id, 2));

    // Every process of both hosts, once all four sleeps run.
    let until = Instant::now() + Duration::from_secs(10);
    let (inside, daemon) = loop {
        let mut all = Vec::new();
        for h in ["h1", "h2"] {
            all.extend(namespace_processes(&format!("nl-{id}-{h}")));
        }
        let with = |c: &str| all.iter().filter(|p| cmdline(p.pid) == c).count();
        let daemon = all.iter().find(|p| cmdline(p.pid) == "sleep 1001").copied();
        if with("sleep 1000") == 2 && with("sleep 1002") == 1 {
            if let Some(d) = daemon {
                break (all, d);
            }
        }
        assert!(
            Instant::now() < until,
            "the programs never all ran: {:?}",
            all.iter()
                .map(|p| (p.pid, cmdline(p.pid)))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // The daemon really left: a session of its own, in none of the
    // programs' process groups, so nothing that signals the programs or
    // their groups reaches it.
    let groups: Vec<i64> = recorded.iter().map(|p| p.pid).collect();
    let daemon_group = proc_stat(daemon.pid).map(|(_, g, _)| g);
    let program_session = recorded.iter().find_map(|p| session_of(p.pid));
    assert!(
        session_of(daemon.pid).is_some() && session_of(daemon.pid) != program_session,
        "sleep 1001 ({}) is not in a session of its own: {:?}, the programs' {program_session:?}",
        daemon.pid,
        session_of(daemon.pid)
    );
    assert!(
        daemon_group.is_some_and(|g| !groups.contains(&g)),
        "sleep 1001 is still in a program's group {daemon_group:?}"
    );

    // `netloop exec` runs in the host's PID namespace (and sees it in its
    // /proc): what it starts ends with the run too.
    let rec = record(&id);
    let h1_program = rec["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["host"] == "h1")
        .and_then(|p| p["pid"].as_i64())
        .expect("h1's program is recorded");
    let pid_ns = |pid: i64| std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok();
    let out = netloop(&[
        "exec",
        "--run",
        &id,
        "h1",
        "--",
        "sh",
        "-c",
        "readlink /proc/self/ns/pid; echo $$; exec cut -d' ' -f1 /proc/self/stat",
    ]);
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}{}", text(&out.stderr));
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(
        lines.first().map(|l| Path::new(*l)),
        pid_ns(h1_program).as_deref(),
        "netloop exec is not in h1's PID namespace: {said}"
    );
    assert!(
        lines.len() == 3 && lines[1] == lines[2],
        "inside h1, /proc does not show pids as h1's processes see them: {said}"
    );
    let mut exec = Command::new(NETLOOP)
        .args(["exec", "--run", &id, "h1", "--", "sleep", "1003"])
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("netloop exec starts");
    let until = Instant::now() + Duration::from_secs(10);
    let exec_sleep = loop {
        let found = namespace_processes(&format!("nl-{id}-h1"))
            .into_iter()
            .find(|p| cmdline(p.pid) == "sleep 1003");
        if let Some(p) = found {
            break p;
        }
        assert!(Instant::now() < until, "netloop exec's sleep never ran");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut names: Vec<(ProcId, String)> = inside.iter().map(|p| (*p, cmdline(p.pid))).collect();
    names.push((exec_sleep, cmdline(exec_sleep.pid)));
    run.signal(Signal::SIGKILL);
    let killed = Instant::now();
    let st = run.wait_exit(Duration::from_secs(10));
    assert_eq!(st.signal(), Some(9), "{st}");
    // (A host's init, killed, goes once every process of its namespace has
    // been reaped, the programs' zombies by the machine's own init: that can
    // take a second.)
    let survivors = loop {
        let alive: Vec<_> = names.iter().filter(|(p, _)| p.alive()).collect();
        if alive.is_empty() || killed.elapsed() > Duration::from_secs(10) {
            break alive;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        survivors.is_empty(),
        "{} of the {} processes of run {id}'s real hosts outlived a SIGKILL of netloop by 10 s \
         (before `netloop clean`): {survivors:?}",
        survivors.len(),
        names.len()
    );
    let gone_after = killed.elapsed();
    let exec_status = exec.wait().expect("netloop exec ends");
    assert!(!exec_status.success(), "{exec_status}");

    // What is left (namespaces, devices, the record) is `netloop clean`'s.
    let out = netloop(&["clean"]);
    let report = text(&out.stdout);
    assert!(out.status.success(), "{report}{}", text(&out.stderr));
    assert!(report.contains(&id), "clean's report: {report}");
    assert_nothing_left(&id);
    println!(
        "after SIGKILL all {} processes of the real hosts ({}) were gone within {:?}; clean said: {}; \
         test took {:.1} s",
        names.len(),
        names
            .iter()
            .map(|(p, c)| format!("{} {c}", p.pid))
            .collect::<Vec<_>>()
            .join(", "),
        gone_after,
        report.trim().replace('\n', " / "),
        t0.elapsed().as_secs_f64()
    );
}
