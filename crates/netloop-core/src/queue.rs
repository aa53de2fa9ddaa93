//! The event queue: a priority queue with a total, deterministic order.
//!
//! Events are ordered by time, then by the order in which they were scheduled
//! (a sequence number), so two runs of the same model schedule and execute the
//! same events in the same order. Popping asserts that time never runs
//! backwards: scheduling an event in the past is a bug in the model, caught
//! here rather than silently reordered.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::time::SimTime;

struct Entry<E> {
    time: SimTime,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.time == other.time && self.seq == other.seq
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
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// A queue of events of type `E`, each due at a [`SimTime`].
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    next_seq: u64,
    now: SimTime,
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
            heap: BinaryHeap::new(),
            next_seq: 0,
            now: SimTime::ZERO,
            popped: 0,
        }
    }

    /// The time of the event most recently popped (the current time).
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// Schedules `event` at `time`.
    ///
    /// # Panics
    /// If `time` is before [`now`](Self::now): the model tried to change the past.
    pub fn schedule(&mut self, time: SimTime, event: E) {
        assert!(
            time >= self.now,
            "event scheduled in the past: at {time}, now {}",
            self.now
        );
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Entry { time, seq, event });
    }

    /// The time of the next event, if any.
    pub fn peek_time(&self) -> Option<SimTime> {
        self.heap.peek().map(|e| e.time)
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
        let e = self.heap.pop()?;
        debug_assert!(e.time >= self.now, "time ran backwards");
        self.now = e.time;
        self.popped += 1;
        Some((e.time, e.seq, e.event))
    }

    /// Number of events scheduled so far (the number the next one gets).
    pub fn scheduled(&self) -> u64 {
        self.next_seq
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
        self.heap.len()
    }

    /// Whether no event is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Number of events popped so far.
    pub fn events_processed(&self) -> u64 {
        self.popped
    }

    /// All pending events, in no particular order (for accounting, e.g.
    /// counting frames still in flight at the end of a run).
    pub fn pending(&self) -> impl Iterator<Item = (SimTime, &E)> {
        self.heap.iter().map(|e| (e.time, &e.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_time_then_insertion() {
        let mut q = EventQueue::new();
        q.schedule(SimTime::from_nanos(20), "c");
        q.schedule(SimTime::from_nanos(10), "a");
        q.schedule(SimTime::from_nanos(10), "b");
        q.schedule(SimTime::from_nanos(20), "d");
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, ["a", "b", "c", "d"]);
        assert_eq!(q.now(), SimTime::from_nanos(20));
        assert_eq!(q.events_processed(), 4);
    }

    /// Against a sorted list as the reference: interleaved schedules and
    /// pops, many events at equal times, slots reused; the order must be
    /// (time, scheduling order) exactly.
    #[test]
    fn matches_a_sorted_reference_under_interleaving() {
        let mut q = EventQueue::new();
        let mut reference: Vec<(u64, u64)> = Vec::new();
        let mut seq = 0u64;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..20_000u64 {
            let pushes = next() % 4;
            for _ in 0..pushes {
                // Few distinct times: ties are the rule, not the exception.
                let t = q.now().as_nanos() + next() % 8;
                q.schedule(SimTime::from_nanos(t), seq);
                reference.push((t, seq));
                seq += 1;
            }
            if round % 3 != 0 {
                reference.sort_unstable();
                let want = (!reference.is_empty()).then(|| reference.remove(0));
                let got = q.pop_numbered().map(|(t, n, e)| {
                    assert_eq!(n, e, "the number is the scheduling order");
                    (t.as_nanos(), e)
                });
                assert_eq!(got, want);
            }
        }
        assert_eq!(q.len(), reference.len());
        let pending: u64 = q.pending().map(|(_, &e)| e).sum();
        assert_eq!(pending, reference.iter().map(|&(_, e)| e).sum::<u64>());
        reference.sort_unstable();
        for want in reference {
            let (t, e) = q.pop().unwrap();
            assert_eq!((t.as_nanos(), e), want);
        }
        assert!(q.is_empty());
    }

    #[test]
    #[should_panic(expected = "in the past")]
    fn scheduling_in_the_past_panics() {
        let mut q = EventQueue::new();
        q.schedule(SimTime::from_nanos(10), ());
        q.pop();
        q.schedule(SimTime::from_nanos(5), ());
    }
}
