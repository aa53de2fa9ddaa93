//! Neighbour discovery (RFC 4861): IPv6's neighbour resolution, on the
//! cache of [`crate::neighbour`] — the same bounds, retries and ageing as
//! ARP.
//!
//! A node solicits a neighbour's MAC with a Neighbour Solicitation to the
//! target's solicited-node group (its source link-layer address in an
//! option), and answers a solicitation for one of its own addresses with a
//! Neighbour Advertisement (solicited, override, and the router flag for a
//! router) carrying its MAC. The cache is per interface (§5): a neighbour
//! is a port and an address, so a link-local address on one link says
//! nothing about the same address on another. What a node learns follows
//! the cache's merge rule and RFC 4861's states:
//! - a solicitation for one of our addresses adds or updates its sender as
//!   *stale* (§7.2.3): used at once, re-confirmed on first use, and the
//!   first to go when the table is full, so that a flood of solicitations
//!   from made-up senders cannot push out the neighbours in use;
//! - an advertisement updates only an entry the cache has, pending or
//!   resolved (§7.2.5): a solicited one confirms it, an unsolicited one
//!   leaves it stale, and one without the override flag does not change a
//!   MAC the cache already has.
//!
//! Validation (§7.1.1, §7.1.2) drops, as `malformed`, a message whose hop
//! limit is not 255 (it was forwarded: an off-link spoof), whose code is not
//! 0, that is too short, whose target is multicast, whose options have a
//! zero length or run past the message, a solicitation from the unspecified
//! address that is not to a solicited-node group or carries a link-layer
//! option, and an advertisement to a multicast address with the solicited
//! flag set. Duplicate-address-detection probes (from `::`) for one of our
//! addresses are answered to all-nodes, as the RFC says, so the other side
//! sees the conflict.
//!
//! Not modelled: redirects, router advertisements (addresses and routes are
//! the topology's, configured on real hosts by netloop), and the
//! REACHABLE/DELAY/PROBE states beyond the cache's fresh and stale.

use smoltcp::wire::EthernetAddress;
use std::net::Ipv6Addr;

use crate::ipv6;
use crate::link::ETH_HEADER;
use crate::neighbour::{Neighbours, Protocol};
use crate::node::{NodeCtx, PortInfo};
use crate::stats::{DropReason, Sink};
use crate::{Frame, PortId};

/// ICMPv6 type of a Neighbour Solicitation.
pub const SOLICITATION: u8 = 135;
/// ICMPv6 type of a Neighbour Advertisement.
pub const ADVERTISEMENT: u8 = 136;
/// Hop limit of every NDP message (and what a received one must have).
const HOPS: u8 = 255;
/// Option: source link-layer address.
const OPT_SOURCE_LL: u8 = 1;
/// Option: target link-layer address.
const OPT_TARGET_LL: u8 = 2;
/// Advertisement flags: router, solicited, override.
const FLAG_ROUTER: u8 = 0x80;
const FLAG_SOLICITED: u8 = 0x40;
const FLAG_OVERRIDE: u8 = 0x20;

/// IPv6 over Ethernet.
pub struct NdpProto;

impl Protocol for NdpProto {
    /// The port and the neighbour's address on its link.
    type Addr = (PortId, Ipv6Addr);
    fn solicit(info: &PortInfo, (_, target): (PortId, Ipv6Addr)) -> Option<Frame> {
        // §7.2.2: any address of the interface; a link-local target is asked
        // from the link-local address (the global one may not be on its
        // link's prefix at the far end).
        let src = if ipv6::is_link_local(target) {
            info.link_local()
        } else {
            info.addr6?.addr
        };
        let group = ipv6::solicited_node(target);
        let mut msg = vec![SOLICITATION, 0, 0, 0, 0, 0, 0, 0];
        msg.extend_from_slice(&target.octets());
        msg.extend_from_slice(&[OPT_SOURCE_LL, 1]);
        msg.extend_from_slice(info.mac.as_bytes());
        let mut f = ipv6::icmp_frame(src, group, HOPS, 0, &msg);
        f[0..6].copy_from_slice(&ipv6::multicast_mac(group));
        f[6..12].copy_from_slice(info.mac.as_bytes());
        Some(f)
    }
}

/// An IPv6 neighbour cache.
pub type Ndp = Neighbours<NdpProto>;

/// The link-layer address in option `kind` of an NDP message's options, if
/// present; `Err` if the options are malformed (a zero length, or one that
/// runs past the message).
fn link_layer_option(mut opts: &[u8], kind: u8) -> Result<Option<EthernetAddress>, ()> {
    let mut found = None;
    while !opts.is_empty() {
        let len = usize::from(*opts.get(1).ok_or(())?) * 8;
        if len == 0 || len > opts.len() {
            return Err(());
        }
        if opts[0] == kind && len >= 8 {
            found = Some(EthernetAddress::from_bytes(&opts[2..8]));
        }
        opts = &opts[len..];
    }
    Ok(found)
}

impl Neighbours<NdpProto> {
    /// Handles a Neighbour Solicitation or Advertisement (ICMPv6 type `ty`)
    /// that arrived on `port` in Ethernet frame `frame`, whose IPv6 packet
    /// is valid and whose ICMPv6 checksum verified; `icmp` is where its
    /// ICMPv6 message starts in the packet. `router`: whether this node is a
    /// router (the flag in its advertisements). Consumes the frame.
    pub fn receive(
        &mut self,
        port: PortId,
        info: &PortInfo,
        frame: &[u8],
        icmp: usize,
        router: bool,
        ctx: &mut NodeCtx,
    ) {
        let ip = &frame[ETH_HEADER..];
        let msg = &ip[icmp..];
        let (src, dst) = (ipv6::src_addr(ip), ipv6::dst_addr(ip));
        if ipv6::hop_limit(ip) != HOPS || msg.len() < 24 || msg[1] != 0 {
            ctx.drop_frame(DropReason::Malformed);
            return;
        }
        let target = Ipv6Addr::from(<[u8; 16]>::try_from(&msg[8..24]).expect("16 bytes"));
        let kind = if msg[0] == SOLICITATION {
            OPT_SOURCE_LL
        } else {
            OPT_TARGET_LL
        };
        let Ok(ll) = link_layer_option(&msg[24..], kind) else {
            ctx.drop_frame(DropReason::Malformed);
            return;
        };
        let dad = src.is_unspecified();
        if target.is_multicast()
            || (msg[0] == SOLICITATION
                && dad
                && (ll.is_some() || dst != ipv6::solicited_node(target)))
            || (msg[0] == ADVERTISEMENT && dst.is_multicast() && msg[4] & FLAG_SOLICITED != 0)
        {
            ctx.drop_frame(DropReason::Malformed);
            return;
        }
        let mine = info.addr6.is_some_and(|a| a.addr == target) || info.link_local() == target;
        let on_link = |a: Ipv6Addr| {
            ipv6::is_link_local(a) || info.addr6.is_some_and(|m| m.contains(a) && m.addr != a)
        };
        if msg[0] == SOLICITATION {
            if !mine {
                // Another node's address whose solicited-node group we share
                // (the last 24 bits match).
                ctx.drop_frame(DropReason::NotForUs);
                return;
            }
            ctx.deliver(Sink::from_origin(self.origin()));
            let ll = ll.filter(|m| m.is_unicast());
            if let Some(mac) = ll {
                if on_link(src) {
                    self.learn_stale(port, (port, src), mac, ctx);
                }
            }
            // §7.2.4: solicited, to the sender (its MAC from the option, or
            // else the frame's source); a DAD probe's answer goes to
            // all-nodes, unsolicited.
            let flags = FLAG_OVERRIDE | if router { FLAG_ROUTER } else { 0 };
            let (to, to_mac, flags) = if dad {
                (
                    ipv6::ALL_NODES,
                    EthernetAddress(ipv6::multicast_mac(ipv6::ALL_NODES)),
                    flags,
                )
            } else {
                let from = EthernetAddress::from_bytes(&frame[6..12]);
                match ll.or(Some(from).filter(|m| m.is_unicast())) {
                    Some(mac) => (src, mac, flags | FLAG_SOLICITED),
                    // No unicast MAC to answer to: nothing is sent.
                    None => return,
                }
            };
            let mut reply = vec![ADVERTISEMENT, 0, 0, 0, flags, 0, 0, 0];
            reply.extend_from_slice(&target.octets());
            reply.extend_from_slice(&[OPT_TARGET_LL, 1]);
            reply.extend_from_slice(info.mac.as_bytes());
            let mut f = ipv6::icmp_frame(target, to, HOPS, 0, &reply);
            f[0..6].copy_from_slice(to_mac.as_bytes());
            f[6..12].copy_from_slice(info.mac.as_bytes());
            ctx.create(self.origin());
            self.replies_sent += 1;
            ctx.send(port, f);
        } else {
            ctx.deliver(Sink::from_origin(self.origin()));
            let key = (port, target);
            let Some(mac) = ll.filter(|m| m.is_unicast()) else {
                return;
            };
            if mine || !on_link(target) || !self.knows(key) {
                return;
            }
            let known = self.resolved_mac(key);
            if known.is_some_and(|m| m != mac) && msg[4] & FLAG_OVERRIDE == 0 {
                // §7.2.5: without override, a known MAC is not replaced.
                return;
            }
            if msg[4] & FLAG_SOLICITED != 0 {
                self.learn(port, key, mac, ctx);
            } else {
                self.learn_stale(port, key, mac, ctx);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_read_and_bad_lengths_refused() {
        let mac = [2, 0, 0, 0, 0, 9];
        let mut opts = vec![9, 1, 0, 0, 0, 0, 0, 0, OPT_SOURCE_LL, 1];
        opts.extend_from_slice(&mac);
        assert_eq!(
            link_layer_option(&opts, OPT_SOURCE_LL),
            Ok(Some(EthernetAddress(mac)))
        );
        assert_eq!(link_layer_option(&opts, OPT_TARGET_LL), Ok(None));
        assert_eq!(link_layer_option(&[1, 0, 0, 0, 0, 0, 0, 0], 1), Err(()));
        assert_eq!(link_layer_option(&[1, 2, 0, 0, 0, 0, 0, 0], 1), Err(()));
        assert_eq!(link_layer_option(&[1], 1), Err(()));
    }
}
