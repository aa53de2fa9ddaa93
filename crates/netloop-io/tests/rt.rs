//! The real-time scheduler against in-process "interfaces" (Unix datagram
//! socket pairs): no root needed. Frames written on one side come out of the
//! other after the modelled delay, at the right wall-clock moment; runs end on
//! time, on request and by the control hook. Timing bounds are loose: they
//! catch gross errors, the benchmark measures precision.

use netloop_core::{SimDuration, SimTime};
use netloop_io::clock::{mono_ns, RtClock, Start};
use netloop_io::rt::{run_realtime, EndReason, RealPort, RtOptions, Step};
use netloop_io::{BoundaryCounters, FrameIo};
use netloop_model::spec::*;
use netloop_model::Simulation;
use std::io;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// One end of a datagram socket pair, as a real interface.
struct Dgram {
    sock: UnixDatagram,
    c: BoundaryCounters,
    /// Frames carry their sending time (CLOCK_MONOTONIC ns, bytes 16..24),
    /// which `recv_batch` gives as the arrival stamp, as the kernel's is
    /// given for an AF_PACKET ring.
    stamped: bool,
}

impl FrameIo for Dgram {
    fn name(&self) -> &str {
        "dgram"
    }
    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.sock)
    }
    fn recv_batch(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(&[u8], Option<u64>),
    ) -> io::Result<usize> {
        let mut buf = [0u8; 2048];
        let mut n = 0;
        while n < max {
            match self.sock.recv(&mut buf) {
                Ok(len) => {
                    n += 1;
                    if len < 14 {
                        self.c.rx_malformed += 1;
                        continue;
                    }
                    self.c.rx_frames += 1;
                    let stamp = (self.stamped && len >= 24)
                        .then(|| u64::from_ne_bytes(buf[16..24].try_into().unwrap()));
                    f(&buf[..len], stamp);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }
    fn send(&mut self, frame: &[u8]) -> io::Result<bool> {
        if let Err(e) = self.sock.send(frame) {
            self.c.tx_drops += 1;
            return Err(e);
        }
        self.c.tx_frames += 1;
        Ok(true)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn counters(&mut self) -> BoundaryCounters {
        self.c
    }
}

fn attached(name: &str) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        kind: NodeKind::Attached(AttachedSpec {
            interface: format!("if-{name}"),
            force: false,
        }),
    }
}

/// Two external nodes joined by one link of `delay`; returns the simulation,
/// the two ports (model side) and the two sockets (the "real" side).
fn pair(delay: SimDuration) -> (Simulation, Vec<RealPort>, UnixDatagram, UnixDatagram) {
    pair_with(DirectionSpec {
        delay,
        ..DirectionSpec::default()
    })
}

/// Two attached nodes joined by a link whose directions are both `dir`,
/// each with a socket pair as its interface; returns the outer ends.
fn pair_with(dir: DirectionSpec) -> (Simulation, Vec<RealPort>, UnixDatagram, UnixDatagram) {
    let spec = NetworkSpec {
        run: RunSpec {
            duration: SimDuration::from_secs(5),
            ..Default::default()
        },
        nodes: vec![attached("a"), attached("b")],
        links: vec![LinkSpec {
            name: "a-b".into(),
            a: EndpointSpec {
                node: "a".into(),
                address: None,
                address6: None,
                interface: None,
            },
            b: EndpointSpec {
                node: "b".into(),
                address: None,
                address6: None,
                interface: None,
            },
            subnet: None,
            subnet6: None,
            a_to_b: dir.clone(),
            b_to_a: dir,
        }],
        ..Default::default()
    };
    let sim = Simulation::build(&spec).expect("valid spec");
    assert_eq!(sim.real.len(), 2);
    let (ports, a, b) = two_ports(&sim, false, Duration::from_secs(3));
    (sim, ports, a, b)
}

/// A socket pair for each of `sim`'s two real nodes: the ports (model side;
/// `stamped`: see [`Dgram`]) and the two outer ends, reading with `timeout`.
fn two_ports(
    sim: &Simulation,
    stamped: bool,
    timeout: Duration,
) -> (Vec<RealPort>, UnixDatagram, UnixDatagram) {
    let mut ports = Vec::new();
    let mut outside = Vec::new();
    for r in &sim.real {
        let (inner, outer) = UnixDatagram::pair().unwrap();
        inner.set_nonblocking(true).unwrap();
        outer.set_read_timeout(Some(timeout)).unwrap();
        ports.push(RealPort {
            node: r.node,
            host: r.name.clone(),
            io: Box::new(Dgram {
                sock: inner,
                c: BoundaryCounters::default(),
                stamped,
            }),
        });
        outside.push(outer);
    }
    let b = outside.pop().unwrap();
    let a = outside.pop().unwrap();
    (ports, a, b)
}

/// Held by the tests that flood a port (a flood takes a core, and the
/// flood test's timing bound assumes it is the only one) and by the test
/// that tells holds from work (`late_events_while_the_cpu_was_taken_...`):
/// a flood beside it holds its event thread off too, and the 5 ms of work it
/// must see as work then counts as a hold.
static FLOODS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// [`FLOODS`], whatever a test that held it did.
fn one_flood_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    FLOODS.lock().unwrap_or_else(|e| e.into_inner())
}

fn frame(seq: u8) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f[14] = seq;
    f
}

/// Run options for a test: no real-time priority, no CPU pinning, no spin,
/// lateness counted from 1 s, until `until`.
fn options(stop: &AtomicBool, until: SimDuration) -> RtOptions<'_> {
    RtOptions {
        until: SimTime::ZERO + until,
        spin_ns: 0,
        late_threshold_ns: 1_000_000_000,
        batch: 64,
        stop,
        priority: None,
        cpu: None,
        wake: None,
        partners: None,
        heap_reserve: 0,
    }
}

/// Runs `sim` in real time until simulated time passes `after.0` and
/// `done()` holds, the control hook looking every `after.1`.
fn run_stopping_after(
    sim: &mut Simulation,
    ports: &mut [RealPort],
    opts: &RtOptions<'_>,
    after: (SimDuration, SimDuration),
    done: impl Fn() -> bool,
) -> netloop_io::rt::RtReport {
    run_realtime(
        &mut sim.net,
        &mut sim.queue,
        ports,
        Start::WhenReady,
        opts,
        &mut |ctl| {
            if ctl.now > SimTime::ZERO + after.0 && done() {
                Step::Stop
            } else {
                Step::Continue(ctl.now + after.1)
            }
        },
    )
    .expect("the I/O thread starts")
}

#[test]
fn frames_cross_the_model_after_the_link_delay() {
    let (mut sim, mut ports, a, b) = pair(SimDuration::from_millis(20));
    let stop = AtomicBool::new(false);
    let opts = RtOptions {
        spin_ns: 50_000,
        ..options(&stop, SimDuration::from_secs(5))
    };
    let clock = RtClock::start_now();
    let reader = std::thread::spawn(move || {
        // Send three frames 50 ms apart, each timed from the moment it is
        // written until it comes out of the far side.
        let mut rtts = Vec::new();
        for seq in 0..3u8 {
            std::thread::sleep(Duration::from_millis(50));
            let t0 = mono_ns();
            a.send(&frame(seq)).unwrap();
            let mut buf = [0u8; 2048];
            let n = b.recv(&mut buf).expect("frame comes out within 3 s");
            rtts.push((mono_ns() - t0, buf[14], n));
        }
        // A runt is dropped and counted, not passed on.
        a.send(&[1, 2, 3]).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        rtts
    });
    let mut sent_done = false;
    let report = run_realtime(
        &mut sim.net,
        &mut sim.queue,
        &mut ports,
        Start::At(clock),
        &opts,
        &mut |ctl| {
            if reader.is_finished() {
                sent_done = true;
                Step::Stop
            } else {
                Step::Continue(ctl.now + SimDuration::from_millis(5))
            }
        },
    )
    .expect("the I/O thread starts");
    assert!(sent_done);
    let rtts = reader.join().unwrap();
    for (i, &(ns, seq, len)) in rtts.iter().enumerate() {
        assert_eq!(seq as usize, i, "frames in order");
        assert_eq!(len, 60);
        // 20 ms modelled; allow generous slack for a loaded CI machine.
        assert!(
            (20_000_000..40_000_000).contains(&ns),
            "frame {i} took {ns} ns through a 20 ms link"
        );
    }
    assert_eq!(report.end, EndReason::Control);
    assert_eq!(report.rx_frames, 3);
    assert_eq!(report.tx_frames, 3);
    assert_eq!(report.rx_malformed, 1);
    assert!(report.event_lateness.count >= 3);
    assert!(report.wall_seconds > 0.15);
}

#[test]
fn a_run_ends_at_its_duration_and_on_request() {
    let (mut sim, mut ports, _a, _b) = pair(SimDuration::from_millis(1));
    let stop = AtomicBool::new(false);
    let opts = options(&stop, SimDuration::from_millis(200));
    let t0 = mono_ns();
    let r = run_realtime(
        &mut sim.net,
        &mut sim.queue,
        &mut ports,
        Start::WhenReady,
        &opts,
        &mut |_| Step::Continue(SimTime::MAX),
    )
    .expect("the I/O thread starts");
    let took = mono_ns() - t0;
    assert_eq!(r.end, EndReason::Duration);
    assert!(
        (200_000_000..1_200_000_000).contains(&took),
        "a 200 ms run took {took} ns"
    );
    assert!(r.sim_seconds >= 0.2);

    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (mut sim, mut ports, _a, _b) = pair(SimDuration::from_millis(1));
    let r = run_realtime(
        &mut sim.net,
        &mut sim.queue,
        &mut ports,
        Start::WhenReady,
        &RtOptions {
            until: SimTime::ZERO + SimDuration::from_secs(60),
            ..opts
        },
        &mut |_| Step::Continue(SimTime::MAX),
    )
    .expect("the I/O thread starts");
    assert_eq!(r.end, EndReason::Interrupted);
    assert!(r.wall_seconds < 1.0);
}

/// A stop that comes while a backlog of events is due (a model far behind
/// real time) ends the run at once, and a frame read meanwhile does not
/// move the clock past events still queued (time would run backwards:
/// `EventQueue::pop` asserts it in this debug build).
#[test]
fn a_stop_in_the_middle_of_a_backlog_ends_the_run_in_order() {
    // 200 000 frames queued at a 1 Gbit/s link at time 0: their departures
    // spread over the first 134 ms of simulated time.
    let (mut sim, mut ports, a, _b) = pair_with(DirectionSpec {
        rate: Some(netloop_core::DataRate::from_mbps(1000)),
        queue: QueueSpec {
            packets: None,
            bytes: None,
            ..QueueSpec::default()
        },
        ..DirectionSpec::default()
    });
    let node_a = sim.real[0].node;
    for i in 0..200_000u32 {
        assert!(sim
            .net
            .inject(&mut sim.queue, node_a, frame(i as u8).into()));
    }
    // The clock started 300 ms ago: all of that is due at once, and a frame
    // from outside waits to be read with it.
    let clock = RtClock::start_now();
    std::thread::sleep(Duration::from_millis(300));
    a.send(&frame(0xee)).unwrap();
    let stop = AtomicBool::new(false);
    let opts = RtOptions {
        late_threshold_ns: 1_000_000,
        ..options(&stop, SimDuration::from_secs(10))
    };
    let r = run_realtime(
        &mut sim.net,
        &mut sim.queue,
        &mut ports,
        Start::At(clock),
        &opts,
        // Ctrl-C, as the first pass begins.
        &mut |_| {
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            Step::Continue(SimTime::MAX)
        },
    )
    .expect("the I/O thread starts");
    assert_eq!(r.end, EndReason::Interrupted);
    // All of the backlog is some 400 000 events; a stop read only between
    // passes would run them all.
    assert!(
        r.events < 100_000,
        "{} events ran after the stop (it is read every 4096)",
        r.events
    );
    // Cut short, the run's clock stays at the last event it handled.
    assert!(sim.queue.now() < SimTime::ZERO + SimDuration::from_millis(134));
    let c = sim.conservation();
    assert_eq!(c.unaccounted, 0, "{c:?}");
    assert!(c.in_flight_total > 100_000, "{c:?}");
}

/// Flooding one real port as fast as a thread can write does not make the
/// events of an unrelated, timer-driven path (simulated hosts h1 → h2,
/// 2 000 datagrams a second) late: the overload shows as input latency and
/// frames held back at the boundary, not in the scheduler's own lateness.
/// The flood's frames carry their sending time as their arrival stamp (as
/// the kernel stamps a packet ring's), so a backlog gives them old stamps;
/// the events they cause are due before they were read, and that wait is
/// input latency, not lateness. (On this 2-core machine: p99 0.5 µs;
/// counted from the stamps instead, 403 µs.)
///
/// No bound on the lateness's percentiles: the flood's writer and reader,
/// the I/O thread and the event thread are four busy threads on this
/// machine's two cores, and in CI the event thread waited its turn often
/// enough to put p99 at 327 µs (timed bounds belong in the benchmark). What
/// the flood must not do is make events late by their own work: with a
/// threshold of 200 µs, the late events the run does not put down to its
/// event thread being held off its CPU (`late_held_off`) are fewer than a
/// tenth of the timer path's datagrams (30–41 of some 3 400 here, in three
/// runs). The bound is on the datagrams, not on all events: those are
/// mostly the flood's own.
#[test]
fn a_flood_on_one_port_leaves_timer_events_on_time() {
    let _flood = one_flood_at_a_time();
    let topo = r#"
[run]
duration = "10s"
[[node]]
name = "a"
kind = "attached"
interface = "if-a"
[[node]]
name = "b"
kind = "attached"
interface = "if-b"
[[node]]
name = "h1"
kind = "host"
[[node]]
name = "h2"
kind = "host"
[[link]]
endpoints = ["a", "b"]
[[link]]
endpoints = ["h1", "h2"]
rate = "100Mbps"
delay = "1ms"
[[traffic]]
kind = "udp-cbr"
from = "h1"
to = "h2"
rate = "16Mbps"
size = "1000B"
"#;
    let loaded = netloop_config::parse_str(topo, "flood.toml").expect("valid topology");
    let mut sim = Simulation::build(&loaded.spec).expect("builds");
    let (mut ports, a, b) = two_ports(&sim, true, Duration::from_millis(200));
    let done = std::sync::Arc::new(AtomicBool::new(false));
    // Whatever comes out of b is read and thrown away; a is written as fast
    // as the socket takes it, for 1.5 s.
    let d = done.clone();
    let drain = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut n = 0u64;
        while !d.load(std::sync::atomic::Ordering::Relaxed) {
            if b.recv(&mut buf).is_ok() {
                n += 1;
            }
        }
        n
    });
    let flood = std::thread::spawn(move || {
        let t0 = mono_ns();
        let mut sent = 0u64;
        while mono_ns() - t0 < 1_500_000_000 {
            let mut f = frame(sent as u8);
            f[16..24].copy_from_slice(&mono_ns().to_ne_bytes());
            if a.send(&f).is_ok() {
                sent += 1;
            }
        }
        sent
    });
    let stop = AtomicBool::new(false);
    let opts = RtOptions {
        spin_ns: 50_000,
        late_threshold_ns: 200_000,
        ..options(&stop, SimDuration::from_secs(10))
    };
    let r = run_stopping_after(
        &mut sim,
        &mut ports,
        &opts,
        (SimDuration::from_millis(1700), SimDuration::from_millis(10)),
        || flood.is_finished(),
    );
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = flood.join().unwrap();
    let out = drain.join().unwrap();
    let res = sim.results("realtime", None, None);
    let cbr: u64 = res.flows.iter().filter_map(|f| f.received_packets).sum();
    println!(
        "flood: {sent} frames written, {} read by netloop, {out} out of b; cbr datagrams received {cbr}; \
         event lateness p50 {} p99 {} max {} ns, {} of {} events over 200 µs ({} held off); \
         input latency p99 {} ns; output latency p99 {} ns; cpu event {:.2} io {:.2}",
        r.rx_frames,
        r.event_lateness.p50_ns,
        r.event_lateness.p99_ns,
        r.event_lateness.max_ns,
        r.late_events,
        r.events,
        r.late_held_off,
        r.input_latency.p99_ns,
        r.output_latency.p99_ns,
        r.event_cpu_share,
        r.io_cpu_share
    );
    assert!(sent > 10_000, "the flood wrote only {sent} frames");
    assert!(
        r.rx_frames > 10_000,
        "netloop read only {} frames",
        r.rx_frames
    );
    // About 3 400 datagrams in 1.7 s; the path kept its pace.
    assert!(
        cbr > 3_000,
        "the timer-driven path delivered {cbr} datagrams"
    );
    let own = r.late_events - r.late_held_off;
    assert!(
        own <= cbr / 10,
        "{own} events ran over 200 µs late under the flood by the run's own work, against \
         {cbr} datagrams of the timer path (of {} events; p99 {} ns, input latency p99 {} ns)",
        r.events,
        r.event_lateness.p99_ns,
        r.input_latency.p99_ns
    );
    let c = sim.conservation();
    assert_eq!(c.unaccounted, 0, "{c:?}");
}

/// Every frame read from a port enters the model, also one the I/O thread
/// read after the event thread's last look at its queue (a run that ends
/// in the middle of a flood): the ledger's `external` frames are the ports'
/// `rx_frames`, port by port (`entered`), and conservation holds.
#[test]
fn frames_read_as_a_run_ends_enter_the_model() {
    let _flood = one_flood_at_a_time();
    for round in 0..3 {
        let (mut sim, mut ports, a, b) = pair(SimDuration::from_millis(5));
        // The far side's frames are left unread: the model writes them and
        // the socket drops what it has no room for (counted as tx_drops).
        drop(b);
        // Once the run has ended nobody reads the port: a write must not
        // wait for room for ever.
        a.set_write_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let flood = std::thread::spawn(move || {
            let mut sent = 0u64;
            while !d.load(std::sync::atomic::Ordering::Relaxed) {
                if a.send(&frame(sent as u8)).is_ok() {
                    sent += 1;
                }
            }
            sent
        });
        let stop = AtomicBool::new(false);
        let opts = options(&stop, SimDuration::from_secs(10));
        // Ends by the hook while the flood goes on, under load (the I/O
        // thread reading).
        let r = run_stopping_after(
            &mut sim,
            &mut ports,
            &opts,
            (SimDuration::from_millis(300), SimDuration::from_millis(5)),
            || true,
        );
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let sent = flood.join().unwrap();
        assert!(
            r.rx_frames > 1_000,
            "round {round}: read {} of {sent}",
            r.rx_frames
        );
        for p in &r.ports {
            assert_eq!(
                p.entered, p.counters.rx_frames,
                "round {round}: frames read from {} that entered the model",
                p.host
            );
        }
        let c = sim.conservation();
        assert_eq!(
            c.created
                .get(&netloop_model::stats::Origin::External)
                .copied(),
            Some(r.rx_frames),
            "round {round}: frames created as external against frames read: {c:?}"
        );
        assert_eq!(c.unaccounted, 0, "round {round}: {c:?}");
    }
}

/// A panic in the control hook (or the loop) reaches the caller: the I/O
/// thread is told to stop as the scheduler unwinds, instead of being
/// waited for for ever.
#[test]
fn a_panic_in_the_control_hook_ends_the_run_instead_of_hanging_it() {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let outcome = std::panic::catch_unwind(|| {
            let (mut sim, mut ports, _a, _b) = pair(SimDuration::from_millis(1));
            let stop = AtomicBool::new(false);
            let opts = options(&stop, SimDuration::from_secs(30));
            let mut calls = 0;
            let _ = run_realtime(
                &mut sim.net,
                &mut sim.queue,
                &mut ports,
                Start::WhenReady,
                &opts,
                &mut |ctl| {
                    calls += 1;
                    if calls == 3 {
                        panic!("a hook that fails");
                    }
                    Step::Continue(ctl.now + SimDuration::from_millis(5))
                },
            );
        });
        let _ = done_tx.send(outcome.is_err());
    });
    let panicked = done_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("run_realtime hung after its control hook panicked");
    assert!(panicked, "the panic reaches the caller");
}

#[test]
fn simulated_time_starts_once_the_scheduler_is_ready() {
    // Setting up takes time (here a 256 MiB heap reserve: tens of
    // milliseconds of page faults). The frames injected for time zero must
    // run when the run starts, not as late as the setting up took (before,
    // the clock started first and the first events of every run were
    // 1.4 ms late from the scheduler's histograms alone).
    let (mut sim, mut ports, _a, _b) = pair(SimDuration::from_millis(1));
    let node_a = sim.real[0].node;
    for i in 0..10u8 {
        assert!(sim.net.inject(&mut sim.queue, node_a, frame(i).into()));
    }
    let stop = AtomicBool::new(false);
    let opts = RtOptions {
        heap_reserve: 256 << 20,
        ..options(&stop, SimDuration::from_millis(50))
    };
    let t0 = mono_ns();
    let r = run_realtime(
        &mut sim.net,
        &mut sim.queue,
        &mut ports,
        Start::WhenReady,
        &opts,
        &mut |_| Step::Continue(SimTime::MAX),
    )
    .expect("the I/O thread starts");
    let outside_ns = (mono_ns() - t0).saturating_sub((r.wall_seconds * 1e9) as u64);
    assert_eq!(r.heap_reserve_bytes, 256 << 20);
    assert!(
        outside_ns > 10_000_000,
        "setting up took only {outside_ns} ns: too quick to tell when the clock started"
    );
    assert!(r.event_lateness.count >= 10);
    assert!(
        r.event_lateness.max_ns < outside_ns / 2,
        "the first events ran {} ns late; setting up took {outside_ns} ns",
        r.event_lateness.max_ns
    );
}

/// Late events are told apart by cause: while a thread of higher priority
/// holds the event thread off its CPU for 30 ms, the events due then run
/// late and are put down to that (`late_held_off`, and the time shows as
/// waiting behind another thread); when the event thread itself is busy
/// for 5 ms (CPU work in its control hook), the events due then run late
/// too, and are not. The event thread runs in the real-time class, so that
/// another run on the machine does not hold it off too; both need the
/// real-time class (root or CAP_SYS_NICE).
#[test]
fn late_events_while_the_cpu_was_taken_are_told_from_late_events_of_work() {
    let _flood = one_flood_at_a_time();
    // Asked in a thread of its own, which ends with the answer.
    let fifo = std::thread::spawn(|| netloop_io::sys::set_fifo_priority(10))
        .join()
        .unwrap();
    if let Err(e) = fifo {
        eprintln!("skipped: holding the event thread off its CPU needs the real-time class: {e}");
        return;
    }
    let topo = r#"
[run]
duration = "2s"
[[node]]
name = "h1"
kind = "host"
[[node]]
name = "h2"
kind = "host"
[[link]]
endpoints = ["h1", "h2"]
rate = "100Mbps"
delay = "1ms"
[[traffic]]
kind = "udp-cbr"
from = "h1"
to = "h2"
rate = "8Mbps"
size = "1000B"
"#;
    let loaded = netloop_config::parse_str(topo, "held.toml").expect("valid topology");
    let mut sim = Simulation::build(&loaded.spec).expect("builds");
    let mut ports: Vec<RealPort> = Vec::new();
    // The first CPU this process may use (a cpuset may leave out CPU 0).
    let allowed = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap();
    let cpu = (0..nix::sched::CpuSet::count())
        .find(|&c| allowed.is_set(c).unwrap_or(false))
        .expect("a CPU");
    let go = std::sync::Arc::new(AtomicBool::new(false));
    let g = go.clone();
    // Waits for its moment, then takes the event thread's CPU for 30 ms.
    let hog = std::thread::spawn(move || -> Result<(), String> {
        let mut set = nix::sched::CpuSet::new();
        set.set(cpu).map_err(|e| e.to_string())?;
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
            .map_err(|e| e.to_string())?;
        while !g.load(std::sync::atomic::Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
        }
        netloop_io::sys::set_fifo_priority(90).map_err(|e| e.to_string())?;
        let t0 = mono_ns();
        while mono_ns() - t0 < 30_000_000 {
            std::hint::spin_loop();
        }
        netloop_io::sys::restore_policy((libc::SCHED_OTHER, 0));
        Ok(())
    });
    let stop = AtomicBool::new(false);
    let opts = RtOptions {
        spin_ns: 50_000,
        late_threshold_ns: 1_000_000,
        cpu: Some(cpu),
        priority: Some(50),
        ..options(&stop, SimDuration::from_secs(2))
    };
    let (mut held, mut busy) = (false, false);
    let r = run_realtime(
        &mut sim.net,
        &mut sim.queue,
        &mut ports,
        Start::WhenReady,
        &opts,
        &mut |ctl| {
            let ms = ctl.now.as_nanos() / 1_000_000;
            if ms >= 300 && !held {
                held = true;
                go.store(true, std::sync::atomic::Ordering::Release);
            }
            if ms >= 700 && !busy {
                busy = true;
                let t0 = mono_ns();
                while mono_ns() - t0 < 5_000_000 {
                    std::hint::spin_loop();
                }
            }
            if ms >= 1000 {
                Step::Stop
            } else {
                Step::Continue(ctl.now + SimDuration::from_millis(1))
            }
        },
    )
    .expect("runs");
    hog.join()
        .unwrap()
        .expect("the thread that holds the CPU ran");
    println!(
        "late {} (held off {}), held off {} ns in all ({} queued), {} ns in the worst window; lateness max {} ns",
        r.late_events,
        r.late_held_off,
        r.held_off_ns,
        r.held_off_queued_ns,
        r.held_off_max_ns,
        r.event_lateness.max_ns
    );
    assert_eq!(r.fifo_priority, Some(50), "{:?}", r.priority_error);
    assert!(r.held_off_max_ns >= 15_000_000, "{r:?}");
    // A thread of this machine held it: waiting on a run queue.
    assert!(r.held_off_queued_ns >= 15_000_000, "{r:?}");
    assert!(
        r.late_held_off >= 10,
        "the 30 ms hold made {} events late that were put down to it",
        r.late_held_off
    );
    assert!(
        r.late_events >= r.late_held_off + 2,
        "the 5 ms of work made events late that were not put down to a hold: {} late, {} held off",
        r.late_events,
        r.late_held_off
    );
}
