//! How long this machine takes to wake a sleeping thread: the floor under
//! every hand-over between threads in a real-time run.
//!
//! A frame that a real program sends reaches netloop's event thread asleep
//! in `ppoll` (it sleeps whenever nothing is due, so that an idle network
//! costs no CPU), and the frame netloop writes back wakes the program
//! asleep in `recvmsg`. The kernel forwarding between namespaces needs
//! neither: it runs the whole path in the sender's system call. So a ping
//! through any user-space emulator costs the kernel's path plus two
//! wake-ups, and on a virtual machine a wake-up of an idle virtual CPU is a
//! round trip through the hypervisor. [`measure`] times it the way a ping
//! meets it: one thread rings an eventfd every few milliseconds (long
//! enough for the other CPU to go idle) and the other, asleep in `ppoll`,
//! notes how long after the ring it runs.

use nix::sched::CpuSet;
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::unistd::Pid;
use std::io;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::mono_ns;

/// One way of waking a thread.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// The CPU of the thread that rings.
    pub waker_cpu: usize,
    /// The CPU of the thread that sleeps.
    pub sleeper_cpu: usize,
    /// The sleeper's SCHED_FIFO priority (as netloop's event thread), or
    /// `None` for the normal class (as the programs it serves).
    pub fifo: Option<i32>,
}

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) -> io::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu).map_err(io::Error::from)?;
    nix::sched::sched_setaffinity(Pid::from_raw(0), &set).map_err(io::Error::from)
}

/// Why a measurement failed.
#[derive(Debug, thiserror::Error)]
pub enum WakeError {
    /// A thread could not be put on its CPU (the machine, or this process's
    /// CPU set, lacks it).
    #[error("cannot run a thread on CPU {cpu}: {err}")]
    Cpu {
        /// The CPU.
        cpu: usize,
        /// What the kernel said.
        err: io::Error,
    },
    /// The sleeper could not enter the real-time class.
    #[error(
        "cannot put the sleeping thread in the real-time class (SCHED_FIFO {priority}): {err}"
    )]
    Fifo {
        /// The priority asked for.
        priority: i32,
        /// What the kernel said.
        err: io::Error,
    },
    /// Anything else (the eventfd, ppoll).
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Wakes a sleeping thread until `samples` wake-ups are timed, `gap`
/// apart, as `case` says; returns how long after each ring the sleeper ran
/// (ns), in the order measured. Both threads are its own (the caller's CPU
/// set is left alone). A wake-up that came so late that the next ring was
/// already in (two rings read at once) is not timed: its ring time is
/// gone; the waker rings on until enough are, at most four times over.
pub fn measure(case: Case, samples: usize, gap: Duration) -> Result<Vec<u64>, WakeError> {
    let bell = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
        .map_err(io::Error::from)?;
    // When each ring was rung: a sleeper that reads a ring knows which one
    // by counting the rings read so far.
    let rings = samples.saturating_mul(4);
    let rung_at: Vec<AtomicU64> = (0..rings).map(|_| AtomicU64::new(0)).collect();
    let done = std::sync::atomic::AtomicBool::new(false);
    // Set (and rung) when the waker failed: the sleeper stops waiting.
    let abort = std::sync::atomic::AtomicBool::new(false);
    // Rings the waker made (the abort's ring is not one of them).
    let made = std::sync::atomic::AtomicUsize::new(0);
    let ready = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        let sleeper = s.spawn(|| -> Result<Vec<u64>, WakeError> {
            let set_up = (|| {
                pin(case.sleeper_cpu).map_err(|err| WakeError::Cpu {
                    cpu: case.sleeper_cpu,
                    err,
                })?;
                if let Some(priority) = case.fifo {
                    crate::sys::set_fifo_priority(priority)
                        .map_err(|err| WakeError::Fifo { priority, err })?;
                }
                Ok(())
            })();
            let _ = crate::clock::set_timer_slack_ns(1);
            ready.wait();
            let result = set_up.and_then(|()| {
                let mut out = Vec::with_capacity(samples);
                let mut fds = [crate::sys::pollfd_in(bell.as_fd())];
                let mut read = 0usize;
                while out.len() < samples {
                    // No ring for ten gaps and ten seconds: the waker is
                    // gone (a busy machine may hold it back for a while:
                    // another run's real-time threads come first on its CPU).
                    let patience = (gap * 10).max(Duration::from_secs(10));
                    if crate::sys::ppoll_raw(&mut fds, patience)? == 0 {
                        return Err(io::Error::other("the waking thread stopped ringing").into());
                    }
                    let now = mono_ns();
                    // Rings the waker made (those it made while the
                    // sleeper was late come as one read, and are not
                    // timed: which of them woke it is not known).
                    if let Ok(n) = bell.read() {
                        let n = n as usize;
                        if n == 1 && read < made.load(Ordering::Acquire) {
                            out.push(now.saturating_sub(rung_at[read].load(Ordering::Acquire)));
                        }
                        read += n;
                    }
                    if abort.load(Ordering::Acquire) {
                        return Ok(out);
                    }
                }
                Ok(out)
            });
            done.store(true, Ordering::Release);
            result
        });
        let waker = s.spawn(|| -> Result<(), WakeError> {
            let pinned = pin(case.waker_cpu).map_err(|err| WakeError::Cpu {
                cpu: case.waker_cpu,
                err,
            });
            ready.wait();
            pinned?;
            for at in &rung_at {
                std::thread::sleep(gap);
                if done.load(Ordering::Acquire) {
                    break;
                }
                at.store(mono_ns(), Ordering::Release);
                made.fetch_add(1, Ordering::Release);
                bell.write(1).map_err(io::Error::from)?;
            }
            Ok(())
        });
        let rang = waker
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        // The waker is done (all its rings made, or failed): the sleeper
        // stops after what is pending, instead of waiting for more.
        abort.store(true, Ordering::Release);
        let _ = bell.write(1);
        let got = sleeper
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        match (rang, got) {
            (Err(e), _) => Err(e),
            (Ok(()), Ok(v)) if v.len() < samples => Err(io::Error::other(format!(
                "only {} of {samples} wake-ups could be timed in {} rings",
                v.len(),
                rings
            ))
            .into()),
            (Ok(()), got) => got,
        }
    })
}

/// The `q` quantile (0–1) of `v`, sorted in place; 0 if empty.
pub fn quantile(v: &mut [u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let i = ((v.len() - 1) as f64 * q).round() as usize;
    v[i.min(v.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every ring is seen once, and a wake-up takes some time but far less
    /// than a second (a sanity bound, not a measurement).
    /// The first CPU this process may run on.
    fn a_cpu() -> usize {
        let set = nix::sched::sched_getaffinity(Pid::from_raw(0)).unwrap();
        (0..CpuSet::count())
            .find(|&c| set.is_set(c).unwrap_or(false))
            .unwrap()
    }

    #[test]
    fn each_ring_wakes_the_sleeper_once() {
        let case = Case {
            waker_cpu: a_cpu(),
            sleeper_cpu: a_cpu(),
            fifo: None,
        };
        let mut v = measure(case, 20, Duration::from_millis(2)).unwrap();
        assert_eq!(v.len(), 20);
        assert!(v.iter().all(|&ns| ns > 0 && ns < 1_000_000_000), "{v:?}");
        assert!(quantile(&mut v, 0.5) > 0);
    }

    #[test]
    fn a_cpu_the_machine_lacks_is_an_error() {
        let case = Case {
            waker_cpu: a_cpu(),
            sleeper_cpu: 100_000,
            fifo: None,
        };
        assert!(matches!(
            measure(case, 3, Duration::from_millis(1)),
            Err(WakeError::Cpu { cpu: 100_000, .. })
        ));
    }

    #[test]
    fn quantiles_pick_from_the_sorted_samples() {
        let mut v = vec![5, 1, 4, 2, 3];
        assert_eq!(quantile(&mut v, 0.0), 1);
        assert_eq!(quantile(&mut v, 0.5), 3);
        assert_eq!(quantile(&mut v, 1.0), 5);
        assert_eq!(quantile(&mut [], 0.5), 0);
    }
}
