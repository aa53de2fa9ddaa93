//! The I/O thread of a real-time run: under load it reads and writes the
//! real interfaces, so that the event thread ([`crate::rt`]) runs the model
//! and the clock only. Under light load the event thread does its own I/O
//! (one thread woken per frame instead of two; see `rt::Mode`), and this
//! thread only writes what the event thread could not write itself.
//!
//! Why a thread of its own: a write into a veth or TAP device runs the
//! receiving namespace's whole TCP/IP stack inside the writing thread (84 %
//! of the single loop's time under TCP load was kernel work of that kind),
//! and while it ran, events that were due waited. Now the event thread hands
//! each frame that leaves the model to this thread over a lock-free queue,
//! stamped with the moment it was due, and goes on; this thread writes it
//! and records how long after that moment it did (`output_latency`). Frames
//! read from the interfaces go the other way, each with its arrival stamp
//! (the kernel's, where the interface gives one), and the event thread
//! injects them at that time.
//!
//! Overload shows at the edges, never in the timing of events: when the
//! event thread does not keep up with arrivals, the queue to it fills, this
//! thread stops reading, and the kernel's ring drops what does not fit
//! (`rx_kernel_drops`); when this thread does not keep up with writes, the
//! queue from the event thread fills and frames are dropped there, counted
//! in the port's `tx_drops`; either way `input_latency`/`output_latency`
//! grow.

use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::clock::{self, RtClock};
use crate::notify::Notifier;
use crate::rt::{histogram, RealPort};
use netloop_core::frame::{pool_stats, Checksum, PoolStats};
use netloop_model::Frame;

/// A frame read from a real interface, on its way to the event thread.
pub struct Arrival {
    /// When it arrived (CLOCK_MONOTONIC ns): the kernel's stamp where there
    /// is one, else when it was read.
    pub at: u64,
    /// The port (index into the run's ports).
    pub port: usize,
    /// The frame (its stamp and GSO in its metadata).
    pub frame: Frame,
}

/// A frame that left the model for a real interface.
pub struct Outgoing {
    /// The port.
    pub port: usize,
    /// The moment it was due (CLOCK_MONOTONIC ns of the event that sent it).
    pub due: u64,
    /// The frame.
    pub frame: Frame,
}

/// How many frames each queue between the threads holds: at 1 Gbit/s of
/// full frames about 100 ms, of 64-byte frames about 20 ms.
pub const QUEUE_FRAMES: usize = 8192;

/// How many bytes each queue between the threads holds (a frame may be a
/// 64 KB super-frame: 8192 of them would be half a gigabyte and seconds of
/// input latency). 32 MiB: a quarter of a second at 1 Gbit/s, as much as
/// the receive ring of a veth host.
pub const QUEUE_BYTES: usize = 32 << 20;

/// How long the I/O thread waits before reading again when the queue to the
/// event thread was full.
const FULL_RETRY_NS: u64 = 50_000;

/// How long the I/O thread sleeps at most under light load (only a lost
/// doorbell would make it matter).
const IDLE_TIMEOUT_NS: u64 = 1_000_000_000;

/// How often the I/O thread publishes its counters while idle.
const PUBLISH_EVERY_NS: u64 = 1_000_000;

/// What the I/O thread has seen so far, published for reports taken while
/// the run goes on (the event thread reads it under the lock).
pub struct Published {
    /// How late each frame was written after the moment it was due.
    pub output_latency: Histogram<u64>,
    /// CPU time of the I/O thread (ns).
    pub cpu_ns: u64,
    /// Times it slept in `ppoll`.
    pub sleeps: u64,
    /// Windows in which it was moved out of the real-time class (see
    /// [`Duty`]).
    pub demotions: u64,
    /// Why it did not run at the priority asked for, if it didn't.
    pub priority_error: Option<String>,
    /// What its frame buffer pool did (see [`netloop_core::frame`]).
    pub pool: PoolStats,
}

/// What the two threads share besides their queues.
pub struct Shared {
    /// Set by the event thread when the run ends: the I/O thread writes
    /// what is queued and returns.
    pub stop: AtomicBool,
    /// Rings the event thread when frames were read.
    pub to_event: Notifier,
    /// Rings the I/O thread when frames are to be written.
    pub to_io: Notifier,
    /// The I/O thread's counters.
    pub published: Mutex<Published>,
    /// Whether the I/O thread reads the ports (under load), or the event
    /// thread does (light load: one wake-up per frame instead of two; see
    /// `rt::Mode`). The event thread sets it and rings the I/O thread.
    pub split: AtomicBool,
    /// Per port: frames the event thread wrote are waiting in the port for
    /// a flush, which it could not make (the I/O thread had the port).
    pub flush: Vec<AtomicBool>,
    /// Bytes in the queue to the event thread (bounded by [`QUEUE_BYTES`]).
    pub rx_bytes: AtomicUsize,
    /// Bytes in the queue to the I/O thread (bounded by [`QUEUE_BYTES`]).
    pub tx_bytes: AtomicUsize,
}

impl Shared {
    /// For a run with `ports` interfaces.
    pub fn new(ports: usize) -> std::io::Result<Shared> {
        Ok(Shared {
            stop: AtomicBool::new(false),
            to_event: Notifier::new()?,
            to_io: Notifier::new()?,
            flush: (0..ports).map(|_| AtomicBool::new(false)).collect(),
            split: AtomicBool::new(false),
            rx_bytes: AtomicUsize::new(0),
            tx_bytes: AtomicUsize::new(0),
            published: Mutex::new(Published {
                output_latency: histogram(),
                cpu_ns: 0,
                sleeps: 0,
                demotions: 0,
                priority_error: None,
                pool: PoolStats::default(),
            }),
        })
    }

    /// The published state (a poisoned lock still holds valid counters).
    pub fn published(&self) -> std::sync::MutexGuard<'_, Published> {
        self.published.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Settings of the I/O thread.
pub struct IoOptions {
    /// Most frames read from one interface in a pass.
    pub batch: usize,
    /// Real-time priority (SCHED_FIFO), if the run asked for one; the I/O
    /// thread runs one below the event thread.
    pub priority: Option<i32>,
    /// The CPUs it may run on, when the event thread was pinned to one (a
    /// thread inherits its creator's affinity).
    pub affinity: Option<nix::sched::CpuSet>,
}

/// Keeps a real-time thread clear of the kernel's real-time throttling
/// (the real-time class may use 95 % of each CPU's second; past that the
/// normal class gets the CPU for the rest of it: a stall of tens of
/// milliseconds) without pausing: when the thread used over 90 % of the
/// last [`DUTY_HORIZON`] windows of 10 ms it is moved to the normal class,
/// where it goes on running, sharing the CPU fairly with the programs it
/// serves, and back to the real-time class once a window uses under half
/// or the horizon's share is under [`PROMOTE_BELOW`].
/// The horizon is long because the kernel's budget is: a burst of a few
/// busy windows (a TCP flow starting) is within it, and a thread demoted
/// for such a burst waited up to 9.5 ms for the CPU among the programs
/// (the SITL demo at 1 Gbit/s, with a horizon of one window). (Measured
/// too: at nice -20 instead of 0 in the normal class, iperf3 through the
/// demo's router lost 3 % of its goodput and more events ran late.)
pub struct Duty {
    priority: Option<i32>,
    demoted: bool,
    wall0: u64,
    cpu0: u64,
    /// CPU and wall time of the last [`DUTY_HORIZON`] windows.
    recent: [(u64, u64); DUTY_HORIZON],
    n: usize,
    /// The CPU share of the last window.
    pub share: f64,
    /// The CPU share of the last [`DUTY_HORIZON`] windows (those so far
    /// until there are as many; 0 until a quarter of them, as demotion
    /// waits that long too).
    pub long_share: f64,
    /// CPU time used in the last window, and its length (ns).
    pub last: (u64, u64),
    /// Time waited on a run queue in the last window (ns; 0 where the
    /// kernel does not say): read with the window's end, before the
    /// thread's class is changed (a thread moved to the normal class may
    /// wait at once, and that belongs to the next window).
    pub last_queued: u64,
    sched: Option<clock::SchedStat>,
    queued0: u64,
    /// Windows in which the thread was moved out of the real-time class.
    pub demotions: u64,
}

/// The window over which a real-time thread's CPU use is checked.
pub const DUTY_WINDOW_NS: u64 = 10_000_000;

/// How many windows the share that demotes a thread is taken over (a fifth
/// of the kernel's one-second real-time period).
pub const DUTY_HORIZON: usize = 20;

impl Duty {
    /// For the calling thread, running at `priority` (None: not in the
    /// real-time class, nothing to watch).
    pub fn new(priority: Option<i32>) -> Duty {
        let sched = clock::SchedStat::of_this_thread();
        Duty {
            priority,
            demoted: false,
            wall0: clock::mono_ns(),
            cpu0: crate::rt::thread_cpu_ns(),
            recent: [(0, 0); DUTY_HORIZON],
            n: 0,
            share: 0.0,
            long_share: 0.0,
            last: (0, 0),
            last_queued: 0,
            queued0: sched.as_ref().and_then(|s| s.run_delay_ns()).unwrap_or(0),
            sched,
            demotions: 0,
        }
    }

    /// Looks at the window that ends now, if it is over; true if it was.
    #[inline]
    pub fn check(&mut self) -> bool {
        let wall = clock::mono_ns();
        if wall - self.wall0 < DUTY_WINDOW_NS {
            return false;
        }
        let cpu = crate::rt::thread_cpu_ns();
        let queued = self.run_delay();
        self.last_queued = queued.saturating_sub(self.queued0);
        self.queued0 = queued;
        let change = self.window(cpu.saturating_sub(self.cpu0), wall - self.wall0);
        if let (Some(p), Some(to_fifo)) = (self.priority, change) {
            if to_fifo {
                if crate::sys::set_fifo_priority(p).is_err() {
                    // Stays in the normal class; tried again next window.
                    self.demoted = true;
                }
            } else {
                crate::sys::restore_policy((libc::SCHED_OTHER, 0));
            }
        }
        self.wall0 = wall;
        self.cpu0 = cpu;
        true
    }

    /// Ends the window now, short as it may be (for the end of a run):
    /// `last` and `last_queued` are then its.
    pub fn close(&mut self) {
        let (wall, cpu) = (clock::mono_ns(), crate::rt::thread_cpu_ns());
        self.last = (
            cpu.saturating_sub(self.cpu0),
            wall.saturating_sub(self.wall0),
        );
        (self.wall0, self.cpu0) = (wall, cpu);
        let queued = self.run_delay();
        self.last_queued = queued.saturating_sub(self.queued0);
        self.queued0 = queued;
    }

    /// The thread's time waited on a run queue so far (ns; 0 where the
    /// kernel does not say).
    pub fn run_delay(&self) -> u64 {
        self.sched
            .as_ref()
            .and_then(|s| s.run_delay_ns())
            .unwrap_or(0)
    }

    /// A window ended in which the thread used `used` of `span` ns: the
    /// decision, without the system calls. Returns Some(true) to move the
    /// thread back to the real-time class, Some(false) to move it out.
    fn window(&mut self, used: u64, span: u64) -> Option<bool> {
        self.share = used as f64 / span as f64;
        self.last = (used, span);
        self.recent[self.n % DUTY_HORIZON] = (used, span);
        self.n += 1;
        // Until the horizon is full, the windows so far (a thread busy from
        // its start is demoted once it has shown it for a quarter of it).
        let (long_used, long_span) = self
            .recent
            .iter()
            .fold((0, 0), |(u, s), &(a, b)| (u + a, s + b));
        // Nothing said before a quarter of the horizon: one busy window at
        // the start is not saturation (for demotion nor for batches).
        self.long_share = if self.n >= DUTY_HORIZON / 4 {
            long_used as f64 / long_span.max(1) as f64
        } else {
            0.0
        };
        self.priority?;
        if !self.demoted {
            if self.long_share > DEMOTE_ABOVE {
                self.demoted = true;
                self.demotions += 1;
                return Some(false);
            }
            None
        } else if used * 2 < span || self.long_share < PROMOTE_BELOW {
            self.demoted = false;
            Some(true)
        } else {
            self.demotions += 1;
            None
        }
    }
}

/// The share of a core over [`DUTY_HORIZON`] windows above which a thread
/// leaves the real-time class ([`Duty`]).
const DEMOTE_ABOVE: f64 = 0.9;

/// The share over [`DUTY_HORIZON`] windows below which a thread that left
/// the real-time class comes back (as it does after one window under
/// half): well within the kernel's 95 %. Without it a thread with three
/// quarters of a core's work that a busy moment had moved out would never
/// come back, and in the normal class it waits behind the programs for the
/// CPU (up to 4.9 ms at a time in the mixed experiment): 3 000 simulated
/// pairs in real time, their thread at 67–70 % of a core, spent 492 of
/// their 500 windows there after a busy start (before the spinning
/// allowance of `rt::SPIN_ALLOWANCE_NS`, which keeps that start from being
/// busy enough to move it out).
const PROMOTE_BELOW: f64 = 0.8;

/// The least a sleep may overrun its time and still count as asleep (a
/// wake-up of an idle vCPU here took 55–90 µs at the median, 110–290 µs at
/// the p99, in `netloop bench wakeup` runs): more is the thread held off
/// its CPU.
pub const WAKE_ALLOWANCE_NS: u64 = 200_000;

/// Tells late events that came while a thread was held off its CPU from
/// those it was too busy to run on time.
///
/// A thread that is neither running nor asleep was held off its CPU:
/// waiting on a run queue behind other threads of this machine (its
/// scheduler statistics count that: `run_delay`), or with its virtual CPU
/// stopped by the hypervisor (steal). Its CPU time (CLOCK_THREAD_CPUTIME_ID)
/// does not advance in either case, given the kernel's paravirtual steal
/// accounting (CONFIG_PARAVIRT_TIME_ACCOUNTING; this machine's kernel has
/// it; without it stolen time counts as the thread's own and is missed).
/// Interrupts count as the thread's CPU time unless the kernel accounts
/// them apart (CONFIG_IRQ_TIME_ACCOUNTING, which this one does not), so
/// they are not seen. Per window ([`DUTY_WINDOW_NS`], longer when the thread
/// could not look at the clock) the time held off is the window's length
/// less the CPU time used, less the time asleep (each sleep up to the time
/// asked plus a wake-up allowance), less the time a control hook spent
/// blocked. A sleep that ended later than that was held off for the rest
/// even when the kernel charged the rest to the thread as CPU time, as this
/// project's Firecracker guests do: a `ppoll` of 31 µs took 5.6 ms there,
/// 5.5 ms of it counted as the thread's CPU time and none as waiting on a
/// run queue (the guest halts an idle vCPU, and its host woke it late), so
/// the window's held-off time is at least the sleeps' overruns (at least:
/// a window with both an overrun charged as CPU time and a wait of another
/// kind counts the larger). Softirq work the kernel did in the thread's
/// context during a sleep overruns it too, and so counts as held off: with
/// netloop's own traffic on real interfaces, some of its load may.
/// `/proc/stat`'s steal is the whole machine's, in 10 ms ticks;
/// this is the thread's own. Late events of a window are put down to it
/// when the window and the one before held the thread off for at least half
/// the largest lateness among them: a hole in the thread's running that
/// long made them late.
#[derive(Debug, Default)]
pub struct HeldOff {
    /// Held off in the previous window (ns).
    prev_ns: u64,
    /// Time asleep (or blocked) in the current window (ns): not held off.
    slept_ns: u64,
    /// How much the current window's sleeps overran their time plus the
    /// wake-up allowance (ns): held off, whoever the kernel charged it to.
    overrun_ns: u64,
    /// Late events in the current window, and the largest lateness.
    late: u64,
    max_late_ns: u64,
    /// Held off over the run (ns).
    pub total_ns: u64,
    /// Of it, waiting on a run queue behind other threads (ns).
    pub queued_ns: u64,
    /// The most in one window (ns).
    pub max_ns: u64,
    /// Late events put down to it.
    pub late_events: u64,
}

/// A call that may block, timed ([`HeldOff::blocking`]): a control hook
/// starting a program waits for its exec, a partition waits to be resumed
/// after a snapshot. Time neither running nor on a run queue is the
/// thread's choice, not the CPU being taken, so it is left out of the
/// held-off time as a sleep is; its CPU time is the thread's own, and
/// time it waited on a run queue is held off.
#[must_use = "a blocking call's time counts only once it ends"]
pub struct Blocking {
    wall0: u64,
    cpu0: u64,
    queued0: u64,
}

impl Blocking {
    /// The call ended: its blocked time goes to `held`.
    pub fn end(self, duty: &Duty, held: &mut HeldOff) {
        let wall = clock::mono_ns().saturating_sub(self.wall0);
        let cpu = crate::rt::thread_cpu_ns().saturating_sub(self.cpu0);
        let queued = duty.run_delay().saturating_sub(self.queued0);
        held.blocked(wall.saturating_sub(cpu).saturating_sub(queued));
    }
}

impl HeldOff {
    /// An event of the current window ran `late_ns` late (past the
    /// threshold).
    pub fn late(&mut self, late_ns: u64) {
        self.late += 1;
        self.max_late_ns = self.max_late_ns.max(late_ns);
    }

    /// The thread slept `elapsed` ns having asked for `asked`: asleep at
    /// most as long as asked plus a wake-up's usual latency (`spin_ns`, the
    /// spin window, or [`WAKE_ALLOWANCE_NS`], whichever is more); a thread
    /// that woke later (its timer went off while it could not run) was held
    /// off for the rest, counted as such even if its CPU time grew
    /// meanwhile (see the type's docs).
    pub fn slept(&mut self, elapsed: u64, asked: u64, spin_ns: u64) {
        let allowed = asked + spin_ns.max(WAKE_ALLOWANCE_NS);
        self.slept_ns += elapsed.min(allowed);
        self.overrun_ns += elapsed.saturating_sub(allowed);
    }

    /// The thread was blocked (in a system call, not on a run queue) for
    /// `ns`: not held off either.
    pub fn blocked(&mut self, ns: u64) {
        self.slept_ns += ns;
    }

    /// Starts timing a call that may block (see [`Blocking`]).
    pub fn blocking(duty: &Duty) -> Blocking {
        Blocking {
            wall0: clock::mono_ns(),
            cpu0: crate::rt::thread_cpu_ns(),
            queued0: duty.run_delay(),
        }
    }

    /// The window `duty` just closed ([`Duty::check`] returned true, or
    /// [`Duty::close`]) ended: its held-off time, and the late events it
    /// explains.
    pub fn close_window(&mut self, duty: &Duty) {
        let (used, span) = duty.last;
        let slept = std::mem::take(&mut self.slept_ns);
        self.window(span, used, slept, duty.last_queued);
    }

    /// A window of `span` ns ended, in which the thread used `used` ns of
    /// CPU, slept (or blocked) `slept` ns and waited on a run queue
    /// `queued` ns. Held off: what is neither, or, when more, what its
    /// sleeps overran (time the kernel may have counted in `used`).
    fn window(&mut self, span: u64, used: u64, slept: u64, queued: u64) {
        let overrun = std::mem::take(&mut self.overrun_ns).min(span);
        let held = span.saturating_sub(used).saturating_sub(slept).max(overrun);
        self.total_ns += held;
        self.queued_ns += queued.min(held);
        self.max_ns = self.max_ns.max(held);
        if self.late > 0 && (held + self.prev_ns) * 2 >= self.max_late_ns {
            self.late_events += self.late;
        }
        self.prev_ns = held;
        self.late = 0;
        self.max_late_ns = 0;
    }
}

/// A real port and what either thread that reads it must know of it.
pub struct PortState<'a> {
    /// The port.
    pub port: &'a mut RealPort,
    /// Until when it is left out of polling (it reported an error with
    /// nothing to read).
    muted_until: u64,
    /// Its last poll reported an error or hang-up.
    faulted: bool,
    /// Times it reported an error with nothing to read.
    pub faults: u64,
    /// When it first did (simulated seconds).
    pub first_fault_s: Option<f64>,
}

impl<'a> PortState<'a> {
    /// A port no thread has read yet.
    pub fn new(port: &'a mut RealPort) -> Self {
        PortState {
            port,
            muted_until: 0,
            faulted: false,
            faults: 0,
            first_fault_s: None,
        }
    }

    /// Whether to wait on it now (not muted).
    pub fn pollable(&self, now_ns: u64) -> bool {
        self.muted_until <= now_ns
    }

    /// Until when it is muted, if it is.
    pub fn muted_until(&self, now_ns: u64) -> Option<u64> {
        (self.muted_until > now_ns).then_some(self.muted_until)
    }

    /// Its last poll reported POLLERR, POLLHUP or POLLNVAL.
    pub fn poll_error(&mut self) {
        self.faulted = true;
    }

    /// Reads up to `room` frames, unless it is muted, calling `push(at,
    /// frame)` for each (`at`: its arrival, the kernel's stamp where there
    /// is one, else when it was read). An interface that reports an error
    /// with nothing to read (deleted, down) is counted and muted for
    /// [`crate::rt::FAULT_BACKOFF_NS`]: `ppoll` reports such a condition at
    /// once, every time, and would keep the reader spinning. Returns the
    /// frames read.
    pub fn read(&mut self, room: usize, clock: RtClock, push: &mut dyn FnMut(u64, Frame)) -> usize {
        if room == 0 || self.muted_until > clock::mono_ns() {
            return 0;
        }
        let mut got = 0usize;
        let read = self.port.io.recv_batch_gso(room, &mut |bytes, stamp, gso| {
            let read_at = clock::mono_ns();
            let at = stamp.map_or(read_at, |s| s.min(read_at));
            // A buffer from this thread's pool: the frames this thread
            // writes out give theirs back.
            let mut frame = Frame::copy_from(bytes);
            frame.meta.stamp = at;
            frame.meta.gso = gso;
            if gso.is_some() {
                frame.meta.csum = Checksum::Partial;
            }
            push(at, frame);
            got += 1;
        });
        if got == 0 && (self.faulted || read.is_err()) {
            self.faults += 1;
            self.first_fault_s.get_or_insert(clock.now().as_secs_f64());
            self.muted_until = clock::mono_ns() + crate::rt::FAULT_BACKOFF_NS;
            // Clears a pending socket error (a packet socket whose device
            // went down), so the port comes back when the device does.
            let _ = self.port.io.flush();
        }
        self.faulted = false;
        got
    }
}

/// A port shared by the two threads: the I/O thread reads and writes it
/// under load; the event thread reads it under light load and writes it
/// directly while the I/O thread sleeps (see `rt::EventSide::send`).
pub type SharedPort<'a> = Mutex<PortState<'a>>;

/// Locks a port (a poisoned lock still holds a usable port: a panic there
/// ends the run anyway).
pub fn lock<'a, 'b>(p: &'a SharedPort<'b>) -> std::sync::MutexGuard<'a, PortState<'b>> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

/// The I/O thread's body: runs until `shared.stop`, then writes what is
/// still queued and returns.
pub fn io_thread(
    ports: &[SharedPort<'_>],
    mut rx: rtrb::Producer<Arrival>,
    mut tx: rtrb::Consumer<Outgoing>,
    shared: &Shared,
    clock: RtClock,
    opts: &IoOptions,
) {
    let _ = clock::set_timer_slack_ns(1);
    if let Some(set) = &opts.affinity {
        let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), set);
    }
    let old_policy = crate::sys::current_policy();
    let priority = opts.priority.map(|p| (p - 1).max(1));
    let fifo = match priority {
        Some(p) => match crate::sys::set_fifo_priority(p) {
            Ok(()) => Some(p),
            Err(e) => {
                shared.published().priority_error = Some(e.to_string());
                None
            }
        },
        None => None,
    };
    let mut duty = Duty::new(fifo);
    let cpu0 = crate::rt::thread_cpu_ns();
    let pool0 = pool_stats();
    let n = ports.len();
    let mut dirty = vec![false; n];
    let mut latencies: Vec<u64> = Vec::with_capacity(QUEUE_FRAMES);
    // The poll set: every port, then the doorbell; a port not waited on
    // gets a negative descriptor, which ppoll skips.
    let raw: Vec<libc::pollfd> = ports
        .iter()
        .map(|p| crate::sys::pollfd_in(lock(p).port.io.fd()))
        .chain(std::iter::once(crate::sys::pollfd_in(shared.to_io.fd())))
        .collect();
    let mut fds = raw.clone();
    let mut last_publish = 0u64;
    let mut sleeps = 0u64;
    loop {
        duty.check();
        let stopping = shared.stop.load(Ordering::Acquire);
        let split = shared.split.load(Ordering::Acquire);

        // Writes first: they are due now. (At most a queue's worth, so that
        // a steady stream of them cannot keep the reads waiting.)
        let mut worked = false;
        for _ in 0..QUEUE_FRAMES {
            let Ok(o) = tx.pop() else { break };
            shared.tx_bytes.fetch_sub(o.frame.len(), Ordering::Relaxed);
            // A lost frame (full ring, failed write) is counted by the
            // interface; the run goes on.
            let _ = lock(&ports[o.port]).port.io.send_frame(&o.frame);
            dirty[o.port] = true;
            latencies.push(clock::mono_ns().saturating_sub(o.due));
            worked = true;
        }
        for (i, d) in dirty.iter_mut().enumerate() {
            if std::mem::take(d) | shared.flush[i].swap(false, Ordering::Acquire) {
                let _ = lock(&ports[i]).port.io.flush();
            }
        }
        if stopping && tx.is_empty() {
            break;
        }

        // Reads, under load: no more than the queue to the event thread can
        // take, so that what does not fit stays in the kernel (and is
        // counted there if it overflows).
        let mut read_any = false;
        if split {
            for (i, port) in ports.iter().enumerate() {
                // Bytes are bounded too, a batch beyond the bound at most.
                let room = if shared.rx_bytes.load(Ordering::Relaxed) < QUEUE_BYTES {
                    rx.slots().min(opts.batch)
                } else {
                    0
                };
                let got = lock(port).read(room, clock, &mut |at, frame| {
                    let len = frame.len();
                    shared.rx_bytes.fetch_add(len, Ordering::Relaxed);
                    // Room was checked (a read passes on at most `room`
                    // frames): the push cannot fail; were it to, the bytes
                    // are given back so the queue never looks full for good.
                    if rx.push(Arrival { at, port: i, frame }).is_err() {
                        shared.rx_bytes.fetch_sub(len, Ordering::Relaxed);
                    }
                });
                read_any |= got > 0;
            }
            if read_any {
                shared.to_event.notify();
            }
        }
        worked |= read_any;

        let now_ns = clock::mono_ns();
        if !latencies.is_empty() || now_ns - last_publish >= PUBLISH_EVERY_NS {
            let mut p = shared.published();
            for l in latencies.drain(..) {
                p.output_latency.saturating_record(l.max(1));
            }
            if now_ns - last_publish >= PUBLISH_EVERY_NS {
                p.cpu_ns = crate::rt::thread_cpu_ns() - cpu0;
                p.sleeps = sleeps;
                p.demotions = duty.demotions;
                p.pool = pool_stats().since(&pool0);
                last_publish = now_ns;
            }
        }
        // After work, one more pass before sleeping (what the work set off
        // may be waiting already); no polling beyond it: the CPU that
        // spinning takes is the real programs'.
        if worked || stopping {
            std::hint::spin_loop();
            continue;
        }

        // Nothing to do: sleep until the event thread has frames to write
        // or a frame arrives (under load), a muted port is due back, or it
        // is time to publish. With the queue to the event thread full, the
        // ports are not waited on (they would wake us at once, with nothing
        // we may read): the event thread is busy and will have taken frames
        // shortly.
        let full = rx.slots() == 0 || shared.rx_bytes.load(Ordering::Relaxed) >= QUEUE_BYTES;
        let mut unmute = u64::MAX;
        for (i, f) in fds.iter_mut().enumerate() {
            *f = raw[i];
            if i < n {
                let p = lock(&ports[i]);
                if let Some(u) = p.muted_until(now_ns) {
                    unmute = unmute.min(u - now_ns);
                }
                if !split || full || !p.pollable(now_ns) {
                    f.fd = -1;
                }
            }
        }
        // Under light load this thread only writes what the event thread
        // hands it, and sleeps until it is rung: waking on a timer (to
        // publish) made the round trip of a ping to a router 35-130 us
        // longer on this VM (the I/O thread's wake-ups at SCHED_FIFO cost
        // the other vCPU its idle state).
        let timeout_ns = match (split, full) {
            (true, true) => unmute.min(FULL_RETRY_NS),
            (true, false) => unmute.min(10 * PUBLISH_EVERY_NS),
            (false, _) => IDLE_TIMEOUT_NS,
        };
        shared.to_io.prepare_sleep();
        if tx.is_empty()
            && !shared.stop.load(Ordering::Acquire)
            && shared.split.load(Ordering::Acquire) == split
        {
            sleeps += 1;
            if let Ok(k) = crate::sys::ppoll_raw(&mut fds, Duration::from_nanos(timeout_ns)) {
                if k > 0 {
                    for (i, f) in fds[..n].iter().enumerate() {
                        if f.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                            lock(&ports[i]).poll_error();
                        }
                    }
                }
            }
        }
        shared.to_io.woke();
    }

    let mut p = shared.published();
    for l in latencies.drain(..) {
        p.output_latency.saturating_record(l.max(1));
    }
    p.cpu_ns = crate::rt::thread_cpu_ns() - cpu0;
    p.sleeps = sleeps;
    p.demotions = duty.demotions;
    p.pool = pool_stats().since(&pool0);
    drop(p);
    if fifo.is_some() {
        crate::sys::restore_policy(old_policy);
    }
}

#[cfg(test)]
mod tests {
    use super::HeldOff;

    /// Late events are put down to the thread being held off its CPU only
    /// when it was, for long enough, in their window or the one before.
    #[test]
    fn late_events_are_put_down_to_a_hole_only_when_there_was_one() {
        let mut h = HeldOff::default();
        // Busy all the window (10 ms used): late for its own work.
        h.late(2_000_000);
        h.window(10_000_000, 10_000_000, 0, 0);
        assert_eq!(h.late_events, 0);
        // Asleep 6 ms, ran 1 ms, held off 3 ms: the 2.5 ms late event is
        // the hole's.
        h.late(2_500_000);
        h.window(10_000_000, 1_000_000, 6_000_000, 1_000_000);
        assert_eq!(
            (h.late_events, h.max_ns, h.total_ns),
            (1, 3_000_000, 3_000_000)
        );
        // The hole was in the window before: still the hole's.
        h.late(2_000_000);
        h.late(1_500_000);
        h.window(10_000_000, 2_000_000, 8_000_000, 0);
        assert_eq!(h.late_events, 3);
        // A hole of 0.2 ms does not explain 5 ms.
        h.window(10_000_000, 1_000_000, 8_800_000, 0);
        h.late(5_000_000);
        h.window(10_000_000, 1_000_000, 9_000_000, 0);
        assert_eq!(h.late_events, 3);
        // A sleep counts as asked plus the wake-up allowance (here the
        // allowance, larger than the spin window): 1 ms asked, 5 ms taken
        // is 1.2 ms asleep; a sleep ended early by a frame counts whole.
        let mut h = HeldOff::default();
        h.slept(5_000_000, 1_000_000, 50_000);
        h.slept(300_000, 1_000_000, 50_000);
        assert_eq!(h.slept_ns, 1_200_000 + 300_000);
        h.blocked(100_000);
        assert_eq!(h.slept_ns, 1_600_000);
    }

    /// A sleep of 31 us that took 5.6 ms, the kernel having counted 5.5 ms
    /// of it as the thread's CPU time (measured on this project's VMs):
    /// held off for the overrun, and the events it made late are its, not
    /// the thread's work. Without the overrun the window looked busy.
    #[test]
    fn a_sleep_that_overran_is_held_off_even_when_counted_as_cpu_time() {
        let mut h = HeldOff::default();
        h.slept(5_600_000, 31_000, 0);
        assert_eq!(h.slept_ns, 231_000);
        h.late(4_000_000);
        h.late(1_500_000);
        // 10 ms: 9.7 ms of CPU time (the overrun's 5.5 ms in it), 0.23 ms
        // asleep.
        h.window(10_000_000, 9_700_000, 231_000, 0);
        assert_eq!(h.total_ns, 5_600_000 - 231_000);
        assert_eq!(h.late_events, 2);
        // The next window has no overrun of its own: busy, its own late
        // events unexplained unless as large as half the hole before.
        h.late(12_000_000);
        h.window(10_000_000, 10_000_000, 0, 0);
        assert_eq!((h.late_events, h.total_ns), (2, 5_369_000));
        // A sleep 0.2 ms past its allowance: that much held off, however
        // busy the window looked (its CPU time and sleep fill it).
        h.slept(431_000, 31_000, 0);
        h.window(10_000_000, 9_769_000, 231_000, 0);
        assert_eq!(h.total_ns, 5_369_000 + 200_000);
    }

    use super::*;

    /// A partition blocked for 30 ms waiting to be resumed (a snapshot)
    /// is not held off its CPU for it: timed as blocking, the window's
    /// held-off time is about nothing; untimed, it would be the whole wait.
    #[test]
    fn time_blocked_in_a_call_is_not_held_off() {
        let duty = Duty::new(None);
        let wait = || std::thread::sleep(std::time::Duration::from_millis(30));
        let held_for = |timed: bool| {
            let mut h = HeldOff::default();
            let (wall0, cpu0) = (clock::mono_ns(), crate::rt::thread_cpu_ns());
            if timed {
                let b = HeldOff::blocking(&duty);
                wait();
                b.end(&duty, &mut h);
            } else {
                wait();
            }
            let span = clock::mono_ns() - wall0;
            let used = crate::rt::thread_cpu_ns() - cpu0;
            let slept = std::mem::take(&mut h.slept_ns);
            h.window(span, used, slept, 0);
            h.total_ns
        };
        assert!(
            held_for(false) >= 29_000_000,
            "untimed: {}",
            held_for(false)
        );
        // A loaded machine may hold the thread off for a moment around the
        // call; not for the wait.
        assert!(held_for(true) < 10_000_000, "timed: {}", held_for(true));
    }

    const W: u64 = DUTY_WINDOW_NS;

    /// A thread at real-time priority 50, fed windows of the given busy
    /// shares (percent); returns the decisions.
    fn feed(d: &mut Duty, shares: &[u64]) -> Vec<Option<bool>> {
        shares.iter().map(|&p| d.window(W * p / 100, W)).collect()
    }

    #[test]
    fn a_burst_of_busy_windows_stays_in_the_real_time_class() {
        let mut d = Duty::new(Some(50));
        // Half busy for a while, then five windows flat out (a TCP flow
        // starting): within the kernel's budget.
        let got = feed(&mut d, &[50; 20]);
        assert!(got.iter().all(Option::is_none));
        let got = feed(&mut d, &[100; 5]);
        assert!(got.iter().all(Option::is_none), "{got:?}");
        assert_eq!(d.demotions, 0);
    }

    #[test]
    fn a_thread_busy_for_long_leaves_the_class_and_comes_back_when_idle() {
        let mut d = Duty::new(Some(50));
        let got = feed(&mut d, &[95; DUTY_HORIZON]);
        let first = got.iter().position(|c| *c == Some(false));
        assert_eq!(first, Some(DUTY_HORIZON / 4 - 1), "{got:?}");
        // Still busy: stays out, each window counted.
        assert_eq!(feed(&mut d, &[80; 3]), [None; 3]);
        assert_eq!(
            d.demotions,
            1 + (DUTY_HORIZON - DUTY_HORIZON / 4) as u64 + 3
        );
        // A window under half: back.
        assert_eq!(feed(&mut d, &[30]), [Some(true)]);
    }

    #[test]
    fn a_thread_with_three_quarters_of_a_cores_work_comes_back_once_it_is_below_the_mark() {
        let mut d = Duty::new(Some(50));
        feed(&mut d, &[100; DUTY_HORIZON]);
        assert!(d.demoted);
        // Three quarters busy from now on: out while the horizon still
        // holds the busy start, back once its share is under the mark.
        let got = feed(&mut d, &[75; DUTY_HORIZON]);
        // After 17 windows: (3 × 100 + 17 × 75) / 20 = 78.75 %.
        assert_eq!(
            got.iter().position(|c| *c == Some(true)),
            Some(16),
            "{got:?}"
        );
        assert!(got[..16].iter().all(Option::is_none), "{got:?}");
        assert!(d.long_share < PROMOTE_BELOW);
        // Windows of 95 and 75 % alternating (an average of 85 %) since it
        // came back: the share stays below the 90 % that demotes it.
        let got = feed(&mut d, &[95, 75].repeat(DUTY_HORIZON));
        assert!(got.iter().all(Option::is_none), "{got:?}");
        assert!(!d.demoted);
        // A thread at 85 % once demoted stays out: above the mark, and no
        // window under half.
        let mut e = Duty::new(Some(50));
        feed(&mut e, &[100; DUTY_HORIZON]);
        assert_eq!(
            feed(&mut e, &[85; 2 * DUTY_HORIZON]),
            [None; 2 * DUTY_HORIZON]
        );
        assert!(e.demoted);
    }

    #[test]
    fn a_thread_not_in_the_real_time_class_is_only_measured() {
        let mut d = Duty::new(None);
        assert_eq!(feed(&mut d, &[100; 30]), [None; 30]);
        assert_eq!(d.demotions, 0);
        assert!((d.share - 1.0).abs() < 1e-9);
    }
}
