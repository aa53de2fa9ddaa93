//! The network as a discrete-event model: nodes joined by links, driven by
//! events from a [`netloop_core::EventQueue`].
//!
//! This module owns the life of a frame between nodes: offering it to a link
//! direction, queueing, serialisation, the channel, arrival, and dispatching it
//! to the receiving node. Nodes own what happens inside them (see `node`).
//! Frames enter from outside the model only through [`Network::inject`] (now)
//! or [`Network::inject_at`] (at a given simulated time) at an external node,
//! and leave only through an external node's outbox, each with the moment it
//! left ([`Departure`]): a timestamped boundary, the one place the real-time
//! I/O layer connects to, and where remote partitions and co-simulation
//! endpoints will.
//!
//! Partitioning (later): the only event that crosses from one node to another
//! is [`Event::Arrive`], always at least the link's propagation delay after the
//! frame's last bit left, so a link between partitions carries its lookahead.

use netloop_core::sched::{prefetch, prefetch_span};
use netloop_core::{EventQueue, Model, SimTime, Source, MAX_SOURCES};
use std::collections::VecDeque;

use crate::apps::{MessageEndpoint, SendRefused};
use crate::gso;
use crate::host::Host;
use crate::link::{max_frame_len, Link, LinkDir};
use crate::node::{NodeCtx, PortInfo};
use crate::qdisc;
use crate::router::Router;
use crate::spec::{Direction, LinkAction, NetworkSpec};
use crate::stats::{DropReason, Ledger, Origin, Sink};
use crate::switch::Switch;
use crate::wire::{InAir, Wire};
use crate::{Frame, LinkId, NodeId, PortId};

/// An event of the network model.
#[derive(Debug)]
pub enum Event {
    /// The transmitter of a link direction finished serialising its frame.
    TxDone {
        /// The link.
        link: u32,
        /// 0 = a → b, 1 = b → a.
        dir: u8,
        /// The direction's epoch when transmission started.
        epoch: u32,
    },
    /// The first frame on a link direction's wire (see [`crate::wire`])
    /// reaches the far end.
    Arrive {
        /// The link.
        link: u32,
        /// 0 = a → b, 1 = b → a.
        dir: u8,
        /// The head frame's [`HeadHint`](crate::wire::HeadHint) when the
        /// event was scheduled, packed: the hint before the event loads
        /// the frame without first reading the wire (whose lines it asks
        /// for at the same time). Only loaded, never read through: a
        /// stale one (a frame put on the wire before the head since)
        /// loads the wrong line, no more.
        hint: u64,
    },
    /// A node's timer.
    Timer {
        /// The node.
        node: u32,
        /// The node's own token.
        token: u64,
    },
    /// The first frame handed to an external node for a later moment
    /// ([`Network::inject_at`]) enters the model.
    Enter {
        /// The external node.
        node: u32,
    },
    /// A scheduled change to a link (index into the spec's events).
    LinkEvent {
        /// Index into [`NetworkSpec::events`].
        index: u32,
    },
}

/// A node on the graph.
pub enum Node {
    /// A simulated host.
    Host(Box<Host>),
    /// A router.
    Router(Box<Router>),
    /// A learning bridge.
    Switch(Box<Switch>),
    /// A port to the world outside the model: frames that reach it wait in
    /// `outbox` for the I/O layer; frames from outside enter with
    /// [`Network::inject`] or [`Network::inject_at`].
    External(Box<External>),
}

/// A node whose one port leads out of the model.
#[derive(Default)]
pub struct External {
    /// Frames that left the model here, oldest first, for the outside world
    /// (a real interface, a remote partition, a co-simulation).
    pub outbox: VecDeque<Departure>,
    /// Frames handed in for a later moment, in time order.
    inbox: Wire,
}

impl External {
    /// Frames (segments) handed in for a later moment, not yet in the model
    /// proper.
    pub fn waiting(&self) -> u64 {
        self.inbox.segs()
    }
}

/// A frame that left the model at an external node.
#[derive(Debug)]
pub struct Departure {
    /// The simulated time it reached the node.
    pub at: SimTime,
    /// The frame.
    pub frame: Frame,
}

/// A frame that left a link direction whose receiver another partition
/// owns: what the sender settled (arrival time, epoch), for the receiver
/// to put on its wire ([`Network::receive`]).
#[derive(Debug)]
pub struct Crossing {
    /// When it reaches the far end.
    pub at: SimTime,
    /// The link.
    pub link: u32,
    /// 0 = a → b, 1 = b → a.
    pub dir: u8,
    /// The direction's epoch when it left.
    pub epoch: u32,
    /// The frame.
    pub frame: Frame,
}

/// What a partition of a network needs to know about the others: which
/// link directions' receivers are elsewhere, and the frames sent to them.
struct Remote {
    /// Per link and direction, the partition owning the receiver, if it is
    /// not this one while the transmitter is.
    rx_owner: Vec<[Option<u32>; 2]>,
    /// Frames for each partition, in the order they left.
    out: Vec<Vec<Crossing>>,
}

/// Why a frame could not be handed to the model.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InjectError {
    /// The node is not an external node (or does not exist).
    #[error("node {node} is not an external node: frames enter the model only at one")]
    NotExternal {
        /// The node asked for.
        node: NodeId,
    },
    /// The time asked for has passed.
    #[error("a frame cannot enter at {at}: simulated time is already {now}")]
    InThePast {
        /// The time asked for.
        at: SimTime,
        /// The current simulated time.
        now: SimTime,
    },
}

/// Something that wants to see frames on a link (pcap writers, tracing).
/// Called when a frame starts transmission (`rx = false`) and when it arrives
/// at the far end (`rx = true`).
pub trait Tap: Send {
    /// One frame at `at.time`; `dir` is 0 for a → b, 1 for b → a.
    fn frame(&mut self, at: TapOrder, dir: usize, rx: bool, data: &[u8]);
}

/// Where a frame shown to a [`Tap`] falls in a run: its simulated time, a
/// key, and its place among the frames shown under that key.
///
/// The key is the highest event key ([`EventQueue::current_key`]: source,
/// then the event's number in its queue) among the events this network has
/// run at this instant so far. Why not the key of the event that showed
/// the frame: a queue runs an instant's events lowest key first, but an
/// event may schedule another for the same instant with a lower key (a
/// zero-delay link), which then runs next; so the keys of the events run
/// at one instant may go down. In a partitioned run each partition runs
/// its own events at an instant in the order one queue would, and the one
/// queue of a single run takes, each time, the lowest of the partitions'
/// next events. That order puts a partition's events in runs behind each
/// new highest key, and orders the runs of all partitions by those keys:
/// exactly what sorting by this key (then by place) does. So frames shown
/// by several partitions, each with its own order, merge into the order one
/// run shows them (`netloop_io::pcapparts`); within one network the order
/// only grows. A frame handed in from outside between events (real time)
/// carries the order of the last event run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct TapOrder {
    /// When (simulated).
    pub time: SimTime,
    /// The event's key.
    pub key: u128,
    /// Frames the same event showed before this one.
    pub sub: u32,
}

/// Who schedules which events, as the event queue's sources: ties
/// between events due at the same moment break by them (see
/// `netloop_core::queue`), the same in one queue as in a partitioned run.
/// Each source belongs to exactly one owner (a node, one half of a link
/// direction), which a partition holds whole. Events of one source at one
/// moment then break ties by the order they were put in the queue, which
/// must be the source's own in every cut: a node's and a transmitter's are
/// scheduled by the partition that owns them, in order; a wire's arrivals
/// are put in the queue by the sender or by [`Network::receive`], in
/// batches, and are safe because a wire never has two pending at one
/// moment (`Wire::push` and `Wire::take` schedule one only for a time that
/// has none).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sources {
    nodes: u32,
    links: u32,
}

impl Sources {
    /// The sources of a network of `nodes` nodes and `links` links, or
    /// why there can be none: more nodes than their MAC addresses tell
    /// apart, or more sources than the queue does.
    pub(crate) fn new(nodes: usize, links: usize) -> Result<Sources, String> {
        if nodes > crate::node::MAX_NODES {
            return Err(format!(
                "{nodes} nodes are more than netloop tells apart: a port's MAC \
                 address holds its node's number in 24 bits (at most {} nodes)",
                crate::node::MAX_NODES
            ));
        }
        if 1 + nodes as u64 + 4 * links as u64 > MAX_SOURCES {
            return Err(format!(
                "{nodes} nodes and {links} links are more than one event queue tells \
                 apart (1 + nodes + 4 x links must be at most {MAX_SOURCES})"
            ));
        }
        Ok(Sources {
            nodes: nodes as u32,
            links: links as u32,
        })
    }
    /// The topology's scheduled link changes (`[[event]]`), first of all
    /// at a moment.
    pub(crate) fn events(self) -> Source {
        0
    }
    /// A node: its timers, and frames handed to it from outside.
    pub(crate) fn node(self, node: NodeId) -> Source {
        1 + node as Source
    }
    /// The transmitter of a link direction.
    fn tx(self, link: LinkId, side: usize) -> Source {
        1 + self.nodes + 2 * link as Source + side as Source
    }
    /// The receiver (the wire) of a link direction.
    fn rx(self, link: LinkId, side: usize) -> Source {
        1 + self.nodes + 2 * self.links + 2 * link as Source + side as Source
    }
}

/// The fewest nodes for which the event loops hint the next event's state
/// to the caches ([`Model::prefetch`]): with fewer, everything an event
/// touches is in the caches already, and the hint was 4–5 % of a small
/// run's instructions for nothing (2026-11-29, callgrind, the dumbbell at
/// 1 and 30 flows: 4 and 62 nodes). Where it pays is far above: without
/// hints the dumbbell's 10 000 flows (20 002 nodes) ran 0.76× as fast,
/// its 100 to 1 000 flows 0.98–1.25× (noise), so the bound is set low,
/// where nothing is lost either way. Nodes only: a network of few hosts
/// with thousands of applications each would go without the hint of the
/// next application too; and a partition counts every node of the
/// network, not its own.
pub const HINT_MIN_NODES: usize = 64;

/// The network model.
pub struct Network {
    pub(crate) spec: NetworkSpec,
    pub(crate) nodes: Vec<Node>,
    pub(crate) names: Vec<String>,
    pub(crate) ports: Vec<Vec<PortInfo>>,
    /// For each node and port: the link and which side of it.
    port_links: PortLinks,
    pub(crate) links: Vec<Link>,
    /// Per link, the node at the receiving end of each direction (the
    /// links' own `to`, in a small array that stays in the caches: see
    /// [`Model::prefetch`]).
    link_rx: Vec<[u32; 2]>,
    /// Per node, where a host's first port and its one application lie,
    /// for the hints (see [`HostHint`]).
    host_hints: Vec<HostHint>,
    pub(crate) ledger: Ledger,
    taps: Vec<Vec<Box<dyn Tap>>>,
    /// The last frame shown to a tap (see [`TapOrder`]).
    tap_order: TapOrder,
    /// The instant of the last event run and the highest key among the
    /// events run at it (kept while there are taps: see [`TapOrder`]).
    instant: (SimTime, u128),
    /// Whether any link has a tap.
    tapped: bool,
    out: Vec<(PortId, Frame)>,
    timers: Vec<(SimTime, u64)>,
    /// Scratch for [`Network::channel_super`].
    fates: Vec<Fate>,
    src: Sources,
    /// Set when this network is one partition of a run.
    remote: Option<Remote>,
    /// Scheduled link changes (`[[event]]`) carried out so far.
    link_events: u64,
    /// Set when a frame reached an external node's outbox, cleared by
    /// [`Network::take_departed`].
    departed: bool,
}

/// Where a host's first port and its application lie, when it has exactly
/// one application (`app` 0 otherwise, and for other nodes): addresses
/// kept only to be loaded by the hints, never read through. With them the
/// hint before a host's event starts loading the application without
/// reading the host's own lines first, which with thousands of hosts are
/// in memory (the hint waited for them, then for the application). The
/// applications and ports are all made before the network, and their
/// vectors do not move after; were one to, a hint would load the wrong
/// line, nothing worse.
#[derive(Clone, Copy, Default)]
struct HostHint {
    port: usize,
    app: usize,
}

impl HostHint {
    fn of(node: &Node) -> HostHint {
        match node {
            Node::Host(h) => h
                .hint_addresses()
                .map_or_else(HostHint::default, |(port, app)| HostHint { port, app }),
            _ => HostHint::default(),
        }
    }
}

/// For each node and port, the link and which side of it (0 = a, 1 = b):
/// every frame sent looks its way out up here. One array of every port,
/// and where each node's begin, rather than a vector per node: two loads
/// from small arrays that stay in the caches, where a vector per node was a
/// vector's header and its own allocation, two misses a frame with
/// thousands of nodes.
struct PortLinks {
    /// Index in `links` of each node's first port.
    first: Vec<u32>,
    /// (link, side) of every port, node by node.
    links: Vec<(u32, u32)>,
}

impl PortLinks {
    fn new(per_node: &[Vec<(LinkId, usize)>]) -> PortLinks {
        let mut first = Vec::with_capacity(per_node.len());
        let mut links = Vec::new();
        for ports in per_node {
            first.push(links.len() as u32);
            links.extend(ports.iter().map(|&(l, s)| (l as u32, s as u32)));
        }
        PortLinks { first, links }
    }

    /// The link of `node` if it has exactly one port.
    #[inline]
    fn only(&self, node: NodeId) -> Option<(LinkId, usize)> {
        let i = *self.first.get(node)? as usize;
        let end = self
            .first
            .get(node + 1)
            .map_or(self.links.len(), |&f| f as usize);
        if end != i + 1 {
            return None;
        }
        let (l, s) = self.links[i];
        Some((l as LinkId, s as usize))
    }

    /// The link on `port` of `node`, and which side of it.
    #[inline]
    fn get(&self, node: NodeId, port: PortId) -> (LinkId, usize) {
        let i = self.first[node] as usize + port;
        let end = self
            .first
            .get(node + 1)
            .map_or(self.links.len(), |&f| f as usize);
        // As the vector per node did: a port the node does not have is a
        // bug in the model, not another node's link.
        assert!(i < end, "node {node} has no port {port}");
        let (l, s) = self.links[i];
        (l as LinkId, s as usize)
    }
}

/// Where and when a frame that left a link direction arrives.
struct Arrival {
    /// The receiver's event source.
    src: Source,
    link: LinkId,
    side: usize,
    /// The direction's epoch when the frame left.
    epoch: u32,
    at: SimTime,
}

impl Arrival {
    /// Puts `frame` on the direction's wire, and a copy first if the
    /// channel duplicated it (counted in the direction's stats and the
    /// ledger), scheduling the wire's next arrival if it changed. Returns
    /// the frames (segments) that will arrive.
    /// Frames whose receiver another partition owns go to `away` instead.
    fn schedule(
        &self,
        frame: Frame,
        dup: bool,
        d: &mut LinkDir,
        ledger: &mut Ledger,
        q: &mut EventQueue<Event>,
        mut away: Option<&mut Vec<Crossing>>,
    ) -> u64 {
        let segs = frame.segs();
        let mut put = |frame| {
            if let Some(out) = away.as_deref_mut() {
                out.push(Crossing {
                    at: self.at,
                    link: self.link as u32,
                    dir: self.side as u8,
                    epoch: self.epoch,
                    frame,
                });
                return;
            }
            if let Some(t) = d.wire.push(self.at, self.epoch, frame) {
                q.schedule(
                    t,
                    self.src,
                    Event::Arrive {
                        link: self.link as u32,
                        dir: self.side as u8,
                        hint: d.wire.head_hint().pack(),
                    },
                );
            }
        };
        if dup {
            d.stats.duplicated += 1;
            ledger.create(Origin::LinkDuplicate);
            put(frame.clone());
        }
        put(frame);
        if dup {
            2 * segs
        } else {
            segs
        }
    }
}

/// Where the frames of link direction (`link`, `side`) go when its receiver
/// is in another partition.
fn away(remote: &mut Option<Remote>, link: LinkId, side: usize) -> Option<&mut Vec<Crossing>> {
    let r = remote.as_mut()?;
    let p = r.rx_owner[link][side]?;
    Some(&mut r.out[p as usize])
}

/// What the wire does to one segment of a super-frame.
#[derive(Clone, Copy)]
enum Fate {
    Lost,
    Arrives {
        at: SimTime,
        /// The bit corruption flips, if it strikes.
        bit: Option<u64>,
        /// Whether a copy arrives too.
        dup: bool,
    },
}

impl Network {
    pub(crate) fn new(
        spec: NetworkSpec,
        nodes: Vec<Node>,
        names: Vec<String>,
        ports: Vec<Vec<PortInfo>>,
        port_links: Vec<Vec<(LinkId, usize)>>,
        links: Vec<Link>,
        src: Sources,
    ) -> Self {
        let taps = (0..links.len()).map(|_| Vec::new()).collect();
        let port_links = PortLinks::new(&port_links);
        let link_rx = links
            .iter()
            .map(|l| [l.dirs[0].to.0 as u32, l.dirs[1].to.0 as u32])
            .collect();
        let host_hints = nodes.iter().map(HostHint::of).collect();
        Network {
            spec,
            nodes,
            names,
            ports,
            port_links,
            links,
            link_rx,
            host_hints,
            ledger: Ledger::default(),
            taps,
            tap_order: TapOrder::default(),
            instant: (SimTime::ZERO, 0),
            tapped: false,
            out: Vec::new(),
            timers: Vec::new(),
            fates: Vec::new(),
            src,
            remote: None,
            link_events: 0,
            departed: false,
        }
    }

    /// The spec this network was built from.
    pub fn spec(&self) -> &NetworkSpec {
        &self.spec
    }
    /// Node names, indexed by [`NodeId`].
    pub fn node_names(&self) -> &[String] {
        &self.names
    }
    /// The node called `name`.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.names.iter().position(|n| n == name)
    }
    /// The node with id `id`.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id]
    }
    /// The node with id `id`, mutably (e.g. to drain an external outbox).
    pub fn node_mut(&mut self, id: NodeId) -> &mut Node {
        &mut self.nodes[id]
    }
    /// The ports of node `id`.
    pub fn ports(&self, id: NodeId) -> &[PortInfo] {
        &self.ports[id]
    }
    /// All links.
    pub fn links(&self) -> &[Link] {
        &self.links
    }
    /// The link called `name`.
    pub fn link_id(&self, name: &str) -> Option<LinkId> {
        self.links.iter().position(|l| l.name == name)
    }
    /// The conservation ledger.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }
    /// Adds a tap on link `link`.
    pub fn add_tap(&mut self, link: LinkId, tap: Box<dyn Tap>) {
        self.tapped = true;
        self.taps[link].push(tap);
    }

    /// Makes room in every sample set of the simulated hosts' applications
    /// now (see [`crate::apps::Samples::presize`]): a real-time run does it
    /// before its clock starts. With `only` =
    /// (`part_of`, `me`), only the hosts of partition `me` of that cut (the
    /// others' are never used in this copy of the network).
    pub fn presize_samples(&mut self, only: Option<(&[u32], u32)>) {
        for (i, node) in self.nodes.iter_mut().enumerate() {
            if let Node::Host(h) = node {
                if only.is_none_or(|(part_of, me)| part_of[i] == me) {
                    h.presize_samples();
                }
            }
        }
    }

    /// Adds taps, each on its link (a partition's: see
    /// [`crate::partition::PartitionTaps`]).
    pub fn add_taps(&mut self, taps: impl IntoIterator<Item = (LinkId, Box<dyn Tap>)>) {
        for (link, tap) in taps {
            self.add_tap(link, tap);
        }
    }

    /// Hands a frame from the outside world to external node `node`, at the
    /// queue's current time. Returns `false` (and counts nothing) if `node` is
    /// not an external node. A GSO super-frame counts as its segments.
    pub fn inject(&mut self, q: &mut EventQueue<Event>, node: NodeId, frame: Frame) -> bool {
        if !matches!(self.nodes.get(node), Some(Node::External(_))) {
            return false;
        }
        self.ledger.create_n(Origin::External, frame.segs());
        self.offer(q.now(), node, 0, frame, q);
        true
    }

    /// Hands a frame to external node `node` for simulated time `at` (now or
    /// later): it enters the model then, as if it had arrived from outside
    /// at that moment. Frames for the same moment enter in the order they
    /// were handed in. From this call on the frame counts as created
    /// (`External`) and, until it enters, as held in the node.
    pub fn inject_at(
        &mut self,
        q: &mut EventQueue<Event>,
        node: NodeId,
        at: SimTime,
        frame: Frame,
    ) -> Result<(), InjectError> {
        let Some(Node::External(x)) = self.nodes.get_mut(node) else {
            return Err(InjectError::NotExternal { node });
        };
        let now = q.now();
        if at < now {
            return Err(InjectError::InThePast { at, now });
        }
        self.ledger.create_n(Origin::External, frame.segs());
        if let Some(t) = x.inbox.push(at, 0, frame) {
            q.schedule(t, self.src.node(node), Event::Enter { node: node as u32 });
        }
        Ok(())
    }

    /// Sends `data` from message endpoint `app` of simulated host `node`,
    /// now, to `to` or the endpoint's own destination (see
    /// [`crate::apps::MessageEndpoint`]).
    pub fn endpoint_send(
        &mut self,
        q: &mut EventQueue<Event>,
        node: NodeId,
        app: usize,
        to: Option<std::net::SocketAddr>,
        data: &[u8],
    ) -> Result<(), SendRefused> {
        if !matches!(self.nodes.get(node), Some(Node::Host(_))) {
            return Err(SendRefused::NotAnEndpoint);
        }
        let mut result = Err(SendRefused::NotAnEndpoint);
        self.dispatch(q.now(), node, q, |nd, ctx| {
            if let Node::Host(h) = nd {
                result = h.endpoint_send(app, to, data, ctx);
            }
        });
        result
    }

    /// Takes what reached `endpoints` (the simulation's, in order) so far:
    /// (index in `endpoints`, message), endpoint by endpoint, each oldest
    /// first.
    pub fn take_messages(
        &mut self,
        q: &mut EventQueue<Event>,
        endpoints: &[crate::build::EndpointInfo],
    ) -> Vec<(usize, crate::apps::Message)> {
        let mut out = Vec::new();
        for (i, e) in endpoints.iter().enumerate() {
            out.extend(
                self.take_endpoint(q, e.node, e.app)
                    .into_iter()
                    .map(|m| (i, m)),
            );
        }
        out
    }

    /// Takes what reached message endpoint `app` of host `node` so far,
    /// oldest first. A TCP endpoint whose inbox was full held the rest of
    /// its streams back: its host reads them now, into the inbox, for the
    /// next take (stamped now, when there was room for them).
    pub fn take_endpoint(
        &mut self,
        q: &mut EventQueue<Event>,
        node: NodeId,
        app: usize,
    ) -> Vec<crate::apps::Message> {
        let Some(ep) = self.endpoint_mut(node, app) else {
            return Vec::new();
        };
        let held = ep.tcp.is_some() && ep.inbox.len() >= crate::apps::ENDPOINT_INBOX;
        let taken: Vec<_> = std::iter::from_fn(|| ep.take()).collect();
        if held {
            self.dispatch(q.now(), node, q, |nd, ctx| {
                if let Node::Host(h) = nd {
                    h.resume(ctx);
                }
            });
        }
        taken
    }

    /// Message endpoint `app` of host `node`, if it is one: its inbox is
    /// read through it.
    pub fn endpoint_mut(&mut self, node: NodeId, app: usize) -> Option<&mut MessageEndpoint> {
        match self.nodes.get_mut(node) {
            Some(Node::Host(h)) => h.endpoint_mut(app),
            _ => None,
        }
    }

    /// The first frame waiting at external node `node` is due now.
    fn enter(&mut self, now: SimTime, node: NodeId, q: &mut EventQueue<Event>) {
        let Node::External(x) = &mut self.nodes[node] else {
            return;
        };
        let (head, next) = x.inbox.take(now);
        if let Some(t) = next {
            q.schedule(t, self.src.node(node), Event::Enter { node: node as u32 });
        }
        if let Some(InAir { frame, .. }) = head {
            self.offer(now, node, 0, frame, q);
        }
    }

    /// Offers `frame` to the link on `port` of `node`.
    fn offer(
        &mut self,
        now: SimTime,
        node: NodeId,
        port: PortId,
        frame: Frame,
        q: &mut EventQueue<Event>,
    ) {
        let (link, side) = self.port_links.get(node, port);
        let d = &mut self.links[link].dirs[side];
        if frame.is_super() && d.channel.cuts_super_frames() {
            // Its segments would leave (or arrive) at times of their own.
            gso::cut(frame, &mut |seg| self.offer(now, node, port, seg, q));
            return;
        }
        let n = frame.segs();
        d.stats.offered_packets += n;
        // A super-frame fits when each of its segments does.
        let longest = frame.meta.gso.map_or(frame.len(), |g| {
            usize::from(g.hdr_len) + usize::from(g.size)
        });
        let reason = if !d.up {
            Some(DropReason::LinkDown)
        } else if longest > max_frame_len(d.channel.mtu(), &frame) {
            Some(DropReason::MtuExceeded)
        } else {
            None
        };
        if let Some(r) = reason {
            d.stats.drops.add_n(r, n);
            self.ledger.drop_n(r, n);
            return;
        }
        // A queue holds frames only while a wake-up is due to take them
        // (`wake_pending`; set before any enqueue, cleared only when the
        // queue is emptied), so without one the queue is empty and is not
        // asked: the discipline lives in an allocation of its own, and
        // with thousands of links asking it was a cache miss per frame.
        debug_assert!(d.wake_pending || d.queue.is_empty());
        if now >= d.busy_until && (!d.wake_pending || d.queue.is_empty()) {
            self.start_tx(now, link, side, frame, false, q);
            return;
        }
        // The transmitter is busy (a queue that is not empty has a wake-up
        // due already): the frame waits, and a wake-up at the end of the
        // transmission takes it.
        if !d.wake_pending {
            d.wake_pending = true;
            q.schedule(
                d.busy_until.max(now),
                self.src.tx(link, side),
                Event::TxDone {
                    link: link as u32,
                    dir: side as u8,
                    epoch: d.epoch,
                },
            );
        }
        let mut sink = qdisc::Sink::default();
        let offered = d.queue.enqueue(now, frame, &mut sink);
        count_queue(d, &mut self.ledger, &mut sink);
        match offered {
            Ok(()) => d.note_queue(),
            Err((frame, r)) if frame.is_super() => {
                // What does not fit whole may fit in part: the segments
                // queue (or are dropped) one by one, as they would on the
                // wire. (A direction that keeps super-frames whole has no
                // rate, so its transmitter is never busy and nothing
                // queues there; this keeps the queue's rule should that
                // ever change.)
                let _ = r;
                gso::cut(frame, &mut |seg| {
                    let offered = d.queue.enqueue(now, seg, &mut sink);
                    count_queue(d, &mut self.ledger, &mut sink);
                    match offered {
                        Ok(()) => d.note_queue(),
                        Err((_, r)) => {
                            d.stats.drops.add(r);
                            self.ledger.drop_frame(r);
                        }
                    }
                });
            }
            Err((_, r)) => {
                d.stats.drops.add(r);
                self.ledger.drop_frame(r);
            }
        }
    }

    /// Shows `frame` to the taps of `link` (a super-frame as the segments
    /// the wire carries, each at `now`: a direction that keeps super-frames
    /// whole sends them at no rate).
    #[inline]
    fn tap(&mut self, now: SimTime, link: LinkId, side: usize, rx: bool, frame: &Frame) {
        // Most runs have no tap at all: twice per hop, the one flag spares
        // a call and a look at the link's list.
        if self.tapped && !self.taps[link].is_empty() {
            self.tap_now(now, link, side, rx, frame);
        }
    }

    /// [`Network::tap`] for a link that has taps.
    #[inline(never)]
    fn tap_now(&mut self, now: SimTime, link: LinkId, side: usize, rx: bool, frame: &Frame) {
        let taps = &mut self.taps[link];
        // A frame handed in between events (real time) keeps the highest
        // key for the rest of its instant, so the order still only grows.
        self.instant.0 = self.instant.0.max(now);
        let last = &mut self.tap_order;
        let key = self.instant.1;
        let mut next = || {
            *last = if last.time == now && last.key == key {
                TapOrder {
                    sub: last.sub.saturating_add(1),
                    ..*last
                }
            } else {
                TapOrder {
                    time: now,
                    key,
                    sub: 0,
                }
            };
            *last
        };
        if frame.is_super() {
            gso::cut(frame.clone(), &mut |seg| {
                let at = next();
                for tap in taps.iter_mut() {
                    tap.frame(at, side, rx, &seg);
                }
            });
        } else {
            let at = next();
            for tap in taps.iter_mut() {
                tap.frame(at, side, rx, frame);
            }
        }
    }

    /// Starts sending `frame` at `now`; `waited`: it waited in the queue
    /// for the frame before it (see [`crate::link::Channel::tx_end`]).
    fn start_tx(
        &mut self,
        now: SimTime,
        link: LinkId,
        side: usize,
        frame: Frame,
        waited: bool,
        q: &mut EventQueue<Event>,
    ) {
        self.tap(now, link, side, false, &frame);
        let d = &mut self.links[link].dirs[side];
        d.stats.sent_packets += frame.segs();
        d.stats.sent_bytes += frame.wire_len();
        let end = d.channel.tx_end(now, &frame, waited);
        d.busy_until = end;
        // Its fate on the wire is drawn now, for the moment its last bit
        // leaves: each direction draws from its own stream, frame after
        // frame, so the draws are those an event at `end` would make.
        let segs = if frame.is_super() {
            self.channel_super(end, link, side, frame, q)
        } else {
            self.channel(end, link, side, frame, q)
        };
        self.links[link].dirs[side].tx_segs = segs;
    }

    fn tx_done(
        &mut self,
        now: SimTime,
        link: LinkId,
        side: usize,
        epoch: u32,
        q: &mut EventQueue<Event>,
    ) {
        let d = &mut self.links[link].dirs[side];
        if d.epoch != epoch {
            return; // the link went down meanwhile; its queue was emptied then
        }
        d.wake_pending = false;
        let mut sink = qdisc::Sink::default();
        let next = d.queue.dequeue(now, &mut sink);
        count_queue(d, &mut self.ledger, &mut sink);
        if let Some(next) = next {
            self.start_tx(now, link, side, next, true, q);
        }
        let d = &mut self.links[link].dirs[side];
        if !d.queue.is_empty() {
            d.wake_pending = true;
            q.schedule(
                d.busy_until,
                self.src.tx(link, side),
                Event::TxDone {
                    link: link as u32,
                    dir: side as u8,
                    epoch: d.epoch,
                },
            );
        }
    }

    /// What the wire does to a frame whose last bit leaves at `now`: loss,
    /// corruption, delay and jitter, duplication. Returns the frames that
    /// will arrive.
    fn channel(
        &mut self,
        now: SimTime,
        link: LinkId,
        side: usize,
        mut frame: Frame,
        q: &mut EventQueue<Event>,
    ) -> u64 {
        let d = &mut self.links[link].dirs[side];
        if d.channel.lose() {
            d.stats.drops.add(DropReason::RandomLoss);
            self.ledger.drop_frame(DropReason::RandomLoss);
            return 0;
        }
        if d.channel.corrupt(&mut frame) {
            d.stats.corrupted += 1;
        }
        let at = d.channel.arrival(now);
        let dup = d.channel.duplicate();
        let arrive = Arrival {
            src: self.src.rx(link, side),
            link,
            side,
            epoch: d.epoch,
            at,
        };
        let away = away(&mut self.remote, link, side);
        arrive.schedule(frame, dup, d, &mut self.ledger, q, away)
    }

    /// [`Network::channel`] for a super-frame: the same draws, in the same
    /// order, as for its segments one by one, so that each segment meets
    /// the fate it would have met as a frame. It stays whole when every
    /// segment arrives untouched at the same time; otherwise it is cut and
    /// each segment goes its own way. Returns the frames (segments) that
    /// will arrive.
    fn channel_super(
        &mut self,
        now: SimTime,
        link: LinkId,
        side: usize,
        frame: Frame,
        q: &mut EventQueue<Event>,
    ) -> u64 {
        let g = frame.meta.gso.expect("a super-frame");
        let d = &mut self.links[link].dirs[side];
        let mut fates = std::mem::take(&mut self.fates);
        fates.clear();
        let mut whole = true;
        let mut first_at = None;
        for i in 0..usize::from(g.segs) {
            let fate = if d.channel.lose() {
                Fate::Lost
            } else {
                let bit = d.channel.corrupt_bit(g.seg_len(frame.len(), i));
                let at = d.channel.arrival(now);
                let dup = d.channel.duplicate();
                Fate::Arrives { at, bit, dup }
            };
            whole &= match fate {
                Fate::Arrives {
                    at,
                    bit: None,
                    dup: false,
                } => *first_at.get_or_insert(at) == at,
                _ => false,
            };
            fates.push(fate);
        }
        let epoch = d.epoch;
        let src = self.src.rx(link, side);
        let remote = &mut self.remote;
        let arrival = |at| Arrival {
            src,
            link,
            side,
            epoch,
            at,
        };
        let mut arriving = 0;
        if whole {
            let at = first_at.expect("a super-frame has segments");
            let away = away(remote, link, side);
            arriving = arrival(at).schedule(frame, false, d, &mut self.ledger, q, away);
        } else {
            let mut i = 0;
            gso::cut(frame, &mut |mut seg| {
                // `describe` made the segment count the cut's; should they
                // ever differ, a segment without a fate arrives untouched.
                let fate = fates.get(i).copied().unwrap_or(Fate::Arrives {
                    at: now + d.channel.delay(),
                    bit: None,
                    dup: false,
                });
                match fate {
                    Fate::Lost => {
                        d.stats.drops.add(DropReason::RandomLoss);
                        self.ledger.drop_frame(DropReason::RandomLoss);
                    }
                    Fate::Arrives { at, bit, dup } => {
                        if let Some(bit) = bit {
                            if let Some(byte) = seg.get_mut((bit / 8) as usize) {
                                *byte ^= 1 << (bit % 8);
                            }
                            d.stats.corrupted += 1;
                        }
                        let away = away(remote, link, side);
                        arriving += arrival(at).schedule(seg, dup, d, &mut self.ledger, q, away);
                    }
                }
                i += 1;
            });
        }
        self.fates = fates;
        arriving
    }

    fn arrive(&mut self, now: SimTime, link: LinkId, side: usize, q: &mut EventQueue<Event>) {
        let d = &mut self.links[link].dirs[side];
        let (head, next) = d.wire.take(now);
        if let Some(t) = next {
            q.schedule(
                t,
                self.src.rx(link, side),
                Event::Arrive {
                    link: link as u32,
                    dir: side as u8,
                    hint: d.wire.head_hint().pack(),
                },
            );
        }
        let Some(InAir { epoch, frame, .. }) = head else {
            return; // an event the wire no longer needed
        };
        let n = frame.segs();
        if d.epoch != epoch {
            d.stats.drops.add_n(DropReason::LinkDown, n);
            self.ledger.drop_n(DropReason::LinkDown, n);
            return;
        }
        d.stats.received_packets += n;
        d.stats.received_bytes += frame.wire_len();
        let (node, port) = d.to;
        self.tap(now, link, side, true, &frame);
        let mut departed = false;
        self.dispatch(now, node, q, |nd, ctx| match nd {
            Node::Host(h) => h.receive(port, frame, ctx),
            Node::Router(r) => r.receive(port, frame, ctx),
            Node::Switch(s) => s.receive(port, frame, ctx),
            Node::External(e) => {
                ctx.deliver_n(Sink::External, n);
                e.outbox.push_back(Departure { at: now, frame });
                departed = true;
            }
        });
        self.departed |= departed;
    }

    /// Whether a frame reached an external node's outbox since the last
    /// call: the real-time loop drains the outboxes only then, not after
    /// every event (looking at every external node after each event had
    /// been 3 % of partition 0's time with 10 000 simulated pairs).
    pub fn take_departed(&mut self) -> bool {
        std::mem::take(&mut self.departed)
    }

    /// Runs `f` on node `node` with a context, then carries out what it asked
    /// for (frames to send, timers to set).
    fn dispatch(
        &mut self,
        now: SimTime,
        node: NodeId,
        q: &mut EventQueue<Event>,
        f: impl FnOnce(&mut Node, &mut NodeCtx),
    ) {
        let mut out = std::mem::take(&mut self.out);
        {
            let mut ctx = NodeCtx {
                now,
                out: &mut out,
                timers: &mut self.timers,
                ledger: &mut self.ledger,
            };
            f(&mut self.nodes[node], &mut ctx);
        }
        // Most events set no timer and many send nothing: the checks spare
        // a drain's set-up and drop (about 2 % of a dumbbell run's
        // instructions).
        if !self.timers.is_empty() {
            for (at, token) in self.timers.drain(..) {
                q.schedule(
                    at,
                    self.src.node(node),
                    Event::Timer {
                        node: node as u32,
                        token,
                    },
                );
            }
        }
        if !out.is_empty() {
            for (port, frame) in out.drain(..) {
                self.offer(now, node, port, frame, q);
            }
        }
        self.out = out;
    }

    fn link_event(&mut self, index: usize) {
        self.link_events += 1;
        let ev = self.spec.events[index].clone();
        let Some(link) = self.link_id(&ev.link) else {
            return; // validated at build time
        };
        self.change_link(link, ev.direction, &ev.action);
    }

    /// Changes a link now: what a scheduled `[[event]]` does when its time
    /// comes, and what a front end does for a change asked for while the
    /// network runs (the real-time loop calls it between events).
    pub fn change_link(&mut self, link: LinkId, direction: Direction, action: &LinkAction) {
        let sides: &[usize] = match direction {
            Direction::Both => &[0, 1],
            Direction::AToB => &[0],
            Direction::BToA => &[1],
        };
        for &side in sides {
            let d = &mut self.links[link].dirs[side];
            match action {
                LinkAction::Down => {
                    if !d.up {
                        continue;
                    }
                    d.up = false;
                    d.epoch = d.epoch.wrapping_add(1);
                    // The frame being serialised is already on its way
                    // (its arrival scheduled): like frames on the wire, it
                    // is dropped when it arrives, under the old epoch.
                    d.busy_until = SimTime::ZERO;
                    d.tx_segs = 0;
                    d.wake_pending = false;
                    let n = d.queue.clear() as u64;
                    d.stats.drops.add_n(DropReason::LinkDown, n);
                    self.ledger.drop_n(DropReason::LinkDown, n);
                }
                LinkAction::Up => d.up = true,
                LinkAction::Set(change) => d.channel.apply(change),
            }
        }
    }

    /// Frames currently inside the model: in link queues and transmitters, on
    /// wires (pending arrivals in `q`), and held by nodes (forwarding queues,
    /// frames waiting for ARP, external outboxes). Read, as the results
    /// read it, from the whole network's share.
    pub fn in_flight(&self, q: &EventQueue<Event>) -> InFlight {
        crate::share::Share::of(self, &[], q.now(), |_| true).in_flight()
    }
}

/// What a partition of a network does (see `crate::partition`): each
/// partition holds a whole copy of the network but runs only the events of
/// what it owns (its nodes, the transmitters of links leaving them, the
/// receivers of links reaching them); the rest of its copy stays as built
/// (every counter zero) and is never read. Scheduled link changes run in
/// every partition, each carrying out its own halves. A frame sent on a link
/// whose receiver another partition owns leaves as a [`Crossing`].
impl Network {
    /// Makes this network partition `me` of a run in which node `n` belongs
    /// to partition `part_of[n]`.
    pub fn make_partition(&mut self, part_of: &[u32], me: u32, parts: u32) {
        let rx_owner = self
            .links
            .iter()
            .map(|l| {
                let owner = |side: usize| {
                    let tx = part_of[l.ends[side].0];
                    let rx = part_of[l.dirs[side].to.0];
                    (tx == me && rx != me).then_some(rx)
                };
                [owner(0), owner(1)]
            })
            .collect();
        self.remote = Some(Remote {
            rx_owner,
            out: (0..parts).map(|_| Vec::new()).collect(),
        });
    }

    /// Whether partition `me` of a run cut by `part_of` runs `event`.
    pub fn runs(&self, part_of: &[u32], me: u32, event: &Event) -> bool {
        match *event {
            Event::TxDone { link, dir, .. } => {
                part_of[self.links[link as usize].ends[dir as usize].0] == me
            }
            Event::Arrive { link, dir, .. } => {
                part_of[self.links[link as usize].dirs[dir as usize].to.0] == me
            }
            Event::Timer { node, .. } | Event::Enter { node } => part_of[node as usize] == me,
            Event::LinkEvent { .. } => true,
        }
    }

    /// The frames sent so far to other partitions, by partition (to be
    /// handed over).
    ///
    /// # Panics
    /// If this network is not a partition ([`Network::make_partition`]).
    pub fn all_crossings(&mut self) -> &mut [Vec<Crossing>] {
        &mut self.remote.as_mut().expect("a partition of a run").out
    }

    /// Puts a frame that crossed from another partition on its wire.
    pub fn receive(&mut self, q: &mut EventQueue<Event>, c: Crossing) {
        let (link, side) = (c.link as usize, usize::from(c.dir));
        let d = &mut self.links[link].dirs[side];
        if let Some(t) = d.wire.push(c.at, c.epoch, c.frame) {
            q.schedule(
                t,
                self.src.rx(link, side),
                Event::Arrive {
                    link: c.link,
                    dir: c.dir,
                    hint: d.wire.head_hint().pack(),
                },
            );
        }
    }

    /// Scheduled link changes carried out so far (every partition carries
    /// out each).
    pub fn link_events(&self) -> u64 {
        self.link_events
    }
}

impl Network {
    /// Frames (segments) inside link direction (`link`, `side`) at `now`:
    /// queued, being serialised, and on the wire (those being serialised
    /// included: a frame is put on the wire when it starts).
    pub fn dir_in_flight(&self, link: LinkId, side: usize, now: SimTime) -> (u64, u64, u64) {
        let d = &self.links[link].dirs[side];
        let transmitting = if d.busy_until > now { d.tx_segs } else { 0 };
        (d.queue.len() as u64, transmitting, d.wire.segs())
    }
}

/// Frames inside the model at one moment, by where they are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct InFlight {
    /// Waiting in link transmit queues.
    pub queued: u64,
    /// Being serialised.
    pub transmitting: u64,
    /// Propagating on a wire.
    pub on_wire: u64,
    /// Held inside nodes (router forwarding queues, ARP waits).
    pub in_nodes: u64,
}

impl InFlight {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.queued + self.transmitting + self.on_wire + self.in_nodes
    }
}

impl Model for Network {
    type Event = Event;
    fn handle(&mut self, now: SimTime, event: Event, q: &mut EventQueue<Event>) {
        if self.tapped {
            let key = q.current_key();
            self.instant = match self.instant {
                (t, max) if t == now => (t, max.max(key)),
                _ => (now, key),
            };
        }
        match event {
            Event::TxDone { link, dir, epoch } => {
                self.tx_done(now, link as usize, dir as usize, epoch, q)
            }
            Event::Arrive { link, dir, .. } => self.arrive(now, link as usize, dir as usize, q),
            Event::Timer { node, token } => {
                self.dispatch(now, node as usize, q, |n, ctx| match n {
                    Node::Host(h) => h.timer(token, ctx),
                    Node::Router(r) => r.timer(token, ctx),
                    Node::Switch(_) | Node::External(_) => {}
                })
            }
            Event::Enter { node } => self.enter(now, node as usize, q),
            Event::LinkEvent { index } => self.link_event(index as usize),
        }
    }

    /// Below [`HINT_MIN_NODES`] nodes the network's state stays in the
    /// caches and the hints would be work for nothing.
    fn wants_hints(&self) -> bool {
        self.nodes.len() >= HINT_MIN_NODES
    }

    /// Starts loading the link direction and the node an event will touch
    /// (a host's or router's state is a box of a kilobyte or so): with
    /// thousands of them, each event otherwise finds its state in memory,
    /// not in the caches (about 20 % of the run time at 1 000 pairs of
    /// hosts).
    fn prefetch(&self, event: &Event) {
        let (node, token) = match *event {
            Event::TxDone { link, dir, .. } => {
                if let Some(l) = self.links.get(link as usize) {
                    // A transmitter's wake-up also writes the queue's
                    // counters, past the lines a frame's arrival needs.
                    prefetch(&l.dirs[usize::from(dir) & 1], 16);
                }
                return;
            }
            Event::Arrive { link, dir, hint } => {
                let (Some(l), Some(rx)) = (
                    self.links.get(link as usize),
                    self.link_rx.get(link as usize),
                ) else {
                    return;
                };
                let dir = usize::from(dir) & 1;
                let (node, hint) = (rx[dir] as usize, crate::wire::HeadHint::unpack(hint));
                // First what needs no read: the direction's lines, the
                // receiving host's and the frame's bytes (the event
                // carries where they are). Then the head frame's entry,
                // which the arrival reads first: finding it reads the
                // wire's lines, just asked for, so the hint waits for
                // them here, with the other loads under way. Then the
                // application. (Asked for after the application's lines
                // instead, 10 000 simulated pairs ran no faster than with
                // no hint for the entry.)
                prefetch_span(&l.dirs[dir], crate::link::RX_HOT);
                let wire = &l.dirs[dir].wire;
                match self.nodes.get(node) {
                    Some(Node::Host(h)) => {
                        prefetch(&**h, crate::host::HINT_RX_LINES);
                        netloop_core::sched::prefetch_addr(hint.data);
                        wire.prefetch_head();
                        if !self.prefetch_app(node, crate::apps::App::FRAME_HINT_BYTES) {
                            h.prefetch_udp(hint.dport);
                        }
                    }
                    Some(Node::Router(r)) => {
                        wire.prefetch_head();
                        prefetch(&**r, 16);
                    }
                    _ => wire.prefetch_head(),
                }
                return;
            }
            Event::Timer { node, token } => {
                // A host's timer most often sends a datagram, on the host's
                // one link if it has one: the direction's lines would be
                // the send's misses (`port_links` is small enough to stay
                // in the caches). A one-port node of another kind gets the
                // hint too (a router's timer may send: a resolution's
                // retry, a packet its forwarding engine finished); a node
                // with several ports gets none, not knowing which.
                if let Some((link, side)) = self.port_links.only(node as usize) {
                    if let Some(l) = self.links.get(link) {
                        prefetch_span(&l.dirs[side & 1], crate::link::TX_HOT);
                    }
                }
                (node as usize, Some(token))
            }
            Event::Enter { node } => (node as usize, None),
            Event::LinkEvent { .. } => return,
        };
        match (self.nodes.get(node), token) {
            (Some(Node::Host(h)), Some(token)) => {
                prefetch(&**h, crate::host::HINT_TX_LINES);
                if !(crate::host::Host::wakes_first_app(token)
                    && self.prefetch_app(node, crate::apps::App::TIMER_HINT_BYTES))
                {
                    h.prefetch_timer(token);
                }
            }
            (Some(Node::Host(h)), None) => prefetch(&**h, crate::host::HINT_RX_LINES),
            (Some(Node::Router(r)), _) => prefetch(&**r, 16),
            _ => {}
        }
    }
}

impl Network {
    /// Starts loading a host's first port and the first `bytes` of its one
    /// application from where [`HostHint`] says they lie, reading nothing
    /// of the host; false if the node has no such hint (not a host, or
    /// several applications: the host's own lines must say which).
    fn prefetch_app(&self, node: usize, bytes: usize) -> bool {
        match self.host_hints.get(node) {
            Some(&HostHint { port, app }) if app != 0 => {
                netloop_core::sched::prefetch_addr_span(port, 128);
                netloop_core::sched::prefetch_addr_span(app, bytes);
                true
            }
            _ => false,
        }
    }
}

/// Turns what a queue discipline reported into the direction's counters
/// and the ledger: its drops (each frame accounted for, by reason), its
/// ECN marks and the sojourn of the frame it handed out.
fn count_queue(d: &mut LinkDir, ledger: &mut Ledger, sink: &mut qdisc::Sink) {
    for (segs, r) in sink.dropped.drain(..) {
        d.stats.drops.add_n(r, segs);
        ledger.drop_n(r, segs);
    }
    d.stats.ecn_marked += std::mem::take(&mut sink.ecn_marked);
    if let Some(w) = sink.sojourn.take() {
        let ns = w.as_nanos();
        d.stats.queue_delay_sum_ns += ns;
        d.stats.queue_delay_max_ns = d.stats.queue_delay_max_ns.max(ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node in the network's vector is a tag and a pointer: the vector is
    /// read for every event, and with thousands of nodes an inline variant
    /// made each entry 136 bytes and most reads a miss.
    #[test]
    fn a_node_is_a_tag_and_a_pointer() {
        assert_eq!(std::mem::size_of::<Node>(), 16);
    }

    /// Each port finds its own link, node by node, including nodes without
    /// ports; a port a node does not have is refused, not another node's.
    #[test]
    fn ports_find_their_links() {
        let per_node = vec![vec![(3, 1), (0, 0)], vec![], vec![(7, 1)]];
        let p = PortLinks::new(&per_node);
        for (node, ports) in per_node.iter().enumerate() {
            for (port, &want) in ports.iter().enumerate() {
                assert_eq!(p.get(node, port), want, "node {node} port {port}");
            }
        }
        let past = std::panic::catch_unwind(|| p.get(1, 0));
        assert!(past.is_err(), "node 1 has no port 0");
        let past = std::panic::catch_unwind(|| p.get(0, 2));
        assert!(past.is_err(), "node 0 has no port 2");
    }

    /// A network's size is refused where its nodes' MAC addresses or the
    /// queue's sources would no longer tell them apart, and only there.
    #[test]
    fn sources_refuse_only_what_they_cannot_tell_apart() {
        let max = crate::node::MAX_NODES;
        assert!(Sources::new(max, 0).is_ok());
        let e = Sources::new(max + 1, 0).unwrap_err();
        assert!(e.contains("MAC address"), "{e}");
        // 1 + 3 + 4 x (2^30 - 1) = 2^32 sources, the most; one node more
        // is one too many.
        let links = (1 << 30) - 1;
        let s = Sources::new(3, links).unwrap();
        assert_eq!(s.rx(links - 1, 1), Source::MAX);
        let e = Sources::new(4, links).unwrap_err();
        assert!(e.contains("event queue"), "{e}");
        // The MAC addresses of 2^24 nodes differ; one more would repeat.
        use crate::node::mac_for;
        assert_eq!(mac_for(max - 1, 0).0[1..4], [0xff; 3]);
        assert_eq!(mac_for(max, 0), mac_for(0, 0));
    }

    /// An event stays two words, its hint included: the queue moves each
    /// event several times (see `netloop_core::queue`).
    #[test]
    fn an_event_is_two_words() {
        assert_eq!(std::mem::size_of::<Event>(), 16);
    }

    /// Only a node with exactly one port has "its link" (the one a timer's
    /// hint loads), the last node included; a node past the end has none.
    #[test]
    fn only_a_one_port_node_has_its_link() {
        let per_node = vec![vec![(3, 1), (0, 0)], vec![], vec![(5, 0)], vec![(7, 1)]];
        let p = PortLinks::new(&per_node);
        let only: Vec<_> = (0..5).map(|n| p.only(n)).collect();
        assert_eq!(only, [None, None, Some((5, 0)), Some((7, 1)), None]);
    }
}
