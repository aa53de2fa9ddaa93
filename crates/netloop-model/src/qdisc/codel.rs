//! CoDel, Controlled Delay (RFC 8289): acts on how long packets stood in
//! the queue, not on how many there are. Once the sojourn time has stayed
//! above `target` for a whole `interval`, it drops (or, for ECN-capable
//! packets with `ecn`, marks) one packet, then more often — the next after
//! `interval / sqrt(count)` — until the sojourn falls below `target`.
//!
//! The state machine follows RFC 8289 §5 and Linux's `codel_impl.h`, which
//! the RFC's reference code became: in particular the re-entry rule (a
//! drop state entered soon after the last one resumes at the count it
//! reached, §5.5) and marking in place of a drop ending the drop loop.
//! Deviation: `interval / sqrt(count)` is computed in floating point, not
//! with Linux's Newton step on a fixed-point inverse square root (an
//! approximation of the same value; either is deterministic).

use netloop_core::{SimDuration, SimTime};

use super::packet::mark_ce;
use super::{Fifo, Limits, QueueDisc, Sink};
use crate::spec::{CodelSpec, QueueSpec};
use crate::stats::DropReason;
use crate::Frame;

/// The control state of one CoDel queue (FQ-CoDel keeps one per flow).
#[derive(Clone, Debug, Default)]
pub(crate) struct CodelState {
    /// When the sojourn has been above target for an interval (0: it is
    /// not above target).
    first_above_time: Option<SimTime>,
    /// When the next drop is due in the drop state.
    drop_next: SimTime,
    /// Drops since entering the drop state.
    count: u32,
    /// `count` when the drop state was last entered.
    lastcount: u32,
    /// In the drop state.
    dropping: bool,
}

/// CoDel's parameters as it uses them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Params {
    pub(crate) target: SimDuration,
    pub(crate) interval: SimDuration,
    pub(crate) ecn: bool,
    /// A queue of at most this many bytes is not a standing queue (one
    /// maximal frame: RFC 8289's MAXPACKET).
    pub(crate) max_frame: u64,
}

/// `t + interval / sqrt(count)`: when the next drop is due.
fn control_law(t: SimTime, interval: SimDuration, count: u32) -> SimTime {
    let ns = interval.as_nanos() as f64 / f64::from(count.max(1)).sqrt();
    t + SimDuration::from_nanos(ns as u64)
}

impl CodelState {
    /// Takes the head of `q` and says whether CoDel may drop it: its
    /// sojourn has been above target for at least an interval.
    /// `others` is what waits beside `q` (FQ-CoDel's other flows): part of
    /// the backlog that must be more than one maximal frame.
    fn take(
        &mut self,
        q: &mut Fifo,
        others: u64,
        now: SimTime,
        p: &Params,
    ) -> (Option<super::Entry>, bool) {
        let Some(e) = q.pop() else {
            self.first_above_time = None;
            return (None, false);
        };
        let sojourn = now - e.at;
        let mut ok_to_drop = false;
        if sojourn < p.target || others + q.bytes <= p.max_frame {
            self.first_above_time = None;
        } else {
            match self.first_above_time {
                None => self.first_above_time = Some(now + p.interval),
                Some(t) if now >= t => ok_to_drop = true,
                Some(_) => {}
            }
        }
        (Some(e), ok_to_drop)
    }

    /// CoDel's dequeue on `q`: the next frame to send, after dropping (or
    /// marking) what the control law says.
    pub(crate) fn dequeue(
        &mut self,
        q: &mut Fifo,
        others: u64,
        now: SimTime,
        p: &Params,
        sink: &mut Sink,
    ) -> Option<Frame> {
        let (mut e, mut drop) = self.take(q, others, now, p);
        if e.is_none() {
            self.dropping = false;
            return None;
        }
        if self.dropping {
            if !drop {
                self.dropping = false;
            } else {
                while self.dropping && now >= self.drop_next {
                    self.count += 1;
                    let entry = e.as_mut().expect("a frame is in hand in the drop loop");
                    if p.ecn && mark_ce(&mut entry.frame) {
                        sink.ecn_marked += 1;
                        self.drop_next = control_law(self.drop_next, p.interval, self.count);
                        break;
                    }
                    let dropped = e.take().expect("a frame is in hand in the drop loop");
                    sink.drop(dropped.frame, DropReason::AqmDrop);
                    (e, drop) = self.take(q, others, now, p);
                    if e.is_none() || !drop {
                        self.dropping = false;
                    } else {
                        self.drop_next = control_law(self.drop_next, p.interval, self.count);
                    }
                }
            }
        } else if drop {
            let entry = e.as_mut().expect("a frame is in hand");
            if p.ecn && mark_ce(&mut entry.frame) {
                sink.ecn_marked += 1;
            } else {
                let dropped = e.take().expect("a frame is in hand");
                sink.drop(dropped.frame, DropReason::AqmDrop);
                (e, _) = self.take(q, others, now, p);
            }
            self.dropping = true;
            // Re-entering soon after the last drop state: resume near the
            // drop rate it had reached (RFC 8289 §5.5).
            let delta = self.count.wrapping_sub(self.lastcount);
            let sixteen = SimDuration::from_nanos(p.interval.as_nanos().saturating_mul(16));
            self.count = if delta > 1 && now < self.drop_next + sixteen {
                delta
            } else {
                1
            };
            self.lastcount = self.count;
            self.drop_next = control_law(now, p.interval, self.count);
        }
        let e = e?;
        sink.sojourn = Some(now - e.at);
        Some(e.frame)
    }
}

/// One CoDel queue in front of the link, with the queue's packet and byte
/// limits (Linux's default for CoDel: 1 000 packets) as its hard bound.
pub struct Codel {
    q: Fifo,
    state: CodelState,
    params: Params,
    limits: Limits,
}

impl Codel {
    /// CoDel with `c`'s parameters and `spec`'s limits; `max_frame` is the
    /// line's largest frame.
    pub fn new(spec: &QueueSpec, c: CodelSpec, max_frame: u64) -> Codel {
        Codel {
            q: Fifo::default(),
            state: CodelState::default(),
            params: Params {
                target: c.target,
                interval: c.interval,
                ecn: c.ecn,
                max_frame,
            },
            limits: Limits::of(spec),
        }
    }
}

impl QueueDisc for Codel {
    fn enqueue(
        &mut self,
        now: SimTime,
        frame: Frame,
        _sink: &mut Sink,
    ) -> Result<(), (Frame, DropReason)> {
        if !self.limits.fits(self.q.packets, self.q.bytes, &frame) {
            return Err((frame, DropReason::QueueFull));
        }
        self.q.push(now, frame);
        Ok(())
    }
    fn dequeue(&mut self, now: SimTime, sink: &mut Sink) -> Option<Frame> {
        self.state.dequeue(&mut self.q, 0, now, &self.params, sink)
    }
    fn len(&self) -> usize {
        self.q.packets
    }
    fn bytes(&self) -> u64 {
        self.q.bytes
    }
    fn clear(&mut self) -> usize {
        // A fresh start, as Linux's codel_reset: no drop state survives an
        // outage.
        self.state = CodelState::default();
        self.q.clear()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::packet::tests::udp;

    const MS: u64 = 1_000_000;

    /// A UDP frame of 1 000 bytes: twenty of them are a standing queue (a
    /// queue of less than one maximal frame never is).
    fn big(tos: u8) -> Vec<u8> {
        let mut f = udp(tos, 1);
        f.resize(1000, 0);
        f
    }

    /// One frame in and (from 20 ms on) one out every millisecond: a queue
    /// of 20 ms that only CoDel's drops shorten. Returns the milliseconds
    /// at which frames were dropped and marked, and the frames sent.
    fn feed(ecn: bool, frame: &[u8], until_ms: u64) -> (Vec<u64>, Vec<u64>, Vec<Frame>) {
        let mut q = Codel::new(
            &QueueSpec {
                packets: None,
                ..QueueSpec::default()
            },
            CodelSpec {
                ecn,
                ..CodelSpec::default()
            },
            1518,
        );
        let (mut drops, mut marks, mut sent) = (Vec::new(), Vec::new(), Vec::new());
        for k in 0..until_ms {
            let now = SimTime::ZERO + SimDuration::from_nanos(k * MS);
            let mut sink = Sink::default();
            q.enqueue(now, Frame::copy_from(frame), &mut sink).unwrap();
            if k >= 20 {
                if let Some(f) = q.dequeue(now, &mut sink) {
                    sent.push(f);
                }
            }
            drops.extend(sink.dropped.iter().map(|_| k));
            marks.extend((0..sink.ecn_marked).map(|_| k));
        }
        (drops, marks, sent)
    }

    #[test]
    fn drops_follow_the_control_law_after_an_interval_above_target() {
        let (drops, marks, _) = feed(false, &big(0), 700);
        assert!(marks.is_empty());
        // Above target since the first dequeue at 20 ms: the first drop an
        // interval later (120 ms), the next an interval after that (count
        // 1), then interval / sqrt(count) after the last one's due time.
        let mut want = vec![120u64];
        let mut due = 220.0f64;
        let mut count = 1u32;
        while due < 700.0 {
            want.push(due.ceil() as u64);
            count += 1;
            due += 100.0 / f64::from(count).sqrt();
        }
        let n = drops.len().min(want.len());
        assert!(n >= 8, "{drops:?}");
        assert_eq!(drops[..n], want[..n], "drops at {drops:?}");
    }

    #[test]
    fn ecn_capable_packets_are_marked_not_dropped() {
        let (drops, marks, sent) = feed(true, &big(0b10), 400);
        assert!(drops.is_empty(), "{drops:?}");
        assert_eq!(marks[..3], [120, 220, 291], "{marks:?}");
        let ce = sent.iter().filter(|f| f[15] & 0b11 == 0b11).count();
        assert_eq!(ce, marks.len());
        // A packet that is not ECN-capable is dropped even with ecn on.
        let (drops, marks, _) = feed(true, &big(0), 400);
        assert!(marks.is_empty() && drops[..2] == [120, 220], "{drops:?}");
    }

    #[test]
    fn a_short_queue_is_never_a_standing_queue() {
        // One frame in, one out each millisecond after a 4 ms start: the
        // sojourn stays below target; nothing is dropped however long.
        let mut q = Codel::new(&QueueSpec::default(), CodelSpec::default(), 1518);
        let mut sink = Sink::default();
        for k in 0..2000u64 {
            let now = SimTime::ZERO + SimDuration::from_nanos(k * MS);
            q.enqueue(now, Frame::copy_from(&udp(0, 1)), &mut sink)
                .unwrap();
            if k >= 4 {
                q.dequeue(now, &mut sink).unwrap();
            }
        }
        assert!(sink.dropped.is_empty());
    }

    #[test]
    fn an_outage_ends_the_drop_state() {
        let mut q = Codel::new(&QueueSpec::default(), CodelSpec::default(), 1518);
        let mut sink = Sink::default();
        let at = |k: u64| SimTime::ZERO + SimDuration::from_nanos(k * MS);
        // In the drop state after 300 ms of a 20 ms queue.
        for k in 0..300u64 {
            q.enqueue(at(k), Frame::copy_from(&big(0)), &mut sink)
                .unwrap();
            if k >= 20 {
                q.dequeue(at(k), &mut sink);
            }
        }
        assert!(!sink.dropped.is_empty());
        q.clear();
        // After the link comes back, a standing queue must last an interval
        // again before CoDel drops.
        sink.dropped.clear();
        for k in 300..380u64 {
            q.enqueue(at(k), Frame::copy_from(&big(0)), &mut sink)
                .unwrap();
            if k >= 320 {
                q.dequeue(at(k), &mut sink);
            }
        }
        assert!(
            sink.dropped.is_empty(),
            "dropped within an interval of coming back"
        );
    }
}
