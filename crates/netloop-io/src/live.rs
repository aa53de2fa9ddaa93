//! A live run: a built simulation with its real nodes set up (namespaces,
//! devices, attached interfaces), run in real time by [`crate::rt`], with the
//! topology's programs started on schedule — and everything torn down at the
//! end, whatever the end.
//!
//! Order matters for "nothing left behind": every check that can fail without
//! side effects (privileges, programs installed, interfaces attachable) runs
//! before the first namespace is created; from then on the [`Session`] owns
//! each resource as it is made and its `Drop` removes them.
//!
//! Another thread can talk to a running network through a [`RemoteHandle`]
//! (the Python API does): change a link now, read the results and the
//! self-report so far, end the run. Requests wake the loop through a socket
//! in its poll set and are served between events.

use netloop_core::{SimDuration, SimTime};
use netloop_model::build::RealNode;
use netloop_model::partition::Cut;
use netloop_model::results::{Results, SimView};
use netloop_model::series::{SampleCounts, SeriesWriter};
use netloop_model::share::Share;
use netloop_model::spec::{HostLink, LinkEventSpec, NodeKind, ReadyProtocol, ReadySpec};
use netloop_model::Simulation;
use serde::Serialize;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::clock::Start;
use crate::error::{Error, Result};
use crate::netns;
use crate::packet::{self, PacketOptions, PacketSocket};
use crate::rt::{self, Control, Lateness, RealPort, RtOptions, RtReport, Step};
use crate::rtpart::PartitionRt;
use crate::session::Session;
use crate::tap::TapDevice;

/// Heap to make resident before a real-time run's clock starts (see
/// [`crate::memory`]): 64 MiB for the network and its frames, and 160 KiB
/// per flow (measured: a flow of 1 000-byte datagrams at 1.8 Mbit/s over a
/// 50 ms link grew the process by about 140 KiB in its first second, most of
/// it frame buffers in flight and its delay histogram, which was dense then
/// and is a band of 2 KiB now), at most a quarter of the machine's memory.
fn heap_reserve(flows: usize) -> usize {
    let quarter = crate::sys::physical_memory()
        .and_then(|b| usize::try_from(b / 4).ok())
        .unwrap_or(usize::MAX);
    (64usize << 20)
        .saturating_add(flows.saturating_mul(160 << 10))
        .min(quarter)
}

/// Settings of a live run.
pub struct LiveOptions<'a> {
    /// Where the programs' output goes (`<host>.<k>.log`); `None`: in the
    /// run's own directory under the system's temporary directory,
    /// `netloop-<run id>`, made when the run has programs
    /// ([`LiveReport::log_dir`] says where).
    pub log_dir: Option<PathBuf>,
    /// The scheduler's spin window, nanoseconds.
    pub spin_ns: u64,
    /// Lateness above this means the run fell behind, nanoseconds.
    pub late_threshold_ns: u64,
    /// Set to end the run early (signal handlers).
    pub stop: &'a AtomicBool,
    /// SCHED_FIFO priority of the real-time loop (`None`: normal class).
    pub priority: Option<i32>,
    /// Keep the loop on one CPU and steer the namespaces' receive work to the
    /// others (more throughput; on an idle machine, a cross-CPU wake-up per
    /// delivered frame adds tens of microseconds).
    pub steer: bool,
    /// Called once the network is up, before the clock starts: e.g. to tell
    /// the user how to reach the hosts. The clock starts when it returns (a
    /// co-simulation waits in it for its federation to start executing).
    pub on_ready: &'a mut dyn FnMut(&[HostReport]),
    /// Requests from another thread, if any (see [`remote`]).
    pub remote: Option<Remote>,
    /// Run cut into partitions, each on a thread of its own kept to the
    /// wall clock ([`crate::rtpart`]); the cut must be
    /// `Cut::for_realtime`'s (every real host in partition 0). `None`: one.
    pub cut: Option<&'a Cut>,
    /// Taps to add to each partition's copy of the network, by partition
    /// (partition 0's go to the run's own network): the parts of a
    /// partitioned run's captures ([`crate::pcapparts`]).
    pub taps: Vec<netloop_model::partition::PartitionTaps>,
    /// A time series to sample the run into (one partition only: the
    /// caller refuses it with `cut`).
    pub series: Option<&'a mut SeriesWriter>,
}

/// What a real-time run's time series carries of its self-report at each
/// sample: figures since the start.
fn series_realtime(r: &RtReport) -> serde_json::Value {
    serde_json::json!({
        "kept_up": r.kept_up,
        "events": r.events,
        "late_events": r.late_events,
        "event_lateness": r.event_lateness,
        "input_latency": r.input_latency,
        "boundary_lost": r.boundary_lost,
    })
}

/// How the partitions of a real-time run went: `partitions` in its report.
#[derive(Clone, Debug, Serialize)]
pub struct RtPartitions {
    /// Partitions.
    pub count: u32,
    /// The least delay of the links cut, ns (`null`: none was cut): the
    /// time a frame has to reach the partition that receives it.
    pub lookahead_ns: Option<u64>,
    /// The links cut, by name.
    pub cut_links: Vec<String>,
    /// Per partition, in order (partition 0 runs the real hosts).
    pub per_partition: Vec<PartitionRt>,
    /// The other partitions' shares of the results, to merge with
    /// partition 0's (see `netloop_model::partition::merged_results`).
    #[serde(skip)]
    pub shares: Vec<Share>,
}

/// A request to a running network.
#[derive(Clone, Debug)]
pub enum Request {
    /// Change a link now (`at` is ignored).
    ChangeLink(LinkEventSpec),
    /// The results and the self-report as of now. With `new_window`, the
    /// snapshot's `window_lateness` closes the window (the next one starts
    /// now); without, it only reads it, so that an occasional look (a
    /// link's counters) does not cut a monitor's windows short.
    Snapshot {
        /// Start a new lateness window.
        new_window: bool,
    },
    /// Simulated time now (cheap: no results are built).
    Now,
    /// End the run now, as if its duration were over.
    Stop,
    /// Send messages from message endpoints now (by index in the
    /// simulation's endpoints), and take what reached every endpoint since
    /// the last such request: the real-time side of a co-simulation.
    Endpoints {
        /// Messages to send: endpoint, bytes.
        sends: Vec<(usize, Vec<u8>)>,
    },
}

/// The answer to a [`Request`].
#[derive(Debug)]
pub enum Reply {
    /// Done.
    Done,
    /// What [`Request::Snapshot`] asked for.
    Snapshot(Box<Snapshot>),
    /// What [`Request::Now`] asked for.
    Now(SimTime),
    /// What [`Request::Endpoints`] did.
    Endpoints {
        /// Simulated time when it was done.
        now: SimTime,
        /// Sends refused: endpoint, why.
        refused: Vec<(usize, String)>,
        /// Messages that reached an endpoint: endpoint, message.
        arrived: Vec<(usize, netloop_model::apps::Message)>,
    },
    /// It could not be done; why.
    Failed(String),
}

/// Results and self-report of a run that is still going.
#[derive(Debug)]
pub struct Snapshot {
    /// The model's results so far (mode `realtime`).
    pub results: Results,
    /// The real-time loop's report so far (`end` is `running`).
    pub realtime: RtReport,
    /// How late the events since the previous snapshot that started a new
    /// window ran (since the start for the first): the cumulative
    /// `realtime.event_lateness` hides drift in a long run, a series of
    /// windows shows it.
    pub window_lateness: Lateness,
    /// A run cut into partitions: each partition's figures so far
    /// (partition 0's first); empty otherwise. `results` is merged from
    /// every partition's share, each as of its own now.
    pub partitions: Vec<PartitionRt>,
}

type Envelope = (Request, mpsc::SyncSender<Reply>);

/// The run's end of the request channel: goes into [`LiveOptions::remote`].
pub struct Remote {
    rx: mpsc::Receiver<Envelope>,
    wake: UnixStream,
}

/// The caller's end: send requests from any thread while the run goes on.
#[derive(Clone)]
pub struct RemoteHandle {
    tx: mpsc::Sender<Envelope>,
    wake: Arc<UnixStream>,
}

/// A request channel to a live run.
pub fn remote() -> Result<(RemoteHandle, Remote)> {
    let (a, b) = UnixStream::pair().map_err(|e| Error::os("creating a control socket pair", e))?;
    for s in [&a, &b] {
        s.set_nonblocking(true)
            .map_err(|e| Error::os("making the control socket non-blocking", e))?;
    }
    let (tx, rx) = mpsc::channel();
    Ok((
        RemoteHandle {
            tx,
            wake: Arc::new(a),
        },
        Remote { rx, wake: b },
    ))
}

impl RemoteHandle {
    /// Sends `req` and waits up to `timeout` for the answer. An error if the
    /// run has ended or does not answer in time (it is far behind; the
    /// error's `timed_out` is true).
    pub fn call(&self, req: Request, timeout: Duration) -> Result<Reply> {
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        self.tx
            .send((req, reply_tx))
            .map_err(|_| Error::msg("the network is not running (its run has ended)"))?;
        // One byte wakes the loop; a full socket already means "wake up".
        let _ = (&*self.wake).write(&[1]);
        match reply_rx.recv_timeout(timeout) {
            Ok(r) => Ok(r),
            // Marked as a time-out (`Error::timed_out`): the run may answer
            // a later call, where the other errors mean that it has ended.
            Err(mpsc::RecvTimeoutError::Timeout) => Err(Error::os(
                format!(
                    "the network did not answer within {timeout:?} (is the run far behind real time?)"
                ),
                std::io::ErrorKind::TimedOut.into(),
            )),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(Error::msg(
                "the network is not running (its run ended before answering)",
            )),
        }
    }
}

/// A real node as set up.
#[derive(Clone, Debug, Serialize)]
pub struct HostReport {
    /// Its name in the topology.
    pub name: String,
    /// `namespace` or `attached`.
    pub kind: &'static str,
    /// The network namespace (namespace hosts).
    pub namespace: Option<String>,
    /// The interface netloop reads and writes.
    pub interface: String,
    /// How it is joined: `veth`, `tap` or `packet`.
    pub via: &'static str,
    /// Its address, e.g. `198.18.0.2/24`.
    pub address: Option<String>,
    /// The init of its PID namespace (namespace hosts), in netloop's PID
    /// namespace: programs started in that namespace end with the run.
    pub init_pid: Option<i32>,
}

/// A program run on a real host.
#[derive(Clone, Debug, Serialize)]
pub struct CommandReport {
    /// The host.
    pub host: String,
    /// The command line.
    pub cmd: String,
    /// Its output (stdout and stderr).
    pub log: PathBuf,
    /// When it started (simulated seconds), if it did.
    pub started_s: Option<f64>,
    /// When it was seen to exit (simulated seconds), if it did before the end.
    pub exited_s: Option<f64>,
    /// Its exit code, if it exited by itself.
    pub exit_code: Option<i32>,
    /// The signal that killed it before the end (e.g. `SIGSEGV`), if one
    /// did; programs still running at the end are stopped by netloop and
    /// have neither an exit code nor a signal.
    pub signal: Option<String>,
    /// Whether the run waited for it.
    pub wait: bool,
    /// For a command with `ready`: the wall seconds from its start until it
    /// was ready, which the run's clock waited before it started.
    pub ready_after_s: Option<f64>,
}

/// What a live run reports.
#[derive(Clone, Debug, Serialize)]
pub struct LiveReport {
    /// The run's id (names of its namespaces and devices carry it).
    pub run_id: Option<String>,
    /// The real nodes.
    pub hosts: Vec<HostReport>,
    /// The programs.
    pub commands: Vec<CommandReport>,
    /// What the tear-down could not remove (the run's record is kept for
    /// `netloop clean`); empty when all went.
    pub teardown_failures: Vec<String>,
    /// Where the programs' output went (`None` if the run had no programs
    /// and was given no directory); each program's file is in `commands`.
    #[serde(skip)]
    pub log_dir: Option<PathBuf>,
    /// The scheduler's self-report (its fields appear at this level in JSON).
    /// With partitions, `kept_up` and `late_events` are every partition's.
    #[serde(flatten)]
    pub realtime: RtReport,
    /// A run cut into partitions: each one's figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partitions: Option<RtPartitions>,
}

/// How often running programs are checked for exit.
const POLL_COMMANDS: SimDuration = SimDuration::from_millis(20);

/// The first word of a shell command line, if it names a program to look up
/// on PATH (not a path, an assignment or a shell keyword).
fn program_of(cmd: &str) -> Option<&str> {
    let first = cmd.split_whitespace().next()?;
    if first.contains('/') || first.contains('=') {
        return None;
    }
    const SHELL: &[&str] = &[
        "exec", "sleep", "echo", "true", "false", "cd", "if", "for", "while", "{", "(", "!", "[",
        "test", "set", "export", "trap", "wait", "kill", "read", "printf", ":", ".", "ulimit",
        "umask", "exit", "case", "until", "eval", "command", "unset", "shift", "times", "type",
    ];
    if SHELL.contains(&first) {
        return None;
    }
    Some(first)
}

/// Checks what can be checked before anything is created.
fn precheck(real: &[RealNode]) -> Result<()> {
    for r in real {
        match &r.kind {
            NodeKind::Namespace(ns) => {
                for c in &ns.commands {
                    if let Some(p) = program_of(&c.cmd) {
                        if !netns::command_exists(p) {
                            return Err(netns::missing_program_error(p, &r.name));
                        }
                    }
                }
            }
            NodeKind::Attached(a) => packet::check_attachable(&a.interface, a.force)?,
            _ => {}
        }
    }
    Ok(())
}

struct Scheduled {
    host: String,
    k: usize,
    cmd: String,
    wait: bool,
    start: SimTime,
    started: Option<SimTime>,
    /// When it was seen to exit, its exit code and the signal that killed
    /// it.
    exited: Option<(SimTime, Option<i32>, Option<i32>)>,
    ready: Option<ReadySpec>,
    /// How long it took to be ready (wall clock, before time 0).
    ready_after: Option<Duration>,
}

/// How often a program's readiness is looked at before the clock starts.
const READY_POLL: Duration = Duration::from_millis(5);

/// Starts the programs that hold the run's start (`ready`) and waits until
/// each has its socket: the clock starts after, so a server is there for
/// what the model sends at its first instants. A program that exits first,
/// or is not ready within its timeout, fails the run with its log named.
fn start_when_ready(
    s: &mut Session,
    scheduled: &mut [Scheduled],
    logs_in: &Path,
    stop: &AtomicBool,
) -> Result<()> {
    let begun = Instant::now();
    for c in scheduled.iter_mut().filter(|c| c.ready.is_some()) {
        s.start_command(&c.host, &c.cmd, &log_path(logs_in, &c.host, c.k))?;
        c.started = Some(SimTime::ZERO);
    }
    loop {
        if let Some(e) = s.take_errors().into_iter().next() {
            return Err(e);
        }
        // An exit is reported once: every one is looked at, that of a
        // program ready already too (a server that dies before the clock
        // starts fails the run as well).
        let exits = s.poll_exits();
        for e in &exits {
            let Some(c) = scheduled
                .iter()
                .find(|c| c.ready.is_some() && c.host == e.host && c.cmd == e.cmd)
            else {
                continue;
            };
            let how = match (e.code, e.signal) {
                (Some(code), _) => format!("with code {code}"),
                (None, Some(sig)) => format!("killed by {}", signal_name(sig)),
                (None, None) => "killed".to_string(),
            };
            let when = if c.ready_after.is_some() {
                "before the run's clock started".to_string()
            } else {
                format!("before it was ready ({})", c.ready.expect("found by it"))
            };
            return Err(Error::msg(format!(
                "real host '{}': `{}` exited ({how}) {when}; its output is in {}",
                c.host,
                c.cmd,
                log_path(logs_in, &c.host, c.k).display()
            )));
        }
        let mut waiting = false;
        for c in scheduled.iter_mut() {
            let Some(ready) = c.ready.filter(|_| c.ready_after.is_none()) else {
                continue;
            };
            let log = log_path(logs_in, &c.host, c.k);
            if s.is_ready(&c.host, &ready)? {
                c.ready_after = Some(begun.elapsed());
                continue;
            }
            if begun.elapsed() >= Duration::from_nanos(ready.timeout.as_nanos()) {
                return Err(Error::msg(format!(
                    "real host '{}': `{}` was not ready ({ready}: no socket {}) within its \
                     ready_timeout of {}; its output is in {}",
                    c.host,
                    c.cmd,
                    match ready.protocol {
                        ReadyProtocol::Tcp => "listening on that TCP port",
                        ReadyProtocol::Udp => "bound to that UDP port",
                    },
                    ready.timeout,
                    log.display()
                )));
            }
            waiting = true;
        }
        if !waiting {
            return Ok(());
        }
        if stop.load(Ordering::SeqCst) {
            return Err(Error::msg(
                "interrupted while waiting for the real hosts' programs to be ready",
            ));
        }
        std::thread::sleep(READY_POLL);
    }
}

/// Sets up the real nodes of `sim`, runs it in real time until its duration,
/// a stop request, or the exit of every program marked `wait`; tears it all
/// down; reports.
pub fn run_live(sim: &mut Simulation, mut opts: LiveOptions<'_>) -> Result<LiveReport> {
    let real = sim.real.clone();
    precheck(&real)?;
    let cut = opts.cut.filter(|c| c.parts > 1);
    if let Some(r) = cut.and_then(|c| real.iter().find(|r| c.part_of[r.node] != 0)) {
        return Err(Error::msg(format!(
            "real host '{}' is not in partition 0: a real-time run's cut keeps every real host \
             there (Cut::for_realtime)",
            r.name
        )));
    }
    // The other partitions' copies of the network, built before anything
    // real exists (a big network takes a while).
    let mut helpers = Vec::new();
    let mut taps = std::mem::take(&mut opts.taps).into_iter();
    sim.net.add_taps(taps.next().unwrap_or_default());
    if let Some(c) = cut {
        let spec = sim.net.spec().clone();
        for _ in 1..c.parts {
            let mut h = Simulation::build(&spec).map_err(|e| Error::msg(e.to_string()))?;
            h.net.add_taps(taps.next().unwrap_or_default());
            helpers.push(h);
        }
        crate::rtpart::make_partition(sim, c, 0);
    }
    let exchange = match cut {
        Some(c) => Some(
            crate::rtpart::Exchange::new(c.parts as usize)
                .map_err(|e| Error::os("making the partitions' doorbells", e))?,
        ),
        None => None,
    };
    let first = exchange.as_ref().map(|x| x.first());
    // Before any real interface opens: frames that real hosts send while
    // the reserve is written (about 65 ms for 64 MiB) would wait in the
    // kernel and cross the model that much late (a first ping 54 ms too
    // slow, measured). The scheduler's own reserve then finds it done.
    // (The other partitions do theirs as they start: see `rtpart`.)
    sim.net
        .presize_samples(cut.map(|c| (c.part_of.as_slice(), 0)));
    let reserve = heap_reserve(sim.flows.len()) / cut.map_or(1, |c| c.parts as usize);
    crate::memory::reserve(reserve);
    let mut session = if real.is_empty() {
        None
    } else {
        Some(Session::new()?)
    };
    let has_programs = real
        .iter()
        .any(|r| matches!(&r.kind, NodeKind::Namespace(ns) if !ns.commands.is_empty()));
    let log_dir = match (&opts.log_dir, &session) {
        (Some(dir), _) => {
            std::fs::create_dir_all(dir).map_err(|e| {
                Error::os(format!("creating the log directory {}", dir.display()), e)
            })?;
            Some(dir.clone())
        }
        (None, Some(s)) if has_programs => Some(run_log_dir(s.run_id())?),
        (None, _) => None,
    };
    // If asked, on a machine with more than one CPU, the loop keeps the last
    // one and the namespaces' receive work (their TCP/IP stacks, which
    // otherwise run inside the loop's `send` calls) is steered to the rest.
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let loop_cpu = (opts.steer && ncpu > 1).then(|| ncpu - 1);
    if let (Some(s), Some(cpu)) = (session.as_mut(), loop_cpu) {
        s.steer_receive_away_from(cpu, ncpu);
    }
    let mut ports = Vec::new();
    let mut hosts = Vec::new();
    let mut gro_to_restore: Vec<(String, bool)> = Vec::new();
    for r in &real {
        let s = session
            .as_mut()
            .expect("a session exists when there are real nodes");
        let (io, report): (Box<dyn crate::FrameIo>, HostReport) = match &r.kind {
            NodeKind::Namespace(ns) => match ns.via {
                HostLink::Veth => {
                    let h = s.add_namespace_host(r)?;
                    let dev = h.root_device.clone();
                    // (add_namespace_host left the host's offloads on.)
                    let sock = PacketSocket::open(
                        &dev,
                        &PacketOptions {
                            gso: true,
                            ..PacketOptions::default()
                        },
                    )?;
                    (
                        Box::new(sock),
                        HostReport {
                            name: r.name.clone(),
                            kind: "namespace",
                            namespace: Some(h.namespace.clone()),
                            interface: dev,
                            via: "veth",
                            address: r.port.addr.map(|a| a.to_string()),
                            init_pid: None,
                        },
                    )
                }
                HostLink::Tap => {
                    let name = s.device_name(r);
                    s.record_device(&name)?;
                    // Super-frames cross it whole both ways, as through
                    // a veth host's packet socket; each fits the read
                    // buffer (gso_max_size).
                    let tap = TapDevice::create_gso(&name)?;
                    tap.set_offload_gso()?;
                    crate::netns::ip(&[
                        "link",
                        "set",
                        "dev",
                        &name,
                        "gso_max_size",
                        &packet::GSO_MAX_SIZE.to_string(),
                    ])?;
                    let h = s.add_tap_host(r, &name)?;
                    (
                        Box::new(tap),
                        HostReport {
                            name: r.name.clone(),
                            kind: "namespace",
                            namespace: Some(h.namespace.clone()),
                            interface: name,
                            via: "tap",
                            address: r.port.addr.map(|a| a.to_string()),
                            init_pid: None,
                        },
                    )
                }
            },
            NodeKind::Attached(a) => {
                // GRO is put back as it was at the end of the run.
                if let Ok(on) = packet::gro_enabled(&a.interface) {
                    gro_to_restore.push((a.interface.clone(), on));
                }
                packet::disable_receive_coalescing(&a.interface)?;
                // A virtual device (a veth, whose far side may keep TSO on)
                // can hand over super-frames; they are read and written
                // whole. A NIC (with GRO off) gives wire frames: its ring
                // keeps many small slots.
                let sock = PacketSocket::open(
                    &a.interface,
                    &PacketOptions {
                        gso: packet::is_virtual(&a.interface),
                        ..PacketOptions::default()
                    },
                )?;
                (
                    Box::new(sock),
                    HostReport {
                        name: r.name.clone(),
                        kind: "attached",
                        namespace: None,
                        interface: a.interface.clone(),
                        via: "packet",
                        address: r.port.addr.map(|a| a.to_string()),
                        init_pid: None,
                    },
                )
            }
            _ => unreachable!("only real nodes are listed as real"),
        };
        ports.push(RealPort {
            node: r.node,
            host: r.name.clone(),
            io,
        });
        hosts.push(report);
    }
    let mut scheduled: Vec<Scheduled> = Vec::new();
    for r in real.iter() {
        if let NodeKind::Namespace(ns) = &r.kind {
            for (k, c) in ns.commands.iter().enumerate() {
                scheduled.push(Scheduled {
                    host: r.name.clone(),
                    k,
                    cmd: c.cmd.clone(),
                    wait: c.wait,
                    start: SimTime::ZERO + c.start,
                    started: None,
                    exited: None,
                    ready: c.ready,
                    ready_after: None,
                });
            }
        }
    }
    let logs_in = log_dir.clone().unwrap_or_default();
    if let Some(s) = session.as_mut() {
        start_when_ready(s, &mut scheduled, &logs_in, opts.stop)?;
    }
    if let Some(s) = session.as_ref() {
        for h in hosts.iter_mut().filter(|h| h.namespace.is_some()) {
            h.init_pid = s.init_pid(&h.name).ok();
        }
    }
    (opts.on_ready)(&hosts);

    let any_wait = scheduled.iter().any(|c| c.wait);
    let until = SimTime::ZERO + sim.net.spec().run.duration;
    let remote = opts.remote.take();
    let mut series = opts.series.take();
    let rt_opts = RtOptions {
        until,
        spin_ns: opts.spin_ns,
        late_threshold_ns: opts.late_threshold_ns,
        batch: 256,
        stop: opts.stop,
        priority: opts.priority,
        cpu: loop_cpu,
        wake: remote.as_ref().map(|r| r.wake.as_fd()),
        partners: first.as_ref().map(|f| f as &dyn crate::rt::Partners),
        heap_reserve: reserve,
    };
    let started_at = Instant::now();
    let flows = &sim.flows;
    let endpoints = &sim.endpoints;
    let mut failure: Option<Error> = None;
    let report = {
        let mut control = |ctl: &mut Control<'_>| -> Step {
            let now = ctl.now;
            if let Some(s) = series.as_deref_mut() {
                if s.next_at() <= now {
                    let rt = series_realtime(&ctl.realtime());
                    let written = sample_counts(ctl, flows, cut.zip(exchange.as_ref()))
                        .and_then(|c| s.sample_counts(&c, now, Some(&rt)));
                    if let Err(e) = written {
                        failure = Some(Error::os("writing the time series", e));
                        return Step::Stop;
                    }
                }
            }
            let next_sample = series.as_deref().map_or(SimTime::MAX, |s| s.next_at());
            if let Some(r) = &remote {
                if serve(
                    r,
                    ctl,
                    flows,
                    endpoints,
                    started_at,
                    cut.zip(exchange.as_ref()),
                ) {
                    return Step::Stop;
                }
            }
            let Some(s) = session.as_mut() else {
                return Step::Continue(next_sample);
            };
            for c in scheduled.iter_mut() {
                if c.started.is_none() && c.start <= now {
                    let log = log_path(&logs_in, &c.host, c.k);
                    match s.start_command(&c.host, &c.cmd, &log) {
                        Ok(()) => c.started = Some(now),
                        Err(e) => {
                            failure = Some(e);
                            return Step::Stop;
                        }
                    }
                }
            }
            if let Some(e) = s.take_errors().into_iter().next() {
                failure = Some(e);
                return Step::Stop;
            }
            for e in s.poll_exits() {
                if let Some(c) = scheduled.iter_mut().find(|c| {
                    c.host == e.host && c.cmd == e.cmd && c.started.is_some() && c.exited.is_none()
                }) {
                    c.exited = Some((now, e.code, e.signal));
                }
            }
            if any_wait && scheduled.iter().all(|c| !c.wait || c.exited.is_some()) {
                return Step::Stop;
            }
            let next_start = scheduled
                .iter()
                .filter(|c| c.started.is_none())
                .map(|c| c.start)
                .min()
                .unwrap_or(SimTime::MAX);
            Step::Continue(next_start.min(now + POLL_COMMANDS).min(next_sample))
        };
        let helper_opts = crate::rtpart::HelperOptions {
            late_threshold_ns: opts.late_threshold_ns,
            spin_ns: opts.spin_ns,
            // As the I/O thread, one below partition 0's event thread: a
            // busy helper must not keep the real hosts' frames waiting.
            priority: opts.priority.map(|p| (p - 1).max(1)),
            heap_reserve: reserve,
            until,
            stop: opts.stop,
        };
        std::thread::scope(|scope| {
            // The others wait for the clock and then for the end: whatever
            // happens here (a thread that does not start, an error, a
            // panic), they are told it came.
            let guard = exchange.as_ref().map(|x| x.abandon_on_drop());
            let mut threads = Vec::new();
            if let (Some(c), Some(x)) = (cut, exchange.as_ref()) {
                for (k, h) in helpers.drain(..).enumerate() {
                    let (x, ho) = (x, &helper_opts);
                    threads.push(
                        std::thread::Builder::new()
                            .name(format!("netloop-part-{}", k + 1))
                            .spawn_scoped(scope, move || {
                                crate::rtpart::run_helper(h, c, k + 1, x, ho)
                            })
                            .map_err(|e| Error::os("starting a partition's thread", e))?,
                    );
                }
            }
            let r = rt::run_realtime(
                &mut sim.net,
                &mut sim.queue,
                &mut ports,
                Start::WhenReady,
                &rt_opts,
                &mut control,
            )
            .map_err(|e| Error::os("starting the real-time run's I/O thread", e));
            // Ended as it should: partition 0 has set the end and waited
            // for the others at it.
            // Otherwise the guard lets them go now, before they are waited
            // for.
            match guard {
                Some(g) if r.is_ok() => g.disarm(),
                g => drop(g),
            }
            let mut ends = Vec::new();
            for t in threads {
                match t.join() {
                    Ok(end) => ends.push(end),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            r.map(|report| (report, ends))
        })?
    };
    let (report, ends) = report;
    if let Some(s) = series {
        // The state the run ended in, unless a sample just showed it: every
        // partition's, each from where it stopped.
        let end = sim.queue.now();
        if s.last_at().is_none_or(|t| t < end) && failure.is_none() {
            let owns0 = |n: usize| cut.is_none_or(|c| c.part_of[n] == 0);
            let mut counts = SampleCounts::of(&sim.net, &sim.flows, end, owns0);
            if let Some(c) = cut {
                for (k, e) in ends.iter().enumerate() {
                    let me = k as u32 + 1;
                    let theirs =
                        SampleCounts::of(&e.sim.net, &e.sim.flows, e.sim.queue.now(), |n| {
                            c.part_of[n] == me
                        });
                    counts.absorb(&theirs.0);
                }
            }
            if let Err(e) = s.sample_counts(&counts, end, Some(&series_realtime(&report))) {
                failure = Some(Error::os("writing the time series", e));
            }
        }
    }
    let run_id = session.as_ref().map(|s| s.run_id().to_string());
    // Programs that exited since the last poll (the loop polls every 20 ms)
    // exited by themselves: their status belongs in the report, not
    // "stopped at end".
    let end_time = sim.queue.now();
    if let Some(s) = session.as_mut() {
        for e in s.poll_exits() {
            if let Some(c) = scheduled.iter_mut().find(|c| {
                c.host == e.host && c.cmd == e.cmd && c.started.is_some() && c.exited.is_none()
            }) {
                c.exited = Some((end_time, e.code, e.signal));
            }
        }
        // A program asked for just before the end that could not start
        // (the loop's polls do not wait for the launcher; this does).
        if let Some(e) = s.finish_launches().into_iter().next() {
            failure.get_or_insert(e);
        }
    }
    // Interfaces close before the namespaces go (a TAP device vanishes with
    // its descriptor); the session then stops programs and removes the rest.
    drop(ports);
    for (iface, was_on) in gro_to_restore {
        // Best effort: the interface may have gone away during the run.
        let _ = packet::set_gro(&iface, was_on);
    }
    let mut teardown_failures = Vec::new();
    if let Some(mut s) = session.take() {
        teardown_failures = s.teardown().failures;
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let commands = scheduled
        .iter()
        .map(|c| CommandReport {
            host: c.host.clone(),
            cmd: c.cmd.clone(),
            log: log_path(&logs_in, &c.host, c.k),
            started_s: c.started.map(|t| t.as_secs_f64()),
            exited_s: c.exited.map(|(t, _, _)| t.as_secs_f64()),
            exit_code: c.exited.and_then(|(_, code, _)| code),
            signal: c.exited.and_then(|(_, _, sig)| sig).map(signal_name),
            wait: c.wait,
            ready_after_s: c.ready_after.map(|d| d.as_secs_f64()),
        })
        .collect();
    let mut report = report;
    let partitions = match (cut, exchange.as_ref()) {
        (Some(c), Some(x)) => Some(partitions_report(sim, c, x, &mut report, ends)),
        _ => None,
    };
    Ok(LiveReport {
        run_id,
        teardown_failures,
        hosts,
        commands,
        log_dir,
        realtime: report,
        partitions,
    })
}

/// The partitions' figures and shares at the end of a run cut by `cut`;
/// the run kept up only if every partition did.
fn partitions_report(
    sim: &Simulation,
    cut: &Cut,
    x: &crate::rtpart::Exchange,
    report: &mut RtReport,
    ends: Vec<crate::rtpart::HelperEnd>,
) -> RtPartitions {
    let first = x.first_report(
        cut.part_of.iter().filter(|&&p| p == 0).count(),
        report,
        sim.queue.now(),
    );
    let mut per_partition = vec![first];
    let mut shares = Vec::new();
    let mut events = report.events;
    for (k, e) in ends.into_iter().enumerate() {
        let me = k as u32 + 1;
        shares.push(Share::of(
            &e.sim.net,
            &e.sim.flows,
            e.sim.queue.now(),
            |n| cut.part_of[n] == me,
        ));
        // Every partition ran each scheduled link change.
        events += e.report.events - e.sim.net.link_events();
        per_partition.push(e.report);
    }
    // The run's figures are every partition's (events with each scheduled
    // link change counted once; the lateness percentiles stay partition
    // 0's: each partition's are in `per_partition`).
    report.kept_up = per_partition.iter().all(|p| p.kept_up);
    report.late_events = per_partition.iter().map(|p| p.late_events).sum();
    report.late_held_off = per_partition.iter().map(|p| p.late_held_off).sum();
    report.events = events;
    RtPartitions {
        count: cut.parts,
        lookahead_ns: cut.lookahead_ns(),
        cut_links: cut.cut_link_names(sim.net.spec()),
        per_partition,
        shares,
    }
}

/// Makes the run's own directory for its programs' output:
/// `netloop-<run id>` under the system's temporary directory (`$TMPDIR`,
/// else /tmp). The name is predictable, so the directory is always made
/// anew, never one that exists (someone's, or a link): a name that is taken
/// (a run with the same id before a reboot) gets a suffix.
fn run_log_dir(run_id: &str) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::temp_dir();
    for n in 0..100 {
        let dir = match n {
            0 => base.join(format!("netloop-{run_id}")),
            _ => base.join(format!("netloop-{run_id}-{n}")),
        };
        match std::fs::DirBuilder::new().mode(0o755).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(Error::os(
                    format!("creating the run's log directory {}", dir.display()),
                    e,
                )
                .hint("give the programs' output another directory (netloop run --log-dir DIR)"))
            }
        }
    }
    Err(Error::msg(format!(
        "cannot create the run's log directory: netloop-{run_id} and 99 more like it exist in {}",
        base.display()
    ))
    .hint("remove old netloop-* directories there, or give another (netloop run --log-dir DIR)"))
}

/// The counts of a time series' sample now: this partition's, and with
/// partitions every other's as of its own now (they keep to one wall clock,
/// so they stand within their lateness of each other), each asked between
/// two of its events. An error if a partition has stopped or does not
/// answer within [`SHARE_WAIT`].
fn sample_counts(
    ctl: &Control<'_>,
    flows: &[netloop_model::build::FlowInfo],
    parts: Option<(&Cut, &crate::rtpart::Exchange)>,
) -> std::io::Result<SampleCounts> {
    let Some((cut, x)) = parts else {
        return Ok(SampleCounts::of(ctl.net, flows, ctl.now, |_| true));
    };
    let replies: Vec<_> = (1..x.parts())
        .map(|k| {
            let (tx, rx) = mpsc::sync_channel(1);
            x.ask(k, crate::rtpart::Ask::Counts(tx));
            rx
        })
        .collect();
    let at = crate::rtpart::share_time(ctl.now, ctl.queue);
    let mut counts = SampleCounts::of(ctl.net, flows, at, |n| cut.part_of[n] == 0);
    for theirs in answers(&replies, x, "sample").map_err(std::io::Error::other)? {
        counts.absorb(&theirs);
    }
    Ok(counts)
}

/// The other partitions' answers to a question asked of each (`replies[k]`:
/// partition k + 1's), waited for all together up to [`SHARE_WAIT`]; an
/// error naming the first that stopped or did not answer in time (no
/// `what`: a snapshot, a sample).
fn answers<T>(
    replies: &[mpsc::Receiver<T>],
    x: &crate::rtpart::Exchange,
    what: &str,
) -> std::result::Result<Vec<T>, String> {
    let deadline = Instant::now() + SHARE_WAIT;
    let mut out = Vec::with_capacity(replies.len());
    for (k, rx) in replies.iter().enumerate() {
        let gone = |why: &str| format!("partition {} {why}: no {what}", k + 1);
        loop {
            match rx.recv_timeout(Duration::from_millis(5)) {
                Ok(a) => {
                    out.push(a);
                    break;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(gone("has stopped")),
                Err(mpsc::RecvTimeoutError::Timeout) if x.is_abandoned() => {
                    return Err(gone("has stopped"))
                }
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() >= deadline => {
                    return Err(gone(&format!(
                        "did not answer within {} s",
                        SHARE_WAIT.as_secs()
                    )))
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
    }
    Ok(out)
}

/// How long a snapshot waits for the other partitions' shares, all
/// together: each answers between two of its events, within microseconds
/// unless it is far behind.
const SHARE_WAIT: Duration = Duration::from_secs(2);

/// Answers every waiting request; true if one asked the run to stop. `parts`:
/// the cut and the exchange of a run cut into partitions (this is
/// partition 0).
fn serve(
    r: &Remote,
    ctl: &mut Control<'_>,
    flows: &[netloop_model::build::FlowInfo],
    endpoints: &[netloop_model::build::EndpointInfo],
    started: Instant,
    parts: Option<(&Cut, &crate::rtpart::Exchange)>,
) -> bool {
    let mut buf = [0u8; 64];
    while matches!((&r.wake).read(&mut buf), Ok(n) if n > 0) {}
    let mut stop = false;
    while let Ok((req, reply)) = r.rx.try_recv() {
        let answer = match req {
            Request::ChangeLink(ev) => match ctl.net.link_id(&ev.link) {
                Some(link) if parts.is_some_and(|(cut, _)| too_short(ctl.net, cut, link, &ev)) => {
                    let lookahead = parts.map_or(0, |(cut, _)| cut.lookahead.as_nanos());
                    Reply::Failed(format!(
                        "'{}' joins two partitions: its delay may not go below the lookahead \
                         ({} ms) while the run goes on (frames would reach the other partition \
                         after their arrival time)",
                        ev.link,
                        lookahead as f64 / 1e6
                    ))
                }
                Some(link) => {
                    ctl.net.change_link(link, ev.direction, &ev.action);
                    if let Some((_, x)) = parts {
                        for k in 1..x.parts() {
                            x.ask(k, crate::rtpart::Ask::ChangeLink(ev.clone()));
                        }
                    }
                    Reply::Done
                }
                None => Reply::Failed(format!("'{}' is not a link of this network", ev.link)),
            },
            Request::Now => Reply::Now(ctl.now),
            Request::Snapshot { new_window } => match snapshot(ctl, flows, started, parts) {
                Ok((results, partitions)) => Reply::Snapshot(Box::new(Snapshot {
                    results,
                    realtime: ctl.realtime(),
                    window_lateness: ctl.window(new_window),
                    partitions,
                })),
                Err(why) => Reply::Failed(why),
            },
            Request::Stop => {
                stop = true;
                Reply::Done
            }
            Request::Endpoints { sends } if parts.is_none() => {
                endpoint_exchange(ctl, endpoints, sends)
            }
            Request::Endpoints { .. } => Reply::Failed(
                "message endpoints are not supported in a run cut into partitions yet".into(),
            ),
        };
        // The caller may have given up waiting; nothing to do then.
        let _ = reply.send(answer);
    }
    stop
}

/// Sends `sends` from their endpoints at the clock's now (or, when events
/// due before it are still waiting, at the earliest of them: the model's
/// time never goes back) and takes what reached every endpoint.
fn endpoint_exchange(
    ctl: &mut Control<'_>,
    endpoints: &[netloop_model::build::EndpointInfo],
    sends: Vec<(usize, Vec<u8>)>,
) -> Reply {
    let mut refused = Vec::new();
    if !sends.is_empty() {
        let q = &mut *ctl.queue;
        let t = q
            .peek_time()
            .map_or(ctl.now, |next| next.min(ctl.now))
            .max(q.now());
        q.advance_to(t);
    }
    for (i, data) in sends {
        let Some(e) = endpoints.get(i) else {
            refused.push((i, format!("there is no endpoint #{i}")));
            continue;
        };
        if let Err(why) = ctl.net.endpoint_send(ctl.queue, e.node, e.app, None, &data) {
            refused.push((i, why.to_string()));
        }
    }
    Reply::Endpoints {
        now: ctl.now,
        refused,
        arrived: ctl.net.take_messages(ctl.queue, endpoints),
    }
}

/// Whether `ev` would make cut link `link` (if it is cut) shorter than
/// the cut's lookahead in a direction it changes.
fn too_short(
    net: &netloop_model::network::Network,
    cut: &Cut,
    link: usize,
    ev: &LinkEventSpec,
) -> bool {
    let netloop_model::spec::LinkAction::Set(change) = &ev.action else {
        return false;
    };
    cut.cut_links.contains(&link)
        && (0..2).any(|side| {
            ev.direction.includes(side) && {
                let mut d = net.links()[link].dirs[side].channel.spec().clone();
                d.apply(change);
                d.least_delay() < cut.lookahead
            }
        })
}

/// The results as of now and, cut into partitions, each partition's
/// figures (their shares gathered from the others: see `rtpart`).
fn snapshot(
    ctl: &mut Control<'_>,
    flows: &[netloop_model::build::FlowInfo],
    started: Instant,
    parts: Option<(&Cut, &crate::rtpart::Exchange)>,
) -> std::result::Result<(Results, Vec<PartitionRt>), String> {
    let wall = Some(started.elapsed().as_secs_f64());
    let view = SimView {
        net: ctl.net,
        queue: ctl.queue,
        flows,
    };
    let Some((cut, x)) = parts else {
        return Ok((view.results("realtime", wall, None), Vec::new()));
    };
    // Asked all at once; each stands still after answering until
    // `resumes` is dropped (when this returns, whatever happens).
    let mut resumes = Vec::new();
    let replies: Vec<_> = (1..x.parts())
        .map(|k| {
            let (tx, rx) = mpsc::sync_channel(1);
            let (go, wait) = mpsc::channel::<()>();
            x.ask(k, crate::rtpart::Ask::Share(tx, wait));
            resumes.push(go);
            rx
        })
        .collect();
    let answers = answers(&replies, x, "snapshot")?;
    // The others stand still: hand over what this one sent, so that every
    // frame is on a wire, in a queue or node, or in an inbox, once.
    x.send(0, ctl.net);
    let at = crate::rtpart::share_time(ctl.now, ctl.queue);
    let mut share = Share::of(ctl.net, flows, at, |n| cut.part_of[n] == 0);
    x.add_crossing(&mut share);
    drop(resumes);
    let mut events = ctl.queue.events_processed();
    let rt = ctl.realtime();
    let mut partitions = vec![x.first_report(
        cut.part_of.iter().filter(|&&p| p == 0).count(),
        &rt,
        ctl.queue.now(),
    )];
    for (s, p, n) in answers {
        share.absorb(s);
        partitions.push(p);
        events += n;
    }
    let view = SimView {
        net: ctl.net,
        queue: ctl.queue,
        flows,
    };
    Ok((
        view.results_from(&share, events, "realtime", wall, None),
        partitions,
    ))
}

/// A signal's name (`SIGSEGV`), or its number if it has none here.
fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_string())
}

/// Where the output of command `k` on `host` goes.
pub fn log_path(dir: &Path, host: &str, k: usize) -> PathBuf {
    dir.join(format!("{host}.{k}.log"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run that does not answer in time may answer later (a time-out);
    /// one whose end of the channel is gone has ended (not a time-out):
    /// the HELICS federate asks again only in the first case.
    #[test]
    fn a_call_tells_a_time_out_from_a_run_that_ended() {
        let (handle, remote) = remote().unwrap();
        let e = handle
            .call(Request::Now, Duration::from_millis(10))
            .unwrap_err();
        assert!(e.timed_out(), "{e}");
        drop(remote);
        let e = handle
            .call(Request::Now, Duration::from_millis(10))
            .unwrap_err();
        assert!(!e.timed_out(), "{e}");
    }
}
