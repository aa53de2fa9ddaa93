//! Programs run on real hosts: started inside a namespace in a process group
//! of their own, output kept in a log file, and stopped at the end — SIGTERM
//! to the group, a grace period, then SIGKILL. Only processes started here
//! are ever signalled, by pid.

use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

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

/// Starts `/bin/sh -c CMD` in namespace `ns`, in its own process group,
/// stdin from /dev/null, stdout and stderr appended to `log`.
pub fn spawn(ns: &str, host: &str, cmd: &str, log: &Path) -> Result<Proc> {
    // A fresh log per run; stdout and stderr share one open file (and so
    // one offset), so their lines interleave as written.
    let file = std::fs::File::create(log)
        .map_err(|e| Error::os(format!("opening the log {}", log.display()), e))?;
    let err = file
        .try_clone()
        .map_err(|e| Error::os(format!("opening the log {}", log.display()), e))?;
    let mut c = Command::new("ip");
    // `ip netns exec` enters the namespace and execs the program in place,
    // so the pid we get is the program's.
    c.args(["netns", "exec", ns, "/bin/sh", "-c", cmd])
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err);
    std::os::unix::process::CommandExt::process_group(&mut c, 0);
    crate::sys::kill_child_with_parent(&mut c);
    let child = c
        .spawn()
        .map_err(|e| Error::os(format!("starting `{cmd}` on real host '{host}'"), e))?;
    let pid = child.id() as i32;
    // The Child handle is dropped: we reap by pid ourselves (waitpid), which
    // std would otherwise do only on `wait`.
    drop(child);
    Ok(Proc {
        pid,
        start_time: crate::registry::start_time(pid).unwrap_or(0),
        host: host.into(),
        cmd: cmd.into(),
        exited: None,
        signal: None,
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
