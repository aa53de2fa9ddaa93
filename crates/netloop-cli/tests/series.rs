//! `netloop run --stats-interval`: the time series written as a run goes —
//! its samples on the interval's grid, its last sample equal to the results'
//! counters, whole lines only after a SIGKILL, and the errors.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("netloop-series-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn netloop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_netloop"))
        .current_dir(repo())
        .args(args)
        .output()
        .expect("netloop runs")
}

/// The lines of a series file, parsed: the header and the samples.
fn read(path: &Path) -> (serde_json::Value, Vec<serde_json::Value>) {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = std::io::BufReader::new(f).lines().map(|l| {
        let l = l.unwrap();
        serde_json::from_str::<serde_json::Value>(&l).unwrap_or_else(|e| panic!("{e}: {l}"))
    });
    let header = lines.next().expect("a header");
    (header, lines.collect())
}

#[test]
fn a_simulation_is_sampled_on_the_grid_and_ends_with_the_results_counters() {
    let dir = tmpdir("sim");
    let json = dir.join("out.json");
    let out = netloop(&[
        "run",
        "examples/dumbbell.toml",
        "--duration",
        "6s",
        "--json",
        json.to_str().unwrap(),
        "--stats-interval",
        "500ms",
        "-q",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (h, samples) = read(&dir.join("out.series.jsonl"));
    assert_eq!(h["format"], "netloop-series/1");
    assert_eq!(h["interval_ns"], 500_000_000);
    let times: Vec<u64> = samples
        .iter()
        .map(|s| s["t_ns"].as_u64().unwrap())
        .collect();
    let want: Vec<u64> = (0..=12).map(|k| k * 500_000_000).collect();
    assert_eq!(
        times, want,
        "a sample at every interval, the end's included"
    );
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let links: Vec<&str> = h["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let cols: Vec<&str> = h["dir_columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let col = |name: &str| cols.iter().position(|c| *c == name).unwrap();
    let last = samples.last().unwrap();
    let mut busy = 0;
    for (l, name) in links.iter().enumerate() {
        let rl = r["links"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == *name)
            .unwrap();
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
            let series: Vec<u64> = samples
                .iter()
                .map(|s| s["links"][l][d][col("sent_packets")].as_u64().unwrap())
                .collect();
            assert!(
                series.windows(2).all(|w| w[0] <= w[1]),
                "{name} {dir}: {series:?}"
            );
            busy += usize::from(series[12] > series[2]);
        }
    }
    assert!(busy > 0, "traffic shows between samples");
    let flows: Vec<&str> = h["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    let fcols: Vec<&str> = h["flow_columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let mut compared = 0;
    for (i, name) in flows.iter().enumerate() {
        let rf = r["flows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == *name)
            .unwrap();
        for (k, c) in fcols.iter().enumerate().take(3) {
            if let Some(n) = rf[*c].as_u64() {
                assert_eq!(last["flows"][i][k].as_u64(), Some(n), "flow {name} {c}");
                compared += 1;
            }
        }
    }
    assert!(compared >= flows.len(), "every flow compared");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A real-time run (simulated hosts only: no root needed) killed with
/// SIGKILL leaves every sample up to its last interval, each line whole.
#[test]
fn a_run_killed_with_sigkill_keeps_its_series_up_to_the_last_interval() {
    let dir = tmpdir("kill");
    let series = dir.join("s.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_netloop"))
        .current_dir(repo())
        .args([
            "run",
            "examples/two-routers.toml",
            "--realtime",
            "--duration",
            "60s",
        ])
        .args([
            "--stats-interval",
            "100ms",
            "--stats",
            series.to_str().unwrap(),
            "-q",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
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
    let text = std::fs::read_to_string(&series).unwrap();
    assert!(text.ends_with('\n'), "whole lines only");
    let (h, samples) = read(&series);
    assert_eq!(h["interval_ns"], 100_000_000);
    assert!(samples.len() >= 20, "{} samples", samples.len());
    for (k, s) in samples.iter().enumerate() {
        // In real time a sample is taken as its moment comes: at it or
        // just after, one an interval.
        let t = s["t_ns"].as_u64().unwrap();
        let k = k as u64;
        assert!(
            (k * 100_000_000..(k + 1) * 100_000_000).contains(&t),
            "sample {k} at {t} ns"
        );
        assert!(s["realtime"]["events"].as_u64().is_some(), "{s}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_series_needs_a_file_one_partition_and_an_interval() {
    let e = netloop(&[
        "run",
        "examples/dumbbell.toml",
        "--stats-interval",
        "100ms",
        "-q",
    ]);
    assert_eq!(e.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&e.stderr).contains("--stats-interval needs a file"));
    let dir = tmpdir("errors");
    let f = dir.join("s.jsonl");
    let f = f.to_str().unwrap();
    let e = netloop(&[
        "run",
        "examples/dumbbell.toml",
        "--stats-interval",
        "100ms",
        "--stats",
        f,
        "--partitions",
        "2",
        "-q",
    ]);
    assert!(
        String::from_utf8_lossy(&e.stderr).contains("cut into partitions"),
        "{e:?}"
    );
    let e = netloop(&[
        "run",
        "examples/dumbbell.toml",
        "--stats-interval",
        "0s",
        "--stats",
        f,
        "-q",
    ]);
    assert!(
        String::from_utf8_lossy(&e.stderr).contains("longer than zero"),
        "{e:?}"
    );
    let e = netloop(&["run", "examples/dumbbell.toml", "--stats", f, "-q"]);
    assert_eq!(e.status.code(), Some(2), "--stats alone is a usage error");
    let _ = std::fs::remove_dir_all(&dir);
}
