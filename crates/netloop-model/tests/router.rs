//! The router driven directly, frame by frame, in simulated time: forwarding,
//! ICMP errors, fragmentation, ARP hand-off, ingress checks and the
//! forwarding-rate engine. Frames are built and checked with smoltcp's wire
//! types, independently of the router's own byte handling. Every test ends by
//! checking packet conservation.
//!
//! The router under test has three ports:
//!
//! | port | address      | MTU  | beyond it                                   |
//! |------|--------------|------|---------------------------------------------|
//! | 0    | 10.0.1.1/24  | 1500 | host h1 10.0.1.10                           |
//! | 1    | 10.0.2.1/24  | 1500 | host h2 10.0.2.20, router r2 10.0.2.2 (for 10.0.3.0/24) |
//! | 2    | 10.0.4.1/24  | 1000 | host h4 10.0.4.40                           |

use netloop_core::{PacketRate, SimDuration, SimTime};
use netloop_model::arp::ARP_TIMER;
use netloop_model::node::{mac_for, NodeCtx, PortInfo};
use netloop_model::router::Router;
use netloop_model::routing::{Route, RoutingTable, RoutingTable6};
use netloop_model::spec::{Ipv4Cidr, RouterSpec};
use netloop_model::stats::{DropReason, Ledger, Origin, Sink};
use netloop_model::{Frame, PortId};
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol,
    EthernetRepr, Icmpv4Message, Icmpv4Packet, Icmpv4Repr, Ipv4Packet, Ipv4Repr,
};
use std::net::Ipv4Addr;

const ETH: usize = 14;
const H1: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 10);
const H2: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 20);
const R2: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);
const H4: Ipv4Addr = Ipv4Addr::new(10, 0, 4, 40);
const FAR: Ipv4Addr = Ipv4Addr::new(10, 0, 3, 7);
const P0: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
const P1: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 1);
const H1_MAC: EthernetAddress = EthernetAddress([0x02, 0xaa, 0, 0, 0, 1]);
const H2_MAC: EthernetAddress = EthernetAddress([0x02, 0xaa, 0, 0, 0, 2]);
const R2_MAC: EthernetAddress = EthernetAddress([0x02, 0xaa, 0, 0, 0, 3]);
const H4_MAC: EthernetAddress = EthernetAddress([0x02, 0xaa, 0, 0, 0, 4]);

fn cidr(s: &str) -> Ipv4Cidr {
    Ipv4Cidr::parse(s).unwrap()
}

fn port_mac(p: PortId) -> EthernetAddress {
    mac_for(1, p)
}

// ---------------------------------------------------------------------------
// The bench: a router, its context buffers, and the neighbours' side.
// ---------------------------------------------------------------------------

struct Bench {
    router: Router,
    now: SimTime,
    out: Vec<(PortId, Frame)>,
    timers: Vec<(SimTime, u64)>,
    ledger: Ledger,
}

impl Bench {
    fn new(spec: RouterSpec) -> Self {
        let ports: Vec<PortInfo> = [
            ("10.0.1.1/24", 1500),
            ("10.0.2.1/24", 1500),
            ("10.0.4.1/24", 1000),
        ]
        .iter()
        .enumerate()
        .map(|(i, (a, mtu))| PortInfo {
            mac: port_mac(i),
            addr: Some(cidr(a)),
            addr6: None,
            mtu: *mtu,
            link: i,
            name: format!("eth{i}"),
        })
        .collect();
        let mut table = RoutingTable::new();
        for (i, p) in ports.iter().enumerate() {
            let a = p.addr.unwrap();
            table.insert(Route {
                prefix: Ipv4Cidr {
                    addr: a.network(),
                    prefix: a.prefix,
                },
                via: None,
                port: i,
            });
        }
        table.insert(Route {
            prefix: cidr("10.0.3.0/24"),
            via: Some(R2),
            port: 1,
        });
        Bench {
            router: Router::new("r1", ports, &spec, table, RoutingTable6::new()),
            now: SimTime::ZERO,
            out: Vec::new(),
            timers: Vec::new(),
            ledger: Ledger::default(),
        }
    }

    /// A frame sent to the router by a neighbour on `port`.
    fn inject(&mut self, port: PortId, frame: Frame) {
        self.ledger.create(Origin::Host);
        let mut ctx = NodeCtx::new(self.now, &mut self.out, &mut self.timers, &mut self.ledger);
        self.router.receive(port, frame, &mut ctx);
    }

    /// The frames the router sent, now received by the neighbours.
    fn take(&mut self) -> Vec<(PortId, Frame)> {
        for _ in &self.out {
            self.ledger.deliver(Sink::Host);
        }
        std::mem::take(&mut self.out)
    }

    /// Fires due timers in time order up to `until`, returning what the
    /// router sent and when.
    fn run_until(&mut self, until: SimTime) -> Vec<(SimTime, PortId, Frame)> {
        let mut sent = Vec::new();
        loop {
            let next = (0..self.timers.len())
                .filter(|&i| self.timers[i].0 <= until)
                .min_by_key(|&i| (self.timers[i].0, i));
            let Some(i) = next else { break };
            let (at, token) = self.timers.remove(i);
            assert!(at >= self.now, "time ran backwards");
            self.now = at;
            let mut ctx = NodeCtx::new(self.now, &mut self.out, &mut self.timers, &mut self.ledger);
            self.router.timer(token, &mut ctx);
            for (p, f) in self.take() {
                sent.push((at, p, f));
            }
        }
        self.now = self.now.max(until);
        sent
    }

    /// Teaches the router `ip` = `mac` on `port`, the way a neighbour does:
    /// by asking for the router's MAC (RFC 826 learns the asker).
    fn teach(&mut self, port: PortId, ip: Ipv4Addr, mac: EthernetAddress) {
        let me = [P0, P1, Ipv4Addr::new(10, 0, 4, 1)][port];
        self.inject(
            port,
            arp(
                ArpOperation::Request,
                mac,
                ip,
                EthernetAddress::BROADCAST,
                me,
            ),
        );
        let replies = self.take();
        assert_eq!(replies.len(), 1, "the router answers the ARP request");
    }

    fn dropped(&self, r: DropReason) -> u64 {
        self.ledger.dropped.get(r)
    }

    /// Packet conservation: every frame created is delivered, dropped, held
    /// by the router, or waiting in `out`.
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
        // The router's own drop counters agree with the ledger.
        assert_eq!(self.router.stats().drops, l.dropped);
    }
}

// ---------------------------------------------------------------------------
// Frame builders.
// ---------------------------------------------------------------------------

/// An IPv4 packet; `Default` is a plain UDP-sized packet from h1 to h2.
#[derive(Clone)]
struct Ip {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    ttl: u8,
    proto: u8,
    tos: u8,
    ident: u16,
    df: bool,
    mf: bool,
    /// In 8-byte units.
    offset: u16,
    options: Vec<u8>,
    payload: Vec<u8>,
}

impl Default for Ip {
    fn default() -> Self {
        Ip {
            src: H1,
            dst: H2,
            ttl: 64,
            proto: 17,
            tos: 0,
            ident: 0x4242,
            df: false,
            mf: false,
            offset: 0,
            options: Vec::new(),
            payload: udp(40000, 9, &[0x5a; 32]),
        }
    }
}

impl Ip {
    fn bytes(&self) -> Vec<u8> {
        assert_eq!(self.options.len() % 4, 0);
        let hl = 20 + self.options.len();
        let mut b = vec![0u8; hl + self.payload.len()];
        b[20..hl].copy_from_slice(&self.options);
        b[hl..].copy_from_slice(&self.payload);
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        p.set_version(4);
        p.set_header_len(hl as u8);
        p.set_dscp(self.tos >> 2);
        p.set_ecn(self.tos & 3);
        p.set_total_len((hl + self.payload.len()) as u16);
        p.set_ident(self.ident);
        p.clear_flags();
        p.set_dont_frag(self.df);
        p.set_more_frags(self.mf);
        p.set_frag_offset(self.offset * 8);
        p.set_hop_limit(self.ttl);
        p.set_next_header(self.proto.into());
        p.set_src_addr(self.src);
        p.set_dst_addr(self.dst);
        p.fill_checksum();
        b
    }

    /// In an Ethernet frame from h1 to the router's port 0.
    fn frame(&self) -> Frame {
        eth(port_mac(0), H1_MAC, EthernetProtocol::Ipv4, &self.bytes())
    }
}

fn eth(dst: EthernetAddress, src: EthernetAddress, ty: EthernetProtocol, payload: &[u8]) -> Frame {
    let repr = EthernetRepr {
        src_addr: src,
        dst_addr: dst,
        ethertype: ty,
    };
    let mut f = vec![0u8; ETH + payload.len()];
    repr.emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    f[ETH..].copy_from_slice(payload);
    f.into()
}

/// A UDP datagram (checksum 0: none, allowed over IPv4).
fn udp(sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&sport.to_be_bytes());
    b.extend_from_slice(&dport.to_be_bytes());
    b.extend_from_slice(&((8 + data.len()) as u16).to_be_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(data);
    b
}

fn icmp(repr: Icmpv4Repr) -> Vec<u8> {
    let mut b = vec![0u8; repr.buffer_len()];
    repr.emit(
        &mut Icmpv4Packet::new_unchecked(&mut b[..]),
        &ChecksumCapabilities::default(),
    );
    b
}

fn arp(
    op: ArpOperation,
    smac: EthernetAddress,
    sip: Ipv4Addr,
    tmac: EthernetAddress,
    tip: Ipv4Addr,
) -> Frame {
    let repr = ArpRepr::EthernetIpv4 {
        operation: op,
        source_hardware_addr: smac,
        source_protocol_addr: sip,
        target_hardware_addr: if op == ArpOperation::Request {
            EthernetAddress([0; 6])
        } else {
            tmac
        },
        target_protocol_addr: tip,
    };
    let mut b = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ArpPacket::new_unchecked(&mut b[..]));
    eth(tmac, smac, EthernetProtocol::Arp, &b)
}

// ---------------------------------------------------------------------------
// Frame checks.
// ---------------------------------------------------------------------------

/// The IPv4 packet of a frame the router sent, checked by smoltcp (header
/// checksum included). A fragment is checked as a packet only: smoltcp's
/// `Ipv4Repr` refuses fragments when, as here, its own fragmentation is
/// off (hosts reassemble in netloop's IP layer).
fn ip_of(frame: &[u8]) -> Ipv4Packet<&[u8]> {
    let e = EthernetFrame::new_checked(frame).expect("an Ethernet frame");
    assert_eq!(e.ethertype(), EthernetProtocol::Ipv4);
    let p = Ipv4Packet::new_checked(&frame[ETH..]).expect("a well-formed IPv4 packet");
    assert!(p.verify_checksum(), "header checksum");
    assert_eq!(p.total_len() as usize, frame.len() - ETH, "no stray bytes");
    if !p.more_frags() && p.frag_offset() == 0 {
        Ipv4Repr::parse(&p, &ChecksumCapabilities::default()).expect("smoltcp parses it");
    }
    p
}

fn macs(frame: &[u8]) -> (EthernetAddress, EthernetAddress) {
    let e = EthernetFrame::new_checked(frame).unwrap();
    (e.dst_addr(), e.src_addr())
}

/// Checks an ICMP error sent by the router: addresses, TOS, checksum, type
/// and code, and that it quotes `original` (header + 8 bytes). Returns the
/// ICMP message.
fn check_error(
    out: &(PortId, Frame),
    port: PortId,
    to_mac: EthernetAddress,
    from: Ipv4Addr,
    original: &[u8],
    msg: Icmpv4Message,
    code: u8,
) -> Vec<u8> {
    assert_eq!(out.0, port);
    assert_eq!(macs(&out.1), (to_mac, port_mac(port)));
    let ip = ip_of(&out.1);
    assert_eq!(ip.src_addr(), from);
    assert_eq!(
        ip.dst_addr(),
        Ipv4Packet::new_unchecked(original).src_addr()
    );
    assert_eq!(u8::from(ip.next_header()), 1);
    assert_eq!(ip.dscp() << 2, 0xc0, "precedence 6 (RFC 1812 4.3.2.5)");
    assert_eq!(ip.hop_limit(), 64);
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum(), "ICMP checksum");
    assert_eq!(icmp.msg_type(), msg);
    assert_eq!(icmp.msg_code(), code);
    let hl = Ipv4Packet::new_unchecked(original).header_len() as usize;
    assert_eq!(
        icmp.data(),
        &original[..hl + 8],
        "quotes the header + 8 bytes"
    );
    ip.payload().to_vec()
}

fn ms(n: u64) -> SimTime {
    SimTime::ZERO + SimDuration::from_millis(n)
}

// ---------------------------------------------------------------------------
// Tests.
// ---------------------------------------------------------------------------

#[test]
fn forwarding_rewrites_macs_decrements_ttl_and_fixes_the_checksum() {
    let mut b = Bench::new(RouterSpec::default());
    b.teach(1, H2, H2_MAC);
    b.teach(1, R2, R2_MAC);

    // To a directly connected host.
    let pkt = Ip {
        ttl: 64,
        ..Ip::default()
    };
    b.inject(0, pkt.frame());
    let out = b.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 1);
    assert_eq!(macs(&out[0].1), (H2_MAC, port_mac(1)));
    let ip = ip_of(&out[0].1);
    assert_eq!(ip.hop_limit(), 63);
    assert_eq!((ip.src_addr(), ip.dst_addr()), (H1, H2));
    assert_eq!(ip.ident(), pkt.ident);
    assert_eq!(ip.payload(), &pkt.payload[..]);

    // Through a next-hop router: the frame goes to r2's MAC.
    let pkt = Ip {
        dst: FAR,
        ttl: 2,
        ..Ip::default()
    };
    b.inject(0, pkt.frame());
    let out = b.take();
    assert_eq!(out.len(), 1);
    assert_eq!(macs(&out[0].1), (R2_MAC, port_mac(1)));
    assert_eq!(ip_of(&out[0].1).hop_limit(), 1);

    // Options are forwarded unchanged; many TTL/checksum combinations keep a
    // valid checksum under the incremental update.
    for ttl in [2u8, 3, 17, 128, 255] {
        let pkt = Ip {
            ttl,
            tos: ttl,
            ident: u16::from(ttl) * 257,
            options: vec![1, 1, 1, 0],
            ..Ip::default()
        };
        b.inject(0, pkt.frame());
        let out = b.take();
        let ip = ip_of(&out[0].1);
        assert_eq!(ip.hop_limit(), ttl - 1);
        assert_eq!(ip.header_len(), 24);
        assert_eq!(&out[0].1[ETH + 20..ETH + 24], &[1, 1, 1, 0]);
    }

    // Ethernet padding on a short packet is trimmed before forwarding.
    let pkt = Ip {
        payload: udp(1, 2, &[7, 7]),
        ..Ip::default()
    };
    let mut f = pkt.frame();
    assert_eq!(f.len(), ETH + 30);
    f.resize(60, 0);
    b.inject(0, f);
    let out = b.take();
    assert_eq!(out[0].1.len(), ETH + 30);
    assert_eq!(ip_of(&out[0].1).payload(), &pkt.payload[..]);

    assert_eq!(b.router.stats().forwarded, 8);
    b.assert_conserved();
}

/// More destinations than the router's memos hold, in turns: each packet
/// still leaves by its own route to its own neighbour's MAC, and a
/// neighbour whose MAC changes gets the next packet at the new one.
#[test]
fn packets_to_many_destinations_in_turn_each_go_their_own_way() {
    let mut b = Bench::new(RouterSpec::default());
    b.teach(1, R2, R2_MAC);
    // 250 hosts on each of ports 1 and 2, and 250 addresses behind r2.
    let host_mac = |port: u8, i: u8| EthernetAddress([0x02, 0xbb, 0, 0, port, i]);
    let mut dests = Vec::new();
    for i in 3..=252u8 {
        let on1 = Ipv4Addr::new(10, 0, 2, i);
        let on2 = Ipv4Addr::new(10, 0, 4, i);
        b.teach(1, on1, host_mac(1, i));
        b.teach(2, on2, host_mac(2, i));
        dests.push((on1, 1, host_mac(1, i)));
        dests.push((on2, 2, host_mac(2, i)));
        dests.push((Ipv4Addr::new(10, 0, 3, i), 1, R2_MAC));
    }
    let mut sent = 0;
    for round in 0..3 {
        if round == 2 {
            // A neighbour on port 2 answers from a new MAC (RFC 826: the
            // router learns it from the request).
            let (ip, _, _) = dests[1];
            let moved = EthernetAddress([0x02, 0xcc, 0, 0, 0, 1]);
            b.teach(2, ip, moved);
            dests[1].2 = moved;
        }
        // Forwards, backwards, then odd before even: orders in which
        // destinations that share a slot take turns.
        let order: Vec<usize> = match round {
            0 => (0..dests.len()).collect(),
            1 => (0..dests.len()).rev().collect(),
            _ => (0..dests.len())
                .filter(|i| i % 2 == 1)
                .chain((0..dests.len()).filter(|i| i % 2 == 0))
                .collect(),
        };
        for i in order {
            let (dst, port, mac) = dests[i];
            b.inject(
                0,
                Ip {
                    dst,
                    ..Ip::default()
                }
                .frame(),
            );
            sent += 1;
            let out = b.take();
            assert_eq!(out.len(), 1, "round {round}: one frame for {dst}");
            assert_eq!(out[0].0, port, "round {round}: the port to {dst}");
            assert_eq!(
                macs(&out[0].1),
                (mac, port_mac(port)),
                "round {round}: {dst}"
            );
            assert_eq!(ip_of(&out[0].1).dst_addr(), dst);
        }
    }
    assert_eq!(b.router.stats().forwarded, sent);
    b.assert_conserved();
}

/// A static neighbour entry is used at once and stays what it is: an ARP
/// request from the neighbour with another MAC (which teaches a learned
/// entry its new MAC) does not replace it.
#[test]
fn a_static_neighbour_is_not_replaced_by_what_arp_says() {
    let mut b = Bench::new(RouterSpec::default());
    assert!(b.router.add_static_neighbour(1, H2.into(), H2_MAC));
    b.inject(0, Ip::default().frame());
    let out = b.take();
    assert_eq!(out.len(), 1, "sent at once, no ARP request first");
    assert_eq!(macs(&out[0].1), (H2_MAC, port_mac(1)));
    b.teach(1, H2, EthernetAddress([0x02, 0xcc, 0, 0, 0, 9]));
    b.inject(0, Ip::default().frame());
    let out = b.take();
    assert_eq!(
        macs(&out[0].1),
        (H2_MAC, port_mac(1)),
        "still the static MAC"
    );
    assert_eq!(b.router.stats().arp_requests_sent, 0);
    b.assert_conserved();
}

/// Static entries have a bound of their own: a router given as many as a
/// table holds (4 096) refuses one more, and still learns other
/// neighbours as usual (a table full of entries that never go would
/// otherwise refuse every neighbour it did not know from the start).
#[test]
fn static_entries_leave_room_for_learned_ones() {
    let mut b = Bench::new(RouterSpec::default());
    let far = |i: u32| Ipv4Addr::from(0x0ac8_0000 + i); // 10.200.x.y
    for i in 0..4096 {
        assert!(
            b.router.add_static_neighbour(2, far(i).into(), H4_MAC),
            "entry {i}"
        );
    }
    assert!(!b.router.add_static_neighbour(2, far(4096).into(), H4_MAC));
    // H2 is not known: the router asks for it and forwards once told.
    b.inject(0, Ip::default().frame());
    let out = b.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1[12..14], [0x08, 0x06], "an ARP request, not a drop");
    b.inject(1, arp(ArpOperation::Reply, H2_MAC, H2, port_mac(1), P1));
    let out = b.take();
    assert_eq!(out.len(), 1, "the waiting packet leaves");
    assert_eq!(macs(&out[0].1), (H2_MAC, port_mac(1)));
    assert_eq!(b.dropped(DropReason::ArpQueueFull), 0);
    b.assert_conserved();
}

#[test]
fn ttl_one_gets_time_exceeded_from_the_ingress_address() {
    let mut b = Bench::new(RouterSpec::default());
    b.teach(0, H1, H1_MAC);
    for ttl in [1, 0] {
        let pkt = Ip {
            ttl,
            ..Ip::default()
        };
        b.inject(0, pkt.frame());
        let out = b.take();
        assert_eq!(out.len(), 1, "only the error comes out");
        check_error(
            &out[0],
            0,
            H1_MAC,
            P0,
            &pkt.bytes(),
            Icmpv4Message::TimeExceeded,
            0,
        );
    }
    assert_eq!(b.dropped(DropReason::TtlExpired), 2);
    assert_eq!(b.router.stats().icmp_sent.time_exceeded, 2);

    // RFC 1812 5.3.1: TTL 1 to the router itself is not expired: a UDP probe
    // to the far port's address gets port unreachable from that address.
    let probe = Ip {
        dst: P1,
        ttl: 1,
        ..Ip::default()
    };
    b.inject(0, probe.frame());
    let out = b.take();
    assert_eq!(out.len(), 1);
    check_error(
        &out[0],
        0,
        H1_MAC,
        P1,
        &probe.bytes(),
        Icmpv4Message::DstUnreachable,
        3,
    );
    assert_eq!(b.router.stats().icmp_sent.port_unreachable, 1);
    assert_eq!(b.ledger.delivered[&Sink::Router], 2, "probe + ARP request");
    b.assert_conserved();
}

#[test]
fn no_route_gets_net_unreachable() {
    let mut b = Bench::new(RouterSpec::default());
    b.teach(0, H1, H1_MAC);
    let pkt = Ip {
        dst: Ipv4Addr::new(192, 0, 2, 1),
        ..Ip::default()
    };
    b.inject(0, pkt.frame());
    let out = b.take();
    assert_eq!(out.len(), 1);
    check_error(
        &out[0],
        0,
        H1_MAC,
        P0,
        &pkt.bytes(),
        Icmpv4Message::DstUnreachable,
        0,
    );
    assert_eq!(b.dropped(DropReason::NoRoute), 1);
    assert_eq!(b.router.stats().icmp_sent.net_unreachable, 1);
    b.assert_conserved();
}

#[test]
fn too_big_with_df_gets_fragmentation_needed_with_the_next_hop_mtu() {
    let mut b = Bench::new(RouterSpec::default());
    b.teach(0, H1, H1_MAC);
    b.teach(2, H4, H4_MAC);
    let big = Ip {
        dst: H4,
        df: true,
        payload: udp(5000, 6000, &[1; 1372]),
        ..Ip::default()
    };
    assert_eq!(big.bytes().len(), 1400);
    b.inject(0, big.frame());
    let out = b.take();
    assert_eq!(out.len(), 1);
    let msg = check_error(
        &out[0],
        0,
        H1_MAC,
        P0,
        &big.bytes(),
        Icmpv4Message::DstUnreachable,
        4,
    );
    // RFC 1191: next-hop MTU in the low half of the second word; the quoted
    // header still has the TTL the source sent.
    assert_eq!(
        &msg[4..8],
        &[0, 0, 1000u16.to_be_bytes()[0], 1000u16.to_be_bytes()[1]]
    );
    assert_eq!(msg[8 + 8], 64, "quoted TTL");
    assert_eq!(b.dropped(DropReason::FragmentationNeeded), 1);

    // Exactly the MTU fits, DF or not.
    let fits = Ip {
        dst: H4,
        df: true,
        payload: udp(5000, 6000, &[1; 972]),
        ..Ip::default()
    };
    assert_eq!(fits.bytes().len(), 1000);
    b.inject(0, fits.frame());
    let out = b.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 2);
    assert!(ip_of(&out[0].1).dont_frag());
    assert_eq!(b.router.stats().icmp_sent.fragmentation_needed, 1);
    b.assert_conserved();
}

/// Checks fragments of `original` sent out of port 2 and returns the
/// reassembled data and the first and last offsets (bytes).
fn reassemble(out: &[(PortId, Frame)], original: &Ip, mtu: usize) -> Vec<u8> {
    let mut data = Vec::new();
    let mut expect_offset = original.offset as usize * 8;
    for (i, (port, f)) in out.iter().enumerate() {
        assert_eq!(*port, 2);
        assert_eq!(macs(f), (H4_MAC, port_mac(2)));
        let ip = ip_of(f);
        assert!(ip.total_len() as usize <= mtu, "fragment {i} fits the MTU");
        assert_eq!(ip.ident(), original.ident);
        assert_eq!(ip.hop_limit(), original.ttl - 1);
        assert!(!ip.dont_frag());
        assert_eq!(
            ip.frag_offset() as usize,
            expect_offset,
            "fragment {i} is contiguous"
        );
        let last = i == out.len() - 1;
        if last {
            assert_eq!(
                ip.more_frags(),
                original.mf,
                "the last keeps the original MF"
            );
        } else {
            assert!(ip.more_frags(), "MF on every fragment but the last");
            assert_eq!(
                ip.payload().len() % 8,
                0,
                "non-last fragments hold 8-byte multiples"
            );
        }
        expect_offset += ip.payload().len();
        data.extend_from_slice(ip.payload());
    }
    data
}

#[test]
fn too_big_without_df_is_fragmented_and_reassembles() {
    let mut b = Bench::new(RouterSpec::default());
    b.teach(2, H4, H4_MAC);
    // Record Route (not copied) and Stream ID (copied), 12 bytes of options.
    let options = vec![7, 7, 4, 0, 0, 0, 0, 136, 4, 0x12, 0x34, 0];
    let payload: Vec<u8> = (0..2500u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let pkt = Ip {
        dst: H4,
        proto: 253,
        options: options.clone(),
        payload: payload.clone(),
        ..Ip::default()
    };
    b.inject(0, pkt.frame());
    let out = b.take();
    assert_eq!(out.len(), 3, "2532 bytes over a 1000-byte MTU");
    assert_eq!(reassemble(&out, &pkt, 1000), payload);
    // The first fragment carries every option, the others only the copied.
    assert_eq!(&out[0].1[ETH + 20..ETH + 32], &options[..]);
    for (_, f) in &out[1..] {
        assert_eq!(ip_of(f).header_len(), 24);
        assert_eq!(&f[ETH + 20..ETH + 24], &[136, 4, 0x12, 0x34]);
    }
    assert_eq!(b.ledger.created[&Origin::Fragment], 2);

    // An arriving middle fragment (MF set, offset 100 units) is fragmented
    // again: offsets continue from its own, and its last piece keeps MF.
    let payload: Vec<u8> = (0..1400u32).map(|i| (i % 253) as u8).collect();
    let mid = Ip {
        dst: H4,
        ident: 7,
        mf: true,
        offset: 100,
        payload: payload.clone(),
        ..Ip::default()
    };
    b.inject(0, mid.frame());
    let out = b.take();
    assert_eq!(out.len(), 2);
    assert_eq!(reassemble(&out, &mid, 1000), payload);

    let s = b.router.stats();
    assert_eq!((s.fragmented, s.fragments_created, s.forwarded), (2, 3, 2));
    assert_eq!(b.ledger.created[&Origin::Fragment], 3);
    b.assert_conserved();
}

/// A fragment that ends past 65 535 bytes (a "ping of death" piece) cannot
/// be split: its pieces' offsets would overflow the 13-bit field into the
/// flags. It fits unsplit and is forwarded as it is; too big, it is dropped
/// as malformed, and nothing is sent.
#[test]
fn a_fragment_ending_past_the_largest_datagram_is_not_refragmented() {
    let mut b = Bench::new(RouterSpec::default());
    b.teach(2, H4, H4_MAC);
    let death = |payload: usize| Ip {
        dst: H4,
        ident: 9,
        offset: 8191,
        payload: vec![0x33; payload],
        ..Ip::default()
    };
    b.inject(0, death(900).frame());
    let out = b.take();
    assert_eq!(
        out.len(),
        1,
        "it fits the 1000-byte MTU: forwarded as it is"
    );
    assert_eq!(ip_of(&out[0].1).frag_offset(), 8191 * 8);
    b.inject(0, death(1400).frame());
    assert!(b.take().is_empty(), "split, its offsets would not fit");
    assert_eq!(b.dropped(DropReason::Malformed), 1);
    let s = b.router.stats();
    assert_eq!(
        (s.forwarded, s.fragmented),
        (1, 0),
        "the dropped one is not counted forwarded"
    );
    b.assert_conserved();
}

#[test]
fn ping_to_the_router_gets_an_echo_reply() {
    let mut b = Bench::new(RouterSpec::default());
    b.teach(0, H1, H1_MAC);
    let data: Vec<u8> = (0..56u8).collect();
    // To the near address, and to the far port's address (with TTL 1: the
    // router is the destination, so it does not expire).
    for (to, ttl) in [(P0, 64), (P1, 1)] {
        let req = Ip {
            dst: to,
            ttl,
            proto: 1,
            payload: icmp(Icmpv4Repr::EchoRequest {
                ident: 0x1234,
                seq_no: 7,
                data: &data,
            }),
            ..Ip::default()
        };
        b.inject(0, req.frame());
        let out = b.take();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, 0);
        assert_eq!(macs(&out[0].1), (H1_MAC, port_mac(0)));
        let ip = ip_of(&out[0].1);
        assert_eq!(
            (ip.src_addr(), ip.dst_addr()),
            (to, H1),
            "reply from the pinged address"
        );
        let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
        let repr = Icmpv4Repr::parse(&icmp, &ChecksumCapabilities::default()).expect("valid ICMP");
        assert_eq!(
            repr,
            Icmpv4Repr::EchoReply {
                ident: 0x1234,
                seq_no: 7,
                data: &data,
            }
        );
    }
    assert_eq!(b.router.stats().icmp_sent.echo_reply, 2);
    assert_eq!(b.router.stats().local, 2);
    b.assert_conserved();
}

#[test]
fn the_first_packet_to_an_unknown_next_hop_waits_for_arp() {
    let mut b = Bench::new(RouterSpec::default());
    let pkt = Ip::default();
    b.inject(0, pkt.frame());
    let out = b.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 1);
    let (dst, src) = macs(&out[0].1);
    assert_eq!((dst, src), (EthernetAddress::BROADCAST, port_mac(1)));
    let req = ArpRepr::parse(&ArpPacket::new_checked(&out[0].1[ETH..]).unwrap()).unwrap();
    let ArpRepr::EthernetIpv4 {
        operation,
        source_protocol_addr,
        target_protocol_addr,
        ..
    } = req
    else {
        panic!("{req:?}")
    };
    assert_eq!(operation, ArpOperation::Request);
    assert_eq!((source_protocol_addr, target_protocol_addr), (P1, H2));
    assert_eq!(b.router.in_flight(), 1, "the packet is held");
    assert!(b.timers.iter().any(|&(_, t)| t == ARP_TIMER));
    b.assert_conserved();

    // The reply releases it.
    b.inject(1, arp(ArpOperation::Reply, H2_MAC, H2, port_mac(1), P1));
    let out = b.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 1);
    assert_eq!(macs(&out[0].1), (H2_MAC, port_mac(1)));
    assert_eq!(ip_of(&out[0].1).hop_limit(), 63);
    assert_eq!(b.router.in_flight(), 0);
    b.assert_conserved();
}

/// Sends one packet from h1 to h2, whose MAC the router knows: the
/// (destination, source) MACs of the one frame it forwards.
fn forward_to_h2(b: &mut Bench) -> (EthernetAddress, EthernetAddress) {
    b.inject(0, Ip::default().frame());
    let out = b.take();
    assert_eq!(out.len(), 1, "one frame forwarded");
    assert_eq!(out[0].0, 1, "out of h2's port");
    macs(&out[0].1)
}

/// A neighbour that announces a new MAC while packets flow to it gets
/// the next packet at the new one: the router remembers the neighbour it
/// sent to last, and forgets it when its cache learns something.
#[test]
fn a_neighbour_that_moves_gets_the_next_packet_at_its_new_mac() {
    let mut b = Bench::new(RouterSpec::default());
    let h2_new = EthernetAddress([0x02, 0xaa, 0, 0, 0, 0x22]);
    b.inject(0, Ip::default().frame());
    b.take();
    b.inject(1, arp(ArpOperation::Reply, H2_MAC, H2, port_mac(1), P1));
    assert_eq!(macs(&b.take()[0].1), (H2_MAC, port_mac(1)));
    assert_eq!(forward_to_h2(&mut b), (H2_MAC, port_mac(1)));
    // An answer to nobody's question, from the same address (RFC 826's
    // merge: the entry exists, so it is updated).
    b.inject(1, arp(ArpOperation::Reply, h2_new, H2, port_mac(1), P1));
    b.take();
    assert_eq!(forward_to_h2(&mut b), (h2_new, port_mac(1)));
    b.assert_conserved();
}

/// The router remembers the route of the last destination it forwarded
/// to; a packet to it still meets every check of its own, in RFC 1812's
/// order: from a martian source, with a TTL that would reach zero, sent to
/// the link's broadcast MAC.
#[test]
fn a_packet_to_the_last_destination_is_still_checked_in_full() {
    let mut b = Bench::new(RouterSpec::default());
    b.inject(0, Ip::default().frame());
    b.inject(1, arp(ArpOperation::Reply, H2_MAC, H2, port_mac(1), P1));
    assert_eq!(b.take().len(), 2, "a request and the packet");
    b.inject(
        0,
        Ip {
            src: Ipv4Addr::new(127, 0, 0, 1),
            ..Ip::default()
        }
        .frame(),
    );
    assert_eq!(b.dropped(DropReason::Martian), 1);
    b.inject(
        0,
        Ip {
            ttl: 1,
            ..Ip::default()
        }
        .frame(),
    );
    assert_eq!(b.dropped(DropReason::TtlExpired), 1);
    let mut to_all = Ip::default().frame();
    to_all[0..6].copy_from_slice(EthernetAddress::BROADCAST.as_bytes());
    b.inject(0, to_all);
    assert_eq!(b.dropped(DropReason::NotForUs), 1);
    let out = b.take();
    assert_eq!(out.len(), 1, "only the time-exceeded error leaves");
    assert_eq!(out[0].0, 0);
    assert_eq!(forward_to_h2(&mut b), (H2_MAC, port_mac(1)));
    b.assert_conserved();
}

#[test]
fn a_packet_waiting_for_an_unanswered_arp_is_dropped() {
    let mut b = Bench::new(RouterSpec::default());
    b.inject(0, Ip::default().frame());
    b.take();
    let retries = b.run_until(ms(10_000));
    assert!(!retries.is_empty(), "requests are retried");
    assert_eq!(b.router.in_flight(), 0);
    assert_eq!(b.dropped(DropReason::ArpUnresolved), 1);
    b.assert_conserved();
}

#[test]
fn bad_frames_are_dropped_with_named_reasons() {
    let mut b = Bench::new(RouterSpec::default());
    b.teach(1, H2, H2_MAC);
    let good = Ip::default().frame();

    // Bad header checksum.
    let mut f = good.clone();
    f[ETH + 15] ^= 1;
    b.inject(0, f);
    // Truncated: shorter than an Ethernet header; an IP header cut short; a
    // total length beyond the frame; a header length below 5 words.
    b.inject(0, good[..10].to_vec().into());
    b.inject(0, good[..ETH + 12].to_vec().into());
    let refill = |f: &mut Frame| {
        let mut p = Ipv4Packet::new_unchecked(&mut f[ETH..]);
        p.fill_checksum();
    };
    let mut f = good.clone();
    f[ETH + 2..ETH + 4].copy_from_slice(&2000u16.to_be_bytes());
    refill(&mut f);
    b.inject(0, f);
    let mut f = good.clone();
    f[ETH] = 0x44;
    f[ETH + 10..ETH + 12].fill(0);
    let c = !fold_sum(&f[ETH..ETH + 20]);
    f[ETH + 10..ETH + 12].copy_from_slice(&c.to_be_bytes());
    b.inject(0, f);
    // Martian addresses are never forwarded (RFC 1812 5.3.7); IP multicast
    // is not routed.
    b.inject(
        0,
        Ip {
            src: Ipv4Addr::LOCALHOST,
            ..Ip::default()
        }
        .frame(),
    );
    b.inject(
        0,
        Ip {
            dst: Ipv4Addr::new(239, 1, 2, 3),
            ..Ip::default()
        }
        .frame(),
    );
    // IPv6 and 802.1Q-tagged frames.
    b.inject(
        0,
        eth(port_mac(0), H1_MAC, EthernetProtocol::Ipv6, &[0x60; 40]),
    );
    let mut tagged = good.clone();
    tagged.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
    b.inject(0, tagged);
    // Not for us: another unicast MAC, a multicast MAC, and a link-layer
    // broadcast whose IP destination is elsewhere (RFC 1812 5.3.4).
    let ip = Ip::default().bytes();
    b.inject(0, eth(H2_MAC, H1_MAC, EthernetProtocol::Ipv4, &ip));
    let mcast = EthernetAddress([0x01, 0x00, 0x5e, 0, 0, 1]);
    b.inject(0, eth(mcast, H1_MAC, EthernetProtocol::Ipv4, &ip));
    b.inject(
        0,
        eth(
            EthernetAddress::BROADCAST,
            H1_MAC,
            EthernetProtocol::Ipv4,
            &ip,
        ),
    );
    // An echo request to the router with a bad ICMP checksum.
    let mut echo = icmp(Icmpv4Repr::EchoRequest {
        ident: 1,
        seq_no: 1,
        data: &[1, 2, 3],
    });
    echo[2] ^= 0xff;
    b.inject(
        0,
        Ip {
            dst: P0,
            proto: 1,
            payload: echo,
            ..Ip::default()
        }
        .frame(),
    );

    assert!(b.take().is_empty(), "nothing is forwarded or answered");
    assert_eq!(b.dropped(DropReason::BadChecksum), 2);
    assert_eq!(b.dropped(DropReason::Malformed), 4);
    assert_eq!(b.dropped(DropReason::Martian), 1);
    assert_eq!(b.dropped(DropReason::Unsupported), 3);
    assert_eq!(b.dropped(DropReason::NotForUs), 3);
    assert_eq!(b.router.stats().forwarded, 0);
    b.assert_conserved();
}

/// One's-complement sum, folded (for hand-made headers).
fn fold_sum(data: &[u8]) -> u16 {
    let mut s: u32 = data
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

#[test]
fn no_icmp_errors_about_errors_later_fragments_or_broadcasts() {
    let mut b = Bench::new(RouterSpec::default());
    b.teach(0, H1, H1_MAC);
    let quoted = Ip::default().bytes()[..28].to_vec();
    let error = icmp(Icmpv4Repr::TimeExceeded {
        reason: smoltcp::wire::Icmpv4TimeExceeded::TtlExpired,
        header: Ipv4Repr {
            src_addr: H2,
            dst_addr: H1,
            next_header: 17.into(),
            payload_len: 8,
            hop_limit: 1,
        },
        data: &quoted[20..],
    });
    let silent = [
        // An ICMP error itself expiring.
        Ip {
            ttl: 1,
            proto: 1,
            payload: error,
            ..Ip::default()
        },
        // A non-first fragment expiring.
        Ip {
            ttl: 1,
            offset: 10,
            ..Ip::default()
        },
        // From a directed-broadcast source, with no route onwards.
        Ip {
            src: Ipv4Addr::new(10, 0, 1, 255),
            dst: Ipv4Addr::new(192, 0, 2, 1),
            ..Ip::default()
        },
    ];
    for pkt in &silent {
        b.inject(0, pkt.frame());
    }
    assert!(b.take().is_empty());
    assert_eq!(b.router.stats().icmp_suppressed, 3);

    // But a first fragment and an informational ICMP message do get errors.
    let answered = [
        Ip {
            ttl: 1,
            mf: true,
            ..Ip::default()
        },
        Ip {
            ttl: 1,
            proto: 1,
            payload: icmp(Icmpv4Repr::EchoRequest {
                ident: 9,
                seq_no: 9,
                data: &[0; 8],
            }),
            ..Ip::default()
        },
    ];
    for pkt in &answered {
        b.inject(0, pkt.frame());
        let out = b.take();
        assert_eq!(out.len(), 1);
        check_error(
            &out[0],
            0,
            H1_MAC,
            P0,
            &pkt.bytes(),
            Icmpv4Message::TimeExceeded,
            0,
        );
    }

    // Broadcasts to the router are consumed without an answer.
    let bcast = Ip {
        dst: Ipv4Addr::new(10, 0, 1, 255),
        ..Ip::default()
    };
    b.inject(
        0,
        eth(
            EthernetAddress::BROADCAST,
            H1_MAC,
            EthernetProtocol::Ipv4,
            &bcast.bytes(),
        ),
    );
    assert!(b.take().is_empty());
    assert_eq!(b.router.stats().local, 1);
    b.assert_conserved();
}

fn rate_limited(queue: u32) -> Bench {
    let mut b = Bench::new(RouterSpec {
        forwarding_rate: Some(PacketRate::from_pps(1000)),
        forwarding_queue: queue,
    });
    b.teach(1, H2, H2_MAC);
    b
}

fn burst(b: &mut Bench, n: u16) {
    for i in 0..n {
        b.inject(
            0,
            Ip {
                ident: i,
                ..Ip::default()
            }
            .frame(),
        );
    }
}

#[test]
fn a_rate_limited_router_spaces_packets_by_its_service_time() {
    let mut b = rate_limited(1000);
    burst(&mut b, 10);
    assert!(
        b.out.is_empty(),
        "nothing leaves before its service completes"
    );
    assert_eq!(b.router.in_flight(), 10);
    b.assert_conserved();
    let sent = b.run_until(ms(100));
    let times: Vec<SimTime> = sent.iter().map(|s| s.0).collect();
    assert_eq!(times, (1..=10).map(ms).collect::<Vec<_>>());
    // In arrival order, each forwarded normally.
    for (i, (_, port, f)) in sent.iter().enumerate() {
        assert_eq!(*port, 1);
        assert_eq!(ip_of(f).ident(), i as u16);
        assert_eq!(macs(f), (H2_MAC, port_mac(1)));
    }
    assert_eq!(b.router.in_flight(), 0);
    assert_eq!(b.router.stats().forwarding_queue_high_water, 9);
    b.assert_conserved();
}

#[test]
fn a_full_forwarding_queue_drops_the_excess() {
    let mut b = rate_limited(3);
    burst(&mut b, 10);
    // One in service, three waiting, six dropped.
    assert_eq!(b.dropped(DropReason::ForwardingQueueFull), 6);
    assert_eq!(b.router.in_flight(), 4);
    b.assert_conserved();
    let sent = b.run_until(ms(100));
    let times: Vec<SimTime> = sent.iter().map(|s| s.0).collect();
    assert_eq!(times, (1..=4).map(ms).collect::<Vec<_>>());
    let idents: Vec<u16> = sent.iter().map(|s| ip_of(&s.2).ident()).collect();
    assert_eq!(idents, [0, 1, 2, 3], "the first arrivals are kept");
    assert_eq!(b.router.stats().forwarding_queue_high_water, 3);

    // The engine is free again: the next packet takes one service time.
    b.inject(0, Ip::default().frame());
    let t0 = b.now;
    let sent = b.run_until(ms(200));
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, t0 + SimDuration::from_millis(1));
    b.assert_conserved();
}

#[test]
fn stats_serialise_with_drops_by_reason() {
    let mut b = Bench::new(RouterSpec::default());
    b.teach(0, H1, H1_MAC);
    b.inject(
        0,
        Ip {
            ttl: 1,
            ..Ip::default()
        }
        .frame(),
    );
    b.take();
    let v = serde_json::to_value(b.router.stats()).unwrap();
    assert_eq!(v["drops"]["ttl_expired"], 1);
    assert_eq!(v["icmp_sent"]["time_exceeded"], 1);
    assert_eq!(v["arp_replies_sent"], 1);
    assert_eq!(v["received"], 2);
    b.assert_conserved();
}

/// An echo request of `data` from h1 to `to`, cut into fragments of at most
/// 1480 data bytes (as a 1500-byte link would).
fn fragmented_ping(to: Ipv4Addr, ident: u16, data: &[u8]) -> Vec<Ip> {
    let payload = icmp(Icmpv4Repr::EchoRequest {
        ident: 0x77,
        seq_no: 1,
        data,
    });
    let chunks: Vec<&[u8]> = payload.chunks(1480).collect();
    chunks
        .iter()
        .enumerate()
        .map(|(i, c)| Ip {
            dst: to,
            proto: 1,
            ident,
            mf: i + 1 < chunks.len(),
            offset: (i * 1480 / 8) as u16,
            payload: c.to_vec(),
            ..Ip::default()
        })
        .collect()
}

/// Puts fragments sent back to h1 together: the ICMP message they carry.
fn reassembled_reply(out: &[(PortId, Frame)]) -> Vec<u8> {
    let mut data = Vec::new();
    for (i, (port, f)) in out.iter().enumerate() {
        assert_eq!(*port, 0);
        let ip = ip_of(f);
        assert!(!ip.dont_frag(), "the router's own packets go without DF");
        assert_eq!(ip.frag_offset() as usize, data.len(), "fragment {i}");
        assert_eq!(ip.more_frags(), i + 1 < out.len());
        data.extend_from_slice(ip.payload());
    }
    data
}

/// RFC 1812 §5.2.3: a router reassembles what is addressed to it, so a
/// large ping of its address, which arrives in fragments, is answered (it
/// was consumed without an answer, and counted delivered).
#[test]
fn a_ping_to_the_router_in_fragments_is_reassembled_and_answered() {
    let mut b = Bench::new(RouterSpec::default());
    b.teach(0, H1, H1_MAC);
    let data: Vec<u8> = (0..3000u32).map(|i| (i % 249) as u8).collect();
    let frags = fragmented_ping(P1, 0x99, &data);
    assert_eq!(frags.len(), 3);
    // Out of order: the last first.
    for f in [&frags[2], &frags[0]] {
        b.inject(0, f.frame());
        assert!(b.take().is_empty(), "nothing until the datagram is whole");
    }
    assert_eq!(b.router.in_flight(), 2, "the fragments are held");
    b.assert_conserved();
    b.inject(0, frags[1].frame());
    let out = b.take();
    assert_eq!(out.len(), 3, "a 3028-byte reply over a 1500-byte MTU");
    let msg = reassembled_reply(&out);
    let icmp = Icmpv4Packet::new_checked(&msg[..]).unwrap();
    let repr = Icmpv4Repr::parse(&icmp, &ChecksumCapabilities::default()).expect("valid ICMP");
    assert_eq!(
        repr,
        Icmpv4Repr::EchoReply {
            ident: 0x77,
            seq_no: 1,
            data: &data,
        }
    );
    assert_eq!(ip_of(&out[0].1).src_addr(), P1, "from the pinged address");
    assert_eq!(
        b.ledger.delivered[&Sink::Router],
        3 + 1,
        "and the ARP request"
    );
    let s = b.router.stats();
    assert_eq!((s.icmp_sent.echo_reply, s.local), (1, 1));
    assert_eq!(b.router.in_flight(), 0);
    b.assert_conserved();
}

/// A datagram to the router that is never whole is given up after 30 s:
/// its fragments are dropped as `reassembly_timeout`, and, as its first
/// fragment came, the sender gets time-exceeded code 1 quoting it.
#[test]
fn fragments_to_the_router_never_completed_are_given_up_after_30_s() {
    let mut b = Bench::new(RouterSpec::default());
    b.teach(0, H1, H1_MAC);
    let frags = fragmented_ping(P0, 0x55, &[7; 3000]);
    b.inject(0, frags[0].frame());
    b.inject(0, frags[2].frame());
    // The second fragment of another datagram, whose first never comes.
    let orphan = &fragmented_ping(P0, 0x56, &[8; 3000])[1];
    b.now = ms(5_000);
    b.inject(0, orphan.frame());
    assert!(b.take().is_empty());
    assert_eq!(b.router.in_flight(), 3);
    assert!(b.run_until(ms(29_999)).is_empty());
    let sent = b.run_until(ms(30_000));
    assert_eq!(sent.len(), 1);
    let (at, port, frame) = &sent[0];
    assert_eq!(*at, ms(30_000));
    check_error(
        &(*port, frame.clone()),
        0,
        H1_MAC,
        P0,
        &frags[0].bytes(),
        Icmpv4Message::TimeExceeded,
        1,
    );
    assert_eq!(b.dropped(DropReason::ReassemblyTimeout), 2);
    assert_eq!(b.router.in_flight(), 1);
    // The orphan goes at 35 s, without an answer (its first never came).
    assert!(b.run_until(ms(35_000)).is_empty());
    assert_eq!(b.dropped(DropReason::ReassemblyTimeout), 3);
    assert_eq!(b.router.in_flight(), 0);
    assert_eq!(b.router.stats().icmp_sent.time_exceeded, 1);
    b.assert_conserved();
}
