//! RED, Random Early Detection (Floyd & Jacobson, "Random Early Detection
//! Gateways for Congestion Avoidance", 1993): drops (or marks) arriving
//! packets with a probability that grows with the *average* queue length,
//! so that flows slow down before the queue fills, and not all at once.
//!
//! Per arrival (the paper's Figure 2): the average `avg` is an EWMA of the
//! queue length with weight `w_q`; after an idle period it decays as if
//! `m` small packets had been sent meanwhile (`m` = idle time / the
//! transmission time of a typical packet, here a full-size frame at the
//! line's rate). Between `min_th` and `max_th` the base probability is
//! `p_b = max_p (avg - min_th) / (max_th - min_th)`, spread out by the
//! count of packets since the last drop, `p_a = p_b / (1 - count p_b)`, so
//! that drops come at roughly even intervals. At or above `max_th` every
//! arrival is dropped, unless "gentle" (Floyd, 2000; ns-2's and Linux's
//! option): then the probability rises linearly from `max_p` to 1 between
//! `max_th` and twice it. With `ecn`, an ECN-capable packet is marked
//! instead of dropped (RFC 3168 §7) — also above `max_th`, as Linux does
//! unless told `harddrop`. The queue's packet and byte limits still apply
//! (`queue_full`). Deviation: the idle decay uses the rate the line had
//! when the run started (a run-time rate change does not reach it).

use netloop_core::{RngStream, SimDuration, SimTime};

use super::packet::mark_ce;
use super::{Fifo, Limits, QueueDisc, Sink};
use crate::spec::{DirectionSpec, QueueSpec, RedSpec};
use crate::stats::DropReason;
use crate::Frame;

/// RED in front of a link.
pub struct Red {
    q: Fifo,
    p: RedSpec,
    limits: Limits,
    rng: RngStream,
    /// The average queue length, packets.
    avg: f64,
    /// Packets since the last drop or mark (-1: avg was below min_th).
    count: i64,
    /// When the queue last went empty (for the idle decay).
    idle_since: Option<SimTime>,
    /// The transmission time of a typical packet (a full-size frame).
    typical: Option<SimDuration>,
}

/// What RED decides for an arrival.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Keep,
    Congested,
}

impl Red {
    /// RED with `r`'s parameters and `spec`'s limits, on the line `dir`,
    /// drawing from `rng`.
    pub fn new(spec: &QueueSpec, r: RedSpec, dir: &DirectionSpec, rng: RngStream) -> Red {
        let typical = dir.nominal_bps().map(|bps| {
            let frame = dir.mtu as u64 + crate::link::ETH_HEADER as u64 + dir.overhead as u64;
            SimDuration::from_nanos((frame * 8 * 1_000_000_000).div_ceil(bps.max(1)))
        });
        Red {
            q: Fifo::default(),
            p: r,
            limits: Limits::of(spec),
            rng,
            avg: 0.0,
            count: -1,
            idle_since: Some(SimTime::ZERO),
            typical,
        }
    }

    /// The paper's arrival step: update the average, then decide.
    fn arrive(&mut self, now: SimTime) -> Verdict {
        let w = self.p.weight;
        match self.idle_since {
            Some(since) if self.q.is_empty() => {
                let m = match self.typical {
                    Some(t) if t.as_nanos() > 0 => {
                        (now - since).as_nanos() as f64 / t.as_nanos() as f64
                    }
                    _ => 0.0,
                };
                self.avg *= (1.0 - w).powf(m);
                // The idle period ends with this arrival, taken or not (one
                // refused leaves the queue empty: the next decays from here).
                self.idle_since = Some(now);
            }
            _ => self.avg = (1.0 - w) * self.avg + w * self.q.packets as f64,
        }
        let (min, max, max_p) = (self.p.min_threshold, self.p.max_threshold, self.p.max_p);
        let p_b = if self.avg < min {
            self.count = -1;
            return Verdict::Keep;
        } else if self.avg < max {
            max_p * (self.avg - min) / (max - min)
        } else if self.p.gentle && self.avg < 2.0 * max {
            max_p + (1.0 - max_p) * (self.avg - max) / max
        } else {
            self.count = 0;
            return Verdict::Congested;
        };
        self.count += 1;
        let spread = 1.0 - self.count as f64 * p_b;
        let p_a = if spread <= 0.0 {
            1.0
        } else {
            (p_b / spread).min(1.0)
        };
        if self.rng.chance(p_a) {
            self.count = 0;
            Verdict::Congested
        } else {
            Verdict::Keep
        }
    }
}

impl QueueDisc for Red {
    fn enqueue(
        &mut self,
        now: SimTime,
        mut frame: Frame,
        sink: &mut Sink,
    ) -> Result<(), (Frame, DropReason)> {
        if self.arrive(now) == Verdict::Congested {
            if !(self.p.ecn && mark_ce(&mut frame)) {
                return Err((frame, DropReason::AqmDrop));
            }
            sink.ecn_marked += 1;
        }
        if !self.limits.fits(self.q.packets, self.q.bytes, &frame) {
            return Err((frame, DropReason::QueueFull));
        }
        self.q.push(now, frame);
        self.idle_since = None;
        Ok(())
    }
    fn dequeue(&mut self, now: SimTime, sink: &mut Sink) -> Option<Frame> {
        let e = self.q.pop()?;
        if self.q.is_empty() {
            self.idle_since = Some(now);
        }
        sink.sojourn = Some(now - e.at);
        Some(e.frame)
    }
    fn len(&self) -> usize {
        self.q.packets
    }
    fn bytes(&self) -> u64 {
        self.q.bytes
    }
    fn clear(&mut self) -> usize {
        // A fresh start, as Linux's red_restart: no average or count
        // survives an outage.
        self.avg = 0.0;
        self.count = -1;
        self.idle_since = None;
        self.q.clear()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::packet::tests::udp;

    /// RED whose average is the instantaneous length (weight 1), so that
    /// the queue length alone says what it does.
    fn red(gentle: bool, ecn: bool) -> Red {
        let spec = QueueSpec {
            packets: None,
            ..QueueSpec::default()
        };
        let r = RedSpec {
            weight: 1.0,
            gentle,
            ecn,
            ..RedSpec::default()
        };
        Red::new(
            &spec,
            r,
            &DirectionSpec::default(),
            RngStream::new(1, "red"),
        )
    }

    /// Offers `n` frames at once; returns how many were refused, and why.
    fn offer(q: &mut Red, n: usize, tos: u8) -> (usize, Sink) {
        let mut sink = Sink::default();
        let refused = (0..n)
            .filter(|_| {
                q.enqueue(SimTime::ZERO, Frame::copy_from(&udp(tos, 1)), &mut sink)
                    .map_err(|(_, r)| assert_eq!(r, DropReason::AqmDrop))
                    .is_err()
            })
            .count();
        (refused, sink)
    }

    #[test]
    fn below_min_nothing_above_max_everything_between_some() {
        let mut q = red(false, false);
        // Up to min_th (5) packets: never dropped.
        assert_eq!(offer(&mut q, 6, 0).0, 0);
        // From 5 to 15 the probability grows to max_p, spread by count:
        // some of the next arrivals are dropped, not all.
        let (dropped, _) = offer(&mut q, 20, 0);
        assert!(dropped > 0 && dropped < 20, "{dropped}");
        // At or above max_th (15) with gentle off: every arrival.
        while q.len() < 15 {
            q.q.push(SimTime::ZERO, Frame::copy_from(&udp(0, 1)));
        }
        assert_eq!(offer(&mut q, 10, 0).0, 10);
    }

    #[test]
    fn gentle_red_still_admits_some_above_max() {
        let mut q = red(true, false);
        for _ in 0..20 {
            q.q.push(SimTime::ZERO, Frame::copy_from(&udp(0, 1)));
        }
        // Average 20: p_b = 0.1 + 0.9 × 5 / 15 = 0.4.
        let (dropped, _) = offer(&mut q, 1000, 0);
        assert!(dropped > 300 && dropped < 1000, "{dropped}");
    }

    #[test]
    fn with_ecn_capable_packets_are_marked_instead() {
        let mut q = red(false, true);
        for _ in 0..20 {
            q.q.push(SimTime::ZERO, Frame::copy_from(&udp(0, 1)));
        }
        let (refused, sink) = offer(&mut q, 10, 0b01);
        assert_eq!((refused, sink.ecn_marked), (0, 10));
        let (refused, sink) = offer(&mut q, 10, 0);
        assert_eq!((refused, sink.ecn_marked), (10, 0));
    }

    #[test]
    fn an_outage_resets_the_average() {
        let mut q = red(false, false);
        q.p.weight = 0.5;
        for _ in 0..40 {
            q.q.push(SimTime::ZERO, Frame::copy_from(&udp(0, 1)));
        }
        offer(&mut q, 10, 0);
        assert!(q.avg > 15.0);
        q.clear();
        // Back up, an empty queue: nothing is dropped for an old average.
        assert_eq!(offer(&mut q, 3, 0).0, 0);
    }

    #[test]
    fn an_idle_period_is_counted_once() {
        // 1 Mbit/s: a typical (1 514 + 24 byte) frame takes 12.304 ms.
        let dir = DirectionSpec {
            rate: Some(netloop_core::DataRate::from_mbps(1)),
            ..DirectionSpec::default()
        };
        let spec = QueueSpec::default();
        let r = RedSpec {
            weight: 0.5,
            gentle: false,
            ..RedSpec::default()
        };
        let mut q = Red::new(&spec, r, &dir, RngStream::new(1, "red"));
        let typical = q.typical.unwrap();
        q.avg = 40.0;
        q.idle_since = Some(SimTime::ZERO);
        let mut sink = Sink::default();
        // One typical frame's time idle: the average halves to 20, above
        // max_th: refused, and the queue stays empty.
        let t1 = SimTime::ZERO + typical;
        assert!(q
            .enqueue(t1, Frame::copy_from(&udp(0, 1)), &mut sink)
            .is_err());
        assert_eq!(q.avg, 20.0);
        // One more: halved once more from 20 (not twice from 40's start).
        let _ = q.enqueue(t1 + typical, Frame::copy_from(&udp(0, 1)), &mut sink);
        assert_eq!(q.avg, 10.0);
    }
}
