//! Memory a real-time run has touched before its clock starts, and the
//! heap in transparent huge pages ([`restart_with_huge_pages`]).
//!
//! The first write to a page of fresh memory is a page fault: a few
//! microseconds on this kind of virtual machine, taken in the thread that
//! writes. A model grows as a run starts (each flow's statistics on its
//! first packet, queues and maps on first use), and those faults came all at
//! once: in a run of 150 simulated pairs, some 4 400 faults as the first
//! packets arrived made events up to 5 ms late at 0.155 s, with the machine
//! otherwise idle. This is the remedy real-time Linux programs use (the
//! RT wiki's "HOWTO build a simple RT application"): before the run, the
//! allocator is told to keep what is freed instead of returning it to the
//! kernel, and a reserve is allocated, written page by page, and freed, so
//! that what the model allocates later comes from pages already there.
//!
//! Only the allocator's arena of the thread that reserves is filled: the
//! event thread's, which is where the model allocates. Memory is not locked
//! (`mlockall` would also fault in every new thread's whole stack at once).
//!
//! A fork after the reserve would undo it: the kernel makes every private
//! page of the parent copy-on-write, and the parent's first write to each
//! is a page fault again, even once the child has gone. So netloop makes
//! none while a run sets up or goes on: programs start through
//! `sys::spawn_shared_vm` and each namespace host's PID-namespace init
//! shares netloop's memory (`sys::spawn_pid_namespace_init`). When the
//! inits were forks, a run of 300 simulated pairs with two namespace hosts
//! took 979 faults in the run even after the reserve was written again
//! behind them (the model's own state, built before the forks: about 3
//! pages per simulated pair); now it takes 2 or 3.

/// Set to `0` to run without transparent huge pages for netloop's heap
/// (see [`restart_with_huge_pages`]).
pub const HUGE_PAGES_ENV: &str = "NETLOOP_HUGE_PAGES";

/// Set by [`restart_with_huge_pages`] for the restarted process: its PID
/// (exec keeps it; a copy of the environment in another process is not
/// taken for a restart), `/` and how many times it started again, then `=`
/// and the `GLIBC_TUNABLES` the user had, or nothing if there was none.
const RESTART_MARK: &str = "NETLOOP_HUGE_PAGES_RESTARTED";

/// Starts with the tunable that may be tried before going on without huge
/// pages (see [`restart_with_huge_pages`] on glibc 2.35 and 2.36).
const MAX_STARTS: u32 = 24;

/// The glibc tunable that makes `malloc` ask for transparent huge pages for
/// its heap and arenas (`madvise(MADV_HUGEPAGE)` as they grow; glibc 2.35
/// and later, which older ones ignore).
const HUGE_TUNABLE: &str = "glibc.malloc.hugetlb=1";

/// What [`restart_with_huge_pages`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HugePages {
    /// This process was restarted with the tunable: its heap asks for them.
    Asked,
    /// The user's `GLIBC_TUNABLES` already sets `glibc.malloc.hugetlb`.
    AsGiven,
    /// Not asked: turned off ([`HUGE_PAGES_ENV`]), not glibc or glibc
    /// before 2.35, the kernel gives them to every mapping already
    /// (`always`) or to none (`never`), set-user-ID, under valgrind; or the
    /// restart failed, or glibc did not apply the tunable (both said on
    /// stderr).
    NotAsked,
}

/// Makes the rest of the run's heap use transparent huge pages, by starting
/// this program again (same PID, arguments and environment) with glibc's
/// `glibc.malloc.hugetlb=1` tunable, which can only be given at start.
/// Returns in the restarted process, or where the restart is not wanted or
/// fails; call it first thing in `main`, before anything is created (a
/// thread, a file, a device): it also changes the environment.
///
/// Why: a simulation's state is spread over the heap (a host, a link
/// direction, a flow's histogram, the frames in flight), and once it passes
/// the caches each packet touches a few pages no event touched for
/// milliseconds; with 4 KiB pages each of those is also a TLB miss and a
/// page walk. 1 000 simulated pairs (162 MB) ran 1.16× faster with the heap
/// in 2 MB pages (medians of three interleaved runs, 2026-11-28,
/// docs/speed.md), where the kernel gives huge pages only to memory that
/// asks (`madvise`, this machine's setting). Real-time runs ask too: a
/// fault after their reserve clears 2 MB (and may wait for the kernel to
/// compact memory), but measured, their lateness was no worse with huge
/// pages and a run past what one core keeps up with fell behind by a
/// third as much (bench/results/realtime-huge-pages-2026-11-28).
///
/// The restarted process puts the user's `GLIBC_TUNABLES` back in its
/// environment before it returns, so programs it starts get theirs.
///
/// glibc 2.35 and 2.36 (Debian 12's) read the kernel's THP mode into a
/// buffer they do not end with a NUL, so whether they see `madvise` depends
/// on the byte of stack after it, and with address-space randomisation the
/// tunable took no effect in 51 of 100 starts here (2026-11-29: the heap
/// not advised, found by the `huge_pages` test failing; later glibc ends
/// the string). So the restarted process looks at its heap, which the
/// runtime has grown before `main`, and on those versions, with the
/// address space random, starts again while no part of it asks for huge
/// pages, up to [`MAX_STARTS`] times: a start costs about 2 ms, and at one
/// in two one run in 16 million goes on without. Elsewhere a start that
/// missed would miss again: it goes on without and says so.
pub fn restart_with_huge_pages() -> HugePages {
    if let Some(mark) = std::env::var_os(RESTART_MARK) {
        std::env::remove_var(RESTART_MARK);
        let pid = std::process::id().to_string();
        if let Some((starts, before)) = parse_mark(mark.as_encoded_bytes(), &pid) {
            // The restarted process: the environment as the user gave it.
            // Nothing else runs yet, so changing it races with no one
            // (`set_var` is safe in this crate's edition, 2021).
            let user = match before {
                Some(v) => {
                    use std::os::unix::ffi::OsStrExt;
                    let v = std::ffi::OsStr::from_bytes(v);
                    std::env::set_var("GLIBC_TUNABLES", v);
                    v.to_str().map(str::to_owned)
                }
                None => {
                    std::env::remove_var("GLIBC_TUNABLES");
                    None
                }
            };
            if heap_advised() != Some(false) {
                return HugePages::Asked;
            }
            // glibc missed the tunable. By chance only with its bug (see
            // above) and a random address space: then again, while allowed;
            // otherwise another start would miss it the same way.
            let by_chance = matches!(crate::sys::glibc_version(), Some((2, 35 | 36)))
                && crate::sys::address_space_random();
            if by_chance && starts < MAX_STARTS {
                if let Err(e) = restart(user.as_deref(), starts + 1) {
                    eprintln!(
                        "netloop: running without huge pages: could not start again with them: {e}"
                    );
                }
                return HugePages::NotAsked;
            }
            eprintln!(
                "netloop: running without huge pages: glibc did not apply \
                 {HUGE_TUNABLE} (after {starts} start(s) with it)"
            );
            return HugePages::NotAsked;
        }
    }
    let user = match std::env::var_os("GLIBC_TUNABLES") {
        None => None,
        Some(t) => match t.into_string() {
            Ok(t) => Some(t),
            // Not text: left alone rather than rewritten.
            Err(_) => return HugePages::NotAsked,
        },
    };
    if user
        .as_deref()
        .is_some_and(|t| t.contains("glibc.malloc.hugetlb"))
    {
        return HugePages::AsGiven;
    }
    let off = std::env::var_os(HUGE_PAGES_ENV).is_some_and(|v| v == "0");
    let madvise = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|m| m.contains("[madvise]"));
    // Set-user-ID or set-group-ID: glibc ignores the tunables, and putting
    // the user's back would hand them to programs it starts.
    let secure = nix::unistd::getuid() != nix::unistd::geteuid()
        || nix::unistd::getgid() != nix::unistd::getegid();
    // Under valgrind the restarted program would run outside it.
    let valgrind = std::env::var("LD_PRELOAD").is_ok_and(|p| p.contains("vgpreload"));
    // glibc before 2.35 has no such tunable.
    let old = crate::sys::glibc_version().is_none_or(|v| v < (2, 35));
    if off
        || !cfg!(all(target_os = "linux", target_env = "gnu"))
        || old
        || !madvise
        || secure
        || valgrind
    {
        return HugePages::NotAsked;
    }
    if let Err(e) = restart(user.as_deref(), 1) {
        eprintln!("netloop: running without huge pages: could not start again with them: {e}");
    }
    HugePages::NotAsked
}

/// The restart mark's starts so far and the user's `GLIBC_TUNABLES` (if
/// they had one), if `mark` is this process's (`pid`).
fn parse_mark<'a>(mark: &'a [u8], pid: &str) -> Option<(u32, Option<&'a [u8]>)> {
    let rest = mark.strip_prefix(pid.as_bytes())?.strip_prefix(b"/")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let starts = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
    match &rest[digits..] {
        [] => Some((starts, None)),
        [b'=', user @ ..] => Some((starts, Some(user))),
        _ => None,
    }
}

/// The addresses of a range as `/proc/self/maps` and `smaps` write one
/// (`55d5068d2000-55d506ad2000`).
fn address_range(s: &str) -> Option<(usize, usize)> {
    let (lo, hi) = s.split_once('-')?;
    Some((
        usize::from_str_radix(lo, 16).ok()?,
        usize::from_str_radix(hi, 16).ok()?,
    ))
}

/// Whether this process's heap (the `[heap]` mappings of
/// `/proc/self/smaps`) asks for huge pages (`hg` among its VmFlags) in any
/// part; `None` without a heap or the file.
fn heap_advised() -> Option<bool> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut in_heap = false;
    let mut seen = None;
    for line in smaps.lines() {
        if let Some(flags) = line.strip_prefix("VmFlags:") {
            if in_heap {
                let hg = flags.split_whitespace().any(|f| f == "hg");
                seen = Some(seen.unwrap_or(false) || hg);
            }
        } else if address_range(line.split_whitespace().next().unwrap_or_default()).is_some() {
            // A mapping's first line: its range, permissions, …, name.
            in_heap = line.trim_end().ends_with("[heap]");
        }
    }
    seen
}

/// Replaces this process with its own program, given the tunable; returns
/// only if that fails (the run then goes on as it is).
fn restart(user: Option<&str>, starts: u32) -> Result<(), String> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let program = own_program()?;
    let c = |b: &[u8]| CString::new(b).ok();
    let args = std::env::args_os()
        .map(|a| c(a.as_bytes()))
        .collect::<Option<Vec<_>>>()
        .ok_or("an argument holds a NUL byte")?;
    let mut env: Vec<CString> = std::env::vars_os()
        .filter(|(k, _)| k != "GLIBC_TUNABLES" && k != RESTART_MARK)
        .filter_map(|(k, v)| c(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
        .collect();
    let tunables = match user {
        Some(t) if !t.is_empty() => format!("{t}:{HUGE_TUNABLE}"),
        _ => HUGE_TUNABLE.to_string(),
    };
    let before = user.map_or(String::new(), |t| format!("={t}"));
    let pid = std::process::id();
    env.extend(c(format!("GLIBC_TUNABLES={tunables}").as_bytes()));
    env.extend(c(
        format!("{RESTART_MARK}={pid}/{starts}{before}").as_bytes()
    ));
    let program = c(program.as_os_str().as_bytes()).ok_or("its path holds a NUL byte")?;
    match nix::unistd::execve(&program, &args, &env) {
        Err(e) => Err(format!("{}: {e}", program.to_string_lossy())),
        Ok(never) => match never {},
    }
}

/// The file this process's code was loaded from: the mapping in
/// `/proc/self/maps` that holds this function. Not `/proc/self/exe`, which
/// names the dynamic loader when a program is started through it
/// (`ld-linux-x86-64.so.2 ./netloop …`), and whose last component, `exe`,
/// would become the process's name (`ps`, `top`).
fn own_program() -> Result<std::path::PathBuf, String> {
    let here = own_program as fn() -> Result<std::path::PathBuf, String> as usize;
    let maps =
        std::fs::read_to_string("/proc/self/maps").map_err(|e| format!("/proc/self/maps: {e}"))?;
    for line in maps.lines() {
        let mut f = line.splitn(6, ' ');
        let (Some(range), Some(path)) = (f.next(), f.nth(4)) else {
            continue;
        };
        let Some((lo, hi)) = address_range(range) else {
            continue;
        };
        if (lo..hi).contains(&here) {
            let path = path.trim_start();
            if !path.starts_with('/') || path.ends_with(" (deleted)") {
                return Err(format!("its program file is gone or unnamed ({path:?})"));
            }
            return Ok(path.into());
        }
    }
    Err("its code is in no mapping of /proc/self/maps".into())
}

/// Bytes of this process's memory in transparent huge pages now, in KiB
/// (`AnonHugePages` of `/proc/self/smaps_rollup`); `None` where the kernel
/// does not say.
pub fn huge_pages_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("AnonHugePages:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Bytes per block of the reserve: below the heap threshold set here, so
/// each comes from the heap (a larger block would be a mapping of its own,
/// given back on free).
const BLOCK: usize = 1 << 20;

/// Largest allocation served from the heap once a reserve is made (glibc's
/// own ceiling for its dynamic threshold).
const HEAP_UP_TO: usize = 32 << 20;

/// What [`reserve`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reserved {
    /// Bytes written and given back to the allocator.
    pub bytes: usize,
    /// Whether the allocator was told to keep them (false: not glibc, and
    /// the reserve may have gone back to the kernel).
    pub kept: bool,
}

thread_local! {
    /// Bytes this thread has reserved so far (kept in its arena: the
    /// allocator no longer trims).
    static RESERVED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Makes `bytes` (rounded up to whole mebibytes) of the calling thread's
/// heap resident and free for its next allocations. What this thread
/// reserved before counts: a second call for the same size writes nothing,
/// so a caller may reserve early (before it opens real interfaces, whose
/// frames would wait meanwhile) and [`crate::rt::run_realtime`] again.
pub fn reserve(bytes: usize) -> Reserved {
    let kept = crate::sys::keep_freed_memory(HEAP_UP_TO);
    let have = RESERVED.with(|r| r.get()) / BLOCK;
    let want = bytes.div_ceil(BLOCK);
    if want > have {
        let mut held: Vec<Vec<u8>> = Vec::with_capacity(want);
        for k in 0..want {
            let mut b = Vec::<u8>::with_capacity(BLOCK);
            // The first blocks come from what was reserved before (the
            // free top of the heap, resident): only the new ones are
            // written. Written, not zeroed by calloc: fresh memory from the
            // kernel is known to be zero, and calloc would skip the write
            // that faults the page in.
            if k >= have {
                b.resize(BLOCK, 0xa5);
            }
            held.push(b);
        }
        // Freed newest first, so each block joins the top of the heap.
        while let Some(b) = held.pop() {
            drop(std::hint::black_box(b));
        }
        RESERVED.with(|r| r.set(want * BLOCK));
    }
    Reserved {
        bytes: have.max(want) * BLOCK,
        kept,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Minor page faults of this process so far.
    fn minor_faults() -> i64 {
        nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_THREAD)
            .expect("getrusage")
            .minor_page_faults()
    }

    /// The restart mark: this process's only, with its count of starts
    /// and the user's tunables (empty ones too) kept byte for byte.
    #[test]
    fn the_restart_mark_names_the_process_its_starts_and_the_users_tunables() {
        assert_eq!(parse_mark(b"42/1", "42"), Some((1, None)));
        assert_eq!(
            parse_mark(b"42/3=glibc.malloc.arena_max=8", "42"),
            Some((3, Some(&b"glibc.malloc.arena_max=8"[..])))
        );
        assert_eq!(parse_mark(b"42/2=", "42"), Some((2, Some(&b""[..]))));
        // Another process's (a copy of the environment), the old form
        // without a count, or garbage: not a restart.
        assert_eq!(parse_mark(b"43/1", "42"), None);
        assert_eq!(parse_mark(b"421/1", "42"), None);
        assert_eq!(parse_mark(b"42", "42"), None);
        assert_eq!(parse_mark(b"42=x", "42"), None);
        assert_eq!(parse_mark(b"42/x", "42"), None);
        assert_eq!(parse_mark(b"42/1x", "42"), None);
        assert_eq!(
            address_range("55d5068d2000-55d506ad2000"),
            Some((0x55d5068d2000, 0x55d506ad2000))
        );
        assert!(["Size:", "VmFlags:", "-", "12-x"]
            .iter()
            .all(|s| address_range(s).is_none()));
    }

    /// Without a reserve, writing 16 MiB of new blocks faults in about
    /// 4 096 pages; after one, next to none. One test, in this order: a
    /// reserve (and the allocator settings it makes) stays with the
    /// process, and an arena with it may pass to a later thread.
    #[test]
    fn a_reserve_makes_memory_resident() {
        let _serial = crate::sys::FORKS.lock().unwrap_or_else(|e| e.into_inner());
        let write_16_mib = || {
            let before = minor_faults();
            let mut v = Vec::new();
            for _ in 0..64 {
                let mut b = Vec::<u8>::with_capacity(256 << 10);
                b.resize(256 << 10, 1);
                v.push(b);
            }
            minor_faults() - before
        };
        // Threads of their own, so that the arena is not the harness's.
        let without = std::thread::spawn(write_16_mib).join().unwrap();
        assert!(
            without > 2_000,
            "{without} page faults for 16 MiB of fresh memory"
        );
        let reserved = std::thread::spawn(move || {
            let r = reserve(32 << 20);
            assert_eq!(r.bytes, 32 << 20);
            assert!(r.kept, "glibc keeps freed memory");
            write_16_mib()
        })
        .join()
        .unwrap();
        assert!(
            reserved < 400,
            "{reserved} page faults for 16 MiB after the reserve"
        );
    }
}
