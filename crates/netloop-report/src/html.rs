//! The page: its sections in order, each from the results or the series.

use std::fmt::Write as _;

use anyhow::Result;
use serde_json::Value;

use crate::inputs::{Inputs, Series};
use crate::plots::{self, human, Line};
use crate::topology;

/// Lines drawn at most per chart (the busiest).
const MOST_LINES: usize = 8;

const STYLE: &str = "body{font-family:sans-serif;margin:24px auto;max-width:960px;color:#222}\
h1{font-size:24px;margin-bottom:4px}h2{font-size:19px;margin-top:32px;border-bottom:1px solid #ddd}\
#verdict{padding:14px 18px;border-radius:6px;font-size:17px;font-weight:bold}\
#verdict.ok{background:#d9f2dc;color:#1b5e20}#verdict.late{background:#f8d7d7;color:#8b1111}\
#verdict.sim{background:#dde8f6;color:#183a6b}\
table{border-collapse:collapse;font-size:13px;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 7px;text-align:right}\
th{background:#f3f3f3}td.l,th.l{text-align:left}.note{color:#666;font-size:13px}\
svg{max-width:100%;height:auto}.swatch{display:inline-block;width:28px;height:10px;vertical-align:middle}";

/// Text made safe for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

pub fn page(inp: &Inputs) -> Result<String> {
    let r = &inp.results;
    let meta = &r["meta"];
    let name = meta["topology"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| inp.results_path.display().to_string());
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>netloop report: {}</title><style>{STYLE}</style></head><body>\
         <h1>netloop report: {}</h1><p class=\"note\">{} — netloop {}</p>",
        esc(&name),
        esc(&name),
        esc(&inp.results_path.display().to_string()),
        esc(meta["netloop_version"].as_str().unwrap_or("?"))
    );
    verdict(&mut o, r);
    summary(&mut o, r);
    drawing(&mut o, r);
    links(&mut o, r);
    match &inp.series {
        Some(s) => series(&mut o, s)?,
        None => o.push_str(
            "<h2 id=\"series\">Over time</h2><p class=\"note\">No time series: run with \
             <code>--stats-interval 100ms</code> to have one (docs/series.md).</p>",
        ),
    }
    drops(&mut o, r)?;
    if r["realtime"].is_object() {
        lateness(&mut o, &r["realtime"])?;
    }
    flows(&mut o, r);
    o.push_str("</body></html>\n");
    Ok(o)
}

fn verdict(o: &mut String, r: &Value) {
    let meta = &r["meta"];
    let sim_s = num(&meta["sim_time_reached_ns"]) / 1e9;
    let rt = &r["realtime"];
    let (class, text) = if rt.is_object() {
        let threshold = topology::duration(num(&rt["late_threshold_ns"]));
        let p99 = topology::duration(num(&rt["event_lateness"]["p99_ns"]));
        let max = topology::duration(num(&rt["event_lateness"]["max_ns"]));
        if rt["kept_up"].as_bool() == Some(true) {
            (
                "ok",
                format!(
                    "Kept up with real time: every event ran within {threshold} of its time \
                     (lateness p99 {p99}, max {max}) over {} s",
                    human(sim_s)
                ),
            )
        } else {
            (
                "late",
                format!(
                    "FELL BEHIND real time: {} events ran more than {threshold} late (max {max}), \
                     from {} s to {} s of the run; figures measured then are not to be trusted",
                    rt["late_events"],
                    rt["first_late_s"].as_f64().map_or("?".into(), human),
                    rt["last_late_s"].as_f64().map_or("?".into(), human)
                ),
            )
        }
    } else {
        let speed = num(&r["wall"]["sim_per_wall"]);
        let mode = meta["mode"].as_str().unwrap_or("afap");
        let how = if mode == "cosim" {
            "Co-simulation (time granted by the federation)"
        } else {
            "Simulation as fast as possible"
        };
        (
            "sim",
            format!(
                "{how}: {} s simulated{}",
                human(sim_s),
                if speed > 0.0 {
                    format!(", {}× real time", human(speed))
                } else {
                    String::new()
                }
            ),
        )
    };
    let _ = write!(o, "<div id=\"verdict\" class=\"{class}\">{}", esc(&text));
    let lost = num(&rt["boundary_lost"]);
    if lost > 0.0 {
        let _ = write!(
            o,
            "<br>{} frames lost between the real hosts and the model",
            human(lost)
        );
    }
    let unaccounted = num(&r["conservation"]["unaccounted"]);
    if unaccounted != 0.0 {
        let _ = write!(
            o,
            "<br>{unaccounted} frames unaccounted for (a netloop bug: please report it)"
        );
    }
    o.push_str("</div>");
}

fn summary(o: &mut String, r: &Value) {
    let meta = &r["meta"];
    let c = &r["conservation"];
    let rows = [
        ("mode", meta["mode"].as_str().unwrap_or("?").to_string()),
        ("seed", meta["seed"].to_string()),
        (
            "simulated time",
            format!("{} s", human(num(&meta["sim_time_reached_ns"]) / 1e9)),
        ),
        (
            "wall-clock time",
            format!("{} s", human(num(&r["wall"]["seconds"]))),
        ),
        ("events", human(num(&meta["events_processed"]))),
        (
            "frames created / delivered / dropped / in flight",
            format!(
                "{} / {} / {} / {}",
                human(num(&c["created_total"])),
                human(num(&c["delivered_total"])),
                human(num(&c["dropped_total"])),
                human(num(&c["in_flight_total"]))
            ),
        ),
    ];
    o.push_str("<h2 id=\"summary\">Run</h2><table>");
    for (k, v) in rows {
        let _ = write!(
            o,
            "<tr><th class=\"l\">{k}</th><td class=\"l\">{}</td></tr>",
            esc(&v)
        );
    }
    o.push_str("</table>");
}

fn drawing(o: &mut String, r: &Value) {
    o.push_str("<h2 id=\"topology\">Topology</h2>");
    match topology::draw(r) {
        Some(svg) => {
            o.push_str(&svg);
            let _ = write!(
                o,
                "<p class=\"note\">Links by the load of their busier direction: \
                 <span class=\"swatch\" style=\"background:#{:06x}\"></span> idle \
                 <span class=\"swatch\" style=\"background:#{:06x}\"></span> half \
                 <span class=\"swatch\" style=\"background:#{:06x}\"></span> full \
                 <span class=\"swatch\" style=\"background:#{:06x}\"></span> unlimited rate. \
                 Routers blue, switches green, real hosts orange, simulated hosts grey.</p>",
                topology::load_color(Some(0.0)),
                topology::load_color(Some(0.5)),
                topology::load_color(Some(1.0)),
                topology::load_color(None)
            );
        }
        None => {
            let n = r["nodes"].as_array().map_or(0, Vec::len);
            let _ = write!(
                o,
                "<p class=\"note\">{n} nodes: too many to draw (at most {}); the links are below.</p>",
                topology::MAX_NODES
            );
        }
    }
}

fn links(o: &mut String, r: &Value) {
    let sim_s = num(&r["meta"]["sim_time_reached_ns"]) / 1e9;
    o.push_str(
        "<h2 id=\"links\">Links</h2><table><tr><th class=\"l\">link</th><th class=\"l\">direction</th>\
         <th class=\"l\">rate, delay</th><th>sent</th><th>mean rate</th><th>load</th><th>drops</th>\
         <th>queue max</th><th>mean queueing</th></tr>",
    );
    for link in r["links"].as_array().into_iter().flatten() {
        for (d, arrow) in [("a_to_b", "a→b"), ("b_to_a", "b→a")] {
            let dir = &link[d];
            let sent = num(&dir["sent_packets"]);
            let bits = num(&dir["sent_bytes"]) * 8.0;
            let load = topology::dir_load(dir, sim_s)
                .map_or_else(|| "—".to_string(), |l| format!("{:.1} %", 100.0 * l));
            // (A sum of nothing would be -0.)
            let drops: f64 = dir["drops"]
                .as_object()
                .map_or(0.0, |m| m.values().map(num).fold(0.0, |a, b| a + b));
            let queueing = if sent > 0.0 {
                topology::duration(num(&dir["queue_delay_sum_ns"]) / sent)
            } else {
                "—".to_string()
            };
            let _ = write!(
                o,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{arrow}</td><td class=\"l\">{}</td>\
                 <td>{}</td><td>{}</td><td>{load}</td><td>{}</td><td>{}</td><td>{queueing}</td></tr>",
                esc(link["name"].as_str().unwrap_or("?")),
                esc(&topology::dir_parameters(dir)),
                human(sent),
                if sim_s > 0.0 {
                    topology::bits(bits / sim_s)
                } else {
                    "—".into()
                },
                human(drops),
                human(num(&dir["queue_high_water_packets"]))
            );
        }
    }
    o.push_str("</table>");
}

/// (t_s, value) of every sample, for a value read from two successive
/// samples (a difference per second, or a level).
fn over_time(
    s: &Series,
    f: impl Fn(&Value, Option<&Value>, f64) -> Option<f64>,
) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut prev: Option<(&Value, f64)> = None;
    for sample in &s.samples {
        let t = num(&sample["t_ns"]) / 1e9;
        let dt = prev.map_or(0.0, |(_, pt)| t - pt);
        if let Some(v) = f(sample, prev.map(|p| p.0), dt) {
            out.push((t, v));
        }
        prev = Some((sample, t));
    }
    out
}

fn series(o: &mut String, s: &Series) -> Result<()> {
    let interval = topology::duration(num(&s.header["interval_ns"]));
    let _ = write!(
        o,
        "<h2 id=\"series\">Over time</h2><p class=\"note\">{} samples, one every {interval} of \
         simulated time ({}){}.</p>",
        s.samples.len(),
        esc(&s.path.display().to_string()),
        if s.truncated {
            "; its last line was cut short (the run was killed) and is left out"
        } else {
            ""
        }
    );
    let links = s.names("links");
    let col = |name: &str| s.index("dir_columns", name);
    let (Some(bytes), Some(queued), Some(dropped)) = (
        col("sent_bytes"),
        col("queued_packets"),
        col("dropped_packets"),
    ) else {
        o.push_str("<p class=\"note\">The series has none of the columns drawn here.</p>");
        return Ok(());
    };
    let at = |sample: &Value, l: usize, d: usize, c: usize| num(&sample["links"][l][d][c]);
    let last = s.samples.last();
    // The busiest directions by bytes sent.
    let mut dirs: Vec<(usize, usize, f64)> = (0..links.len())
        .flat_map(|l| (0..2).map(move |d| (l, d)))
        .map(|(l, d)| (l, d, last.map_or(0.0, |x| at(x, l, d, bytes))))
        .filter(|x| x.2 > 0.0)
        .collect();
    dirs.sort_by(|a, b| b.2.total_cmp(&a.2));
    dirs.truncate(MOST_LINES);
    let label = |l: usize, d: usize| format!("{} {}", links[l], if d == 0 { "a→b" } else { "b→a" });
    let throughput: Vec<Line> = dirs
        .iter()
        .map(|&(l, d, _)| Line {
            name: label(l, d),
            points: over_time(s, |x, p, dt| {
                let p = p?;
                (dt > 0.0).then(|| (at(x, l, d, bytes) - at(p, l, d, bytes)) * 8.0 / dt / 1e6)
            }),
        })
        .collect();
    if throughput.is_empty() {
        o.push_str("<p class=\"note\">No link carried anything.</p>");
    } else {
        o.push_str(&plots::lines(
            "Link throughput (busiest directions)",
            "Mbit/s",
            &throughput,
        )?);
        let queues: Vec<Line> = dirs
            .iter()
            .map(|&(l, d, _)| Line {
                name: label(l, d),
                points: over_time(s, |x, _, _| Some(at(x, l, d, queued))),
            })
            .collect();
        o.push_str(&plots::lines("Queue length", "packets waiting", &queues)?);
    }
    let drops_total = Line {
        name: String::new(),
        points: over_time(s, |x, p, dt| {
            let p = p?;
            let sum = |v: &Value| -> f64 {
                (0..links.len())
                    .flat_map(|l| (0..2).map(move |d| (l, d)))
                    .map(|(l, d)| at(v, l, d, dropped))
                    .sum()
            };
            (dt > 0.0).then(|| (sum(x) - sum(p)) / dt)
        }),
    };
    if drops_total.points.iter().any(|p| p.1 > 0.0) {
        o.push_str(&plots::lines(
            "Drops on links, every reason",
            "frames/s",
            &[drops_total],
        )?);
    }
    flows_over_time(o, s)?;
    realtime_over_time(o, s)?;
    Ok(())
}

fn flows_over_time(o: &mut String, s: &Series) -> Result<()> {
    let flows = s.names("flows");
    let Some(rx) = s.index("flow_columns", "received_bytes") else {
        return Ok(());
    };
    let last = s.samples.last();
    let at = |v: &Value, f: usize| num(&v["flows"][f][rx]);
    let mut busiest: Vec<(usize, f64)> = (0..flows.len())
        .map(|f| (f, last.map_or(0.0, |x| at(x, f))))
        .filter(|x| x.1 > 0.0)
        .collect();
    busiest.sort_by(|a, b| b.1.total_cmp(&a.1));
    busiest.truncate(MOST_LINES);
    if busiest.is_empty() {
        return Ok(());
    }
    let lines: Vec<Line> = busiest
        .iter()
        .map(|&(f, _)| Line {
            name: flows[f].clone(),
            points: over_time(s, |x, p, dt| {
                let p = p?;
                (dt > 0.0).then(|| (at(x, f) - at(p, f)) * 8.0 / dt / 1e6)
            }),
        })
        .collect();
    o.push_str(&plots::lines(
        "Flows: payload received (busiest)",
        "Mbit/s",
        &lines,
    )?);
    Ok(())
}

fn realtime_over_time(o: &mut String, s: &Series) -> Result<()> {
    if !s.samples.iter().any(|x| x["realtime"].is_object()) {
        return Ok(());
    }
    let late = Line {
        name: "late events in the interval".to_string(),
        points: over_time(s, |x, p, _| {
            let p = p?;
            Some(num(&x["realtime"]["late_events"]) - num(&p["realtime"]["late_events"]))
        }),
    };
    o.push_str(&plots::lines(
        "Real time: events later than the threshold",
        "events",
        &[late],
    )?);
    let p99 = Line {
        name: "event lateness p99 since the start".to_string(),
        points: over_time(s, |x, _, _| {
            x["realtime"]["event_lateness"]["p99_ns"]
                .as_f64()
                .map(|v| v / 1e3)
        }),
    };
    o.push_str(&plots::lines("Real time: lateness", "µs", &[p99])?);
    Ok(())
}

fn drops(o: &mut String, r: &Value) -> Result<()> {
    o.push_str("<h2 id=\"drops\">Drops by reason</h2>");
    let mut by: Vec<(String, f64)> = r["conservation"]["dropped"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), num(v))).collect())
        .unwrap_or_default();
    by.retain(|b| b.1 > 0.0);
    if by.is_empty() {
        o.push_str("<p>No frame was dropped.</p>");
        return Ok(());
    }
    by.sort_by(|a, b| b.1.total_cmp(&a.1));
    o.push_str(&plots::bars(
        "Frames dropped, by reason",
        "frames",
        &by,
        "",
    )?);
    o.push_str("<p class=\"note\">Reasons are those of docs/results-schema.md (drop reasons).</p>");
    Ok(())
}

fn lateness(o: &mut String, rt: &Value) -> Result<()> {
    o.push_str("<h2 id=\"lateness\">Real time</h2>");
    let mut bars = Vec::new();
    for (key, what) in [
        ("event_lateness", "event lateness"),
        ("input_latency", "input latency"),
        ("output_latency", "output latency"),
    ] {
        let d = &rt[key];
        if num(&d["count"]) == 0.0 {
            continue;
        }
        for (p, shown) in [
            ("p50_ns", "p50"),
            ("p99_ns", "p99"),
            ("p999_ns", "p99.9"),
            ("max_ns", "max"),
        ] {
            bars.push((format!("{what} {shown}"), num(&d[p]) / 1e3));
        }
    }
    if !bars.is_empty() {
        o.push_str(&plots::bars(
            "How late events ran, and frames' way in and out (percentiles)",
            "µs",
            &bars,
            " µs",
        )?);
    }
    if let Some(h) = rt["event_lateness_histogram"]
        .as_array()
        .filter(|h| !h.is_empty())
    {
        // Short labels, every other one where there are many: the axis has
        // room for about 18.
        let every = if h.len() > 18 { 2 } else { 1 };
        let buckets: Vec<(String, u64)> = h
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let label = if i % every == 0 {
                    topology::duration(num(&b["up_to_ns"])).replace(' ', "")
                } else {
                    String::new()
                };
                (label, num(&b["count"]) as u64)
            })
            .collect();
        let threshold = topology::duration(num(&rt["late_threshold_ns"]));
        o.push_str(&plots::histogram(
            &format!("How late events ran (late beyond {threshold})"),
            "lateness, at most (each bar: above the bar before's bound)",
            &buckets,
        )?);
    }
    let rows = [
        ("kept up", rt["kept_up"].to_string()),
        ("late events", rt["late_events"].to_string()),
        (
            "frames read / written",
            format!("{} / {}", rt["rx_frames"], rt["tx_frames"]),
        ),
        (
            "frames lost at the boundary",
            rt["boundary_lost"].to_string(),
        ),
        (
            "malformed frames from real hosts",
            rt["rx_malformed"].to_string(),
        ),
        (
            "netloop's CPU share (of 1 core)",
            rt["cpu_share"].to_string(),
        ),
    ];
    o.push_str("<table>");
    for (k, v) in rows {
        let _ = write!(o, "<tr><th class=\"l\">{k}</th><td>{}</td></tr>", esc(&v));
    }
    o.push_str("</table>");
    Ok(())
}

fn flows(o: &mut String, r: &Value) {
    let Some(flows) = r["flows"].as_array().filter(|f| !f.is_empty()) else {
        return;
    };
    o.push_str(
        "<h2 id=\"flows\">Flows</h2><table><tr><th class=\"l\">flow</th><th class=\"l\">kind</th>\
         <th class=\"l\">from → to</th><th>sent</th><th>received</th><th>loss</th><th>throughput</th>\
         <th>delay p50</th><th>delay p99</th></tr>",
    );
    for f in flows {
        let cell = |v: &Value| v.as_f64().map_or("—".to_string(), human);
        let delay = |p: &str| {
            f["delay_ns"][p]
                .as_f64()
                .map_or("—".to_string(), topology::duration)
        };
        let _ = write!(
            o,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{} → {}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(f["name"].as_str().unwrap_or("?")),
            esc(f["kind"].as_str().unwrap_or("?")),
            esc(f["from"].as_str().unwrap_or("?")),
            esc(f["to"].as_str().unwrap_or("?")),
            cell(&f["sent_packets"]),
            cell(&f["received_packets"]),
            f["loss"]
                .as_f64()
                .map_or("—".to_string(), |l| format!("{:.2} %", 100.0 * l)),
            f["throughput_bps"]
                .as_f64()
                .map_or("—".to_string(), topology::bits),
            delay("p50"),
            delay("p99")
        );
    }
    o.push_str("</table>");
}
