//! Queue disciplines: what waits in front of a link's transmitter.
//!
//! One small trait, [`QueueDisc`], behind which drop-tail, RED
//! ([`red`]), CoDel ([`codel`]) and FQ-CoDel ([`fq_codel`]) sit without
//! the link knowing which. A discipline is given the current time on every
//! call (CoDel acts on sojourn times) and never reads a clock; what it
//! drops or marks it reports in a [`Sink`], which the link turns into its
//! counters, so every frame stays accounted for. Random draws (RED's) come
//! from the direction's own stream: runs are deterministic.

use netloop_core::{SimDuration, SimTime};
use std::collections::VecDeque;

use crate::spec::{DirectionSpec, QueueDiscipline, QueueSpec};
use crate::stats::DropReason;
use crate::Frame;

mod codel;
mod fq_codel;
pub mod packet;
mod red;

pub use codel::Codel;
pub use fq_codel::FqCodel;
pub use red::Red;

/// What a discipline did besides queueing and handing out frames: the
/// frames it dropped (an AQM drops at dequeue, FQ-CoDel on overflow drops
/// from another flow than the arriving packet's), the packets it marked,
/// and how long the frame it handed out had waited. The link drains it
/// into its counters after every call.
#[derive(Debug, Default)]
pub struct Sink {
    /// Frames dropped, each with its reason (their segments: wire frames).
    pub dropped: Vec<(u64, DropReason)>,
    /// Packets marked Congestion Experienced instead of being dropped.
    pub ecn_marked: u64,
    /// How long the frame just dequeued had waited.
    pub sojourn: Option<SimDuration>,
}

impl Sink {
    fn drop(&mut self, frame: Frame, reason: DropReason) {
        self.dropped.push((frame.segs(), reason));
    }
}

/// A queue of frames waiting for the transmitter.
pub trait QueueDisc: Send {
    /// Offers a frame (a super-frame whole, counted as its segments); gives
    /// it back with the reason if it is refused. Other frames the
    /// discipline drops to make room go to `sink`.
    fn enqueue(
        &mut self,
        now: SimTime,
        frame: Frame,
        sink: &mut Sink,
    ) -> Result<(), (Frame, DropReason)>;
    /// Takes the next frame to transmit; frames dropped on the way, and the
    /// sojourn of the one taken, go to `sink`.
    fn dequeue(&mut self, now: SimTime, sink: &mut Sink) -> Option<Frame>;
    /// Wire frames waiting (a super-frame's segments each count).
    fn len(&self) -> usize;
    /// Whether nothing is waiting.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Wire bytes waiting.
    fn bytes(&self) -> u64;
    /// Removes everything (e.g. when the link goes down), returning how many
    /// wire frames were removed.
    fn clear(&mut self) -> usize;
}

/// A frame in a queue, with when it arrived (every discipline measures the
/// sojourn; CoDel acts on it).
pub(crate) struct Entry {
    pub(crate) at: SimTime,
    pub(crate) frame: Frame,
}

/// A first-in first-out line of entries with its packet and byte counts:
/// the storage of every discipline (FQ-CoDel has one per flow).
#[derive(Default)]
pub(crate) struct Fifo {
    entries: VecDeque<Entry>,
    pub(crate) packets: usize,
    pub(crate) bytes: u64,
}

impl Fifo {
    pub(crate) fn push(&mut self, at: SimTime, frame: Frame) {
        self.packets += frame.segs() as usize;
        self.bytes += frame.wire_len();
        self.entries.push_back(Entry { at, frame });
    }
    pub(crate) fn pop(&mut self) -> Option<Entry> {
        let e = self.entries.pop_front()?;
        self.packets -= e.frame.segs() as usize;
        self.bytes -= e.frame.wire_len();
        Some(e)
    }
    pub(crate) fn clear(&mut self) -> usize {
        let n = self.packets;
        self.entries.clear();
        self.packets = 0;
        self.bytes = 0;
        n
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The limits every discipline keeps: at most so many packets and bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) packets: usize,
    pub(crate) bytes: u64,
}

impl Limits {
    pub(crate) fn of(spec: &QueueSpec) -> Limits {
        Limits {
            packets: spec.packets.map_or(usize::MAX, |p| p as usize),
            bytes: spec.bytes.map_or(u64::MAX, |b| b.get()),
        }
    }
    /// Whether `frame` fits beside `packets` and `bytes` already held.
    pub(crate) fn fits(&self, packets: usize, bytes: u64, frame: &Frame) -> bool {
        packets + frame.segs() as usize <= self.packets && bytes + frame.wire_len() <= self.bytes
    }
}

/// First in, first out, dropping arrivals that exceed a packet or byte limit.
/// A super-frame counts as its segments and their wire bytes, and is taken
/// only whole (the link cuts one that does not fit and offers its segments).
pub struct DropTail {
    q: Fifo,
    limits: Limits,
}

impl DropTail {
    /// A queue with the given limits (`None` = no limit of that kind).
    pub fn new(spec: &QueueSpec) -> Self {
        DropTail {
            q: Fifo::default(),
            limits: Limits::of(spec),
        }
    }
}

impl QueueDisc for DropTail {
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
        let e = self.q.pop()?;
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
        self.q.clear()
    }
}

/// Builds the discipline a direction's spec asks for; `rng` is the
/// discipline's own random stream (RED's draws).
pub fn from_spec(dir: &DirectionSpec, rng: netloop_core::RngStream) -> Box<dyn QueueDisc> {
    let spec = &dir.queue;
    // The largest frame the line carries: CoDel's "MTU" (a queue holding no
    // more than one such frame is never a standing queue).
    let max_frame = dir.mtu as u64 + crate::link::ETH_HEADER as u64 + crate::link::VLAN_TAG as u64;
    match spec.discipline {
        QueueDiscipline::DropTail => Box::new(DropTail::new(spec)),
        QueueDiscipline::Red(r) => Box::new(Red::new(spec, r, dir, rng)),
        QueueDiscipline::Codel(c) => Box::new(Codel::new(spec, c, max_frame)),
        QueueDiscipline::FqCodel(f) => Box::new(FqCodel::new(spec, f, max_frame)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netloop_core::Bytes;

    #[test]
    fn drop_tail_limits_packets_and_bytes() {
        let mut q = DropTail::new(&QueueSpec {
            packets: Some(2),
            bytes: Some(Bytes::new(250)),
            ..QueueSpec::default()
        });
        let t = SimTime::ZERO;
        let s = &mut Sink::default();
        assert!(q.enqueue(t, Frame::from(vec![0; 100]), s).is_ok());
        assert_eq!(
            q.enqueue(t, Frame::from(vec![0; 200]), s).unwrap_err().1,
            DropReason::QueueFull
        );
        assert!(q.enqueue(t, Frame::from(vec![1; 100]), s).is_ok());
        assert_eq!(
            q.enqueue(t, Frame::from(vec![0; 10]), s).unwrap_err().1,
            DropReason::QueueFull
        );
        assert_eq!((q.len(), q.bytes()), (2, 200));
        let later = t + SimDuration::from_micros(7);
        assert_eq!(q.dequeue(later, s).unwrap()[0], 0);
        assert_eq!(s.sojourn, Some(SimDuration::from_micros(7)));
        assert_eq!(q.dequeue(later, s).unwrap()[0], 1);
        assert!(q.dequeue(later, s).is_none());
    }
}
