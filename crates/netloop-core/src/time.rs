//! Simulated time: integer nanoseconds since the start of the run.
//!
//! Integers, not floats, so that `t + d` is exact and two runs agree to the
//! nanosecond. A `u64` of nanoseconds covers 584 years of simulated time.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Sub};

use crate::units::{parse_duration_ns, UnitError};

/// A point in simulated time, in nanoseconds since the run started.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct SimTime(u64);

/// A span of simulated time, in nanoseconds.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct SimDuration(u64);

impl SimTime {
    /// The start of every run.
    pub const ZERO: SimTime = SimTime(0);
    /// The largest representable time; used as "never".
    pub const MAX: SimTime = SimTime(u64::MAX);

    /// A time from nanoseconds since the start.
    pub const fn from_nanos(ns: u64) -> Self {
        SimTime(ns)
    }
    /// Nanoseconds since the start.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Seconds since the start, as a float (for reports only).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// The time elapsed since `earlier`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: SimTime) -> SimDuration {
        SimDuration(self.0.saturating_sub(earlier.0))
    }
}

impl SimDuration {
    /// No time at all.
    pub const ZERO: SimDuration = SimDuration(0);
    /// The largest representable span.
    pub const MAX: SimDuration = SimDuration(u64::MAX);

    /// A span of `ns` nanoseconds.
    pub const fn from_nanos(ns: u64) -> Self {
        SimDuration(ns)
    }
    /// A span of `us` microseconds.
    pub const fn from_micros(us: u64) -> Self {
        SimDuration(us * 1_000)
    }
    /// A span of `ms` milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        SimDuration(ms * 1_000_000)
    }
    /// A span of `s` seconds.
    pub const fn from_secs(s: u64) -> Self {
        SimDuration(s * 1_000_000_000)
    }
    /// A span from float seconds, rounded to the nearest nanosecond and
    /// clamped to be non-negative (used by random distributions).
    pub fn from_secs_f64(s: f64) -> Self {
        if s.is_nan() || s <= 0.0 {
            SimDuration(0)
        } else if s >= u64::MAX as f64 / 1e9 {
            SimDuration(u64::MAX)
        } else {
            SimDuration((s * 1e9).round() as u64)
        }
    }
    /// Nanoseconds in this span.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Seconds in this span, as a float (for reports and distributions).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// Parse a duration such as `"10ms"`, `"1.5us"`, `"2s"`, `"250ns"`.
    pub fn parse(text: &str) -> Result<Self, UnitError> {
        parse_duration_ns(text).map(SimDuration)
    }
}

impl std::str::FromStr for SimDuration {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Add<SimDuration> for SimTime {
    type Output = SimTime;
    fn add(self, d: SimDuration) -> SimTime {
        SimTime(self.0.saturating_add(d.0))
    }
}
impl AddAssign<SimDuration> for SimTime {
    fn add_assign(&mut self, d: SimDuration) {
        self.0 = self.0.saturating_add(d.0);
    }
}
impl Add for SimDuration {
    type Output = SimDuration;
    fn add(self, d: SimDuration) -> SimDuration {
        SimDuration(self.0.saturating_add(d.0))
    }
}
impl Sub for SimTime {
    type Output = SimDuration;
    /// Panics in debug builds if `rhs` is later than `self`: a negative span
    /// of simulated time is always a bug.
    fn sub(self, rhs: SimTime) -> SimDuration {
        debug_assert!(self >= rhs, "negative simulated duration: {self} - {rhs}");
        SimDuration(self.0.saturating_sub(rhs.0))
    }
}

/// Prints with the largest unit that keeps the value exact, e.g. `1.5ms`.
fn fmt_ns(ns: u64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    const UNITS: [(u64, &str); 4] = [
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ];
    if ns == 0 {
        return write!(f, "0s");
    }
    for (scale, name) in UNITS {
        if ns >= scale {
            let whole = ns / scale;
            let frac = ns % scale;
            if frac == 0 {
                return write!(f, "{whole}{name}");
            }
            let digits = scale.ilog10() as usize;
            let s = format!("{frac:0digits$}");
            return write!(f, "{whole}.{}{name}", s.trim_end_matches('0'));
        }
    }
    unreachable!()
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_ns(self.0, f)
    }
}
impl fmt::Display for SimDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_ns(self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_exact_and_round_trips() {
        for s in ["1.5ms", "10ms", "250ns", "2s", "1.000001s", "0s", "3.25us"] {
            let d = SimDuration::parse(s).unwrap();
            assert_eq!(d.to_string(), s);
        }
    }

    #[test]
    fn arithmetic() {
        let t = SimTime::from_nanos(5) + SimDuration::from_micros(1);
        assert_eq!(t.as_nanos(), 1_005);
        assert_eq!(t - SimTime::from_nanos(5), SimDuration::from_nanos(1_000));
        assert_eq!(SimTime::MAX + SimDuration::from_secs(1), SimTime::MAX);
    }
}
