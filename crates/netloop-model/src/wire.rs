//! The wire of a link direction as a delay line: the frames propagating on
//! it, in arrival order, with only the first of them in the event queue.
//!
//! Why: with each frame in flight an event of its own, a 10 ms link at
//! 500 Mbit/s kept some 600 frames in the global queue, and every push and
//! pop paid for a heap that deep with frames inside its entries
//! (`BinaryHeap::pop` was a fifth of a dumbbell simulation's time). Frames
//! on one wire arrive almost always in the order they left (constant delay;
//! jitter that does not reorder keeps the order too), so the line keeps
//! them in a deque and the queue holds one small event per wire: the
//! arrival of its head.
//!
//! Out-of-order arrivals (jitter with `reorder`, a delay lowered at run
//! time) are inserted at their place; a frame that becomes the head sooner
//! than the pending event gets an event of its own, and an event that finds
//! no frame due at its time is a stale one and does nothing. Frames due at
//! the same moment leave in the order they were put on the wire.

use std::collections::VecDeque;

use netloop_core::SimTime;
use smallvec::SmallVec;

use crate::Frame;

/// A frame on the wire.
pub struct InAir {
    /// When it reaches the far end.
    pub at: SimTime,
    /// The direction's epoch when it left (a link-down since then drops it).
    pub epoch: u32,
    /// Its UDP destination port (0: none), read when it was put on the
    /// wire, while its bytes were in the caches (see [`HeadHint`]).
    pub dport: u16,
    /// The frame.
    pub frame: Frame,
}

/// What the hint before the head frame's arrival needs of it, carried by
/// its arrival event (`Event::Arrive`'s `hint`): its entry in the deque
/// and its bytes have left the caches since it was put on the wire, and
/// the hint read both, one after the other, to find the receiving
/// application; read from the wire, it still waited for the wire's lines
/// first.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct HeadHint {
    /// The address of its bytes, to load (never read through).
    pub data: usize,
    /// Its UDP destination port (0: none).
    pub dport: u16,
}

impl HeadHint {
    /// In one word, for an event to carry: the address above the port.
    /// An address past 48 bits loses its top (a wrong line loaded, no
    /// more: it is only loaded).
    pub fn pack(self) -> u64 {
        ((self.data as u64) << 16) | u64::from(self.dport)
    }

    /// What [`pack`](Self::pack) packed.
    pub fn unpack(w: u64) -> HeadHint {
        HeadHint {
            data: (w >> 16) as usize,
            dport: w as u16,
        }
    }

    fn of(f: &InAir) -> HeadHint {
        HeadHint {
            data: f.frame.as_ptr() as usize,
            dport: f.dport,
        }
    }
}

/// The frames on one direction's wire, and the arrival events pending for
/// it.
#[derive(Default)]
pub struct Wire {
    /// Ordered by `at`; equal times in the order they were put on.
    frames: VecDeque<InAir>,
    /// The last frame's `at` while there are frames: a frame put on the
    /// wire compares with it here, not in the frame's entry, which has
    /// left the caches since it was written one sending interval before.
    back_at: SimTime,
    /// Times of the arrival events in the event queue for this wire,
    /// ascending (one, unless frames arrived out of order). Kept in line
    /// (up to two): every arrival reads them, and in an allocation of
    /// their own they were a cache miss per frame with thousands of links.
    wakes: SmallVec<[SimTime; 2]>,
    /// Segments on the wire (a super-frame counts its segments).
    segs: u64,
}

impl Wire {
    /// Puts a frame on the wire. Returns the time of an arrival event to
    /// schedule, if the frame is now the first to arrive and no event is
    /// due at its time.
    pub fn push(&mut self, at: SimTime, epoch: u32, frame: Frame) -> Option<SimTime> {
        self.segs += frame.segs();
        let dport = crate::ipv4::udp_dport(&frame).unwrap_or(0);
        debug_assert!(self.frames.back().is_none_or(|f| f.at == self.back_at));
        let i = if self.frames.is_empty() || self.back_at <= at {
            // In order, as almost every frame is: `insert` at the end would
            // take the general path (it moved elements in 1 % of a run).
            self.frames.push_back(InAir {
                at,
                epoch,
                dport,
                frame,
            });
            self.back_at = at;
            self.frames.len() - 1
        } else {
            let i = self
                .frames
                .iter()
                .rposition(|f| f.at <= at)
                .map_or(0, |i| i + 1);
            self.frames.insert(
                i,
                InAir {
                    at,
                    epoch,
                    dport,
                    frame,
                },
            );
            i
        };
        if i == 0 {
            self.wake(at)
        } else {
            None
        }
    }

    /// The arrival event due `now` fired: returns the frame that arrives
    /// now, if any (none: a stale event), and the time of the next event to
    /// schedule, if the new head has none yet.
    pub fn take(&mut self, now: SimTime) -> (Option<InAir>, Option<SimTime>) {
        if let Some(i) = self.wakes.iter().position(|&t| t == now) {
            self.wakes.remove(i);
        }
        let head = match self.frames.front() {
            Some(f) if f.at == now => self.frames.pop_front(),
            _ => None,
        };
        if let Some(h) = &head {
            self.segs -= h.frame.segs();
        }
        debug_assert!(
            self.frames.front().is_none_or(|f| f.at >= now),
            "a frame on the wire was due before now without an event"
        );
        let next = self.frames.front().map(|f| f.at);
        (head, next.and_then(|t| self.wake(t)))
    }

    /// When the first frame on the wire reaches the far end, if any.
    pub fn head_at(&self) -> Option<SimTime> {
        self.frames.front().map(|f| f.at)
    }

    /// What the head frame's arrival event carries for its hint: read
    /// when the event is scheduled, right after the head was put on the
    /// wire or its entry read, while it is in the caches.
    pub fn head_hint(&self) -> HeadHint {
        self.frames
            .front()
            .map_or_else(HeadHint::default, HeadHint::of)
    }

    /// Starts loading the head frame's entry (its time, its frame's
    /// handle), which the arrival reads first: the entry sits in the
    /// deque's buffer, apart from the wire, and has left the caches since
    /// the frame was put on the wire. Finding it reads only the deque's
    /// fields, in the wire's own lines, which the hint reads anyway.
    pub fn prefetch_head(&self) {
        if let Some(f) = self.frames.front() {
            netloop_core::sched::prefetch_bytes(f, std::mem::size_of::<InAir>());
        }
    }

    /// The first frame to reach the far end, if any.
    pub fn head(&self) -> Option<&Frame> {
        self.frames.front().map(|f| &f.frame)
    }

    /// The frames on the wire, in the order they arrive.
    pub fn frames(&self) -> impl Iterator<Item = &InAir> {
        self.frames.iter()
    }

    /// Segments on the wire.
    pub fn segs(&self) -> u64 {
        self.segs
    }

    /// Notes an event at `t` unless one is pending then; returns `t` if one
    /// is to be scheduled.
    fn wake(&mut self, t: SimTime) -> Option<SimTime> {
        match self.wakes.binary_search(&t) {
            Ok(_) => None,
            Err(i) => {
                self.wakes.insert(i, t);
                Some(t)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ns: u64) -> SimTime {
        SimTime::from_nanos(ns)
    }

    fn f(tag: u8) -> Frame {
        Frame::copy_from(&[tag; 60])
    }

    /// Drives a wire with its own little event queue (times of pending
    /// events, fired earliest first, ties in scheduling order) and returns
    /// (time, tag) of each frame as it arrives.
    fn drain(w: &mut Wire, mut events: Vec<SimTime>) -> Vec<(u64, u8)> {
        let mut out = Vec::new();
        while !events.is_empty() {
            let (i, _) = events
                .iter()
                .enumerate()
                .min_by_key(|&(i, &e)| (e, i))
                .unwrap();
            let now = events.remove(i);
            let (head, next) = w.take(now);
            if let Some(h) = head {
                out.push((h.at.as_nanos(), h.frame[0]));
            }
            events.extend(next);
        }
        out
    }

    /// The hint kept in the wire names the head frame's bytes and UDP
    /// port whenever the head changes: a frame put on an empty wire, one
    /// that overtakes the head, the next one once the head arrived.
    #[test]
    fn the_head_hint_follows_the_head() {
        let udp = |dport: u16| {
            let mut b = [0u8; 60];
            b[12] = 0x08;
            b[14] = 0x45;
            b[23] = crate::ipv4::PROTO_UDP;
            b[36..38].copy_from_slice(&dport.to_be_bytes());
            Frame::copy_from(&b)
        };
        let hint = |f: &Frame, dport| HeadHint {
            data: f.as_ptr() as usize,
            dport,
        };
        let mut w = Wire::default();
        let (a, b, c) = (udp(1000), udp(2000), f(7));
        let (ha, hb, hc) = (hint(&a, 1000), hint(&b, 2000), hint(&c, 0));
        w.push(t(50), 0, a);
        assert_eq!(w.head_hint(), ha);
        w.push(t(60), 0, b);
        assert_eq!(w.head_hint(), ha);
        w.push(t(20), 0, c);
        assert_eq!(w.head_hint(), hc, "not UDP: no port");
        w.take(t(20));
        assert_eq!(w.head_hint(), ha);
        w.take(t(50));
        assert_eq!(w.head_hint(), hb);
        // As an arrival event carries it: whole for any address below
        // 2^48 (a user-space address on x86-64), any port.
        for h in [
            ha,
            hb,
            hc,
            HeadHint {
                data: (1 << 48) - 64,
                dport: u16::MAX,
            },
        ] {
            assert_eq!(HeadHint::unpack(h.pack()), h);
        }
    }

    #[test]
    fn in_order_frames_need_one_event_at_a_time() {
        let mut w = Wire::default();
        assert_eq!(w.push(t(10), 0, f(1)), Some(t(10)));
        assert_eq!(w.push(t(20), 0, f(2)), None);
        assert_eq!(w.push(t(20), 0, f(3)), None);
        assert_eq!(w.push(t(30), 0, f(4)), None);
        assert_eq!(w.segs(), 4);
        let got = drain(&mut w, vec![t(10)]);
        assert_eq!(got, [(10, 1), (20, 2), (20, 3), (30, 4)]);
        assert!(w.frames.is_empty());
        assert_eq!(w.segs(), 0);
    }

    #[test]
    fn a_frame_that_overtakes_the_head_gets_its_own_event() {
        let mut w = Wire::default();
        let mut events = Vec::new();
        events.extend(w.push(t(50), 0, f(1)));
        events.extend(w.push(t(60), 0, f(2)));
        // A delay lowered meanwhile: this one arrives first, and between.
        events.extend(w.push(t(20), 0, f(3)));
        events.extend(w.push(t(55), 0, f(4)));
        assert_eq!(events, [t(50), t(20)]);
        let got = drain(&mut w, events);
        assert_eq!(got, [(20, 3), (50, 1), (55, 4), (60, 2)]);
        assert!(w.wakes.is_empty(), "no event left pending");
    }

    #[test]
    fn an_emptied_wire_takes_frames_earlier_than_its_last_one() {
        // The last frame's time is kept beside the deque; once the wire is
        // empty it says nothing (a delay lowered while it was idle).
        let mut w = Wire::default();
        assert_eq!(w.push(t(50), 0, f(1)), Some(t(50)));
        assert_eq!(w.take(t(50)).0.map(|h| h.frame[0]), Some(1));
        assert_eq!(w.push(t(20), 0, f(2)), Some(t(20)));
        assert_eq!(w.push(t(30), 0, f(3)), None);
        assert_eq!(w.push(t(25), 0, f(4)), None);
        assert_eq!(w.push(t(40), 0, f(5)), None);
        let got = drain(&mut w, vec![t(20)]);
        assert_eq!(got, [(20, 2), (25, 4), (30, 3), (40, 5)]);
    }

    #[test]
    fn a_stale_event_delivers_nothing_and_keeps_the_head_covered() {
        let mut w = Wire::default();
        assert_eq!(w.push(t(40), 0, f(1)), Some(t(40)));
        assert_eq!(w.push(t(10), 0, f(2)), Some(t(10)));
        let (h, next) = w.take(t(10));
        assert_eq!(h.map(|h| h.frame[0]), Some(2));
        assert_eq!(next, None, "the head's event at 40 is still pending");
        let (h, next) = w.take(t(40));
        assert_eq!(h.map(|h| h.frame[0]), Some(1));
        assert_eq!(next, None);
        // An event with nothing due (its frame went first by another one).
        assert!(w.push(t(70), 0, f(3)).is_some());
        let (h, next) = w.take(t(65));
        assert!(h.is_none());
        assert_eq!(next, None, "70 is covered");
    }
}
