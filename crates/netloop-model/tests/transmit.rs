//! Transmission on a link direction without an event at its end: a frame's
//! fate and arrival are settled when its transmission starts, and only a
//! frame that waits in the queue needs a wake-up when the transmitter
//! frees. Checked here: the timing is the same as with such events, the
//! frame in the transmitter is counted as transmitting (not on the wire),
//! a link that goes down while a frame is serialised drops it (counted,
//! conserved) and comes back with a free transmitter, and an idle link
//! costs one event per frame.

mod common;

use common::*;
use netloop_core::{DataRate, SimDuration, SimTime};
use netloop_model::network::Node;
use netloop_model::spec::{Direction, LinkAction};
use netloop_model::stats::DropReason;
use netloop_model::{Frame, NodeId, Simulation};

/// a — b, both external; each direction 1 Mbit/s, 1 ms.
fn pair() -> Simulation {
    external_pair(dir(Some(1), ms(1)), 1)
}

/// A 1000-byte frame whose first byte is `tag`.
fn frame(tag: u8) -> Frame {
    let mut f = vec![0u8; 1000];
    f[0] = tag;
    f[12] = 0x08; // IPv4's EtherType: a frame the link carries as any other
    Frame::copy_from(&f)
}

fn at(ns: u64) -> SimTime {
    SimTime::ZERO + SimDuration::from_nanos(ns)
}

/// Runs to `t` and returns the tags of the frames `b` received by then.
fn run_to(sim: &mut Simulation, t: SimTime, b: NodeId) -> Vec<u8> {
    sim.run_until(t, 1 << 20, |_, _| true);
    match sim.net.node_mut(b) {
        Node::External(e) => e
            .outbox
            .drain(..)
            .map(|d| {
                assert_eq!(d.at, t, "stamped with the moment it left the model");
                d.frame[0]
            })
            .collect(),
        _ => panic!("b is external"),
    }
}

/// 1000 bytes + 24 of framing at 1 Mbit/s.
const TX_NS: u64 = 8_192_000;
const DELAY_NS: u64 = 1_000_000;

#[test]
fn an_idle_link_costs_one_event_per_frame_and_times_it_as_before() {
    assert_eq!(
        DataRate::from_mbps(1).tx_time(1024),
        SimDuration::from_nanos(TX_NS)
    );
    let mut sim = pair();
    let (a, b) = (sim.real[0].node, sim.real[1].node);
    assert!(sim.net.inject(&mut sim.queue, a, frame(1)));
    // Mid-transmission: in the transmitter, not on the wire.
    assert!(run_to(&mut sim, at(TX_NS / 2), b).is_empty());
    let f = sim.net.in_flight(&sim.queue);
    assert_eq!((f.transmitting, f.on_wire), (1, 0));
    // Its last bit has left: on the wire.
    assert!(run_to(&mut sim, at(TX_NS + DELAY_NS / 2), b).is_empty());
    let f = sim.net.in_flight(&sim.queue);
    assert_eq!((f.transmitting, f.on_wire), (0, 1));
    assert!(run_to(&mut sim, at(TX_NS + DELAY_NS - 1), b).is_empty());
    assert_eq!(run_to(&mut sim, at(TX_NS + DELAY_NS), b), [1]);
    assert_eq!(sim.queue.events_processed(), 1, "its arrival, nothing else");
    assert_eq!(sim.net.in_flight(&sim.queue).total(), 0);
}

#[test]
fn queued_frames_leave_back_to_back_with_one_wake_up_each() {
    let mut sim = pair();
    let (a, b) = (sim.real[0].node, sim.real[1].node);
    for tag in 1..=3 {
        assert!(sim.net.inject(&mut sim.queue, a, frame(tag)));
    }
    let f = sim.net.in_flight(&sim.queue);
    assert_eq!((f.transmitting, f.queued), (1, 2));
    for k in 1..=3u64 {
        let due = at(k * TX_NS + DELAY_NS);
        let before = at(k * TX_NS + DELAY_NS - 1);
        assert!(
            run_to(&mut sim, before, b).is_empty(),
            "frame {k} not before {due}"
        );
        assert_eq!(run_to(&mut sim, due, b), [k as u8], "frame {k} at {due}");
    }
    // Three arrivals and two wake-ups of the transmitter for the frames
    // that waited.
    assert_eq!(sim.queue.events_processed(), 5);
    let st = &sim.net.links()[0].dirs[0].stats;
    assert_eq!((st.sent_packets, st.received_packets), (3, 3));
}

#[test]
fn a_link_down_while_serialising_drops_the_frame_and_frees_the_transmitter() {
    let mut sim = pair();
    let (a, b) = (sim.real[0].node, sim.real[1].node);
    assert!(sim.net.inject(&mut sim.queue, a, frame(1)));
    assert!(sim.net.inject(&mut sim.queue, a, frame(2)));
    assert!(run_to(&mut sim, at(TX_NS / 2), b).is_empty());
    sim.net.change_link(0, Direction::Both, &LinkAction::Down);
    // The queued frame is dropped at once; the one in the transmitter when
    // it would have arrived.
    let st = &sim.net.links()[0].dirs[0].stats;
    assert_eq!(st.drops.get(DropReason::LinkDown), 1);
    assert_eq!(sim.net.in_flight(&sim.queue).transmitting, 0);
    sim.net.change_link(0, Direction::Both, &LinkAction::Up);
    // Back up before the old frame's end: a new frame starts at once, not
    // after what was cut.
    let up = sim.queue.now();
    assert!(sim.net.inject(&mut sim.queue, a, frame(3)));
    let got = run_to(&mut sim, up + SimDuration::from_nanos(TX_NS + DELAY_NS), b);
    assert_eq!(got, [3]);
    let st = &sim.net.links()[0].dirs[0].stats;
    assert_eq!(st.drops.get(DropReason::LinkDown), 2);
    assert_eq!(sim.net.in_flight(&sim.queue).total(), 0);
    let c = sim.results("afap", None, None).conservation;
    assert_eq!(c.unaccounted, 0, "{c:?}");
}
