//! Simulated hosts: an Ethernet/ARP/IPv4 edge written here, TCP (and
//! port-unreachable) from smoltcp running in simulated time, and the traffic
//! applications.
//!
//! Why the split: smoltcp is a well-kept, RFC-following TCP/IP stack and TCP is
//! not something to write again. But its interface polls every socket on every
//! packet, which would make thousands of simulated UDP flows cost thousands of
//! socket checks per packet. So UDP probes, pings and traceroute probes take a
//! fast path here — built with smoltcp's `wire` types and demultiplexed by
//! port in a hash map — and everything else (TCP, UDP to closed ports) goes
//! to smoltcp, configured with `Medium::Ip`: this module owns the Ethernet
//! header, ARP and the routing table, smoltcp owns the transport.
//!
//! The IP layer is this module's too, and behaves as Linux's does:
//! - **Reassembly** of every fragmented datagram before anything else sees it
//!   ([`crate::reassembly`]), so the fast path and smoltcp only get whole
//!   datagrams; a datagram given up after 30 s is answered with ICMP
//!   time-exceeded (code 1) if its first fragment came, as Linux does.
//! - **Echo replies** to pings of the host's addresses, of any size (smoltcp
//!   would build a reply too large for the link and then drop it silently).
//! - **Path MTU discovery** (RFC 1191, [`crate::pmtu`]): fragmentation-needed
//!   lowers the path MTU to the destination; the host's TCP connections to
//!   it lower their segment size and send again at once what was lost
//!   (smoltcp's `reduce_mss`, a patch of ours: `vendor/README.md`).
//! - **Fragmentation and Don't Fragment** on every packet sent
//!   (`send_ip`): a datagram that fits the path MTU carries DF; a larger one
//!   is fragmented to it without DF (Linux's `IP_PMTUDISC_WANT`, the default
//!   for UDP, ping and TCP sockets); ICMP the host answers with never carries
//!   DF (Linux's ICMP socket uses `IP_PMTUDISC_DONT`). A packet without DF
//!   gets an identification from the host's counter (smoltcp leaves it 0,
//!   which would mix up the fragments of different datagrams).
//!
//! Time reaches smoltcp as an argument (microsecond resolution, its unit);
//! the host asks for a timer at smoltcp's `poll_at`.
//!
//! IPv6 (in a dual-stack network) is the host's too, on [`crate::node6`],
//! with the same rules where IPv6 has them:
//! - it answers neighbour discovery and pings of its addresses, and UDP to
//!   a port with no application with port unreachable (so `traceroute -6`
//!   to it ends there); smoltcp's TCP runs over IPv6 as over IPv4, and
//!   every traffic kind may be IPv6 (`[[traffic]] ipv6 = true`);
//! - fragments are reassembled ([`crate::reassembly`], 60 s, then ICMPv6
//!   time exceeded code 1 if the first fragment came), as at a router
//!   (RFC 7112's first fragments and RFC 6980's unfragmented neighbour
//!   discovery included);
//! - path MTU discovery (RFC 8201): Packet Too Big lowers the path MTU
//!   (never below 1280) and the TCP segment size, as fragmentation-needed
//!   does for IPv4; a packet larger than the path MTU is fragmented here
//!   (IPv6 routers never fragment), echo replies included;
//! - UDP with a zero checksum is dropped (`bad_checksum`: mandatory over
//!   IPv6, RFC 8200 §8.1), as are UDP and TCP to a multicast group and TCP
//!   to a link-local address (`unsupported`: smoltcp holds the global
//!   addresses only); TCP reaches smoltcp without extension headers, which
//!   smoltcp does not read and which say nothing to it.

use netloop_core::SimTime;
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;
use smoltcp::iface::{Config, Interface, SocketSet};
use smoltcp::phy::{self, Device, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, HardwareAddress, Icmpv4Message, Icmpv4Packet,
    IpCidr, IpProtocol, Ipv4Packet, Ipv4Repr, UdpPacket,
};
use std::cell::Cell;
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::apps::{self, App, Hop, TcpMode};
use crate::arp::{Arp, ArpConfig, ARP_TIMER};
use crate::ipv4::{self, IP_HEADER};
use crate::ipv6::IPV6_HEADER;
use crate::ipv6::{self, next};
use crate::link::ETH_HEADER;
use crate::ndp;
use crate::node::{NodeCtx, PortInfo};
use crate::node6::{Node6, Reassembled, ECHO_REPLY, ECHO_REQUEST, ORIGINATED_HOPS, TIME_EXCEEDED};
use crate::pmtu::PmtuCache;
use crate::reassembly::{Outcome, Reassembler};
use crate::routing::{RoutingTable, RoutingTable6};
use crate::stats::{DropReason, Origin, Sink};
use crate::{Frame, PortId};

/// The most addresses a host has (both families, all ports): what its
/// smoltcp interface holds (the `iface-max-addr-count-8` feature).
pub const MAX_ADDRESSES: usize = 8;
/// Timer token for smoltcp's next poll.
pub const POLL_TIMER: u64 = 1 << 62;
/// Timer token for giving up datagrams not reassembled in time.
const REASSEMBLY_TIMER: u64 = 1 << 61;
/// IP and TCP headers without options: a path MTU less this is the largest
/// TCP segment (smoltcp sends no TCP options after the handshake).
const TCP_IP_HEADERS: u32 = 40;
/// The same over IPv6.
const TCP_IPV6_HEADERS: u32 = 60;
/// ICMPv6 types the host reads (RFC 4443).
const ICMPV6_DST_UNREACHABLE: u8 = 1;
const ICMPV6_PACKET_TOO_BIG: u8 = 2;
/// Cache lines of a host the scheduler's hint loads before a frame arrives:
/// those of the fields every UDP datagram received touches (see
/// [`Host`]'s layout).
pub const HINT_RX_LINES: usize = 3;
/// The same before a timer: the fields every UDP datagram sent touches.
pub const HINT_TX_LINES: usize = 4;
/// Application timer tokens carry a generation in bits 32..48.
const APP_MASK: u64 = 0xffff_ffff;
/// TTL of packets the host originates.
const DEFAULT_TTL: u8 = 64;
/// Frames that may wait for smoltcp before it polls (it polls at once, so
/// this bound is only reached by a burst within one event).
const MAX_STACK_QUEUE: usize = 4096;
/// Classic traceroute base port (probe for TTL t goes to BASE + t - 1).
const TRACEROUTE_BASE_PORT: u16 = 33434;

/// smoltcp's view of the host's network: IP packets in, IP packets out.
struct StackDevice {
    rx: VecDeque<Frame>,
    /// Packets smoltcp sent, each behind room for the Ethernet header.
    tx: Vec<Frame>,
    mtu: usize,
}

struct RxTok(Frame);
struct TxTok<'a>(&'a mut Vec<Frame>);

impl phy::RxToken for RxTok {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl phy::TxToken for TxTok<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        // Room for the Ethernet header in front, so that framing the
        // packet copies nothing.
        let mut buf = Frame::zeroed(ETH_HEADER + len);
        let r = f(&mut buf[ETH_HEADER..]);
        self.0.push(buf);
        r
    }
}

impl Device for StackDevice {
    type RxToken<'a> = RxTok;
    type TxToken<'a> = TxTok<'a>;
    fn receive(&mut self, _t: Instant) -> Option<(RxTok, TxTok<'_>)> {
        let p = self.rx.pop_front()?;
        Some((RxTok(p), TxTok(&mut self.tx)))
    }
    fn transmit(&mut self, _t: Instant) -> Option<TxTok<'_>> {
        Some(TxTok(&mut self.tx))
    }
    fn capabilities(&self) -> DeviceCapabilities {
        let mut c = DeviceCapabilities::default();
        c.medium = Medium::Ip;
        c.max_transmission_unit = self.mtu;
        c
    }
}

fn smol_now(t: SimTime) -> Instant {
    Instant::from_micros((t.as_nanos() / 1_000) as i64)
}

/// Whether a packet the host sends may carry Don't Fragment.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Df {
    /// Linux's `IP_PMTUDISC_WANT`: DF if it fits the path MTU, else
    /// fragmented without it.
    Want,
    /// Linux's `IP_PMTUDISC_DONT`: never DF (ICMP the host answers with).
    Dont,
}

/// Addressing of an outgoing UDP datagram.
struct UdpTo {
    sport: u16,
    dst: IpAddr,
    dport: u16,
    ttl: u8,
}

/// What the fast path did with a packet.
enum Fast {
    /// Consumed by one of netloop's applications.
    Taken,
    /// Dropped, for this reason.
    Dropped(DropReason),
    /// Not for the fast path: smoltcp's.
    Stack,
}

/// A datagram for message endpoint `e`, from `from`, whose checksum
/// verified: kept as a message if the inbox has room.
fn endpoint_in(e: &mut apps::MessageEndpoint, from: SocketAddr, data: &[u8], now: SimTime) -> Fast {
    if e.inbox.len() >= apps::ENDPOINT_INBOX {
        e.stats.inbox_full += 1;
        return Fast::Dropped(DropReason::HostQueueFull);
    }
    let data = data.to_vec();
    e.stats.received += 1;
    e.stats.received_bytes += data.len() as u64;
    e.inbox.push_back(apps::Message {
        at: now,
        from,
        data,
    });
    Fast::Taken
}

/// Writes an echo message's header (`ty`, code 0, checksum 0, `ident`,
/// `seq`) at the start of `msg`, whose data is left as it is.
fn write_echo(msg: &mut [u8], ty: u8, ident: u16, seq: u16) {
    msg[0] = ty;
    msg[1..4].fill(0);
    msg[4..6].copy_from_slice(&ident.to_be_bytes());
    msg[6..8].copy_from_slice(&seq.to_be_bytes());
}

/// Host counters.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HostStats {
    /// Frames received on any port.
    pub frames_received: u64,
    /// IP packets sent (before ARP).
    pub packets_sent: u64,
    /// Packets handed to smoltcp.
    pub to_stack: u64,
    /// Datagrams the host fragmented because they did not fit the path MTU.
    pub fragmented: u64,
    /// Fragments made beyond the first (the datagram becomes the first).
    pub fragments_created: u64,
    /// Datagrams reassembled from fragments.
    pub reassembled: u64,
    /// ICMP fragmentation-needed messages that lowered a path MTU.
    pub path_mtu_lowered: u64,
    /// ICMP and ICMPv6 echo replies sent.
    pub echo_replies: u64,
}

/// A route as a host uses it: the port, the source address, the next hop.
type HostRoute = (PortId, Ipv4Addr, Ipv4Addr);
/// The same over IPv6.
type HostRoute6 = (PortId, Ipv6Addr, Ipv6Addr);

/// A simulated host.
///
/// Laid out in declaration order (`repr(C)`), what a packet sent or
/// received touches first: a UDP datagram received reads the first three
/// cache lines (`HINT_RX_LINES`), one sent the first four
/// (`HINT_TX_LINES`), the ones the scheduler's prefetch hint loads before
/// the host's event runs ([`netloop_core::Model::prefetch`]). Left to the
/// compiler, the fields a UDP datagram needs were spread over the 26 lines
/// of a host (its applications' vector was in the twentieth), and with
/// thousands of hosts each was a miss the hint did not cover; and a hint of
/// eight lines for every event loaded lines no event read, which with
/// thousands of hosts bounded the run (docs/speed.md).
#[repr(C, align(64))]
pub struct Host {
    // Hot: every datagram received reads what comes before `route_cache`
    // (`HINT_RX_LINES`), every one sent also what comes before `arp` and
    // the memo at its start (`HINT_TX_LINES`).
    apps: Vec<App>,
    /// Local UDP port → application (sinks, traceroute).
    udp_apps: HashMap<u16, usize>,
    /// The last UDP port looked up in `udp_apps` and its application, for
    /// the same reason as `route_cache` (cleared whenever `udp_apps`
    /// changes). The application's index in 32 bits, and `ident` beside
    /// it, in what would be padding: what a datagram sent touches then
    /// ends within four lines.
    udp_cache: Cell<Option<(u16, u32)>>,
    ident: u16,
    ports: Vec<PortInfo>,
    /// Counters.
    pub stats: HostStats,
    /// The last destination routed and its route (port, source address,
    /// next hop): a host sends to few destinations, mostly one after
    /// another, and its table and addresses never change after it is
    /// built, so the answer stays right. Kept in the host itself, whose
    /// first lines the scheduler prefetches: the table's maps are
    /// allocations of their own, three cache misses per packet on a network
    /// of thousands of hosts (cachegrind).
    route_cache: Cell<Option<(Ipv4Addr, HostRoute)>>,
    /// Path MTUs learned from fragmentation-needed.
    pmtu: PmtuCache,
    /// Its neighbour cache, whose memo of the last answers comes first.
    arp: Arp,
    next_poll: Option<SimTime>,
    /// When the reassembly timer is set for, if it is.
    reassembly_timer: Option<SimTime>,
    table: RoutingTable,
    // Cold: IPv6, TCP (smoltcp), ICMP, fragments.
    /// Its IPv6 side (addresses, table, neighbours), if the network has
    /// IPv6.
    v6: Node6,
    iface: Interface,
    device: StackDevice,
    sockets: SocketSet<'static>,
    /// ICMP echo identifier → ping application.
    icmp_apps: HashMap<u16, usize>,
    /// Applications with TCP sockets.
    tcp_apps: Vec<usize>,
    /// The vector smoltcp's packets are taken out in, kept between polls.
    tx_spare: Vec<Frame>,
    /// Fragments waiting for the rest of their datagram.
    reassembly: Reassembler,
    /// The same as `route_cache` for IPv6.
    route_cache6: Cell<Option<(Ipv6Addr, HostRoute6)>>,
}

impl Host {
    /// A host with `ports`, routing tables `table` (IPv4) and `table6`
    /// (IPv6), whose smoltcp stack is seeded with `seed` (initial sequence
    /// numbers, ports).
    pub fn new(
        ports: Vec<PortInfo>,
        table: RoutingTable,
        table6: RoutingTable6,
        seed: u64,
    ) -> Self {
        let mtu = ports.iter().map(|p| p.mtu as usize).min().unwrap_or(1500);
        let mut device = StackDevice {
            rx: VecDeque::new(),
            tx: Vec::new(),
            mtu,
        };
        let mut config = Config::new(HardwareAddress::Ip);
        config.random_seed = seed;
        let mut iface = Interface::new(config, &mut device, Instant::from_micros(0));
        iface.update_ip_addrs(|addrs| {
            let v4 = ports.iter().filter_map(|p| p.addr);
            let v4 = v4.map(|a| IpCidr::new(a.addr.into(), a.prefix));
            let v6 = ports.iter().filter_map(|p| p.addr6);
            let v6 = v6.map(|a| IpCidr::new(a.addr.into(), a.prefix));
            for a in v4.chain(v6) {
                // The build refuses hosts with more than MAX_ADDRESSES.
                addrs.push(a).expect("at most MAX_ADDRESSES addresses");
            }
        });
        // smoltcp wants a gateway for off-subnet destinations; with Medium::Ip
        // it is never resolved, and our own table picks the real next hop.
        if let Some(a) = ports.iter().find_map(|p| p.addr) {
            let _ = iface.routes_mut().add_default_ipv4_route(a.addr);
        }
        if let Some(a) = ports.iter().find_map(|p| p.addr6) {
            let _ = iface.routes_mut().add_default_ipv6_route(a.addr);
        }
        let v6 = Node6::new(&ports, table6, false, Origin::Host);
        Host {
            ports,
            table,
            arp: Arp::new(ArpConfig::default(), Origin::Host),
            v6,
            iface,
            device,
            sockets: SocketSet::new(Vec::new()),
            apps: Vec::new(),
            udp_apps: HashMap::default(),
            icmp_apps: HashMap::default(),
            tcp_apps: Vec::new(),
            next_poll: None,
            tx_spare: Vec::new(),
            ident: 0,
            reassembly: Reassembler::default(),
            reassembly_timer: None,
            pmtu: PmtuCache::default(),
            route_cache: Cell::new(None),
            route_cache6: Cell::new(None),
            udp_cache: Cell::new(None),
            stats: HostStats::default(),
        }
    }

    /// The host's ports.
    pub fn ports(&self) -> &[PortInfo] {
        &self.ports
    }
    /// The host's routing table.
    pub fn table(&self) -> &RoutingTable {
        &self.table
    }
    /// The host's IPv6 routing table.
    pub fn table6(&self) -> &RoutingTable6 {
        &self.v6.table
    }
    /// The host's applications.
    pub fn apps(&self) -> &[App] {
        &self.apps
    }
    /// The first IPv4 address of the host.
    pub fn address(&self) -> Option<Ipv4Addr> {
        self.ports.iter().find_map(|p| p.addr.map(|a| a.addr))
    }

    /// Adds an application; returns its index, which is also the timer token
    /// that starts it. Sockets are created here; sources start when their
    /// token fires.
    pub fn add_app(&mut self, mut app: App, tcp_buffer: usize) -> usize {
        let idx = self.apps.len();
        match &mut app {
            App::UdpSink(_) | App::UdpSource(_) => {}
            App::Endpoint(e) => {
                if let Some(t) = &mut e.tcp {
                    t.start(&mut self.sockets, tcp_buffer);
                    self.tcp_apps.push(idx);
                } else {
                    self.udp_apps.insert(e.port, idx);
                    self.udp_cache.set(None);
                }
            }
            App::Traceroute(t) => {
                self.udp_apps.insert(t.src_port, idx);
                self.udp_cache.set(None);
            }
            App::Ping(p) => {
                self.icmp_apps.insert(p.ident, idx);
            }
            App::TcpClient(c) => {
                let s = new_tcp_socket(tcp_buffer, matches!(c.mode, TcpMode::Rr { .. }));
                c.handle = self.sockets.add(s);
                self.tcp_apps.push(idx);
            }
            App::TcpServer(sv) => {
                let mut s = new_tcp_socket(tcp_buffer, matches!(sv.mode, TcpMode::Rr { .. }));
                let _ = s.listen(sv.port);
                sv.handle = self.sockets.add(s);
                self.tcp_apps.push(idx);
            }
        }
        self.apps.push(app);
        idx
    }

    /// Binds UDP port `port` to application `idx` (sinks).
    pub fn bind_udp(&mut self, port: u16, idx: usize) {
        self.udp_apps.insert(port, idx);
        self.udp_cache.set(None);
    }

    /// Sends `data` from message endpoint `idx` to `to` (or the endpoint's
    /// own destination) as one UDP datagram, now.
    pub fn endpoint_send(
        &mut self,
        idx: usize,
        to: Option<std::net::SocketAddr>,
        data: &[u8],
        ctx: &mut NodeCtx,
    ) -> Result<(), apps::SendRefused> {
        // The route first: it borrows the whole host.
        let route = |to: std::net::SocketAddr| match to.ip() {
            IpAddr::V4(a) => self.route(a).is_some(),
            IpAddr::V6(a) => self.route6(a).is_some(),
        };
        let (dst, routed) = match self.apps.get(idx) {
            Some(App::Endpoint(e)) => {
                let dst = to.or(e.to);
                (dst, dst.is_some_and(route))
            }
            _ => return Err(apps::SendRefused::NotAnEndpoint),
        };
        let Some(App::Endpoint(e)) = self.apps.get_mut(idx) else {
            unreachable!("looked up above")
        };
        let Some(to) = dst else {
            e.stats.refused_no_destination += 1;
            return Err(apps::SendRefused::NoDestination);
        };
        if !routed {
            e.stats.refused_no_route += 1;
            return Err(apps::SendRefused::NoRoute(to.ip()));
        }
        if let Some(t) = &mut e.tcp {
            let sent = t.send(
                &mut self.sockets,
                self.iface.context(),
                to,
                data,
                &mut e.stats,
            );
            if sent.is_ok() {
                self.poll(ctx);
            }
            return sent;
        }
        if data.len() > apps::MAX_MESSAGE {
            e.stats.refused_too_large += 1;
            return Err(apps::SendRefused::TooLarge {
                size: data.len(),
                max: apps::MAX_MESSAGE,
            });
        }
        e.stats.sent += 1;
        e.stats.sent_bytes += data.len() as u64;
        let sport = e.port;
        let udp_to = UdpTo {
            sport,
            dst: to.ip(),
            dport: to.port(),
            ttl: DEFAULT_TTL,
        };
        self.send_udp(
            udp_to,
            data.len(),
            |b| {
                b.copy_from_slice(data);
                data.len()
            },
            ctx,
        );
        Ok(())
    }

    /// Lets the TCP endpoints read what they held back while their inboxes
    /// were full (see [`crate::network::Network::take_endpoint`]).
    pub fn resume(&mut self, ctx: &mut NodeCtx) {
        self.poll(ctx);
    }

    /// Message endpoint `idx`, if it is one.
    pub fn endpoint_mut(&mut self, idx: usize) -> Option<&mut apps::MessageEndpoint> {
        match self.apps.get_mut(idx) {
            Some(App::Endpoint(e)) => Some(e),
            _ => None,
        }
    }

    /// The application bound to UDP port `port`, if any.
    fn udp_app(&self, port: u16) -> Option<usize> {
        if let Some((p, idx)) = self.udp_cache.get() {
            if p == port {
                return Some(idx as usize);
            }
        }
        let idx = *self.udp_apps.get(&port)?;
        // A host has far fewer than 2^32 applications; one that did not
        // fit is looked up in the map every time.
        if let Ok(i) = u32::try_from(idx) {
            self.udp_cache.set(Some((port, i)));
        }
        Some(idx)
    }

    fn is_mine(&self, ip: Ipv4Addr) -> bool {
        ip.is_broadcast()
            || self.ports.iter().any(|p| {
                p.addr.is_some_and(|a| {
                    a.addr == ip
                        || (a.prefix < 31
                            && ip == Ipv4Addr::from(u32::from(a.network()) | !a.mask()))
                })
            })
    }

    /// A static neighbour entry: `ip` is at `mac` behind `port`, for the
    /// whole run (`[run] static_neighbours`). False if the table is full.
    pub fn add_static_neighbour(&mut self, port: PortId, ip: IpAddr, mac: EthernetAddress) -> bool {
        match ip {
            IpAddr::V4(a) => self.arp.add_static(port, a, mac),
            IpAddr::V6(a) => self.v6.ndp.add_static(port, (port, a), mac),
        }
    }

    /// Frames held by the host: waiting for ARP, and fragments waiting for
    /// the rest of their datagram.
    pub fn in_flight(&self) -> u64 {
        self.arp.in_flight() + self.v6.ndp.in_flight() + self.reassembly.held_frames()
    }

    /// Whether `ip` is one of the host's own unicast addresses.
    fn is_own(&self, ip: Ipv4Addr) -> bool {
        self.ports
            .iter()
            .any(|p| p.addr.is_some_and(|a| a.addr == ip))
    }

    /// Handles a frame arriving on `port`.
    pub fn receive(&mut self, port: PortId, frame: Frame, ctx: &mut NodeCtx) {
        if frame.is_super() {
            // smoltcp takes wire frames.
            crate::gso::cut(frame, &mut |seg| self.receive(port, seg, ctx));
            return;
        }
        self.stats.frames_received += 1;
        let Ok(eth) = EthernetFrame::new_checked(&frame[..]) else {
            ctx.drop_frame(DropReason::Malformed);
            return;
        };
        let dst = eth.dst_addr();
        if dst != self.ports[port].mac
            && !dst.is_broadcast()
            && !self.v6.listens(&self.ports[port], dst)
        {
            ctx.drop_frame(if dst.is_multicast() {
                DropReason::Unsupported
            } else {
                DropReason::NotForUs
            });
            return;
        }
        match eth.ethertype() {
            EthernetProtocol::Arp => self.arp.receive(port, &self.ports[port], &frame, ctx),
            EthernetProtocol::Ipv4 => self.ipv4_in(frame, ctx),
            EthernetProtocol::Ipv6 => self.ipv6_in(port, frame, ctx),
            _ => ctx.drop_frame(DropReason::Unsupported),
        }
    }

    /// An IPv6 frame that came in by `port` (see the module docs for what
    /// the host does with IPv6).
    fn ipv6_in(&mut self, port: PortId, mut frame: Frame, ctx: &mut NodeCtx) {
        if !self.v6.enabled() {
            ctx.drop_frame(DropReason::Unsupported);
            return;
        }
        let total = match ipv6::validate(&frame[ETH_HEADER..]) {
            Ok(t) => t,
            Err(reason) => {
                ctx.drop_frame(reason);
                return;
            }
        };
        frame.truncate(ETH_HEADER + total);
        let ip = &frame[ETH_HEADER..];
        let (src, dst) = (ipv6::src_addr(ip), ipv6::dst_addr(ip));
        let info = &self.ports[port];
        let group = self.v6.in_group(info, dst);
        if !Node6::source_ok(src, group) {
            ctx.drop_frame(DropReason::Martian);
            return;
        }
        // Hosts don't forward.
        if !group && !self.v6.is_own_on(info, dst) {
            ctx.drop_frame(DropReason::NotForUs);
            return;
        }
        let Some(upper) = Node6::upper_layer(ip, ctx) else {
            return;
        };
        let Some(at) = upper.fragment_at else {
            self.packet6_in(port, frame, upper, 1, ctx);
            return;
        };
        match Node6::reassemble(&mut self.reassembly, &frame, at, ctx) {
            Reassembled::Held => self.arm_reassembly_timer(ctx),
            Reassembled::Whole(whole, upper, frames) => {
                self.stats.reassembled += 1;
                self.packet6_in(port, whole, upper, frames, ctx);
            }
            Reassembled::Gone => {}
        }
    }

    /// A whole IPv6 packet for the host that came in by `port` in `frames`
    /// frames, whose upper layer is `upper`.
    fn packet6_in(
        &mut self,
        port: PortId,
        frame: Frame,
        upper: ipv6::UpperLayer,
        frames: u64,
        ctx: &mut NodeCtx,
    ) {
        let ip = &frame[ETH_HEADER..];
        let (src, dst) = (ipv6::src_addr(ip), ipv6::dst_addr(ip));
        let unicast = self.v6.is_own(dst);
        match upper.proto {
            next::ICMPV6 => {
                let msg = &ip[upper.offset..];
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
                    let info = &self.ports[port];
                    self.v6
                        .ndp
                        .receive(port, info, &frame, upper.offset, false, ctx);
                    return;
                }
                ctx.deliver_n(Sink::Host, frames);
                match msg[0] {
                    ECHO_REPLY if msg.len() >= 8 && unicast => {
                        // A reply to one of the host's pings (by identifier).
                        let ident = u16::from_be_bytes([msg[4], msg[5]]);
                        let seq = u16::from_be_bytes([msg[6], msg[7]]);
                        self.echo_replied(ident, seq, ctx.now);
                    }
                    ECHO_REQUEST if msg[1] == 0 && msg.len() >= 8 => {
                        let tclass = ipv6::traffic_class(ip);
                        if unicast && !ipv6::is_link_local(src) {
                            // Routed, from the address pinged, within the
                            // path MTU the host knows.
                            let frame = ipv6::icmp_frame_with(
                                dst,
                                src,
                                ORIGINATED_HOPS,
                                tclass,
                                msg.len(),
                                |b| {
                                    b.copy_from_slice(msg);
                                    b[0] = ECHO_REPLY;
                                },
                            );
                            self.send_ip6(src, frame, ctx);
                            self.stats.echo_replies += 1;
                        } else if self
                            .v6
                            .echo_reply(&self.ports, port, src, dst, tclass, msg, ctx)
                        {
                            self.stats.echo_replies += 1;
                        }
                    }
                    ICMPV6_PACKET_TOO_BIG if msg.len() >= 8 + IPV6_HEADER && unicast => {
                        let mtu = u32::from_be_bytes([msg[4], msg[5], msg[6], msg[7]]);
                        self.packet_too_big(mtu, &msg[8..], ctx);
                    }
                    ICMPV6_DST_UNREACHABLE | TIME_EXCEEDED if unicast => {
                        let from = IpAddr::V6(src);
                        let unreachable = msg[0] == ICMPV6_DST_UNREACHABLE;
                        self.probe_answered6(from, unreachable, &msg[8.min(msg.len())..], ctx);
                    }
                    // Other ICMPv6 (errors about TCP, MLD, ...): consumed.
                    _ => {}
                }
            }
            next::UDP if unicast => {
                let udp = &ip[upper.offset..];
                let Ok(dgram) = UdpPacket::new_checked(udp) else {
                    ctx.drop_n(DropReason::Malformed, frames);
                    return;
                };
                // The checksum is not optional over IPv6 (RFC 8200 §8.1).
                if dgram.checksum() == 0 || ipv6::checksum(src, dst, next::UDP, udp) != 0 {
                    if let Some(App::Endpoint(e)) =
                        self.udp_app(dgram.dst_port()).map(|i| &mut self.apps[i])
                    {
                        e.stats.bad_checksum += 1;
                    }
                    ctx.drop_n(DropReason::BadChecksum, frames);
                    return;
                }
                let Some(idx) = self.udp_app(dgram.dst_port()) else {
                    ctx.deliver_n(Sink::Host, frames);
                    // No socket: the port is closed (RFC 4443 §3.1,
                    // destination unreachable, code 4).
                    let msg = ipv6::error_message(ICMPV6_DST_UNREACHABLE, 4, 0, ip);
                    self.v6
                        .originate(&self.ports, src, Some(dst), Some(port), 0, &msg, ctx);
                    return;
                };
                let now = ctx.now;
                let from = SocketAddr::new(src.into(), dgram.src_port());
                let fast = match &mut self.apps[idx] {
                    App::UdpSink(sink) => {
                        let data = dgram.payload();
                        if let Some((_, seq, sent)) = apps::read_probe(data) {
                            sink.stats.record(seq, sent, data.len(), now);
                        }
                        Fast::Taken
                    }
                    App::Endpoint(e) => endpoint_in(e, from, dgram.payload(), now),
                    // A traceroute's own port: nothing listens to what
                    // arrives at it.
                    _ => Fast::Taken,
                };
                match fast {
                    Fast::Dropped(reason) => ctx.drop_n(reason, frames),
                    _ => ctx.deliver_n(Sink::Host, frames),
                }
            }
            // smoltcp has the host's global addresses, not its link-local
            // ones (an interface holds few): TCP to those is refused by
            // name rather than lost inside smoltcp.
            next::TCP if unicast && ipv6::is_link_local(dst) => {
                ctx.drop_n(DropReason::Unsupported, frames)
            }
            next::TCP if unicast => {
                // smoltcp reads no extension headers but its own few: it
                // gets the packet without them (nothing in them is for it:
                // the checksum covers the final destination only).
                let packet = if upper.offset == IPV6_HEADER {
                    let mut f = frame;
                    f.drain(..ETH_HEADER);
                    f
                } else {
                    let mut p = Frame::copy_from(&ip[..IPV6_HEADER]);
                    p[6] = next::TCP;
                    let len = (ip.len() - upper.offset) as u16;
                    p[4..6].copy_from_slice(&len.to_be_bytes());
                    p.extend_from_slice(&ip[upper.offset..]);
                    p
                };
                self.hand_to_stack(packet, frames, ctx);
            }
            // Another protocol, or UDP or TCP to a group.
            _ => ctx.drop_n(DropReason::Unsupported, frames),
        }
    }

    /// Records the answer, sequence number `seq`, to ping `ident`.
    fn echo_replied(&mut self, ident: u16, seq: u16, now: SimTime) {
        if let Some(&idx) = self.icmp_apps.get(&ident) {
            if let App::Ping(p) = &mut self.apps[idx] {
                if let Some(sent) = p.outstanding.remove(&seq) {
                    p.received += 1;
                    p.rtt.record((now - sent).as_nanos());
                }
            }
        }
    }

    /// ICMPv6 Packet Too Big with MTU `mtu` about `quoted`, a packet this
    /// host sent (RFC 8201): lowers the path MTU to its destination, and
    /// the segment size of the TCP connections to it.
    fn packet_too_big(&mut self, mtu: u32, quoted: &[u8], ctx: &mut NodeCtx) {
        if !self.v6.is_own(ipv6::src_addr(quoted)) {
            return;
        }
        let dst = ipv6::dst_addr(quoted);
        if let Some((port, _, _)) = self.route6(dst) {
            self.lower_path_mtu(dst.into(), port, ctx, |c, current, now| {
                c.learn6(dst, mtu, current, now)
            });
        }
    }

    /// An ICMPv6 error from `from` quoting `quoted`: if it is about one of
    /// the host's traceroute probes, the hop it found.
    fn probe_answered6(
        &mut self,
        from: IpAddr,
        unreachable: bool,
        quoted: &[u8],
        ctx: &mut NodeCtx,
    ) {
        // Probes carry no extension headers: UDP right after the header.
        if quoted.len() < IPV6_HEADER + 4 || ipv6::next_header(quoted) != next::UDP {
            return;
        }
        let ports = &quoted[IPV6_HEADER..];
        let sport = u16::from_be_bytes([ports[0], ports[1]]);
        let dport = u16::from_be_bytes([ports[2], ports[3]]);
        self.probe_answered(from, unreachable, sport, dport, ctx);
    }

    /// A whole packet `buf` (an IP packet, nothing before it) for smoltcp,
    /// that arrived in `frames` frames.
    fn hand_to_stack(&mut self, buf: Frame, frames: u64, ctx: &mut NodeCtx) {
        if self.device.rx.len() >= MAX_STACK_QUEUE {
            ctx.drop_n(DropReason::HostQueueFull, frames);
            return;
        }
        ctx.deliver_n(Sink::Host, frames);
        self.stats.to_stack += 1;
        self.device.rx.push_back(buf);
        self.poll(ctx);
    }

    fn ipv4_in(&mut self, frame: Frame, ctx: &mut NodeCtx) {
        let Ok(ip) = Ipv4Packet::new_checked(&frame[ETH_HEADER..]) else {
            ctx.drop_frame(DropReason::Malformed);
            return;
        };
        if !ip.verify_checksum() {
            ctx.drop_frame(DropReason::BadChecksum);
            return;
        }
        // smoltcp's length checks don't look at the version; its parser
        // would discard such a packet silently after we counted it
        // delivered. Malformed, as at a router (checksum first, as there).
        if ip.version() != 4 {
            ctx.drop_frame(DropReason::Malformed);
            return;
        }
        let dst = ip.dst_addr();
        if !self.is_mine(dst) {
            // Hosts don't forward.
            ctx.drop_frame(DropReason::NotForUs);
            return;
        }
        let total = ip.total_len() as usize;
        if !(ip.more_frags() || ip.frag_offset() != 0) {
            let mut frame = frame;
            frame.truncate(ETH_HEADER + total);
            self.datagram_in(frame, ETH_HEADER, 1, ctx);
            return;
        }
        match self
            .reassembly
            .push(&frame[ETH_HEADER..ETH_HEADER + total], ctx.now)
        {
            Outcome::Held => self.arm_reassembly_timer(ctx),
            Outcome::Complete { packet, frames } => {
                self.stats.reassembled += 1;
                self.datagram_in(packet.into(), 0, frames, ctx);
            }
            Outcome::Dropped { reason, frames } => ctx.drop_n(reason, frames),
        }
    }

    /// Presizes the sample sets of this host's applications (see
    /// [`crate::network::Network::presize_samples`]).
    pub fn presize_samples(&mut self) {
        for app in &mut self.apps {
            for s in app.samples_mut() {
                s.presize();
            }
        }
    }

    /// A whole datagram, `buf[start..]`, that arrived in `frames` frames: to
    /// the fast path or to smoltcp.
    fn datagram_in(&mut self, mut buf: Frame, start: usize, frames: u64, ctx: &mut NodeCtx) {
        match self.fast_path(&buf[start..], ctx) {
            Fast::Taken => {
                ctx.deliver_n(Sink::Host, frames);
                return;
            }
            Fast::Dropped(reason) => {
                ctx.drop_n(reason, frames);
                return;
            }
            Fast::Stack => {}
        }
        buf.drain(..start);
        self.hand_to_stack(buf, frames, ctx);
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

    /// Gives up the datagrams not whole in time, telling their senders
    /// (RFC 1122 §3.3.2, as Linux does: ICMP time-exceeded, code 1, when
    /// the first fragment came).
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
                self.v6.reassembly_expired(&self.ports, &quote, 0, ctx);
            } else {
                self.send_icmp_error(11, 1, [0; 4], &quote, ctx);
            }
        }
        self.arm_reassembly_timer(ctx);
    }

    /// Handles packets for netloop's own applications: taken, dropped, or
    /// for smoltcp.
    fn fast_path(&mut self, pkt: &[u8], ctx: &mut NodeCtx) -> Fast {
        let ip = Ipv4Packet::new_unchecked(pkt);
        let hl = ip.header_len() as usize;
        let payload = &pkt[hl..];
        match ip.next_header() {
            IpProtocol::Udp => {
                let Ok(udp) = UdpPacket::new_checked(payload) else {
                    return Fast::Stack;
                };
                let Some(idx) = self.udp_app(udp.dst_port()) else {
                    return Fast::Stack;
                };
                match &mut self.apps[idx] {
                    App::UdpSink(sink) => {
                        let data = udp.payload();
                        if let Some((_, seq, sent)) = apps::read_probe(data) {
                            sink.stats.record(seq, sent, data.len(), ctx.now);
                        }
                        Fast::Taken
                    }
                    App::Endpoint(e) => {
                        // A zero checksum means none was computed (RFC 768).
                        let (src, dst) = (ip.src_addr(), ip.dst_addr());
                        if udp.checksum() != 0 && !udp.verify_checksum(&src.into(), &dst.into()) {
                            e.stats.bad_checksum += 1;
                            return Fast::Dropped(DropReason::BadChecksum);
                        }
                        let from = SocketAddr::new(src.into(), udp.src_port());
                        endpoint_in(e, from, udp.payload(), ctx.now)
                    }
                    _ => Fast::Stack,
                }
            }
            IpProtocol::Icmp => {
                let Ok(icmp) = Icmpv4Packet::new_checked(payload) else {
                    return Fast::Stack;
                };
                match icmp.msg_type() {
                    Icmpv4Message::EchoReply => {
                        if !self.icmp_apps.contains_key(&icmp.echo_ident()) {
                            return Fast::Stack;
                        }
                        self.echo_replied(icmp.echo_ident(), icmp.echo_seq_no(), ctx.now);
                        Fast::Taken
                    }
                    // A bad checksum goes to smoltcp, which discards it.
                    _ if !icmp.verify_checksum() => Fast::Stack,
                    Icmpv4Message::EchoRequest if self.is_own(ip.dst_addr()) => {
                        self.echo_reply(&ip, payload, ctx);
                        Fast::Taken
                    }
                    Icmpv4Message::DstUnreachable if icmp.msg_code() == 4 => {
                        let mtu = u16::from_be_bytes([payload[6], payload[7]]);
                        self.fragmentation_needed(mtu, icmp.data(), ctx);
                        Fast::Taken
                    }
                    Icmpv4Message::TimeExceeded | Icmpv4Message::DstUnreachable => {
                        if self.icmp_error(ip.src_addr(), icmp.msg_type(), icmp.data(), ctx) {
                            Fast::Taken
                        } else {
                            Fast::Stack
                        }
                    }
                    _ => Fast::Stack,
                }
            }
            _ => Fast::Stack,
        }
    }

    /// Answers an echo request (RFC 792) to one of our addresses, from that
    /// address, with its identifier, sequence number and data.
    fn echo_reply(&mut self, ip: &Ipv4Packet<&[u8]>, icmp: &[u8], ctx: &mut NodeCtx) {
        let (src, dst) = (ip.dst_addr(), ip.src_addr());
        let mut frame = Frame::zeroed(ETH_HEADER + IP_HEADER + icmp.len());
        self.ip_header(
            &mut frame,
            src,
            dst,
            IpProtocol::Icmp,
            icmp.len(),
            DEFAULT_TTL,
        );
        let reply = &mut frame[ETH_HEADER + IP_HEADER..];
        reply.copy_from_slice(icmp);
        reply[0] = 0;
        reply[2..4].fill(0);
        let c = ipv4::checksum(reply);
        reply[2..4].copy_from_slice(&c.to_be_bytes());
        self.stats.echo_replies += 1;
        self.send_ip(dst, frame, Df::Dont, ctx);
    }

    /// Sends ICMP error `icmp_type`/`code` with `rest` (the second word)
    /// about `quote` (a header and the start of its data) to its source.
    fn send_icmp_error(
        &mut self,
        icmp_type: u8,
        code: u8,
        rest: [u8; 4],
        quote: &[u8],
        ctx: &mut NodeCtx,
    ) {
        let dst = ipv4::src_addr(quote);
        let Some(src) = self.route(dst).map(|r| r.1) else {
            return;
        };
        let len = 8 + quote.len();
        let mut frame = Frame::zeroed(ETH_HEADER + IP_HEADER + len);
        self.ip_header(&mut frame, src, dst, IpProtocol::Icmp, len, DEFAULT_TTL);
        let msg = &mut frame[ETH_HEADER + IP_HEADER..];
        msg[0] = icmp_type;
        msg[1] = code;
        msg[4..8].copy_from_slice(&rest);
        msg[8..].copy_from_slice(quote);
        let c = ipv4::checksum(msg);
        msg[2..4].copy_from_slice(&c.to_be_bytes());
        self.send_ip(dst, frame, Df::Dont, ctx);
    }

    /// ICMP fragmentation-needed with next-hop MTU `mtu` about `quoted`,
    /// a packet this host sent (RFC 1191): lowers the path MTU to its
    /// destination, and the segment size of the TCP connections to it,
    /// which send again at once what the path dropped.
    fn fragmentation_needed(&mut self, mtu: u16, quoted: &[u8], ctx: &mut NodeCtx) {
        if quoted.len() < IP_HEADER || !self.is_own(ipv4::src_addr(quoted)) {
            return;
        }
        let dst = ipv4::dst_addr(quoted);
        if let Some((port, _, _)) = self.route(dst) {
            self.lower_path_mtu(dst.into(), port, ctx, |c, current, now| {
                c.learn(dst, mtu, current, now)
            });
        }
    }

    /// A report (either family's) that the path to `dst`, left by `port`,
    /// carries less: `learn` puts it in the cache, given the path MTU now;
    /// if that lowered it, the TCP connections to `dst` follow at once.
    fn lower_path_mtu(
        &mut self,
        dst: IpAddr,
        port: PortId,
        ctx: &mut NodeCtx,
        learn: impl FnOnce(&mut PmtuCache, u32, SimTime) -> Option<crate::pmtu::PathMtu>,
    ) {
        let link = self.ports[port].mtu;
        let current = self
            .pmtu
            .get(dst, ctx.now)
            .map_or(link, |p| p.mtu.min(link));
        if learn(&mut self.pmtu, current, ctx.now).is_none() {
            return;
        }
        self.stats.path_mtu_lowered += 1;
        self.sync_path_mss(Some(dst), ctx.now);
        self.poll(ctx);
    }

    /// Lowers the segment size of established TCP connections to the path
    /// MTU learned for their peer (`only`: just those to that peer). A
    /// connection made after the path MTU was learned gets it here too: its
    /// handshake sets the segment size from the peer's MSS option, which
    /// knows nothing of the path.
    fn sync_path_mss(&mut self, only: Option<IpAddr>, now: SimTime) {
        let handles = self.tcp_apps.iter().flat_map(|&idx| {
            let (one, many) = match &self.apps[idx] {
                App::TcpClient(c) => (Some(c.handle), None),
                App::TcpServer(s) => (Some(s.handle), None),
                App::Endpoint(e) => (None, e.tcp.as_ref().map(|t| t.handles())),
                _ => (None, None),
            };
            one.into_iter().chain(many.into_iter().flatten())
        });
        for handle in handles {
            let s = self.sockets.get_mut::<tcp::Socket>(handle);
            let Some(peer) = s.remote_endpoint() else {
                continue;
            };
            let peer = IpAddr::from(peer.addr);
            if only.is_some_and(|d| d != peer) {
                continue;
            }
            let headers = match peer {
                IpAddr::V4(_) => TCP_IP_HEADERS,
                IpAddr::V6(_) => TCP_IPV6_HEADERS,
            };
            if let Some(p) = self.pmtu.get(peer, now) {
                s.reduce_mss(p.mtu.saturating_sub(headers) as usize);
            }
        }
    }

    /// An ICMP error quoting one of our traceroute probes.
    fn icmp_error(
        &mut self,
        from: Ipv4Addr,
        msg: Icmpv4Message,
        quoted: &[u8],
        ctx: &mut NodeCtx,
    ) -> bool {
        let inner = Ipv4Packet::new_unchecked(quoted);
        if quoted.len() < 20 || inner.next_header() != IpProtocol::Udp {
            return false;
        }
        let hl = inner.header_len() as usize;
        if quoted.len() < hl + 4 {
            return false;
        }
        let sport = u16::from_be_bytes([quoted[hl], quoted[hl + 1]]);
        let dport = u16::from_be_bytes([quoted[hl + 2], quoted[hl + 3]]);
        let unreachable = msg == Icmpv4Message::DstUnreachable;
        self.probe_answered(from.into(), unreachable, sport, dport, ctx)
    }

    /// An ICMP or ICMPv6 error from `from` (destination unreachable if
    /// `unreachable`, else time exceeded) quoting a UDP datagram from port
    /// `sport` to `dport`: whether it answered one of the host's traceroute
    /// probes (the hop found, and the next probe sent).
    fn probe_answered(
        &mut self,
        from: IpAddr,
        unreachable: bool,
        sport: u16,
        dport: u16,
        ctx: &mut NodeCtx,
    ) -> bool {
        let Some(idx) = self.udp_app(sport) else {
            return false;
        };
        let App::Traceroute(t) = &mut self.apps[idx] else {
            return false;
        };
        if t.done || t.ttl == 0 || dport != TRACEROUTE_BASE_PORT.wrapping_add(t.ttl as u16 - 1) {
            return true; // a late answer to an earlier probe
        }
        t.hops.push(Hop {
            ttl: t.ttl,
            address: Some(from),
            rtt_ns: Some((ctx.now - t.probe_sent).as_nanos()),
        });
        if unreachable || t.ttl >= t.max_hops {
            t.done = true;
        } else {
            self.traceroute_probe(idx, ctx);
        }
        true
    }

    /// Handles timer `token`.
    pub fn timer(&mut self, token: u64, ctx: &mut NodeCtx) {
        if token & ARP_TIMER != 0 {
            // The tick is shared: each cache ignores one it did not ask for.
            self.arp.timer(&self.ports, ctx);
            self.v6.ndp.timer(&self.ports, ctx);
        } else if token == REASSEMBLY_TIMER {
            self.reassembly_timeout(ctx);
        } else if token == POLL_TIMER {
            if self.next_poll.is_some_and(|t| t <= ctx.now) {
                self.next_poll = None;
            }
            self.poll(ctx);
        } else {
            self.app_timer((token & APP_MASK) as usize, (token >> 32) as u16, ctx);
        }
    }

    /// Starts loading the host's first port: every datagram sent reads
    /// its MTU and MAC, every frame received its MAC, and the ports are a
    /// vector of their own (most hosts have one port; for the others the
    /// first is a guess).
    fn prefetch_port(&self) {
        if let Some(p) = self.ports.first() {
            netloop_core::sched::prefetch(p, 2);
        }
    }

    /// A hint that timer `token` is the next event to run (see
    /// [`netloop_core::Model::prefetch`]): starts loading the application
    /// it wakes. A host's applications are a vector of their own, and with
    /// thousands of flows the one a timer wakes is found in memory, not in
    /// the caches (three quarters of `timer`'s time at 10 000 flows, by
    /// `perf`).
    pub fn prefetch_timer(&self, token: u64) {
        self.prefetch_port();
        if let Some(app) = Self::timer_app(token).and_then(|i| self.apps.get(i)) {
            netloop_core::sched::prefetch_bytes(app, App::TIMER_HINT_BYTES);
        }
    }

    /// The application timer `token` wakes, if an application's.
    fn timer_app(token: u64) -> Option<usize> {
        (token & (POLL_TIMER | REASSEMBLY_TIMER | ARP_TIMER) == 0)
            .then_some((token & APP_MASK) as usize)
    }

    /// Whether timer `token` wakes the host's first application.
    pub fn wakes_first_app(token: u64) -> bool {
        Self::timer_app(token) == Some(0)
    }

    /// Where the host's first port and its application lie, if it has
    /// exactly one application (see `network::HostHint`).
    pub fn hint_addresses(&self) -> Option<(usize, usize)> {
        match (self.ports.first(), &self.apps[..]) {
            (Some(p), [app]) => Some((p as *const _ as usize, app as *const App as usize)),
            _ => None,
        }
    }

    /// A hint that a frame for UDP port `dport` (0: none) arrives next:
    /// starts loading the host's first port and the application.
    pub fn prefetch_udp(&self, dport: u16) {
        self.prefetch_port();
        if dport == 0 {
            return;
        }
        if let Some(app) = self.udp_app(dport).and_then(|i| self.apps.get(i)) {
            netloop_core::sched::prefetch_bytes(app, App::FRAME_HINT_BYTES);
        }
    }

    fn app_timer(&mut self, idx: usize, generation: u16, ctx: &mut NodeCtx) {
        let now = ctx.now;
        match &mut self.apps[idx] {
            App::UdpSource(s) => {
                let (send, next) = s.tick(now);
                if let Some(n) = next {
                    ctx.timer(n, idx as u64);
                }
                if send {
                    let (flow, seq, dst, sp, dp, size) =
                        (s.flow, s.sent, s.dst, s.src_port, s.dst_port, s.size);
                    s.sent += 1;
                    let to = UdpTo {
                        sport: sp,
                        dst,
                        dport: dp,
                        ttl: DEFAULT_TTL,
                    };
                    self.send_udp(to, size, |b| apps::write_probe(b, flow, seq, now), ctx);
                }
            }
            App::Ping(p) => {
                if now >= p.stop {
                    return;
                }
                let seq = p.sent as u16;
                p.sent += 1;
                p.outstanding.insert(seq, now);
                let (dst, ident, size) = (p.dst, p.ident, p.size);
                if now + p.interval < p.stop {
                    ctx.timer(now + p.interval, idx as u64);
                }
                match dst {
                    std::net::IpAddr::V4(dst) => self.send_echo(dst, ident, seq, size, ctx),
                    std::net::IpAddr::V6(dst) => self.send_echo6(dst, ident, seq, size, ctx),
                }
            }
            App::Traceroute(t) => {
                if t.done || (t.ttl != 0 && generation != t.ttl as u16) {
                    return; // a stale timeout
                }
                if t.ttl != 0 {
                    // Timed out: nobody answered this TTL.
                    t.hops.push(Hop {
                        ttl: t.ttl,
                        address: None,
                        rtt_ns: None,
                    });
                    if t.ttl >= t.max_hops {
                        t.done = true;
                        return;
                    }
                }
                self.traceroute_probe(idx, ctx);
            }
            App::TcpClient(c) => {
                if !c.connected {
                    c.connected = true;
                    c.stats.started = Some(now);
                    let sock = self.sockets.get_mut::<tcp::Socket>(c.handle);
                    let remote = smoltcp::wire::IpEndpoint::new(c.dst.into(), c.dst_port);
                    let _ = sock.connect(self.iface.context(), remote, c.src_port);
                }
                self.poll(ctx);
            }
            App::TcpServer(_) | App::UdpSink(_) => self.poll(ctx),
            App::Endpoint(_) => {}
        }
    }

    fn traceroute_probe(&mut self, idx: usize, ctx: &mut NodeCtx) {
        let App::Traceroute(t) = &mut self.apps[idx] else {
            return;
        };
        t.ttl += 1;
        t.probe_sent = ctx.now;
        let (dst, sp, ttl) = (t.dst, t.src_port, t.ttl);
        let dport = TRACEROUTE_BASE_PORT.wrapping_add(ttl as u16 - 1);
        ctx.timer(ctx.now + t.timeout, idx as u64 | ((ttl as u64) << 32));
        self.send_udp(
            UdpTo {
                sport: sp,
                dst,
                dport,
                ttl,
            },
            32,
            |_| 0,
            ctx,
        );
    }

    /// The port, source address and next hop toward `dst`.
    fn route(&self, dst: Ipv4Addr) -> Option<HostRoute> {
        if let Some((d, r)) = self.route_cache.get() {
            if d == dst {
                return Some(r);
            }
        }
        let r = self.table.lookup(dst)?;
        let src = self.ports[r.port].addr?.addr;
        let found = (r.port, src, r.via.unwrap_or(dst));
        self.route_cache.set(Some((dst, found)));
        Some(found)
    }

    /// Sends `frame`, an IPv4 packet after 14 bytes of room for the Ethernet
    /// header: routes it, sets Don't Fragment as `df` and the path MTU say
    /// (see the module docs), fragments it if it does not fit the path MTU,
    /// fills in the Ethernet header and resolves the next hop.
    fn send_ip(&mut self, dst: Ipv4Addr, mut frame: Frame, df: Df, ctx: &mut NodeCtx) {
        ctx.create(Origin::Host);
        self.stats.packets_sent += 1;
        let Some((port, _, next_hop)) = self.route(dst) else {
            ctx.drop_frame(DropReason::NoRoute);
            return;
        };
        let link_mtu = self.ports[port].mtu;
        let path = self.pmtu.get(dst, ctx.now);
        let mtu = path.map_or(link_mtu, |p| p.mtu.min(link_mtu)) as usize;
        let fits = frame.len() - ETH_HEADER <= mtu;
        let want_df = df == Df::Want && fits && !path.is_some_and(|p| p.locked);
        // Only the headers are written (`Frame::head_mut`): a datagram
        // made of zeros keeps its payload untouched, and the next frame
        // made from its buffer zeroes no more than these.
        frame.write_head(ETH_HEADER, |ip| {
            self.set_dont_fragment(ip, want_df);
            ipv4::header_len(ip)
        });
        let info = &self.ports[port];
        let eth = frame.head_mut(ETH_HEADER);
        eth[6..12].copy_from_slice(info.mac.as_bytes());
        eth[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        if fits {
            self.send_frame(port, dst, next_hop, frame, ctx);
            return;
        }
        let Some(fragments) = ipv4::fragment(&frame, mtu) else {
            // An MTU below 28 bytes: the topology refuses links under 68.
            ctx.drop_frame(DropReason::MtuExceeded);
            return;
        };
        self.stats.fragmented += 1;
        let extra = fragments.len() as u64 - 1;
        self.stats.fragments_created += extra;
        ctx.ledger.create_n(Origin::Fragment, extra);
        for f in fragments {
            self.send_frame(port, dst, next_hop, f, ctx);
        }
    }

    /// Sets or clears Don't Fragment on `ip`. A packet without it needs a
    /// unique identification: smoltcp's are all 0, so those get one from the
    /// host's counter.
    fn set_dont_fragment(&mut self, ip: &mut [u8], df: bool) {
        if ipv4::dont_fragment(ip) == df && (df || ip[4..6] != [0, 0]) {
            return;
        }
        ip[6] = if df { ip[6] | 0x40 } else { ip[6] & !0x40 };
        if !df && ip[4..6] == [0, 0] {
            ip[4..6].copy_from_slice(&self.next_ident().to_be_bytes());
        }
        let hl = ipv4::header_len(ip);
        ip[10..12].fill(0);
        let c = ipv4::checksum(&ip[..hl]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
    }

    /// Sends one frame, its source MAC and EtherType set, out of `port`
    /// towards `next_hop`.
    fn send_frame(
        &mut self,
        port: PortId,
        dst: Ipv4Addr,
        next_hop: Ipv4Addr,
        mut frame: Frame,
        ctx: &mut NodeCtx,
    ) {
        if dst.is_broadcast() {
            frame
                .head_mut(6)
                .copy_from_slice(EthernetAddress::BROADCAST.as_bytes());
            ctx.send(port, frame);
            return;
        }
        self.arp.send(port, &self.ports[port], next_hop, frame, ctx);
    }

    /// The identification of the next datagram the host sends.
    fn next_ident(&mut self) -> u16 {
        self.ident = self.ident.wrapping_add(1);
        self.ident
    }

    fn ip_header(
        &mut self,
        frame: &mut [u8],
        src: Ipv4Addr,
        dst: Ipv4Addr,
        proto: IpProtocol,
        payload_len: usize,
        ttl: u8,
    ) {
        let repr = Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: proto,
            payload_len,
            hop_limit: ttl,
        };
        let ident = self.next_ident();
        let mut ip = Ipv4Packet::new_unchecked(&mut frame[ETH_HEADER..]);
        repr.emit(&mut ip, &smoltcp::phy::ChecksumCapabilities::ignored());
        ip.set_ident(ident);
        ip.fill_checksum();
    }

    /// Sends a UDP datagram of `len` payload bytes that `fill` writes into
    /// zeros; it returns how many leading bytes it may have written (the
    /// checksum sums those only).
    fn send_udp(
        &mut self,
        to: UdpTo,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> usize,
        ctx: &mut NodeCtx,
    ) {
        let UdpTo {
            sport,
            dst,
            dport,
            ttl,
        } = to;
        let dst = match dst {
            IpAddr::V4(dst) => dst,
            IpAddr::V6(dst) => return self.send_udp6(sport, dst, dport, ttl, len, fill, ctx),
        };
        let src = self.route(dst).map_or(Ipv4Addr::UNSPECIFIED, |r| r.1);
        let mut frame = Frame::zeroed(ETH_HEADER + 20 + 8 + len);
        // Written at its head only (see `Frame::head_mut`): the headers
        // and what `fill` says it wrote.
        self.ip_header(
            frame.head_mut(ETH_HEADER + 20),
            src,
            dst,
            IpProtocol::Udp,
            8 + len,
            ttl,
        );
        let written = frame.write_head(ETH_HEADER + 28, fill);
        // The UDP header, then its checksum over it and what `fill` wrote.
        frame.write_head(ETH_HEADER + 20, |udp| {
            let mut h = UdpPacket::new_unchecked(&mut *udp);
            h.set_src_port(sport);
            h.set_dst_port(dport);
            h.set_len((8 + len) as u16);
            ipv4::fill_udp_checksum(src, dst, udp, 8 + written);
            8
        });
        self.send_ip(dst, frame, Df::Want, ctx);
    }

    /// [`Self::send_udp`] over IPv6, with hop limit `hops`.
    #[allow(clippy::too_many_arguments)]
    fn send_udp6(
        &mut self,
        sport: u16,
        dst: Ipv6Addr,
        dport: u16,
        hops: u8,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> usize,
        ctx: &mut NodeCtx,
    ) {
        let src = self.route6(dst).map_or(Ipv6Addr::UNSPECIFIED, |r| r.1);
        let mut frame = ipv6::packet_frame(src, dst, next::UDP, hops, 8 + len);
        let udp = &mut frame[ETH_HEADER + IPV6_HEADER..];
        udp[0..2].copy_from_slice(&sport.to_be_bytes());
        udp[2..4].copy_from_slice(&dport.to_be_bytes());
        // A datagram over 65 535 bytes has no length of its own (RFC
        // 2675); the topology refuses such sizes.
        udp[4..6].copy_from_slice(&((8 + len) as u16).to_be_bytes());
        let written = fill(&mut udp[8..]);
        let c = match ipv6::checksum_zero_from(src, dst, next::UDP, udp, 8 + written) {
            0 => 0xffff, // a computed 0 is sent as all ones (RFC 768)
            c => c,
        };
        udp[6..8].copy_from_slice(&c.to_be_bytes());
        self.send_ip6(dst, frame, ctx);
    }

    /// An ICMP echo request of `size` bytes of zeros to `dst`, built in its
    /// frame (nothing else allocated).
    fn send_echo(&mut self, dst: Ipv4Addr, ident: u16, seq: u16, size: usize, ctx: &mut NodeCtx) {
        let src = self.route(dst).map_or(Ipv4Addr::UNSPECIFIED, |r| r.1);
        let len = 8 + size;
        let mut frame = Frame::zeroed(ETH_HEADER + IP_HEADER + len);
        self.ip_header(&mut frame, src, dst, IpProtocol::Icmp, len, DEFAULT_TTL);
        write_echo(&mut frame[ETH_HEADER + IP_HEADER..], 8, ident, seq);
        let icmp = &mut frame[ETH_HEADER + IP_HEADER..];
        let c = ipv4::checksum(icmp);
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        self.send_ip(dst, frame, Df::Want, ctx);
    }

    /// An ICMPv6 echo request of `size` bytes of zeros to `dst`, from the
    /// egress port's address.
    fn send_echo6(&mut self, dst: Ipv6Addr, ident: u16, seq: u16, size: usize, ctx: &mut NodeCtx) {
        let src = self.route6(dst).map_or(Ipv6Addr::UNSPECIFIED, |r| r.1);
        let frame = ipv6::icmp_frame_with(src, dst, ORIGINATED_HOPS, 0, 8 + size, |b| {
            write_echo(b, ECHO_REQUEST, ident, seq)
        });
        self.send_ip6(dst, frame, ctx);
    }

    /// The port, source address and next hop toward `dst` over IPv6, kept
    /// for the last destination as [`Self::route`] does (a datagram routes
    /// twice: for its source address, then to send it).
    fn route6(&self, dst: Ipv6Addr) -> Option<HostRoute6> {
        if let Some((d, r)) = self.route_cache6.get() {
            if d == dst {
                return Some(r);
            }
        }
        let r = self.v6.table.lookup(dst)?;
        let src = self.ports[r.port].addr6?.addr;
        let found = (r.port, src, r.via.unwrap_or(dst));
        self.route_cache6.set(Some((dst, found)));
        Some(found)
    }

    /// Sends `frame`, an IPv6 packet without extension headers after room
    /// for the Ethernet header: routes it, fragments it if it does not fit
    /// the path MTU (only the source fragments in IPv6), and resolves the
    /// next hop.
    fn send_ip6(&mut self, dst: Ipv6Addr, mut frame: Frame, ctx: &mut NodeCtx) {
        ctx.create(Origin::Host);
        self.stats.packets_sent += 1;
        let Some((port, _, next_hop)) = self.route6(dst) else {
            ctx.drop_frame(DropReason::NoRoute);
            return;
        };
        let link = self.ports[port].mtu;
        let path = self.pmtu.get(dst, ctx.now);
        let mtu = path.map_or(link, |p| p.mtu.min(link)) as usize;
        frame[12..14].copy_from_slice(&ipv6::ETHERTYPE.to_be_bytes());
        let extra = self
            .v6
            .send_sized(&self.ports, port, next_hop, frame, mtu, ctx);
        if extra > 0 {
            self.stats.fragmented += 1;
            self.stats.fragments_created += extra;
        }
    }

    /// Lets smoltcp and the TCP applications make progress, sends what they
    /// produced, and asks for a timer at smoltcp's next deadline.
    fn poll(&mut self, ctx: &mut NodeCtx) {
        let now = smol_now(ctx.now);
        for _ in 0..16 {
            self.iface.poll(now, &mut self.device, &mut self.sockets);
            // What smoltcp sent, into the spare vector, whose room is kept
            // (taking the device's would leave it none: one allocation per
            // packet sent).
            let mut out = std::mem::take(&mut self.tx_spare);
            std::mem::swap(&mut out, &mut self.device.tx);
            let sent_any = !out.is_empty();
            for pkt in out.drain(..) {
                self.stack_out(pkt, ctx);
            }
            self.tx_spare = out;
            if !self.pmtu.is_empty() {
                self.sync_path_mss(None, ctx.now);
            }
            let progressed = self.drive_tcp(ctx);
            if !progressed && !sent_any && self.device.rx.is_empty() {
                break;
            }
        }
        if let Some(at) = self.iface.poll_at(now, &self.sockets) {
            let mut t = SimTime::from_nanos(at.total_micros().max(0) as u64 * 1_000);
            if t <= ctx.now {
                // smoltcp's clock is in µs: "now" means the next microsecond.
                t = SimTime::from_nanos((ctx.now.as_nanos() / 1_000 + 1) * 1_000);
            }
            if self.next_poll.is_none_or(|p| t < p || p < ctx.now) {
                self.next_poll = Some(t);
                ctx.timer(t, POLL_TIMER);
            }
        }
    }

    /// An IP packet from smoltcp: frame it and send it.
    fn stack_out(&mut self, frame: Frame, ctx: &mut NodeCtx) {
        if frame.get(ETH_HEADER).is_some_and(|v| v >> 4 == 6) {
            if ipv6::validate(&frame[ETH_HEADER..]).is_ok() {
                let dst = ipv6::dst_addr(&frame[ETH_HEADER..]);
                self.send_ip6(dst, frame, ctx);
            }
            return;
        }
        let Ok(ip) = Ipv4Packet::new_checked(&frame[ETH_HEADER..]) else {
            return; // smoltcp only emits valid packets
        };
        let dst = ip.dst_addr();
        // TCP as Linux sends it; ICMP (port unreachable) as Linux answers.
        let df = if ip.next_header() == IpProtocol::Icmp {
            Df::Dont
        } else {
            Df::Want
        };
        self.send_ip(dst, frame, df, ctx);
    }

    /// Moves data between the TCP applications and their sockets. Returns
    /// whether anything moved (so smoltcp should be polled again).
    fn drive_tcp(&mut self, ctx: &mut NodeCtx) -> bool {
        let now = ctx.now;
        let mut progressed = false;
        for &idx in &self.tcp_apps {
            match &mut self.apps[idx] {
                App::TcpClient(c) => {
                    if !c.connected {
                        continue;
                    }
                    let s = self.sockets.get_mut::<tcp::Socket>(c.handle);
                    match c.mode.clone() {
                        TcpMode::Bulk { bytes } => {
                            let stop = now >= c.stop;
                            let limit = bytes.map_or(u64::MAX, |b| b - c.stats.bytes_sent);
                            if !stop && limit > 0 && s.can_send() {
                                // The payload is whatever the ring holds (zeros):
                                // content doesn't matter, and skipping the fill
                                // saves a copy per byte.
                                let n = s
                                    .send(|buf| {
                                        let n =
                                            buf.len().min(limit.min(usize::MAX as u64) as usize);
                                        (n, n)
                                    })
                                    .unwrap_or(0);
                                c.stats.bytes_sent += n as u64;
                                progressed |= n > 0;
                            }
                            let finished = bytes.is_some_and(|b| c.stats.bytes_sent >= b);
                            if (finished || stop) && !c.closed && s.may_send() {
                                s.close();
                                c.closed = true;
                                progressed = true;
                            }
                        }
                        TcpMode::Rr {
                            request,
                            response,
                            interval,
                        } => {
                            if !s.may_send() {
                                continue;
                            }
                            if c.txn_start.is_none() && c.req_left == 0 && c.resp_left == 0 {
                                if now < c.stop && now >= c.next_txn {
                                    c.txn_start = Some(now);
                                    c.req_left = request;
                                    c.resp_left = response;
                                    c.next_txn = interval.map_or(now, |i| now + i);
                                } else if now < c.stop && now < c.next_txn {
                                    ctx.timer(c.next_txn, idx as u64);
                                }
                            }
                            if c.req_left > 0 && s.can_send() {
                                let want = c.req_left;
                                let n = s
                                    .send(|buf| {
                                        let n = buf.len().min(want as usize);
                                        (n, n)
                                    })
                                    .unwrap_or(0);
                                c.req_left -= n as u64;
                                c.stats.bytes_sent += n as u64;
                                progressed |= n > 0;
                            }
                            if c.resp_left > 0 && s.can_recv() {
                                let want = c.resp_left;
                                let n = s
                                    .recv(|buf| {
                                        let n = buf.len().min(want as usize);
                                        (n, n)
                                    })
                                    .unwrap_or(0);
                                c.resp_left -= n as u64;
                                c.stats.bytes_received += n as u64;
                                progressed |= n > 0;
                                if n > 0 {
                                    c.stats.first_rx.get_or_insert(now);
                                    c.stats.last_rx = Some(now);
                                }
                                if c.resp_left == 0 && c.req_left == 0 {
                                    if let Some(t0) = c.txn_start.take() {
                                        c.stats.transactions += 1;
                                        c.stats.latency.record((now - t0).as_nanos());
                                    }
                                    progressed = true;
                                    if now >= c.stop {
                                        s.close();
                                        c.closed = true;
                                    } else if c.next_txn > now {
                                        ctx.timer(c.next_txn, idx as u64);
                                    }
                                }
                            }
                        }
                    }
                }
                App::TcpServer(sv) => {
                    let s = self.sockets.get_mut::<tcp::Socket>(sv.handle);
                    if s.can_recv() {
                        let mode = sv.mode.clone();
                        let want = match mode {
                            TcpMode::Bulk { .. } => u64::MAX,
                            TcpMode::Rr { .. } => sv.req_left.max(1),
                        };
                        let n = s
                            .recv(|buf| {
                                let n = buf.len().min(want.min(usize::MAX as u64) as usize);
                                (n, n)
                            })
                            .unwrap_or(0) as u64;
                        if n > 0 {
                            progressed = true;
                            sv.stats.bytes_received += n;
                            sv.stats.first_rx.get_or_insert(now);
                            sv.stats.last_rx = Some(now);
                            if let TcpMode::Rr {
                                request, response, ..
                            } = mode
                            {
                                sv.req_left = sv.req_left.saturating_sub(n);
                                if sv.req_left == 0 {
                                    sv.resp_left += response;
                                    sv.req_left = request;
                                }
                            }
                            if sv.expect.is_some_and(|e| sv.stats.bytes_received >= e)
                                && sv.stats.completed.is_none()
                            {
                                sv.stats.completed = Some(now);
                            }
                        }
                    }
                    if sv.resp_left > 0 && s.can_send() {
                        let want = sv.resp_left;
                        let n = s
                            .send(|buf| {
                                let n = buf.len().min(want as usize);
                                (n, n)
                            })
                            .unwrap_or(0);
                        sv.resp_left -= n as u64;
                        sv.stats.bytes_sent += n as u64;
                        progressed |= n > 0;
                    }
                    if s.state() == tcp::State::CloseWait && sv.resp_left == 0 {
                        s.close();
                        progressed = true;
                    }
                }
                App::Endpoint(e) => {
                    if let Some(t) = &mut e.tcp {
                        progressed |= t.drive(&mut self.sockets, now, &mut e.inbox, &mut e.stats);
                    }
                }
                _ => {}
            }
        }
        progressed
    }
}

/// A TCP socket configured the way every simulated host uses it.
///
/// - Reno: smoltcp's Cubic grows its window too slowly on short runs, and Reno
///   measured closest to the bottleneck rate (8.9 of 9.49 Mbit/s possible).
/// - No delayed ACK: smoltcp starts with a congestion window of 2 × 536 bytes,
///   so the first flight is a single segment, and with its 10 ms delayed-ACK
///   timer the connection would stall 10 ms before it starts. Linux avoids
///   this with quick-ACK mode at connection start; ACKing every segment is the
///   closest smoltcp can do.
/// - Nagle off for request/response flows and message endpoints, as latency
///   tools do.
pub(crate) fn new_tcp_socket(buffer: usize, request_response: bool) -> tcp::Socket<'static> {
    let mut s = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0; buffer]),
        tcp::SocketBuffer::new(vec![0; buffer]),
    );
    s.set_congestion_control(tcp::CongestionControl::Reno);
    s.set_ack_delay(None);
    if request_response {
        s.set_nagle_enabled(false);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Ipv4Cidr;
    use crate::stats::Ledger;

    /// What a UDP datagram received touches lies in the lines the
    /// scheduler's hint loads before a frame (`HINT_RX_LINES` from the
    /// start of the host), what one sent touches in those it loads before
    /// a timer (`HINT_TX_LINES`), and the host starts a line.
    #[test]
    fn a_datagrams_fields_are_in_the_hinted_lines() {
        use std::mem::{align_of, offset_of, size_of};
        /// The size of the field `f` reads: its own type, whatever it is.
        fn size<F>(_: fn(&Host) -> &F) -> usize {
            size_of::<F>()
        }
        let rx = [
            offset_of!(Host, apps) + size(|h| &h.apps),
            offset_of!(Host, udp_apps) + size(|h| &h.udp_apps),
            offset_of!(Host, udp_cache) + size(|h| &h.udp_cache),
            offset_of!(Host, ports) + size(|h| &h.ports),
            offset_of!(Host, stats) + size(|h| &h.stats),
        ];
        let end = rx.into_iter().max().unwrap();
        assert!(
            end <= HINT_RX_LINES * 64,
            "a received datagram's fields end at byte {end}, past the {HINT_RX_LINES} lines the hint loads"
        );
        // The neighbour cache's memo (its first field, and the memo's
        // last answer its own) is what a frame to a known neighbour reads.
        let tx = [
            offset_of!(Host, apps) + size(|h| &h.apps),
            offset_of!(Host, ports) + size(|h| &h.ports),
            offset_of!(Host, stats) + size(|h| &h.stats),
            offset_of!(Host, route_cache) + size(|h| &h.route_cache),
            offset_of!(Host, ident) + size(|h| &h.ident),
            offset_of!(Host, pmtu) + size(|h| &h.pmtu),
            offset_of!(Host, arp) + Arp::last_answer_at() + Arp::last_answer_size(),
        ];
        let end = tx.into_iter().max().unwrap();
        assert!(
            end <= HINT_TX_LINES * 64,
            "a sent datagram's fields end at byte {end}, past the {HINT_TX_LINES} lines the hint loads"
        );
        assert_eq!(offset_of!(Host, apps), 0);
        assert_eq!(align_of::<Host>(), 64);
    }

    /// A frame to `host` carrying a UDP datagram to a closed port, with a
    /// valid header checksum whatever `version` says.
    fn udp_frame(host: &Host, version: u8) -> Frame {
        let me = host.address().unwrap();
        let src = Ipv4Addr::new(10, 0, 0, 9);
        let mut f = vec![0u8; ETH_HEADER + 20 + 8 + 4];
        f[0..6].copy_from_slice(host.ports()[0].mac.as_bytes());
        f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 9]);
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let mut ip = Ipv4Packet::new_unchecked(&mut f[ETH_HEADER..]);
        ip.set_version(version);
        ip.set_header_len(20);
        ip.set_total_len(32);
        ip.set_hop_limit(64);
        ip.set_next_header(IpProtocol::Udp);
        ip.set_src_addr(src);
        ip.set_dst_addr(me);
        ip.fill_checksum();
        let mut udp = UdpPacket::new_unchecked(&mut f[ETH_HEADER + 20..]);
        udp.set_src_port(5000);
        udp.set_dst_port(9);
        udp.set_len(12);
        udp.fill_checksum(&src.into(), &me.into());
        f.into()
    }

    /// A host 10.0.0.1/24 with a connected route and the sender's MAC
    /// (10.0.0.9) in its neighbour cache.
    fn host() -> Host {
        let port = PortInfo {
            mac: EthernetAddress([0x02, 0, 0, 0, 0, 1]),
            addr: Some(Ipv4Cidr::parse("10.0.0.1/24").unwrap()),
            addr6: None,
            mtu: 1500,
            link: 0,
            name: "eth0".into(),
        };
        let mut table = RoutingTable::new();
        table.insert(crate::routing::Route {
            prefix: Ipv4Cidr::parse("10.0.0.0/24").unwrap(),
            via: None,
            port: 0,
        });
        let mut host = Host::new(vec![port], table, RoutingTable6::new(), 1);
        let (mut out, mut timers, mut ledger) = (Vec::new(), Vec::new(), Ledger::default());
        let mut ctx = NodeCtx::new(SimTime::ZERO, &mut out, &mut timers, &mut ledger);
        let info = host.ports[0].clone();
        let mut arp = vec![0u8; 42];
        arp[0..6].copy_from_slice(info.mac.as_bytes());
        arp[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 9]);
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        arp[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
        arp[22..28].copy_from_slice(&[0x02, 0, 0, 0, 0, 9]);
        arp[28..32].copy_from_slice(&[10, 0, 0, 9]);
        arp[38..42].copy_from_slice(&[10, 0, 0, 1]);
        host.receive(0, arp.into(), &mut ctx);
        host
    }

    #[test]
    fn udp_to_a_closed_port_is_answered_with_port_unreachable() {
        let mut host = host();
        let (mut out, mut timers, mut ledger) = (Vec::new(), Vec::new(), Ledger::default());
        let mut ctx = NodeCtx::new(SimTime::ZERO, &mut out, &mut timers, &mut ledger);
        let frame = udp_frame(&host, 4);
        host.receive(0, frame, &mut ctx);
        let replies: Vec<_> = out
            .iter()
            .filter(|(_, f)| f[12..14] == [0x08, 0x00])
            .collect();
        assert_eq!(replies.len(), 1, "{out:02x?}");
        let ip = Ipv4Packet::new_checked(&replies[0].1[ETH_HEADER..]).unwrap();
        assert_eq!(ip.next_header(), IpProtocol::Icmp);
        let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
        // Type 3 code 3, as a real host answers (not code 2, protocol
        // unreachable, which is all smoltcp says without its UDP layer).
        assert_eq!(
            (icmp.msg_type(), icmp.msg_code()),
            (Icmpv4Message::DstUnreachable, 3)
        );
    }

    /// A datagram never whole is given up after 30 s, its fragments counted
    /// as `reassembly_timeout` (held until then), and the sender told with
    /// ICMP time-exceeded code 1 quoting the first fragment, as Linux does.
    #[test]
    fn a_datagram_never_whole_is_given_up_after_30_s_with_time_exceeded() {
        let mut host = host();
        let (mut out, mut timers, mut ledger) = (Vec::new(), Vec::new(), Ledger::default());
        let mut first = udp_frame(&host, 4);
        {
            let mut ip = Ipv4Packet::new_unchecked(&mut first[ETH_HEADER..]);
            ip.set_more_frags(true);
            ip.set_total_len(20 + 8);
            ip.fill_checksum();
        }
        first.truncate(ETH_HEADER + 28);
        let quoted = first[ETH_HEADER..].to_vec();
        let mut ctx = NodeCtx::new(SimTime::ZERO, &mut out, &mut timers, &mut ledger);
        host.receive(0, first, &mut ctx);
        assert!(out.is_empty());
        assert_eq!(host.in_flight(), 1);
        assert_eq!(ledger.delivered_total() + ledger.dropped.total(), 0);
        let due = SimTime::ZERO + crate::reassembly::TIMEOUT;
        assert_eq!(timers, vec![(due, REASSEMBLY_TIMER)]);
        let mut ctx = NodeCtx::new(due, &mut out, &mut timers, &mut ledger);
        host.timer(REASSEMBLY_TIMER, &mut ctx);
        assert_eq!(host.in_flight(), 0);
        assert_eq!(ledger.dropped.get(DropReason::ReassemblyTimeout), 1);
        assert_eq!(out.len(), 1, "{out:02x?}");
        let ip = Ipv4Packet::new_checked(&out[0].1[ETH_HEADER..]).unwrap();
        assert_eq!(ip.dst_addr(), Ipv4Addr::new(10, 0, 0, 9));
        assert!(!ip.dont_frag(), "ICMP errors go without DF");
        let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
        assert!(icmp.verify_checksum());
        assert_eq!(
            (icmp.msg_type(), icmp.msg_code()),
            (Icmpv4Message::TimeExceeded, 1)
        );
        assert_eq!(icmp.data(), &quoted[..]);
    }

    /// An IPv6 host (2001:2::1/64 on a link with a neighbour 2001:2::9)
    /// given a first fragment from that neighbour to `dst`: after 60 s the
    /// packet is given up; only one sent to the host's own address is
    /// answered (RFC 4443 §2.4 (e): never about a packet to a group).
    fn given_up6(dst: Ipv6Addr) -> (Vec<(PortId, Frame)>, Ledger) {
        let peer: Ipv6Addr = "2001:2::9".parse().unwrap();
        let port = PortInfo {
            mac: EthernetAddress([0x02, 0, 0, 0, 0, 1]),
            addr: None,
            addr6: Some(crate::spec::Ipv6Cidr::parse("2001:2::1/64").unwrap()),
            mtu: 1500,
            link: 0,
            name: "eth0".into(),
        };
        let mut table6 = RoutingTable6::new();
        table6.insert(crate::routing::Route6 {
            prefix: crate::spec::Ipv6Cidr::parse("2001:2::/64").unwrap(),
            via: None,
            port: 0,
        });
        let mut host = Host::new(vec![port], RoutingTable::new(), table6, 1);
        let mut f = ipv6::packet_frame(peer, dst, next::FRAGMENT, 64, 16);
        let mac = if dst.is_multicast() {
            ipv6::multicast_mac(dst)
        } else {
            [0x02, 0, 0, 0, 0, 1]
        };
        f[0..6].copy_from_slice(&mac);
        f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 9]);
        let h = ETH_HEADER + IPV6_HEADER;
        f[h] = next::UDP;
        f[h + 3] = 1; // offset 0, more to come
        f[h + 7] = 5; // identification
        let (mut out, mut timers, mut ledger) = (Vec::new(), Vec::new(), Ledger::default());
        let mut ctx = NodeCtx::new(SimTime::ZERO, &mut out, &mut timers, &mut ledger);
        host.receive(0, f, &mut ctx);
        assert_eq!(host.in_flight(), 1, "held");
        let due = SimTime::ZERO + crate::reassembly::TIMEOUT6;
        let mut ctx = NodeCtx::new(due, &mut out, &mut timers, &mut ledger);
        host.timer(REASSEMBLY_TIMER, &mut ctx);
        assert_eq!(host.in_flight() - host.v6.ndp.in_flight(), 0);
        assert_eq!(ledger.dropped.get(DropReason::ReassemblyTimeout), 1);
        (out, ledger)
    }

    /// The hint's addresses name the host's first port and its one
    /// application, and none once it has two (the hint then reads the
    /// host's port map); only an application's own timer wakes the first.
    #[test]
    fn hint_addresses_name_the_one_application() {
        let port = PortInfo {
            mac: EthernetAddress([0x02, 0, 0, 0, 0, 1]),
            addr: None,
            addr6: None,
            mtu: 1500,
            link: 0,
            name: "eth0".into(),
        };
        let mut host = Host::new(vec![port], RoutingTable::new(), RoutingTable6::new(), 1);
        assert_eq!(host.hint_addresses(), None);
        let source = || {
            App::UdpSource(apps::UdpSource {
                flow: 0,
                dst: Ipv4Addr::new(198, 18, 0, 1).into(),
                src_port: 1,
                dst_port: 2,
                size: 100,
                pattern: apps::Pattern::Cbr {
                    interval: netloop_core::SimDuration::from_millis(1),
                },
                rng: netloop_core::RngStream::new(1, "t"),
                stop: SimTime::MAX,
                sent: 0,
            })
        };
        host.add_app(source(), 1024);
        let (p, a) = host.hint_addresses().expect("one application");
        assert_eq!(p, &host.ports[0] as *const PortInfo as usize);
        assert_eq!(a, &host.apps[0] as *const App as usize);
        host.add_app(source(), 1024);
        assert_eq!(host.hint_addresses(), None);

        assert!(Host::wakes_first_app(0));
        assert!(Host::wakes_first_app(7 << 32), "a later generation");
        for other in [1, POLL_TIMER, REASSEMBLY_TIMER, ARP_TIMER] {
            assert!(!Host::wakes_first_app(other), "{other:#x}");
        }
    }

    #[test]
    fn tcp_to_the_link_local_address_is_refused_by_name_not_lost() {
        let port = PortInfo {
            mac: EthernetAddress([0x02, 0, 0, 0, 0, 1]),
            addr: None,
            addr6: Some(crate::spec::Ipv6Cidr::parse("2001:2::1/64").unwrap()),
            mtu: 1500,
            link: 0,
            name: "eth0".into(),
        };
        let ll = port.link_local();
        let mut host = Host::new(vec![port], RoutingTable::new(), RoutingTable6::new(), 1);
        let peer: Ipv6Addr = "fe80::9".parse().unwrap();
        let mut syn = [0u8; 20];
        syn[0..2].copy_from_slice(&40000u16.to_be_bytes());
        syn[2..4].copy_from_slice(&80u16.to_be_bytes());
        syn[12] = 5 << 4;
        syn[13] = 0x02;
        let c = ipv6::checksum(peer, ll, next::TCP, &syn);
        syn[16..18].copy_from_slice(&c.to_be_bytes());
        let mut f = ipv6::packet_frame(peer, ll, next::TCP, 64, 20);
        f[ETH_HEADER + IPV6_HEADER..].copy_from_slice(&syn);
        f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
        let (mut out, mut timers, mut ledger) = (Vec::new(), Vec::new(), Ledger::default());
        let mut ctx = NodeCtx::new(SimTime::ZERO, &mut out, &mut timers, &mut ledger);
        host.receive(0, f, &mut ctx);
        assert_eq!(ledger.dropped.get(DropReason::Unsupported), 1);
        assert_eq!(ledger.delivered_total(), 0);
        assert_eq!(host.stats.to_stack, 0);
    }

    #[test]
    fn an_ipv6_packet_never_whole_is_answered_only_if_it_was_sent_to_the_host() {
        // To the host: time exceeded (code 1), waiting for the neighbour's
        // address to be resolved (a solicitation goes out).
        let (out, ledger) = given_up6("2001:2::1".parse().unwrap());
        assert_eq!(out.len(), 1, "a neighbour solicitation: {out:02x?}");
        assert_eq!(
            ledger.created.values().sum::<u64>(),
            2,
            "the error and the solicitation"
        );
        // To all nodes: given up without a word.
        let (out, ledger) = given_up6(ipv6::ALL_NODES);
        assert!(out.is_empty(), "{out:02x?}");
        assert_eq!(ledger.created.values().sum::<u64>(), 0);
    }

    #[test]
    fn an_ipv4_frame_with_another_version_is_malformed_not_delivered() {
        let mut host = host();
        let (mut out, mut timers, mut ledger) = (Vec::new(), Vec::new(), Ledger::default());
        for version in [4, 6, 0, 15] {
            let frame = udp_frame(&host, version);
            let mut ctx = NodeCtx::new(SimTime::ZERO, &mut out, &mut timers, &mut ledger);
            host.receive(0, frame, &mut ctx);
        }
        // Version 4 reaches the stack (which answers port-unreachable); the
        // others are malformed, and are not answered.
        assert_eq!(ledger.delivered.get(&Sink::Host), Some(&1));
        assert_eq!(ledger.dropped.get(DropReason::Malformed), 3);
        assert_eq!(host.stats.to_stack, 1);
        assert_eq!(ledger.created.get(&Origin::Host), Some(&1));
    }
}
