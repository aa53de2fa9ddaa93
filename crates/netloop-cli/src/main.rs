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

mod bench;
mod bench_sync;
mod demo;
mod format;
mod live;
#[cfg(feature = "mpi")]
mod mpi_run;
mod probe;
mod rti;
mod run;
mod scenarios;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Check { file, verbose } => run::check(&file, verbose),
        Command::Demo(args) => demo::demo(&args),
        Command::Exec { run, host, cmd } => live::exec(run.as_deref(), &host, &cmd),
        Command::Clean => live::clean(),
        Command::Probe { which } => probe::probe(which),
        Command::Bench { which } => bench::bench(which),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
