//! The real-time front end: `netloop run` of a topology with real hosts (or
//! with `--realtime`), `netloop exec` and `netloop clean`, and the
//! self-report table every real-time run ends with.

use anyhow::anyhow;
use comfy_table::Cell;
use netloop_io::live::{run_live, HostReport, LiveOptions, LiveReport};
use netloop_io::rt::EndReason;
use netloop_model::results::Results;
use netloop_model::Simulation;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::format;
use crate::run::{right, table};

/// Set by SIGINT, SIGTERM and SIGHUP; every run loop polls it so that the
/// process returns normally and every `Drop` (which removes namespaces and
/// devices) runs.
pub fn interrupted() -> &'static AtomicBool {
    static FLAG: AtomicBool = AtomicBool::new(false);
    static HANDLER: std::sync::Once = std::sync::Once::new();
    HANDLER.call_once(|| {
        // Without a handler the default action (terminate) would skip the
        // clean-up; that would be a leftover, so say so.
        if let Err(e) = ctrlc::set_handler(|| FLAG.store(true, Ordering::SeqCst)) {
            eprintln!("warning: cannot handle Ctrl-C/SIGTERM ({e}); use `netloop clean` after an interrupted run");
        }
    });
    &FLAG
}

/// How a real-time run went, for the caller's exit code.
pub struct LiveOutcome {
    /// The results, with the `realtime` block filled in.
    pub results: Results,
    /// The self-report.
    pub report: LiveReport,
}

/// Runs `sim` in real time with its real hosts; `None` if it could not start
/// (the error is printed). Programs' output goes to `log_dir`, or to the
/// run's own directory under the system's temporary directory.
#[allow(clippy::too_many_arguments)] // the run's settings, each from a flag
pub fn execute_live(
    sim: &mut Simulation,
    topology: &str,
    log_dir: Option<&Path>,
    late_threshold_ns: u64,
    priority: Option<i32>,
    steer: bool,
    quiet: bool,
    cut: Option<&netloop_model::partition::Cut>,
    taps: Vec<netloop_model::partition::PartitionTaps>,
    series: Option<&mut netloop_model::series::SeriesWriter>,
) -> anyhow::Result<LiveOutcome> {
    // A co-simulation: the federate runs on a thread of its own beside the
    // engine, talking to it through the engine's request channel.
    let helics_spec = sim.net.spec().helics.clone();
    let (remote, federate) = match &helics_spec {
        None => (None, None),
        Some(h) => {
            let helics = crate::run::load_helics(h, topology, quiet, " in real time")?;
            let (handle, remote) = netloop_io::live::remote().map_err(|e| anyhow!("{e}"))?;
            (Some(remote), Some((helics, handle, h.clone())))
        }
    };
    let endpoints = sim.endpoints.clone();
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        // The engine's real hosts are up / the federation executes (see
        // `Handshake`).
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let thread = federate.as_ref().map(|(helics, handle, spec)| {
            let endpoints = &endpoints;
            scope.spawn(move || {
                let stop = || interrupted().load(std::sync::atomic::Ordering::SeqCst);
                let mut meeting = Handshake {
                    joined: Some(tx),
                    ready: ready_rx,
                    go: Some(go_tx),
                };
                let r = netloop_helics::run_realtime(
                    helics,
                    spec,
                    endpoints,
                    handle,
                    &stop,
                    &mut meeting,
                );
                let joined = meeting.joined.is_none();
                // Entering executing mode failed (or the run ended first):
                // the engine waits no longer.
                drop(meeting);
                if r.is_err() && joined {
                    // The federation failed: the run ends with it.
                    let _ = handle.call(
                        netloop_io::live::Request::Stop,
                        std::time::Duration::from_secs(5),
                    );
                }
                r
            })
        });
        // The broker first: one that is not there is an error before any
        // namespace or program exists (the thread drops the channel unsent).
        let mut joined = thread.is_none();
        while !joined {
            match rx.recv_timeout(std::time::Duration::from_millis(50)) {
                Ok(()) => joined = true,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if interrupted().load(std::sync::atomic::Ordering::SeqCst) {
                        // Ctrl-C while HELICS retries the broker.
                        if let Some((helics, _, _)) = &federate {
                            helics.abort("netloop was interrupted");
                        }
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        if !joined {
            if let Some(t) = thread {
                let e = match t.join().expect("the federate's thread panicked") {
                    Err(e) => e.to_string(),
                    Ok(_) => "it left before joining".to_string(),
                };
                return Err(anyhow!(
                    "{topology}: could not join the HELICS federation: {e}"
                ));
            }
        }
        let gate = thread.is_some().then_some((ready_tx, go_rx));
        let out = execute_live_inner(
            sim,
            topology,
            log_dir,
            late_threshold_ns,
            priority,
            steer,
            quiet,
            cut,
            taps,
            remote.map(|r| (r, gate)),
            series,
        );
        let cosim = thread.map(|t| {
            // The run is over; a federate still waiting on the federation
            // (for it to start, or for a grant) is told to give up: after
            // 5 s, or 1 s after Ctrl-C (its loop sees the flag at its next
            // step; entering executing mode does not look).
            let ctrl_c = interrupted().load(std::sync::atomic::Ordering::SeqCst);
            let wait = std::time::Duration::from_secs(if ctrl_c { 1 } else { 5 });
            let deadline = std::time::Instant::now() + wait;
            while !t.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            if !t.is_finished() {
                if let Some((helics, _, _)) = &federate {
                    helics.abort("netloop's real-time run ended");
                }
            }
            t.join().expect("the federate's thread panicked")
        });
        let mut out = out?;
        if let Some(c) = cosim {
            let report = match c {
                Ok(r) => r,
                // Ctrl-C while the federation had not started (or while
                // HELICS was being told to give up): the run's results
                // stand, without the federate's report.
                Err(e) if interrupted().load(std::sync::atomic::Ordering::SeqCst) => {
                    eprintln!("{topology}: interrupted; the HELICS federate ended with: {e}");
                    return Ok(out);
                }
                Err(e) => return Err(anyhow!("{topology}: {e}")),
            };
            if !quiet {
                crate::run::print_federate(&report);
            }
            crate::run::say_end(
                &report,
                netloop_core::SimTime::from_nanos(out.results.meta.sim_time_reached_ns),
                sim.net.spec().run.duration,
            );
            out.results.cosim = Some(serde_json::to_value(&report)?);
        }
        Ok(out)
    })
}

/// The CLI's side of the federate's start ([`netloop_helics::Meeting`]):
/// channels to the thread that runs the engine.
struct Handshake {
    /// Told once the broker has taken the federate (then `None`).
    joined: Option<std::sync::mpsc::Sender<()>>,
    /// Told when the engine's real hosts are up (its sender dropped: the
    /// run ended first).
    ready: std::sync::mpsc::Receiver<()>,
    /// Tells the engine to start its clock (dropped unsent: it starts and
    /// is told to stop).
    go: Option<std::sync::mpsc::Sender<()>>,
}

impl netloop_helics::Meeting for Handshake {
    fn connected(&mut self) {
        if let Some(tx) = self.joined.take() {
            let _ = tx.send(());
        }
    }

    fn engine_ready(&mut self) -> bool {
        self.ready.recv().is_ok()
    }

    fn executing(&mut self) {
        if let Some(go) = self.go.take() {
            let _ = go.send(());
        }
    }
}

/// The engine's side of the start of a co-simulation: it says its real
/// hosts are up, then waits for the federation to execute (see
/// [`Handshake`]).
type Gate = (std::sync::mpsc::Sender<()>, std::sync::mpsc::Receiver<()>);

/// Says the real hosts are up and waits until the federation executes, the
/// federate gave up, or Ctrl-C.
fn meet_the_federation((ready, go): Gate) {
    let _ = ready.send(());
    loop {
        match go.recv_timeout(std::time::Duration::from_millis(50)) {
            Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if interrupted().load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
            }
        }
    }
}

/// What the user needs to reach each real host.
fn print_hosts(hosts: &[HostReport]) {
    for h in hosts {
        match &h.namespace {
            Some(ns) => outln!(
                "{}: namespace {ns}, {} {} via {} — `netloop exec {} -- CMD`",
                h.name,
                h.interface,
                h.address.as_deref().unwrap_or("(no address)"),
                h.via,
                h.name
            ),
            None => outln!(
                "{}: interface {} attached ({})",
                h.name,
                h.interface,
                h.address.as_deref().unwrap_or("no address")
            ),
        }
    }
}

/// [`execute_live`] once the co-simulation (if any) is set up: `remote`
/// is the engine's request channel the federate uses, with the gate its
/// clock waits at.
#[allow(clippy::too_many_arguments)]
fn execute_live_inner(
    sim: &mut Simulation,
    topology: &str,
    log_dir: Option<&Path>,
    late_threshold_ns: u64,
    priority: Option<i32>,
    steer: bool,
    quiet: bool,
    cut: Option<&netloop_model::partition::Cut>,
    taps: Vec<netloop_model::partition::PartitionTaps>,
    remote: Option<(netloop_io::live::Remote, Option<Gate>)>,
    series: Option<&mut netloop_model::series::SeriesWriter>,
) -> anyhow::Result<LiveOutcome> {
    let (remote, mut gate) = remote.map_or((None, None), |(r, g)| (Some(r), g));
    let spin_ns = sim.net.spec().run.spin.as_nanos();
    let duration = sim.net.spec().run.duration;
    let awaits = sim.real.iter().any(|r| match &r.kind {
        netloop_model::spec::NodeKind::Namespace(ns) => ns.commands.iter().any(|c| c.wait),
        _ => false,
    });
    let mut on_ready = |hosts: &[HostReport]| {
        if !quiet {
            print_hosts(hosts);
        }
        if let Some(g) = gate.take() {
            // The clock starts with the federation's (netloop_helics's
            // module docs).
            meet_the_federation(g);
        }
        if quiet {
            return;
        }
        outln!(
            "running in real time for {duration}{} (Ctrl-C ends it cleanly)",
            if awaits {
                ", or until every awaited program exits"
            } else {
                ""
            }
        );
    };
    let started = std::time::Instant::now();
    let report = run_live(
        sim,
        LiveOptions {
            log_dir: log_dir.map(Path::to_path_buf),
            spin_ns,
            late_threshold_ns,
            stop: interrupted(),
            priority,
            steer,
            on_ready: &mut on_ready,
            remote,
            cut,
            taps,
            series,
        },
    )
    .map_err(|e| anyhow!("{e}"))?;
    let wall = started.elapsed().as_secs_f64();
    let mut results = match (&report.partitions, cut) {
        (Some(p), Some(cut)) => netloop_model::partition::merged_results(
            sim,
            cut,
            &p.shares,
            report.realtime.events,
            "realtime",
            Some(wall),
            Some(topology.to_string()),
        ),
        _ => sim.results("realtime", Some(wall), Some(topology.to_string())),
    };
    results.realtime = Some(serde_json::to_value(&report)?);
    Ok(LiveOutcome { results, report })
}

/// Prints the self-report of a real-time run: kept up or not, lateness,
/// frames across the boundary and lost at it, programs.
pub fn print_report(r: &LiveReport) {
    let rt = &r.realtime;
    let mut t = table();
    t.set_header(vec!["real time", "p50", "p99", "p99.9", "max", "samples"]);
    for (name, l) in [
        ("event lateness", &rt.event_lateness),
        ("input latency", &rt.input_latency),
        ("output latency", &rt.output_latency),
    ] {
        t.add_row(vec![
            Cell::new(name),
            right(format::ns(l.p50_ns as f64)),
            right(format::ns(l.p99_ns as f64)),
            right(format::ns(l.p999_ns as f64)),
            right(format::ns(l.max_ns as f64)),
            right(format::count(l.count)),
        ]);
    }
    outln!("{t}");
    if !rt.ports.is_empty() {
        let mut t = table();
        t.set_header(vec![
            "real host",
            "interface",
            "frames in",
            "frames out",
            "lost at boundary",
            "malformed",
        ]);
        for p in &rt.ports {
            let c = &p.counters;
            let lost = if c.lost() == 0 {
                "0".to_string()
            } else {
                format!(
                    "{} (ring {}, queue {}, truncated {})",
                    c.lost(),
                    c.rx_kernel_drops,
                    c.tx_drops,
                    c.rx_truncated
                )
            };
            t.add_row(vec![
                Cell::new(&p.host),
                Cell::new(&p.interface),
                right(format::count(c.rx_frames)),
                right(format::count(c.tx_frames)),
                right(lost),
                right(format::count(c.rx_malformed)),
            ]);
        }
        outln!("{t}");
    }
    if !r.commands.is_empty() {
        let mut t = table();
        t.set_header(vec![
            "host", "program", "started", "ended", "exit", "output",
        ]);
        for c in &r.commands {
            t.add_row(vec![
                Cell::new(&c.host),
                Cell::new(&c.cmd),
                right(match (c.started_s, c.ready_after_s) {
                    (None, _) => "-".into(),
                    // Before time 0: the clock waited for it.
                    (Some(_), Some(r)) => format!("ready after {:.0} ms", r * 1e3),
                    (Some(s), None) => format!("{s:.3} s"),
                }),
                right(
                    c.exited_s
                        .map_or("stopped at end".into(), |s| format!("{s:.3} s")),
                ),
                right(match (&c.exit_code, &c.signal) {
                    (Some(code), _) => code.to_string(),
                    (None, Some(sig)) => sig.clone(),
                    (None, None) => "-".into(),
                }),
                Cell::new(c.log.display().to_string()),
            ]);
        }
        outln!("{t}");
    }
    let end = match rt.end {
        EndReason::Duration => "the run's duration was reached",
        EndReason::Control => "every awaited program exited",
        EndReason::Interrupted => "interrupted",
        EndReason::Running => "it has not ended (a report taken mid-run)",
    };
    outln!(
        "real time: {:.3} s simulated in {:.3} s wall, {} events; ended because {end}; spin {} \
         (CPU: event thread {:.0} % (spinning {:.0} %), I/O thread {:.0} % of one core)",
        rt.sim_seconds,
        rt.wall_seconds,
        format::count(rt.events),
        format::ns(rt.spin_ns as f64),
        rt.event_cpu_share * 100.0,
        rt.spin_share * 100.0,
        rt.io_cpu_share * 100.0
    );
    if rt.demotions + rt.io_demotions > 0 {
        outln!(
            "the machine was saturated: for {} of its 10 ms windows the event thread, and for {} the I/O \
             thread, ran in the normal scheduling class (over 90 % busy in the real-time class)",
            format::count(rt.demotions),
            format::count(rt.io_demotions)
        );
    }
    if let Some(e) = &rt.priority_error {
        eprintln!(
            "warning: the real-time loop ran in the normal scheduling class ({e}); \
             lateness grows when the programs it serves keep the cores busy"
        );
    }
    // Cut into partitions: each one's figures; the verdict is all of them.
    let mut max_late = rt.event_lateness.max_ns;
    let mut late_in = 0;
    if let Some(p) = &r.partitions {
        let mut t = table();
        t.set_header(vec![
            "partition",
            "nodes",
            "events",
            "late",
            "held off",
            "lateness p50",
            "p99",
            "max",
            "frames out",
            "frames in",
            "late in",
            "CPU",
            "spinning",
        ]);
        for (k, q) in p.per_partition.iter().enumerate() {
            let l = &q.event_lateness;
            t.add_row(vec![
                Cell::new(k),
                right(format::count(q.nodes as u64)),
                right(format::count(q.events)),
                right(format::count(q.late_events)),
                right(format::count(q.late_held_off)),
                right(format::ns(l.p50_ns as f64)),
                right(format::ns(l.p99_ns as f64)),
                right(format::ns(l.max_ns as f64)),
                right(format::count(q.frames_out)),
                right(format::count(q.frames_in)),
                right(format::count(q.late_frames_in)),
                right(format!("{:.0} %", q.cpu_share * 100.0)),
                right(format!("{:.0} %", q.spin_share * 100.0)),
            ]);
            max_late = max_late.max(l.max_ns);
            late_in += q.late_frames_in;
        }
        outln!("{t}");
    }
    if rt.kept_up {
        outln!(
            "kept up with real time: every event ran within {} of its time (max {})",
            format::ns(rt.late_threshold_ns as f64),
            format::ns(max_late as f64)
        );
    } else {
        let span = match (rt.first_late_s, rt.last_late_s) {
            (Some(a), Some(b)) => format!(", between {a:.3} s and {b:.3} s of the run"),
            _ => String::new(),
        };
        eprintln!(
            "\n*** FELL BEHIND REAL TIME: {} of {} events ran more than {} late (max {}){span}. ***\n\
             What it means: netloop's event thread did not get to run every event on time for a \
             while (the CPU was saturated, or the thread was kept off it), so frames crossed the \
             model later than it says they should (none were lost for it).\n\
             What it affects: a delay or round trip measured in that span may be too long, by up to \
             the max above; rates averaged over seconds barely change. The cause is the real-time \
             scheduling (see 'Limits today' in docs/realtime.md), not the model.\n",
            format::count(rt.late_events),
            format::count(rt.events),
            format::ns(rt.late_threshold_ns as f64),
            format::ns(max_late as f64)
        );
        if late_in > 0 {
            eprintln!(
                "{} frames reached their partition after their time (their sender was that late); \
                 they entered then.\n",
                format::count(late_in)
            );
        }
        if rt.late_held_off > 0 {
            // With partitions, the event thread's times are partition 0's
            // (each partition's count is in the table above).
            let whose = if r.partitions.is_some() {
                "partition 0's thread"
            } else {
                "netloop's event thread"
            };
            eprintln!(
                "{} of the {} late events came while their thread was held off its CPU, neither \
                 running nor asleep (a sleep that ended far past its time counts), rather than \
                 busy: {whose} was held off {} in all (the most in one \
                 window {}), of it {} waiting behind other threads of this machine and the rest with \
                 its vCPU stopped by the hypervisor or asleep past its time.\n",
                format::count(rt.late_held_off),
                format::count(rt.late_events),
                format::ns(rt.held_off_ns as f64),
                format::ns(rt.held_off_max_ns as f64),
                format::ns(rt.held_off_queued_ns as f64)
            );
        }
        if let Some(note) = halt_poll_note(rt.late_held_off, rt.guest_halt_poll_ns) {
            eprintln!("{note}\n");
        }
        if let Some(steal) = rt.steal_ns.filter(|&s| s > 0) {
            eprintln!(
                "During the run the hypervisor took {} of CPU time from this machine's CPUs \
                 (steal time): a vCPU stopped by its host stops netloop's threads too, whatever \
                 their priority.\n",
                format::ns(steal as f64)
            );
        }
    }
    if let Some(dir) = &r.log_dir {
        outln!("programs' output: {}/", dir.display());
    }
    print_warnings(r);
}

/// Prints to stderr what went wrong in a real-time run that did not end it:
/// programs that failed or crashed, interfaces that faulted, frames lost at
/// the boundary, an incomplete clean-up. `print_report` ends with it; a
/// quiet run prints only this.
pub fn print_warnings(r: &LiveReport) {
    let rt = &r.realtime;
    for c in &r.commands {
        let at = c
            .exited_s
            .map_or(String::new(), |s| format!(" at {s:.3} s"));
        let what = match (c.exit_code, &c.signal) {
            (Some(0), _) | (None, None) => continue,
            (Some(code), _) => {
                // `sh -c` reports a program killed by signal N as 128 + N.
                let killed = (129..=128 + 64)
                    .contains(&code)
                    .then(|| nix::sys::signal::Signal::try_from(code - 128).ok())
                    .flatten()
                    .map_or(String::new(), |s| {
                        format!(" (the shell's status for a program killed by {s})")
                    });
                format!("exited with status {code}{killed}")
            }
            (None, Some(sig)) => format!("was killed by {sig}"),
        };
        eprintln!(
            "program `{}` on real host '{}' {what}{at}; its output: {}",
            c.cmd,
            c.host,
            c.log.display()
        );
    }
    if !r.teardown_failures.is_empty() {
        eprintln!(
            "*** clean-up was incomplete: {} — run `netloop clean` to finish it ***",
            r.teardown_failures.join("; ")
        );
    }
    for p in &rt.ports {
        let since = p
            .first_fault_s
            .map_or(String::new(), |s| format!(" from {s:.3} s on"));
        if p.gone == Some(true) {
            eprintln!(
                "interface {} of real host '{}' was deleted during the run (it reported errors \
                 {} times{since}): nothing crossed it after that; the run went on without it",
                p.interface, p.host, p.faults
            );
        } else if p.faults > 0 {
            eprintln!(
                "interface {} of real host '{}' reported errors {} times{since} \
                 (down during the run?)",
                p.interface, p.host, p.faults
            );
        }
        if p.counters.rx_truncated > 0 {
            eprintln!(
                "{} frames from {} ({}) were larger than netloop's buffer and were dropped: \
                 the host behind it sends with segmentation offload (TSO/GSO, e.g. the far end \
                 of a veth pair); turn it off there: ethtool -K DEV tso off gso off",
                format::count(p.counters.rx_truncated),
                p.interface,
                p.host
            );
        }
    }
    if rt.boundary_lost > 0 {
        eprintln!(
            "*** {} frames were lost at the boundary to real interfaces (see the table above) ***",
            format::count(rt.boundary_lost)
        );
    }
}

/// `netloop exec HOST -- CMD…`: runs a program in a real host of the running
/// network, with the terminal's stdin/stdout/stderr; exits with its status.
pub fn exec(run: Option<&str>, host: &str, cmd: &[String]) -> anyhow::Result<ExitCode> {
    if cmd.is_empty() {
        return Err(anyhow!(
            "give the command after `--`, e.g. `netloop exec {host} -- ping 198.18.0.1`"
        ));
    }
    if netloop_io::session::check_privileges().is_err() {
        return Err(anyhow!(
            "netloop exec needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN): it runs the program \
             in the network namespace of real host '{host}'; run it with sudo"
        ));
    }
    let record = netloop_io::registry::find_running(run).map_err(|e| anyhow!("{e}"))?;
    let ns = record.namespace_entry(host).ok_or_else(|| {
        let hosts: Vec<&str> = record.hosts().collect();
        anyhow!(
            "run {} has no real host '{host}' (its real hosts: {})",
            record.run_id,
            if hosts.is_empty() {
                "none".to_string()
            } else {
                hosts.join(", ")
            }
        )
    })?;
    // In the host's network namespace and its PID namespace: the program
    // sees the host's processes, and ends with the run.
    let status = netloop_io::proc::run_in_host(&ns.name, ns.init.as_ref(), cmd)
        .map_err(|e| anyhow!("real host '{host}' of run {}: {e}", record.run_id))?;
    Ok(match status.code() {
        Some(c) => ExitCode::from(c.clamp(0, 255) as u8),
        None => ExitCode::from(128),
    })
}

/// `netloop clean`: removes what runs killed by SIGKILL left behind.
pub fn clean() -> anyhow::Result<ExitCode> {
    if netloop_io::session::check_privileges().is_err() {
        return Err(anyhow!(
            "netloop clean needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN): it removes the \
             namespaces, devices and programs of root's runs; run it with sudo"
        ));
    }
    let report = netloop_io::registry::clean().map_err(|e| anyhow!("{e}"))?;
    outln!("{report}");
    Ok(if report.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// What to say of a guest that halts its idle vCPUs at once, when late
/// events came while netloop was held off its CPU: a sleep's wake-up then
/// waits for the host (docs/realtime.md, "Halt polling").
fn halt_poll_note(late_held_off: u64, guest_halt_poll_ns: Option<u64>) -> Option<&'static str> {
    (late_held_off > 0 && guest_halt_poll_ns == Some(0)).then_some(
        "This machine is a virtual machine whose idle vCPUs halt at once (cpuidle driver \
         haltpoll, guest_halt_poll_ns 0): a thread asleep on one wakes only when the host runs \
         the vCPU again, on this project's VMs now and then milliseconds late. Letting the guest \
         poll before it halts (/sys/module/haltpoll/parameters/guest_halt_poll_ns, as root, for \
         the whole machine) made late wake-ups rarer there; see 'Halt polling' in \
         docs/realtime.md.",
    )
}

#[cfg(test)]
mod tests {
    use super::halt_poll_note;

    #[test]
    fn the_halt_poll_note_comes_only_for_held_off_events_on_a_guest_that_halts_at_once() {
        assert!(halt_poll_note(3, Some(0)).is_some_and(|n| n.contains("guest_halt_poll_ns")));
        assert_eq!(halt_poll_note(0, Some(0)), None);
        assert_eq!(halt_poll_note(3, Some(200_000)), None);
        assert_eq!(halt_poll_note(3, None), None);
    }
}
