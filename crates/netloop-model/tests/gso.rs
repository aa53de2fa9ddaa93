//! GSO super-frames through the model: one packet that stands for N wire
//! frames. A link without a rate or jitter carries it whole and charges and
//! counts its segments; loss strikes segments, cutting the super-frame only
//! when it must; a rate cuts it (each segment leaves at its own time); taps
//! see the segments the wire carries; a router forwards it whole on the plain
//! path (TTL per segment) and per segment otherwise; conservation counts
//! segments.

mod common;

use common::*;
use netloop_core::frame::Checksum;
use netloop_core::{DataRate, SimDuration, SimTime};
use netloop_model::gso::{self, gso_type, VnetHdr};
use netloop_model::network::Node;
use netloop_model::spec::*;
use netloop_model::{Frame, NodeId, Simulation};

const MSS: u16 = 1448;

/// An Ethernet + IPv4 + TCP super-frame of `payload` bytes from `src` to
/// `dst` (MACs and addresses), read as a host with TSO hands it over: the
/// headers of its first segment, IP total length of the whole, partial TCP
/// checksum.
fn tcp_super(payload: usize, macs: ([u8; 6], [u8; 6]), ips: ([u8; 4], [u8; 4])) -> Frame {
    let mut f = vec![0u8; 14 + 20 + 32];
    f[0..6].copy_from_slice(&macs.1);
    f[6..12].copy_from_slice(&macs.0);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let total = (20 + 32 + payload) as u16;
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
    ip[6] = 0x40; // DF, as Linux's TCP
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&ips.0);
    ip[16..20].copy_from_slice(&ips.1);
    let c = netloop_model::ipv4::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    let tcp = &mut f[34..66];
    tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&5201u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&1000u32.to_be_bytes());
    tcp[12] = 8 << 4; // 32 bytes: timestamps
    tcp[13] = 0x18; // ACK, PSH
    f.extend((0..payload).map(|i| (i % 251) as u8));
    let hdr = VnetHdr {
        flags: gso::F_NEEDS_CSUM,
        gso_type: gso_type::TCPV4,
        hdr_len: 66,
        gso_size: MSS,
        csum_start: 34,
        csum_offset: 16,
    };
    let meta = gso::describe(&f, &hdr).expect("a valid super-frame");
    let mut f = Frame::from(f);
    f.meta.gso = meta;
    f.meta.csum = Checksum::Partial;
    f
}

/// The wire frames a frame stands for.
fn wire(frame: &Frame) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    gso::cut(frame.clone(), &mut |seg| out.push(seg.to_vec()));
    out
}

fn outbox(sim: &mut Simulation, node: NodeId) -> Vec<Frame> {
    match sim.net.node_mut(node) {
        Node::External(e) => e.outbox.drain(..).map(|d| d.frame).collect(),
        _ => panic!("not an external node"),
    }
}

const MACS: ([u8; 6], [u8; 6]) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
const IPS: ([u8; 4], [u8; 4]) = ([198, 18, 0, 1], [198, 18, 0, 2]);

#[test]
fn an_ideal_link_carries_a_super_frame_whole_and_counts_its_segments() {
    let mut sim = external_pair(dir(None, ms(1)), 1);
    let rec = Recorder::default();
    sim.net.add_tap(0, Box::new(rec.clone()));
    let (a, b) = (sim.real[0].node, sim.real[1].node);
    let f = tcp_super(10 * 1448 + 500, MACS, IPS);
    assert_eq!(f.segs(), 11);
    let expected = wire(&f);
    assert!(sim.net.inject(&mut sim.queue, a, f));
    sim.run_until(SimTime::ZERO + ms(5), 1 << 20, |_, _| true);
    let out = outbox(&mut sim, b);
    assert_eq!(out.len(), 1, "one super-frame, not its segments");
    assert_eq!(out[0].segs(), 11);
    assert_eq!(wire(&out[0]), expected);
    let st = &sim.net.links()[0].dirs[0].stats;
    assert_eq!(
        (st.offered_packets, st.sent_packets, st.received_packets),
        (11, 11, 11)
    );
    let wire_bytes: u64 = expected.iter().map(|s| s.len() as u64).sum();
    assert_eq!(st.sent_bytes, wire_bytes);
    // The taps see the segments, at departure and at arrival 1 ms later.
    let seen = rec.frames();
    assert_eq!(seen.len(), 22);
    assert!(seen[..11].iter().all(|s| !s.rx && s.time == SimTime::ZERO));
    assert!(seen[11..]
        .iter()
        .all(|s| s.rx && s.time == SimTime::ZERO + ms(1)));
    let tapped: Vec<Vec<u8>> = seen[..11].iter().map(|s| s.data.clone()).collect();
    assert_eq!(tapped, expected);
    let c = sim.conservation();
    assert_eq!(c.created_total, 11);
    assert_eq!(c.delivered_total, 11);
    assert_conserved(&sim);
}

#[test]
fn a_lost_segment_cuts_the_super_frame_and_only_that_segment_is_missing() {
    // Loss 1 in 4: over a few super-frames some segments are lost. Each
    // super-frame either arrives whole, or as the segments that survived,
    // which are exactly what loss per frame gives the same random stream.
    let lossy = DirectionSpec {
        loss: LossSpec::Bernoulli { p: 0.25 },
        ..dir(None, ms(1))
    };
    let mut whole_sim = external_pair(lossy.clone(), 7);
    let mut seg_sim = external_pair(lossy, 7);
    let (a, b) = (whole_sim.real[0].node, whole_sim.real[1].node);
    for k in 0..8 {
        let f = tcp_super(6 * 1448, MACS, IPS);
        let _ = k;
        for seg in wire(&f) {
            assert!(seg_sim.net.inject(&mut seg_sim.queue, a, seg.into()));
        }
        assert!(whole_sim.net.inject(&mut whole_sim.queue, a, f));
    }
    whole_sim.run_until(SimTime::ZERO + ms(5), 1 << 20, |_, _| true);
    seg_sim.run_until(SimTime::ZERO + ms(5), 1 << 20, |_, _| true);
    let got: Vec<Vec<u8>> = outbox(&mut whole_sim, b).iter().flat_map(wire).collect();
    let want: Vec<Vec<u8>> = outbox(&mut seg_sim, b).iter().map(|f| f.to_vec()).collect();
    assert_eq!(got, want, "the same segments arrive, in the same order");
    let lost = whole_sim.net.links()[0].dirs[0].stats.drops.total();
    assert!(
        lost > 0 && lost < 48,
        "some of the 48 segments lost: {lost}"
    );
    assert_eq!(got.len() as u64 + lost, 48);
    assert_eq!(
        lost,
        seg_sim.net.links()[0].dirs[0].stats.drops.total(),
        "per-segment loss"
    );
    assert_conserved(&whole_sim);
    assert_conserved(&seg_sim);
}

#[test]
fn corruption_and_duplication_strike_segments_as_they_strike_frames() {
    // The same random stream: each super-frame's segments meet exactly the
    // fates the same frames sent one by one meet. An unstruck super-frame
    // stays whole.
    let noisy = DirectionSpec {
        corrupt: 0.05,
        duplicate: 0.05,
        ..dir(None, ms(1))
    };
    let mut whole_sim = external_pair(noisy.clone(), 3);
    let mut seg_sim = external_pair(noisy, 3);
    let (a, b) = (whole_sim.real[0].node, whole_sim.real[1].node);
    for _ in 0..20 {
        let f = tcp_super(4 * 1448, MACS, IPS);
        for seg in wire(&f) {
            assert!(seg_sim.net.inject(&mut seg_sim.queue, a, seg.into()));
        }
        assert!(whole_sim.net.inject(&mut whole_sim.queue, a, f));
    }
    whole_sim.run_until(SimTime::ZERO + ms(5), 1 << 20, |_, _| true);
    seg_sim.run_until(SimTime::ZERO + ms(5), 1 << 20, |_, _| true);
    let out = outbox(&mut whole_sim, b);
    let got: Vec<Vec<u8>> = out.iter().flat_map(wire).collect();
    let want: Vec<Vec<u8>> = outbox(&mut seg_sim, b).iter().map(|f| f.to_vec()).collect();
    assert_eq!(got, want, "the same segments, corrupted and copied alike");
    let (w, s) = (
        &whole_sim.net.links()[0].dirs[0].stats,
        &seg_sim.net.links()[0].dirs[0].stats,
    );
    assert!(w.corrupted > 0 && w.duplicated > 0, "{w:?}");
    assert_eq!((w.corrupted, w.duplicated), (s.corrupted, s.duplicated));
    let whole = out.iter().filter(|f| f.is_super()).count();
    assert!(whole > 0 && whole < 20, "some stayed whole: {whole}");
    assert_conserved(&whole_sim);
}

#[test]
fn a_link_with_a_rate_cuts_super_frames_and_times_each_segment() {
    let mut sim = external_pair(dir(Some(1000), ms(1)), 1);
    let rec = Recorder::default();
    sim.net.add_tap(0, Box::new(rec.clone()));
    let (a, b) = (sim.real[0].node, sim.real[1].node);
    let f = tcp_super(4 * 1448, MACS, IPS);
    let expected = wire(&f);
    assert!(sim.net.inject(&mut sim.queue, a, f));
    sim.run_until(SimTime::ZERO + ms(5), 1 << 20, |_, _| true);
    let out = outbox(&mut sim, b);
    assert_eq!(out.len(), 4);
    assert!(out.iter().all(|f| !f.is_super()));
    let got: Vec<Vec<u8>> = out.iter().map(|f| f.to_vec()).collect();
    assert_eq!(got, expected);
    // Each segment of 1514 bytes takes (1514 + 24) * 8 ns at 1 Gbit/s.
    let starts: Vec<SimTime> = rec
        .frames()
        .iter()
        .filter(|s| !s.rx)
        .map(|s| s.time)
        .collect();
    let step = DataRate::from_mbps(1000).tx_time(1514 + 24);
    assert_eq!(
        starts,
        (0..4u64)
            .map(|i| SimTime::ZERO + SimDuration::from_nanos(step.as_nanos() * i))
            .collect::<Vec<_>>()
    );
    assert_conserved(&sim);
}

/// A link without a rate takes no time to transmit: frames offered at the
/// same moment never wait for each other (before transmission ends were
/// events, a second super-frame queued behind the first for no time at all
/// and met a queue bound it should not have met).
#[test]
fn an_unlimited_link_never_queues_super_frames_offered_together() {
    let mut d = dir(None, ms(1));
    d.queue = QueueSpec {
        packets: Some(5),
        ..QueueSpec::default()
    };
    let mut sim = external_pair(d, 1);
    let (a, b) = (sim.real[0].node, sim.real[1].node);
    assert!(sim
        .net
        .inject(&mut sim.queue, a, tcp_super(3 * 1448, MACS, IPS)));
    assert!(sim
        .net
        .inject(&mut sim.queue, a, tcp_super(8 * 1448, MACS, IPS)));
    sim.run_until(SimTime::ZERO + ms(5), 1 << 20, |_, _| true);
    let out = outbox(&mut sim, b);
    let segs: Vec<u64> = out.iter().map(|f| f.segs()).collect();
    assert_eq!(segs, [3, 8], "both whole, in order");
    let st = &sim.net.links()[0].dirs[0].stats;
    assert_eq!(st.drops.get(netloop_model::stats::DropReason::QueueFull), 0);
    assert_eq!(st.queue_high_water_packets, 0);
    assert_conserved(&sim);
}

/// h1 (external) — r1 — h2 (external), unlimited links: returns the
/// simulation, h1 and h2's node ids, and r1's MACs on its two ports.
fn routed(router_spec: RouterSpec) -> (Simulation, NodeId, NodeId) {
    let s = spec(
        SimDuration::from_secs(1),
        1,
        vec![
            attached("h1"),
            NodeSpec {
                name: "r1".into(),
                kind: NodeKind::Router(router_spec),
            },
            attached("h2"),
        ],
        vec![
            link("h1", "r1", dir(None, ms(1))),
            link("r1", "h2", dir(None, ms(1))),
        ],
        vec![],
    );
    let sim = Simulation::build(&s).expect("valid spec");
    let (h1, h2) = (sim.real[0].node, sim.real[1].node);
    (sim, h1, h2)
}

/// Addresses and MACs of h1, h2 and r1's two ports.
struct Addrs {
    h1: ([u8; 6], [u8; 4]),
    h2: ([u8; 6], [u8; 4]),
    r1_in: [u8; 6],
    r1_out: [u8; 6],
}

fn addrs(sim: &Simulation) -> Addrs {
    let r1 = sim.net.node_id("r1").unwrap();
    let port = |n: NodeId, p: usize| {
        let i = &sim.net.ports(n)[p];
        (i.mac.0, i.addr.expect("an address").addr.octets())
    };
    Addrs {
        h1: port(sim.real[0].node, 0),
        h2: port(sim.real[1].node, 0),
        r1_in: port(r1, 0).0,
        r1_out: port(r1, 1).0,
    }
}

/// Makes r1 learn `who`'s MAC (a host on r1's port with MAC `r1_mac` and
/// address `r1_ip`): `who` answers the request r1 sends or will send.
fn resolve(sim: &mut Simulation, node: NodeId, who: ([u8; 6], [u8; 4]), r1: ([u8; 6], [u8; 4])) {
    let mut arp = vec![0u8; 42];
    arp[0..6].copy_from_slice(&r1.0);
    arp[6..12].copy_from_slice(&who.0);
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    arp[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]);
    arp[22..28].copy_from_slice(&who.0);
    arp[28..32].copy_from_slice(&who.1);
    arp[32..38].copy_from_slice(&r1.0);
    arp[38..42].copy_from_slice(&r1.1);
    assert!(sim.net.inject(&mut sim.queue, node, arp.into()));
}

/// r1's MAC and address on port `p`.
fn r1_port(sim: &Simulation, p: usize) -> ([u8; 6], [u8; 4]) {
    let r1 = sim.net.node_id("r1").unwrap();
    let i = &sim.net.ports(r1)[p];
    (i.mac.0, i.addr.unwrap().addr.octets())
}

#[test]
fn a_router_forwards_a_super_frame_whole_with_each_segment_s_ttl_decremented() {
    let (mut sim, h1, h2) = routed(RouterSpec::default());
    let x = addrs(&sim);
    let r1 = sim.net.node_id("r1").unwrap();
    // Before r1 knows h2's MAC the segments wait for ARP one by one.
    let f = tcp_super(5 * 1448, (x.h1.0, x.r1_in), (x.h1.1, x.h2.1));
    assert!(sim.net.inject(&mut sim.queue, h1, f));
    sim.run_until(SimTime::ZERO + ms(3), 1 << 20, |_, _| true);
    let first = outbox(&mut sim, h2);
    assert_eq!(first.len(), 1, "r1's ARP request: {first:?}");
    let rp = r1_port(&sim, 1);
    resolve(&mut sim, h2, x.h2, rp);
    sim.run_until(SimTime::ZERO + ms(6), 1 << 20, |_, _| true);
    let waited = outbox(&mut sim, h2);
    assert_eq!(waited.len(), 5, "cut while waiting for ARP");
    // Now resolved: the next super-frame crosses whole.
    let f = tcp_super(7 * 1448 + 3, (x.h1.0, x.r1_in), (x.h1.1, x.h2.1));
    let sent = wire(&f);
    assert!(sim.net.inject(&mut sim.queue, h1, f));
    sim.run_until(SimTime::ZERO + ms(9), 1 << 20, |_, _| true);
    let out = outbox(&mut sim, h2);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].segs(), 8);
    let got = wire(&out[0]);
    for (s, g) in sent.iter().zip(&got) {
        // MACs rewritten, TTL 64 -> 63, header checksum updated; the rest as
        // sent.
        assert_eq!(&g[0..6], &x.h2.0);
        assert_eq!(&g[6..12], &x.r1_out);
        assert_eq!(g[14 + 8], 63);
        assert_eq!(netloop_model::ipv4::checksum(&g[14..34]), 0);
        assert_eq!(&g[34..], &s[34..]);
    }
    let stats = match sim.net.node(r1) {
        Node::Router(r) => r.stats().clone(),
        _ => unreachable!(),
    };
    assert_eq!(stats.forwarded, 5 + 8);
    assert_conserved(&sim);
}

#[test]
fn a_super_frame_a_router_cannot_forward_whole_is_handled_per_segment() {
    // TTL 1: every segment expires and each draws its ICMP error, as on the
    // wire.
    let (mut sim, h1, _h2) = routed(RouterSpec::default());
    let x = addrs(&sim);
    let rp = r1_port(&sim, 0);
    resolve(&mut sim, h1, x.h1, rp);
    let mut f = tcp_super(3 * 1448, (x.h1.0, x.r1_in), (x.h1.1, x.h2.1));
    f[14 + 8] = 1;
    f[24] = 0;
    f[25] = 0;
    let c = netloop_model::ipv4::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    assert!(sim.net.inject(&mut sim.queue, h1, f));
    sim.run_until(SimTime::ZERO + ms(5), 1 << 20, |_, _| true);
    let back = outbox(&mut sim, h1);
    let icmp = back
        .iter()
        .filter(|f| f.len() > 34 && f[12..14] == [8, 0] && f[14 + 9] == 1 && f[34] == 11)
        .count();
    assert_eq!(icmp, 3, "one time-exceeded per segment");
    let r1 = sim.net.node_id("r1").unwrap();
    let stats = match sim.net.node(r1) {
        Node::Router(r) => r.stats().clone(),
        _ => unreachable!(),
    };
    assert_eq!(stats.received, 1 + 3, "the ARP reply and three segments");
    assert_eq!(
        stats
            .drops
            .get(netloop_model::stats::DropReason::TtlExpired),
        3
    );
    assert_conserved(&sim);

    // A forwarding engine with a rate serves each packet in its time.
    let (mut sim, h1, h2) = routed(RouterSpec {
        forwarding_rate: Some(netloop_core::PacketRate::from_pps(1000)),
        ..RouterSpec::default()
    });
    let x = addrs(&sim);
    let rp = r1_port(&sim, 1);
    resolve(&mut sim, h2, x.h2, rp);
    let f = tcp_super(4 * 1448, (x.h1.0, x.r1_in), (x.h1.1, x.h2.1));
    assert!(sim.net.inject(&mut sim.queue, h1, f));
    sim.run_until(SimTime::ZERO + ms(20), 1 << 20, |_, _| true);
    let out: Vec<Frame> = outbox(&mut sim, h2)
        .into_iter()
        .filter(|f| f[12..14] == [8, 0])
        .collect();
    assert_eq!(out.len(), 4, "served one by one");
    assert!(out.iter().all(|f| !f.is_super()));
    assert_conserved(&sim);
}

#[test]
fn a_simulated_host_receives_the_segments_of_a_super_frame() {
    // a (external) — h (simulated host): the host's stack gets wire frames;
    // TCP to a closed port answers each with a reset... here only counting
    // matters: every segment is received and accounted for.
    let mut l = link("a", "h", dir(None, ms(1)));
    l.name = "a-h".into();
    let s = spec(
        SimDuration::from_secs(1),
        1,
        vec![attached("a"), host("h")],
        vec![l],
        vec![],
    );
    let mut sim = Simulation::build(&s).expect("valid spec");
    let a = sim.real[0].node;
    let h = sim.net.node_id("h").unwrap();
    let hp = &sim.net.ports(h)[0];
    let ap = &sim.net.ports(a)[0];
    let f = tcp_super(
        3 * 1448,
        (ap.mac.0, hp.mac.0),
        (
            ap.addr.unwrap().addr.octets(),
            hp.addr.unwrap().addr.octets(),
        ),
    );
    assert!(sim.net.inject(&mut sim.queue, a, f));
    sim.run_until(SimTime::ZERO + ms(5), 1 << 20, |_, _| true);
    // Each segment reached the host's stack as a frame of its own: three
    // frames created, three taken by the host (smoltcp answers what it
    // does not expect with resets, which go back to a).
    let c = sim.conservation();
    assert_eq!(
        c.created.get(&netloop_model::stats::Origin::External),
        Some(&3)
    );
    assert_eq!(
        c.delivered.get(&netloop_model::stats::Sink::Host),
        Some(&3),
        "{c:#?}"
    );
    assert_conserved(&sim);
}
