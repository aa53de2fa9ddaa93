//! Traffic applications on simulated hosts: their state and what they measure.
//!
//! Sources live on the sending host, sinks/servers on the receiving host; a
//! flow is the pair, joined by its flow index. How packets are built and
//! sockets driven is the host's business (`host`); this module owns the
//! patterns (when the next packet goes), the measurement (sequence numbers,
//! one-way delay, jitter, RTT, goodput) and their statistics.
//!
//! UDP payloads start with netloop's 20-byte probe header — flow index (u32),
//! sequence number (u64), send time in ns (u64), big-endian — so that the sink
//! measures loss, reordering, duplicates and one-way delay from the packet
//! alone. Jitter is RFC 3550's interarrival jitter estimate (§6.4.1, A.8).

use hdrhistogram::Histogram;
use netloop_core::{RngStream, SimDuration, SimTime};
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;
use smoltcp::iface::SocketHandle;
use std::net::IpAddr;

/// Bytes of netloop's header at the start of every UDP probe payload.
pub const PROBE_HEADER: usize = 20;

/// A distribution of nanosecond samples: exact count, min, max, mean and
/// standard deviation (Welford's algorithm), and percentiles from the
/// buckets of an HdrHistogram with 3 significant digits and a 100 ns floor
/// (percentiles are within max(100 ns, 0.1 %)). The extremes and moments
/// are exact.
///
/// **Counts from the first bucket with a sample to the last.** A dense
/// HdrHistogram holds a count for every bucket from 0 to its largest sample
/// (about 76 KiB at 10 s), allocated, zeroed and copied as it grows, while a
/// flow's delays fill a narrow band of buckets: 50–55 ms is 160 of them,
/// 1.3 KiB. With thousands of flows the dense ones were most of a run's
/// memory (about 88 of the 128 MB of a 10 000-flow dumbbell). The buckets are HdrHistogram's
/// own ([`index`] and [`value_at`] give them, checked against the library),
/// and the percentiles are those a dense histogram of the same samples gives
/// ([`Samples::histogram`] builds one).
///
/// Samples that fall in the bucket of the one before are counted apart and
/// added in one go when one falls elsewhere (`Pending`): a flow's delays
/// mostly repeat a bucket.
#[derive(Clone, Debug)]
pub struct Samples {
    /// Counts of the buckets `first..first + counts.len()`, without the
    /// pending samples.
    counts: Vec<u64>,
    first: usize,
    pending: Pending,
    /// Number of samples.
    pub count: u64,
    /// Exact minimum.
    pub min: u64,
    /// Exact maximum.
    pub max: u64,
    mean: f64,
    m2: f64,
}

/// The histogram whose buckets [`Samples`] count in: HdrHistogram's with 3
/// significant digits and a 100 ns floor. It records nothing; it tells a
/// value's bucket (which does not depend on the largest value a histogram
/// covers, so a dense one of any size agrees).
static BUCKETS: std::sync::LazyLock<Histogram<u32>> = std::sync::LazyLock::new(|| {
    let mut h = Histogram::new_with_bounds(100, 200, 3).expect("valid bounds");
    h.auto(true);
    h
});

/// [`BUCKETS`]'s layout, as HdrHistogram derives it: the unit is 2^6 ns
/// (the power of two at or below the 100 ns floor), and a bucket of 2^11
/// sub-buckets (the power of two at or above 2 × 10^3, for 3 significant
/// digits) whose lower half repeats the bucket below.
const UNIT_MAGNITUDE: u32 = 6;
const SUB_BUCKET_MAGNITUDE: u32 = 11;
const SUB_BUCKET_HALF_MAGNITUDE: u32 = SUB_BUCKET_MAGNITUDE - 1;
const SUB_BUCKET_HALF: u64 = 1 << SUB_BUCKET_HALF_MAGNITUDE;
const SUB_BUCKET_MASK: u64 = ((1 << SUB_BUCKET_MAGNITUDE) - 1) << UNIT_MAGNITUDE;

/// The index of `v`'s bucket in a dense [`BUCKETS`] histogram (its
/// `index_for`, which the library keeps to itself): buckets in order of
/// value, one index each.
fn index(v: u64) -> usize {
    let bucket = 64 - UNIT_MAGNITUDE - SUB_BUCKET_MAGNITUDE - (v | SUB_BUCKET_MASK).leading_zeros();
    let sub = v >> (bucket + UNIT_MAGNITUDE);
    (((u64::from(bucket) + 1) << SUB_BUCKET_HALF_MAGNITUDE) + sub - SUB_BUCKET_HALF) as usize
}

/// The lowest value of the bucket at `index` (the library's `value_for`).
fn value_at(index: usize) -> u64 {
    let i = index as u64;
    let (bucket, sub) = match (i >> SUB_BUCKET_HALF_MAGNITUDE).checked_sub(1) {
        Some(b) => (b, (i & (SUB_BUCKET_HALF - 1)) + SUB_BUCKET_HALF),
        None => (0, i & (SUB_BUCKET_HALF - 1)),
    };
    sub << (bucket + u64::from(UNIT_MAGNITUDE))
}

/// Buckets a presized sample set holds without growing (see
/// [`Samples::presize`]).
const PRESIZED_BUCKETS: usize = 256;

/// Samples recorded but not yet in the counts: `n` of them, all in the
/// bucket `lo..=hi`.
#[derive(Clone, Copy, Debug, Default)]
struct Pending {
    lo: u64,
    hi: u64,
    n: u64,
}

impl Default for Samples {
    fn default() -> Self {
        Samples {
            counts: Vec::new(),
            first: 0,
            pending: Pending::default(),
            count: 0,
            min: u64::MAX,
            max: 0,
            mean: 0.0,
            m2: 0.0,
        }
    }
}

impl Samples {
    /// Adds a sample.
    #[inline]
    pub fn record(&mut self, v: u64) {
        let p = &mut self.pending;
        if p.n > 0 && p.lo <= v && v <= p.hi {
            p.n += 1;
        } else {
            self.flush();
            self.pending = Pending {
                lo: BUCKETS.lowest_equivalent(v),
                hi: BUCKETS.highest_equivalent(v),
                n: 1,
            };
        }
        self.count += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        let d = v as f64 - self.mean;
        self.mean += d / self.count as f64;
        self.m2 += d * (v as f64 - self.mean);
    }

    /// Puts the pending samples into their bucket's count, widening the
    /// counts to reach it.
    fn flush(&mut self) {
        let p = std::mem::take(&mut self.pending);
        if p.n == 0 {
            return;
        }
        let i = index(p.lo);
        if self.counts.is_empty() {
            self.first = i;
        } else if i < self.first {
            // Delays falling bucket by bucket (a queue draining) would move
            // the counts once per sample: widen by as much again as there
            // is, so that a band grown downwards moves O(1) times per bucket.
            let first = i.saturating_sub(self.counts.len());
            self.counts
                .splice(0..0, std::iter::repeat_n(0, self.first - first));
            self.first = first;
        }
        let at = i - self.first;
        if at >= self.counts.len() {
            self.counts.resize(at + 1, 0);
        }
        self.counts[at] += p.n;
    }

    /// The buckets with samples, pending ones included: (the bucket's
    /// highest value, count), by value.
    fn filled(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let p = self.pending;
        let mut pending = (p.n > 0).then(|| (index(p.lo), p.n));
        let mut counted = self
            .counts
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c > 0)
            .map(|(i, &c)| (self.first + i, c))
            .peekable();
        std::iter::from_fn(move || {
            let next = match (counted.peek().copied(), pending) {
                (Some((i, c)), Some((pi, pn))) if i == pi => {
                    counted.next();
                    pending = None;
                    Some((i, c + pn))
                }
                (Some((i, _)), Some((pi, _))) if i > pi => pending.take(),
                (None, Some(_)) => pending.take(),
                _ => counted.next(),
            };
            next.map(|(i, c)| (BUCKETS.highest_equivalent(value_at(i)), c))
        })
    }

    /// A dense HdrHistogram of every sample so far (3 significant digits,
    /// 100 ns floor, counts saturating at `u32::MAX`), for a caller that
    /// wants HdrHistogram's own answers.
    pub fn histogram(&self) -> Histogram<u32> {
        let mut h = Histogram::new_with_bounds(100, 200, 3).expect("valid bounds");
        h.auto(true);
        for (hi, n) in self.filled() {
            // Any value of the bucket lands in it; the auto-resizing
            // histogram fails only past its absolute limit, where
            // saturating at the top is right.
            let n = u32::try_from(n).unwrap_or(u32::MAX);
            if h.record_n(hi, n).is_err() {
                h.saturating_record_n(hi, n);
            }
        }
        h
    }

    /// The values at `quantiles` (ascending, each in 0..=1), exactly as
    /// [`Histogram::value_at_quantiles`] of every sample would give them,
    /// in one pass; 0 for each if there are no samples.
    pub fn quantiles<const N: usize>(&self, quantiles: [f64; N]) -> [u64; N] {
        let mut out = [0u64; N];
        if self.count == 0 {
            return out;
        }
        let mut buckets = self.filled();
        let total = self.count;
        let (mut seen, mut at) = (0u64, 0u64);
        for (o, &q) in out.iter_mut().zip(quantiles.iter()) {
            let target = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
            while seen < target {
                let Some((hi, c)) = buckets.next() else {
                    break;
                };
                seen += c;
                at = hi;
            }
            *o = if q == 0.0 {
                BUCKETS.lowest_equivalent(at)
            } else {
                BUCKETS.highest_equivalent(at)
            };
        }
        out
    }

    /// Makes room now for the band of buckets a flow's samples are likely
    /// to fill ([`PRESIZED_BUCKETS`], 2 KiB), so that a real-time run whose
    /// flows all start together does not grow them in its first
    /// milliseconds (a dense histogram had to cover every value up to 10 s
    /// then: 76 KiB zeroed and copied per flow). A band wider than that
    /// (50 ± 8 ms is about 250 buckets, 1–2 ms about 1 000) still grows
    /// during the run, a few KiB at a time.
    pub fn presize(&mut self) {
        self.counts
            .reserve(PRESIZED_BUCKETS.saturating_sub(self.counts.len()));
    }

    /// Exact mean.
    pub fn mean(&self) -> f64 {
        self.mean
    }
    /// Exact (population) standard deviation.
    pub fn stdev(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            (self.m2 / self.count as f64).sqrt()
        }
    }
}

/// An empty sample set.
pub fn new_histogram() -> Samples {
    Samples::default()
}

/// Writes the probe header into `buf` (at least [`PROBE_HEADER`] bytes);
/// returns the bytes written, [`PROBE_HEADER`].
pub fn write_probe(buf: &mut [u8], flow: u32, seq: u64, sent: SimTime) -> usize {
    buf[0..4].copy_from_slice(&flow.to_be_bytes());
    buf[4..12].copy_from_slice(&seq.to_be_bytes());
    buf[12..20].copy_from_slice(&sent.as_nanos().to_be_bytes());
    PROBE_HEADER
}

/// Reads a probe header: (flow, seq, send time).
pub fn read_probe(buf: &[u8]) -> Option<(u32, u64, SimTime)> {
    if buf.len() < PROBE_HEADER {
        return None;
    }
    let flow = u32::from_be_bytes(buf[0..4].try_into().ok()?);
    let seq = u64::from_be_bytes(buf[4..12].try_into().ok()?);
    let ts = u64::from_be_bytes(buf[12..20].try_into().ok()?);
    Some((flow, seq, SimTime::from_nanos(ts)))
}

/// When a UDP source sends.
#[derive(Clone, Debug)]
pub enum Pattern {
    /// Every `interval`.
    Cbr {
        /// Time between packets.
        interval: SimDuration,
    },
    /// Exponential gaps with mean `mean`.
    Poisson {
        /// Mean gap.
        mean: SimDuration,
    },
    /// Every `interval` while on; on/off periods exponential.
    OnOff {
        /// Time between packets while on.
        interval: SimDuration,
        /// Mean on period.
        on: SimDuration,
        /// Mean off period.
        off: SimDuration,
        /// End of the current on period.
        on_until: SimTime,
    },
}

fn exp_sample(rng: &mut RngStream, mean: SimDuration) -> SimDuration {
    // Inverse transform; 1 - u is in (0, 1] so ln is finite.
    let u = 1.0 - rng.uniform();
    SimDuration::from_secs_f64(-u.ln() * mean.as_secs_f64())
}

/// A UDP traffic source.
///
/// Laid out in declaration order (`repr(C)`): what every tick reads first,
/// its random stream (read only by Poisson and on/off sources, 320 bytes)
/// after it, so that a constant-rate source's tick reads its first
/// `SOURCE_HOT` bytes (96), which the scheduler's hint loads: two or three
/// lines, as its `App` lies in a vector.
#[repr(C)]
pub struct UdpSource {
    /// Flow index.
    pub flow: u32,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Destination address (IPv4 or IPv6).
    pub dst: IpAddr,
    /// UDP payload size.
    pub size: usize,
    /// Sending pattern.
    pub pattern: Pattern,
    /// When to stop.
    pub stop: SimTime,
    /// Packets sent so far (also the next sequence number).
    pub sent: u64,
    /// Random stream (Poisson gaps, on/off periods).
    pub rng: RngStream,
}

/// Bytes from the start of a source that every tick of a constant-rate
/// source reads (all but the random stream).
pub const SOURCE_HOT: usize = std::mem::offset_of!(UdpSource, rng);
// With its `App`'s tag before it, at most two lines' worth of bytes.
const _: () = assert!(App::TIMER_HINT_BYTES <= 128);

impl UdpSource {
    /// Called when the source's timer fires at `now`: whether to send now, and
    /// when to wake next (None = done).
    pub fn tick(&mut self, now: SimTime) -> (bool, Option<SimTime>) {
        if now >= self.stop {
            return (false, None);
        }
        let (send, next) = match &mut self.pattern {
            Pattern::Cbr { interval } => (true, now + *interval),
            Pattern::Poisson { mean } => {
                let gap = exp_sample(&mut self.rng, *mean);
                (true, now + gap)
            }
            Pattern::OnOff {
                interval,
                on,
                off,
                on_until,
            } => {
                if *on_until == SimTime::ZERO {
                    // First tick: start an on period.
                    *on_until = now + exp_sample(&mut self.rng, *on);
                }
                if now < *on_until {
                    (true, now + *interval)
                } else {
                    // Off for an exponential period, then on again.
                    let wake = now + exp_sample(&mut self.rng, *off);
                    let on_len = exp_sample(&mut self.rng, *on);
                    *on_until = wake + on_len.max(SimDuration::from_nanos(1));
                    (false, wake)
                }
            }
        };
        (send, (next < self.stop).then_some(next))
    }
}

/// What a UDP sink measured.
#[derive(Clone, Debug)]
pub struct SinkStats {
    /// Unique packets received.
    pub received: u64,
    /// Payload bytes of unique packets received.
    pub bytes: u64,
    /// Packets received more than once.
    pub duplicates: u64,
    /// Packets that arrived after one with a higher sequence number.
    pub reordered: u64,
    /// One-way delays in ns.
    pub delay: Samples,
    /// RFC 3550 interarrival jitter, ns.
    pub jitter_ns: f64,
    last_transit: Option<i128>,
    highest: Option<u64>,
    seen: Seen,
    /// First and last arrival.
    pub first_rx: Option<SimTime>,
    /// Last arrival.
    pub last_rx: Option<SimTime>,
}

impl Default for SinkStats {
    fn default() -> Self {
        SinkStats {
            received: 0,
            bytes: 0,
            duplicates: 0,
            reordered: 0,
            delay: Samples::default(),
            jitter_ns: 0.0,
            last_transit: None,
            highest: None,
            seen: Seen::default(),
            first_rx: None,
            last_rx: None,
        }
    }
}

/// Sequence numbers beyond this are not tracked for duplicates (bounds the
/// bitmap at 16 MiB per flow).
const MAX_TRACKED_SEQ: u64 = 1 << 27;

/// Which sequence numbers (below [`MAX_TRACKED_SEQ`]) a sink has seen, a
/// bit each: the 128 from `base` in the sink's own memory, the earlier ones
/// in `older`. A flow's packets arrive near its highest sequence number, so
/// they find their bit in `window`, beside the sink's other counters: with
/// one vector for all of them each packet read a line of its own, and with
/// thousands of flows that line was a cache miss per packet (that one
/// load was 2.3 % of the 10 000-flow dumbbell's run, by `perf`). The
/// window moves a word at a time, so `older` is written once per 64
/// sequence numbers.
#[derive(Clone, Debug, Default)]
struct Seen {
    /// The sequence number of `window[0]`'s bit 0 (a multiple of 64);
    /// `older` has a word for every 64 below it.
    base: u64,
    window: [u64; 2],
    older: Vec<u64>,
}

impl Seen {
    /// Marks `seq` seen; false if it had been.
    #[inline]
    fn insert(&mut self, seq: u64) -> bool {
        if seq >= self.base + 128 {
            self.advance(seq);
        }
        let word = if seq >= self.base {
            &mut self.window[((seq - self.base) / 64) as usize]
        } else {
            &mut self.older[(seq / 64) as usize]
        };
        let bit = 1 << (seq % 64);
        let fresh = *word & bit == 0;
        *word |= bit;
        fresh
    }

    /// Moves the window on until it holds `seq`, in its upper word (the
    /// lower keeps the 64 before it).
    #[cold]
    fn advance(&mut self, seq: u64) {
        let base = (seq / 64 - 1) * 64;
        let words = ((base - self.base) / 64) as usize;
        // Each word the window leaves goes to `older`, and the words it
        // skips are zeros.
        let [lo, hi] = self.window;
        self.older.push(lo);
        if words >= 2 {
            self.older.push(hi);
            self.older.resize(self.older.len() + words - 2, 0);
            self.window = [0, 0];
        } else {
            self.window = [hi, 0];
        }
        self.base = base;
        debug_assert_eq!(self.older.len() as u64 * 64, self.base);
    }
}

impl SinkStats {
    /// Records a probe with sequence `seq` sent at `sent`, of `len` payload
    /// bytes, received at `now`.
    pub fn record(&mut self, seq: u64, sent: SimTime, len: usize, now: SimTime) {
        if seq < MAX_TRACKED_SEQ && !self.seen.insert(seq) {
            self.duplicates += 1;
            return;
        }
        self.received += 1;
        self.bytes += len as u64;
        match self.highest {
            Some(h) if seq < h => self.reordered += 1,
            _ => self.highest = Some(seq),
        }
        let transit = now.as_nanos() as i128 - sent.as_nanos() as i128;
        self.delay.record(transit.max(0) as u64);
        if let Some(prev) = self.last_transit {
            let d = (transit - prev).abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.last_transit = Some(transit);
        self.first_rx.get_or_insert(now);
        self.last_rx = Some(now);
    }
}

impl App {
    /// Bytes from an application's start that the scheduler's hint loads
    /// before its timer: its tag and what a constant-rate source's tick
    /// reads.
    pub const TIMER_HINT_BYTES: usize = std::mem::align_of::<UdpSource>() + SOURCE_HOT;
    /// The same before a frame to it arrives: its tag and all of a sink,
    /// whose every field a datagram's statistics touch.
    pub const FRAME_HINT_BYTES: usize =
        std::mem::align_of::<UdpSink>() + std::mem::size_of::<UdpSink>();

    /// The app's sample sets that it records into (see
    /// [`Samples::presize`]): a bulk TCP client and every server record
    /// none.
    pub fn samples_mut(&mut self) -> Vec<&mut Samples> {
        match self {
            App::UdpSink(s) => vec![&mut s.stats.delay],
            App::Ping(p) => vec![&mut p.rtt],
            App::TcpClient(c) if matches!(c.mode, TcpMode::Rr { .. }) => {
                vec![&mut c.stats.latency]
            }
            App::TcpClient(_)
            | App::TcpServer(_)
            | App::UdpSource(_)
            | App::Traceroute(_)
            | App::Endpoint(_) => vec![],
        }
    }
}

/// A UDP sink.
pub struct UdpSink {
    /// Flow index.
    pub flow: u32,
    /// Measurements.
    pub stats: SinkStats,
}

/// An ICMP echo (ping) source.
pub struct Ping {
    /// Flow index.
    pub flow: u32,
    /// Destination: ICMP echo to an IPv4 one, ICMPv6 echo to an IPv6 one.
    pub dst: std::net::IpAddr,
    /// ICMP identifier.
    pub ident: u16,
    /// Time between requests.
    pub interval: SimDuration,
    /// ICMP payload size.
    pub size: usize,
    /// When to stop sending.
    pub stop: SimTime,
    /// Requests sent.
    pub sent: u64,
    /// Replies received.
    pub received: u64,
    /// Outstanding requests: sequence number → send time.
    pub outstanding: HashMap<u16, SimTime>,
    /// Round-trip times in ns.
    pub rtt: Samples,
}

/// One hop found by a traceroute.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Hop {
    /// The TTL of the probe.
    pub ttl: u8,
    /// Who answered; `None` if nobody did before the timeout.
    pub address: Option<IpAddr>,
    /// Round-trip time in ns.
    pub rtt_ns: Option<u64>,
}

/// A UDP traceroute: one probe per TTL until the destination answers.
pub struct Traceroute {
    /// Flow index.
    pub flow: u32,
    /// Destination (IPv4 or IPv6).
    pub dst: IpAddr,
    /// Source port (identifies our probes in ICMP errors).
    pub src_port: u16,
    /// Largest TTL.
    pub max_hops: u8,
    /// TTL of the probe in flight (0 before the first).
    pub ttl: u8,
    /// When the probe in flight was sent.
    pub probe_sent: SimTime,
    /// How long to wait for an answer.
    pub timeout: SimDuration,
    /// Hops found so far.
    pub hops: Vec<Hop>,
    /// Whether the destination answered (or max hops reached).
    pub done: bool,
}

/// What a TCP flow does.
#[derive(Clone, Debug)]
pub enum TcpMode {
    /// Send `bytes` (or until stop).
    Bulk {
        /// Total to send; `None` = until the flow's stop time.
        bytes: Option<u64>,
    },
    /// Request/response transactions.
    Rr {
        /// Request size.
        request: u64,
        /// Response size.
        response: u64,
        /// Time between request starts; `None` = back-to-back.
        interval: Option<SimDuration>,
    },
}

/// What a TCP flow measured.
#[derive(Clone, Debug)]
pub struct TcpStats {
    /// Payload bytes sent by the client (written into the socket).
    pub bytes_sent: u64,
    /// Payload bytes received by the server (bulk) or client (responses).
    pub bytes_received: u64,
    /// When the connection was opened.
    pub started: Option<SimTime>,
    /// When the first payload byte arrived at the receiver.
    pub first_rx: Option<SimTime>,
    /// When the last payload byte arrived.
    pub last_rx: Option<SimTime>,
    /// When the transfer completed (bulk with a size).
    pub completed: Option<SimTime>,
    /// Completed transactions (request/response).
    pub transactions: u64,
    /// Transaction latencies in ns.
    pub latency: Samples,
}

impl Default for TcpStats {
    fn default() -> Self {
        TcpStats {
            bytes_sent: 0,
            bytes_received: 0,
            started: None,
            first_rx: None,
            last_rx: None,
            completed: None,
            transactions: 0,
            latency: new_histogram(),
        }
    }
}

/// The connecting side of a TCP flow.
pub struct TcpClient {
    /// Flow index.
    pub flow: u32,
    /// The smoltcp socket.
    pub handle: SocketHandle,
    /// Server address (IPv4 or IPv6).
    pub dst: IpAddr,
    /// Server port.
    pub dst_port: u16,
    /// Local port.
    pub src_port: u16,
    /// What to do.
    pub mode: TcpMode,
    /// When to stop sending.
    pub stop: SimTime,
    /// Whether `connect` was called.
    pub connected: bool,
    /// Request/response: bytes of the current request still to write.
    pub req_left: u64,
    /// Request/response: bytes of the current response still to read.
    pub resp_left: u64,
    /// Request/response: when the current transaction started.
    pub txn_start: Option<SimTime>,
    /// Request/response: when the next transaction may start.
    pub next_txn: SimTime,
    /// Whether the client has closed its side.
    pub closed: bool,
    /// Measurements.
    pub stats: TcpStats,
}

/// The accepting side of a TCP flow.
pub struct TcpServer {
    /// Flow index.
    pub flow: u32,
    /// The smoltcp socket.
    pub handle: SocketHandle,
    /// Listening port.
    pub port: u16,
    /// What the flow does.
    pub mode: TcpMode,
    /// Request/response: request bytes still to read for the current request.
    pub req_left: u64,
    /// Request/response: response bytes still to write.
    pub resp_left: u64,
    /// Bulk: bytes expected in total, if known.
    pub expect: Option<u64>,
    /// Measurements (bulk transfers are measured here).
    pub stats: TcpStats,
}

/// An application on a host.
///
/// Its tag first (`repr(u8)`), each variant after it at its own
/// alignment: where a source's and a sink's fields lie is then known to
/// the scheduler's hint (`TIMER_HINT_BYTES`, `FRAME_HINT_BYTES`); left to
/// the compiler, a sink came 48 bytes in, after the source's field that
/// held the tag.
#[repr(u8)]
pub enum App {
    /// UDP source.
    UdpSource(UdpSource),
    /// UDP sink.
    UdpSink(UdpSink),
    /// Ping.
    Ping(Ping),
    /// Traceroute.
    Traceroute(Traceroute),
    /// TCP client.
    TcpClient(TcpClient),
    /// TCP server.
    TcpServer(TcpServer),
    /// A message endpoint (co-simulation, Python).
    Endpoint(MessageEndpoint),
}

/// Messages an endpoint holds for its reader at most: past it, arriving
/// datagrams are dropped (`inbox_full`). A reader that drains it after
/// every step never comes near; one that never reads is not allowed to
/// grow the process without bound.
pub const ENDPOINT_INBOX: usize = 65_536;

/// The largest message a UDP endpoint sends: the largest UDP payload in an
/// IPv4 datagram (65 535 − 20 − 8).
pub const MAX_MESSAGE: usize = 65_507;

/// A message endpoint: a socket on a simulated host that the world outside
/// the model (a HELICS federation, a Python script) sends from and reads
/// from. Over UDP one message is one datagram, which the host fragments if
/// it is larger than the path MTU; over TCP, a length-prefixed record on a
/// connection ([`crate::msgtcp`]).
pub struct MessageEndpoint {
    /// Index in the spec's endpoints.
    pub index: usize,
    /// Its port (UDP, or the TCP port it listens on).
    pub port: u16,
    /// Its connections if it is a TCP endpoint; `None` for UDP.
    pub tcp: Option<Box<crate::msgtcp::TcpTransport>>,
    /// Where a message goes unless its send names a destination.
    pub to: Option<std::net::SocketAddr>,
    /// Messages that arrived and were not read yet, oldest first.
    pub inbox: std::collections::VecDeque<Message>,
    /// Counters.
    pub stats: EndpointStats,
}

impl MessageEndpoint {
    /// Takes the oldest message that arrived, counting it as read.
    pub fn take(&mut self) -> Option<Message> {
        let m = self.inbox.pop_front()?;
        self.stats.read += 1;
        Some(m)
    }
}

/// A message that reached an endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// When its last bit (its last fragment) arrived.
    pub at: SimTime,
    /// The address and port it came from.
    pub from: std::net::SocketAddr,
    /// Its bytes (the datagram's payload).
    pub data: Vec<u8>,
}

/// What an endpoint sent and received. Messages it sent that are neither
/// refused here nor received at the far end were lost in the network (each
/// frame's fate is in the run's ledger) or are still on their way.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct EndpointStats {
    /// Messages sent into the network.
    pub sent: u64,
    /// Their payload bytes.
    pub sent_bytes: u64,
    /// Messages received (each a whole datagram with a good checksum).
    pub received: u64,
    /// Their payload bytes.
    pub received_bytes: u64,
    /// Messages read from the inbox by its reader.
    pub read: u64,
    /// Sends refused: larger than [`MAX_MESSAGE`] (UDP) or
    /// [`crate::msgtcp::MAX_TCP_MESSAGE`] (TCP).
    pub refused_too_large: u64,
    /// Sends refused: the host has no route to the destination.
    pub refused_no_route: u64,
    /// Sends refused: no destination given and none configured.
    pub refused_no_destination: u64,
    /// Datagrams dropped at arrival: their UDP checksum did not verify
    /// (corrupted on a link).
    pub bad_checksum: u64,
    /// Datagrams dropped at arrival: the inbox held [`ENDPOINT_INBOX`]
    /// messages. (A TCP endpoint stops reading instead.)
    pub inbox_full: u64,
    /// TCP: connections it opened to send.
    #[serde(default)]
    pub connections_opened: u64,
    /// TCP: connections its listening port accepted.
    #[serde(default)]
    pub connections_accepted: u64,
    /// TCP: messages sent that the peer's TCP had not acknowledged when
    /// their connection ended (refused, reset, or given up after
    /// [`crate::msgtcp::GIVE_UP`]).
    #[serde(default)]
    pub lost_connection: u64,
    /// TCP: connections that ended in the middle of a message (its start
    /// was received, its end never came).
    #[serde(default)]
    pub truncated: u64,
    /// TCP: connections reset because what came on them was not
    /// length-prefixed messages (a length past the largest).
    #[serde(default)]
    pub bad_stream: u64,
    /// TCP: sends refused because the connection already held
    /// [`crate::msgtcp::MAX_PENDING`] bytes not yet taken by its socket.
    #[serde(default)]
    pub refused_backlog: u64,
}

/// Why an endpoint refused to send a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SendRefused {
    /// Larger than the endpoint's transport carries in one message.
    #[error(
        "{size} bytes is more than {} (at most {max})",
        if *max == MAX_MESSAGE { "a UDP datagram carries" } else { "a TCP endpoint's message" }
    )]
    TooLarge {
        /// The message's size.
        size: usize,
        /// The largest the endpoint sends.
        max: usize,
    },
    /// A TCP connection already holds this many bytes waiting to be sent.
    #[error("the connection already holds {0} bytes not yet sent (the peer is not reading, or the path is slower than the sends)")]
    Backlog(usize),
    /// No route from the host to the destination.
    #[error("the host has no route to {0}")]
    NoRoute(std::net::IpAddr),
    /// Neither the send nor the endpoint names a destination.
    #[error("no destination: the send names none and the endpoint has no 'to'")]
    NoDestination,
    /// The node or application is not a message endpoint.
    #[error("not a message endpoint")]
    NotAnEndpoint,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The buckets' indexes and lowest values are HdrHistogram's: every
    /// value to 2^20 ns, and around every power of two and random values
    /// up to the largest, land in the bucket the library gives them, in
    /// order, each bucket one index after the one below.
    #[test]
    fn bucket_indexes_are_the_librarys() {
        let check = |v: u64| {
            let lo = BUCKETS.lowest_equivalent(v);
            assert_eq!(value_at(index(v)), lo, "value {v}");
            assert_eq!(index(lo), index(v), "value {v}");
            if lo > 0 {
                assert_eq!(index(lo - 1) + 1, index(lo), "below {v}");
            }
        };
        (0..1 << 20).for_each(check);
        for shift in 20..63 {
            let p = 1u64 << shift;
            for v in [p - 1, p, p + 1, p + p / 3] {
                check(v);
            }
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            check(x >> (x % 40));
        }
    }

    /// A sink tells duplicates as one bitmap of every sequence number
    /// would: in order, late by a little and by a lot, jumps forward past
    /// the window (by one word, two, many), and each sequence again.
    #[test]
    fn seen_sequences_match_one_bitmap() {
        let mut seen = Seen::default();
        let mut all = vec![false; 1 << 16];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut top = 0u64;
        let mut duplicates = 0;
        for _ in 0..60_000 {
            let r = next();
            let seq = match r % 10 {
                0 => r / 10 % (top + 1),               // anywhere before
                1 => top.saturating_sub(r / 10 % 200), // a little late
                2 => top + 60 + r / 10 % 200,          // a jump
                3 if r % 1000 == 3 => top + 5_000,     // a long jump
                _ => top + 1,                          // in order
            }
            .min(all.len() as u64 - 1);
            top = top.max(seq);
            let fresh = seen.insert(seq);
            assert_eq!(fresh, !all[seq as usize], "sequence {seq}");
            duplicates += u32::from(!fresh);
            all[seq as usize] = true;
        }
        assert!(duplicates > 1_000, "the walk repeats itself: {duplicates}");
        assert!(seen.older.len() > 100, "the window moved");
    }

    /// A presized sample set takes a band of buckets without growing
    /// (growing is what a real-time run must not do in its first
    /// milliseconds), keeps what it held, and still grows past the band.
    #[test]
    fn presized_samples_take_a_band_of_buckets_without_growing() {
        let mut s = Samples::default();
        s.record(50_000_000);
        s.presize();
        let room = s.counts.capacity();
        assert!(room >= PRESIZED_BUCKETS, "{room}");
        // 50 to 58 ms: buckets of 32 µs, 250 of them.
        for i in 1..250u64 {
            s.record(50_000_000 + 32_768 * i);
        }
        s.flush();
        assert_eq!(s.counts.len(), 250);
        assert_eq!(s.counts.capacity(), room, "no growth");
        assert_eq!(s.count, 250);
        // The median, the 125th sample, to 3 significant digits.
        let [p50] = s.quantiles([0.5]);
        assert!(p50.abs_diff(50_000_000 + 32_768 * 124) <= 50_000, "{p50}");
        s.record(9_000_000_000);
        s.flush();
        assert!(s.counts.capacity() > room, "past the band it grows");
        assert_eq!(s.histogram().len(), 251, "and keeps every sample");
    }

    /// Delays that fall bucket by bucket (a queue draining) widen the band
    /// downwards in steps that double, not once per sample.
    #[test]
    fn a_falling_band_widens_in_doubling_steps() {
        let mut s = Samples::default();
        let (mut moves, mut first) = (0, usize::MAX);
        for k in 0..2_000u64 {
            s.record(120_000_000 - 33_000 * k);
            s.flush();
            if s.first != first {
                moves += 1;
                first = s.first;
            }
        }
        assert!(moves < 15, "{moves} widenings for 2 000 falling buckets");
        let [lo, hi] = s.quantiles([0.0, 1.0]);
        assert_eq!(lo, BUCKETS.lowest_equivalent(120_000_000 - 33_000 * 1_999));
        assert_eq!(hi, BUCKETS.highest_equivalent(120_000_000));
    }

    /// A sample set holds counts from its lowest bucket with a sample to its
    /// highest, not from zero: a band of delays costs its own width.
    #[test]
    fn a_sample_set_counts_only_its_band() {
        let mut s = Samples::default();
        for v in [20_000_000, 20_000_001, 21_000_000, 20_000_000] {
            s.record(v);
        }
        s.flush();
        // 20 to 21 ms in buckets of 16 µs.
        assert_eq!(s.counts.len(), 1_000_000 / 16_384 + 1);
        let dense = s.histogram();
        assert_eq!(dense.len(), 4);
        assert!(
            dense.distinct_values() > 10_000,
            "{}",
            dense.distinct_values()
        );
        // A sample below the band widens it downwards, keeping the counts.
        s.record(10_000_000);
        s.flush();
        assert_eq!(s.histogram().len(), 5);
        assert_eq!(
            s.quantiles([0.0, 1.0]),
            [
                BUCKETS.lowest_equivalent(10_000_000),
                BUCKETS.highest_equivalent(21_000_000)
            ]
        );
    }

    /// Samples counted apart while they repeat a bucket answer every
    /// quantile as a histogram given each sample at once does, pending or
    /// flushed, over runs of repeats, spread, growth and extremes.
    #[test]
    fn pending_samples_give_the_quantiles_of_a_plain_histogram() {
        let qs = [0.0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for case in 0..60 {
            let mut s = Samples::default();
            let mut plain = Histogram::<u32>::new_with_bounds(100, 200, 3).unwrap();
            plain.auto(true);
            let n = [1, 2, 3, 10, 1000, 20_000][case % 6];
            let mut v = 20_000_000u64;
            for _ in 0..n {
                v = match next() % 10 {
                    // Mostly the same bucket (a steady path), or near it.
                    0..=5 => v,
                    6..=7 => v + next() % 2_000,
                    8 => next() % 60_000_000_000,
                    _ => next() % 300,
                };
                s.record(v);
                plain.record(v).unwrap();
                if case % 3 == 0 {
                    let want: Vec<u64> = plain.value_at_quantiles(qs).collect();
                    assert_eq!(s.quantiles(qs).to_vec(), want, "case {case}, pending");
                }
            }
            let want: Vec<u64> = plain.value_at_quantiles(qs).collect();
            assert_eq!(s.quantiles(qs).to_vec(), want, "case {case}");
            assert_eq!(s.histogram().len(), plain.len());
            assert_eq!(s.quantiles(qs).to_vec(), want, "case {case}, flushed");
        }
        assert_eq!(Samples::default().quantiles([0.5]), [0]);
    }

    #[test]
    fn probe_header_round_trips() {
        let mut b = [0u8; 32];
        write_probe(&mut b, 7, 1 << 40, SimTime::from_nanos(123_456_789));
        assert_eq!(
            read_probe(&b),
            Some((7, 1 << 40, SimTime::from_nanos(123_456_789)))
        );
        assert_eq!(read_probe(&b[..19]), None);
    }

    #[test]
    fn sink_counts_duplicates_reordering_and_jitter() {
        let mut s = SinkStats::default();
        let ms = |n: u64| SimTime::from_nanos(n * 1_000_000);
        s.record(0, ms(0), 100, ms(10));
        s.record(2, ms(2), 100, ms(14)); // transit 12 ms
        s.record(1, ms(1), 100, ms(15)); // reordered, transit 14 ms
        s.record(1, ms(1), 100, ms(16)); // duplicate
        assert_eq!(
            (s.received, s.duplicates, s.reordered, s.bytes),
            (3, 1, 1, 300)
        );
        // J = 0 + (2ms - 0)/16, then + (2ms - J)/16.
        let j1 = 2e6 / 16.0;
        let j2 = j1 + (2e6 - j1) / 16.0;
        assert!((s.jitter_ns - j2).abs() < 1e-6);
        assert_eq!((s.delay.min, s.delay.max), (10_000_000, 14_000_000));
    }

    /// A source of 100-byte datagrams every millisecond until `stop`.
    fn cbr_source(stop: SimTime) -> UdpSource {
        UdpSource {
            flow: 0,
            dst: std::net::Ipv4Addr::new(198, 18, 0, 1).into(),
            src_port: 1,
            dst_port: 2,
            size: 100,
            pattern: Pattern::Cbr {
                interval: SimDuration::from_millis(1),
            },
            rng: RngStream::new(1, "t"),
            stop,
            sent: 0,
        }
    }

    /// A source's tick and a sink's datagram read fields within the bytes
    /// the scheduler's hint loads from the start of their `App`
    /// (`TIMER_HINT_BYTES`, `FRAME_HINT_BYTES`): the source's fields come
    /// before its random stream, and each lies at its `App`'s start.
    #[test]
    fn hot_fields_are_in_the_hinted_bytes() {
        let at = |app: &App, field: *const u8, len: usize| {
            (field as usize) + len - (app as *const App as usize)
        };
        let app = App::UdpSource(cbr_source(SimTime::ZERO));
        let App::UdpSource(s) = &app else {
            unreachable!()
        };
        let ends = [
            at(&app, (&s.flow as *const u32).cast(), 4),
            at(&app, (&s.src_port as *const u16).cast(), 2),
            at(&app, (&s.dst_port as *const u16).cast(), 2),
            at(
                &app,
                (&s.dst as *const IpAddr).cast(),
                std::mem::size_of::<IpAddr>(),
            ),
            at(&app, (&s.size as *const usize).cast(), 8),
            at(
                &app,
                (&s.pattern as *const Pattern).cast(),
                std::mem::size_of::<Pattern>(),
            ),
            at(&app, (&s.stop as *const SimTime).cast(), 8),
            at(&app, (&s.sent as *const u64).cast(), 8),
        ];
        let end = ends.into_iter().max().unwrap();
        assert!(
            end <= App::TIMER_HINT_BYTES,
            "a source's tick reads to byte {end}, past the hint's {}",
            App::TIMER_HINT_BYTES
        );
        let app = App::UdpSink(UdpSink {
            flow: 0,
            stats: SinkStats::default(),
        });
        let App::UdpSink(k) = &app else {
            unreachable!()
        };
        let end = at(
            &app,
            (k as *const UdpSink).cast(),
            std::mem::size_of::<UdpSink>(),
        );
        assert!(
            end <= App::FRAME_HINT_BYTES,
            "a sink ends at byte {end}, past the hint's {}",
            App::FRAME_HINT_BYTES
        );
    }

    #[test]
    fn cbr_ticks_every_interval_until_stop() {
        let mut src = cbr_source(SimTime::from_nanos(3_000_000));
        let mut t = SimTime::ZERO;
        let mut sends = 0;
        loop {
            let (send, next) = src.tick(t);
            sends += send as u32;
            match next {
                Some(n) => t = n,
                None => break,
            }
        }
        assert_eq!(sends, 3);
    }
}
