//! A router: what happens to a frame between arriving on one of a router's
//! ports and leaving on another. This module is the router and its IPv4
//! path; the IPv6 path is `v6`, on the same forwarding engine.
//!
//! This module owns, per arriving frame:
//! - **Ingress checks**: the Ethernet destination (the port's MAC or
//!   broadcast), the EtherType (ARP to the neighbour cache, IPv4 to the
//!   forwarding path, anything else counted as `unsupported`), and the IPv4
//!   header validation of RFC 1812 §5.2.2 (length, checksum, version, header
//!   length, total length). Trailing Ethernet padding is trimmed.
//! - **The forwarding engine**: unlimited by default, or a single server at
//!   [`RouterSpec::forwarding_rate`] packets per second with a bounded FIFO of
//!   [`RouterSpec::forwarding_queue`] packets in front of it — the knob that
//!   reproduces OPNET's SITL forwarding limit.
//! - **Forwarding** (RFC 1812 §5.2–5.3): TTL check and decrement with an
//!   incremental checksum update (RFC 1624), longest-prefix match, source
//!   MAC rewrite, hand-off to ARP for the destination MAC, and RFC 791
//!   fragmentation or RFC 1191 fragmentation-needed when the packet does not
//!   fit the egress MTU. Fragments are forwarded, never reassembled.
//! - **Packets for the router itself**: fragments are reassembled first (RFC
//!   1812 §5.2.3, [`crate::reassembly`], with ICMP time-exceeded code 1 for a
//!   datagram given up whose first fragment came); echo requests are
//!   answered (RFC 792), UDP gets port-unreachable (so a traceroute *to* a
//!   router address completes), anything else is consumed silently.
//! - **ICMP errors** (RFC 792, RFC 1812 §4.3): time-exceeded, net-unreachable,
//!   fragmentation-needed and port-unreachable, under the rules that say when
//!   an error must not be sent (§4.3.2.7).
//!
//! What lives elsewhere: the neighbour cache, ARP requests/replies and frames
//! waiting for resolution are [`crate::arp`]; the table and its lookup are
//! [`crate::routing`], its contents are computed by [`crate::build`]; link
//! queues, serialisation and the wire are [`crate::link`] and
//! [`crate::network`]; header fields, the checksum and fragmentation are
//! [`crate::ipv4`], shared with hosts.
//!
//! Deviations from the RFCs, each chosen on purpose:
//! - ICMP errors about transit packets come from the address of the port the
//!   offending packet **arrived** on, not the port the error leaves by as RFC
//!   1812 §4.3.2.4 asks. This is Linux's `icmp_errors_use_inbound_ifaddr` and
//!   what traceroute users expect: each hop is named by the interface on the
//!   probe's path (RFC 5837 exists because the RFC 1812 choice hides it). With
//!   symmetric routes, as `build` computes, the two are the same interface.
//!   Errors about packets addressed to the router (port-unreachable) come from
//!   the address the packet was sent to.
//! - Errors quote the IP header plus 8 bytes (RFC 792), not the "as much as
//!   fits in 576 bytes" RFC 1812 §4.3.2.3 recommends.
//! - No ICMP rate limiting (RFC 1812 §4.3.2.8 SHOULD): every error answers one
//!   packet this router dropped, so there is no amplification, and a limiter
//!   would make drops invisible to the very tools (traceroute, PMTUD) that
//!   users run to find them.
//! - IP options are tolerated and forwarded unchanged but not processed
//!   (RFC 1812 §5.2.4: no Record Route, Timestamp or source routing); when
//!   fragmenting, options with the "copied" flag go into every fragment and
//!   the others only into the first, as RFC 791 says.
//! - No Redirects (§5.2.7.2), no Parameter Problem (§4.3.3.2), and no
//!   host-unreachable when ARP fails (§5.2.7.1): `arp` drops such frames as
//!   `arp_unresolved` without telling the router.
//! - TCP to the router is consumed without a RST.
//! - Martian addresses (§5.3.7) are dropped as `martian`; IP multicast is not
//!   routed (dropped `unsupported`).
//! - The forwarding rate applies to every valid IPv4 packet, including those
//!   for the router itself (a real control plane is slower still; we keep one
//!   engine). ARP bypasses it, and malformed frames are rejected on arrival
//!   without using a service slot.

use netloop_core::{SimDuration, SimTime};
use rustc_hash::FxHashSet;
use serde::Serialize;
use smoltcp::wire::{EthernetAddress, EthernetProtocol};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};

use crate::arp::{Arp, ArpConfig, ARP_TIMER};
use crate::gso;
use crate::ipv4::{
    checksum, decrement_ttl, dont_fragment, dst_addr, frag_offset, fragment, header_len,
    more_fragments, src_addr, validate, IP_HEADER, MAX_DATAGRAM, PROTO_ICMP, PROTO_UDP,
};
use crate::link::ETH_HEADER;
use crate::memo::{Memo, ROUTER_SLOTS};
use crate::node::{NodeCtx, PortInfo};
use crate::node6::Node6;
use crate::reassembly::{Outcome, Reassembler};
use crate::routing::{RoutingTable, RoutingTable6};
use crate::spec::RouterSpec;
use crate::stats::{DropCounts, DropReason, Origin, Sink};
use crate::{Frame, PortId};

mod v6;

/// TTL of packets the router originates (RFC 1812 §4.2.2.9 asks for a
/// configurable default; 64 is what Linux and most routers use).
const ORIGINATED_TTL: u8 = 64;
/// TOS byte of ICMP errors: precedence 6, "internetwork control" (RFC 1812
/// §4.3.2.5).
const ERROR_TOS: u8 = 0xc0;
/// Timer token for giving up datagrams not reassembled in time (never an
/// engine token: those skip this bit and [`ARP_TIMER`]).
const REASSEMBLY_TIMER: u64 = 1 << 62;
/// Bytes of the offending datagram's data quoted after its header (RFC 792).
const QUOTED_DATA: usize = 8;

/// ICMP messages the router sent, by kind.
#[derive(Clone, Debug, Default, Serialize)]
pub struct IcmpSent {
    /// Echo replies (type 0) to pings of the router's addresses.
    pub echo_reply: u64,
    /// Time exceeded (type 11): in transit (code 0), or reassembly of a
    /// datagram addressed to the router (code 1).
    pub time_exceeded: u64,
    /// Destination unreachable, net unreachable (type 3 code 0).
    pub net_unreachable: u64,
    /// Destination unreachable, port unreachable (type 3 code 3).
    pub port_unreachable: u64,
    /// Destination unreachable, fragmentation needed and DF set (type 3 code
    /// 4), carrying the next-hop MTU (RFC 1191).
    pub fragmentation_needed: u64,
}

/// ICMPv6 messages the router sent, by kind.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Icmpv6Sent {
    /// Echo replies (type 129).
    pub echo_reply: u64,
    /// Time exceeded, hop limit exceeded in transit (type 3 code 0).
    pub time_exceeded: u64,
    /// Destination unreachable, no route (type 1 code 0).
    pub no_route: u64,
    /// Destination unreachable, beyond scope of source address (type 1
    /// code 2).
    pub beyond_scope: u64,
    /// Destination unreachable, port unreachable (type 1 code 4).
    pub port_unreachable: u64,
    /// Packet Too Big (type 2), carrying the next link's MTU.
    pub packet_too_big: u64,
}

/// Router counters.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RouterStats {
    /// Frames that arrived on any port.
    pub received: u64,
    /// IP packets forwarded, both families (a packet that was fragmented
    /// counts once).
    pub forwarded: u64,
    /// IP packets addressed to the router (its addresses, a broadcast, or
    /// an IPv6 group it is in).
    pub local: u64,
    /// Packets that had to be fragmented.
    pub fragmented: u64,
    /// Fragments made beyond the first (the original frame becomes the first).
    pub fragments_created: u64,
    /// ICMP messages sent, by kind.
    pub icmp_sent: IcmpSent,
    /// ICMPv6 messages sent, by kind (neighbour discovery's apart).
    pub icmpv6_sent: Icmpv6Sent,
    /// ICMP errors that were due but not sent: forbidden by RFC 1812
    /// §4.3.2.7 (about an ICMP error, a non-first fragment, a broadcast…) or
    /// no route back to the source.
    pub icmp_suppressed: u64,
    /// Most packets ever waiting for the forwarding engine (not counting the
    /// one in service).
    pub forwarding_queue_high_water: u64,
    /// ARP requests sent.
    pub arp_requests_sent: u64,
    /// ARP replies sent.
    pub arp_replies_sent: u64,
    /// IPv6 neighbour solicitations sent.
    pub ndp_solicitations_sent: u64,
    /// IPv6 neighbour advertisements sent.
    pub ndp_advertisements_sent: u64,
    /// Frames this router dropped, by reason (including ARP's drops).
    pub drops: DropCounts,
}

/// A validated IPv4 packet waiting for (or in) the forwarding engine.
struct Job {
    /// The port it arrived on.
    port: PortId,
    /// The Ethernet frame, trimmed to the IP total length.
    frame: Frame,
    /// Whether it arrived as a link-layer broadcast.
    l2_broadcast: bool,
}

/// An IPv4 router.
pub struct Router {
    name: String,
    ports: Vec<PortInfo>,
    /// The router's own addresses, and the directed broadcast addresses of
    /// its subnets (`u32` form): looked up for every packet, so a hash set
    /// rather than a scan of the ports (a dumbbell's router has 101).
    own: FxHashSet<u32>,
    directed: FxHashSet<u32>,
    table: RoutingTable,
    /// The destinations forwarded lately, each with its way out (port
    /// and next hop): a unicast address, not the router's, not martian,
    /// that has a route. The table and the addresses never change after
    /// the router is built, so an answer stays right, and most packets go
    /// where an earlier one of their flow went: it spares the two address
    /// sets and the table (a few hundred instructions a hop).
    routes: Memo<Ipv4Addr, (u32, Ipv4Addr)>,
    arp: Arp,
    /// Its IPv6 side: addresses, table, neighbours (without IPv6 in the
    /// network, IPv6 is dropped as `unsupported`).
    v6: Node6,
    /// Time per packet of the forwarding engine; `None` is unlimited.
    service: Option<SimDuration>,
    /// Bound of `waiting`.
    queue_limit: usize,
    /// Packets waiting for the engine, in arrival order.
    waiting: VecDeque<Job>,
    /// The packet being served and the timer token that completes it.
    in_service: Option<(u64, Job)>,
    /// The next engine timer token (bit 63 is [`ARP_TIMER`], never used here).
    next_token: u64,
    /// Identification field of the next packet the router originates.
    next_ident: u16,
    /// Fragments addressed to the router, waiting for the rest.
    reassembly: Reassembler,
    /// When the reassembly timer is set for, if it is.
    reassembly_timer: Option<SimTime>,
    stats: RouterStats,
}

impl Router {
    /// A router called `name` with `ports`, settings `spec` and routing
    /// tables `table` (IPv4) and `table6` (IPv6).
    pub fn new(
        name: &str,
        ports: Vec<PortInfo>,
        spec: &RouterSpec,
        table: RoutingTable,
        table6: RoutingTable6,
    ) -> Self {
        let addrs = || ports.iter().filter_map(|p| p.addr);
        let own = addrs().map(|a| u32::from(a.addr)).collect();
        // /31 and /32 have no directed broadcast (RFC 3021).
        let directed = addrs()
            .filter(|a| a.prefix <= 30)
            .map(|a| u32::from(a.network()) | !a.mask())
            .collect();
        let v6 = Node6::new(&ports, table6, true, Origin::Router);
        Router {
            name: name.to_string(),
            ports,
            own,
            routes: Memo::new(ROUTER_SLOTS),
            directed,
            table,
            arp: Arp::new(ArpConfig::default(), Origin::Router).remembering(ROUTER_SLOTS),
            v6,
            service: spec.forwarding_rate.map(|r| r.interval()),
            queue_limit: spec.forwarding_queue as usize,
            waiting: VecDeque::new(),
            in_service: None,
            next_token: 0,
            reassembly: Reassembler::default(),
            reassembly_timer: None,
            next_ident: 0,
            stats: RouterStats::default(),
        }
    }

    /// The router's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The routing table.
    pub fn table(&self) -> &RoutingTable {
        &self.table
    }

    /// The IPv6 routing table.
    pub fn table6(&self) -> &RoutingTable6 {
        &self.v6.table
    }

    /// Counters.
    pub fn stats(&self) -> &RouterStats {
        &self.stats
    }

    /// A static neighbour entry: `ip` is at `mac` behind `port`, for the
    /// whole run (`[run] static_neighbours`). False if the table is full.
    pub fn add_static_neighbour(&mut self, port: PortId, ip: IpAddr, mac: EthernetAddress) -> bool {
        match ip {
            IpAddr::V4(a) => self.arp.add_static(port, a, mac),
            IpAddr::V6(a) => self.v6.ndp.add_static(port, (port, a), mac),
        }
    }

    /// Frames held inside the router: waiting for or in the forwarding
    /// engine, and waiting for ARP resolution.
    pub fn in_flight(&self) -> u64 {
        self.waiting.len() as u64
            + self.in_service.is_some() as u64
            + self.arp.in_flight()
            + self.v6.ndp.in_flight()
            + self.reassembly.held_frames()
    }

    /// Handles a frame arriving on `port`.
    pub fn receive(&mut self, port: PortId, frame: Frame, ctx: &mut NodeCtx) {
        ctx.ledger.start_log();
        if frame.is_super() && !self.forwards_whole(port, &frame) {
            // Anything but plain forwarding (an answer, an ICMP error, a
            // fragment, the engine's time per packet) is per packet, as on
            // the wire.
            gso::cut(frame, &mut |seg| {
                self.stats.received += 1;
                self.ingress(port, seg, ctx);
            });
        } else {
            self.stats.received += frame.segs();
            self.ingress(port, frame, ctx);
        }
        self.account(ctx);
    }

    /// Whether super-frame `frame` from `port` takes the plain forwarding
    /// path whole: an unlimited engine; for this router's MAC; a valid IP
    /// header (IPv6: see [`Router::forwards_whole6`]); a unicast destination that is not the router's, with a route,
    /// out of a port whose MTU holds each segment; a TTL that stays above
    /// zero. Every segment would meet the same decision, so the super-frame
    /// is forwarded as one.
    fn forwards_whole(&self, port: PortId, frame: &Frame) -> bool {
        let Some(g) = frame.meta.gso else {
            return false;
        };
        if self.service.is_some()
            || frame.len() < ETH_HEADER
            || frame[0..6] != *self.ports[port].mac.as_bytes()
        {
            return false;
        }
        let ip = &frame[ETH_HEADER..];
        let out = match u16::from_be_bytes([frame[12], frame[13]]) {
            t if t == u16::from(EthernetProtocol::Ipv4) => {
                if validate(ip).is_err() {
                    return false;
                }
                let (src, dst) = (src_addr(ip), dst_addr(ip));
                if self.is_own(dst)
                    || self.is_broadcast(dst)
                    || dst.is_multicast()
                    || is_martian(dst)
                    || !is_unicast_host(src)
                    || ip[8] <= 1
                {
                    return false;
                }
                self.table.lookup(dst).map(|r| r.port)
            }
            crate::ipv6::ETHERTYPE => self.forwards_whole6(ip),
            _ => None,
        };
        out.is_some_and(|p| {
            usize::from(g.hdr_len).saturating_sub(ETH_HEADER) + usize::from(g.size)
                <= self.ports[p].mtu as usize
        })
    }

    /// Handles timer `token`: ARP's retry tick, or the forwarding engine
    /// finishing a packet.
    pub fn timer(&mut self, token: u64, ctx: &mut NodeCtx) {
        ctx.ledger.start_log();
        if token & ARP_TIMER != 0 {
            // The tick is shared: each cache ignores one it did not ask for.
            self.arp.timer(&self.ports, ctx);
            self.v6.ndp.timer(&self.ports, ctx);
        } else if token == REASSEMBLY_TIMER {
            self.reassembly_timeout(ctx);
        } else if self.in_service.as_ref().is_some_and(|(t, _)| *t == token) {
            let (_, job) = self.in_service.take().expect("checked just above");
            self.process(job, ctx);
            if let Some(next) = self.waiting.pop_front() {
                self.serve(next, ctx);
            }
        }
        self.account(ctx);
    }

    /// Brings the counters up to date after an event: the drops the ledger
    /// noted since the event began ([`Ledger::start_log`]) are this
    /// router's (an event is handled by one node only), including those
    /// `arp` recorded itself.
    fn account(&mut self, ctx: &mut NodeCtx) {
        let drops = &mut self.stats.drops;
        ctx.ledger.take_log(|r, n| drops.add_n(r, n));
        self.stats.arp_requests_sent = self.arp.requests_sent;
        self.stats.arp_replies_sent = self.arp.replies_sent;
        self.stats.ndp_solicitations_sent = self.v6.ndp.requests_sent;
        self.stats.ndp_advertisements_sent = self.v6.ndp.replies_sent;
    }

    /// Ethernet-level checks, then ARP or the IPv4 path.
    fn ingress(&mut self, port: PortId, mut frame: Frame, ctx: &mut NodeCtx) {
        if frame.len() < ETH_HEADER {
            ctx.drop_frame(DropReason::Malformed);
            return;
        }
        let dst = EthernetAddress::from_bytes(&frame[0..6]);
        // IPv4 multicast MACs are not for us: the router joins no IPv4
        // groups. IPv6's are, for the groups neighbour discovery needs.
        let l2_broadcast = dst.is_broadcast() || self.v6.listens(&self.ports[port], dst);
        if dst != self.ports[port].mac && !l2_broadcast {
            ctx.drop_frame(DropReason::NotForUs);
            return;
        }
        match EthernetProtocol::from(u16::from_be_bytes([frame[12], frame[13]])) {
            EthernetProtocol::Arp => self.arp.receive(port, &self.ports[port], &frame, ctx),
            EthernetProtocol::Ipv4 => match validate(&frame[ETH_HEADER..]) {
                Ok(total) => {
                    frame.truncate(ETH_HEADER + total);
                    self.enqueue(
                        Job {
                            port,
                            frame,
                            l2_broadcast,
                        },
                        ctx,
                    );
                }
                Err(reason) => ctx.drop_frame(reason),
            },
            EthernetProtocol::Ipv6 => self.ingress6(port, frame, l2_broadcast, ctx),
            // 802.1Q-tagged frames and everything else.
            _ => ctx.drop_frame(DropReason::Unsupported),
        }
    }

    /// Hands a packet to the forwarding engine: at once if it is unlimited,
    /// otherwise into service or the FIFO, or dropped if the FIFO is full.
    fn enqueue(&mut self, job: Job, ctx: &mut NodeCtx) {
        if self.service.is_none() {
            self.process(job, ctx);
        } else if self.in_service.is_none() {
            self.serve(job, ctx);
        } else if self.waiting.len() < self.queue_limit {
            self.waiting.push_back(job);
            let depth = self.waiting.len() as u64;
            let hw = &mut self.stats.forwarding_queue_high_water;
            *hw = (*hw).max(depth);
        } else {
            ctx.drop_frame(DropReason::ForwardingQueueFull);
        }
    }

    /// Starts serving `job`; it leaves when its service time is over.
    fn serve(&mut self, job: Job, ctx: &mut NodeCtx) {
        let service = self.service.expect("only a rate-limited engine serves");
        let token = self.next_token;
        self.next_token = (self.next_token + 1) & !(ARP_TIMER | REASSEMBLY_TIMER);
        self.in_service = Some((token, job));
        ctx.timer(ctx.now + service, token);
    }

    /// The forwarding decision for one valid IP packet: IPv6's is `v6`'s,
    /// IPv4's follows RFC 1812 §5.2.
    fn process(&mut self, job: Job, ctx: &mut NodeCtx) {
        if job.frame[12..14] == crate::ipv6::ETHERTYPE.to_be_bytes() {
            self.process6(job, ctx);
            return;
        }
        let ip = &job.frame[ETH_HEADER..];
        let src = src_addr(ip);
        let dst = dst_addr(ip);
        let known = self.routes.get(dst);
        if known.is_none() && (self.is_own(dst) || self.is_broadcast(dst)) {
            self.local(job, ctx);
            return;
        }
        // RFC 1812 §5.3.4: a packet that arrived as a link-layer broadcast
        // without being an IP broadcast is not forwarded.
        if job.l2_broadcast {
            ctx.drop_frame(DropReason::NotForUs);
            return;
        }
        if known.is_none() && dst.is_multicast() {
            ctx.drop_frame(DropReason::Unsupported);
            return;
        }
        // RFC 1812 §5.3.7: never forward martian destinations, nor sources
        // that cannot be a single host (martian, multicast, broadcast).
        if (known.is_none() && is_martian(dst)) || !is_unicast_host(src) {
            ctx.drop_frame(DropReason::Martian);
            return;
        }
        // RFC 1812 §5.3.1: a packet whose TTL would reach zero is not
        // forwarded, and the source is told.
        if ip[8] <= 1 {
            ctx.drop_frame(DropReason::TtlExpired);
            self.icmp_error(&job, IcmpError::TimeExceeded, ctx);
            return;
        }
        let (port, next_hop) = match known {
            Some((port, next_hop)) => (port as PortId, next_hop),
            None => {
                let Some(route) = self.table.lookup(dst) else {
                    ctx.drop_frame(DropReason::NoRoute);
                    self.icmp_error(&job, IcmpError::NetUnreachable, ctx);
                    return;
                };
                let way = (route.port, route.via.unwrap_or(dst));
                self.routes.put(dst, (way.0 as u32, way.1));
                way
            }
        };
        let mtu = self.ports[port].mtu;
        // A super-frame's segments fit (`forwards_whole`).
        let fits = job.frame.is_super() || ip.len() <= mtu as usize;
        // Checked before the TTL is decremented so that the error quotes the
        // header as the source sent it (as Linux does).
        if !fits && dont_fragment(ip) {
            ctx.drop_frame(DropReason::FragmentationNeeded);
            self.icmp_error(&job, IcmpError::FragmentationNeeded(mtu), ctx);
            return;
        }
        if !fits && frag_offset(ip) as usize * 8 + ip.len() - header_len(ip) > MAX_DATAGRAM {
            // A fragment that ends past the largest datagram (a "ping of
            // death"): forwarded whole it is the receiver's to refuse, but
            // split, its pieces' offsets would not fit the 13-bit field.
            ctx.drop_frame(DropReason::Malformed);
            return;
        }
        let mut frame = job.frame;
        // Headers only (`Frame::head_mut`): a datagram's zeros stay so.
        decrement_ttl(&mut frame.head_mut(ETH_HEADER + 12)[ETH_HEADER..]);
        self.stats.forwarded += frame.segs();
        self.transmit(port, next_hop, frame, ctx);
    }

    /// Sends an IPv4 packet (in an Ethernet frame whose MACs this fills in)
    /// out of `port` towards `next_hop`, fragmenting it if it does not fit.
    /// The caller has already refused packets with DF set that don't fit.
    fn transmit(&mut self, port: PortId, next_hop: Ipv4Addr, mut frame: Frame, ctx: &mut NodeCtx) {
        frame.head_mut(12)[6..12].copy_from_slice(self.ports[port].mac.as_bytes());
        let mtu = self.ports[port].mtu as usize;
        if frame.is_super() || frame.len() - ETH_HEADER <= mtu {
            self.arp.send(port, &self.ports[port], next_hop, frame, ctx);
            return;
        }
        let Some(fragments) = fragment(&frame, mtu) else {
            // The MTU cannot hold the header plus 8 bytes (RFC 791 requires
            // every link to carry 68): nothing sensible to send.
            ctx.drop_frame(DropReason::MtuExceeded);
            return;
        };
        self.stats.fragmented += 1;
        // The original frame becomes the first fragment; the others are new.
        let extra = fragments.len() as u64 - 1;
        self.stats.fragments_created += extra;
        ctx.ledger.create_n(Origin::Fragment, extra);
        for f in fragments {
            self.arp.send(port, &self.ports[port], next_hop, f, ctx);
        }
    }

    /// A packet addressed to the router: reassembled if it is a fragment,
    /// then consumed, perhaps answered.
    fn local(&mut self, job: Job, ctx: &mut NodeCtx) {
        let ip = &job.frame[ETH_HEADER..];
        if !more_fragments(ip) && frag_offset(ip) == 0 {
            self.local_whole(job, 1, ctx);
            return;
        }
        match self.reassembly.push(ip, ctx.now) {
            Outcome::Held => self.arm_reassembly_timer(ctx),
            Outcome::Complete { packet, frames } => {
                let mut frame = Frame::copy_from(&job.frame[..ETH_HEADER]);
                frame.extend_from_slice(&packet);
                let job = Job { frame, ..job };
                self.local_whole(job, frames, ctx);
            }
            Outcome::Dropped { reason, frames } => ctx.drop_n(reason, frames),
        }
    }

    /// Sets the reassembly timer for the datagram to be given up first,
    /// unless it is set for that time or earlier already. (IPv4 datagrams
    /// wait 30 s and IPv6 packets 60 s, so a datagram that came later may
    /// be due sooner: the timer moves earlier then, and the one it replaces
    /// finds nothing due when it fires.)
    fn arm_reassembly_timer(&mut self, ctx: &mut NodeCtx) {
        let Some(t) = self.reassembly.next_expiry() else {
            return;
        };
        if self.reassembly_timer.is_none_or(|armed| t < armed) {
            self.reassembly_timer = Some(t);
            ctx.timer(t, REASSEMBLY_TIMER);
        }
    }

    /// Gives up the datagrams not whole in time, telling their senders when
    /// the first fragment came (RFC 1122 §3.3.2, as Linux does).
    fn reassembly_timeout(&mut self, ctx: &mut NodeCtx) {
        // A timer the next one is set later than (the armed one moved
        // earlier, fired, and set the next): nothing is due.
        if self.reassembly_timer.is_some_and(|armed| armed > ctx.now) {
            return;
        }
        self.reassembly_timer = None;
        for gone in self.reassembly.expire(ctx.now) {
            ctx.drop_n(DropReason::ReassemblyTimeout, gone.frames);
            let Some(quote) = gone.quote else { continue };
            if quote[0] >> 4 == 6 {
                self.reassembly_expired6(&quote, ctx);
            } else {
                let from = dst_addr(&quote);
                self.send_error(&quote, false, IcmpError::ReassemblyTimeExceeded, from, ctx);
            }
        }
        self.arm_reassembly_timer(ctx);
    }

    /// A whole packet addressed to the router, made of `frames` frames.
    fn local_whole(&mut self, job: Job, frames: u64, ctx: &mut NodeCtx) {
        let ip = &job.frame[ETH_HEADER..];
        let hl = header_len(ip);
        let (src, dst) = (src_addr(ip), dst_addr(ip));
        let unicast = self.is_own(dst);
        match ip[9] {
            PROTO_ICMP => {
                let icmp = &ip[hl..];
                // RFC 1122 §3.2.2: a bad ICMP checksum is silently discarded.
                if icmp.len() < 8 || checksum(icmp) != 0 {
                    ctx.drop_n(DropReason::BadChecksum, frames);
                    return;
                }
                ctx.deliver_n(Sink::Router, frames);
                self.stats.local += 1;
                // Echo requests to a broadcast are ignored (RFC 1122 §3.2.2.6
                // allows it; it is what stops smurf amplification).
                if icmp[0] == ICMP_ECHO_REQUEST && icmp[1] == 0 && unicast && is_unicast_host(src) {
                    let mut reply = icmp.to_vec();
                    reply[0] = ICMP_ECHO_REPLY;
                    reply[2..4].fill(0);
                    let c = checksum(&reply);
                    reply[2..4].copy_from_slice(&c.to_be_bytes());
                    // RFC 1122 §3.2.2.6: the reply comes from the address the
                    // request was sent to; RFC 1812 §4.3.3.6 keeps its TOS.
                    // Request options are not reflected.
                    if self.originate(src, Some(dst), PROTO_ICMP, ip[1], &reply, ctx) {
                        self.stats.icmp_sent.echo_reply += 1;
                    }
                }
            }
            PROTO_UDP if unicast => {
                ctx.deliver_n(Sink::Router, frames);
                self.stats.local += 1;
                // Nothing listens on a router: port unreachable, from the
                // address the datagram was sent to, so that a traceroute to
                // any of the router's addresses ends there.
                let ip = &job.frame[ETH_HEADER..];
                self.send_error(ip, job.l2_broadcast, IcmpError::PortUnreachable, dst, ctx);
            }
            _ => {
                ctx.deliver_n(Sink::Router, frames);
                self.stats.local += 1;
            }
        }
    }

    /// Sends ICMP error `kind` about the transit packet `job`, from the
    /// address of the port it arrived on (see the module docs for why).
    fn icmp_error(&mut self, job: &Job, kind: IcmpError, ctx: &mut NodeCtx) {
        let from = self.ports[job.port]
            .addr
            .map_or(Ipv4Addr::UNSPECIFIED, |a| a.addr);
        self.send_error(&job.frame[ETH_HEADER..], job.l2_broadcast, kind, from, ctx);
    }

    /// Sends ICMP error `kind` about packet `ip` (its header and at least
    /// the start of its data) from address `from` (unspecified: the egress
    /// port's address), unless RFC 1812 §4.3.2.7 forbids it.
    fn send_error(
        &mut self,
        ip: &[u8],
        l2_broadcast: bool,
        kind: IcmpError,
        from: Ipv4Addr,
        ctx: &mut NodeCtx,
    ) {
        if !self.may_send_error(ip, l2_broadcast) {
            self.stats.icmp_suppressed += 1;
            return;
        }
        let (icmp_type, code, rest) = match kind {
            IcmpError::TimeExceeded => (ICMP_TIME_EXCEEDED, 0, [0; 4]),
            IcmpError::ReassemblyTimeExceeded => (ICMP_TIME_EXCEEDED, 1, [0; 4]),
            IcmpError::NetUnreachable => (ICMP_DST_UNREACHABLE, 0, [0; 4]),
            IcmpError::PortUnreachable => (ICMP_DST_UNREACHABLE, 3, [0; 4]),
            IcmpError::FragmentationNeeded(mtu) => {
                // RFC 1191 §4: the next-hop MTU in the low 16 bits of the
                // otherwise unused word.
                let m = (mtu.min(u16::MAX as u32) as u16).to_be_bytes();
                (ICMP_DST_UNREACHABLE, 4, [0, 0, m[0], m[1]])
            }
        };
        let quoted = &ip[..ip.len().min(header_len(ip) + QUOTED_DATA)];
        let mut msg = Vec::with_capacity(8 + quoted.len());
        msg.extend_from_slice(&[icmp_type, code, 0, 0]);
        msg.extend_from_slice(&rest);
        msg.extend_from_slice(quoted);
        let c = checksum(&msg);
        msg[2..4].copy_from_slice(&c.to_be_bytes());
        let from = (!from.is_unspecified()).then_some(from);
        if !self.originate(src_addr(ip), from, PROTO_ICMP, ERROR_TOS, &msg, ctx) {
            self.stats.icmp_suppressed += 1;
            return;
        }
        let s = &mut self.stats.icmp_sent;
        match kind {
            IcmpError::TimeExceeded | IcmpError::ReassemblyTimeExceeded => s.time_exceeded += 1,
            IcmpError::NetUnreachable => s.net_unreachable += 1,
            IcmpError::PortUnreachable => s.port_unreachable += 1,
            IcmpError::FragmentationNeeded(_) => s.fragmentation_needed += 1,
        }
    }

    /// RFC 1812 §4.3.2.7: no ICMP error about an ICMP error, a fragment other
    /// than the first, a link-layer or IP broadcast or multicast, or a packet
    /// whose source is not a single host.
    fn may_send_error(&self, ip: &[u8], l2_broadcast: bool) -> bool {
        let (src, dst) = (src_addr(ip), dst_addr(ip));
        if l2_broadcast
            || frag_offset(ip) != 0
            || dst.is_multicast()
            || self.is_broadcast(dst)
            || !is_unicast_host(src)
            || self.is_broadcast(src)
            || self.is_own(src)
        {
            return false;
        }
        if ip[9] == PROTO_ICMP {
            // Only known informational messages may be answered with an
            // error; an unreadable or unknown type is treated as an error.
            let data = &ip[header_len(ip)..];
            return data
                .first()
                .is_some_and(|t| matches!(t, 0 | 8 | 9 | 10 | 13..=18));
        }
        true
    }

    /// Sends a packet the router originates: routed by longest-prefix match
    /// on `dst`, from `src` or else the egress port's address, with DF clear
    /// (it is fragmented if the egress MTU needs it). Returns false, having
    /// created nothing, if there is no route or no source address.
    fn originate(
        &mut self,
        dst: Ipv4Addr,
        src: Option<Ipv4Addr>,
        proto: u8,
        tos: u8,
        payload: &[u8],
        ctx: &mut NodeCtx,
    ) -> bool {
        if self.is_own(dst) {
            return false;
        }
        let Some(route) = self.table.lookup(dst).copied() else {
            return false;
        };
        let Some(src) = src.or(self.ports[route.port].addr.map(|a| a.addr)) else {
            return false;
        };
        let total = IP_HEADER + payload.len();
        let mut frame = Frame::zeroed(ETH_HEADER + total);
        frame[12..14].copy_from_slice(&u16::from(EthernetProtocol::Ipv4).to_be_bytes());
        {
            let ip = &mut frame[ETH_HEADER..];
            ip[0] = 0x45;
            ip[1] = tos;
            ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
            ip[4..6].copy_from_slice(&self.next_ident.to_be_bytes());
            ip[8] = ORIGINATED_TTL;
            ip[9] = proto;
            ip[12..16].copy_from_slice(&src.octets());
            ip[16..20].copy_from_slice(&dst.octets());
            let c = checksum(&ip[..IP_HEADER]);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            ip[IP_HEADER..].copy_from_slice(payload);
        }
        self.next_ident = self.next_ident.wrapping_add(1);
        ctx.create(Origin::Router);
        self.transmit(route.port, route.via.unwrap_or(dst), frame, ctx);
        true
    }

    /// Whether `ip` is one of the router's interface addresses.
    fn is_own(&self, ip: Ipv4Addr) -> bool {
        self.own.contains(&u32::from(ip))
    }

    /// Whether `ip` is the limited broadcast or the directed broadcast of one
    /// of the router's subnets. Directed broadcasts are consumed, not
    /// forwarded (RFC 2644's default). /31 and /32 have none (RFC 3021).
    fn is_broadcast(&self, ip: Ipv4Addr) -> bool {
        ip.is_broadcast() || self.directed.contains(&u32::from(ip))
    }
}

/// The ICMP errors a router sends.
#[derive(Clone, Copy)]
enum IcmpError {
    TimeExceeded,
    ReassemblyTimeExceeded,
    NetUnreachable,
    PortUnreachable,
    FragmentationNeeded(u32),
}

const ICMP_ECHO_REPLY: u8 = 0;
const ICMP_DST_UNREACHABLE: u8 = 3;
const ICMP_ECHO_REQUEST: u8 = 8;
const ICMP_TIME_EXCEEDED: u8 = 11;

/// Addresses that must never be forwarded as source or destination (RFC 1812
/// §5.3.7): "this network" (0/8), loopback (127/8) and reserved class E
/// (240/4, which includes the limited broadcast).
fn is_martian(ip: Ipv4Addr) -> bool {
    let o = ip.octets()[0];
    o == 0 || o == 127 || o >= 240
}

/// Whether `ip` can be the address of a single host (not martian, multicast
/// or broadcast): the only sources ICMP may answer.
fn is_unicast_host(ip: Ipv4Addr) -> bool {
    !is_martian(ip) && !ip.is_multicast()
}
