//! `netloop top SERIES`: a live view of a run as it goes, from the series it
//! writes (`netloop run --stats-interval`, docs/series.md): each new sample
//! shows the busiest link directions (rate, queue, drops in the interval),
//! the busiest flows, and in real time whether the run keeps up. It reads
//! the file as it grows — any run, in any process, real time or not — and
//! needs nothing from the run itself.

use std::io::{BufRead, BufReader, IsTerminal, Seek, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

/// Rows shown per table.
const ROWS: usize = 10;

/// What `netloop top` was asked.
pub struct TopArgs<'a> {
    pub path: &'a Path,
    /// Show the latest sample and exit.
    pub once: bool,
    /// Exit after this long without a new sample.
    pub idle: Duration,
}

pub fn top(args: &TopArgs<'_>) -> Result<std::process::ExitCode> {
    let stop = crate::live::interrupted(); // Ctrl-C ends the view, not the process
    let file = std::fs::File::open(args.path)
        .with_context(|| format!("opening the series {}", args.path.display()))?;
    let mut reader = BufReader::new(file);
    let mut header: Option<Value> = None;
    let mut prev: Option<Value> = None;
    let mut last: Option<Value> = None;
    let mut partial = String::new();
    let mut last_new = Instant::now();
    let tty = std::io::stdout().is_terminal();
    let mut line_no = 0usize;
    loop {
        let mut grew = false;
        loop {
            let mut chunk = String::new();
            let n = reader
                .read_line(&mut chunk)
                .with_context(|| format!("reading {}", args.path.display()))?;
            if n == 0 {
                break;
            }
            partial.push_str(&chunk);
            if !partial.ends_with('\n') {
                continue; // the writer is midway through a line
            }
            let line = std::mem::take(&mut partial);
            line_no += 1;
            let v: Value = serde_json::from_str(line.trim_end()).map_err(|e| {
                anyhow!("{}:{line_no}: not a series line: {e}", args.path.display())
            })?;
            if header.is_none() {
                if v["format"].as_str() != Some("netloop-series/1") {
                    bail!(
                        "{}:1: not a netloop-series/1 file (netloop run --stats-interval writes one)",
                        args.path.display()
                    );
                }
                header = Some(v);
            } else {
                prev = last.replace(v);
                grew = true;
            }
        }
        if grew || args.once {
            if let (Some(h), Some(now)) = (&header, &last) {
                let screen = frame(h, prev.as_ref(), now);
                let mut out = std::io::stdout().lock();
                if tty && !args.once {
                    let _ = write!(out, "\x1b[H\x1b[2J");
                }
                let _ = writeln!(out, "{screen}");
                let _ = out.flush();
            } else if args.once {
                bail!("{}: no sample yet", args.path.display());
            }
            last_new = Instant::now();
        }
        if args.once {
            return Ok(std::process::ExitCode::SUCCESS);
        }
        if stop.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(std::process::ExitCode::SUCCESS);
        }
        if last_new.elapsed() >= args.idle {
            eprintln!(
                "netloop top: no new sample for {:.0} s: the run has ended (or stalled)",
                args.idle.as_secs_f64()
            );
            return Ok(std::process::ExitCode::SUCCESS);
        }
        std::thread::sleep(Duration::from_millis(100));
        // A file replaced under us (a new run with the same name) is read
        // from its start.
        let pos = reader.stream_position()?;
        if std::fs::metadata(args.path).is_ok_and(|m| m.len() < pos) {
            reader = BufReader::new(std::fs::File::open(args.path)?);
            (header, prev, last, line_no) = (None, None, None, 0);
            partial.clear();
        }
    }
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// One screen: the sample `now`, rates from `prev` to it.
fn frame(h: &Value, prev: Option<&Value>, now: &Value) -> String {
    let names = |key: &str| -> Vec<String> {
        h[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|v| v.as_str().unwrap_or("?").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let col = |key: &str, name: &str| names(key).iter().position(|c| c == name);
    let t = num(&now["t_ns"]) / 1e9;
    let dt = prev.map_or(0.0, |p| t - num(&p["t_ns"]) / 1e9);
    let mut out = format!(
        "netloop top — {}  t = {t:.1} s (simulated)",
        h["topology"].as_str().unwrap_or("")
    );
    let rt = &now["realtime"];
    if rt.is_object() {
        let late_now =
            num(&rt["late_events"]) - prev.map_or(0.0, |p| num(&p["realtime"]["late_events"]));
        out.push_str(&format!(
            "\nreal time: {}  late events {} ({} in the last interval)  lateness p99 {:.0} µs, max {:.1} ms  boundary lost {}",
            if rt["kept_up"].as_bool() == Some(true) {
                "KEPT UP"
            } else {
                "FELL BEHIND"
            },
            rt["late_events"],
            late_now,
            num(&rt["event_lateness"]["p99_ns"]) / 1e3,
            num(&rt["event_lateness"]["max_ns"]) / 1e6,
            rt["boundary_lost"]
        ));
    }
    let links = names("links");
    let (Some(bytes), Some(queued), Some(dropped)) = (
        col("dir_columns", "sent_bytes"),
        col("dir_columns", "queued_packets"),
        col("dir_columns", "dropped_packets"),
    ) else {
        return out;
    };
    let at = |v: &Value, l: usize, d: usize, c: usize| num(&v["links"][l][d][c]);
    let per_s = |l: usize, d: usize, c: usize| match prev {
        Some(p) if dt > 0.0 => (at(now, l, d, c) - at(p, l, d, c)) / dt,
        _ => 0.0,
    };
    let mut rows: Vec<(String, f64, f64, f64)> = (0..links.len())
        .flat_map(|l| (0..2).map(move |d| (l, d)))
        .map(|(l, d)| {
            (
                format!("{} {}", links[l], if d == 0 { "a→b" } else { "b→a" }),
                per_s(l, d, bytes) * 8.0 / 1e6,
                at(now, l, d, queued),
                per_s(l, d, dropped),
            )
        })
        .filter(|r| r.1 > 0.0 || r.2 > 0.0 || r.3 > 0.0)
        .collect();
    rows.sort_by(|a, b| b.1.total_cmp(&a.1));
    out.push_str(&format!(
        "\n\n{:<32} {:>12} {:>10} {:>12}",
        "link direction", "Mbit/s", "queued", "drops/s"
    ));
    for r in rows.iter().take(ROWS) {
        out.push_str(&format!(
            "\n{:<32} {:>12.2} {:>10.0} {:>12.1}",
            r.0, r.1, r.2, r.3
        ));
    }
    if rows.len() > ROWS {
        out.push_str(&format!("\n… and {} more", rows.len() - ROWS));
    }
    let flows = names("flows");
    if let Some(rx) = col("flow_columns", "received_bytes") {
        let fat = |v: &Value, f: usize| num(&v["flows"][f][rx]);
        let mut rows: Vec<(String, f64)> = (0..flows.len())
            .map(|f| {
                let rate = match prev {
                    Some(p) if dt > 0.0 => (fat(now, f) - fat(p, f)) * 8.0 / dt / 1e6,
                    _ => 0.0,
                };
                (flows[f].clone(), rate)
            })
            .filter(|r| r.1 > 0.0)
            .collect();
        rows.sort_by(|a, b| b.1.total_cmp(&a.1));
        if !rows.is_empty() {
            out.push_str(&format!("\n\n{:<32} {:>12}", "flow", "Mbit/s"));
            for r in rows.iter().take(ROWS) {
                out.push_str(&format!("\n{:<32} {:>12.2}", r.0, r.1));
            }
        }
    }
    out
}
