//! Simulated hosts on a path with a link of smaller MTU, `a – r1 –(mtu)– r2
//! – b` at 100 Mbit/s: path MTU discovery for TCP (RFC 1191), fragmentation
//! of the hosts' own datagrams, reassembly, and pings larger than a link.
//! Before hosts did any of this, a TCP transfer over this path delivered
//! nothing (a path-MTU black hole), UDP of 1472 bytes was all
//! `fragmentation_needed` and a 2000-byte ping all `mtu_exceeded`.

mod common;

use common::*;
use netloop_core::{Bytes, SimDuration};
use netloop_model::spec::*;
use netloop_model::stats::DropReason;
use netloop_model::Simulation;

/// `a – r1 – r2 – b`, 100 Mbit/s and 1 ms per link; r1–r2 has MTU `mid`,
/// and every link MTU `all` (1500 unless a control run says otherwise).
fn path(mid: u32, all: u32, traffic: Vec<TrafficSpec>) -> NetworkSpec {
    let d = |mtu| DirectionSpec {
        mtu,
        ..dir(Some(100), ms(1))
    };
    spec(
        SimDuration::from_secs(5),
        1,
        vec![host("a"), router("r1"), router("r2"), host("b")],
        vec![
            link("a", "r1", d(all)),
            link("r1", "r2", d(mid)),
            link("r2", "b", d(all)),
        ],
        traffic,
    )
}

fn run(spec: &NetworkSpec, taps: &[(&str, Recorder)]) -> Simulation {
    let mut sim = Simulation::build(spec).expect("builds");
    for (l, rec) in taps {
        let id = sim.net.link_id(l).expect("link exists");
        sim.net.add_tap(id, Box::new(rec.clone()));
    }
    sim.run(1 << 22, |_, _| true);
    assert_conserved(&sim);
    sim
}

fn bulk(bytes: u64) -> TrafficSpec {
    flow(
        "bulk",
        "a",
        "b",
        TrafficKind::TcpBulk {
            bytes: Some(Bytes::new(bytes)),
        },
    )
}

fn host_stat(sim: &Simulation, node: &str, field: &str) -> u64 {
    let r = sim.results("afap", None, None);
    let n = r.nodes.iter().find(|n| n.name == node).unwrap();
    n.stats[field].as_u64().unwrap()
}

/// The target: a 1 MB transfer over the path completes at ≥ 95 %
/// of the goodput of the same transfer where every link has the small MTU
/// (the hosts then know it from the start and need no discovery).
#[test]
fn tcp_over_a_smaller_mtu_completes_at_the_paths_goodput() {
    for mtu in [1400, 1280] {
        let sim = run(&path(mtu, 1500, vec![bulk(1_000_000)]), &[]);
        let r = sim.results("afap", None, None);
        let tcp = r.flows[0].tcp.as_ref().unwrap();
        assert_eq!(tcp.bytes_received, 1_000_000, "mtu {mtu}");
        assert_eq!(host_stat(&sim, "a", "path_mtu_lowered"), 1, "mtu {mtu}");
        // The first flight met the small link and was refused, once.
        let refused = r.conservation.dropped.get(DropReason::FragmentationNeeded);
        assert!(refused >= 1, "mtu {mtu}");

        let control = run(&path(mtu, mtu, vec![bulk(1_000_000)]), &[]);
        let c = control.results("afap", None, None);
        let ctcp = c.flows[0].tcp.as_ref().unwrap();
        assert_eq!(ctcp.bytes_received, 1_000_000);
        assert_eq!(
            c.conservation.dropped.get(DropReason::FragmentationNeeded),
            0
        );
        let ratio = tcp.goodput_bps / ctcp.goodput_bps;
        assert!(
            ratio >= 0.95,
            "mtu {mtu}: {} vs {} bit/s ({ratio:.3})",
            tcp.goodput_bps,
            ctcp.goodput_bps
        );
    }
}

/// After discovery, no TCP segment is larger than the path carries: every
/// frame on the small link is whole (no fragments) and fits it.
#[test]
fn tcp_segments_shrink_to_the_path_mtu_and_are_never_fragmented() {
    let rec = Recorder::default();
    run(
        &path(1280, 1500, vec![bulk(200_000)]),
        &[("r1-r2", rec.clone())],
    );
    let frames = rec.frames();
    assert!(frames.len() > 150);
    for f in frames.iter().filter(|f| !f.rx && f.data[12..14] == [8, 0]) {
        let ip = &f.data[14..];
        assert!(f.data.len() - 14 <= 1280);
        assert_eq!(ip[6] & 0x3f, 0, "no fragment crosses: {:02x?}", &ip[..20]);
        if ip[9] == 6 {
            assert_ne!(ip[6] & 0x40, 0, "TCP keeps Don't Fragment");
        }
    }
}

/// A 4000-byte datagram is larger than the hosts' own link: the sender
/// fragments it (without DF), r1 fragments the fragments again for the
/// 1400-byte link, and b reassembles every datagram whole.
#[test]
fn a_4000_byte_udp_datagram_crosses_in_fragments_and_is_delivered_whole() {
    let rec = Recorder::default();
    let udp = TrafficSpec {
        stop: Some(SimDuration::from_secs(1)),
        ..flow("big", "a", "b", cbr(1, 4000))
    };
    let sim = run(&path(1400, 1500, vec![udp]), &[("r1-r2", rec.clone())]);
    let r = sim.results("afap", None, None);
    let f = &r.flows[0];
    assert!(f.sent_packets.unwrap() >= 30);
    assert_eq!(f.received_packets, f.sent_packets);
    assert_eq!(f.received_bytes, 4000 * f.sent_packets.unwrap());
    assert_eq!(host_stat(&sim, "b", "reassembled"), f.sent_packets.unwrap());
    assert_eq!(host_stat(&sim, "a", "fragmented"), f.sent_packets.unwrap());
    // On the small link: only fragments, none over 1400 bytes, none with DF,
    // each datagram's pieces sharing one identification, in order, and
    // adding up to the datagram.
    let mut by_ident: std::collections::BTreeMap<u16, Vec<(u16, usize, bool)>> = Default::default();
    let ipv4_a_to_b = |f: &&Seen| !f.rx && f.dir == 0 && f.data[12..14] == [8, 0];
    for fr in rec.frames().iter().filter(ipv4_a_to_b) {
        let ip = &fr.data[14..];
        assert!(ip.len() <= 1400);
        assert_eq!(ip[6] & 0x40, 0, "fragments carry no DF");
        let offset = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
        let ident = u16::from_be_bytes([ip[4], ip[5]]);
        by_ident
            .entry(ident)
            .or_default()
            .push((offset, ip.len() - 20, ip[6] & 0x20 != 0));
    }
    assert_eq!(by_ident.len() as u64, f.sent_packets.unwrap());
    for (ident, pieces) in by_ident {
        let mut at = 0;
        for (i, &(offset, len, more)) in pieces.iter().enumerate() {
            assert_eq!(offset as usize * 8, at, "ident {ident}");
            assert_eq!(more, i + 1 < pieces.len(), "ident {ident}");
            at += len;
        }
        assert_eq!(at, 8 + 4000, "ident {ident}: UDP header and payload");
    }
}

/// A 1472-byte datagram fits the hosts' link, so it goes with DF (Linux's
/// default); the first is refused by r1 and tells a the path MTU, and every
/// later one is fragmented by a and delivered.
#[test]
fn udp_that_fits_the_link_learns_the_path_mtu_from_the_first_datagram() {
    let udp = TrafficSpec {
        stop: Some(SimDuration::from_secs(1)),
        ..flow("udp", "a", "b", cbr(1, 1472))
    };
    let sim = run(&path(1400, 1500, vec![udp]), &[]);
    let r = sim.results("afap", None, None);
    let f = &r.flows[0];
    let sent = f.sent_packets.unwrap();
    assert!(sent > 50);
    assert_eq!(f.received_packets, Some(sent - 1));
    assert_eq!(
        r.conservation.dropped.get(DropReason::FragmentationNeeded),
        1
    );
    assert_eq!(host_stat(&sim, "a", "path_mtu_lowered"), 1);
    assert_eq!(host_stat(&sim, "a", "fragmented"), sent - 1);
}

/// `ping` with a payload larger than the link (the docs allow up to 65 507
/// bytes): fragmented by the sender, reassembled and answered by b, whose
/// reply is fragmented and reassembled in turn.
#[test]
fn a_ping_larger_than_the_link_is_fragmented_and_answered() {
    let ping = flow(
        "ping",
        "a",
        "b",
        TrafficKind::Ping {
            interval: SimDuration::from_millis(100),
            size: Bytes::new(2000),
        },
    );
    let sim = run(&path(1400, 1500, vec![ping]), &[]);
    let r = sim.results("afap", None, None);
    let f = &r.flows[0];
    assert!(f.sent_packets.unwrap() >= 40);
    assert_eq!(f.received_packets, f.sent_packets);
    assert_eq!(
        host_stat(&sim, "b", "echo_replies"),
        f.sent_packets.unwrap()
    );
    assert_eq!(r.conservation.dropped.total(), 0);
    // The round trip is the propagation (6 ms) plus serialisation of both
    // ways' fragments: well under 7 ms, nothing waited for a timeout.
    let p50 = f.delay_ns.as_ref().unwrap().p50;
    assert!((6_000_000..7_000_000).contains(&p50), "{p50}");
}
