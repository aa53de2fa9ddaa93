//! Active queue management in simulated time: CoDel (RFC 8289), FQ-CoDel
//! (RFC 8290) and RED against drop-tail, behaving as their RFCs and paper
//! describe on a 10 Mbit/s bottleneck with a 40 ms round trip, under a
//! saturating TCP flow whose window (256 KiB) is far more than the path's
//! bandwidth-delay product (50 KB): what a drop-tail buffer fills with.

mod common;

use common::*;
use netloop_core::{SimDuration, SimTime};
use netloop_model::spec::*;
use netloop_model::stats::DropReason;
use netloop_model::Simulation;

const SECS: u64 = 30;
/// The queue limit of every discipline here: 100 packets, 123 ms of full
/// frames at 10 Mbit/s.
const LIMIT: u32 = 100;

/// a → b at 10 Mbit/s and 20 ms each way, `discipline` in front of a's
/// side, a bulk TCP flow a → b and a ping from a every 100 ms (a sparse
/// flow beside it).
fn bottleneck(discipline: QueueDiscipline) -> NetworkSpec {
    let mut d = dir(Some(10), ms(20));
    d.queue = QueueSpec {
        packets: Some(LIMIT),
        bytes: None,
        discipline,
    };
    let mut l = link("a", "b", d);
    l.b_to_a.queue = QueueSpec::default();
    spec(
        SimDuration::from_secs(SECS),
        3,
        vec![host("a"), host("b")],
        vec![l],
        vec![
            flow("bulk", "a", "b", TrafficKind::TcpBulk { bytes: None }),
            flow(
                "ping",
                "a",
                "b",
                TrafficKind::Ping {
                    interval: ms(100),
                    size: netloop_core::Bytes::new(56),
                },
            ),
        ],
    )
}

/// What the run showed at a → b after the first `warm` seconds: the mean
/// queueing delay of the frames sent (ns), the queue delay sampled every
/// 10 ms (from its bytes at the line's rate), the bulk flow's goodput
/// (bit/s), the ping's median round trip (whole run) and the drops after
/// the warm-up. (Slow start at the beginning can overflow any of these
/// buffers before an AQM's first interval is over: the steady state is
/// what the algorithms are about.)
struct Seen {
    mean_queue_ns: f64,
    samples_ms: Vec<f64>,
    goodput_bps: f64,
    ping_p50_ns: u64,
    aqm_drops: u64,
    full_drops: u64,
    high_water: u64,
}

fn run(discipline: QueueDiscipline, warm: u64) -> Seen {
    let spec = bottleneck(discipline);
    let mut sim = Simulation::build(&spec).expect("builds");
    let at = |s: u64| SimTime::ZERO + SimDuration::from_secs(s);
    sim.run_until(at(warm), 1 << 20, |_, _| true);
    let r0 = sim.results("afap", None, None);
    let mut samples_ms = Vec::new();
    let mut t = at(warm);
    while t < at(SECS) {
        t += ms(10);
        sim.run_until(t, 1 << 20, |_, _| true);
        samples_ms.push(sim.net.links()[0].dirs[0].queue.bytes() as f64 * 8.0 / 10e6 * 1e3);
    }
    sim.run(1 << 20, |_, _| true);
    assert_conserved(&sim);
    let r = sim.results("afap", None, None);
    let (s0, s) = (&r0.links[0].a_to_b.stats, &r.links[0].a_to_b.stats);
    let bulk = r.flows.iter().find(|f| f.name == "bulk").unwrap();
    let bulk0 = r0.flows.iter().find(|f| f.name == "bulk").unwrap();
    let bytes =
        bulk.tcp.as_ref().unwrap().bytes_received - bulk0.tcp.as_ref().unwrap().bytes_received;
    let ping = r.flows.iter().find(|f| f.name == "ping").unwrap();
    Seen {
        mean_queue_ns: (s.queue_delay_sum_ns - s0.queue_delay_sum_ns) as f64
            / (s.sent_packets - s0.sent_packets) as f64,
        samples_ms,
        goodput_bps: bytes as f64 * 8.0 / (SECS - warm) as f64,
        ping_p50_ns: ping.delay_ns.as_ref().unwrap().p50,
        aqm_drops: s.drops.get(DropReason::AqmDrop) - s0.drops.get(DropReason::AqmDrop),
        full_drops: s.drops.get(DropReason::QueueFull) - s0.drops.get(DropReason::QueueFull),
        high_water: s.queue_high_water_packets,
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn codel_keeps_the_standing_queue_near_its_target_where_drop_tail_fills_its_buffer() {
    let tail = run(QueueDiscipline::DropTail, 5);
    let codel = run(QueueDiscipline::Codel(CodelSpec::default()), 5);
    eprintln!(
        "drop-tail: mean queue {:.1} ms, median sample {:.1} ms, goodput {:.2} Mbit/s, drops {}; \
         codel: mean queue {:.1} ms, median sample {:.1} ms, goodput {:.2} Mbit/s, aqm drops {}, full {}",
        tail.mean_queue_ns / 1e6,
        median(&tail.samples_ms),
        tail.goodput_bps / 1e6,
        tail.full_drops,
        codel.mean_queue_ns / 1e6,
        median(&codel.samples_ms),
        codel.goodput_bps / 1e6,
        codel.aqm_drops,
        codel.full_drops
    );
    // Drop-tail: the window is larger than the path, so the buffer fills
    // (100 full frames: 123 ms) and stays well above half full.
    assert_eq!(tail.high_water, LIMIT as u64);
    assert!(tail.full_drops > 0 && tail.aqm_drops == 0);
    assert!(
        tail.mean_queue_ns > 60e6,
        "drop-tail mean queue {} ns",
        tail.mean_queue_ns
    );
    // CoDel: no standing queue above its 5 ms target (RFC 8289 §1), by its
    // own drops, not the buffer's. With one Reno flow the queue drains
    // after each drop halves the window, so the mean sits below target
    // (measured: 2.1 ms), and the line is busy most of the time.
    assert!(codel.aqm_drops > 0 && codel.full_drops == 0);
    let m = codel.mean_queue_ns / 1e6;
    assert!(
        (0.5..=7.5).contains(&m),
        "CoDel's mean queueing delay {m:.2} ms"
    );
    let p50 = median(&codel.samples_ms);
    assert!(p50 <= 5.0, "CoDel's median queue {p50:.2} ms");
    assert!(codel.goodput_bps > 7.5e6, "goodput {}", codel.goodput_bps);
    // A sparse flow's round trip: the queue's delay on top of 40 ms.
    assert!(
        tail.ping_p50_ns > 100_000_000,
        "drop-tail ping {}",
        tail.ping_p50_ns
    );
    assert!(
        codel.ping_p50_ns < 60_000_000,
        "CoDel ping {}",
        codel.ping_p50_ns
    );
}

#[test]
fn fq_codel_serves_a_sparse_flow_at_once_beside_a_bulk_flow() {
    let fq = run(QueueDiscipline::FqCodel(FqCodelSpec::default()), 5);
    let codel = run(QueueDiscipline::Codel(CodelSpec::default()), 5);
    eprintln!(
        "fq-codel: ping p50 {:.2} ms, mean queue {:.1} ms, goodput {:.2} Mbit/s; codel: ping p50 {:.2} ms",
        fq.ping_p50_ns as f64 / 1e6,
        fq.mean_queue_ns / 1e6,
        fq.goodput_bps / 1e6,
        codel.ping_p50_ns as f64 / 1e6
    );
    // The ping is a new flow each time it sends (its queue empties between
    // requests): it goes ahead of the bulk flow's queue, waiting at most for
    // the frame on the wire (1.23 ms) — RFC 8290 §1.3.
    let base = 40_000_000 + 2 * 100_000; // propagation and its own frames
    assert!(
        fq.ping_p50_ns < base + 1_500_000,
        "FQ-CoDel ping {}",
        fq.ping_p50_ns
    );
    // Behind CoDel alone it waits for whatever queue stands.
    assert!(codel.ping_p50_ns > fq.ping_p50_ns);
    // The bulk flow is still managed by CoDel on its own queue.
    assert!(fq.aqm_drops > 0);
    let m = fq.mean_queue_ns / 1e6;
    assert!(
        (0.5..=7.5).contains(&m),
        "FQ-CoDel's mean queueing delay {m:.2} ms"
    );
    assert!(fq.aqm_drops > 0 && fq.full_drops == 0);
    assert!(fq.goodput_bps > 7.5e6, "goodput {}", fq.goodput_bps);
}

#[test]
fn red_drops_early_and_keeps_the_average_between_its_thresholds() {
    let red = run(
        QueueDiscipline::Red(RedSpec {
            min_threshold: 10.0,
            max_threshold: 30.0,
            ..RedSpec::default()
        }),
        5,
    );
    eprintln!(
        "red: mean queue {:.1} ms, median sample {:.1} ms, goodput {:.2} Mbit/s, aqm {}, full {}",
        red.mean_queue_ns / 1e6,
        median(&red.samples_ms),
        red.goodput_bps / 1e6,
        red.aqm_drops,
        red.full_drops
    );
    // Early drops, and past slow start the buffer never overflows.
    assert!(red.aqm_drops > 0 && red.full_drops == 0);
    // The queue hovers around the thresholds: 10 … 30 packets are 12 …
    // 37 ms of full frames (with gentle RED up to 60 packets).
    let m = median(&red.samples_ms);
    assert!((5.0..=60.0).contains(&m), "RED's median queue {m:.2} ms");
    assert!(red.goodput_bps > 7.5e6, "goodput {}", red.goodput_bps);
}

#[test]
fn runs_with_aqm_are_deterministic() {
    for d in [
        QueueDiscipline::Red(RedSpec::default()),
        QueueDiscipline::FqCodel(FqCodelSpec::default()),
    ] {
        let mut spec = bottleneck(d);
        spec.run.duration = SimDuration::from_secs(5);
        let once = || {
            let mut sim = Simulation::build(&spec).unwrap();
            sim.run(1 << 20, |_, _| true);
            serde_json::to_string(&sim.results("afap", None, None).links).unwrap()
        };
        assert_eq!(once(), once());
    }
}
