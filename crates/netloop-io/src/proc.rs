//! Programs run on real hosts: started inside a namespace in a process group
//! of their own, output kept in a log file, and stopped at the end — SIGTERM
//! to the group, a grace period, then SIGKILL. Only processes started here
//! are ever signalled, by pid.
//!
//! Each real host also has a PID namespace of its own, whose init
//! ([`HostInit`]) is a child of the session's launcher thread: the programs
//! start inside it, and so does everything they start, daemons included.
//! The init dies with that thread (parent-death signal), also when netloop
//! is killed with SIGKILL, and the kernel then kills every process left in
//! the namespace: nothing a run started outlives it.

use nix::sys::signal::{kill, killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::registry::InitEntry;
use crate::sys;

/// The init of a real host's PID namespace (PID 1 inside it), a child of the
/// thread that started it: it lives until that thread ends or it is killed.
#[derive(Debug)]
pub struct HostInit {
    /// Its pid, in netloop's PID namespace.
    pub pid: i32,
    /// The process (dropping it kills it: see [`sys::PidInit`]).
    _process: sys::PidInit,
    /// Its start time (see `registry::start_time`), to tell a reused pid.
    pub start_time: u64,
    /// Its PID namespace (`/proc/PID/ns/pid`).
    pid_ns: OwnedFd,
}

impl HostInit {
    /// Starts the init of a new PID namespace inside network namespace
    /// `netns` (a name under /run/netns), as a child of the calling thread.
    pub fn start(netns: &str) -> Result<HostInit> {
        let what = || format!("starting the PID namespace of real host namespace '{netns}'");
        let net: OwnedFd = std::fs::File::open(Path::new("/run/netns").join(netns))
            .map_err(|e| Error::os(what(), e))?
            .into();
        let own = sys::own_pid_namespace().map_err(|e| Error::os(what(), e))?;
        let process = sys::spawn_pid_namespace_init(net.as_fd(), own.as_fd())
            .map_err(|e| Error::os(what(), e))?;
        let pid = process.pid;
        // The init is our child and not yet reaped: its pid cannot name
        // another process until we reap it.
        let pid_ns =
            std::fs::File::open(format!("/proc/{pid}/ns/pid")).map_err(|e| Error::os(what(), e));
        let pid_ns = match pid_ns {
            Ok(f) => f.into(),
            Err(e) => {
                drop(process);
                let _ = waitpid(Pid::from_raw(pid), None);
                return Err(e);
            }
        };
        Ok(HostInit {
            pid,
            _process: process,
            start_time: crate::registry::start_time(pid).unwrap_or(0),
            pid_ns,
        })
    }

    /// What the run's record keeps of it.
    pub fn entry(&self) -> InitEntry {
        InitEntry {
            pid: self.pid,
            start_time: self.start_time,
        }
    }
}

/// Kills the init `pid` (a child of this process: see [`HostInit`]), and
/// with it every process left in its PID namespace, and reaps it, waiting
/// at most `timeout` (the kernel lets an init go only once everything in
/// its namespace has gone).
pub fn kill_init(pid: i32, timeout: Duration) {
    let pid = Pid::from_raw(pid);
    let _ = kill(pid, Signal::SIGKILL);
    let deadline = Instant::now() + timeout;
    while let Ok(WaitStatus::StillAlive) = waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
        if Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The PID namespace of a recorded init (`netloop exec` joins it), if that
/// init still runs.
pub fn pid_namespace_of(init: &InitEntry) -> Result<OwnedFd> {
    let gone = || {
        Error::msg(format!(
            "the init of the real host's PID namespace (pid {}) is gone",
            init.pid
        ))
    };
    if crate::registry::start_time(init.pid) != Some(init.start_time) {
        return Err(gone());
    }
    let ns: OwnedFd = std::fs::File::open(format!("/proc/{}/ns/pid", init.pid))
        .map_err(|_| gone())?
        .into();
    // The pid may have been reused between the two looks.
    if crate::registry::start_time(init.pid) != Some(init.start_time) {
        return Err(gone());
    }
    Ok(ns)
}

/// Spawns `cmd` with its process in PID namespace `pid_ns` (this thread's
/// later children go back to our own namespace before this returns). The
/// child gets a `/proc` of that namespace (see
/// [`sys::private_proc_for_child`]). Errors say they happened `what`
/// ("starting `ping` on real host 'h1'").
pub fn spawn_in_pid_namespace(
    cmd: &mut Command,
    pid_ns: BorrowedFd<'_>,
    what: &str,
) -> Result<Child> {
    sys::private_proc_for_child(cmd);
    in_pid_namespace(
        pid_ns,
        what,
        || cmd.spawn(),
        |mut c| {
            let _ = c.kill();
            let _ = c.wait();
        },
    )
}

/// Runs `spawn` with this thread's children going to PID namespace
/// `pid_ns`, then puts them back in our own; if that fails, what `spawn`
/// started is undone (`undo`) and the run must not go on.
fn in_pid_namespace<T>(
    pid_ns: BorrowedFd<'_>,
    what: &str,
    spawn: impl FnOnce() -> std::io::Result<T>,
    undo: impl FnOnce(T),
) -> Result<T> {
    let own = sys::own_pid_namespace()
        .map_err(|e| Error::os(format!("{what}: opening netloop's own PID namespace"), e))?;
    sys::children_in_pid_namespace(pid_ns)
        .map_err(|e| Error::os(format!("{what}: entering the real host's PID namespace"), e))?;
    let child = spawn();
    if let Err(e) = sys::children_in_pid_namespace(own.as_fd()) {
        if let Ok(c) = child {
            undo(c);
        }
        return Err(Error::os(
            format!("{what}: returning to netloop's own PID namespace"),
            e,
        ));
    }
    child.map_err(|e| {
        // A PID namespace whose init has ended takes no new process.
        let dead_init = e.raw_os_error() == Some(libc::ENOMEM);
        let e = Error::os(what, e);
        if dead_init {
            e.hint("the real host's PID namespace may have lost its init (was it killed?)")
        } else {
            e
        }
    })
}

/// Runs `argv` in real host network namespace `ns` (its PID namespace too,
/// when its init is recorded) with this process's stdin, stdout and stderr,
/// and waits for it: `netloop exec`.
pub fn run_in_host(ns: &str, init: Option<&InitEntry>, argv: &[String]) -> Result<ExitStatus> {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).args(argv);
    let mut child = match init {
        Some(init) => {
            let pid_ns = pid_namespace_of(init)?;
            spawn_in_pid_namespace(
                &mut c,
                pid_ns.as_fd(),
                &format!("running `ip netns exec {ns}`"),
            )?
        }
        None => c
            .spawn()
            .map_err(|e| Error::os(format!("running `ip netns exec {ns}`"), e))?,
    };
    child
        .wait()
        .map_err(|e| Error::os(format!("waiting for `ip netns exec {ns}`"), e))
}

/// A program started on a real host.
#[derive(Debug)]
pub struct Proc {
    /// Its pid, also its process group id.
    pub pid: i32,
    /// Its start time (see `registry::start_time`).
    pub start_time: u64,
    /// The host.
    pub host: String,
    /// The command line.
    pub cmd: String,
    /// Its exit code once reaped (`Some(None)` if killed by a signal).
    pub exited: Option<Option<i32>>,
    /// The signal that killed it, if one did (and it was seen to).
    pub signal: Option<i32>,
}

/// Starts `/bin/sh -c CMD` in namespace `ns` and in the host's PID namespace
/// (that of `init`), in its own process group, stdin from /dev/null, stdout
/// and stderr appended to `log`. It gets SIGKILL when the calling thread
/// ends.
///
/// Spawned without copying netloop's memory ([`sys::spawn_shared_vm`]):
/// programs start while a run goes on, and a `fork` of netloop then made
/// the event thread's events late (in the mixed experiment with 150
/// simulated pairs, the late events of a run were those around the moments
/// its programs started).
pub fn spawn(ns: &str, init: &HostInit, host: &str, cmd: &str, log: &Path) -> Result<Proc> {
    let what = format!("starting `{cmd}` on real host '{host}'");
    // A fresh log per run; stdout and stderr share one open file (and so
    // one offset), so their lines interleave as written.
    let file = std::fs::File::create(log)
        .map_err(|e| Error::os(format!("opening the log {}", log.display()), e))?;
    let null = std::fs::File::open("/dev/null")
        .map_err(|e| Error::os(format!("{what}: opening /dev/null"), e))?;
    let ip = find_program("ip").ok_or_else(|| {
        Error::os(
            what.clone(),
            std::io::Error::new(std::io::ErrorKind::NotFound, "`ip` is not on PATH"),
        )
        .hint("install iproute2")
    })?;
    let arg = |s: &str| {
        CString::new(s).map_err(|_| {
            Error::os(
                what.clone(),
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "a NUL byte in the command",
                ),
            )
        })
    };
    // `ip netns exec` enters the namespace and execs the program in place,
    // so the pid we get is the program's.
    let argv = [
        arg("ip")?,
        arg("netns")?,
        arg("exec")?,
        arg(ns)?,
        arg("/bin/sh")?,
        arg("-c")?,
        arg(cmd)?,
    ];
    let stdio = [null.as_fd(), file.as_fd(), file.as_fd()];
    let pid = in_pid_namespace(
        init.pid_ns.as_fd(),
        &what,
        || {
            sys::spawn_shared_vm(&sys::SpawnSpec {
                path: &ip,
                argv: &argv,
                stdio,
                process_group: true,
                kill_with_parent: true,
                private_proc: true,
            })
        },
        |pid| {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            let _ = waitpid(Pid::from_raw(pid), None);
        },
    )?;
    Ok(Proc {
        pid,
        start_time: crate::registry::start_time(pid).unwrap_or(0),
        host: host.into(),
        cmd: cmd.into(),
        exited: None,
        signal: None,
    })
}

/// The absolute path of `name` found on PATH, as `execvp` would find it.
fn find_program(name: &str) -> Option<CString> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path).find_map(|dir| {
        let p = dir.join(name);
        let meta = std::fs::metadata(&p).ok()?;
        let exec = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111 != 0;
        (meta.is_file() && exec)
            .then(|| CString::new(std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str())).ok())
            .flatten()
    })
}

impl Proc {
    /// Reaps the program if it has exited; returns whether it has.
    pub fn try_reap(&mut self) -> bool {
        if self.exited.is_some() {
            return true;
        }
        match waitpid(Pid::from_raw(self.pid), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => {
                self.exited = Some(Some(code));
                true
            }
            Ok(WaitStatus::Signaled(_, sig, _)) => {
                self.exited = Some(None);
                self.signal = Some(sig as i32);
                true
            }
            Ok(_) => false,
            // ECHILD: not ours to wait for any more (already reaped).
            Err(_) => {
                self.exited = Some(None);
                true
            }
        }
    }
}

/// Stops every program still running: SIGTERM to each process group, up to
/// `grace` for them to exit, then SIGKILL; all are reaped.
pub fn stop_all(procs: &mut [Proc], grace: Duration) {
    for p in procs.iter_mut() {
        if !p.try_reap() {
            let _ = killpg(Pid::from_raw(p.pid), Signal::SIGTERM);
        }
    }
    let deadline = Instant::now() + grace;
    while procs.iter_mut().any(|p| !p.try_reap()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    for p in procs.iter_mut() {
        if !p.try_reap() {
            let _ = killpg(Pid::from_raw(p.pid), Signal::SIGKILL);
            let _ = waitpid(Pid::from_raw(p.pid), None);
            p.exited = Some(None);
        }
    }
}
