//! What every IPv6 node has, router or simulated host: its addresses, its
//! routing table, its neighbour cache, the groups its ports are in, and
//! how it sends the ICMPv6 messages it originates (echo replies, errors).
//! [`crate::router`] forwards beside it; [`crate::host`] answers beside it.
//!
//! A port is in the all-nodes group, the all-routers group if the node is
//! a router, and the solicited-node groups of its addresses (RFC 4291
//! §2.8); a link-local address is the node's only on its own link (RFC
//! 4007), so it is checked against the port a packet came in by.

use rustc_hash::FxHashSet;
use smoltcp::wire::EthernetAddress;
use std::net::Ipv6Addr;

use crate::ipv6;
use crate::link::ETH_HEADER;
use crate::memo::ROUTER_SLOTS;
use crate::ndp::Ndp;
use crate::neighbour::NeighbourConfig;
use crate::node::{NodeCtx, PortInfo};
use crate::reassembly::{Outcome, Reassembler};
use crate::routing::RoutingTable6;
use crate::stats::{DropReason, Origin};
use crate::{Frame, PortId};

/// Hop limit of packets a node originates (Linux's default).
pub const ORIGINATED_HOPS: u8 = 64;

/// A node's IPv6 side.
pub struct Node6 {
    /// Whether any port has an IPv6 address: otherwise the node has no
    /// IPv6 and drops it as `unsupported`.
    enabled: bool,
    /// Routers are in the all-routers group and say so in advertisements.
    router: bool,
    /// Its addresses, global and link-local.
    own: FxHashSet<Ipv6Addr>,
    /// Where its packets go.
    pub table: RoutingTable6,
    /// Its neighbours, per port.
    pub ndp: Ndp,
    origin: Origin,
    /// The identification of the last packet it fragmented.
    ident: u32,
}

impl Node6 {
    /// The IPv6 side of a node with `ports` and table `table`; `router`
    /// for a router. Frames it creates are recorded with `origin`.
    pub fn new(ports: &[PortInfo], table: RoutingTable6, router: bool, origin: Origin) -> Self {
        let enabled = ports.iter().any(|p| p.addr6.is_some());
        let own = if enabled {
            ports
                .iter()
                .flat_map(|p| p.addr6.map(|a| a.addr).into_iter().chain([p.link_local()]))
                .collect()
        } else {
            FxHashSet::default()
        };
        Node6 {
            enabled,
            router,
            own,
            table,
            ndp: Ndp::new(NeighbourConfig::default(), origin).remembering(if router {
                ROUTER_SLOTS
            } else {
                1
            }),
            origin,
            ident: 0,
        }
    }

    /// Whether the node has IPv6.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Whether `a` is one of the node's addresses (on any port).
    pub fn is_own(&self, a: Ipv6Addr) -> bool {
        self.own.contains(&a)
    }

    /// Whether `dst` is the node's for a packet that came in by `info`'s
    /// port: a global address of any port, or that port's link-local one.
    pub fn is_own_on(&self, info: &PortInfo, dst: Ipv6Addr) -> bool {
        self.own.contains(&dst) && (!ipv6::is_link_local(dst) || dst == info.link_local())
    }

    /// The groups `info`'s port is in.
    fn groups(&self, info: &PortInfo) -> impl Iterator<Item = Ipv6Addr> {
        let router = self.router.then_some(ipv6::ALL_ROUTERS);
        [ipv6::ALL_NODES]
            .into_iter()
            .chain(router)
            .chain(info.addr6.map(|a| ipv6::solicited_node(a.addr)))
            .chain([ipv6::solicited_node(info.link_local())])
    }

    /// Whether Ethernet multicast address `mac` is one a port with `info`
    /// listens to.
    pub fn listens(&self, info: &PortInfo, mac: EthernetAddress) -> bool {
        self.enabled
            && mac.0[0..2] == [0x33, 0x33]
            && self.groups(info).any(|g| ipv6::multicast_mac(g) == mac.0)
    }

    /// Whether `dst` is a group `info`'s port is in.
    pub fn in_group(&self, info: &PortInfo, dst: Ipv6Addr) -> bool {
        dst.is_multicast() && self.groups(info).any(|g| g == dst)
    }

    /// Whether a packet from `src` is one to look at: not from a source
    /// that cannot be one node's (multicast, loopback; RFC 4291 §2.7,
    /// §2.5.3), and from the unspecified address only towards a group the
    /// port is in (`to_group`: duplicate address detection's probes).
    pub fn source_ok(src: Ipv6Addr, to_group: bool) -> bool {
        !(src.is_multicast() || src.is_loopback() || (src.is_unspecified() && !to_group))
    }

    /// Where the upper layer of `ip`, a packet for this node, starts, and
    /// where its Fragment header is if it is a fragment; `None` (the frame
    /// dropped and counted) if its extension headers run past it or it is
    /// a first fragment without its whole upper-layer header (RFC 7112:
    /// `malformed`), or it carries a Routing header with segments left (no
    /// source routing: `unsupported`).
    pub fn upper_layer(ip: &[u8], ctx: &mut NodeCtx) -> Option<ipv6::UpperLayer> {
        match ipv6::upper_layer(ip) {
            Ok(u) if u.routing_left => {
                ctx.drop_frame(DropReason::Unsupported);
                None
            }
            Ok(u) if u.truncated_first_fragment(ip.len()) => {
                ctx.drop_frame(DropReason::Malformed);
                None
            }
            Ok(u) => Some(u),
            Err(reason) => {
                ctx.drop_frame(reason);
                None
            }
        }
    }

    /// Hands `frame`, a fragment for this node whose Fragment header is
    /// where `at` says, to the node's reassembler `r`. Once its packet is
    /// whole: the packet (behind `frame`'s Ethernet header), its upper
    /// layer and the frames it was made of. A packet that cannot be used
    /// (dropped by the reassembler, or whole but a fragment again or bound
    /// further by a Routing header: `unsupported`) is counted here.
    pub fn reassemble(
        r: &mut Reassembler,
        frame: &Frame,
        at: ipv6::FragmentAt,
        ctx: &mut NodeCtx,
    ) -> Reassembled {
        match r.push6(&frame[ETH_HEADER..], at, ctx.now) {
            Outcome::Held => Reassembled::Held,
            Outcome::Complete { packet, frames } => {
                let mut whole = Frame::copy_from(&frame[..ETH_HEADER]);
                whole.extend_from_slice(&packet);
                match ipv6::upper_layer(&whole[ETH_HEADER..]) {
                    Ok(u) if !(u.is_fragment() || u.routing_left) => {
                        Reassembled::Whole(whole, u, frames)
                    }
                    Ok(_) => {
                        ctx.drop_n(DropReason::Unsupported, frames);
                        Reassembled::Gone
                    }
                    Err(reason) => {
                        ctx.drop_n(reason, frames);
                        Reassembled::Gone
                    }
                }
            }
            Outcome::Dropped { reason, frames } => {
                ctx.drop_n(reason, frames);
                Reassembled::Gone
            }
        }
    }

    /// Tells the source of an IPv6 packet given up before it was whole,
    /// whose first fragment `quote` is, with ICMPv6 time exceeded (code 1,
    /// RFC 8200 §4.5) from the address it was sent to, under RFC 4443's
    /// rules. Whether it was sent (not when the rules forbid it, or the
    /// source is link-local: no port to answer by is known here).
    pub fn reassembly_expired(
        &mut self,
        ports: &[PortInfo],
        quote: &[u8],
        tclass: u8,
        ctx: &mut NodeCtx,
    ) -> bool {
        if !self.may_send_error(quote, false, false) {
            return false;
        }
        let msg = ipv6::error_message(TIME_EXCEEDED, 1, 0, quote);
        let (src, dst) = (ipv6::src_addr(quote), ipv6::dst_addr(quote));
        self.originate(ports, src, Some(dst), None, tclass, &msg, ctx)
    }

    /// RFC 4443 §2.4 (e): whether an ICMPv6 error may answer packet `ip`:
    /// not about an ICMPv6 error message, a packet to a multicast group or
    /// a link-layer group (`l2_group`; but Packet Too Big, `too_big`, may
    /// answer those), or a packet whose source is not a single other node.
    pub fn may_send_error(&self, ip: &[u8], l2_group: bool, too_big: bool) -> bool {
        let (src, dst) = (ipv6::src_addr(ip), ipv6::dst_addr(ip));
        if (dst.is_multicast() || l2_group) && !too_big {
            return false;
        }
        if src.is_unspecified() || src.is_multicast() || self.is_own(src) {
            return false;
        }
        match ipv6::upper_layer(ip) {
            // An error message (type < 128), or one too short to tell.
            Ok(u) if u.proto == ipv6::next::ICMPV6 && !u.later_fragment => {
                ip.get(u.offset).is_some_and(|t| *t >= 128)
            }
            Ok(_) => true,
            Err(_) => false,
        }
    }

    /// Sends IPv6 frame `frame` (its MACs to be filled in) out of `port`
    /// towards `next_hop`, resolving its MAC by neighbour discovery.
    pub fn transmit(
        &mut self,
        ports: &[PortInfo],
        port: PortId,
        next_hop: Ipv6Addr,
        mut frame: Frame,
        ctx: &mut NodeCtx,
    ) {
        frame[6..12].copy_from_slice(ports[port].mac.as_bytes());
        self.ndp
            .send(port, &ports[port], (port, next_hop), frame, ctx);
    }

    /// Sends `frame`, an IPv6 packet the node originates (no extension
    /// headers), out of `port` towards `next_hop`, cut into fragments of at
    /// most `mtu` bytes if it is larger (RFC 8200 §4.5: only the source
    /// fragments). Returns how many fragments were made beyond the first
    /// (the packet becomes the first), each recorded as a frame created.
    pub fn send_sized(
        &mut self,
        ports: &[PortInfo],
        port: PortId,
        next_hop: Ipv6Addr,
        frame: Frame,
        mtu: usize,
        ctx: &mut NodeCtx,
    ) -> u64 {
        if frame.len() - ETH_HEADER <= mtu {
            self.transmit(ports, port, next_hop, frame, ctx);
            return 0;
        }
        self.ident = self.ident.wrapping_add(1);
        let Some(fragments) = ipv6::fragment(&frame, mtu, self.ident) else {
            // Never for an IPv6 link: the topology refuses MTUs below 1280.
            ctx.drop_frame(DropReason::MtuExceeded);
            return 0;
        };
        let extra = fragments.len() as u64 - 1;
        ctx.ledger.create_n(Origin::Fragment, extra);
        for f in fragments {
            self.transmit(ports, port, next_hop, f, ctx);
        }
        extra
    }

    /// Sends an ICMPv6 message the node originates, `msg` (its checksum
    /// is computed here), to `dst`: out of `link_port` if `dst` is
    /// link-local (its scope is that link), else routed by longest-prefix
    /// match; from `src`, or else the egress port's address of `dst`'s
    /// scope. Refused, having sent nothing, if there is no route or source
    /// address, or `dst` is the node's own. A message that does not fit
    /// the egress link (an echo reply to a large request) is fragmented.
    #[allow(clippy::too_many_arguments)]
    pub fn originate(
        &mut self,
        ports: &[PortInfo],
        dst: Ipv6Addr,
        src: Option<Ipv6Addr>,
        link_port: Option<PortId>,
        tclass: u8,
        msg: &[u8],
        ctx: &mut NodeCtx,
    ) -> bool {
        if self.own.contains(&dst) {
            return false;
        }
        let (port, next_hop) = if ipv6::is_link_local(dst) {
            let Some(p) = link_port else { return false };
            (p, dst)
        } else {
            let Some(route) = self.table.lookup(dst) else {
                return false;
            };
            (route.port, route.via.unwrap_or(dst))
        };
        let info = &ports[port];
        let src = src.or_else(|| {
            if ipv6::is_link_local(dst) {
                Some(info.link_local())
            } else {
                info.addr6.map(|a| a.addr)
            }
        });
        let Some(src) = src else { return false };
        let mtu = info.mtu as usize;
        let frame = ipv6::icmp_frame(src, dst, ORIGINATED_HOPS, tclass, msg);
        ctx.create(self.origin);
        self.send_sized(ports, port, next_hop, frame, mtu, ctx);
        true
    }

    /// The answer to echo request `msg` (an ICMPv6 message whose checksum
    /// verified) that came in by `port` from `src` to `dst` with traffic
    /// class `tclass`: an echo reply from the address pinged (from the
    /// port's own address if a group was pinged, as Linux does). Whether
    /// one was sent.
    #[allow(clippy::too_many_arguments)]
    pub fn echo_reply(
        &mut self,
        ports: &[PortInfo],
        port: PortId,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        tclass: u8,
        msg: &[u8],
        ctx: &mut NodeCtx,
    ) -> bool {
        let mut reply = msg.to_vec();
        reply[0] = ECHO_REPLY;
        let from = self.own.contains(&dst).then_some(dst);
        self.originate(ports, src, from, Some(port), tclass, &reply, ctx)
    }
}

/// What became of a fragment given to [`Node6::reassemble`].
pub enum Reassembled {
    /// Held until the rest of its packet comes.
    Held,
    /// Its packet is whole: the frame, its upper layer, and how many
    /// frames it was made of.
    Whole(Frame, ipv6::UpperLayer, u64),
    /// Dropped, and counted.
    Gone,
}

/// ICMPv6 type of time exceeded (RFC 4443 §3.3).
pub const TIME_EXCEEDED: u8 = 3;
/// ICMPv6 type of an echo request.
pub const ECHO_REQUEST: u8 = 128;
/// ICMPv6 type of an echo reply.
pub const ECHO_REPLY: u8 = 129;
