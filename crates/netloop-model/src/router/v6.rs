//! The router's IPv6 path (RFC 8200, RFC 4443, RFC 4861): what happens to an
//! IPv6 packet between its arrival and its departure, beside the IPv4 path
//! of the parent module. The forwarding engine (its rate and queue) is
//! shared: a packet of either family takes one service slot.
//!
//! - **Ingress**: frames to the port's MAC, or to the IPv6 multicast MACs of
//!   the groups the port is in (all-nodes, all-routers, the solicited-node
//!   groups of its addresses); the header is validated
//!   ([`crate::ipv6::validate`]) and Ethernet padding trimmed. Neighbour
//!   discovery skips the forwarding engine's queue, as ARP does. Packets
//!   from a source that cannot be one node's (multicast, loopback, the
//!   unspecified address outside duplicate address detection) are dropped
//!   as `martian` before anything answers them.
//! - **Forwarding**: hop limit check and decrement (no checksum in IPv6),
//!   longest-prefix match, neighbour discovery for the next hop's MAC
//!   ([`crate::ndp`]). A packet too big for the egress link is dropped as
//!   `packet_too_big` and answered with ICMPv6 Packet Too Big carrying the
//!   link's MTU: IPv6 routers never fragment, and path MTU discovery (RFC
//!   8201) depends on this answer. Extension headers are forwarded
//!   untouched, whatever they are (a router only looks into Hop-by-Hop, and
//!   this one processes none of its options: a deviation, see below).
//! - **Not forwarded**: link-local destinations (`not_for_us`), link-local
//!   sources towards a wider scope (`martian`, with ICMPv6 "beyond scope of
//!   source address"), unspecified, loopback or multicast sources and
//!   unspecified or loopback destinations (`martian`), multicast
//!   destinations beyond the groups the router is in (`not_for_us` for
//!   link-scope groups it has not joined, such as MLD reports, `unsupported`
//!   for wider scopes: no multicast routing).
//! - **Packets for the router** (any of its global or link-local
//!   addresses, or a group it is in): fragments are reassembled first
//!   ([`crate::reassembly`], ICMPv6 time exceeded code 1 for a packet given
//!   up after 60 s whose first fragment came; a first fragment without its
//!   whole upper-layer header is `malformed`, RFC 7112; neighbour
//!   discovery behind any Fragment header is `malformed`, RFC 6980);
//!   neighbour solicitations and
//!   advertisements to [`crate::ndp`]; echo requests answered (from the
//!   address they were sent to); UDP answered with port unreachable so that
//!   `traceroute -6` to a router address ends there; anything else consumed.
//!   The ICMPv6 checksum is verified first (`bad_checksum`).
//! - **ICMPv6 errors** (RFC 4443 §3): time exceeded, destination unreachable
//!   (no route, beyond scope, port unreachable) and Packet Too Big, quoting
//!   as much of the packet as keeps the error within 1280 bytes, from the
//!   address of the port the packet arrived on (as for IPv4, see the parent
//!   module), never about an ICMPv6 error, a packet to a multicast group or
//!   link-layer broadcast (except Packet Too Big, §2.4 (e.3)), or from an
//!   address that is not a single node's.
//!
//! Deviations, each on purpose:
//! - Packets to the router whose Routing header has segments left are
//!   dropped as `unsupported` (no source routing, RFC 5095). (Forwarded
//!   fragments pass untouched; an atomic fragment, offset 0 without more
//!   to come, is taken whole as RFC 6946 says.)
//! - Hop-by-Hop options need not come first to be tolerated; the
//!   subnet-router anycast address (RFC 4291 §2.6.1) is not the router's.
//! - Hop-by-Hop options are not processed (Router Alert, for MLD, has no
//!   use without multicast routing); the header is forwarded.
//! - No ICMPv6 rate limiting (RFC 4443 §2.4 (f)), for the reason the parent
//!   module gives for IPv4: each error answers one packet dropped here.
//! - No Parameter Problem, Redirects or Router Advertisements: real hosts
//!   get their addresses and routes from netloop, not from the router.
//! - Packets the router originates that do not fit the egress link (an echo
//!   reply to a large request) are fragmented to that link's MTU: the
//!   router keeps no path MTUs of its own.

use std::net::Ipv6Addr;

use super::{Job, Router};
use crate::ipv6::UpperLayer;
use crate::ipv6::{self, next, IPV6_HEADER};
use crate::link::ETH_HEADER;
use crate::ndp;
use crate::node::NodeCtx;
use crate::node6::{Node6, Reassembled, ECHO_REQUEST, TIME_EXCEEDED};
use crate::stats::{DropReason, Sink};
use crate::{Frame, PortId};

/// Traffic class of ICMPv6 errors: CS6, network control, as for IPv4.
const ERROR_TCLASS: u8 = 0xc0;

const ICMPV6_DST_UNREACHABLE: u8 = 1;
const ICMPV6_PACKET_TOO_BIG: u8 = 2;

/// The ICMPv6 errors a router sends.
#[derive(Clone, Copy)]
pub(super) enum Icmpv6Error {
    /// Hop limit exceeded in transit (type 3 code 0).
    TimeExceeded,
    /// No route to destination (type 1 code 0).
    NoRoute,
    /// Beyond scope of source address (type 1 code 2).
    BeyondScope,
    /// Port unreachable (type 1 code 4).
    PortUnreachable,
    /// Packet Too Big (type 2), with the next link's MTU.
    PacketTooBig(u32),
}

impl Router {
    /// An IPv6 frame after the Ethernet checks: validated, trimmed and
    /// handed to the forwarding engine. `l2_group`: it came to a multicast
    /// or broadcast MAC.
    pub(super) fn ingress6(
        &mut self,
        port: PortId,
        mut frame: Frame,
        l2_group: bool,
        ctx: &mut NodeCtx,
    ) {
        if !self.v6.enabled() {
            ctx.drop_frame(DropReason::Unsupported);
            return;
        }
        match ipv6::validate(&frame[ETH_HEADER..]) {
            Ok(total) => {
                frame.truncate(ETH_HEADER + total);
                let ip = &frame[ETH_HEADER..];
                // Neighbour discovery bypasses the forwarding engine, as ARP
                // does: resolution must not wait behind (or be dropped with)
                // the traffic that needs it.
                let ndp = ipv6::next_header(ip) == next::ICMPV6
                    && ip
                        .get(IPV6_HEADER)
                        .is_some_and(|t| matches!(*t, ndp::SOLICITATION | ndp::ADVERTISEMENT));
                let job = Job {
                    port,
                    frame,
                    l2_broadcast: l2_group,
                };
                if ndp {
                    self.process6(job, ctx);
                } else {
                    self.enqueue(job, ctx);
                }
            }
            Err(reason) => ctx.drop_frame(reason),
        }
    }

    /// For a super-frame's IPv6 packet `ip`: the port it leaves by if each
    /// of its segments would be plainly forwarded (valid, unicast to
    /// another node beyond this link, hop limit above 1, a route), else
    /// `None`. The caller checks the segments fit the port's MTU.
    pub(super) fn forwards_whole6(&self, ip: &[u8]) -> Option<PortId> {
        if !self.v6.enabled() || ipv6::validate(ip).is_err() {
            return None;
        }
        let (src, dst) = (ipv6::src_addr(ip), ipv6::dst_addr(ip));
        let plain = |a: Ipv6Addr| {
            !(a.is_multicast() || a.is_unspecified() || a.is_loopback() || ipv6::is_link_local(a))
        };
        if self.v6.is_own(dst) || !plain(dst) || !plain(src) || ipv6::hop_limit(ip) <= 1 {
            return None;
        }
        self.v6.table.lookup(dst).map(|r| r.port)
    }

    /// The forwarding decision for one valid IPv6 packet.
    pub(super) fn process6(&mut self, job: Job, ctx: &mut NodeCtx) {
        let ip = &job.frame[ETH_HEADER..];
        let (src, dst) = (ipv6::src_addr(ip), ipv6::dst_addr(ip));
        let group = self.v6.in_group(&self.ports[job.port], dst);
        // Sources that cannot be one node's, before anything is answered.
        if !Node6::source_ok(src, group) {
            ctx.drop_frame(DropReason::Martian);
            return;
        }
        // A link-local address is the router's only on its own link (RFC
        // 4007): another port's is not for a packet arriving here.
        let own = self.v6.is_own_on(&self.ports[job.port], dst);
        if own || group {
            self.local6(job, ctx);
            return;
        }
        if dst.is_multicast() {
            // Link scope (ff02::/16, e.g. MLD reports to ff02::16): a group
            // this router has not joined. Wider: no multicast routing.
            let link_scope = dst.segments()[0] & 0x000f == 2;
            ctx.drop_frame(if link_scope {
                DropReason::NotForUs
            } else {
                DropReason::Unsupported
            });
            return;
        }
        // A unicast packet sent to a link-layer group, or a link-local
        // destination that is not ours: not to be forwarded (RFC 4291
        // §2.5.6).
        if job.l2_broadcast || ipv6::is_link_local(dst) {
            ctx.drop_frame(DropReason::NotForUs);
            return;
        }
        if src.is_unspecified() || dst.is_unspecified() || dst.is_loopback() {
            ctx.drop_frame(DropReason::Martian);
            return;
        }
        if ipv6::is_link_local(src) {
            ctx.drop_frame(DropReason::Martian);
            self.icmp6_error(&job, Icmpv6Error::BeyondScope, ctx);
            return;
        }
        if ipv6::hop_limit(ip) <= 1 {
            ctx.drop_frame(DropReason::TtlExpired);
            self.icmp6_error(&job, Icmpv6Error::TimeExceeded, ctx);
            return;
        }
        let Some(route) = self.v6.table.lookup(dst).copied() else {
            ctx.drop_frame(DropReason::NoRoute);
            self.icmp6_error(&job, Icmpv6Error::NoRoute, ctx);
            return;
        };
        let mtu = self.ports[route.port].mtu;
        if !job.frame.is_super() && ip.len() > mtu as usize {
            ctx.drop_frame(DropReason::PacketTooBig);
            self.icmp6_error(&job, Icmpv6Error::PacketTooBig(mtu), ctx);
            return;
        }
        let mut frame = job.frame;
        frame.head_mut(ETH_HEADER + 8)[ETH_HEADER + 7] -= 1;
        self.stats.forwarded += frame.segs();
        let via = route.via.unwrap_or(dst);
        self.v6.transmit(&self.ports, route.port, via, frame, ctx);
    }

    /// A packet for the router: reassembled if it is a fragment, then to
    /// neighbour discovery, answered, or consumed.
    fn local6(&mut self, job: Job, ctx: &mut NodeCtx) {
        let ip = &job.frame[ETH_HEADER..];
        // No source routing (see the module docs).
        let Some(upper) = Node6::upper_layer(ip, ctx) else {
            return;
        };
        let Some(at) = upper.fragment_at else {
            self.local6_whole(job, upper, 1, ctx);
            return;
        };
        match Node6::reassemble(&mut self.reassembly, &job.frame, at, ctx) {
            Reassembled::Held => self.arm_reassembly_timer(ctx),
            Reassembled::Whole(frame, upper, frames) => {
                self.local6_whole(Job { frame, ..job }, upper, frames, ctx);
            }
            Reassembled::Gone => {}
        }
    }

    /// A whole packet for the router, made of `frames` frames, whose upper
    /// layer is `upper`.
    fn local6_whole(&mut self, job: Job, upper: UpperLayer, frames: u64, ctx: &mut NodeCtx) {
        let ip = &job.frame[ETH_HEADER..];
        let (src, dst) = (ipv6::src_addr(ip), ipv6::dst_addr(ip));
        match upper.proto {
            next::ICMPV6 => {
                let msg = &ip[upper.offset..];
                // RFC 4443 §2.4 (a), (b): an unreadable message or a bad
                // checksum is discarded.
                if msg.len() < 4 || ipv6::checksum(src, dst, next::ICMPV6, msg) != 0 {
                    ctx.drop_n(DropReason::BadChecksum, frames);
                    return;
                }
                if matches!(msg[0], ndp::SOLICITATION | ndp::ADVERTISEMENT) {
                    if frames > 1 || upper.fragment_header {
                        // RFC 6980: neighbour discovery is never fragmented
                        // (not even in an atomic fragment).
                        ctx.drop_n(DropReason::Malformed, frames);
                        return;
                    }
                    let port = job.port;
                    let info = &self.ports[port];
                    self.v6
                        .ndp
                        .receive(port, info, &job.frame, upper.offset, true, ctx);
                    return;
                }
                ctx.deliver_n(Sink::Router, frames);
                self.stats.local += 1;
                // Pings of a group the port is in are answered too.
                if msg[0] == ECHO_REQUEST && msg[1] == 0 && msg.len() >= 8 {
                    let tclass = ipv6::traffic_class(ip);
                    let (ports, port) = (&self.ports, job.port);
                    if self.v6.echo_reply(ports, port, src, dst, tclass, msg, ctx) {
                        self.stats.icmpv6_sent.echo_reply += 1;
                    }
                }
            }
            next::UDP if self.v6.is_own(dst) => {
                ctx.deliver_n(Sink::Router, frames);
                self.stats.local += 1;
                self.send_error6(&job, Icmpv6Error::PortUnreachable, Some(dst), ctx);
            }
            _ => {
                ctx.deliver_n(Sink::Router, frames);
                self.stats.local += 1;
            }
        }
    }

    /// Tells the source of an IPv6 packet given up before it was whole,
    /// whose first fragment `quote` is, with ICMPv6 time exceeded (code 1,
    /// RFC 8200 §4.5), from the address it was sent to.
    pub(super) fn reassembly_expired6(&mut self, quote: &[u8], ctx: &mut NodeCtx) {
        if self
            .v6
            .reassembly_expired(&self.ports, quote, ERROR_TCLASS, ctx)
        {
            self.stats.icmpv6_sent.time_exceeded += 1;
        } else {
            self.stats.icmp_suppressed += 1;
        }
    }

    /// Sends ICMPv6 error `kind` about the transit packet `job`, from the
    /// address of the port it arrived on.
    pub(super) fn icmp6_error(&mut self, job: &Job, kind: Icmpv6Error, ctx: &mut NodeCtx) {
        let from = self.ports[job.port].addr6.map(|a| a.addr);
        self.send_error6(job, kind, from, ctx);
    }

    /// Sends ICMPv6 error `kind` about `job`'s packet from `from` (else the
    /// egress port's address), unless RFC 4443 §2.4 (e) forbids it.
    fn send_error6(
        &mut self,
        job: &Job,
        kind: Icmpv6Error,
        from: Option<Ipv6Addr>,
        ctx: &mut NodeCtx,
    ) {
        let ip = &job.frame[ETH_HEADER..];
        let too_big = matches!(kind, Icmpv6Error::PacketTooBig(_));
        if !self.v6.may_send_error(ip, job.l2_broadcast, too_big) {
            self.stats.icmp_suppressed += 1;
            return;
        }
        let (ty, code, word) = match kind {
            Icmpv6Error::TimeExceeded => (TIME_EXCEEDED, 0, 0),
            Icmpv6Error::NoRoute => (ICMPV6_DST_UNREACHABLE, 0, 0),
            Icmpv6Error::BeyondScope => (ICMPV6_DST_UNREACHABLE, 2, 0),
            Icmpv6Error::PortUnreachable => (ICMPV6_DST_UNREACHABLE, 4, 0),
            Icmpv6Error::PacketTooBig(mtu) => (ICMPV6_PACKET_TOO_BIG, 0, mtu),
        };
        let msg = ipv6::error_message(ty, code, word, ip);
        let src = ipv6::src_addr(ip);
        let (ports, port) = (&self.ports, job.port);
        if !self
            .v6
            .originate(ports, src, from, Some(port), ERROR_TCLASS, &msg, ctx)
        {
            self.stats.icmp_suppressed += 1;
            return;
        }
        let s = &mut self.stats.icmpv6_sent;
        match kind {
            Icmpv6Error::TimeExceeded => s.time_exceeded += 1,
            Icmpv6Error::NoRoute => s.no_route += 1,
            Icmpv6Error::BeyondScope => s.beyond_scope += 1,
            Icmpv6Error::PortUnreachable => s.port_unreachable += 1,
            Icmpv6Error::PacketTooBig(_) => s.packet_too_big += 1,
        }
    }
}
