//! The timestamped boundary of the model: a frame handed to an external
//! node for a simulated time enters then (in hand-in order at equal times),
//! counts as held until it does, and leaves through the far external node
//! stamped with the moment it left; a time already past or a node that is
//! not external is refused, naming what is wrong.

mod common;

use common::*;
use netloop_core::{SimDuration, SimTime};
use netloop_model::network::{InjectError, Node};
use netloop_model::{Frame, NodeId, Simulation};

/// a — b, both external; each direction 1 Gbit/s, 1 ms.
fn pair() -> Simulation {
    external_pair(dir(Some(1000), ms(1)), 1)
}

fn frame(tag: u8) -> Frame {
    let mut f = vec![0u8; 100];
    f[0] = tag;
    Frame::copy_from(&f)
}

fn at_us(us: u64) -> SimTime {
    SimTime::ZERO + SimDuration::from_micros(us)
}

/// (departure time in µs, tag) of what left at `node`.
fn departures(sim: &mut Simulation, node: NodeId) -> Vec<(u64, u8)> {
    match sim.net.node_mut(node) {
        Node::External(e) => e
            .outbox
            .drain(..)
            .map(|d| (d.at.as_nanos() / 1000, d.frame[0]))
            .collect(),
        _ => panic!("external"),
    }
}

/// 100 bytes (+24 of framing) at 1 Gbit/s.
const TX_NS: u64 = 992;

#[test]
fn frames_enter_at_their_time_in_hand_in_order_and_leave_stamped() {
    let mut sim = pair();
    let (a, b) = (sim.real[0].node, sim.real[1].node);
    // Out of time order, two for the same moment.
    for (t, tag) in [(300, 3), (100, 1), (300, 4), (200, 2)] {
        sim.net
            .inject_at(&mut sim.queue, a, at_us(t), frame(tag))
            .expect("a future time at an external node");
    }
    let f = sim.net.in_flight(&sim.queue);
    assert_eq!(f.in_nodes, 4, "held at the boundary until they enter");
    assert_eq!(sim.net.ledger().created_total(), 4);
    sim.run_until(at_us(5_000), 1 << 20, |_, _| true);
    let got = departures(&mut sim, b);
    // Each leaves its transmission and 1 ms after it entered; the second of
    // the pair at 300 µs waits for the first to be sent.
    let leave = |t_ns: u64| (t_ns + TX_NS + 1_000_000) / 1000;
    assert_eq!(
        got,
        [
            (leave(100_000), 1),
            (leave(200_000), 2),
            (leave(300_000), 3),
            (leave(300_000 + TX_NS), 4)
        ]
    );
    assert_eq!(sim.net.in_flight(&sim.queue).total(), 0);
    let c = sim.results("afap", None, None).conservation;
    assert_eq!(c.unaccounted, 0, "{c:?}");
}

#[test]
fn now_is_allowed_and_the_past_or_an_internal_node_is_refused() {
    let mut sim = pair();
    let (a, b) = (sim.real[0].node, sim.real[1].node);
    sim.run_until(at_us(50), 1 << 20, |_, _| true);
    let now = sim.queue.now();
    sim.net
        .inject_at(&mut sim.queue, a, now, frame(1))
        .expect("now is allowed");
    // It enters through an event at this moment, after those already due
    // now: held until then.
    assert_eq!(sim.net.in_flight(&sim.queue).in_nodes, 1);
    let err = sim
        .net
        .inject_at(&mut sim.queue, a, at_us(10), frame(2))
        .unwrap_err();
    assert_eq!(err, InjectError::InThePast { at: at_us(10), now });
    assert!(
        err.to_string().contains("simulated time is already"),
        "{err}"
    );
    let err = sim
        .net
        .inject_at(&mut sim.queue, 99, at_us(100), frame(3))
        .unwrap_err();
    assert_eq!(err, InjectError::NotExternal { node: 99 });
    // Refused frames count nowhere.
    assert_eq!(sim.net.ledger().created_total(), 1);
    sim.run_until(at_us(2_000), 1 << 20, |_, _| true);
    assert_eq!(departures(&mut sim, b).len(), 1);
}

/// The network says when a frame has left through an external node (the
/// real-time loop looks at the outboxes only then), and says it once.
#[test]
fn a_departure_is_flagged_until_taken() {
    let mut sim = pair();
    let (a, b) = (sim.real[0].node, sim.real[1].node);
    sim.run_until(at_us(10), 1 << 20, |_, _| true);
    assert!(!sim.net.take_departed(), "nothing has left yet");
    sim.net
        .inject_at(&mut sim.queue, a, at_us(100), frame(1))
        .expect("a future time at an external node");
    // Entered, not yet across the link's 1 ms.
    sim.run_until(at_us(500), 1 << 20, |_, _| true);
    assert!(!sim.net.take_departed(), "in flight, not departed");
    sim.run_until(at_us(5_000), 1 << 20, |_, _| true);
    assert!(sim.net.take_departed(), "it left at b");
    assert!(!sim.net.take_departed(), "said once");
    assert_eq!(
        departures(&mut sim, b),
        [((100_000 + TX_NS + 1_000_000) / 1000, 1)]
    );
}
