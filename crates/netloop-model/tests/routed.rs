//! Scenario tests through simulated routers: traceroute, forwarding rate,
//! TCP goodput, fragmentation and path-MTU signalling, static routes.

mod common;

use common::*;
use netloop_core::{Bytes, DataRate, PacketRate, SimDuration, SimTime};
use netloop_model::spec::*;
use netloop_model::stats::DropReason;
use netloop_model::Simulation;
use std::net::Ipv4Addr;

fn run(spec: &NetworkSpec) -> Simulation {
    let mut sim = Simulation::build(spec).expect("builds");
    sim.run(1 << 20, |_, _| true);
    assert_conserved(&sim);
    sim
}

/// h1 - r1 - r2 - r3 - h2, 100 Mbit/s, 1 ms per link.
fn chain(traffic: Vec<TrafficSpec>) -> NetworkSpec {
    spec(
        SimDuration::from_secs(5),
        1,
        vec![
            host("h1"),
            router("r1"),
            router("r2"),
            router("r3"),
            host("h2"),
        ],
        vec![
            link("h1", "r1", dir(Some(100), ms(1))),
            link("r1", "r2", dir(Some(100), ms(1))),
            link("r2", "r3", dir(Some(100), ms(1))),
            link("r3", "h2", dir(Some(100), ms(1))),
        ],
        traffic,
    )
}

fn addr_of(sim: &Simulation, node: &str, port: usize) -> Ipv4Addr {
    let id = sim.net.node_id(node).unwrap();
    sim.net.ports(id)[port].addr.unwrap().addr
}

#[test]
fn traceroute_gets_time_exceeded_from_each_router_in_order() {
    let sim = run(&chain(vec![flow(
        "tr",
        "h1",
        "h2",
        TrafficKind::Traceroute { max_hops: 10 },
    )]));
    let r = sim.results("afap", None, None);
    let hops = r.flows[0].hops.as_ref().unwrap();
    let got: Vec<std::net::IpAddr> = hops
        .iter()
        .map(|h| h.address.expect("every hop answers"))
        .collect();
    // Each router answers from the interface the probe arrived on, then the
    // destination answers port-unreachable.
    let want = vec![
        addr_of(&sim, "r1", 0),
        addr_of(&sim, "r2", 0),
        addr_of(&sim, "r3", 0),
        addr_of(&sim, "h2", 0),
    ];
    assert_eq!(got, want);
    // RTTs grow with each hop (1 ms per link each way, plus ARP on the first).
    let rtts: Vec<u64> = hops.iter().map(|h| h.rtt_ns.unwrap()).collect();
    assert!(
        rtts[1] > 4_000_000 && rtts[2] > 6_000_000 && rtts[3] > 8_000_000,
        "{rtts:?}"
    );
    let ttl_drops: u64 = r.conservation.dropped.get(DropReason::TtlExpired);
    assert_eq!(ttl_drops, 3);
}

#[test]
fn ping_through_routers_has_the_exact_round_trip() {
    let sim = run(&chain(vec![TrafficSpec {
        stop: Some(SimDuration::from_secs(4)),
        ..flow(
            "p",
            "h1",
            "h2",
            TrafficKind::Ping {
                interval: ms(100),
                size: Bytes::new(56),
            },
        )
    }]));
    let r = sim.results("afap", None, None);
    let f = &r.flows[0];
    assert_eq!(f.received_packets, f.sent_packets);
    // 8 link traversals of 1 ms plus 8 serialisations of a 98-byte frame
    // (122 bytes on the wire) at 100 Mbit/s.
    assert_eq!(f.delay_ns.as_ref().unwrap().min, 8_000_000 + 8 * 9_760);
}

#[test]
fn an_ipv6_ping_through_routers_has_the_exact_round_trip() {
    let mut s = chain(vec![TrafficSpec {
        stop: Some(SimDuration::from_secs(4)),
        ipv6: true,
        ..flow(
            "p6",
            "h1",
            "h2",
            TrafficKind::Ping {
                interval: ms(100),
                size: Bytes::new(56),
            },
        )
    }]);
    s.run.ipv6 = true;
    let sim = run(&s);
    let r = sim.results("afap", None, None);
    let f = &r.flows[0];
    assert_eq!(f.sent_packets, Some(40));
    assert_eq!(f.received_packets, f.sent_packets);
    // 8 link traversals of 1 ms plus 8 serialisations of a 118-byte frame
    // (40 bytes of IPv6 header where IPv4 has 20: 142 bytes on the wire) at
    // 100 Mbit/s. The first waits for neighbour discovery; the fastest not.
    assert_eq!(f.delay_ns.as_ref().unwrap().min, 8_000_000 + 8 * 11_360);
    let h2 = sim.net.node_id("h2").unwrap();
    let netloop_model::network::Node::Host(h) = sim.net.node(h2) else {
        panic!("h2 is a host")
    };
    assert_eq!(h.stats.echo_replies, 40);
}

fn addr6_of(sim: &Simulation, node: &str, port: usize) -> std::net::IpAddr {
    let id = sim.net.node_id(node).unwrap();
    sim.net.ports(id)[port].addr6.unwrap().addr.into()
}

fn host_of<'a>(sim: &'a Simulation, node: &str) -> &'a netloop_model::host::Host {
    let id = sim.net.node_id(node).unwrap();
    let netloop_model::network::Node::Host(h) = sim.net.node(id) else {
        panic!("{node} is a host")
    };
    h
}

fn over_ipv6(t: TrafficSpec) -> TrafficSpec {
    TrafficSpec { ipv6: true, ..t }
}

#[test]
fn every_traffic_kind_runs_over_ipv6() {
    let stop = Some(SimDuration::from_secs(2));
    let mut s = chain(vec![
        over_ipv6(TrafficSpec {
            stop,
            ..flow("udp", "h1", "h2", cbr(1, 100))
        }),
        over_ipv6(flow(
            "bulk",
            "h1",
            "h2",
            TrafficKind::TcpBulk {
                bytes: Some(Bytes::new(2_000_000)),
            },
        )),
        over_ipv6(TrafficSpec {
            stop,
            ..flow(
                "rr",
                "h2",
                "h1",
                TrafficKind::TcpRr {
                    request: Bytes::new(100),
                    response: Bytes::new(3000),
                    interval: Some(ms(100)),
                },
            )
        }),
        over_ipv6(flow(
            "tr",
            "h1",
            "h2",
            TrafficKind::Traceroute { max_hops: 10 },
        )),
    ]);
    s.run.ipv6 = true;
    let sim = run(&s);
    let r = sim.results("afap", None, None);
    let (udp, bulk, rr, tr) = (&r.flows[0], &r.flows[1], &r.flows[2], &r.flows[3]);
    assert!(udp.sent_packets.unwrap() > 2000, "{udp:?}");
    assert_eq!(udp.received_packets, udp.sent_packets);
    // 4 links of 1 ms plus 4 serialisations of 100 bytes of data behind
    // UDP, IPv6 and Ethernet (162 bytes; 186 on the wire) at 100 Mbit/s.
    assert_eq!(udp.delay_ns.as_ref().unwrap().min, 4_000_000 + 4 * 14_880);
    assert_eq!(bulk.received_bytes, 2_000_000, "{bulk:?}");
    // 20 transactions of 100 ms in 2 s, less the handshake's.
    assert!(rr.tcp.as_ref().unwrap().transactions >= 19, "{rr:?}");
    // Each router answers from the interface the probe came in by, then
    // the destination with port unreachable.
    let hops: Vec<_> = tr
        .hops
        .as_ref()
        .unwrap()
        .iter()
        .map(|h| h.address)
        .collect();
    let want = ["r1", "r2", "r3", "h2"].map(|n| Some(addr6_of(&sim, n, 0)));
    assert_eq!(hops, want);
    // A network without IPv6 refuses IPv6 traffic by name.
    let mut s = chain(vec![over_ipv6(flow("f", "h1", "h2", cbr(1, 100)))]);
    s.run.ipv6 = false;
    let e = Simulation::build(&s).err().expect("an error").to_string();
    assert!(
        e.contains("traffic 'f'") && e.contains("add 'ipv6 = true' to [run]"),
        "{e}"
    );
}

/// h1 - r1 - r2 - h2 over IPv6, the middle link's MTU IPv6's least.
fn narrow_middle6(traffic: Vec<TrafficSpec>) -> NetworkSpec {
    let mut mid = dir(Some(100), ms(1));
    mid.mtu = 1280;
    let mut s = spec(
        SimDuration::from_secs(2),
        1,
        vec![host("h1"), router("r1"), router("r2"), host("h2")],
        vec![
            link("h1", "r1", dir(Some(100), ms(1))),
            link("r1", "r2", mid),
            link("r2", "h2", dir(Some(100), ms(1))),
        ],
        traffic.into_iter().map(over_ipv6).collect(),
    );
    s.run.ipv6 = true;
    s
}

#[test]
fn packet_too_big_teaches_the_path_mtu_and_the_source_fragments() {
    let stop = Some(SimDuration::from_secs(1));
    let s = narrow_middle6(vec![
        TrafficSpec {
            stop,
            ..flow("big", "h1", "h2", cbr(1, 1400))
        },
        TrafficSpec {
            stop,
            ..flow("small", "h1", "h2", cbr(1, 500))
        },
        flow(
            "tcp",
            "h1",
            "h2",
            TrafficKind::TcpBulk {
                bytes: Some(Bytes::new(1_000_000)),
            },
        ),
    ]);
    let sim = run(&s);
    let r = sim.results("afap", None, None);
    let big_sent = r.flows[0].sent_packets.unwrap();
    // The first datagram too big for the middle link is refused with
    // Packet Too Big (IPv6 routers never fragment); the host fragments the
    // rest to 1280 bytes and h2 puts them together again.
    assert_eq!(r.flows[0].received_packets, Some(big_sent - 1));
    assert_eq!(r.flows[1].received_packets, r.flows[1].sent_packets);
    // TCP lowers its segment size and resends what was refused.
    assert_eq!(r.flows[2].received_bytes, 1_000_000);
    // The path MTU is per destination: one Packet Too Big taught it to
    // every flow to h2.
    assert_eq!(r.conservation.dropped.get(DropReason::PacketTooBig), 1);
    let (h1, h2) = (host_of(&sim, "h1"), host_of(&sim, "h2"));
    assert_eq!(h1.stats.path_mtu_lowered, 1);
    assert_eq!(h1.stats.fragmented, big_sent - 1);
    assert_eq!(h2.stats.reassembled, big_sent - 1);

    // TCP alone: its first full-sized segments are refused, the segment
    // size drops to fit 1280 bytes, and what was refused is sent again.
    let sim = run(&narrow_middle6(vec![flow(
        "tcp",
        "h1",
        "h2",
        TrafficKind::TcpBulk {
            bytes: Some(Bytes::new(1_000_000)),
        },
    )]));
    let r = sim.results("afap", None, None);
    assert_eq!(r.flows[0].received_bytes, 1_000_000);
    assert!(r.conservation.dropped.get(DropReason::PacketTooBig) >= 1);
    assert_eq!(host_of(&sim, "h1").stats.path_mtu_lowered, 1);
    assert_eq!(host_of(&sim, "h1").stats.fragmented, 0);
}

#[test]
fn a_large_ipv6_ping_is_fragmented_there_and_back() {
    let s = narrow_middle6(vec![TrafficSpec {
        stop: Some(SimDuration::from_secs(1)),
        ..flow(
            "p",
            "h1",
            "h2",
            TrafficKind::Ping {
                interval: ms(100),
                size: Bytes::new(3000),
            },
        )
    }]);
    let sim = run(&s);
    let f = &sim.results("afap", None, None).flows[0];
    // The first request (fragmented to the 1500-byte link) is refused by
    // the narrow link; the others are cut to 1280 bytes. h2 answers each
    // (fragmenting the reply to its own link), and r2 refuses the first
    // reply too.
    assert_eq!(f.sent_packets, Some(10));
    assert_eq!(f.received_packets, Some(8));
    let (h1, h2) = (host_of(&sim, "h1"), host_of(&sim, "h2"));
    assert_eq!(h2.stats.echo_replies, 9);
    assert_eq!(h2.stats.reassembled, 9);
    assert_eq!(h1.stats.reassembled, 8);
}

#[test]
fn forwarding_rate_caps_throughput_and_drops_with_a_reason() {
    let mut s = spec(
        SimDuration::from_secs(3),
        1,
        vec![host("h1"), router("r1"), host("h2")],
        vec![
            link("h1", "r1", dir(Some(1000), ms(1))),
            link("r1", "h2", dir(Some(1000), ms(1))),
        ],
        // 200 Mbit/s of 250-byte datagrams = 100 000 packets/s.
        vec![TrafficSpec {
            stop: Some(SimDuration::from_secs(2)),
            ..flow("u", "h1", "h2", cbr(200, 250))
        }],
    );
    s.nodes[1].kind = NodeKind::Router(RouterSpec {
        forwarding_rate: Some(PacketRate::from_pps(50_000)),
        forwarding_queue: 100,
    });
    let sim = run(&s);
    let r = sim.results("afap", None, None);
    let f = &r.flows[0];
    let got = f.received_packets.unwrap() as f64;
    // 50 000 packets/s for 2 s, give or take the queue and ARP.
    assert!((got - 100_000.0).abs() < 300.0, "received {got}");
    assert!(r.conservation.dropped.get(DropReason::ForwardingQueueFull) > 90_000);
}

#[test]
fn tcp_through_a_router_at_1gbps_reaches_941_mbps_class_goodput() {
    let s = spec(
        SimDuration::from_secs(3),
        1,
        vec![host("h1"), router("r1"), host("h2")],
        vec![
            link("h1", "r1", dir(Some(1000), SimDuration::from_micros(50))),
            link("r1", "h2", dir(Some(1000), SimDuration::from_micros(50))),
        ],
        vec![flow(
            "t",
            "h1",
            "h2",
            TrafficKind::TcpBulk {
                bytes: Some(Bytes::new(100_000_000)),
            },
        )],
    );
    let sim = run(&s);
    let r = sim.results("afap", None, None);
    let tcp = r.flows[0].tcp.as_ref().unwrap();
    assert_eq!(tcp.bytes_received, 100_000_000);
    let theoretical = 1e9 * 1460.0 / 1538.0;
    assert!(
        tcp.goodput_bps >= 0.99 * theoretical,
        "goodput {} vs {theoretical}",
        tcp.goodput_bps
    );
}

#[test]
fn small_mtu_link_signals_fragmentation_needed() {
    let mut mid = dir(Some(100), ms(1));
    mid.mtu = 1000;
    let s = spec(
        SimDuration::from_secs(2),
        1,
        vec![host("h1"), router("r1"), router("r2"), host("h2")],
        vec![
            link("h1", "r1", dir(Some(100), ms(1))),
            link("r1", "r2", mid),
            link("r2", "h2", dir(Some(100), ms(1))),
        ],
        vec![
            // Datagrams that fit the host's link go with DF (as on Linux);
            // the first one too big for the middle link is refused with
            // ICMP frag-needed, and the host fragments the rest.
            TrafficSpec {
                stop: Some(SimDuration::from_secs(1)),
                ..flow("big", "h1", "h2", cbr(1, 1200))
            },
            // Small ones pass.
            TrafficSpec {
                stop: Some(SimDuration::from_secs(1)),
                ..flow("small", "h1", "h2", cbr(1, 500))
            },
        ],
    );
    let sim = run(&s);
    let r = sim.results("afap", None, None);
    let big_sent = r.flows[0].sent_packets.unwrap();
    assert_eq!(r.flows[0].received_packets, Some(big_sent - 1));
    assert_eq!(r.flows[1].received_packets, r.flows[1].sent_packets);
    let fn_drops = r.conservation.dropped.get(DropReason::FragmentationNeeded);
    assert_eq!(fn_drops, 1);
}

#[test]
fn static_route_overrides_the_shortest_path() {
    // A triangle: h1 - r1 - r2 - h2 directly, and r1 - r3 - r2 as a detour.
    // A static route on r1 sends h2's subnet via r3: one more hop.
    let mut s = spec(
        SimDuration::from_secs(2),
        1,
        vec![
            host("h1"),
            router("r1"),
            router("r2"),
            router("r3"),
            host("h2"),
        ],
        vec![
            link("h1", "r1", dir(Some(100), ms(1))),
            link("r1", "r2", dir(Some(100), ms(1))),
            link("r1", "r3", dir(Some(100), ms(1))),
            link("r3", "r2", dir(Some(100), ms(1))),
            link("r2", "h2", dir(Some(100), ms(1))),
        ],
        vec![flow(
            "tr",
            "h1",
            "h2",
            TrafficKind::Traceroute { max_hops: 10 },
        )],
    );
    let direct = run(&s).results("afap", None, None).flows[0]
        .hops
        .clone()
        .unwrap();
    assert_eq!(direct.len(), 3);
    let sim = Simulation::build(&s).unwrap();
    let h2_subnet = sim.net.ports(sim.net.node_id("h2").unwrap())[0]
        .addr
        .unwrap();
    let via = addr_of(&sim, "r3", 0);
    s.routes.push(RouteSpec {
        node: "r1".into(),
        prefix: IpPrefix::V4(Ipv4Cidr {
            addr: h2_subnet.network(),
            prefix: h2_subnet.prefix,
        }),
        via: via.into(),
    });
    let detour = run(&s).results("afap", None, None).flows[0]
        .hops
        .clone()
        .unwrap();
    assert_eq!(detour.len(), 4, "{detour:?}");
    assert_eq!(detour[1].address, Some(via.into()));
}

fn router_of<'a>(sim: &'a Simulation, node: &str) -> &'a netloop_model::router::Router {
    let id = sim.net.node_id(node).unwrap();
    let netloop_model::network::Node::Router(r) = sim.net.node(id) else {
        panic!("{node} is a router")
    };
    r
}

/// Routers that know the same networks share one routing index (the
/// builder's `RoutingTable::share_indexes`); a router given a route of its own has an index
/// of its own, and its lookups find that route.
#[test]
fn routers_that_know_the_same_networks_share_one_routing_index() {
    let mut s = chain(vec![]);
    let sim = Simulation::build(&s).unwrap();
    let [r1, r2, r3] = ["r1", "r2", "r3"].map(|n| router_of(&sim, n).table());
    assert!(r1.shares_index_with(r2) && r2.shares_index_with(r3));
    let prefixes = |t: &netloop_model::routing::RoutingTable| {
        t.routes().iter().map(|r| r.prefix).collect::<Vec<_>>()
    };
    assert_eq!(prefixes(r1), prefixes(r3));
    assert_ne!(r1.routes(), r3.routes(), "the same prefixes, other ports");

    let via = addr_of(&sim, "r3", 0);
    s.routes.push(RouteSpec {
        node: "r2".into(),
        prefix: IpPrefix::V4(Ipv4Cidr::parse("198.19.200.0/24").unwrap()),
        via: via.into(),
    });
    let sim = Simulation::build(&s).unwrap();
    let [r1, r2, r3] = ["r1", "r2", "r3"].map(|n| router_of(&sim, n).table());
    assert!(r1.shares_index_with(r3));
    assert!(!r1.shares_index_with(r2));
    let given = r2
        .lookup(Ipv4Addr::new(198, 19, 200, 7))
        .expect("the given route");
    assert_eq!(given.via, Some(via));
    assert!(r1.lookup(Ipv4Addr::new(198, 19, 200, 7)).is_none());
}

#[test]
fn explicit_addresses_and_conflicts() {
    let mut s = chain(vec![]);
    s.links[0].a.address = Some(Ipv4Cidr::parse("198.19.1.10/24").unwrap());
    let sim = Simulation::build(&s).unwrap();
    assert_eq!(addr_of(&sim, "h1", 0), Ipv4Addr::new(198, 19, 1, 10));
    // r1's end is numbered automatically in the same subnet, skipping .10.
    assert_eq!(addr_of(&sim, "r1", 0), Ipv4Addr::new(198, 19, 1, 1));
    s.links[3].b.address = Some(Ipv4Cidr::parse("198.19.1.10/24").unwrap());
    let e = Simulation::build(&s).err().expect("address conflict");
    assert!(e.message.contains("already used"), "{e}");
    let _ = DataRate::from_mbps(1);
}

#[test]
fn arp_entries_that_age_out_while_in_use_are_refreshed_without_a_stall() {
    // h1 - r1 = 50 ms = r2 - h2: r1's entry for r2 ages out after 60 s while
    // 1 000 packets/s flow. With a hard expiry r1 would hold the flow for an
    // ARP round trip (100 ms: 100 packets) and drop what exceeds its 64-frame
    // wait queue; re-confirming the stale entry while using it loses and
    // delays nothing.
    let mut s = spec(
        SimDuration::from_secs(130),
        1,
        vec![host("h1"), router("r1"), router("r2"), host("h2")],
        vec![
            link("h1", "r1", dir(Some(100), ms(1))),
            link("r1", "r2", dir(Some(100), ms(50))),
            link("r2", "h2", dir(Some(100), ms(1))),
        ],
        // 8 Mbit/s of 1000-byte datagrams = 1 000 packets/s.
        vec![TrafficSpec {
            stop: Some(SimDuration::from_secs(129)),
            ..flow("u", "h1", "h2", cbr(8, 1000))
        }],
    );
    s.run.duration = SimDuration::from_secs(130);
    let mut sim = Simulation::build(&s).expect("builds");
    // The cold start waits for three ARP round trips (the first frames are
    // late, and what exceeds r1's wait queue while it asks r2 is dropped);
    // from then on, nothing may be.
    sim.run_until(
        SimTime::ZERO + SimDuration::from_secs(59),
        1 << 20,
        |_, _| true,
    );
    let cold = sim.conservation().dropped_total;
    assert!(cold < 100, "{:?}", sim.conservation());
    sim.run(1 << 20, |_, _| true);
    assert_conserved(&sim);
    let r = sim.results("afap", None, None);
    assert_eq!(r.conservation.dropped_total, cold, "{:?}", r.conservation);
    let f = &r.flows[0];
    assert_eq!(
        f.received_packets,
        f.sent_packets.map(|n| n - cold),
        "{f:?}"
    );
    // r1 did ask again: once at the start, then each time r2's entry aged
    // out in use (60 s, 120 s).
    let r1 = sim.net.node_id("r1").unwrap();
    let netloop_model::network::Node::Router(router) = sim.net.node(r1) else {
        panic!("r1 is a router")
    };
    assert!(
        router.stats().arp_requests_sent >= 3,
        "{:?}",
        router.stats()
    );
}

/// A host that sends to several destinations by different ports, and
/// receives on several UDP ports, packet after packet alternately: each
/// packet takes its own route and reaches its own sink (hosts remember the
/// last route and the last port's application; a stale answer would send
/// a packet out of the wrong port or count it for the wrong flow).
#[test]
fn a_host_alternating_destinations_and_ports_routes_and_delivers_each() {
    // h2 - h1 - h3 (two ports on h1); h2 sends two flows to h1 (two sinks
    // on two ports of h1's).
    let s = spec(
        SimDuration::from_secs(2),
        1,
        vec![host("h1"), host("h2"), host("h3")],
        vec![
            link("h1", "h2", dir(Some(100), ms(1))),
            link("h1", "h3", dir(Some(100), ms(3))),
        ],
        vec![
            flow("to-h2", "h1", "h2", cbr(1, 500)),
            flow("to-h3", "h1", "h3", cbr(2, 500)),
            flow("from-h2", "h2", "h1", cbr(1, 400)),
            flow("also-from-h2", "h2", "h1", cbr(3, 400)),
        ],
    );
    let sim = run(&s);
    let r = sim.results("afap", None, None);
    assert!(r.conservation.dropped_total == 0, "{:?}", r.conservation);
    for (name, mbps, size) in [
        ("to-h2", 1, 500),
        ("to-h3", 2, 500),
        ("from-h2", 1, 400),
        ("also-from-h2", 3, 400),
    ] {
        let f = r.flows.iter().find(|f| f.name == name).unwrap();
        // 2 s of mbps Mbit/s in size-byte payloads (the last in flight).
        let want = (2 * mbps * 1_000_000 / 8 / size) as u64;
        let got = f.received_packets.unwrap();
        assert!(
            got + 2 >= want && got <= want,
            "{name}: {got} of about {want} packets"
        );
    }
}

/// The frames of address resolution (ARP, and ICMPv6 neighbour
/// solicitations and advertisements) that crossed `sim`'s links, counted by
/// taps attached before it ran: (ARP, NDP).
fn resolution_frames(spec: &NetworkSpec) -> (Simulation, usize, usize) {
    let mut sim = Simulation::build(spec).expect("builds");
    let taps: Vec<Recorder> = (0..spec.links.len()).map(|_| Recorder::default()).collect();
    for (i, t) in taps.iter().enumerate() {
        sim.net.add_tap(i, Box::new(t.clone()));
    }
    sim.run(1 << 20, |_, _| true);
    assert_conserved(&sim);
    let frames: Vec<Vec<u8>> = taps
        .iter()
        .flat_map(|t| t.frames())
        .filter(|f| !f.rx)
        .map(|f| f.data)
        .collect();
    let arp = frames.iter().filter(|f| f[12..14] == [0x08, 0x06]).count();
    // IPv6, next header ICMPv6, type 135 or 136.
    let ndp = frames
        .iter()
        .filter(|f| f[12..14] == [0x86, 0xdd] && f[14 + 6] == 58 && matches!(f[14 + 40], 135 | 136))
        .count();
    (sim, arp, ndp)
}

/// `[run] static_neighbours`: every host and router starts knowing its
/// neighbours, over IPv4 and IPv6, so no resolution frame crosses a link
/// and the first ping takes no longer than the others; without it the
/// first one waits at every hop.
#[test]
fn with_static_neighbours_nothing_waits_for_address_resolution() {
    for ipv6 in [false, true] {
        let ping = TrafficSpec {
            stop: Some(SimDuration::from_secs(4)),
            ipv6,
            ..flow(
                "p",
                "h1",
                "h2",
                TrafficKind::Ping {
                    interval: ms(100),
                    size: Bytes::new(56),
                },
            )
        };
        let mut s = chain(vec![ping]);
        s.run.ipv6 = ipv6;
        // 8 link traversals of 1 ms plus 8 serialisations at 100 Mbit/s
        // (a 98-byte frame over IPv4, 118 over IPv6: 122 or 142 on the wire).
        let exact = 8_000_000 + 8 * if ipv6 { 11_360 } else { 9_760 };
        let (sim, arp, ndp) = resolution_frames(&s);
        let d = sim.results("afap", None, None).flows[0]
            .delay_ns
            .clone()
            .unwrap();
        assert!(
            arp + ndp > 0,
            "ipv6 {ipv6}: resolution without static entries"
        );
        assert!(d.max > exact, "ipv6 {ipv6}: the first ping waited: {d:?}");
        s.run.static_neighbours = true;
        let (sim, arp, ndp) = resolution_frames(&s);
        let r = sim.results("afap", None, None);
        let f = &r.flows[0];
        let d = f.delay_ns.as_ref().unwrap();
        assert_eq!((arp, ndp), (0, 0), "ipv6 {ipv6}: no resolution frame");
        assert_eq!(
            (d.min, d.max),
            (exact, exact),
            "ipv6 {ipv6}: every ping exact"
        );
        assert_eq!(f.received_packets, Some(40));
    }
}

/// On a switched segment every host knows every other (and the router),
/// so UDP between hosts of the segment, and through the router, resolves
/// nothing.
#[test]
fn static_neighbours_cover_a_switched_segment() {
    let mut s = spec(
        SimDuration::from_secs(2),
        1,
        vec![
            host("a"),
            host("b"),
            host("c"),
            switch("sw"),
            router("r"),
            host("far"),
        ],
        vec![
            link("a", "sw", dir(Some(100), ms(1))),
            link("b", "sw", dir(Some(100), ms(1))),
            link("c", "sw", dir(Some(100), ms(1))),
            link("r", "sw", dir(Some(100), ms(1))),
            link("r", "far", dir(Some(100), ms(1))),
        ],
        vec![
            flow("ab", "a", "b", cbr(1, 500)),
            flow("cb", "c", "b", cbr(1, 500)),
            flow("afar", "a", "far", cbr(1, 500)),
            flow("fara", "far", "a", cbr(1, 500)),
        ],
    );
    s.run.static_neighbours = true;
    let (sim, arp, ndp) = resolution_frames(&s);
    assert_eq!((arp, ndp), (0, 0));
    let r = sim.results("afap", None, None);
    for f in &r.flows {
        assert!(
            f.received_packets.unwrap() > 400,
            "{}: {:?}",
            f.name,
            f.received_packets
        );
        assert_eq!(f.sent_packets, f.received_packets, "{}", f.name);
    }
}
