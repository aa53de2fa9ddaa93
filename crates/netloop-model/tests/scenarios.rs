//! Scenario tests of the model in simulated time: exact timing, loss models,
//! TCP goodput, link events, switching, determinism and conservation.

mod common;

use common::*;
use netloop_core::{Bytes, DataRate, SimDuration};
use netloop_model::spec::*;
use netloop_model::Simulation;

fn run(spec: &NetworkSpec) -> Simulation {
    let mut sim = Simulation::build(spec).expect("builds");
    sim.run(1 << 20, |_, _| true);
    assert_conserved(&sim);
    sim
}

#[test]
fn one_frame_takes_serialisation_plus_propagation_to_the_nanosecond() {
    // 10 Mbit/s, 5 ms: a 100-byte UDP payload is a 142-byte frame, 166 bytes
    // on the wire with preamble, FCS and gap: 132.8 us at 10 Mbit/s.
    let mut s = spec(
        ms(100),
        1,
        vec![host("a"), host("b")],
        vec![link("a", "b", dir(Some(10), ms(5)))],
        vec![TrafficSpec {
            stop: Some(ms(50)),
            ..flow("f", "a", "b", cbr(1, 100))
        }],
    );
    s.links[0].b_to_a.delay = ms(7);
    let mut sim = Simulation::build(&s).unwrap();
    let rec = Recorder::default();
    sim.net.add_tap(0, Box::new(rec.clone()));
    sim.run(1 << 20, |_, _| true);
    assert_conserved(&sim);
    let frames = rec.frames();
    let mut checked = 0;
    for tx in frames.iter().filter(|f| !f.rx) {
        let rx = frames
            .iter()
            .find(|f| f.rx && f.dir == tx.dir && f.data == tx.data && f.time >= tx.time)
            .expect("arrived");
        let wire = tx.data.len().max(60) as u64 + 24;
        let ser = wire * 8 * 1_000_000_000 / 10_000_000;
        let prop = if tx.dir == 0 { 5_000_000 } else { 7_000_000 };
        assert_eq!(
            (rx.time - tx.time).as_nanos(),
            ser + prop,
            "frame of {} bytes, dir {}",
            tx.data.len(),
            tx.dir
        );
        checked += 1;
    }
    assert!(
        checked >= 6,
        "ARP both ways and several data frames: {checked}"
    );
    // Back-to-back frames: the second starts exactly when the first's last
    // bit has left (the transmitter is busy for the serialisation time).
    let r = sim.results("afap", None, None);
    let f = &r.flows[0];
    assert_eq!(f.delay_ns.as_ref().unwrap().min, 132_800 + 5_000_000);
}

#[test]
fn queued_frames_leave_back_to_back() {
    // 1000 pps of 1000-byte payloads into a 1 Mbit/s link: the queue fills
    // and frames leave exactly one serialisation time apart.
    let s = spec(
        ms(200),
        1,
        vec![host("a"), host("b")],
        vec![link("a", "b", dir(Some(1), ms(1)))],
        vec![flow("f", "a", "b", cbr(8, 1000))],
    );
    let mut sim = Simulation::build(&s).unwrap();
    let rec = Recorder::default();
    sim.net.add_tap(0, Box::new(rec.clone()));
    sim.run(1 << 20, |_, _| true);
    assert_conserved(&sim);
    let tx: Vec<_> = rec
        .frames()
        .into_iter()
        .filter(|f| !f.rx && f.dir == 0 && probe_seq(&f.data).is_some())
        .collect();
    assert!(tx.len() > 10);
    let ser = (1042u64 + 24) * 8 * 1000; // ns at 1 Mbit/s
    for w in tx[2..].windows(2) {
        assert_eq!((w[1].time - w[0].time).as_nanos(), ser);
    }
    let r = sim.results("afap", None, None);
    assert!(
        r.links[0]
            .a_to_b
            .stats
            .drops
            .get(netloop_model::stats::DropReason::QueueFull)
            == 0
    );
    assert!(r.links[0].a_to_b.stats.queue_high_water_packets > 100);
}

#[test]
fn cbr_over_lossy_bottleneck_matches_the_model() {
    // 10 Mbit/s of payload (1000 B) into a 10 Mbit/s link with 1 % loss.
    // On the wire each datagram is 1042 + 24 bytes, so the link carries
    // 10e6 / (1066*8) frames/s; 1 % of those are lost on the wire.
    let mut d = dir(Some(10), ms(2));
    d.loss = LossSpec::Bernoulli { p: 0.01 };
    let dur = SimDuration::from_secs(20);
    let s = spec(
        dur,
        7,
        vec![host("a"), host("b")],
        vec![link("a", "b", d)],
        vec![TrafficSpec {
            stop: Some(SimDuration::from_secs(19)),
            ..flow("f", "a", "b", cbr(10, 1000))
        }],
    );
    let sim = run(&s);
    let r = sim.results("afap", None, None);
    let l = &r.links[0].a_to_b.stats;
    let lost = l.drops.get(netloop_model::stats::DropReason::RandomLoss) as f64;
    let sent = l.sent_packets as f64;
    // Random loss inside a 4-sigma binomial interval.
    let sigma = (sent * 0.01 * 0.99).sqrt();
    assert!(
        (lost - sent * 0.01).abs() < 4.0 * sigma,
        "lost {lost} of {sent}"
    );
    // Throughput: the link's frame rate times payload times (1 - p).
    let f = &r.flows[0];
    let expected = 10e6 / (1066.0 * 8.0) * 1000.0 * 8.0 * 0.99;
    let got = f.throughput_bps.unwrap();
    assert!(
        (got - expected).abs() / expected < 0.01,
        "throughput {got} vs model {expected}"
    );
    // Everything not lost at random was dropped by the full queue.
    let queue_drops = l.drops.get(netloop_model::stats::DropReason::QueueFull);
    assert!(queue_drops > 0);
    let f_sent = f.sent_packets.unwrap();
    assert_eq!(f_sent, l.offered_packets - 1, "one ARP request in a → b");
}

#[test]
fn gilbert_elliott_losses_come_in_bursts_of_the_configured_mean_length() {
    let mut d = dir(None, ms(1));
    d.loss = LossSpec::GilbertElliott {
        p: 0.01,
        r: 0.25,
        loss_good: 0.0,
        loss_bad: 1.0,
    };
    let s = spec(
        SimDuration::from_secs(21),
        3,
        vec![host("a"), host("b")],
        vec![link("a", "b", d)],
        vec![TrafficSpec {
            stop: Some(SimDuration::from_secs(20)),
            ..flow("f", "a", "b", cbr(80, 1000))
        }],
    );
    let mut sim = Simulation::build(&s).unwrap();
    let rec = Recorder::default();
    sim.net.add_tap(0, Box::new(rec.clone()));
    sim.run(1 << 20, |_, _| true);
    assert_conserved(&sim);
    let mut got: Vec<u64> = rec
        .frames()
        .iter()
        .filter(|f| f.rx && f.dir == 0)
        .filter_map(|f| probe_seq(&f.data))
        .collect();
    got.sort();
    let sent = sim.results("afap", None, None).flows[0]
        .sent_packets
        .unwrap();
    // Runs of missing sequence numbers are the loss bursts.
    let mut bursts = Vec::new();
    let mut prev: Option<u64> = None;
    for &s in &got {
        let gap = s - prev.map_or(0, |p| p + 1);
        if gap > 0 {
            bursts.push(gap);
        }
        prev = Some(s);
    }
    let n = bursts.len() as f64;
    assert!(n > 500.0, "{n} bursts in {sent} packets");
    let mean = bursts.iter().sum::<u64>() as f64 / n;
    // Geometric with mean 1/r = 4: standard error sqrt(1-r)/r/sqrt(n).
    let se = (0.75f64).sqrt() / 0.25 / n.sqrt();
    assert!((mean - 4.0).abs() < 4.0 * se, "mean burst {mean}, se {se}");
    // Mean good run ≈ 1/p = 100 frames.
    let good_mean = (got.len() as f64) / n;
    assert!(
        (good_mean - 100.0).abs() < 15.0,
        "mean good run {good_mean}"
    );
}

#[test]
fn tcp_bulk_over_1gbps_reaches_the_theoretical_goodput() {
    let s = spec(
        SimDuration::from_secs(2),
        1,
        vec![host("a"), host("b")],
        vec![link(
            "a",
            "b",
            dir(Some(1000), SimDuration::from_micros(50)),
        )],
        vec![flow(
            "bulk",
            "a",
            "b",
            TrafficKind::TcpBulk {
                bytes: Some(Bytes::new(50_000_000)),
            },
        )],
    );
    let sim = run(&s);
    let r = sim.results("afap", None, None);
    let tcp = r.flows[0].tcp.as_ref().unwrap();
    assert_eq!(tcp.bytes_received, 50_000_000);
    assert!(tcp.completed_ns.is_some());
    // Full-size segments: 1500-byte IP packets carrying 1460 bytes of
    // payload (smoltcp sends no TCP timestamps), 1538 bytes on the wire.
    let theoretical = 1e9 * 1460.0 / 1538.0;
    let g = tcp.goodput_bps;
    assert!(
        g >= 0.99 * theoretical && g <= theoretical * 1.001,
        "goodput {g} vs {theoretical}"
    );
}

#[test]
fn link_down_drops_and_up_recovers() {
    let s = NetworkSpec {
        events: vec![
            LinkEventSpec {
                at: ms(300),
                link: "a-b".into(),
                direction: Direction::Both,
                action: LinkAction::Down,
            },
            LinkEventSpec {
                at: ms(600),
                link: "a-b".into(),
                direction: Direction::Both,
                action: LinkAction::Up,
            },
            LinkEventSpec {
                at: ms(800),
                link: "a-b".into(),
                direction: Direction::AToB,
                action: LinkAction::Set(LinkChange {
                    delay: Some(ms(20)),
                    ..LinkChange::default()
                }),
            },
        ],
        ..spec(
            SimDuration::from_secs(1),
            1,
            vec![host("a"), host("b")],
            vec![link("a", "b", dir(Some(100), ms(5)))],
            vec![TrafficSpec {
                stop: Some(ms(950)),
                ..flow("f", "a", "b", cbr(1, 125))
            }],
        )
    };
    let sim = run(&s);
    let r = sim.results("afap", None, None);
    let f = &r.flows[0];
    let d = &r.links[0].a_to_b.stats;
    let down = d.drops.get(netloop_model::stats::DropReason::LinkDown);
    // 1 packet per ms: 300 offered while down, plus the 5 that were on the
    // 5 ms wire when it went down (give or take one at the edges).
    assert!((304..=306).contains(&down), "link_down drops {down}");
    assert_eq!(f.sent_packets.unwrap() - f.received_packets.unwrap(), down);
    // After the delay change the one-way delay is 20 ms plus serialisation.
    let delay = f.delay_ns.as_ref().unwrap();
    assert!(
        delay.max >= 20_000_000 && delay.max < 20_100_000,
        "{delay:?}"
    );
    assert!(delay.min < 5_100_000);
}

#[test]
fn hosts_on_a_switch_talk_and_the_switch_learns() {
    let s = spec(
        SimDuration::from_secs(2),
        1,
        vec![host("a"), host("b"), host("c"), switch("sw")],
        vec![
            link("a", "sw", dir(Some(100), ms(1))),
            link("b", "sw", dir(Some(100), ms(1))),
            link("c", "sw", dir(Some(100), ms(1))),
        ],
        vec![
            flow(
                "p1",
                "a",
                "b",
                TrafficKind::Ping {
                    interval: ms(100),
                    size: Bytes::new(56),
                },
            ),
            // Starts after c overheard a's ARP broadcast: by RFC 826's merge
            // rule c must not have learned a from it, so it ARPs itself.
            TrafficSpec {
                start: ms(500),
                ..flow(
                    "p2",
                    "c",
                    "a",
                    TrafficKind::Ping {
                        interval: ms(100),
                        size: Bytes::new(56),
                    },
                )
            },
        ],
    );
    let sim = run(&s);
    let r = sim.results("afap", None, None);
    for f in &r.flows {
        assert_eq!(f.received_packets, f.sent_packets, "{}", f.name);
        // Two links each way at 1 ms plus four serialisations of a 98-byte frame.
        let d = f.delay_ns.as_ref().unwrap();
        assert_eq!(d.min, 4_000_000 + 4 * 122 * 80, "{}", f.name);
        // All but the first (which waits for ARP) take the same time.
        assert!(d.p90.abs_diff(d.min) * 1000 <= d.min, "{}: {d:?}", f.name);
        assert!(
            d.max > 2 * d.min - 100_000,
            "{}: the first ping waits one ARP round trip",
            f.name
        );
    }
    // Only ARP broadcasts (and the first unknown unicast) were flooded.
    let sw = r.nodes.iter().find(|n| n.name == "sw").unwrap();
    let flooded = sw.stats["flooded"].as_u64().unwrap();
    assert!(flooded <= 6, "flooded {flooded}");
    // All three got addresses on one subnet.
    let addrs: Vec<_> = r
        .nodes
        .iter()
        .filter_map(|n| n.interfaces.first().and_then(|i| i.address.clone()))
        .collect();
    assert_eq!(addrs, ["198.18.0.1/24", "198.18.0.2/24", "198.18.0.3/24"]);
}

#[test]
fn same_seed_same_results_different_seed_different_losses() {
    let mk = |seed| {
        let mut d = dir(Some(100), ms(3));
        d.loss = LossSpec::Bernoulli { p: 0.05 };
        d.jitter = Some(JitterSpec {
            amount: ms(1),
            distribution: JitterDistribution::Normal,
            reorder: true,
        });
        spec(
            SimDuration::from_secs(3),
            seed,
            vec![host("a"), host("b")],
            vec![link("a", "b", d)],
            vec![
                flow(
                    "u",
                    "a",
                    "b",
                    TrafficKind::UdpPoisson {
                        rate: DataRate::from_mbps(20),
                        size: Bytes::new(500),
                    },
                ),
                flow("t", "b", "a", TrafficKind::TcpBulk { bytes: None }),
            ],
        )
    };
    let json = |seed| serde_json::to_string(&run(&mk(seed)).results("afap", None, None)).unwrap();
    let (a, b, c) = (json(5), json(5), json(6));
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn jitter_without_reordering_never_reorders_and_with_it_does() {
    let mk = |reorder| {
        let mut d = dir(None, ms(10));
        d.jitter = Some(JitterSpec {
            amount: ms(2),
            distribution: JitterDistribution::Uniform,
            reorder,
        });
        spec(
            SimDuration::from_secs(2),
            1,
            vec![host("a"), host("b")],
            vec![link("a", "b", d)],
            vec![TrafficSpec {
                stop: Some(ms(1500)),
                ..flow("f", "a", "b", cbr(8, 1000))
            }],
        )
    };
    let r = run(&mk(false)).results("afap", None, None);
    assert_eq!(r.flows[0].reordered, Some(0));
    assert!(r.flows[0].jitter_ns.unwrap() > 100_000.0);
    let r = run(&mk(true)).results("afap", None, None);
    assert!(r.flows[0].reordered.unwrap() > 100);
}

/// A full queue drops with a named reason; a datagram larger than the link
/// is fragmented by the sending host (as Linux does), not dropped at the
/// link as `mtu_exceeded` (which only frames from real hosts can meet).
#[test]
fn queue_limits_drop_with_a_named_reason_and_hosts_fragment_to_the_link_mtu() {
    let mut d = dir(Some(1), ms(1));
    d.queue = QueueSpec {
        packets: Some(5),
        bytes: None,
        discipline: QueueDiscipline::DropTail,
    };
    d.mtu = 1000;
    let s = spec(
        SimDuration::from_secs(1),
        1,
        vec![host("a"), host("b")],
        vec![link("a", "b", d)],
        vec![
            flow("big", "a", "b", cbr(1, 1400)),
            flow("burst", "a", "b", cbr(5, 500)),
        ],
    );
    let sim = run(&s);
    let r = sim.results("afap", None, None);
    let st = &r.links[0].a_to_b.stats;
    use netloop_model::stats::DropReason::*;
    assert_eq!(st.drops.get(MtuExceeded), 0);
    assert!(st.drops.get(QueueFull) > 0);
    assert_eq!(st.queue_high_water_packets, 5);
    let a = r.nodes.iter().find(|n| n.name == "a").unwrap();
    assert_eq!(
        a.stats["fragmented"].as_u64(),
        r.flows[0].sent_packets,
        "every 1428-byte datagram split for the 1000-byte link"
    );
    assert!(r.flows[0].received_packets.unwrap() > 0);
}

#[test]
fn tcp_request_response_transactions_take_one_round_trip_each() {
    // 100 Mbit/s, 1 ms each way: a 100-byte request and a 1000-byte response
    // take one round trip plus serialisation; back to back for 2 s.
    let s = spec(
        SimDuration::from_secs(3),
        1,
        vec![host("a"), host("b")],
        vec![link("a", "b", dir(Some(100), ms(1)))],
        vec![TrafficSpec {
            stop: Some(SimDuration::from_secs(2)),
            ..flow(
                "rr",
                "a",
                "b",
                TrafficKind::TcpRr {
                    request: Bytes::new(100),
                    response: Bytes::new(1000),
                    interval: None,
                },
            )
        }],
    );
    let sim = run(&s);
    let r = sim.results("afap", None, None);
    let f = &r.flows[0];
    let tcp = f.tcp.as_ref().unwrap();
    let lat = f.delay_ns.as_ref().unwrap();
    // Request 154 B + response 1054 B frames, +24 B overhead each, at 100 Mbit/s.
    let floor = 2_000_000 + (154 + 24 + 1054 + 24) * 80;
    assert!(lat.min >= floor && lat.min < floor + 100_000, "{lat:?}");
    assert!(lat.p99 < floor + 1_000_000, "{lat:?}");
    // Back to back: about 2 s / latency transactions.
    let expect = 2e9 / lat.mean;
    assert!(
        (tcp.transactions as f64 - expect).abs() <= 2.0,
        "{} vs {expect}",
        tcp.transactions
    );
    assert_eq!(tcp.bytes_received, tcp.transactions * 1000);

    // With an interval, transactions start on schedule.
    let mut s2 = s.clone();
    s2.traffic[0].kind = TrafficKind::TcpRr {
        request: Bytes::new(100),
        response: Bytes::new(1000),
        interval: Some(ms(10)),
    };
    let r = run(&s2).results("afap", None, None);
    let n = r.flows[0].tcp.as_ref().unwrap().transactions;
    assert!(
        (199..=200).contains(&n),
        "{n} transactions at 100/s for 2 s"
    );
}

#[test]
fn on_off_source_averages_rate_times_duty_cycle() {
    // 10 Mbit/s while on, mean on 100 ms, mean off 300 ms: 2.5 Mbit/s on
    // average over a long run, in bursts.
    let s = spec(
        SimDuration::from_secs(61),
        9,
        vec![host("a"), host("b")],
        vec![link("a", "b", dir(None, ms(1)))],
        vec![TrafficSpec {
            stop: Some(SimDuration::from_secs(60)),
            ..flow(
                "oo",
                "a",
                "b",
                TrafficKind::UdpOnOff {
                    rate: DataRate::from_mbps(10),
                    size: Bytes::new(1000),
                    on: ms(100),
                    off: ms(300),
                },
            )
        }],
    );
    let sim = run(&s);
    let f = &sim.results("afap", None, None).flows[0];
    let avg = f.received_bytes as f64 * 8.0 / 60.0;
    // 150 on/off cycles: the mean of the on-fraction has a standard error of
    // about 6 % here; allow 20 %.
    assert!((avg - 2.5e6).abs() / 2.5e6 < 0.2, "average {avg}");
    assert_eq!(f.loss, Some(0.0));
}

#[test]
fn poisson_source_has_exponential_gaps() {
    let s = spec(
        SimDuration::from_secs(11),
        4,
        vec![host("a"), host("b")],
        vec![link("a", "b", dir(None, ms(1)))],
        vec![TrafficSpec {
            stop: Some(SimDuration::from_secs(10)),
            ..flow(
                "p",
                "a",
                "b",
                TrafficKind::UdpPoisson {
                    rate: DataRate::from_mbps(8),
                    size: Bytes::new(1000),
                },
            )
        }],
    );
    let mut sim = Simulation::build(&s).unwrap();
    let rec = Recorder::default();
    sim.net.add_tap(0, Box::new(rec.clone()));
    sim.run(1 << 20, |_, _| true);
    assert_conserved(&sim);
    let t: Vec<f64> = rec
        .frames()
        .iter()
        .filter(|f| !f.rx && probe_seq(&f.data).is_some())
        .map(|f| f.time.as_nanos() as f64)
        .collect();
    let gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
    let n = gaps.len() as f64;
    let mean = gaps.iter().sum::<f64>() / n;
    let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n;
    // Mean gap 1 ms (1000 packets/s); an exponential's CV is 1.
    assert!((mean - 1e6).abs() < 0.05e6, "mean gap {mean}");
    let cv = var.sqrt() / mean;
    assert!((cv - 1.0).abs() < 0.05, "coefficient of variation {cv}");
}
