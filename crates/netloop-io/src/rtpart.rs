//! Real time with partitions: a network cut into partitions (threads of
//! one process), each kept to the wall clock by a scheduler of its own, so
//! that a run can use every core of the machine.
//!
//! Partition 0 holds every real host (`Cut::for_realtime`) and runs the
//! scheduler of [`crate::rt`], with its I/O thread; each other partition
//! runs [`run_helper`]: the events that are due, each at its moment,
//! sleeping in `ppoll` on its doorbell until the next one (spinning the
//! last microseconds, as partition 0 does).
//!
//! **Exchange.** A frame sent on a cut link is settled by its sender (its
//! fate, its arrival time: see `Network::receive`) and handed to the
//! receiving partition's inbox, whose doorbell wakes it. A cut link's
//! delay (the lookahead) is the time a frame has to get there: a partition
//! that keeps up hands it over within microseconds of its sending, so it is
//! on the receiver's wire long before it arrives. One that reaches the
//! receiver after its arrival time (its sender was that late) enters at
//! once and is counted (`late_frames_in`, `max_late_in_ns`): the run fell
//! behind, and the report says so.
//!
//! **The end.** Partition 0 decides when the run ends (its duration, its
//! programs, Ctrl-C) and at which simulated time; the others run to that
//! moment and stop, and the frames still in the inboxes are put on their
//! wires, so that the merged results count them as in flight. Results are
//! merged from each partition's share as in an as-fast-as-possible
//! partitioned run (`netloop_model::share`).
//!
//! Captures (`--pcap`): each partition writes its parts of them, merged
//! in one run's order at the end (`pcapparts`), as in a partitioned run as
//! fast as possible.
//!
//! **Questions while the run goes on** (a run driven from Python: see
//! `live::Request`): partition 0 puts an [`Ask`] in another partition's
//! mailbox and rings its doorbell; the partition answers between two
//! events. For a snapshot each other partition gives its share of the
//! results as of its own now and then stands still until partition 0 has
//! read its own share and the frames between partitions (in the inboxes):
//! every frame is then in exactly one place, and the merged conservation
//! holds. Each partition's now is its own (they keep to one wall clock, so
//! they differ by how far each is behind), and the other partitions' events
//! wait while partition 0 reads. A link change is made by every partition
//! in its copy of the network at its own now, as each makes a scheduled
//! one.
//!
//! Not here: MPI ranks in real time.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use std::sync::mpsc;

use hdrhistogram::Histogram;
use netloop_core::{EventQueue, Model, SimTime};
use netloop_model::build::{FlowInfo, Simulation};
use netloop_model::network::{Crossing, Event, Network};
use netloop_model::partition::Cut;
use netloop_model::series::SampleCounts;
use netloop_model::share::Share;
use netloop_model::spec::LinkEventSpec;
use serde::Serialize;

use crate::clock::{self, RtClock};
use crate::notify::Notifier;
use crate::rt::{histogram, Lateness, Partners, Wakeups};
use crate::rtio::{Duty, HeldOff};

/// What one partition of a real-time run did: `realtime.partitions[]` in
/// the results.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PartitionRt {
    /// Nodes it owned.
    pub nodes: usize,
    /// Events it ran.
    pub events: u64,
    /// Whether each of its events ran within the late threshold and every
    /// frame from another partition came before its arrival time.
    pub kept_up: bool,
    /// Its events later than the threshold.
    pub late_events: u64,
    /// How late its events ran (partition 0's: `event_lateness` of the
    /// report).
    pub event_lateness: Lateness,
    /// Frames it sent to other partitions.
    pub frames_out: u64,
    /// Frames it received from other partitions.
    pub frames_in: u64,
    /// Of those, frames that reached it after their arrival time (they
    /// entered then, late).
    pub late_frames_in: u64,
    /// The latest of them, ns after its arrival time.
    pub max_late_in_ns: u64,
    /// Of its late events, those that came while its thread was held off
    /// its CPU (see [`crate::rtio::HeldOff`]).
    pub late_held_off: u64,
    /// Time its thread was held off its CPU, and of it waiting behind
    /// other threads of this machine (ns).
    pub held_off_ns: u64,
    /// See `held_off_ns`.
    pub held_off_queued_ns: u64,
    /// Its thread's share of the wall time.
    pub cpu_share: f64,
    /// Its thread's share of the wall time spent spinning before a deadline
    /// (see `rt::SPIN_ALLOWANCE_NS`).
    pub spin_share: f64,
    /// 10 ms windows in which its thread ran out of the real-time class
    /// (see [`crate::rtio::Duty`]).
    pub demotions: u64,
    /// The simulated time it stood at when the run ended (seconds): the
    /// same for every partition, unless a stop cut one short of it.
    pub end_s: f64,
}

/// A question partition 0 puts to another partition while the run goes on
/// (see the module docs).
pub enum Ask {
    /// Its share of the results as of its now, its figures so far, and the
    /// events its queue has run in all (each scheduled link change left
    /// out: every partition runs them); then it waits until the receiver
    /// of the second is dropped (see the module docs).
    Share(
        mpsc::SyncSender<(Share, PartitionRt, u64)>,
        mpsc::Receiver<()>,
    ),
    /// Change a link now, in its copy of the network.
    ChangeLink(LinkEventSpec),
    /// The counts of a time series' sample, of what it owns, as of its now
    /// ([`SampleCounts`]); it goes on at once.
    Counts(mpsc::SyncSender<Vec<u64>>),
}

/// Per partition, what the exchange counts.
#[derive(Default)]
struct Counters {
    out: AtomicU64,
    r#in: AtomicU64,
    late_in: AtomicU64,
    max_late_in: AtomicU64,
}

/// What the partitions of one real-time run share.
pub struct Exchange {
    inbox: Vec<Mutex<Vec<Crossing>>>,
    /// Set when a partition's inbox has frames (read without the lock).
    mail: Vec<AtomicBool>,
    bell: Vec<Notifier>,
    counters: Vec<Counters>,
    /// The clock, once partition 0 has started it.
    clock: OnceLock<RtClock>,
    /// Set by partition 0 before it reads the clock for the last time:
    /// from then on the others run no event (see [`Exchange::may_run_to`]).
    stopping: AtomicBool,
    /// The simulated time (ns) at which the run ends, once known.
    end: AtomicU64,
    /// Helper partitions ready to start (their heap reserved).
    ready: AtomicUsize,
    /// Partitions that reached the end and handed over what they sent.
    stopped: AtomicUsize,
    /// Set when a partition gave up (an error, a panic): nobody waits for
    /// the others any more.
    abandoned: AtomicBool,
    /// Each partition's questions from partition 0, and whether it has
    /// any (read without the lock).
    asks: Vec<Mutex<Vec<Ask>>>,
    asked: Vec<AtomicBool>,
}

const RUNNING: u64 = u64::MAX;

/// The longest a partition stands still after giving its share for a
/// snapshot (partition 0 lets it go as soon as it has read its own).
const RESUME_WAIT: Duration = Duration::from_secs(5);

impl Exchange {
    /// The exchange of a run of `parts` partitions.
    pub fn new(parts: usize) -> std::io::Result<Exchange> {
        Ok(Exchange {
            inbox: (0..parts).map(|_| Mutex::new(Vec::new())).collect(),
            mail: (0..parts).map(|_| AtomicBool::new(false)).collect(),
            bell: (0..parts)
                .map(|_| Notifier::new())
                .collect::<std::io::Result<_>>()?,
            counters: (0..parts).map(|_| Counters::default()).collect(),
            clock: OnceLock::new(),
            stopping: AtomicBool::new(false),
            end: AtomicU64::new(RUNNING),
            ready: AtomicUsize::new(0),
            stopped: AtomicUsize::new(0),
            abandoned: AtomicBool::new(false),
            asks: (0..parts).map(|_| Mutex::new(Vec::new())).collect(),
            asked: (0..parts).map(|_| AtomicBool::new(false)).collect(),
        })
    }

    /// The number of partitions.
    pub fn parts(&self) -> usize {
        self.inbox.len()
    }

    /// Puts `ask` to partition `to` (not 0), which answers between two of
    /// its events.
    pub fn ask(&self, to: usize, ask: Ask) {
        self.asks[to]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ask);
        self.asked[to].store(true, Ordering::Release);
        self.bell[to].ring();
    }

    /// Whether a partition gave up (an error, a panic).
    pub fn is_abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Acquire)
    }

    /// Adds the frames waiting in the inboxes to `share`, on the wires
    /// they will be put on (each partition stands still meanwhile: see
    /// the module docs).
    pub fn add_crossing(&self, share: &mut Share) {
        for inbox in &self.inbox {
            for c in inbox.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                share.dirs[c.link as usize][usize::from(c.dir)].wire += c.frame.segs();
            }
        }
    }

    /// Takes partition `me`'s questions, if it has any.
    fn questions(&self, me: usize) -> Vec<Ask> {
        if !self.asked[me].swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        std::mem::take(&mut *self.asks[me].lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Hands what partition `me` sent to its receivers.
    pub(crate) fn send(&self, me: usize, net: &mut Network) {
        for (to, out) in net.all_crossings().iter_mut().enumerate() {
            if out.is_empty() || to == me {
                continue;
            }
            self.counters[me]
                .out
                .fetch_add(out.len() as u64, Ordering::Relaxed);
            self.inbox[to]
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .append(out);
            self.mail[to].store(true, Ordering::Release);
            self.bell[to].notify();
        }
    }

    /// Puts the frames sent to partition `me` on their wires; one whose
    /// arrival time has passed enters now, counted late.
    fn take(&self, me: usize, net: &mut Network, queue: &mut EventQueue<Event>) {
        if !self.mail[me].swap(false, Ordering::Acquire) {
            return;
        }
        let frames = std::mem::take(&mut *self.inbox[me].lock().unwrap_or_else(|e| e.into_inner()));
        let c = &self.counters[me];
        c.r#in.fetch_add(frames.len() as u64, Ordering::Relaxed);
        let now = queue.now();
        for mut f in frames {
            // Late: the partition has already reached its time, and may
            // have run events at or after it that the frame would have
            // come before (at the same moment, the order of a single run
            // cannot be told any more).
            // (A crossing's time is at least a lookahead after it was
            // sent, so never 0: a partition that has not started is not
            // counted late.)
            if f.at <= now {
                c.late_in.fetch_add(1, Ordering::Relaxed);
                c.max_late_in
                    .fetch_max((now - f.at).as_nanos(), Ordering::Relaxed);
                f.at = now;
            }
            net.receive(queue, f);
        }
    }

    /// The moment a helper may run its events to: the clock's now, read
    /// before it looks at `stopping` (with a fence between, as partition 0
    /// sets `stopping` and then reads the clock for the end: either the
    /// helper sees the flag, or its reading is not after the end), or
    /// `None` once the run is stopping.
    fn may_run_to(&self, clock: RtClock) -> Option<SimTime> {
        let now = clock.now();
        std::sync::atomic::fence(Ordering::SeqCst);
        (!self.stopping.load(Ordering::Relaxed)).then_some(now)
    }

    /// The end time, once partition 0 has set it.
    fn end(&self) -> Option<SimTime> {
        match self.end.load(Ordering::Acquire) {
            RUNNING => None,
            t => Some(SimTime::from_nanos(t)),
        }
    }

    /// After the end: waits for every partition to stop and hand over what
    /// it sent, then takes what was sent to `me` (in flight at the end).
    fn close(&self, me: usize, net: &mut Network, queue: &mut EventQueue<Event>) {
        self.send(me, net);
        self.stopped.fetch_add(1, Ordering::AcqRel);
        while self.stopped.load(Ordering::Acquire) < self.inbox.len()
            && !self.abandoned.load(Ordering::Acquire)
        {
            std::thread::sleep(Duration::from_micros(50));
        }
        self.take(me, net, queue);
    }

    /// Lets every partition go: the end is now (if not set already), and
    /// nobody waits for anybody.
    fn abandon(&self) {
        self.abandoned.store(true, Ordering::Release);
        self.stopping.store(true, Ordering::SeqCst);
        let _ = self.clock.set(RtClock::with_now_at(SimTime::ZERO));
        let _ = self
            .end
            .compare_exchange(RUNNING, 0, Ordering::AcqRel, Ordering::Acquire);
        for b in &self.bell {
            b.ring();
        }
    }

    /// A guard that, dropped before the run ended as it should (an error,
    /// a panic in its holder), lets the other partitions go
    /// ([`Exchange::abandon`]): they would wait for ever otherwise.
    pub fn abandon_on_drop(&self) -> Abandon<'_> {
        Abandon(self, true)
    }

    /// The exchange's counts for partition `me`, into `p`.
    fn fill(&self, me: usize, p: &mut PartitionRt) {
        let c = &self.counters[me];
        p.frames_out = c.out.load(Ordering::Relaxed);
        p.frames_in = c.r#in.load(Ordering::Relaxed);
        p.late_frames_in = c.late_in.load(Ordering::Relaxed);
        p.max_late_in_ns = c.max_late_in.load(Ordering::Relaxed);
        p.kept_up = p.late_events == 0 && p.late_frames_in == 0;
    }

    /// Partition 0's side, for [`crate::rt::run_realtime`].
    pub fn first(&self) -> First<'_> {
        First(self)
    }

    /// Partition 0's figures (its events and lateness from the
    /// scheduler's report).
    pub fn first_report(
        &self,
        nodes: usize,
        report: &crate::rt::RtReport,
        end: SimTime,
    ) -> PartitionRt {
        let mut p = PartitionRt {
            end_s: end.as_secs_f64(),
            nodes,
            events: report.events,
            late_events: report.late_events,
            late_held_off: report.late_held_off,
            held_off_ns: report.held_off_ns,
            held_off_queued_ns: report.held_off_queued_ns,
            event_lateness: report.event_lateness,
            cpu_share: report.event_cpu_share,
            spin_share: report.spin_share,
            demotions: report.demotions,
            ..PartitionRt::default()
        };
        self.fill(0, &mut p);
        p
    }
}

/// See [`Exchange::abandon_on_drop`].
pub struct Abandon<'a>(&'a Exchange, bool);

impl Abandon<'_> {
    /// The run ended as it should: nothing to do.
    pub fn disarm(mut self) {
        self.1 = false;
    }
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        if self.1 {
            self.0.abandon();
        }
    }
}

/// Partition 0 of a real-time run, as [`crate::rt`] sees the others.
pub struct First<'a>(&'a Exchange);

impl Partners for First<'_> {
    fn stopping(&self) {
        self.0.stopping.store(true, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::SeqCst);
    }
    fn abandoned(&self) -> bool {
        self.0.abandoned.load(Ordering::Acquire)
    }
    fn wait_ready(&self) {
        let x = self.0;
        while x.ready.load(Ordering::Acquire) + 1 < x.inbox.len()
            && !x.abandoned.load(Ordering::Acquire)
        {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    fn started(&self, clock: RtClock) {
        let _ = self.0.clock.set(clock);
    }
    fn bell(&self) -> std::os::fd::BorrowedFd<'_> {
        self.0.bell[0].fd()
    }
    fn exchange(&self, net: &mut Network, queue: &mut EventQueue<Event>) {
        self.0.send(0, net);
        self.0.take(0, net, queue);
    }
    fn prepare_sleep(&self) -> bool {
        self.0.bell[0].prepare_sleep();
        self.0.mail[0].load(Ordering::Acquire)
    }
    fn woke(&self) {
        self.0.bell[0].woke();
    }
    fn finish(&self, net: &mut Network, queue: &mut EventQueue<Event>, at: SimTime) {
        self.0.stopping.store(true, Ordering::SeqCst);
        self.0.end.store(at.as_nanos(), Ordering::Release);
        for b in &self.0.bell[1..] {
            b.ring();
        }
        self.0.close(0, net, queue);
    }
}

/// What a helper partition's thread needs besides its simulation.
pub struct HelperOptions<'a> {
    /// An event later than this (ns) means the partition fell behind.
    pub late_threshold_ns: u64,
    /// Spin this long before a deadline instead of sleeping (ns).
    pub spin_ns: u64,
    /// The SCHED_FIFO priority of the thread, if any.
    pub priority: Option<i32>,
    /// Heap to make resident before the clock starts (bytes).
    pub heap_reserve: usize,
    /// The run's end at the latest (partition 0 may end it sooner).
    pub until: SimTime,
    /// Set (e.g. by a signal handler) to end the run early: a helper far
    /// behind then stops running its backlog.
    pub stop: &'a AtomicBool,
}

/// A helper partition at its end.
pub struct HelperEnd {
    /// Its simulation, run where it owns.
    pub sim: Simulation,
    /// What it did.
    pub report: PartitionRt,
}

/// The moment a partition's share is read at in a snapshot: the clock's
/// `now`, not its last event's time (an idle partition's would be long
/// past: a frame it finished sending then would still count as being sent,
/// while its receiver has it), but not past its next event, which has not
/// run.
pub fn share_time(now: SimTime, queue: &EventQueue<Event>) -> SimTime {
    now.min(queue.peek_time().unwrap_or(SimTime::MAX))
        .max(queue.now())
}

/// Makes `sim` partition `me` of a run cut by `cut`: it keeps the events
/// it runs and sends what crosses the cut to the others.
pub fn make_partition(sim: &mut Simulation, cut: &Cut, me: u32) {
    sim.net.make_partition(&cut.part_of, me, cut.parts);
    let net: &Network = &sim.net;
    sim.queue.retain(|ev| net.runs(&cut.part_of, me, ev));
}

/// Runs partition `me` (not 0) of a real-time run: each event at its
/// moment on partition 0's clock, until partition 0 sets the end.
pub fn run_helper(
    mut sim: Simulation,
    cut: &Cut,
    me: usize,
    x: &Exchange,
    opts: &HelperOptions<'_>,
) -> HelperEnd {
    // First: whatever fails from here lets the others go.
    let guard = x.abandon_on_drop();
    make_partition(&mut sim, cut, me as u32);
    sim.net
        .presize_samples(Some((cut.part_of.as_slice(), me as u32)));
    let old_policy = crate::sys::current_policy();
    let fifo = opts
        .priority
        .filter(|&p| crate::sys::set_fifo_priority(p).is_ok());
    crate::memory::reserve(opts.heap_reserve);
    // As partition 0's thread: sleeps end when asked, not up to 50 µs later.
    clock::set_timer_slack_ns(1);
    let sleep_cost_ns = crate::rt::sleep_cost_ns();
    // Each event's lateness is read from the counter (see `FastClock`),
    // its rate measured (a 2 ms spin) before this partition says it is
    // ready: partition 0 starts the clock once every partition is.
    let mut fast = clock::FastClock::calibrated();
    x.ready.fetch_add(1, Ordering::AcqRel);
    let mut lateness = histogram();
    let mut late_events = 0u64;
    let mut duty = Duty::new(fifo);
    // Partition 0 starts the clock once its scheduler is ready.
    let clock = loop {
        if let Some(c) = x.clock.get() {
            break *c;
        }
        std::thread::sleep(Duration::from_micros(100));
    };
    let (cpu0, events0) = (crate::rt::thread_cpu_ns(), sim.queue.events_processed());
    let wall0 = clock::mono_ns();
    let fds = [crate::sys::pollfd_in(x.bell[me].fd())];
    let nodes = cut.part_of.iter().filter(|&&p| p as usize == me).count();
    let net = &mut sim.net;
    let queue = &mut sim.queue;
    let flows: &[FlowInfo] = &sim.flows;
    let mut held = HeldOff::default();
    let mut run_to = |limit: SimTime,
                      net: &mut Network,
                      queue: &mut EventQueue<Event>,
                      lateness: &mut Histogram<u64>,
                      late_events: &mut u64,
                      held: &mut HeldOff| {
        let mut ran = 0u32;
        let hints = net.wants_hints();
        while let Some(t) = queue.peek_time() {
            if t > limit {
                break;
            }
            // A backlog must not keep a Ctrl-C waiting (as in `rt`); the
            // clock's anchor is taken with the first event due and again
            // every 4096 (as in `rt`).
            if ran.is_multiple_of(4096) {
                if ran > 0 && opts.stop.load(Ordering::Relaxed) {
                    return false;
                }
                fast.anchor();
            }
            ran = ran.wrapping_add(1);
            let (t, ev) = queue.pop().expect("peeked");
            netloop_core::sched::hint_next(&*net, queue, hints);
            let late = fast.now_ns().saturating_sub(clock.mono_of(t));
            lateness.saturating_record(late.max(1));
            if late > opts.late_threshold_ns {
                *late_events += 1;
                held.late(late);
            }
            net.handle(t, ev, queue);
        }
        true
    };
    // This partition's figures so far (a snapshot's, and at the end),
    // `wall` ns after the clock started.
    let figures = |queue: &EventQueue<Event>,
                   wall: u64,
                   late_events: u64,
                   held: &HeldOff,
                   lateness: &Histogram<u64>,
                   spun_ns: u64,
                   demotions: u64| {
        let mut p = PartitionRt {
            nodes,
            events: queue.events_processed() - events0,
            late_events,
            late_held_off: held.late_events,
            held_off_ns: held.total_ns,
            held_off_queued_ns: held.queued_ns,
            event_lateness: Lateness::of(lateness),
            cpu_share: (crate::rt::thread_cpu_ns() - cpu0) as f64 / wall as f64,
            spin_share: spun_ns as f64 / wall as f64,
            demotions,
            end_s: queue.now().as_secs_f64(),
            ..PartitionRt::default()
        };
        x.fill(me, &mut p);
        p
    };
    let mut wake = Wakeups::new(opts.spin_ns, sleep_cost_ns);
    let end = loop {
        if duty.check() {
            held.close_window(&duty);
            wake.budget(duty.share, duty.long_share);
        }
        if let Some(end) = x.end() {
            break end;
        }
        x.take(me, net, queue);
        for ask in x.questions(me) {
            // Answering (and waiting to be resumed) is not spinning.
            wake.not_spinning();
            match ask {
                Ask::Share(reply, resume) => {
                    let share = Share::of(net, flows, share_time(clock.now(), queue), |n| {
                        cut.part_of[n] as usize == me
                    });
                    let p = figures(
                        queue,
                        clock::mono_ns().saturating_sub(wall0).max(1),
                        late_events,
                        &held,
                        &lateness,
                        wake.spun_total_ns,
                        duty.demotions,
                    );
                    let events = queue.events_processed() - net.link_events();
                    // Partition 0 may have given up waiting: then the
                    // resume channel is gone too.
                    if reply.send((share, p, events)).is_ok() {
                        // Waiting for partition 0 to take every share is
                        // not being held off the CPU.
                        let blocking = HeldOff::blocking(&duty);
                        let _ = resume.recv_timeout(RESUME_WAIT);
                        blocking.end(&duty, &mut held);
                    }
                }
                Ask::ChangeLink(ev) => {
                    if let Some(link) = net.link_id(&ev.link) {
                        net.change_link(link, ev.direction, &ev.action);
                    }
                }
                Ask::Counts(reply) => {
                    let at = share_time(clock.now(), queue);
                    let c = SampleCounts::of(net, flows, at, |n| cut.part_of[n] as usize == me);
                    // Partition 0 may have given up waiting.
                    let _ = reply.send(c.0);
                }
            }
        }
        if let Some(now) = x.may_run_to(clock) {
            let _ = run_to(
                now.min(opts.until),
                net,
                queue,
                &mut lateness,
                &mut late_events,
                &mut held,
            );
        }
        x.send(me, net);
        let deadline = queue.peek_time().unwrap_or(SimTime::MAX);
        let mono = clock::mono_ns();
        let remaining = clock.mono_of(deadline).saturating_sub(mono);
        if let Some(sleep) = wake.sleep_for(remaining) {
            x.bell[me].prepare_sleep();
            if !x.mail[me].load(Ordering::Acquire)
                && !x.asked[me].load(Ordering::Acquire)
                && x.end().is_none()
            {
                let mut f = fds;
                let sleep = sleep.min(100_000_000);
                let spin_ns = wake.spin_ns();
                let target = mono + sleep;
                let asleep = clock::mono_ns();
                let polled = crate::sys::ppoll_raw(&mut f, Duration::from_nanos(sleep));
                held.slept(clock::mono_ns().saturating_sub(asleep), sleep, spin_ns);
                if let Ok(0) = polled {
                    // Woken by the clock: how late, to size the spin window.
                    wake.record(clock::mono_ns().saturating_sub(target));
                }
            }
            x.bell[me].woke();
            wake.not_spinning();
        } else {
            wake.spinning(mono, queue.events_processed());
            std::hint::spin_loop();
        }
    };
    // Questions put from now on find nobody: dropping them lets partition 0
    // know at once.
    drop(x.questions(me));
    // Frames sent before the end must be on the wires before the last
    // events run.
    x.take(me, net, queue);
    // Cut short by a stop, it stays at its last event (events due before
    // the end are still queued: the clock must not pass them).
    if run_to(end, net, queue, &mut lateness, &mut late_events, &mut held) && queue.now() < end {
        queue.advance_to(end);
    }
    duty.close();
    held.close_window(&duty);
    x.close(me, net, queue);
    guard.disarm();
    let wall = clock::mono_ns().saturating_sub(wall0).max(1);
    if fifo.is_some() {
        crate::sys::restore_policy(old_policy);
    }
    let report = figures(
        queue,
        wall,
        late_events,
        &held,
        &lateness,
        wake.spun_total_ns,
        duty.demotions,
    );
    HelperEnd { sim, report }
}
