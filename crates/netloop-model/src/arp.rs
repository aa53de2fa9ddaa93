//! ARP (RFC 826): IPv4's neighbour resolution, on the cache of
//! [`crate::neighbour`].

use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol,
    EthernetRepr,
};
use std::net::Ipv4Addr;

pub use crate::neighbour::{NeighbourConfig as ArpConfig, NEIGHBOUR_TIMER as ARP_TIMER};
use crate::neighbour::{Neighbours, Protocol};
use crate::node::{NodeCtx, PortInfo};
use crate::stats::DropReason;
use crate::{Frame, PortId};

/// IPv4 over Ethernet: requests to the broadcast address.
pub struct ArpProto;

impl Protocol for ArpProto {
    type Addr = Ipv4Addr;
    fn solicit(info: &PortInfo, target: Ipv4Addr) -> Option<Frame> {
        let me = info.addr?;
        Some(arp_frame(
            ArpOperation::Request,
            info.mac,
            me.addr,
            EthernetAddress::BROADCAST,
            target,
        ))
    }
}

/// An IPv4 neighbour cache.
pub type Arp = Neighbours<ArpProto>;

/// Builds an ARP frame.
fn arp_frame(
    op: ArpOperation,
    src_mac: EthernetAddress,
    src_ip: Ipv4Addr,
    dst_mac: EthernetAddress,
    dst_ip: Ipv4Addr,
) -> Frame {
    let arp = ArpRepr::EthernetIpv4 {
        operation: op,
        source_hardware_addr: src_mac,
        source_protocol_addr: src_ip,
        target_hardware_addr: if op == ArpOperation::Request {
            EthernetAddress([0; 6])
        } else {
            dst_mac
        },
        target_protocol_addr: dst_ip,
    };
    let eth = EthernetRepr {
        src_addr: src_mac,
        dst_addr: if op == ArpOperation::Request {
            EthernetAddress::BROADCAST
        } else {
            dst_mac
        },
        ethertype: EthernetProtocol::Arp,
    };
    let mut buf = Frame::zeroed(eth.buffer_len() + arp.buffer_len());
    let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
    eth.emit(&mut f);
    arp.emit(&mut ArpPacket::new_unchecked(f.payload_mut()));
    buf
}

impl Neighbours<ArpProto> {
    /// Handles an ARP frame that arrived on `port` (the whole Ethernet frame).
    /// Consumes it: the caller must not count it again.
    pub fn receive(&mut self, port: PortId, info: &PortInfo, frame: &[u8], ctx: &mut NodeCtx) {
        let repr = EthernetFrame::new_checked(frame).ok().and_then(|f| {
            ArpPacket::new_checked(f.payload())
                .ok()
                .and_then(|p| ArpRepr::parse(&p).ok())
        });
        let Some(ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr: smac,
            source_protocol_addr: sip,
            target_protocol_addr: tip,
            ..
        }) = repr
        else {
            ctx.drop_frame(DropReason::Malformed);
            return;
        };
        let Some(me) = info.addr else {
            ctx.drop_frame(DropReason::NotForUs);
            return;
        };
        ctx.deliver(crate::stats::Sink::from_origin(self.origin()));
        // RFC 826's merge rule: update an entry we already have; add one only
        // if the packet is for us. Only neighbours on our own subnet with a
        // unicast MAC: overheard broadcasts must not fill the table.
        let for_us = tip == me.addr;
        if me.contains(sip) && smac.is_unicast() && sip != me.addr && (for_us || self.knows(sip)) {
            self.learn(port, sip, smac, ctx);
        }
        if operation == ArpOperation::Request && tip == me.addr {
            ctx.create(self.origin());
            self.replies_sent += 1;
            ctx.send(
                port,
                arp_frame(ArpOperation::Reply, info.mac, me.addr, smac, sip),
            );
        }
    }
}
