//! Physical quantities as types, parsed from text.
//!
//! Every quantity is an integer in its base unit (nanoseconds, bits per second,
//! bytes, packets per second), parsed from decimal text *exactly*: `"1.5us"` is
//! 1500 ns, not a float rounded somewhere. Decimal prefixes are powers of 1000
//! (`kB` = 1000 bytes, `Mbps` = 10^6 bit/s); binary prefixes are spelled out
//! (`KiB`, `MiB`, `GiB`).

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::time::SimDuration;

/// Text that is not a valid quantity: what was given, what kind of quantity was
/// expected, and what exactly is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{input}' is not a {kind}: {problem} (expected {expected})")]
pub struct UnitError {
    /// The text as given.
    pub input: String,
    /// The kind of quantity, e.g. "duration".
    pub kind: &'static str,
    /// What is wrong, e.g. "unknown unit 'sm'".
    pub problem: String,
    /// A description of valid input, e.g. "a number and one of ns, us, ms, s".
    pub expected: &'static str,
}

/// Splits `"1.5 ms"` into `("1.5", "ms")`.
fn split_number(text: &str) -> (&str, &str) {
    let t = text.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    (&t[..end], t[end..].trim())
}

/// Multiplies the decimal `number` by the integer `scale` exactly, or says why
/// it can't (not a number, negative, too fine, too large).
fn scale_decimal(number: &str, scale: u64) -> Result<u64, String> {
    if number.is_empty() {
        return Err("no number".into());
    }
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if frac_part.contains('.') || (int_part.is_empty() && frac_part.is_empty()) {
        return Err(format!("'{number}' is not a number"));
    }
    let int: u128 = if int_part.is_empty() {
        0
    } else {
        int_part
            .parse()
            .map_err(|_| format!("'{number}' is not a number"))?
    };
    let mut value = int
        .checked_mul(scale as u128)
        .ok_or_else(|| "value too large".to_string())?;
    if !frac_part.is_empty() {
        if frac_part.len() > 30 {
            return Err("too many decimal places".into());
        }
        let frac: u128 = frac_part
            .parse()
            .map_err(|_| format!("'{number}' is not a number"))?;
        let denom = 10u128.pow(frac_part.len() as u32);
        let num = frac * scale as u128;
        if !num.is_multiple_of(denom) {
            return Err("finer than the smallest unit".into());
        }
        value += num / denom;
    }
    u64::try_from(value).map_err(|_| "value too large".to_string())
}

fn parse_with_units(
    text: &str,
    kind: &'static str,
    expected: &'static str,
    units: &[(&str, u64)],
    bare_scale: Option<u64>,
) -> Result<u64, UnitError> {
    let err = |problem: String| UnitError {
        input: text.to_string(),
        kind,
        problem,
        expected,
    };
    let trimmed = text.trim();
    if trimmed.starts_with('-') {
        return Err(err("negative values are not allowed".into()));
    }
    let (number, unit) = split_number(trimmed);
    let scale = if unit.is_empty() {
        match bare_scale {
            Some(s) => s,
            None if number.is_empty() => return Err(err("empty".into())),
            None => return Err(err("missing unit".into())),
        }
    } else {
        match units.iter().find(|(name, _)| *name == unit) {
            Some((_, s)) => *s,
            None => return Err(err(format!("unknown unit '{unit}'"))),
        }
    };
    scale_decimal(number, scale).map_err(err)
}

const DURATION_UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("min", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Parses a duration into nanoseconds (see [`SimDuration::parse`]).
pub(crate) fn parse_duration_ns(text: &str) -> Result<u64, UnitError> {
    let t = text.trim();
    // A bare zero needs no unit; any other bare number is ambiguous.
    if t == "0" {
        return Ok(0);
    }
    parse_with_units(
        text,
        "duration",
        "a number and one of ns, us, ms, s, min, h, e.g. '10ms' or '1.5us'",
        DURATION_UNITS,
        None,
    )
}

/// A data rate in bits per second.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct DataRate(u64);

const RATE_UNITS: &[(&str, u64)] = &[
    ("bps", 1),
    ("bit/s", 1),
    ("kbps", 1_000),
    ("kbit/s", 1_000),
    ("Kbps", 1_000),
    ("Mbps", 1_000_000),
    ("Mbit/s", 1_000_000),
    ("Gbps", 1_000_000_000),
    ("Gbit/s", 1_000_000_000),
    ("Tbps", 1_000_000_000_000),
    ("Tbit/s", 1_000_000_000_000),
    ("Bps", 8),
    ("B/s", 8),
    ("kBps", 8_000),
    ("kB/s", 8_000),
    ("MBps", 8_000_000),
    ("MB/s", 8_000_000),
    ("GBps", 8_000_000_000),
    ("GB/s", 8_000_000_000),
];

impl DataRate {
    /// A rate of `bps` bits per second.
    pub const fn from_bps(bps: u64) -> Self {
        DataRate(bps)
    }
    /// A rate of `mbps` megabits (10^6 bits) per second.
    pub const fn from_mbps(mbps: u64) -> Self {
        DataRate(mbps * 1_000_000)
    }
    /// Bits per second.
    pub const fn bps(self) -> u64 {
        self.0
    }
    /// Parse a rate such as `"1Gbps"`, `"10Mbit/s"`, `"1.5Mbps"`, `"100kbps"`.
    /// A `B` in the unit means bytes (`"10MB/s"` is 80 Mbit/s).
    pub fn parse(text: &str) -> Result<Self, UnitError> {
        let v = parse_with_units(
            text,
            "data rate",
            "a number and one of bps, kbps, Mbps, Gbps, Tbps (or bit/s forms; B for bytes), e.g. '100Mbps'",
            RATE_UNITS,
            None,
        )?;
        if v == 0 {
            return Err(UnitError {
                input: text.to_string(),
                kind: "data rate",
                problem: "a rate of zero would never send anything".into(),
                expected: "a positive rate, or 'unlimited' where allowed",
            });
        }
        Ok(DataRate(v))
    }
    /// The exact time to serialize `bytes` bytes at this rate, rounded up to the
    /// next nanosecond (a frame has not left until its last bit has).
    #[inline]
    pub fn tx_time(self, bytes: u64) -> SimDuration {
        let rate = self.0.max(1);
        // In 64 bits whenever the product fits (any frame: up to 2.3 GB),
        // the same quotient: a 128-bit division is a library call, a
        // third of a link direction's instructions per frame.
        if let Some(bits) = bytes.checked_mul(8 * 1_000_000_000) {
            return SimDuration::from_nanos(bits.div_ceil(rate));
        }
        let ns = (bytes as u128 * 8 * 1_000_000_000).div_ceil(rate as u128);
        SimDuration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }
}

impl fmt::Display for DataRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        for (scale, name) in [
            (1_000_000_000_000, "Tbps"),
            (1_000_000_000, "Gbps"),
            (1_000_000, "Mbps"),
            (1_000, "kbps"),
        ] {
            if v >= scale && v.is_multiple_of(scale / 1000) {
                let whole = v / scale;
                let frac = (v % scale) / (scale / 1000);
                return if frac == 0 {
                    write!(f, "{whole}{name}")
                } else {
                    write!(
                        f,
                        "{whole}.{}{name}",
                        format!("{frac:03}").trim_end_matches('0')
                    )
                };
            }
        }
        write!(f, "{v}bps")
    }
}

/// A size in bytes.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Bytes(u64);

const BYTE_UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("kB", 1_000),
    ("KB", 1_000),
    ("KiB", 1_024),
    ("MB", 1_000_000),
    ("MiB", 1_048_576),
    ("GB", 1_000_000_000),
    ("GiB", 1_073_741_824),
];

impl Bytes {
    /// `n` bytes.
    pub const fn new(n: u64) -> Self {
        Bytes(n)
    }
    /// The number of bytes.
    pub const fn get(self) -> u64 {
        self.0
    }
    /// Parse a size such as `"1500B"`, `"64kB"`, `"1MiB"`; a bare integer is
    /// bytes.
    pub fn parse(text: &str) -> Result<Self, UnitError> {
        parse_with_units(
            text,
            "size in bytes",
            "a number and one of B, kB, MB, GB, KiB, MiB, GiB, e.g. '1500B' or '64kB'",
            BYTE_UNITS,
            Some(1),
        )
        .map(Bytes)
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}B", self.0)
    }
}

/// A rate in packets per second (e.g. a router's forwarding rate).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct PacketRate(u64);

impl PacketRate {
    /// `pps` packets per second.
    pub const fn from_pps(pps: u64) -> Self {
        PacketRate(pps)
    }
    /// Packets per second.
    pub const fn pps(self) -> u64 {
        self.0
    }
    /// Parse a rate such as `"50000pps"`, `"50kpps"`, `"1.2Mpps"`; a bare
    /// integer is packets per second.
    pub fn parse(text: &str) -> Result<Self, UnitError> {
        let v = parse_with_units(
            text,
            "packet rate",
            "a number and one of pps, kpps, Mpps, e.g. '50000pps'",
            &[("pps", 1), ("kpps", 1_000), ("Mpps", 1_000_000)],
            Some(1),
        )?;
        if v == 0 {
            return Err(UnitError {
                input: text.to_string(),
                kind: "packet rate",
                problem: "a rate of zero would never forward anything".into(),
                expected: "a positive rate, or 'unlimited'",
            });
        }
        Ok(PacketRate(v))
    }
    /// The time to process one packet at this rate, rounded to the nearest
    /// nanosecond.
    pub fn interval(self) -> SimDuration {
        SimDuration::from_nanos((1_000_000_000 + self.0 / 2) / self.0.max(1))
    }
}

impl fmt::Display for PacketRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}pps", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 64-bit path gives the 128-bit quotient, rounded up, at sizes
    /// around where the product stops fitting and at odd rates.
    #[test]
    fn tx_time_is_the_same_in_64_and_128_bits() {
        let reference = |rate: u64, bytes: u64| {
            let ns = (bytes as u128 * 8_000_000_000).div_ceil(rate as u128);
            u64::try_from(ns).unwrap_or(u64::MAX)
        };
        let edge = u64::MAX / 8_000_000_000;
        for rate in [1, 3, 999_999, 1_000_000_007, 100_000_000_000, u64::MAX] {
            for bytes in [
                0,
                1,
                64,
                1538,
                65_536,
                edge - 1,
                edge,
                edge + 1,
                u64::MAX / 2,
            ] {
                assert_eq!(
                    DataRate(rate).tx_time(bytes).as_nanos(),
                    reference(rate, bytes),
                    "{bytes} bytes at {rate} bit/s"
                );
            }
        }
    }

    #[test]
    fn durations_parse_exactly() {
        assert_eq!(SimDuration::parse("10ms").unwrap().as_nanos(), 10_000_000);
        assert_eq!(SimDuration::parse("1.5us").unwrap().as_nanos(), 1_500);
        assert_eq!(
            SimDuration::parse(" 2 s ").unwrap().as_nanos(),
            2_000_000_000
        );
        assert_eq!(SimDuration::parse("0").unwrap().as_nanos(), 0);
        assert_eq!(SimDuration::parse(".5ms").unwrap().as_nanos(), 500_000);
        assert_eq!(
            SimDuration::parse("1min").unwrap().as_nanos(),
            60_000_000_000
        );
    }

    #[test]
    fn bad_durations_say_why() {
        let e = SimDuration::parse("10 sm").unwrap_err();
        assert_eq!(e.problem, "unknown unit 'sm'");
        assert!(e.to_string().contains("'10 sm' is not a duration"), "{e}");
        assert_eq!(
            SimDuration::parse("10").unwrap_err().problem,
            "missing unit"
        );
        assert_eq!(
            SimDuration::parse("0.1ns").unwrap_err().problem,
            "finer than the smallest unit"
        );
        assert!(SimDuration::parse("-1ms")
            .unwrap_err()
            .problem
            .contains("negative"));
        assert!(SimDuration::parse("1.2.3ms").is_err());
        assert!(SimDuration::parse("ms").is_err());
        assert!(SimDuration::parse("").is_err());
        assert!(SimDuration::parse("99999999999999h").is_err());
    }

    #[test]
    fn rates_and_tx_time() {
        let g = DataRate::parse("1Gbps").unwrap();
        assert_eq!(g.bps(), 1_000_000_000);
        assert_eq!(DataRate::parse("10Mbit/s").unwrap().bps(), 10_000_000);
        assert_eq!(DataRate::parse("1.5Mbps").unwrap().bps(), 1_500_000);
        assert_eq!(DataRate::parse("10MB/s").unwrap().bps(), 80_000_000);
        // 1538 bytes on the wire at 1 Gbit/s: 12304 ns exactly.
        assert_eq!(g.tx_time(1538).as_nanos(), 12_304);
        // 1 byte at 3 bit/s: 8/3 s, rounded up.
        assert_eq!(DataRate::from_bps(3).tx_time(1).as_nanos(), 2_666_666_667);
        assert!(DataRate::parse("0Mbps").is_err());
        assert_eq!(
            DataRate::parse("10 Mbs").unwrap_err().problem,
            "unknown unit 'Mbs'"
        );
        assert_eq!(DataRate::parse("1.5Mbps").unwrap().to_string(), "1.5Mbps");
        assert_eq!(g.to_string(), "1Gbps");
    }

    #[test]
    fn bytes_and_packet_rates() {
        assert_eq!(Bytes::parse("64kB").unwrap().get(), 64_000);
        assert_eq!(Bytes::parse("64KiB").unwrap().get(), 65_536);
        assert_eq!(Bytes::parse("1500").unwrap().get(), 1_500);
        assert_eq!(Bytes::parse("1500B").unwrap().get(), 1_500);
        assert!(Bytes::parse("1.5B").is_err());
        assert_eq!(PacketRate::parse("50kpps").unwrap().pps(), 50_000);
        assert_eq!(
            PacketRate::parse("50000").unwrap().interval().as_nanos(),
            20_000
        );
        assert!(PacketRate::parse("0pps").is_err());
    }
}
