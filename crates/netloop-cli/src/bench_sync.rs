//! `netloop bench sync`: what a synchronisation round of a partitioned run
//! costs beyond its work. Partitions (threads of this process, or MPI
//! ranks started by `mpirun`) run rounds with no simulation between them,
//! each round the agreement on the earliest event and the exchange of the
//! frames that crossed, exactly as a real run makes them
//! ([`netloop_model::partition::idle_rounds`]); the time per round is the
//! floor under a round of a real run, from which `docs/partitions.md`
//! projects runs on more ranks than this machine has.

use anyhow::{anyhow, Context};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::format;
use crate::run::write_json_atomic;

/// `netloop bench sync`.
#[derive(clap::Args, Debug)]
pub struct SyncArgs {
    /// Partition counts to run on threads.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    partitions: Vec<u32>,
    /// Also run on these numbers of MPI ranks (`mpirun --oversubscribe -np
    /// N`, this binary, built with `--features mpi`).
    #[arg(long, value_delimiter = ',')]
    mpi_ranks: Vec<u32>,
    /// Rounds per measurement.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    rounds: u64,
    /// Frames each partition sends the next one per round (one
    /// measurement each), e.g. `0,16`.
    #[arg(long, value_delimiter = ',', default_value = "0,16")]
    frames: Vec<usize>,
    /// Bytes per frame.
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u64).range(14..=65_535))]
    len: u64,
    /// Measurements per case (medians are reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
    /// Where to write the JSON.
    #[arg(long, default_value = "bench/out/sync.json")]
    json: PathBuf,
}

/// `bench sync-rank`, one rank of an MPI measurement (started by mpirun).
#[derive(clap::Args, Debug)]
pub struct SyncRankArgs {
    #[arg(long)]
    rounds: u64,
    #[arg(long)]
    frames: usize,
    #[arg(long)]
    len: usize,
    /// Where rank 0 writes every rank's seconds.
    #[arg(long)]
    json: PathBuf,
}

/// One case measured.
#[derive(Debug, Serialize)]
struct Row {
    transport: &'static str,
    partitions: u32,
    frames_per_round: usize,
    frame_bytes: usize,
    rounds: u64,
    /// Per measurement: the slowest partition's seconds per round.
    round_seconds: Vec<f64>,
    /// Their median.
    round_seconds_median: f64,
    /// Whether the partitions outnumbered this machine's cores (then the
    /// figure says what sharing cores costs, not what a round costs).
    oversubscribed: bool,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

/// Runs `bench sync`.
pub fn sync(a: SyncArgs) -> anyhow::Result<ExitCode> {
    if a.partitions.iter().chain(&a.mpi_ranks).any(|&p| p == 0) {
        return Err(anyhow!(
            "--partitions and --mpi-ranks take counts of 1 or more"
        ));
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let len = a.len as usize;
    let mut rows = Vec::new();
    for &frames in &a.frames {
        let row = |transport, partitions, round_seconds: Vec<f64>| Row {
            transport,
            partitions,
            frames_per_round: frames,
            frame_bytes: len,
            rounds: a.rounds,
            round_seconds_median: median(&round_seconds),
            round_seconds,
            oversubscribed: partitions > cores,
        };
        for &p in &a.partitions {
            // Each partition must get every frame sent to it, as the MPI
            // ranks check for themselves.
            let expected = if p > 1 { a.rounds * frames as u64 } else { 0 };
            let round_seconds = (0..a.repeats)
                .map(|_| {
                    let per = netloop_model::partition::idle_rounds_threads(
                        p as usize, a.rounds, frames, len,
                    );
                    if let Some(&(_, got)) = per.iter().find(|&&(_, got)| got != expected) {
                        return Err(anyhow!(
                            "{p} threads: a partition received {got} frames in idle rounds, not {expected}"
                        ));
                    }
                    let slowest = per.iter().map(|&(d, _)| d).max().unwrap_or_default();
                    Ok(slowest.as_secs_f64() / a.rounds as f64)
                })
                .collect::<anyhow::Result<Vec<f64>>>()?;
            rows.push(row("threads", p, round_seconds));
        }
        for &p in &a.mpi_ranks {
            let round_seconds = (0..a.repeats)
                .map(|_| mpi_once(p, a.rounds, frames, len))
                .collect::<anyhow::Result<Vec<f64>>>()?;
            rows.push(row("mpi", p, round_seconds));
        }
    }
    print_table(&rows, cores, a.repeats);
    if let Some(parent) = a.json.parent() {
        std::fs::create_dir_all(parent).ok();
    }
    write_json_atomic(
        &a.json,
        &serde_json::json!({ "cores": cores, "repeats": a.repeats, "cases": rows }),
    )?;
    outln!("results: {}", a.json.display());
    Ok(ExitCode::SUCCESS)
}

fn print_table(rows: &[Row], cores: u32, repeats: u32) {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "transport",
        "partitions",
        "frames sent per round",
        "per round (median)",
        "min–max",
        "note",
    ]);
    let right = |s: String| Cell::new(s).set_alignment(CellAlignment::Right);
    for r in rows {
        let lo = r
            .round_seconds
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        let hi = r.round_seconds.iter().copied().fold(0.0, f64::max);
        t.add_row(vec![
            Cell::new(r.transport),
            right(r.partitions.to_string()),
            right(format!("{} × {} B", r.frames_per_round, r.frame_bytes)),
            right(format::ns(r.round_seconds_median * 1e9)),
            right(format!("{}–{}", format::ns(lo * 1e9), format::ns(hi * 1e9))),
            Cell::new(if r.oversubscribed {
                "more partitions than cores: they take turns"
            } else {
                ""
            }),
        ]);
    }
    outln!(
        "Synchronisation rounds with no work between them ({cores} cores, medians of {repeats})"
    );
    outln!("{t}");
}

/// One measurement on `ranks` MPI ranks: the slowest rank's seconds per
/// round.
fn mpi_once(ranks: u32, rounds: u64, frames: usize, len: usize) -> anyhow::Result<f64> {
    let json = std::env::temp_dir().join(format!("netloop-bench-sync-{}.json", std::process::id()));
    let out = crate::bench::mpirun(ranks)?
        .args(["bench", "sync-rank", "--rounds", &rounds.to_string()])
        .args(["--frames", &frames.to_string(), "--len", &len.to_string()])
        .arg("--json")
        .arg(&json)
        .output()
        .context("running mpirun (Open MPI or MPICH installed?)")?;
    if !out.status.success() {
        return Err(anyhow!(
            "mpirun -np {ranks} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let secs: Vec<f64> = serde_json::from_slice(
        &std::fs::read(&json).with_context(|| format!("reading {}", json.display()))?,
    )?;
    let _ = std::fs::remove_file(&json);
    let slowest = secs.iter().copied().fold(0.0, f64::max);
    Ok(slowest / rounds as f64)
}

/// Runs `bench sync-rank`.
pub fn sync_rank(a: SyncRankArgs) -> anyhow::Result<ExitCode> {
    if let Some(secs) = rank_rounds(a.rounds, a.frames, a.len)? {
        write_json_atomic(&a.json, &secs)?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(feature = "mpi")]
fn rank_rounds(rounds: u64, frames: usize, len: usize) -> anyhow::Result<Option<Vec<f64>>> {
    crate::mpi_run::idle_rounds(rounds, frames, len)
}

#[cfg(not(feature = "mpi"))]
fn rank_rounds(_: u64, _: usize, _: usize) -> anyhow::Result<Option<Vec<f64>>> {
    Err(anyhow!(
        "this netloop was built without MPI: build it with `cargo build --release --features mpi` \
         (see docs/partitions.md)"
    ))
}
