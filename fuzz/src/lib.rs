//! Fuzz harnesses for the paths that take bytes from outside netloop: frames
//! from a real interface as the packet ring hands them over (the VLAN tag
//! put back, a checksum left to offload completed), the same frames entering
//! a switch, a router or a simulated host, and topology files.
//!
//! Each harness is a plain function of bytes, so the same code runs under
//! libFuzzer (`cargo fuzz run <target>`, the binaries in `fuzz_targets/`) and
//! in `cargo test` (`tests/replay.rs` replays the committed corpus and every
//! input that once crashed). A harness fails by panicking: on a panic inside
//! netloop, or when an invariant the model promises does not hold afterwards
//! (every frame delivered, dropped for a named reason or in flight).
//!
//! ## Frame input format
//! A frame harness reads records until the input ends:
//!
//! | byte(s) | meaning |
//! |---|---|
//! | 0 | bits 0–1: 0 = frame as given, 1 = destination MAC set to the neighbour's, 2 = broadcast destination, 3 = neighbour's MAC and the source set to the real host's; bits 2–7: simulated time to let pass before it, in 50 µs steps |
//! | 1–2 | frame length, little-endian, cut to what is left of the input |
//! | … | the frame: Ethernet header onward, no FCS |
//!
//! The MAC rewrite lets the fuzzer reach the IPv4, ARP and TCP code behind a
//! node's address check without guessing 48 bits. The topologies are dual
//! stack, so IPv6 and neighbour discovery are reached the same way.
//!
//! The `frames_super` target's records carry a GSO header after the length:
//! bytes 3–4, `gso_size` (little-endian), byte 5, `gso_type` (as in a
//! `virtio_net_hdr`), then the frame (up to 65 000 bytes). A frame that
//! `gso::describe` takes as a super-frame of that kind enters the model as
//! one, as a veth host's would; any other enters as a plain frame.

pub mod wire;

use netloop_core::{SimDuration, SimTime};
use netloop_model::network::Node;
use netloop_model::{NodeId, Simulation};

/// Where the real host's frames enter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A router (two more routers' worth of network behind it).
    Router,
    /// A learning switch with a small MAC table, hosts and a router behind it.
    Switch,
    /// A simulated host (smoltcp's stack: ARP, ICMP, TCP, UDP, reassembly).
    Host,
    /// GSO super-frames into a router, on links that keep them whole and
    /// links that cut them (loss, corruption and duplication per segment;
    /// jitter; a rate; a rate-limited router; a switch; a simulated host;
    /// a second real host).
    Super,
}

impl Target {
    /// The target's name, as in `fuzz_targets/frames_<name>.rs` and the
    /// corpus directory.
    pub fn name(self) -> &'static str {
        match self {
            Target::Router => "router",
            Target::Switch => "switch",
            Target::Host => "host",
            Target::Super => "super",
        }
    }

    /// The node frames are addressed to when the harness rewrites their
    /// destination.
    pub fn peer(self) -> &'static str {
        match self {
            Target::Router | Target::Super => "r1",
            Target::Switch | Target::Host => "a",
        }
    }

    /// Every target.
    pub const ALL: [Target; 4] = [Target::Router, Target::Switch, Target::Host, Target::Super];

    /// The topology the frames enter: a real host `x` (an external node in
    /// the model) attached to the node under test, with simulated traffic
    /// running beside it so that queues, ARP caches and TCP state are live.
    pub fn topology(self) -> &'static str {
        match self {
            Target::Router => ROUTER_TOPOLOGY,
            Target::Switch => SWITCH_TOPOLOGY,
            Target::Host => HOST_TOPOLOGY,
            Target::Super => SUPER_TOPOLOGY,
        }
    }
}

const SUPER_TOPOLOGY: &str = r#"
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
name = "y"
kind = "namespace"
[[node]]
name = "s1"
kind = "switch"
[[node]]
name = "a"
kind = "host"
[[node]]
name = "r2"
kind = "router"
forwarding_rate = "100000pps"
forwarding_queue = 8
[[node]]
name = "b"
kind = "host"
[[link]]
endpoints = ["x", "r1"]
loss = "1%"
corrupt = 0.01
duplicate = 0.01
queue = { packets = 64 }
[[link]]
endpoints = ["r1", "y"]
[[link]]
endpoints = ["r1", "s1"]
[[link]]
endpoints = ["s1", "a"]
rate = "100Mbps"
[[link]]
endpoints = ["r1", "r2"]
jitter = "20us"
[[link]]
endpoints = ["r2", "b"]
mtu = 1280
[[traffic]]
name = "ab"
kind = "tcp-bulk"
from = "a"
to = "b"
bytes = "20KB"
"#;

const ROUTER_TOPOLOGY: &str = r#"
[run]
duration = "1s"
ipv6 = true
[defaults.link]
rate = "100Mbps"
delay = "100us"
queue = { packets = 16 }
[[node]]
name = "x"
kind = "namespace"
[[node]]
name = "r1"
kind = "router"
forwarding_rate = "200000pps"
forwarding_queue = 8
[[node]]
name = "r2"
kind = "router"
[[node]]
name = "a"
kind = "host"
[[node]]
name = "b"
kind = "host"
[[link]]
endpoints = ["x", "r1"]
mtu = 1500
[[link]]
endpoints = ["r1", "a"]
mtu = 1280
[[link]]
endpoints = ["r1", "r2"]
[[link]]
endpoints = ["r2", "b"]
[[traffic]]
name = "ab"
kind = "tcp-bulk"
from = "a"
to = "b"
bytes = "20KB"
"#;

const SWITCH_TOPOLOGY: &str = r#"
[run]
duration = "1s"
ipv6 = true
[defaults.link]
rate = "100Mbps"
delay = "100us"
queue = { packets = 16 }
[[node]]
name = "x"
kind = "namespace"
[[node]]
name = "s1"
kind = "switch"
mac_table_size = 8
mac_aging = "10ms"
[[node]]
name = "r1"
kind = "router"
[[node]]
name = "a"
kind = "host"
[[node]]
name = "c"
kind = "host"
[[node]]
name = "b"
kind = "host"
[[link]]
endpoints = ["x", "s1"]
addresses = ["198.18.10.9/24", "auto"]
[[link]]
endpoints = ["s1", "a"]
addresses = ["auto", "198.18.10.1/24"]
[[link]]
endpoints = ["s1", "c"]
addresses = ["auto", "198.18.10.3/24"]
[[link]]
endpoints = ["s1", "r1"]
addresses = ["auto", "198.18.10.254/24"]
[[link]]
endpoints = ["r1", "b"]
subnet = "198.18.20.0/24"
[[traffic]]
name = "ab"
kind = "udp-cbr"
from = "a"
to = "b"
rate = "1Mbps"
size = "200B"
"#;

const HOST_TOPOLOGY: &str = r#"
[run]
duration = "1s"
ipv6 = true
[defaults.link]
rate = "100Mbps"
delay = "100us"
queue = { packets = 16 }
[[node]]
name = "x"
kind = "namespace"
[[node]]
name = "a"
kind = "host"
[[link]]
endpoints = ["x", "a"]
addresses = ["198.18.10.9/24", "198.18.10.1/24"]
"#;

/// A built network with the real host's node and the MAC addresses the
/// rewrite uses.
pub struct Harness {
    sim: Simulation,
    x: NodeId,
    x_mac: [u8; 6],
    peer_mac: [u8; 6],
    /// Frames that came back out to the real host.
    returned: Vec<Vec<u8>>,
    /// Records carry a GSO header (the `frames_super` target).
    gso: bool,
}

/// The longest frame a record may carry (a 9000-byte jumbo frame and some).
pub const MAX_FRAME: usize = 9100;
/// The longest super-frame a `frames_super` record may carry (what a veth
/// host's ring slot holds).
pub const MAX_SUPER_FRAME: usize = 65_000;

/// Simulated time let pass after the last frame: ARP retries give up, TCP
/// retransmits, queues drain.
const SETTLE: SimDuration = SimDuration::from_millis(200);

/// Events handled at most per input: enough for everything the frames can
/// start, a bound against inputs that would make a run merely slow.
const MAX_EVENTS: u64 = 2_000_000;

impl Harness {
    /// Builds `target`'s topology.
    pub fn new(target: Target) -> Harness {
        let mut h = Harness::with_topology(target.topology(), target.peer());
        h.gso = target == Target::Super;
        h
    }

    /// Builds the topology `toml`, whose first real host is where frames
    /// enter; the rewrite addresses them to node `peer` (behind a switch, to
    /// a host: the switch has no address of its own to reach).
    pub fn with_topology(toml: &str, peer: &str) -> Harness {
        let loaded = netloop_config::parse_str(toml, "harness")
            .unwrap_or_else(|e| panic!("the harness topology is valid: {e}"));
        let sim = Simulation::build(&loaded.spec).expect("the harness topology builds");
        let real = &sim.real[0];
        let x = real.node;
        let link = real.port.link;
        let peer = sim
            .net
            .node_id(peer)
            .expect("the harness topology has the peer");
        let ports = sim.net.ports(peer);
        let peer_mac = ports
            .iter()
            .find(|p| p.link == link)
            .unwrap_or(&ports[0])
            .mac
            .0;
        Harness {
            x,
            x_mac: real.port.mac.0,
            peer_mac,
            sim,
            returned: Vec::new(),
            gso: false,
        }
    }

    /// The real host's MAC address (the source of well-formed frames).
    pub fn x_mac(&self) -> [u8; 6] {
        self.x_mac
    }

    /// The MAC address frames are rewritten to: the router's or host's port
    /// (for the switch, host `a`'s).
    pub fn peer_mac(&self) -> [u8; 6] {
        self.peer_mac
    }

    /// The first 1024 frames the network sent back to the real host.
    pub fn returned(&self) -> &[Vec<u8>] {
        &self.returned
    }

    /// The simulation (for counters the tests look into).
    pub fn sim(&self) -> &Simulation {
        &self.sim
    }

    /// The conservation ledger's balance and its drops, as of now.
    pub fn conservation(&self) -> netloop_model::results::Conservation {
        self.sim.conservation()
    }

    /// The IPv4 address of node `name`'s first interface that has one.
    pub fn address_of(&self, name: &str) -> Option<[u8; 4]> {
        let id = self.sim.net.node_id(name)?;
        let real = self.sim.real.iter().find(|r| r.node == id);
        let addr = match real {
            Some(r) => r.port.addr,
            None => self.sim.net.ports(id).iter().find_map(|p| p.addr),
        };
        addr.map(|a| a.addr.octets())
    }

    /// The global IPv6 addresses of node `name`'s interfaces, in port
    /// order (the topologies are dual stack).
    pub fn addresses6_of(&self, name: &str) -> Vec<[u8; 16]> {
        let Some(id) = self.sim.net.node_id(name) else {
            return Vec::new();
        };
        match self.sim.real.iter().find(|r| r.node == id) {
            Some(r) => r.port.addr6.iter().map(|a| a.addr.octets()).collect(),
            None => self
                .sim
                .net
                .ports(id)
                .iter()
                .filter_map(|p| p.addr6.map(|a| a.addr.octets()))
                .collect(),
        }
    }

    /// Feeds the records in `data` to the network, lets it settle and checks
    /// that every frame is accounted for.
    pub fn run(&mut self, data: &[u8]) {
        let mut rest = data;
        let head = if self.gso { 6 } else { 3 };
        let max = if self.gso { MAX_SUPER_FRAME } else { MAX_FRAME };
        while rest.len() >= head {
            let flags = rest[0];
            let len = (u16::from_le_bytes([rest[1], rest[2]]) as usize)
                .min(rest.len() - head)
                .min(max);
            let vnet = self.gso.then(|| netloop_io::gso::VnetHdr {
                flags: netloop_io::gso::F_NEEDS_CSUM,
                gso_type: rest[5],
                gso_size: u16::from_le_bytes([rest[3], rest[4]]),
                ..Default::default()
            });
            let mut frame = rest[head..head + len].to_vec();
            rest = &rest[head + len..];
            let gap = SimDuration::from_micros(50 * u64::from(flags >> 2));
            let at = self.sim.queue.now() + gap;
            self.advance(at);
            if frame.len() >= 12 {
                match flags & 3 {
                    1 => frame[0..6].copy_from_slice(&self.peer_mac),
                    2 => frame[0..6].copy_from_slice(&[0xff; 6]),
                    3 => {
                        frame[0..6].copy_from_slice(&self.peer_mac);
                        frame[6..12].copy_from_slice(&self.x_mac);
                    }
                    _ => {}
                }
            }
            let mut frame = netloop_model::Frame::from(frame);
            if let Some(Ok(Some(g))) = vnet.map(|h| netloop_io::gso::describe(&frame, &h)) {
                frame.meta.gso = Some(g);
                frame.meta.csum = netloop_core::frame::Checksum::Partial;
            }
            let injected = self.sim.net.inject(&mut self.sim.queue, self.x, frame);
            assert!(injected, "the real host's node takes frames");
        }
        let end = self.sim.queue.now() + SETTLE;
        self.advance(end);
        let c = self.sim.conservation();
        assert_eq!(
            c.unaccounted, 0,
            "a frame went missing inside the model: {c:?}"
        );
        // The results document is built from every counter: it must not
        // panic either.
        let _ = self.sim.results("simulation", None, None);
    }

    /// Lets `d` of simulated time pass with nothing from the real host
    /// (timers fire, entries age), for tests of what happens later.
    pub fn idle(&mut self, d: SimDuration) {
        let at = self.sim.queue.now() + d;
        self.advance(at);
    }

    /// Runs events up to `t`, taking frames out of the real host's outbox as
    /// the I/O layer would (they are counted as delivered when they reach it).
    fn advance(&mut self, t: SimTime) {
        let mut left = MAX_EVENTS.saturating_sub(self.sim.queue.events_processed());
        self.sim.run_until(t, 1024, |_, _| {
            left = left.saturating_sub(1024);
            left > 0
        });
        // A few hundred frames and the traffic beside them come nowhere near
        // the cap: reaching it means some frame makes the model multiply
        // events (a loop, a storm that never ends), which is a finding.
        assert!(
            left > 0,
            "over {MAX_EVENTS} events by simulated time {:?}: the model amplifies these frames",
            self.sim.queue.now()
        );
        if let Node::External(e) = self.sim.net.node_mut(self.x) {
            // Kept (bounded) so that tests can check the seeds reach deep.
            for f in e.outbox.drain(..) {
                if self.returned.len() < 1024 {
                    self.returned.push(f.frame.into_vec());
                }
            }
        }
    }
}

/// Runs one input of a frame target on a fresh network.
pub fn frames(target: Target, data: &[u8]) {
    Harness::new(target).run(data);
}

/// Runs one input of the topology target: the loader must give a network or
/// located errors, never panic; a network that loads must build or give a
/// build error, and a short run of it must account for every frame.
pub fn topology(data: &[u8]) {
    let Ok(loaded) = netloop_config::parse_bytes(data, "fuzz.toml") else {
        return;
    };
    let Ok(mut sim) = Simulation::build(&loaded.spec) else {
        return;
    };
    // A few milliseconds of simulated time and a bounded number of events:
    // a valid topology may describe a network far too big to run per input.
    let end = SimTime::ZERO + SimDuration::from_millis(5);
    let mut left = 200_000u64;
    sim.run_until(end, 1024, |_, _| {
        left = left.saturating_sub(1024);
        left > 0
    });
    let c = sim.conservation();
    assert_eq!(c.unaccounted, 0, "a frame went missing: {c:?}");
}

/// Runs one input of the boundary target: what an AF_PACKET ring slot holds
/// made back into the frame that was on the wire
/// ([`netloop_io::packet::wire_frame`]). Byte 0: bit 0, the NIC stripped a
/// VLAN tag; bit 1, its TPID is 802.1ad (else 802.1Q); bit 2, the checksum
/// was left to offload. Bytes 1-2: the tag's TCI. The rest: the slot's
/// frame. Checks that the tag is back in place, nothing else moved but the
/// checksum field, and that a checksum said to be completed verifies.
pub fn boundary(data: &[u8]) {
    if data.len() < 3 {
        return;
    }
    let (flags, tci, frame) = (data[0], u16::from_be_bytes([data[1], data[2]]), &data[3..]);
    let tpid = if flags & 2 != 0 { 0x88a8 } else { 0x8100 };
    let vlan = (flags & 1 != 0).then_some((tpid, tci));
    let mut scratch = Vec::new();
    let (out, completed) =
        netloop_io::packet::wire_frame(frame, vlan, flags & 4 != 0, &mut scratch);
    if frame.len() < 14 {
        assert_eq!(
            out, frame,
            "a runt is passed on as it is (the ring counts it)"
        );
        assert!(!completed);
        return;
    }
    let tag = if vlan.is_some() { 4 } else { 0 };
    assert_eq!(out.len(), frame.len() + tag);
    assert_eq!(out[..12], frame[..12]);
    if vlan.is_some() {
        assert_eq!(out[12..14], tpid.to_be_bytes());
        assert_eq!(out[14..16], tci.to_be_bytes());
    }
    let changed: Vec<usize> = (12..frame.len())
        .filter(|&i| out[i + tag] != frame[i])
        .collect();
    if completed {
        let (at, sum) = l4_checksum_at(out).expect("a completed checksum is in a TCP/UDP header");
        assert_eq!(sum, 0xffff, "the completed checksum does not verify");
        assert!(
            changed.iter().all(|&i| i + tag == at || i + tag == at + 1),
            "{changed:?}"
        );
    } else {
        assert!(
            changed.is_empty(),
            "bytes changed without a completed checksum: {changed:?}"
        );
    }
}

/// Runs one input of the gso target: a GSO super-frame as a packet socket
/// with PACKET_VNET_HDR hands it over, cut into wire frames
/// ([`netloop_io::gso::segment`]). Bytes 0-9: the `virtio_net_hdr`. The
/// rest: the super-frame, Ethernet header first. A refusal is fine; a cut
/// must give segments whose payloads, in order, are the super-frame's, each
/// at most `gso_size` long, each with IPv4 and TCP/UDP checksums that
/// verify (checked by code of the harness's own).
pub fn gso(data: &[u8]) {
    use netloop_io::gso::{segment, VnetHdr, VNET_HDR_LEN};
    let Some((h, frame)) = data.split_first_chunk::<VNET_HDR_LEN>() else {
        return;
    };
    let hdr = VnetHdr::parse(h);
    let mut segs: Vec<Vec<u8>> = Vec::new();
    let mut buf = Vec::new();
    let Ok(n) = segment(frame, &hdr, &mut buf, &mut |s| segs.push(s.to_vec())) else {
        return;
    };
    assert_eq!(n, segs.len());
    // A cut frame is IPv4 or IPv6 with a TCP or UDP header behind it (the
    // cutter checked that much): find where the payload starts.
    let tagged = matches!(u16::from_be_bytes([frame[12], frame[13]]), 0x8100 | 0x88a8);
    let l3 = if tagged { 18 } else { 14 };
    let v6 = frame[l3] >> 4 == 6;
    let (ihl, total, proto) = if v6 {
        let payload = usize::from(u16::from_be_bytes([frame[l3 + 4], frame[l3 + 5]]));
        (40, 40 + payload, frame[l3 + 6])
    } else {
        let ihl = usize::from(frame[l3] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([frame[l3 + 2], frame[l3 + 3]]));
        (ihl, total, frame[l3 + 9])
    };
    let l4 = l3 + ihl;
    let l4_len = if proto == 6 {
        usize::from(frame[l4 + 12] >> 4) * 4
    } else {
        8
    };
    let headers = l4 + l4_len;
    let mut payload = Vec::new();
    for s in &segs {
        assert!(s.len() >= headers && s.len() - headers <= usize::from(hdr.gso_size).max(1));
        assert_eq!(s[..12], frame[..12], "MAC addresses copied");
        if v6 {
            let len = usize::from(u16::from_be_bytes([s[l3 + 4], s[l3 + 5]]));
            assert_eq!(l3 + 40 + len, s.len(), "IPv6 payload length");
        } else {
            let ip = &s[l3..l3 + ihl];
            let sum = ip
                .chunks_exact(2)
                .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
                .sum::<u32>();
            let folded = (sum & 0xffff) + (sum >> 16);
            assert_eq!(
                (folded & 0xffff) + (folded >> 16),
                0xffff,
                "IPv4 header checksum"
            );
        }
        let (_, l4sum) = l4_checksum_at(s).expect("a TCP/UDP segment");
        assert_eq!(l4sum, 0xffff, "TCP/UDP checksum of a segment");
        payload.extend_from_slice(&s[headers..]);
    }
    assert_eq!(payload, frame[headers..l3 + total], "the payload, in order");
}

/// Where the TCP/UDP checksum field of an IPv4 or IPv6 frame is, and the
/// folded one's-complement sum over its pseudo-header and segment (0xffff
/// when the checksum is right), written apart from netloop's to check it.
/// IPv6 extension headers (Hop-by-Hop, Routing, Destination Options,
/// Authentication, an atomic fragment's Fragment header) are skipped.
fn l4_checksum_at(f: &[u8]) -> Option<(usize, u16)> {
    let mut l3 = 14;
    let mut ty = u16::from_be_bytes([f[12], f[13]]);
    if ty == 0x8100 || ty == 0x88a8 {
        ty = u16::from_be_bytes([*f.get(16)?, *f.get(17)?]);
        l3 = 18;
    }
    let ip = f.get(l3..)?;
    let (l4, end, proto, addrs) = match ty {
        0x0800 => {
            let hl = usize::from(*ip.first()? & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
            (hl, total, *ip.get(9)?, ip.get(12..20)?)
        }
        0x86dd => {
            let end = 40 + usize::from(u16::from_be_bytes([*ip.get(4)?, *ip.get(5)?]));
            let (mut next, mut at) = (*ip.get(6)?, 40);
            while matches!(next, 0 | 43 | 44 | 51 | 60) {
                let len = usize::from(*ip.get(at + 1)?);
                let word = u16::from_be_bytes([*ip.get(at + 2)?, *ip.get(at + 3)?]);
                let len = match next {
                    51 => (len + 2) * 4,
                    // A Fragment header: only an atomic fragment (offset 0,
                    // no more to come; RFC 6946) has its upper layer here.
                    44 if word & 0xfff9 != 0 => return None,
                    44 => 8,
                    _ => 8 + len * 8,
                };
                next = *ip.get(at)?;
                at += len;
            }
            (at, end, next, ip.get(8..40)?)
        }
        _ => return None,
    };
    let seg = ip.get(l4..end)?;
    let field = match proto {
        6 => 16,
        17 => 6,
        _ => return None,
    };
    let mut words: Vec<u8> = addrs.to_vec();
    words.extend_from_slice(&[0, proto]);
    // IPv6's upper-layer length is 32 bits; IPv4's 16 (the same sum).
    words.extend_from_slice(&(seg.len() as u32).to_be_bytes());
    words.extend_from_slice(seg);
    let sum = !wire::checksum(&words);
    Some((l3 + l4 + field, sum))
}
