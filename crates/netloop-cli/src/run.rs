//! `netloop run`, `netloop check` and `netloop demo`: load, build, run, report.

use anyhow::{anyhow, Context};
use clap::Args;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use indicatif::{ProgressBar, ProgressStyle};
use netloop_config::Loaded;
use netloop_core::{SimDuration, SimTime};
use netloop_io::pcap::Capture;
use netloop_io::pcapparts::PartedCaptures;
use netloop_model::network::Node;
use netloop_model::partition::PartitionTaps;
use netloop_model::results::Results;
use netloop_model::routing::{Prefix, Route};
use netloop_model::series::SeriesWriter;
use netloop_model::Simulation;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::format;

/// Arguments of `netloop run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The topology file (TOML; see docs/topology.md).
    pub file: PathBuf,
    /// Write the results as JSON (schema: docs/results-schema.md).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Capture to pcap: a link (its name, or its ends as in `r1-r2`),
    /// `NODE:IFACE` (e.g. `r1:eth0`), or `all` for every link. Repeatable;
    /// what each contains: docs/capture.md.
    #[arg(long, value_name = "TARGET")]
    pub pcap: Vec<String>,
    /// Directory for pcap files.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub pcap_dir: PathBuf,
    /// Override the file's seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Override the file's duration (e.g. `30s`).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<SimDuration>,
    /// Sample the run's counters every INTERVAL of simulated time (e.g.
    /// `100ms`) into a time series written as the run goes (JSON Lines):
    /// links, flows, and a real-time run's own
    /// figures. Into `--stats FILE`, or beside `--json`'s file
    /// (`results.json` → `results.series.jsonl`); the format is in
    /// docs/series.md.
    #[arg(long, value_parser = parse_duration, value_name = "INTERVAL")]
    pub stats_interval: Option<SimDuration>,
    /// Where `--stats-interval` writes the time series.
    #[arg(long, value_name = "PATH", requires = "stats_interval")]
    pub stats: Option<PathBuf>,
    /// Print no summary tables.
    #[arg(long, short)]
    pub quiet: bool,
    /// Never show the progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Cut the network into this many partitions, each run on a thread of
    /// its own: as fast as possible, the results equal one partition's; in
    /// real time, each partition keeps to the wall clock and every real
    /// host is in the first (see docs/partitions.md).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub partitions: u32,
    /// Simulations cut into partitions on threads: how they keep in step,
    /// `windowed` (rounds: agree on the earliest event, run one lookahead
    /// past it) or `null` (null messages: each partition runs up to what
    /// those that send to it promise). The results are the same.
    #[arg(long, value_enum, default_value_t = SyncArg::Windowed)]
    pub sync: SyncArg,
    /// Simulations: run as one partition of a job started by `mpirun`, each
    /// rank a partition (`mpirun -np 4 netloop run FILE --mpi`); rank 0
    /// prints and writes the results. Needs netloop built with
    /// `--features mpi` (docs/partitions.md).
    #[arg(long)]
    pub mpi: bool,
    /// Run in real time even without real hosts (a topology with namespace
    /// or attached nodes always runs in real time).
    #[arg(long)]
    pub realtime: bool,
    /// Real-time runs: directory for the output of programs run on real
    /// hosts (default: the run's own directory, `netloop-<run id>` under the
    /// system's temporary directory, printed at the end).
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// Real-time runs: an event later than this means the run fell behind.
    #[arg(long, value_parser = parse_duration, default_value = "1ms")]
    pub late_threshold: SimDuration,
    /// Real-time runs: exit with status 1 if the run fell behind real time or
    /// lost frames at the boundary.
    #[arg(long)]
    pub strict: bool,
    /// Real-time runs: SCHED_FIFO priority (1-99) of the real-time loop, so
    /// it runs ahead of the programs it serves; 0 keeps the normal class.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u8).range(0..=99))]
    pub rt_priority: u8,
    /// Real-time runs: keep the real-time loop on the last CPU and steer the
    /// real hosts' receive work (their TCP/IP stacks) to the other CPUs:
    /// about twice the TCP throughput on 2 cores, but each frame delivered to
    /// a real host may wait for an idle CPU to wake (tens of microseconds).
    #[arg(long)]
    pub steer: bool,
}

/// How partitions on threads keep in step (`--sync`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncArg {
    /// Rounds with a window of one lookahead.
    Windowed,
    /// Null messages.
    Null,
}

impl SyncArg {
    /// The model's name for it.
    pub fn method(self) -> netloop_model::partition::SyncMethod {
        match self {
            SyncArg::Windowed => netloop_model::partition::SyncMethod::Windowed,
            SyncArg::Null => netloop_model::partition::SyncMethod::NullMessages,
        }
    }
}

/// Arguments of `netloop demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Write each experiment's results (and the programs' output) into this
    /// directory.
    #[arg(long, value_name = "DIR")]
    pub json_dir: Option<PathBuf>,
    /// Run the topologies with simulated hosts instead of real ones (no root
    /// needed).
    #[arg(long)]
    pub simulated: bool,
}

pub(crate) fn parse_duration(s: &str) -> Result<SimDuration, String> {
    SimDuration::parse(s).map_err(|e| e.to_string())
}

/// Loads a topology file, printing every error; `None` if it has any.
pub(crate) fn load(file: &Path, overrides: &netloop_config::Overrides) -> Option<Loaded> {
    match netloop_config::load_with(file, overrides) {
        Ok(l) => Some(l),
        Err(errors) => {
            eprintln!("{errors}");
            eprintln!(
                "{}: {} error{}",
                file.display(),
                errors.len(),
                if errors.len() == 1 { "" } else { "s" }
            );
            None
        }
    }
}

pub(crate) fn build(loaded: &Loaded) -> Option<Simulation> {
    match Simulation::build(&loaded.spec) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("{}", loaded.sources.located(&e));
            None
        }
    }
}

/// `netloop check FILE`.
pub fn check(file: &Path, verbose: bool) -> anyhow::Result<ExitCode> {
    let Some(loaded) = load(file, &netloop_config::Overrides::default()) else {
        return Ok(ExitCode::from(2));
    };
    let Some(sim) = build(&loaded) else {
        return Ok(ExitCode::from(2));
    };
    let mut out = std::io::stdout().lock();
    match describe(&mut out, file, &loaded, &sim, verbose).and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // Read by a program that stopped reading (`| head`): what it read
        // was right, and the check passed.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(anyhow!("writing to standard output: {e}")),
    }
}

/// What `netloop check` says of a network that builds: a line of counts,
/// and with `verbose` each node's interfaces and routes.
fn describe(
    out: &mut impl Write,
    file: &Path,
    loaded: &Loaded,
    sim: &Simulation,
    verbose: bool,
) -> std::io::Result<()> {
    let s = &loaded.spec;
    writeln!(
        out,
        "{}: ok — {} nodes, {} links, {} flows, {} link events, {} simulated with seed {}",
        file.display(),
        s.nodes.len(),
        s.links.len(),
        sim.flows.len(),
        s.events.len(),
        s.run.duration,
        s.run.seed
    )?;
    if !verbose {
        return Ok(());
    }
    for (id, name) in sim.net.node_names().iter().enumerate() {
        let ifaces: Vec<String> = sim
            .net
            .ports(id)
            .iter()
            .map(|p| {
                let v6 = p.addr6.map_or(String::new(), |a| format!(" {a}"));
                format!(
                    "{} {} {}{v6}",
                    p.name,
                    p.mac,
                    p.addr.map_or("-".to_string(), |a| a.to_string())
                )
            })
            .collect();
        writeln!(out, "  {name}: {}", ifaces.join("; "))?;
        let ports = sim.net.ports(id);
        match sim.net.node(id) {
            Node::Host(h) => {
                write_routes(out, h.table().routes(), ports)?;
                write_routes(out, h.table6().routes(), ports)?;
            }
            Node::Router(r) => {
                write_routes(out, r.table().routes(), ports)?;
                write_routes(out, r.table6().routes(), ports)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// A routing table as `netloop check --verbose` shows it, one route a line.
fn write_routes<P>(
    out: &mut impl Write,
    routes: Vec<Route<P>>,
    ports: &[netloop_model::node::PortInfo],
) -> std::io::Result<()>
where
    P: Prefix + std::fmt::Display,
    P::Addr: std::fmt::Display,
{
    for r in routes {
        let via = r
            .via
            .map_or("connected".to_string(), |v| format!("via {v}"));
        writeln!(out, "    {} {via} dev {}", r.prefix, ports[r.port].name)?;
    }
    Ok(())
}

/// The directory `path` goes in, and the temporary file it is first written
/// to there.
fn json_dir_and_temp(path: &Path) -> (&Path, PathBuf) {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp{}",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("results"),
        std::process::id()
    ));
    (dir, tmp)
}

/// Checks, before a run, that results can be written to `path` (its
/// directory can be made and a file created in it), so that a run is not
/// lost at its end to a read-only or missing directory. A full disk still
/// shows only when the results are written.
pub fn check_json_writable(path: &Path) -> anyhow::Result<()> {
    let (dir, tmp) = json_dir_and_temp(path);
    if path.is_dir() {
        return Err(anyhow!(
            "cannot write {}: it is a directory",
            path.display()
        ));
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::File::create(&tmp).map_err(|e| anyhow!("cannot write {}: {e}", path.display()))?;
    let _ = std::fs::remove_file(&tmp);
    Ok(())
}

/// Writes `value` as pretty JSON to `path` atomically (a temporary file in
/// the same directory, then a rename), so a crash never leaves half a file;
/// on failure the temporary file is removed.
pub fn write_json_atomic<T: serde::Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    write_atomic(path, |w| {
        serde_json::to_writer_pretty(&mut *w, value)?;
        w.write_all(b"\n")?;
        Ok(())
    })
}

/// Writes what `fill` writes to `path` atomically (a temporary file in the
/// same directory, synced, then a rename), so a crash never leaves half a
/// file; on failure the temporary file is removed.
pub fn write_atomic(
    path: &Path,
    fill: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    use std::io::Write;
    let (dir, tmp) = json_dir_and_temp(path);
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let write = || -> anyhow::Result<()> {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        fill(&mut w)?;
        w.flush()?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow!("cannot write {}: {e}", path.display())
    })
}

/// Runs a built simulation with a progress bar and Ctrl-C handling; returns
/// the wall-clock seconds and whether it was interrupted.
fn execute(
    sim: &mut Simulation,
    progress: bool,
    series: Option<&mut SeriesWriter>,
) -> anyhow::Result<(f64, bool)> {
    let interrupted = crate::live::interrupted();
    let end = SimTime::ZERO + sim.net.spec().run.duration;
    let bar = if progress {
        let b = ProgressBar::new(end.as_nanos().max(1));
        b.set_style(
            ProgressStyle::with_template(
                "{spinner} simulated {msg} [{bar:30}] {percent}% eta {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        // Only shown if the run lasts; indicatif hides itself without a tty.
        b.set_draw_target(indicatif::ProgressDrawTarget::stderr_with_hz(4));
        Some(b)
    } else {
        None
    };
    let start = Instant::now();
    let mut shown = false;
    let mut report = |now: SimTime, _events: u64| {
        if let Some(b) = &bar {
            let wall = start.elapsed().as_secs_f64();
            if wall > 1.0 || shown {
                shown = true;
                b.set_position(now.as_nanos());
                b.set_message(format!(
                    "{now} ({:.1}x real time)",
                    now.as_secs_f64() / wall.max(1e-9)
                ));
            }
        }
        !interrupted.load(Ordering::SeqCst)
    };
    match series {
        None => {
            sim.run(1 << 16, &mut report);
        }
        Some(s) => {
            sim.run_sampled(s, 1 << 16, &mut report)
                .context("writing the time series")?;
        }
    }
    let wall = start.elapsed().as_secs_f64();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok((wall, interrupted.load(Ordering::SeqCst)))
}

/// The time series `netloop run --stats-interval` asks for: its interval
/// and file (`--stats`, or beside `--json`'s). Refused where it is not made
/// yet: co-simulations as fast as possible.
fn series_plan(
    args: &RunArgs,
    sim: &Simulation,
    realtime: bool,
) -> anyhow::Result<Option<(SimDuration, PathBuf)>> {
    let Some(interval) = args.stats_interval else {
        return Ok(None);
    };
    if interval == SimDuration::ZERO {
        return Err(anyhow!(
            "--stats-interval 0: the interval must be longer than zero, e.g. 100ms"
        ));
    }
    if sim.net.spec().helics.is_some() && !realtime {
        return Err(anyhow!(
            "--stats-interval: a co-simulation ([helics]) as fast as possible has no time series \
             yet (one in real time has)"
        ));
    }
    if args.stats.is_some() && args.stats == args.json {
        return Err(anyhow!(
            "--stats and --json name the same file: give the time series its own"
        ));
    }
    let path = match (&args.stats, &args.json) {
        (Some(p), _) => p.clone(),
        (None, Some(json)) => json.with_extension("series.jsonl"),
        (None, None) => {
            return Err(anyhow!(
                "--stats-interval needs a file: --stats PATH, or --json PATH (beside which it goes)"
            ))
        }
    };
    Ok(Some((interval, path)))
}

/// The time series of `plan` started: its file created and its header
/// written.
pub(crate) fn open_series(
    (interval, path): &(SimDuration, PathBuf),
    sim: &Simulation,
    topology: &str,
) -> anyhow::Result<SeriesWriter> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating {} for the time series", dir.display()))?;
    }
    let file = std::fs::File::create(path)
        .with_context(|| format!("creating the time series {}", path.display()))?;
    SeriesWriter::new(
        Box::new(file),
        *interval,
        &sim.net,
        &sim.flows,
        Some(topology),
    )
    .with_context(|| format!("writing the time series {}", path.display()))
}

/// [`execute`] for a run cut into partitions (`--partitions`): returns the
/// results and whether it was interrupted.
fn execute_partitioned(
    sim: Simulation,
    cut: &netloop_model::partition::Cut,
    topology: &str,
    taps: Vec<PartitionTaps>,
    series: Option<&mut SeriesWriter>,
    sync: SyncArg,
) -> anyhow::Result<(Results, bool)> {
    let interrupted = crate::live::interrupted();
    let end = SimTime::ZERO + sim.net.spec().run.duration;
    let start = Instant::now();
    let flag = interrupted;
    let interval = series.as_ref().map(|s| s.interval());
    let p = netloop_model::partition::run_threads_with_taps(
        sim,
        cut,
        end,
        move |_| !flag.load(Ordering::SeqCst),
        taps,
        interval.zip(series),
        sync.method(),
    )
    .map_err(|e| anyhow!("{e}"))?;
    if let Some(e) = p.series_error {
        return Err(anyhow!("writing the time series: {e}"));
    }
    let wall = start.elapsed().as_secs_f64();
    let results = p.results(cut, "afap", Some(wall), Some(topology.to_string()));
    Ok((results, interrupted.load(Ordering::SeqCst)))
}

/// Rank 0's results, whether the run was interrupted, and its captures.
pub(crate) type MpiOutcome = Option<(Results, bool, Vec<Arc<Mutex<Capture>>>)>;

#[cfg(feature = "mpi")]
pub(crate) fn execute_mpi(
    sim: Simulation,
    partitions: u32,
    given: Option<Vec<u32>>,
    topology: &str,
    pcap: (&[String], &Path),
    series: Option<&(SimDuration, PathBuf)>,
) -> anyhow::Result<MpiOutcome> {
    crate::mpi_run::execute(sim, partitions, given.as_deref(), topology, pcap, series)
}

#[cfg(not(feature = "mpi"))]
pub(crate) fn execute_mpi(
    _sim: Simulation,
    _partitions: u32,
    _given: Option<Vec<u32>>,
    _topology: &str,
    _pcap: (&[String], &Path),
    _series: Option<&(SimDuration, PathBuf)>,
) -> anyhow::Result<MpiOutcome> {
    Err(anyhow!(
        "this netloop was built without MPI: build it with `cargo build --release --features mpi` \
         (Open MPI or MPICH, and libclang, installed; see docs/partitions.md)"
    ))
}

/// How a pcap capture of `netloop run --pcap` went: an element of the
/// results' `pcap`.
#[derive(serde::Serialize)]
struct CaptureReport {
    /// The file's name in `--pcap-dir` (not its path, which would make the
    /// results of identical runs into different directories differ).
    file: String,
    /// Frames in it.
    frames: u64,
    /// Why it was cut short (a write failed, e.g. the disk was full: the
    /// file holds the frames before), or null if it is complete.
    error: Option<String>,
}

/// The results with the captures of `--pcap`, if any.
#[derive(serde::Serialize)]
struct WithCaptures<'a> {
    #[serde(flatten)]
    results: &'a Results,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pcap: Vec<CaptureReport>,
}

/// `netloop run FILE`.
pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    // The duration is checked with the file (a traffic's start against the
    // run's end), so that an error it causes says it did.
    let overrides = netloop_config::Overrides {
        duration: args.duration.map(|d| (d, "--duration".to_string())),
    };
    let Some(mut loaded) = load(&args.file, &overrides) else {
        return Ok(ExitCode::from(2));
    };
    if let Some(s) = args.seed {
        loaded.spec.run.seed = s;
    }
    let Some(mut sim) = build(&loaded) else {
        return Ok(ExitCode::from(2));
    };
    if loaded.partitions.is_some() && args.partitions <= 1 && !args.mpi && !args.quiet {
        // Not an error (one partition gives the same results), but the
        // user who wrote them may have expected them to be used.
        eprintln!(
            "note: {} gives each node a partition; they are used with --partitions N \
             (threads) or --mpi (ranks): this run is one partition",
            args.file.display()
        );
    }
    let realtime = args.realtime || (!sim.real.is_empty() && !args.mpi);
    let cut = if args.partitions > 1 && !args.mpi {
        let given = loaded.partitions.as_deref();
        let cut = if realtime {
            // Every real host in partition 0, beside the I/O thread.
            netloop_model::partition::Cut::for_realtime(&loaded.spec, given, args.partitions)
        } else {
            netloop_model::partition::Cut::given_or_auto(&loaded.spec, given, args.partitions)
        }
        .map_err(|e| {
            anyhow!(
                "{}: cannot cut into {} partitions: {e}",
                args.file.display(),
                args.partitions
            )
        })?;
        Some(cut)
    } else {
        None
    };
    if let Some(path) = &args.json {
        check_json_writable(path)?;
    }
    // A partitioned run's captures are written in parts, one per
    // partition, and merged at the end (an MPI run makes its own).
    let (mut caps, mut parted) = (Vec::new(), None);
    if let Some(cut) = &cut {
        let all: Vec<u32> = (0..cut.parts).collect();
        let (c, p) =
            PartedCaptures::create(&sim, &args.pcap, &args.pcap_dir, cut.parts, &all, true)
                .map_err(|e| anyhow!("{e}"))?;
        (caps, parted) = (c, Some(p));
    } else if !args.mpi {
        caps = netloop_io::pcap::attach(&mut sim, &args.pcap, &args.pcap_dir)
            .map_err(|e| anyhow!("{e}"))?;
    }
    let taps = |parted: &Option<PartedCaptures>, parts: u32| -> Vec<PartitionTaps> {
        parted
            .as_ref()
            .map(|p| (0..parts).map(|k| p.taps(k)).collect())
            .unwrap_or_default()
    };
    let topology = args.file.display().to_string();
    let mut failed = false;
    if args.mpi && args.realtime {
        return Err(anyhow!(
            "--mpi runs simulations as fast as possible only (real time runs partitions on threads: --partitions N): drop --realtime or --mpi"
        ));
    }
    if args.sync == SyncArg::Null {
        let why = if args.mpi {
            Some("MPI ranks keep in step by rounds only")
        } else if realtime {
            Some("in real time each partition keeps to the wall clock")
        } else if cut.is_none() {
            Some("it is how partitions keep in step: add --partitions N (N > 1)")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(anyhow!("--sync null: {why}"));
        }
    }
    if loaded.spec.helics.is_some() && (args.mpi || cut.is_some()) {
        return Err(anyhow!(
            "{}: a HELICS federate runs in one partition: --partitions and --mpi are not \
             supported with [helics] yet",
            args.file.display()
        ));
    }
    let series_plan = series_plan(args, &sim, realtime)?;
    // Under MPI rank 0 alone writes it, once it knows it is rank 0.
    let mut series = match &series_plan {
        Some(plan) if !args.mpi => Some(open_series(plan, &sim, &topology)?),
        _ => None,
    };
    let (results, interrupted) = if realtime {
        let out = crate::live::execute_live(
            &mut sim,
            &topology,
            args.log_dir.as_deref(),
            args.late_threshold.as_nanos(),
            (args.rt_priority > 0).then_some(i32::from(args.rt_priority)),
            args.steer,
            args.quiet,
            cut.as_ref(),
            taps(&parted, cut.as_ref().map_or(1, |c| c.parts)),
            series.as_mut(),
        )?;
        if !args.quiet {
            print_summary(&topology, &out.results);
            crate::live::print_report(&out.report);
        } else {
            crate::live::print_warnings(&out.report);
        }
        let rt = &out.report.realtime;
        if args.strict && (!rt.kept_up || rt.boundary_lost > 0) {
            failed = true;
        }
        let interrupted = rt.end == netloop_io::rt::EndReason::Interrupted;
        (out.results, interrupted)
    } else if args.mpi {
        let pcap = (args.pcap.as_slice(), args.pcap_dir.as_path());
        let series = series_plan.as_ref();
        match execute_mpi(
            sim,
            args.partitions,
            loaded.partitions,
            &topology,
            pcap,
            series,
        )? {
            Some((results, interrupted, captures)) => {
                if !args.quiet {
                    print_summary(&topology, &results);
                }
                caps = captures;
                (results, interrupted)
            }
            // Rank 0 reports for all.
            None => return Ok(ExitCode::SUCCESS),
        }
    } else if let Some(cut) = &cut {
        let (results, interrupted) = execute_partitioned(
            sim,
            cut,
            &topology,
            taps(&parted, cut.parts),
            series.as_mut(),
            args.sync,
        )?;
        if !args.quiet {
            print_summary(&topology, &results);
        }
        (results, interrupted)
    } else if let Some(h) = &loaded.spec.helics {
        let (results, interrupted) = execute_cosim(&mut sim, h, &topology, args.quiet)?;
        if !args.quiet {
            print_summary(&topology, &results);
        }
        (results, interrupted)
    } else {
        let (wall, interrupted) =
            execute(&mut sim, !args.no_progress && !args.quiet, series.as_mut())?;
        let results = sim.results("afap", Some(wall), Some(topology.clone()));
        if !args.quiet {
            print_summary(&topology, &results);
        }
        (results, interrupted)
    };
    if let Some(p) = parted {
        p.merge_local();
    }
    let mut captures = Vec::new();
    for c in &caps {
        let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
        let error = c.finish();
        captures.push(CaptureReport {
            file: c
                .path
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            frames: c.frames,
            error: error.clone(),
        });
        match error {
            Some(e) => {
                eprintln!("error: pcap capture cut short: {e}");
                failed = true;
            }
            None if !args.quiet => outln!(
                "pcap: {} ({} frames)",
                c.path.display(),
                format::count(c.frames)
            ),
            None => {}
        }
    }
    if let Some(path) = &args.json {
        write_json_atomic(
            path,
            &WithCaptures {
                results: &results,
                pcap: captures,
            },
        )?;
        if !args.quiet {
            outln!("results: {}", path.display());
        }
    }
    if results.conservation.unaccounted != 0 {
        eprintln!(
            "error: packet conservation violated: {} frames unaccounted for",
            results.conservation.unaccounted
        );
        failed = true;
    }
    if results.cosim.as_ref().is_some_and(|c| c["end"] == "failed") {
        failed = true;
    }
    if interrupted {
        eprintln!(
            "interrupted at {} of {}",
            SimTime::from_nanos(results.meta.sim_time_reached_ns),
            loaded.spec.run.duration
        );
        return Ok(ExitCode::from(130));
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Runs `sim` as a HELICS federate until its duration (or Ctrl-C).
fn execute_cosim(
    sim: &mut Simulation,
    spec: &netloop_model::spec::HelicsSpec,
    topology: &str,
    quiet: bool,
) -> anyhow::Result<(Results, bool)> {
    let helics = load_helics(spec, topology, quiet, "")?;
    let interrupted = crate::live::interrupted();
    let start = Instant::now();
    let done = std::sync::atomic::AtomicBool::new(false);
    let report = std::thread::scope(|scope| {
        // Ctrl-C while HELICS waits (for the federation, for a grant): the
        // wait is aborted, as the loop only looks between grants.
        scope.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                if interrupted.load(Ordering::SeqCst) {
                    helics.abort("netloop was interrupted");
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        });
        let r = netloop_helics::run(sim, &helics, spec, &|| interrupted.load(Ordering::SeqCst));
        done.store(true, Ordering::SeqCst);
        r
    });
    if interrupted.load(Ordering::SeqCst) && report.is_err() {
        let results = sim.results(
            "cosim",
            Some(start.elapsed().as_secs_f64()),
            Some(topology.to_string()),
        );
        eprintln!("interrupted while waiting for the HELICS federation");
        return Ok((results, true));
    }
    let report = report.map_err(|e| anyhow!("{topology}: {e}"))?;
    let wall = start.elapsed().as_secs_f64();
    let mut results = sim.results("cosim", Some(wall), Some(topology.to_string()));
    let interrupted = report.end == "interrupted";
    if !quiet {
        print_federate(&report);
    }
    say_end(
        &report,
        SimTime::from_nanos(results.meta.sim_time_reached_ns),
        sim.net.spec().run.duration,
    );
    results.cosim = Some(serde_json::to_value(&report)?);
    Ok((results, interrupted))
}

/// Says on stderr why a co-simulation ended at `reached` of `duration`
/// when the federation ended it (simulated or real time alike): the
/// federates `report` names left it, or it failed (HELICS's words, or the
/// federate that stopped answering).
pub(crate) fn say_end(
    report: &netloop_helics::CosimReport,
    reached: SimTime,
    duration: netloop_core::SimDuration,
) {
    match report.end {
        "federate_left" => eprintln!(
            "the federation ended at {reached} of {duration}: {} left it; netloop's run ends there, its results kept",
            report
                .departed
                .iter()
                .map(|n| format!("federate '{n}'"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        "failed" => eprintln!(
            "error: the HELICS federation failed at {reached} of {duration}: {}; the results up to then are kept",
            report.failure.as_deref().unwrap_or("?")
        ),
        _ => {}
    }
}

/// Loads HELICS for `spec`'s federation and says so (`how`: e.g. " in real
/// time").
pub(crate) fn load_helics(
    spec: &netloop_model::spec::HelicsSpec,
    topology: &str,
    quiet: bool,
    how: &str,
) -> anyhow::Result<netloop_helics::Helics> {
    let helics =
        netloop_helics::Helics::load().map_err(|e| anyhow!("{topology}: [helics]: {e}"))?;
    if !quiet {
        eprintln!(
            "joining the HELICS federation as '{}'{how} (core {}, HELICS {})",
            spec.name,
            spec.core,
            helics.version()
        );
    }
    Ok(helics)
}

/// One line of what the federate did.
pub(crate) fn print_federate(r: &netloop_helics::CosimReport) {
    outln!(
        "federate '{}': {} grants ({} early), {} messages in, {} out, {} without a federate, waited {:.3} s for grants",
        r.federate,
        r.grants,
        r.early_grants,
        r.from_federation,
        r.to_federation,
        r.without_federate,
        r.wait_wall_ns as f64 / 1e9
    );
}

pub(crate) fn table() -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t
}

pub(crate) fn right(s: String) -> Cell {
    Cell::new(s).set_alignment(CellAlignment::Right)
}

/// Prints the end-of-run summary.
pub fn print_summary(name: &str, r: &Results) {
    let m = &r.meta;
    let sim_s = m.sim_time_reached_ns as f64 / 1e9;
    match &r.wall {
        Some(w) => outln!(
            "{name}: {} simulated in {:.3} s wall ({:.1}x real time), {} events ({:.2} M/s), seed {}",
            SimTime::from_nanos(m.sim_time_reached_ns),
            w.seconds,
            w.sim_per_wall,
            format::count(m.events_processed),
            w.events_per_second / 1e6,
            m.seed
        ),
        None => outln!("{name}: {sim_s} s simulated, seed {}", m.seed),
    }
    if !r.flows.is_empty() {
        let mut t = table();
        t.set_header(vec![
            "flow",
            "kind",
            "path",
            "sent",
            "received",
            "loss",
            "throughput",
            "delay p50",
            "delay p99",
            "jitter",
        ]);
        let max_rows = 40;
        for f in r.flows.iter().take(max_rows) {
            let d = f.delay_ns.as_ref();
            let (sent, recv) = match &f.tcp {
                Some(tcp) => (
                    format!("{} B", format::count(tcp.bytes_sent)),
                    format!("{} B", format::count(tcp.bytes_received)),
                ),
                None => (
                    f.sent_packets.map_or("-".into(), format::count),
                    f.received_packets.map_or("-".into(), format::count),
                ),
            };
            // For TCP the goodput (start to completion) says more than the
            // average over the flow's whole configured period.
            let throughput = match &f.tcp {
                Some(t) if t.goodput_bps > 0.0 => Some(t.goodput_bps),
                _ => f.throughput_bps,
            };
            let mut row = vec![
                Cell::new(&f.name),
                Cell::new(f.kind),
                Cell::new(format!("{} → {}", f.from, f.to)),
                right(sent),
                right(recv),
                right(f.loss.map_or("-".into(), format::percent)),
                right(throughput.map_or("-".into(), format::rate)),
                right(d.map_or("-".into(), |d| format::ns(d.p50 as f64))),
                right(d.map_or("-".into(), |d| format::ns(d.p99 as f64))),
                right(f.jitter_ns.map_or("-".into(), format::ns)),
            ];
            if let Some(hops) = &f.hops {
                let path: Vec<String> = hops
                    .iter()
                    .map(|h| h.address.map_or("*".into(), |a| a.to_string()))
                    .collect();
                row[9] = Cell::new(format!("hops: {}", path.join(" ")));
            }
            t.add_row(row);
        }
        outln!("{t}");
        if r.flows.len() > max_rows {
            outln!("… and {} more flows (see --json)", r.flows.len() - max_rows);
        }
    }
    let mut t = table();
    t.set_header(vec![
        "link",
        "direction",
        "sent",
        "received",
        "drops",
        "queue max",
    ]);
    let mut rows = 0;
    for l in &r.links {
        for (dir, d) in [
            (format!("{} → {}", l.a, l.b), &l.a_to_b),
            (format!("{} → {}", l.b, l.a), &l.b_to_a),
        ] {
            let s = &d.stats;
            if s.offered_packets == 0 {
                continue;
            }
            rows += 1;
            if rows > 40 {
                continue;
            }
            let drops: Vec<String> = s
                .drops
                .nonzero()
                .map(|(r, n)| format!("{} {}", r.as_str(), format::count(n)))
                .collect();
            t.add_row(vec![
                Cell::new(&l.name),
                Cell::new(dir),
                right(format::count(s.sent_packets)),
                right(format::count(s.received_packets)),
                Cell::new(if drops.is_empty() {
                    "-".into()
                } else {
                    drops.join(", ")
                }),
                right(format!(
                    "{} pkts",
                    format::count(s.queue_high_water_packets)
                )),
            ]);
        }
    }
    if rows > 0 {
        outln!("{t}");
        if rows > 40 {
            outln!("… and {} more link directions (see --json)", rows - 40);
        }
    }
    print_idle_flows(r);
    let c = &r.conservation;
    outln!(
        "packet conservation: {} created = {} delivered + {} dropped + {} in flight{}",
        format::count(c.created_total),
        format::count(c.delivered_total),
        format::count(c.dropped_total),
        format::count(c.in_flight_total),
        if c.unaccounted == 0 {
            " (0 unaccounted)".to_string()
        } else {
            format!(" — {} UNACCOUNTED", c.unaccounted)
        }
    );
}

/// Says which flows delivered nothing, and what the run dropped and why, so
/// that a run that carried no traffic does not end as if all were well.
fn print_idle_flows(r: &Results) {
    let idle = r.flows_that_delivered_nothing();
    if idle.is_empty() {
        return;
    }
    let names: Vec<String> = idle
        .iter()
        .take(10)
        .map(|f| format!("{} ({} → {})", f.name, f.from, f.to))
        .collect();
    let more = if idle.len() > 10 {
        format!(" and {} more", idle.len() - 10)
    } else {
        String::new()
    };
    outln!(
        "*** {} of {} flows delivered nothing: {}{more} ***",
        idle.len(),
        r.flows.len(),
        names.join(", ")
    );
    let mut drops: Vec<(u64, &str)> = r
        .conservation
        .dropped
        .nonzero()
        .map(|(reason, n)| (n, reason.as_str()))
        .collect();
    drops.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    if drops.is_empty() {
        outln!("    nothing was dropped: the traffic was still in flight when the run ended, or never left its host");
    } else {
        let top: Vec<String> = drops
            .iter()
            .take(4)
            .map(|(n, reason)| format!("{reason} {}", format::count(*n)))
            .collect();
        outln!(
            "    drops in the run: {} (docs/results-schema.md#drop-reasons says what each means)",
            top.join(", ")
        );
    }
}

/// The demo's experiments: (title, topology text, what to look at).
const DEMO: &[(&str, &str, &str)] = &[
    (
        "OPNET SITL: two hosts through one simulated router, 1 Gbit/s links",
        include_str!("../../../examples/one-router.toml"),
        "TCP goodput against the theoretical 941 Mbit/s of gigabit Ethernet; OPNET's SITL carried 79.5 Mbit/s (94.4 tuned).",
    ),
    (
        "OMNeT++/INET: two simulated routers joined by 1 Gbit/s, 10 ms",
        include_str!("../../../examples/two-routers.toml"),
        "ping RTT against the expected 20 ms plus serialisation; INET measured ~21 ms after its fixes.",
    ),
];

/// `netloop demo --simulated`: the seed topologies with simulated hosts.
pub fn demo_simulated(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    outln!(
        "netloop demo — the seed experiments' topologies, simulated end to end (simulated hosts)."
    );
    for (i, (title, text, note)) in DEMO.iter().enumerate() {
        outln!("== {} ==", title);
        let name = format!("demo-{}", i + 1);
        let loaded = netloop_config::parse_str(text, &name)
            .map_err(|e| anyhow!("built-in demo topology is invalid: {e}"))?;
        let mut sim = Simulation::build(&loaded.spec).map_err(|e| {
            anyhow!(
                "built-in demo topology is invalid: {}",
                loaded.sources.located(&e)
            )
        })?;
        let (wall, interrupted) = execute(&mut sim, true, None)?;
        let r = sim.results("afap", Some(wall), Some(name.clone()));
        print_summary(&name, &r);
        outln!("{note}\n");
        if let Some(dir) = &args.json_dir {
            write_json_atomic(&dir.join(format!("{name}.json")), &r)?;
        }
        if interrupted {
            return Ok(ExitCode::from(130));
        }
        if r.conservation.unaccounted != 0 {
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}
