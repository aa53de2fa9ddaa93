//! Null-message synchronisation (Chandy–Misra–Bryant) of partitions on
//! threads: the other conservative method, beside the windowed rounds of
//! the parent module, so that the two can be measured on one network
//! (`netloop bench speed --sync windowed,null`).
//!
//! **The clocks.** For every pair of partitions (q, p) with a link cut
//! from q to p, q keeps a *clock* for p: no frame from q will reach p
//! before it. q may still run an event at the earliest of its next pending
//! event and the earliest a frame can still reach it (the least of its own
//! incoming clocks); a frame sent then reaches p no sooner than the least
//! delay of q's links to p later. That sum is q's clock for p (its null
//! message, carried with the frames). Partition p runs every event before
//! the least of its incoming clocks, hands the frames it sent to their
//! partitions, moves its own clocks on, and waits only when none of its
//! incoming clocks has moved. Unlike the windowed rounds, there is no
//! global meeting: a partition waits only for the partitions that send to
//! it, and each pair's lookahead is the least delay of the links between
//! those two, not of every link cut. What it gives up: where no events are
//! pending, clocks climb one lookahead per exchange where a round jumps to
//! the earliest event anywhere.
//!
//! **Ends and samples.** A run is a sequence of *segments*, each ending at
//! a moment that every partition must reach together: a sample of the
//! time series, or the end of the run. A partition done with a segment
//! (nothing more for it to run before the segment's end, and nothing more
//! can reach it) sets its clocks to "no more" and waits for the others;
//! then every frame sent before the end is on its receiver's wire, as at
//! the end of a round. A stop (Ctrl-C, a failed write) is agreed: each
//! partition stops running events, says how far it ran, and the segment
//! ends at the furthest of these, which the others run up to: every
//! partition stands at one moment, as a windowed run stops at the end of a
//! round.
//!
//! **Results.** Events run in the order of the parent module's runs (ties
//! by source and the source's own order), whatever order the frames from
//! different partitions arrive in: a link direction's frames come from one
//! partition, in the order it sent them. So the results equal one
//! partition's, byte for byte, as with rounds.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use netloop_core::SimTime;

use super::{
    endpoint_ids, least_delay, run_events_to, Cut, PartitionEnd, PartitionStats, Sampling,
    SeriesState, Shared, ThreadExchange,
};
use crate::build::Simulation;
use crate::spec::NetworkSpec;

/// A clock meaning "nothing more this segment".
const NO_MORE: u64 = u64::MAX;

/// What the partitions of a null-message run share, beside [`Shared`].
pub(super) struct Clocks {
    parts: usize,
    /// `clock[q * parts + p]`: no frame from q reaches p before this (ns).
    clock: Vec<AtomicU64>,
    /// `lookahead[q * parts + p]`: the least delay of the links cut from q
    /// to p (ns); `None` where q sends nothing to p.
    lookahead: Vec<Option<u64>>,
    /// Each partition's own sleep, for when its clocks stand still.
    wakers: Vec<Waker>,
    /// Whether a waiter may spin (a core for each partition).
    spin: bool,
    /// Partitions done with a segment, counted over the whole run: segment
    /// k is over for all when this reaches `parts * (k + 1)`.
    finished: AtomicUsize,
    /// Partitions that have stopped for an agreed stop.
    halted: AtomicUsize,
    /// Each partition's events run: all before this (ns), for a stop.
    ran_below: Vec<AtomicU64>,
}

/// A partition's sleep: set `sleeping`, look once more, then wait; a
/// partition that moves a clock of it looks at `sleeping` after the move.
struct Waker {
    sleeping: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

impl Waker {
    fn new() -> Self {
        Waker {
            sleeping: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        }
    }

    fn notify(&self) {
        // SeqCst with the sleeper's store of `sleeping` and its last look:
        // either it sees the new clock, or it is asleep (or about to be,
        // under the lock taken here) and is woken.
        if self.sleeping.load(Ordering::SeqCst) {
            let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.wake.notify_all();
        }
    }
}

/// Spins (of a few nanoseconds each) before a waiter yields, and yields
/// before it sleeps (as [`super::SpinBarrier`] does, for the same reason:
/// waking a sleeping thread costs tens of microseconds on this VM).
const SPINS: u32 = 20_000;
const YIELDS: u32 = 50;
/// The longest a waiter sleeps before it looks again: the flags that end
/// a wait from outside the clocks (a stop, a failed partition) do not wake
/// sleepers, so they are seen within this.
const NAP: Duration = Duration::from_millis(1);

impl Clocks {
    /// The clocks of a run of `spec` cut by `cut`, at the start.
    pub(super) fn new(spec: &NetworkSpec, cut: &Cut) -> Self {
        let parts = cut.parts as usize;
        let ends = endpoint_ids(spec);
        let mut lookahead = vec![None::<u64>; parts * parts];
        for &li in &cut.cut_links {
            let (a, b) = ends[li];
            let (pa, pb) = (cut.part_of[a] as usize, cut.part_of[b] as usize);
            let least = least_delay(spec, li).as_nanos();
            for (q, p) in [(pa, pb), (pb, pa)] {
                let l = &mut lookahead[q * parts + p];
                *l = Some(l.map_or(least, |x: u64| x.min(least)));
            }
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let clocks = Clocks {
            parts,
            clock: (0..parts * parts)
                .map(|_| AtomicU64::new(NO_MORE))
                .collect(),
            lookahead,
            wakers: (0..parts).map(|_| Waker::new()).collect(),
            spin: parts <= cores,
            finished: AtomicUsize::new(0),
            halted: AtomicUsize::new(0),
            ran_below: (0..parts).map(|_| AtomicU64::new(0)).collect(),
        };
        for q in 0..parts {
            clocks.reset(q, 0);
        }
        clocks
    }

    /// Sets q's clocks for a segment whose events are all at or after
    /// `from` (ns).
    fn reset(&self, q: usize, from: u64) {
        for p in 0..self.parts {
            let at = self.lookahead[q * self.parts + p].map_or(NO_MORE, |l| from.saturating_add(l));
            self.clock[q * self.parts + p].store(at, Ordering::SeqCst);
        }
    }

    /// The least of p's incoming clocks.
    fn incoming(&self, p: usize) -> u64 {
        (0..self.parts)
            .map(|q| self.clock[q * self.parts + p].load(Ordering::Acquire))
            .min()
            .unwrap_or(NO_MORE)
    }

    /// Moves q's clocks on: anything q still runs is at or after `lower`
    /// (ns; `NO_MORE`: nothing this segment). Returns the clocks moved.
    fn advance(&self, q: usize, lower: u64) -> u64 {
        let mut moved = 0;
        for p in 0..self.parts {
            let Some(l) = self.lookahead[q * self.parts + p] else {
                continue;
            };
            let at = if lower == NO_MORE {
                NO_MORE
            } else {
                lower.saturating_add(l)
            };
            let c = &self.clock[q * self.parts + p];
            // Only q writes its clocks; they never go back within a segment.
            if at > c.load(Ordering::Relaxed) {
                c.store(at, Ordering::SeqCst);
                self.wakers[p].notify();
                moved += 1;
            }
        }
        moved
    }

    /// Waits until `ready()` holds, or the run is broken, or (with
    /// `watch_stop`: a partition yet to take part in the stop) stopped.
    fn wait(&self, me: usize, shared: &Shared, watch_stop: bool, ready: impl Fn() -> bool) {
        let done =
            || ready() || (watch_stop && shared.stop.load(Ordering::SeqCst)) || broken(shared);
        if self.spin {
            for _ in 0..SPINS {
                if done() {
                    return;
                }
                std::hint::spin_loop();
            }
        }
        for _ in 0..YIELDS {
            if done() {
                return;
            }
            std::thread::yield_now();
        }
        let w = &self.wakers[me];
        let mut guard = w.lock.lock().unwrap_or_else(|e| e.into_inner());
        w.sleeping.store(true, Ordering::SeqCst);
        while !done() {
            guard = w
                .wake
                .wait_timeout(guard, NAP)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        w.sleeping.store(false, Ordering::SeqCst);
    }
}

fn broken(shared: &Shared) -> bool {
    shared.barrier.broken.load(Ordering::SeqCst)
}

/// How a segment ended for a partition.
enum Ended {
    /// At its end, every partition with it.
    Done,
    /// Stopped at this moment (agreed by all).
    Stopped(SimTime),
    /// A partition failed.
    Broken,
}

/// Where a partition stands within a run.
struct Me<'a> {
    me: usize,
    shared: &'a Shared,
    clocks: &'a Clocks,
    stats: PartitionStats,
    /// Steps in which it ran events (a windowed run's rounds).
    steps: u64,
    /// Whether it has taken part in the run's stop.
    halted: bool,
    /// Segments finished.
    segments: usize,
}

impl Me<'_> {
    /// Runs the segment ending at `end` (events due then run).
    fn segment(
        &mut self,
        sim: &mut Simulation,
        mut end: SimTime,
        progress: &mut Option<&mut (dyn FnMut(SimTime) -> bool + Send)>,
    ) -> Ended {
        let (me, shared, clocks) = (self.me, self.shared, self.clocks);
        let mut stopped_at = None;
        let mut done_here = false;
        loop {
            if broken(shared) {
                return Ended::Broken;
            }
            if shared.stop.load(Ordering::SeqCst) && !self.halted {
                match self.halt() {
                    Some(at) => {
                        end = end.min(at);
                        stopped_at = Some(end);
                    }
                    None => return Ended::Broken,
                }
            }
            if done_here {
                // Wait for the others to be done too (or to stop).
                let target = clocks.parts * self.segments;
                let t = Instant::now();
                clocks.wait(me, shared, !self.halted, || {
                    clocks.finished.load(Ordering::SeqCst) >= target
                });
                self.stats.blocked_seconds += t.elapsed().as_secs_f64();
                if clocks.finished.load(Ordering::SeqCst) >= target {
                    return stopped_at.map_or(Ended::Done, Ended::Stopped);
                }
                continue;
            }
            let safe = clocks.incoming(me);
            // Frames pushed before their sender moved the clocks just read.
            let incoming =
                std::mem::take(&mut *shared.inbox[me].lock().unwrap_or_else(|e| e.into_inner()));
            self.stats.frames_in += incoming.len() as u64;
            for c in incoming {
                sim.net.receive(&mut sim.queue, c);
            }
            // Events before `safe` are safe to run; those due at `end` too.
            let limit = safe.saturating_sub(1).min(end.as_nanos());
            let ran = safe > 0 && sim.queue.peek_time().is_some_and(|t| t.as_nanos() <= limit);
            if ran {
                run_events_to(sim, SimTime::from_nanos(limit));
                self.steps += 1;
            }
            if safe > 0 {
                clocks.ran_below[me].fetch_max(limit + 1, Ordering::SeqCst);
            }
            let out = sim.net.all_crossings();
            for (p, frames) in out.iter_mut().enumerate() {
                if !frames.is_empty() {
                    self.stats.frames_out += frames.len() as u64;
                    shared.inbox[p]
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .append(frames);
                }
            }
            let next = sim.queue.peek_time().map_or(NO_MORE, |t| t.as_nanos());
            let lower = next.min(safe);
            if lower > end.as_nanos() {
                // Nothing more to run before the end, and nothing more can
                // reach it before then: done with the segment once every
                // frame sent to it has been taken in.
                *self.stats.null_messages.get_or_insert(0) += clocks.advance(me, NO_MORE);
                if safe == NO_MORE {
                    let last = std::mem::take(
                        &mut *shared.inbox[me].lock().unwrap_or_else(|e| e.into_inner()),
                    );
                    self.stats.frames_in += last.len() as u64;
                    for c in last {
                        sim.net.receive(&mut sim.queue, c);
                    }
                    done_here = true;
                    self.segments += 1;
                    clocks.finished.fetch_add(1, Ordering::SeqCst);
                    continue;
                }
            } else {
                *self.stats.null_messages.get_or_insert(0) += clocks.advance(me, lower);
            }
            if ran && me == 0 {
                if let Some(report) = progress.as_deref_mut() {
                    if !report(sim.queue.now()) {
                        shared.stop.store(true, Ordering::SeqCst);
                    }
                }
            }
            if !ran {
                let t = Instant::now();
                clocks.wait(me, shared, !self.halted, || clocks.incoming(me) != safe);
                self.stats.blocked_seconds += t.elapsed().as_secs_f64();
            }
        }
    }

    /// Takes part in the run's stop: stops running events, says how far it
    /// ran, and waits for the others. The moment every partition then runs
    /// to (the furthest any ran), or `None` if a partition failed.
    fn halt(&mut self) -> Option<SimTime> {
        let clocks = self.clocks;
        self.halted = true;
        clocks.halted.fetch_add(1, Ordering::SeqCst);
        let t = Instant::now();
        let all = || clocks.halted.load(Ordering::SeqCst) == clocks.parts;
        while !all() {
            if broken(self.shared) {
                return None;
            }
            clocks.wait(self.me, self.shared, false, all);
        }
        self.stats.blocked_seconds += t.elapsed().as_secs_f64();
        // Nobody runs events between halting and reading this: it is the
        // same for all.
        let below = clocks
            .ran_below
            .iter()
            .map(|r| r.load(Ordering::SeqCst))
            .max()
            .unwrap_or(0);
        Some(SimTime::from_nanos(below.saturating_sub(1)))
    }
}

/// Runs partition `me` of `sim` cut by `cut`, as fast as possible up to
/// `until`, in step with the others by null messages (`clocks`) — the
/// counterpart of [`super::run_partition`]; partition 0 calls `progress`
/// after each step in which it ran events (returning `false` stops the
/// run, for all, at one moment).
#[allow(clippy::too_many_arguments)]
pub(super) fn run_partition(
    mut sim: Simulation,
    cut: &Cut,
    me: u32,
    until: SimTime,
    shared: &Shared,
    clocks: &Clocks,
    mut progress: Option<&mut (dyn FnMut(SimTime) -> bool + Send)>,
    mut sampling: Option<Sampling<'_>>,
) -> PartitionEnd {
    assert!(
        until != SimTime::MAX,
        "a null-message run needs an end: clocks would climb for ever once nothing is left"
    );
    sim.net.make_partition(&cut.part_of, me, cut.parts);
    {
        let net = &sim.net;
        sim.queue.retain(|ev| net.runs(&cut.part_of, me, ev));
    }
    let mut p = Me {
        me: me as usize,
        shared,
        clocks,
        stats: PartitionStats {
            nodes: cut.part_of.iter().filter(|&&q| q == me).count(),
            null_messages: Some(0),
            ..PartitionStats::default()
        },
        steps: 0,
        halted: false,
        segments: 0,
    };
    let start_events = sim.queue.events_processed();
    let mut series = SeriesState::default();
    let mut x = ThreadExchange {
        shared,
        me: me as usize,
    };
    // Every partition has built its copy: the run proper begins.
    let met = shared.barrier.wait();
    let ready = Some(Instant::now());
    let mut broke = !met;
    let mut stop_at = None;
    let mut stop_local = false;
    while !broke {
        let sample = sampling.is_some() && series.next <= until;
        let end = if sample { series.next } else { until };
        match p.segment(&mut sim, end, &mut progress) {
            Ended::Broken => broke = true,
            Ended::Stopped(at) => stop_at = Some(at),
            Ended::Done => {}
        }
        if broke || stop_at.is_some() || !sample {
            break;
        }
        if let Some(smp) = sampling.as_mut() {
            series.take(smp, &sim, cut, me, &mut x, end, &mut stop_local);
            if stop_local {
                shared.stop.store(true, Ordering::SeqCst);
            }
        }
        // The next segment: every event left is after `end`. Clocks are
        // set again only once every partition is done reading the old
        // ones, and read only once all are set.
        if !shared.barrier.wait() {
            broke = true;
            break;
        }
        clocks.reset(me as usize, end.as_nanos() + 1);
        if !shared.barrier.wait() {
            broke = true;
        } else if shared.stop.load(Ordering::SeqCst) {
            // A failed write of the sample stops every partition here, at
            // the sample's moment.
            stop_at = Some(end);
        }
    }
    // Every partition stands at one moment: the end, or where the run
    // stopped (so that what is in flight between them is counted at one
    // moment, as at the end of a windowed round).
    let at = stop_at.unwrap_or(until);
    if !broke && sim.queue.now() < at {
        sim.queue.advance_to(at);
    }
    // The moment the run stopped, if off the grid (as a single run's last
    // sample).
    if let (Some(smp), false) = (sampling.as_mut(), broke) {
        let now = sim.queue.now();
        if series.last.is_none_or(|t| t < now) {
            series.take(smp, &sim, cut, me, &mut x, now, &mut stop_local);
        }
    }
    p.stats.events = sim.queue.events_processed() - start_events;
    PartitionEnd {
        sim,
        stats: p.stats,
        rounds: p.steps,
        ready,
        series_error: series.error,
    }
}
