//! IPv6 addressing and routes as the model builds them: a /64 per segment
//! from the pool, the IPv4 host number reused, explicit subnets and
//! addresses, static IPv6 routes, and the errors that name what is wrong.

mod common;

use common::*;
use netloop_model::routing::Route6;
use netloop_model::spec::*;
use netloop_model::Simulation;
use std::net::{IpAddr, Ipv6Addr};

/// x (real) — r1 — sw — {r2, y (real)}, dual stack.
fn net() -> NetworkSpec {
    let mut s = spec(
        ms(1000),
        1,
        vec![
            attached("x"),
            router("r1"),
            switch("sw"),
            router("r2"),
            attached("y"),
            host("h"),
        ],
        vec![
            link("x", "r1", dir(None, ms(1))),
            link("r1", "sw", dir(None, ms(1))),
            link("sw", "r2", dir(None, ms(1))),
            link("sw", "y", dir(None, ms(1))),
            link("r2", "h", dir(None, ms(1))),
        ],
        vec![],
    );
    s.run.ipv6 = true;
    s
}

fn a6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn addr6(sim: &Simulation, node: &str, port: usize) -> Option<String> {
    let id = sim.net.node_id(node).unwrap();
    sim.net.ports(id)[port].addr6.map(|a| a.to_string())
}

fn routes6(sim: &Simulation, node: &str) -> Vec<Route6> {
    sim.real
        .iter()
        .find(|r| r.name == node)
        .map(|r| r.routes6.clone())
        .unwrap()
}

#[test]
fn each_segment_gets_a_64_and_each_interface_its_ipv4_host_number() {
    let sim = Simulation::build(&net()).unwrap();
    let v4 = |n: &str, p: usize| {
        let id = sim.net.node_id(n).unwrap();
        sim.net.ports(id)[p].addr.unwrap().to_string()
    };
    assert_eq!(v4("x", 0), "198.18.0.1/24");
    assert_eq!(addr6(&sim, "x", 0).unwrap(), "2001:2::1/64");
    assert_eq!(addr6(&sim, "r1", 0).unwrap(), "2001:2::2/64");
    // The switched segment is one /64 for r1, r2 and y.
    assert_eq!(v4("y", 0), "198.18.1.3/24");
    assert_eq!(addr6(&sim, "r1", 1).unwrap(), "2001:2:0:1::1/64");
    assert_eq!(addr6(&sim, "r2", 0).unwrap(), "2001:2:0:1::2/64");
    assert_eq!(addr6(&sim, "y", 0).unwrap(), "2001:2:0:1::3/64");
    // Simulated hosts have IPv6 too.
    assert_eq!(addr6(&sim, "h", 0).unwrap(), "2001:2:0:2::2/64");
    assert_eq!(addr6(&sim, "r2", 1).unwrap(), "2001:2:0:2::1/64");
    assert_eq!(addr6(&sim, "sw", 0), None);
    // The real hosts' routes: y has two routers on its segment, so a route
    // per remote subnet through the first hop of a shortest path.
    let x = routes6(&sim, "x");
    assert_eq!(x.len(), 1);
    assert_eq!((x[0].prefix.prefix, x[0].via), (0, Some(a6("2001:2::2"))));
    let y = routes6(&sim, "y");
    let via: Vec<_> = y.iter().map(|r| (r.prefix.to_string(), r.via)).collect();
    assert!(
        via.contains(&("2001:2::/64".into(), Some(a6("2001:2:0:1::1")))),
        "{via:?}"
    );
    assert!(
        via.contains(&("2001:2:0:2::/64".into(), Some(a6("2001:2:0:1::2")))),
        "{via:?}"
    );
}

#[test]
fn explicit_subnets_addresses_and_routes() {
    let mut s = net();
    s.links[0].subnet6 = Some(Ipv6Cidr::parse("2001:2:0:99::/120").unwrap());
    s.links[0].b.address6 = Some(Ipv6Cidr::parse("2001:2:0:99::1/120").unwrap());
    // The first automatic /64 (k = 0) is still the pool's first: the
    // explicit subnet is elsewhere. The switched segment takes k = 1.
    s.links[2].subnet6 = Some(Ipv6Cidr::parse("2001:2:0:77::/64").unwrap());
    s.routes.push(RouteSpec {
        node: "r1".into(),
        prefix: IpPrefix::V6(Ipv6Cidr::parse("2001:3::/48").unwrap()),
        via: IpAddr::V6(a6("2001:2:0:77::2")),
    });
    let sim = Simulation::build(&s).unwrap();
    assert_eq!(addr6(&sim, "r1", 0).unwrap(), "2001:2:0:99::1/120");
    // x wanted host 1 (its IPv4 number), taken: the next free.
    assert_eq!(addr6(&sim, "x", 0).unwrap(), "2001:2:0:99::2/120");
    assert_eq!(addr6(&sim, "r2", 0).unwrap(), "2001:2:0:77::2/64");
    assert_eq!(addr6(&sim, "r2", 1).unwrap(), "2001:2:0:2::1/64");
    let id = sim.net.node_id("r1").unwrap();
    let netloop_model::network::Node::Router(r1) = sim.net.node(id) else {
        panic!("r1 is a router")
    };
    let r = r1.table6().lookup(a6("2001:3::9")).copied().unwrap();
    assert_eq!((r.via, r.port), (Some(a6("2001:2:0:77::2")), 1));
}

#[test]
fn mistakes_are_named() {
    let err = |s: &NetworkSpec| Simulation::build(s).err().expect("an error").to_string();
    // IPv6 settings without IPv6.
    let mut s = net();
    s.run.ipv6 = false;
    s.links[1].subnet6 = Some(Ipv6Cidr::parse("2001:2:0:5::/64").unwrap());
    let e = err(&s);
    assert!(
        e.contains("link 'r1-sw'") && e.contains("add 'ipv6 = true' to [run]"),
        "{e}"
    );
    // An address outside the subnet, one used twice, a switch's.
    let mut s = net();
    s.links[0].subnet6 = Some(Ipv6Cidr::parse("2001:2:0:99::/64").unwrap());
    s.links[0].a.address6 = Some(Ipv6Cidr::parse("2001:2:0:98::1/64").unwrap());
    assert!(err(&s).contains("is not in this segment's subnet 2001:2:0:99::/64"));
    let mut s = net();
    s.links[0].a.address6 = Some(Ipv6Cidr::parse("2001:2:0:98::1/64").unwrap());
    s.links[1].a.address6 = Some(Ipv6Cidr::parse("2001:2:0:98::1/64").unwrap());
    assert!(err(&s).contains("already used on link 'x-r1'"));
    let mut s = net();
    s.links[1].b.address6 = Some(Ipv6Cidr::parse("2001:2:0:97::1/64").unwrap());
    assert!(err(&s).contains("'sw' is a switch"));
    // Routes: a next hop not on a connected subnet; mixed families.
    let mut s = net();
    s.routes.push(RouteSpec {
        node: "r1".into(),
        prefix: IpPrefix::V6(Ipv6Cidr::parse("2001:3::/48").unwrap()),
        via: IpAddr::V6(a6("2001:9::1")),
    });
    assert!(
        err(&s).contains("next hop 2001:9::1: it is not on a subnet directly connected to 'r1'")
    );
    let mut s = net();
    s.routes.push(RouteSpec {
        node: "r1".into(),
        prefix: IpPrefix::V4(Ipv4Cidr::parse("198.19.0.0/24").unwrap()),
        via: IpAddr::V6(a6("2001:2::1")),
    });
    assert!(err(&s).contains("not of the family of the prefix 198.19.0.0/24"));
    let mut s = net();
    s.run.ipv6 = false;
    s.routes.push(RouteSpec {
        node: "r1".into(),
        prefix: IpPrefix::V6(Ipv6Cidr::parse("2001:3::/48").unwrap()),
        via: IpAddr::V6(a6("2001:2::1")),
    });
    assert!(err(&s).contains("the network has no IPv6"));
    // A pool outside global unicast space; a link below IPv6's 1280 bytes.
    for pool in ["fe80::/48", "::/48", "ff02::/48"] {
        let mut s = net();
        s.address_pool6 = Some(Ipv6Cidr::parse(pool).unwrap());
        let e = err(&s);
        assert!(
            e.contains("interfaces need global unicast addresses"),
            "{pool}: {e}"
        );
    }
    let mut s = net();
    s.links[1].b_to_a.mtu = 1000;
    let e = err(&s);
    assert!(
        e.contains("link 'r1-sw'") && e.contains("below IPv6's minimum of 1280"),
        "{e}"
    );
    // A pool too small for a /64 per link.
    let mut s = net();
    s.address_pool6 = Some(Ipv6Cidr::parse("2001:2::/63").unwrap());
    assert!(err(&s).contains("has no /64 left"));
}

#[test]
fn an_ipv6_only_network_has_no_ipv4_and_its_traffic_and_endpoints_use_ipv6() {
    let mut s = net();
    s.run.ipv6_only = true;
    s.nodes.push(host("g"));
    s.links.push(link("r2", "g", dir(Some(100), ms(1))));
    s.traffic = vec![
        TrafficSpec {
            stop: Some(ms(500)),
            ..flow("u", "h", "g", cbr(1, 100))
        },
        flow(
            "t",
            "g",
            "h",
            TrafficKind::TcpBulk {
                bytes: Some(netloop_core::Bytes::new(100_000)),
            },
        ),
    ];
    s.endpoints = vec![MessageEndpointSpec {
        name: "e".into(),
        node: "h".into(),
        port: 7000,
        protocol: Transport::Udp,
        to: None,
        federate: None,
    }];
    let mut sim = Simulation::build(&s).unwrap();
    for id in 0..s.nodes.len() {
        for p in sim.net.ports(id) {
            assert!(p.addr.is_none(), "{p:?}");
            assert_eq!(p.addr6.is_some(), !s.nodes[id].name.starts_with("sw"));
        }
    }
    // The real hosts get IPv6 routes only.
    let x = sim.real.iter().find(|r| r.name == "x").unwrap();
    assert!(x.routes.is_empty() && !x.routes6.is_empty());
    assert!(sim.endpoints[0].addr.is_ipv6());
    assert_eq!(
        sim.endpoints[0].addr.ip(),
        addr6(&sim, "h", 0)
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .parse::<IpAddr>()
            .unwrap()
    );
    sim.run(1 << 20, |_, _| true);
    let r = sim.results("afap", None, None);
    let (u, t) = (&r.flows[0], &r.flows[1]);
    assert!(u.sent_packets.unwrap() > 50);
    assert_eq!(u.received_packets, u.sent_packets);
    assert_eq!(t.received_bytes, 100_000);
    assert_eq!(r.conservation.unaccounted, 0);

    // IPv4 settings are refused by name.
    let err = |s: &NetworkSpec| Simulation::build(s).err().expect("an error").to_string();
    let mut bad = net();
    bad.run.ipv6_only = true;
    bad.links[4].subnet = Some(Ipv4Cidr::parse("198.18.9.0/24").unwrap());
    let e = err(&bad);
    assert!(e.contains("link 'r2-h'") && e.contains("IPv6-only"), "{e}");
    let mut bad = net();
    bad.run.ipv6_only = true;
    bad.routes.push(RouteSpec {
        node: "r1".into(),
        prefix: IpPrefix::V4(Ipv4Cidr::parse("198.19.0.0/16").unwrap()),
        via: IpAddr::V4("198.18.1.2".parse().unwrap()),
    });
    let e = err(&bad);
    assert!(e.contains("route") && e.contains("IPv6-only"), "{e}");
}

/// An IPv4 subnet outside unicast space is refused with the link named,
/// not handed to a host's stack (which panicked on a multicast address:
/// found by the topology fuzzer).
#[test]
fn an_ipv4_subnet_outside_unicast_space_is_refused() {
    for bad in [
        "238.18.20.0/24",
        "240.0.0.0/24",
        "127.1.0.0/24",
        "0.0.0.0/24",
    ] {
        let mut s = net();
        s.links[0].subnet = Some(Ipv4Cidr::parse(bad).unwrap());
        let e = Simulation::build(&s).err().expect("an error").to_string();
        assert!(
            e.contains("subnet") && e.contains("not unicast"),
            "{bad}: {e}"
        );
    }
    let mut s = net();
    s.links[0].subnet = Some(Ipv4Cidr::parse("198.18.99.0/24").unwrap());
    assert!(Simulation::build(&s).is_ok());
}

/// So is an interface's address there (the segment's subnet would come
/// from it), and an address pool that reaches into it (automatic subnets
/// would): each named, not handed to a host's stack.
#[test]
fn an_ipv4_address_or_pool_outside_unicast_space_is_refused() {
    let err = |s: &NetworkSpec| Simulation::build(s).err().expect("an error").to_string();
    for bad in ["225.1.2.3/24", "250.0.0.1/24", "127.0.0.2/24", "0.1.2.3/24"] {
        let mut s = net();
        s.links[4].b.address = Some(Ipv4Cidr::parse(bad).unwrap());
        let e = err(&s);
        assert!(
            e.contains("link 'r2-h'") && e.contains("addresses") && e.contains("not a unicast"),
            "{bad}: {e}"
        );
    }
    for bad in ["224.0.0.0/8", "0.0.0.0/0", "127.0.0.0/16", "192.0.0.0/2"] {
        let mut s = net();
        s.address_pool = Some(Ipv4Cidr::parse(bad).unwrap());
        let e = err(&s);
        assert!(
            e.contains("address_pool") && e.contains("overlaps"),
            "{bad}: {e}"
        );
    }
    let mut s = net();
    s.links[4].b.address = Some(Ipv4Cidr::parse("198.18.77.2/24").unwrap());
    s.address_pool = Some(Ipv4Cidr::parse("10.0.0.0/8").unwrap());
    assert!(Simulation::build(&s).is_ok());
}
