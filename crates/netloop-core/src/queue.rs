//! The event queue: a priority queue with a total, deterministic order.
//!
//! Events are ordered by time, then by their *source* (the entity that
//! scheduled them: a node, one half of a link direction; a number the model
//! gives), then by the order in which they were put in this queue. The
//! model keeps that order the source's own: a node's and a transmitter's
//! events are scheduled only by the partition that runs them, in order,
//! and a wire's arrivals (scheduled by the sender, or in batches as frames
//! cross from another partition) never tie, a wire having at most one
//! arrival pending for any one moment (`netloop_model::wire`). A counter per
//! source would say no more, and with sources per link direction it was a
//! random read of a large array at every schedule (in `perf` of a plain
//! run of 10 000 simulated pairs, not recorded, 4.6 % of the run stalled
//! on it). Two runs
//! of the same model execute the same events in the same order, and the
//! order does not depend on how events of different sources interleave when
//! they are scheduled: a network cut into partitions, each with a queue of
//! its own and messages arriving from the others in batches, runs every
//! event in the order a single queue would (issue 17). Ties broken by a
//! global insertion order alone, before the source, would not survive
//! that.
//!
//! Popping asserts that time never runs backwards: scheduling an event in
//! the past is a bug in the model, caught here rather than silently
//! reordered.
//!
//! The store is a radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, 1990), which
//! relies on exactly that: no event is ever due before the last one popped.
//! An event is kept in the bucket of the highest bit in which its time
//! differs from the last popped time; the earliest bucket is emptied into
//! lower ones when the time reaches it, and the events due at the current
//! time wait in a small binary heap ordered by key. Against the binary heap
//! it replaced, a schedule is a push onto a vector and each event moves a
//! few times, in sequence through memory, instead of sifting through a heap
//! of every pending event (at 10 000 flows the heap's `pop` was 15 % of a
//! run, in cache misses).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::time::SimTime;

/// Who scheduled an event (see the module docs).
pub type Source = u32;

/// Sources a queue can tell apart: every [`Source`].
pub const MAX_SOURCES: u64 = 1 << Source::BITS;

struct Entry<E> {
    time: SimTime,
    source: Source,
    /// The number of events put in this queue before it (see
    /// [`EventQueue::pop_numbered`]): among one source's events at one
    /// moment, the order in which the source scheduled them.
    num: u64,
    event: E,
}

impl<E> Entry<E> {
    /// What orders events due at one moment: source, then number (see
    /// [`EventQueue::current_key`]).
    #[inline]
    fn key(&self) -> u128 {
        (u128::from(self.source) << 64) | u128::from(self.num)
    }
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.time == other.time && self.key() == other.key()
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    // Reversed: `BinaryHeap` is a max-heap and we want the earliest event.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .time
            .cmp(&self.time)
            .then_with(|| other.key().cmp(&self.key()))
    }
}

/// The pending events: a radix heap over their times (see the module docs).
struct Radix<E> {
    /// The time of the last event popped (or moved to `due`): no pending
    /// event is earlier.
    base: u64,
    /// The events due at `base`, earliest key first.
    due: BinaryHeap<Entry<E>>,
    /// `buckets[i]`: events whose time first differs from `base` in bit `i`
    /// (counting from the lowest).
    buckets: Vec<Vec<Entry<E>>>,
    /// Per bucket, the position of its earliest event (time, then key).
    earliest: [usize; 64],
    /// Bit `i` set when `buckets[i]` is not empty.
    filled: u64,
    len: usize,
}

impl<E> Radix<E> {
    fn new() -> Self {
        Radix {
            base: 0,
            due: BinaryHeap::new(),
            buckets: (0..64).map(|_| Vec::new()).collect(),
            earliest: [0; 64],
            filled: 0,
            len: 0,
        }
    }

    /// Stores `e` (due at `base` or later).
    #[inline]
    fn push(&mut self, e: Entry<E>) {
        self.len += 1;
        self.place(e);
    }

    #[inline]
    fn place(&mut self, e: Entry<E>) {
        let t = e.time.as_nanos();
        debug_assert!(t >= self.base);
        if t == self.base {
            self.due.push(e);
            return;
        }
        let i = 63 - (t ^ self.base).leading_zeros() as usize;
        let b = &mut self.buckets[i];
        if b.is_empty() {
            self.earliest[i] = 0;
            self.filled |= 1 << i;
        } else {
            let m = &b[self.earliest[i]];
            if (e.time, e.key()) < (m.time, m.key()) {
                self.earliest[i] = b.len();
            }
        }
        b.push(e);
    }

    /// The earliest event of the first bucket that has one (when `due` is
    /// empty, the earliest pending).
    fn first_bucket(&self) -> Option<&Entry<E>> {
        if self.filled == 0 {
            return None;
        }
        let i = self.filled.trailing_zeros() as usize;
        Some(&self.buckets[i][self.earliest[i]])
    }

    fn peek(&self) -> Option<&Entry<E>> {
        self.due.peek().or_else(|| self.first_bucket())
    }

    fn pop(&mut self) -> Option<Entry<E>> {
        if self.due.is_empty() {
            if self.filled == 0 {
                return None;
            }
            // The time moves to the first bucket's earliest event, which
            // is the next event: `due` is empty and the later buckets'
            // events are later. Each of that bucket's other events now
            // first differs from it in a lower bit (or not at all: due, a
            // tie at this time with a later key), while the later buckets'
            // stay put. Handing the earliest out directly, rather than
            // through `due`, spares a heap push and pop per move of the
            // time (a run with few events in flight moves it at nearly
            // every event).
            let i = self.filled.trailing_zeros() as usize;
            self.filled &= !(1 << i);
            self.len -= 1;
            if self.buckets[i].len() == 1 {
                // Alone in its bucket, as most events are with few in
                // flight: nothing to move down.
                debug_assert_eq!(self.earliest[i], 0);
                let first = self.buckets[i].pop().expect("a filled bucket");
                self.base = first.time.as_nanos();
                return Some(first);
            }
            let mut moving = std::mem::take(&mut self.buckets[i]);
            let first = moving.swap_remove(self.earliest[i]);
            self.base = first.time.as_nanos();
            for e in moving.drain(..) {
                self.place(e);
            }
            // Its allocation is kept for the next events of that bucket.
            self.buckets[i] = moving;
            return Some(first);
        }
        let e = self.due.pop()?;
        self.len -= 1;
        Some(e)
    }

    fn retain(&mut self, mut keep: impl FnMut(&E) -> bool) {
        self.due.retain(|e| keep(&e.event));
        let mut all = Vec::new();
        for b in &mut self.buckets {
            all.extend(b.drain(..).filter(|e| keep(&e.event)));
        }
        self.filled = 0;
        for e in all {
            self.place(e);
        }
        self.len = self.due.len() + self.buckets.iter().map(Vec::len).sum::<usize>();
    }

    fn iter(&self) -> impl Iterator<Item = &Entry<E>> {
        self.due.iter().chain(self.buckets.iter().flatten())
    }
}

/// A queue of events of type `E`, each due at a [`SimTime`].
pub struct EventQueue<E> {
    store: Radix<E>,
    next_num: u64,
    now: SimTime,
    /// The key of the event most recently popped (see [`EventQueue::current_key`]).
    now_key: u128,
    popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    /// An empty queue at time zero.
    pub fn new() -> Self {
        EventQueue {
            store: Radix::new(),
            next_num: 0,
            now: SimTime::ZERO,
            now_key: 0,
            popped: 0,
        }
    }

    /// The time of the event most recently popped (the current time).
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// Schedules `event` at `time`, from `source`: among events due at the
    /// same time, those of lower sources run first, and one source's in the
    /// order it scheduled them.
    ///
    /// # Panics
    /// If `time` is before [`now`](Self::now) (the model tried to change
    /// the past).
    #[inline]
    pub fn schedule(&mut self, time: SimTime, source: Source, event: E) {
        assert!(
            time >= self.now,
            "event scheduled in the past: at {time}, now {}",
            self.now
        );
        let num = self.next_num;
        self.next_num += 1;
        self.store.push(Entry {
            time,
            source,
            num,
            event,
        });
    }

    /// The time of the next event, if any.
    pub fn peek_time(&self) -> Option<SimTime> {
        self.store.peek().map(|e| e.time)
    }

    /// The next event, if any (a scheduler's hint to warm the caches for
    /// it; see [`Model::prefetch`](crate::Model::prefetch)).
    pub fn peek_event(&self) -> Option<&E> {
        self.store.peek().map(|e| &e.event)
    }

    /// Removes the next event and advances the current time to it.
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        self.pop_numbered().map(|(t, _, e)| (t, e))
    }

    /// [`pop`](Self::pop), with the event's number: the count of events
    /// scheduled before it (see [`scheduled`](Self::scheduled)). The
    /// real-time scheduler tells by it whether an event was scheduled
    /// before or after a given moment.
    pub fn pop_numbered(&mut self) -> Option<(SimTime, u64, E)> {
        let e = self.store.pop()?;
        debug_assert!(e.time >= self.now, "time ran backwards");
        self.now = e.time;
        self.now_key = e.key();
        self.popped += 1;
        Some((e.time, e.num, e.event))
    }

    /// The key of the event most recently popped: its source (high 64
    /// bits) and its number in this queue (low 64). Events of different
    /// sources compare by their sources alone; a partitioned run numbers
    /// one source's events otherwise than one queue does (its queue holds
    /// other events; a wire's arrivals are scheduled as frames cross, in
    /// batches), never in another order.
    /// Taps order the frames they see by it (`netloop_model::network::TapOrder`).
    pub fn current_key(&self) -> u128 {
        self.now_key
    }

    /// Number of events scheduled so far (the number the next one gets).
    pub fn scheduled(&self) -> u64 {
        self.next_num
    }

    /// Advances the current time without an event (the real-time scheduler
    /// does this when a packet arrives from outside between events).
    ///
    /// # Panics
    /// If `time` is before the current time.
    pub fn advance_to(&mut self, time: SimTime) {
        assert!(
            time >= self.now,
            "time ran backwards: {time} < {}",
            self.now
        );
        self.now = time;
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.store.len
    }

    /// Whether no event is pending.
    pub fn is_empty(&self) -> bool {
        self.store.len == 0
    }

    /// Number of events popped so far.
    pub fn events_processed(&self) -> u64 {
        self.popped
    }

    /// Keeps only the pending events for which `keep` holds (a partition
    /// drops, after building the whole network, the events of what it does
    /// not own). Their order is unchanged.
    pub fn retain(&mut self, mut keep: impl FnMut(&E) -> bool) {
        self.store.retain(&mut keep);
    }

    /// All pending events, in no particular order (for accounting, e.g.
    /// counting frames still in flight at the end of a run).
    pub fn pending(&self) -> impl Iterator<Item = (SimTime, &E)> {
        self.store.iter().map(|e| (e.time, &e.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_time_then_source_then_the_sources_order() {
        let mut q = EventQueue::new();
        q.schedule(SimTime::from_nanos(20), 0, "d");
        q.schedule(SimTime::from_nanos(10), 7, "c");
        q.schedule(SimTime::from_nanos(10), 3, "a");
        q.schedule(SimTime::from_nanos(10), 3, "b");
        q.schedule(SimTime::from_nanos(20), 1, "e");
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, ["a", "b", "c", "d", "e"]);
        assert_eq!(q.now(), SimTime::from_nanos(20));
        assert_eq!(q.events_processed(), 5);
    }

    /// A little xorshift stream for the tests.
    fn stream(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// Against a sorted list as the reference: interleaved schedules and
    /// pops, many events at equal times and from equal sources; the order
    /// must be (time, source, the source's scheduling order) exactly, and
    /// the number popped with each event its global scheduling order.
    #[test]
    fn matches_a_sorted_reference_under_interleaving() {
        let mut q = EventQueue::new();
        // (time, source, source seq, global number)
        let mut reference: Vec<(u64, u32, u64, u64)> = Vec::new();
        let mut seqs = [0u64; 5];
        let mut num = 0u64;
        let mut next = stream(0x9e37_79b9_7f4a_7c15);
        for round in 0..20_000u64 {
            let pushes = next() % 4;
            for _ in 0..pushes {
                // Few distinct times and sources: ties are the rule.
                let t = q.now().as_nanos() + next() % 8;
                let s = (next() % 5) as u32;
                let e = (t, s, seqs[s as usize], num);
                seqs[s as usize] += 1;
                num += 1;
                q.schedule(SimTime::from_nanos(t), s, e);
                reference.push(e);
            }
            if round % 3 != 0 {
                reference.sort_unstable();
                let want = (!reference.is_empty()).then(|| reference.remove(0));
                let got = q.pop_numbered().map(|(t, n, e)| {
                    assert_eq!(n, e.3, "the number is the global scheduling order");
                    assert_eq!(t.as_nanos(), e.0);
                    e
                });
                assert_eq!(got, want);
            }
        }
        assert_eq!(q.len(), reference.len());
        assert_eq!(q.scheduled(), num);
        let pending: u64 = q.pending().map(|(_, e)| e.3).sum();
        assert_eq!(pending, reference.iter().map(|e| e.3).sum::<u64>());
        reference.sort_unstable();
        for want in reference {
            assert_eq!(q.pop().unwrap().1, want);
        }
        assert!(q.is_empty());
    }

    /// The radix store across every scale of time: gaps from nanoseconds to
    /// centuries (every bucket used), pops interleaved with schedules at
    /// the current time and between, and `advance_to` in between; the
    /// order must be the sorted reference's.
    #[test]
    fn matches_the_reference_across_every_scale_of_time() {
        let mut q = EventQueue::new();
        let mut reference: Vec<(u64, u32, u64)> = Vec::new();
        let mut seqs = [0u64; 3];
        let mut next = stream(0x2545_f491_4f6c_dd1d);
        for round in 0..30_000u64 {
            for _ in 0..next() % 3 {
                let now = q.now().as_nanos();
                let gap = match next() % 4 {
                    0 => 0,
                    1 => next() % 16,
                    _ => next() >> (next() % 64),
                };
                let t = now.saturating_add(gap).min(u64::MAX - 1);
                let s = (next() % 3) as u32;
                let e = (t, s, seqs[s as usize]);
                seqs[s as usize] += 1;
                q.schedule(SimTime::from_nanos(t), s, e);
                reference.push(e);
            }
            if round % 7 == 0 {
                // Forward, never past what is pending.
                let limit = reference.iter().map(|e| e.0).min().unwrap_or(u64::MAX - 1);
                let now = q.now().as_nanos();
                q.advance_to(SimTime::from_nanos(now + (limit - now) / 2));
            }
            if round % 2 == 0 {
                reference.sort_unstable();
                let want = (!reference.is_empty()).then(|| reference.remove(0));
                assert_eq!(q.peek_time().map(|t| t.as_nanos()), want.map(|e| e.0));
                assert_eq!(q.peek_event().copied(), want);
                assert_eq!(q.pop().map(|(_, e)| e), want);
            }
        }
        assert_eq!(q.len(), reference.len());
        reference.sort_unstable();
        for want in reference {
            assert_eq!(q.pop().unwrap().1, want);
        }
        assert!(q.is_empty() && q.pop().is_none());
    }

    /// What partitions rely on: the same events from each source, with the
    /// sources interleaved differently (as when one source's events reach a
    /// queue in a batch, later), pop in the same order.
    #[test]
    fn order_does_not_depend_on_how_sources_interleave() {
        let mut next = stream(42);
        // Per source, its events in its own order: (time, label).
        let per_source: Vec<Vec<(u64, u64)>> = (0..6)
            .map(|s| (0..200).map(|i| (next() % 16, s * 1000 + i)).collect())
            .collect();
        let run = |seed: u64| {
            let mut pick = stream(seed);
            let mut q = EventQueue::new();
            let mut cursors = [0usize; 6];
            while cursors.iter().zip(&per_source).any(|(&c, v)| c < v.len()) {
                let s = (pick() % 6) as usize;
                let Some(&(t, label)) = per_source[s].get(cursors[s]) else {
                    continue;
                };
                cursors[s] += 1;
                q.schedule(SimTime::from_nanos(t), s as Source, label);
            }
            std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect::<Vec<_>>()
        };
        let a = run(1);
        assert_eq!(a.len(), 1200);
        assert_eq!(a, run(2));
        assert_eq!(a, run(3));
    }

    /// `retain` keeps the order of what stays.
    #[test]
    fn retain_keeps_the_order_of_what_stays() {
        let mut next = stream(7);
        let events: Vec<(u64, Source, u64)> = (0..500)
            .map(|i| (next() % 20, (next() % 4) as Source, i))
            .collect();
        let mut all = EventQueue::new();
        let mut odd = EventQueue::new();
        for &(t, s, label) in &events {
            all.schedule(SimTime::from_nanos(t), s, label);
            if s % 2 == 1 {
                odd.schedule(SimTime::from_nanos(t), s, label);
            }
        }
        all.retain(|l| events[*l as usize].1 % 2 == 1);
        let kept: Vec<_> = std::iter::from_fn(|| all.pop().map(|e| e.1)).collect();
        let want: Vec<_> = std::iter::from_fn(|| odd.pop().map(|e| e.1)).collect();
        assert!(kept.len() > 100);
        assert_eq!(kept, want);
    }

    #[test]
    #[should_panic(expected = "in the past")]
    fn scheduling_in_the_past_panics() {
        let mut q = EventQueue::new();
        q.schedule(SimTime::from_nanos(10), 0, ());
        q.pop();
        q.schedule(SimTime::from_nanos(5), 0, ());
    }

    #[test]
    fn peek_event_shows_what_pop_returns_next() {
        let mut q = EventQueue::new();
        assert!(q.peek_event().is_none());
        q.schedule(SimTime::from_nanos(20), 1, "late");
        q.schedule(SimTime::from_nanos(10), 2, "early");
        assert_eq!(q.peek_event(), Some(&"early"));
        assert_eq!(q.pop(), Some((SimTime::from_nanos(10), "early")));
        assert_eq!(q.peek_event(), Some(&"late"));
    }
}
