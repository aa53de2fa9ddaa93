//! A run as one self-contained HTML page (`netloop report`): whether it
//! kept up with real time, the topology drawn with its links coloured by
//! load, the links' and flows' figures, the time series of a run made with
//! `--stats-interval` plotted, drops by reason and the real-time lateness.
//!
//! This crate owns reading a results document (docs/results-schema.md) and
//! its series file (docs/series.md) and turning them into HTML. Everything
//! is inline — CSS and SVG, no script, no font, no request — so the file
//! opens offline, from anywhere, in any browser. Plots are drawn by
//! `plotters` and the topology laid out by `layout-rs`; this crate chooses
//! what to show.

mod html;
mod inputs;
mod plots;
mod topology;

pub use inputs::{load, Inputs, Series};

/// The page for `inputs`.
pub fn render(inputs: &Inputs) -> anyhow::Result<String> {
    html::page(inputs)
}
