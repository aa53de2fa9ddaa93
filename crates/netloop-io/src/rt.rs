//! The real-time scheduler: runs the same model as the as-fast-as-possible
//! scheduler, but each event at its moment on CLOCK_MONOTONIC, and moves
//! frames between the model's external nodes and real interfaces.
//!
//! Two threads. The event thread (the caller's) runs the model and the
//! clock only:
//! 1. run every event that is due (its time ≤ now), recording for each how
//!    late it ran;
//! 2. hand each frame that reached an external node to the I/O thread
//!    ([`crate::rtio`]) over a lock-free queue, with the moment it was due;
//! 3. wait for the next event: sleep in `ppoll` on the I/O thread's doorbell
//!    until `spin` before the deadline (no fixed timeouts, timer slack
//!    lowered to 1 ns), then spin on the clock and the queue; unless busy,
//!    no sleep shorter than a sleep costs, and when saturated, sleeps long
//!    enough to pay for themselves, past the deadline; and no more
//!    spinning in a 10 ms window than its allowance
//!    ([`Wakeups::sleep_for`], [`SPIN_ALLOWANCE_NS`]);
//! 4. take the frames the I/O thread read, each with its arrival time — the
//!    kernel's timestamp where the interface gives one (AF_PACKET), else the
//!    moment it was read — and inject each at that time after running the
//!    events due before it, so the model sees events in time order.
//!
//! The I/O thread reads and writes the interfaces, so that the kernel work a
//! write causes (the receiving namespace's stack) never delays an event.
//! Neither thread pauses while work is due: one that uses over 90 % of its
//! CPU over 200 ms in the real-time class moves to the normal class for a
//! while instead
//! ([`crate::rtio::Duty`]), which keeps clear of the kernel's real-time
//! throttling.
//!
//! The model is not told that it runs in real time.

use hdrhistogram::Histogram;
use netloop_core::frame::{pool_stats, PoolStats};
use netloop_core::{EventQueue, Model, SimTime};
use netloop_model::network::{Event, Network, Node};
use netloop_model::{Frame, NodeId};
use serde::Serialize;
use std::collections::VecDeque;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::clock::{self, RtClock, Start};
use crate::frameio::{BoundaryCounters, FrameIo};
use crate::rtio::{self, Arrival, Duty, IoOptions, Outgoing, Shared, SharedPort, QUEUE_FRAMES};

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
    io: IoView<'c>,
    late_threshold_ns: u64,
    spin_ns: u64,
}

/// What the event thread knows of the ports while the I/O thread shares
/// them.
#[derive(Clone, Copy)]
struct IoView<'a> {
    shared: &'a Shared,
    ports: &'a dyn PortReports,
    /// Per port: what the event thread counted of it.
    edge: &'a [EdgeCount],
}

/// What the event thread counts of a port (the port counts the rest).
#[derive(Clone, Copy, Debug, Default)]
struct EdgeCount {
    /// Frames (segments) dropped because the queue to the I/O thread was
    /// full.
    queue_full: u64,
    /// Frames (segments) read from it that entered the model.
    entered: u64,
}

/// The ports' reports (a trait object hides the ports' own lifetime, which
/// `Control` does not carry).
trait PortReports {
    /// See [`port_reports`].
    fn reports(&self, edge: &[EdgeCount], gone: bool) -> Vec<PortReport>;
}

impl PortReports for &[SharedPort<'_>] {
    fn reports(&self, edge: &[EdgeCount], gone: bool) -> Vec<PortReport> {
        port_reports(self, edge, gone)
    }
}

/// The ports as they are now, read from the ports themselves (a report must
/// agree with the model's own counters), with the frames the queue to the
/// I/O thread dropped counted in each one's `tx_drops`. `gone` asks whether
/// each interface still exists (a system call: at the end of a run).
fn port_reports(ports: &[SharedPort<'_>], edge: &[EdgeCount], gone: bool) -> Vec<PortReport> {
    ports
        .iter()
        .zip(edge)
        .map(|(p, e)| {
            let mut p = rtio::lock(p);
            let mut counters = p.port.io.counters();
            counters.tx_drops += e.queue_full;
            PortReport {
                host: p.port.host.clone(),
                interface: p.port.io.name().to_string(),
                counters,
                entered: e.entered,
                faults: p.faults,
                first_fault_s: p.first_fault_s,
                gone: if gone {
                    p.port.io.exists().map(|e| !e)
                } else {
                    None
                },
            }
        })
        .collect()
}

impl Control<'_> {
    /// The self-report so far (`end` is `running`).
    pub fn realtime(&mut self) -> RtReport {
        let ports = self.io.ports.reports(self.io.edge, false);
        self.tally.report(
            ports,
            &self.io.shared.published(),
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
        let w = Lateness::of(&self.tally.lateness.window);
        if new {
            self.tally.lateness.close_window();
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
    /// Most frames the I/O thread reads from one interface in a pass.
    pub batch: usize,
    /// Set (e.g. by a signal handler) to end the run early.
    pub stop: &'a AtomicBool,
    /// Bytes of heap to make resident before the clock starts, for what
    /// the model allocates as it runs (see [`crate::memory`]).
    pub heap_reserve: usize,
    /// Run the event thread in the SCHED_FIFO class at this priority (1–99)
    /// for the run, and the I/O thread one below it; `None` leaves both in
    /// the normal class.
    pub priority: Option<i32>,
    /// Keep the scheduler's thread on this CPU for the run (the namespaces'
    /// receive work is steered to the others; see `session`).
    pub cpu: Option<usize>,
    /// A descriptor that becomes readable when the control hook has work
    /// (a request from another thread): the loop then calls the hook at
    /// once instead of at the time it asked for. The hook must drain it.
    pub wake: Option<BorrowedFd<'a>>,
    /// The other partitions of a run cut into several (this scheduler
    /// runs partition 0, the one with the real hosts; see
    /// [`crate::rtpart`]); `None` for a run of one partition.
    pub partners: Option<&'a dyn Partners>,
}

/// The other partitions of a real-time run, as the scheduler of partition
/// 0 sees them (implemented in [`crate::rtpart`]).
pub trait Partners: Sync {
    /// The run is about to end: called before the clock is read for the
    /// last time, so that no other partition runs past that moment.
    fn stopping(&self);
    /// Whether another partition gave up (an error, a panic): the run
    /// must end.
    fn abandoned(&self) -> bool;
    /// Waits until the others are ready to start (their heap reserved):
    /// the clock starts after that, so their first events are on time.
    fn wait_ready(&self);
    /// Simulated time has started on `clock`: the others keep to it too.
    fn started(&self, clock: RtClock);
    /// A descriptor that becomes readable when frames from the others
    /// wait (after [`Partners::prepare_sleep`]).
    fn bell(&self) -> BorrowedFd<'_>;
    /// Hands over the frames this partition sent across the cut, and puts
    /// those sent to it on their wires.
    fn exchange(&self, net: &mut Network, queue: &mut EventQueue<Event>);
    /// About to sleep: whether frames wait (then it must not).
    fn prepare_sleep(&self) -> bool;
    /// Awake again.
    fn woke(&self);
    /// The run ends at `at` (where this partition stands): the others run
    /// to it and stop, and what is still in flight between partitions is
    /// put on its wires.
    fn finish(&self, net: &mut Network, queue: &mut EventQueue<Event>, at: SimTime);
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
    pub(crate) fn of(h: &Histogram<u64>) -> Self {
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

/// One bucket of a lateness histogram: the events that ran late by more
/// than the bucket before's bound and at most `up_to_ns`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Bucket {
    /// Upper bound, nanoseconds (1 µs, 2 µs, 4 µs, … doubling).
    pub up_to_ns: u64,
    /// Events in it.
    pub count: u64,
}

/// The first bucket's bound: within a microsecond is on time to the
/// precision a timed sleep has.
const FIRST_BUCKET_NS: u64 = 1_000;

/// `h` in buckets whose bounds double from 1 µs, up to the one that holds
/// the largest value (empty ones between included, so that a plot's axis
/// has no holes; none after it). Values are the histogram's (3 significant
/// digits), placed by the highest value equivalent to each.
pub(crate) fn buckets(h: &Histogram<u64>) -> Vec<Bucket> {
    let mut out: Vec<Bucket> = Vec::new();
    for v in h.iter_recorded() {
        let value = h.highest_equivalent(v.value_iterated_to());
        let mut k = 0usize;
        let mut up = FIRST_BUCKET_NS;
        while up < value {
            up = up.saturating_mul(2);
            k += 1;
        }
        while out.len() <= k {
            out.push(Bucket {
                up_to_ns: FIRST_BUCKET_NS << out.len().min(63),
                count: 0,
            });
        }
        out[k].count += v.count_at_value();
    }
    out
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
    /// Frames (segments) read from it that entered the model: `rx_frames`
    /// at the end of a run (frames still on their way to the model when it
    /// ended enter it then, and count as in flight); while it runs, less
    /// by those on their way.
    pub entered: u64,
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
    /// The same, as a histogram (see [`buckets`]).
    pub event_lateness_histogram: Vec<Bucket>,
    /// How long each frame from a real interface took from its arrival (the
    /// kernel's stamp, where there is one) to entering the model.
    pub input_latency: Lateness,
    /// How long after the moment it was due (the time of the event that
    /// sent it) each frame to a real interface was handed to the kernel.
    pub output_latency: Lateness,
    /// How late the event thread's timed sleeps ended: the wake-up latency
    /// that its spin window covers (see `run.spin`).
    pub wakeup_latency: Lateness,
    /// The spin window (nanoseconds).
    pub spin_ns: u64,
    /// Timer slack in force (nanoseconds).
    pub timer_slack_ns: u64,
    /// The SCHED_FIFO priority the scheduler ran at, if any.
    pub fifo_priority: Option<i32>,
    /// Why it did not run at the priority asked for, if it didn't.
    pub priority_error: Option<String>,
    /// CPU time netloop's two real-time threads used (user + system,
    /// seconds), and its share of the wall time: what precision cost.
    pub cpu_seconds: f64,
    /// `cpu_seconds / wall_seconds` (up to 2: two threads).
    pub cpu_share: f64,
    /// The event thread's share of the wall time.
    pub event_cpu_share: f64,
    /// The I/O thread's share of the wall time (the kernel work of its
    /// writes included).
    pub io_cpu_share: f64,
    /// Frame buffers of both threads: allocated (the pool had none),
    /// reused from the pool, freed (the pool was full). In a steady state
    /// `allocated` stops growing: nothing is allocated per frame.
    pub buffers: PoolStats,
    /// Times the event thread slept in `ppoll` (ended by a deadline or a
    /// frame).
    pub sleeps: u64,
    /// The CPU time a timed sleep cost the event thread, measured before
    /// the run (ns): unless busy, it spun through gaps that short rather
    /// than sleep, and saturated, it slept at least twice that.
    pub sleep_cost_ns: u64,
    /// Times the I/O thread slept.
    pub io_sleeps: u64,
    /// The event thread's share of the wall time spent spinning before a
    /// deadline (see [`SPIN_ALLOWANCE_NS`]).
    pub spin_share: f64,
    /// 10 ms windows in which the event thread, having used over 90 % of
    /// the CPU over the last 200 ms, ran in the normal class instead of the real-time
    /// one (to stay clear of the kernel's real-time throttling, which would
    /// stop it for 50 ms): a sign that the machine is saturated.
    pub demotions: u64,
    /// The same for the I/O thread.
    pub io_demotions: u64,
    /// Bytes of heap made resident before the clock started (see
    /// [`crate::memory`]).
    pub heap_reserve_bytes: u64,
    /// Page faults the event thread took during the run: each stops it for
    /// microseconds; many at once make events late.
    pub event_page_faults: u64,
    /// CPU time the hypervisor took from this machine's CPUs during the run
    /// (all CPUs together; `None` where the kernel does not say): a vCPU
    /// descheduled by its host stops whatever the thread's priority.
    pub steal_ns: Option<u64>,
    /// How long this virtual machine's idle vCPUs poll before they halt,
    /// where its idle driver is KVM's `haltpoll` (ns; `None` elsewhere): at
    /// 0 a sleeping thread's vCPU halts at once and waits for its host to
    /// wake it (see [`clock::guest_halt_poll_ns`]).
    pub guest_halt_poll_ns: Option<u64>,
    /// Time the event thread was held off its CPU (neither running nor
    /// asleep: waiting behind other threads, or its vCPU stopped by the
    /// hypervisor), measured per window of about 10 ms from its own CPU
    /// time (ns). See [`rtio::HeldOff`].
    pub held_off_ns: u64,
    /// Of it, waiting on a run queue behind other threads of this machine
    /// (the scheduler's `run_delay`); the rest was outside its scheduler
    /// (the hypervisor's steal).
    pub held_off_queued_ns: u64,
    /// The most it was held off in one window (ns).
    pub held_off_max_ns: u64,
    /// Late events that came in a window in which (or just after one in
    /// which) their thread was held off its CPU for at least half their
    /// lateness: late because the CPU was not given to it, not because it
    /// had more work than time (every partition's, in a partitioned run;
    /// `held_off_*` are the event thread's, each partition's in
    /// `partitions`).
    pub late_held_off: u64,
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

/// How long an interface that reported an error with nothing to read is
/// left out of the poll set before it is tried again.
pub const FAULT_BACKOFF_NS: u64 = 10_000_000;

/// Who does the I/O. Under light load the event thread reads the ports
/// itself and writes them directly: a frame then wakes one thread, not two
/// (a sleeping vCPU takes tens of microseconds or more to wake, and that
/// is added to every round trip). Under load the I/O thread reads and
/// writes, and the kernel work of the writes leaves the event thread.
/// Decided per 10 ms window, with hysteresis.
#[derive(Default)]
struct Mode {
    split: bool,
    /// Consecutive light windows while split.
    light: u32,
}

/// Frames in a 10 ms window (10 000 a second) or a share of the event
/// thread's CPU above which the I/O thread takes over the ports.
const SPLIT_FRAMES: u64 = 100;
const SPLIT_SHARE: f64 = 0.5;
/// Below these for [`UNSPLIT_WINDOWS`] windows in a row, the event thread
/// takes the ports back.
const UNSPLIT_FRAMES: u64 = 20;
const UNSPLIT_SHARE: f64 = 0.2;
const UNSPLIT_WINDOWS: u32 = 20;

impl Mode {
    /// A window ended with the event thread's CPU `share` and `frames` in
    /// and out; returns the new mode if it changes.
    fn window(&mut self, share: f64, frames: u64) -> Option<bool> {
        if !self.split {
            if frames > SPLIT_FRAMES || share > SPLIT_SHARE {
                self.split = true;
                self.light = 0;
                return Some(true);
            }
            return None;
        }
        if frames < UNSPLIT_FRAMES && share < UNSPLIT_SHARE {
            self.light += 1;
            if self.light >= UNSPLIT_WINDOWS {
                self.split = false;
                return Some(false);
            }
        } else {
            self.light = 0;
        }
        None
    }
}

/// The spin window: as long as the thread's measured wake-up latency needs,
/// within `run.spin`. A timed sleep ends a few microseconds late on an idle
/// machine and more on a busy one; spinning before each deadline for twice
/// the recent 99th percentile of that (at least [`MIN_SPIN_NS`]) makes the
/// event run on time without spinning longer than needed.
///
/// And what a timed sleep costs the thread in CPU time ([`sleep_cost_ns`]):
/// a sleep shorter than that frees no CPU for anyone and makes the event
/// late by a wake-up, so the thread spins through such a gap instead, or,
/// when saturated, sleeps long enough for the sleep to pay for itself
/// ([`Wakeups::sleep_for`]). On this project's VM a sleep of 1 µs took
/// 13–31 µs of CPU (2026-11-28 and 29): with the budget cutting the spin window to
/// nothing under load, 1 000 simulated pairs in real time slept 17 500
/// times a second, and the sleeps took about half of the event thread's
/// CPU.
pub(crate) struct Wakeups {
    max_ns: u64,
    recent: [u64; 128],
    n: usize,
    spin_ns: u64,
    /// The most the thread may spin now, from its CPU use (see
    /// [`Wakeups::budget`]).
    cap_ns: u64,
    /// The CPU time one timed sleep costs the thread ([`sleep_cost_ns`]).
    sleep_cost_ns: u64,
    /// Saturated: sleeps come in batches (see [`Wakeups::sleep_for`]).
    batch: bool,
    /// Time spent spinning in the current window (see [`SPIN_ALLOWANCE_NS`]).
    spun_ns: u64,
    /// When the loop last chose to spin, and how many events had run by
    /// then (see [`Wakeups::spinning`]).
    spin_mark: Option<(u64, u64)>,
    /// Time spent spinning in all.
    pub(crate) spun_total_ns: u64,
}

/// The most a thread spins in one window of [`crate::rtio::DUTY_WINDOW_NS`]
/// (a tenth of it); past that it sleeps up to each deadline, at least a
/// batch's sleep ([`Wakeups::batch_sleep`]), without spinning, until the
/// window ends.
/// Spinning before each deadline chains when events come closer together
/// than the spin window: 2 000 simulated pairs on two partitions (some
/// 450 000 events a second each, 2 µs apart) spun from one event to the
/// next, a whole core for a quarter of a core's work, whenever the window
/// grew back to 10 µs, and left the real-time class for it (a measure of
/// the CPU share alone, taken once a window, could only halve the window
/// after the fact and double it again). The allowance bounds what
/// spinning costs whatever the events do: the work, a sleep's cost per
/// batch, and at most this.
pub const SPIN_ALLOWANCE_NS: u64 = crate::rtio::DUTY_WINDOW_NS / 10;

/// The most one pass of a spinning loop counts as spinning: a pass looks
/// at the clock, the queues and the ports, a microsecond or two (a look at
/// the control hook's descriptor, once a millisecond, a few more); a pass
/// that took longer was held off its CPU (the kernel's real-time
/// throttling, a thread above it), and that time is not the thread's.
pub const SPIN_PASS_MAX_NS: u64 = 50_000;

/// Above this share of the CPU over the last 200 ms (`rtio::Duty`'s
/// horizon) the thread sleeps in batches, below [`BATCH_BELOW`] no longer:
/// short of the 90 % at which it would leave the real-time class, and
/// well below what batches bring it down to, so that it does not go back
/// and forth.
pub const BATCH_ABOVE: f64 = 0.8;
/// See [`BATCH_ABOVE`].
pub const BATCH_BELOW: f64 = 0.5;

/// Above this share of a 10 ms window on the CPU, the spin window halves;
/// below [`SPIN_RELAX_SHARE`] it doubles back. Well below the 90 % at which
/// the thread leaves the real-time class (`rtio::Duty`): there, the CFS
/// scheduler shares the CPU with the programs and may keep the thread off
/// it for milliseconds, while a shorter spin costs at most a wake-up's
/// latency (tens of microseconds).
pub const SPIN_BUDGET_SHARE: f64 = 0.7;
/// See [`SPIN_BUDGET_SHARE`].
pub const SPIN_RELAX_SHARE: f64 = 0.5;

/// The shortest spin window the adaptation chooses.
pub const MIN_SPIN_NS: u64 = 10_000;

impl Wakeups {
    /// `max_ns`: `run.spin`; `sleep_cost_ns`: what a timed sleep costs
    /// the thread ([`sleep_cost_ns`]).
    pub(crate) fn new(max_ns: u64, sleep_cost_ns: u64) -> Wakeups {
        Wakeups {
            max_ns,
            recent: [0; 128],
            n: 0,
            // Until it has measured, the configured window.
            spin_ns: max_ns,
            cap_ns: max_ns,
            sleep_cost_ns,
            batch: false,
            spun_ns: 0,
            spin_mark: None,
            spun_total_ns: 0,
        }
    }

    /// The loop chose to spin at `now` (CLOCK_MONOTONIC ns), `events`
    /// having run in all: the time since it last chose to spin counts as
    /// spinning when no event ran meanwhile (when one did, the pass that
    /// ran it spun for one pause at most: that time was work), up to
    /// [`SPIN_PASS_MAX_NS`] (a pass that took longer was held off its CPU,
    /// which is counted as such, not spent spinning). With `run.spin` at
    /// zero nothing counts: the thread never spins.
    pub(crate) fn spinning(&mut self, now: u64, events: u64) {
        if self.max_ns == 0 {
            return;
        }
        if let Some((t0, e0)) = self.spin_mark {
            if e0 == events {
                let d = now.saturating_sub(t0).min(SPIN_PASS_MAX_NS);
                self.spun_ns += d;
                self.spun_total_ns += d;
            }
        }
        self.spin_mark = Some((now, events));
    }

    /// The loop chose to sleep, blocked (a control hook, a question from
    /// another partition) or stopped: it is no longer spinning.
    pub(crate) fn not_spinning(&mut self) {
        self.spin_mark = None;
    }

    /// A sleep of `ns`, or of twice a sleep's cost if that is longer: a
    /// sleep that frees more CPU than it takes (saturated, or with the
    /// spinning allowance spent).
    fn batch_sleep(&self, ns: u64) -> u64 {
        ns.max(2 * self.sleep_cost_ns)
    }

    /// Whether the window's allowance for spinning is spent.
    fn spin_spent(&self) -> bool {
        self.spun_ns >= SPIN_ALLOWANCE_NS
    }

    pub(crate) fn spin_ns(&self) -> u64 {
        self.spin_ns.min(self.cap_ns)
    }

    /// How long to sleep when the next deadline is `remaining_ns` away
    /// (`None`: spin, or run what is due).
    ///
    /// Up to the spin window before the deadline, and, while the window is
    /// at least what a sleep costs, not at all (spin through the gap) when
    /// that sleep would be shorter than its cost. A saturated thread
    /// (over [`BATCH_ABOVE`] of the CPU over 200 ms) sleeps at least twice
    /// a sleep's cost even past the deadline, and runs the events due
    /// meanwhile together: each sleep then frees more CPU than it takes,
    /// events run at most that much late (and a wake-up), and the thread
    /// stays in the real-time class. A thread that has spent its window's
    /// allowance for spinning ([`SPIN_ALLOWANCE_NS`]) sleeps up to each
    /// deadline, at least twice a sleep's cost, and does not spin at all
    /// until the window ends. With `run.spin` at zero the thread never
    /// spins, as documented, and sleeps up to each deadline whatever it
    /// costs.
    pub(crate) fn sleep_for(&self, remaining_ns: u64) -> Option<u64> {
        if self.max_ns == 0 {
            return (remaining_ns > 0).then_some(remaining_ns);
        }
        if self.spin_spent() {
            // No more spinning this window: up to the deadline, or a
            // batch's length if that is longer, not even within the spin
            // window.
            return (remaining_ns > 0).then(|| self.batch_sleep(remaining_ns));
        }
        let spin = self.spin_ns();
        if self.batch {
            // Within the spin window, spin: the batch's sleep was the one
            // that brought the thread here.
            let sleep = remaining_ns.checked_sub(spin).filter(|&s| s > 0)?;
            return Some(self.batch_sleep(sleep));
        }
        let sleep = remaining_ns.checked_sub(spin)?;
        let floor = if self.cap_ns >= self.sleep_cost_ns {
            self.sleep_cost_ns
        } else {
            0
        };
        (sleep > floor).then_some(sleep)
    }

    /// Adapts the cap on spinning to the CPU share of the window that just
    /// ended: spinning is CPU the real programs need (on 2 cores, all of
    /// it under load), so a thread that is mostly busy spins less and
    /// sleeps more, down to not spinning at all.
    ///
    /// And whether it is saturated: `long_share`, its share over the
    /// last 200 ms, above [`BATCH_ABOVE`] (see [`Wakeups::sleep_for`]).
    ///
    /// Called when a window ends: the next one's allowance for spinning
    /// starts ([`SPIN_ALLOWANCE_NS`]).
    pub(crate) fn budget(&mut self, share: f64, long_share: f64) {
        self.spun_ns = 0;
        if long_share > BATCH_ABOVE {
            self.batch = true;
        } else if long_share < BATCH_BELOW {
            self.batch = false;
        }
        if share > SPIN_BUDGET_SHARE {
            self.cap_ns /= 2;
        } else if share < SPIN_RELAX_SHARE {
            self.cap_ns = (self.cap_ns.max(MIN_SPIN_NS / 2) * 2).min(self.max_ns);
        }
    }

    /// One timed sleep ended `over_ns` after its deadline.
    pub(crate) fn record(&mut self, over_ns: u64) {
        self.recent[self.n % self.recent.len()] = over_ns;
        self.n += 1;
        if self.n >= 32 && self.n.is_multiple_of(32) {
            let k = self.n.min(self.recent.len());
            let mut v = self.recent;
            let v = &mut v[..k];
            v.sort_unstable();
            let p99 = v[(k * 99 / 100).min(k - 1)];
            self.spin_ns = (2 * p99).clamp(MIN_SPIN_NS.min(self.max_ns), self.max_ns);
        }
    }
}

/// The CPU time one timed sleep (`ppoll` with nothing to wait for but its
/// timeout) costs the calling thread, measured over a few sleeps of 1 µs,
/// at most [`MAX_SLEEP_COST_NS`]. A sleep that short is all cost: the
/// system calls, arming the timer and the switches to and from the idle
/// task (each an exit to the hypervisor in a virtual machine). Taken before
/// the run's clock starts (some 32 sleeps: under a millisecond here).
pub(crate) fn sleep_cost_ns() -> u64 {
    const SLEEPS: u64 = 32;
    let cpu0 = thread_cpu_ns();
    for _ in 0..SLEEPS {
        let _ = crate::sys::ppoll_raw(&mut [], Duration::from_micros(1));
    }
    (thread_cpu_ns().saturating_sub(cpu0) / SLEEPS).min(MAX_SLEEP_COST_NS)
}

/// The most [`sleep_cost_ns`] says: a thread never spins for longer than
/// this for want of a sleep, whatever the measurement met.
pub const MAX_SLEEP_COST_NS: u64 = 100_000;

/// When the next event is this late (ns) while frames wait to enter the
/// model, the events that are due run first, and the frames enter after
/// them: overload shows as input latency, not as late events.
pub const TIMERS_FIRST_NS: u64 = 20_000;

/// While the event thread spins, how often it looks at the control hook's
/// wake-up descriptor (a system call).
const WAKE_POLL_NS: u64 = 1_000_000;

/// Histogram of nanoseconds, 1 ns to 100 s, 3 significant digits.
pub(crate) fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// How late the events ran: the run's, and the current window's (see
/// [`Control::window`]). Each event is recorded once, in the window, whose
/// events join the run's when it closes: two records an event had been
/// 5.5 % of partition 0's time with 10 000 simulated pairs.
struct EventLateness {
    /// The events of the windows closed so far.
    closed: Histogram<u64>,
    /// The events of the current window.
    window: Histogram<u64>,
}

impl Default for EventLateness {
    fn default() -> Self {
        EventLateness {
            closed: histogram(),
            window: histogram(),
        }
    }
}

impl EventLateness {
    /// One event, `late_ns` after its time.
    #[inline]
    fn record(&mut self, late_ns: u64) {
        self.window.saturating_record(late_ns.max(1));
    }

    /// Ends the current window: its events join the run's, and the next
    /// window starts empty.
    fn close_window(&mut self) {
        // Both have the same bounds (`histogram()`): adding cannot fail for
        // want of range.
        let _ = self.closed.add(&self.window);
        self.window.reset();
    }

    /// Every event of the run so far.
    fn all(&self) -> Histogram<u64> {
        let mut all = self.closed.clone();
        let _ = all.add(&self.window);
        all
    }
}

/// What the event thread counts as it runs, for its report.
struct Tally {
    slack: u64,
    fifo: Option<i32>,
    priority_error: Option<String>,
    cpu0: u64,
    pool0: PoolStats,
    wall0: u64,
    events0: u64,
    lateness: EventLateness,
    input: Histogram<u64>,
    /// How late timed sleeps ended (the wake-up latency).
    wakeup: Histogram<u64>,
    late_events: u64,
    /// Simulated times of the first and the last late event.
    first_late: Option<SimTime>,
    last_late: Option<SimTime>,
    sleeps: u64,
    /// Time the event thread spun (see [`Wakeups::spinning`]).
    spun_ns: u64,
    /// See [`RtReport::sleep_cost_ns`].
    sleep_cost_ns: u64,
    demotions: u64,
    /// The heap made resident before the clock started.
    reserved: crate::memory::Reserved,
    /// The event thread's minor page faults when the clock started.
    faults0: i64,
    /// CPU time stolen by the hypervisor when the clock started.
    steal0: Option<u64>,
    /// Time the event thread was held off its CPU, and the late events
    /// put down to it.
    held: rtio::HeldOff,
}

/// Minor page faults of the calling thread so far.
fn thread_page_faults() -> i64 {
    nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_THREAD)
        .map_or(0, |u| u.minor_page_faults())
}

impl Tally {
    /// Counts one event, due at `at`, that ran `late_ns` after its time.
    fn record_lateness(&mut self, at: SimTime, late_ns: u64, threshold_ns: u64) {
        self.lateness.record(late_ns);
        if late_ns > threshold_ns {
            self.late_events += 1;
            self.held.late(late_ns);
            self.first_late.get_or_insert(at);
            self.last_late = Some(at);
        }
    }

    /// The report as of now, with the ports as given.
    fn report(
        &self,
        ports: Vec<PortReport>,
        io: &rtio::Published,
        queue: &EventQueue<Event>,
        late_threshold_ns: u64,
        spin_ns: u64,
        end: EndReason,
    ) -> RtReport {
        let wall_ns = clock::mono_ns() - self.wall0;
        let cpu_ns = thread_cpu_ns() - self.cpu0;
        let sum = |f: fn(&BoundaryCounters) -> u64| ports.iter().map(|p| f(&p.counters)).sum();
        let wall_s = wall_ns as f64 / 1e9;
        let share = |ns: u64| {
            if wall_s > 0.0 {
                ns as f64 / 1e9 / wall_s
            } else {
                0.0
            }
        };
        let lateness = self.lateness.all();
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
            event_lateness: Lateness::of(&lateness),
            event_lateness_histogram: buckets(&lateness),
            input_latency: Lateness::of(&self.input),
            output_latency: Lateness::of(&io.output_latency),
            wakeup_latency: Lateness::of(&self.wakeup),
            spin_ns,
            timer_slack_ns: self.slack,
            fifo_priority: self.fifo,
            priority_error: self
                .priority_error
                .clone()
                .or_else(|| io.priority_error.clone()),
            cpu_seconds: (cpu_ns + io.cpu_ns) as f64 / 1e9,
            cpu_share: share(cpu_ns + io.cpu_ns),
            event_cpu_share: share(cpu_ns),
            io_cpu_share: share(io.cpu_ns),
            sleeps: self.sleeps,
            sleep_cost_ns: self.sleep_cost_ns,
            io_sleeps: io.sleeps,
            spin_share: share(self.spun_ns),
            buffers: pool_stats().since(&self.pool0).plus(&io.pool),
            demotions: self.demotions,
            io_demotions: io.demotions,
            heap_reserve_bytes: self.reserved.bytes as u64,
            event_page_faults: (thread_page_faults() - self.faults0).max(0) as u64,
            steal_ns: self
                .steal0
                .zip(clock::steal_ns())
                .map(|(a, b)| b.saturating_sub(a)),
            guest_halt_poll_ns: clock::guest_halt_poll_ns(),
            held_off_ns: self.held.total_ns,
            held_off_queued_ns: self.held.queued_ns,
            held_off_max_ns: self.held.max_ns,
            late_held_off: self.held.late_events,
            rx_frames: sum(|c| c.rx_frames),
            tx_frames: sum(|c| c.tx_frames),
            boundary_lost: sum(|c| c.lost()),
            rx_malformed: sum(|c| c.rx_malformed),
            ports,
        }
    }
}

/// CPU time of the calling thread, nanoseconds.
pub(crate) fn thread_cpu_ns() -> u64 {
    clock_ns(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
}

fn clock_ns(id: nix::time::ClockId) -> u64 {
    nix::time::clock_gettime(id).map_or(0, |ts| {
        ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
    })
}

/// The event thread's state that the helpers below share.
struct EventSide<'a, 'p> {
    clock: RtClock,
    opts: &'a RtOptions<'a>,
    /// Per port: its external node.
    nodes: Vec<NodeId>,
    tx: rtrb::Producer<Outgoing>,
    shared: &'a Shared,
    ports: &'a [SharedPort<'p>],
    /// Ports written directly since the last flush, and the moments those
    /// frames were due (see [`EventSide::send`]).
    direct_dirty: Vec<bool>,
    direct_due: Vec<u64>,
    /// How late frames written directly were handed to the kernel.
    direct_latency: Histogram<u64>,
    /// Frames in and out in the current 10 ms window (see [`Mode`]).
    window_frames: u64,
    /// Per port: what this thread counts of it.
    edge: Vec<EdgeCount>,
    tally: Tally,
    /// Moments frames were injected: (events scheduled before, CLOCK_MONOTONIC
    /// ns), oldest first. An event numbered after a checkpoint was not known
    /// before its moment (see [`EventSide::lateness`]).
    known: VecDeque<(u64, u64)>,
    /// What each event's lateness is read from: anchored by
    /// [`EventSide::run_due`] with its first event and every 4 096.
    fast: clock::FastClock,
}

/// Most injection checkpoints kept (older events that ran late are then
/// counted from their time: the conservative side).
const CHECKPOINTS: usize = 4096;

/// When event number `n`, due at `due` (CLOCK_MONOTONIC ns), became known:
/// its time, or the moment of the last injection before it was scheduled
/// if that was later (`known`: checkpoints as in `EventSide::known`).
/// Injections come a few a millisecond and most events run within
/// microseconds of their time, so the last checkpoint is nearly always
/// before `due` and nothing is searched (the search of every late event
/// had been 3 % of partition 0's time with 10 000 simulated pairs).
fn known_from(known: &VecDeque<(u64, u64)>, due: u64, n: u64) -> u64 {
    match (known.front(), known.back()) {
        (Some(&(first, _)), Some(&(_, last_at))) if n >= first && last_at > due => {
            // The last injection before the event was scheduled.
            let i = known.partition_point(|&(k, _)| k <= n);
            due.max(known[i - 1].1)
        }
        _ => due,
    }
}

impl EventSide<'_, '_> {
    /// How late event number `n`, due at `t`, runs now: counted from its
    /// time, or from the moment it became known if that was later. Events a
    /// frame from a real host causes are due at the frame's arrival, before
    /// the frame reached the model; their wait until then is the frame's
    /// input latency (reported as such), not the scheduler's lateness.
    #[inline]
    fn lateness(&self, t: SimTime, n: u64) -> u64 {
        let now = self.fast.now_ns();
        let due = self.clock.mono_of(t);
        if now > due {
            now.saturating_sub(known_from(&self.known, due, n))
        } else {
            0
        }
    }

    /// Injects `frame`, read from port `port`, into the model now (at the
    /// queue's current time), remembering when.
    fn inject(
        &mut self,
        net: &mut Network,
        queue: &mut EventQueue<Event>,
        port: usize,
        frame: Frame,
    ) {
        if self.known.len() == CHECKPOINTS {
            self.known.pop_front();
        }
        self.known.push_back((queue.scheduled(), clock::mono_ns()));
        self.window_frames += 1;
        self.edge[port].entered += frame.segs();
        net.inject(queue, self.nodes[port], frame);
    }

    /// Runs every event due at or before `limit`, handing what reaches real
    /// interfaces to the I/O thread as it goes. False if a stop cut it
    /// short: events due by `limit` are still queued, so the clock must not
    /// be moved past them.
    fn run_due(
        &mut self,
        net: &mut Network,
        queue: &mut EventQueue<Event>,
        limit: SimTime,
    ) -> bool {
        let mut ran = 0u32;
        let hints = net.wants_hints();
        while let Some(t) = queue.peek_time() {
            if t > limit {
                break;
            }
            // A burst of events due at once (a model that falls far behind)
            // must not keep a Ctrl-C waiting: the loop looks at the flag
            // between passes, and here every 4096 events. The clock's
            // anchor is taken with the first event due (a pass with none,
            // a frame entering or a spin, takes none) and again every
            // 4096, so that a long backlog is not read off one anchor.
            if ran.is_multiple_of(4096) {
                if ran > 0 && self.opts.stop.load(Ordering::Relaxed) {
                    self.flush_direct();
                    return false;
                }
                self.fast.anchor();
            }
            ran = ran.wrapping_add(1);
            let (t, n, ev) = queue.pop_numbered().expect("peeked");
            netloop_core::sched::hint_next(&*net, queue, hints);
            let late = self.lateness(t, n);
            self.tally
                .record_lateness(t, late, self.opts.late_threshold_ns);
            net.handle(t, ev, queue);
            if net.take_departed() {
                for i in 0..self.nodes.len() {
                    if let Node::External(x) = net.node_mut(self.nodes[i]) {
                        while let Some(d) = x.outbox.pop_front() {
                            self.send(i, self.clock.mono_of(d.at), d.frame);
                        }
                    }
                }
            }
        }
        self.flush_direct();
        true
    }

    /// Hands a frame for port `port`, due at `due`, to the I/O thread, or
    /// writes it here when that thread sleeps with nothing queued: waking
    /// it would cost more (a sleeping vCPU takes tens to hundreds of
    /// microseconds to wake) than the write, and under light load this
    /// thread has the time. Under load the I/O thread is awake and writes.
    /// The queue is checked first: once it shows that the I/O thread took a
    /// frame, it also shows that the thread had woken, so no frame of ours
    /// can be on its way out when we write one here (frames stay in order).
    fn send(&mut self, port: usize, due: u64, frame: Frame) {
        self.window_frames += 1;
        let frame_segs = frame.segs();
        // Under load (split) never: a write runs the receiving host's stack
        // in the writing thread, and the event thread must not carry it
        // (in the SITL demo at 1 Gbit/s, direct writes made the event
        // thread over 90 % busy while the machine idled a third of the time).
        if self.tx.slots() == QUEUE_FRAMES
            && !self.shared.split.load(Ordering::Relaxed)
            && self.shared.to_io.is_sleeping()
        {
            if let Ok(mut p) = self.ports[port].try_lock() {
                // A lost frame (full ring, failed write) is counted by the
                // interface.
                let _ = p.port.io.send_frame(&frame);
                self.direct_dirty[port] = true;
                self.direct_due.push(due);
                return;
            }
        }
        let len = frame.len();
        // Counted before the push: the I/O thread may take the frame (and
        // subtract) at once.
        let before = self.shared.tx_bytes.fetch_add(len, Ordering::Relaxed);
        let pushed = before + len <= rtio::QUEUE_BYTES
            && self.tx.push(Outgoing { port, due, frame }).is_ok();
        if pushed {
            self.shared.to_io.notify();
        } else {
            self.shared.tx_bytes.fetch_sub(len, Ordering::Relaxed);
            // The I/O thread is that far behind: lost at the boundary,
            // counted in the port's tx_drops.
            self.edge[port].queue_full += frame_segs;
        }
    }

    /// Hands the frames written directly to the kernel. Never waits for
    /// the port: if the I/O thread has it, that thread is awake and is
    /// asked to flush it (a write it makes would flush them anyway).
    fn flush_direct(&mut self) {
        if self.direct_due.is_empty() {
            return;
        }
        for (i, d) in self.direct_dirty.iter_mut().enumerate() {
            if std::mem::take(d) {
                match self.ports[i].try_lock() {
                    Ok(mut p) => {
                        let _ = p.port.io.flush();
                    }
                    Err(_) => {
                        self.shared.flush[i].store(true, Ordering::Release);
                        self.shared.to_io.ring();
                    }
                }
            }
        }
        let now = clock::mono_ns();
        for due in self.direct_due.drain(..) {
            self.direct_latency
                .saturating_record(now.saturating_sub(due).max(1));
        }
    }
}

/// Runs `net` in real time from the queue's current time, until
/// `opts.until`, a stop request, or the control hook's `Stop`; `start` says
/// when simulated time starts on the wall clock. The ports are the I/O
/// thread's for the run.
///
/// `control` is called at the start and again whenever simulated time reaches
/// the time it last asked for; it starts programs, notices their exit, and
/// so on.
///
/// Fails only if the I/O thread or its doorbells cannot be created.
pub fn run_realtime(
    net: &mut Network,
    queue: &mut EventQueue<Event>,
    ports: &mut [RealPort],
    start: Start,
    opts: &RtOptions<'_>,
    control: &mut dyn FnMut(&mut Control<'_>) -> Step,
) -> std::io::Result<RtReport> {
    let shared = Shared::new(ports.len())?;
    let slack = clock::set_timer_slack_ns(1);
    // Real-time class for the two threads only, restored at the end: the
    // programs they serve share the cores, and a normal-class scheduler
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
    let (rx_prod, mut rx) = rtrb::RingBuffer::<Arrival>::new(QUEUE_FRAMES);
    let (tx, tx_cons) = rtrb::RingBuffer::<Outgoing>::new(QUEUE_FRAMES);
    let nodes: Vec<NodeId> = ports.iter().map(|p| p.node).collect();
    let n_ports = ports.len();
    let cells: Vec<SharedPort<'_>> = ports
        .iter_mut()
        .map(|p| std::sync::Mutex::new(rtio::PortState::new(p)))
        .collect();
    // Everything that allocates (and faults its pages in) is made before
    // the clock starts, so that none of it makes the first events late.
    let mut tally = Tally {
        slack,
        fifo,
        priority_error,
        cpu0: 0,
        pool0: pool_stats(),
        wall0: 0,
        events0: 0,
        lateness: EventLateness::default(),
        input: histogram(),
        wakeup: histogram(),
        late_events: 0,
        first_late: None,
        last_late: None,
        sleeps: 0,
        spun_ns: 0,
        sleep_cost_ns: 0,
        demotions: 0,
        reserved: crate::memory::Reserved::default(),
        faults0: 0,
        steal0: None,
        held: rtio::HeldOff::default(),
    };
    let direct_latency = histogram();
    let direct_due = Vec::with_capacity(QUEUE_FRAMES);
    let known = VecDeque::with_capacity(CHECKPOINTS);
    tally.reserved = crate::memory::reserve(opts.heap_reserve);
    // At the thread's priority, before the clock starts.
    tally.sleep_cost_ns = sleep_cost_ns();
    // Its rate measured (a 2 ms spin) before the clock starts.
    let fast = clock::FastClock::calibrated();
    if let Some(p) = opts.partners {
        p.wait_ready();
    }
    let clock = match start {
        Start::WhenReady => RtClock::with_now_at(queue.now()),
        Start::At(clock) => clock,
    };
    if let Some(p) = opts.partners {
        p.started(clock);
    }
    tally.cpu0 = thread_cpu_ns();
    tally.faults0 = thread_page_faults();
    tally.steal0 = clock::steal_ns();
    tally.wall0 = clock::mono_ns();
    tally.events0 = queue.events_processed();
    let mut side = EventSide {
        clock,
        opts,
        nodes,
        tx,
        shared: &shared,
        ports: &cells,
        direct_dirty: vec![false; n_ports],
        direct_due,
        direct_latency,
        window_frames: 0,
        edge: vec![EdgeCount::default(); n_ports],
        known,
        tally,
        fast,
    };
    let io_opts = IoOptions {
        batch: opts.batch,
        // The I/O thread in the real-time class only if the event thread
        // got there (it runs one below it).
        priority: fifo,
        affinity: opts.cpu.and(old_affinity),
    };

    let end = std::thread::scope(|s| -> std::io::Result<EndReason> {
        let (io_ports, shared_ref, io_opts_ref) = (&cells[..], &shared, &io_opts);
        let io = std::thread::Builder::new()
            .name("netloop-io".into())
            .spawn_scoped(s, move || {
                rtio::io_thread(io_ports, rx_prod, tx_cons, shared_ref, clock, io_opts_ref)
            })?;
        // The I/O thread runs until told to stop: told here, and by this
        // guard if the loop or the control hook panics, or the scope would
        // wait for that thread for ever (and a partitioned run's other
        // threads with it).
        struct StopIo<'s>(&'s Shared);
        impl Drop for StopIo<'_> {
            fn drop(&mut self) {
                self.0.stop.store(true, Ordering::Release);
                self.0.to_io.ring();
            }
        }
        let stop_io = StopIo(shared_ref);
        let end = event_loop(net, queue, &mut rx, &mut side, control);
        drop(stop_io);
        if let Err(panic) = io.join() {
            std::panic::resume_unwind(panic);
        }
        Ok(end)
    });
    if fifo.is_some() {
        crate::sys::restore_policy(old_policy);
    }
    if let (Some(_), Some(set)) = (opts.cpu, old_affinity) {
        let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
    }
    let end = end?;
    // Frames the I/O thread read after the event thread's last look at its
    // queue (it reads until it is told to stop) enter the model now, at the
    // end: read from a real host, they are in flight in the results rather
    // than lost between the port and the model.
    while let Ok(a) = rx.pop() {
        side.inject(net, queue, a.port, a.frame);
    }
    let EventSide {
        tally,
        edge,
        direct_latency,
        ..
    } = side;

    // The I/O thread has written what was queued and given the ports back:
    // the final counters come from them.
    let port_reports = port_reports(&cells, &edge, true);
    let mut published = shared.published();
    let _ = published.output_latency.add(&direct_latency);
    let report = tally.report(
        port_reports,
        &published,
        queue,
        opts.late_threshold_ns,
        opts.spin_ns,
        end,
    );
    Ok(report)
}

/// The event thread's loop; returns why the run ended.
fn event_loop(
    net: &mut Network,
    queue: &mut EventQueue<Event>,
    rx: &mut rtrb::Consumer<Arrival>,
    side: &mut EventSide<'_, '_>,
    control: &mut dyn FnMut(&mut Control<'_>) -> Step,
) -> EndReason {
    let (clock, opts, shared, ports) = (side.clock, side.opts, side.shared, side.ports);
    let mut duty = Duty::new(side.tally.fifo);
    let mut wake = Wakeups::new(opts.spin_ns, side.tally.sleep_cost_ns);
    let mut mode = Mode::default();
    // Frames taken from the I/O thread in one pass, with the order they
    // came in (so that sorting by time keeps one port's frames in order).
    let mut arrivals: Vec<(u64, u32, Arrival)> = Vec::with_capacity(QUEUE_FRAMES);
    let mut next_control = SimTime::ZERO;
    let mut last_wake_poll = 0u64;
    // The doorbell, the control hook's wake-up descriptor if any, the other
    // partitions' doorbell if any, and the ports (from `PORTS_AT`, waited
    // on by this thread under light load); a negative descriptor is
    // skipped by ppoll.
    let none = libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    };
    let partners = opts.partners;
    let raw: Vec<libc::pollfd> = [
        crate::sys::pollfd_in(shared.to_event.fd()),
        opts.wake.map_or(none, crate::sys::pollfd_in),
        partners.map_or(none, |p| crate::sys::pollfd_in(p.bell())),
    ]
    .into_iter()
    .chain(
        ports
            .iter()
            .map(|p| crate::sys::pollfd_in(rtio::lock(p).port.io.fd())),
    )
    .collect();
    let mut fds = raw.clone();
    let end = loop {
        if duty.check() {
            side.tally.held.close_window(&duty);
            wake.budget(duty.share, duty.long_share);
            if let Some(split) = mode.window(duty.share, std::mem::take(&mut side.window_frames)) {
                shared.split.store(split, Ordering::Release);
                shared.to_io.ring();
            }
        }
        if opts.stop.load(Ordering::Relaxed) {
            break EndReason::Interrupted;
        }
        if partners.is_some_and(|p| p.abandoned()) {
            // Another partition failed; its panic or error ends the run
            // once the threads are joined.
            break EndReason::Control;
        }
        let now = clock.now();
        if now >= next_control {
            side.tally.demotions = duty.demotions;
            side.tally.spun_ns = wake.spun_total_ns;
            let mut ctl = Control {
                now,
                net,
                queue,
                tally: &mut side.tally,
                io: IoView {
                    shared,
                    ports: &ports,
                    edge: &side.edge,
                },
                late_threshold_ns: opts.late_threshold_ns,
                spin_ns: opts.spin_ns,
            };
            // The hook may block (starting a program waits for its exec):
            // time neither running nor asleep that is not the CPU being
            // taken, so it is left out of the held-off time as sleep is
            // (its CPU time is the thread's own, and time it waited on a
            // run queue is held off).
            let blocking = rtio::HeldOff::blocking(&duty);
            let step = control(&mut ctl);
            blocking.end(&duty, &mut side.tally.held);
            wake.not_spinning();
            match step {
                Step::Continue(t) => next_control = t.max(now),
                Step::Stop => break EndReason::Control,
            }
        }
        // Frames that are waiting enter first, each after the events due
        // before its arrival: the model sees everything in time order.
        let mut seq = 0u32;
        while let Ok(a) = rx.pop() {
            shared.rx_bytes.fetch_sub(a.frame.len(), Ordering::Relaxed);
            arrivals.push((a.at, seq, a));
            seq += 1;
        }
        if !mode.split {
            for (i, p) in ports.iter().enumerate() {
                // The I/O thread may still be reading it (just after a
                // switch): what it reads comes through the queue.
                let Ok(mut p) = p.try_lock() else { continue };
                let room = QUEUE_FRAMES.saturating_sub(arrivals.len()).min(opts.batch);
                p.read(room, clock, &mut |at, frame| {
                    arrivals.push((at, seq, Arrival { at, port: i, frame }));
                    seq += 1;
                });
            }
        }
        if !arrivals.is_empty() {
            arrivals.sort_unstable_by_key(|a| (a.0, a.1));
        }
        for (at, _, a) in arrivals.drain(..) {
            // Events that are running late go first: a backlog of frames
            // (the thread could not keep up with them) must not delay the
            // events that are due; those frames then enter later than they
            // arrived, which shows as input latency.
            let now = clock.now().min(opts.until);
            if queue
                .peek_time()
                .is_some_and(|t| t.as_nanos() + TIMERS_FIRST_NS < now.as_nanos())
            {
                side.run_due(net, queue, now);
            }
            let t = clock.sim_of(at).max(queue.now()).min(opts.until);
            // Cut short by a stop, the frame enters at the last event run
            // rather than after events still due before its moment.
            let t = if side.run_due(net, queue, t) {
                t
            } else {
                queue.now()
            };
            queue.advance_to(t.max(queue.now()));
            side.tally
                .input
                .saturating_record(clock::mono_ns().saturating_sub(at).max(1));
            side.inject(net, queue, a.port, a.frame);
        }

        let limit = clock.now().min(opts.until);
        if let Some(p) = partners {
            p.exchange(net, queue);
        }
        side.run_due(net, queue, limit);
        if let Some(p) = partners {
            p.exchange(net, queue);
        }
        if now >= opts.until {
            break EndReason::Duration;
        }

        // Wait for the next deadline or a frame, whichever comes first.
        let deadline = queue
            .peek_time()
            .unwrap_or(SimTime::MAX)
            .min(next_control)
            .min(opts.until);
        let mono = clock::mono_ns();
        let remaining = clock.mono_of(deadline).saturating_sub(mono);
        // No polling for frames after frames came: on 2 cores the CPU that
        // spinning takes is the real programs' (TCP through one router was
        // 7.5 Gbit/s with 30 us of it on both threads, 10.4 without). The
        // only spin is the last moments before a due event.
        if let Some(sleep_ns) = wake.sleep_for(remaining) {
            let mut sleep_ns = sleep_ns.min(1_000_000_000);
            // Under light load the ports are this thread's to wait on.
            for (k, f) in fds.iter_mut().enumerate() {
                *f = raw[k];
                if k >= PORTS_AT {
                    // Never wait for a port here: under load the ports are
                    // the I/O thread's; a port it holds now is busy, and
                    // this pass does without it.
                    match (mode.split, ports[k - PORTS_AT].try_lock()) {
                        (false, Ok(p)) => {
                            if let Some(u) = p.muted_until(mono) {
                                sleep_ns = sleep_ns.min(u - mono);
                            }
                            if !p.pollable(mono) {
                                f.fd = -1;
                            }
                        }
                        _ => f.fd = -1,
                    }
                }
            }
            shared.to_event.prepare_sleep();
            let mail = partners.is_some_and(|p| p.prepare_sleep());
            if rx.is_empty() && !mail {
                side.tally.sleeps += 1;
                let target = mono + sleep_ns;
                let asleep = clock::mono_ns();
                let polled = crate::sys::ppoll_raw(&mut fds, Duration::from_nanos(sleep_ns));
                side.tally.held.slept(
                    clock::mono_ns().saturating_sub(asleep),
                    sleep_ns,
                    wake.spin_ns(),
                );
                match polled {
                    // Woken by the clock: how late, to size the spin window.
                    Ok(0) => {
                        let over = clock::mono_ns().saturating_sub(target);
                        wake.record(over);
                        side.tally.wakeup.saturating_record(over.max(1));
                    }
                    Ok(_) => {
                        if fds[1].revents != 0 {
                            next_control = SimTime::ZERO;
                        }
                        for (k, f) in fds.iter().enumerate().skip(PORTS_AT) {
                            if f.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                                if let Ok(mut p) = ports[k - PORTS_AT].try_lock() {
                                    p.poll_error();
                                }
                            }
                        }
                    }
                    Err(_) => {}
                }
            }
            shared.to_event.woke();
            if let Some(p) = partners {
                p.woke();
            }
            last_wake_poll = clock::mono_ns();
            wake.not_spinning();
        } else {
            wake.spinning(mono, queue.events_processed());
            if opts.wake.is_some() && mono.saturating_sub(last_wake_poll) >= WAKE_POLL_NS {
                if crate::sys::ppoll_raw(&mut fds[1..2], Duration::ZERO).is_ok_and(|n| n > 0) {
                    next_control = SimTime::ZERO;
                }
                last_wake_poll = mono;
            }
            std::hint::spin_loop();
        }
    };

    // Simulated time has reached now (or the end): run what is due and
    // advance the clock so results cover the whole run. The other
    // partitions stop first, so that none runs past `last`.
    if let Some(p) = partners {
        p.stopping();
    }
    let last = clock.now().min(opts.until);
    if let Some(p) = partners {
        p.exchange(net, queue);
    }
    if side.run_due(net, queue, last) && queue.now() < last {
        queue.advance_to(last);
    }
    // The last window, short as it may be, with the events just run.
    duty.close();
    side.tally.held.close_window(&duty);
    if let Some(p) = partners {
        // At `last` even if a stop cut this partition short of it: the
        // others may have run to it.
        p.finish(net, queue, last);
    }
    side.tally.demotions = duty.demotions;
    side.tally.spun_ns = wake.spun_total_ns;
    end
}

/// Where the ports begin in the event thread's poll set (after the
/// doorbell, the control hook's descriptor and the partitions' doorbell).
const PORTS_AT: usize = 3;

#[cfg(test)]
mod tests {
    /// The run's histogram holds every event once, however its windows
    /// were closed; a window only its own.
    #[test]
    fn every_event_counts_once_in_the_run_and_in_its_window() {
        let mut l = EventLateness::default();
        for ns in [5, 1_000, 2_000_000] {
            l.record(ns);
        }
        l.close_window();
        assert_eq!(l.window.len(), 0, "a new window starts empty");
        l.record(0);
        l.record(7_000);
        assert_eq!(l.window.len(), 2);
        let all = l.all();
        assert_eq!(all.len(), 5);
        assert_eq!(
            all.max(),
            l.closed.max(),
            "the largest is in a closed window"
        );
        assert!(all.value_at_quantile(0.0) <= 1, "0 ns counts as 1 ns");
        l.close_window();
        assert_eq!(l.all().len(), 5, "closing a window moves, not copies");
    }

    /// An event became known at its time or at the last injection before
    /// it was scheduled, whichever was later: the same as a search of
    /// every checkpoint, whether or not the last one is before its time.
    #[test]
    fn an_event_is_known_from_the_last_injection_before_it() {
        let known: VecDeque<(u64, u64)> = [(10, 1_000), (20, 2_000), (30, 3_000)].into();
        let brute = |due: u64, n: u64| {
            known
                .iter()
                .filter(|&&(k, _)| k <= n)
                .map(|&(_, at)| at)
                .max()
                .map_or(due, |at| due.max(at))
        };
        for due in [0, 500, 1_500, 2_500, 3_000, 3_500] {
            for n in [0, 9, 10, 15, 20, 29, 30, 100] {
                assert_eq!(
                    known_from(&known, due, n),
                    brute(due, n),
                    "due {due}, n {n}"
                );
            }
        }
        assert_eq!(known_from(&VecDeque::new(), 7, 7), 7);
    }

    use super::*;

    #[test]
    fn the_io_thread_takes_the_ports_under_load_and_gives_them_back_when_light() {
        let mut m = Mode::default();
        assert_eq!(
            m.window(0.1, 50),
            None,
            "light: the event thread keeps them"
        );
        assert_eq!(
            m.window(0.1, 101),
            Some(true),
            "10 000 frames a second: split"
        );
        assert_eq!(m.window(0.1, 5), None);
        // 19 light windows are not enough; a busy one starts the count again.
        for _ in 0..18 {
            assert_eq!(m.window(0.05, 5), None);
        }
        assert_eq!(m.window(0.3, 5), None);
        for _ in 0..19 {
            assert_eq!(m.window(0.05, 5), None);
        }
        assert_eq!(m.window(0.05, 5), Some(false), "200 ms light: back");
        assert_eq!(m.window(0.6, 0), Some(true), "a busy event thread: split");
    }

    #[test]
    fn lateness_buckets_double_from_a_microsecond_and_hold_every_event() {
        let mut h = histogram();
        assert!(buckets(&h).is_empty(), "no events, no buckets");
        // On time (1 ns: recorded at least 1), within 1 µs, just over it,
        // 3 µs, and one event 5 ms late.
        for v in [1, 999, 1_000, 1_001, 3_000, 3_000, 5_000_000] {
            h.record(v).unwrap();
        }
        let b = buckets(&h);
        let total: u64 = b.iter().map(|b| b.count).sum();
        assert_eq!(total, 7, "every event in one bucket: {b:?}");
        assert_eq!(
            b[0],
            Bucket {
                up_to_ns: 1_000,
                count: 3
            }
        );
        assert_eq!(
            b[1],
            Bucket {
                up_to_ns: 2_000,
                count: 1
            }
        );
        assert_eq!(
            b[2],
            Bucket {
                up_to_ns: 4_000,
                count: 2
            }
        );
        // 5 ms is in (4.096 ms, 8.192 ms]; the empty buckets between stay.
        assert_eq!(b.len(), 14, "{b:?}");
        assert_eq!(
            b[13],
            Bucket {
                up_to_ns: 8_192_000,
                count: 1
            }
        );
        assert!(b[3..13].iter().all(|b| b.count == 0));
    }

    #[test]
    fn the_spin_window_follows_the_wake_up_latency_within_its_bounds() {
        let mut w = Wakeups::new(200_000, 0);
        assert_eq!(
            w.spin_ns(),
            200_000,
            "before measuring: the configured window"
        );
        for _ in 0..32 {
            w.record(3_000);
        }
        assert_eq!(w.spin_ns(), MIN_SPIN_NS, "punctual wake-ups: the minimum");
        for _ in 0..64 {
            w.record(40_000);
        }
        assert_eq!(w.spin_ns(), 80_000, "twice the recent p99");
        for _ in 0..128 {
            w.record(5_000_000);
        }
        assert_eq!(w.spin_ns(), 200_000, "never beyond run.spin");
        let mut z = Wakeups::new(0, 0);
        for _ in 0..32 {
            z.record(3_000);
        }
        assert_eq!(z.spin_ns(), 0, "spin = 0s never spins");
    }

    #[test]
    fn no_sleep_is_shorter_than_what_a_sleep_costs_and_a_saturated_thread_sleeps_in_batches() {
        let mut w = Wakeups::new(200_000, 20_000);
        for _ in 0..32 {
            w.record(5_000);
        }
        assert_eq!(w.spin_ns(), MIN_SPIN_NS);
        // 15 µs of sleep after 10 of spin would cost more than spinning
        // through all 25: the thread spins.
        assert_eq!(w.sleep_for(25_000), None);
        assert_eq!(w.sleep_for(30_000), None, "a sleep of exactly its cost");
        assert_eq!(w.sleep_for(30_001), Some(20_001));
        assert_eq!(w.sleep_for(5_000), None, "within the spin window");
        // Busy, not saturated: the budget cuts the window below a sleep's
        // cost, and the thread sleeps up to each deadline, as before.
        for _ in 0..20 {
            w.budget(0.95, 0.75);
        }
        assert_eq!(w.spin_ns(), 0);
        assert_eq!(w.sleep_for(2_000), Some(2_000));
        // Saturated: each sleep lasts at least two sleeps' cost, past the
        // deadline, until the thread is well below the mark again.
        w.budget(0.95, 0.85);
        assert_eq!(w.sleep_for(2_000), Some(40_000), "a short gap: a batch");
        assert_eq!(w.sleep_for(100_000), Some(100_000), "a long one as before");
        assert_eq!(w.sleep_for(0), None, "due now: run it");
        w.budget(0.6, 0.6);
        assert_eq!(w.sleep_for(2_000), Some(40_000), "between the marks");
        // Still batching, with the window grown back: a gap within the
        // window is spun (the batch's one sleep brought the thread there),
        // not slept a second time.
        for _ in 0..3 {
            w.budget(0.3, 0.6);
        }
        assert_eq!(w.spin_ns(), MIN_SPIN_NS);
        assert_eq!(w.sleep_for(8_000), None, "within the window: spin");
        assert_eq!(w.sleep_for(12_000), Some(40_000), "beyond it: a batch");
        // A cost measured as nothing never makes a sleep of nothing.
        let mut zero = Wakeups::new(200_000, 0);
        zero.budget(0.95, 0.95);
        assert_eq!(zero.sleep_for(100_000), None, "within the window");
        assert_eq!(zero.sleep_for(100_001), Some(1));
        w.budget(0.3, 0.45);
        assert_eq!(w.spin_ns(), MIN_SPIN_NS);
        assert_eq!(
            w.sleep_for(40_000),
            Some(30_000),
            "below: no more batches, up to the window before the deadline"
        );
        assert_eq!(w.sleep_for(12_000), None, "and the floor again");
        // run.spin = 0 never spins: it sleeps up to every deadline.
        let z = Wakeups::new(0, 20_000);
        assert_eq!(z.sleep_for(2_000), Some(2_000));
        assert_eq!(z.sleep_for(0), None, "nothing to wait for");
    }

    #[test]
    fn spinning_stops_for_the_window_once_its_allowance_is_spent() {
        let mut w = Wakeups::new(200_000, 20_000);
        for _ in 0..32 {
            w.record(5_000);
        }
        assert_eq!(w.sleep_for(5_000), None, "within the spin window");
        // Spinning from one event to the next, an event every 2 µs: each
        // pass that ran an event was work, not spinning.
        let mut t = 0;
        for events in 0..2 * SPIN_ALLOWANCE_NS / 2_000 {
            w.spinning(t, events);
            t += 2_000;
        }
        assert_eq!(w.sleep_for(5_000), None, "events ran between the spins");
        // A sleep in between ends a spin: the time across it is not spun.
        w.spinning(t, 7);
        w.not_spinning();
        t += SPIN_ALLOWANCE_NS;
        w.spinning(t, 7);
        assert_eq!(w.sleep_for(5_000), None, "the sleep was not spinning");
        // Spinning with no event for the whole allowance: the rest of the
        // window sleeps in batches, at least two sleeps' cost each.
        let end = t + SPIN_ALLOWANCE_NS;
        while t < end {
            t += 1_000;
            w.spinning(t, 7);
        }
        assert_eq!(w.sleep_for(5_000), Some(40_000), "spent: a batch");
        assert_eq!(w.sleep_for(60_000), Some(60_000), "up to the deadline");
        assert_eq!(w.sleep_for(0), None, "due now: run it");
        assert_eq!(w.spun_total_ns, SPIN_ALLOWANCE_NS);
        // The next window has its allowance again.
        w.budget(0.3, 0.3);
        assert_eq!(w.sleep_for(5_000), None, "a new window: spin");
        // A pass that took 5 ms was held off its CPU, not spinning: it
        // counts as one long pass at most.
        w.spinning(t, 7);
        w.spinning(t + 5_000_000, 7);
        assert_eq!(w.spun_total_ns, SPIN_ALLOWANCE_NS + SPIN_PASS_MAX_NS);
        assert_eq!(w.sleep_for(5_000), None, "the allowance is not spent");
        // run.spin = 0 sleeps up to each deadline, allowance or not.
        let mut z = Wakeups::new(0, 20_000);
        z.spinning(0, 0);
        z.spinning(10_000, 0);
        assert_eq!(z.sleep_for(2_000), Some(2_000));
        assert_eq!(z.spun_total_ns, 0, "and never counts as spinning");
    }

    #[test]
    fn a_sleep_costs_something() {
        let c = sleep_cost_ns();
        assert!(c > 0, "a timed sleep's CPU time: {c} ns");
    }

    #[test]
    fn a_busy_thread_spins_less_and_gets_its_spin_back_when_it_is_not() {
        let mut w = Wakeups::new(200_000, 0);
        for _ in 0..32 {
            w.record(60_000);
        }
        assert_eq!(w.spin_ns(), 120_000);
        w.budget(0.6, 0.6);
        assert_eq!(w.spin_ns(), 120_000, "between the marks: unchanged");
        w.budget(0.95, 0.6);
        assert_eq!(w.spin_ns(), 100_000, "busy: half of run.spin");
        for _ in 0..20 {
            w.budget(0.8, 0.6);
        }
        assert_eq!(w.spin_ns(), 0, "busy for long: no spin at all");
        w.budget(0.2, 0.6);
        assert_eq!(w.spin_ns(), MIN_SPIN_NS);
        for _ in 0..10 {
            w.budget(0.2, 0.6);
        }
        assert_eq!(w.spin_ns(), 120_000, "idle again: as the wake-ups need");
    }
}
