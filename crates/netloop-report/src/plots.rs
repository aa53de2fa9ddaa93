//! Charts as SVG text, drawn by plotters: lines over simulated time, and
//! horizontal bars.

use anyhow::{anyhow, Result};
use plotters::prelude::*;

const WIDTH: u32 = 900;

/// One line of a chart: its name and its points (x, y).
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A chart of `lines` against simulated seconds.
pub fn lines(title: &str, y_label: &str, lines: &[Line]) -> Result<String> {
    let mut svg = String::new();
    let x_max = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let y_max = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.08 } else { 1.0 };
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 340)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..x_max, 0f64..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("simulated time (s)")
            .y_desc(y_label)
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        for (i, line) in lines.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    line.points.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(err)?
                .label(line.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
        }
        if lines.len() > 1 || lines.first().is_some_and(|l| !l.name.is_empty()) {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(RGBColor(180, 180, 180))
                .draw()
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Horizontal bars, one per (label, value), with the value written beside
/// each.
pub fn bars(title: &str, x_label: &str, bars: &[(String, f64)], unit: &str) -> Result<String> {
    let mut svg = String::new();
    let height = 70 + 28 * bars.len().max(1) as u32;
    let x_max = bars.iter().map(|b| b.1).fold(0.0f64, f64::max);
    let x_max = if x_max > 0.0 { x_max * 1.25 } else { 1.0 };
    let n = bars.len().max(1) as i32;
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let label_width = bars
            .iter()
            .map(|b| b.0.chars().count() as u32 * 8 + 16)
            .max()
            .unwrap_or(60)
            .clamp(60, 320);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(label_width)
            .build_cartesian_2d(0f64..x_max, (0..n).into_segmented())
            .map_err(err)?;
        let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc(x_label)
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => usize::try_from(n - 1 - *i)
                    .ok()
                    .and_then(|k| labels.get(k))
                    .cloned()
                    .unwrap_or_default(),
                _ => String::new(),
            })
            .y_labels(bars.len().max(1))
            .draw()
            .map_err(err)?;
        let color = RGBColor(70, 110, 180);
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                // The first bar at the top.
                let i = n - 1 - i as i32;
                Rectangle::new(
                    [
                        (0.0, SegmentValue::Exact(i)),
                        (b.1, SegmentValue::Exact(i + 1)),
                    ],
                    color.filled(),
                )
            }))
            .map_err(err)?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                Text::new(
                    format!(" {}{unit}", human(b.1)),
                    (b.1, SegmentValue::CenterOf(n - 1 - i as i32)),
                    ("sans-serif", 13),
                )
            }))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Vertical bars of counts, one per (label, count) in order, on a
/// logarithmic count axis (a histogram whose buckets hold from one to
/// millions), each count written above its bar.
pub fn histogram(title: &str, x_label: &str, buckets: &[(String, u64)]) -> Result<String> {
    let mut svg = String::new();
    let n = buckets.len().max(1) as i32;
    let y_max = buckets.iter().map(|b| b.1).max().unwrap_or(1).max(1) as f64 * 3.0;
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 360)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(56)
            .y_label_area_size(70)
            .build_cartesian_2d((0..n).into_segmented(), (0.5f64..y_max).log_scale())
            .map_err(err)?;
        let labels: Vec<String> = buckets.iter().map(|b| b.0.clone()).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc(x_label)
            .y_desc("events (log scale)")
            .label_style(("sans-serif", 12))
            .axis_desc_style(("sans-serif", 14))
            .x_labels(buckets.len().max(1))
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => usize::try_from(*i)
                    .ok()
                    .and_then(|k| labels.get(k))
                    .cloned()
                    .unwrap_or_default(),
                _ => String::new(),
            })
            .y_label_formatter(&|v| human(*v))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        // Only the buckets that hold events have a bar (a log axis has no
        // zero).
        let filled: Vec<(i32, f64)> = buckets
            .iter()
            .enumerate()
            .filter(|b| b.1 .1 > 0)
            .map(|(i, b)| (i as i32, b.1 as f64))
            .collect();
        let color = RGBColor(70, 110, 180);
        chart
            .draw_series(filled.iter().map(|&(i, n)| {
                Rectangle::new(
                    [
                        (SegmentValue::Exact(i), 0.5),
                        (SegmentValue::Exact(i + 1), n),
                    ],
                    color.filled(),
                )
            }))
            .map_err(err)?;
        chart
            .draw_series(filled.iter().map(|&(i, n)| {
                Text::new(
                    human(n),
                    (SegmentValue::CenterOf(i), n * 1.15),
                    ("sans-serif", 11),
                )
            }))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// A number as people read it: 3 significant digits, k/M/G for large ones.
pub fn human(v: f64) -> String {
    let (v, suffix) = match v.abs() {
        a if a >= 1e9 => (v / 1e9, " G"),
        a if a >= 1e6 => (v / 1e6, " M"),
        a if a >= 1e4 => (v / 1e3, " k"),
        _ => (v, ""),
    };
    let digits = if v.abs() >= 100.0 || v == v.trunc() {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$}{suffix}")
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing a chart: {e}")
}
