//! Writes the seed corpus: for each frame target, inputs in the harness's
//! record format that reach deep into the node under test (ARP, ICMP, UDP and
//! TCP to it and through it, TTL 0 and 1, IPv4 options, fragments out of
//! order and overlapping, 802.1Q, jumbo frames, broadcast bursts; IPv6:
//! neighbour discovery, echo, hop limits, Packet Too Big, extension-header
//! chains, forged and malformed solicitations and advertisements); for the
//! topology target, the example topologies.
//!
//! For the boundary target, ring slots: frames whose TCP/UDP checksum was
//! left to offload, with and without a stripped VLAN tag, a fragment, a
//! runt. For the gso target, TCP and UDP super-frames with their
//! virtio_net_hdr, and one of a kind netloop refuses.
//!
//! `cargo run --release --example seeds` (from `fuzz/`) rewrites `seeds/*/`;
//! the fuzzer's own finds go to `corpus/*/` (`fuzz/run --grow`), which
//! `cargo fuzz cmin` may rename and thin out, so the seeds live apart.

use netloop_fuzz::wire::{
    arp, checksum6, eth, icmp6, icmp_echo, ndp, solicited_node, tcp_syn, udp, udp6, Ip, Ip6,
    Records, ETH_ARP, ETH_IPV4, ETH_IPV6,
};
use netloop_fuzz::{Harness, Target};
use std::path::Path;

fn frame_seeds(h: &Harness, target: Target) -> Vec<(&'static str, Vec<u8>)> {
    let x = h.address_of("x").expect("x has an address");
    // The node under test's address (a host or router), and one further away.
    let (near, far) = match target {
        Target::Router => (h.address_of("r1"), h.address_of("b")),
        Target::Switch => (h.address_of("a"), h.address_of("b")),
        Target::Host => (h.address_of("a"), h.address_of("a")),
        Target::Super => unreachable!("super_seeds"),
    };
    let (near, far) = (near.expect("near"), far.expect("far"));
    let hello = |r: &mut Records| {
        r.push(2, 0, &arp(1, x, near));
        r.push(3, 4, &arp(2, x, near));
    };
    let mut seeds: Vec<(&'static str, Vec<u8>)> = Vec::new();
    let mut add = |name: &'static str, f: &dyn Fn(&mut Records)| {
        let mut r = Records::default();
        hello(&mut r);
        f(&mut r);
        seeds.push((name, r.0));
    };
    add("arp", &|_| {});
    add("ping-near", &|r| {
        r.push(
            3,
            2,
            &eth(
                ETH_IPV4,
                &Ip::new(x, near, 1).packet(&icmp_echo(1, b"abcdefgh")),
            ),
        );
    });
    add("ping-far", &|r| {
        r.push(
            3,
            2,
            &eth(
                ETH_IPV4,
                &Ip::new(x, far, 1).packet(&icmp_echo(2, &[7; 56])),
            ),
        );
    });
    add("udp-far", &|r| {
        for i in 0..4u8 {
            r.push(
                3,
                1,
                &eth(ETH_IPV4, &Ip::new(x, far, 17).packet(&udp(5000, &[i; 100]))),
            );
        }
    });
    add("tcp-syn", &|r| {
        r.push(
            3,
            2,
            &eth(ETH_IPV4, &Ip::new(x, far, 6).packet(&tcp_syn(x, far, 80))),
        );
    });
    add("ttl", &|r| {
        for ttl in [0u8, 1, 2] {
            let mut ip = Ip::new(x, far, 17);
            ip.ttl = ttl;
            r.push(3, 1, &eth(ETH_IPV4, &ip.packet(&udp(33434, &[0; 32]))));
        }
    });
    add("options", &|r| {
        let mut ip = Ip::new(x, far, 1);
        // Record route (7), length 11, pointer 4, two slots; then end of list.
        ip.options = vec![7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        r.push(3, 1, &eth(ETH_IPV4, &ip.packet(&icmp_echo(3, &[1; 16]))));
    });
    add("fragments", &|r| {
        let data = icmp_echo(4, &[9; 2000]);
        let mut pieces = Vec::new();
        for (k, chunk) in data.chunks(800).enumerate() {
            let mut ip = Ip::new(x, far, 1);
            ip.id = 77;
            ip.frag = ((k * 100) as u16, (k + 1) * 800 < data.len());
            pieces.push(ip.packet(chunk));
        }
        // Out of order, and one overlapping the first two.
        for k in [2usize, 0, 1] {
            r.push(3, 1, &eth(ETH_IPV4, &pieces[k]));
        }
        let mut ip = Ip::new(x, far, 1);
        ip.id = 78;
        ip.frag = (50, true);
        r.push(3, 1, &eth(ETH_IPV4, &ip.packet(&[5; 800])));
        ip.frag = (0, true);
        r.push(3, 1, &eth(ETH_IPV4, &ip.packet(&data[..800])));
    });
    add("vlan-ipv6", &|r| {
        let mut tagged = eth(0x8100, &[0x00, 0x0a]);
        tagged.extend_from_slice(&ETH_IPV4.to_be_bytes());
        tagged.extend_from_slice(&Ip::new(x, near, 1).packet(&icmp_echo(5, b"v")));
        r.push(3, 1, &tagged);
        let mut v6 = vec![0x60, 0, 0, 0, 0, 8, 17, 64];
        v6.extend_from_slice(&[0xfe; 32]);
        v6.extend_from_slice(&[0; 8]);
        r.push(3, 1, &eth(0x86dd, &v6));
    });
    add("jumbo", &|r| {
        r.push(
            3,
            1,
            &eth(ETH_IPV4, &Ip::new(x, far, 17).packet(&udp(9, &[3; 8958]))),
        );
    });
    add("broadcast-burst", &|r| {
        for i in 0..64u8 {
            r.push(
                2,
                0,
                &eth(
                    ETH_IPV4,
                    &Ip::new(x, [255; 4], 17).packet(&udp(9, &[i; 64])),
                ),
            );
        }
    });
    add("arp-spoof", &|r| {
        // Someone else claiming the near address, then a flood of strangers.
        r.push(2, 1, &arp(2, near, near));
        for i in 0..32u8 {
            let mut src = x;
            src[3] = i.wrapping_add(100);
            let mut f = arp(1, src, near);
            f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 1, i]);
            r.push(2, 0, &f);
        }
    });
    // IPv6: x's and the node under test's addresses, a far one, and a
    // link with a small MTU where there is one (the router's port to a).
    let x6 = h.addresses6_of("x")[0];
    let mine6 = h.addresses6_of("r1");
    let near6 = mine6.first().copied().unwrap_or(x6);
    let far6 = h
        .addresses6_of("r2")
        .last()
        .or(mine6.last())
        .copied()
        .unwrap_or(x6);
    let x_mac = h.x_mac();
    let mcast = |g: [u8; 16]| {
        let mut f = eth(ETH_IPV6, &[]);
        f[0..6].copy_from_slice(&[0x33, 0x33, g[12], g[13], g[14], g[15]]);
        f[6..12].copy_from_slice(&x_mac);
        f
    };
    // x introduces itself: a solicitation for the near address, which
    // teaches the node x's MAC.
    let hello6 = move |r: &mut Records| {
        let mut f = mcast(solicited_node(near6));
        f.extend_from_slice(&ndp(
            135,
            0,
            x6,
            solicited_node(near6),
            near6,
            Some(x_mac),
            255,
        ));
        r.push(0, 1, &f);
    };
    add("ipv6-nd", &|r| {
        hello6(r);
        // Unicast solicitation, then an advertisement nobody asked for.
        r.push(
            3,
            1,
            &eth(ETH_IPV6, &ndp(135, 0, x6, near6, near6, Some(x_mac), 255)),
        );
        r.push(
            3,
            1,
            &eth(ETH_IPV6, &ndp(136, 0x60, x6, near6, x6, Some(x_mac), 255)),
        );
        // A duplicate-address probe for the near address.
        let mut f = mcast(solicited_node(near6));
        f.extend_from_slice(&ndp(
            135,
            0,
            [0; 16],
            solicited_node(near6),
            near6,
            None,
            255,
        ));
        r.push(0, 1, &f);
    });
    add("ipv6-ping", &|r| {
        hello6(r);
        for (seq, dst) in [(1u16, near6), (2, far6)] {
            let mut body = vec![0x12, 0x34];
            body.extend_from_slice(&seq.to_be_bytes());
            body.extend_from_slice(&[7; 56]);
            let m = icmp6(x6, dst, 128, 0, &body);
            r.push(3, 2, &eth(ETH_IPV6, &Ip6::new(x6, dst, 58).packet(&m)));
        }
    });
    add("ipv6-fragments", &|r| {
        hello6(r);
        // A ping of 2000 bytes in two fragments, the last first (whole: the
        // node answers, in fragments of its own), then pieces that overlap.
        let mut body = vec![0x12, 0x34, 0, 9];
        body.extend_from_slice(&[5; 2000]);
        let m = icmp6(x6, near6, 128, 0, &body);
        let piece = |off: usize, end: usize, ident: u32| {
            let mut f = vec![58, 0];
            let more = end < m.len();
            f.extend_from_slice(&((off as u16) | u16::from(more)).to_be_bytes());
            f.extend_from_slice(&ident.to_be_bytes());
            f.extend_from_slice(&m[off..end]);
            eth(ETH_IPV6, &Ip6::new(x6, near6, 44).packet(&f))
        };
        r.push(3, 1, &piece(1232, m.len(), 21));
        r.push(3, 1, &piece(0, 1232, 21));
        r.push(3, 1, &piece(0, 1232, 22));
        r.push(3, 1, &piece(1224, m.len(), 22));
    });
    add("ipv6-hops-and-size", &|r| {
        hello6(r);
        for hops in [0u8, 1, 2] {
            let mut ip = Ip6::new(x6, far6, 17);
            ip.hops = hops;
            r.push(
                3,
                1,
                &eth(ETH_IPV6, &ip.packet(&udp6(x6, far6, 33434, &[0; 32]))),
            );
        }
        // Towards every link of the node, a packet too big for some: an
        // address beside each of its own.
        for mine in &mine6 {
            let mut dst = *mine;
            dst[15] = 0x99;
            let m = udp6(x6, dst, 9, &[1; 1360]);
            r.push(3, 1, &eth(ETH_IPV6, &Ip6::new(x6, dst, 17).packet(&m)));
        }
        // To a group the node is not in, and a link-local destination.
        let g = [0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7];
        r.push(
            3,
            1,
            &eth(
                ETH_IPV6,
                &Ip6::new(x6, g, 17).packet(&udp6(x6, g, 9, &[2; 8])),
            ),
        );
        let mut ll = [0u8; 16];
        ll[0..2].copy_from_slice(&[0xfe, 0x80]);
        ll[15] = 5;
        r.push(
            3,
            1,
            &eth(
                ETH_IPV6,
                &Ip6::new(x6, ll, 17).packet(&udp6(x6, ll, 9, &[2; 8])),
            ),
        );
    });
    add("ipv6-extension-headers", &|r| {
        hello6(r);
        let u = udp6(x6, far6, 9, &[3; 40]);
        // Hop-by-Hop (PadN), Destination Options, a Routing header, AH.
        let mut hbh = vec![60, 0, 1, 4, 0, 0, 0, 0, 17, 0, 1, 4, 0, 0, 0, 0];
        hbh.extend_from_slice(&u);
        r.push(3, 1, &eth(ETH_IPV6, &Ip6::new(x6, far6, 0).packet(&hbh)));
        let mut rt = vec![17, 2, 0, 1, 0, 0, 0, 0];
        rt.extend_from_slice(&near6);
        rt.extend_from_slice(&u);
        r.push(3, 1, &eth(ETH_IPV6, &Ip6::new(x6, far6, 43).packet(&rt)));
        let mut ah = vec![
            17, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        ah.extend_from_slice(&u);
        r.push(3, 1, &eth(ETH_IPV6, &Ip6::new(x6, near6, 51).packet(&ah)));
        // Fragments, to the node and through it.
        for dst in [near6, far6] {
            for (off, more) in [(0u16, true), (1, false)] {
                let mut f = vec![58, 0];
                f.extend_from_slice(&((off << 3) | u16::from(more)).to_be_bytes());
                f.extend_from_slice(&[0, 0, 0, 9]);
                f.extend_from_slice(&[4; 8]);
                r.push(3, 1, &eth(ETH_IPV6, &Ip6::new(x6, dst, 44).packet(&f)));
            }
        }
        // A chain that claims more than the packet holds.
        r.push(
            3,
            1,
            &eth(
                ETH_IPV6,
                &Ip6::new(x6, near6, 0).packet(&[17, 200, 0, 0, 0, 0, 0, 0]),
            ),
        );
    });
    add("ipv6-nd-hostile", &|r| {
        // Hop limit below 255, a zero-length option, a truncated message, a
        // multicast target, a forged advertisement for the near address,
        // and solicitations from 48 strangers, 50 us apart (each answered:
        // the cache learns each, within its bound).
        let sn = solicited_node(near6);
        for hops in [64u8, 255] {
            let mut f = mcast(sn);
            f.extend_from_slice(&ndp(135, 0, x6, sn, near6, Some(x_mac), hops));
            if hops == 255 {
                // The option's length byte, zeroed (checksum fixed below).
                let n = f.len();
                f[n - 7] = 0;
                let (src, dst) = (x6, sn);
                let at = 14 + 40;
                f[at + 2..at + 4].fill(0);
                let c = checksum6(src, dst, 58, &f[at..]);
                f[at + 2..at + 4].copy_from_slice(&c.to_be_bytes());
            }
            r.push(0, 1, &f);
        }
        let mut short = mcast(sn);
        short.extend_from_slice(&Ip6::new(x6, sn, 58).packet(&icmp6(x6, sn, 135, 0, &[0; 8])));
        r.push(0, 1, &short);
        let g = [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let mut f = mcast(sn);
        f.extend_from_slice(&ndp(135, 0, x6, sn, g, Some(x_mac), 255));
        r.push(0, 1, &f);
        r.push(
            3,
            1,
            &eth(
                ETH_IPV6,
                &ndp(
                    136,
                    0x20,
                    near6,
                    near6,
                    near6,
                    Some([2, 0, 0, 0, 0, 0x66]),
                    255,
                ),
            ),
        );
        for i in 0..48u8 {
            let mut src = x6;
            src[15] = i.wrapping_add(0x40);
            let mut f = mcast(sn);
            f.extend_from_slice(&ndp(135, 0, src, sn, near6, Some([2, 0, 0, 0, 1, i]), 255));
            r.push(0, 1, &f);
        }
    });
    add("malformed", &|r| {
        r.push(3, 1, &eth(ETH_IPV4, &[0x45, 0, 0, 200, 0, 0]));
        r.push(3, 1, &eth(ETH_IPV4, &[0x4f; 30]));
        r.push(3, 1, &eth(ETH_ARP, &[0, 1, 8, 0, 7, 3, 0, 1]));
        r.push(0, 1, &[1, 2, 3]);
    });
    seeds
}

/// Ring slots for the boundary target: a flags byte, a TCI, the frame.
fn boundary_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let (a, b) = ([198, 18, 0, 2], [198, 18, 1, 2]);
    let slot = |flags: u8, tci: u16, frame: Vec<u8>| {
        let mut v = vec![flags];
        v.extend_from_slice(&tci.to_be_bytes());
        v.extend_from_slice(&frame);
        v
    };
    let udp_frame = eth(ETH_IPV4, &Ip::new(a, b, 17).packet(&udp(9, b"offloaded")));
    let mut syn = tcp_syn(a, b, 80);
    syn[16..18].fill(0);
    let tcp_frame = eth(ETH_IPV4, &Ip::new(a, b, 6).packet(&syn));
    let mut frag = Ip::new(a, b, 17);
    frag.frag = (0, true);
    vec![
        ("udp-partial", slot(4, 0, udp_frame.clone())),
        ("tcp-partial-vlan", slot(5, 0x000a, tcp_frame)),
        ("udp-qinq", slot(3, 0x2064, udp_frame)),
        (
            "fragment-partial",
            slot(4, 0, eth(ETH_IPV4, &frag.packet(&udp(9, &[1; 64])))),
        ),
        ("runt", slot(7, 1, vec![0xff; 10])),
        (
            "udp6-partial-hbh",
            slot(4, 0, {
                let (a6, b6) = (
                    [0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
                    [0x20, 0x01, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2],
                );
                let mut p = vec![17, 0, 1, 4, 0, 0, 0, 0];
                p.extend_from_slice(&udp(9, b"offloaded over IPv6"));
                eth(ETH_IPV6, &Ip6::new(a6, b6, 0).packet(&p))
            }),
        ),
    ]
}

/// For the gso target: super-frames as a packet socket with PACKET_VNET_HDR
/// hands them over (virtio_net_hdr, then the frame).
fn gso_seeds() -> Vec<(&'static str, Vec<u8>)> {
    use netloop_io::gso::{gso_type, VnetHdr, F_NEEDS_CSUM};
    let (a, b) = ([198, 18, 0, 2], [198, 18, 1, 2]);
    let input = |ty: u8, mss: u16, frame: Vec<u8>| {
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: ty,
            hdr_len: 54,
            gso_size: mss,
            csum_start: 34,
            csum_offset: if ty == gso_type::UDP_L4 { 6 } else { 16 },
        };
        let mut v = h.bytes().to_vec();
        v.extend_from_slice(&frame);
        v
    };
    let mut tcp = tcp_syn(a, b, 5201);
    tcp[13] = 0x18 | 0x80 | 0x01; // PSH ACK CWR FIN
    tcp.extend((0..3000u32).map(|i| (i * 13) as u8));
    let tcp_frame = eth(ETH_IPV4, &Ip::new(a, b, 6).packet(&tcp));
    let udp_frame = eth(ETH_IPV4, &Ip::new(a, b, 17).packet(&udp(9, &[7; 2500])));
    let (a6, b6) = (
        [0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
        [0x20, 0x01, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2],
    );
    let tcp6_frame = eth(ETH_IPV6, &Ip6::new(a6, b6, 6).packet(&tcp[..]));
    let udp6_frame = eth(ETH_IPV6, &Ip6::new(a6, b6, 17).packet(&udp(9, &[7; 2500])));
    let v6_input = |ty: u8, mss: u16, frame: Vec<u8>| {
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: ty,
            hdr_len: if ty == gso_type::UDP_L4 { 62 } else { 74 },
            gso_size: mss,
            csum_start: 54,
            csum_offset: if ty == gso_type::UDP_L4 { 6 } else { 16 },
        };
        let mut v = h.bytes().to_vec();
        v.extend_from_slice(&frame);
        v
    };
    vec![
        ("tcp", input(gso_type::TCPV4, 1448, tcp_frame.clone())),
        (
            "tcp-ecn-small-mss",
            input(gso_type::TCPV4 | gso_type::ECN, 536, tcp_frame.clone()),
        ),
        ("udp-l4", input(gso_type::UDP_L4, 1200, udp_frame)),
        (
            "tcpv6-type-on-ipv4",
            input(gso_type::TCPV6, 1448, tcp_frame),
        ),
        ("tcpv6", v6_input(gso_type::TCPV6, 1428, tcp6_frame)),
        ("udp-l4-ipv6", v6_input(gso_type::UDP_L4, 1200, udp6_frame)),
    ]
}

/// Seeds of the `frames_super` target: super-frames (TCP, TCP with ECN, UDP)
/// to the simulated host behind the switch (forwarded whole once ARP is
/// done, cut by the rated link after the switch), to the host behind the
/// jittered link, the rate-limited router and the small MTU (cut, ICMP
/// "fragmentation needed" per segment), to the real host r1 cannot resolve
/// (cut while waiting for ARP), to r1 itself, with TTL 1, with bytes after
/// the packet (not a super-frame: plain), and a small gso_size.
fn super_seeds(h: &Harness) -> Vec<(&'static str, Vec<u8>)> {
    use netloop_io::gso::gso_type::{ECN, TCPV4, TCPV6, UDP_L4};
    let x = h.address_of("x").expect("x");
    let r1 = h.address_of("r1").expect("r1");
    let a = h.address_of("a").expect("a");
    let b = h.address_of("b").expect("b");
    let y = h.address_of("y").expect("y");
    let tcp = |dst: [u8; 4], ttl: u8, n: usize, flags: u8| {
        let mut t = tcp_syn(x, dst, 5201);
        t[13] = flags;
        t.extend((0..n as u32).map(|i| (i * 7 % 251) as u8));
        let mut ip = Ip::new(x, dst, 6);
        ip.ttl = ttl;
        eth(ETH_IPV4, &ip.packet(&t))
    };
    let udp_to =
        |dst: [u8; 4], n: usize| eth(ETH_IPV4, &Ip::new(x, dst, 17).packet(&udp(9, &vec![5; n])));
    let hello = |r: &mut Records| {
        r.push_gso(2, 0, 0, 0, &arp(1, x, r1));
        r.push_gso(3, 4, 0, 0, &arp(2, x, r1));
    };
    let mut seeds: Vec<(&'static str, Vec<u8>)> = Vec::new();
    let mut add = |name: &'static str, f: &dyn Fn(&mut Records)| {
        let mut r = Records::default();
        hello(&mut r);
        f(&mut r);
        seeds.push((name, r.0));
    };
    add("tcp-to-a", &|r| {
        for k in 0..4 {
            r.push_gso(3, 10 + k, 1448, TCPV4, &tcp(a, 64, 10 * 1448, 0x18));
        }
    });
    add("tcp-ecn-to-a", &|r| {
        r.push_gso(3, 10, 1448, TCPV4 | ECN, &tcp(a, 64, 8 * 1448, 0x98));
        r.push_gso(3, 10, 536, TCPV4 | ECN, &tcp(a, 64, 9000, 0x98));
    });
    add("udp-to-a", &|r| {
        r.push_gso(3, 10, 1200, UDP_L4, &udp_to(a, 6000));
        r.push_gso(3, 10, 1200, UDP_L4, &udp_to(a, 6000));
    });
    add("tcp-to-b-small-mtu", &|r| {
        r.push_gso(3, 10, 1448, TCPV4, &tcp(b, 64, 4 * 1448, 0x18));
        r.push_gso(3, 10, 900, TCPV4, &tcp(b, 64, 4 * 900, 0x18));
    });
    add("udp-to-b", &|r| {
        r.push_gso(3, 10, 900, UDP_L4, &udp_to(b, 9000));
    });
    add("tcp-to-y-unresolved", &|r| {
        r.push_gso(3, 10, 1448, TCPV4, &tcp(y, 64, 40 * 1448, 0x18));
    });
    add("tcp-to-r1", &|r| {
        r.push_gso(3, 10, 1448, TCPV4, &tcp(r1, 64, 5 * 1448, 0x18));
    });
    add("ttl-1", &|r| {
        r.push_gso(3, 10, 1448, TCPV4, &tcp(a, 1, 5 * 1448, 0x18));
    });
    add("bytes-after", &|r| {
        let mut f = tcp(a, 64, 5 * 1448, 0x18);
        f.extend_from_slice(&[0; 500]);
        r.push_gso(3, 10, 1448, TCPV4, &f);
    });
    add("small-gso-size", &|r| {
        r.push_gso(3, 10, 8, TCPV4, &tcp(a, 64, 4000, 0x10));
        r.push_gso(3, 10, 1, UDP_L4, &udp_to(a, 300));
    });
    add("plain-and-super", &|r| {
        r.push_gso(3, 2, 0, 0, &tcp(a, 64, 100, 0x02));
        r.push_gso(3, 2, 1448, TCPV4, &tcp(a, 64, 3 * 1448, 0x18));
        r.push_gso(3, 2, 0, 0, &udp_to(b, 100));
    });
    // TCP over IPv6: whole through r1 to y (which never answers neighbour
    // discovery), with hop limit 1, to r1, and towards the small MTU behind
    // r2 (Packet Too Big per segment).
    let x6 = h.addresses6_of("x")[0];
    let r1_6 = h.addresses6_of("r1");
    let y6 = h.addresses6_of("y")[0];
    let behind_r2 = {
        let mut d = *h.addresses6_of("r2").last().expect("r2 has IPv6");
        d[15] = 0x99;
        d
    };
    let tcp6 = move |dst: [u8; 16], hops: u8, n: usize| {
        let mut t = tcp_syn([0; 4], [0; 4], 5201);
        t[13] = 0x18;
        t.extend((0..n as u32).map(|i| (i * 5 % 251) as u8));
        let mut ip = Ip6::new(x6, dst, 6);
        ip.hops = hops;
        eth(ETH_IPV6, &ip.packet(&t))
    };
    let x_mac = h.x_mac();
    add("tcpv6", &|r| {
        let sn = solicited_node(r1_6[0]);
        let mut f = eth(ETH_IPV6, &[]);
        f[0..6].copy_from_slice(&[0x33, 0x33, sn[12], sn[13], sn[14], sn[15]]);
        f[6..12].copy_from_slice(&x_mac);
        f.extend_from_slice(&ndp(135, 0, x6, sn, r1_6[0], Some(x_mac), 255));
        r.push_gso(0, 1, 0, 0, &f);
        r.push_gso(3, 10, 1428, TCPV6, &tcp6(y6, 64, 6 * 1428));
        r.push_gso(3, 2, 1428, TCPV6, &tcp6(y6, 1, 3 * 1428));
        r.push_gso(3, 2, 1428, TCPV6, &tcp6(r1_6[0], 64, 3 * 1428));
        r.push_gso(3, 2, 1428, TCPV6, &tcp6(behind_r2, 64, 3 * 1428));
    });
    seeds
}

fn write(dir: &Path, name: &str, data: &[u8]) {
    std::fs::create_dir_all(dir).expect("create corpus directory");
    std::fs::write(dir.join(name), data).expect("write seed");
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    for target in Target::ALL {
        let h = Harness::new(target);
        let dir = root.join(format!("frames_{}", target.name()));
        let seeds = match target {
            Target::Super => super_seeds(&h),
            _ => frame_seeds(&h, target),
        };
        for (name, data) in seeds {
            // Each seed must pass the harness as it is.
            Harness::new(target).run(&data);
            write(&dir, name, &data);
        }
    }
    for (name, data) in boundary_seeds() {
        netloop_fuzz::boundary(&data);
        write(&root.join("boundary"), name, &data);
    }
    for (name, data) in gso_seeds() {
        netloop_fuzz::gso(&data);
        write(&root.join("gso"), name, &data);
    }
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let dir = root.join("topology");
    let mut names: Vec<_> = std::fs::read_dir(&examples)
        .expect("examples/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    names.sort();
    for p in names {
        let data = std::fs::read(&p).expect("read example");
        let stem = p.file_stem().unwrap().to_string_lossy().to_string();
        write(&dir, &stem, &data);
    }
    for target in Target::ALL {
        write(
            &dir,
            &format!("harness-{}", target.name()),
            target.topology().as_bytes(),
        );
    }
}
