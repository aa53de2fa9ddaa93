//! The router's IPv6 path driven directly, frame by frame, in simulated
//! time: neighbour discovery both ways, forwarding with the hop limit, the
//! ICMPv6 errors (time exceeded, no route, beyond scope, port unreachable,
//! Packet Too Big) and when they must not be sent, pings of the router, and
//! hostile input (forged and malformed neighbour discovery, bad lengths and
//! extension-header chains). Frames are built and checked with smoltcp's
//! wire types, independently of the router's own byte handling; every test
//! ends by checking packet conservation.
//!
//! The router under test has three dual-stack ports:
//!
//! | port | address          | MTU  | beyond it                                |
//! |------|------------------|------|------------------------------------------|
//! | 0    | 2001:2:0:1::1/64 | 1500 | host h1 2001:2:0:1::10                   |
//! | 1    | 2001:2:0:2::1/64 | 1500 | host h2 ::20, router r2 ::2 (for 2001:2:0:3::/64) |
//! | 2    | 2001:2:0:4::1/64 | 1280 | host h4 2001:2:0:4::40                   |

use netloop_core::{SimDuration, SimTime};
use netloop_model::arp::ARP_TIMER;
use netloop_model::node::{mac_for, NodeCtx, PortInfo};
use netloop_model::router::Router;
use netloop_model::routing::{Route, Route6, RoutingTable, RoutingTable6};
use netloop_model::spec::{Ipv4Cidr, Ipv6Cidr, RouterSpec};
use netloop_model::stats::{DropReason, Ledger, Origin, Sink};
use netloop_model::{Frame, PortId};
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, EthernetRepr, Icmpv6DstUnreachable,
    Icmpv6Packet, Icmpv6Repr, Icmpv6TimeExceeded, IpProtocol, Ipv6Packet, Ipv6Repr,
    NdiscNeighborFlags, NdiscRepr, RawHardwareAddress,
};
use std::net::Ipv6Addr;

const ETH: usize = 14;

fn a(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn h1() -> Ipv6Addr {
    a("2001:2:0:1::10")
}
fn h2() -> Ipv6Addr {
    a("2001:2:0:2::20")
}
fn r2() -> Ipv6Addr {
    a("2001:2:0:2::2")
}
fn h4() -> Ipv6Addr {
    a("2001:2:0:4::40")
}
fn p(port: PortId) -> Ipv6Addr {
    [a("2001:2:0:1::1"), a("2001:2:0:2::1"), a("2001:2:0:4::1")][port]
}
const H1_MAC: EthernetAddress = EthernetAddress([0x02, 0xaa, 0, 0, 0, 1]);
const H2_MAC: EthernetAddress = EthernetAddress([0x02, 0xaa, 0, 0, 0, 2]);
const R2_MAC: EthernetAddress = EthernetAddress([0x02, 0xaa, 0, 0, 0, 3]);
const H4_MAC: EthernetAddress = EthernetAddress([0x02, 0xaa, 0, 0, 0, 4]);

fn port_mac(p: PortId) -> EthernetAddress {
    mac_for(1, p)
}

struct Bench {
    router: Router,
    ports: Vec<PortInfo>,
    now: SimTime,
    out: Vec<(PortId, Frame)>,
    timers: Vec<(SimTime, u64)>,
    ledger: Ledger,
}

impl Bench {
    fn new() -> Self {
        Self::with(RouterSpec::default())
    }

    fn with(spec: RouterSpec) -> Self {
        let ports: Vec<PortInfo> = [
            ("10.0.1.1/24", "2001:2:0:1::1/64", 1500),
            ("10.0.2.1/24", "2001:2:0:2::1/64", 1500),
            ("10.0.4.1/24", "2001:2:0:4::1/64", 1280),
        ]
        .iter()
        .enumerate()
        .map(|(i, (v4, v6, mtu))| PortInfo {
            mac: port_mac(i),
            addr: Some(Ipv4Cidr::parse(v4).unwrap()),
            addr6: Some(Ipv6Cidr::parse(v6).unwrap()),
            mtu: *mtu,
            link: i,
            name: format!("eth{i}"),
        })
        .collect();
        let mut table = RoutingTable::new();
        let mut table6 = RoutingTable6::new();
        for (i, p) in ports.iter().enumerate() {
            let v4 = p.addr.unwrap();
            table.insert(Route {
                prefix: Ipv4Cidr {
                    addr: v4.network(),
                    prefix: v4.prefix,
                },
                via: None,
                port: i,
            });
            let v6 = p.addr6.unwrap();
            table6.insert(Route6 {
                prefix: Ipv6Cidr {
                    addr: v6.network(),
                    prefix: 64,
                },
                via: None,
                port: i,
            });
        }
        table6.insert(Route6 {
            prefix: Ipv6Cidr::parse("2001:2:0:3::/64").unwrap(),
            via: Some(r2()),
            port: 1,
        });
        Bench {
            router: Router::new("r1", ports.clone(), &spec, table, table6),
            ports,
            now: SimTime::ZERO,
            out: Vec::new(),
            timers: Vec::new(),
            ledger: Ledger::default(),
        }
    }

    fn inject(&mut self, port: PortId, frame: Frame) {
        self.ledger.create(Origin::Host);
        let mut ctx = NodeCtx::new(self.now, &mut self.out, &mut self.timers, &mut self.ledger);
        self.router.receive(port, frame, &mut ctx);
    }

    fn take(&mut self) -> Vec<(PortId, Frame)> {
        for _ in &self.out {
            self.ledger.deliver(Sink::Host);
        }
        std::mem::take(&mut self.out)
    }

    /// Fires due timers up to `until`; what the router sent meanwhile.
    fn run_until(&mut self, until: SimTime) -> Vec<(PortId, Frame)> {
        let mut sent = Vec::new();
        loop {
            let next = (0..self.timers.len())
                .filter(|&i| self.timers[i].0 <= until)
                .min_by_key(|&i| (self.timers[i].0, i));
            let Some(i) = next else { break };
            let (at, token) = self.timers.remove(i);
            self.now = at;
            let mut ctx = NodeCtx::new(self.now, &mut self.out, &mut self.timers, &mut self.ledger);
            self.router.timer(token, &mut ctx);
            sent.extend(self.take());
        }
        self.now = self.now.max(until);
        sent
    }

    /// Teaches the router that `ip` is at `mac` behind `port`, confirmed:
    /// the neighbour solicits the router's address (which leaves it stale)
    /// and advertises itself (which confirms it).
    fn teach(&mut self, port: PortId, ip: Ipv6Addr, mac: EthernetAddress) {
        self.inject(port, solicit(ip, mac, p(port), port_mac(port), 255));
        let out = self.take();
        assert_eq!(out.len(), 1, "the router advertises itself");
        self.inject(port, advertise(port, ip, mac, 255));
        assert!(self.take().is_empty());
    }

    fn dropped(&self, r: DropReason) -> u64 {
        self.ledger.dropped.get(r)
    }

    fn assert_conserved(&self) {
        let l = &self.ledger;
        let held = self.router.in_flight() + self.out.len() as u64;
        assert_eq!(
            l.created_total(),
            l.delivered_total() + l.dropped.total() + held,
            "conservation: created {:?}, delivered {:?}, dropped {:?}, held {held}",
            l.created,
            l.delivered,
            l.dropped
        );
        assert_eq!(self.router.stats().drops, l.dropped);
    }
}

// ---------------------------------------------------------------------------
// Frame builders (smoltcp's emitters).
// ---------------------------------------------------------------------------

fn eth(dst: EthernetAddress, src: EthernetAddress, payload: &[u8]) -> Frame {
    let repr = EthernetRepr {
        src_addr: src,
        dst_addr: dst,
        ethertype: EthernetProtocol::Ipv6,
    };
    let mut f = vec![0u8; ETH + payload.len()];
    repr.emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    f[ETH..].copy_from_slice(payload);
    f.into()
}

/// An IPv6 packet around `payload` (whose first header is `next`).
fn ip6(src: Ipv6Addr, dst: Ipv6Addr, hops: u8, next: IpProtocol, payload: &[u8]) -> Vec<u8> {
    let repr = Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: next,
        payload_len: payload.len(),
        hop_limit: hops,
    };
    let mut b = vec![0u8; 40 + payload.len()];
    repr.emit(&mut Ipv6Packet::new_unchecked(&mut b[..]));
    b[40..].copy_from_slice(payload);
    b
}

/// An ICMPv6 message from `src` to `dst`, checksum filled in.
fn icmp6(src: Ipv6Addr, dst: Ipv6Addr, repr: &Icmpv6Repr) -> Vec<u8> {
    let mut b = vec![0u8; repr.buffer_len()];
    repr.emit(
        &src,
        &dst,
        &mut Icmpv6Packet::new_unchecked(&mut b[..]),
        &ChecksumCapabilities::default(),
    );
    b
}

/// An ICMPv6 packet in an IPv6 header.
fn icmp6_packet(src: Ipv6Addr, dst: Ipv6Addr, hops: u8, repr: &Icmpv6Repr) -> Vec<u8> {
    ip6(src, dst, hops, IpProtocol::Icmpv6, &icmp6(src, dst, repr))
}

/// A UDP datagram from h1 to `dst` (checksum left 0: the router does not
/// look at it).
fn udp_packet(dst: Ipv6Addr, hops: u8, len: usize) -> Vec<u8> {
    let mut u = vec![0x5au8; len];
    u[0..2].copy_from_slice(&40000u16.to_be_bytes());
    u[2..4].copy_from_slice(&33434u16.to_be_bytes());
    u[4..6].copy_from_slice(&(len as u16).to_be_bytes());
    u[6..8].fill(0);
    ip6(h1(), dst, hops, IpProtocol::Udp, &u)
}

/// A neighbour solicitation for `target`, from `src` at `mac`.
fn solicit(
    src: Ipv6Addr,
    mac: EthernetAddress,
    target: Ipv6Addr,
    eth_dst: EthernetAddress,
    hops: u8,
) -> Frame {
    let ll = (!src.is_unspecified()).then(|| RawHardwareAddress::from_bytes(mac.as_bytes()));
    let repr = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
        target_addr: target,
        lladdr: ll,
    });
    let dst = if eth_dst.is_multicast() {
        solicited_node(target)
    } else {
        target
    };
    eth(eth_dst, mac, &icmp6_packet(src, dst, hops, &repr))
}

/// A neighbour advertisement of `target` at `mac`, to the router's port.
fn advertise(port: PortId, target: Ipv6Addr, mac: EthernetAddress, hops: u8) -> Frame {
    let repr = Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
        flags: NdiscNeighborFlags::SOLICITED | NdiscNeighborFlags::OVERRIDE,
        target_addr: target,
        lladdr: Some(RawHardwareAddress::from_bytes(mac.as_bytes())),
    });
    eth(
        port_mac(port),
        mac,
        &icmp6_packet(target, p(port), hops, &repr),
    )
}

fn solicited_node(a: Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::from([
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, o[13], o[14], o[15],
    ])
}

fn multicast_mac(group: Ipv6Addr) -> EthernetAddress {
    let o = group.octets();
    EthernetAddress([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

// ---------------------------------------------------------------------------
// Frame checks (smoltcp's parsers).
// ---------------------------------------------------------------------------

/// The IPv6 packet of a frame the router sent, with its addresses, hop
/// limit and next header; the frame holds exactly the packet.
fn ip_of(frame: &[u8]) -> (Ipv6Repr, &[u8]) {
    let e = EthernetFrame::new_checked(frame).expect("an Ethernet frame");
    assert_eq!(e.ethertype(), EthernetProtocol::Ipv6);
    let pkt = Ipv6Packet::new_checked(&frame[ETH..]).expect("a well-formed IPv6 packet");
    let repr = Ipv6Repr::parse(&pkt).expect("smoltcp parses it");
    assert_eq!(40 + repr.payload_len, frame.len() - ETH, "no stray bytes");
    (repr, &frame[ETH + 40..])
}

/// The ICMPv6 message of a frame the router sent, its checksum verified by
/// smoltcp.
fn icmp_of(frame: &[u8]) -> (Ipv6Repr, Icmpv6Repr<'_>) {
    let (ip, payload) = ip_of(frame);
    assert_eq!(ip.next_header, IpProtocol::Icmpv6);
    let pkt = Icmpv6Packet::new_checked(payload).expect("an ICMPv6 message");
    assert!(pkt.verify_checksum(&ip.src_addr, &ip.dst_addr), "checksum");
    let repr = Icmpv6Repr::parse(
        &ip.src_addr,
        &ip.dst_addr,
        &pkt,
        &ChecksumCapabilities::default(),
    )
    .expect("smoltcp parses the ICMPv6 message");
    (ip, repr)
}

/// Recomputes the ICMPv6 checksum of an Ethernet frame holding an IPv6
/// packet whose payload is ICMPv6.
fn fix_checksum(frame: &mut [u8]) {
    let ip = Ipv6Packet::new_unchecked(&frame[ETH..]);
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let len = usize::from(ip.payload_len());
    let mut icmp = Icmpv6Packet::new_unchecked(&mut frame[ETH + 40..ETH + 40 + len]);
    icmp.fill_checksum(&src, &dst);
}

/// The frames sent to one neighbour (not to a group: solicitations).
fn unicast(out: Vec<(PortId, Frame)>) -> Vec<(PortId, Frame)> {
    out.into_iter()
        .filter(|(_, f)| !dst_mac(f).is_multicast())
        .collect()
}

fn dst_mac(frame: &[u8]) -> EthernetAddress {
    EthernetAddress::from_bytes(&frame[0..6])
}

// ---------------------------------------------------------------------------
// Tests.
// ---------------------------------------------------------------------------

#[test]
fn a_packet_waits_for_neighbour_discovery_then_leaves_with_one_hop_less() {
    let mut b = Bench::new();
    let pkt = udp_packet(h2(), 64, 100);
    b.inject(0, eth(port_mac(0), H1_MAC, &pkt));
    let out = b.take();
    assert_eq!(out.len(), 1, "a solicitation, the packet waits");
    let (port, ns) = &out[0];
    assert_eq!(*port, 1);
    assert_eq!(dst_mac(ns), multicast_mac(solicited_node(h2())));
    let (ip, icmp) = icmp_of(ns);
    assert_eq!(ip.hop_limit, 255, "NDP's hop limit");
    assert_eq!(ip.src_addr, p(1));
    assert_eq!(ip.dst_addr, solicited_node(h2()));
    assert_eq!(
        icmp,
        Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
            target_addr: h2(),
            lladdr: Some(RawHardwareAddress::from_bytes(port_mac(1).as_bytes())),
        })
    );
    assert_eq!(b.router.in_flight(), 1);
    b.assert_conserved();
    // The answer releases the packet, hop limit decremented, the rest as
    // it came.
    b.inject(1, advertise(1, h2(), H2_MAC, 255));
    let out = b.take();
    assert_eq!(out.len(), 1);
    let (port, f) = &out[0];
    assert_eq!(*port, 1);
    assert_eq!(dst_mac(f), H2_MAC);
    assert_eq!(EthernetAddress::from_bytes(&f[6..12]), port_mac(1));
    let mut expect = pkt.clone();
    expect[7] = 63;
    assert_eq!(&f[ETH..], &expect[..]);
    // Learned: the next packet goes at once.
    b.inject(0, eth(port_mac(0), H1_MAC, &pkt));
    let out = b.take();
    assert_eq!(out.len(), 1);
    assert_eq!(dst_mac(&out[0].1), H2_MAC);
    // Beyond r2: its address is solicited, the packet goes to its MAC with
    // the far destination unchanged.
    let far = udp_packet(a("2001:2:0:3::9"), 64, 60);
    b.inject(0, eth(port_mac(0), H1_MAC, &far));
    let out = b.take();
    let (_, icmp) = icmp_of(&out[0].1);
    assert!(matches!(
        icmp,
        Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr, .. }) if target_addr == r2()
    ));
    b.inject(1, advertise(1, r2(), R2_MAC, 255));
    let out = b.take();
    assert_eq!(dst_mac(&out[0].1), R2_MAC);
    let (ip, _) = ip_of(&out[0].1);
    assert_eq!((ip.dst_addr, ip.hop_limit), (a("2001:2:0:3::9"), 63));
    assert_eq!(b.router.stats().forwarded, 3);
    assert_eq!(b.router.stats().ndp_solicitations_sent, 2);
    b.assert_conserved();
}

#[test]
fn a_next_hop_that_never_answers_drops_the_waiting_packets_after_three_tries() {
    let mut b = Bench::new();
    b.inject(
        0,
        eth(port_mac(0), H1_MAC, &udp_packet(a("2001:2:0:3::9"), 64, 60)),
    );
    let out = b.take();
    let (_, icmp) = icmp_of(&out[0].1);
    assert!(
        matches!(icmp, Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr, .. }) if target_addr == r2()),
        "the route's next hop is solicited"
    );
    let more = b.run_until(SimTime::ZERO + SimDuration::from_secs(5));
    assert_eq!(more.len(), 2, "two more solicitations, a second apart");
    assert_eq!(b.dropped(DropReason::ArpUnresolved), 1);
    assert_eq!(b.router.in_flight(), 0);
    b.assert_conserved();
}

#[test]
fn the_router_advertises_its_addresses_and_answers_pings_from_them() {
    let mut b = Bench::new();
    // A solicitation from h1's global address for the router's.
    b.inject(
        0,
        solicit(h1(), H1_MAC, p(0), multicast_mac(solicited_node(p(0))), 255),
    );
    let out = b.take();
    assert_eq!(out.len(), 1);
    let (port, na) = &out[0];
    assert_eq!(*port, 0);
    assert_eq!(dst_mac(na), H1_MAC);
    let (ip, icmp) = icmp_of(na);
    assert_eq!((ip.src_addr, ip.dst_addr, ip.hop_limit), (p(0), h1(), 255));
    assert_eq!(
        icmp,
        Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
            flags: NdiscNeighborFlags::ROUTER
                | NdiscNeighborFlags::SOLICITED
                | NdiscNeighborFlags::OVERRIDE,
            target_addr: p(0),
            lladdr: Some(RawHardwareAddress::from_bytes(port_mac(0).as_bytes())),
        })
    );
    // The solicitation taught the router h1's MAC (stale: the reply goes at
    // once, and a solicitation re-confirms it). It comes from the address
    // pinged.
    let echo = Icmpv6Repr::EchoRequest {
        ident: 7,
        seq_no: 1,
        data: &[1, 2, 3, 4, 5],
    };
    b.inject(
        0,
        eth(port_mac(0), H1_MAC, &icmp6_packet(h1(), p(2), 64, &echo)),
    );
    let out = unicast(b.take());
    assert_eq!(out.len(), 1);
    let (ip, icmp) = icmp_of(&out[0].1);
    assert_eq!((ip.src_addr, ip.dst_addr), (p(2), h1()));
    assert_eq!(
        icmp,
        Icmpv6Repr::EchoReply {
            ident: 7,
            seq_no: 1,
            data: &[1, 2, 3, 4, 5]
        }
    );
    // Its link-local address answers too, out of the port it was asked on.
    let ll = b.ports[0].link_local();
    let h1_ll = a("fe80::aa:ff:fe00:1");
    b.inject(0, solicit(h1_ll, H1_MAC, ll, port_mac(0), 255));
    assert_eq!(b.take().len(), 1);
    b.inject(
        0,
        eth(port_mac(0), H1_MAC, &icmp6_packet(h1_ll, ll, 64, &echo)),
    );
    let out = unicast(b.take());
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 0);
    let (ip, _) = icmp_of(&out[0].1);
    assert_eq!((ip.src_addr, ip.dst_addr), (ll, h1_ll));
    assert_eq!(b.router.stats().icmpv6_sent.echo_reply, 2);
    assert_eq!(b.router.stats().ndp_advertisements_sent, 2);
    b.assert_conserved();
}

#[test]
fn errors_come_from_the_arrival_port_and_quote_the_packet() {
    let mut b = Bench::new();
    b.teach(0, h1(), H1_MAC);
    // Hop limit 1: time exceeded.
    let pkt = udp_packet(h2(), 1, 100);
    b.inject(0, eth(port_mac(0), H1_MAC, &pkt));
    let out = b.take();
    assert_eq!(out.len(), 1);
    let (ip, icmp) = icmp_of(&out[0].1);
    assert_eq!((ip.src_addr, ip.dst_addr), (p(0), h1()));
    match icmp {
        Icmpv6Repr::TimeExceeded {
            reason: Icmpv6TimeExceeded::HopLimitExceeded,
            header,
            data,
        } => {
            assert_eq!((header.src_addr, header.dst_addr), (h1(), h2()));
            assert_eq!(data, &pkt[40..], "the whole packet quoted");
        }
        other => panic!("expected time exceeded, got {other:?}"),
    }
    assert_eq!(b.dropped(DropReason::TtlExpired), 1);
    // No route.
    b.inject(
        0,
        eth(port_mac(0), H1_MAC, &udp_packet(a("2001:3::1"), 64, 40)),
    );
    let out = b.take();
    let (_, icmp) = icmp_of(&out[0].1);
    assert!(matches!(
        icmp,
        Icmpv6Repr::DstUnreachable {
            reason: Icmpv6DstUnreachable::NoRoute,
            ..
        }
    ));
    // UDP to the router: port unreachable, from the address it was sent to.
    b.inject(0, eth(port_mac(0), H1_MAC, &udp_packet(p(1), 64, 40)));
    let out = b.take();
    let (ip, icmp) = icmp_of(&out[0].1);
    assert_eq!(ip.src_addr, p(1));
    assert!(matches!(
        icmp,
        Icmpv6Repr::DstUnreachable {
            reason: Icmpv6DstUnreachable::PortUnreachable,
            ..
        }
    ));
    // A link-local source towards another link: beyond scope, back to it.
    let h1_ll = a("fe80::aa:ff:fe00:1");
    b.teach(0, h1_ll, H1_MAC);
    let mut ll = udp_packet(h2(), 64, 40);
    ll[8..24].copy_from_slice(&h1_ll.octets());
    b.inject(0, eth(port_mac(0), H1_MAC, &ll));
    let out = b.take();
    let (ip, icmp) = icmp_of(&out[0].1);
    assert_eq!((ip.dst_addr, out[0].0), (h1_ll, 0));
    assert!(matches!(
        icmp,
        Icmpv6Repr::DstUnreachable {
            reason: Icmpv6DstUnreachable::BeyondScope,
            ..
        }
    ));
    assert_eq!(b.dropped(DropReason::Martian), 1);
    let s = &b.router.stats().icmpv6_sent;
    assert_eq!(
        (
            s.time_exceeded,
            s.no_route,
            s.port_unreachable,
            s.beyond_scope
        ),
        (1, 1, 1, 1)
    );
    b.assert_conserved();
}

#[test]
fn too_big_for_the_next_link_gets_packet_too_big_within_the_minimum_mtu() {
    let mut b = Bench::new();
    b.teach(0, h1(), H1_MAC);
    b.teach(2, h4(), H4_MAC);
    // 1400 bytes towards port 2 (MTU 1280): refused, never fragmented.
    let pkt = udp_packet(h4(), 64, 1360);
    assert_eq!(pkt.len(), 1400);
    b.inject(0, eth(port_mac(0), H1_MAC, &pkt));
    let out = b.take();
    assert_eq!(out.len(), 1, "only the error: nothing towards h4");
    let (port, f) = &out[0];
    assert_eq!(*port, 0);
    assert_eq!(f.len() - ETH, 1280, "as much quoted as fits 1280 bytes");
    let (_, icmp) = icmp_of(f);
    match icmp {
        Icmpv6Repr::PktTooBig { mtu, header, data } => {
            assert_eq!(mtu, 1280);
            assert_eq!(header.dst_addr, h4());
            assert_eq!(data, &pkt[40..40 + 1280 - 48 - 40]);
        }
        other => panic!("expected Packet Too Big, got {other:?}"),
    }
    assert_eq!(b.dropped(DropReason::PacketTooBig), 1);
    // 1280 bytes fit.
    b.inject(0, eth(port_mac(0), H1_MAC, &udp_packet(h4(), 64, 1240)));
    let out = b.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 2);
    assert_eq!(out[0].1.len() - ETH, 1280);
    b.assert_conserved();
}

#[test]
fn no_error_about_an_error_a_group_or_a_source_that_is_not_one_node() {
    let mut b = Bench::new();
    b.teach(0, h1(), H1_MAC);
    // An ICMPv6 error whose hop limit runs out: dropped, nothing sent.
    let err = Icmpv6Repr::DstUnreachable {
        reason: Icmpv6DstUnreachable::PortUnreachable,
        header: Ipv6Repr {
            src_addr: h2(),
            dst_addr: h1(),
            next_header: IpProtocol::Udp,
            payload_len: 8,
            hop_limit: 3,
        },
        data: &[0; 8],
    };
    b.inject(
        0,
        eth(port_mac(0), H1_MAC, &icmp6_packet(h1(), h2(), 1, &err)),
    );
    // From the unspecified address.
    let mut unspec = udp_packet(h2(), 1, 40);
    unspec[8..24].fill(0);
    b.inject(0, eth(port_mac(0), H1_MAC, &unspec));
    assert!(b.take().is_empty(), "no error sent");
    assert_eq!(b.dropped(DropReason::TtlExpired), 1);
    assert_eq!(b.dropped(DropReason::Martian), 1);
    assert_eq!(b.router.stats().icmp_suppressed, 1);
    // Groups: a link-scope group the router is not in (MLD's, at its MAC:
    // filtered at Ethernet), the all-nodes group at the port's MAC (taken,
    // consumed), and a global-scope group (not routed).
    let mld = a("ff02::16");
    b.inject(0, eth(multicast_mac(mld), H1_MAC, &udp_packet(mld, 1, 40)));
    b.inject(0, eth(port_mac(0), H1_MAC, &udp_packet(mld, 1, 40)));
    let all = a("ff02::1");
    b.inject(0, eth(multicast_mac(all), H1_MAC, &udp_packet(all, 1, 40)));
    let far = a("ff0e::1:2");
    b.inject(0, eth(multicast_mac(far), H1_MAC, &udp_packet(far, 9, 40)));
    b.inject(0, eth(port_mac(0), H1_MAC, &udp_packet(far, 9, 40)));
    assert!(b.take().is_empty(), "no error about a group");
    assert_eq!(b.dropped(DropReason::NotForUs), 3);
    assert_eq!(b.dropped(DropReason::Unsupported), 1);
    assert_eq!(b.router.stats().local, 1);
    b.assert_conserved();
}

#[test]
fn forged_and_malformed_neighbour_discovery_teaches_nothing() {
    let mut b = Bench::new();
    let sn = multicast_mac(solicited_node(p(0)));
    // Hop limit below 255: sent from off the link.
    b.inject(0, solicit(h1(), H1_MAC, p(0), sn, 64));
    // An unsolicited advertisement of an address the router never asked
    // for is not learned (the merge rule)...
    b.inject(0, advertise(0, a("2001:2:0:1::99"), H1_MAC, 255));
    // ...nor a forwarded one.
    b.inject(1, advertise(1, h2(), H2_MAC, 254));
    assert!(b.take().is_empty());
    assert_eq!(b.dropped(DropReason::Malformed), 2);
    // So a packet to either still needs solicitation.
    b.inject(0, eth(port_mac(0), H1_MAC, &udp_packet(h2(), 64, 40)));
    let mut l = udp_packet(a("2001:2:0:1::99"), 64, 40);
    l[8..24].copy_from_slice(&h4().octets());
    b.inject(2, eth(port_mac(2), H4_MAC, &l));
    let out = b.take();
    assert_eq!(out.len(), 2, "two solicitations: {out:?}");
    assert!(out.iter().all(|(_, f)| dst_mac(f).is_multicast()));
    // A zero-length option, an option running past the message, a short
    // message, a bad checksum, a multicast target, and a DAD probe with a
    // link-layer option.
    let good = solicit(h1(), H1_MAC, p(0), sn, 255);
    let mut zero = good.to_vec();
    zero[ETH + 40 + 25] = 0;
    let mut past = good.to_vec();
    past[ETH + 40 + 25] = 2;
    let mut short = good.to_vec();
    short.truncate(ETH + 40 + 20);
    short[ETH + 4..ETH + 6].copy_from_slice(&20u16.to_be_bytes());
    let mut dad = good.to_vec();
    dad[ETH + 8..ETH + 24].fill(0);
    for mut f in [zero, past, short, dad] {
        // Each with a checksum that verifies: only what is wrong is wrong.
        fix_checksum(&mut f);
        b.inject(0, f.into());
    }
    let mut bad_sum = good.to_vec();
    bad_sum[ETH + 40 + 30] ^= 1;
    b.inject(0, bad_sum.into());
    b.inject(0, solicit(h1(), H1_MAC, a("ff02::1"), sn, 255));
    assert!(b.take().is_empty(), "no advertisement for any of them");
    assert_eq!(b.dropped(DropReason::Malformed), 2 + 5);
    assert_eq!(b.dropped(DropReason::BadChecksum), 1);
    // A solicitation for another node whose group the router shares.
    b.inject(0, solicit(h1(), H1_MAC, a("2001:2:0:9::1"), sn, 255));
    assert!(b.take().is_empty());
    assert_eq!(b.dropped(DropReason::NotForUs), 1);
    // The waiting packets give up in the end.
    b.run_until(SimTime::ZERO + SimDuration::from_secs(5));
    assert_eq!(b.dropped(DropReason::ArpUnresolved), 2);
    b.assert_conserved();
}

#[test]
fn a_duplicate_address_probe_for_ours_is_answered_to_all_nodes() {
    let mut b = Bench::new();
    let target = p(1);
    let repr = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
        target_addr: target,
        lladdr: None,
    });
    let probe = icmp6_packet(Ipv6Addr::UNSPECIFIED, solicited_node(target), 255, &repr);
    b.inject(
        1,
        eth(multicast_mac(solicited_node(target)), H2_MAC, &probe),
    );
    let out = b.take();
    assert_eq!(out.len(), 1);
    let (ip, icmp) = icmp_of(&out[0].1);
    assert_eq!(ip.dst_addr, a("ff02::1"));
    assert_eq!(dst_mac(&out[0].1), multicast_mac(a("ff02::1")));
    match icmp {
        Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert { flags, .. }) => {
            assert!(!flags.contains(NdiscNeighborFlags::SOLICITED));
        }
        other => panic!("expected an advertisement, got {other:?}"),
    }
    b.assert_conserved();
}

#[test]
fn bad_lengths_and_extension_chains_are_dropped_and_counted() {
    let mut b = Bench::new();
    b.teach(1, h2(), H2_MAC);
    // A payload length beyond the frame; a version that is not 6; a frame
    // shorter than the fixed header.
    let mut long = udp_packet(h2(), 64, 40);
    long[4..6].copy_from_slice(&500u16.to_be_bytes());
    let mut v5 = udp_packet(h2(), 64, 40);
    v5[0] = 0x50;
    for f in [long, v5, vec![0x60; 30]] {
        b.inject(0, eth(port_mac(0), H1_MAC, &f));
    }
    assert_eq!(b.dropped(DropReason::Malformed), 3);
    // Ethernet padding is trimmed before forwarding.
    let pkt = udp_packet(h2(), 64, 8);
    let mut padded = pkt.clone();
    padded.extend_from_slice(&[0; 6]);
    b.inject(0, eth(port_mac(0), H1_MAC, &padded));
    let out = b.take();
    assert_eq!(out[0].1.len(), ETH + pkt.len());
    // A Hop-by-Hop header in transit is forwarded untouched...
    let mut hbh = vec![17u8, 0, 1, 4, 0, 0, 0, 0];
    hbh.extend_from_slice(&udp_packet(h2(), 64, 16)[40..]);
    let pkt = ip6(h1(), h2(), 64, IpProtocol::HopByHop, &hbh);
    b.inject(0, eth(port_mac(0), H1_MAC, &pkt));
    let out = b.take();
    assert_eq!(&out[0].1[ETH + 8..], &pkt[8..]);
    // ...but to the router, a chain that runs past the packet is refused,
    // and so is a fragment to it with more to come whose data is not a
    // multiple of 8 bytes (RFC 8200 §4.5).
    let bad = ip6(
        h1(),
        p(0),
        64,
        IpProtocol::HopByHop,
        &[17, 9, 0, 0, 0, 0, 0, 0],
    );
    b.inject(0, eth(port_mac(0), H1_MAC, &bad));
    let frag = ip6(
        h1(),
        p(0),
        64,
        IpProtocol::Ipv6Frag,
        &[58, 0, 0, 1, 0, 0, 0, 9, 128, 0, 0, 0],
    );
    b.inject(0, eth(port_mac(0), H1_MAC, &frag));
    assert!(b.take().is_empty());
    assert_eq!(b.dropped(DropReason::Malformed), 5);
    b.assert_conserved();
}

#[test]
fn the_shared_tick_serves_both_caches() {
    // An IPv4 and an IPv6 neighbour pending at once: one timer token for
    // both, each cache retrying its own.
    let mut b = Bench::new();
    b.inject(0, eth(port_mac(0), H1_MAC, &udp_packet(h2(), 64, 40)));
    let mut v4 = vec![0x45u8, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0];
    v4.extend_from_slice(&[10, 0, 1, 10, 10, 0, 2, 20]);
    let c = netloop_model::ipv4::checksum(&v4);
    v4[10..12].copy_from_slice(&c.to_be_bytes());
    v4.extend_from_slice(&[0; 8]);
    let mut f = eth(port_mac(0), H1_MAC, &v4).to_vec();
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    b.inject(0, f.into());
    assert_eq!(b.take().len(), 2, "an ARP request and a solicitation");
    assert!(b.timers.iter().all(|&(_, t)| t == ARP_TIMER));
    let retries = b.run_until(SimTime::ZERO + SimDuration::from_millis(1500));
    assert_eq!(retries.len(), 2, "one retry each");
    b.run_until(SimTime::ZERO + SimDuration::from_secs(5));
    assert_eq!(b.dropped(DropReason::ArpUnresolved), 2);
    b.assert_conserved();
}

#[test]
fn the_neighbour_cache_is_per_port() {
    // Someone on port 0 claims fe80::9 (its own MAC in the option)...
    let mut b = Bench::new();
    let ll9 = a("fe80::9");
    b.inject(0, solicit(ll9, H1_MAC, p(0), port_mac(0), 255));
    assert_eq!(b.take().len(), 1);
    // ...which says nothing of fe80::9 on port 1: the answer to a ping from
    // there waits for neighbour discovery on port 1.
    let echo = Icmpv6Repr::EchoRequest {
        ident: 1,
        seq_no: 1,
        data: &[1; 8],
    };
    let ll1 = b.ports[1].link_local();
    b.inject(
        1,
        eth(port_mac(1), H2_MAC, &icmp6_packet(ll9, ll1, 64, &echo)),
    );
    let out = b.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 1);
    assert!(
        dst_mac(&out[0].1).is_multicast(),
        "a solicitation, not the reply to H1's MAC"
    );
    // Port 1's link-local address is not port 0's: not for a packet there.
    b.inject(
        0,
        eth(port_mac(0), H1_MAC, &icmp6_packet(ll9, ll1, 64, &echo)),
    );
    assert!(b.take().is_empty());
    assert_eq!(b.dropped(DropReason::NotForUs), 1);
    b.assert_conserved();
}

#[test]
fn advertisements_follow_the_override_and_solicited_flags() {
    let mut b = Bench::new();
    b.inject(0, eth(port_mac(0), H1_MAC, &udp_packet(h2(), 64, 40)));
    b.take();
    // A solicited answer resolves h2.
    b.inject(1, advertise(1, h2(), H2_MAC, 255));
    assert_eq!(dst_mac(&b.take()[0].1), H2_MAC);
    // Another MAC without the override flag changes nothing...
    let no_override = Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
        flags: NdiscNeighborFlags::SOLICITED,
        target_addr: h2(),
        lladdr: Some(RawHardwareAddress::from_bytes(R2_MAC.as_bytes())),
    });
    b.inject(
        1,
        eth(
            port_mac(1),
            R2_MAC,
            &icmp6_packet(h2(), p(1), 255, &no_override),
        ),
    );
    b.inject(0, eth(port_mac(0), H1_MAC, &udp_packet(h2(), 64, 40)));
    assert_eq!(dst_mac(&b.take()[0].1), H2_MAC);
    // ...with it, it does.
    b.inject(1, advertise(1, h2(), R2_MAC, 255));
    b.inject(0, eth(port_mac(0), H1_MAC, &udp_packet(h2(), 64, 40)));
    assert_eq!(dst_mac(&b.take()[0].1), R2_MAC);
    b.assert_conserved();
}

#[test]
fn a_sender_learned_from_its_solicitation_is_stale_until_confirmed() {
    let mut b = Bench::new();
    b.inject(0, solicit(h1(), H1_MAC, p(0), port_mac(0), 255));
    assert_eq!(b.take().len(), 1);
    // The first packet towards h1 goes at once, and starts re-confirming
    // the entry with a solicitation of its own.
    b.inject(
        1,
        eth(port_mac(1), H2_MAC, &{
            let mut u = udp_packet(h1(), 64, 40);
            u[8..24].copy_from_slice(&h2().octets());
            u
        }),
    );
    let out = b.take();
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(out.iter().any(|(p, f)| *p == 0 && dst_mac(f) == H1_MAC));
    assert!(out
        .iter()
        .any(|(p, f)| *p == 0 && dst_mac(f).is_multicast()));
    b.assert_conserved();
}

#[test]
fn sources_that_are_not_one_node_get_no_answer() {
    let mut b = Bench::new();
    b.teach(0, h1(), H1_MAC);
    let echo = Icmpv6Repr::EchoRequest {
        ident: 1,
        seq_no: 1,
        data: &[1; 8],
    };
    for src in [a("ff02::1"), a("::1")] {
        b.inject(
            0,
            eth(port_mac(0), H1_MAC, &icmp6_packet(src, p(0), 64, &echo)),
        );
    }
    // A solicitation from a multicast source.
    b.inject(0, solicit(a("ff02::2"), H1_MAC, p(0), port_mac(0), 255));
    assert!(b.take().is_empty());
    assert_eq!(b.dropped(DropReason::Martian), 3);
    // A ping of all-nodes is answered, from the port's address.
    let all = a("ff02::1");
    b.inject(
        0,
        eth(
            multicast_mac(all),
            H1_MAC,
            &icmp6_packet(h1(), all, 64, &echo),
        ),
    );
    let out = b.take();
    assert_eq!(out.len(), 1);
    let (ip, icmp) = icmp_of(&out[0].1);
    assert_eq!((ip.src_addr, ip.dst_addr), (p(0), h1()));
    assert!(matches!(icmp, Icmpv6Repr::EchoReply { .. }));
    b.assert_conserved();
}

#[test]
fn neighbour_discovery_skips_a_busy_forwarding_engine() {
    // One packet a second, a queue of one: the engine is full, yet a
    // solicitation is answered at once.
    let mut b = Bench::with(RouterSpec {
        forwarding_rate: Some(netloop_core::PacketRate::from_pps(1)),
        forwarding_queue: 1,
    });
    for _ in 0..3 {
        b.inject(0, eth(port_mac(0), H1_MAC, &udp_packet(h2(), 64, 40)));
    }
    assert_eq!(b.dropped(DropReason::ForwardingQueueFull), 1);
    b.inject(0, solicit(h1(), H1_MAC, p(0), port_mac(0), 255));
    let out = b.take();
    assert_eq!(out.len(), 1);
    let (_, icmp) = icmp_of(&out[0].1);
    assert!(matches!(
        icmp,
        Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert { .. })
    ));
    b.run_until(SimTime::ZERO + SimDuration::from_secs(10));
    b.assert_conserved();
}

#[test]
fn an_atomic_fragment_is_whole_and_source_routing_is_refused() {
    let mut b = Bench::new();
    b.teach(0, h1(), H1_MAC);
    let echo = icmp6(
        h1(),
        p(0),
        &Icmpv6Repr::EchoRequest {
            ident: 3,
            seq_no: 1,
            data: &[5; 8],
        },
    );
    // Fragment header: next ICMPv6, offset 0, no more fragments.
    let mut f = vec![58, 0, 0, 0, 0, 0, 0, 7];
    f.extend_from_slice(&echo);
    b.inject(
        0,
        eth(
            port_mac(0),
            H1_MAC,
            &ip6(h1(), p(0), 64, IpProtocol::Ipv6Frag, &f),
        ),
    );
    let out = b.take();
    assert_eq!(out.len(), 1, "answered");
    // A Routing header with segments left, to the router: refused.
    let mut rt = vec![58, 2, 0, 1, 0, 0, 0, 0];
    rt.extend_from_slice(&h2().octets());
    rt.extend_from_slice(&echo);
    b.inject(
        0,
        eth(
            port_mac(0),
            H1_MAC,
            &ip6(h1(), p(0), 64, IpProtocol::Ipv6Route, &rt),
        ),
    );
    assert!(b.take().is_empty());
    assert_eq!(b.dropped(DropReason::Unsupported), 1);
    b.assert_conserved();
}

/// `payload` (an upper-layer message whose protocol is `next`) from h1 to
/// `dst`, cut by hand into fragments carrying `sizes` bytes each (the
/// rest in the last), with identification `ident`.
fn fragments(dst: Ipv6Addr, next: u8, payload: &[u8], sizes: &[usize], ident: u32) -> Vec<Frame> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut k = 0;
    while at < payload.len() {
        let n = sizes.get(k).copied().unwrap_or(payload.len() - at);
        let end = (at + n).min(payload.len());
        let more = end < payload.len();
        let mut f = vec![next, 0];
        f.extend_from_slice(&((at as u16) | u16::from(more)).to_be_bytes());
        f.extend_from_slice(&ident.to_be_bytes());
        f.extend_from_slice(&payload[at..end]);
        out.push(eth(
            port_mac(0),
            H1_MAC,
            &ip6(h1(), dst, 64, IpProtocol::Ipv6Frag, &f),
        ));
        at = end;
        k += 1;
    }
    out
}

/// An echo request of 2000 bytes from h1 to the router's first address.
fn big_echo() -> Vec<u8> {
    let echo = Icmpv6Repr::EchoRequest {
        ident: 1,
        seq_no: 1,
        data: &[7; 2000],
    };
    icmp6(h1(), p(0), &echo)
}

/// Puts the fragments the router sent back together, checking each one's
/// Fragment header: the whole upper-layer message and its protocol.
fn unfragment(frames: &[(PortId, Frame)]) -> (Ipv6Repr, u8, Vec<u8>) {
    let mut whole = Vec::new();
    let mut ident = None;
    let mut first = None;
    let mut proto = 0;
    for (k, (_, f)) in frames.iter().enumerate() {
        let (ip, payload) = ip_of(f);
        assert_eq!(ip.next_header, IpProtocol::Ipv6Frag, "fragment {k}");
        let word = u16::from_be_bytes([payload[2], payload[3]]);
        assert_eq!(usize::from(word & 0xfff8), whole.len(), "offset of {k}");
        assert_eq!(word & 1 == 1, k + 1 < frames.len(), "more flag of {k}");
        let id = u32::from_be_bytes(payload[4..8].try_into().unwrap());
        assert_eq!(*ident.get_or_insert(id), id, "one identification");
        proto = payload[0];
        whole.extend_from_slice(&payload[8..]);
        first.get_or_insert(ip);
    }
    (first.unwrap(), proto, whole)
}

#[test]
fn a_fragmented_ping_of_the_router_is_put_together_and_answered_in_fragments() {
    let mut b = Bench::new();
    b.teach(0, h1(), H1_MAC);
    let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    let echo = icmp6(
        h1(),
        p(2),
        &Icmpv6Repr::EchoRequest {
            ident: 9,
            seq_no: 4,
            data: &data,
        },
    );
    // Out of order: the last piece first, the first last.
    let mut pieces = fragments(p(2), 58, &echo, &[1232, 1232], 0xabcd);
    pieces.reverse();
    let n = pieces.len() as u64;
    let delivered = |b: &Bench| b.ledger.delivered.get(&Sink::Router).copied().unwrap_or(0);
    let before = delivered(&b);
    for f in pieces {
        b.inject(0, f);
    }
    let out = unicast(b.take());
    // The reply leaves by port 0 (1500 bytes): 3008 bytes of ICMPv6 in
    // pieces of 1448 (1500 less the two headers, a multiple of 8).
    assert_eq!(out.len(), 3, "the reply in three fragments");
    assert!(out
        .iter()
        .all(|(port, f)| *port == 0 && f.len() <= ETH + 1500));
    let (ip, proto, msg) = unfragment(&out);
    assert_eq!((ip.src_addr, ip.dst_addr, proto), (p(2), h1(), 58));
    let pkt = Icmpv6Packet::new_checked(&msg[..]).unwrap();
    let repr = Icmpv6Repr::parse(&p(2), &h1(), &pkt, &ChecksumCapabilities::default())
        .expect("a valid echo reply");
    assert_eq!(
        repr,
        Icmpv6Repr::EchoReply {
            ident: 9,
            seq_no: 4,
            data: &data
        }
    );
    assert_eq!(b.router.stats().icmpv6_sent.echo_reply, 1);
    assert_eq!(delivered(&b) - before, n, "each fragment delivered");
    b.assert_conserved();
}

#[test]
fn a_packet_never_whole_is_given_up_after_60_s_with_time_exceeded() {
    let mut b = Bench::new();
    b.teach(0, h1(), H1_MAC);
    let echo = big_echo();
    let pieces = fragments(p(0), 58, &echo, &[1232], 77);
    let first = pieces[0].clone();
    b.inject(0, first.clone());
    assert!(b.take().is_empty());
    assert_eq!(b.router.in_flight(), 1, "held");
    b.assert_conserved();
    let start = b.now;
    assert!(b
        .run_until(start + SimDuration::from_secs(59))
        .iter()
        .all(|(_, f)| icmp_of(f).0.dst_addr != h1()));
    let out = unicast(b.run_until(start + SimDuration::from_secs(61)));
    assert_eq!(out.len(), 1);
    let (ip, icmp) = icmp_of(&out[0].1);
    assert_eq!((ip.src_addr, ip.dst_addr), (p(0), h1()));
    let Icmpv6Repr::TimeExceeded { reason, .. } = icmp else {
        panic!("time exceeded, got {icmp:?}")
    };
    assert_eq!(reason, Icmpv6TimeExceeded::FragReassemExceeded);
    assert_eq!(b.dropped(DropReason::ReassemblyTimeout), 1);
    // Overlapping pieces discard the packet (RFC 5722).
    let mut bad = fragments(p(0), 58, &echo, &[1232], 78);
    let mut overlap = fragments(p(0), 58, &echo[8..], &[1232], 78).remove(0);
    // The same data shifted: offset 8 over the first piece.
    let ip = &mut overlap[ETH..];
    ip[40 + 2..40 + 4].copy_from_slice(&(8u16 | 1).to_be_bytes());
    b.inject(0, bad.remove(0));
    b.inject(0, overlap);
    assert!(b.take().is_empty());
    assert_eq!(b.dropped(DropReason::ReassemblyInvalid), 2);
    assert_eq!(b.router.in_flight(), 0);
    b.assert_conserved();
}

#[test]
fn an_ipv4_datagram_after_an_ipv6_packet_is_still_given_up_after_30_s() {
    // IPv6 waits 60 s, IPv4 30 s: a later IPv4 datagram is due first, and
    // the timer set for the IPv6 packet must not hold it past its time.
    let mut b = Bench::new();
    b.teach(0, h1(), H1_MAC);
    let echo = big_echo();
    b.inject(0, fragments(p(0), 58, &echo, &[1232], 5).remove(0));
    let start = b.now;
    b.run_until(start + SimDuration::from_secs(1));
    // The first fragment of an IPv4 datagram to the router (10.0.1.1).
    let mut v4 = vec![0u8; 20 + 16];
    v4[0] = 0x45;
    v4[2..4].copy_from_slice(&36u16.to_be_bytes());
    v4[4..6].copy_from_slice(&99u16.to_be_bytes());
    v4[6] = 0x20; // more fragments
    v4[8] = 64;
    v4[9] = 17;
    v4[12..16].copy_from_slice(&[10, 0, 1, 10]);
    v4[16..20].copy_from_slice(&[10, 0, 1, 1]);
    let c = !fold_sum(&v4[..20]);
    v4[10..12].copy_from_slice(&c.to_be_bytes());
    let mut f = eth(port_mac(0), H1_MAC, &v4);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    b.inject(0, f);
    assert_eq!(b.router.in_flight(), 2, "both held");
    b.run_until(start + SimDuration::from_secs(31) + SimDuration::from_millis(1));
    assert_eq!(
        b.dropped(DropReason::ReassemblyTimeout),
        1,
        "IPv4's at 31 s"
    );
    b.run_until(start + SimDuration::from_secs(59));
    assert_eq!(b.dropped(DropReason::ReassemblyTimeout), 1);
    b.run_until(start + SimDuration::from_secs(61));
    assert_eq!(
        b.dropped(DropReason::ReassemblyTimeout),
        2,
        "IPv6's at 60 s"
    );
    b.take();
    b.assert_conserved();
}

/// The one's-complement sum of 16-bit words (IPv4's header checksum is its
/// complement).
fn fold_sum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

#[test]
fn neighbour_discovery_in_a_fragment_and_a_first_fragment_without_its_header_are_refused() {
    let mut b = Bench::new();
    // A solicitation for the router's address, its ICMPv6 behind an
    // atomic Fragment header (offset 0, no more): RFC 6980 says to ignore
    // it, so nothing is learned or answered.
    let repr = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
        target_addr: p(0),
        lladdr: Some(RawHardwareAddress::from_bytes(H1_MAC.as_bytes())),
    });
    let mut f = vec![58, 0, 0, 0, 0, 0, 0, 3];
    f.extend_from_slice(&icmp6(h1(), p(0), &repr));
    let ns = ip6(h1(), p(0), 255, IpProtocol::Ipv6Frag, &f);
    b.inject(0, eth(port_mac(0), H1_MAC, &ns));
    assert!(b.take().is_empty(), "not answered");
    assert_eq!(b.dropped(DropReason::Malformed), 1);
    // A first fragment whose TCP header is cut after 8 bytes (RFC 7112):
    // dropped at once, not held for the rest.
    let mut f = vec![6, 0, 0, 1, 0, 0, 0, 4];
    f.extend_from_slice(&[0x9c, 0x40, 0, 80, 0, 0, 0, 1]);
    let cut = ip6(h1(), p(0), 64, IpProtocol::Ipv6Frag, &f);
    b.inject(0, eth(port_mac(0), H1_MAC, &cut));
    assert_eq!(b.router.in_flight(), 0, "not held");
    assert_eq!(b.dropped(DropReason::Malformed), 2);
    b.assert_conserved();
}
