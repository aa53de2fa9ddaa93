//! `netloop demo`: the seed experiments with real hosts.
//!
//! 1. OPNET's SITL set-up: two real hosts (network namespaces) through one
//!    simulated router over modelled 1 Gbit/s links: iperf3 TCP goodput
//!    against gigabit Ethernet's theoretical 941 Mbit/s, and ping to the
//!    router's own address.
//! 2. OMNeT++/INET's emulation experiment: the hosts across two simulated
//!    routers joined by 1 Gbit/s, 10 ms: round trips (ping, and netloop's
//!    nanosecond prober) against the expected 20 ms plus serialisation.
//!
//! Each ends with the run's self-report (lateness, boundary losses,
//! conservation). Without root the demo says why and runs the same
//! topologies with simulated hosts instead.

use anyhow::{anyhow, Context};
use comfy_table::Cell;
use netloop_model::Simulation;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::format;
use crate::live::{execute_live, print_report};
use crate::probe::summarize;
use crate::run::{print_summary, right, table, write_json_atomic, DemoArgs};
use netloop_io::live::LiveReport;

/// TCP goodput of gigabit Ethernet with a 1500-byte MTU and TCP timestamps:
/// 1448 payload bytes per 1538 bytes on the wire.
const GIGABIT_TCP_GOODPUT: f64 = 1e9 * 1448.0 / 1538.0;

/// Wire time of a 98-byte frame (56-byte ICMP/UDP payload) at 1 Gbit/s,
/// with preamble, FCS and gap (24 bytes): what each link adds to a probe.
const SMALL_FRAME_NS_AT_1G: f64 = (98.0 + 24.0) * 8.0;

fn sitl_topology(netloop: &str) -> String {
    format!(
        r#"# OPNET SITL: two real hosts through one simulated router, 1 Gbit/s links.
[run]
duration = "20s"

[defaults.link]
rate = "1Gbps"

[[node]]
name = "h1"
kind = "namespace"
[[node.command]]
cmd = "ping -c 20 -i 0.02 198.18.1.1"
start = "300ms"
wait = true
[[node.command]]
cmd = "iperf3 -c 198.18.2.2 -t 4 -J"
start = "1s"
wait = true

[[node]]
name = "r1"
kind = "router"

[[node]]
name = "h2"
kind = "namespace"
[[node.command]]
cmd = "iperf3 -s -1"
[[node.command]]
cmd = "{netloop} probe echo --idle 30s"

[[link]]
endpoints = ["h1", "r1"]
addresses = ["198.18.1.2/24", "198.18.1.1/24"]
[[link]]
endpoints = ["r1", "h2"]
addresses = ["198.18.2.1/24", "198.18.2.2/24"]
"#
    )
}

fn inet_topology(netloop: &str, json: &Path) -> String {
    format!(
        r#"# OMNeT++/INET: two real hosts across two simulated routers joined by 1 Gbit/s, 10 ms.
[run]
duration = "20s"

[defaults.link]
rate = "1Gbps"

[[node]]
name = "h1"
kind = "namespace"
[[node.command]]
cmd = "ping -c 50 -i 0.02 198.18.1.1"
start = "300ms"
wait = true
[[node.command]]
cmd = "ping -c 50 -i 0.02 198.18.3.2"
start = "1.5s"
wait = true
[[node.command]]
cmd = "{netloop} probe rtt 198.18.3.2 --count 300 --interval 10ms --json {json}"
start = "3s"
wait = true

[[node]]
name = "r1"
kind = "router"
[[node]]
name = "r2"
kind = "router"

[[node]]
name = "h2"
kind = "namespace"
[[node.command]]
cmd = "{netloop} probe echo --idle 30s"

[[link]]
endpoints = ["h1", "r1"]
addresses = ["198.18.1.2/24", "198.18.1.1/24"]
[[link]]
endpoints = ["r1", "r2"]
addresses = ["198.18.2.1/24", "198.18.2.2/24"]
delay = "10ms"
[[link]]
endpoints = ["r2", "h2"]
addresses = ["198.18.3.1/24", "198.18.3.2/24"]
"#,
        json = json.display()
    )
}

/// Round-trip times (ns) from ping's output lines (`… time=20.1 ms`),
/// without the first: it waited for address resolution at every hop.
fn ping_times(log: &Path) -> Vec<f64> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|l| !l.contains("icmp_seq=1 "))
        .filter_map(|l| {
            let t = l.split("time=").nth(1)?;
            let v: f64 = t.split_whitespace().next()?.parse().ok()?;
            Some(v * 1e6)
        })
        .collect()
}

/// iperf3 -J's receiver-side goodput, bit/s.
fn iperf_goodput(log: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(log).ok()?;
    let start = text.find('{')?;
    let v: serde_json::Value = serde_json::from_str(&text[start..]).ok()?;
    v["end"]["sum_received"]["bits_per_second"].as_f64()
}

fn rtt_row(t: &mut comfy_table::Table, name: &str, v: &[f64], expected: &str, seed: &str) {
    match summarize(v) {
        Some(s) => {
            t.add_row(vec![
                Cell::new(name),
                right(s.n.to_string()),
                right(format::ns(s.min)),
                right(format::ns(s.p50)),
                right(format::ns(s.p99)),
                right(format::ns(s.max)),
                right(format::ns(s.sd)),
                Cell::new(expected),
                Cell::new(seed),
            ]);
        }
        None => {
            t.add_row(vec![
                Cell::new(name),
                right("0".into()),
                Cell::new("no replies (see the log)"),
            ]);
        }
    }
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// `netloop demo`.
pub fn demo(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    if args.simulated || !is_root() {
        if !args.simulated {
            outln!(
                "netloop demo needs root to create network namespaces for its real hosts \
                 (run it with sudo, or as root). Running the same topologies with simulated \
                 hosts instead.\n"
            );
        }
        return crate::run::demo_simulated(args);
    }
    let netloop = crate::self_command_line()?;
    let out = args.json_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("netloop-demo-{}", std::process::id()))
    });
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    outln!("netloop demo — real programs in network namespaces, through simulated routers in real time.");
    outln!("Program output and JSON results: {}\n", out.display());

    // 1. SITL.
    outln!("== 1. OPNET SITL: two real hosts through one simulated router, 1 Gbit/s links ==");
    let text = sitl_topology(&netloop);
    // The throughput experiment steers the hosts' receive work off the
    // real-time loop's CPU (`netloop run --steer`); the delay experiment
    // below does not, for the most exact delays.
    let (code, logs, report) = run_one(&text, "demo-sitl", &out, true)?;
    if let Some(c) = code {
        return Ok(c);
    }
    let ping_local = ping_times(&logs.join("h1.0.log"));
    let goodput = iperf_goodput(&logs.join("h1.1.log"));
    let mut t = table();
    t.set_header(vec!["measure", "netloop", "expected", "OPNET SITL (seed)"]);
    t.add_row(vec![
        Cell::new("iperf3 TCP goodput h1 → h2"),
        right(goodput.map_or("no result (see log)".into(), format::rate)),
        right(format!(
            "{} (theoretical)",
            format::rate(GIGABIT_TCP_GOODPUT)
        )),
        right("79.5 Mbit/s (94.4 tuned)".into()),
    ]);
    if let Some(g) = goodput {
        t.add_row(vec![
            Cell::new("  share of theoretical"),
            right(format::percent(g / GIGABIT_TCP_GOODPUT)),
            right("≥ 99 %".into()),
            right("8.4 %".into()),
        ]);
    }
    outln!("{t}");
    let mut t = table();
    t.set_header(vec![
        "round trip",
        "n",
        "min",
        "median",
        "p99",
        "max",
        "std dev",
        "expected",
        "seed",
    ]);
    rtt_row(
        &mut t,
        "ping h1 → r1 (router's own address)",
        &ping_local,
        "2 × 1 µs wire + stacks",
        "INET: 1–22 ms",
    );
    outln!("{t}\n");
    say_what_lateness_affects(
        &report,
        &[
            ("h1.1.log", "iperf3 TCP goodput", Sensitivity::Rate),
            ("h1.0.log", "ping h1 → r1", Sensitivity::Delay),
        ],
    );

    // 2. INET.
    outln!("== 2. OMNeT++/INET: two real hosts across two simulated routers, 1 Gbit/s, 10 ms ==");
    let probe_json = out.join("demo-inet-probe.json");
    let text = inet_topology(&netloop, &probe_json);
    let (code, logs, report) = run_one(&text, "demo-inet", &out, false)?;
    if let Some(c) = code {
        return Ok(c);
    }
    let ping_local = ping_times(&logs.join("h1.0.log"));
    let ping_remote = ping_times(&logs.join("h1.1.log"));
    let probe: Vec<f64> = std::fs::read_to_string(&probe_json)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| {
            v["rtt_ns"]
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
        })
        .unwrap_or_default();
    let expected_remote = 20e6 + 6.0 * SMALL_FRAME_NS_AT_1G;
    let mut t = table();
    t.set_header(vec![
        "round trip",
        "n",
        "min",
        "median",
        "p99",
        "max",
        "std dev",
        "expected",
        "seed",
    ]);
    rtt_row(
        &mut t,
        "ping h1 → r1 (ping local)",
        &ping_local,
        "2 × 1 µs wire + stacks",
        "INET: 1–22 ms",
    );
    rtt_row(
        &mut t,
        "ping h1 → h2 (ping remote)",
        &ping_remote,
        &format!("{} + stacks", format::ns(expected_remote)),
        "INET: ~21 ms",
    );
    rtt_row(
        &mut t,
        "UDP probe h1 → h2 (ns stamps)",
        &probe,
        &format!("{} + stacks", format::ns(expected_remote)),
        "",
    );
    outln!("{t}");
    if let Some(s) = summarize(&probe) {
        outln!(
            "probe median − expected: {} (the rest is the two kernels' own stack time); \
             ping prints times ≥ 10 ms to 0.1 ms only, the probe keeps nanoseconds.",
            format::ns(s.p50 - expected_remote)
        );
    }
    say_what_lateness_affects(
        &report,
        &[
            ("h1.0.log", "ping local", Sensitivity::Delay),
            ("h1.1.log", "ping remote", Sensitivity::Delay),
            ("h1.2.log", "UDP probe", Sensitivity::Delay),
        ],
    );
    Ok(ExitCode::SUCCESS)
}

/// Runs one demo topology live; returns an exit code if the demo must stop.
fn run_one(
    text: &str,
    name: &str,
    out: &Path,
    steer: bool,
) -> anyhow::Result<(Option<ExitCode>, PathBuf, LiveReport)> {
    let loaded = netloop_config::parse_str(text, name)
        .map_err(|e| anyhow!("built-in demo topology is invalid: {e}"))?;
    let mut sim = Simulation::build(&loaded.spec).map_err(|e| {
        anyhow!(
            "built-in demo topology is invalid: {}",
            loaded.sources.located(&e)
        )
    })?;
    let logs = out.join(format!("{name}-logs"));
    let o = execute_live(
        &mut sim,
        name,
        Some(&logs),
        1_000_000,
        Some(50),
        steer,
        false,
        None,
        Vec::new(),
        None,
    )?;
    print_summary(name, &o.results);
    print_report(&o.report);
    write_json_atomic(&out.join(format!("{name}.json")), &o.results)?;
    let interrupted = o.report.realtime.end == netloop_io::rt::EndReason::Interrupted;
    let code = if interrupted {
        Some(ExitCode::from(130))
    } else if o.results.conservation.unaccounted != 0 {
        Some(ExitCode::from(1))
    } else {
        None
    };
    Ok((code, logs, o.report))
}

/// For a run that fell behind real time: whether each measurement (the log
/// file of the program it was read from, and what the figure is) was taken while events
/// ran late, and so which figures of the tables to doubt. Prints nothing for
/// a run that kept up.
fn say_what_lateness_affects(report: &LiveReport, measures: &[(&str, &str, Sensitivity)]) {
    let rt = &report.realtime;
    let (Some(first), Some(last)) = (rt.first_late_s, rt.last_late_s) else {
        return;
    };
    let max = format::ns(rt.event_lateness.max_ns as f64);
    outln!(
        "This run fell behind real time between {first:.3} s and {last:.3} s (events up to {max} late). \
         Its figures:"
    );
    for (log, what, sensitivity) in measures {
        // The program whose output the figure was read from.
        let Some(c) = report
            .commands
            .iter()
            .find(|c| c.log.file_name().is_some_and(|f| f == *log))
        else {
            continue;
        };
        let (Some(start), end) = (c.started_s, c.exited_s.unwrap_or(rt.sim_seconds)) else {
            continue;
        };
        outln!(
            "  - {}",
            late_verdict(what, *sensitivity, start, end, first, last, &max)
        );
    }
    outln!();
}

/// How a figure takes lateness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sensitivity {
    /// A delay or round trip: each sample may be too long by the lateness.
    Delay,
    /// A rate averaged over seconds: late frames are not lost, only shifted.
    Rate,
}

/// One line: was the measurement `what`, taken from `start` to `end`
/// (simulated seconds), inside the late span `first`–`last`, and what that
/// does to it.
fn late_verdict(
    what: &str,
    sensitivity: Sensitivity,
    start: f64,
    end: f64,
    first: f64,
    last: f64,
    max: &str,
) -> String {
    let when = format!("{what} ({start:.2}–{end:.2} s)");
    if end < first || start > last {
        return format!("{when}: measured while every event ran on time — not affected.");
    }
    match sensitivity {
        Sensitivity::Delay => format!(
            "{when}: measured while events ran late — round trips may be too long by up to {max}; \
             doubt the max, p99 and std dev."
        ),
        Sensitivity::Rate => format!(
            "{when}: measured while events ran late — frames were delayed, not lost, so an \
             average over seconds stands (a short dip at most)."
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_is_doubted_only_if_measured_while_events_ran_late() {
        let v = |s, a, b| late_verdict("ping", s, a, b, 1.02, 5.01, "1.2 ms");
        assert!(v(Sensitivity::Delay, 0.3, 0.78).ends_with("on time — not affected."));
        assert!(v(Sensitivity::Delay, 5.2, 6.0).ends_with("on time — not affected."));
        let d = v(Sensitivity::Delay, 0.3, 1.5);
        assert!(d.contains("too long by up to 1.2 ms"), "{d}");
        assert!(d.starts_with("ping (0.30–1.50 s)"), "{d}");
        let r = v(Sensitivity::Rate, 1.0, 5.03);
        assert!(r.contains("delayed, not lost"), "{r}");
    }
}
