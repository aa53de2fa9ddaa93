//! The scenarios of `netloop bench speed`, built in code. Each has an ns-3
//! twin under `bench/ns3/` built from the same description (the same
//! integer arithmetic for its graph and flows), so that both simulators run
//! the same network.
//!
//! - **dumbbell**: two routers joined by a 1 Gbit/s, 10 ms bottleneck;
//!   H = min(N, 100) hosts per side on 1 Gbit/s, 1 ms links; N UDP flows
//!   from the left hosts to the right ones.
//! - **wan**: S sites, each a router with 4 hosts on 1 Gbit/s, 100 µs
//!   links; the routers joined in a ring and by one chord each (a site s
//!   to (37 s + 11) mod S, unless that is itself, a ring neighbour or a
//!   link already made), every router link 1 Gbit/s with a delay of
//!   2 + ((31 a + 17 b) mod 9) ms for sites a < b; N UDP flows, flow i from
//!   host (i / S) mod 4 of site a = i mod S to host (i / S + 1) mod 4 of
//!   site (a + 1 + 13 i mod (S − 1)) mod S, routed by hop count. A network
//!   to cut into partitions: every router link gives at least 2 ms of
//!   lookahead.
//!
//! In both, every link queue holds 1000 packets (drop-tail), each flow
//! sends 1000-byte payloads at load/N, flow i starts at i T / N (T its
//! sending interval) and stops after the traffic's duration; the run lasts
//! one more second to drain.

use netloop_core::{Bytes, DataRate, SimDuration};
use netloop_model::spec::*;

fn node(name: String, kind: NodeKind) -> NodeSpec {
    NodeSpec { name, kind }
}

fn router(name: String) -> NodeSpec {
    node(name, NodeKind::Router(RouterSpec::default()))
}

fn host(name: String) -> NodeSpec {
    node(name, NodeKind::Host)
}

/// 1 Gbit/s with `delay`, a 1000-packet drop-tail queue.
fn gig(delay: SimDuration) -> DirectionSpec {
    DirectionSpec {
        rate: Some(DataRate::from_mbps(1000)),
        delay,
        queue: QueueSpec {
            packets: Some(1000),
            bytes: None,
            discipline: QueueDiscipline::DropTail,
        },
        ..DirectionSpec::default()
    }
}

fn link(a: &str, b: &str, d: DirectionSpec) -> LinkSpec {
    let end = |node: &str| EndpointSpec {
        node: node.into(),
        address: None,
        address6: None,
        interface: None,
    };
    LinkSpec {
        name: format!("{a}-{b}"),
        a: end(a),
        b: end(b),
        subnet: None,
        subnet6: None,
        a_to_b: d.clone(),
        b_to_a: d,
    }
}

/// `flows` CBR flows of 1000-byte payloads sharing `load_mbps`, flow i
/// from `ends(i).0` to `ends(i).1`, starting at i T / N.
fn cbr_flows(
    flows: u32,
    duration_s: u64,
    load_mbps: u64,
    ends: impl Fn(u32) -> (String, String),
) -> Vec<TrafficSpec> {
    let rate_bps = load_mbps * 1_000_000 / u64::from(flows);
    let interval_ns = 1000u128 * 8 * 1_000_000_000 / u128::from(rate_bps);
    (0..flows)
        .map(|i| {
            let (from, to) = ends(i);
            TrafficSpec {
                name: format!("f{i}"),
                from,
                to,
                start: SimDuration::from_nanos(
                    (interval_ns * u128::from(i) / u128::from(flows)) as u64,
                ),
                stop: Some(SimDuration::from_secs(duration_s)),
                count: 1,
                kind: TrafficKind::UdpCbr {
                    rate: DataRate::from_bps(rate_bps),
                    size: Bytes::new(1000),
                },
                ipv6: false,
            }
        })
        .collect()
}

fn spec(
    duration_s: u64,
    nodes: Vec<NodeSpec>,
    links: Vec<LinkSpec>,
    traffic: Vec<TrafficSpec>,
) -> NetworkSpec {
    NetworkSpec {
        run: RunSpec {
            duration: SimDuration::from_secs(duration_s + 1),
            seed: 1,
            ..Default::default()
        },
        nodes,
        links,
        traffic,
        ..NetworkSpec::default()
    }
}

/// The dumbbell (see the module docs).
pub fn dumbbell(flows: u32, duration_s: u64, load_mbps: u64) -> NetworkSpec {
    let h = flows.clamp(1, 100);
    let mut nodes = vec![router("r1".into()), router("r2".into())];
    let mut links = vec![link("r1", "r2", gig(SimDuration::from_millis(10)))];
    for i in 0..h {
        nodes.push(host(format!("l{i}")));
        nodes.push(host(format!("q{i}")));
        links.push(link(
            &format!("l{i}"),
            "r1",
            gig(SimDuration::from_millis(1)),
        ));
        links.push(link(
            &format!("q{i}"),
            "r2",
            gig(SimDuration::from_millis(1)),
        ));
    }
    let traffic = cbr_flows(flows, duration_s, load_mbps, |i| {
        (format!("l{}", i % h), format!("q{}", i % h))
    });
    spec(duration_s, nodes, links, traffic)
}

/// Hosts per site of the wan scenario.
pub const WAN_HOSTS: u32 = 4;

/// The router links of the wan scenario with `sites` sites: (a, b, delay in
/// ms), a < b, in the order made (ring first, then chords).
pub fn wan_links(sites: u32) -> Vec<(u32, u32, u64)> {
    let delay = |a: u32, b: u32| 2 + u64::from((31 * a + 17 * b) % 9);
    let mut made: Vec<(u32, u32, u64)> = Vec::new();
    let mut add = |x: u32, y: u32| {
        let (a, b) = (x.min(y), x.max(y));
        if a != b && !made.iter().any(|&(p, q, _)| (p, q) == (a, b)) {
            made.push((a, b, delay(a, b)));
        }
    };
    for s in 0..sites {
        add(s, (s + 1) % sites);
    }
    for s in 0..sites {
        let t = (37 * s + 11) % sites;
        let neighbour = t == (s + 1) % sites || (t + 1) % sites == s;
        if !neighbour {
            add(s, t);
        }
    }
    made
}

/// The wan scenario (see the module docs); `sites` at least 4.
pub fn wan(sites: u32, flows: u32, duration_s: u64, load_mbps: u64) -> NetworkSpec {
    let mut nodes = Vec::new();
    let mut links = Vec::new();
    for s in 0..sites {
        nodes.push(router(format!("r{s}")));
    }
    for s in 0..sites {
        for j in 0..WAN_HOSTS {
            let h = format!("h{s}_{j}");
            nodes.push(host(h.clone()));
            links.push(link(
                &h,
                &format!("r{s}"),
                gig(SimDuration::from_micros(100)),
            ));
        }
    }
    for (a, b, ms) in wan_links(sites) {
        links.push(link(
            &format!("r{a}"),
            &format!("r{b}"),
            gig(SimDuration::from_millis(ms)),
        ));
    }
    let traffic = cbr_flows(flows, duration_s, load_mbps, |i| {
        let a = i % sites;
        let b = (a + 1 + (13 * i) % (sites - 1)) % sites;
        (
            format!("h{a}_{}", (i / sites) % WAN_HOSTS),
            format!("h{b}_{}", (i / sites + 1) % WAN_HOSTS),
        )
    });
    spec(duration_s, nodes, links, traffic)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netloop_model::partition::{run_threads, Cut};
    use netloop_model::Simulation;

    #[test]
    fn wan_graph_is_a_ring_with_chords_and_flows_cross_it() {
        let l = wan_links(16);
        // The ring, then chords: no self-links, no duplicates.
        assert!(l.len() > 16 && l.len() <= 32, "{}", l.len());
        for (i, &(a, b, d)) in l.iter().enumerate() {
            assert!(a < b && (2..=10).contains(&d));
            assert!(!l[..i].iter().any(|&(p, q, _)| (p, q) == (a, b)));
        }
        let s = wan(16, 64, 1, 100);
        assert_eq!(s.nodes.len(), 16 * 5);
        assert!(s
            .traffic
            .iter()
            .all(|t| t.from[1..].split('_').next() != t.to[1..].split('_').next()));
    }

    /// The wan network delivers its flows (nothing lost at this load) and
    /// gives the same results cut in two.
    #[test]
    fn wan_delivers_and_cuts_in_two_without_changing_results() {
        let s = wan(8, 40, 1, 200);
        let mut one = Simulation::build(&s).expect("builds");
        one.run(u64::MAX, |_, _| true);
        let r = one.results("afap", None, None);
        assert_eq!(r.conservation.unaccounted, 0);
        for f in &r.flows {
            assert_eq!(f.sent_packets, f.received_packets, "{}", f.name);
            assert!(f.sent_packets.unwrap() > 0);
        }
        let cut = Cut::auto(&s, 2).unwrap();
        assert!(
            cut.lookahead >= SimDuration::from_millis(2),
            "{:?}",
            cut.lookahead
        );
        let end = netloop_core::SimTime::ZERO + s.run.duration;
        let p = run_threads(Simulation::build(&s).unwrap(), &cut, end, |_| true).unwrap();
        let two = p.results(&cut, "afap", None, None);
        assert_eq!(
            serde_json::to_string(&two).unwrap(),
            serde_json::to_string(&r).unwrap()
        );
    }
}
