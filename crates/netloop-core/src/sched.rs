//! Schedulers: what decides *when* the next event runs.
//!
//! A simulation implements [`Model`]; a scheduler pops events from an
//! [`EventQueue`] and hands them to it. The as-fast-as-possible scheduler here
//! runs them back to back. The real-time scheduler (in the I/O layer, because it
//! reads the wall clock) drives the same trait and differs only in waiting for
//! each event's wall-clock moment and injecting packets from real interfaces
//! between events. The model never knows which one is driving it.

use crate::queue::EventQueue;
use crate::time::SimTime;

/// A discrete-event model: a state machine driven by timed events.
pub trait Model {
    /// The event type this model schedules for itself.
    type Event;
    /// Handles one event at time `now`; may schedule more on `queue`.
    fn handle(&mut self, now: SimTime, event: Self::Event, queue: &mut EventQueue<Self::Event>);

    /// A hint that `event` is likely the next to run: a model whose state is
    /// larger than the caches starts loading what that event will touch
    /// (see [`prefetch`]) while the current one runs. Must not change
    /// anything; the default does nothing.
    fn prefetch(&self, _event: &Self::Event) {}

    /// Whether [`Model::prefetch`] is worth calling at all: a model whose
    /// state stays in the caches says no, and the loops then neither look
    /// at the next event nor call it. The default says yes.
    fn wants_hints(&self) -> bool {
        true
    }
}

/// Hints `model` at the next event of `queue` ([`Model::prefetch`]) when
/// `hints`: the model's [`Model::wants_hints`], asked once per loop rather
/// than once per event.
#[inline]
pub fn hint_next<M: Model>(model: &M, queue: &EventQueue<M::Event>, hints: bool) {
    if hints {
        if let Some(next) = queue.peek_event() {
            model.prefetch(next);
        }
    }
}

/// Asks the CPU to start loading the cache lines of `*r` (up to
/// `max_lines` of them): a hint, with no effect on what the program
/// computes.
#[inline]
#[allow(unsafe_code)] // a prefetch: see SAFETY below (this crate's only unsafe calls are prefetches)
pub fn prefetch<T>(r: &T, max_lines: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = (r as *const T).cast::<i8>();
        let lines = std::mem::size_of::<T>().div_ceil(64).min(max_lines);
        for i in 0..lines {
            // SAFETY: a prefetch never faults or reads into the program:
            // the address (wrapping_add: within or just past `*r`) is
            // only a hint to the cache.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(i * 64)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (r, max_lines);
}

/// Asks the CPU to start loading the cache lines that hold the `bytes`
/// bytes from `addr`, whatever is there (an address kept only to be
/// loaded, never read through; 0: none).
#[inline]
#[allow(unsafe_code)] // a prefetch: see SAFETY below
pub fn prefetch_addr_span(addr: usize, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        if addr == 0 || bytes == 0 {
            return;
        }
        let (skew, lines) = span_lines(addr, bytes);
        for i in 0..lines {
            // SAFETY: a prefetch never faults or reads into the program,
            // whatever the address.
            unsafe { _mm_prefetch::<_MM_HINT_T0>((addr - skew).wrapping_add(i * 64) as *const i8) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (addr, bytes);
}

/// Asks the CPU to start loading the cache line at `addr`, whatever is
/// there (an address kept only to be loaded, never read through; 0: none).
#[inline]
pub fn prefetch_addr(addr: usize) {
    prefetch_addr_span(addr, 1);
}

/// Asks the CPU to start loading the cache lines that hold the first
/// `bytes` bytes of `*r` (at most all of it), wherever it starts: for a
/// value not aligned to a line, such as an element of a vector, whose hot
/// part [`prefetch`] by whole lines from its start would miss the end of.
#[inline]
pub fn prefetch_bytes<T>(r: &T, bytes: usize) {
    prefetch_span(r, 0..bytes);
}

/// Asks the CPU to start loading the cache lines that hold bytes `span`
/// of `*r` (those within it): the part of a value one kind of event reads.
#[inline]
pub fn prefetch_span<T>(r: &T, span: std::ops::Range<usize>) {
    let end = span.end.min(std::mem::size_of::<T>());
    if span.start < end {
        prefetch_addr_span(r as *const T as usize + span.start, end - span.start);
    }
}

/// The lines that hold `len` bytes (at least one) from address `addr`:
/// how far into its line `addr` lies, and how many lines from that one's
/// start.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[inline]
fn span_lines(addr: usize, len: usize) -> (usize, usize) {
    let skew = addr % 64;
    (skew, (skew + len).div_ceil(64))
}

/// What a scheduler reports at the end of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunStats {
    /// Events handled during this call.
    pub events: u64,
    /// Simulated time reached.
    pub end: SimTime,
}

/// Runs `model` as fast as possible until the queue is empty or the next event
/// is after `until`; then sets the current time to `until` (if the queue
/// reached it). Events due exactly at `until` run.
///
/// `progress` is called every `progress_every` events with the current time and
/// the number of events so far; returning `false` stops the run early (e.g. on
/// Ctrl-C).
pub fn run_afap<M: Model>(
    model: &mut M,
    queue: &mut EventQueue<M::Event>,
    until: SimTime,
    progress_every: u64,
    mut progress: impl FnMut(SimTime, u64) -> bool,
) -> RunStats {
    let start_events = queue.events_processed();
    let every = progress_every.max(1);
    let mut next_report = every;
    let hints = model.wants_hints();
    loop {
        match queue.peek_time() {
            Some(t) if t <= until => {}
            _ => break,
        }
        let (now, event) = queue.pop().expect("peeked");
        hint_next(model, queue, hints);
        model.handle(now, event, queue);
        let done = queue.events_processed() - start_events;
        if done >= next_report {
            next_report += every;
            if !progress(now, done) {
                return RunStats {
                    events: done,
                    end: queue.now(),
                };
            }
        }
    }
    if until != SimTime::MAX && queue.now() < until {
        queue.advance_to(until);
    }
    RunStats {
        events: queue.events_processed() - start_events,
        end: queue.now(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::SimDuration;

    /// A ticker that reschedules itself every 10 ns.
    struct Ticker(Vec<u64>);
    impl Model for Ticker {
        type Event = ();
        fn handle(&mut self, now: SimTime, _: (), q: &mut EventQueue<()>) {
            self.0.push(now.as_nanos());
            q.schedule(now + SimDuration::from_nanos(10), 0, ());
        }
    }

    /// The lines a span's prefetch loads are exactly those that hold its
    /// bytes, wherever it starts in a line.
    #[test]
    fn a_span_loads_the_lines_that_hold_it() {
        for addr in 4096..4096 + 128 {
            for len in [1, 63, 64, 65, 112, 156, 304] {
                let (skew, lines) = span_lines(addr, len);
                let first = addr - skew;
                let last = addr + len - 1;
                assert_eq!(first % 64, 0, "{addr} {len}");
                assert!(
                    first + 64 > addr,
                    "{addr} {len}: a line before the first byte's"
                );
                assert_eq!(first + 64 * lines, (last / 64 + 1) * 64, "{addr} {len}");
            }
        }
    }

    #[test]
    fn runs_until_the_horizon_inclusive() {
        let mut m = Ticker(vec![]);
        let mut q = EventQueue::new();
        q.schedule(SimTime::ZERO, 0, ());
        let stats = run_afap(&mut m, &mut q, SimTime::from_nanos(30), 1, |_, _| true);
        assert_eq!(m.0, [0, 10, 20, 30]);
        assert_eq!(stats.events, 4);
        assert_eq!(stats.end, SimTime::from_nanos(30));
        assert_eq!(q.len(), 1, "the event at 40 ns stays pending");
    }

    #[test]
    fn progress_can_stop_the_run() {
        let mut m = Ticker(vec![]);
        let mut q = EventQueue::new();
        q.schedule(SimTime::ZERO, 0, ());
        let stats = run_afap(&mut m, &mut q, SimTime::MAX, 5, |_, n| n < 10);
        assert_eq!(stats.events, 10);
    }
}
