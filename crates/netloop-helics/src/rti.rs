//! The federates of the RTI benchmark (`bench/run --only rti`): a sender
//! and a returnee exchanging messages, measured the way the HLA RTI
//! benchmarks of the seeds (003) measure RTIs: round-trip latency and its
//! achieved rate, and one-way throughput at the sender and at the receiver.
//!
//! They are written against HELICS's C API (through [`Federate`]) so that
//! what is measured is HELICS and netloop, not an interpreter's loop. The
//! same two federates run on HELICS alone (the sender's endpoint `snd{i}`
//! sends to the returnee's `ret{i}`) and through netloop (the sender sends
//! to netloop's endpoint instead, which carries the message across the
//! simulated network to the returnee and back): the returnee answers every
//! message to where it came from, so it is the same program in both.
//!
//! Time: the sender stamps each message with its current HELICS time and
//! asks to advance as far as the message's deadline; it is granted
//! earlier, at the time the echo arrives. So the simulated round trip of
//! each message (the network's delay, exact) is known beside its wall-clock
//! round trip. A message whose echo has not come by the deadline is counted
//! lost (in simulated time: deterministic).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::api::{Helics, TIME_MAXTIME};
use crate::federate::{Federate, HelicsError, Settings};

/// Which experiment the sender runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Test {
    /// One message per endpoint, then wait for every echo; again.
    RoundTrip,
    /// Every message sent at once (stamped `spacing` apart); the receiver
    /// counts them.
    Throughput,
}

/// What the sender does.
#[derive(Clone, Debug)]
pub struct SenderPlan {
    /// The experiment.
    pub test: Test,
    /// Bytes per message (at least 8: a sequence number leads each), or
    /// per value when the messages carry values (`shape.values`).
    pub payload: usize,
    /// Rounds (round trip) or messages per endpoint (throughput), measured.
    pub count: u64,
    /// Rounds before measuring (each endpoint's path warmed: ARP resolved).
    pub warmup: u64,
    /// The endpoints (how many, of how many types) and the messages'
    /// values.
    pub shape: Shape,
    /// Where endpoint `i` sends: `{to}{i}` (`ret` on HELICS alone, netloop's
    /// endpoint prefix through netloop).
    pub to: String,
    /// Round trip: rounds per second of wall clock at most (the seed's
    /// 100 Hz); none: as fast as the echoes come. Either way no message is
    /// sent before the last one's echo (the seed's congestion avoidance).
    pub rate_hz: Option<f64>,
    /// Simulated time a message's echo may take before it counts as lost.
    pub timeout: f64,
    /// Throughput: simulated time between consecutive messages' stamps.
    pub spacing: f64,
}

/// How the federates' endpoints and messages are laid out: the seed's
/// independent variables besides size and rate. The seed's HLA terms map
/// onto HELICS's as follows: an object or interaction class is an endpoint
/// type (HELICS's type string of an endpoint), an instance is an endpoint
/// pair (one of the sender, one of the returnee), and the attributes of an
/// object (parameters of an interaction) are the values one message
/// carries, each packed and unpacked on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Endpoint pairs in all: `types` × instances of each.
    pub endpoints: usize,
    /// Message types: pairs `k·n … (k+1)·n - 1` (n = endpoints / types)
    /// have type `t{k}`.
    pub types: usize,
    /// Values per message (each of `payload` bytes), or none: a message is
    /// one unstructured payload.
    pub values: Option<usize>,
}

impl Shape {
    /// `n` pairs of one type, plain messages.
    pub fn pairs(n: usize) -> Shape {
        Shape {
            endpoints: n,
            types: 1,
            values: None,
        }
    }

    /// The HELICS type of pair `i`'s endpoints (none with one type, as
    /// before types were a variable).
    fn type_of(&self, i: usize) -> Option<String> {
        (self.types > 1).then(|| format!("t{}", i / (self.endpoints / self.types).max(1)))
    }
}

/// Wall-clock nanoseconds since the Unix epoch: one clock for the sender
/// and receiver in different processes of one machine.
pub fn epoch_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// What the sender measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SenderReport {
    /// Messages sent, measured ones only.
    pub sent: u64,
    /// Echoes received that matched a message sent (round trip).
    pub returned: u64,
    /// Messages whose echo did not come by the deadline.
    pub lost: u64,
    /// Echoes of an earlier round's message, after its deadline.
    pub late: u64,
    /// Echoes received twice, or of nothing sent, or with other bytes.
    pub bad: u64,
    /// Wall-clock round trips, ns (one per returned message).
    pub rtt_ns: Vec<u64>,
    /// Simulated round trips, ns (HELICS time of the echo less the send's).
    pub sim_rtt_ns: Vec<u64>,
    /// Wall clock of the first measured send (`epoch_ns`).
    pub start_epoch_ns: u64,
    /// Wall-clock time from the first measured send to the last echo
    /// (round trip) or to the last send (throughput), ns.
    pub elapsed_ns: u64,
}

/// How the returnee ended, and what it counted.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReturneeReport {
    /// Messages received (and answered, unless counting only).
    pub received: u64,
    /// Wall clock of the first and the last message's receipt (`epoch_ns`).
    pub first_epoch_ns: u64,
    /// See `first_epoch_ns`.
    pub last_epoch_ns: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Messages that were not the values they should hold (unanswered).
    pub malformed: u64,
}

/// Creates the federate and its endpoints `{prefix}{i}` (of their types),
/// then waits for the federation to start.
fn join<'h>(
    h: &'h Helics,
    settings: &Settings,
    prefixes: &[&str],
    shape: &Shape,
) -> Result<Federate<'h>, HelicsError> {
    let mut fed = Federate::new(h, settings)?;
    for prefix in prefixes {
        for i in 0..shape.endpoints {
            fed.register_typed_endpoint(&format!("{prefix}{i}"), shape.type_of(i).as_deref())?;
        }
    }
    fed.enter_executing(settings.timeout)?;
    Ok(fed)
}

/// The bytes of message `seq`: the sequence number, then a pattern that
/// depends on it (so an echo of other bytes is caught): `len` bytes in
/// all, or with `values`, that many values of `len` bytes, each a 4-byte
/// little-endian length and its bytes.
fn message(seq: u64, len: usize, values: Option<usize>) -> Vec<u8> {
    let pattern =
        |salt: usize, n: usize| (0..n).map(move |k| (seq as usize).wrapping_add(k + salt) as u8);
    match values {
        None => {
            let mut m = Vec::with_capacity(len.max(8));
            m.extend_from_slice(&seq.to_le_bytes());
            m.extend(pattern(8, len.saturating_sub(8)));
            m
        }
        Some(n) => {
            let mut m = Vec::with_capacity(8 + n * (4 + len));
            m.extend_from_slice(&seq.to_le_bytes());
            for v in 0..n {
                m.extend_from_slice(&(len as u32).to_le_bytes());
                m.extend(pattern(31 * v, len));
            }
            m
        }
    }
}

/// What the returnee does with a message of `values` values, as an HLA
/// returnee does with a reflection: each value unpacked into the pair's
/// proxy (its buffers reused), then a new message packed from the proxy.
/// None when the message is not `values` values.
fn repack(data: &[u8], values: usize, proxy: &mut Vec<Vec<u8>>) -> Option<Vec<u8>> {
    let seq = data.get(..8)?;
    proxy.resize_with(values, Vec::new);
    let mut at = 8;
    for slot in proxy.iter_mut() {
        let len = u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?) as usize;
        let bytes = data.get(at + 4..at + 4 + len)?;
        slot.clear();
        slot.extend_from_slice(bytes);
        at += 4 + len;
    }
    if at != data.len() {
        return None;
    }
    let mut m = Vec::with_capacity(data.len());
    m.extend_from_slice(seq);
    for v in proxy.iter() {
        m.extend_from_slice(&(v.len() as u32).to_le_bytes());
        m.extend_from_slice(v);
    }
    Some(m)
}

fn seq_of(data: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(data.get(..8)?.try_into().ok()?))
}

/// Runs the sender: joins as `settings.name` with endpoints `snd0…`
/// runs `plan`, leaves.
pub fn sender(
    h: &Helics,
    settings: &Settings,
    plan: &SenderPlan,
) -> Result<SenderReport, HelicsError> {
    let mut fed = join(h, settings, &["snd"], &plan.shape)?;
    let dests: Vec<String> = (0..plan.shape.endpoints)
        .map(|i| format!("{}{i}", plan.to))
        .collect();
    let mut now = 0.0;
    let mut report = SenderReport::default();
    let mut seq = 0u64;
    // Warm-up: a round trip on every endpoint (ARP on the simulated hosts,
    // connections inside HELICS), not measured.
    for _ in 0..plan.warmup {
        let mut scratch = SenderReport::default();
        now = round(&mut fed, plan, &dests, now, &mut seq, &mut scratch)?;
    }
    report.start_epoch_ns = epoch_ns();
    let t0 = Instant::now();
    match plan.test {
        Test::RoundTrip => {
            let period = plan.rate_hz.map(|r| Duration::from_secs_f64(1.0 / r));
            for k in 0..plan.count {
                if let Some(p) = period {
                    let due = t0 + p * k as u32;
                    let wait = due.saturating_duration_since(Instant::now());
                    if !wait.is_zero() {
                        std::thread::sleep(wait);
                    }
                }
                now = round(&mut fed, plan, &dests, now, &mut seq, &mut report)?;
            }
            report.elapsed_ns = t0.elapsed().as_nanos() as u64;
        }
        Test::Throughput => {
            let mut at = now;
            for _ in 0..plan.count {
                for (i, d) in dests.iter().enumerate() {
                    fed.send(i, &message(seq, plan.payload, plan.shape.values), d, at)?;
                    seq += 1;
                    report.sent += 1;
                    at += plan.spacing;
                }
            }
            report.elapsed_ns = t0.elapsed().as_nanos() as u64;
            // Let the federation carry them: the receiver counts.
            fed.request_time(at + plan.timeout)?;
        }
    }
    fed.disconnect()?;
    Ok(report)
}

/// One round: a message on every endpoint at `now`, then grants until every
/// echo is back or the deadline passed. Returns the time reached.
fn round(
    fed: &mut Federate<'_>,
    plan: &SenderPlan,
    dests: &[String],
    now: f64,
    seq: &mut u64,
    report: &mut SenderReport,
) -> Result<f64, HelicsError> {
    let first = *seq;
    let sent_at = Instant::now();
    for (i, d) in dests.iter().enumerate() {
        fed.send(i, &message(*seq, plan.payload, plan.shape.values), d, now)?;
        *seq += 1;
    }
    report.sent += dests.len() as u64;
    let mut back = vec![false; dests.len()];
    let mut missing = dests.len();
    let deadline = now + plan.timeout;
    let mut t = now;
    while missing > 0 && t < deadline {
        t = fed.request_time(deadline)?;
        for i in 0..dests.len() {
            while let Some(m) = fed.receive(i)? {
                let s = seq_of(&m.data).unwrap_or(u64::MAX);
                let k = s.wrapping_sub(first) as usize;
                if k < back.len()
                    && !back[k]
                    && m.data == message(s, plan.payload, plan.shape.values)
                {
                    back[k] = true;
                    missing -= 1;
                    report.returned += 1;
                    report.rtt_ns.push(sent_at.elapsed().as_nanos() as u64);
                    // In whole nanoseconds, as HELICS keeps time (a
                    // difference of seconds as doubles can be 1 ns off).
                    let ns = |t: f64| (t * 1e9).round() as i64;
                    report.sim_rtt_ns.push((ns(m.time) - ns(now)).max(0) as u64);
                } else if s < first {
                    report.late += 1;
                } else {
                    report.bad += 1;
                }
            }
        }
    }
    report.lost += missing as u64;
    Ok(t)
}

/// Runs the returnee: joins with endpoints `ret0…`, answers every message
/// to its source at the time it was granted (or only counts, when
/// `answer` is false: the throughput test's receiver), until every other
/// federate has left. Messages of values are answered repacked (see
/// [`repack`]); one that is not what `shape` says is counted, unanswered.
pub fn returnee(
    h: &Helics,
    settings: &Settings,
    shape: &Shape,
    answer: bool,
) -> Result<ReturneeReport, HelicsError> {
    let mut fed = join(h, settings, &["ret"], shape)?;
    let mut r = ReturneeReport::default();
    let mut proxies: Vec<Vec<Vec<u8>>> = vec![Vec::new(); shape.endpoints];
    loop {
        let g = fed.request_time(TIME_MAXTIME)?;
        if g >= TIME_MAXTIME {
            break;
        }
        for (i, proxy) in proxies.iter_mut().enumerate() {
            while let Some(m) = fed.receive(i)? {
                let at = epoch_ns();
                if r.received == 0 {
                    r.first_epoch_ns = at;
                }
                r.last_epoch_ns = at;
                r.received += 1;
                r.bytes += m.data.len() as u64;
                let reply = match shape.values {
                    Some(n) => repack(&m.data, n, proxy),
                    None => Some(m.data),
                };
                match reply {
                    None => r.malformed += 1,
                    Some(data) if answer => fed.send(i, &data, &m.source, g)?,
                    Some(_) => {}
                }
            }
        }
    }
    fed.disconnect()?;
    Ok(r)
}

/// Runs a relay: a federate in the middle that does nothing but pass each
/// message on, as netloop's endpoints are named (`na{i}` to the returnee's
/// `ret{i}`, from `nb{i}`; `nb{i}` to the sender's `snd{i}`, from `na{i}`),
/// at the time it was granted. What a federate between two others costs
/// HELICS, with no network: the floor under netloop's own cost. Returns the
/// messages passed on.
pub fn relay(h: &Helics, settings: &Settings, shape: &Shape) -> Result<u64, HelicsError> {
    let endpoints = shape.endpoints;
    let mut fed = join(h, settings, &["na", "nb"], shape)?;
    let dest: Vec<String> = (0..endpoints)
        .map(|i| format!("ret{i}"))
        .chain((0..endpoints).map(|i| format!("snd{i}")))
        .collect();
    let mut passed = 0;
    loop {
        let g = fed.request_time(TIME_MAXTIME)?;
        if g >= TIME_MAXTIME {
            break;
        }
        for (i, to) in dest.iter().enumerate() {
            // Out of the other side's endpoint of the pair.
            let from = (i + endpoints) % (2 * endpoints);
            while let Some(m) = fed.receive(i)? {
                fed.send(from, &m.data, to, g)?;
                passed += 1;
            }
        }
    }
    fed.disconnect()?;
    Ok(passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_carries_its_sequence_and_a_pattern_of_it() {
        let m = message(300, 64, None);
        assert_eq!(m.len(), 64);
        assert_eq!(seq_of(&m), Some(300));
        assert_ne!(message(301, 64, None)[8..], m[8..]);
        assert_eq!(message(7, 8, None).len(), 8);
        assert_eq!(seq_of(&[1, 2, 3]), None);
    }

    #[test]
    fn a_message_of_values_is_unpacked_and_packed_again_as_it_was() {
        let m = message(9, 256, Some(8));
        // 8 values of 256 bytes, each with its length: 2 088 bytes, more
        // than a TCP segment (the seed's point about 8 × 256).
        assert_eq!(m.len(), 8 + 8 * 260);
        assert_eq!(seq_of(&m), Some(9));
        let mut proxy = Vec::new();
        assert_eq!(repack(&m, 8, &mut proxy).as_deref(), Some(&m[..]));
        assert_eq!(proxy.len(), 8);
        assert!(proxy.iter().all(|v| v.len() == 256));
        // Values differ from each other, so a returnee that mixed them up
        // would be caught.
        assert_ne!(proxy[0], proxy[1]);
        // Not what it should be: too few values, a length past the end,
        // bytes left over.
        assert_eq!(repack(&message(9, 256, Some(7)), 8, &mut proxy), None);
        let mut long = m.clone();
        long[8..12].copy_from_slice(&10_000u32.to_le_bytes());
        assert_eq!(repack(&long, 8, &mut proxy), None);
        let mut extra = m.clone();
        extra.push(0);
        assert_eq!(repack(&extra, 8, &mut proxy), None);
        assert_eq!(repack(&m[..5], 8, &mut proxy), None);
    }

    #[test]
    fn pairs_take_the_type_of_their_block() {
        let s = Shape {
            endpoints: 100,
            types: 25,
            values: None,
        };
        assert_eq!(s.type_of(0).as_deref(), Some("t0"));
        assert_eq!(s.type_of(3).as_deref(), Some("t0"));
        assert_eq!(s.type_of(4).as_deref(), Some("t1"));
        assert_eq!(s.type_of(99).as_deref(), Some("t24"));
        assert_eq!(Shape::pairs(5).type_of(4), None);
    }
}
