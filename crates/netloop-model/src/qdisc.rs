//! Queue disciplines: what waits in front of a link's transmitter.
//!
//! One small trait, [`QueueDisc`], so that RED, CoDel and FQ-CoDel can follow
//! drop-tail without touching the link. A discipline is given the current
//! time on every call (CoDel needs sojourn times) and never reads a clock.

use netloop_core::SimTime;
use std::collections::VecDeque;

use crate::spec::QueueSpec;
use crate::stats::DropReason;
use crate::Frame;

/// A queue of frames waiting for the transmitter.
pub trait QueueDisc: Send {
    /// Offers a frame (a super-frame whole, counted as its segments); gives
    /// it back with the reason if it is refused.
    fn enqueue(&mut self, now: SimTime, frame: Frame) -> Result<(), (Frame, DropReason)>;
    /// Takes the next frame to transmit.
    fn dequeue(&mut self, now: SimTime) -> Option<Frame>;
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

/// First in, first out, dropping arrivals that exceed a packet or byte limit.
/// A super-frame counts as its segments and their wire bytes, and is taken
/// only whole (the link cuts one that does not fit and offers its segments).
pub struct DropTail {
    frames: VecDeque<Frame>,
    packets: usize,
    bytes: u64,
    limit_packets: usize,
    limit_bytes: u64,
}

impl DropTail {
    /// A queue with the given limits (`None` = no limit of that kind).
    pub fn new(spec: &QueueSpec) -> Self {
        DropTail {
            frames: VecDeque::new(),
            packets: 0,
            bytes: 0,
            limit_packets: spec.packets.map_or(usize::MAX, |p| p as usize),
            limit_bytes: spec.bytes.map_or(u64::MAX, |b| b.get()),
        }
    }
}

impl QueueDisc for DropTail {
    fn enqueue(&mut self, _now: SimTime, frame: Frame) -> Result<(), (Frame, DropReason)> {
        let len = frame.wire_len();
        let n = frame.segs() as usize;
        if self.packets + n > self.limit_packets || self.bytes + len > self.limit_bytes {
            return Err((frame, DropReason::QueueFull));
        }
        self.bytes += len;
        self.packets += n;
        self.frames.push_back(frame);
        Ok(())
    }
    fn dequeue(&mut self, _now: SimTime) -> Option<Frame> {
        let f = self.frames.pop_front()?;
        self.bytes -= f.wire_len();
        self.packets -= f.segs() as usize;
        Some(f)
    }
    fn len(&self) -> usize {
        self.packets
    }
    fn bytes(&self) -> u64 {
        self.bytes
    }
    fn clear(&mut self) -> usize {
        let n = self.packets;
        self.frames.clear();
        self.packets = 0;
        self.bytes = 0;
        n
    }
}

/// Builds the discipline a spec asks for.
pub fn from_spec(spec: &QueueSpec) -> Box<dyn QueueDisc> {
    match spec.discipline {
        crate::spec::QueueDiscipline::DropTail => Box::new(DropTail::new(spec)),
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
        assert!(q.enqueue(t, Frame::from(vec![0; 100])).is_ok());
        assert_eq!(
            q.enqueue(t, Frame::from(vec![0; 200])).unwrap_err().1,
            DropReason::QueueFull
        );
        assert!(q.enqueue(t, Frame::from(vec![1; 100])).is_ok());
        assert_eq!(
            q.enqueue(t, Frame::from(vec![0; 10])).unwrap_err().1,
            DropReason::QueueFull
        );
        assert_eq!((q.len(), q.bytes()), (2, 200));
        assert_eq!(q.dequeue(t).unwrap()[0], 0);
        assert_eq!(q.dequeue(t).unwrap()[0], 1);
        assert!(q.dequeue(t).is_none());
    }
}
