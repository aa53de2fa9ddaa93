//! `netloop run --stats-interval`: the time series written as a run goes —
//! its samples on the interval's grid, its last sample equal to the results'
//! counters, whole lines only after a SIGKILL, and the errors.

mod common;

use common::{netloop, repo_file, run_dumbbell_sampled, text, Scratch, NETLOOP};
use serde_json::Value;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The lines of a series file, parsed: the header and the samples.
fn read(path: &str) -> (Value, Vec<Value>) {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut lines = std::io::BufReader::new(f).lines().map(|l| {
        let l = l.unwrap();
        serde_json::from_str::<Value>(&l).unwrap_or_else(|e| panic!("{e}: {l}"))
    });
    let header = lines.next().expect("a header");
    (header, lines.collect())
}

/// The names the header lists under `key` (links, flows, their columns).
fn names(header: &Value, key: &str) -> Vec<String> {
    header[key]
        .as_array()
        .unwrap_or_else(|| panic!("the header lacks {key}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// The element of results array `key` (links, flows) named `name`.
fn named<'a>(r: &'a Value, key: &str, name: &str) -> &'a Value {
    r[key]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == name)
        .unwrap_or_else(|| panic!("no {key} {name} in the results"))
}

#[test]
fn a_simulation_is_sampled_on_the_grid_and_ends_with_the_results_counters() {
    let s = Scratch::new("series-sim");
    let json = s.path("out.json");
    run_dumbbell_sampled(&json, "6s", "500ms");
    let (h, samples) = read(&s.path("out.series.jsonl"));
    assert_eq!(h["format"], "netloop-series/1");
    assert_eq!(h["interval_ns"], 500_000_000);
    let times: Vec<u64> = samples
        .iter()
        .map(|x| x["t_ns"].as_u64().unwrap())
        .collect();
    let want: Vec<u64> = (0..=12).map(|k| k * 500_000_000).collect();
    assert_eq!(
        times, want,
        "a sample at every interval, the end's included"
    );
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let cols = names(&h, "dir_columns");
    let col = |name: &str| cols.iter().position(|c| c == name).unwrap();
    let last = samples.last().unwrap();
    let mut busy = 0;
    for (l, name) in names(&h, "links").iter().enumerate() {
        let rl = named(&r, "links", name);
        for (d, dir) in ["a_to_b", "b_to_a"].iter().enumerate() {
            for c in [
                "sent_packets",
                "sent_bytes",
                "received_packets",
                "received_bytes",
            ] {
                assert_eq!(
                    last["links"][l][d][col(c)],
                    rl[dir][c],
                    "{name} {dir} {c}: the last sample is the results' count"
                );
            }
            // Counters only grow.
            let sent: Vec<u64> = samples
                .iter()
                .map(|x| x["links"][l][d][col("sent_packets")].as_u64().unwrap())
                .collect();
            assert!(
                sent.windows(2).all(|w| w[0] <= w[1]),
                "{name} {dir}: {sent:?}"
            );
            busy += usize::from(sent[12] > sent[2]);
        }
    }
    assert!(busy > 0, "traffic shows between samples");
    let flows = names(&h, "flows");
    let mut compared = 0;
    for (i, name) in flows.iter().enumerate() {
        let rf = named(&r, "flows", name);
        // sent_packets, received_packets, received_bytes: as in the results.
        for (k, c) in names(&h, "flow_columns").iter().enumerate().take(3) {
            if let Some(n) = rf[c].as_u64() {
                assert_eq!(last["flows"][i][k].as_u64(), Some(n), "flow {name} {c}");
                compared += 1;
            }
        }
    }
    assert!(compared >= flows.len(), "every flow compared");
}

/// A real-time run (simulated hosts only: no root needed) killed with
/// SIGKILL leaves every sample up to its last interval, each line whole.
#[test]
fn a_run_killed_with_sigkill_keeps_its_series_up_to_the_last_interval() {
    let s = Scratch::new("series-kill");
    let series = s.path("s.jsonl");
    let mut child = Command::new(NETLOOP)
        .args(["run", &repo_file("examples/two-routers.toml"), "--realtime"])
        .args([
            "--duration",
            "60s",
            "--stats-interval",
            "100ms",
            "--stats",
            &series,
            "-q",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Until some 2 s of samples are there (or the run failed).
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(30) {
        let n = std::fs::read_to_string(&series).map_or(0, |t| t.lines().count());
        if n > 20 || child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(child.try_wait().unwrap().is_none(), "the run ended early");
    child.kill().unwrap(); // SIGKILL, by the pid this test started
    child.wait().unwrap();
    let written = std::fs::read_to_string(&series).unwrap();
    assert!(written.ends_with('\n'), "whole lines only");
    let (h, samples) = read(&series);
    assert_eq!(h["interval_ns"], 100_000_000);
    assert!(samples.len() >= 20, "{} samples", samples.len());
    for (k, x) in samples.iter().enumerate() {
        // In real time a sample is taken as its moment comes: at it or
        // just after, one an interval.
        let t = x["t_ns"].as_u64().unwrap();
        let k = k as u64;
        assert!(
            (k * 100_000_000..(k + 1) * 100_000_000).contains(&t),
            "sample {k} at {t} ns"
        );
        assert!(x["realtime"]["events"].as_u64().is_some(), "{x}");
    }
}

/// A run cut into partitions on threads writes the series one partition
/// writes, byte for byte (each partition counts what it owns; partition 0
/// writes the sum).
#[test]
fn a_run_cut_into_partitions_writes_the_series_of_one_and_so_does_one_in_real_time() {
    let s = Scratch::new("series-parts");
    let topo = repo_file("examples/link-flap.toml");
    let mut got = Vec::new();
    for parts in ["1", "2", "4"] {
        let f = s.path(&format!("s{parts}.jsonl"));
        let out = netloop(&[
            "run",
            &topo,
            "-q",
            "--partitions",
            parts,
            "--stats-interval",
            "300ms",
            "--stats",
            &f,
        ]);
        assert!(out.status.success(), "{parts}: {}", text(&out.stderr));
        got.push(std::fs::read(&f).unwrap());
    }
    let (_, samples) = read(&s.path("s1.jsonl"));
    assert_eq!(samples.len(), 135, "every 300 ms of 40 s, and the end");
    assert!(got[1] == got[0], "2 partitions changed the series");
    assert!(got[2] == got[0], "4 partitions changed the series");

    // In real time: partition 0 asks the others for their counts; the last
    // sample is the results' counters.
    let f = s.path("rt.jsonl");
    let json = s.path("rt.json");
    let out = netloop(&[
        "run",
        &repo_file("examples/given-cut.toml"),
        "-q",
        "--realtime",
        "--partitions",
        "2",
        "--duration",
        "2s",
        "--stats-interval",
        "250ms",
        "--stats",
        &f,
        "--json",
        &json,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["realtime"]["partitions"]["count"], 2);
    let (h, samples) = read(&f);
    assert!(samples.len() >= 8, "{} samples", samples.len());
    let last = samples.last().unwrap();
    let mut compared = 0;
    for (i, name) in names(&h, "links").iter().enumerate() {
        let l = named(&r, "links", name);
        for (d, dir) in ["a_to_b", "b_to_a"].iter().enumerate() {
            assert_eq!(
                last["links"][i][d][0].as_u64(),
                l[dir]["sent_packets"].as_u64(),
                "{name} {dir}: the last sample against the results"
            );
            compared += u64::from(l[dir]["sent_packets"].as_u64().unwrap() > 0);
        }
    }
    assert!(
        compared > 2,
        "links on both sides of the cut carried frames"
    );
}

#[test]
fn the_series_needs_a_file_of_its_own_and_an_interval() {
    let s = Scratch::new("series-errors");
    let topo = repo_file("examples/dumbbell.toml");
    let f = s.path("s.jsonl");
    let refused = |args: &[&str], want: &str| {
        let mut all = vec!["run", topo.as_str(), "-q"];
        all.extend_from_slice(args);
        let e = netloop(&all);
        assert!(
            !e.status.success() && text(&e.stderr).contains(want),
            "{args:?}: {}",
            text(&e.stderr)
        );
        e.status.code()
    };
    let code = refused(
        &["--stats-interval", "100ms"],
        "--stats-interval needs a file",
    );
    assert_eq!(code, Some(1));
    refused(
        &["--stats-interval", "0s", "--stats", &f],
        "longer than zero",
    );
    refused(
        &["--stats-interval", "100ms", "--stats", &f, "--json", &f],
        "name the same file",
    );
    let code = refused(&["--stats", &f], "--stats-interval");
    assert_eq!(code, Some(2), "--stats alone is a usage error");
}
