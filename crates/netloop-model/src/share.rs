//! What a run's results are read from, as each owner holds it: counters of
//! link directions (the transmitter's half and the receiver's), nodes'
//! counters, each flow's two ends, the conservation ledger, frames in
//! flight.
//!
//! A single run reads its [`Share`] from the whole network. A run on MPI
//! ranks, where no process holds the whole network, has each rank read the
//! share of what it owns, gathers them (they serialise), and merges them
//! with [`Share::absorb`] into the share a single run would have read: the
//! results are assembled from it the same way, so they are the same.

use serde::{Deserialize, Serialize};

use crate::apps::{App, EndpointStats, Hop, TcpMode};
use crate::build::FlowInfo;
use crate::network::{InFlight, Network, Node};
use crate::results::Percentiles;
use crate::stats::{DirStats, Ledger};
use crate::NodeId;
use netloop_core::SimTime;

/// What one owner (or all) contributes to the results.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Share {
    /// Per link, per direction: counters and frames inside it (summed over
    /// the transmitter's and the receiver's shares).
    pub dirs: Vec<[DirShare; 2]>,
    /// Per node, from its owner.
    pub nodes: Vec<Option<NodeShare>>,
    /// Per flow, its two ends, each from the owner of its host.
    pub flows: Vec<FlowShare>,
    /// The conservation ledger (summed).
    pub ledger: Ledger,
    /// Per message endpoint (spec order), from the owner of its host.
    #[serde(default)]
    pub endpoints: Vec<Option<EndpointStats>>,
}

/// A link direction's counters and the frames inside it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DirShare {
    /// Counters.
    pub stats: DirStats,
    /// Frames in the transmit queue.
    pub queued: u64,
    /// Frames (segments) being serialised.
    pub transmitting: u64,
    /// Frames (segments) on the wire, those being serialised included.
    pub wire: u64,
}

/// A node's counters and the frames it holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeShare {
    /// Node-type counters (`null` for real hosts).
    pub stats: serde_json::Value,
    /// Frames held (forwarding queues, ARP waits, reassembly, frames
    /// handed in for later).
    pub in_flight: u64,
}

/// A flow's ends.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FlowShare {
    /// The sending end, from the owner of the sending host.
    pub src: Option<SrcEnd>,
    /// The receiving end, from the owner of the receiving host.
    pub dst: Option<DstEnd>,
}

/// What a flow's sending application measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum SrcEnd {
    /// A UDP source: datagrams sent.
    Udp {
        /// Datagrams sent.
        sent: u64,
    },
    /// A ping: it measures both ways itself.
    Ping {
        /// Echo requests sent.
        sent: u64,
        /// Replies received.
        received: u64,
        /// Payload size.
        size: u64,
        /// Round-trip times.
        rtt: Option<Percentiles>,
    },
    /// A traceroute.
    Traceroute {
        /// Largest TTL probed so far.
        ttl: u8,
        /// Hops found.
        hops: Vec<Hop>,
    },
    /// A TCP client.
    Tcp {
        /// A bulk transfer (else request/response).
        bulk: bool,
        /// When it started, ns.
        started: Option<u64>,
        /// Bytes it received (responses).
        bytes_received: u64,
        /// Last byte received, ns.
        last_rx: Option<u64>,
        /// Transaction latencies.
        latency: Option<Percentiles>,
        /// Bytes it wrote.
        bytes_sent: u64,
        /// Transactions completed.
        transactions: u64,
    },
    /// Something else (no figures).
    Other,
}

/// What a flow's receiving application measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum DstEnd {
    /// A UDP sink.
    Udp {
        /// Unique datagrams received.
        received: u64,
        /// Their payload bytes.
        bytes: u64,
        /// Last arrival, ns.
        last_rx: Option<u64>,
        /// One-way delays.
        delay: Option<Percentiles>,
        /// RFC 3550 jitter, ns.
        jitter_ns: f64,
        /// Datagrams that arrived after a later one.
        reordered: u64,
        /// Duplicates.
        duplicates: u64,
    },
    /// A TCP server.
    Tcp {
        /// Bytes that reached it.
        bytes_received: u64,
        /// When a sized transfer completed, ns.
        completed: Option<u64>,
        /// Last byte received, ns.
        last_rx: Option<u64>,
    },
    /// Something else (no figures).
    Other,
}

fn ns(t: Option<SimTime>) -> Option<u64> {
    t.map(|t| t.as_nanos())
}

/// Application `i` of host `node`, if `node` is a host that has it.
pub(crate) fn app(net: &Network, node: NodeId, i: usize) -> Option<&App> {
    match net.node(node) {
        Node::Host(h) => h.apps().get(i),
        _ => None,
    }
}

fn src_end(a: Option<&App>) -> SrcEnd {
    match a {
        Some(App::UdpSource(s)) => SrcEnd::Udp { sent: s.sent },
        Some(App::Ping(p)) => SrcEnd::Ping {
            sent: p.sent,
            received: p.received,
            size: p.size as u64,
            rtt: Percentiles::of(&p.rtt),
        },
        Some(App::Traceroute(t)) => SrcEnd::Traceroute {
            ttl: t.ttl,
            hops: t.hops.clone(),
        },
        Some(App::TcpClient(c)) => SrcEnd::Tcp {
            bulk: matches!(c.mode, TcpMode::Bulk { .. }),
            started: ns(c.stats.started),
            bytes_received: c.stats.bytes_received,
            last_rx: ns(c.stats.last_rx),
            latency: Percentiles::of(&c.stats.latency),
            bytes_sent: c.stats.bytes_sent,
            transactions: c.stats.transactions,
        },
        _ => SrcEnd::Other,
    }
}

fn dst_end(a: Option<&App>) -> DstEnd {
    match a {
        Some(App::UdpSink(k)) => {
            let st = &k.stats;
            DstEnd::Udp {
                received: st.received,
                bytes: st.bytes,
                last_rx: ns(st.last_rx),
                delay: Percentiles::of(&st.delay),
                jitter_ns: st.jitter_ns,
                reordered: st.reordered,
                duplicates: st.duplicates,
            }
        }
        Some(App::TcpServer(s)) => DstEnd::Tcp {
            bytes_received: s.stats.bytes_received,
            completed: ns(s.stats.completed),
            last_rx: ns(s.stats.last_rx),
        },
        _ => DstEnd::Other,
    }
}

impl Share {
    /// The share of `net` at `now` that `owns` says is its own (by node: a
    /// link direction's transmitter belongs to the node it leaves, its
    /// receiver to the node it reaches; a flow's ends to their hosts).
    pub fn of(
        net: &Network,
        flows: &[FlowInfo],
        now: SimTime,
        owns: impl Fn(NodeId) -> bool,
    ) -> Share {
        let dirs = net
            .links()
            .iter()
            .enumerate()
            .map(|(li, l)| {
                [0, 1].map(|side| {
                    let d = &l.dirs[side];
                    let (queued, transmitting, wire) = net.dir_in_flight(li, side, now);
                    let tx = owns(l.ends[side].0);
                    let rx = owns(d.to.0);
                    DirShare {
                        // A partition counted only its own halves.
                        stats: if tx || rx {
                            d.stats.clone()
                        } else {
                            DirStats::default()
                        },
                        queued: if tx { queued } else { 0 },
                        transmitting: if tx { transmitting } else { 0 },
                        wire: if rx { wire } else { 0 },
                    }
                })
            })
            .collect();
        let nodes = (0..net.node_names().len())
            .map(|n| {
                owns(n).then(|| {
                    let (stats, in_flight) = match net.node(n) {
                        Node::Host(h) => (serde_json::to_value(&h.stats), h.in_flight()),
                        Node::Router(r) => (serde_json::to_value(r.stats()), r.in_flight()),
                        Node::Switch(s) => (serde_json::to_value(&s.stats), 0),
                        Node::External(x) => (Ok(serde_json::Value::Null), x.waiting()),
                    };
                    NodeShare {
                        stats: stats.unwrap_or(serde_json::Value::Null),
                        in_flight,
                    }
                })
            })
            .collect();
        let flows = flows
            .iter()
            .map(|f| FlowShare {
                src: owns(f.from).then(|| src_end(app(net, f.from, f.src_app))),
                dst: owns(f.to).then(|| dst_end(f.dst_app.and_then(|d| app(net, f.to, d)))),
            })
            .collect();
        let mut endpoints = vec![None; net.spec().endpoints.len()];
        let hosts = if endpoints.is_empty() {
            0
        } else {
            net.node_names().len()
        };
        for n in (0..hosts).filter(|&n| owns(n)) {
            if let Node::Host(h) = net.node(n) {
                for a in h.apps() {
                    if let App::Endpoint(e) = a {
                        if let Some(slot) = endpoints.get_mut(e.index) {
                            *slot = Some(e.stats.clone());
                        }
                    }
                }
            }
        }
        Share {
            dirs,
            nodes,
            flows,
            ledger: net.ledger().clone(),
            endpoints,
        }
    }

    /// The frames inside the network, by where they are.
    pub fn in_flight(&self) -> InFlight {
        let mut f = InFlight::default();
        for d in self.dirs.iter().flatten() {
            f.queued += d.queued;
            f.transmitting += d.transmitting;
            // The wire holds the frame still being serialised too (it is
            // put there when it starts).
            f.on_wire += d.wire;
        }
        // Never below: a frame being serialised is on its wire (in a
        // partitioned run, once every partition stands at one moment).
        f.on_wire = f.on_wire.saturating_sub(f.transmitting);
        f.in_nodes = self.nodes.iter().flatten().map(|n| n.in_flight).sum();
        f
    }

    /// Adds another owner's share (of the same network) to this one.
    pub fn absorb(&mut self, other: Share) {
        for (mine, theirs) in self.dirs.iter_mut().zip(other.dirs) {
            for (m, t) in mine.iter_mut().zip(theirs) {
                m.stats.absorb(&t.stats);
                m.queued += t.queued;
                m.transmitting += t.transmitting;
                m.wire += t.wire;
            }
        }
        for (mine, theirs) in self.nodes.iter_mut().zip(other.nodes) {
            if theirs.is_some() {
                *mine = theirs;
            }
        }
        for (mine, theirs) in self.flows.iter_mut().zip(other.flows) {
            if theirs.src.is_some() {
                mine.src = theirs.src;
            }
            if theirs.dst.is_some() {
                mine.dst = theirs.dst;
            }
        }
        for (mine, theirs) in self.endpoints.iter_mut().zip(other.endpoints) {
            if theirs.is_some() {
                *mine = theirs;
            }
        }
        self.ledger.absorb(&other.ledger);
    }
}
