//! The `netloop` command.
//!
//! This crate owns the command line (argument parsing, progress display,
//! summary tables, writing JSON and pcap files, exit codes). It owns no
//! simulation logic: it loads a topology with `netloop-config`, builds and
//! runs it with `netloop-model`, and reports.
//!
//! Exit codes: 0 success, 1 run-time failure (e.g. an output file can't be
//! written, packet conservation violated), 2 bad input (topology errors, bad
//! arguments), 130 interrupted.
//!
//! The command is a library ([`main_with`]) with a thin binary over it, so
//! that the Python package can carry the same command (`pip install` gives
//! `netloop`) inside its native module rather than as a second program.

#[macro_use]
mod out;

mod bench;
mod bench_sync;
mod demo;
mod format;
mod live;
mod mn;
#[cfg(feature = "mpi")]
mod mpi_run;
mod probe;
mod rti;
mod run;
mod scenarios;
mod top;

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

/// Set (to its interpreter) by the Python package's `netloop` command: this
/// netloop runs inside Python, and runs itself again as `PYTHON -m netloop`.
pub const PYTHON_ENV: &str = "NETLOOP_PYTHON";

/// The command line that runs this netloop again (for the programs the demo
/// runs on real hosts, and for `mpirun`): the binary itself, or the Python
/// it runs in with `-m netloop` (see [`PYTHON_ENV`]).
pub(crate) fn self_command() -> anyhow::Result<Vec<OsString>> {
    if let Some(python) = std::env::var_os(PYTHON_ENV).filter(|p| !p.is_empty()) {
        return Ok(vec![python, "-m".into(), "netloop".into()]);
    }
    let exe = std::env::current_exe().context("finding this netloop binary's path")?;
    Ok(vec![exe.into()])
}

/// [`self_command`] as words of a `/bin/sh` command line.
pub(crate) fn self_command_line() -> anyhow::Result<String> {
    let words: Vec<String> = self_command()?
        .iter()
        .map(|w| {
            let w = w.to_string_lossy();
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c))
            {
                w.into_owned()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect();
    Ok(words.join(" "))
}

/// netloop: a network simulator that real systems talk through.
#[derive(Parser, Debug)]
#[command(name = "netloop", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a topology file and print a summary.
    Run(run::RunArgs),
    /// Check a topology file (parse, validate, assign addresses and routes)
    /// without running it.
    Check {
        /// The topology file (TOML; see docs/topology.md).
        file: PathBuf,
        /// Also print every node's interfaces and routes.
        #[arg(long)]
        verbose: bool,
    },
    /// Run the built-in demonstration: the seed experiments' topologies.
    Demo(run::DemoArgs),
    /// Run a program on a real host of the running network, e.g.
    /// `netloop exec h1 -- ping 198.18.0.6`.
    Exec {
        /// Which run, if several are running (its id, as printed at start).
        #[arg(long)]
        run: Option<String>,
        /// The real host (its name in the topology).
        host: String,
        /// The program and its arguments.
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// Remove what runs that were killed (SIGKILL) left behind: namespaces,
    /// devices and programs recorded in /run/netloop. Running runs and
    /// anything netloop did not create are left alone.
    Clean,
    /// Measure round trips with nanosecond resolution (a UDP echo server and
    /// prober, run on real hosts).
    Probe {
        #[command(subcommand)]
        which: probe::ProbeCommand,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        which: bench::BenchCommand,
    },
    /// Write a run's results, and its time series if it has one, as one
    /// self-contained HTML page: whether it kept up, the topology coloured
    /// by load, plots over time, drops by reason, lateness (docs/report.md).
    Report {
        /// A results file (`netloop run --json`), or a directory holding one
        /// (its series, `<name>.series.jsonl`, beside it).
        path: PathBuf,
        /// Where to write the page (default: beside the results, `<name>.html`).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// A live view of a run from the series it writes (`netloop run
    /// --stats-interval 1s --stats FILE`): the busiest links and flows and,
    /// in real time, whether it keeps up, refreshed at each sample.
    Top {
        /// The series file (JSON Lines, docs/series.md).
        path: PathBuf,
        /// Show the latest sample and exit.
        #[arg(long)]
        once: bool,
        /// Exit after this many seconds without a new sample.
        #[arg(long, default_value_t = 30)]
        idle: u64,
    },
    /// Mininet's `mn` on netloop (`--topo single,3|linear,4|tree,2,2`,
    /// `--link tc,bw=10,delay=10ms`, `--test pingall|iperf`, `-c`; see
    /// `netloop mn --help` and docs/mininet.md). Needs the Python package.
    #[command(disable_help_flag = true)]
    Mn {
        /// `mn`'s options.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
}

/// Whether the command line `args` runs a network (`run`, simulated or in
/// real time; `bench speed`), whose heap is worth putting in huge pages
/// (`netloop_io::memory::restart_with_huge_pages` says why).
pub fn wants_huge_pages(args: impl IntoIterator<Item = OsString>) -> bool {
    let Ok(cli) = Cli::try_parse_from(args) else {
        return false;
    };
    matches!(
        cli.command,
        Command::Run(_)
            | Command::Bench {
                which: bench::BenchCommand::Speed(_) | bench::BenchCommand::SpeedRank { .. },
            }
    )
}

/// Runs the command line `args` (the program's name first), as the
/// `netloop` binary does.
pub fn main_with(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            // Help and version print and succeed; a usage error prints and
            // exits 2, as clap's own `parse` would.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let result = match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Check { file, verbose } => run::check(&file, verbose),
        Command::Demo(args) => demo::demo(&args),
        Command::Exec { run, host, cmd } => live::exec(run.as_deref(), &host, &cmd),
        Command::Clean => live::clean(),
        Command::Probe { which } => probe::probe(which),
        Command::Bench { which } => bench::bench(which),
        Command::Report { path, output } => report(&path, output.as_deref()),
        Command::Top { path, once, idle } => top::top(&top::TopArgs {
            path: &path,
            once,
            idle: std::time::Duration::from_secs(idle),
        }),
        Command::Mn { args } => mn::mn(&args),
    };
    let code = match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    };
    // Inside Python no exit of this process flushes what is left.
    let _ = std::io::Write::flush(&mut std::io::stdout());
    code
}

/// `netloop report`: the page, written whole or not at all.
fn report(path: &std::path::Path, output: Option<&std::path::Path>) -> anyhow::Result<ExitCode> {
    let (inputs, default_out) = netloop_report::load(path)?;
    let page = netloop_report::render(&inputs)?;
    let out = output.map_or(default_out, std::path::Path::to_path_buf);
    run::write_atomic(&out, |w| Ok(std::io::Write::write_all(w, page.as_bytes())?))?;
    outln!("report: {}", out.display());
    Ok(ExitCode::SUCCESS)
}

/// The number an [`ExitCode`] stands for (`ExitCode` keeps it to itself,
/// but compares): what the Python package's command exits with.
pub fn exit_status(code: ExitCode) -> u8 {
    (0..=u8::MAX)
        .find(|&k| ExitCode::from(k) == code)
        .unwrap_or(1)
}
