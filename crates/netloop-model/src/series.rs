//! Time series of a run: its counters sampled every interval of simulated
//! time and written as the run goes, one JSON object per line (JSON Lines),
//! each line written whole as it is made, so that a run that is killed —
//! SIGKILL included — leaves every sample up to its last interval.
//!
//! The first line is a header: the format's name and version, the
//! interval, the links and flows in the order the samples list them, and
//! the columns. Each further line is a sample at `t_ns`:
//! - `links[l][d]`: link `l`'s direction `d` (0: a → b, 1: b → a), the
//!   columns of [`DIR_COLUMNS`]: counters since the run began, except
//!   `queued_packets`, the queue's length at `t_ns`;
//! - `drops`: per direction with drops so far (`"LINK:a_to_b"`), the
//!   reasons and their counts since the run began;
//! - `flows[f]`: flow `f`, the columns of [`FLOW_COLUMNS`], since the run
//!   began (0 where the flow's kind has no such figure: a TCP flow counts
//!   bytes, not packets);
//! - `realtime` (in real time): the run's own figures so far.
//!
//! Rates over an interval are the differences of two successive lines;
//! the format is documented in `docs/series.md`. Sampling reads counters
//! the model keeps anyway (no percentile of a flow or link is computed), so
//! a 10 000-flow run can be sampled every 100 ms; a real-time run's own
//! block does carry its lateness percentiles.

use std::collections::BTreeMap;
use std::io::Write;

use netloop_core::{SimDuration, SimTime};
use serde::Serialize;

use crate::apps::App;
use crate::build::FlowInfo;
use crate::network::Network;
use crate::share::app;
use crate::stats::DropReason;
use crate::NodeId;

/// The format's name and version, the header's `format`.
pub const FORMAT: &str = "netloop-series/1";

/// The columns of a link direction in a sample.
pub const DIR_COLUMNS: [&str; 7] = [
    "sent_packets",
    "sent_bytes",
    "received_packets",
    "received_bytes",
    "queued_packets",
    "queue_delay_sum_ns",
    "dropped_packets",
];

/// The columns of a flow in a sample.
pub const FLOW_COLUMNS: [&str; 5] = [
    "sent_packets",
    "received_packets",
    "received_bytes",
    "delay_count",
    "delay_sum_ns",
];

#[derive(Serialize)]
struct Header<'a> {
    format: &'static str,
    interval_ns: u64,
    topology: Option<&'a str>,
    seed: u64,
    links: Vec<&'a str>,
    directions: [&'static str; 2],
    dir_columns: [&'static str; 7],
    flows: Vec<&'a str>,
    flow_columns: [&'static str; 5],
}

#[derive(Serialize)]
struct Sample<'a> {
    t_ns: u64,
    links: Vec<[[u64; 7]; 2]>,
    drops: BTreeMap<String, BTreeMap<&'static str, u64>>,
    flows: Vec<[u64; 5]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    realtime: Option<&'a serde_json::Value>,
}

/// Writes a run's time series (see the module docs) to `out`.
pub struct SeriesWriter {
    out: Box<dyn Write + Send>,
    /// The links' names, in the network's order.
    links: Vec<String>,
    interval: SimDuration,
    next: SimTime,
    line: Vec<u8>,
    samples: u64,
    last: Option<SimTime>,
}

impl SeriesWriter {
    /// Starts a series of `net` (and its `flows`) sampled every `interval`
    /// (not zero) into `out`: writes the header, and the first sample is
    /// due at time zero.
    pub fn new(
        mut out: Box<dyn Write + Send>,
        interval: SimDuration,
        net: &Network,
        flows: &[FlowInfo],
        topology: Option<&str>,
    ) -> std::io::Result<SeriesWriter> {
        assert!(interval > SimDuration::ZERO, "a series needs an interval");
        let header = Header {
            format: FORMAT,
            interval_ns: interval.as_nanos(),
            topology,
            seed: net.spec().run.seed,
            links: net.links().iter().map(|l| l.name.as_str()).collect(),
            directions: ["a_to_b", "b_to_a"],
            dir_columns: DIR_COLUMNS,
            flows: flows.iter().map(|f| f.name.as_str()).collect(),
            flow_columns: FLOW_COLUMNS,
        };
        let mut line = serde_json::to_vec(&header).map_err(std::io::Error::other)?;
        line.push(b'\n');
        out.write_all(&line)?;
        out.flush()?;
        Ok(SeriesWriter {
            out,
            links: net.links().iter().map(|l| l.name.clone()).collect(),
            interval,
            next: SimTime::ZERO,
            line,
            samples: 0,
            last: None,
        })
    }

    /// The interval.
    pub fn interval(&self) -> SimDuration {
        self.interval
    }

    /// When the next sample is due.
    pub fn next_at(&self) -> SimTime {
        self.next
    }

    /// When the last sample was taken, if one was.
    pub fn last_at(&self) -> Option<SimTime> {
        self.last
    }

    /// Samples written so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Writes the sample of `net` at `now` (the time it stands at) and sets
    /// the next one an interval after the one due (samples stay on the
    /// interval's grid even when one is taken late). `realtime`: a
    /// real-time run's own figures so far.
    pub fn sample(
        &mut self,
        net: &Network,
        flows: &[FlowInfo],
        now: SimTime,
        realtime: Option<&serde_json::Value>,
    ) -> std::io::Result<()> {
        let counts = SampleCounts::of(net, flows, now, |_| true);
        self.sample_counts(&counts, now, realtime)
    }

    /// [`SeriesWriter::sample`] from counts already read (a run cut into
    /// partitions: the sum of every partition's [`SampleCounts`]).
    pub fn sample_counts(
        &mut self,
        counts: &SampleCounts,
        now: SimTime,
        realtime: Option<&serde_json::Value>,
    ) -> std::io::Result<()> {
        let (dirs, flows) = counts.0.split_at(self.links.len() * 2 * DIR_WIDTH);
        let mut drops = BTreeMap::new();
        let links = self
            .links
            .iter()
            .enumerate()
            .map(|(li, name)| {
                [0, 1].map(|side| {
                    let at = (li * 2 + side) * DIR_WIDTH;
                    let d = &dirs[at..at + DIR_WIDTH];
                    let reasons: BTreeMap<&'static str, u64> = DropReason::ALL
                        .iter()
                        .zip(&d[DIR_COLUMNS.len()..])
                        .filter(|(_, &n)| n > 0)
                        .map(|(r, &n)| (r.as_str(), n))
                        .collect();
                    if !reasons.is_empty() {
                        let dir = if side == 0 { "a_to_b" } else { "b_to_a" };
                        drops.insert(format!("{name}:{dir}"), reasons);
                    }
                    let mut c = [0u64; 7];
                    c.copy_from_slice(&d[..DIR_COLUMNS.len()]);
                    c
                })
            })
            .collect();
        let flows = flows
            .chunks_exact(FLOW_COLUMNS.len())
            .map(|f| {
                let mut c = [0u64; 5];
                c.copy_from_slice(f);
                c
            })
            .collect();
        let sample = Sample {
            t_ns: now.as_nanos(),
            links,
            drops,
            flows,
            realtime,
        };
        self.line.clear();
        serde_json::to_writer(&mut self.line, &sample).map_err(std::io::Error::other)?;
        self.line.push(b'\n');
        // One write of the whole line: a kill between lines leaves whole
        // lines only.
        self.out.write_all(&self.line)?;
        self.out.flush()?;
        self.samples += 1;
        self.last = Some(now);
        while self.next <= now {
            self.next += self.interval;
        }
        Ok(())
    }
}

/// The counters one sample is made of, as one owner holds them: per link
/// direction the [`DIR_COLUMNS`] and then the drops of each
/// [`DropReason`], per flow the [`FLOW_COLUMNS`], back to back. Every
/// figure is a count that its owner alone keeps (a direction's transmitter
/// or receiver half, a flow's sending or receiving end), so the counts of
/// the partitions of a run add up to those of a single run: partitions on
/// threads add them in memory, MPI ranks with a reduction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SampleCounts(pub Vec<u64>);

/// A direction's place in [`SampleCounts`]: its columns and its drop
/// reasons.
const DIR_WIDTH: usize = DIR_COLUMNS.len() + DropReason::ALL.len();

impl SampleCounts {
    /// The counts of `net` at `now` that `owns` says are its own (by node,
    /// as [`crate::share::Share::of`] reads them).
    pub fn of(
        net: &Network,
        flows: &[FlowInfo],
        now: SimTime,
        owns: impl Fn(NodeId) -> bool,
    ) -> SampleCounts {
        let mut v = Vec::with_capacity(
            net.links().len() * 2 * DIR_WIDTH + flows.len() * FLOW_COLUMNS.len(),
        );
        for (li, l) in net.links().iter().enumerate() {
            for side in 0..2 {
                let d = &l.dirs[side];
                let tx = owns(l.ends[side].0);
                // A partition's copy counts only its own halves.
                if !tx && !owns(d.to.0) {
                    v.extend([0; DIR_WIDTH]);
                    continue;
                }
                let s = &d.stats;
                let queued = if tx {
                    net.dir_in_flight(li, side, now).0
                } else {
                    0
                };
                v.extend([
                    s.sent_packets,
                    s.sent_bytes,
                    s.received_packets,
                    s.received_bytes,
                    queued,
                    s.queue_delay_sum_ns,
                    s.drops.total(),
                ]);
                v.extend(DropReason::ALL.iter().map(|&r| s.drops.get(r)));
            }
        }
        for f in flows {
            v.extend(flow_columns(net, f, owns(f.from), owns(f.to)));
        }
        SampleCounts(v)
    }

    /// Adds another owner's counts (of the same network) to these.
    pub fn absorb(&mut self, other: &[u64]) {
        add_counts(&mut self.0, other);
    }
}

/// Adds `other` to `sum` element by element (an empty `sum` takes it
/// whole): the sum of [`SampleCounts`].
pub fn add_counts(sum: &mut Vec<u64>, other: &[u64]) {
    if sum.is_empty() {
        sum.extend_from_slice(other);
        return;
    }
    for (a, b) in sum.iter_mut().zip(other) {
        *a += b;
    }
}

/// A flow's [`FLOW_COLUMNS`] as its two ends count them now, from the
/// ends asked for (`src`, `dst`: the ends this owner holds).
fn flow_columns(net: &Network, f: &FlowInfo, src: bool, dst: bool) -> [u64; 5] {
    let mut c = [0u64; 5];
    let src_app = if src {
        app(net, f.from, f.src_app)
    } else {
        None
    };
    match src_app {
        Some(App::UdpSource(s)) => c[0] = s.sent,
        Some(App::Ping(p)) => {
            // A ping measures both ways itself: its round trips.
            c[0] = p.sent;
            c[1] = p.received;
            c[3] = p.rtt.count;
            c[4] = (p.rtt.mean() * p.rtt.count as f64).round() as u64;
        }
        _ => {}
    }
    let dst_app = if dst {
        f.dst_app.and_then(|d| app(net, f.to, d))
    } else {
        None
    };
    match dst_app {
        Some(App::UdpSink(k)) => {
            let st = &k.stats;
            c[1] = st.received;
            c[2] = st.bytes;
            c[3] = st.delay.count;
            // The exact mean times the count: the sum, to rounding.
            c[4] = (st.delay.mean() * st.delay.count as f64).round() as u64;
        }
        Some(App::TcpServer(s)) => c[2] = s.stats.bytes_received,
        _ => {}
    }
    c
}
