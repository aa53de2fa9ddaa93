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
//! round. Partitions that no link joins keep within the run's largest
//! lookahead of each other all the same (see `Clocks::new`), so that the
//! furthest any partition reached is near all. A stop asked for as the last
//! partition finishes a segment is made at the segment's end: "all done"
//! and "stop" are one word, so every partition decides alike.
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
    endpoint_ids, enter_partition, least_delay, may_spin, run_events_to, Cut, PartitionEnd,
    Sampling, SeriesState, Shared, ThreadExchange, SPINS, UNLINKED_WINDOW, YIELDS,
};
use crate::build::Simulation;
use crate::spec::NetworkSpec;

/// A clock meaning "nothing more this segment".
const NO_MORE: u64 = u64::MAX;

/// In [`Clocks::finished`]: a stop was asked for.
const STOP_BIT: u64 = 1 << 63;

/// The longest a waiter sleeps before it looks again: a failed partition
/// (its thread gone) wakes no sleeper, so that is seen within this.
const NAP: Duration = Duration::from_millis(1);

/// How often, at least, partition 0 calls the run's `progress` (which
/// looks for Ctrl-C), also while it has nothing to run.
const REPORT_EVERY: Duration = Duration::from_millis(10);

/// What the partitions of a null-message run share, beside [`Shared`].
pub(super) struct Clocks {
    parts: usize,
    /// `clock[q * parts + p]`: no frame from q reaches p before this (ns).
    clock: Vec<AtomicU64>,
    /// `lookahead[q * parts + p]`: the least delay of the links cut from q
    /// to p (ns), or for partitions no link joins, a bound of how far one
    /// may run ahead of the other; `None` from a partition to itself.
    lookahead: Vec<Option<u64>>,
    /// Each partition's own sleep, for when its clocks stand still.
    wakers: Vec<Waker>,
    /// Whether a waiter may spin (a core for each partition).
    spin: bool,
    /// Partitions done with a segment, counted over the whole run (segment
    /// k, from 1, is over for all when this reaches `parts * k`), and
    /// [`STOP_BIT`]: a stop was asked for. One word, so that every
    /// partition sees the same of "all done" and "stop" (see
    /// [`Clocks::ask_stop`]).
    finished: AtomicU64,
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
        // SeqCst, as the sleeper's store of `sleeping` and every load of
        // its last look (`Clocks::incoming`, the counters, the stop flag):
        // either it sees what changed, or it is asleep (or about to be,
        // under the lock taken here) and is woken.
        if self.sleeping.load(Ordering::SeqCst) {
            let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.wake.notify_all();
        }
    }
}

impl Clocks {
    /// The clocks of a run of `spec` cut by `cut`, at the start.
    ///
    /// Partitions that no link joins still get a clock for each other, with
    /// the largest lookahead of the run (at least [`UNLINKED_WINDOW`], as
    /// a windowed round where no link is cut):
    /// no frame passes between them, but without it a partition that
    /// hears from no one (one with no node, or a part of the network of
    /// its own) would run to the end at once, and a stop, agreed at the
    /// furthest moment any partition reached, would be no stop at all.
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
        let unlinked = lookahead
            .iter()
            .flatten()
            .copied()
            .max()
            .unwrap_or(0)
            .max(UNLINKED_WINDOW.as_nanos());
        for q in 0..parts {
            for p in (0..parts).filter(|&p| p != q) {
                lookahead[q * parts + p].get_or_insert(unlinked);
            }
        }
        let clocks = Clocks {
            parts,
            clock: (0..parts * parts)
                .map(|_| AtomicU64::new(NO_MORE))
                .collect(),
            lookahead,
            wakers: (0..parts).map(|_| Waker::new()).collect(),
            spin: may_spin(parts),
            finished: AtomicU64::new(0),
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
            .map(|q| self.clock[q * self.parts + p].load(Ordering::SeqCst))
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

    /// Asks every partition to stop, unless segment `segment` (from 1) is
    /// over for all already: then the stop would come to some as they
    /// leave it and to others not at all. Whether it was asked.
    fn ask_stop(&self, segment: usize) -> bool {
        let target = (self.parts * segment) as u64;
        let mut now = self.finished.load(Ordering::SeqCst);
        loop {
            if now & STOP_BIT != 0 {
                return true;
            }
            if now >= target {
                return false;
            }
            match self.finished.compare_exchange(
                now,
                now | STOP_BIT,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return true,
                Err(v) => now = v,
            }
        }
    }

    /// Partitions done with segments so far, and whether a stop was asked.
    fn finished(&self) -> (usize, bool) {
        let w = self.finished.load(Ordering::SeqCst);
        ((w & !STOP_BIT) as usize, w & STOP_BIT != 0)
    }

    /// Wakes every partition that sleeps (a counter or the stop flag
    /// changed).
    fn wake_all(&self) {
        for w in &self.wakers {
            w.notify();
        }
    }

    /// Waits until `ready()` holds, or the run is broken, or (with
    /// `watch_stop`: a partition yet to take part in the stop) stopped, or
    /// `deadline` passes.
    fn wait(
        &self,
        me: usize,
        shared: &Shared,
        watch_stop: bool,
        deadline: Option<Instant>,
        ready: impl Fn() -> bool,
    ) {
        let woken =
            || ready() || (watch_stop && shared.stop.load(Ordering::SeqCst)) || broken(shared);
        let done = || woken() || deadline.is_some_and(|d| Instant::now() >= d);
        if self.spin {
            // Spinning is short (tens of microseconds): no clock reads.
            for _ in 0..SPINS {
                if woken() {
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
            let nap = deadline.map_or(NAP, |d| {
                d.saturating_duration_since(Instant::now()).min(NAP)
            });
            guard = w
                .wake
                .wait_timeout(guard, nap)
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

/// The run's `progress`: partition 0's, `None` in the others.
type Progress<'p> = Option<&'p mut (dyn FnMut(SimTime) -> bool + Send)>;

/// Where a partition stands within a run.
struct Me<'a, 'p> {
    me: usize,
    shared: &'a Shared,
    clocks: &'a Clocks,
    progress: Progress<'p>,
    /// When `progress` was last called.
    reported: Instant,
    /// Steps in which it ran events (a windowed run's rounds).
    steps: u64,
    /// Clocks moved for other partitions (its null messages).
    null_messages: u64,
    /// Seconds waited for the others.
    blocked_seconds: f64,
    /// Frames sent to and received from other partitions.
    frames_out: u64,
    frames_in: u64,
    /// Whether it has taken part in the run's stop.
    halted: bool,
    /// The segment it is in (from 1).
    segment: usize,
    /// Partition 0: a stop asked for too late for its segment, made at the
    /// segment's end.
    stop_later: bool,
}

impl Me<'_, '_> {
    /// Until when partition 0 may wait before it calls `progress` again.
    fn report_by(&self) -> Option<Instant> {
        self.progress.as_ref().map(|_| self.reported + REPORT_EVERY)
    }

    /// Partition 0 calls `progress` after a step that ran events, and at
    /// least every [`REPORT_EVERY`]; `false` from it stops the run.
    fn report(&mut self, sim: &Simulation, ran: bool) {
        let Some(progress) = self.progress.as_deref_mut() else {
            return;
        };
        if !ran && self.reported.elapsed() < REPORT_EVERY {
            return;
        }
        self.reported = Instant::now();
        if !progress(sim.queue.now()) && !self.stop_later {
            if self.clocks.ask_stop(self.segment) {
                self.shared.stop.store(true, Ordering::SeqCst);
                self.clocks.wake_all();
            } else {
                self.stop_later = true;
            }
        }
    }

    /// Whether a stop was asked for and this partition has yet to take
    /// part in it.
    fn to_halt(&self) -> bool {
        !self.halted && (self.shared.stop.load(Ordering::SeqCst) || self.clocks.finished().1)
    }

    /// Takes the frames other partitions sent to this one.
    fn take_in(&mut self, sim: &mut Simulation) {
        let incoming = std::mem::take(
            &mut *self.shared.inbox[self.me]
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        self.frames_in += incoming.len() as u64;
        for c in incoming {
            sim.net.receive(&mut sim.queue, c);
        }
    }

    /// Hands the frames this partition sent to their partitions.
    fn hand_out(&mut self, sim: &mut Simulation) {
        for (p, frames) in sim.net.all_crossings().iter_mut().enumerate() {
            if !frames.is_empty() {
                self.frames_out += frames.len() as u64;
                self.shared.inbox[p]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .append(frames);
            }
        }
    }

    /// Runs the segment ending at `end` (events due then run).
    fn segment(&mut self, sim: &mut Simulation, mut end: SimTime) -> Ended {
        let (me, shared, clocks) = (self.me, self.shared, self.clocks);
        self.segment += 1;
        let target = clocks.parts * self.segment;
        let mut stopped_at = None;
        let mut done_here = false;
        loop {
            if broken(shared) {
                return Ended::Broken;
            }
            if self.to_halt() {
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
                let all = || clocks.finished().0 >= target;
                let t = Instant::now();
                clocks.wait(me, shared, !self.halted, self.report_by(), all);
                self.blocked_seconds += t.elapsed().as_secs_f64();
                let (done, stop) = clocks.finished();
                if done >= target {
                    // A stop asked for before the last partition was done
                    // is seen by all: each takes part before it leaves.
                    if stop && !self.halted {
                        continue;
                    }
                    return stopped_at.map_or(Ended::Done, Ended::Stopped);
                }
                self.report(sim, false);
                continue;
            }
            let safe = clocks.incoming(me);
            // Every frame pushed before its sender moved the clocks just
            // read is in the inbox now; the others arrive at `safe` or later.
            self.take_in(sim);
            // Events before `safe` are safe to run, up to the segment's end.
            let limit = safe.saturating_sub(1).min(end.as_nanos());
            let ran = safe > 0 && sim.queue.peek_time().is_some_and(|t| t.as_nanos() <= limit);
            if ran {
                run_events_to(sim, SimTime::from_nanos(limit));
                self.steps += 1;
            }
            if safe > 0 {
                clocks.ran_below[me].fetch_max(limit + 1, Ordering::SeqCst);
            }
            self.hand_out(sim);
            let next = sim.queue.peek_time().map_or(NO_MORE, |t| t.as_nanos());
            let lower = next.min(safe);
            if lower > end.as_nanos() {
                // Nothing more to run before the end, and nothing more can
                // reach it before then.
                self.null_messages += clocks.advance(me, NO_MORE);
                if safe == NO_MORE {
                    // Every sender said "no more" after handing over its
                    // last frames, which the take above got: done.
                    done_here = true;
                    let was = clocks.finished.fetch_add(1, Ordering::SeqCst);
                    if (was & !STOP_BIT) as usize + 1 == target {
                        clocks.wake_all();
                    }
                    continue;
                }
            } else {
                self.null_messages += clocks.advance(me, lower);
            }
            self.report(sim, ran);
            if !ran {
                let t = Instant::now();
                clocks.wait(me, shared, !self.halted, self.report_by(), || {
                    clocks.incoming(me) != safe
                });
                self.blocked_seconds += t.elapsed().as_secs_f64();
            }
        }
    }

    /// Takes part in the run's stop: stops running events, says how far it
    /// ran, and waits for the others. The moment every partition then runs
    /// to (the furthest any ran), or `None` if a partition failed.
    fn halt(&mut self) -> Option<SimTime> {
        let clocks = self.clocks;
        self.halted = true;
        if clocks.halted.fetch_add(1, Ordering::SeqCst) + 1 == clocks.parts {
            clocks.wake_all();
        }
        let t = Instant::now();
        let all = || clocks.halted.load(Ordering::SeqCst) == clocks.parts;
        while !all() {
            if broken(self.shared) {
                return None;
            }
            clocks.wait(self.me, self.shared, false, None, all);
        }
        self.blocked_seconds += t.elapsed().as_secs_f64();
        // Nobody runs events between halting and reading this (and after,
        // none past it): it is the same for all.
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
    progress: Option<&mut (dyn FnMut(SimTime) -> bool + Send)>,
    mut sampling: Option<Sampling<'_>>,
) -> PartitionEnd {
    assert!(
        until != SimTime::MAX,
        "a null-message run needs an end: clocks would climb for ever once nothing is left"
    );
    let mut stats = enter_partition(&mut sim, cut, me);
    let mut p = Me {
        me: me as usize,
        shared,
        clocks,
        progress,
        reported: Instant::now(),
        steps: 0,
        null_messages: 0,
        blocked_seconds: 0.0,
        frames_out: 0,
        frames_in: 0,
        halted: false,
        segment: 0,
        stop_later: false,
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
        match p.segment(&mut sim, end) {
            Ended::Broken => broke = true,
            Ended::Stopped(at) => stop_at = Some(at),
            Ended::Done => {}
        }
        if broke || stop_at.is_some() || !sample {
            break;
        }
        if let Some(smp) = sampling.as_mut() {
            series.take(smp, &sim, cut, me, &mut x, end, &mut stop_local);
        }
        if stop_local || p.stop_later {
            // A failed write of the sample, or a stop asked for as the
            // segment ended: seen by all after the barriers below.
            shared.stop.store(true, Ordering::SeqCst);
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
            // Every partition stops here, at the sample's moment.
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
    if let (Some(smp), false) = (sampling.as_mut(), broke) {
        series.take_last(smp, &sim, cut, me, &mut x, &mut stop_local);
    }
    stats.events = sim.queue.events_processed() - start_events;
    stats.frames_out = p.frames_out;
    stats.frames_in = p.frames_in;
    stats.blocked_seconds = p.blocked_seconds;
    stats.null_messages = Some(p.null_messages);
    PartitionEnd {
        sim,
        stats,
        rounds: p.steps,
        ready,
        series_error: series.error,
    }
}
