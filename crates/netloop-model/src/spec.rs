//! The plain-data description of a network: what a topology file, the Python
//! API or a test says, before anything is built.
//!
//! [`NetworkSpec`] is the one contract between front ends and the model:
//! `netloop-config` turns a TOML file into it (and owns file/line error
//! reporting), and [`crate::Simulation::build`] turns it into a running model
//! (assigning addresses and routes that the spec leaves out). Everything here
//! is data with defaults; validation of references and ranges happens in
//! `Network::build`, which names the offending item in its errors, and in the
//! config loader, which adds the file and line.

use netloop_core::{Bytes, DataRate, PacketRate, SimDuration};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An IPv4 address with its prefix length, e.g. `198.18.0.1/24`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Ipv4Cidr {
    /// The address.
    pub addr: Ipv4Addr,
    /// The prefix length, 0..=32.
    pub prefix: u8,
}

impl Ipv4Cidr {
    /// The network mask as a `u32`.
    pub fn mask(self) -> u32 {
        if self.prefix == 0 {
            0
        } else {
            u32::MAX << (32 - self.prefix as u32)
        }
    }
    /// The network address (host bits cleared).
    pub fn network(self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) & self.mask())
    }
    /// Whether `ip` lies in this prefix.
    pub fn contains(self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.mask() == u32::from(self.addr) & self.mask()
    }
    /// Parses `"a.b.c.d/len"`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (a, p) = text
            .split_once('/')
            .ok_or_else(|| format!("'{text}' is not an IPv4 prefix: missing '/length'"))?;
        let addr: Ipv4Addr = a
            .trim()
            .parse()
            .map_err(|_| format!("'{text}' is not an IPv4 prefix: '{a}' is not an IPv4 address"))?;
        let prefix: u8 =
            p.trim().parse().ok().filter(|p| *p <= 32).ok_or_else(|| {
                format!("'{text}' is not an IPv4 prefix: length '{p}' is not 0..32")
            })?;
        Ok(Ipv4Cidr { addr, prefix })
    }
}

impl std::fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// An IPv6 address with its prefix length, e.g. `2001:2:0:1::1/64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Ipv6Cidr {
    /// The address.
    pub addr: Ipv6Addr,
    /// The prefix length, 0..=128.
    pub prefix: u8,
}

impl Ipv6Cidr {
    /// The network mask as a `u128`.
    pub fn mask(self) -> u128 {
        if self.prefix == 0 {
            0
        } else {
            u128::MAX << (128 - u32::from(self.prefix.min(128)))
        }
    }
    /// The network address (host bits cleared).
    pub fn network(self) -> Ipv6Addr {
        Ipv6Addr::from(u128::from(self.addr) & self.mask())
    }
    /// Whether `ip` lies in this prefix.
    pub fn contains(self, ip: Ipv6Addr) -> bool {
        u128::from(ip) & self.mask() == u128::from(self.addr) & self.mask()
    }
    /// Parses `"2001:2::1/64"`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (a, p) = text
            .split_once('/')
            .ok_or_else(|| format!("'{text}' is not an IPv6 prefix: missing '/length'"))?;
        let addr: Ipv6Addr = a
            .trim()
            .parse()
            .map_err(|_| format!("'{text}' is not an IPv6 prefix: '{a}' is not an IPv6 address"))?;
        let prefix: u8 =
            p.trim().parse().ok().filter(|p| *p <= 128).ok_or_else(|| {
                format!("'{text}' is not an IPv6 prefix: length '{p}' is not 0..128")
            })?;
        Ok(Ipv6Cidr { addr, prefix })
    }
}

impl std::fmt::Display for Ipv6Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// A whole network and how to run it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NetworkSpec {
    /// Run settings.
    pub run: RunSpec,
    /// Nodes, in declaration order.
    pub nodes: Vec<NodeSpec>,
    /// Links, in declaration order.
    pub links: Vec<LinkSpec>,
    /// Static routes added to the automatic ones.
    pub routes: Vec<RouteSpec>,
    /// Simulated traffic.
    pub traffic: Vec<TrafficSpec>,
    /// Scheduled changes to links.
    pub events: Vec<LinkEventSpec>,
    /// The block from which link subnets are assigned automatically
    /// (default `198.18.0.0/15`, the benchmarking range of RFC 2544).
    pub address_pool: Option<Ipv4Cidr>,
    /// The block from which link subnets get their IPv6 /64s when
    /// [`RunSpec::ipv6`] is on (default `2001:2::/48`, the benchmarking
    /// range of RFC 5180).
    #[serde(default)]
    pub address_pool6: Option<Ipv6Cidr>,
    /// Message endpoints: sockets on simulated hosts through which the
    /// outside (a co-simulation, a Python script) sends and receives.
    #[serde(default)]
    pub endpoints: Vec<MessageEndpointSpec>,
    /// netloop as a HELICS federate, if the topology joins a federation.
    #[serde(default)]
    pub helics: Option<HelicsSpec>,
}

/// A message endpoint: a socket on a simulated host. Messages handed to it
/// leave the host as UDP datagrams (fragmented if larger than the path MTU)
/// or, with [`Transport::Tcp`], as length-prefixed messages on TCP
/// connections from the host's stack; they cross the simulated network, and
/// what reaches its port is kept as messages with the simulated time they
/// arrived.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MessageEndpointSpec {
    /// Unique name (also its HELICS endpoint name in a federation).
    pub name: String,
    /// The simulated host it lives on.
    pub node: String,
    /// Its port on that host (UDP, or the TCP port it listens on).
    pub port: u16,
    /// UDP datagrams or TCP streams.
    #[serde(default)]
    pub protocol: Transport,
    /// Where its messages go unless a send names another destination.
    pub to: Option<EndpointTarget>,
    /// In a HELICS federation: the federate's endpoint that messages
    /// arriving here are handed to.
    pub federate: Option<String>,
}

/// How a message endpoint carries its messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// One message, one UDP datagram: best effort, as the network makes it.
    #[default]
    Udp,
    /// Each message a 4-byte big-endian length and its bytes on a TCP
    /// connection: reliable and in order per connection (see
    /// `netloop_model::msgtcp`).
    Tcp,
}

impl Transport {
    /// Its name in topology files and results.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
        }
    }
}

/// Where a message endpoint sends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EndpointTarget {
    /// Another message endpoint, by name: its host's address and its port.
    Endpoint(String),
    /// An address and port: a real host's program, or any socket.
    Address(std::net::SocketAddr),
}

/// netloop as a federate of a HELICS co-simulation (see
/// `docs/cosimulation.md`). The model never reads it: the front end that
/// joins the federation does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HelicsSpec {
    /// The federate's name.
    pub name: String,
    /// The core type (`zmq`, `tcp`, `tcpss`, `udp`, `ipc`, `inproc`, …).
    pub core: String,
    /// The broker's address (`--broker=` of the core); `None`: HELICS's
    /// default for the core type (a broker on this machine).
    pub broker: Option<String>,
    /// More of the core's init string, as HELICS's own options.
    pub init: String,
    /// How long to wait for the broker and for other federates before
    /// giving up, so a federation that never forms ends with an error.
    pub timeout: SimDuration,
    /// In real time: the step of the federate's time requests, i.e. how
    /// often (at most) netloop hands arrivals to the federation and takes
    /// its messages when nothing else wakes it.
    pub step: SimDuration,
}

/// How long to run and with which seed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunSpec {
    /// Simulated duration of the run.
    pub duration: SimDuration,
    /// The seed of every random stream.
    pub seed: u64,
    /// Real-time mode: how long before an event's deadline the scheduler
    /// stops sleeping and spins on the clock. Longer is more precise and costs
    /// more CPU; zero never spins. Whatever it is, a thread spins at most a
    /// tenth of each 10 ms window (netloop-io's `rt::SPIN_ALLOWANCE_NS`).
    pub spin: SimDuration,
    /// Dual stack: every router and host interface gets an IPv6 address
    /// too, routers forward IPv6, and real hosts have it on.
    #[serde(default)]
    pub ipv6: bool,
    /// IPv6 only (with [`RunSpec::ipv6`]): no interface has an IPv4
    /// address, and traffic and endpoints use IPv6.
    #[serde(default)]
    pub ipv6_only: bool,
    /// Every simulated host and router starts knowing the MAC of each
    /// simulated neighbour on its links (ARP, and with IPv6 neighbour
    /// discovery, entries that never expire), as Mininet's `--arp` fills
    /// every host's table: no address resolution, and no first packets
    /// waiting for it. Real hosts, and the simulated nodes' entries for
    /// them, resolve as usual.
    #[serde(default)]
    pub static_neighbours: bool,
}

/// The default spin window of the real-time scheduler: covers the wake-up
/// latency of a timer on an idle core of a virtual machine, often beyond
/// 50 µs. Measured on a 2-core VM (100 probes/s across two routers): event
/// lateness p50 30 µs at 50 µs of spin, 11 µs at 200 µs, 10 µs at 1 ms, for
/// 3 %, 5.5 % and 20 % of a core.
pub const DEFAULT_SPIN: SimDuration = SimDuration::from_micros(200);

impl Default for RunSpec {
    fn default() -> Self {
        RunSpec {
            duration: SimDuration::from_secs(10),
            seed: 1,
            spin: DEFAULT_SPIN,
            ipv6: false,
            ipv6_only: false,
            static_neighbours: false,
        }
    }
}

/// What kind of node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum NodeKind {
    /// A simulated end host (ARP, ICMP, UDP, TCP via smoltcp).
    Host,
    /// An IPv4 router.
    Router(RouterSpec),
    /// An Ethernet learning bridge.
    Switch(SwitchSpec),
    /// A real host: a Linux network namespace that netloop creates, joined to
    /// the simulation by a TAP device, in which real programs run. Has exactly
    /// one link; its address and routes are assigned like a simulated host's
    /// and configured in the namespace. Needs the real-time mode.
    Namespace(NamespaceSpec),
    /// An existing interface (a physical NIC, one end of a veth pair) made part
    /// of the simulation through an AF_PACKET socket: whatever is behind it is
    /// the node. Has exactly one link; the address on that link is what the
    /// real host behind the interface must use. Needs the real-time mode.
    Attached(AttachedSpec),
}

impl NodeKind {
    /// Whether this node is outside the model (a real host or interface):
    /// a network with one runs in real time only.
    pub fn is_real(&self) -> bool {
        matches!(self, NodeKind::Namespace(_) | NodeKind::Attached(_))
    }
}

/// A real host in a namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NamespaceSpec {
    /// Programs to run in the namespace once the network is up, in order.
    pub commands: Vec<CommandSpec>,
    /// How the namespace's interface is joined to the simulation.
    pub via: HostLink,
}

/// How a namespace host's interface reaches netloop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostLink {
    /// A veth pair: the namespace holds one end, netloop reads and writes the
    /// other through an AF_PACKET socket with memory-mapped rings (batched,
    /// kernel arrival timestamps).
    #[default]
    Veth,
    /// A TAP device: the namespace holds the device, netloop its file
    /// descriptor (one read or write per frame, no kernel timestamps).
    Tap,
}

/// A program run on a real host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommandSpec {
    /// The command line, run by `/bin/sh -c` inside the namespace.
    pub cmd: String,
    /// How long after the network is up to start it.
    pub start: SimDuration,
    /// Whether the run may end once this program (and every other `wait`
    /// program) has exited, before the run's duration is over.
    pub wait: bool,
    /// What shows it is ready (a server listening); the run's clock starts
    /// once it is. Only for commands that start with the network (`start`
    /// zero): a clock that runs cannot wait.
    #[serde(default)]
    pub ready: Option<ReadySpec>,
}

/// When a program counts as ready: it has a socket on `port` in its host's
/// network namespace, listening (TCP) or bound (UDP), on any address of
/// either family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadySpec {
    /// The transport.
    pub protocol: ReadyProtocol,
    /// The local port.
    pub port: u16,
    /// How long to wait for it before the run fails.
    pub timeout: SimDuration,
}

/// The transport of a [`ReadySpec`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReadyProtocol {
    /// A TCP socket in the LISTEN state.
    Tcp,
    /// A bound UDP socket.
    Udp,
}

impl ReadySpec {
    /// How long readiness is waited for unless the topology says.
    pub const DEFAULT_TIMEOUT: SimDuration = SimDuration::from_secs(10);
}

impl std::fmt::Display for ReadySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = match self.protocol {
            ReadyProtocol::Tcp => "tcp",
            ReadyProtocol::Udp => "udp",
        };
        write!(f, "{p}:{}", self.port)
    }
}

/// An existing interface attached to the simulation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttachedSpec {
    /// The interface's name, e.g. `enp3s0` or `veth1`.
    pub interface: String,
    /// Attach even if the interface carries the machine's default route
    /// (which cuts the machine off the network it is managed through).
    pub force: bool,
}

/// Router settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RouterSpec {
    /// Packets forwarded per second; `None` is unlimited (the default). OPNET's
    /// default of 50 000 pps is what capped its SITL throughput.
    pub forwarding_rate: Option<PacketRate>,
    /// Packets that may wait for the forwarding engine when it is rate-limited.
    pub forwarding_queue: u32,
}

impl Default for RouterSpec {
    fn default() -> Self {
        RouterSpec {
            forwarding_rate: None,
            forwarding_queue: 1000,
        }
    }
}

/// Switch settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SwitchSpec {
    /// Entries in the MAC learning table (bounded; the least recently refreshed entry is evicted).
    pub mac_table_size: u32,
    /// How long a learned MAC entry lives without being refreshed.
    pub mac_aging: SimDuration,
}

impl Default for SwitchSpec {
    fn default() -> Self {
        SwitchSpec {
            mac_table_size: 8192,
            mac_aging: SimDuration::from_secs(300),
        }
    }
}

/// A node.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeSpec {
    /// Unique name.
    pub name: String,
    /// What it is.
    pub kind: NodeKind,
}

/// One end of a link.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EndpointSpec {
    /// The node's name.
    pub node: String,
    /// The interface's address, if given; otherwise assigned from the link's
    /// subnet. Ignored (must be `None`) on switches.
    pub address: Option<Ipv4Cidr>,
    /// Its IPv6 address, if given (and the network has IPv6); otherwise
    /// assigned from the link's IPv6 subnet.
    #[serde(default)]
    pub address6: Option<Ipv6Cidr>,
    /// Its interface's name, if given (`eth<port>` otherwise): the name in
    /// results and captures, and inside a namespace host.
    #[serde(default)]
    pub interface: Option<String>,
}

/// A point-to-point, full-duplex link.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LinkSpec {
    /// Unique name; defaults to `"a-b"` (front ends fill it in).
    pub name: String,
    /// First end.
    pub a: EndpointSpec,
    /// Second end.
    pub b: EndpointSpec,
    /// The subnet for automatic addresses on this link, if not automatic.
    pub subnet: Option<Ipv4Cidr>,
    /// The IPv6 subnet for automatic addresses on this link, if not a /64
    /// from the pool.
    #[serde(default)]
    pub subnet6: Option<Ipv6Cidr>,
    /// Parameters of the direction a → b.
    pub a_to_b: DirectionSpec,
    /// Parameters of the direction b → a.
    pub b_to_a: DirectionSpec,
}

/// Parameters of one direction of a link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DirectionSpec {
    /// Line rate; `None` is unlimited (no serialization delay), unless a
    /// trace gives the capacity.
    pub rate: Option<DataRate>,
    /// Capacity from a trace instead of `rate` (which is then `None`).
    #[serde(default)]
    pub trace: Option<crate::trace::TraceSpec>,
    /// Propagation delay.
    pub delay: SimDuration,
    /// Random variation added to the delay.
    pub jitter: Option<JitterSpec>,
    /// Random loss on the wire.
    pub loss: LossSpec,
    /// Probability that a frame has one random bit flipped.
    pub corrupt: f64,
    /// Probability that a frame is delivered twice.
    pub duplicate: f64,
    /// Largest IP packet (Ethernet payload) the link carries, in bytes.
    pub mtu: u32,
    /// Bytes per frame counted on the wire but not held in the frame:
    /// preamble + start delimiter (8), FCS (4), inter-frame gap (12) = 24 by
    /// default, so that 1 Gbit/s gives the real 941 Mbit/s of TCP goodput.
    pub overhead: u32,
    /// The transmit queue in front of the line.
    pub queue: QueueSpec,
}

impl DirectionSpec {
    /// Applies a run-time change (what a `[[event]]` with settings does).
    pub fn apply(&mut self, c: &LinkChange) {
        if let Some(r) = c.rate {
            // A rate set at run time replaces a trace.
            self.rate = r;
            self.trace = None;
        }
        if let Some(d) = c.delay {
            self.delay = d;
        }
        if let Some(j) = &c.jitter {
            self.jitter = j.clone();
        }
        if let Some(l) = &c.loss {
            self.loss = l.clone();
        }
        if let Some(p) = c.corrupt {
            self.corrupt = p;
        }
        if let Some(p) = c.duplicate {
            self.duplicate = p;
        }
    }

    /// The rate of the line, or a trace's mean rate, bit/s; `None` if
    /// unlimited. For estimates (a queue's idle time, a partition's load).
    pub fn nominal_bps(&self) -> Option<u64> {
        match (&self.trace, self.rate) {
            (Some(t), _) => Some(t.mean_bps()),
            (None, r) => r.map(|r| r.bps()),
        }
    }

    /// The least time from a frame's last bit leaving to its arrival: the
    /// delay, less what jitter can take off it (a normal distribution can
    /// take it all).
    pub fn least_delay(&self) -> SimDuration {
        match &self.jitter {
            None => self.delay,
            Some(j) => match j.distribution {
                JitterDistribution::Uniform => SimDuration::from_nanos(
                    self.delay.as_nanos().saturating_sub(j.amount.as_nanos()),
                ),
                JitterDistribution::Normal => SimDuration::ZERO,
                JitterDistribution::Pareto => self.delay,
            },
        }
    }
}

impl Default for DirectionSpec {
    fn default() -> Self {
        DirectionSpec {
            rate: None,
            trace: None,
            delay: SimDuration::ZERO,
            jitter: None,
            loss: LossSpec::None,
            corrupt: 0.0,
            duplicate: 0.0,
            mtu: 1500,
            overhead: 24,
            queue: QueueSpec::default(),
        }
    }
}

/// Delay variation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JitterSpec {
    /// Scale of the variation: the half-width for `uniform` (delay ± amount),
    /// the standard deviation for `normal`, the mean extra delay for `pareto`.
    pub amount: SimDuration,
    /// The distribution.
    pub distribution: JitterDistribution,
    /// Whether a frame may overtake an earlier one (netem's behaviour). By
    /// default a frame never arrives before the one sent before it.
    pub reorder: bool,
}

/// Shape of the delay variation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JitterDistribution {
    /// Uniform on [delay − amount, delay + amount] (clamped at 0).
    Uniform,
    /// Normal with standard deviation `amount` (clamped at 0).
    Normal,
    /// Pareto (shape 3) extra delay with mean `amount`: a heavy tail.
    Pareto,
}

/// Random loss on the wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "kebab-case")]
pub enum LossSpec {
    /// No random loss.
    None,
    /// Each frame is lost independently with probability `p`.
    Bernoulli {
        /// Loss probability in [0, 1].
        p: f64,
    },
    /// The Gilbert–Elliott two-state model: a good and a bad state, each
    /// with its own loss probability. Mean burst (bad-state) length is 1/r,
    /// mean gap (good-state) length 1/p frames.
    GilbertElliott {
        /// Probability of moving good → bad per frame.
        p: f64,
        /// Probability of moving bad → good per frame.
        r: f64,
        /// Loss probability in the good state (often 0).
        loss_good: f64,
        /// Loss probability in the bad state (often 1).
        loss_bad: f64,
    },
}

/// Transmit queue settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueSpec {
    /// Most frames held; `None` is no packet limit.
    pub packets: Option<u32>,
    /// Most bytes held; `None` is no byte limit.
    pub bytes: Option<Bytes>,
    /// The queue discipline.
    pub discipline: QueueDiscipline,
}

impl Default for QueueSpec {
    fn default() -> Self {
        QueueSpec {
            packets: Some(1000),
            bytes: None,
            discipline: QueueDiscipline::DropTail,
        }
    }
}

/// Queue disciplines, each with its parameters (their defaults are the
/// ones their papers, RFCs and Linux use; see `qdisc`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum QueueDiscipline {
    /// First in, first out; arrivals to a full queue are dropped.
    DropTail,
    /// Random Early Detection (Floyd & Jacobson 1993).
    Red(RedSpec),
    /// Controlled Delay (RFC 8289).
    Codel(CodelSpec),
    /// Flow queueing with CoDel on each flow (RFC 8290).
    FqCodel(FqCodelSpec),
}

/// RED's parameters. Thresholds are of the average queue length in
/// packets.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RedSpec {
    /// Below this average nothing is dropped (`min_th`).
    pub min_threshold: f64,
    /// At this average the drop probability reaches `max_p` (`max_th`).
    pub max_threshold: f64,
    /// The drop probability at `max_threshold`.
    pub max_p: f64,
    /// The weight of the current length in the average (`w_q`).
    pub weight: f64,
    /// "Gentle" RED (Floyd 2000): between `max_threshold` and twice it the
    /// probability rises from `max_p` to 1 instead of jumping to 1.
    pub gentle: bool,
    /// Mark ECN-capable packets Congestion Experienced instead of dropping
    /// them.
    pub ecn: bool,
}

impl Default for RedSpec {
    fn default() -> Self {
        // Floyd's recommendations ("RED: Discussions of Setting
        // Parameters", 1997): min_th 5 packets, max_th 3 × min_th, w_q
        // 0.002, max_p 0.1; gentle as in ns-2 since 2000.
        RedSpec {
            min_threshold: 5.0,
            max_threshold: 15.0,
            max_p: 0.1,
            weight: 0.002,
            gentle: true,
            ecn: false,
        }
    }
}

/// CoDel's parameters (RFC 8289 §4.2, §4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodelSpec {
    /// The standing queue delay it keeps the queue to.
    pub target: SimDuration,
    /// The window over which a standing queue must persist before it acts
    /// (about the worst round trip of the flows through it).
    pub interval: SimDuration,
    /// Mark ECN-capable packets Congestion Experienced instead of dropping
    /// them.
    pub ecn: bool,
}

impl Default for CodelSpec {
    fn default() -> Self {
        CodelSpec {
            target: SimDuration::from_millis(5),
            interval: SimDuration::from_millis(100),
            ecn: false,
        }
    }
}

/// FQ-CoDel's parameters (RFC 8290 §4, §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqCodelSpec {
    /// Flow queues the packets are hashed into.
    pub flows: u32,
    /// Bytes a flow may send per round of the deficit round robin.
    pub quantum: u32,
    /// CoDel's target, on each flow queue.
    pub target: SimDuration,
    /// CoDel's interval, on each flow queue.
    pub interval: SimDuration,
    /// Mark ECN-capable packets instead of dropping them (on by default, as
    /// in RFC 8290 §5.2.7 and Linux).
    pub ecn: bool,
}

impl Default for FqCodelSpec {
    fn default() -> Self {
        FqCodelSpec {
            flows: 1024,
            quantum: 1514,
            target: SimDuration::from_millis(5),
            interval: SimDuration::from_millis(100),
            ecn: true,
        }
    }
}

/// A static route on a router or host.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RouteSpec {
    /// The node the route is installed on.
    pub node: String,
    /// Destination prefix.
    pub prefix: IpPrefix,
    /// Next-hop address (must be on a directly connected subnet, of the
    /// prefix's family).
    pub via: IpAddr,
}

/// An IPv4 or IPv6 prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IpPrefix {
    /// An IPv4 prefix.
    V4(Ipv4Cidr),
    /// An IPv6 prefix.
    V6(Ipv6Cidr),
}

impl std::fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IpPrefix::V4(p) => p.fmt(f),
            IpPrefix::V6(p) => p.fmt(f),
        }
    }
}

/// A simulated traffic flow (or `count` identical ones).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrafficSpec {
    /// Unique name; replicated flows are named `name#0`, `name#1`, ….
    pub name: String,
    /// Source host.
    pub from: String,
    /// Destination host.
    pub to: String,
    /// When the flow starts.
    pub start: SimDuration,
    /// When it stops sending; `None` is the end of the run.
    pub stop: Option<SimDuration>,
    /// Number of identical flows (each with its own ports and random stream).
    pub count: u32,
    /// The traffic pattern.
    pub kind: TrafficKind,
    /// Over IPv6 instead of IPv4 (in a dual-stack network; always in an
    /// IPv6-only one).
    #[serde(default)]
    pub ipv6: bool,
}

/// Traffic patterns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TrafficKind {
    /// ICMP echo requests at a fixed interval; RTTs measured.
    Ping {
        /// Time between requests.
        interval: SimDuration,
        /// ICMP payload size.
        size: Bytes,
    },
    /// UDP datagrams at a constant bit rate (payload bits).
    UdpCbr {
        /// Payload bit rate.
        rate: DataRate,
        /// UDP payload size (at least 20 bytes: sequence and timestamp).
        size: Bytes,
    },
    /// UDP datagrams with exponential gaps (a Poisson process) of mean rate.
    UdpPoisson {
        /// Mean payload bit rate.
        rate: DataRate,
        /// UDP payload size.
        size: Bytes,
    },
    /// Constant bit rate during "on" periods, silence during "off" periods;
    /// period lengths are exponential with the given means.
    UdpOnOff {
        /// Payload bit rate while on.
        rate: DataRate,
        /// UDP payload size.
        size: Bytes,
        /// Mean on-period.
        on: SimDuration,
        /// Mean off-period.
        off: SimDuration,
    },
    /// A TCP bulk transfer of `bytes` (or until `stop` if `None`).
    TcpBulk {
        /// Bytes to send.
        bytes: Option<Bytes>,
    },
    /// TCP request/response transactions on one connection.
    TcpRr {
        /// Request size.
        request: Bytes,
        /// Response size.
        response: Bytes,
        /// Time between the starts of requests; `None` is back-to-back.
        interval: Option<SimDuration>,
    },
    /// UDP probes with TTL 1, 2, … recording who answers (time-exceeded from
    /// each router, then port-unreachable from the destination).
    Traceroute {
        /// Largest TTL tried.
        max_hops: u8,
    },
}

/// Which direction(s) of a link an event changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// Both directions.
    Both,
    /// From the link's `a` end to its `b` end.
    AToB,
    /// From `b` to `a`.
    BToA,
}

impl Direction {
    /// Whether it includes direction `side` (0 = a → b, 1 = b → a).
    pub fn includes(self, side: usize) -> bool {
        match self {
            Direction::Both => true,
            Direction::AToB => side == 0,
            Direction::BToA => side == 1,
        }
    }
}

/// A change to a link at a given simulated time.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LinkEventSpec {
    /// When.
    pub at: SimDuration,
    /// Which link (by name).
    pub link: String,
    /// Which direction(s).
    pub direction: Direction,
    /// What happens.
    pub action: LinkAction,
}

/// What a link event does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum LinkAction {
    /// The link goes down: queued and in-flight frames are dropped
    /// (`link_down`) and new ones are refused until it comes up.
    Down,
    /// The link comes back up.
    Up,
    /// Parameters change; fields left `None` keep their value.
    Set(LinkChange),
}

/// New values for some parameters of a link direction.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkChange {
    /// New rate (`Some(None)` makes it unlimited).
    pub rate: Option<Option<DataRate>>,
    /// New propagation delay.
    pub delay: Option<SimDuration>,
    /// New jitter (`Some(None)` removes it).
    pub jitter: Option<Option<JitterSpec>>,
    /// New loss model.
    pub loss: Option<LossSpec>,
    /// New corruption probability.
    pub corrupt: Option<f64>,
    /// New duplication probability.
    pub duplicate: Option<f64>,
}
