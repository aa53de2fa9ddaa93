//! The interface between the network and its nodes.
//!
//! A node sees frames arrive on its ports and timers fire; it answers by
//! sending frames on ports, setting timers and recording what happened to the
//! frames in the conservation ledger — all through a [`NodeCtx`], never by
//! touching links or the event queue itself. That keeps every node type a
//! self-contained state machine that tests can drive directly.
//!
//! Ledger duties of a node: `create` for every frame it brings into existence
//! (not for frames it forwards), `deliver` for every frame it consumes,
//! `drop_frame` with a reason for every frame it discards.

use netloop_core::SimTime;
use smoltcp::wire::EthernetAddress;
use std::net::Ipv6Addr;

use crate::spec::{Ipv4Cidr, Ipv6Cidr};
use crate::stats::{DropReason, Ledger, Origin, Sink};
use crate::{Frame, LinkId, PortId};

/// What a node knows about one of its ports.
#[derive(Clone, Debug)]
pub struct PortInfo {
    /// The port's MAC address.
    pub mac: EthernetAddress,
    /// Its IPv4 address, if it has one (switch ports don't).
    pub addr: Option<Ipv4Cidr>,
    /// Its global IPv6 address, if the network has IPv6 (its link-local
    /// address is [`PortInfo::link_local`]).
    pub addr6: Option<Ipv6Cidr>,
    /// MTU of the attached link (largest IP packet), in bytes.
    pub mtu: u32,
    /// The link it is attached to.
    pub link: LinkId,
    /// The port's interface name, e.g. `eth0`.
    pub name: String,
}

impl PortInfo {
    /// The port's IPv6 link-local address, `fe80::` with the interface
    /// identifier made from its MAC (modified EUI-64, RFC 4291 appendix A),
    /// as Linux makes it.
    pub fn link_local(&self) -> Ipv6Addr {
        let m = self.mac.0;
        Ipv6Addr::from([
            0xfe,
            0x80,
            0,
            0,
            0,
            0,
            0,
            0,
            m[0] ^ 0x02,
            m[1],
            m[2],
            0xff,
            0xfe,
            m[3],
            m[4],
            m[5],
        ])
    }
}

/// A node's window onto the network while it handles one event.
pub struct NodeCtx<'a> {
    /// The current simulated time.
    pub now: SimTime,
    pub(crate) out: &'a mut Vec<(PortId, Frame)>,
    pub(crate) timers: &'a mut Vec<(SimTime, u64)>,
    pub(crate) ledger: &'a mut Ledger,
}

impl<'a> NodeCtx<'a> {
    /// A context writing into the given buffers (for tests that drive a node
    /// directly).
    pub fn new(
        now: SimTime,
        out: &'a mut Vec<(PortId, Frame)>,
        timers: &'a mut Vec<(SimTime, u64)>,
        ledger: &'a mut Ledger,
    ) -> Self {
        NodeCtx {
            now,
            out,
            timers,
            ledger,
        }
    }
    /// Sends `frame` out of `port`.
    #[inline]
    pub fn send(&mut self, port: PortId, frame: Frame) {
        self.out.push((port, frame));
    }
    /// Asks for [`crate::network`] to call the node's timer handler with
    /// `token` at `at`. Nodes ignore timers they no longer want.
    #[inline]
    pub fn timer(&mut self, at: SimTime, token: u64) {
        self.timers.push((at.max(self.now), token));
    }
    /// Records a frame this node created.
    #[inline]
    pub fn create(&mut self, origin: Origin) {
        self.ledger.create(origin);
    }
    /// Records a frame this node consumed.
    #[inline]
    pub fn deliver(&mut self, sink: Sink) {
        self.ledger.deliver(sink);
    }
    /// Records a frame this node dropped.
    #[inline]
    pub fn drop_frame(&mut self, reason: DropReason) {
        self.ledger.drop_frame(reason);
    }
    /// Records `n` frames this node consumed at once (the fragments of a
    /// reassembled datagram, the segments of a super-frame).
    #[inline]
    pub fn deliver_n(&mut self, sink: Sink, n: u64) {
        self.ledger.deliver_n(sink, n);
    }
    /// Records `n` frames this node dropped at once (the fragments of a
    /// datagram given up, the segments of a super-frame).
    #[inline]
    pub fn drop_n(&mut self, reason: DropReason, n: u64) {
        self.ledger.drop_n(reason, n);
    }
}

/// The most nodes a network may have: [`mac_for`] tells 2^24 apart.
pub const MAX_NODES: usize = 1 << 24;

/// The most ports a node may have: [`mac_for`] tells 2^16 apart.
pub const MAX_PORTS: usize = 1 << 16;

/// A deterministic MAC address for port `port` of node `node`: locally
/// administered unicast (02:…), unique within a network of up to
/// [`MAX_NODES`] nodes with up to [`MAX_PORTS`] ports each.
pub fn mac_for(node: usize, port: usize) -> EthernetAddress {
    let (n, p) = (node as u32, port as u16);
    EthernetAddress([
        0x02,
        (n >> 16) as u8,
        (n >> 8) as u8,
        n as u8,
        (p >> 8) as u8,
        p as u8,
    ])
}
