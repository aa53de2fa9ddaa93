//! `memory::restart_with_huge_pages`: the restarted process runs with
//! glibc's huge-page tunable, keeps its PID and arguments, and gets the
//! user's `GLIBC_TUNABLES` back in its environment (for the programs it
//! starts).
//!
//! No test harness (`harness = false`): the restart replaces the process.
//! The test runs this binary as a child with `--child`; the child restarts
//! itself, allocates 64 MiB, and prints what it sees.

use std::process::Command;

use netloop_io::memory::{huge_pages_kb, restart_with_huge_pages};

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("--child") => return child(false),
        Some("--give-up") => return child(true),
        _ => {}
    }
    let thp =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    if !thp.contains("[madvise]") {
        println!("skipped: transparent huge pages are not `madvise` here ({thp:?})");
        return;
    }
    let me = std::env::current_exe().expect("own path");
    let run = |mode: &str, tunables: Option<&str>, off: bool| {
        let mut c = Command::new(&me);
        c.args([mode, "an argument"]);
        match tunables {
            Some(t) => c.env("GLIBC_TUNABLES", t),
            None => c.env_remove("GLIBC_TUNABLES"),
        };
        if off {
            c.env("NETLOOP_HUGE_PAGES", "0");
        } else {
            c.env_remove("NETLOOP_HUGE_PAGES");
        }
        let out = c.output().expect("the child runs");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let child = |tunables: Option<&str>, off: bool| run("--child", tunables, off);
    // Asked: the heap in huge pages, the user's environment back (none,
    // then theirs), the arguments and the PID kept.
    let none = child(None, false);
    assert_line(&none, "args [\"--child\", \"an argument\"]");
    // Asked for: the kernel may have no huge page free at the moment
    // (memory too fragmented: a run beside it failed this once when it
    // checked the pages themselves), so what is checked is the asking.
    // Every time: glibc 2.35 and 2.36 miss the tunable in about one start
    // of two (see `restart_with_huge_pages`), so without the restart's
    // check thirty starts would all ask in one run of this test in 10^9.
    assert_restarted(&none, "None");
    for _ in 0..30 {
        assert_restarted(&child(None, false), "None");
    }
    // The user's tunables come back whichever start took, every time.
    for _ in 0..10 {
        let theirs = child(Some("glibc.malloc.arena_max=8"), false);
        assert_restarted(&theirs, "Some(\"glibc.malloc.arena_max=8\")");
    }
    // The last start allowed, its heap not advised (this process was not
    // started with the tunable): it gives up, with the user's tunables back.
    let gave_up = run("--give-up", None, false);
    assert_line(&gave_up, "result NotAsked");
    assert_line(&gave_up, "tunables Some(\"glibc.malloc.arena_max=8\")");
    assert_line(&gave_up, "mark None");
    assert_line(&gave_up, "advised false");
    // Turned off: no restart, no huge pages.
    let off = child(None, true);
    assert_line(&off, "result NotAsked");
    assert_eq!(kb(&off), 0, "{off}");
    assert_line(&off, "advised false");
    // The user's own setting is theirs: no restart.
    let given = child(Some("glibc.malloc.hugetlb=0"), false);
    assert_line(&given, "result AsGiven");
    assert_line(&given, "tunables Some(\"glibc.malloc.hugetlb=0\")");
    println!("huge_pages: ok");
}

/// Runs as the restarted process would; `give_up`: as its last start
/// allowed would (the mark says so), started without the tunable.
fn child(give_up: bool) {
    if give_up {
        // 24: memory.rs's MAX_STARTS.
        let mark = format!("{}/24=glibc.malloc.arena_max=8", std::process::id());
        std::env::set_var("NETLOOP_HUGE_PAGES_RESTARTED", mark);
    }
    // The PID before and after: exec keeps it. Kept in the environment of
    // the restarted process by the first start.
    let first_pid = std::env::var("HP_TEST_FIRST_PID").ok();
    if first_pid.is_none() {
        std::env::set_var("HP_TEST_FIRST_PID", std::process::id().to_string());
    }
    let r = restart_with_huge_pages();
    let first = std::env::var("HP_TEST_FIRST_PID").unwrap();
    println!("result {r:?}");
    println!("tunables {:?}", std::env::var("GLIBC_TUNABLES").ok());
    println!(
        "mark {:?}",
        std::env::var("NETLOOP_HUGE_PAGES_RESTARTED").ok()
    );
    println!("args {:?}", std::env::args().skip(1).collect::<Vec<_>>());
    println!("same pid {}", first == std::process::id().to_string());
    // 64 MiB written in small blocks, as a model's state is.
    let blocks: Vec<Vec<u8>> = (0..1024).map(|i| vec![i as u8; 64 << 10]).collect();
    println!("huge kb {}", huge_pages_kb().unwrap_or(0));
    // Whether a mapping asked for huge pages (MADV_HUGEPAGE: `hg` among
    // its VmFlags), as glibc's tunable makes the heap do.
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let mut in_heap = false;
    let mut advised = false;
    for line in smaps.lines() {
        match line.strip_prefix("VmFlags:") {
            Some(flags) => advised |= in_heap && flags.split_whitespace().any(|x| x == "hg"),
            // Keys of a mapping's lines end in ':'; its first line is
            // its range and flags, its name last.
            None if !line.split_whitespace().next().unwrap_or(":").ends_with(':') => {
                in_heap = line.trim_end().ends_with("[heap]");
            }
            None => {}
        }
    }
    println!("advised {advised}");
    drop(std::hint::black_box(blocks));
}

/// A restarted child's report: huge pages asked for, the user's
/// `GLIBC_TUNABLES` back as `tunables` (`None` or `Some("…")`), no mark
/// left, the same PID.
fn assert_restarted(out: &str, tunables: &str) {
    for line in [
        "result Asked",
        "advised true",
        &format!("tunables {tunables}"),
        "mark None",
        "same pid true",
    ] {
        assert_line(out, line);
    }
}

fn assert_line(out: &str, line: &str) {
    assert!(
        out.lines().any(|l| l == line),
        "no line {line:?} in:\n{out}"
    );
}

fn kb(out: &str) -> u64 {
    out.lines()
        .find_map(|l| l.strip_prefix("huge kb "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no huge kb in:\n{out}"))
}
