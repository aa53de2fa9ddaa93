//! A network cut into partitions, run on threads with conservative
//! synchronisation, giving the results a single run gives.
//!
//! This module owns where the cut goes ([`Cut`]: automatic, or given per
//! node) and how partitions keep in step ([`run_threads`]). What a partition
//! is inside the model (which events it runs, frames that cross to another)
//! belongs to `network`.
//!
//! **Synchronisation.** A frame sent on a link reaches the far end no sooner
//! than the link's least delay after its transmission starts, so a cut
//! across links whose least delay is at least *L* (the lookahead) lets every
//! partition run, without hearing from the others, all events before
//! *T + L*, where *T* is the earliest event pending anywhere. Each round the
//! partitions agree on *T* (a minimum over all), run their events before
//! *T + L* (and not past the end), hand the frames that crossed to their
//! receivers, and meet again: the windowed form of conservative
//! synchronisation (Lubachevsky's bounded lag; YAWNS), which needs no null
//! messages and costs two barriers per round.
//! The other conservative method, null messages, is in `null`
//! ([`SyncMethod::NullMessages`]): as fast where traffic is dense, far
//! slower where it is sparse (docs/partitions.md), so rounds are the
//! default.
//!
//! **Results do not depend on the cut.** Ties between events at one moment
//! break by their source and the source's own order (`netloop_core::queue`),
//! and every source belongs to one partition; each random stream belongs to
//! one link direction or node. So each partition runs its events in the
//! order a single run would; at the end each partition's share of what the
//! results are read from (`crate::share`) is merged into what a single run
//! reads: the same results JSON, byte for byte.
//!
//! Partitions on MPI ranks use the same runner ([`run_partition`]) through
//! an [`Exchange`] of their own (in the command-line tool). Real-time runs
//! cut into partitions (`netloop_io::rtpart`) use the cut
//! ([`Cut::for_realtime`]: every real host in partition 0) and the merge
//! of shares ([`merged_results`]), not the rounds. Captures (pcap) of a
//! partitioned run: each partition taps what it owns and orders its frames
//! as one run would ([`PartitionTaps`], `network::TapOrder`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use netloop_core::{SimDuration, SimTime};
use serde::Serialize;

use crate::build::{find, Simulation};
use crate::error::BuildError;
use crate::network::{Crossing, Network};
use crate::series::{SampleCounts, SeriesWriter};
use crate::share::Share;
use crate::spec::{LinkAction, NetworkSpec, NodeKind};
use crate::{Frame, Gso, GsoKind};
use netloop_core::frame::Checksum;

mod null;

/// Where a network is cut: the partition of every node.
#[derive(Clone, Debug, PartialEq)]
pub struct Cut {
    /// The partition of each node, in spec order.
    pub part_of: Vec<u32>,
    /// Number of partitions (some may hold no node).
    pub parts: u32,
    /// The least delay of the links cut (`SimDuration::MAX` if none is).
    pub lookahead: SimDuration,
    /// The links whose ends are in different partitions, in spec order.
    pub cut_links: Vec<usize>,
}

/// Why a network cannot be cut as asked.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CutError {
    /// Zero partitions asked for.
    #[error("a run needs at least one partition")]
    NoPartitions,
    /// Real hosts need the real-time mode, and a cut for it
    /// ([`Cut::for_realtime`]).
    #[error(
        "node '{node}' is a real host: a network with real hosts runs in real time, \
         which MPI ranks do not do (threads do: --partitions N)"
    )]
    RealNode {
        /// The node.
        node: String,
    },
    /// Real hosts given to different partitions of a real-time run.
    #[error(
        "real hosts '{a}' (partition {a_part}) and '{b}' (partition {b_part}) are in different \
         partitions: in real time every real host is in one partition (it runs beside the \
         I/O thread); give them the same `partition`"
    )]
    RealHostsSplit {
        /// One real host.
        a: String,
        /// Its partition.
        a_part: u32,
        /// Another, elsewhere.
        b: String,
        /// Its partition.
        b_part: u32,
    },
    /// A cut through a link that can deliver a frame at once.
    #[error(
        "link '{link}' cannot be cut: its least delay is 0 (with its jitter and its \
         scheduled changes), so it gives no lookahead; put '{a}' and '{b}' in one partition"
    )]
    ZeroDelay {
        /// The link.
        link: String,
        /// Its end a.
        a: String,
        /// Its end b.
        b: String,
    },
    /// A given partition number too large.
    #[error("node '{node}': partition {part} is not below the {parts} partitions of the run")]
    OutOfRange {
        /// The node.
        node: String,
        /// Its partition.
        part: u32,
        /// Partitions of the run.
        parts: u32,
    },
    /// The assignment given does not cover the nodes.
    #[error("a partition is given for {given} nodes; the network has {nodes}")]
    WrongLength {
        /// Entries given.
        given: usize,
        /// Nodes in the network.
        nodes: usize,
    },
}

/// The least delay of link `li` over the run: both directions, as built
/// and after each of its scheduled changes (a change may lower it).
pub fn least_delay(spec: &NetworkSpec, li: usize) -> SimDuration {
    let l = &spec.links[li];
    let mut dirs = [l.a_to_b.clone(), l.b_to_a.clone()];
    let mut least = dirs[0].least_delay().min(dirs[1].least_delay());
    let mut events: Vec<_> = spec.events.iter().filter(|e| e.link == l.name).collect();
    events.sort_by_key(|e| e.at);
    for e in events {
        if let LinkAction::Set(change) = &e.action {
            for (side, d) in dirs.iter_mut().enumerate() {
                if e.direction.includes(side) {
                    d.apply(change);
                    least = least.min(d.least_delay());
                }
            }
        }
    }
    least
}

impl Cut {
    /// The cut a run uses: the partition of each node as `given` (a
    /// topology file's `partition` fields, in spec order), or else an
    /// automatic one ([`Cut::auto`]).
    pub fn given_or_auto(
        spec: &NetworkSpec,
        given: Option<&[u32]>,
        parts: u32,
    ) -> Result<Cut, CutError> {
        match given {
            Some(g) => Cut::given(spec, g.to_vec(), parts),
            None => Cut::auto(spec, parts),
        }
    }

    /// Cuts `spec` into `parts` partitions automatically: across links of
    /// long least delay, balancing the load.
    ///
    /// Links with a least delay below a threshold bind their ends into one
    /// group; for each threshold (the links' least delays) the groups go to
    /// partitions heaviest first, each to the lightest partition so far.
    /// Of the candidates that use the most partitions (all of them, where
    /// the network has the links to cut), the one a run is expected to
    /// cost least per simulated second wins, in packets handled
    /// ([`cut_cost`]): its heaviest partition's load, plus the frames that
    /// cross the cut, plus its synchronisation rounds (one per lookahead);
    /// on a tie, the one of the higher threshold (tried first). A node weighs the packets per second it
    /// is expected to handle: one per port, plus the expected rate of every
    /// flow whose path it is on (see `loads`). Zero-delay links are
    /// never cut.
    pub fn auto(spec: &NetworkSpec, parts: u32) -> Result<Cut, CutError> {
        check_simulated(spec)?;
        Cut::auto_with(spec, parts, false)
    }

    /// [`Cut::auto`], with every real host (namespace, attached interface)
    /// in one group if `real_together`.
    fn auto_with(spec: &NetworkSpec, parts: u32, real_together: bool) -> Result<Cut, CutError> {
        if parts == 0 {
            return Err(CutError::NoPartitions);
        }
        let n = spec.nodes.len();
        let ends = endpoint_ids(spec);
        let (weights, link_load) = loads(spec, &ends);
        let least: Vec<SimDuration> = (0..spec.links.len())
            .map(|li| least_delay(spec, li))
            .collect();
        let mut thresholds: Vec<SimDuration> = least
            .iter()
            .copied()
            .filter(|d| *d > SimDuration::ZERO)
            .collect();
        thresholds.sort_unstable_by(|a, b| b.cmp(a));
        thresholds.dedup();
        // Each candidate costs a pass over the network: a network of many
        // distinct delays is tried at 64 of them, spread over their order.
        if thresholds.len() > MAX_THRESHOLDS {
            let k = thresholds.len();
            thresholds = (0..MAX_THRESHOLDS)
                .map(|i| thresholds[i * (k - 1) / (MAX_THRESHOLDS - 1)])
                .collect();
        }
        let mut best: Option<(usize, f64, Vec<u32>)> = None;
        // Threshold MAX first (every link binds): one group, for one
        // partition or a network that cannot be cut at all.
        for threshold in std::iter::once(SimDuration::MAX).chain(thresholds) {
            let mut parent: Vec<usize> = (0..n).collect();
            if real_together {
                let mut real = (0..n).filter(|&v| is_real(spec, v));
                if let Some(first) = real.next() {
                    for v in real {
                        let (ra, rb) = (find(&mut parent, first), find(&mut parent, v));
                        parent[ra.max(rb)] = ra.min(rb);
                    }
                }
            }
            for (li, &(a, b)) in ends.iter().enumerate() {
                if least[li] < threshold || least[li] == SimDuration::ZERO {
                    let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
                    parent[ra.max(rb)] = ra.min(rb);
                }
            }
            let mut groups: Vec<(u64, usize)> = Vec::new(); // (weight, root)
            let mut group_of = vec![usize::MAX; n];
            for (v, &w) in weights.iter().enumerate() {
                let r = find(&mut parent, v);
                if group_of[r] == usize::MAX {
                    group_of[r] = groups.len();
                    groups.push((0, r));
                }
                groups[group_of[r]].0 += w;
            }
            // Heaviest first; equal weights in the order of their first node.
            let mut order: Vec<usize> = (0..groups.len()).collect();
            order.sort_by(|&x, &y| groups[y].0.cmp(&groups[x].0).then(x.cmp(&y)));
            let mut load = vec![0u64; parts as usize];
            let mut part_of_group = vec![0u32; groups.len()];
            for g in order {
                let p = (0..parts as usize)
                    .min_by_key(|&p| (load[p], p))
                    .unwrap_or(0);
                load[p] += groups[g].0;
                part_of_group[g] = p as u32;
            }
            let part_of: Vec<u32> = (0..n)
                .map(|v| part_of_group[group_of[find(&mut parent, v)]])
                .collect();
            // Asked for `parts`, a user wants that many used wherever the
            // network allows, even where the estimate says one would do
            // (a small network): the most partitions used first, then the
            // cost.
            let used = load.iter().filter(|&&l| l > 0).count();
            let cost = cut_cost(&load, &part_of, &ends, &least, &link_load);
            // Strictly better only: on a tie the higher threshold (tried
            // first) stays.
            if best
                .as_ref()
                .is_none_or(|(u, c, _)| used > *u || (used == *u && cost < *c))
            {
                best = Some((used, cost, part_of));
            }
        }
        let part_of = best.map_or_else(|| vec![0; n], |(_, _, p)| p);
        Cut::checked(spec, part_of, parts)
    }

    /// The cut given by `part_of` (the partition of each node, in spec
    /// order), checked: no zero-delay link between partitions.
    pub fn given(spec: &NetworkSpec, part_of: Vec<u32>, parts: u32) -> Result<Cut, CutError> {
        check_simulated(spec)?;
        Cut::checked(spec, part_of, parts)
    }

    /// The lookahead in ns, or `None` if no link is cut (for reports).
    pub fn lookahead_ns(&self) -> Option<u64> {
        (self.lookahead != SimDuration::MAX).then(|| self.lookahead.as_nanos())
    }

    /// The names of the links cut, in spec order (for reports).
    pub fn cut_link_names(&self, spec: &NetworkSpec) -> Vec<String> {
        self.cut_links
            .iter()
            .map(|&l| spec.links[l].name.clone())
            .collect()
    }

    /// The cut of a real-time run: as [`Cut::given_or_auto`], for a network
    /// that may have real hosts, which must all be in one partition (they
    /// share the I/O thread of the partition that runs with it); that
    /// partition is numbered 0 (the others keep their order).
    pub fn for_realtime(
        spec: &NetworkSpec,
        given: Option<&[u32]>,
        parts: u32,
    ) -> Result<Cut, CutError> {
        let mut cut = match given {
            Some(g) => Cut::checked(spec, g.to_vec(), parts)?,
            None => Cut::auto_with(spec, parts, true)?,
        };
        let real: Vec<usize> = (0..spec.nodes.len())
            .filter(|&v| is_real(spec, v))
            .collect();
        if let Some(&first) = real.first() {
            let home = cut.part_of[first];
            if let Some(&other) = real.iter().find(|&&v| cut.part_of[v] != home) {
                return Err(CutError::RealHostsSplit {
                    a: spec.nodes[first].name.clone(),
                    a_part: home,
                    b: spec.nodes[other].name.clone(),
                    b_part: cut.part_of[other],
                });
            }
            // Partition `home` becomes 0; 0 .. home-1 move up by one.
            for p in &mut cut.part_of {
                *p = match *p {
                    x if x == home => 0,
                    x if x < home => x + 1,
                    x => x,
                };
            }
        }
        Ok(cut)
    }

    /// The cut `part_of`, checked (see [`Cut::given`]), real hosts or not.
    fn checked(spec: &NetworkSpec, part_of: Vec<u32>, parts: u32) -> Result<Cut, CutError> {
        if parts == 0 {
            return Err(CutError::NoPartitions);
        }
        if part_of.len() != spec.nodes.len() {
            return Err(CutError::WrongLength {
                given: part_of.len(),
                nodes: spec.nodes.len(),
            });
        }
        if let Some((v, &part)) = part_of.iter().enumerate().find(|(_, &p)| p >= parts) {
            return Err(CutError::OutOfRange {
                node: spec.nodes[v].name.clone(),
                part,
                parts,
            });
        }
        let ends = endpoint_ids(spec);
        let mut lookahead = SimDuration::MAX;
        let mut cut_links = Vec::new();
        for (li, &(a, b)) in ends.iter().enumerate() {
            if part_of[a] == part_of[b] {
                continue;
            }
            let d = least_delay(spec, li);
            if d == SimDuration::ZERO {
                let l = &spec.links[li];
                return Err(CutError::ZeroDelay {
                    link: l.name.clone(),
                    a: l.a.node.clone(),
                    b: l.b.node.clone(),
                });
            }
            lookahead = lookahead.min(d);
            cut_links.push(li);
        }
        Ok(Cut {
            part_of,
            parts,
            lookahead,
            cut_links,
        })
    }
}

/// Whether node `v` is a real host (a namespace or an attached interface).
fn is_real(spec: &NetworkSpec, v: usize) -> bool {
    spec.nodes[v].kind.is_real()
}

/// Partitions as fast as possible (threads, ranks) run simulations only:
/// a real host needs the wall clock ([`Cut::for_realtime`]).
fn check_simulated(spec: &NetworkSpec) -> Result<(), CutError> {
    match spec.nodes.iter().find(|n| n.kind.is_real()) {
        Some(n) => Err(CutError::RealNode {
            node: n.name.clone(),
        }),
        None => Ok(()),
    }
}

/// Node ids by name.
fn node_ids(spec: &NetworkSpec) -> HashMap<&str, usize> {
    spec.nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect()
}

/// The node ids at the ends of each link.
fn endpoint_ids(spec: &NetworkSpec) -> Vec<(usize, usize)> {
    let ids = node_ids(spec);
    let id = |name: &str| *ids.get(name).expect("a built spec names existing nodes");
    spec.links
        .iter()
        .map(|l| (id(&l.a.node), id(&l.b.node)))
        .collect()
}

/// The packets per second each node of `spec` is expected to handle, as
/// the automatic cut weighs it (see [`Cut::auto`]), in spec order.
pub fn expected_load(spec: &NetworkSpec) -> Vec<u64> {
    loads(spec, &endpoint_ids(spec)).0
}

/// Candidate cuts tried at most (see [`Cut::auto`]).
const MAX_THRESHOLDS: usize = 64;

/// What a synchronisation round costs, in packets handled: with nothing to
/// exchange, about 2 µs on 2 threads (0.1–5.6 µs) and 0.7 µs on 2 MPI
/// ranks on this 2-core machine, 16 µs on 4 ranks sharing its cores
/// (`netloop bench sync`), against 0.2–1 µs a packet (`netloop bench
/// speed`); counted generously, so that a cut through a short link must
/// buy a real gain in balance.
const ROUND_COST: f64 = 50.0;

/// What a frame crossing the cut costs, in packets handled: handed over
/// and taken in (0.06–0.28 µs a 1 500-byte frame between threads, 0.4–0.6
/// µs between MPI ranks, which copy it; `netloop bench sync`).
const CROSSING_COST: f64 = 0.5;

/// The expected cost of a run cut by `part_of`, per simulated second, in
/// packets handled: its heaviest partition's load (the others wait for
/// it), the frames that cross the cut (shared out among the partitions),
/// and a round per lookahead (the least delay of the links cut). An
/// estimate: only the spec is read (see `loads`).
fn cut_cost(
    load: &[u64],
    part_of: &[u32],
    ends: &[(usize, usize)],
    least: &[SimDuration],
    link_load: &[u64],
) -> f64 {
    let heaviest = load.iter().copied().max().unwrap_or(0) as f64;
    let mut crossing = 0.0;
    let mut lookahead = SimDuration::MAX;
    for (li, &(a, b)) in ends.iter().enumerate() {
        if part_of[a] != part_of[b] {
            crossing += link_load[li] as f64;
            lookahead = lookahead.min(least[li]);
        }
    }
    if lookahead == SimDuration::MAX {
        return heaviest;
    }
    let rounds = 1.0 / lookahead.as_secs_f64().max(1e-9);
    heaviest + CROSSING_COST * crossing / load.len() as f64 + ROUND_COST * rounds
}

/// How much work each node is likely to bring, in packets per second: one
/// per port (so that a network without traffic is cut by its shape), plus
/// the packets each flow is expected to send through it, on every node of
/// its path both ways ([`flow_packet_rate`], [`hop_path`]); and the packets
/// each link is expected to carry, both ways. A node that forwards a heavy
/// flow weighs more than one that ends a ping.
fn loads(spec: &NetworkSpec, ends: &[(usize, usize)]) -> (Vec<u64>, Vec<u64>) {
    let n = spec.nodes.len();
    let mut w = vec![0u64; n];
    let mut lw = vec![0u64; spec.links.len()];
    let mut adj: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n]; // (neighbour, link)
    for (li, &(a, b)) in ends.iter().enumerate() {
        w[a] += 1;
        w[b] += 1;
        adj[a].push((b, li));
        adj[b].push((a, li));
    }
    let ids = node_ids(spec);
    for t in &spec.traffic {
        let (Some(&from), Some(&to)) = (ids.get(t.from.as_str()), ids.get(t.to.as_str())) else {
            continue;
        };
        let Some((nodes, links)) = hop_path(spec, &adj, from, to) else {
            continue;
        };
        // Forward: each link from the node nearer `from` (the path runs from
        // `to` back to `from`).
        let dirs: Vec<&crate::spec::DirectionSpec> = links
            .iter()
            .zip(&nodes[1..])
            .map(|(&li, &near)| {
                let l = &spec.links[li];
                if l.a.node == spec.nodes[near].name {
                    &l.a_to_b
                } else {
                    &l.b_to_a
                }
            })
            .collect();
        // (Bounded: an absurd rate must not overflow the sums.)
        let pps = flow_packet_rate(spec, t, &links, &dirs).clamp(0.0, 1e12) as u64;
        for v in nodes {
            w[v] = w[v].saturating_add(pps.max(1));
        }
        for li in links {
            lw[li] = lw[li].saturating_add(pps.max(1));
        }
    }
    (w, lw)
}

/// The nodes and links of the path with the fewest hops from `from` to `to`
/// through nodes that forward (routers and switches), the first found in
/// link order: where the traffic goes, near enough to weigh nodes by (the
/// routes the model builds may differ where there are several paths).
fn hop_path(
    spec: &NetworkSpec,
    adj: &[Vec<(usize, usize)>],
    from: usize,
    to: usize,
) -> Option<(Vec<usize>, Vec<usize>)> {
    let forwards = |v: usize| {
        matches!(
            spec.nodes[v].kind,
            NodeKind::Router(_) | NodeKind::Switch(_)
        )
    };
    let mut came: Vec<Option<(usize, usize)>> = vec![None; adj.len()];
    let mut seen = vec![false; adj.len()];
    seen[from] = true;
    let mut frontier = std::collections::VecDeque::from([from]);
    while let Some(v) = frontier.pop_front() {
        if v == to {
            let (mut nodes, mut links) = (vec![to], Vec::new());
            let mut at = to;
            while let Some((prev, li)) = came[at] {
                nodes.push(prev);
                links.push(li);
                at = prev;
            }
            return Some((nodes, links));
        }
        if v != from && !forwards(v) {
            continue;
        }
        for &(u, li) in &adj[v] {
            if !seen[u] {
                seen[u] = true;
                came[u] = Some((v, li));
                frontier.push_back(u);
            }
        }
    }
    None
}

/// Bits per second a path can carry forward (`dirs`: each link's direction
/// from the source): its slowest rate; an unlimited link counts as 10 Gbit/s
/// (a bulk transfer over unlimited links is limited by the simulation, not by
/// a rate).
fn path_rate_bps(dirs: &[&crate::spec::DirectionSpec]) -> f64 {
    dirs.iter()
        .map(|d| d.nominal_bps().map_or(10e9, |r| r as f64))
        .fold(10e9, f64::min)
}

/// Packets per second a flow (all `count` of it) is expected to put on its
/// path, both ways, averaged over the run: what its kind and parameters
/// say (a ping's interval, a UDP rate over its size, a bulk TCP transfer
/// filling the path's slowest link with full-sized segments and an ACK for
/// every second one), times the share of the run it is active.
fn flow_packet_rate(
    spec: &NetworkSpec,
    t: &crate::spec::TrafficSpec,
    links: &[usize],
    dirs: &[&crate::spec::DirectionSpec],
) -> f64 {
    use crate::spec::TrafficKind as K;
    const SEGMENT_BITS: f64 = 1500.0 * 8.0;
    let count = f64::from(t.count.max(1));
    let run = spec.run.duration.as_secs_f64().max(1e-9);
    let path_pps = path_rate_bps(dirs) / SEGMENT_BITS;
    let per_s = |d: SimDuration| 1.0 / d.as_secs_f64().max(1e-9);
    let udp = |rate: u64, size: u64| count * rate as f64 / (size.max(1) as f64 * 8.0);
    let rate = match &t.kind {
        K::Ping { interval, .. } => 2.0 * count * per_s(*interval),
        K::UdpCbr { rate, size } | K::UdpPoisson { rate, size } => udp(rate.bps(), size.get()),
        K::UdpOnOff {
            rate,
            size,
            on,
            off,
        } => {
            let duty = on.as_secs_f64() / (on.as_secs_f64() + off.as_secs_f64()).max(1e-9);
            udp(rate.bps(), size.get()) * duty
        }
        // The flows of one spec share its path: together they fill it, or
        // send what they have to send over the run, if that is less.
        K::TcpBulk { bytes } => {
            let fill = path_pps;
            let have = bytes.map_or(f64::INFINITY, |b| {
                count * b.get() as f64 * 8.0 / SEGMENT_BITS / run
            });
            1.5 * fill.min(have)
        }
        K::TcpRr {
            request,
            response,
            interval,
        } => {
            let segments = |b: u64| (b as f64 * 8.0 / SEGMENT_BITS).ceil().max(1.0) * 1.5;
            let per_transaction = segments(request.get()) + segments(response.get());
            // Back to back: one transaction per round trip of the path (its
            // links' delays both ways and the request's and response's time
            // on the slowest), never more than the path carries.
            let rtt = links
                .iter()
                .map(|&li| {
                    let l = &spec.links[li];
                    (l.a_to_b.delay + l.b_to_a.delay).as_secs_f64()
                })
                .sum::<f64>()
                + (request.get() + response.get()) as f64 * 8.0 / path_rate_bps(dirs);
            let per_s_rr = interval.map_or(1.0 / rtt.max(1e-6), per_s);
            (count * per_transaction * per_s_rr).min(1.5 * path_pps)
        }
        K::Traceroute { max_hops } => 2.0 * count * f64::from(*max_hops) / run,
    };
    let stop = t.stop.map_or(run, |s| s.as_secs_f64().min(run));
    let active = ((stop - t.start.as_secs_f64()) / run).clamp(0.0, 1.0);
    rate * active
}

/// What one partition did during a run.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct PartitionStats {
    /// Nodes it owned.
    pub nodes: usize,
    /// Events it ran.
    pub events: u64,
    /// Frames it sent to other partitions.
    pub frames_out: u64,
    /// Frames it received from other partitions.
    pub frames_in: u64,
    /// Wall-clock seconds spent waiting for the other partitions (at the
    /// two barriers of each round), from their first meeting on: the wait
    /// before it, for the others to build their copies, is set-up.
    pub blocked_seconds: f64,
    /// Null-message runs ([`SyncMethod::NullMessages`]): the times it moved a
    /// clock of its for another partition on (its null messages; frames
    /// travel apart). Absent from windowed runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub null_messages: Option<u64>,
}

/// How the partitions of a run on threads keep in step (both conservative:
/// the results are the same).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SyncMethod {
    /// Rounds: agree on the earliest event anywhere, run one lookahead
    /// past it, hand frames over ([`run_partition`]).
    #[default]
    Windowed,
    /// Null messages: each partition tells those it sends to how soon a
    /// frame of it can reach them, and runs up to what it is told
    /// (`null`).
    NullMessages,
}

impl SyncMethod {
    /// Its name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            SyncMethod::Windowed => "windowed",
            SyncMethod::NullMessages => "null",
        }
    }
}

/// A partitioned run at its end: what its results are read from (merged
/// from the partitions' shares: what a single run would have read) and
/// what each partition did.
pub struct Partitioned {
    /// Partition 0's simulation: names, ports, link parameters and the
    /// time reached, which every partition has alike.
    base: Simulation,
    /// The partitions' shares, merged.
    share: Share,
    /// Events run, each scheduled link change counted once.
    events: u64,
    /// Synchronisation rounds.
    pub rounds: u64,
    /// How the partitions kept in step.
    pub sync: SyncMethod,
    /// Per partition.
    pub partitions: Vec<PartitionStats>,
    /// Why the time series stopped being written, if it did (the run was
    /// stopped then).
    pub series_error: Option<std::io::Error>,
    /// When every partition had built its copy of the network and the run
    /// proper began (partitions on threads build theirs in their threads),
    /// if they met.
    pub ready: Option<Instant>,
}

/// How a partitioned run went: `wall.partitions` in its results (with the
/// wall-clock figures, since it describes how the run was carried out, not
/// what the model did: the rest of the results equals a single run's).
#[derive(Clone, Debug, Serialize)]
pub struct PartitionReport {
    /// Partitions.
    pub count: u32,
    /// How they ran: `threads` (one process) or `mpi` (one rank each).
    pub transport: String,
    /// How they kept in step: `windowed` (rounds) or `null` (null
    /// messages; `rounds` then counts partition 0's steps that ran events).
    pub sync: &'static str,
    /// The least delay of the links cut, ns (`null`: none was cut).
    pub lookahead_ns: Option<u64>,
    /// The links cut, by name.
    pub cut_links: Vec<String>,
    /// Synchronisation rounds.
    pub rounds: u64,
    /// Per partition, in order.
    pub per_partition: Vec<PartitionStats>,
}

impl Partitioned {
    /// What `wall.partitions` reports for this run, cut by `cut`.
    pub fn report(&self, cut: &Cut) -> PartitionReport {
        let spec = self.base.net.spec();
        PartitionReport {
            count: cut.parts,
            transport: "threads".into(),
            sync: self.sync.name(),
            lookahead_ns: cut.lookahead_ns(),
            cut_links: cut.cut_link_names(spec),
            rounds: self.rounds,
            per_partition: self.partitions.clone(),
        }
    }

    /// The results (those of [`Simulation::results`] for a single run),
    /// with `wall.partitions`.
    pub fn results(
        &self,
        cut: &Cut,
        mode: &str,
        wall_seconds: Option<f64>,
        topology: Option<String>,
    ) -> crate::results::Results {
        let mut r =
            self.base
                .view()
                .results_from(&self.share, self.events, mode, wall_seconds, topology);
        if let Some(w) = &mut r.wall {
            w.partitions = Some(self.report(cut));
        }
        r
    }
}

/// The results of a run cut by `cut` whose partition 0 ended as `first`,
/// from `first`'s share and the others' (`others`, in partition order),
/// with `events` run in all: a real-time run's (`netloop_io::rtpart`),
/// whose partitions end on threads of their own.
pub fn merged_results(
    first: &Simulation,
    cut: &Cut,
    others: &[Share],
    events: u64,
    mode: &str,
    wall_seconds: Option<f64>,
    topology: Option<String>,
) -> crate::results::Results {
    let mut share = Share::of(&first.net, &first.flows, first.queue.now(), |n| {
        cut.part_of[n] == 0
    });
    for s in others {
        share.absorb(s.clone());
    }
    first
        .view()
        .results_from(&share, events, mode, wall_seconds, topology)
}

/// A barrier that spins first, and sleeps only after a while.
///
/// Why: rounds are short (a lookahead of 1 ms of simulated time can be
/// tens of microseconds of work), and `std::sync::Barrier` puts waiters to
/// sleep on a futex at once: waking a sleeping thread took some 50 µs per
/// round here (a halted vCPU must be woken), as much as the work. So a
/// waiter spins for a while when there is a core for each partition, then
/// yields, then sleeps: partitions that outnumber the cores (8 on 2 cores)
/// must not spin away the time the others need to reach the barrier.
struct SpinBarrier {
    parties: usize,
    /// Whether a waiter may spin (a core for each party).
    spin: bool,
    /// Set when a party will never come (its thread failed): waiters
    /// return at once, and the run stops.
    broken: AtomicBool,
    arrived: AtomicUsize,
    generation: AtomicU64,
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
}

/// Whether threads waiting for each other may spin: a core for each of
/// `parties` (else a spinner takes the time the others need).
fn may_spin(parties: usize) -> bool {
    parties <= std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Spins (of a few nanoseconds each) before a waiter yields.
const SPINS: u32 = 20_000;
/// Yields before a waiter sleeps.
const YIELDS: u32 = 50;

impl SpinBarrier {
    fn new(parties: usize) -> Self {
        SpinBarrier {
            parties,
            spin: may_spin(parties),
            broken: AtomicBool::new(false),
            arrived: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        }
    }

    /// Marks the barrier broken and wakes every waiter.
    fn the_party_is_gone(&self) {
        self.broken.store(true, Ordering::SeqCst);
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.wake.notify_all();
    }

    /// Waits for every party; false if the barrier is broken.
    fn wait(&self) -> bool {
        if self.broken.load(Ordering::SeqCst) {
            return false;
        }
        let generation = self.generation.load(Ordering::SeqCst);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.parties {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.store(generation + 1, Ordering::SeqCst);
            // A sleeper counted itself before its last look at the
            // generation (both SeqCst): either it saw the new one, or it
            // is counted here and waits under the lock taken to wake it.
            if self.sleepers.load(Ordering::SeqCst) > 0 {
                let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
                self.wake.notify_all();
            }
            return true;
        }
        let passed = || {
            self.generation.load(Ordering::SeqCst) != generation
                || self.broken.load(Ordering::SeqCst)
        };
        if self.spin {
            for _ in 0..SPINS {
                if passed() {
                    return !self.broken.load(Ordering::SeqCst);
                }
                std::hint::spin_loop();
            }
        }
        for _ in 0..YIELDS {
            if passed() {
                return !self.broken.load(Ordering::SeqCst);
            }
            std::thread::yield_now();
        }
        let mut guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        while !passed() {
            guard = self.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        !self.broken.load(Ordering::SeqCst)
    }
}

/// Why bytes received from another process are not a frame that crossed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a frame from another partition is malformed at byte {at}: {what}")]
pub struct DecodeError {
    /// Offset in the buffer.
    pub at: usize,
    /// What was wrong.
    pub what: &'static str,
}

impl Crossing {
    /// Appends this crossing to `out` as bytes (for partitions in other
    /// processes): the arrival, link, direction and epoch, the frame's
    /// metadata (arrival stamp, checksum state, GSO), its length and bytes,
    /// little-endian. The frame's id is not sent: ids are per process.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let m = &self.frame.meta;
        out.extend_from_slice(&self.at.as_nanos().to_le_bytes());
        out.extend_from_slice(&self.link.to_le_bytes());
        out.push(self.dir);
        out.extend_from_slice(&self.epoch.to_le_bytes());
        out.extend_from_slice(&m.stamp.to_le_bytes());
        out.push(match m.csum {
            Checksum::Complete => 0,
            Checksum::Partial => 1,
        });
        let (kind, hdr_len, size, segs) = match m.gso {
            None => (0u8, 0u16, 0u16, 0u16),
            Some(g) => (
                match g.kind {
                    GsoKind::TcpV4 { ecn: false } => 1,
                    GsoKind::TcpV4 { ecn: true } => 2,
                    GsoKind::UdpV4 => 3,
                    GsoKind::TcpV6 { ecn: false } => 4,
                    GsoKind::TcpV6 { ecn: true } => 5,
                    GsoKind::UdpV6 => 6,
                },
                g.hdr_len,
                g.size,
                g.segs,
            ),
        };
        out.push(kind);
        for v in [hdr_len, size, segs] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&(self.frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.frame);
    }

    /// Reads one crossing from the front of `buf` (as [`Crossing::encode`]
    /// wrote it), advancing `buf` past it.
    pub fn decode(buf: &mut &[u8], start: usize) -> Result<Crossing, DecodeError> {
        let whole = *buf;
        let mut pos = 0usize;
        let mut take = |n: usize, what: &'static str| -> Result<&[u8], DecodeError> {
            let b = whole.get(pos..pos + n).ok_or(DecodeError {
                at: start + pos,
                what,
            })?;
            pos += n;
            Ok(b)
        };
        let u64_of = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
        let u32_of = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
        let u16_of = |b: &[u8]| u16::from_le_bytes(b.try_into().expect("2 bytes"));
        let at = SimTime::from_nanos(u64_of(take(8, "truncated arrival time")?));
        let link = u32_of(take(4, "truncated link")?);
        let dir = take(1, "truncated direction")?[0];
        let epoch = u32_of(take(4, "truncated epoch")?);
        let stamp = u64_of(take(8, "truncated stamp")?);
        let csum = match take(1, "truncated checksum state")?[0] {
            0 => Checksum::Complete,
            1 => Checksum::Partial,
            _ => {
                return Err(DecodeError {
                    at: start + pos - 1,
                    what: "unknown checksum state",
                })
            }
        };
        let kind = take(1, "truncated GSO kind")?[0];
        let hdr_len = u16_of(take(2, "truncated GSO header length")?);
        let size = u16_of(take(2, "truncated GSO size")?);
        let segs = u16_of(take(2, "truncated GSO segments")?);
        let gso_kind = match kind {
            0 => None,
            1 => Some(GsoKind::TcpV4 { ecn: false }),
            2 => Some(GsoKind::TcpV4 { ecn: true }),
            3 => Some(GsoKind::UdpV4),
            4 => Some(GsoKind::TcpV6 { ecn: false }),
            5 => Some(GsoKind::TcpV6 { ecn: true }),
            6 => Some(GsoKind::UdpV6),
            _ => {
                return Err(DecodeError {
                    at: start + pos - 7,
                    what: "unknown GSO kind",
                })
            }
        };
        let len = u32_of(take(4, "truncated length")?) as usize;
        let mut frame = Frame::copy_from(take(len, "truncated frame")?);
        frame.meta.stamp = stamp;
        frame.meta.csum = csum;
        frame.meta.gso = gso_kind.map(|kind| Gso {
            kind,
            hdr_len,
            size,
            segs,
        });
        if dir > 1 {
            return Err(DecodeError {
                at: start + 12,
                what: "direction is neither 0 nor 1",
            });
        }
        *buf = &whole[pos..];
        Ok(Crossing {
            at,
            link,
            dir,
            epoch,
            frame,
        })
    }
}

/// How the partitions of a run reach each other: threads of one process
/// ([`run_threads`]), or processes (MPI ranks, in the command-line tool).
/// Every partition calls the two methods in the same sequence; each call
/// returns once all have made it.
pub trait Exchange {
    /// Agrees on the earliest event pending in any partition (ns;
    /// `u64::MAX`: none) and on whether any partition asks to stop.
    fn agree(&mut self, next: u64, stop: bool) -> (u64, bool);
    /// Sends `out[p]` to partition `p`, emptying it, and returns the frames
    /// the others sent to this one (each sender's in the order it sent
    /// them).
    fn swap(&mut self, out: &mut [Vec<Crossing>]) -> Vec<Crossing>;
    /// Adds up the partitions' `counts` (all of one length): partition 0's
    /// holds the sum when this returns, the others' are left as they were
    /// or emptied. A time series' sample (see [`Sampling`]).
    fn sum_to_first(&mut self, counts: &mut Vec<u64>);
}

/// A time series written while the partitions run (`--stats-interval`):
/// at each time on the interval's grid every partition reads the counts of
/// what it owns ([`SampleCounts`]) — all at that moment, with the frames
/// that crossed to them before it on their wires — and partition 0 writes
/// their sum, the sample a single run would have written.
pub struct Sampling<'a> {
    /// The interval (the same in every partition).
    pub interval: SimDuration,
    /// Partition 0's writer; `None` in the others.
    pub writer: Option<&'a mut SeriesWriter>,
}

/// What the threads of a run share.
struct Shared {
    barrier: SpinBarrier,
    /// Each partition's earliest pending event (ns; `u64::MAX`: none).
    next: Vec<AtomicU64>,
    /// Frames for each partition, from all the others.
    inbox: Vec<Mutex<Vec<Crossing>>>,
    /// Set when a partition asks to stop.
    stop: AtomicBool,
    /// The sum of the partitions' counts for a sample, as it is made.
    sums: Mutex<Vec<u64>>,
}

impl Shared {
    fn new(parts: usize) -> Self {
        Shared {
            barrier: SpinBarrier::new(parts),
            next: (0..parts).map(|_| AtomicU64::new(u64::MAX)).collect(),
            inbox: (0..parts).map(|_| Mutex::new(Vec::new())).collect(),
            stop: AtomicBool::new(false),
            sums: Mutex::new(Vec::new()),
        }
    }
}

/// Held by a partition's thread while it runs: a thread that fails (an
/// error, a panic) never comes back to the barrier, so unless the run
/// reached its end (`.1` set) dropping this breaks the barrier and the
/// others stop instead of waiting for ever.
struct Gone<'a>(&'a SpinBarrier, bool);

impl Drop for Gone<'_> {
    fn drop(&mut self) {
        if !self.1 {
            self.0.the_party_is_gone();
        }
    }
}

/// One thread's end of [`Shared`].
struct ThreadExchange<'a> {
    shared: &'a Shared,
    me: usize,
}

impl Exchange for ThreadExchange<'_> {
    fn agree(&mut self, next: u64, stop: bool) -> (u64, bool) {
        let sh = self.shared;
        sh.next[self.me].store(next, Ordering::Relaxed);
        if stop {
            sh.stop.store(true, Ordering::Relaxed);
        }
        if !sh.barrier.wait() {
            // A partition failed: stop (its error is reported by the join).
            return (u64::MAX, true);
        }
        // Read by all between this barrier and the next (in `swap`), before
        // any partition writes again.
        let earliest = sh
            .next
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .min()
            .unwrap_or(u64::MAX);
        (earliest, sh.stop.load(Ordering::Relaxed))
    }

    fn swap(&mut self, out: &mut [Vec<Crossing>]) -> Vec<Crossing> {
        let sh = self.shared;
        for (p, frames) in out.iter_mut().enumerate() {
            if !frames.is_empty() {
                sh.inbox[p]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .append(frames);
            }
        }
        // Broken: the next `agree` stops the run.
        sh.barrier.wait();
        std::mem::take(&mut *sh.inbox[self.me].lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn sum_to_first(&mut self, counts: &mut Vec<u64>) {
        let sh = self.shared;
        crate::series::add_counts(
            &mut sh.sums.lock().unwrap_or_else(|e| e.into_inner()),
            counts,
        );
        // Everyone has added; partition 0 takes the sum; and nobody adds to
        // the next sample (samples can follow each other with no round
        // between) before it has.
        if !sh.barrier.wait() {
            return;
        }
        if self.me == 0 {
            *counts = std::mem::take(&mut *sh.sums.lock().unwrap_or_else(|e| e.into_inner()));
        }
        sh.barrier.wait();
    }
}

/// Runs `sim` (built from its spec, not yet run) cut by `cut` on one thread
/// per partition, as fast as possible up to simulated time `until` (events
/// due then run). `progress` is called by partition 0 after each round with its
/// simulated time; returning `false` stops the run at the end of a round.
pub fn run_threads(
    sim: Simulation,
    cut: &Cut,
    until: SimTime,
    progress: impl FnMut(SimTime) -> bool + Send,
) -> Result<Partitioned, BuildError> {
    run_threads_with_taps(
        sim,
        cut,
        until,
        progress,
        Vec::new(),
        None,
        SyncMethod::Windowed,
    )
}

/// Taps for one partition's copy of the network: (link, tap) pairs.
pub type PartitionTaps = Vec<(usize, Box<dyn crate::network::Tap>)>;

/// [`run_threads`], with `taps[p]` added to partition `p`'s copy of the
/// network before it runs (partition 0's to `sim`). A partition shows a
/// tap the frames it sends and receives on the tap's link; each frame
/// carries its [`TapOrder`](crate::network::TapOrder), by which what the
/// partitions saw merges into what one run would have shown. With
/// `series`, the run's time series is written to it every `.0` (see
/// [`Sampling`]). The partitions keep in step by `sync`; null messages
/// need an end (`until` before `SimTime::MAX`): without one a windowed run
/// is made instead.
pub fn run_threads_with_taps(
    mut sim: Simulation,
    cut: &Cut,
    until: SimTime,
    mut progress: impl FnMut(SimTime) -> bool + Send,
    mut taps: Vec<PartitionTaps>,
    series: Option<(SimDuration, &mut SeriesWriter)>,
    sync: SyncMethod,
) -> Result<Partitioned, BuildError> {
    // Null messages climb one lookahead at a time where nothing is
    // pending: to an endless end they would climb for ever.
    let sync = if until == SimTime::MAX {
        SyncMethod::Windowed
    } else {
        sync
    };
    let parts = cut.parts as usize;
    taps.resize_with(parts, Vec::new);
    sim.net.add_taps(std::mem::take(&mut taps[0]));
    let mut taps = taps.into_iter();
    let spec = sim.net.spec().clone();
    // The other partitions build their own copies (deterministically the
    // same as `sim`: it built without an error, so they do too).
    let shared = Shared::new(parts);
    let clocks = (sync == SyncMethod::NullMessages).then(|| null::Clocks::new(&spec, cut));
    let mut first = Some(sim);
    let interval = series.as_ref().map(|s| s.0);
    let mut writer = series.map(|s| s.1);
    let ends: Vec<Result<PartitionEnd, BuildError>> = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(parts);
        let mut progress = Some(&mut progress as &mut (dyn FnMut(SimTime) -> bool + Send));
        for me in 0..parts {
            let mine = first.take();
            let my_taps = taps.next().unwrap_or_default();
            let spec = &spec;
            let shared = &shared;
            let clocks = clocks.as_ref();
            let report = if me == 0 { progress.take() } else { None };
            let sampling = interval.map(|interval| Sampling {
                interval,
                writer: if me == 0 { writer.take() } else { None },
            });
            let handle = std::thread::Builder::new()
                .name(format!("netloop-part-{me}"))
                .spawn_scoped(scope, move || {
                    let mut gone = Gone(&shared.barrier, false);
                    let mut sim = match mine {
                        Some(s) => s,
                        None => Simulation::build(spec)?,
                    };
                    sim.net.add_taps(my_taps);
                    let end = match clocks {
                        None => {
                            let mut x = ThreadExchange { shared, me };
                            run_partition(sim, cut, me as u32, until, &mut x, report, sampling)
                        }
                        Some(clocks) => null::run_partition(
                            sim, cut, me as u32, until, shared, clocks, report, sampling,
                        ),
                    };
                    gone.1 = true;
                    Ok(end)
                })
                .expect("spawning a partition thread");
            handles.push(handle);
        }
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    let mut ends = ends.into_iter().collect::<Result<Vec<_>, _>>()?;
    let shares = ends
        .iter()
        .enumerate()
        .map(|(p, e)| (e.share(cut, p as u32), e.stats.clone()))
        .collect();
    let first = ends.remove(0);
    let mut p = Partitioned::assemble(first, shares);
    p.sync = sync;
    Ok(p)
}

/// Runs `rounds` synchronisation rounds with no simulation work between
/// them, as partition `me` of `parts` on `x`: each round an `agree` and a
/// `swap` in which this partition sends `frames` frames of `len` bytes to
/// the next partition. Returns the wall time of the whole and the frames
/// received. What a round of a real run costs beyond its work (`netloop
/// bench sync`).
pub fn idle_rounds(
    x: &mut impl Exchange,
    me: usize,
    parts: usize,
    rounds: u64,
    frames: usize,
    len: usize,
) -> (std::time::Duration, u64) {
    let mut out: Vec<Vec<Crossing>> = (0..parts).map(|_| Vec::new()).collect();
    let frame = Frame::zeroed(len);
    let mut received = 0;
    let t = Instant::now();
    for r in 0..rounds {
        let next = r * 1_000 + me as u64;
        let (earliest, _) = x.agree(next, false);
        assert_eq!(earliest, r * 1_000, "the partitions agree on the earliest");
        if parts > 1 {
            let to = &mut out[(me + 1) % parts];
            to.extend((0..frames).map(|k| Crossing {
                at: SimTime::from_nanos(next + k as u64),
                link: 0,
                dir: 0,
                epoch: 0,
                frame: frame.clone(),
            }));
        }
        received += x.swap(&mut out).len() as u64;
    }
    (t.elapsed(), received)
}

/// [`idle_rounds`] on `parts` threads of this process, with the exchange
/// and barrier of [`run_threads`]: each thread's wall time and frames
/// received.
pub fn idle_rounds_threads(
    parts: usize,
    rounds: u64,
    frames: usize,
    len: usize,
) -> Vec<(std::time::Duration, u64)> {
    let shared = Shared::new(parts);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..parts)
            .map(|me| {
                let shared = &shared;
                scope.spawn(move || {
                    let mut gone = Gone(&shared.barrier, false);
                    let mut x = ThreadExchange { shared, me };
                    let r = idle_rounds(&mut x, me, parts, rounds, frames, len);
                    gone.1 = true;
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(d) => d,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    })
}

/// A partition at the end of its run: its simulation (whole, but run only
/// where it owns), what it did, and the rounds run.
pub struct PartitionEnd {
    /// Its copy of the network, queue and flows.
    pub sim: Simulation,
    /// What it did.
    pub stats: PartitionStats,
    /// Synchronisation rounds.
    pub rounds: u64,
    /// When every partition had built its copy of the network and met the
    /// others (the run proper began), if they met.
    pub ready: Option<Instant>,
    /// Why partition 0 stopped writing the time series, if it did (the run
    /// was then stopped).
    pub series_error: Option<std::io::Error>,
}

impl PartitionEnd {
    /// Its share of what the results are read from (what it owns).
    pub fn share(&self, cut: &Cut, me: u32) -> Share {
        let sim = &self.sim;
        Share::of(&sim.net, &sim.flows, sim.queue.now(), |n| {
            cut.part_of[n] == me
        })
    }
}

impl Partitioned {
    /// The run whose partition 0 ended as `first`, from every partition's
    /// share and figures, in partition order.
    pub fn assemble(first: PartitionEnd, shares: Vec<(Share, PartitionStats)>) -> Partitioned {
        let parts = shares.len() as u64;
        let mut merged: Option<Share> = None;
        let mut partitions = Vec::with_capacity(shares.len());
        for (share, stats) in shares {
            match &mut merged {
                None => merged = Some(share),
                Some(m) => m.absorb(share),
            }
            partitions.push(stats);
        }
        // Every partition ran each scheduled link change; a single run
        // counts it once.
        let events = partitions.iter().map(|p| p.events).sum::<u64>()
            - first.sim.net.link_events() * parts.saturating_sub(1);
        Partitioned {
            share: merged.unwrap_or_default(),
            events,
            rounds: first.rounds,
            sync: SyncMethod::Windowed,
            partitions,
            series_error: first.series_error,
            ready: first.ready,
            base: first.sim,
        }
    }
}

/// Runs partition `me` of `sim` cut by `cut`, as fast as possible up to
/// `until`, in step with the other partitions through `x`; partition 0
/// calls `progress` after each round (returning `false` stops the run, for
/// all, at the end of a round). With `sampling` (in every partition or in
/// none), the time series is sampled as it goes.
pub fn run_partition(
    mut sim: Simulation,
    cut: &Cut,
    me: u32,
    until: SimTime,
    x: &mut impl Exchange,
    mut progress: Option<&mut (dyn FnMut(SimTime) -> bool + Send)>,
    mut sampling: Option<Sampling<'_>>,
) -> PartitionEnd {
    let mut stats = enter_partition(&mut sim, cut, me);
    let start_events = sim.queue.events_processed();
    let mut rounds = 0u64;
    let mut stop = false;
    let mut series = SeriesState::default();
    // The last moment every partition ran to (the same for all).
    let mut ran_to: Option<SimTime> = None;
    // The moment every partition had built its copy and met the others:
    // the wait before it is set-up (the others building theirs), not time
    // blocked during the run.
    let mut ready: Option<Instant> = None;
    let stopped = loop {
        let next = sim.queue.peek_time().map_or(u64::MAX, |t| t.as_nanos());
        let t = Instant::now();
        let (earliest, stop_all) = x.agree(next, stop);
        match ready {
            None => ready = Some(Instant::now()),
            Some(_) => stats.blocked_seconds += t.elapsed().as_secs_f64(),
        }
        if stop_all {
            break true;
        }
        // Samples due before anything more happens (every partition agreed
        // on `earliest`, so all take the same ones).
        // (A run to `SimTime::MAX` with nothing left has no end to sample.)
        let endless = earliest == u64::MAX && until == SimTime::MAX;
        if let Some(smp) = sampling.as_mut().filter(|_| !endless) {
            while series.next < SimTime::from_nanos(earliest) && series.next <= until {
                let at = series.next;
                series.take(smp, &sim, cut, me, x, at, &mut stop);
            }
        }
        // Nothing pending anywhere (`u64::MAX`) ends a run to
        // `SimTime::MAX` too.
        if earliest == u64::MAX || earliest > until.as_nanos() {
            break false;
        }
        rounds += 1;
        // Frames sent at or after `earliest` arrive at `horizon` or later:
        // everything before it is safe to run; a round ends at a sample's
        // time, if one comes first.
        let horizon = earliest.saturating_add(window(cut).as_nanos());
        let mut limit = SimTime::from_nanos((horizon - 1).min(until.as_nanos()));
        let sample_at = sampling.is_some() && series.next <= limit;
        if sample_at {
            limit = series.next;
        }
        ran_to = Some(limit);
        run_events_to(&mut sim, limit);
        if let Some(report) = progress.as_deref_mut() {
            stop |= !report(sim.queue.now());
        }
        let out = sim.net.all_crossings();
        stats.frames_out += out.iter().map(|v| v.len() as u64).sum::<u64>();
        let t = Instant::now();
        let incoming = x.swap(out);
        stats.blocked_seconds += t.elapsed().as_secs_f64();
        stats.frames_in += incoming.len() as u64;
        for c in incoming {
            sim.net.receive(&mut sim.queue, c);
        }
        if let (true, Some(smp)) = (sample_at, sampling.as_mut()) {
            series.take(smp, &sim, cut, me, x, limit, &mut stop);
        }
    };
    if until != SimTime::MAX && sim.queue.now() < until && !stopped {
        sim.queue.advance_to(until);
    } else if let Some(t) = ran_to.filter(|&t| stopped && sim.queue.now() < t) {
        // Stopped early: every partition stands at the end of the last
        // round, so that what is in flight between them is counted at one
        // moment (a transmitter idle since its last event would still count
        // a frame as being serialised that its receiver already took).
        sim.queue.advance_to(t);
    }
    // Every partition stands at the same moment here.
    if let Some(smp) = sampling.as_mut() {
        series.take_last(smp, &sim, cut, me, x, &mut stop);
    }
    stats.events = sim.queue.events_processed() - start_events;
    PartitionEnd {
        sim,
        stats,
        rounds,
        ready,
        series_error: series.error,
    }
}

/// The most simulated time a partition runs without hearing from the
/// others where no link joins them (a cut through no link, a partition of
/// its own): without it such a run would be one round, and partition 0
/// would see a stop (Ctrl-C) only at its end.
const UNLINKED_WINDOW: SimDuration = SimDuration::from_millis(10);

/// A round's window: the lookahead, or [`UNLINKED_WINDOW`] where no link
/// is cut.
fn window(cut: &Cut) -> SimDuration {
    if cut.lookahead == SimDuration::MAX {
        UNLINKED_WINDOW
    } else {
        cut.lookahead
    }
}

/// Makes `sim` partition `me` of `cut` (it keeps the events it runs);
/// its figures, zero but for its nodes.
fn enter_partition(sim: &mut Simulation, cut: &Cut, me: u32) -> PartitionStats {
    sim.net.make_partition(&cut.part_of, me, cut.parts);
    let net: &Network = &sim.net;
    sim.queue.retain(|ev| net.runs(&cut.part_of, me, ev));
    PartitionStats {
        nodes: cut.part_of.iter().filter(|&&p| p == me).count(),
        ..PartitionStats::default()
    }
}

/// Runs `sim`'s events due at or before `limit`.
fn run_events_to(sim: &mut Simulation, limit: SimTime) {
    let hints = netloop_core::Model::wants_hints(&sim.net);
    while let Some(t) = sim.queue.peek_time() {
        if t > limit {
            break;
        }
        let (now, ev) = sim.queue.pop().expect("peeked");
        netloop_core::sched::hint_next(&sim.net, &sim.queue, hints);
        netloop_core::Model::handle(&mut sim.net, now, ev, &mut sim.queue);
    }
}

/// Where a partition's time series stands.
#[derive(Default)]
struct SeriesState {
    /// The next sample's time on the grid.
    next: SimTime,
    /// The last sample's time.
    last: Option<SimTime>,
    /// Partition 0's write error; it stops writing (and the run) then.
    error: Option<std::io::Error>,
}

impl SeriesState {
    /// Takes the sample of the moment the run stopped, if off the grid (as
    /// a single run's last sample): a collective call, as [`Self::take`].
    fn take_last(
        &mut self,
        smp: &mut Sampling<'_>,
        sim: &Simulation,
        cut: &Cut,
        me: u32,
        x: &mut impl Exchange,
        stop: &mut bool,
    ) {
        let now = sim.queue.now();
        if self.last.is_none_or(|t| t < now) {
            self.take(smp, sim, cut, me, x, now, stop);
        }
    }

    /// Takes the sample at `at` (a collective call: every partition makes
    /// it at the same moment) and moves the grid on past `at`.
    #[allow(clippy::too_many_arguments)]
    fn take(
        &mut self,
        smp: &mut Sampling<'_>,
        sim: &Simulation,
        cut: &Cut,
        me: u32,
        x: &mut impl Exchange,
        at: SimTime,
        stop: &mut bool,
    ) {
        let mut counts = SampleCounts::of(&sim.net, &sim.flows, at, |n| cut.part_of[n] == me).0;
        x.sum_to_first(&mut counts);
        if let (Some(w), None) = (smp.writer.as_deref_mut(), &self.error) {
            if let Err(e) = w.sample_counts(&SampleCounts(counts), at, None) {
                self.error = Some(e);
                *stop = true;
            }
        }
        self.last = Some(at);
        while self.next <= at {
            self.next += smp.interval;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_rounds_on_threads_agree_and_deliver_every_frame() {
        for parts in [1usize, 2, 3] {
            let per = idle_rounds_threads(parts, 50, 4, 100);
            assert_eq!(per.len(), parts);
            for (_, received) in per {
                assert_eq!(
                    received,
                    if parts > 1 { 200 } else { 0 },
                    "{parts} partitions"
                );
            }
        }
    }
    use std::time::Duration;

    /// A party that fails breaks the barrier: the others are let go (they
    /// waited for ever before), and later waits return at once.
    #[test]
    fn a_broken_barrier_lets_its_waiters_go() {
        let b = SpinBarrier::new(3);
        std::thread::scope(|s| {
            let w1 = s.spawn(|| b.wait());
            let w2 = s.spawn(|| b.wait());
            std::thread::sleep(Duration::from_millis(50));
            b.the_party_is_gone();
            assert!(!w1.join().unwrap());
            assert!(!w2.join().unwrap());
        });
        assert!(!b.wait(), "a broken barrier stays broken");
    }

    /// Parties pass together, round after round: none gets a round ahead.
    #[test]
    fn parties_pass_the_barrier_together() {
        let b = SpinBarrier::new(3);
        let round = AtomicU64::new(0);
        let arrived = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for r in 0..2_000u64 {
                        assert_eq!(round.load(Ordering::SeqCst), r);
                        if arrived.fetch_add(1, Ordering::SeqCst) + 1 == 3 {
                            arrived.store(0, Ordering::SeqCst);
                            round.fetch_add(1, Ordering::SeqCst);
                        }
                        assert!(b.wait());
                        // Everyone has counted this round before anyone
                        // passes; the round moved on exactly once.
                        assert_eq!(round.load(Ordering::SeqCst), r + 1);
                        assert!(b.wait());
                    }
                });
            }
        });
    }
}
