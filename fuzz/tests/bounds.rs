//! Resource bounds under floods from a real host: each flood fills its bound,
//! what does not fit is dropped and counted under its reason, and every frame
//! stays accounted for. Through the fuzz harness (frames entering the model
//! where a real interface's would), on a stable toolchain.

use netloop_core::SimDuration;
use netloop_fuzz::wire::{arp, eth, udp, Ip, Records, ETH_IPV4};
use netloop_fuzz::Harness;
use netloop_model::network::{Event, Node};
use netloop_model::stats::DropReason;

/// A fast, deep access link, so that floods reach the node under test
/// instead of stopping in the access link's queue.
const ACCESS: &str = r#"rate = "100Gbps"
delay = "1us"
queue = { packets = 1000000, bytes = "10GB" }"#;

fn udp_to(dst: [u8; 4], src: [u8; 4]) -> Vec<u8> {
    eth(ETH_IPV4, &Ip::new(src, dst, 17).packet(&udp(9, &[0; 18])))
}

/// r1 with a /17 behind it: 32 766 addresses it would have to resolve.
fn wide_subnet() -> Harness {
    wide_subnets("")
}

/// [`wide_subnet`], with `x_side` added to the x - r1 link (its addresses).
fn wide_subnets(x_side: &str) -> Harness {
    let topo = format!(
        r#"
[run]
duration = "1s"
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
{x_side}
{ACCESS}
[[link]]
endpoints = ["r1", "a"]
addresses = ["198.18.128.1/17", "198.18.128.2/17"]
"#
    );
    Harness::with_topology(&topo, "r1")
}

/// The `k`th of 5 000 distinct neighbours behind r1 that never answer.
fn silent(k: u32) -> [u8; 4] {
    [198, 18, 129 + (k / 250) as u8, 1 + (k % 250) as u8]
}

#[test]
fn frames_for_one_unresolved_neighbour_are_bounded() {
    let mut h = wide_subnet();
    let x = h.address_of("x").unwrap();
    let mut r = Records::default();
    for _ in 0..100 {
        r.push(3, 0, &udp_to([198, 18, 200, 1], x));
    }
    h.run(&r.0);
    let c = h.conservation();
    assert_eq!(c.in_flight.in_nodes, 64, "{c:?}");
    assert_eq!(c.dropped.get(DropReason::ArpQueueFull), 36, "{c:?}");
    assert_eq!(c.unaccounted, 0);
}

#[test]
fn neighbours_waiting_for_resolution_stop_at_their_bound() {
    // One frame for each of 5 000 neighbours: 2 048 may wait for an answer
    // at once (half the table: the other half stays for resolved
    // neighbours, whom a sweep must not push out), well under the 8 192
    // frames that may wait in all.
    let mut h = wide_subnet();
    let x = h.address_of("x").unwrap();
    let mut r = Records::default();
    for k in 0..5000u32 {
        r.push(3, 0, &udp_to(silent(k), x));
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
fn a_full_neighbour_table_makes_room_once_its_entries_expire() {
    // x's side is a /17 too, so that 4096 neighbours fit on it.
    let mut h = wide_subnets(r#"addresses = ["198.18.0.9/17", "198.18.0.1/17"]"#);
    let x = h.address_of("x").unwrap();
    let lost = |h: &Harness| h.conservation().dropped.get(DropReason::ArpQueueFull);
    // 4096 neighbours ask for r1: each is learned, and the table is full.
    let mut r = Records::default();
    for k in 0..4096u32 {
        let ip = [198, 18, 1 + (k / 250) as u8, 1 + (k % 250) as u8];
        r.push(2, 0, &arp(1, ip, [198, 18, 0, 1]));
    }
    h.run(&r.0);
    // A frame for a new neighbour finds no room: every entry is fresh.
    let mut r = Records::default();
    r.push(3, 0, &udp_to(silent(0), x));
    h.run(&r.0);
    assert_eq!(lost(&h), 1);
    assert_eq!(h.conservation().in_flight.in_nodes, 0);
    // A minute on, unused, they have all expired: the next new neighbour
    // gets a place (and its frame waits for its answer).
    h.idle(SimDuration::from_secs(61));
    let mut r = Records::default();
    r.push(3, 0, &udp_to(silent(1), x));
    h.run(&r.0);
    assert_eq!(lost(&h), 1);
    assert_eq!(h.conservation().in_flight.in_nodes, 1);
    assert_eq!(h.conservation().unaccounted, 0);
}

#[test]
fn frames_for_unresolved_neighbours_are_bounded_in_total() {
    let mut h = wide_subnet();
    let x = h.address_of("x").unwrap();
    let mut r = Records::default();
    // 100 frames for one silent neighbour, then 5 each for 5 000 others
    // (of whom 2 047 may wait: more frames than the total allows).
    for _ in 0..100 {
        r.push(3, 0, &udp_to([198, 18, 200, 1], x));
    }
    for k in 0..5000u32 {
        for _ in 0..5 {
            r.push(3, 0, &udp_to(silent(k), x));
        }
    }
    h.run(&r.0);
    let c = h.conservation();
    let sent = 100 + 5000 * 5;
    // Waiting for ARP: at most 64 for the one neighbour, 8 192 in all.
    assert_eq!(c.in_flight.in_nodes, 8192, "{c:?}");
    assert_eq!(
        c.dropped.get(DropReason::ArpQueueFull),
        sent - 8192,
        "100 - 64 for the first neighbour, the rest beyond the total: {c:?}"
    );
    assert_eq!(c.unaccounted, 0);
    // One retry tick for the whole table, not one per neighbour asked for.
    let r1 = h.sim().net.node_id("r1").unwrap() as u32;
    let ticks = h
        .sim()
        .queue
        .pending()
        .filter(|(_, e)| matches!(e, Event::Timer { node, .. } if *node == r1))
        .count();
    assert_eq!(
        ticks, 1,
        "r1's timers pending after a flood of 5 001 neighbours"
    );
}

#[test]
fn a_flood_of_source_addresses_fills_the_switch_table_and_evicts() {
    let topo = format!(
        r#"
[run]
duration = "1s"
[[node]]
name = "x"
kind = "namespace"
[[node]]
name = "s1"
kind = "switch"
mac_table_size = 64
[[node]]
name = "a"
kind = "host"
[[link]]
endpoints = ["x", "s1"]
addresses = ["198.18.10.9/24", "auto"]
{ACCESS}
[[link]]
endpoints = ["s1", "a"]
addresses = ["auto", "198.18.10.1/24"]
{ACCESS}
"#
    );
    let mut h = Harness::with_topology(&topo, "a");
    let x = h.address_of("x").unwrap();
    let a = h.address_of("a").unwrap();
    let mut r = Records::default();
    for k in 0..10_000u32 {
        let mut f = udp_to(a, x);
        f[0..6].copy_from_slice(&h.peer_mac());
        // A fresh unicast, locally administered source address each time.
        f[6..12].copy_from_slice(&[0x02, 0x77, 0, (k >> 16) as u8, (k >> 8) as u8, k as u8]);
        r.push(0, 0, &f);
    }
    h.run(&r.0);
    let sim = h.sim();
    let s1 = sim.net.node_id("s1").unwrap();
    let Node::Switch(s) = sim.net.node(s1) else {
        panic!("s1 is a switch")
    };
    assert_eq!(s.table_len(), 64);
    // a's own address may take a slot and push one more out.
    assert!(
        (10_000 - 64..=10_000 - 63).contains(&s.stats.evicted),
        "{}",
        s.stats.evicted
    );
    assert_eq!(h.conservation().unaccounted, 0);
}

#[test]
fn a_burst_beyond_a_rate_limited_router_fills_its_forwarding_queue() {
    let topo = format!(
        r#"
[run]
duration = "1s"
[[node]]
name = "x"
kind = "namespace"
[[node]]
name = "r1"
kind = "router"
forwarding_rate = "1000pps"
forwarding_queue = 8
[[node]]
name = "b"
kind = "host"
[[link]]
endpoints = ["x", "r1"]
{ACCESS}
[[link]]
endpoints = ["r1", "b"]
{ACCESS}
"#
    );
    let mut h = Harness::with_topology(&topo, "r1");
    let x = h.address_of("x").unwrap();
    let b = h.address_of("b").unwrap();
    let mut r = Records::default();
    for _ in 0..100 {
        r.push(3, 0, &udp_to(b, x));
    }
    h.run(&r.0);
    let c = h.conservation();
    // One in service, eight waiting, the other 91 dropped at once.
    assert_eq!(c.dropped.get(DropReason::ForwardingQueueFull), 91, "{c:?}");
    assert_eq!(c.unaccounted, 0);
}

#[test]
fn a_broadcast_storm_fills_the_link_queues_and_no_more() {
    let topo = format!(
        r#"
[run]
duration = "1s"
[[node]]
name = "x"
kind = "namespace"
[[node]]
name = "s1"
kind = "switch"
[[node]]
name = "a"
kind = "host"
[[node]]
name = "c"
kind = "host"
[[link]]
endpoints = ["x", "s1"]
addresses = ["198.18.10.9/24", "auto"]
{ACCESS}
[[link]]
endpoints = ["s1", "a"]
addresses = ["auto", "198.18.10.1/24"]
rate = "10Mbps"
queue = {{ packets = 32 }}
[[link]]
endpoints = ["s1", "c"]
addresses = ["auto", "198.18.10.3/24"]
rate = "10Mbps"
queue = {{ packets = 32 }}
"#
    );
    let mut h = Harness::with_topology(&topo, "a");
    let x = h.address_of("x").unwrap();
    let mut r = Records::default();
    for _ in 0..20_000 {
        r.push(2, 0, &udp_to([255; 4], x));
    }
    h.run(&r.0);
    let c = h.conservation();
    // The 20 000 frames arrive within 140 µs, while a 10 Mbit/s link sends
    // two: per link one on the wire, 32 queued and a few sent meanwhile go
    // through; every other copy is dropped as queue_full, and the queues
    // drained in the 200 ms after.
    let delivered = c.delivered_total;
    assert!((2 * 33..=2 * 40).contains(&delivered), "{c:?}");
    assert_eq!(
        c.dropped.get(DropReason::QueueFull),
        40_000 - delivered,
        "{c:?}"
    );
    assert_eq!(c.in_flight_total, 0, "{c:?}");
    assert_eq!(c.unaccounted, 0, "{c:?}");
}

/// Echo replies the simulated host sent back to the real host.
fn echo_replies(h: &Harness) -> usize {
    h.returned()
        .iter()
        .filter(|f| f.len() > 34 && f[12..14] == [0x08, 0x00] && f[23] == 1)
        .filter(|f| f.get(14 + usize::from(f[14] & 0x0f) * 4) == Some(&0))
        .count()
}

/// Fragments from the real host to simulated host `a`.
struct Fragments {
    x: [u8; 4],
    a: [u8; 4],
}

impl Fragments {
    /// The host target's harness, and records that begin with the greeting
    /// by which `a` learns x's address (as the seeds' does), so that its
    /// replies need no ARP round trip the harness would not answer.
    fn start() -> (Harness, Records, Fragments) {
        let h = Harness::new(netloop_fuzz::Target::Host);
        let (x, a) = (h.address_of("x").unwrap(), h.address_of("a").unwrap());
        let mut r = Records::default();
        r.push(2, 0, &arp(1, x, a));
        r.push(3, 4, &arp(2, x, a));
        (h, r, Fragments { x, a })
    }

    /// A piece of datagram `id` at `offset` (8-byte units).
    fn piece(&self, r: &mut Records, id: u16, offset: u16, more: bool, data: &[u8]) {
        let mut ip = Ip::new(self.x, self.a, 1);
        ip.id = id;
        ip.frag = (offset, more);
        r.push(3, 1, &eth(ETH_IPV4, &ip.packet(data)));
    }

    /// A first piece whose datagram never completes.
    fn stray(&self, r: &mut Records, id: u16) {
        self.piece(r, id, 0, true, &[7; 512]);
    }

    /// A 1008-byte echo request in two pieces, the last first.
    fn whole_echo(&self, r: &mut Records, id: u16) {
        let echo = netloop_fuzz::wire::icmp_echo(9, &[5; 1000]);
        self.piece(r, id, 64, false, &echo[512..]);
        self.piece(r, id, 0, true, &echo[..512]);
    }
}

#[test]
fn stray_fragments_do_not_block_reassembly_at_a_simulated_host() {
    // Reassembly is bounded by memory, as on Linux, not by a few slots: a
    // thousand first fragments that never complete leave room for a whole
    // datagram (with smoltcp's four slots, four strays blocked it for 30 s).
    let (mut h, mut r, f) = Fragments::start();
    for id in 1..=1000 {
        f.stray(&mut r, id);
    }
    f.whole_echo(&mut r, 2000);
    h.run(&r.0);
    assert_eq!(echo_replies(&h), 1, "the whole datagram is answered");
    let c = h.conservation();
    assert_eq!(c.in_flight_total, 1000, "the strays are held: {c:?}");
    assert_eq!(c.unaccounted, 0);
}

#[test]
fn reassembly_memory_is_bounded_and_freed_after_30_seconds() {
    // 4 MiB (Linux's ipfrag_high_thresh), each 512-byte stray charged 768
    // bytes: 5461 are held, the rest and the pieces of a whole datagram are
    // dropped as reassembly_full; nothing held is evicted for them.
    let (mut h, mut r, f) = Fragments::start();
    for id in 1..=6000 {
        f.stray(&mut r, id);
    }
    f.whole_echo(&mut r, 7000);
    h.run(&r.0);
    assert_eq!(echo_replies(&h), 0, "memory is full");
    let c = h.conservation();
    assert_eq!(c.in_flight_total, 5461, "{c:?}");
    assert_eq!(c.dropped.get(DropReason::ReassemblyFull), 6000 - 5461 + 2);
    // 30 s later the strays are given up (each answered with time-exceeded,
    // as their first fragments came) and reassembly works again.
    h.idle(SimDuration::from_secs(31));
    let c = h.conservation();
    assert_eq!(c.dropped.get(DropReason::ReassemblyTimeout), 5461, "{c:?}");
    assert_eq!(c.in_flight_total, 0, "{c:?}");
    let mut r = Records::default();
    f.whole_echo(&mut r, 7001);
    h.run(&r.0);
    // (Counted by the host: the harness keeps only the first 1024 frames
    // sent back, and the time-exceeded messages came first.)
    let r = h.sim().results("afap", None, None);
    let a = r.nodes.iter().find(|n| n.name == "a").unwrap();
    assert_eq!(a.stats["echo_replies"], 1, "memory was freed after 30 s");
    assert_eq!(h.conservation().unaccounted, 0);
}
