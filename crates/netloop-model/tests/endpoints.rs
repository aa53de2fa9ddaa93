//! Message endpoints: sockets on simulated hosts that the outside world
//! sends messages from and reads messages at (what a co-simulation's
//! endpoints and a Python script use). Checked here: a message arrives at
//! the simulated time the links make, to the nanosecond, with the sender's
//! address; a reply goes back; a message larger than the MTU is fragmented
//! and arrives whole; loss and corruption lose messages without delivering
//! damaged bytes and every frame stays accounted for; refusals are named;
//! an endpoint's port is never given to a flow; bad endpoints are build
//! errors.

mod common;

use common::*;
use netloop_core::{DataRate, SimDuration, SimTime};
use netloop_model::apps::{Message, SendRefused};
use netloop_model::spec::*;
use netloop_model::{ItemRef, Simulation};
use std::net::SocketAddr;

const DELAY_MS: u64 = 5;

/// h1 — r — h2, 10 Mbit/s and 5 ms each way on both links; endpoint `a`
/// on h1:4000 sends to `b` on h2:5000 by default; `b` has no `to`.
fn net(extra: impl FnOnce(&mut NetworkSpec)) -> Simulation {
    let d = dir(Some(10), ms(DELAY_MS));
    let mut s = spec(
        SimDuration::from_secs(10),
        7,
        vec![host("h1"), router("r"), host("h2")],
        vec![link("h1", "r", d.clone()), link("r", "h2", d)],
        vec![],
    );
    s.endpoints = vec![
        endpoint("a", "h1", 4000, Some(EndpointTarget::Endpoint("b".into()))),
        endpoint("b", "h2", 5000, None),
    ];
    extra(&mut s);
    Simulation::build(&s).expect("valid spec")
}

fn endpoint(name: &str, node: &str, port: u16, to: Option<EndpointTarget>) -> MessageEndpointSpec {
    MessageEndpointSpec {
        name: name.into(),
        node: node.into(),
        port,
        protocol: Transport::Udp,
        to,
        federate: None,
    }
}

fn at(ns: u64) -> SimTime {
    SimTime::ZERO + SimDuration::from_nanos(ns)
}

/// Sends `data` from endpoint `i` at simulated time `t`.
fn send_at(
    sim: &mut Simulation,
    t: SimTime,
    i: usize,
    to: Option<SocketAddr>,
    data: &[u8],
) -> Result<(), SendRefused> {
    sim.run_until(t, 1 << 20, |_, _| true);
    let e = sim.endpoints[i].clone();
    sim.net
        .endpoint_send(&mut sim.queue, e.node, e.app, to, data)
}

/// Takes what endpoint `i` received.
fn inbox(sim: &mut Simulation, i: usize) -> Vec<Message> {
    let e = sim.endpoints[i].clone();
    let ep = sim.net.endpoint_mut(e.node, e.app).expect("an endpoint");
    std::iter::from_fn(|| ep.take()).collect()
}

/// Time on one 10 Mbit/s hop: the UDP payload plus UDP, IP and Ethernet
/// headers (padded to Ethernet's 60-byte minimum) plus the link's 24 bytes
/// of framing, and the 5 ms delay.
fn hop_ns(payload: u64) -> u64 {
    let wire = (payload + 8 + 20 + 14).max(60) + 24;
    DataRate::from_mbps(10).tx_time(wire).as_nanos() + DELAY_MS * 1_000_000
}

#[test]
fn a_message_arrives_when_the_links_say_and_the_reply_comes_back() {
    let mut sim = net(|_| {});
    // The first message also resolves ARP on both hops.
    send_at(&mut sim, SimTime::ZERO, 0, None, b"warm up").unwrap();
    sim.run_until(at(1_000_000_000), 1 << 20, |_, _| true);
    assert_eq!(inbox(&mut sim, 1).len(), 1);

    let data = vec![0xabu8; 1000];
    let t0 = 1_000_000_000;
    send_at(&mut sim, at(t0), 0, None, &data).unwrap();
    sim.run_until(at(2_000_000_000), 1 << 20, |_, _| true);
    let got = inbox(&mut sim, 1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].data, data);
    assert_eq!(got[0].at, at(t0 + 2 * hop_ns(1000)), "exact to the ns");
    assert_eq!(got[0].from, sim.endpoints[0].addr);

    // b answers whoever wrote: the reply reaches a.
    let t1 = 2_000_000_000;
    let from = got[0].from;
    send_at(&mut sim, at(t1), 1, Some(from), b"setpoint").unwrap();
    sim.run_until(at(3_000_000_000), 1 << 20, |_, _| true);
    let back = inbox(&mut sim, 0);
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].data, b"setpoint");
    assert_eq!(back[0].at, at(t1 + 2 * hop_ns(8)));
    assert_eq!(back[0].from, sim.endpoints[1].addr);
    assert_conserved(&sim);
}

#[test]
fn a_message_larger_than_the_mtu_is_fragmented_and_arrives_whole() {
    let mut sim = net(|_| {});
    let data: Vec<u8> = (0..60_000u32).map(|i| (i * 7) as u8).collect();
    send_at(&mut sim, SimTime::ZERO, 0, None, &data).unwrap();
    sim.run_until(at(2_000_000_000), 1 << 20, |_, _| true);
    let got = inbox(&mut sim, 1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].data, data);
    let e = sim
        .net
        .endpoint_mut(sim.endpoints[1].node, sim.endpoints[1].app)
        .unwrap();
    assert_eq!((e.stats.received, e.stats.received_bytes), (1, 60_000));
    assert_eq!(e.stats.read, 1);
    let json = serde_json::to_value(sim.results("afap", None, None)).unwrap();
    assert_eq!(json["endpoints"][1]["received_bytes"], 60_000);
    assert_eq!(json["endpoints"][0]["sent"], 1);
    assert_conserved(&sim);
}

#[test]
fn refusals_are_named_and_counted() {
    let mut sim = net(|_| {});
    let too_big = vec![0u8; 65_508];
    assert_eq!(
        send_at(&mut sim, SimTime::ZERO, 0, None, &too_big),
        Err(SendRefused::TooLarge {
            size: 65_508,
            max: 65_507
        })
    );
    // b has no default destination.
    assert_eq!(
        send_at(&mut sim, SimTime::ZERO, 1, None, b"x"),
        Err(SendRefused::NoDestination)
    );
    // 203.0.113.1 is an address no host here has a route to: nothing is
    // sent to it, the send is refused before a frame exists.
    let nowhere: SocketAddr = "203.0.113.1:9".parse().unwrap();
    let e = sim.endpoints[0].clone();
    let routes_to_it = sim
        .net
        .endpoint_send(&mut sim.queue, e.node, e.app, Some(nowhere), b"x");
    // h1 has a default route through r, so the send is made: r then has
    // no route and drops it (a named frame drop).
    assert_eq!(routes_to_it, Ok(()));
    sim.run_until(at(1_000_000_000), 1 << 20, |_, _| true);
    assert_eq!(
        sim.net
            .ledger()
            .dropped
            .get(netloop_model::stats::DropReason::NoRoute),
        1
    );
    let a = sim.net.endpoint_mut(e.node, e.app).unwrap();
    assert_eq!(a.stats.refused_too_large, 1);
    assert_eq!(a.stats.sent, 1);
    let b = sim
        .net
        .endpoint_mut(sim.endpoints[1].node, sim.endpoints[1].app)
        .unwrap();
    assert_eq!(b.stats.refused_no_destination, 1);
    // A node that is not a host has no endpoints.
    let r = sim.net.node_id("r").unwrap();
    assert_eq!(
        sim.net.endpoint_send(&mut sim.queue, r, 0, None, b"x"),
        Err(SendRefused::NotAnEndpoint)
    );
    assert_conserved(&sim);
}

#[test]
fn lost_and_corrupted_messages_are_never_delivered_damaged() {
    corrupted_messages(false);
}

#[test]
fn lost_and_corrupted_messages_over_ipv6_are_never_delivered_damaged() {
    corrupted_messages(true);
}

fn corrupted_messages(ipv6: bool) {
    let mut sim = net(|s| {
        s.run.ipv6 = ipv6;
        s.links[1].a_to_b.corrupt = 0.5;
        s.links[0].a_to_b.loss = LossSpec::Bernoulli { p: 0.2 };
    });
    let to = ipv6.then(|| {
        let h2 = sim.net.node_id("h2").unwrap();
        SocketAddr::new(sim.net.ports(h2)[0].addr6.unwrap().addr.into(), 5000)
    });
    let n = 400;
    for k in 0..n {
        let msg = format!("measurement {k:05}").into_bytes();
        send_at(&mut sim, at(k * 10_000_000), 0, to, &msg).unwrap();
    }
    sim.run_until(at(9_000_000_000), 1 << 20, |_, _| true);
    let got = inbox(&mut sim, 1);
    assert!(
        got.len() > 100 && got.len() < 320,
        "{} of {n} arrived",
        got.len()
    );
    for m in &got {
        let text = String::from_utf8(m.data.clone()).expect("intact");
        assert!(text.starts_with("measurement "), "{text}");
    }
    let b = sim
        .net
        .endpoint_mut(sim.endpoints[1].node, sim.endpoints[1].app)
        .unwrap();
    assert!(
        b.stats.bad_checksum > 0,
        "corruption caught by the UDP checksum"
    );
    assert_conserved(&sim);
}

#[test]
fn a_flow_never_takes_an_endpoint_port() {
    // The first UDP flow to h2 would listen on 5001 and send from 49152.
    let mut sim = net(|s| {
        s.endpoints[1].port = 5001;
        s.endpoints.push(endpoint("c", "h1", 49152, None));
        s.traffic.push(flow("cbr", "h1", "h2", cbr(1, 100)));
    });
    send_at(&mut sim, SimTime::ZERO, 0, None, b"hello").unwrap();
    sim.run_until(at(10_000_000_000), 1 << 20, |_, _| true);
    let got = inbox(&mut sim, 1);
    assert_eq!(got.len(), 1, "only the endpoint's own message");
    assert!(inbox(&mut sim, 2).is_empty());
    let r = sim.results("simulation", None, None);
    let received = r.flows[0].received_packets.unwrap_or(0);
    assert!(received > 10_000, "{received}");
    assert_conserved(&sim);
}

#[test]
fn bad_endpoints_are_build_errors() {
    let d = dir(Some(10), ms(1));
    let base = spec(
        SimDuration::from_secs(1),
        1,
        vec![host("h1"), router("r"), host("h2")],
        vec![link("h1", "r", d.clone()), link("r", "h2", d)],
        vec![],
    );
    let cases: Vec<(Vec<MessageEndpointSpec>, &str, &str)> = vec![
        (
            vec![endpoint("x", "r", 1, None)],
            "node",
            "not a simulated host",
        ),
        (
            vec![endpoint("x", "h1", 1, None), endpoint("y", "h1", 1, None)],
            "port",
            "already has endpoint 'x'",
        ),
        (
            vec![endpoint("x", "h1", 1, None), endpoint("x", "h2", 1, None)],
            "name",
            "declared twice",
        ),
        (
            vec![endpoint(
                "x",
                "h1",
                1,
                Some(EndpointTarget::Endpoint("nope".into())),
            )],
            "to",
            "'nope' is neither an endpoint",
        ),
        (vec![endpoint("x", "h9", 1, None)], "node", "h9"),
    ];
    for (eps, field, text) in cases {
        let mut s = base.clone();
        s.endpoints = eps;
        let err = Simulation::build(&s).err().expect("refused");
        assert!(matches!(err.item, ItemRef::Endpoint(_)), "{err}");
        assert_eq!(err.field, Some(field), "{err}");
        assert!(err.to_string().contains(text), "{err}");
    }
}

#[test]
fn messages_go_over_ipv6_to_an_ipv6_address_and_the_reply_comes_back() {
    let mut sim = net(|s| s.run.ipv6 = true);
    let h2 = sim.net.node_id("h2").unwrap();
    let b6 = sim.net.ports(h2)[0].addr6.unwrap().addr;
    let to = SocketAddr::new(b6.into(), 5000);
    // Neighbour discovery on both hops first.
    send_at(&mut sim, SimTime::ZERO, 0, Some(to), b"warm up").unwrap();
    sim.run_until(at(1_000_000_000), 1 << 20, |_, _| true);
    assert_eq!(inbox(&mut sim, 1).len(), 1);
    let t0 = 1_000_000_000;
    send_at(&mut sim, at(t0), 0, Some(to), &[7; 1000]).unwrap();
    sim.run_until(at(2_000_000_000), 1 << 20, |_, _| true);
    let got = inbox(&mut sim, 1);
    assert_eq!(got.len(), 1);
    // 20 bytes more of header than over IPv4, on each hop.
    assert_eq!(got[0].at, at(t0 + 2 * hop_ns(1020)), "exact to the ns");
    let h1 = sim.net.node_id("h1").unwrap();
    let a6 = sim.net.ports(h1)[0].addr6.unwrap().addr;
    assert_eq!(got[0].from, SocketAddr::new(a6.into(), 4000));
    // b answers whoever wrote, over IPv6; a message larger than the path
    // is fragmented and arrives whole.
    let big: Vec<u8> = (0..4000u32).map(|i| i as u8).collect();
    send_at(&mut sim, at(2_000_000_000), 1, Some(got[0].from), &big).unwrap();
    sim.run_until(at(3_000_000_000), 1 << 20, |_, _| true);
    let back = inbox(&mut sim, 0);
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].data, big);
    assert_eq!(back[0].from, SocketAddr::new(b6.into(), 5000));
    assert_conserved(&sim);
    // Without IPv6, an IPv6 destination is a build error naming the field.
    let mut s = spec(
        SimDuration::from_secs(1),
        1,
        vec![host("h1"), host("h2")],
        vec![link("h1", "h2", dir(Some(10), ms(1)))],
        vec![],
    );
    s.endpoints = vec![endpoint(
        "x",
        "h1",
        1,
        Some(EndpointTarget::Address("[2001:2::2]:5000".parse().unwrap())),
    )];
    let err = Simulation::build(&s).err().expect("refused");
    assert_eq!(err.item, ItemRef::Endpoint(0));
    assert_eq!(err.field, Some("to"));
    assert!(err.to_string().contains("add 'ipv6 = true'"), "{err}");
}
