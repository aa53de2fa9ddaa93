//! The real-time scheduler: runs the same model as the as-fast-as-possible
//! scheduler, but each event at its moment on CLOCK_MONOTONIC, and moves
//! frames between the model's external nodes and real interfaces.
//!
//! One loop on one thread:
//! 1. run every event that is due (its time ≤ now), recording for each how
//!    late it ran;
//! 2. after each event, write what reached an external node to its real
//!    interface, and hand the batch to the kernel once the due events are done;
//! 3. wait for the next event: sleep in `ppoll` on every interface's file
//!    descriptor until `spin` before the deadline (never past it: no fixed
//!    timeouts, timer slack lowered to 1 ns), then spin on the clock, polling
//!    the interfaces without blocking;
//! 4. whenever an interface has frames, read them all and inject each at its
//!    arrival time — the kernel's timestamp where the interface gives one
//!    (AF_PACKET), else the moment it was read — after running the events due
//!    before it, so the model sees events in time order.
//!
//! The model is not told that it runs in real time.

use hdrhistogram::Histogram;
use netloop_core::{EventQueue, Model, SimTime};
use netloop_model::network::{Event, Network, Node};
use netloop_model::NodeId;
use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::time::TimeSpec;
use serde::Serialize;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::clock::{self, RtClock};
use crate::frameio::{BoundaryCounters, FrameIo};

/// A real interface joined to an external node of the model.
pub struct RealPort {
    /// The external node.
    pub node: NodeId,
    /// The node's name, for reports.
    pub host: String,
    /// The interface.
    pub io: Box<dyn FrameIo>,
}

/// What the caller's control hook tells the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Go on; call the hook again at this simulated time (or earlier).
    Continue(SimTime),
    /// End the run now.
    Stop,
}

/// What the control hook sees and may change: called between events, it can
/// change the model (a link going down at a user's request) and read how the
/// run is going.
pub struct Control<'c> {
    /// Simulated time now.
    pub now: SimTime,
    /// The model.
    pub net: &'c mut Network,
    /// Its pending events.
    pub queue: &'c mut EventQueue<Event>,
    tally: &'c mut Tally,
    ports: &'c mut [RealPort],
    late_threshold_ns: u64,
    spin_ns: u64,
}

impl Control<'_> {
    /// The self-report so far (`end` is `running`).
    pub fn realtime(&mut self) -> RtReport {
        self.tally.report(
            self.ports,
            self.queue,
            self.late_threshold_ns,
            self.spin_ns,
            EndReason::Running,
        )
    }

    /// How late the events of the current window ran (since the start, or
    /// since a call with `new` set): what a long run's monitor compares
    /// across windows to see lateness drift, which the cumulative histogram
    /// hides. With `new`, the next window starts now.
    pub fn window(&mut self, new: bool) -> Lateness {
        let w = Lateness::of(&self.tally.window);
        if new {
            self.tally.window.reset();
        }
        w
    }
}

/// Settings of one real-time run.
pub struct RtOptions<'a> {
    /// Stop at this simulated time.
    pub until: SimTime,
    /// Spin on the clock for this long before each deadline instead of
    /// sleeping (nanoseconds). Zero never spins.
    pub spin_ns: u64,
    /// An event that runs later than this (nanoseconds) means the run fell
    /// behind real time.
    pub late_threshold_ns: u64,
    /// Most frames read from one interface before running due events again.
    pub batch: usize,
    /// Set (e.g. by a signal handler) to end the run early.
    pub stop: &'a AtomicBool,
    /// Run the scheduler's thread in the SCHED_FIFO class at this priority
    /// (1–99) for the run; `None` leaves it in the normal class.
    pub priority: Option<i32>,
    /// Keep the scheduler's thread on this CPU for the run (the namespaces'
    /// receive work is steered to the others; see `session`).
    pub cpu: Option<usize>,
    /// A descriptor that becomes readable when the control hook has work
    /// (a request from another thread): the loop then calls the hook at
    /// once instead of at the time it asked for. The hook must drain it.
    pub wake: Option<BorrowedFd<'a>>,
}

/// Why a real-time run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The run's duration was reached.
    Duration,
    /// The control hook ended it (e.g. every awaited program exited).
    Control,
    /// A signal (Ctrl-C, SIGTERM) ended it.
    Interrupted,
    /// It has not ended: a report taken while it runs.
    Running,
}

/// Percentiles of a lateness histogram, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Lateness {
    /// Samples.
    pub count: u64,
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest.
    pub max_ns: u64,
    /// Mean.
    pub mean_ns: f64,
}

impl Lateness {
    fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Lateness::default();
        }
        Lateness {
            count: h.len(),
            p50_ns: h.value_at_quantile(0.5),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
            mean_ns: h.mean(),
        }
    }
}

/// One real interface's share of the report.
#[derive(Clone, Debug, Serialize)]
pub struct PortReport {
    /// The node.
    pub host: String,
    /// The interface, e.g. `packet nl1a2b3ch0`.
    pub interface: String,
    /// What crossed it and what was lost at it (writes that failed with an
    /// error are in `tx_drops`).
    #[serde(flatten)]
    pub counters: BoundaryCounters,
    /// Times the interface reported an error or hang-up with nothing to read
    /// (deleted or down); each time it was left out for 10 ms.
    pub faults: u64,
    /// When it first did (simulated seconds), if it did.
    pub first_fault_s: Option<f64>,
    /// Whether the interface was gone when this report was made (deleted
    /// from outside during the run); `null` if that cannot be told.
    pub gone: Option<bool>,
}

/// What a real-time run reports about itself.
#[derive(Clone, Debug, Serialize)]
pub struct RtReport {
    /// Whether every event ran within the late threshold of its time.
    pub kept_up: bool,
    /// The threshold used (nanoseconds).
    pub late_threshold_ns: u64,
    /// Events that ran later than the threshold.
    pub late_events: u64,
    /// The simulated time (seconds) of the first and of the last event that
    /// ran later than the threshold, if any did: what was measured outside
    /// this span ran on time (the demo says which of its figures it puts in
    /// doubt).
    pub first_late_s: Option<f64>,
    /// See `first_late_s`.
    pub last_late_s: Option<f64>,
    /// Why the run ended.
    pub end: EndReason,
    /// Simulated time reached (seconds).
    pub sim_seconds: f64,
    /// Wall-clock time the run took (seconds).
    pub wall_seconds: f64,
    /// Events handled.
    pub events: u64,
    /// How late each event ran against its scheduled time.
    pub event_lateness: Lateness,
    /// How long each frame from a real interface took from its arrival (the
    /// kernel's stamp, where there is one) to entering the model.
    pub input_latency: Lateness,
    /// The spin window (nanoseconds).
    pub spin_ns: u64,
    /// Timer slack in force (nanoseconds).
    pub timer_slack_ns: u64,
    /// The SCHED_FIFO priority the scheduler ran at, if any.
    pub fifo_priority: Option<i32>,
    /// Why it did not run at the priority asked for, if it didn't.
    pub priority_error: Option<String>,
    /// CPU time this thread used (user + system, seconds) and its share of the
    /// wall time: what precision cost.
    pub cpu_seconds: f64,
    /// `cpu_seconds / wall_seconds`.
    pub cpu_share: f64,
    /// Wake-ups from `ppoll` (sleeps ended by a deadline or a frame).
    pub sleeps: u64,
    /// 1 ms rests the loop took because it had used over 90 % of the last
    /// 10 ms in the real-time class (which the kernel would otherwise
    /// throttle for 50 ms a second): a sign the machine is saturated.
    pub rests: u64,
    /// Per real interface.
    pub ports: Vec<PortReport>,
    /// Frames read from real interfaces, in total.
    pub rx_frames: u64,
    /// Frames written to real interfaces, in total.
    pub tx_frames: u64,
    /// Frames lost at the boundary (kernel ring drops, full device queues,
    /// truncation), in total.
    pub boundary_lost: u64,
    /// Frames read but not valid Ethernet (too short), dropped and counted.
    pub rx_malformed: u64,
}

/// The window over which the real-time loop's CPU use is checked.
pub const DUTY_WINDOW_NS: u64 = 10_000_000;
/// How long it rests when it used more than 90 % of a window.
pub const DUTY_REST_NS: u64 = 1_000_000;

/// How long an interface that reported an error with nothing to read is
/// left out of the poll set before it is tried again.
pub const FAULT_BACKOFF_NS: u64 = 10_000_000;

/// How long the loop keeps polling without sleeping after frames arrived.
pub const BUSY_POLL_NS: u64 = 30_000;

/// Histogram of nanoseconds, 1 ns to 100 s, 3 significant digits.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// What the loop counts as it runs, for its report.
struct Tally {
    slack: u64,
    fifo: Option<i32>,
    priority_error: Option<String>,
    cpu0: u64,
    wall0: u64,
    events0: u64,
    lateness: Histogram<u64>,
    /// Lateness in the current window (see [`Control::window`]).
    window: Histogram<u64>,
    input: Histogram<u64>,
    late_events: u64,
    /// Simulated times of the first and the last late event.
    first_late: Option<SimTime>,
    last_late: Option<SimTime>,
    sleeps: u64,
    rests: u64,
    port_faults: Vec<u64>,
    first_fault_s: Vec<Option<f64>>,
}

impl Tally {
    /// Counts one event, due at `at`, that ran `late_ns` after its time.
    fn record_lateness(&mut self, at: SimTime, late_ns: u64, threshold_ns: u64) {
        self.lateness.saturating_record(late_ns.max(1));
        self.window.saturating_record(late_ns.max(1));
        if late_ns > threshold_ns {
            self.late_events += 1;
            self.first_late.get_or_insert(at);
            self.last_late = Some(at);
        }
    }

    /// The report as of now.
    fn report(
        &self,
        ports: &mut [RealPort],
        queue: &EventQueue<Event>,
        late_threshold_ns: u64,
        spin_ns: u64,
        end: EndReason,
    ) -> RtReport {
        let wall_ns = clock::mono_ns() - self.wall0;
        let cpu_ns = thread_cpu_ns() - self.cpu0;
        let port_reports: Vec<PortReport> = ports
            .iter_mut()
            .enumerate()
            .map(|(i, p)| PortReport {
                host: p.host.clone(),
                interface: p.io.name().to_string(),
                counters: p.io.counters(),
                faults: self.port_faults[i],
                first_fault_s: self.first_fault_s[i],
                gone: p.io.exists().map(|e| !e),
            })
            .collect();
        let sum =
            |f: fn(&BoundaryCounters) -> u64| port_reports.iter().map(|p| f(&p.counters)).sum();
        let wall_s = wall_ns as f64 / 1e9;
        RtReport {
            kept_up: self.late_events == 0,
            late_threshold_ns,
            late_events: self.late_events,
            first_late_s: self.first_late.map(|t| t.as_secs_f64()),
            last_late_s: self.last_late.map(|t| t.as_secs_f64()),
            end,
            sim_seconds: queue.now().as_secs_f64(),
            wall_seconds: wall_s,
            events: queue.events_processed() - self.events0,
            event_lateness: Lateness::of(&self.lateness),
            input_latency: Lateness::of(&self.input),
            spin_ns,
            timer_slack_ns: self.slack,
            fifo_priority: self.fifo,
            priority_error: self.priority_error.clone(),
            cpu_seconds: cpu_ns as f64 / 1e9,
            cpu_share: if wall_s > 0.0 {
                cpu_ns as f64 / 1e9 / wall_s
            } else {
                0.0
            },
            sleeps: self.sleeps,
            rests: self.rests,
            rx_frames: sum(|c| c.rx_frames),
            tx_frames: sum(|c| c.tx_frames),
            boundary_lost: sum(|c| c.lost()),
            rx_malformed: sum(|c| c.rx_malformed),
            ports: port_reports,
        }
    }
}

fn thread_cpu_ns() -> u64 {
    clock_ns(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
}

fn clock_ns(id: nix::time::ClockId) -> u64 {
    nix::time::clock_gettime(id).map_or(0, |ts| {
        ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
    })
}

/// Runs `net` in real time from the queue's current time, with simulated time
/// zero at `clock.origin`, until `opts.until`, a stop request, or the control
/// hook's `Stop`.
///
/// `control` is called at the start and again whenever simulated time reaches
/// the time it last asked for; it starts programs, notices their exit, and
/// so on.
pub fn run_realtime(
    net: &mut Network,
    queue: &mut EventQueue<Event>,
    ports: &mut [RealPort],
    clock: RtClock,
    opts: &RtOptions<'_>,
    control: &mut dyn FnMut(&mut Control<'_>) -> Step,
) -> RtReport {
    let slack = clock::set_timer_slack_ns(1);
    // Real-time class for this thread only, restored at the end: the
    // programs it serves share the cores, and a normal-class scheduler
    // waits behind them (input latency p99 of 22 ms against 0.36 ms under
    // 100 000 packets/s, measured).
    let mut priority_error = None;
    let old_affinity = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok();
    if let Some(cpu) = opts.cpu {
        let mut set = nix::sched::CpuSet::new();
        if set.set(cpu).is_ok() {
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
        }
    }
    let old_policy = crate::sys::current_policy();
    let fifo = match opts.priority {
        Some(p) => match crate::sys::set_fifo_priority(p) {
            Ok(()) => Some(p),
            Err(e) => {
                priority_error = Some(e.to_string());
                None
            }
        },
        None => None,
    };
    let mut tally = Tally {
        slack,
        fifo,
        priority_error,
        cpu0: thread_cpu_ns(),
        wall0: clock::mono_ns(),
        events0: queue.events_processed(),
        lateness: histogram(),
        window: histogram(),
        input: histogram(),
        late_events: 0,
        first_late: None,
        last_late: None,
        sleeps: 0,
        rests: 0,
        port_faults: vec![0u64; ports.len()],
        first_fault_s: vec![None; ports.len()],
    };
    // Per port: its node; frames read in one pass, with their arrival times.
    let nodes: Vec<NodeId> = ports.iter().map(|p| p.node).collect();
    let mut arrivals: Vec<(u64, usize, Vec<u8>)> = Vec::new();
    let mut next_control = SimTime::ZERO;
    // When frames came in a moment ago more are likely on the way: poll
    // without sleeping for a while (as NAPI does), which saves a wake-up per
    // frame under load (context switches were a quarter of the loop's time
    // at 100 000 packets/s) and the wake-up latency of each.
    let mut last_rx = 0u64;
    // Per port: after the interface reported an error or hang-up with
    // nothing to read (deleted, down), the moment until which it is left out
    // of the poll set — `ppoll` reports such a condition at once, every
    // time, and would keep the loop spinning.
    let mut muted_until = vec![0u64; ports.len()];
    // Ports whose last poll reported an error or hang-up.
    let mut faulted = vec![false; ports.len()];
    let end;

    // Runs every event due at or before `limit`, writing what reaches real
    // interfaces as it goes. False if a stop cut it short: events due by
    // `limit` are still queued, so the clock must not be moved past them.
    let run_due = |net: &mut Network,
                   queue: &mut EventQueue<Event>,
                   ports: &mut [RealPort],
                   limit: SimTime,
                   tally: &mut Tally| {
        let mut wrote = false;
        let mut complete = true;
        let mut ran = 0u32;
        while let Some(t) = queue.peek_time() {
            if t > limit {
                break;
            }
            // A burst of events due at once (a model that falls far behind)
            // must not keep a Ctrl-C waiting: the loop looks at the flag
            // between passes, and here every 4096 events.
            ran = ran.wrapping_add(1);
            if ran.is_multiple_of(4096) && opts.stop.load(Ordering::Relaxed) {
                complete = false;
                break;
            }
            let (t, ev) = queue.pop().expect("peeked");
            let late = clock::mono_ns().saturating_sub(clock.mono_of(t));
            tally.record_lateness(t, late, opts.late_threshold_ns);
            net.handle(t, ev, queue);
            for (i, &node) in nodes.iter().enumerate() {
                if let Node::External(x) = net.node_mut(node) {
                    while let Some(frame) = x.outbox.pop_front() {
                        // A lost frame (full queue, failed write) is counted
                        // by the interface; the run goes on.
                        let _ = ports[i].io.send(&frame);
                        wrote = true;
                    }
                }
            }
        }
        if wrote {
            for p in ports.iter_mut() {
                let _ = p.io.flush();
            }
        }
        complete
    };

    // A real-time thread that never sleeps is throttled by the kernel for
    // the rest of each second once it has used 95 % of it (a 50 ms stall,
    // seen under TCP load). When the loop has kept the CPU for over 90 % of
    // the last 10 ms, it rests 1 ms instead: a short, regular pause rather
    // than a long one.
    let mut duty_wall = clock::mono_ns();
    let mut duty_cpu = thread_cpu_ns();
    loop {
        if tally.fifo.is_some() {
            let w = clock::mono_ns();
            if w - duty_wall >= DUTY_WINDOW_NS {
                let c = thread_cpu_ns();
                if (c - duty_cpu) * 10 > (w - duty_wall) * 9 {
                    std::thread::sleep(Duration::from_nanos(DUTY_REST_NS));
                    tally.rests += 1;
                }
                duty_wall = clock::mono_ns();
                duty_cpu = thread_cpu_ns();
            }
        }
        if opts.stop.load(Ordering::Relaxed) {
            end = EndReason::Interrupted;
            break;
        }
        let now = clock.now();
        if now >= next_control {
            let mut ctl = Control {
                now,
                net,
                queue,
                tally: &mut tally,
                ports,
                late_threshold_ns: opts.late_threshold_ns,
                spin_ns: opts.spin_ns,
            };
            match control(&mut ctl) {
                Step::Continue(t) => next_control = t.max(now),
                Step::Stop => {
                    end = EndReason::Control;
                    break;
                }
            }
        }
        // Frames that are waiting (they arrived while events ran, or woke
        // the last wait) enter first, each after the events due before its
        // arrival: the model sees everything in time order.
        arrivals.clear();
        let now_ns = clock::mono_ns();
        for (i, port) in ports.iter_mut().enumerate() {
            if muted_until[i] > now_ns {
                continue;
            }
            let before = arrivals.len();
            let read = port.io.recv_batch(opts.batch, &mut |frame, stamp| {
                let read_at = clock::mono_ns();
                let at = stamp.map_or(read_at, |s| s.min(read_at));
                arrivals.push((at, i, frame.to_vec()));
            });
            if arrivals.len() == before && (faulted[i] || read.is_err()) {
                tally.port_faults[i] += 1;
                tally.first_fault_s[i].get_or_insert(clock.now().as_secs_f64());
                muted_until[i] = clock::mono_ns() + FAULT_BACKOFF_NS;
                // Clears a pending socket error (a packet socket whose device
                // went down), so the port comes back when the device does.
                let _ = port.io.flush();
            }
            faulted[i] = false;
        }
        if !arrivals.is_empty() {
            last_rx = clock::mono_ns();
        }
        arrivals.sort_by_key(|a| a.0);
        for (at, i, frame) in arrivals.drain(..) {
            let t = clock.sim_of(at).max(queue.now()).min(opts.until);
            // Cut short by a stop, the frame enters at the last event run
            // rather than after events still due before its moment.
            let t = if run_due(net, queue, ports, t, &mut tally) {
                t
            } else {
                queue.now()
            };
            queue.advance_to(t.max(queue.now()));
            tally
                .input
                .saturating_record(clock::mono_ns().saturating_sub(at).max(1));
            net.inject(queue, nodes[i], frame);
        }

        let limit = clock.now().min(opts.until);
        run_due(net, queue, ports, limit, &mut tally);
        if now >= opts.until {
            end = EndReason::Duration;
            break;
        }

        // Wait for the next deadline or a frame, whichever comes first; the
        // frames are read at the top of the loop.
        let deadline = queue
            .peek_time()
            .unwrap_or(SimTime::MAX)
            .min(next_control)
            .min(opts.until);
        let remaining = clock.mono_of(deadline).saturating_sub(clock::mono_ns());
        let busy = clock::mono_ns().saturating_sub(last_rx) < BUSY_POLL_NS;
        let sleep_ns = if busy {
            0
        } else {
            remaining.saturating_sub(opts.spin_ns)
        };
        let now_ns = clock::mono_ns();
        let polled: Vec<usize> = (0..ports.len())
            .filter(|&i| muted_until[i] <= now_ns)
            .collect();
        let mut fds: Vec<PollFd> = polled
            .iter()
            .map(|&i| PollFd::new(ports[i].io.fd(), PollFlags::POLLIN))
            .collect();
        if let Some(w) = opts.wake {
            fds.push(PollFd::new(w, PollFlags::POLLIN));
        }
        let timeout = TimeSpec::from_duration(Duration::from_nanos(sleep_ns.min(1_000_000_000)));
        if sleep_ns > 0 {
            tally.sleeps += 1;
        }
        if let Ok(n) = ppoll(&mut fds, Some(timeout), None) {
            if n > 0 {
                for (f, &i) in fds.iter().zip(&polled) {
                    if f.revents().is_some_and(|r| {
                        r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP | PollFlags::POLLNVAL)
                    }) {
                        faulted[i] = true;
                    }
                }
                if opts.wake.is_some()
                    && fds
                        .last()
                        .and_then(PollFd::revents)
                        .is_some_and(|r| !r.is_empty())
                {
                    next_control = SimTime::ZERO;
                }
            }
        }
    }

    // Simulated time has reached now (or the end): run what is due and
    // advance the clock so results cover the whole run.
    let last = clock.now().min(opts.until);
    if run_due(net, queue, ports, last, &mut tally) && queue.now() < last {
        queue.advance_to(last);
    }
    if tally.fifo.is_some() {
        crate::sys::restore_policy(old_policy);
    }
    if let (Some(_), Some(set)) = (opts.cpu, old_affinity) {
        let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
    }
    tally.report(ports, queue, opts.late_threshold_ns, opts.spin_ns, end)
}
