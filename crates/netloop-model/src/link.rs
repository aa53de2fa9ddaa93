//! Point-to-point, full-duplex links: a transmit queue, a transmitter that
//! serialises frames at the line rate, and a channel that adds propagation
//! delay, jitter, loss, corruption and duplication.
//!
//! Each direction is independent ([`LinkDir`]) with its own parameters, queue,
//! counters and random stream. Timing follows ns-3's point-to-point model: a
//! frame occupies the transmitter for `(len + overhead) * 8 / rate` (len padded
//! to Ethernet's 60-byte minimum; overhead is preamble, FCS and inter-frame gap)
//! and arrives `delay (+ jitter)` after its last bit left. Loss, corruption and
//! duplication happen on the wire, after the frame has used its transmission
//! time — as on a real medium, and unlike netem, which drops before queueing.
//!
//! This module decides *what* happens to a frame; `network` schedules the
//! events that make it happen.

use netloop_core::{DataRate, RngStream, SimDuration, SimTime};
use rand_distr::{Distribution, Normal};

use crate::qdisc::{self, QueueDisc};
use crate::spec::{DirectionSpec, JitterDistribution, LinkChange, LossSpec};
use crate::stats::DirStats;
use crate::trace::TraceCursor;
use crate::wire::Wire;
use crate::{Frame, NodeId, PortId};

/// Ethernet's minimum frame size without FCS; shorter frames are padded on
/// the wire.
pub const MIN_FRAME: u64 = 60;
/// Ethernet header length (no VLAN tag).
pub const ETH_HEADER: usize = 14;
/// Length of an IEEE 802.1Q (or 802.1ad) tag.
pub const VLAN_TAG: usize = 4;

/// The longest frame (without FCS) a link of MTU `mtu` carries when it is
/// `frame`: the MTU plus the Ethernet header, plus one tag if the frame is
/// 802.1Q/802.1ad-tagged — IEEE 802.3's 1518-byte Q-tagged frame, whose
/// payload after the tag is still at most the MTU.
pub fn max_frame_len(mtu: u32, frame: &[u8]) -> usize {
    let tagged = frame.len() >= ETH_HEADER
        && matches!(u16::from_be_bytes([frame[12], frame[13]]), 0x8100 | 0x88a8);
    mtu as usize + ETH_HEADER + if tagged { VLAN_TAG } else { 0 }
}

/// The impairment model of one direction: timing and randomness.
///
/// Laid out for the frame that meets no impairment, the common case of a
/// network with thousands of links: what it reads (`Line`: the rate, the
/// delay, the MTU, the overhead, and that nothing else applies) lies in the
/// channel itself, at the start of its direction's first cache line. The
/// full parameters, a trace's cursor, the random stream and the state of the
/// impairments live in an allocation of their own (`Impairments`), which
/// only a frame that an impairment may touch reads: with them in line a
/// direction's channel spread over five lines, each a miss per frame sent.
#[repr(C)]
pub struct Channel {
    line: Line,
    slow: Box<Impairments>,
}

/// What a frame reads of a channel without impairments: a copy of four of
/// its parameters, made again whenever they change (`Channel::new`,
/// `Channel::apply`, the only writers of the parameters).
#[derive(Clone, Copy, Debug)]
struct Line {
    rate: Option<DataRate>,
    delay: SimDuration,
    mtu: u32,
    overhead: u32,
    /// No trace, no jitter, no loss, no corruption, no duplication: a
    /// frame's time on the wire and its arrival follow from the four
    /// above, and nothing is drawn (the random stream is left as each
    /// draw's zero probability would leave it).
    plain: bool,
}

impl Line {
    fn of(spec: &DirectionSpec, traced: bool) -> Line {
        Line {
            rate: spec.rate,
            delay: spec.delay,
            mtu: spec.mtu,
            overhead: spec.overhead,
            // `RngStream::chance` draws nothing for a probability of zero
            // or less: such a direction draws nothing today either. (A
            // NaN draws, so it is not plain.)
            plain: !traced
                && spec.trace.is_none()
                && spec.jitter.is_none()
                && matches!(spec.loss, LossSpec::None)
                && spec.corrupt <= 0.0
                && spec.duplicate <= 0.0,
        }
    }
}

/// What only an impaired frame reads: out of line (see [`Channel`]).
struct Impairments {
    /// Current parameters.
    spec: DirectionSpec,
    /// Where the transmitter stands in `spec.trace`, if it follows one.
    trace: Option<TraceCursor>,
    rng: RngStream,
    /// Gilbert–Elliott state: true in the bad state.
    ge_bad: bool,
    /// Arrival time of the last frame, for jitter without reordering.
    last_arrival: SimTime,
}

impl Channel {
    /// A channel with parameters `spec` drawing from `rng`.
    pub fn new(spec: DirectionSpec, rng: RngStream) -> Self {
        let trace = spec.trace.as_ref().map(TraceCursor::new);
        Channel {
            line: Line::of(&spec, trace.is_some()),
            slow: Box::new(Impairments {
                trace,
                spec,
                rng,
                ge_bad: false,
                last_arrival: SimTime::ZERO,
            }),
        }
    }

    /// The current parameters.
    pub fn spec(&self) -> &DirectionSpec {
        &self.slow.spec
    }

    /// The MTU (read for every frame offered: from the line).
    #[inline]
    pub fn mtu(&self) -> u32 {
        self.line.mtu
    }

    /// The propagation delay, without jitter.
    #[inline]
    pub fn delay(&self) -> SimDuration {
        self.line.delay
    }

    /// Time the transmitter is busy with a frame of `len` bytes.
    pub fn tx_time(&self, len: usize) -> SimDuration {
        match self.line.rate {
            None => SimDuration::ZERO,
            Some(rate) => rate.tx_time((len as u64).max(MIN_FRAME) + self.line.overhead as u64),
        }
    }

    /// Whether the loss model loses the next frame (advancing its state).
    pub fn lose(&mut self) -> bool {
        if self.line.plain {
            return false;
        }
        let s = &mut *self.slow;
        match s.spec.loss {
            LossSpec::None => false,
            LossSpec::Bernoulli { p } => s.rng.chance(p),
            LossSpec::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                // Loss is decided in the current state, then the state moves:
                // a bad period of n frames is then exactly n consecutive
                // bad-state frames, with mean length 1/r.
                let lost = s.rng.chance(if s.ge_bad { loss_bad } else { loss_good });
                s.ge_bad = if s.ge_bad {
                    !s.rng.chance(r)
                } else {
                    s.rng.chance(p)
                };
                lost
            }
        }
    }

    /// Arrival time of a frame whose last bit left at `now`.
    pub fn arrival(&mut self, now: SimTime) -> SimTime {
        let base = now + self.line.delay;
        if self.line.plain {
            return base;
        }
        let s = &mut *self.slow;
        let Some(j) = &s.spec.jitter else {
            // Without jitter arrivals are already in order.
            return base;
        };
        let a = j.amount.as_nanos() as f64;
        let offset_ns: f64 = match j.distribution {
            JitterDistribution::Uniform => (s.rng.uniform() * 2.0 - 1.0) * a,
            JitterDistribution::Normal => Normal::new(0.0, a)
                .map(|n| n.sample(&mut s.rng))
                .unwrap_or(0.0),
            JitterDistribution::Pareto => {
                // Lomax (Pareto type II) with shape 3 and mean `a`: scale 2a.
                let u = 1.0 - s.rng.uniform();
                2.0 * a * (u.powf(-1.0 / 3.0) - 1.0)
            }
        };
        let t = (base.as_nanos() as f64 + offset_ns).max(now.as_nanos() as f64);
        let mut at = SimTime::from_nanos(t.round() as u64);
        if !j.reorder && at < s.last_arrival {
            at = s.last_arrival;
        }
        s.last_arrival = s.last_arrival.max(at);
        at
    }

    /// Flips one random bit with the corruption probability; says whether it did.
    pub fn corrupt(&mut self, frame: &mut Frame) -> bool {
        match self.corrupt_bit(frame.len()) {
            Some(bit) => {
                frame[(bit / 8) as usize] ^= 1 << (bit % 8);
                true
            }
            None => false,
        }
    }

    /// Which bit of a frame of `len` bytes to flip, if corruption strikes
    /// it: [`Channel::corrupt`]'s draws, for a segment of a super-frame
    /// before it is cut.
    pub fn corrupt_bit(&mut self, len: usize) -> Option<u64> {
        let s = &mut *self.slow;
        if self.line.plain || len == 0 || !s.rng.chance(s.spec.corrupt) {
            return None;
        }
        Some(s.rng.below(len as u64 * 8))
    }

    /// Whether super-frames must be cut before this direction: each
    /// segment would leave at its own time (a rate) or arrive with its own
    /// delay (jitter), as on the wire.
    pub fn cuts_super_frames(&self) -> bool {
        self.line.rate.is_some()
            || (!self.line.plain
                && (self.slow.spec.trace.is_some() || self.slow.spec.jitter.is_some()))
    }

    /// When the transmitter, starting `frame` at `now`, has sent its last
    /// bit: after its time at the line rate, or where the trace says.
    /// `waited`: the frame waited in the queue for the frame before it,
    /// which finished at `now` (a trace may give it what that one left).
    pub fn tx_end(&mut self, now: SimTime, frame: &Frame, waited: bool) -> SimTime {
        if self.line.plain {
            return now + self.tx_time_of(frame);
        }
        let overhead = self.line.overhead;
        let Some(cursor) = &mut self.slow.trace else {
            return now + self.tx_time_of(frame);
        };
        // A super-frame is cut before a traced direction; its segments
        // are counted one by one should one get here.
        let bytes = match frame.meta.gso {
            None => cursor.cost(frame.len(), overhead),
            Some(g) => (0..usize::from(g.segs))
                .map(|i| cursor.cost(g.seg_len(frame.len(), i), overhead))
                .sum(),
        };
        cursor.finish(now, bytes, waited)
    }

    /// Time the transmitter is busy with `frame` (each of a super-frame's
    /// segments as a frame of its own).
    pub fn tx_time_of(&self, frame: &Frame) -> SimDuration {
        match frame.meta.gso {
            None => self.tx_time(frame.len()),
            Some(g) => {
                let full = self.tx_time(usize::from(g.hdr_len) + usize::from(g.size));
                let last = self.tx_time(g.seg_len(frame.len(), usize::from(g.segs) - 1));
                SimDuration::from_nanos(full.as_nanos() * (u64::from(g.segs) - 1)) + last
            }
        }
    }

    /// Whether to deliver an extra copy of the frame.
    pub fn duplicate(&mut self) -> bool {
        !self.line.plain && self.slow.rng.chance(self.slow.spec.duplicate)
    }

    /// Applies a run-time change.
    pub fn apply(&mut self, c: &LinkChange) {
        let s = &mut *self.slow;
        s.spec.apply(c);
        if c.rate.is_some() {
            s.trace = None;
        }
        if c.loss.is_some() {
            s.ge_bad = false;
        }
        self.line = Line::of(&s.spec, s.trace.is_some());
    }
}

/// One direction of a link.
///
/// Laid out in declaration order (`repr(C)`), what every frame reads first:
/// the channel's line (its impairments out of line), the transmitter, the
/// wire, the first counters, in the first four cache lines. A frame sent
/// that is neither queued nor dropped reads them and no more (`TX_HOT`;
/// one that queues or is dropped also writes the queue's or the drops'
/// counters after them, and an impaired one reads the channel's
/// impairments), one arriving the last three (`RX_HOT`): the
/// lines the scheduler's prefetch hint loads before a host's timer (whose
/// datagram the host sends on its one link) and before an arrival
/// ([`netloop_core::Model::prefetch`]). Left to the compiler, a direction's
/// 16 lines had the wire in the eleventh and whether it is up in the
/// sixteenth; with the channel's parameters in line, a frame sent read
/// eight.
#[repr(C, align(64))]
pub struct LinkDir {
    /// Timing and impairments.
    pub channel: Channel,
    /// When the transmitter is free again: the moment the last bit of the
    /// frame it serialises leaves. A frame's fate on the wire is settled
    /// (and its arrival scheduled) when its transmission starts, so no
    /// event marks the end of a transmission unless frames wait in the
    /// queue for it (see `wake_pending`).
    pub busy_until: SimTime,
    /// Frames (segments) of the one being serialised that the wire will
    /// deliver, until `busy_until`: counted as transmitting, not on the
    /// wire, though their arrival is already scheduled.
    pub tx_segs: u64,
    /// A `TxDone` event is due at `busy_until` to start the next frame
    /// from the queue.
    pub wake_pending: bool,
    /// Whether the direction is up.
    pub up: bool,
    /// Bumped when the link goes down, so that events for frames that were on
    /// the wire or in the transmitter at that moment are recognised as stale.
    pub epoch: u32,
    /// The receiving end.
    pub to: (NodeId, PortId),
    /// Frames waiting for the transmitter.
    pub queue: Box<dyn QueueDisc>,
    /// The frames propagating on the wire, in arrival order.
    pub wire: Wire,
    /// Counters (the ones every frame counts first).
    pub stats: DirStats,
}

/// The bytes of a [`LinkDir`] that a frame sent reads when it is neither
/// queued nor dropped and meets no impairment (its channel's line, the
/// transmitter, the wire, the offered and sent counters): four lines.
pub const TX_HOT: std::ops::Range<usize> = 0..std::mem::offset_of!(LinkDir, stats)
    + std::mem::offset_of!(crate::stats::DirStats, sent_bytes)
    + std::mem::size_of::<u64>();

/// The bytes of a [`LinkDir`] that a frame's arrival reads, from its epoch
/// to the received counters: three lines (the channel's line and the
/// transmitter are the sender's).
pub const RX_HOT: std::ops::Range<usize> = std::mem::offset_of!(LinkDir, epoch)
    ..std::mem::offset_of!(LinkDir, stats)
        + std::mem::offset_of!(crate::stats::DirStats, received_bytes)
        + std::mem::size_of::<u64>();

impl LinkDir {
    /// A direction delivering to `to`.
    pub fn new(
        spec: DirectionSpec,
        rng: RngStream,
        queue_rng: RngStream,
        to: (NodeId, PortId),
    ) -> Self {
        let queue = qdisc::from_spec(&spec, queue_rng);
        LinkDir {
            channel: Channel::new(spec, rng),
            queue,
            busy_until: SimTime::ZERO,
            tx_segs: 0,
            wake_pending: false,
            wire: Wire::default(),
            up: true,
            epoch: 0,
            stats: DirStats::default(),
            to,
        }
    }

    /// Records the queue's occupancy for the high-water marks.
    pub fn note_queue(&mut self) {
        let s = &mut self.stats;
        s.queue_high_water_packets = s.queue_high_water_packets.max(self.queue.len() as u64);
        s.queue_high_water_bytes = s.queue_high_water_bytes.max(self.queue.bytes());
    }
}

/// A full-duplex link between two node ports.
pub struct Link {
    /// Unique name.
    pub name: String,
    /// The two ends: `ends[0]` is `a`, `ends[1]` is `b`.
    pub ends: [(NodeId, PortId); 2],
    /// `dirs[0]` is a → b, `dirs[1]` is b → a.
    pub dirs: [LinkDir; 2],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::JitterSpec;
    use netloop_core::DataRate;

    fn chan(spec: DirectionSpec) -> Channel {
        Channel::new(spec, RngStream::new(1, "test"))
    }

    /// What a frame sent reads of a direction lies in the four lines the
    /// hint before a host's timer loads (`TX_HOT`), what an arrival reads
    /// in the three its hint loads (`RX_HOT`), and a direction starts a
    /// line.
    #[test]
    fn a_frames_fields_are_in_the_hinted_lines() {
        use std::mem::{align_of, offset_of, size_of};
        assert_eq!(align_of::<LinkDir>(), 64);
        let stat = |at: usize| offset_of!(LinkDir, stats) + at;
        let wire = (offset_of!(LinkDir, wire), size_of::<crate::wire::Wire>());
        let epoch = (offset_of!(LinkDir, epoch), size_of::<u32>());
        // What a frame sent reads: the channel's line (not its
        // impairments), the transmitter, the wire, the counters; a field
        // of these moved past the sent counters would leave the span.
        for (at, len) in [
            (offset_of!(LinkDir, channel), size_of::<Channel>()),
            (offset_of!(LinkDir, busy_until), size_of::<SimTime>()),
            (offset_of!(LinkDir, tx_segs), size_of::<u64>()),
            (offset_of!(LinkDir, wake_pending), 1),
            (offset_of!(LinkDir, up), 1),
            epoch,
            wire,
            (stat(offset_of!(DirStats, offered_packets)), 8),
            (stat(offset_of!(DirStats, sent_packets)), 8),
            (stat(offset_of!(DirStats, sent_bytes)), 8),
        ] {
            // (TX_HOT starts at the direction's first byte.)
            assert!(at + len <= TX_HOT.end, "byte {at} outside {TX_HOT:?}");
        }
        assert!(TX_HOT.end.div_ceil(64) <= 4, "{TX_HOT:?}");
        // What an arrival reads: the epoch, the receiving end, the wire,
        // the received counters, in three lines.
        for (at, len) in [
            epoch,
            (offset_of!(LinkDir, to), size_of::<(NodeId, PortId)>()),
            wire,
            (stat(offset_of!(DirStats, received_packets)), 8),
            (stat(offset_of!(DirStats, received_bytes)), 8),
        ] {
            assert!(
                RX_HOT.start <= at && at + len <= RX_HOT.end,
                "byte {at} outside {RX_HOT:?}"
            );
        }
        assert!(
            RX_HOT.end.div_ceil(64) - RX_HOT.start / 64 <= 3,
            "{RX_HOT:?}"
        );
    }

    /// Only a channel without any impairment takes the line's short way,
    /// and a change at run time reaches the line (it is a copy).
    #[test]
    fn the_line_follows_the_parameters() {
        let plain = DirectionSpec {
            rate: Some(DataRate::from_mbps(1000)),
            delay: SimDuration::from_millis(1),
            ..DirectionSpec::default()
        };
        assert!(chan(plain.clone()).line.plain);
        let jitter = Some(JitterSpec {
            amount: SimDuration::from_millis(1),
            distribution: JitterDistribution::Uniform,
            reorder: true,
        });
        for impaired in [
            DirectionSpec {
                jitter,
                ..plain.clone()
            },
            DirectionSpec {
                loss: LossSpec::Bernoulli { p: 0.0 },
                ..plain.clone()
            },
            DirectionSpec {
                corrupt: 0.5,
                ..plain.clone()
            },
            DirectionSpec {
                duplicate: 0.5,
                ..plain.clone()
            },
            DirectionSpec {
                corrupt: f64::NAN,
                ..plain.clone()
            },
        ] {
            assert!(!chan(impaired.clone()).line.plain, "{impaired:?}");
        }

        let mut c = chan(plain);
        let now = SimTime::from_nanos(1_000);
        assert!(!c.lose());
        c.apply(&LinkChange {
            rate: Some(Some(DataRate::from_mbps(100))),
            delay: Some(SimDuration::from_millis(7)),
            loss: Some(LossSpec::Bernoulli { p: 1.0 }),
            duplicate: Some(1.0),
            ..LinkChange::default()
        });
        // 1538 bytes at 100 Mbit/s.
        assert_eq!(c.tx_time(1514).as_nanos(), 123_040);
        assert_eq!(c.arrival(now), now + SimDuration::from_millis(7));
        assert!(c.lose());
        assert!(c.duplicate());
        c.apply(&LinkChange {
            loss: Some(LossSpec::None),
            duplicate: Some(0.0),
            ..LinkChange::default()
        });
        assert!(c.line.plain);
        assert!(!c.lose() && !c.duplicate());
        assert_eq!(c.delay(), SimDuration::from_millis(7));
    }

    #[test]
    fn tx_time_counts_overhead_and_padding() {
        let c = chan(DirectionSpec {
            rate: Some(DataRate::from_mbps(1000)),
            ..DirectionSpec::default()
        });
        // 1514-byte frame + 24 overhead = 1538 bytes = 12304 ns at 1 Gbit/s.
        assert_eq!(c.tx_time(1514).as_nanos(), 12_304);
        // A 42-byte ARP frame is padded to 60: 84 bytes = 672 ns.
        assert_eq!(c.tx_time(42).as_nanos(), 672);
        assert_eq!(
            chan(DirectionSpec::default()).tx_time(1514),
            SimDuration::ZERO
        );
    }

    #[test]
    fn jitter_without_reorder_keeps_order() {
        let mut c = chan(DirectionSpec {
            delay: SimDuration::from_millis(10),
            jitter: Some(JitterSpec {
                amount: SimDuration::from_millis(5),
                distribution: JitterDistribution::Uniform,
                reorder: false,
            }),
            ..DirectionSpec::default()
        });
        // Dense traffic (a frame every 100 us against ±5 ms of jitter): a
        // frame never overtakes the one before it.
        let mut last = SimTime::ZERO;
        for i in 0..10_000u64 {
            let at = c.arrival(SimTime::from_nanos(i * 100_000));
            assert!(at >= last, "reordered");
            last = at;
        }
        // Sparse traffic (every 20 ms): jitter spreads delays over ±5 ms.
        let mut c = chan(c.spec().clone());
        let mut spread = (u64::MAX, 0);
        for i in 0..1_000u64 {
            let now = SimTime::from_nanos(i * 20_000_000);
            let d = (c.arrival(now) - now).as_nanos();
            spread = (spread.0.min(d), spread.1.max(d));
        }
        assert!(
            spread.0 >= 5_000_000 && spread.1 <= 15_000_000,
            "{spread:?}"
        );
        assert!(
            spread.1 - spread.0 > 9_000_000,
            "jitter has too little effect: {spread:?}"
        );
    }

    #[test]
    fn a_tagged_frame_may_carry_a_full_mtu_payload() {
        let frame = |ethertype: u16, len: usize| {
            let mut f = vec![0u8; len];
            f[12..14].copy_from_slice(&ethertype.to_be_bytes());
            f
        };
        assert_eq!(max_frame_len(1500, &frame(0x0800, 1514)), 1514);
        assert_eq!(max_frame_len(1500, &frame(0x8100, 1518)), 1518);
        assert_eq!(max_frame_len(1500, &frame(0x88a8, 1518)), 1518);
        assert_eq!(max_frame_len(9000, &frame(0x8100, 60)), 9018);
        // Too short to say: untagged.
        assert_eq!(max_frame_len(1500, &[0x81, 0x00]), 1514);
    }

    #[test]
    fn gilbert_elliott_with_certain_states_alternates_bursts() {
        let mut c = chan(DirectionSpec {
            loss: LossSpec::GilbertElliott {
                p: 1.0,
                r: 1.0,
                loss_good: 0.0,
                loss_bad: 1.0,
            },
            ..DirectionSpec::default()
        });
        let pattern: Vec<bool> = (0..6).map(|_| c.lose()).collect();
        assert_eq!(pattern, [false, true, false, true, false, true]);
    }
}
