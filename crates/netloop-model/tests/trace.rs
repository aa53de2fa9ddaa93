//! Trace-driven links in simulated time: Mahimahi's delivery opportunities
//! give exact delivery times on a bursty trace (frames injected at chosen
//! times into an external node, read out of the other end), a constant
//! trace of one line a millisecond carries 12 Mbit/s of IP under a bulk
//! TCP flow, a rate series follows its changes, and every frame is
//! accounted for.

mod common;

use common::*;
use netloop_core::{DataRate, SimDuration, SimTime};
use netloop_model::network::Node;
use netloop_model::spec::*;
use netloop_model::trace::TraceSpec;
use netloop_model::{Frame, NodeId, Simulation};

const MS: u64 = 1_000_000;

fn at(ns: u64) -> SimTime {
    SimTime::ZERO + SimDuration::from_nanos(ns)
}

/// An IPv4-typed frame of `len` bytes whose first byte is `tag`: Mahimahi
/// counts it as `len - 14 + 4` bytes.
fn frame(tag: u8, len: usize) -> Frame {
    let mut f = vec![0u8; len];
    f[0] = tag;
    f[12] = 0x08;
    Frame::copy_from(&f)
}

/// a — b, both external, a → b following `trace` with 1 ms of delay (and
/// an MTU that lets a frame span several opportunities).
fn traced(trace: TraceSpec) -> Simulation {
    let d = DirectionSpec {
        trace: Some(trace),
        delay: ms(1),
        mtu: 9000,
        ..DirectionSpec::default()
    };
    external_pair(d, 1)
}

/// Injects `frames` into `a` at `t` (running the model to `t` first).
fn inject_at(sim: &mut Simulation, t: SimTime, a: NodeId, frames: &[(u8, usize)]) {
    sim.run_until(t, 1 << 20, |_, _| true);
    for &(tag, len) in frames {
        assert!(sim.net.inject(&mut sim.queue, a, frame(tag, len)));
    }
}

/// Runs to the end and returns (tag, arrival ns) of every frame b got.
fn arrivals(sim: &mut Simulation, b: NodeId, until: SimTime) -> Vec<(u8, u64)> {
    let mut got = Vec::new();
    // One nanosecond at a time would be exact but slow: run to each event.
    while let Some(t) = sim.queue.peek_time() {
        if t > until {
            break;
        }
        sim.run_until(t, 1 << 20, |_, _| true);
        if let Node::External(e) = sim.net.node_mut(b) {
            got.extend(e.outbox.drain(..).map(|d| (d.frame[0], d.at.as_nanos())));
        }
    }
    got
}

#[test]
fn a_bursty_mahimahi_trace_gives_the_expected_delivery_times_to_the_nanosecond() {
    // Opportunities at 2, 2, 2, 7 and 10 ms, then again 10 ms later.
    let mut sim = traced(TraceSpec::Mahimahi {
        source: "bursty".into(),
        ms: vec![2, 2, 2, 7, 10],
    });
    let (a, b) = (sim.real[0].node, sim.real[1].node);
    // Four full frames at 0: three in the burst at 2 ms, one at 7 ms.
    inject_at(
        &mut sim,
        at(0),
        a,
        &[(1, 1514), (2, 1514), (3, 1514), (4, 1514)],
    );
    // Half a packet at 8.5 ms: the opportunity at 10 ms (1 000 bytes are
    // left of it, and lost: nothing waits).
    inject_at(&mut sim, at(8 * MS + MS / 2), a, &[(5, 514)]);
    // 10.2 ms, the link idle: 12 ms, the next period's first burst.
    inject_at(&mut sim, at(10 * MS + MS / 5), a, &[(6, 1514)]);
    // Exactly at an opportunity (17 ms) with the link idle: it was spent
    // before the frame came (as Mahimahi spends those due before it
    // enqueues), so the next, at 20 ms.
    inject_at(&mut sim, at(17 * MS), a, &[(7, 1514)]);
    // Two frames of half an opportunity each at 20.5 ms: both in the first
    // at 22 ms; a third (1 000 counted bytes) waiting behind them takes the
    // second of the burst at 22 ms.
    inject_at(
        &mut sim,
        at(20 * MS + MS / 2),
        a,
        &[(8, 762), (9, 762), (10, 1006)],
    );
    // A frame of 3 000 counted bytes at 23 ms: 1 504 at 27 ms and 1 496
    // at 30 ms.
    inject_at(&mut sim, at(23 * MS), a, &[(11, 3010)]);
    let got = arrivals(&mut sim, b, at(100 * MS));
    let d = MS; // the link's delay
    assert_eq!(
        got,
        vec![
            (1, 2 * MS + d),
            (2, 2 * MS + d),
            (3, 2 * MS + d),
            (4, 7 * MS + d),
            (5, 10 * MS + d),
            (6, 12 * MS + d),
            (7, 20 * MS + d),
            (8, 22 * MS + d),
            (9, 22 * MS + d),
            (10, 22 * MS + d),
            (11, 30 * MS + d),
        ]
    );
    assert_conserved(&sim);
}

#[test]
fn a_rate_series_follows_its_changes() {
    // 8 Mbit/s, stopped from 1 ms to 3 ms, then 4 Mbit/s.
    let mut sim = traced(TraceSpec::Rates {
        source: "inline".into(),
        steps: vec![
            (SimDuration::ZERO, DataRate::from_bps(8_000_000)),
            (ms(1), DataRate::from_bps(0)),
            (ms(3), DataRate::from_bps(4_000_000)),
        ],
    });
    let (a, b) = (sim.real[0].node, sim.real[1].node);
    // 976 + 24 bytes of overhead = 1 000 bytes: 1 ms at 8 Mbit/s.
    // Injected at 0.5 ms: 500 bytes by 1 ms, 500 more from 3 ms at
    // 4 Mbit/s: 1 ms, so 4 ms, plus 1 ms of delay.
    inject_at(&mut sim, at(MS / 2), a, &[(1, 976)]);
    // Waiting behind it: 1 000 bytes at 4 Mbit/s, 2 ms more.
    inject_at(&mut sim, at(MS), a, &[(2, 976)]);
    let got = arrivals(&mut sim, b, at(100 * MS));
    assert_eq!(got, vec![(1, 5 * MS), (2, 7 * MS)]);
    assert_conserved(&sim);
}

#[test]
fn a_constant_trace_of_one_packet_a_millisecond_carries_twelve_megabits_of_ip() {
    let secs = 20;
    let d = DirectionSpec {
        trace: Some(TraceSpec::Mahimahi {
            source: "12mbps".into(),
            ms: vec![1],
        }),
        delay: ms(10),
        queue: QueueSpec {
            packets: Some(1000),
            ..QueueSpec::default()
        },
        ..DirectionSpec::default()
    };
    let mut l = link("a", "b", d);
    l.b_to_a = dir(None, ms(10));
    let s = spec(
        SimDuration::from_secs(secs),
        1,
        vec![host("a"), host("b")],
        vec![l],
        vec![flow("bulk", "a", "b", TrafficKind::TcpBulk { bytes: None })],
    );
    let mut sim = Simulation::build(&s).expect("builds");
    let warm = 5;
    sim.run_until(at(warm * 1_000 * MS), 1 << 20, |_, _| true);
    let r0 = sim.results("afap", None, None);
    sim.run(1 << 20, |_, _| true);
    assert_conserved(&sim);
    let r = sim.results("afap", None, None);
    let (s0, s1) = (&r0.links[0].a_to_b.stats, &r.links[0].a_to_b.stats);
    // IP bytes: what the link sent, less the Ethernet headers.
    let frames = s1.sent_packets - s0.sent_packets;
    let ip = (s1.sent_bytes - s0.sent_bytes) - 14 * frames;
    let ip_bps = ip as f64 * 8.0 / (secs - warm) as f64;
    let bulk =
        |r: &netloop_model::results::Results| r.flows[0].tcp.as_ref().unwrap().bytes_received;
    let goodput = (bulk(&r) - bulk(&r0)) as f64 * 8.0 / (secs - warm) as f64;
    // Full-sized segments carry 1 460 bytes of TCP payload in 1 500 of IP
    // (no TCP options): the goodput is that share of the 12 Mbit/s.
    let expected = 12e6 * 1460.0 / 1500.0;
    eprintln!(
        "IP {:.4} Mbit/s, goodput {:.4} Mbit/s (expected {:.4}), {frames} frames",
        ip_bps / 1e6,
        goodput / 1e6,
        expected / 1e6
    );
    assert!((ip_bps / 12e6 - 1.0).abs() < 0.005, "IP rate {ip_bps}");
    assert!(
        (goodput / expected - 1.0).abs() < 0.005,
        "goodput {goodput}"
    );
    assert_eq!(
        r.links[0].a_to_b.trace.as_ref().unwrap().mean_bps,
        12_032_000
    );
}

#[test]
fn a_rate_set_at_run_time_replaces_the_trace() {
    let mut sim = traced(TraceSpec::Mahimahi {
        source: "slow".into(),
        ms: vec![100],
    });
    let (a, b) = (sim.real[0].node, sim.real[1].node);
    sim.net.change_link(
        0,
        Direction::AToB,
        &LinkAction::Set(LinkChange {
            rate: Some(Some(DataRate::from_mbps(8))),
            ..LinkChange::default()
        }),
    );
    // 976 + 24 bytes at 8 Mbit/s: 1 ms, not the trace's 100 ms.
    inject_at(&mut sim, at(0), a, &[(1, 976)]);
    assert_eq!(arrivals(&mut sim, b, at(200 * MS)), vec![(1, 2 * MS)]);
}
