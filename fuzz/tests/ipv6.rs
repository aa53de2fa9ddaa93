//! IPv6 from a real host through the fuzz harness: the seeds reach deep into
//! the router (neighbour discovery answered, pings answered, hop limits and
//! Packet Too Big reported), and floods of IPv6 neighbours and forged
//! neighbour discovery stay within the same bounds as ARP's, every frame
//! accounted for.

use netloop_fuzz::wire::{
    checksum6, eth, icmp6, ndp, solicited_node, tcp_syn, udp6, Ip6, Records, ETH_IPV6,
};
use netloop_fuzz::{Harness, Target};
use netloop_model::stats::DropReason;
use std::path::Path;

/// The ICMPv6 types of what came back to the real host.
fn icmp6_back(h: &Harness) -> Vec<u8> {
    h.returned()
        .iter()
        .filter(|f| f.len() > 54 && f[12..14] == [0x86, 0xdd] && f[20] == 58)
        .map(|f| f[54])
        .collect()
}

fn seed(target: &str, name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seeds")
        .join(target)
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn the_router_seeds_get_answers_from_deep_inside() {
    let mut h = Harness::new(Target::Router);
    h.run(&seed("frames_router", "ipv6-ping"));
    let back = icmp6_back(&h);
    assert!(back.contains(&136), "an advertisement for x: {back:?}");
    assert_eq!(back.iter().filter(|&&t| t == 129).count(), 2, "{back:?}");

    let mut h = Harness::new(Target::Router);
    h.run(&seed("frames_router", "ipv6-hops-and-size"));
    let back = icmp6_back(&h);
    assert!(back.contains(&3), "time exceeded: {back:?}");
    assert!(
        back.contains(&2),
        "Packet Too Big (the 576-byte link): {back:?}"
    );
    let c = h.conservation();
    assert!(c.dropped.get(DropReason::PacketTooBig) >= 1, "{c:?}");
    assert!(c.dropped.get(DropReason::TtlExpired) >= 2, "{c:?}");

    let mut h = Harness::new(Target::Router);
    h.run(&seed("frames_router", "ipv6-nd-hostile"));
    let c = h.conservation();
    // Hop limit 64, the zero-length option, the short message, the
    // multicast target: malformed. The forged advertisement is consumed and
    // teaches nothing; the strangers' solicitations are answered.
    assert_eq!(c.dropped.get(DropReason::Malformed), 4, "{c:?}");
    let answered = icmp6_back(&h).iter().filter(|&&t| t == 136).count();
    assert_eq!(answered, 48, "one advertisement per stranger");
    assert_eq!(c.unaccounted, 0);
}

/// r1 between x and a /64 of neighbours that never answer.
fn behind_r1() -> Harness {
    let topo = r#"
[run]
duration = "1s"
ipv6 = true
[[node]]
name = "x"
kind = "namespace"
[[node]]
name = "r1"
kind = "router"
[[node]]
name = "a"
kind = "host"
[[link]]
endpoints = ["x", "r1"]
rate = "100Gbps"
delay = "1us"
queue = { packets = 1000000, bytes = "10GB" }
[[link]]
endpoints = ["r1", "a"]
"#;
    Harness::with_topology(topo, "r1")
}

#[test]
fn a_flood_towards_ipv6_neighbours_fills_the_cache_and_no_more() {
    // One packet for each of 5 000 silent neighbours on r1's far /64: 2 048
    // may wait for an answer at once, as with ARP, and the rest are
    // dropped; resolved neighbours keep the other half of the table.
    let mut h = behind_r1();
    let x6 = h.addresses6_of("x")[0];
    let far = h.addresses6_of("r1")[1];
    let mut r = Records::default();
    for k in 0..5000u16 {
        let mut dst = far;
        dst[14..16].copy_from_slice(&(k + 0x100).to_be_bytes());
        let p = Ip6::new(x6, dst, 17).packet(&udp6(x6, dst, 9, &[0; 18]));
        r.push(3, 0, &eth(ETH_IPV6, &p));
    }
    h.run(&r.0);
    let c = h.conservation();
    assert_eq!(c.in_flight.in_nodes, 2048, "{c:?}");
    assert_eq!(
        c.dropped.get(DropReason::ArpQueueFull),
        5000 - 2048,
        "{c:?}"
    );
    assert_eq!(c.unaccounted, 0);
}

#[test]
fn spoofed_advertisements_do_not_redirect_traffic() {
    // A packet for a silent neighbour waits; an advertisement for it from
    // off the link (hop limit 254) is refused, one from the link is taken.
    let mut h = behind_r1();
    let x6 = h.addresses6_of("x")[0];
    let r1_x = h.addresses6_of("r1")[0];
    let far = h.addresses6_of("r1")[1];
    let mut n = far;
    n[15] = 0x42;
    let mut r = Records::default();
    let p = Ip6::new(x6, n, 17).packet(&udp6(x6, n, 9, &[1; 8]));
    r.push(3, 0, &eth(ETH_IPV6, &p));
    h.run(&r.0);
    assert_eq!(h.conservation().in_flight.in_nodes, 1);
    // The advertisements arrive on x's link (the harness's only way in):
    // n is not on that link, so even the well-formed one teaches nothing.
    let mut r = Records::default();
    for hops in [254u8, 255] {
        let na = ndp(136, 0x60, n, r1_x, n, Some([2, 0, 0, 0, 0, 0x66]), hops);
        r.push(3, 0, &eth(ETH_IPV6, &na));
    }
    let ns = ndp(135, 0, x6, solicited_node(r1_x), r1_x, Some(h.x_mac()), 255);
    r.push(3, 0, &eth(ETH_IPV6, &ns));
    h.run(&r.0);
    let c = h.conservation();
    assert_eq!(c.dropped.get(DropReason::Malformed), 1, "{c:?}");
    assert_eq!(c.in_flight.in_nodes, 1, "still waiting: {c:?}");
    let leaked = h
        .returned()
        .iter()
        .filter(|f| f.len() > 54 && f[12..14] == [0x86, 0xdd] && f[20] == 17)
        .count();
    assert_eq!(leaked, 0, "the waiting packet was not sent to x");
    assert_eq!(c.unaccounted, 0);
}

#[test]
fn a_simulated_host_answers_neighbour_discovery_pings_and_udp() {
    let mut h = Harness::new(Target::Host);
    let (x6, a6) = (h.addresses6_of("x")[0], h.addresses6_of("a")[0]);
    let x_mac = h.x_mac();
    let mut r = Records::default();
    // A solicitation for a's address, to its solicited-node group.
    let sn = solicited_node(a6);
    let mut f = eth(ETH_IPV6, &[]);
    f[0..6].copy_from_slice(&[0x33, 0x33, sn[12], sn[13], sn[14], sn[15]]);
    f[6..12].copy_from_slice(&x_mac);
    f.extend_from_slice(&ndp(135, 0, x6, sn, a6, Some(x_mac), 255));
    r.push(0, 1, &f);
    // A ping, a UDP datagram (no socket: port unreachable), a TCP SYN to
    // a port nobody listens on (reset by the host's TCP).
    let echo = icmp6(x6, a6, 128, 0, &[0, 1, 0, 1, 9, 9, 9, 9]);
    r.push(3, 2, &eth(ETH_IPV6, &Ip6::new(x6, a6, 58).packet(&echo)));
    let u = udp6(x6, a6, 33434, &[0; 24]);
    r.push(3, 2, &eth(ETH_IPV6, &Ip6::new(x6, a6, 17).packet(&u)));
    let mut syn = tcp_syn([0; 4], [0; 4], 80);
    syn[16..18].fill(0);
    let c = checksum6(x6, a6, 6, &syn);
    syn[16..18].copy_from_slice(&c.to_be_bytes());
    r.push(3, 2, &eth(ETH_IPV6, &Ip6::new(x6, a6, 6).packet(&syn)));
    h.run(&r.0);
    let back = icmp6_back(&h);
    assert!(back.contains(&136), "an advertisement: {back:?}");
    assert!(back.contains(&129), "an echo reply: {back:?}");
    assert!(back.contains(&1), "port unreachable: {back:?}");
    // A host's advertisement does not say it is a router.
    let na = h
        .returned()
        .iter()
        .find(|f| f.len() > 58 && f[12..14] == [0x86, 0xdd] && f[54] == 136)
        .unwrap();
    assert_eq!(na[58] & 0x80, 0, "router flag");
    let resets = h
        .returned()
        .iter()
        .filter(|f| f.len() >= 74 && f[12..14] == [0x86, 0xdd] && f[20] == 6 && f[67] & 4 != 0)
        .count();
    assert_eq!(resets, 1, "a reset for the SYN");
    let c = h.conservation();
    assert_eq!(c.dropped.get(DropReason::Unsupported), 0, "{c:?}");
    assert_eq!(c.unaccounted, 0);
}
