//! Trace-driven capacity: a link direction whose transmitter follows a
//! trace instead of a fixed rate.
//!
//! Two kinds ([`TraceSpec`]):
//!
//! - **Mahimahi** (Netravali et al., USENIX ATC 2015; `mm-link`): each line
//!   of the trace is a millisecond timestamp at which the link may deliver
//!   one MTU-sized packet, a *delivery opportunity* of 1 504 bytes; the
//!   trace repeats with the last timestamp as its period. Bytes are
//!   accounted as Mahimahi does (`LinkQueue::rationalize`): a packet costs
//!   its IP length plus the 4 bytes of the TUN header Mahimahi reads with it
//!   (1 500 + 4 = one opportunity: a trace of one line per millisecond is
//!   12 Mbit/s of IP); a packet may span opportunities, and what is left of
//!   an opportunity goes to the packet waiting behind it, or is lost if none
//!   waits. An opportunity serves what arrived before it: a frame that
//!   finds the link idle starts with the first opportunity *after* its
//!   arrival (Mahimahi spends the opportunities due before it enqueues a
//!   packet). A frame is delivered at the opportunity that carries its last
//!   byte, then crosses the link's delay. `overhead` does not apply.
//! - **Rate series**: from each time on, a rate (bit/s), the last one for
//!   ever; a frame's bits (padded, with `overhead`, as on a fixed-rate link)
//!   are sent at whatever rate is in force while it is sent, across
//!   changes. A rate of 0 stops the transmitter until the next change.
//!
//! Times are nanoseconds of simulated time from the start of the run (the
//! trace starts with it).

use netloop_core::{DataRate, SimDuration, SimTime};
use serde::{Deserialize, Serialize};

/// Bytes of one Mahimahi delivery opportunity (`PACKET_SIZE`: a 1 500-byte
/// MTU and the TUN header).
pub const OPPORTUNITY_BYTES: u64 = 1504;

/// What Mahimahi counts of a packet beside its IP bytes (the TUN header).
pub const TUN_HEADER: u64 = 4;

/// Where a direction's capacity comes from when it follows a trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum TraceSpec {
    /// Mahimahi's delivery opportunities.
    Mahimahi {
        /// Where it came from (a file name), for results and messages.
        source: String,
        /// Millisecond offsets of the opportunities in one period,
        /// non-decreasing, the last (the period) above zero.
        ms: Vec<u64>,
    },
    /// A rate from each time on.
    Rates {
        /// Where it came from (a file name, or `inline`).
        source: String,
        /// (from, rate), the first from zero, strictly ascending; the last
        /// rate is above zero.
        steps: Vec<(SimDuration, DataRate)>,
    },
}

impl TraceSpec {
    /// `mahimahi` or `rates`.
    pub fn kind(&self) -> &'static str {
        match self {
            TraceSpec::Mahimahi { .. } => "mahimahi",
            TraceSpec::Rates { .. } => "rates",
        }
    }

    /// Where it came from.
    pub fn source(&self) -> &str {
        match self {
            TraceSpec::Mahimahi { source, .. } | TraceSpec::Rates { source, .. } => source,
        }
    }

    /// Its mean rate, bit/s: over a period (Mahimahi), or over the series
    /// up to its last change (a rate series; its only rate if it has one).
    /// For estimates only (a queue's idle time, a partition's load).
    pub fn mean_bps(&self) -> u64 {
        match self {
            TraceSpec::Mahimahi { ms, .. } => {
                let period_ms = ms.last().copied().unwrap_or(1).max(1);
                (ms.len() as u128 * u128::from(OPPORTUNITY_BYTES) * 8 * 1000
                    / u128::from(period_ms)) as u64
            }
            TraceSpec::Rates { steps, .. } => {
                let Some(&(last_from, last)) = steps.last() else {
                    return 0;
                };
                if last_from == SimDuration::ZERO {
                    return last.bps();
                }
                let bits: u128 = steps
                    .windows(2)
                    .map(|w| {
                        u128::from(w[0].1.bps()) * u128::from(w[1].0.as_nanos() - w[0].0.as_nanos())
                    })
                    .sum();
                (bits / u128::from(last_from.as_nanos())) as u64
            }
        }
    }

    /// Checks what the kinds require, so that no transmitter waits for
    /// ever (the loader uses it for rate series; it reads Mahimahi files
    /// line by line, to name the line at fault).
    pub fn check(&self) -> Result<(), String> {
        match self {
            TraceSpec::Mahimahi { ms, .. } => {
                if ms.is_empty() {
                    return Err("a Mahimahi trace needs at least one timestamp".into());
                }
                if ms.windows(2).any(|w| w[1] < w[0]) {
                    return Err("Mahimahi timestamps must not decrease".into());
                }
                if ms.last() == Some(&0) {
                    return Err("a Mahimahi trace must last longer than 0 ms".into());
                }
            }
            TraceSpec::Rates { steps, .. } => {
                let Some(first) = steps.first() else {
                    return Err("no rates".into());
                };
                if first.0 != SimDuration::ZERO {
                    return Err(format!(
                        "the series starts at {}, not at 0: what rate is there before?",
                        first.0
                    ));
                }
                if let Some(w) = steps.windows(2).find(|w| w[1].0 <= w[0].0) {
                    return Err(format!(
                        "{} comes after {}: times must ascend",
                        w[1].0, w[0].0
                    ));
                }
                if steps.last().is_some_and(|s| s.1.bps() == 0) {
                    return Err(
                        "the last rate holds for ever: it can't be 0 (frames would wait for ever)"
                            .into(),
                    );
                }
            }
        }
        Ok(())
    }
}

/// A transmitter following a trace: where it stands in it.
#[derive(Clone, Debug)]
pub struct TraceCursor {
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    Mahimahi {
        /// Offsets in ns within a period.
        at: Vec<u64>,
        period: u64,
        /// Start of the current period.
        base: u64,
        /// The next opportunity not spent, in the current period.
        next: usize,
        /// Bytes left of the opportunity at `credit_at`.
        credit: u64,
        credit_at: u64,
    },
    Rates {
        /// (from ns, bit/s).
        steps: Vec<(u64, u64)>,
    },
}

impl TraceCursor {
    /// At the start of `spec`.
    pub fn new(spec: &TraceSpec) -> TraceCursor {
        let kind = match spec {
            TraceSpec::Mahimahi { ms, .. } => Kind::Mahimahi {
                at: ms.iter().map(|m| m * 1_000_000).collect(),
                period: ms.last().copied().unwrap_or(1).max(1) * 1_000_000,
                base: 0,
                next: 0,
                credit: 0,
                credit_at: 0,
            },
            TraceSpec::Rates { steps, .. } => Kind::Rates {
                steps: steps
                    .iter()
                    .map(|(from, rate)| (from.as_nanos(), rate.bps()))
                    .collect(),
            },
        };
        TraceCursor { kind }
    }

    /// The bytes a frame of `len` bytes costs, as the kind counts them
    /// ([`mahimahi_cost`], or [`rate_cost`] with the link's `overhead`).
    pub fn cost(&self, len: usize, overhead: u32) -> u64 {
        match self.kind {
            Kind::Mahimahi { .. } => mahimahi_cost(len),
            Kind::Rates { .. } => rate_cost(len, overhead),
        }
    }

    /// When a frame whose transmission starts at `now` has left: `cost` is
    /// its bytes as [`TraceCursor::cost`] counts them. `waited` says the frame was waiting in the queue
    /// while the one before it finished at `now` (the transmitter's own
    /// wake-up), so it may take what is left of that frame's last
    /// opportunity.
    pub fn finish(&mut self, now: SimTime, cost: u64, waited: bool) -> SimTime {
        let now_ns = now.as_nanos();
        match &mut self.kind {
            Kind::Mahimahi {
                at,
                period,
                base,
                next,
                credit,
                credit_at,
            } => {
                let mut need = cost;
                if waited && *credit_at == now_ns {
                    let used = need.min(*credit);
                    *credit -= used;
                    need -= used;
                    if need == 0 {
                        return now;
                    }
                    // Opportunities at this same instant not spent yet
                    // are still to come (the cursor is past those spent).
                    skip(at, *period, base, next, now_ns, false);
                } else {
                    // Idle: what was left is lost, and the opportunities
                    // due by now were spent before the frame arrived.
                    *credit = 0;
                    skip(at, *period, base, next, now_ns, true);
                }
                loop {
                    let t = *base + at[*next];
                    *next += 1;
                    if *next == at.len() {
                        *next = 0;
                        *base += *period;
                    }
                    let used = need.min(OPPORTUNITY_BYTES);
                    need -= used;
                    if need == 0 {
                        *credit = OPPORTUNITY_BYTES - used;
                        *credit_at = t;
                        return SimTime::from_nanos(t);
                    }
                }
            }
            Kind::Rates { steps } => SimTime::from_nanos(rates_finish(steps, now_ns, cost * 8)),
        }
    }
}

/// Moves the cursor to the first opportunity after `now` (`strict`) or at
/// or after it.
fn skip(at: &[u64], period: u64, base: &mut u64, next: &mut usize, now: u64, strict: bool) {
    let due = |t: u64| if strict { t <= now } else { t < now };
    if !due(*base + at[*next]) {
        return;
    }
    // Whole periods passed: every opportunity in them is spent.
    if now >= *base + period {
        *base += (now - *base) / period * period;
        *next = 0;
    }
    *next = at.partition_point(|&a| due(*base + a));
    if *next == at.len() {
        *next = 0;
        *base += period;
        // The next period's opportunities may start at its very start,
        // which is `now` at the most: spend those too.
        *next = at.partition_point(|&a| due(*base + a));
    }
}

/// When `bits` started at `now` have been sent at the rates of `steps`:
/// rounded up to the next nanosecond once, at the end.
fn rates_finish(steps: &[(u64, u64)], now: u64, bits: u64) -> u64 {
    let mut i = steps.partition_point(|s| s.0 <= now).saturating_sub(1);
    // Bits times nanoseconds-per-second: exact integers throughout.
    let mut need = u128::from(bits) * 1_000_000_000;
    let mut s = now;
    loop {
        let bps = u128::from(steps[i].1);
        match steps.get(i + 1) {
            Some(&(until, _)) => {
                let can = bps * u128::from(until - s);
                if bps > 0 && can >= need {
                    return s + need.div_ceil(bps) as u64;
                }
                need -= can;
                s = until;
                i += 1;
            }
            // The last rate is above zero (checked).
            None => return s + need.div_ceil(bps.max(1)) as u64,
        }
    }
}

/// What Mahimahi counts of a frame of `len` bytes: its bytes after the
/// Ethernet header, and the TUN header.
pub fn mahimahi_cost(len: usize) -> u64 {
    len.saturating_sub(crate::link::ETH_HEADER) as u64 + TUN_HEADER
}

/// The bytes a fixed-rate or rate-series link sends for a frame of `len`
/// bytes: padded to Ethernet's minimum, with `overhead`.
pub fn rate_cost(len: usize, overhead: u32) -> u64 {
    (len as u64).max(crate::link::MIN_FRAME) + u64::from(overhead)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mm(ms: &[u64]) -> TraceCursor {
        TraceCursor::new(&TraceSpec::Mahimahi {
            source: "t".into(),
            ms: ms.to_vec(),
        })
    }

    const MS: u64 = 1_000_000;

    fn t(ns: u64) -> SimTime {
        SimTime::from_nanos(ns)
    }

    #[test]
    fn an_idle_link_starts_with_the_next_opportunity_after_the_arrival() {
        let mut c = mm(&[1, 2, 3, 10]);
        // Arrived at 0.5 ms: the opportunity at 1 ms.
        assert_eq!(c.finish(t(MS / 2), 1504, false), t(MS));
        // Arrived at exactly 2 ms (idle): not the opportunity at 2 ms.
        assert_eq!(c.finish(t(2 * MS), 1504, false), t(3 * MS));
        // Arrived at 4 ms: the next is at 10 ms, then the trace repeats
        // (period 10 ms): 11, 12, 13, 20 ms.
        assert_eq!(c.finish(t(4 * MS), 1504, false), t(10 * MS));
        assert_eq!(c.finish(t(10 * MS), 1504, true), t(11 * MS));
        // Long idle: whole periods skipped. At 1 000.5 ms the next is
        // 1 001 ms.
        assert_eq!(c.finish(t(1000 * MS + MS / 2), 1504, false), t(1001 * MS));
    }

    #[test]
    fn packets_span_opportunities_and_what_is_left_goes_to_the_next_waiting() {
        let mut c = mm(&[1, 2, 3, 4, 5, 6, 100]);
        // 1 000 bytes (996 of IP): done at 1 ms with 504 left.
        assert_eq!(c.finish(t(0), 1000, false), t(MS));
        // A 600-byte frame waiting behind it takes the 504 and 96 of the
        // opportunity at 2 ms.
        assert_eq!(c.finish(t(MS), 600, true), t(2 * MS));
        // 1 408 left at 2 ms; a 3 000-byte frame waiting: 1 408 at 2 ms,
        // 1 504 at 3 ms, 88 at 4 ms.
        assert_eq!(c.finish(t(2 * MS), 3000, true), t(4 * MS));
        // The rest of 4 ms is lost when the next frame finds the link idle
        // (it arrives at 4.5 ms): 1 504 bytes at 5 ms.
        assert_eq!(c.finish(t(4 * MS + 1), 1504, false), t(5 * MS));
    }

    #[test]
    fn several_opportunities_at_one_instant_serve_the_waiting_frames() {
        // Three opportunities at 5 ms: three full packets waiting leave
        // at 5 ms, the fourth at the next period's first (5 + 5 ms).
        let mut c = mm(&[5, 5, 5]);
        assert_eq!(c.finish(t(0), 1504, false), t(5 * MS));
        assert_eq!(c.finish(t(5 * MS), 1504, true), t(5 * MS));
        assert_eq!(c.finish(t(5 * MS), 1504, true), t(5 * MS));
        assert_eq!(c.finish(t(5 * MS), 1504, true), t(10 * MS));
    }

    #[test]
    fn a_trace_of_one_packet_a_millisecond_is_twelve_megabits() {
        let spec = TraceSpec::Mahimahi {
            source: "t".into(),
            ms: vec![1],
        };
        assert_eq!(spec.mean_bps(), 12_032_000);
        // 1 500 bytes of IP a millisecond: 12 Mbit/s of IP.
        let mut c = TraceCursor::new(&spec);
        let mut now = t(0);
        for i in 1..=1000 {
            now = c.finish(now, mahimahi_cost(1514), i > 1);
            assert_eq!(now, t(i * MS));
        }
    }

    #[test]
    fn a_rate_series_sends_across_its_changes() {
        let spec = TraceSpec::Rates {
            source: "t".into(),
            steps: vec![
                (SimDuration::ZERO, DataRate::from_bps(8_000_000)),
                (SimDuration::from_millis(1), DataRate::from_bps(0)),
                (SimDuration::from_millis(3), DataRate::from_bps(4_000_000)),
            ],
        };
        assert!(spec.check().is_ok());
        let mut c = TraceCursor::new(&spec);
        // 500 bytes at 8 Mbit/s: 500 us.
        assert_eq!(c.finish(t(0), 500, false), t(500_000));
        // 1 000 bytes from 0.5 ms: 500 by 1 ms, nothing until 3 ms, 500 at
        // 4 Mbit/s: 1 ms more.
        assert_eq!(c.finish(t(500_000), 1000, false), t(4 * MS));
        // Started during the stop: waits for 3 ms. 1 byte at 4 Mbit/s is
        // 2 us.
        assert_eq!(c.finish(t(2 * MS), 1, false), t(3 * MS + 2_000));
        // Rounded up once: 1 byte at 3 bit/s.
        let slow = TraceSpec::Rates {
            source: "t".into(),
            steps: vec![(SimDuration::ZERO, DataRate::from_bps(3))],
        };
        assert_eq!(
            TraceCursor::new(&slow).finish(t(0), 1, false),
            t(2_666_666_667)
        );
        assert_eq!(spec.mean_bps(), 8_000_000 / 3);
    }

    #[test]
    fn checks_name_what_would_hang_a_transmitter() {
        let rates = |steps: Vec<(u64, u64)>| TraceSpec::Rates {
            source: "t".into(),
            steps: steps
                .into_iter()
                .map(|(a, r)| (SimDuration::from_millis(a), DataRate::from_bps(r)))
                .collect(),
        };
        assert!(rates(vec![(0, 1), (1, 0)])
            .check()
            .unwrap_err()
            .contains("last rate"));
        assert!(rates(vec![(1, 1)])
            .check()
            .unwrap_err()
            .contains("not at 0"));
        assert!(rates(vec![(0, 1), (0, 2)])
            .check()
            .unwrap_err()
            .contains("ascend"));
        let mm = |ms: Vec<u64>| TraceSpec::Mahimahi {
            source: "t".into(),
            ms,
        };
        assert!(mm(vec![0, 0]).check().is_err());
        assert!(mm(vec![2, 1]).check().is_err());
        assert!(mm(vec![]).check().is_err());
        assert!(mm(vec![0, 3]).check().is_ok());
    }
}
