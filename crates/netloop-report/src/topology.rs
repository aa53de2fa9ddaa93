//! The topology drawn: nodes by kind, links labelled with their rate and
//! delay and coloured by how loaded their busier direction was. Laid out by
//! `layout-rs` (a layered layout, as Graphviz's dot).

use layout::backends::svg::SVGWriter;
use layout::core::base::Orientation;
use layout::core::color::Color;
use layout::core::geometry::Point;
use layout::core::style::{LineStyleKind, StyleAttr};
use layout::std_shapes::shapes::{Arrow, Element, LineEndKind, ShapeKind};
use layout::topo::layout::VisualGraph;
use serde_json::Value;

/// Beyond this many nodes the drawing would be unreadable (and slow to lay
/// out); the page says so and keeps the tables.
pub const MAX_NODES: usize = 250;

/// The load of one direction: its sent bits over its capacity and the
/// run's simulated time (None: unlimited rate, or no time).
pub fn dir_load(dir: &Value, sim_s: f64) -> Option<f64> {
    let rate = dir["rate_bps"]
        .as_f64()
        .or_else(|| dir["trace"]["mean_bps"].as_f64())?;
    let bits = dir["sent_bytes"].as_f64()? * 8.0;
    (rate > 0.0 && sim_s > 0.0).then(|| bits / (rate * sim_s))
}

/// The load of a link: its busier direction's.
pub fn load(link: &Value, sim_s: f64) -> Option<f64> {
    ["a_to_b", "b_to_a"]
        .iter()
        .filter_map(|d| dir_load(&link[*d], sim_s))
        .reduce(f64::max)
}

/// Green (idle) to red (full) for a load from 0 to 1; grey if unknown.
pub fn load_color(load: Option<f64>) -> u32 {
    match load {
        None => 0x9a9a9a,
        Some(l) => {
            let l = l.clamp(0.0, 1.0);
            let r = (60.0 + 195.0 * l) as u32;
            let g = (170.0 - 130.0 * l) as u32;
            (r << 16) | (g << 8) | 60
        }
    }
}

/// "10 Mb/s, 5 ms" for one direction.
pub fn dir_parameters(d: &Value) -> String {
    let rate = match (d["rate_bps"].as_f64(), d["trace"]["kind"].as_str()) {
        (_, Some(kind)) => format!("{kind} trace"),
        (Some(r), _) => bits(r),
        (None, None) => "unlimited".to_string(),
    };
    format!(
        "{rate}, {}",
        duration(d["delay_ns"].as_f64().unwrap_or(0.0))
    )
}

/// A link's parameters: a→b's, and b→a's after it if they differ.
pub fn parameters(link: &Value) -> String {
    let (a, b) = (
        dir_parameters(&link["a_to_b"]),
        dir_parameters(&link["b_to_a"]),
    );
    if a == b {
        a
    } else {
        format!("{a} / {b}")
    }
}

pub fn bits(bps: f64) -> String {
    match bps {
        r if r >= 1e9 => format!("{} Gb/s", super::plots::human(r / 1e9)),
        r if r >= 1e6 => format!("{} Mb/s", super::plots::human(r / 1e6)),
        r if r >= 1e3 => format!("{} kb/s", super::plots::human(r / 1e3)),
        r => format!("{} b/s", super::plots::human(r)),
    }
}

pub fn duration(ns: f64) -> String {
    match ns {
        n if n >= 1e9 => format!("{} s", super::plots::human(n / 1e9)),
        n if n >= 1e6 => format!("{} ms", super::plots::human(n / 1e6)),
        n if n >= 1e3 => format!("{} µs", super::plots::human(n / 1e3)),
        n => format!("{} ns", super::plots::human(n)),
    }
}

fn node_of(end: &Value) -> Option<&str> {
    end.as_str()
        .map(|s| s.rsplit_once(':').map_or(s, |(n, _)| n))
}

/// The drawing, as SVG; None if the network has too many nodes to draw.
pub fn draw(results: &Value) -> Option<String> {
    let nodes = results["nodes"].as_array()?;
    if nodes.is_empty() || nodes.len() > MAX_NODES {
        return None;
    }
    let sim_s = results["meta"]["sim_time_reached_ns"]
        .as_f64()
        .unwrap_or(0.0)
        / 1e9;
    let mut vg = VisualGraph::new(Orientation::LeftToRight);
    let mut handles = std::collections::HashMap::new();
    for n in nodes {
        let name = n["name"].as_str().unwrap_or("?");
        let (fill, rounded) = match n["kind"].as_str().unwrap_or("") {
            "router" => (0xdbe8f7, 8),
            "switch" => (0xe3f1e3, 0),
            "namespace" | "attached" => (0xfbe9cf, 14),
            _ => (0xf2f2f2, 14),
        };
        let look = StyleAttr::new(
            Color::new(0x333333ff),
            1,
            Some(Color::new((fill << 8) | 0xff)),
            rounded,
            14,
        );
        let width = 24.0 + 9.0 * name.chars().count() as f64;
        let e = Element::create(
            ShapeKind::new_box(name),
            look,
            Orientation::LeftToRight,
            Point::new(width.max(50.0), 36.0),
        );
        handles.insert(name.to_string(), vg.add_node(e));
    }
    for link in results["links"].as_array()? {
        let (Some(a), Some(b)) = (node_of(&link["a"]), node_of(&link["b"])) else {
            continue;
        };
        let (Some(&ha), Some(&hb)) = (handles.get(a), handles.get(b)) else {
            continue;
        };
        let color = load_color(load(link, sim_s));
        let look = StyleAttr::new(Color::new((color << 8) | 0xff), 3, None, 0, 11);
        let arrow = Arrow::new(
            LineEndKind::None,
            LineEndKind::None,
            LineStyleKind::Normal,
            &parameters(link),
            &look,
            &None,
            &None,
        );
        vg.add_edge(arrow, ha, hb);
    }
    let mut svg = SVGWriter::new();
    vg.do_it(false, false, false, &mut svg);
    Some(tidy(&svg.finalize()))
}

/// The drawing as it goes into a page, the same for the same network:
/// without its XML declaration (the page is HTML), and with the lines of its
/// style sheet in order (layout-rs writes them in a hash map's order).
fn tidy(svg: &str) -> String {
    let svg = svg.trim_start();
    let svg = match svg.strip_prefix("<?xml") {
        Some(rest) => rest.split_once("?>").map_or(rest, |(_, after)| after),
        None => svg,
    };
    let (Some(start), Some(end)) = (svg.find("<style>"), svg.find("</style>")) else {
        return svg.to_string();
    };
    let body = start + "<style>".len();
    let mut rules: Vec<&str> = svg[body..end]
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    rules.sort_unstable();
    format!("{}\n{}\n{}", &svg[..body], rules.join("\n"), &svg[end..])
}
