//! `netloop report`: a run's results and series as one self-contained HTML
//! page — what it holds, the verdict it gives, its errors, and that a real
//! browser (headless Chromium) renders it without an error.

mod common;

use common::{have, netloop, run_dumbbell_sampled, text, Scratch};
use serde_json::{json, Value};
use std::process::Command;

/// A 6-second dumbbell run with a series, in `s`: the results' path.
fn run_dumbbell(s: &Scratch) -> String {
    let json = s.path("out/run.json");
    std::fs::create_dir_all(s.path("out")).unwrap();
    run_dumbbell_sampled(&json, "6s", "100ms");
    json
}

fn report(args: &[&str]) -> (bool, String, String) {
    let mut all = vec!["report"];
    all.extend_from_slice(args);
    let out = netloop(&all);
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn a_report_holds_the_run_its_topology_and_its_series() {
    let s = Scratch::new("report-sim");
    let json = run_dumbbell(&s);
    let (ok, stdout, stderr) = report(&[&s.path("out")]);
    assert!(ok, "{stderr}");
    let page_path = s.path("out/run.html");
    assert!(stdout.contains(&page_path), "{stdout}");
    let page = std::fs::read_to_string(&page_path).unwrap();
    let results: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(
        page.contains("id=\"verdict\" class=\"sim\""),
        "a simulation's verdict"
    );
    assert!(page.contains("Simulation as fast as possible: 6 s simulated"));
    // Every link and flow of the results, by name.
    for key in ["links", "flows"] {
        for item in results[key].as_array().unwrap() {
            let name = item["name"].as_str().unwrap();
            assert!(
                page.contains(&format!(">{name}<")),
                "{key} {name} is not on the page"
            );
        }
    }
    // The topology and the series' charts: the drawing, throughput, queue
    // length, flows. (Six seconds of the dumbbell drop nothing.)
    assert_eq!(results["conservation"]["dropped"], json!({}));
    assert!(page.contains("No frame was dropped."));
    for title in [
        "Link throughput (busiest directions)",
        "Queue length",
        "Flows: payload received (busiest)",
    ] {
        assert!(page.contains(title), "no chart '{title}'");
    }
    assert!(
        page.matches("<svg").count() >= 4,
        "topology and charts are SVG"
    );
    assert!(page.contains("61 samples, one every 100 ms"));
    // Self-contained: no script, nothing fetched.
    for outside in ["<script", "src=", "<link", "@import", "url("] {
        assert!(
            !page.contains(outside),
            "the page refers outside itself: {outside}"
        );
    }
    // Written whole: no partial file left, and -o writes elsewhere.
    let left: Vec<String> = std::fs::read_dir(s.path("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
    let other = s.path("elsewhere.html");
    let (ok, _, stderr) = report(&[&json, "-o", &other]);
    assert!(ok, "{stderr}");
    assert_eq!(std::fs::read_to_string(other).unwrap(), page);
}

/// The results of `run_dumbbell` made a real-time run's, with `realtime`.
fn as_realtime(json: &str, kept_up: bool) -> String {
    let mut r: Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    r["meta"]["mode"] = json!("realtime");
    r["conservation"]["dropped"] = json!({"queue_full": 40, "random_loss": 3});
    r["realtime"] = json!({
        "kept_up": kept_up, "late_events": if kept_up { 0 } else { 1234 },
        "late_threshold_ns": 1_000_000, "first_late_s": if kept_up { Value::Null } else { json!(0.5) },
        "last_late_s": if kept_up { Value::Null } else { json!(2.5) }, "boundary_lost": 7,
        "rx_frames": 10, "tx_frames": 12, "rx_malformed": 0, "cpu_share": 0.4,
        "event_lateness": {"count": 100, "p50_ns": 20_000, "p99_ns": 400_000, "p999_ns": 900_000,
                            "max_ns": 25_000_000, "mean_ns": 30_000},
        "event_lateness_histogram": [{"up_to_ns": 1_000, "count": 60}, {"up_to_ns": 2_000, "count": 30},
                                     {"up_to_ns": 4_000, "count": 0}, {"up_to_ns": 8_000, "count": 10}],
        "input_latency": {"count": 0}, "output_latency": {"count": 0}
    });
    let path = json.replace(".json", if kept_up { "-ok.json" } else { "-late.json" });
    std::fs::write(&path, serde_json::to_string(&r).unwrap()).unwrap();
    path
}

#[test]
fn the_verdict_says_whether_a_real_time_run_kept_up() {
    let s = Scratch::new("report-verdict");
    let json = run_dumbbell(&s);
    let late = as_realtime(&json, false);
    let (ok, _, stderr) = report(&[&late]);
    assert!(ok, "{stderr}");
    let page = std::fs::read_to_string(late.replace(".json", ".html")).unwrap();
    assert!(page.contains("id=\"verdict\" class=\"late\""));
    assert!(page.contains("FELL BEHIND real time: 1234 events ran more than 1 ms late (max 25 ms)"));
    assert!(page.contains("7 frames lost between the real hosts and the model"));
    assert!(page.contains("event lateness p99"), "the lateness chart");
    assert!(
        page.contains("How late events ran (late beyond 1 ms)") && page.contains("8µs"),
        "the lateness histogram, its buckets labelled"
    );
    assert!(page.contains("Frames dropped, by reason") && page.contains("queue_full"));
    let kept = as_realtime(&json, true);
    let (ok, _, stderr) = report(&[&kept]);
    assert!(ok, "{stderr}");
    let page = std::fs::read_to_string(kept.replace(".json", ".html")).unwrap();
    assert!(page.contains("id=\"verdict\" class=\"ok\""));
    assert!(page.contains("Kept up with real time: every event ran within 1 ms of its time"));
}

#[test]
fn what_cannot_be_reported_is_an_error_that_names_it() {
    let s = Scratch::new("report-errors");
    std::fs::create_dir_all(s.path("empty")).unwrap();
    let (ok, _, err) = report(&[&s.path("empty")]);
    assert!(!ok && err.contains("holds no netloop results"), "{err}");
    let not = s.write("not.json", "{\"hello\": 1}");
    let (ok, _, err) = report(&[&not]);
    assert!(
        !ok && err.contains("is not a netloop results document"),
        "{err}"
    );
    let broken = s.write("broken.json", "{\"meta\": ");
    let (ok, _, err) = report(&[&broken]);
    assert!(
        !ok && err.contains("broken.json:1:") && err.contains("not a results document"),
        "{err}"
    );
    // A series whose middle line is bad is an error at that line; a last
    // line cut short (a killed run) is left out, and the page says so.
    let json = run_dumbbell(&s);
    let series = s.path("out/run.series.jsonl");
    let whole = std::fs::read_to_string(&series).unwrap();
    let mut lines: Vec<&str> = whole.lines().collect();
    lines[3] = "{\"t_ns\": ";
    std::fs::write(&series, lines.join("\n") + "\n").unwrap();
    let (ok, _, err) = report(&[&json]);
    assert!(
        !ok && err.contains("run.series.jsonl:4: not a sample"),
        "{err}"
    );
    let cut = &whole[..whole.len() - 20];
    std::fs::write(&series, cut).unwrap();
    let (ok, _, err) = report(&[&json]);
    assert!(ok, "{err}");
    let page = std::fs::read_to_string(s.path("out/run.html")).unwrap();
    assert!(page.contains("60 samples") && page.contains("its last line was cut short"));
}

/// Chromium's name here (Debian's package installs `chromium`).
fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| netloop_io::netns::command_exists(c))
}

#[test]
fn the_page_renders_in_headless_chromium_without_errors() {
    let Some(browser) = chromium().or_else(|| {
        have(&["chromium"]);
        None
    }) else {
        return;
    };
    let s = Scratch::new("report-browser");
    let json = run_dumbbell(&s);
    let late = as_realtime(&json, false);
    let (ok, _, stderr) = report(&[&late]);
    assert!(ok, "{stderr}");
    let url = format!("file://{}", late.replace(".json", ".html"));
    let profile = s.path("profile");
    let base = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--enable-logging=stderr",
        "--v=0",
    ];
    let user_dir = format!("--user-data-dir={profile}");
    // The DOM as rendered, and the console: no error of any kind.
    let out = Command::new(browser)
        .args(base)
        .arg(&user_dir)
        .args(["--dump-dom", &url])
        .output()
        .unwrap();
    let (dom, log) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{browser} failed: {log}");
    assert!(
        dom.contains("FELL BEHIND real time"),
        "the DOM lacks the page: {dom:.500}"
    );
    assert!(dom.matches("<svg").count() >= 5);
    let console: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught") || l.contains("ERR_FILE"))
        .collect();
    assert!(console.is_empty(), "the console had messages: {console:?}");
    // A screenshot: the verdict's red banner is drawn near the top, and the
    // charts below it are drawn (not a blank page).
    let shot = s.path("shot.png");
    let out = Command::new(browser)
        .args(base)
        .arg(&user_dir)
        .args([
            "--window-size=1000,1600",
            &format!("--screenshot={shot}"),
            &url,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let pixel = |x: usize, y: usize| {
        let i = (y * info.width as usize + x) * channels;
        (buf[i], buf[i + 1], buf[i + 2])
    };
    let banner = (0..400).any(|y| pixel(200, y) == (0xf8, 0xd7, 0xd7));
    assert!(
        banner,
        "no red verdict banner in the top 400 rows of {shot}"
    );
    let inked = (600..info.height as usize)
        .flat_map(|y| (0..info.width as usize).step_by(7).map(move |x| (x, y)))
        .filter(|&(x, y)| pixel(x, y) != (0xff, 0xff, 0xff))
        .count();
    assert!(
        inked > 2000,
        "the lower page is blank ({inked} pixels drawn) in {shot}"
    );
}
