//! The results of a run: a versioned, documented schema (see
//! `docs/results-schema.md`), serialised as JSON by the front ends.
//!
//! Everything here is derived from the model's state at the end of a run, in
//! a fixed order (spec order for links, flows and nodes; fixed key order in
//! maps), so that the same topology and seed give byte-identical JSON. The
//! only non-deterministic values — wall-clock time and the rates derived from
//! it — live in the separate `wall` object.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::apps::{Hop, Samples};
use crate::build::{FlowInfo, Simulation};
use crate::network::{Event, InFlight, Network, Node};
use crate::share::{DstEnd, FlowShare, Share, SrcEnd};
use crate::stats::{DirStats, DropCounts, Origin, Sink};
use netloop_core::{EventQueue, SimTime};

/// Name of the schema.
pub const SCHEMA: &str = "netloop-results";
/// Version of the schema; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// A whole run's results.
#[derive(Clone, Debug, Serialize)]
pub struct Results {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// What ran.
    pub meta: Meta,
    /// Wall-clock measurements (not deterministic).
    pub wall: Option<Wall>,
    /// Per link, per direction.
    pub links: Vec<LinkResult>,
    /// Per flow.
    pub flows: Vec<FlowResult>,
    /// Per node.
    pub nodes: Vec<NodeResult>,
    /// Per message endpoint (absent when the topology has none).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub endpoints: Vec<EndpointResult>,
    /// Packet conservation.
    pub conservation: Conservation,
    /// The real-time run's self-report (lateness, kept-up verdict, frames
    /// across real interfaces and lost at them, programs run), filled in by
    /// the real-time front end; `None` for a run as fast as possible.
    pub realtime: Option<serde_json::Value>,
    /// The co-simulation's report (netloop as a HELICS federate), filled in
    /// by the front end that joined the federation; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cosim: Option<serde_json::Value>,
}

impl Results {
    /// Flows that sent something (or, for TCP, started) of which nothing
    /// arrived: no datagram, echo reply or byte of TCP reached the other end
    /// (a traceroute is not
    /// counted: a path that answers no probe is what it measures). Such a
    /// run has usually hit something in the model (a path-MTU black hole, a
    /// link down, a queue too small) that its drop reasons name.
    pub fn flows_that_delivered_nothing(&self) -> Vec<&FlowResult> {
        self.flows
            .iter()
            .filter(|f| match (&f.tcp, f.sent_packets) {
                // A TCP flow that started tried to connect, at least.
                (Some(t), _) => t.bytes_received == 0 && f.start_ns < self.meta.sim_time_reached_ns,
                (None, Some(sent)) => f.hops.is_none() && sent > 0 && f.received_packets == Some(0),
                (None, None) => false,
            })
            .collect()
    }
}

/// Run metadata.
#[derive(Clone, Debug, Serialize)]
pub struct Meta {
    /// netloop's version.
    pub netloop_version: String,
    /// The topology file, if the run came from one.
    pub topology: Option<String>,
    /// The seed.
    pub seed: u64,
    /// `afap` (as fast as possible) or `realtime`.
    pub mode: String,
    /// Configured duration, ns.
    pub duration_ns: u64,
    /// Simulated time reached, ns (less than the duration if stopped early).
    pub sim_time_reached_ns: u64,
    /// Events processed.
    pub events_processed: u64,
}

/// Wall-clock measurements of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Wall {
    /// Wall-clock seconds the run took.
    pub seconds: f64,
    /// Simulated seconds per wall-clock second.
    pub sim_per_wall: f64,
    /// Events per wall-clock second.
    pub events_per_second: f64,
    /// How a run cut into partitions went (absent for one partition).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partitions: Option<crate::partition::PartitionReport>,
}

/// One direction of a link.
#[derive(Clone, Debug, Serialize)]
pub struct DirResult {
    /// Line rate at the end of the run in bit/s (`null` = unlimited, or
    /// a trace gives the capacity).
    pub rate_bps: Option<u64>,
    /// The trace the direction followed at the end of the run, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceResult>,
    /// Propagation delay at the end of the run, ns.
    pub delay_ns: u64,
    /// Whether the direction was up at the end.
    pub up: bool,
    /// Counters.
    #[serde(flatten)]
    pub stats: DirStats,
}

/// The trace a direction followed.
#[derive(Clone, Debug, Serialize)]
pub struct TraceResult {
    /// `mahimahi` or `rates`.
    pub kind: &'static str,
    /// Where it came from: its file as the topology names it, or `inline`.
    pub source: String,
    /// Its mean rate, bit/s (over a period for Mahimahi; up to its last
    /// change for a rate series).
    pub mean_bps: u64,
}

/// A link.
#[derive(Clone, Debug, Serialize)]
pub struct LinkResult {
    /// Name.
    pub name: String,
    /// `node:interface` of end a.
    pub a: String,
    /// `node:interface` of end b.
    pub b: String,
    /// Direction a → b.
    pub a_to_b: DirResult,
    /// Direction b → a.
    pub b_to_a: DirResult,
}

/// Summary of a distribution of nanosecond values.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Percentiles {
    /// Number of samples.
    pub count: u64,
    /// Smallest.
    pub min: u64,
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub stdev: f64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest.
    pub max: u64,
}

impl Percentiles {
    /// Summarises `s`, or `None` if it is empty. Count, min, max, mean and
    /// standard deviation are exact; percentiles are within max(100 ns, 0.1 %).
    pub fn of(s: &Samples) -> Option<Self> {
        if s.count == 0 {
            return None;
        }
        // One pass over the histogram for the four (a pass each cost 5 %
        // of a 10 000-flow run: the histograms are tens of kilobytes). A
        // bucket's upper edge can lie beyond the exact extremes.
        let mut q = s
            .quantiles([0.5, 0.9, 0.99, 0.999])
            .into_iter()
            .map(|v| v.clamp(s.min, s.max));
        let mut next = || q.next().expect("one value per quantile");
        Some(Percentiles {
            count: s.count,
            min: s.min,
            mean: (s.mean() * 1000.0).round() / 1000.0,
            stdev: (s.stdev() * 1000.0).round() / 1000.0,
            p50: next(),
            p90: next(),
            p99: next(),
            p999: next(),
            max: s.max,
        })
    }
}

/// TCP-specific results.
#[derive(Clone, Debug, Serialize)]
pub struct TcpResult {
    /// Payload bytes the client wrote.
    pub bytes_sent: u64,
    /// Payload bytes that reached the receiving application.
    pub bytes_received: u64,
    /// Goodput in bit/s: payload received over the time from connection
    /// start to completion (or to the last byte received).
    pub goodput_bps: f64,
    /// When a sized transfer completed, ns (`null` if it didn't).
    pub completed_ns: Option<u64>,
    /// Completed request/response transactions.
    pub transactions: u64,
}

/// One flow.
#[derive(Clone, Debug, Serialize)]
pub struct FlowResult {
    /// Name.
    pub name: String,
    /// Traffic kind.
    pub kind: &'static str,
    /// Sending host.
    pub from: String,
    /// Receiving host.
    pub to: String,
    /// Start, ns.
    pub start_ns: u64,
    /// Stop, ns.
    pub stop_ns: u64,
    /// Packets (datagrams, echo requests, probes) sent; `null` for TCP.
    pub sent_packets: Option<u64>,
    /// Packets received (unique); `null` for TCP.
    pub received_packets: Option<u64>,
    /// Payload bytes received by the application.
    pub received_bytes: u64,
    /// Received payload bits per second, from the flow's start to the last
    /// arrival (so a queue that drains after the source stopped counts);
    /// `null` for ping and traceroute.
    pub throughput_bps: Option<f64>,
    /// Fraction of packets sent that were not received (packets still in
    /// flight at the end count as not received); `null` for TCP and
    /// traceroute, and when nothing was sent.
    pub loss: Option<f64>,
    /// One-way delay (UDP), round-trip time (ping) or transaction latency
    /// (tcp-rr), ns.
    pub delay_ns: Option<Percentiles>,
    /// RFC 3550 interarrival jitter at the end, ns (UDP only).
    pub jitter_ns: Option<f64>,
    /// Packets that arrived after a later one (UDP only).
    pub reordered: Option<u64>,
    /// Duplicate packets (UDP only).
    pub duplicates: Option<u64>,
    /// TCP results.
    pub tcp: Option<TcpResult>,
    /// Traceroute hops.
    pub hops: Option<Vec<Hop>>,
}

/// One node.
#[derive(Clone, Debug, Serialize)]
pub struct NodeResult {
    /// Name.
    pub name: String,
    /// `host`, `router`, `switch` or `external`.
    pub kind: &'static str,
    /// Interfaces: name, MAC and address.
    pub interfaces: Vec<Interface>,
    /// Node-type counters.
    pub stats: serde_json::Value,
}

/// An interface of a node.
#[derive(Clone, Debug, Serialize)]
pub struct Interface {
    /// Interface name.
    pub name: String,
    /// MAC address.
    pub mac: String,
    /// IPv4 address with prefix, if any.
    pub address: Option<String>,
    /// Global IPv6 address with prefix, if the network has IPv6.
    pub address6: Option<String>,
    /// The link it is attached to.
    pub link: String,
}

/// The packet-conservation block.
#[derive(Clone, Debug, Serialize)]
pub struct Conservation {
    /// Frames created, by origin.
    pub created: BTreeMap<Origin, u64>,
    /// Total created.
    pub created_total: u64,
    /// Frames delivered, by sink.
    pub delivered: BTreeMap<Sink, u64>,
    /// Total delivered.
    pub delivered_total: u64,
    /// Frames dropped, by reason.
    pub dropped: DropCounts,
    /// Total dropped.
    pub dropped_total: u64,
    /// Frames inside the model at the end, by place.
    pub in_flight: InFlight,
    /// Total in flight.
    pub in_flight_total: u64,
    /// created − delivered − dropped − in flight. Must be 0.
    pub unaccounted: i64,
}

fn rate(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        (bytes as f64 * 8.0 * 1e9 / ns as f64 * 1000.0).round() / 1000.0
    }
}

/// A running or finished simulation's parts, borrowed: what the results are
/// read from. A real-time loop holds the network and its queue mutably and
/// reads results mid-run through one of these.
#[derive(Clone, Copy)]
pub struct SimView<'a> {
    /// The model.
    pub net: &'a Network,
    /// Its pending events (and the current time).
    pub queue: &'a EventQueue<Event>,
    /// The flows, in spec order.
    pub flows: &'a [FlowInfo],
}

impl Simulation {
    /// The parts results are read from.
    pub fn view(&self) -> SimView<'_> {
        SimView {
            net: &self.net,
            queue: &self.queue,
            flows: &self.flows,
        }
    }

    /// The packet-conservation block as of now.
    pub fn conservation(&self) -> Conservation {
        self.view().conservation()
    }

    /// The results as of now (see [`SimView::results`]).
    pub fn results(
        &self,
        mode: &str,
        wall_seconds: Option<f64>,
        topology: Option<String>,
    ) -> Results {
        self.view().results(mode, wall_seconds, topology)
    }
}

impl SimView<'_> {
    /// What the results are read from: the whole network's share.
    pub fn share(&self) -> Share {
        Share::of(self.net, self.flows, self.queue.now(), |_| true)
    }

    /// The packet-conservation block as of now.
    pub fn conservation(&self) -> Conservation {
        conservation(&self.share())
    }

    /// The results as of now. `wall` is the wall-clock time the run took (if
    /// measured); `topology` names the file it came from.
    pub fn results(
        &self,
        mode: &str,
        wall_seconds: Option<f64>,
        topology: Option<String>,
    ) -> Results {
        self.results_from(
            &self.share(),
            self.queue.events_processed(),
            mode,
            wall_seconds,
            topology,
        )
    }

    /// The results assembled from `share` (this network's, or merged from
    /// the partitions of a run: see [`Share`]), with `events` processed. The
    /// network gives what every copy of it has alike: names, ports, and
    /// link parameters (changed by the scheduled link events every
    /// partition runs); the queue gives the time reached.
    pub fn results_from(
        &self,
        share: &Share,
        events: u64,
        mode: &str,
        wall_seconds: Option<f64>,
        topology: Option<String>,
    ) -> Results {
        let net = self.net;
        let spec = net.spec();
        let now = self.queue.now();
        let names = net.node_names();
        let end_ns = now.as_nanos();
        let meta = Meta {
            netloop_version: env!("CARGO_PKG_VERSION").to_string(),
            topology,
            seed: spec.run.seed,
            mode: mode.to_string(),
            duration_ns: spec.run.duration.as_nanos(),
            sim_time_reached_ns: end_ns,
            events_processed: events,
        };
        let wall = wall_seconds.map(|s| Wall {
            seconds: s,
            sim_per_wall: if s > 0.0 { now.as_secs_f64() / s } else { 0.0 },
            events_per_second: if s > 0.0 { events as f64 / s } else { 0.0 },
            partitions: None,
        });
        let end_name = |(n, p): (usize, usize)| format!("{}:{}", names[n], net.ports(n)[p].name);
        let links = net
            .links()
            .iter()
            .zip(&share.dirs)
            .map(|(l, ds)| {
                let dir = |i: usize| {
                    let d = &l.dirs[i];
                    DirResult {
                        rate_bps: d.channel.spec().rate.map(|r| r.bps()),
                        trace: d.channel.spec().trace.as_ref().map(|t| TraceResult {
                            kind: t.kind(),
                            source: t.source().to_string(),
                            mean_bps: t.mean_bps(),
                        }),
                        delay_ns: d.channel.spec().delay.as_nanos(),
                        up: d.up,
                        stats: ds[i].stats.clone(),
                    }
                };
                LinkResult {
                    name: l.name.clone(),
                    a: end_name(l.ends[0]),
                    b: end_name(l.ends[1]),
                    a_to_b: dir(0),
                    b_to_a: dir(1),
                }
            })
            .collect();
        let flows = self
            .flows
            .iter()
            .zip(&share.flows)
            .map(|(f, fs)| flow_result(f, fs, now, names))
            .collect();
        let nodes = (0..names.len())
            .map(|n| {
                let kind = match net.node(n) {
                    Node::Host(_) => "host",
                    Node::Router(_) => "router",
                    Node::Switch(_) => "switch",
                    Node::External(_) => match spec.nodes[n].kind {
                        crate::spec::NodeKind::Attached(_) => "attached",
                        _ => "namespace",
                    },
                };
                NodeResult {
                    name: names[n].clone(),
                    kind,
                    interfaces: net
                        .ports(n)
                        .iter()
                        .map(|p| Interface {
                            name: p.name.clone(),
                            mac: p.mac.to_string(),
                            address: p.addr.map(|a| a.to_string()),
                            address6: p.addr6.map(|a| a.to_string()),
                            link: net.links()[p.link].name.clone(),
                        })
                        .collect(),
                    stats: share.nodes[n]
                        .as_ref()
                        .map_or(serde_json::Value::Null, |s| s.stats.clone()),
                }
            })
            .collect();
        Results {
            schema: SCHEMA,
            schema_version: SCHEMA_VERSION,
            meta,
            wall,
            links,
            flows,
            nodes,
            endpoints: spec
                .endpoints
                .iter()
                .enumerate()
                .map(|(i, e)| EndpointResult {
                    name: e.name.clone(),
                    host: e.node.clone(),
                    port: e.port,
                    protocol: e.protocol,
                    stats: share
                        .endpoints
                        .get(i)
                        .cloned()
                        .flatten()
                        .unwrap_or_default(),
                })
                .collect(),
            conservation: conservation(share),
            realtime: None,
            cosim: None,
        }
    }
}

/// A message endpoint's counters in the results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EndpointResult {
    /// Its name.
    pub name: String,
    /// Its host.
    pub host: String,
    /// Its port (UDP, or the TCP port it listens on).
    pub port: u16,
    /// `udp` or `tcp`.
    #[serde(default)]
    pub protocol: crate::spec::Transport,
    /// What it sent and received.
    #[serde(flatten)]
    pub stats: crate::apps::EndpointStats,
}

/// The conservation block of `share`.
fn conservation(share: &Share) -> Conservation {
    let l = &share.ledger;
    let in_flight = share.in_flight();
    let (c, d, x, f) = (
        l.created_total(),
        l.delivered_total(),
        l.dropped.total(),
        in_flight.total(),
    );
    Conservation {
        created: l.created.clone(),
        created_total: c,
        delivered: l.delivered.clone(),
        delivered_total: d,
        dropped: l.dropped.clone(),
        dropped_total: x,
        in_flight,
        in_flight_total: f,
        unaccounted: c as i64 - d as i64 - x as i64 - f as i64,
    }
}

/// One flow's results, from its two ends.
fn flow_result(f: &FlowInfo, fs: &FlowShare, now: SimTime, names: &[String]) -> FlowResult {
    let active_ns = f
        .stop
        .min(now)
        .as_nanos()
        .saturating_sub(f.start.as_nanos());
    let mut r = FlowResult {
        name: f.name.clone(),
        kind: f.kind,
        from: names[f.from].clone(),
        to: names[f.to].clone(),
        start_ns: f.start.as_nanos(),
        stop_ns: f.stop.as_nanos(),
        sent_packets: None,
        received_packets: None,
        received_bytes: 0,
        throughput_bps: None,
        loss: None,
        delay_ns: None,
        jitter_ns: None,
        reordered: None,
        duplicates: None,
        tcp: None,
        hops: None,
    };
    let loss =
        |sent: u64, got: u64| (sent > 0).then(|| sent.saturating_sub(got) as f64 / sent as f64);
    // Throughput runs from the flow's start to its last arrival.
    let span_to =
        |last: Option<u64>| last.map_or(active_ns, |t| t.saturating_sub(f.start.as_nanos()));
    match (&fs.src, &fs.dst) {
        (
            Some(SrcEnd::Udp { sent }),
            Some(DstEnd::Udp {
                received,
                bytes,
                last_rx,
                delay,
                jitter_ns,
                reordered,
                duplicates,
            }),
        ) => {
            r.sent_packets = Some(*sent);
            r.received_packets = Some(*received);
            r.received_bytes = *bytes;
            r.throughput_bps = Some(rate(*bytes, span_to(*last_rx)));
            r.loss = loss(*sent, *received);
            r.delay_ns = delay.clone();
            r.jitter_ns = Some((jitter_ns * 1000.0).round() / 1000.0);
            r.reordered = Some(*reordered);
            r.duplicates = Some(*duplicates);
        }
        (
            Some(SrcEnd::Ping {
                sent,
                received,
                size,
                rtt,
            }),
            _,
        ) => {
            r.sent_packets = Some(*sent);
            r.received_packets = Some(*received);
            r.received_bytes = received * size;
            r.loss = loss(*sent, *received);
            r.delay_ns = rtt.clone();
        }
        (Some(SrcEnd::Traceroute { ttl, hops }), _) => {
            r.sent_packets = Some(u64::from(*ttl));
            r.received_packets = Some(hops.iter().filter(|h| h.address.is_some()).count() as u64);
            r.hops = Some(hops.clone());
        }
        (
            Some(SrcEnd::Tcp {
                bulk,
                started,
                bytes_received,
                last_rx,
                latency,
                bytes_sent,
                transactions,
            }),
            Some(DstEnd::Tcp {
                bytes_received: server_received,
                completed,
                last_rx: server_last_rx,
            }),
        ) => {
            let (received, first, last) = if *bulk {
                (*server_received, *started, completed.or(*server_last_rx))
            } else {
                (*bytes_received, *started, *last_rx)
            };
            let span = match (first, last) {
                (Some(a), Some(b)) if b > a => b - a,
                _ => 0,
            };
            r.received_bytes = received;
            r.throughput_bps = Some(rate(received, span_to(last)));
            r.delay_ns = if *bulk { None } else { latency.clone() };
            r.tcp = Some(TcpResult {
                bytes_sent: *bytes_sent,
                bytes_received: received,
                goodput_bps: rate(received, span),
                completed_ns: *completed,
                transactions: *transactions,
            });
        }
        _ => {}
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_in_one_pass_are_those_of_a_pass_each() {
        let mut rng = netloop_core::RngStream::new(3, "percentiles");
        for n in [1u64, 2, 7, 1000, 50_000] {
            let mut s = crate::apps::new_histogram();
            for _ in 0..n {
                // Delays from 100 ns to 50 ms, most of them small.
                let u = rng.uniform();
                s.record((100.0 + 5e7 * u * u * u) as u64);
            }
            let p = Percentiles::of(&s).unwrap();
            let (min, max) = (s.min, s.max);
            let h = s.histogram();
            let each = |q: f64| h.value_at_quantile(q).clamp(min, max);
            assert_eq!(
                (p.p50, p.p90, p.p99, p.p999),
                (each(0.5), each(0.9), each(0.99), each(0.999)),
                "{n} samples"
            );
        }
    }
}
