//! Run records and `clean` against the real kernel: the leftovers of a run
//! whose netloop is gone are removed (its program, its namespace, its device,
//! its record), and a run whose netloop still runs is left alone. These tests
//! create namespaces, so they need root; they skip themselves otherwise.
//!
//! The records are written here by hand, as a netloop killed with SIGKILL
//! would have left them, under run ids no other record uses; everything they
//! list was created by the test and carries the run id.

mod common;
use common::*;

use netloop_io::registry::{self, NsEntry, ProcEntry, RunRecord};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn record_path(run_id: &str) -> PathBuf {
    Path::new(registry::RUN_DIR).join(format!("{run_id}.json"))
}

/// A run id no record or namespace uses yet ("f" + 5 hex digits from the
/// pid and `tag`, so that two tests of one process differ).
fn fresh_id(tag: u32) -> String {
    let pid = std::process::id();
    for k in 0u32.. {
        let id = format!(
            "f{:05x}",
            (pid.wrapping_mul(31) ^ (tag << 16) ^ k) & 0xf_ffff
        );
        let ns_prefix = format!("nl-{id}-");
        let clash = record_path(&id).exists()
            || std::fs::read_dir("/run/netns")
                .map(|d| {
                    d.flatten()
                        .any(|e| e.file_name().to_string_lossy().starts_with(&ns_prefix))
                })
                .unwrap_or(false);
        if !clash {
            return id;
        }
    }
    unreachable!()
}

fn write_record(r: &RunRecord) {
    std::fs::create_dir_all(registry::RUN_DIR).expect("run dir");
    std::fs::write(
        record_path(&r.run_id),
        serde_json::to_vec_pretty(r).expect("json"),
    )
    .expect("writing the record");
}

/// Removes what a test made, whatever happened to it.
struct Cleanup {
    namespaces: Vec<String>,
    devices: Vec<String>,
    records: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for n in &self.namespaces {
            if Path::new("/run/netns").join(n).exists() {
                let _ = Command::new("ip").args(["netns", "del", n]).status();
            }
        }
        for d in &self.devices {
            if Path::new("/sys/class/net").join(d).exists() {
                let _ = Command::new("ip").args(["link", "del", d]).status();
            }
        }
        for r in &self.records {
            let _ = std::fs::remove_file(record_path(r));
        }
    }
}

#[test]
fn clean_removes_a_dead_runs_leftovers_and_leaves_a_live_run_alone() {
    if !root() {
        return;
    }
    let dead = fresh_id(1);
    let live = fresh_id(2);
    assert_ne!(dead, live);
    let dead_ns = RunRecord::namespace_name(&dead, "h1");
    let dead_dev = RunRecord::device_name(&dead, 0);
    let live_ns = RunRecord::namespace_name(&live, "h1");
    let _cleanup = Cleanup {
        namespaces: vec![dead_ns.clone(), live_ns.clone()],
        devices: vec![dead_dev.clone()],
        records: vec![dead.clone(), live.clone()],
    };

    // An owner that is gone: a child that has exited and been reaped.
    let mut owner = Command::new("true").spawn().expect("true");
    let owner_pid = owner.id() as i32;
    let owner_start = registry::start_time(owner_pid).unwrap_or(1);
    owner.wait().expect("reaping");

    // What the dead run left: a namespace with a program in it (in its own
    // process group, as netloop starts them), and a root-side device.
    ip(&["netns", "add", &dead_ns]);
    ip(&[
        "link",
        "add",
        &dead_dev,
        "type",
        "veth",
        "peer",
        "name",
        &format!("{dead_dev}p"),
    ]);
    let mut prog = Command::new("ip");
    prog.args(["netns", "exec", &dead_ns, "sleep", "1000"])
        .stdin(Stdio::null())
        .process_group(0);
    let mut prog = prog.spawn().expect("sleep in the namespace");
    let prog_pid = prog.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ip(&["netns", "pids", &dead_ns]).contains(&prog_pid.to_string()) {
        assert!(
            Instant::now() < deadline,
            "sleep never entered the namespace"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    write_record(&RunRecord {
        run_id: dead.clone(),
        owner_pid,
        owner_start,
        created_unix: 0,
        namespaces: vec![NsEntry {
            host: "h1".into(),
            name: dead_ns.clone(),
            init: None,
        }],
        devices: vec![dead_dev.clone()],
        processes: vec![ProcEntry {
            pid: prog_pid,
            start_time: registry::start_time(prog_pid).expect("start time"),
            host: "h1".into(),
            cmd: "sleep 1000".into(),
        }],
    });

    // A run whose owner (this process) is alive, with a namespace.
    ip(&["netns", "add", &live_ns]);
    let me = std::process::id() as i32;
    write_record(&RunRecord {
        run_id: live.clone(),
        owner_pid: me,
        owner_start: registry::start_time(me).expect("our start time"),
        created_unix: 0,
        namespaces: vec![NsEntry {
            host: "h1".into(),
            name: live_ns.clone(),
            init: None,
        }],
        devices: vec![],
        processes: vec![],
    });

    // Both are listed; only the live one is running.
    let runs = registry::list_runs().expect("list");
    let find = |id: &str| {
        runs.iter()
            .find(|(_, r)| r.run_id == id)
            .map(|(_, r)| r.clone())
    };
    assert!(!find(&dead).expect("dead run listed").owner_alive());
    assert!(find(&live).expect("live run listed").owner_alive());
    let rec = registry::find_running(Some(&live)).expect("live run found");
    assert_eq!(rec.namespace_of("h1"), Some(live_ns.as_str()));
    assert!(registry::find_running(Some(&dead)).is_err());

    let report = registry::clean().expect("clean");
    let text = report.to_string();
    assert!(report.runs.contains(&dead), "{text}");
    assert!(report.namespaces.contains(&dead_ns), "{text}");
    assert!(
        report
            .running
            .iter()
            .any(|(id, pid)| *id == live && *pid == me),
        "{text}"
    );
    assert!(!report.runs.contains(&live), "{text}");

    // The program was killed (SIGKILL: it is our child here, so we reap it).
    let status = prog.wait().expect("reaping the program");
    assert_eq!(status.signal(), Some(9), "{status:?}");
    // The dead run's namespace, device and record are gone.
    assert!(!Path::new("/run/netns").join(&dead_ns).exists());
    assert!(!ip(&["-br", "link"]).contains(&dead_dev));
    assert!(!record_path(&dead).exists());
    // The live run is untouched.
    assert!(Path::new("/run/netns").join(&live_ns).exists());
    assert!(record_path(&live).exists());
}

#[test]
fn clean_does_not_touch_names_without_the_run_id() {
    if !root() {
        return;
    }
    let dead = fresh_id(3);
    let foreign = format!("nlx{}", std::process::id());
    let foreign_dev = format!("nly{}", std::process::id());
    let _cleanup = Cleanup {
        namespaces: vec![foreign.clone()],
        devices: vec![],
        records: vec![dead.clone()],
    };
    ip(&["netns", "add", &foreign]);
    let mut owner = Command::new("true").spawn().expect("true");
    let owner_pid = owner.id() as i32;
    owner.wait().expect("reaping");
    // A damaged record naming a namespace that is not the run's.
    write_record(&RunRecord {
        run_id: dead.clone(),
        owner_pid,
        owner_start: 1,
        created_unix: 0,
        namespaces: vec![NsEntry {
            host: "h1".into(),
            name: foreign.clone(),
            init: None,
        }],
        // (A name that does not exist: a test must never risk the machine's
        // own interfaces.)
        devices: vec![foreign_dev.clone()],
        processes: vec![],
    });
    let report = registry::clean().expect("clean");
    let text = report.to_string();
    assert!(Path::new("/run/netns").join(&foreign).exists(), "{text}");
    assert!(!report.namespaces.contains(&foreign), "{text}");
    assert!(!report.devices.contains(&foreign_dev), "{text}");
    assert!(text.contains(&format!("device '{foreign_dev}'")), "{text}");
    assert!(text.contains("not touched"), "{text}");
}

/// A record is believed only if it is a regular file of ours: anyone who
/// could plant one in the run directory would otherwise choose what `clean`
/// deletes and which processes it kills.
#[test]
fn clean_ignores_a_record_that_is_not_ours() {
    if !root() {
        return;
    }
    let planted = fresh_id(4);
    let ns = RunRecord::namespace_name(&planted, "h1");
    let _cleanup = Cleanup {
        namespaces: vec![ns.clone()],
        devices: vec![],
        records: vec![planted.clone()],
    };
    ip(&["netns", "add", &ns]);
    let mut owner = Command::new("true").spawn().expect("true");
    let owner_pid = owner.id() as i32;
    owner.wait().expect("reaping");
    // A well-formed record of a dead run, naming a namespace that carries its
    // run id, but owned by another user (nobody).
    write_record(&RunRecord {
        run_id: planted.clone(),
        owner_pid,
        owner_start: 1,
        created_unix: 0,
        namespaces: vec![NsEntry {
            host: "h1".into(),
            name: ns.clone(),
            init: None,
        }],
        devices: vec![],
        processes: vec![],
    });
    std::os::unix::fs::chown(record_path(&planted), Some(65534), Some(65534)).expect("chown");
    assert!(
        !registry::list_runs()
            .expect("list")
            .iter()
            .any(|(_, r)| r.run_id == planted),
        "a record owned by another user is listed"
    );
    let report = registry::clean().expect("clean");
    let text = report.to_string();
    assert!(!report.runs.contains(&planted), "{text}");
    assert!(Path::new("/run/netns").join(&ns).exists(), "{text}");
    assert!(
        text.contains(&format!(
            "{} is not a readable run record",
            record_path(&planted).display()
        )),
        "{text}"
    );
}

#[test]
fn find_running_names_what_is_missing() {
    if !root() {
        return;
    }
    let e = registry::find_running(Some("zzzzzz"))
        .expect_err("no such run")
        .to_string();
    assert!(e.contains("zzzzzz"), "{e}");
}
