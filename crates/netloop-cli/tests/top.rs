//! `netloop top`: the live view read from a run's series — the figures it
//! shows are the series', it follows a file as it grows and ends when the
//! samples stop, and a file that is not a series is an error.

mod common;

use common::{netloop, run_dumbbell_sampled, text, Scratch, NETLOOP};
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn once_shows_the_last_intervals_rates_from_the_series() {
    let s = Scratch::new("top-once");
    let series = s.path("run.series.jsonl");
    run_dumbbell_sampled(&s.path("run.json"), "6s", "500ms");
    let out = netloop(&["top", &series, "--once"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(shown.contains("t = 6.0 s (simulated)"), "{shown}");
    // The bottleneck's rate over the last interval, as the series has it.
    let lines: Vec<Value> = std::fs::read_to_string(&series)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let h = &lines[0];
    let l = h["links"]
        .as_array()
        .unwrap()
        .iter()
        .position(|n| n == "bottleneck")
        .unwrap();
    let c = h["dir_columns"]
        .as_array()
        .unwrap()
        .iter()
        .position(|n| n == "sent_bytes")
        .unwrap();
    let (a, b) = (&lines[lines.len() - 2], &lines[lines.len() - 1]);
    let dt = (b["t_ns"].as_f64().unwrap() - a["t_ns"].as_f64().unwrap()) / 1e9;
    let mbps = (b["links"][l][0][c].as_f64().unwrap() - a["links"][l][0][c].as_f64().unwrap())
        * 8.0
        / dt
        / 1e6;
    let row = shown
        .lines()
        .find(|r| r.starts_with("bottleneck a→b"))
        .unwrap_or_else(|| panic!("no bottleneck row in\n{shown}"));
    assert!(
        row.contains(&format!("{mbps:.2}")),
        "{row} (expected {mbps:.2} Mbit/s)"
    );
    assert!(shown.contains("\nflow "), "the flows' table: {shown}");
}

#[test]
fn it_follows_a_growing_series_and_ends_when_samples_stop() {
    let s = Scratch::new("top-follow");
    let path = s.path("live.series.jsonl");
    let header = r#"{"format":"netloop-series/1","interval_ns":1000000000,"links":["l"],"directions":["a_to_b","b_to_a"],"dir_columns":["sent_packets","sent_bytes","received_packets","received_bytes","queued_packets","queue_delay_sum_ns","dropped_packets"],"flows":[],"flow_columns":[]}"#;
    let sample = |t: u64, bytes: u64| {
        format!(
            r#"{{"t_ns":{},"links":[[[1,{bytes},1,{bytes},3,0,0],[0,0,0,0,0,0,0]]],"drops":{{}},"flows":[],"realtime":{{"kept_up":true,"late_events":0,"event_lateness":{{"p99_ns":1500,"max_ns":90000}},"boundary_lost":0}}}}"#,
            t * 1_000_000_000
        )
    };
    let mut f = std::fs::File::create(&path).unwrap();
    writeln!(f, "{header}\n{}", sample(1, 0)).unwrap();
    let child = Command::new(NETLOOP)
        .args(["top", &path, "--idle", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    for (t, bytes) in [(2, 1_250_000), (3, 3_750_000)] {
        std::thread::sleep(Duration::from_millis(400));
        // Half a line, then the rest: the view waits for whole lines.
        let line = sample(t, bytes);
        let (first, rest) = line.split_at(line.len() / 2);
        write!(f, "{first}").unwrap();
        f.flush().unwrap();
        std::thread::sleep(Duration::from_millis(150));
        writeln!(f, "{rest}").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let (shown, err) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{err}");
    let frames: Vec<&str> = shown.split("netloop top").skip(1).collect();
    assert_eq!(frames.len(), 3, "a frame per sample:\n{shown}");
    assert!(
        frames[1].contains("t = 2.0 s") && frames[1].contains("10.00"),
        "1.25 MB in 1 s: {}",
        frames[1]
    );
    assert!(
        frames[2].contains("t = 3.0 s") && frames[2].contains("20.00"),
        "2.5 MB in 1 s: {}",
        frames[2]
    );
    assert!(frames[2].contains("real time: KEPT UP"), "{}", frames[2]);
    assert!(err.contains("no new sample for 2 s"), "{err}");
}

#[test]
fn a_file_that_is_not_a_series_is_an_error() {
    let s = Scratch::new("top-errors");
    let not = s.write("r.json", "{\"meta\": {}}\n");
    let out = netloop(&["top", &not, "--once"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("r.json:1: not a netloop-series/1 file"),
        "{}",
        text(&out.stderr)
    );
    let out = netloop(&["top", &s.path("missing.jsonl"), "--once"]);
    assert!(!out.status.success() && text(&out.stderr).contains("opening the series"));
}
