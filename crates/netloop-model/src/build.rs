//! Turning a [`NetworkSpec`] into a running [`Simulation`].
//!
//! This module owns everything a spec may leave out and the checks that need
//! the whole network in view:
//! - **Layer-2 segments.** A link, or a group of links joined by switches, is
//!   one broadcast domain and gets one IPv4 subnet.
//! - **Addresses.** Explicit addresses are checked (inside the segment's
//!   subnet, unique in the network); the rest are numbered from .1 upward.
//!   Automatic subnets come from the address pool (198.18.0.0/15 by default):
//!   a /24 per segment while the pool has room, smaller blocks beyond.
//!   With IPv6 on ([`crate::spec::RunSpec::ipv6`]) every segment also gets a
//!   /64 from the IPv6 pool (2001:2::/48 by default: `2001:2:0:k::/64` for
//!   the k-th segment), and each interface the same host number as in IPv4
//!   (198.18.3.2 is 2001:2:0:3::2 when the two pools line up). An
//!   IPv6-only network ([`crate::spec::RunSpec::ipv6_only`]) is numbered
//!   the same way, then its IPv4 addresses are taken away.
//! - **Routes.** Each router and host gets a connected route per subnet and a
//!   route to every other subnet via the first hop of a shortest path (fewest
//!   router hops; ties go to the lower port, then the earlier neighbour, so
//!   routing is deterministic). A host on one subnet with one router gets a
//!   default route instead. Static routes from the spec are added last and
//!   win for their exact prefix. IPv6 tables follow the same paths.
//! - **Traffic.** Each flow becomes a source application on its sending host
//!   and a sink/server on its receiving host, with ports assigned per host.
//!
//! Errors name the spec item (by index, for the front end's line numbers),
//! the field, the value and what was expected.

use netloop_core::{EventQueue, RngStream, RunStats, SimDuration, SimTime};
use rand::RngCore;
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::apps::{
    self, App, Pattern, TcpClient, TcpMode, TcpServer, TcpStats, Traceroute, UdpSink, UdpSource,
    PROBE_HEADER,
};
use crate::error::{BuildError, ItemRef};
use crate::host::Host;
use crate::ipv6;
use crate::link::{Link, LinkDir};
use crate::network::{Event, Network, Node, Sources};
use crate::node::{mac_for, PortInfo};
use crate::router::Router;
use crate::routing::{Route, Route6, RoutingTable, RoutingTable6};
use crate::spec::{
    DirectionSpec, EndpointSpec, EndpointTarget, IpPrefix, Ipv4Cidr, Ipv6Cidr, LinkAction,
    LossSpec, NetworkSpec, NodeKind, TrafficKind, Transport,
};
use crate::switch::Switch;
use crate::{LinkId, NodeId, PortId};

/// Send and receive buffer of each simulated TCP socket. 256 KiB covers the
/// bandwidth-delay product of 1 Gbit/s at 2 ms RTT; larger windows are a
/// planned per-flow setting.
pub const TCP_BUFFER: usize = 256 * 1024;

/// The default pool for automatic subnets (RFC 2544's benchmarking range).
pub const DEFAULT_POOL: Ipv4Cidr = Ipv4Cidr {
    addr: Ipv4Addr::new(198, 18, 0, 0),
    prefix: 15,
};

/// IPv4 space that holds no interface address: multicast and the reserved
/// 240/4 (224/3 together), loopback and "this network".
const NOT_UNICAST4: [Ipv4Cidr; 3] = [
    Ipv4Cidr {
        addr: Ipv4Addr::new(224, 0, 0, 0),
        prefix: 3,
    },
    Ipv4Cidr {
        addr: Ipv4Addr::new(127, 0, 0, 0),
        prefix: 8,
    },
    Ipv4Cidr {
        addr: Ipv4Addr::new(0, 0, 0, 0),
        prefix: 8,
    },
];
/// [`NOT_UNICAST4`] in words, for errors.
const NOT_UNICAST4_WHAT: &str = "multicast, reserved, loopback or 0.0.0.0/8";

/// The default pool for automatic IPv6 subnets (RFC 5180's benchmarking
/// range).
pub const DEFAULT_POOL6: Ipv6Cidr = Ipv6Cidr {
    addr: Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 0),
    prefix: 48,
};

/// One simulated flow, as built.
#[derive(Clone, Debug)]
pub struct FlowInfo {
    /// Unique name (`name#k` for replicated flows).
    pub name: String,
    /// The traffic kind's name, e.g. `udp-cbr`.
    pub kind: &'static str,
    /// Index of its [`crate::spec::TrafficSpec`].
    pub spec_index: usize,
    /// Sending host.
    pub from: NodeId,
    /// Receiving host.
    pub to: NodeId,
    /// When it starts.
    pub start: SimTime,
    /// When it stops sending.
    pub stop: SimTime,
    /// The source application on `from`.
    pub src_app: usize,
    /// The sink/server application on `to`, if any.
    pub dst_app: Option<usize>,
}

/// A network, its event queue and its flows: everything needed to run.
pub struct Simulation {
    /// The model.
    pub net: Network,
    /// Its pending events.
    pub queue: EventQueue<Event>,
    /// The flows, in spec order.
    pub flows: Vec<FlowInfo>,
    /// The real nodes (namespaces, attached interfaces), in spec order: what
    /// the real-time I/O layer must create and connect.
    pub real: Vec<RealNode>,
    /// The message endpoints, in spec order.
    pub endpoints: Vec<EndpointInfo>,
}

/// A message endpoint as built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointInfo {
    /// Its name.
    pub name: String,
    /// The simulated host it lives on.
    pub node: NodeId,
    /// Its application index on that host.
    pub app: usize,
    /// Its address and port.
    pub addr: std::net::SocketAddr,
    /// UDP or TCP.
    pub protocol: Transport,
    /// Where it sends by default.
    pub to: Option<std::net::SocketAddr>,
    /// The HELICS endpoint that what arrives is handed to.
    pub federate: Option<String>,
}

/// A node outside the model, as built: where it joins the simulation and how
/// the real host behind it must be configured to fit in.
#[derive(Clone, Debug)]
pub struct RealNode {
    /// Its node id (an external node in the network).
    pub node: NodeId,
    /// Its name in the topology.
    pub name: String,
    /// Namespace or attached interface, with its settings.
    pub kind: NodeKind,
    /// Its one port: MAC, address, MTU and link.
    pub port: PortInfo,
    /// Routes through a gateway (connected subnets excluded), e.g. the
    /// default route via the neighbouring router.
    pub routes: Vec<Route>,
    /// The same for IPv6, if the network has it.
    pub routes6: Vec<Route6>,
}

impl Simulation {
    /// Builds the network described by `spec`.
    pub fn build(spec: &NetworkSpec) -> Result<Simulation, BuildError> {
        Builder::new(spec).build()
    }

    /// Runs until the spec's duration, as fast as possible. `progress` is
    /// called every `every` events with the simulated time; returning `false`
    /// stops early.
    pub fn run(&mut self, every: u64, progress: impl FnMut(SimTime, u64) -> bool) -> RunStats {
        let end = SimTime::ZERO + self.net.spec.run.duration;
        self.run_until(end, every, progress)
    }

    /// Runs as fast as possible until the spec's duration, writing a sample
    /// of `series` at each of its times (once every event due then has run)
    /// and one at the time the run stopped if that is off the grid (an
    /// interrupted run). `progress` as [`Simulation::run`]'s, and also
    /// asked between steps; returning `false` stops the run.
    pub fn run_sampled(
        &mut self,
        series: &mut crate::series::SeriesWriter,
        every: u64,
        mut progress: impl FnMut(SimTime, u64) -> bool,
    ) -> std::io::Result<()> {
        let end = SimTime::ZERO + self.net.spec.run.duration;
        loop {
            let until = series.next_at().min(end);
            self.run_until(until, every, &mut progress);
            // Asked here too: short steps would never reach `every` events.
            if !progress(self.queue.now(), 0) {
                break;
            }
            if series.next_at() <= until {
                series.sample(&self.net, &self.flows, until, None)?;
            }
            if until >= end {
                break;
            }
        }
        let now = self.queue.now();
        if series.last_at().is_none_or(|t| t < now) {
            series.sample(&self.net, &self.flows, now, None)?;
        }
        Ok(())
    }

    /// Runs as fast as possible until simulated time `until`.
    pub fn run_until(
        &mut self,
        until: SimTime,
        every: u64,
        progress: impl FnMut(SimTime, u64) -> bool,
    ) -> RunStats {
        netloop_core::run_afap(&mut self.net, &mut self.queue, until, every, progress)
    }
}

fn kind_name(k: &TrafficKind) -> &'static str {
    match k {
        TrafficKind::Ping { .. } => "ping",
        TrafficKind::UdpCbr { .. } => "udp-cbr",
        TrafficKind::UdpPoisson { .. } => "udp-poisson",
        TrafficKind::UdpOnOff { .. } => "udp-onoff",
        TrafficKind::TcpBulk { .. } => "tcp-bulk",
        TrafficKind::TcpRr { .. } => "tcp-rr",
        TrafficKind::Traceroute { .. } => "traceroute",
    }
}

/// Union-find: the root of `x`'s set, compressing the path to it (over
/// link indices for segments here; over nodes for partitions).
pub(crate) fn find(parent: &mut [usize], x: usize) -> usize {
    let mut r = x;
    while parent[r] != r {
        r = parent[r];
    }
    let mut y = x;
    while parent[y] != r {
        let next = parent[y];
        parent[y] = r;
        y = next;
    }
    r
}

/// How a node reaches the segments of the network ([`Builder::paths`]).
#[derive(Default)]
struct Paths {
    /// (segment, port) for each segment a port is on.
    connected: Vec<(usize, PortId)>,
    /// The one router of a single-homed host: (router, its port).
    default: Option<(NodeId, PortId)>,
    /// (segment, our port towards it, first hop: router and its port on
    /// our segment).
    remote: Vec<(usize, PortId, (NodeId, PortId))>,
}

/// A broadcast domain: one or more links joined by switches.
struct Segment {
    /// Links in it, in spec order.
    links: Vec<LinkId>,
    /// Router/host interfaces on it: (node, port, link, side).
    ifaces: Vec<(NodeId, PortId, LinkId, usize)>,
    subnet: Option<Ipv4Cidr>,
}

struct Builder<'a> {
    spec: &'a NetworkSpec,
    ids: HashMap<&'a str, NodeId>,
    ports: Vec<Vec<PortInfo>>,
    port_links: Vec<Vec<(LinkId, usize)>>,
    /// Segment of each (node, port) — routers and hosts only.
    port_segment: Vec<Vec<Option<usize>>>,
    segments: Vec<Segment>,
}

fn is_switch(k: &NodeKind) -> bool {
    matches!(k, NodeKind::Switch(_))
}

impl<'a> Builder<'a> {
    fn new(spec: &'a NetworkSpec) -> Self {
        Builder {
            spec,
            ids: HashMap::new(),
            ports: Vec::new(),
            port_links: Vec::new(),
            port_segment: Vec::new(),
            segments: Vec::new(),
        }
    }

    fn err(&self, item: ItemRef, field: Option<&'static str>, message: String) -> BuildError {
        let s = self.spec;
        let what = match item {
            ItemRef::Run => "run settings".to_string(),
            ItemRef::Node(i) => format!("node '{}'", s.nodes[i].name),
            ItemRef::Link(i) => format!("link '{}'", s.links[i].name),
            ItemRef::Route(i) => format!("route {} on '{}'", s.routes[i].prefix, s.routes[i].node),
            ItemRef::Traffic(i) => format!("traffic '{}'", s.traffic[i].name),
            ItemRef::Event(i) => {
                format!("event at {} on link '{}'", s.events[i].at, s.events[i].link)
            }
            ItemRef::Endpoint(i) => format!("endpoint '{}'", s.endpoints[i].name),
            ItemRef::Helics => "helics settings".to_string(),
        };
        BuildError {
            item,
            what,
            field,
            message,
        }
    }

    fn node_ref(
        &self,
        item: ItemRef,
        field: &'static str,
        name: &str,
    ) -> Result<NodeId, BuildError> {
        self.ids.get(name).copied().ok_or_else(|| {
            let mut known: Vec<&str> = self
                .spec
                .nodes
                .iter()
                .map(|n| n.name.as_str())
                .take(10)
                .collect();
            if self.spec.nodes.len() > 10 {
                known.push("…");
            }
            self.err(
                item,
                Some(field),
                format!("'{name}' is not a node; nodes are: {}", known.join(", ")),
            )
        })
    }

    fn build(mut self) -> Result<Simulation, BuildError> {
        let spec = self.spec;
        if spec.run.duration == SimDuration::ZERO {
            return Err(self.err(
                ItemRef::Run,
                Some("duration"),
                "the run duration must be positive".into(),
            ));
        }
        // Before anything is made for each node and link: a network too
        // large is refused at once, not after its ports and routes.
        let src = Sources::new(spec.nodes.len(), spec.links.len())
            .map_err(|why| self.err(ItemRef::Run, None, why))?;
        for (i, n) in spec.nodes.iter().enumerate() {
            if n.name.is_empty() {
                return Err(self.err(
                    ItemRef::Node(i),
                    Some("name"),
                    "a node needs a non-empty name".into(),
                ));
            }
            if let Some(&first) = self.ids.get(n.name.as_str()) {
                return Err(self.err(
                    ItemRef::Node(i),
                    Some("name"),
                    format!(
                        "duplicate node name '{}' (first declared as node #{})",
                        n.name,
                        first + 1
                    ),
                ));
            }
            self.ids.insert(&n.name, i);
        }
        self.ports = vec![Vec::new(); spec.nodes.len()];
        self.port_links = vec![Vec::new(); spec.nodes.len()];
        self.port_segment = vec![Vec::new(); spec.nodes.len()];
        self.make_ports()?;
        self.check_real_nodes()?;
        self.check_switch_loops()?;
        self.make_segments()?;
        self.assign_addresses()?;
        self.assign_addresses6()?;
        self.drop_ipv4()?;
        let tables = self.routing_tables()?;
        self.finish(tables, src)
    }

    /// Real nodes join the model through exactly one interface, and a
    /// namespace's name becomes part of a file name and a device name.
    fn check_real_nodes(&self) -> Result<(), BuildError> {
        let mut interfaces: HashMap<&str, usize> = HashMap::new();
        for (i, n) in self.spec.nodes.iter().enumerate() {
            if !n.kind.is_real() {
                continue;
            }
            let what = if matches!(n.kind, NodeKind::Namespace(_)) {
                "a namespace host"
            } else {
                "an attached interface"
            };
            if self.ports[i].len() != 1 {
                return Err(self.err(
                    ItemRef::Node(i),
                    None,
                    format!(
                        "{what} needs exactly one link, but '{}' has {}",
                        n.name,
                        self.ports[i].len()
                    ),
                ));
            }
            match &n.kind {
                NodeKind::Namespace(ns) => {
                    let ok = n.name.len() <= 32
                        && n.name
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
                    if !ok {
                        return Err(self.err(
                            ItemRef::Node(i),
                            Some("name"),
                            format!(
                                "'{}' can't name a namespace host: use at most 32 letters, \
                                 digits, '-' and '_'",
                                n.name
                            ),
                        ));
                    }
                    for c in &ns.commands {
                        if c.cmd.trim().is_empty() {
                            return Err(self.err(
                                ItemRef::Node(i),
                                Some("commands"),
                                "a command line is empty".into(),
                            ));
                        }
                        if c.start > self.spec.run.duration {
                            return Err(self.err(
                                ItemRef::Node(i),
                                Some("commands"),
                                format!(
                                    "'{}' starts at {}, after the end of the run ({})",
                                    c.cmd, c.start, self.spec.run.duration
                                ),
                            ));
                        }
                    }
                }
                NodeKind::Attached(a) => {
                    if a.interface.is_empty() || a.interface.len() > 15 || a.interface.contains('/')
                    {
                        return Err(self.err(
                            ItemRef::Node(i),
                            Some("interface"),
                            format!(
                                "'{}' is not an interface name (1 to 15 characters, no '/')",
                                a.interface
                            ),
                        ));
                    }
                    if let Some(first) = interfaces.insert(&a.interface, i) {
                        return Err(self.err(
                            ItemRef::Node(i),
                            Some("interface"),
                            format!(
                                "interface '{}' is already attached as node '{}'",
                                a.interface, self.spec.nodes[first].name
                            ),
                        ));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn check_dir(&self, i: usize, d: &DirectionSpec) -> Result<(), BuildError> {
        let prob = |f: &'static str, p: f64| -> Result<(), BuildError> {
            if !(0.0..=1.0).contains(&p) || p.is_nan() {
                Err(self.err(
                    ItemRef::Link(i),
                    Some(f),
                    format!("{p} is not a probability (expected a number in [0, 1])"),
                ))
            } else {
                Ok(())
            }
        };
        match d.loss {
            LossSpec::None => {}
            LossSpec::Bernoulli { p } => prob("loss", p)?,
            LossSpec::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                for v in [p, r, loss_good, loss_bad] {
                    prob("loss", v)?;
                }
            }
        }
        prob("corrupt", d.corrupt)?;
        prob("duplicate", d.duplicate)?;
        if d.mtu < 68 {
            return Err(self.err(
                ItemRef::Link(i),
                Some("mtu"),
                format!("{} is below IPv4's minimum MTU of 68", d.mtu),
            ));
        }
        if let Some(t) = &d.trace {
            if d.rate.is_some() {
                return Err(self.err(
                    ItemRef::Link(i),
                    Some("trace"),
                    "a direction's capacity is its rate or its trace, not both".to_string(),
                ));
            }
            t.check()
                .map_err(|e| self.err(ItemRef::Link(i), Some("trace"), e))?;
        }
        Ok(())
    }

    fn make_ports(&mut self) -> Result<(), BuildError> {
        let spec = self.spec;
        let mut names = HashSet::new();
        // Each node's interface names, with the link of each: looked up
        // rather than searched (a search of the node's ports for each new
        // one took a switch of 65 536 ports billions of comparisons).
        let mut interfaces: HashMap<(usize, String), usize> = HashMap::new();
        for (i, l) in spec.links.iter().enumerate() {
            if !names.insert(l.name.as_str()) {
                return Err(self.err(
                    ItemRef::Link(i),
                    Some("name"),
                    format!("duplicate link name '{}'", l.name),
                ));
            }
            let a = self.node_ref(ItemRef::Link(i), "endpoints", &l.a.node)?;
            let b = self.node_ref(ItemRef::Link(i), "endpoints", &l.b.node)?;
            if a == b {
                return Err(self.err(
                    ItemRef::Link(i),
                    Some("endpoints"),
                    format!("a link from '{}' to itself", l.a.node),
                ));
            }
            self.check_dir(i, &l.a_to_b)?;
            self.check_dir(i, &l.b_to_a)?;
            for (side, (node, ep, dir)) in [(a, &l.a, &l.a_to_b), (b, &l.b, &l.b_to_a)]
                .into_iter()
                .enumerate()
            {
                if is_switch(&spec.nodes[node].kind) && ep.address.is_some() {
                    return Err(self.err(
                        ItemRef::Link(i),
                        Some("addresses"),
                        format!("'{}' is a switch; switch ports have no IP address", ep.node),
                    ));
                }
                let port = self.ports[node].len();
                if port == crate::node::MAX_PORTS {
                    return Err(self.err(
                        ItemRef::Link(i),
                        Some("endpoints"),
                        format!(
                            "'{}' would have more than {} ports with this link: a port's MAC \
                             address holds its number in 16 bits; split its links over \
                             several switches",
                            ep.node,
                            crate::node::MAX_PORTS
                        ),
                    ));
                }
                let name = ep.interface.clone().unwrap_or_else(|| format!("eth{port}"));
                let entry = interfaces.entry((node, name.clone()));
                if let std::collections::hash_map::Entry::Occupied(o) = &entry {
                    let other = *o.get();
                    let how = if ep.interface.is_some() {
                        ""
                    } else {
                        " (its automatic name)"
                    };
                    return Err(self.err(
                        ItemRef::Link(i),
                        Some("interfaces"),
                        format!(
                            "'{}' would have two interfaces named '{name}', on this link{how} and on link '{}': name them apart in 'interfaces'",
                            ep.node, spec.links[other].name
                        ),
                    ));
                }
                entry.or_insert(i);
                self.ports[node].push(PortInfo {
                    mac: mac_for(node, port),
                    addr: None,
                    addr6: None,
                    mtu: dir.mtu,
                    link: i,
                    name,
                });
                self.port_links[node].push((i, side));
                self.port_segment[node].push(None);
            }
        }
        Ok(())
    }

    /// Switches must not form a loop. netloop's switches run no spanning
    /// tree protocol, so a broadcast (any host's first ARP request) would
    /// circle a loop for ever; over links without rate and delay it does so
    /// at one simulated instant, and the run never advances. Refused here,
    /// naming the loop, rather than left to hang a run.
    fn check_switch_loops(&self) -> Result<(), BuildError> {
        let spec = self.spec;
        let mut parent: Vec<usize> = (0..spec.nodes.len()).collect();
        // The switch-to-switch links accepted so far (a forest), to name the
        // loop a refused link would close.
        let mut adj: Vec<Vec<usize>> = vec![Vec::new(); spec.nodes.len()];
        for (i, l) in spec.links.iter().enumerate() {
            let (a, b) = (self.ids[l.a.node.as_str()], self.ids[l.b.node.as_str()]);
            if !is_switch(&spec.nodes[a].kind) || !is_switch(&spec.nodes[b].kind) {
                continue;
            }
            let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
            if ra != rb {
                parent[ra.max(rb)] = ra.min(rb);
                adj[a].push(b);
                adj[b].push(a);
                continue;
            }
            // The path from b back to a through the forest, found by a
            // breadth-first search that remembers where it came from.
            let mut from = vec![usize::MAX; spec.nodes.len()];
            from[a] = a;
            let mut todo = std::collections::VecDeque::from([a]);
            while let Some(x) = todo.pop_front() {
                for &y in &adj[x] {
                    if from[y] == usize::MAX {
                        from[y] = x;
                        todo.push_back(y);
                    }
                }
            }
            let mut path = vec![spec.nodes[a].name.as_str()];
            let mut x = b;
            let mut back = vec![spec.nodes[b].name.as_str()];
            while x != a && from[x] != usize::MAX && from[x] != a {
                x = from[x];
                back.push(spec.nodes[x].name.as_str());
            }
            back.reverse();
            path.extend(back);
            path.push(spec.nodes[a].name.as_str());
            return Err(self.err(
                ItemRef::Link(i),
                Some("endpoints"),
                format!(
                    "this link closes a loop of switches ({}); netloop's switches run no spanning tree, \
                     so a broadcast would circle the loop for ever: remove a link of the loop or put a router in it",
                    path.join(" - ")
                ),
            ));
        }
        Ok(())
    }

    fn make_segments(&mut self) -> Result<(), BuildError> {
        let spec = self.spec;
        let n = spec.links.len();
        let mut parent: Vec<usize> = (0..n).collect();
        for (node, pl) in self.port_links.iter().enumerate() {
            if is_switch(&spec.nodes[node].kind) {
                for w in pl.windows(2) {
                    let (x, y) = (find(&mut parent, w[0].0), find(&mut parent, w[1].0));
                    parent[x.max(y)] = x.min(y);
                }
            }
        }
        let mut seg_of_root: HashMap<usize, usize> = HashMap::new();
        for li in 0..n {
            let root = find(&mut parent, li);
            let next = self.segments.len();
            let s = *seg_of_root.entry(root).or_insert(next);
            if s == next {
                self.segments.push(Segment {
                    links: Vec::new(),
                    ifaces: Vec::new(),
                    subnet: None,
                });
            }
            self.segments[s].links.push(li);
        }
        for (node, pl) in self.port_links.iter().enumerate() {
            if is_switch(&spec.nodes[node].kind) {
                continue;
            }
            for (port, &(link, side)) in pl.iter().enumerate() {
                let s = seg_of_root[&find(&mut parent, link)];
                self.segments[s].ifaces.push((node, port, link, side));
                self.port_segment[node][port] = Some(s);
            }
        }
        for s in &mut self.segments {
            s.ifaces.sort_by_key(|&(_, _, link, side)| (link, side));
        }
        Ok(())
    }

    fn endpoint(&self, link: LinkId, side: usize) -> &EndpointSpec {
        let l = &self.spec.links[link];
        if side == 0 {
            &l.a
        } else {
            &l.b
        }
    }

    fn assign_addresses(&mut self) -> Result<(), BuildError> {
        let pool = self.spec.address_pool.unwrap_or(DEFAULT_POOL);
        // Hosts' stacks take only unicast addresses (smoltcp panics on
        // others): a pool, a subnet or an address in multicast space, the
        // reserved 240/4, loopback or "this network" is refused here.
        if let Some(r) = NOT_UNICAST4
            .iter()
            .find(|r| r.contains(pool.addr) || pool.contains(r.addr))
        {
            return Err(self.err(ItemRef::Run, Some("address_pool"), format!("the address pool {pool} overlaps {r}, {NOT_UNICAST4_WHAT}: links need unicast subnets (e.g. the default, {DEFAULT_POOL})")));
        }
        for (li, l) in self.spec.links.iter().enumerate() {
            for a in [l.a.address, l.b.address].into_iter().flatten() {
                if NOT_UNICAST4.iter().any(|r| r.contains(a.addr)) {
                    return Err(self.err(
                        ItemRef::Link(li),
                        Some("addresses"),
                        format!("{a} is not a unicast address ({NOT_UNICAST4_WHAT})"),
                    ));
                }
            }
        }
        // Explicit subnets first: from a link's `subnet`, else from an
        // explicit address on the segment.
        let mut used_blocks: Vec<Ipv4Cidr> = Vec::new();
        for si in 0..self.segments.len() {
            let mut subnet: Option<(Ipv4Cidr, LinkId)> = None;
            for &li in &self.segments[si].links {
                if let Some(s) = self.spec.links[li].subnet {
                    let s = Ipv4Cidr {
                        addr: s.network(),
                        prefix: s.prefix,
                    };
                    if NOT_UNICAST4.iter().any(|r| r.contains(s.addr)) {
                        return Err(self.err(
                            ItemRef::Link(li),
                            Some("subnet"),
                            format!(
                                "subnet {s} is not unicast address space ({NOT_UNICAST4_WHAT})"
                            ),
                        ));
                    }
                    if let Some((prev, pl)) = subnet {
                        if prev != s {
                            return Err(self.err(ItemRef::Link(li), Some("subnet"), format!("subnet {s} differs from {prev} given on link '{}' of the same switched segment", self.spec.links[pl].name)));
                        }
                    }
                    subnet = Some((s, li));
                }
            }
            if subnet.is_none() {
                for &(_, _, li, side) in &self.segments[si].ifaces {
                    if let Some(a) = self.endpoint(li, side).address {
                        subnet = Some((
                            Ipv4Cidr {
                                addr: a.network(),
                                prefix: a.prefix,
                            },
                            li,
                        ));
                        break;
                    }
                }
            }
            if let Some((s, _)) = subnet {
                used_blocks.push(s);
                self.segments[si].subnet = Some(s);
            }
        }
        // Automatic subnets.
        let auto: Vec<usize> = (0..self.segments.len())
            .filter(|&s| self.segments[s].subnet.is_none() && !self.segments[s].ifaces.is_empty())
            .collect();
        let pool_size = 1u64 << (32 - pool.prefix as u32);
        let mut cursor = u32::from(pool.network()) as u64;
        let pool_end = cursor + pool_size;
        let fits_24 = pool.prefix <= 24 && (auto.len() as u64) * 256 <= pool_size;
        for &si in &auto {
            let needed = self.segments[si].ifaces.len() as u64 + 2;
            let prefix = if fits_24 && needed <= 256 {
                24
            } else {
                (32 - needed.next_power_of_two().trailing_zeros()).min(30) as u8
            };
            let size = 1u64 << (32 - prefix as u32);
            loop {
                cursor = cursor.div_ceil(size) * size;
                if cursor + size > pool_end {
                    let li = self.segments[si].links[0];
                    return Err(self.err(ItemRef::Link(li), Some("subnet"), format!("the address pool {pool} is exhausted; give a larger address_pool or explicit subnets")));
                }
                let cand = Ipv4Cidr {
                    addr: Ipv4Addr::from(cursor as u32),
                    prefix,
                };
                if used_blocks
                    .iter()
                    .any(|u| u.contains(cand.addr) || cand.contains(u.addr))
                {
                    cursor += size;
                    continue;
                }
                used_blocks.push(cand);
                self.segments[si].subnet = Some(cand);
                cursor += size;
                break;
            }
        }
        // Addresses: explicit ones checked, the rest numbered.
        let mut taken: HashMap<Ipv4Addr, LinkId> = HashMap::new();
        for si in 0..self.segments.len() {
            let Some(subnet) = self.segments[si].subnet else {
                continue;
            };
            let ifaces = self.segments[si].ifaces.clone();
            for &(node, port, li, side) in &ifaces {
                let Some(a) = self.endpoint(li, side).address else {
                    continue;
                };
                if a.prefix != subnet.prefix || !subnet.contains(a.addr) {
                    return Err(self.err(
                        ItemRef::Link(li),
                        Some("addresses"),
                        format!(
                            "address {a} of '{}' is not in this segment's subnet {subnet}",
                            self.spec.nodes[node].name
                        ),
                    ));
                }
                if let Some(&other) = taken.get(&a.addr) {
                    return Err(self.err(
                        ItemRef::Link(li),
                        Some("addresses"),
                        format!(
                            "address {} is already used on link '{}'",
                            a.addr, self.spec.links[other].name
                        ),
                    ));
                }
                taken.insert(a.addr, li);
                self.ports[node][port].addr = Some(a);
            }
            let base = u32::from(subnet.network());
            let size = 1u32 << (32 - subnet.prefix as u32);
            let (first, last) = if subnet.prefix >= 31 {
                (0, size - 1)
            } else {
                (1, size - 2)
            };
            let mut host = first;
            for &(node, port, li, _) in &ifaces {
                if self.ports[node][port].addr.is_some() {
                    continue;
                }
                loop {
                    if host > last {
                        return Err(self.err(
                            ItemRef::Link(li),
                            Some("subnet"),
                            format!(
                                "subnet {subnet} has no free address left for '{}'",
                                self.spec.nodes[node].name
                            ),
                        ));
                    }
                    let a = Ipv4Addr::from(base + host);
                    host += 1;
                    if let std::collections::hash_map::Entry::Vacant(e) = taken.entry(a) {
                        e.insert(li);
                        self.ports[node][port].addr = Some(Ipv4Cidr {
                            addr: a,
                            prefix: subnet.prefix,
                        });
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// In an IPv6-only network ([`crate::spec::RunSpec::ipv6_only`]): no
    /// interface keeps an IPv4 address (they were numbered only so that
    /// IPv6 addresses get the same host numbers), and IPv4 settings are an
    /// error.
    fn drop_ipv4(&mut self) -> Result<(), BuildError> {
        let spec = self.spec;
        if !spec.run.ipv6_only {
            return Ok(());
        }
        let why = "an IPv4 setting in an IPv6-only network (ipv4 = false in [run]): remove it";
        for (li, l) in spec.links.iter().enumerate() {
            if l.subnet.is_some() {
                return Err(self.err(ItemRef::Link(li), Some("subnet"), why.into()));
            }
            if l.a.address.is_some() || l.b.address.is_some() {
                return Err(self.err(ItemRef::Link(li), Some("addresses"), why.into()));
            }
        }
        for (i, r) in spec.routes.iter().enumerate() {
            if matches!(r.prefix, IpPrefix::V4(_)) {
                return Err(self.err(ItemRef::Route(i), Some("prefix"), why.into()));
            }
        }
        for (i, e) in spec.endpoints.iter().enumerate() {
            if matches!(&e.to, Some(EndpointTarget::Address(a)) if a.is_ipv4()) {
                return Err(self.err(ItemRef::Endpoint(i), Some("to"), why.into()));
            }
        }
        for p in self.ports.iter_mut().flatten() {
            p.addr = None;
        }
        Ok(())
    }

    /// IPv6 subnets and addresses, as IPv4's: explicit subnets and
    /// addresses first (checked), then a /64 per remaining segment from the
    /// IPv6 pool (the k-th segment's is the pool's k-th /64 unless an
    /// explicit subnet has it), and each interface its IPv4 host number in
    /// it (or the next free one). Without IPv6 in the network, explicit
    /// IPv6 settings are an error.
    fn assign_addresses6(&mut self) -> Result<(), BuildError> {
        let spec = self.spec;
        if !spec.run.ipv6 {
            for (li, l) in spec.links.iter().enumerate() {
                if l.subnet6.is_some() || l.a.address6.is_some() || l.b.address6.is_some() {
                    let field = if l.subnet6.is_some() {
                        "subnet6"
                    } else {
                        "addresses6"
                    };
                    return Err(self.err(
                        ItemRef::Link(li),
                        Some(field),
                        "IPv6 settings in a network without IPv6: add 'ipv6 = true' to [run]"
                            .into(),
                    ));
                }
            }
            return Ok(());
        }
        let pool = spec.address_pool6.unwrap_or(DEFAULT_POOL6);
        if pool.prefix > 64 {
            return Err(self.err(
                ItemRef::Run,
                Some("address_pool6"),
                format!("'{pool}' cannot hold a /64 per link: expected a prefix of /64 or shorter"),
            ));
        }
        // Interfaces' addresses must be global unicast ones: not in ::/8
        // (unspecified, loopback, IPv4-mapped), link-local, site-local or
        // multicast space, where routers would take them for what those are.
        for (reserved, what) in [
            (
                "::/8",
                "reserved (::/8 holds the unspecified and loopback addresses)",
            ),
            ("fe80::/10", "link-local space"),
            ("fec0::/10", "site-local space"),
            ("ff00::/8", "multicast space"),
        ] {
            let r = Ipv6Cidr::parse(reserved).expect("a valid prefix");
            if r.contains(pool.addr) || pool.contains(r.addr) {
                return Err(self.err(
                    ItemRef::Run,
                    Some("address_pool6"),
                    format!("'{pool}' overlaps {reserved}, {what}: interfaces need global unicast addresses (e.g. the default, {DEFAULT_POOL6})"),
                ));
            }
        }
        // RFC 8200 §5: every link that carries IPv6 carries 1280 bytes.
        for (li, l) in spec.links.iter().enumerate() {
            let mtu = l.a_to_b.mtu.min(l.b_to_a.mtu);
            if mtu < ipv6::MIN_MTU as u32 {
                return Err(self.err(
                    ItemRef::Link(li),
                    Some("mtu"),
                    format!("an MTU of {mtu} is below IPv6's minimum of 1280 (RFC 8200 §5): raise it, or leave [run] ipv6 off"),
                ));
            }
        }
        let subnets = self.subnets6(pool)?;
        let mut taken: HashMap<Ipv6Addr, LinkId> = HashMap::new();
        for (si, subnet) in subnets.into_iter().enumerate() {
            let Some(subnet) = subnet else { continue };
            let ifaces = self.segments[si].ifaces.clone();
            for &(node, port, li, side) in &ifaces {
                let Some(a) = self.endpoint(li, side).address6 else {
                    continue;
                };
                let name = &spec.nodes[node].name;
                if a.prefix != subnet.prefix || !subnet.contains(a.addr) {
                    return Err(self.err(
                        ItemRef::Link(li),
                        Some("addresses6"),
                        format!("address {a} of '{name}' is not in this segment's subnet {subnet}"),
                    ));
                }
                if let Some(&other) = taken.get(&a.addr) {
                    return Err(self.err(
                        ItemRef::Link(li),
                        Some("addresses6"),
                        format!(
                            "address {} is already used on link '{}'",
                            a.addr, spec.links[other].name
                        ),
                    ));
                }
                taken.insert(a.addr, li);
                self.ports[node][port].addr6 = Some(a);
            }
            let base = u128::from(subnet.network());
            let last = u128::MAX >> u32::from(subnet.prefix).min(127);
            // Host 0 is the subnet-router anycast address (RFC 4291 §2.6.1),
            // except on a /127 (RFC 6164).
            let first = u128::from(subnet.prefix < 127);
            let v4 = self.segments[si].subnet;
            let mut next = first;
            for (i, &(node, port, li, _)) in ifaces.iter().enumerate() {
                if self.ports[node][port].addr6.is_some() {
                    continue;
                }
                let wanted = match (v4, self.ports[node][port].addr) {
                    (Some(s), Some(a)) => u128::from(u32::from(a.addr) - u32::from(s.network())),
                    _ => i as u128 + 1,
                };
                let free = |h: u128, taken: &HashMap<Ipv6Addr, LinkId>| {
                    (first..=last).contains(&h) && !taken.contains_key(&Ipv6Addr::from(base | h))
                };
                let host = if free(wanted, &taken) {
                    wanted
                } else {
                    while next <= last && !free(next, &taken) {
                        next += 1;
                    }
                    if next > last {
                        return Err(self.err(
                            ItemRef::Link(li),
                            Some("subnet6"),
                            format!(
                                "subnet {subnet} has no free address left for '{}'",
                                spec.nodes[node].name
                            ),
                        ));
                    }
                    next
                };
                let addr = Ipv6Addr::from(base | host);
                taken.insert(addr, li);
                self.ports[node][port].addr6 = Some(Ipv6Cidr {
                    addr,
                    prefix: subnet.prefix,
                });
            }
        }
        Ok(())
    }

    /// Each segment's IPv6 subnet: a link's `subnet6` (the same on every
    /// link of a switched segment), else the subnet of an explicit address
    /// on it, else the pool's k-th /64 for the k-th segment with interfaces
    /// (or the next one no explicit subnet overlaps).
    fn subnets6(&self, pool: Ipv6Cidr) -> Result<Vec<Option<Ipv6Cidr>>, BuildError> {
        let spec = self.spec;
        let net = |a: Ipv6Cidr| Ipv6Cidr {
            addr: a.network(),
            prefix: a.prefix,
        };
        let mut subnets: Vec<Option<Ipv6Cidr>> = vec![None; self.segments.len()];
        for (si, seg) in self.segments.iter().enumerate() {
            let mut given: Option<(Ipv6Cidr, LinkId)> = None;
            for &li in &seg.links {
                for side in 0..2 {
                    let ep = self.endpoint(li, side);
                    let node = self.ids[ep.node.as_str()];
                    if ep.address6.is_some() && is_switch(&spec.nodes[node].kind) {
                        return Err(self.err(
                            ItemRef::Link(li),
                            Some("addresses6"),
                            format!("'{}' is a switch; switch ports have no IP address", ep.node),
                        ));
                    }
                }
                let Some(s) = spec.links[li].subnet6.map(net) else {
                    continue;
                };
                if s.prefix > 127 {
                    return Err(self.err(ItemRef::Link(li), Some("subnet6"), format!("'{s}' has no room for two addresses: expected a prefix of /127 or shorter")));
                }
                if let Some((prev, pl)) = given {
                    if prev != s {
                        return Err(self.err(ItemRef::Link(li), Some("subnet6"), format!("subnet {s} differs from {prev} given on link '{}' of the same switched segment", spec.links[pl].name)));
                    }
                }
                given = Some((s, li));
            }
            subnets[si] = given.map(|(s, _)| s).or_else(|| {
                seg.ifaces
                    .iter()
                    .find_map(|&(_, _, li, side)| self.endpoint(li, side).address6.map(net))
            });
        }
        let explicit: Vec<Ipv6Cidr> = subnets.iter().flatten().copied().collect();
        let room = 1u128 << (64 - u32::from(pool.prefix)).min(127);
        let mut used = HashSet::new();
        let mut k: u128 = 0;
        for (si, seg) in self.segments.iter().enumerate() {
            if seg.ifaces.is_empty() {
                continue;
            }
            let mut n = k;
            k += 1;
            if subnets[si].is_some() {
                continue;
            }
            loop {
                if n >= room {
                    return Err(self.err(ItemRef::Link(seg.links[0]), Some("subnet6"), format!("the IPv6 address pool {pool} has no /64 left for this link; give a larger address_pool6 or explicit subnets")));
                }
                let cand = Ipv6Cidr {
                    addr: Ipv6Addr::from(u128::from(pool.network()) | (n << 64)),
                    prefix: 64,
                };
                let overlaps = explicit
                    .iter()
                    .any(|e| e.contains(cand.addr) || cand.contains(e.addr));
                if !overlaps && used.insert(n) {
                    subnets[si] = Some(cand);
                    break;
                }
                n += 1;
            }
        }
        Ok(subnets)
    }

    fn is_router(&self, n: NodeId) -> bool {
        matches!(self.spec.nodes[n].kind, NodeKind::Router(_))
    }

    /// Where node `n` reaches each segment: connected ones on their port,
    /// the rest through the first router of a shortest path. A host on one
    /// segment with exactly one router has a default route through it
    /// instead.
    fn paths(&self, n: NodeId) -> Paths {
        let mut p = Paths::default();
        for (port, seg) in self.port_segment[n].iter().enumerate() {
            if let Some(seg) = *seg {
                p.connected.push((seg, port));
            }
        }
        // A host on one segment with exactly one router: default route.
        if !self.is_router(n) && self.ports[n].len() == 1 {
            if let Some(seg) = self.port_segment[n][0] {
                let routers: Vec<_> = self.segments[seg]
                    .ifaces
                    .iter()
                    .filter(|&&(m, ..)| self.is_router(m))
                    .collect();
                if routers.len() == 1 {
                    let &(r, rp, ..) = routers[0];
                    p.default = Some((r, rp));
                    return p;
                }
            }
        }
        // Breadth-first search over segments, through routers only; each
        // remote segment is reached by the first hop (router, its port on
        // our segment) and our port towards it.
        let mut seen_seg = vec![false; self.segments.len()];
        let mut seen_node = vec![false; self.spec.nodes.len()];
        seen_node[n] = true;
        let mut q: VecDeque<(NodeId, PortId, (NodeId, PortId))> = VecDeque::new();
        for (port, seg) in self.port_segment[n].iter().enumerate() {
            let Some(seg) = *seg else { continue };
            seen_seg[seg] = true;
            for &(m, mp, ..) in &self.segments[seg].ifaces {
                let addressed = self.ports[m][mp].addr.is_some();
                if m != n && self.is_router(m) && !seen_node[m] && addressed {
                    seen_node[m] = true;
                    q.push_back((m, port, (m, mp)));
                }
            }
        }
        while let Some((r, out_port, via)) = q.pop_front() {
            for seg in self.port_segment[r].iter().flatten().copied() {
                if seen_seg[seg] {
                    continue;
                }
                seen_seg[seg] = true;
                p.remote.push((seg, out_port, via));
                for &(m, ..) in &self.segments[seg].ifaces {
                    if self.is_router(m) && !seen_node[m] {
                        seen_node[m] = true;
                        q.push_back((m, out_port, via));
                    }
                }
            }
        }
        p
    }

    /// Connected routes plus shortest-path routes, for every router and
    /// host, in both families (the IPv6 tables are empty without IPv6).
    fn routing_tables(&self) -> Result<Vec<(RoutingTable, RoutingTable6)>, BuildError> {
        let spec = self.spec;
        let mut tables = vec![(RoutingTable::new(), RoutingTable6::new()); spec.nodes.len()];
        for (n, (table, table6)) in tables.iter_mut().enumerate() {
            if is_switch(&spec.nodes[n].kind) {
                continue;
            }
            let p = self.paths(n);
            let subnet6 = |seg: usize| {
                let a = self.segments[seg]
                    .ifaces
                    .iter()
                    .find_map(|&(m, mp, ..)| self.ports[m][mp].addr6)?;
                Some(Ipv6Cidr {
                    addr: a.network(),
                    prefix: a.prefix,
                })
            };
            for &(seg, port) in &p.connected {
                let info = &self.ports[n][port];
                if let (Some(s), Some(_)) = (self.segments[seg].subnet, info.addr) {
                    table.insert(Route {
                        prefix: s,
                        via: None,
                        port,
                    });
                }
                if let (Some(s), Some(_)) = (subnet6(seg), info.addr6) {
                    table6.insert(Route6 {
                        prefix: s,
                        via: None,
                        port,
                    });
                }
            }
            if let Some((r, rp)) = p.default {
                if let Some(a) = self.ports[r][rp].addr {
                    table.insert(Route {
                        prefix: Ipv4Cidr {
                            addr: Ipv4Addr::UNSPECIFIED,
                            prefix: 0,
                        },
                        via: Some(a.addr),
                        port: 0,
                    });
                }
                if let Some(a) = self.ports[r][rp].addr6 {
                    table6.insert(Route6 {
                        prefix: Ipv6Cidr {
                            addr: Ipv6Addr::UNSPECIFIED,
                            prefix: 0,
                        },
                        via: Some(a.addr),
                        port: 0,
                    });
                }
            }
            for &(seg, port, (m, mp)) in &p.remote {
                if let (Some(s), Some(a)) = (self.segments[seg].subnet, self.ports[m][mp].addr) {
                    table.insert(Route {
                        prefix: s,
                        via: Some(a.addr),
                        port,
                    });
                }
                if let (Some(s), Some(a)) = (subnet6(seg), self.ports[m][mp].addr6) {
                    table6.insert(Route6 {
                        prefix: s,
                        via: Some(a.addr),
                        port,
                    });
                }
            }
        }
        for (i, r) in spec.routes.iter().enumerate() {
            let n = self.node_ref(ItemRef::Route(i), "node", &r.node)?;
            if is_switch(&spec.nodes[n].kind) {
                return Err(self.err(
                    ItemRef::Route(i),
                    Some("node"),
                    format!("'{}' is a switch; switches have no routes", r.node),
                ));
            }
            // The port whose subnet holds the next hop, of its family.
            let port = self.ports[n].iter().position(|p| match r.via {
                IpAddr::V4(v) => p.addr.is_some_and(|a| a.contains(v)),
                IpAddr::V6(v) => p.addr6.is_some_and(|a| a.contains(v)),
            });
            let Some(port) = port else {
                let why = match r.via {
                    IpAddr::V6(_) if !spec.run.ipv6 => {
                        "the network has no IPv6: add 'ipv6 = true' to [run]".to_string()
                    }
                    _ => format!("it is not on a subnet directly connected to '{}'", r.node),
                };
                return Err(self.err(
                    ItemRef::Route(i),
                    Some("via"),
                    format!("next hop {}: {why}", r.via),
                ));
            };
            match (r.prefix, r.via) {
                (IpPrefix::V4(p), IpAddr::V4(via)) => tables[n].0.insert(Route {
                    prefix: Ipv4Cidr {
                        addr: p.network(),
                        prefix: p.prefix,
                    },
                    via: Some(via),
                    port,
                }),
                (IpPrefix::V6(p), IpAddr::V6(via)) => tables[n].1.insert(Route6 {
                    prefix: Ipv6Cidr {
                        addr: p.network(),
                        prefix: p.prefix,
                    },
                    via: Some(via),
                    port,
                }),
                _ => {
                    return Err(self.err(
                        ItemRef::Route(i),
                        Some("via"),
                        format!(
                            "next hop {} is not of the family of the prefix {}",
                            r.via, r.prefix
                        ),
                    ))
                }
            }
        }
        // Tables of the same prefixes share one index.
        RoutingTable::share_indexes(tables.iter_mut().map(|(t, _)| t));
        RoutingTable6::share_indexes(tables.iter_mut().map(|(_, t)| t));
        Ok(tables)
    }

    /// `[run] static_neighbours`: each simulated host's and router's
    /// neighbour tables get a static entry for every other simulated host
    /// and router interface on each of its segments (a link, or links
    /// joined by switches): its IPv4 address and, with IPv6, its global
    /// and link-local ones, at its MAC. Real hosts are left out (their
    /// MACs are theirs to choose; both sides resolve them as usual), and
    /// past a table's bound of static entries (a switched segment of
    /// thousands) the rest resolve as usual: `add_static_neighbour` then
    /// says no, which is not an error.
    fn fill_neighbours(&self, nodes: &mut [Node]) {
        let simulated: Vec<bool> = nodes
            .iter()
            .map(|n| matches!(n, Node::Host(_) | Node::Router(_)))
            .collect();
        for seg in &self.segments {
            let ifaces: Vec<(NodeId, PortId)> = seg
                .ifaces
                .iter()
                .map(|&(n, p, _, _)| (n, p))
                .filter(|&(n, _)| simulated[n])
                .collect();
            for &(n, p) in &ifaces {
                for &(m, q) in &ifaces {
                    // Not its own addresses (a node with two ports on one
                    // segment): they are not neighbours.
                    if m == n {
                        continue;
                    }
                    let peer = &self.ports[m][q];
                    let addrs = peer
                        .addr
                        .map(|a| IpAddr::V4(a.addr))
                        .into_iter()
                        .chain(peer.addr6.map(|a| IpAddr::V6(a.addr)))
                        .chain(peer.addr6.map(|_| IpAddr::V6(peer.link_local())));
                    for ip in addrs {
                        match &mut nodes[n] {
                            Node::Host(h) => h.add_static_neighbour(p, ip, peer.mac),
                            Node::Router(r) => r.add_static_neighbour(p, ip, peer.mac),
                            _ => unreachable!("only simulated nodes are filled"),
                        };
                    }
                }
            }
        }
    }

    fn finish(
        self,
        mut tables: Vec<(RoutingTable, RoutingTable6)>,
        src: Sources,
    ) -> Result<Simulation, BuildError> {
        let spec = self.spec;
        let seed = spec.run.seed;
        let mut nodes: Vec<Node> = Vec::with_capacity(spec.nodes.len());
        let mut real = Vec::new();
        for (i, n) in spec.nodes.iter().enumerate() {
            let ports = self.ports[i].clone();
            let (table, table6) = std::mem::take(&mut tables[i]);
            nodes.push(match &n.kind {
                NodeKind::Host => {
                    let addresses = ports
                        .iter()
                        .map(|p| usize::from(p.addr.is_some()) + usize::from(p.addr6.is_some()))
                        .sum::<usize>();
                    if addresses > crate::host::MAX_ADDRESSES {
                        return Err(self.err(
                            ItemRef::Node(i),
                            Some("name"),
                            format!(
                                "'{}' has {addresses} addresses on its links; a simulated host has at most {} (its TCP/IP stack's limit)",
                                n.name,
                                crate::host::MAX_ADDRESSES
                            ),
                        ));
                    }
                    let hseed = RngStream::new(seed, &format!("host/{}", n.name)).next_u64();
                    Node::Host(Box::new(Host::new(ports, table, table6, hseed)))
                }
                NodeKind::Router(r) => {
                    Node::Router(Box::new(Router::new(&n.name, ports, r, table, table6)))
                }
                NodeKind::Switch(s) => Node::Switch(Box::new(Switch::new(ports, s.clone()))),
                NodeKind::Namespace(_) | NodeKind::Attached(_) => {
                    real.push(RealNode {
                        node: i,
                        name: n.name.clone(),
                        kind: n.kind.clone(),
                        port: ports[0].clone(),
                        routes: table
                            .routes()
                            .into_iter()
                            .filter(|r| r.via.is_some())
                            .collect(),
                        routes6: table6
                            .routes()
                            .into_iter()
                            .filter(|r| r.via.is_some())
                            .collect(),
                    });
                    Node::External(Box::default())
                }
            });
        }
        if spec.run.static_neighbours {
            self.fill_neighbours(&mut nodes);
        }
        let links: Vec<Link> = spec
            .links
            .iter()
            .enumerate()
            .map(|(li, l)| {
                let end = |side: usize| {
                    let node = self.ids[if side == 0 {
                        l.a.node.as_str()
                    } else {
                        l.b.node.as_str()
                    }];
                    let port = self.port_links[node]
                        .iter()
                        .position(|&(x, s)| x == li && s == side)
                        .expect("port made for every end");
                    (node, port)
                };
                let (a, b) = (end(0), end(1));
                Link {
                    name: l.name.clone(),
                    ends: [a, b],
                    dirs: [
                        LinkDir::new(
                            l.a_to_b.clone(),
                            RngStream::new(seed, &format!("link/{}/a_to_b", l.name)),
                            RngStream::new(seed, &format!("link/{}/a_to_b/queue", l.name)),
                            b,
                        ),
                        LinkDir::new(
                            l.b_to_a.clone(),
                            RngStream::new(seed, &format!("link/{}/b_to_a", l.name)),
                            RngStream::new(seed, &format!("link/{}/b_to_a/queue", l.name)),
                            a,
                        ),
                    ],
                }
            })
            .collect();
        let mut queue = EventQueue::new();
        let end = SimTime::ZERO + spec.run.duration;
        for (i, ev) in spec.events.iter().enumerate() {
            if !links.iter().any(|l| l.name == ev.link) {
                return Err(self.err(
                    ItemRef::Event(i),
                    Some("link"),
                    format!("'{}' is not a link", ev.link),
                ));
            }
            if ev.at > spec.run.duration {
                return Err(self.err(
                    ItemRef::Event(i),
                    Some("at"),
                    format!(
                        "{} is after the end of the run ({})",
                        ev.at, spec.run.duration
                    ),
                ));
            }
            if let LinkAction::Set(c) = &ev.action {
                for p in [c.corrupt, c.duplicate].into_iter().flatten() {
                    if !(0.0..=1.0).contains(&p) {
                        return Err(self.err(
                            ItemRef::Event(i),
                            None,
                            format!("{p} is not a probability (expected a number in [0, 1])"),
                        ));
                    }
                }
            }
            queue.schedule(
                SimTime::ZERO + ev.at,
                src.events(),
                Event::LinkEvent { index: i as u32 },
            );
        }
        let names: Vec<String> = spec.nodes.iter().map(|n| n.name.clone()).collect();
        let endpoints = self.endpoints(&mut nodes)?;
        // Ports the flows' automatic ones go around.
        let taken: HashSet<(NodeId, u16)> =
            endpoints.iter().map(|e| (e.node, e.addr.port())).collect();
        let mut flows = Vec::new();
        let mut next_listen: HashMap<NodeId, u16> = HashMap::new();
        let mut next_src: HashMap<NodeId, u16> = HashMap::new();
        let mut next_ident: HashMap<NodeId, u16> = HashMap::new();
        let mut starts: Vec<(SimTime, NodeId, usize)> = Vec::new();
        let mut flow_names = HashSet::new();
        for (ti, t) in spec.traffic.iter().enumerate() {
            let item = ItemRef::Traffic(ti);
            if !flow_names.insert(t.name.as_str()) {
                return Err(self.err(
                    item,
                    Some("name"),
                    format!("duplicate traffic name '{}'", t.name),
                ));
            }
            let from = self.node_ref(item, "from", &t.from)?;
            let to = self.node_ref(item, "to", &t.to)?;
            for (f, n) in [("from", from), ("to", to)] {
                if !matches!(spec.nodes[n].kind, NodeKind::Host) {
                    return Err(self.err(
                        item,
                        Some(f),
                        format!(
                            "'{}' is not a simulated host; simulated traffic runs between \
                             simulated hosts (run real programs on real hosts instead)",
                            spec.nodes[n].name
                        ),
                    ));
                }
            }
            if from == to {
                return Err(self.err(
                    item,
                    Some("to"),
                    format!("traffic from '{}' to itself", t.from),
                ));
            }
            if t.count == 0 {
                return Err(self.err(item, Some("count"), "count must be at least 1".into()));
            }
            let start = SimTime::ZERO + t.start;
            let stop = t.stop.map_or(end, |s| SimTime::ZERO + s);
            if stop <= start {
                // Without a `stop` of its own, the traffic stops at the end of
                // the run: then it is the start that is too late.
                return Err(match t.stop {
                    Some(_) => self.err(
                        item,
                        Some("stop"),
                        format!("stop ({stop}) must be after start ({start})"),
                    ),
                    None => self.err(
                        item,
                        Some("start"),
                        format!(
                            "starts at {start}, but the run ends at {end}, where traffic \
                             without 'stop' stops"
                        ),
                    ),
                });
            }
            // Where the flow goes: the destination's first address of the
            // family the flow asks for.
            let dst: IpAddr = if t.ipv6 || spec.run.ipv6_only {
                if !spec.run.ipv6 {
                    return Err(self.err(
                        item,
                        Some("ipv6"),
                        "IPv6 traffic in a network without IPv6: add 'ipv6 = true' to [run]".into(),
                    ));
                }
                let Some(a) = self.ports[to].iter().find_map(|p| p.addr6) else {
                    return Err(self.err(
                        item,
                        Some("to"),
                        format!("'{}' has no IPv6 address (is it connected?)", t.to),
                    ));
                };
                a.addr.into()
            } else {
                let Some(a) = self.ports[to].iter().find_map(|p| p.addr) else {
                    return Err(self.err(
                        item,
                        Some("to"),
                        format!("'{}' has no IPv4 address (is it connected?)", t.to),
                    ));
                };
                a.addr.into()
            };
            let (udp_size, udp_rate) = match &t.kind {
                TrafficKind::UdpCbr { rate, size }
                | TrafficKind::UdpPoisson { rate, size }
                | TrafficKind::UdpOnOff { rate, size, .. } => (Some(size.get()), Some(*rate)),
                _ => (None, None),
            };
            if let Some(size) = udp_size {
                if size < PROBE_HEADER as u64 || size > 65_507 {
                    return Err(self.err(item, Some("size"), format!("{size} bytes is not a valid UDP payload size here (expected {PROBE_HEADER}..=65507: netloop's probe header is {PROBE_HEADER} bytes)")));
                }
            }
            for k in 0..t.count {
                let name = if t.count == 1 {
                    t.name.clone()
                } else {
                    format!("{}#{k}", t.name)
                };
                let flow = flows.len() as u32;
                let rng = RngStream::new(seed, &format!("traffic/{name}"));
                let alloc = |m: &mut HashMap<NodeId, u16>,
                             n: NodeId,
                             base: u16,
                             field: &'static str|
                 -> Result<u16, BuildError> {
                    let p = m.entry(n).or_insert(base);
                    loop {
                        let v = *p;
                        *p = p.checked_add(1).ok_or_else(|| {
                            self.err(
                                item,
                                Some(field),
                                format!(
                                    "too many flows on '{}': ran out of ports",
                                    spec.nodes[n].name
                                ),
                            )
                        })?;
                        // An endpoint's port is its own; ICMP identifiers
                        // (base 1) are not ports.
                        if base == 1 || !taken.contains(&(n, v)) {
                            return Ok(v);
                        }
                    }
                };
                let (src_app, dst_app) = {
                    let mut src_host = |app: App| -> usize {
                        let Node::Host(h) = &mut nodes[from] else {
                            unreachable!("checked above")
                        };
                        h.add_app(app, TCP_BUFFER)
                    };
                    match &t.kind {
                        TrafficKind::UdpCbr { .. }
                        | TrafficKind::UdpPoisson { .. }
                        | TrafficKind::UdpOnOff { .. } => {
                            let size = udp_size.expect("udp") as usize;
                            let rate = udp_rate.expect("udp");
                            let interval = SimDuration::from_nanos(
                                ((size as u128 * 8 * 1_000_000_000) / rate.bps() as u128).max(1)
                                    as u64,
                            );
                            let pattern = match &t.kind {
                                TrafficKind::UdpCbr { .. } => Pattern::Cbr { interval },
                                TrafficKind::UdpPoisson { .. } => {
                                    Pattern::Poisson { mean: interval }
                                }
                                TrafficKind::UdpOnOff { on, off, .. } => Pattern::OnOff {
                                    interval,
                                    on: *on,
                                    off: *off,
                                    on_until: SimTime::ZERO,
                                },
                                _ => unreachable!(),
                            };
                            let dst_port = alloc(&mut next_listen, to, 5001, "to")?;
                            let src_port = alloc(&mut next_src, from, 49152, "from")?;
                            let s = src_host(App::UdpSource(UdpSource {
                                flow,
                                dst,
                                src_port,
                                dst_port,
                                size,
                                pattern,
                                rng,
                                stop,
                                sent: 0,
                            }));
                            let Node::Host(h) = &mut nodes[to] else {
                                unreachable!()
                            };
                            let d = h.add_app(
                                App::UdpSink(UdpSink {
                                    flow,
                                    stats: apps::SinkStats::default(),
                                }),
                                TCP_BUFFER,
                            );
                            h.bind_udp(dst_port, d);
                            (s, Some(d))
                        }
                        TrafficKind::Ping { interval, size } => {
                            let ident = alloc(&mut next_ident, from, 1, "from")?;
                            let s = src_host(App::Ping(apps::Ping {
                                flow,
                                dst,
                                ident,
                                interval: *interval,
                                size: size.get() as usize,
                                stop,
                                sent: 0,
                                received: 0,
                                outstanding: Default::default(),
                                rtt: apps::new_histogram(),
                            }));
                            (s, None)
                        }
                        TrafficKind::Traceroute { max_hops } => {
                            let src_port = alloc(&mut next_src, from, 49152, "from")?;
                            let s = src_host(App::Traceroute(Traceroute {
                                flow,
                                dst,
                                src_port,
                                max_hops: *max_hops,
                                ttl: 0,
                                probe_sent: SimTime::ZERO,
                                timeout: SimDuration::from_secs(1),
                                hops: Vec::new(),
                                done: false,
                            }));
                            (s, None)
                        }
                        TrafficKind::TcpBulk { .. } | TrafficKind::TcpRr { .. } => {
                            let mode = match &t.kind {
                                TrafficKind::TcpBulk { bytes } => TcpMode::Bulk {
                                    bytes: bytes.map(|b| b.get()),
                                },
                                TrafficKind::TcpRr {
                                    request,
                                    response,
                                    interval,
                                } => TcpMode::Rr {
                                    request: request.get().max(1),
                                    response: response.get().max(1),
                                    interval: *interval,
                                },
                                _ => unreachable!(),
                            };
                            let dst_port = alloc(&mut next_listen, to, 5001, "to")?;
                            let src_port = alloc(&mut next_src, from, 49152, "from")?;
                            let expect = match &mode {
                                TcpMode::Bulk { bytes } => *bytes,
                                _ => None,
                            };
                            let req = match &mode {
                                TcpMode::Rr { request, .. } => *request,
                                _ => 0,
                            };
                            let handle = smoltcp::iface::SocketHandle::default();
                            let s = src_host(App::TcpClient(TcpClient {
                                flow,
                                handle,
                                dst,
                                dst_port,
                                src_port,
                                mode: mode.clone(),
                                stop,
                                connected: false,
                                req_left: 0,
                                resp_left: 0,
                                txn_start: None,
                                next_txn: start,
                                closed: false,
                                stats: TcpStats::default(),
                            }));
                            let Node::Host(h) = &mut nodes[to] else {
                                unreachable!()
                            };
                            let d = h.add_app(
                                App::TcpServer(TcpServer {
                                    flow,
                                    handle,
                                    port: dst_port,
                                    mode,
                                    req_left: req,
                                    resp_left: 0,
                                    expect,
                                    stats: TcpStats::default(),
                                }),
                                TCP_BUFFER,
                            );
                            (s, Some(d))
                        }
                    }
                };
                starts.push((start, from, src_app));
                flows.push(FlowInfo {
                    name,
                    kind: kind_name(&t.kind),
                    spec_index: ti,
                    from,
                    to,
                    start,
                    stop,
                    src_app,
                    dst_app,
                });
            }
        }
        for (at, node, app) in starts {
            queue.schedule(
                at,
                src.node(node),
                Event::Timer {
                    node: node as u32,
                    token: app as u64,
                },
            );
        }
        let net = Network::new(
            spec.clone(),
            nodes,
            names,
            self.ports,
            self.port_links,
            links,
            src,
        );
        Ok(Simulation {
            net,
            queue,
            flows,
            real,
            endpoints,
        })
    }

    /// Makes the message endpoints: checks them and adds each to its host.
    fn endpoints(&self, nodes: &mut [Node]) -> Result<Vec<EndpointInfo>, BuildError> {
        let spec = self.spec;
        let mut out: Vec<EndpointInfo> = Vec::with_capacity(spec.endpoints.len());
        let mut by_name: HashMap<&str, usize> = HashMap::new();
        let mut ports: HashMap<(NodeId, Transport, u16), usize> = HashMap::new();
        for (i, e) in spec.endpoints.iter().enumerate() {
            let item = ItemRef::Endpoint(i);
            if let Some(&first) = by_name.get(e.name.as_str()) {
                return Err(self.err(
                    item,
                    Some("name"),
                    format!(
                        "endpoint '{}' is declared twice (first as endpoint #{})",
                        e.name,
                        first + 1
                    ),
                ));
            }
            by_name.insert(&e.name, i);
            let node = self.node_ref(item, "node", &e.node)?;
            if !matches!(spec.nodes[node].kind, NodeKind::Host) {
                return Err(self.err(
                    item,
                    Some("node"),
                    format!(
                        "'{}' is not a simulated host; endpoints are sockets of simulated \
                         hosts (a real host's program sends as itself: give its address \
                         and port as another endpoint's 'to')",
                        e.node
                    ),
                ));
            }
            if e.port == 0 {
                return Err(self.err(item, Some("port"), "port 0 is not a port to bind".into()));
            }
            if let Some(&other) = ports.get(&(node, e.protocol, e.port)) {
                return Err(self.err(
                    item,
                    Some("port"),
                    format!(
                        "'{}' already has endpoint '{}' on {} port {}",
                        e.node,
                        spec.endpoints[other].name,
                        e.protocol.name().to_uppercase(),
                        e.port
                    ),
                ));
            }
            ports.insert((node, e.protocol, e.port), i);
            // Its host's IPv4 address; IPv6 in an IPv6-only network.
            let ip: Option<IpAddr> = if spec.run.ipv6_only {
                self.ports[node]
                    .iter()
                    .find_map(|p| p.addr6.map(|a| a.addr.into()))
            } else {
                self.ports[node]
                    .iter()
                    .find_map(|p| p.addr.map(|a| a.addr.into()))
            };
            let Some(ip) = ip else {
                return Err(self.err(
                    item,
                    Some("node"),
                    format!("'{}' has no address (is it connected?)", e.node),
                ));
            };
            out.push(EndpointInfo {
                name: e.name.clone(),
                node,
                app: 0,
                addr: std::net::SocketAddr::new(ip, e.port),
                protocol: e.protocol,
                to: None,
                federate: e.federate.clone(),
            });
        }
        for (i, e) in spec.endpoints.iter().enumerate() {
            let to = match &e.to {
                None => None,
                Some(EndpointTarget::Address(a)) if a.is_ipv6() && !spec.run.ipv6 => {
                    return Err(self.err(
                        ItemRef::Endpoint(i),
                        Some("to"),
                        format!("{a} is an IPv6 address, and the network has no IPv6: add 'ipv6 = true' to [run]"),
                    ));
                }
                Some(EndpointTarget::Address(a)) => Some(*a),
                Some(EndpointTarget::Endpoint(name)) => match by_name.get(name.as_str()) {
                    Some(&j) if spec.endpoints[j].protocol != e.protocol => {
                        return Err(self.err(
                            ItemRef::Endpoint(i),
                            Some("to"),
                            format!(
                                "'{name}' is a {} endpoint and '{}' is {}: both ends of a \
                                 message must use the same protocol",
                                spec.endpoints[j].protocol.name().to_uppercase(),
                                e.name,
                                e.protocol.name().to_uppercase()
                            ),
                        ));
                    }
                    Some(&j) => Some(out[j].addr),
                    None => {
                        let names: Vec<&str> =
                            spec.endpoints.iter().map(|e| e.name.as_str()).collect();
                        return Err(self.err(
                            ItemRef::Endpoint(i),
                            Some("to"),
                            format!(
                                "'{name}' is neither an endpoint nor an address and port \
                                 (\"198.18.0.2:5000\"); endpoints are: {}",
                                names.join(", ")
                            ),
                        ));
                    }
                },
            };
            out[i].to = to;
            let Node::Host(h) = &mut nodes[out[i].node] else {
                unreachable!("checked above")
            };
            out[i].app = h.add_app(
                App::Endpoint(apps::MessageEndpoint {
                    index: i,
                    port: e.port,
                    tcp: match e.protocol {
                        Transport::Udp => None,
                        Transport::Tcp => Some(Box::new(crate::msgtcp::TcpTransport::new(e.port))),
                    },
                    to,
                    inbox: Default::default(),
                    stats: Default::default(),
                }),
                TCP_BUFFER,
            );
        }
        Ok(out)
    }
}
