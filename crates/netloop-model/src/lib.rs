//! The network model of netloop: packets are real Ethernet frames.
//!
//! The model is sans-I/O and clock-free: time is an argument, nothing here
//! reads a wall clock or touches a file descriptor. The same model runs as fast
//! as possible (tests, plain simulation) and in real time (the I/O layer's
//! scheduler), and exchanges frames with real interfaces through external
//! nodes that the I/O layer drives.
//!
//! A tour:
//! - [`spec`]: the plain-data description of a network ([`NetworkSpec`]).
//! - [`build`]: turns a spec into a [`Simulation`], assigning addresses and
//!   shortest-path routes the spec leaves out.
//! - [`network`]: the event loop between nodes — link queues, transmitters,
//!   channels, arrivals — and the [`network::Node`] types.
//! - [`link`], [`qdisc`]: one link direction's timing and impairments; queue
//!   disciplines behind one small trait.
//! - [`switch`], [`router`], [`host`]: the node types. Hosts carry their
//!   traffic applications ([`apps`]) and run TCP in smoltcp.
//! - [`neighbour`] (with [`arp`] for IPv4 and [`ndp`] for IPv6), [`routing`]:
//!   neighbour caches and longest-prefix match for both families, shared by
//!   routers and hosts; [`ipv4`] and [`reassembly`]: IPv4 header fields,
//!   fragmentation and reassembly, also shared; [`ipv6`]: IPv6 header
//!   fields and extension headers; [`node6`]: what a router's and a host's
//!   IPv6 sides share (addresses, groups, the ICMPv6 they originate);
//!   [`pmtu`]: a host's path MTU cache.
//! - [`stats`], [`results`]: drop reasons, counters, the conservation ledger,
//!   and the versioned JSON results; [`series`]: the counters sampled at an
//!   interval and written as the run goes.

pub mod apps;
pub mod arp;
pub mod build;
pub mod error;
pub mod gso;
pub mod host;
pub mod ipv4;
pub mod ipv6;
pub mod link;
pub mod memo;
pub mod msgtcp;
pub mod ndp;
pub mod neighbour;
pub mod network;
pub mod node;
pub mod node6;
pub mod partition;
pub mod pmtu;
pub mod qdisc;
pub mod reassembly;
pub mod results;
pub mod router;
pub mod routing;
pub mod series;
pub mod share;
pub mod spec;
pub mod stats;
pub mod switch;
pub mod trace;
pub mod wire;

pub use build::Simulation;
pub use error::{BuildError, ItemRef};
pub use spec::NetworkSpec;

/// A frame: the bytes of an Ethernet frame, from destination MAC to the end of
/// the payload (no preamble, no FCS), or a GSO super-frame standing for
/// several, with its metadata ([`netloop_core::frame`]).
pub use netloop_core::frame::{Frame, Gso, GsoKind};
/// Index of a node in its network.
pub type NodeId = usize;
/// Index of a port within its node.
pub type PortId = usize;
/// Index of a link in its network.
pub type LinkId = usize;
