//! TCP message endpoints: length-prefixed messages on connections of the
//! hosts' smoltcp stacks. Checked here: once connected, a message arrives
//! when the links say, to the nanosecond; across lossy links every message
//! arrives, whole and in order (TCP sends again what was lost), and every
//! frame stays accounted for; a reply to a message's sender goes back on
//! the connection it came on; many peers connect to one endpoint at once;
//! a connection nobody accepts loses its messages by a named count; a TCP
//! endpoint can't send to a UDP one.

mod common;

use common::*;
use netloop_core::{DataRate, SimDuration, SimTime};
use netloop_model::apps::{EndpointStats, Message};
use netloop_model::spec::*;
use netloop_model::{ItemRef, Simulation};
use std::net::SocketAddr;

const DELAY_MS: u64 = 5;

fn endpoint(name: &str, node: &str, port: u16, to: Option<&str>) -> MessageEndpointSpec {
    MessageEndpointSpec {
        name: name.into(),
        node: node.into(),
        port,
        protocol: Transport::Tcp,
        to: to.map(|t| EndpointTarget::Endpoint(t.into())),
        federate: None,
    }
}

/// h1 — r — h2, 10 Mbit/s and 5 ms each way on both links; TCP endpoint
/// `a` on h1:4000 sends to `b` on h2:5000 by default.
fn net(extra: impl FnOnce(&mut NetworkSpec)) -> Simulation {
    let d = dir(Some(10), ms(DELAY_MS));
    let mut s = spec(
        SimDuration::from_secs(600),
        7,
        vec![host("h1"), router("r"), host("h2")],
        vec![link("h1", "r", d.clone()), link("r", "h2", d)],
        vec![],
    );
    s.endpoints = vec![
        endpoint("a", "h1", 4000, Some("b")),
        endpoint("b", "h2", 5000, None),
    ];
    extra(&mut s);
    Simulation::build(&s).expect("valid spec")
}

fn at(ns: u64) -> SimTime {
    SimTime::ZERO + SimDuration::from_nanos(ns)
}

fn send_at(sim: &mut Simulation, t: SimTime, i: usize, to: Option<SocketAddr>, data: &[u8]) {
    sim.run_until(t, 1 << 20, |_, _| true);
    let e = sim.endpoints[i].clone();
    sim.net
        .endpoint_send(&mut sim.queue, e.node, e.app, to, data)
        .expect("sent");
}

fn inbox(sim: &mut Simulation, i: usize) -> Vec<Message> {
    let e = sim.endpoints[i].clone();
    let ep = sim.net.endpoint_mut(e.node, e.app).expect("an endpoint");
    std::iter::from_fn(|| ep.take()).collect()
}

fn stats(sim: &mut Simulation, i: usize) -> EndpointStats {
    let e = sim.endpoints[i].clone();
    sim.net.endpoint_mut(e.node, e.app).unwrap().stats.clone()
}

/// One 10 Mbit/s hop for a TCP segment of `payload` bytes without options
/// (TCP, IP and Ethernet headers, padded to 60, plus 24 bytes of framing).
fn hop_ns(payload: u64) -> u64 {
    let wire = (payload + 20 + 20 + 14).max(60) + 24;
    DataRate::from_mbps(10).tx_time(wire).as_nanos() + DELAY_MS * 1_000_000
}

#[test]
fn once_connected_a_message_arrives_when_the_links_say() {
    let mut sim = net(|_| {});
    send_at(&mut sim, SimTime::ZERO, 0, None, b"connect");
    sim.run_until(at(1_000_000_000), 1 << 20, |_, _| true);
    let first = inbox(&mut sim, 1);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].data, b"connect");
    // The handshake and ARP come first: more than one way, less than two
    // round trips.
    let one_way = 2 * hop_ns(11);
    assert!(
        first[0].at > at(one_way) && first[0].at < at(6 * one_way),
        "{:?} against one way {one_way} ns",
        first[0].at
    );

    let data = vec![0x5au8; 1000];
    let t0 = 1_000_000_000;
    send_at(&mut sim, at(t0), 0, None, &data);
    sim.run_until(at(2_000_000_000), 1 << 20, |_, _| true);
    let got = inbox(&mut sim, 1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].data, data);
    // One segment: the 4-byte length and the message.
    assert_eq!(got[0].at, at(t0 + 2 * hop_ns(1004)), "exact to the ns");
    // From a's connection (an ephemeral port of h1).
    assert_eq!(got[0].from.ip(), sim.endpoints[0].addr.ip());
    assert_ne!(got[0].from.port(), 4000);
    assert_conserved(&sim);
}

#[test]
fn across_lossy_links_every_message_arrives_whole_and_in_order() {
    let mut sim = net(|s| {
        for l in &mut s.links {
            l.a_to_b.loss = LossSpec::Bernoulli { p: 0.03 };
            l.b_to_a.loss = LossSpec::Bernoulli { p: 0.03 };
        }
    });
    // Sizes from 1 byte to past the MSS, every 10 ms.
    let n = 400u64;
    let msg = |k: u64| -> Vec<u8> {
        let len = 1 + (k * 37 % 4000) as usize;
        (0..len).map(|i| (k as usize + i) as u8).collect()
    };
    for k in 0..n {
        send_at(&mut sim, at(k * 10_000_000), 0, None, &msg(k));
    }
    sim.run_until(at(120_000_000_000), 1 << 20, |_, _| true);
    let got = inbox(&mut sim, 1);
    assert_eq!(
        got.len() as u64,
        n,
        "every message arrives: {:?} {:?}",
        stats(&mut sim, 0),
        stats(&mut sim, 1)
    );
    for (k, m) in got.iter().enumerate() {
        assert_eq!(m.data, msg(k as u64), "message {k} whole and in order");
    }
    assert!(got.windows(2).all(|w| w[0].at <= w[1].at));
    let dropped: u64 = sim.net.ledger().dropped.total();
    assert!(dropped > 20, "the links lost frames: {dropped}");
    let a = stats(&mut sim, 0);
    assert_eq!((a.sent, a.lost_connection, a.connections_opened), (n, 0, 1));
    let b = stats(&mut sim, 1);
    assert_eq!((b.received, b.connections_accepted), (n, 1));
    assert_eq!(b.received_bytes, a.sent_bytes);
    assert_conserved(&sim);
}

#[test]
fn a_reply_to_the_sender_goes_back_on_its_connection() {
    let mut sim = net(|_| {});
    send_at(&mut sim, SimTime::ZERO, 0, None, b"measurement");
    sim.run_until(at(1_000_000_000), 1 << 20, |_, _| true);
    let got = inbox(&mut sim, 1);
    let from = got[0].from;
    send_at(&mut sim, at(1_000_000_000), 1, Some(from), b"setpoint");
    sim.run_until(at(2_000_000_000), 1 << 20, |_, _| true);
    let back = inbox(&mut sim, 0);
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].data, b"setpoint");
    // Already connected: one hop each way, no handshake.
    assert_eq!(back[0].at, at(1_000_000_000 + 2 * hop_ns(12)));
    assert_eq!(back[0].from, sim.endpoints[1].addr);
    let b = stats(&mut sim, 1);
    assert_eq!((b.connections_opened, b.connections_accepted), (0, 1));
    assert_conserved(&sim);
}

#[test]
fn many_peers_connect_to_one_endpoint_at_once() {
    let peers = 12;
    let mut sim = net(|s| {
        for i in 0..peers {
            s.endpoints
                .push(endpoint(&format!("p{i}"), "h1", 6000 + i as u16, Some("b")));
        }
    });
    sim.run_until(at(1_000_000), 1 << 20, |_, _| true);
    for i in 0..peers {
        let e = sim.endpoints[2 + i].clone();
        let data = format!("from {i}").into_bytes();
        sim.net
            .endpoint_send(&mut sim.queue, e.node, e.app, None, &data)
            .unwrap();
    }
    sim.run_until(at(2_000_000_000), 1 << 20, |_, _| true);
    let mut got: Vec<Vec<u8>> = inbox(&mut sim, 1).into_iter().map(|m| m.data).collect();
    got.sort();
    let mut want: Vec<Vec<u8>> = (0..peers)
        .map(|i| format!("from {i}").into_bytes())
        .collect();
    want.sort();
    assert_eq!(got, want);
    assert_eq!(stats(&mut sim, 1).connections_accepted, peers as u64);
    assert_conserved(&sim);
}

#[test]
fn a_connection_nobody_accepts_loses_its_messages_by_count() {
    let mut sim = net(|_| {});
    // h2 has nothing on TCP port 5999: its stack resets the SYN.
    let nobody: SocketAddr = SocketAddr::new(sim.endpoints[1].addr.ip(), 5999);
    send_at(&mut sim, SimTime::ZERO, 0, Some(nobody), b"one");
    send_at(&mut sim, SimTime::ZERO, 0, Some(nobody), b"two");
    sim.run_until(at(1_000_000_000), 1 << 20, |_, _| true);
    let a = stats(&mut sim, 0);
    assert_eq!((a.sent, a.lost_connection), (2, 2));
    // A later message tries again on a new connection, to a listener this
    // time, and arrives.
    send_at(&mut sim, at(1_000_000_000), 0, None, b"three");
    sim.run_until(at(2_000_000_000), 1 << 20, |_, _| true);
    assert_eq!(inbox(&mut sim, 1).len(), 1);
    assert_eq!(stats(&mut sim, 0).connections_opened, 2);
    assert_conserved(&sim);
}

#[test]
fn a_tcp_endpoint_cannot_send_to_a_udp_one() {
    let d = dir(Some(10), ms(1));
    let mut s = spec(
        SimDuration::from_secs(1),
        1,
        vec![host("h1"), router("r"), host("h2")],
        vec![link("h1", "r", d.clone()), link("r", "h2", d)],
        vec![],
    );
    let mut udp = endpoint("u", "h2", 7, None);
    udp.protocol = Transport::Udp;
    // The same port number over UDP and TCP on one host is two sockets.
    let mut tcp_same_port = endpoint("t2", "h2", 7, None);
    tcp_same_port.to = None;
    s.endpoints = vec![endpoint("t", "h1", 7, Some("u")), udp, tcp_same_port];
    let err = Simulation::build(&s).err().expect("refused");
    assert!(matches!(err.item, ItemRef::Endpoint(0)), "{err}");
    assert_eq!(err.field, Some("to"));
    assert!(
        err.to_string()
            .contains("'u' is a UDP endpoint and 't' is TCP"),
        "{err}"
    );
    s.endpoints[0].to = Some(EndpointTarget::Endpoint("t2".into()));
    Simulation::build(&s).expect("TCP to TCP, beside UDP on the same port");
}

#[test]
fn an_idle_connection_stays_open() {
    let mut sim = net(|_| {});
    send_at(&mut sim, SimTime::ZERO, 0, None, b"first");
    // Ten minutes without a packet: longer than TCP gives a silent peer.
    let t1 = 590_000_000_000;
    send_at(&mut sim, at(t1), 0, None, b"second");
    sim.run_until(at(t1 + 1_000_000_000), 1 << 20, |_, _| true);
    let got = inbox(&mut sim, 1);
    assert_eq!(got.len(), 2);
    // On the same connection: no handshake (a round trip, 20 ms) before
    // it; the hosts' ARP caches went stale and are refreshed beside it.
    assert!(
        got[1].at < at(t1 + 2 * hop_ns(10) + 1_000_000),
        "{:?}",
        got[1].at
    );
    let a = stats(&mut sim, 0);
    assert_eq!((a.connections_opened, a.lost_connection), (1, 0));
    assert_conserved(&sim);
}

#[test]
fn a_full_inbox_holds_the_sender_back_and_loses_nothing() {
    let mut sim = net(|_| {});
    let n = netloop_model::apps::ENDPOINT_INBOX + 3_000;
    let e = sim.endpoints[0].clone();
    for k in 0..n as u32 {
        sim.net
            .endpoint_send(&mut sim.queue, e.node, e.app, None, &k.to_be_bytes())
            .unwrap();
    }
    sim.run_until(at(60_000_000_000), 1 << 20, |_, _| true);
    let b = sim.endpoints[1].clone();
    let first = sim.net.take_endpoint(&mut sim.queue, b.node, b.app);
    assert_eq!(first.len(), netloop_model::apps::ENDPOINT_INBOX);
    // Taking made room: the host read what it held back, now.
    let rest = sim.net.take_endpoint(&mut sim.queue, b.node, b.app);
    assert!(!rest.is_empty());
    sim.run_until(at(120_000_000_000), 1 << 20, |_, _| true);
    let last = sim.net.take_endpoint(&mut sim.queue, b.node, b.app);
    let all: Vec<u32> = [first, rest, last]
        .concat()
        .iter()
        .map(|m| u32::from_be_bytes(m.data[..].try_into().unwrap()))
        .collect();
    assert_eq!(
        all,
        (0..n as u32).collect::<Vec<_>>(),
        "every message, in order"
    );
    let s = stats(&mut sim, 1);
    assert_eq!((s.received, s.inbox_full), (n as u64, 0));
    assert_conserved(&sim);
}

#[test]
fn tcp_messages_go_over_ipv6_to_an_ipv6_address() {
    let mut sim = net(|s| s.run.ipv6 = true);
    let h2 = sim.net.node_id("h2").unwrap();
    let b6 = sim.net.ports(h2)[0].addr6.unwrap().addr;
    let to = SocketAddr::new(b6.into(), 5000);
    send_at(&mut sim, SimTime::ZERO, 0, Some(to), b"connect");
    sim.run_until(at(1_000_000_000), 1 << 20, |_, _| true);
    assert_eq!(inbox(&mut sim, 1).len(), 1);
    let data = vec![0x5au8; 1000];
    let t0 = 1_000_000_000;
    send_at(&mut sim, at(t0), 0, Some(to), &data);
    sim.run_until(at(2_000_000_000), 1 << 20, |_, _| true);
    let got = inbox(&mut sim, 1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].data, data);
    // One segment, 20 bytes of header more than over IPv4.
    assert_eq!(got[0].at, at(t0 + 2 * hop_ns(1024)), "exact to the ns");
    assert!(got[0].from.is_ipv6());
    // The reply goes back on that connection.
    send_at(
        &mut sim,
        at(2_000_000_000),
        1,
        Some(got[0].from),
        b"setpoint",
    );
    sim.run_until(at(3_000_000_000), 1 << 20, |_, _| true);
    let back = inbox(&mut sim, 0);
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].from, to);
    assert_eq!(stats(&mut sim, 1).connections_accepted, 1);
    assert_conserved(&sim);
}

#[test]
fn a_dual_stack_host_on_two_links_takes_connections_on_each_address() {
    // h2 on two links to r, dual stack: four addresses, each one its TCP's.
    let mut sim = net(|s| {
        s.run.ipv6 = true;
        let d = dir(Some(10), ms(DELAY_MS));
        s.links.push(LinkSpec {
            name: "r-h2-second".into(),
            ..link("r", "h2", d)
        });
    });
    let h2 = sim.net.node_id("h2").unwrap();
    let second = sim.net.ports(h2)[1].clone();
    let mut t = SimTime::ZERO;
    for ip in [
        std::net::IpAddr::from(second.addr.unwrap().addr),
        second.addr6.unwrap().addr.into(),
    ] {
        send_at(&mut sim, t, 0, Some(SocketAddr::new(ip, 5000)), b"hello");
        t += SimDuration::from_secs(1);
    }
    sim.run_until(t, 1 << 20, |_, _| true);
    let got = inbox(&mut sim, 1);
    assert_eq!(got.len(), 2, "{:?}", stats(&mut sim, 0));
    assert_conserved(&sim);

    // More addresses than a simulated host's stack holds: refused by name.
    let mut s = spec(
        SimDuration::from_secs(1),
        1,
        vec![host("h"), router("r")],
        (0..5)
            .map(|_| link("h", "r", dir(Some(10), ms(1))))
            .collect(),
        vec![],
    );
    s.run.ipv6 = true;
    for (k, l) in s.links.iter_mut().enumerate() {
        l.name = format!("l{k}");
    }
    let e = Simulation::build(&s).err().expect("refused").to_string();
    assert!(
        e.contains("'h' has 10 addresses") && e.contains("at most 8"),
        "{e}"
    );
}
