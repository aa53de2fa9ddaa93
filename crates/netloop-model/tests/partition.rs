//! Partitioned runs give the results of a single run, byte for byte, however
//! the network is cut; cuts that cannot work are refused with a clear error.

mod common;

use common::*;
use netloop_core::{Bytes, DataRate, SimDuration, SimTime};
use netloop_model::partition::{
    run_threads, run_threads_with_taps, Cut, CutError, PartitionTaps, SyncMethod,
};

/// Both ways partitions keep in step: each must give one run's results.
const SYNCS: [SyncMethod; 2] = [SyncMethod::Windowed, SyncMethod::NullMessages];
use netloop_model::series::SeriesWriter;
use netloop_model::spec::*;
use netloop_model::Simulation;

fn ping(interval_ms: u64) -> TrafficKind {
    TrafficKind::Ping {
        interval: ms(interval_ms),
        size: Bytes::new(56),
    }
}

/// Two routers joined by an impaired bottleneck (loss, duplication,
/// corruption, jitter that reorders), four hosts on each side, traffic of
/// every kind both ways across it, and scheduled changes to the
/// bottleneck (down, up, a lower delay) and to a host link.
fn dumbbell(seed: u64) -> NetworkSpec {
    let mut bottleneck = dir(Some(20), ms(6));
    bottleneck.loss = LossSpec::Bernoulli { p: 0.01 };
    bottleneck.duplicate = 0.005;
    bottleneck.corrupt = 0.002;
    bottleneck.jitter = Some(JitterSpec {
        amount: ms(1),
        distribution: JitterDistribution::Uniform,
        reorder: true,
    });
    bottleneck.queue = QueueSpec {
        packets: Some(40),
        ..QueueSpec::default()
    };
    let mut nodes = vec![router("r1"), router("r2")];
    let mut links = vec![link("r1", "r2", bottleneck)];
    for i in 1..=8 {
        let h = format!("h{i}");
        let r = if i <= 4 { "r1" } else { "r2" };
        nodes.push(host(&h));
        links.push(link(&h, r, dir(Some(100), ms(1))));
    }
    let traffic = vec![
        flow("cbr", "h1", "h5", cbr(4, 1000)),
        flow("tcp", "h6", "h2", TrafficKind::TcpBulk { bytes: None }),
        flow(
            "rr",
            "h3",
            "h7",
            TrafficKind::TcpRr {
                request: Bytes::new(200),
                response: Bytes::new(3000),
                interval: Some(ms(20)),
            },
        ),
        flow("ping", "h8", "h4", ping(50)),
        flow(
            "poisson",
            "h5",
            "h1",
            TrafficKind::UdpPoisson {
                rate: DataRate::from_mbps(2),
                size: Bytes::new(300),
            },
        ),
        TrafficSpec {
            count: 3,
            ..flow(
                "onoff",
                "h2",
                "h6",
                TrafficKind::UdpOnOff {
                    rate: DataRate::from_mbps(3),
                    size: Bytes::new(700),
                    on: ms(100),
                    off: ms(100),
                },
            )
        },
        flow("trace", "h4", "h8", TrafficKind::Traceroute { max_hops: 5 }),
        // Local: never crosses a cut between the routers.
        flow("local", "h1", "h3", cbr(1, 200)),
    ];
    let mut s = spec(SimDuration::from_secs(3), seed, nodes, links, traffic);
    let ev = |at_ms, link: &str, direction, action| LinkEventSpec {
        at: ms(at_ms),
        link: link.into(),
        direction,
        action,
    };
    s.events = vec![
        ev(1000, "r1-r2", Direction::Both, LinkAction::Down),
        ev(1200, "r1-r2", Direction::Both, LinkAction::Up),
        ev(
            1500,
            "r1-r2",
            Direction::AToB,
            LinkAction::Set(LinkChange {
                delay: Some(ms(4)),
                ..LinkChange::default()
            }),
        ),
        ev(2000, "h2-r1", Direction::BToA, LinkAction::Down),
        ev(2300, "h2-r1", Direction::BToA, LinkAction::Up),
    ];
    s
}

/// A ring of four routers, each with a switch (joined to it at zero delay)
/// and two hosts behind the switch; flows between every pair of sites.
fn ring(seed: u64) -> NetworkSpec {
    let mut nodes = Vec::new();
    let mut links = Vec::new();
    for i in 0..4 {
        nodes.push(router(&format!("r{i}")));
        nodes.push(switch(&format!("s{i}")));
        links.push(link(&format!("r{i}"), &format!("s{i}"), dir(None, ms(0))));
        for j in 0..2 {
            let h = format!("h{i}{j}");
            nodes.push(host(&h));
            links.push(link(&h, &format!("s{i}"), dir(Some(50), ms(0))));
        }
    }
    for i in 0..4 {
        let d = dir(Some(30), ms(2 + i));
        links.push(link(&format!("r{i}"), &format!("r{}", (i + 1) % 4), d));
    }
    let mut traffic = Vec::new();
    for i in 0..4 {
        for k in 1..4 {
            let to = (i + k) % 4;
            traffic.push(flow(
                &format!("u{i}{to}"),
                &format!("h{i}0"),
                &format!("h{to}1"),
                cbr(2, 400 + 100 * k),
            ));
        }
        traffic.push(flow(
            &format!("t{i}"),
            &format!("h{i}1"),
            &format!("h{}0", (i + 2) % 4),
            TrafficKind::TcpBulk {
                bytes: Some(Bytes::new(300_000)),
            },
        ));
    }
    spec(SimDuration::from_secs(2), seed, nodes, links, traffic)
}

fn single(s: &NetworkSpec) -> String {
    let mut sim = Simulation::build(s).expect("valid spec");
    sim.run(u64::MAX, |_, _| true);
    assert_conserved(&sim);
    serde_json::to_string_pretty(&sim.results("afap", None, None)).unwrap()
}

/// The results of `s` cut by `cut`, kept in step by each of [`SYNCS`]
/// (which must agree), and the frames that crossed.
fn partitioned(s: &NetworkSpec, cut: &Cut) -> (String, u64) {
    let mut got: Option<(String, u64)> = None;
    for sync in SYNCS {
        let sim = Simulation::build(s).expect("valid spec");
        let end = SimTime::ZERO + s.run.duration;
        let p =
            run_threads_with_taps(sim, cut, end, |_| true, Vec::new(), None, sync).expect("runs");
        let report = p.report(cut);
        assert_eq!(report.sync, sync.name());
        assert_eq!(report.per_partition.len(), cut.parts as usize);
        let out: u64 = report.per_partition.iter().map(|x| x.frames_out).sum();
        let inn: u64 = report.per_partition.iter().map(|x| x.frames_in).sum();
        assert_eq!(out, inn, "every frame sent across is received ({sync:?})");
        let nulls: u64 = report
            .per_partition
            .iter()
            .filter_map(|x| x.null_messages)
            .sum();
        if sync == SyncMethod::NullMessages && !cut.cut_links.is_empty() {
            assert!(nulls > 0, "null messages were sent");
        } else {
            assert_eq!(nulls, 0, "{sync:?}");
        }
        let r = p.results(cut, "afap", None, None);
        assert_eq!(
            r.conservation.unaccounted, 0,
            "{sync:?}: {:?}",
            r.conservation
        );
        let text = serde_json::to_string_pretty(&r).unwrap();
        match &got {
            None => got = Some((text, out)),
            Some((want, crossed)) => {
                assert!(
                    &text == want,
                    "{sync:?} differs from windowed, {} partitions ({:?}): {}",
                    cut.parts,
                    cut.part_of,
                    first_difference(&text, want)
                );
                assert_eq!(out, *crossed, "{sync:?}: the same frames cross");
            }
        }
    }
    got.expect("two runs")
}

/// Where two JSON texts first differ, for a readable failure.
fn first_difference(a: &str, b: &str) -> String {
    let line = a
        .lines()
        .zip(b.lines())
        .position(|(x, y)| x != y)
        .unwrap_or(0);
    format!(
        "line {}: {:?} vs {:?}",
        line + 1,
        a.lines().nth(line),
        b.lines().nth(line)
    )
}

fn assert_same_for_every_cut(s: &NetworkSpec, cuts: &[Cut]) {
    let want = single(s);
    for cut in cuts {
        let (got, crossed) = partitioned(s, cut);
        assert!(
            got == want,
            "{} partitions ({:?}) differ from one: {}",
            cut.parts,
            cut.part_of,
            first_difference(&got, &want)
        );
        if cut.cut_links.is_empty() {
            assert_eq!(crossed, 0);
        } else {
            assert!(crossed > 0, "frames crossed the cut {:?}", cut.part_of);
        }
    }
}

#[test]
fn dumbbell_gives_the_same_results_cut_into_1_2_4_and_8() {
    let s = dumbbell(11);
    let mut cuts: Vec<Cut> = [1, 2, 4, 8]
        .iter()
        .map(|&n| Cut::auto(&s, n).expect("cuttable"))
        .collect();
    // The automatic cut of 2 is across the bottleneck (the longest delay).
    assert_eq!(cuts[1].cut_links, [0]);
    assert_eq!(
        cuts[1].lookahead,
        ms(3),
        "the 4 ms set at 1.5 s, less 1 ms of jitter"
    );
    // Every node on its own (cuts every link), and an odd given cut.
    let n = s.nodes.len() as u32;
    cuts.push(Cut::given(&s, (0..n).collect(), n).unwrap());
    cuts.push(Cut::given(&s, (0..n).map(|v| (v * 7) % 3).collect(), 3).unwrap());
    assert_same_for_every_cut(&s, &cuts);
}

/// An in-memory file for a series.
#[derive(Clone, Default)]
struct Buffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Buffer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The time series of `s` every `every`, run whole or (with `cut`) cut.
fn series(s: &NetworkSpec, every: SimDuration, cut: Option<(&Cut, SyncMethod)>) -> String {
    let mut sim = Simulation::build(s).expect("valid spec");
    let buf = Buffer::default();
    let mut w = SeriesWriter::new(Box::new(buf.clone()), every, &sim.net, &sim.flows, None)
        .expect("in memory");
    let end = SimTime::ZERO + s.run.duration;
    match cut {
        None => sim.run_sampled(&mut w, u64::MAX, |_, _| true).unwrap(),
        Some((cut, sync)) => {
            let p = run_threads_with_taps(
                sim,
                cut,
                end,
                |_| true,
                Vec::new(),
                Some((every, &mut w)),
                sync,
            )
            .expect("runs");
            assert!(p.series_error.is_none());
        }
    }
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    text
}

/// The time series of a run cut into partitions is the one run whole,
/// line for line: link changes across the cut, traffic across it both
/// ways, an interval that is not a divisor of the run (a last sample off
/// the grid) and one longer than the gaps between events.
#[test]
fn the_time_series_is_the_same_however_the_network_is_cut() {
    for (name, s) in [("dumbbell", dumbbell(5)), ("ring", ring(9))] {
        for every in [SimDuration::from_millis(70), SimDuration::from_millis(500)] {
            let want = series(&s, every, None);
            let lines = want.lines().count();
            assert!(lines > 4, "{name}: {lines} lines");
            // Something moved: the last sample's counters are not all zero.
            let last: serde_json::Value =
                serde_json::from_str(want.lines().last().unwrap()).unwrap();
            assert!(last["flows"][0][0].as_u64().unwrap() > 0, "{name}: {last}");
            for parts in [2, 4, 8] {
                let cut = Cut::auto(&s, parts).expect("cuttable");
                for sync in SYNCS {
                    let got = series(&s, every, Some((&cut, sync)));
                    assert!(
                        got == want,
                        "{name}, every {every}, {parts} partitions ({:?}, {sync:?}): {}",
                        cut.part_of,
                        first_difference(&got, &want)
                    );
                }
            }
        }
    }
}

/// A chain h1 – r0 – ra ═ 5 ms ═ rb – h2 whose other links have no delay
/// and no rate, with pings both ways: at one instant an event schedules
/// another for the same instant with a lower key (a frame crosses a
/// zero-delay link), so the keys of the events run at an instant go down.
fn zero_delay_chain() -> NetworkSpec {
    let nodes = vec![
        host("h1"),
        router("r0"),
        router("ra"),
        router("rb"),
        host("h2"),
    ];
    let links = vec![
        link("r0", "ra", dir(None, SimDuration::ZERO)),
        link("h2", "rb", dir(None, SimDuration::ZERO)),
        link("ra", "rb", dir(Some(100), ms(5))),
        link("h1", "r0", dir(None, SimDuration::ZERO)),
    ];
    let traffic = vec![
        flow("p1", "h1", "h2", ping(10)),
        flow("p2", "h2", "h1", ping(7)),
    ];
    spec(SimDuration::from_millis(500), 1, nodes, links, traffic)
}

/// Taps see every frame once, in one run and in a partitioned one alike:
/// within a run each frame's order (time, key, place) is strictly
/// increasing, and the frames the partitions saw, sorted by it, are those
/// of one run in its order. That is what lets a capture's parts merge into
/// the file one run writes (netloop_io::pcapparts). Zero-delay links
/// (the chain, the ring's switches) make an instant's event keys go down.
#[test]
fn taps_see_the_frames_of_one_run_in_its_order_however_cut() {
    let chain = zero_delay_chain();
    let chain_cut = Cut::given(&chain, vec![0, 0, 0, 1, 1], 2).unwrap();
    for (s, mut cuts) in [
        (dumbbell(11), vec![2, 4, 8]),
        (ring(3), vec![2, 3, 4, 8]),
        (chain, vec![]),
    ]
    .map(|(s, ns)| {
        let cuts: Vec<Cut> = ns.iter().map(|&k| Cut::auto(&s, k).unwrap()).collect();
        (s, cuts)
    }) {
        if s.nodes.len() == 5 {
            cuts.push(chain_cut.clone());
        }
        assert_taps_merge(&s, &cuts);
    }
}

fn assert_taps_merge(s: &NetworkSpec, cuts: &[Cut]) {
    let links = s.links.len();
    let mut sim = Simulation::build(s).unwrap();
    let one: Vec<Recorder> = (0..links).map(|_| Recorder::default()).collect();
    for (link, r) in one.iter().enumerate() {
        sim.net.add_tap(link, Box::new(r.clone()));
    }
    sim.run(u64::MAX, |_, _| true);
    for r in &one {
        assert!(
            r.frames().windows(2).all(|w| w[0].order < w[1].order),
            "one tap's frames come in strictly increasing order"
        );
    }
    // One run's frames on all links, in the order it showed them.
    let mut want: Vec<(usize, Seen)> = Vec::new();
    for (link, r) in one.iter().enumerate() {
        want.extend(r.frames().into_iter().map(|f| (link, f)));
    }
    want.sort_by_key(|(_, f)| f.order);
    assert!(want.len() > 50, "{} frames", want.len());
    let shown = |v: &[(usize, Seen)]| -> Vec<(SimTime, usize, usize, bool, Vec<u8>)> {
        v.iter()
            .map(|(l, f)| (f.time, *l, f.dir, f.rx, f.data.clone()))
            .collect()
    };
    for (cut, sync) in cuts.iter().flat_map(|c| SYNCS.map(|s| (c, s))) {
        let recorders: Vec<Vec<Recorder>> = (0..cut.parts)
            .map(|_| (0..links).map(|_| Recorder::default()).collect())
            .collect();
        let taps: Vec<PartitionTaps> = recorders
            .iter()
            .map(|rs| {
                rs.iter()
                    .enumerate()
                    .map(|(l, r)| {
                        (
                            l,
                            Box::new(r.clone()) as Box<dyn netloop_model::network::Tap>,
                        )
                    })
                    .collect()
            })
            .collect();
        let end = SimTime::ZERO + s.run.duration;
        run_threads_with_taps(
            Simulation::build(s).unwrap(),
            cut,
            end,
            |_| true,
            taps,
            None,
            sync,
        )
        .unwrap();
        let mut got: Vec<(usize, Seen)> = Vec::new();
        for rs in &recorders {
            for (link, r) in rs.iter().enumerate() {
                got.extend(r.frames().into_iter().map(|f| (link, f)));
            }
        }
        got.sort_by_key(|(_, f)| f.order);
        let (got, want) = (shown(&got), shown(&want));
        assert_eq!(got.len(), want.len(), "{} partitions, {sync:?}", cut.parts);
        if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
            panic!(
                "{} partitions {:?} ({sync:?}): frame {i} of {} differs: at {} on link {} against at {} on link {} in one run",
                cut.parts,
                cut.part_of,
                got.len(),
                got[i].0,
                got[i].1,
                want[i].0,
                want[i].1
            );
        }
    }
}

#[test]
fn ring_gives_the_same_results_cut_into_2_3_4_and_8() {
    let s = ring(3);
    let cuts: Vec<Cut> = [2, 3, 4, 8]
        .iter()
        .map(|&n| Cut::auto(&s, n).expect("cuttable"))
        .collect();
    // Zero-delay links (router to switch, hosts to switch) are never cut:
    // each site stays whole.
    for cut in &cuts {
        for &li in &cut.cut_links {
            assert!(s.links[li].name.starts_with('r') && s.links[li].b.node.starts_with('r'));
        }
    }
    assert_eq!(cuts[2].cut_links.len(), 4, "four sites on four partitions");
    assert_eq!(cuts[2].lookahead, ms(2));
    assert_same_for_every_cut(&s, &cuts);
}

/// Frames that reach a router at the same nanosecond from both sides of
/// the cut, competing for one small queue: which goes first decides which
/// is dropped and how long each waits, so results depend on how such ties
/// break. A single queue broke them by global insertion order, which a
/// partitioned run cannot reproduce (frames from the other side are put on
/// their wire later, in a batch).
#[test]
fn ties_at_one_moment_break_the_same_way_across_the_cut() {
    let mut out = dir(Some(10), ms(1));
    out.queue = QueueSpec {
        packets: Some(3),
        ..QueueSpec::default()
    };
    let mut nodes = vec![router("r1"), router("r2")];
    let mut links = vec![link("r1", "r2", dir(None, ms(2)))];
    for h in ["h1", "h2", "h3"] {
        nodes.push(host(h));
        links.push(link(h, "r1", dir(None, ms(1))));
    }
    for h in ["h5", "h6", "h7"] {
        nodes.push(host(h));
        let d = if h == "h5" {
            out.clone()
        } else {
            dir(None, ms(1))
        };
        links.push(link(h, "r2", d));
    }
    let at = |start_ms, f: TrafficSpec| TrafficSpec {
        start: ms(start_ms),
        ..f
    };
    // h1's and h2's frames reach r2 at 3 ms past each send, h6's and h7's
    // at 1 ms: starting 2 ms apart, all four meet at r2 together, each
    // frame of each flow, on their way to h5 behind 10 Mbit/s.
    let s = spec(
        SimDuration::from_secs(1),
        5,
        nodes,
        links,
        vec![
            at(0, flow("a", "h1", "h5", cbr(3, 1000))),
            at(0, flow("b", "h2", "h5", cbr(3, 1000))),
            at(2, flow("c", "h6", "h5", cbr(3, 1000))),
            at(2, flow("d", "h7", "h5", cbr(3, 1000))),
            at(0, flow("e", "h3", "h5", cbr(3, 1000))),
        ],
    );
    // Across r1-r2 (r1 and its hosts, r2 and its hosts): the ties meet
    // at r2 from both sides of it.
    let cut = Cut::given(&s, vec![0, 1, 0, 0, 0, 1, 1, 1], 2).unwrap();
    assert_eq!(cut.cut_links, [0]);
    let n = s.nodes.len() as u32;
    let each = Cut::given(&s, (0..n).collect(), n).unwrap();
    assert_same_for_every_cut(&s, &[cut, each]);
    // The ties were there to break: some frames waited in h5's queue and
    // some found it full.
    let r: serde_json::Value = serde_json::from_str(&single(&s)).unwrap();
    let to_h5 = &r["links"][4]["b_to_a"];
    assert_eq!(r["links"][4]["name"], "h5-r2");
    assert!(
        to_h5["drops"]["queue_full"].as_u64().unwrap() > 0,
        "{to_h5}"
    );
}

#[test]
fn a_cut_through_a_zero_delay_link_is_refused_by_name() {
    let s = ring(1);
    let n = s.nodes.len();
    // r0 in partition 1, its switch s0 in partition 0.
    let mut part_of = vec![0u32; n];
    part_of[0] = 1;
    let err = Cut::given(&s, part_of, 2).unwrap_err();
    assert!(
        matches!(&err, CutError::ZeroDelay { link, .. } if link == "r0-s0"),
        "{err}"
    );
    assert!(
        err.to_string().contains("link 'r0-s0' cannot be cut"),
        "{err}"
    );
    // Normal jitter can take the whole delay off: no lookahead either.
    let mut s = dumbbell(1);
    s.links[0].a_to_b.jitter = Some(JitterSpec {
        amount: ms(1),
        distribution: JitterDistribution::Normal,
        reorder: false,
    });
    let err = Cut::given(&s, (0..s.nodes.len() as u32).map(|v| v.min(1)).collect(), 2).unwrap_err();
    assert!(matches!(&err, CutError::ZeroDelay { link, .. } if link == "r1-r2"));
    // A change scheduled later that lowers the delay to 0 counts too.
    let mut s = dumbbell(1);
    s.events.push(LinkEventSpec {
        at: ms(2500),
        link: "h1-r1".into(),
        direction: Direction::Both,
        action: LinkAction::Set(LinkChange {
            delay: Some(SimDuration::ZERO),
            ..LinkChange::default()
        }),
    });
    let n = s.nodes.len() as u32;
    let err = Cut::given(&s, (0..n).collect(), n).unwrap_err();
    assert!(matches!(&err, CutError::ZeroDelay { link, .. } if link == "h1-r1"));
    // The automatic cut keeps that link whole.
    let cut = Cut::auto(&s, 8).unwrap();
    let h1 = s.nodes.iter().position(|x| x.name == "h1").unwrap();
    let r1 = s.nodes.iter().position(|x| x.name == "r1").unwrap();
    assert_eq!(cut.part_of[h1], cut.part_of[r1]);
}

#[test]
fn real_hosts_and_bad_assignments_are_refused() {
    let s = spec(
        SimDuration::from_secs(1),
        1,
        vec![attached("x"), host("h")],
        vec![link("x", "h", dir(None, ms(1)))],
        vec![],
    );
    let err = Cut::auto(&s, 2).unwrap_err();
    assert!(err.to_string().contains("node 'x' is a real host"), "{err}");
    let s = dumbbell(1);
    let err = Cut::given(&s, vec![0; 3], 2).unwrap_err();
    assert_eq!(
        err,
        CutError::WrongLength {
            given: 3,
            nodes: 10
        }
    );
    let mut part_of = vec![0u32; 10];
    part_of[4] = 2;
    let err = Cut::given(&s, part_of, 2).unwrap_err();
    assert!(err.to_string().contains("node 'h3': partition 2"), "{err}");
    assert_eq!(Cut::auto(&s, 0).unwrap_err(), CutError::NoPartitions);
}

/// In real time every real host is in one partition, numbered 0, whatever
/// the automatic cut would do; a given cut that splits them is refused by
/// name, and simulated nodes go where the cut puts them.
#[test]
fn a_real_time_cut_keeps_the_real_hosts_together_in_partition_0() {
    // x1 — r1 — (10 ms) — r2 — x2, plus simulated hosts on r2's side that
    // make it the heavier half.
    let mut nodes = vec![attached("x1"), router("r1"), router("r2"), attached("x2")];
    let mut links = vec![
        link("x1", "r1", dir(None, ms(1))),
        link("r1", "r2", dir(None, ms(10))),
        link("r2", "x2", dir(None, ms(1))),
    ];
    for i in 0..6 {
        let h = format!("h{i}");
        nodes.push(host(&h));
        links.push(link(&h, "r2", dir(None, ms(1))));
    }
    let s = spec(SimDuration::from_secs(1), 1, nodes, links, vec![]);
    // Without real hosts in the way, the auto cut would cut the 10 ms link
    // and split x1 from x2; here they are bound together.
    let cut = Cut::for_realtime(&s, None, 2).unwrap();
    assert_eq!(cut.part_of[0], 0, "{:?}", cut.part_of);
    assert_eq!(cut.part_of[3], 0, "{:?}", cut.part_of);
    assert!(
        cut.part_of.contains(&1),
        "two partitions used: {:?}",
        cut.part_of
    );
    // A given cut with both real hosts in partition 1: renumbered.
    let given: Vec<u32> = vec![1, 1, 1, 1, 0, 0, 0, 0, 0, 0];
    let cut = Cut::for_realtime(&s, Some(&given), 2).unwrap();
    assert_eq!(cut.part_of, vec![0, 0, 0, 0, 1, 1, 1, 1, 1, 1]);
    // Split: refused, naming both.
    let split: Vec<u32> = vec![0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
    let err = Cut::for_realtime(&s, Some(&split), 2).unwrap_err();
    assert!(
        err.to_string()
            .contains("real hosts 'x1' (partition 0) and 'x2' (partition 1)"),
        "{err}"
    );
}

/// What ranks send each other at the end (each its share of what the
/// results are read from) survives serialisation: a share sent as JSON
/// gives the results it was read for.
#[test]
fn a_share_sent_as_json_gives_the_same_results() {
    use netloop_model::share::Share;
    let s = dumbbell(4);
    let mut sim = Simulation::build(&s).unwrap();
    sim.run(u64::MAX, |_, _| true);
    let want = serde_json::to_string(&sim.results("afap", None, None)).unwrap();
    let share = sim.view().share();
    let got: Share = serde_json::from_slice(&serde_json::to_vec(&share).unwrap()).unwrap();
    let r = sim
        .view()
        .results_from(&got, sim.queue.events_processed(), "afap", None, None);
    assert_eq!(serde_json::to_string(&r).unwrap(), want);
}

/// Frames crossing to a partition in another process go as bytes: they
/// come back the same, metadata included, and a cut-short or corrupt
/// buffer is an error naming where, never a panic.
#[test]
fn crossings_survive_encoding_and_bad_bytes_are_errors() {
    use netloop_model::network::Crossing;
    use netloop_model::{Frame, Gso, GsoKind};
    let mut plain = Frame::copy_from(&[7u8; 90]);
    plain.meta.stamp = 123;
    let mut sup = Frame::copy_from(&(0..200u8).collect::<Vec<_>>());
    sup.meta.gso = Some(Gso {
        kind: GsoKind::TcpV4 { ecn: true },
        hdr_len: 54,
        size: 73,
        segs: 2,
    });
    sup.meta.csum = netloop_core::frame::Checksum::Partial;
    let sent = vec![
        Crossing {
            at: SimTime::from_nanos(5_000_123),
            link: 3,
            dir: 1,
            epoch: 2,
            frame: plain,
        },
        Crossing {
            at: SimTime::from_nanos(u64::MAX - 1),
            link: u32::MAX,
            dir: 0,
            epoch: 0,
            frame: sup,
        },
    ];
    let mut bytes = Vec::new();
    for c in &sent {
        c.encode(&mut bytes);
    }
    let mut rest = &bytes[..];
    for want in &sent {
        let start = bytes.len() - rest.len();
        let got = Crossing::decode(&mut rest, start).unwrap();
        assert_eq!(
            (got.at, got.link, got.dir, got.epoch),
            (want.at, want.link, want.dir, want.epoch)
        );
        assert_eq!(&got.frame[..], &want.frame[..]);
        assert_eq!(got.frame.meta.gso, want.frame.meta.gso);
        assert_eq!(got.frame.meta.csum, want.frame.meta.csum);
        assert_eq!(got.frame.meta.stamp, want.frame.meta.stamp);
    }
    assert!(rest.is_empty());
    // Every cut short of the first crossing's end is an error.
    let first_len = bytes.len() - {
        let mut r = &bytes[..];
        Crossing::decode(&mut r, 0).unwrap();
        r.len()
    };
    for cut in 0..first_len {
        let mut r = &bytes[..cut];
        let e = Crossing::decode(&mut r, 0).unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
    }
    let mut bad = bytes.clone();
    bad[12] = 9; // the direction byte
    let e = Crossing::decode(&mut &bad[..], 0).unwrap_err();
    assert!(e.to_string().contains("direction"), "{e}");
}

/// A run to the end of time ends when nothing is pending in any partition
/// (it used to go on with empty rounds for ever).
#[test]
fn a_run_to_the_end_of_time_ends_when_nothing_is_left() {
    let mut s = dumbbell(3);
    s.events.clear();
    for t in &mut s.traffic {
        t.kind = cbr(1, 500);
        t.stop = Some(ms(200));
    }
    let cut = Cut::auto(&s, 2).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let p = run_threads(Simulation::build(&s).unwrap(), &cut, SimTime::MAX, |_| true).unwrap();
        let r = p.results(&cut, "afap", None, None);
        let _ = tx.send((r.conservation.unaccounted, r.conservation.in_flight_total));
    });
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the run ended");
    assert_eq!(got, (0, 0));
}

/// A run stopped early (Ctrl-C) stops every partition at the same moment,
/// and every frame is still accounted for. A lone ping across the cut: the
/// sender's partition is idle for rounds while its frame arrives on the
/// other side, so a sender standing still at its last event would count
/// that frame as still being serialised (fails without the fix).
#[test]
fn a_run_stopped_early_stands_at_one_moment_and_accounts_for_every_frame() {
    let s = spec(
        SimDuration::from_secs(3),
        1,
        vec![host("a"), host("b")],
        vec![link("a", "b", dir(Some(1), ms(5)))],
        vec![flow("p", "a", "b", ping(700))],
    );
    let end = SimTime::ZERO + s.run.duration;
    // Two partitions joined by the link; and one with no node beside them,
    // or beside both nodes (no link cut): a partition that hears from no
    // one must not carry a stop off to the end.
    let cuts = [
        Cut::given(&s, vec![0, 1], 2).unwrap(),
        Cut::given(&s, vec![0, 1], 3).unwrap(),
        Cut::given(&s, vec![0, 0], 2).unwrap(),
    ];
    for (cut, stop_at, sync) in cuts
        .iter()
        .flat_map(|c| (1..40).flat_map(move |k| SYNCS.map(|s| (c, k, s))))
    {
        // Asked to stop at report `stop_at`: one comes after each round
        // (each step of partition 0 that ran events, with null messages).
        let mut rounds = 0;
        let p = run_threads_with_taps(
            Simulation::build(&s).unwrap(),
            cut,
            end,
            move |_| {
                rounds += 1;
                rounds < stop_at
            },
            Vec::new(),
            None,
            sync,
        )
        .unwrap();
        let r = p.results(cut, "afap", None, None);
        // Later stops may come after the last round (the run has ended).
        if stop_at <= 5 {
            assert!(
                r.meta.sim_time_reached_ns < s.run.duration.as_nanos(),
                "{sync:?}, stop at {stop_at}, {:?} of {}",
                cut.part_of,
                cut.parts
            );
        }
        assert_eq!(
            r.conservation.unaccounted, 0,
            "stopped at round {stop_at} ({sync:?}): {:?}",
            r.conservation
        );
    }
}

/// The automatic cut weighs nodes by the traffic they are expected to
/// carry: two routers whose hosts exchange 10 Mbit/s each go to different
/// partitions, where counting ports and flow ends put both beside the
/// router of four idle hosts (7 + 7 against 10 by ports).
#[test]
fn the_automatic_cut_balances_the_traffic_not_the_ports() {
    let mut nodes = vec![router("ra"), router("rc"), router("rb")];
    let mut links = vec![
        link("ra", "rc", dir(Some(1000), ms(10))),
        link("rc", "rb", dir(Some(1000), ms(10))),
    ];
    let mut traffic = Vec::new();
    for (r, hosts) in [("ra", 2), ("rb", 2), ("rc", 4)] {
        for i in 0..hosts {
            let h = format!("{r}h{i}");
            nodes.push(host(&h));
            links.push(link(&h, r, dir(Some(1000), ms(1))));
        }
        if r != "rc" {
            traffic.push(flow(r, &format!("{r}h0"), &format!("{r}h1"), cbr(10, 1000)));
        }
    }
    let s = spec(SimDuration::from_secs(1), 1, nodes, links, traffic);
    let cut = Cut::auto(&s, 2).unwrap();
    assert_ne!(cut.part_of[0], cut.part_of[2], "{:?}", cut.part_of);
    // Each heavy router keeps its hosts: only the 10 ms links are cut.
    assert_eq!(cut.lookahead, ms(10), "{:?}", cut.part_of);
}

/// The automatic cut prices every threshold: a cut through slightly
/// shorter links that balances the load beats one through the longest
/// links that leaves a partition 10 % over an even share. A ring r1–r2–r3–
/// r4 whose 10 ms links cut it into {r1, r2} and {r3, r4} (55 % and 45 % of
/// the load), where cutting the 9 ms links too lets r1 and r4 share a
/// partition (50 % each); the rule before, the first threshold within 25 %
/// of an even share, took the 10 ms cut.
#[test]
fn the_automatic_cut_takes_a_shorter_lookahead_for_a_balanced_load() {
    let mut nodes = Vec::new();
    let mut links = vec![
        link("r1", "r2", dir(Some(1000), ms(9))),
        link("r2", "r3", dir(Some(1000), ms(10))),
        link("r3", "r4", dir(Some(1000), ms(9))),
        link("r4", "r1", dir(Some(1000), ms(10))),
    ];
    let mut traffic = Vec::new();
    // 7 500, 6 250, 6 250 and 5 000 packets a second, each between two
    // hosts of one router (three nodes on its path).
    for (r, mbps) in [("r1", 60), ("r2", 50), ("r3", 50), ("r4", 40)] {
        nodes.push(router(r));
        for i in 0..2 {
            let h = format!("{r}h{i}");
            nodes.push(host(&h));
            links.push(link(&h, r, dir(Some(1000), ms(1))));
        }
        traffic.push(flow(
            r,
            &format!("{r}h0"),
            &format!("{r}h1"),
            cbr(mbps, 1000),
        ));
    }
    let s = spec(SimDuration::from_secs(1), 1, nodes, links, traffic);
    let cut = Cut::auto(&s, 2).unwrap();
    assert_eq!(cut.lookahead, ms(9), "{:?}", cut.part_of);
    let at = |name: &str| cut.part_of[s.nodes.iter().position(|n| n.name == name).unwrap()];
    assert_eq!(at("r1"), at("r4"), "{:?}", cut.part_of);
    assert_eq!(at("r2"), at("r3"), "{:?}", cut.part_of);
    assert_ne!(at("r1"), at("r2"), "{:?}", cut.part_of);
    let w = netloop_model::partition::expected_load(&s);
    let mut load = [0u64; 2];
    for (v, &p) in cut.part_of.iter().enumerate() {
        load[p as usize] += w[v];
    }
    assert_eq!(load[0], load[1], "{load:?}");
    // Each router keeps its hosts (1 ms links are never worth cutting).
    for r in ["r1", "r2", "r3", "r4"] {
        assert_eq!(at(r), at(&format!("{r}h0")));
        assert_eq!(at(r), at(&format!("{r}h1")));
    }
}

/// The load the automatic cut expects of a flow is what its kind can send:
/// a bulk transfer of 1 MB in a 1 s run is 1 000 segments and 500 ACKs a
/// second, not a full 1 Gbit/s path; request/response back to back over
/// links without delay is bounded by the time on the wire and the path's
/// rate (it was a billion transactions a second); a traceroute's probes are
/// spread over the run.
#[test]
fn expected_loads_follow_what_flows_can_send() {
    use netloop_model::partition::expected_load;
    let nodes = vec![host("a"), router("r"), host("b")];
    let links = vec![
        link("a", "r", dir(Some(1000), SimDuration::ZERO)),
        link("r", "b", dir(Some(1000), SimDuration::ZERO)),
    ];
    let with = |kind: TrafficKind| {
        let s = spec(
            SimDuration::from_secs(1),
            1,
            nodes.clone(),
            links.clone(),
            vec![flow("f", "a", "b", kind)],
        );
        // The router's load less its two ports.
        expected_load(&s)[1] - 2
    };
    let bulk = with(TrafficKind::TcpBulk {
        bytes: Some(Bytes::new(1_500_000)),
    });
    assert_eq!(bulk, 1_500, "1.5 MB in 1 s: 1 000 segments, 500 ACKs");
    let full = with(TrafficKind::TcpBulk { bytes: None });
    assert_eq!(full, 125_000, "1 Gbit/s in 1 500-byte segments, and ACKs");
    let rr = with(TrafficKind::TcpRr {
        request: Bytes::new(100),
        response: Bytes::new(100),
        interval: None,
    });
    // 200 bytes take 1.6 µs at 1 Gbit/s: 625 000 transactions of 3
    // segments, bounded by what the path carries.
    assert_eq!(rr, 125_000);
    let trace = with(TrafficKind::Traceroute { max_hops: 30 });
    assert_eq!(trace, 60);
}
