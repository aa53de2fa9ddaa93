//! Reading one TOML value as one netloop quantity: a duration, a rate, a
//! probability, an address, a choice among names.
//!
//! Each reader takes a parsed value and returns the typed quantity or a
//! message that quotes the value and says what was expected. They know
//! nothing of items, fields or positions; [`crate::reader`] adds those.
//! The text syntax of the quantities themselves (`"10ms"`, `"1Gbps"`) is
//! `netloop_core::units`'s, so that the file, the CLI and Python agree.

use std::net::Ipv4Addr;

use netloop_core::{Bytes, DataRate, PacketRate, SimDuration};
use netloop_model::spec::{Ipv4Cidr, Ipv6Cidr};
use std::net::{IpAddr, Ipv6Addr};
use toml::de::DeValue;
use toml::Spanned;

use crate::suggest::did_you_mean;

/// A value from the parsed file, with its byte span.
pub(crate) type Value<'i> = Spanned<DeValue<'i>>;

/// The result of reading one value: the quantity or what's wrong with it.
pub(crate) type Read<T> = Result<T, String>;

/// Shortens what the user wrote for quoting in a message.
pub(crate) fn quote(text: &str) -> String {
    const MAX: usize = 40;
    if text.chars().count() <= MAX {
        text.to_string()
    } else {
        let cut: String = text.chars().take(MAX).collect();
        format!("{cut}…")
    }
}

/// What a value is, for "found …" in messages: `integer 10`, `string '10'`.
pub(crate) fn describe(v: &DeValue<'_>) -> String {
    match v {
        DeValue::String(s) => format!("string '{}'", quote(s)),
        DeValue::Integer(i) => {
            // Formatted by hand: `DeInteger`'s Display panics on a radix it
            // doesn't know, and this code promises never to panic.
            let prefix = match i.radix() {
                2 => "0b",
                8 => "0o",
                16 => "0x",
                _ => "",
            };
            format!("integer {prefix}{}", quote(i.as_str()))
        }
        DeValue::Float(f) => format!("float {}", quote(f.as_str())),
        DeValue::Boolean(b) => format!("boolean {b}"),
        DeValue::Datetime(d) => format!("date-time {d}"),
        DeValue::Array(_) => "an array".to_string(),
        DeValue::Table(_) => "a table".to_string(),
    }
}

pub(crate) fn expected<T>(what: &str, v: &DeValue<'_>) -> Read<T> {
    Err(format!("expected {what}, found {}", describe(v)))
}

/// The value of a TOML integer, if it fits an `i128` (TOML's own limit is
/// `i64`, but the parser's recovery may hand us anything).
fn integer_of(v: &DeValue<'_>) -> Option<Result<i128, String>> {
    let i = v.as_integer()?;
    Some(
        i128::from_str_radix(&i.as_str().replace('_', ""), i.radix())
            .map_err(|_| format!("'{}' is not an integer TOML can hold", quote(i.as_str()))),
    )
}

/// A float or an integer as `f64`.
fn number_of(v: &DeValue<'_>) -> Option<Result<f64, String>> {
    if let Some(f) = v.as_float() {
        let text = f.as_str().replace('_', "");
        return Some(
            text.parse::<f64>()
                .map_err(|_| format!("'{}' is not a number", quote(f.as_str()))),
        );
    }
    integer_of(v).map(|r| r.map(|i| i as f64))
}

/// A number in `lo..=hi` (an integer or a float), described as `what`.
pub(crate) fn number_in(v: &Value<'_>, lo: f64, hi: f64, what: &str) -> Read<f64> {
    let x = match number_of(v.get_ref()) {
        Some(r) => r?,
        None => return expected(what, v.get_ref()),
    };
    if !(lo..=hi).contains(&x) {
        // NaN lands here too.
        return Err(format!("{x} is out of range: expected {what}"));
    }
    Ok(x)
}

/// A string.
pub(crate) fn string(v: &Value<'_>) -> Read<String> {
    match v.get_ref() {
        DeValue::String(s) => Ok(s.to_string()),
        other => expected("a string", other),
    }
}

/// `true` or `false`.
pub(crate) fn boolean(v: &Value<'_>) -> Read<bool> {
    match v.get_ref() {
        DeValue::Boolean(b) => Ok(*b),
        other => expected("true or false", other),
    }
}

/// An integer in `lo..=hi`; `what` names the quantity for the range message.
pub(crate) fn integer_in(v: &Value<'_>, lo: i128, hi: i128, what: &str) -> Read<i128> {
    let n = match integer_of(v.get_ref()) {
        Some(r) => r?,
        None => return expected("an integer", v.get_ref()),
    };
    if n < lo || n > hi {
        return Err(format!(
            "{n} is out of range: expected {what} from {lo} to {hi}"
        ));
    }
    Ok(n)
}

/// A `u32` in `lo..=hi`.
pub(crate) fn u32_in(v: &Value<'_>, lo: u32, hi: u32, what: &str) -> Read<u32> {
    integer_in(v, lo.into(), hi.into(), what).map(|n| n as u32)
}

/// One of `options`, e.g. a node kind. Returns the matching option.
pub(crate) fn choice(v: &Value<'_>, options: &[&'static str], what: &str) -> Read<&'static str> {
    let s = match v.get_ref() {
        DeValue::String(s) => s,
        other => return expected(&format!("{what}: one of {}", options.join(", ")), other),
    };
    options.iter().copied().find(|o| o == s).ok_or_else(|| {
        format!(
            "'{}' is not a known {what}: expected one of {}{}",
            quote(s),
            options.join(", "),
            did_you_mean(s, options.iter().copied())
        )
    })
}

/// A duration string such as `"10ms"`. A bare integer 0 is accepted too:
/// zero needs no unit, and `delay = 0` is a natural thing to write.
pub(crate) fn duration(v: &Value<'_>) -> Read<SimDuration> {
    match v.get_ref() {
        DeValue::String(s) => SimDuration::parse(s).map_err(|e| e.to_string()),
        other if matches!(integer_of(other), Some(Ok(0))) => Ok(SimDuration::ZERO),
        other => expected("a duration string like '10ms'", other),
    }
}

/// A duration that must not be zero.
pub(crate) fn positive_duration(v: &Value<'_>) -> Read<SimDuration> {
    let d = duration(v)?;
    if d == SimDuration::ZERO {
        return Err("must be longer than zero".to_string());
    }
    Ok(d)
}

/// Whether the value is the string `word`.
pub(crate) fn is_word(v: &Value<'_>, word: &str) -> bool {
    v.get_ref().as_str() == Some(word)
}

/// A data rate such as `"100Mbps"`.
pub(crate) fn rate(v: &Value<'_>) -> Read<DataRate> {
    match v.get_ref() {
        DeValue::String(s) => DataRate::parse(s).map_err(|e| e.to_string()),
        other => expected("a data rate string like '100Mbps'", other),
    }
}

/// A data rate or `"unlimited"` (`None`).
pub(crate) fn rate_or_unlimited(v: &Value<'_>) -> Read<Option<DataRate>> {
    if is_word(v, "unlimited") {
        return Ok(None);
    }
    match v.get_ref() {
        DeValue::String(s) => DataRate::parse(s).map(Some).map_err(|e| e.to_string()),
        other => expected("a data rate string like '100Mbps' or 'unlimited'", other),
    }
}

/// A packet rate (`"50000pps"`, or an integer of packets per second) or
/// `"unlimited"` (`None`).
pub(crate) fn packet_rate_or_unlimited(v: &Value<'_>) -> Read<Option<PacketRate>> {
    if is_word(v, "unlimited") {
        return Ok(None);
    }
    match v.get_ref() {
        DeValue::String(s) => PacketRate::parse(s).map(Some).map_err(|e| e.to_string()),
        other => match integer_of(other) {
            Some(Ok(n)) if n > 0 && n <= u64::MAX as i128 => {
                Ok(Some(PacketRate::from_pps(n as u64)))
            }
            Some(Ok(n)) => Err(format!(
                "{n} is not a packet rate: expected a positive number of packets per second"
            )),
            Some(Err(e)) => Err(e),
            None => expected("a packet rate like '50000pps' or 'unlimited'", other),
        },
    }
}

/// A size: a string such as `"1500B"` or `"64kB"`, or an integer of bytes.
pub(crate) fn size(v: &Value<'_>) -> Read<Bytes> {
    match v.get_ref() {
        DeValue::String(s) => Bytes::parse(s).map_err(|e| e.to_string()),
        other => match integer_of(other) {
            Some(Ok(n)) if n >= 0 && n <= u64::MAX as i128 => Ok(Bytes::new(n as u64)),
            Some(Ok(n)) => Err(format!(
                "{n} is not a size: expected a number of bytes, 0 or more"
            )),
            Some(Err(e)) => Err(e),
            None => expected("a size like '1500B' or '64kB'", other),
        },
    }
}

/// A size, or `"unlimited"` (`None`).
pub(crate) fn size_or_unlimited(v: &Value<'_>) -> Read<Option<Bytes>> {
    if is_word(v, "unlimited") {
        return Ok(None);
    }
    size(v).map(Some).map_err(|e| {
        if v.get_ref().is_str() {
            e
        } else {
            format!("{e} or 'unlimited'")
        }
    })
}

/// A probability: a number in [0, 1] or a percentage string such as `"1%"`.
pub(crate) fn probability(v: &Value<'_>) -> Read<f64> {
    const EXPECTED: &str = "a probability: a number in [0, 1] or a percentage like '1%'";
    if let Some(text) = v.get_ref().as_str() {
        let Some(number) = text.trim().strip_suffix('%') else {
            return expected(EXPECTED, v.get_ref());
        };
        let pct: f64 = number
            .trim()
            .parse()
            .ok()
            .filter(|p: &f64| p.is_finite())
            .ok_or_else(|| {
                format!(
                    "'{}' is not a percentage: expected a number before '%', e.g. '1%' or '0.5%'",
                    quote(text)
                )
            })?;
        if !(0.0..=100.0).contains(&pct) {
            return Err(format!("'{}' is outside 0%..100%", quote(text)));
        }
        return Ok(pct / 100.0);
    }
    let p = match number_of(v.get_ref()) {
        Some(r) => r?,
        None => return expected(EXPECTED, v.get_ref()),
    };
    if !(0.0..=1.0).contains(&p) {
        // NaN lands here too: `contains` is false for it.
        let hint = if p > 1.0 && p <= 100.0 {
            format!(" (for {p} percent write '{p}%')")
        } else {
            String::new()
        };
        return Err(format!(
            "{p} is not a probability: expected a number in [0, 1]{hint}"
        ));
    }
    Ok(p)
}

/// A probability where tools such as Mininet and netem take a percentage
/// (`loss`, `corrupt`, `duplicate`): as [`probability`], but a bare 1 is
/// refused, since a user of those tools who writes `loss = 1` means one
/// percent, not every packet.
pub(crate) fn percent_like(v: &Value<'_>) -> Read<f64> {
    let p = probability(v)?;
    if p == 1.0 && v.get_ref().as_str().is_none() {
        return Err(
            "a bare 1 would be every packet (a probability), where Mininet and netem read 1 as \
             one percent: write '1%' (or 0.01) for one percent, or '100%' for every packet"
                .to_string(),
        );
    }
    Ok(p)
}

/// What reading an address needs of its family: IPv4's [`Ipv4Cidr`] or
/// IPv6's [`Ipv6Cidr`], so that links, routes and pools read both with one
/// piece of code.
pub(crate) trait Cidr: Copy + PartialEq + std::fmt::Display + 'static {
    /// The family's address.
    type Addr: Copy + Eq + std::hash::Hash + std::fmt::Display + std::str::FromStr + Into<IpAddr>;
    /// "IPv4" or "IPv6".
    const FAMILY: &'static str;
    /// An interface address, as an example in messages.
    const EXAMPLE: &'static str;
    /// A network prefix, as an example in messages.
    const EXAMPLE_NET: &'static str;
    /// The longest prefix that leaves room for the two ends of a link.
    const LONGEST: u8;
    fn parse(text: &str) -> Result<Self, String>;
    fn of(addr: Self::Addr, prefix: u8) -> Self;
    fn addr(self) -> Self::Addr;
    fn prefix(self) -> u8;
    fn network(self) -> Self::Addr;
    fn contains(self, a: Self::Addr) -> bool;
    /// Why this cannot be an interface's address beyond its subnet's
    /// checks (a network or broadcast address, a /32), if it cannot.
    fn not_a_host(self) -> Option<String>;
}

impl Cidr for Ipv4Cidr {
    type Addr = Ipv4Addr;
    const FAMILY: &'static str = "IPv4";
    const EXAMPLE: &'static str = "198.18.0.1/24";
    const EXAMPLE_NET: &'static str = "198.18.0.0/24";
    const LONGEST: u8 = 31;
    fn parse(text: &str) -> Result<Self, String> {
        Ipv4Cidr::parse(text)
    }
    fn of(addr: Ipv4Addr, prefix: u8) -> Self {
        Ipv4Cidr { addr, prefix }
    }
    fn addr(self) -> Ipv4Addr {
        self.addr
    }
    fn prefix(self) -> u8 {
        self.prefix
    }
    fn network(self) -> Ipv4Addr {
        Ipv4Cidr::network(self)
    }
    fn contains(self, a: Ipv4Addr) -> bool {
        Ipv4Cidr::contains(self, a)
    }
    fn not_a_host(self) -> Option<String> {
        if self.prefix == 32 {
            return Some(format!(
                "'{self}' is a /32: it leaves no subnet to share with the other end of the link"
            ));
        }
        if self.prefix <= 30 {
            let broadcast = Ipv4Addr::from(u32::from(self.network()) | !self.mask());
            if self.addr == self.network() {
                return Some(format!(
                    "'{self}' is the network address of its subnet, not a host address"
                ));
            }
            if self.addr == broadcast {
                return Some(format!(
                    "'{self}' is the broadcast address of its subnet, not a host address"
                ));
            }
        }
        None
    }
}

impl Cidr for Ipv6Cidr {
    type Addr = Ipv6Addr;
    const FAMILY: &'static str = "IPv6";
    const EXAMPLE: &'static str = "2001:2:0:9::1/64";
    const EXAMPLE_NET: &'static str = "2001:2:0:9::/64";
    const LONGEST: u8 = 127;
    fn parse(text: &str) -> Result<Self, String> {
        Ipv6Cidr::parse(text)
    }
    fn of(addr: Ipv6Addr, prefix: u8) -> Self {
        Ipv6Cidr { addr, prefix }
    }
    fn addr(self) -> Ipv6Addr {
        self.addr
    }
    fn prefix(self) -> u8 {
        self.prefix
    }
    fn network(self) -> Ipv6Addr {
        Ipv6Cidr::network(self)
    }
    fn contains(self, a: Ipv6Addr) -> bool {
        Ipv6Cidr::contains(self, a)
    }
    fn not_a_host(self) -> Option<String> {
        if self.prefix == 128 {
            return Some(format!(
                "'{self}' is a /128: it leaves no subnet to share with the other end of the link"
            ));
        }
        if self.addr.is_multicast() || self.addr.is_unspecified() || self.addr.is_loopback() {
            return Some(format!("'{self}' is not a unicast address"));
        }
        // RFC 4291 §2.6.1; a /127 has no such address (RFC 6164).
        if self.prefix < 127 && self.addr == self.network() {
            return Some(format!(
                "'{self}' is the subnet-router anycast address of its subnet, not a host address"
            ));
        }
        None
    }
}

/// An address with its prefix, such as `"198.18.0.1/24"` or
/// `"2001:2::1/64"` (host bits allowed: an interface address).
pub(crate) fn cidr<C: Cidr>(v: &Value<'_>) -> Read<C> {
    match v.get_ref() {
        DeValue::String(s) => {
            C::parse(s).map_err(|e| format!("{e} (expected e.g. '{}')", C::EXAMPLE))
        }
        other => expected(
            &format!("an {} prefix string like '{}'", C::FAMILY, C::EXAMPLE_NET),
            other,
        ),
    }
}

/// A network prefix: a prefix whose host bits are all zero, as a subnet, a
/// pool or a route's destination must be (Linux refuses `ip route add
/// 10.0.0.1/24` for the same reason: it is ambiguous).
pub(crate) fn network<C: Cidr>(v: &Value<'_>) -> Read<C> {
    let c: C = cidr(v)?;
    if c.network() != c.addr() {
        return Err(format!(
            "'{c}' has host bits set: a network prefix must end in zero bits; did you mean '{}/{}'?",
            c.network(),
            c.prefix()
        ));
    }
    Ok(c)
}

/// The family of an address or prefix string: IPv6 if it has a ':'.
pub(crate) fn is_ipv6(v: &Value<'_>) -> bool {
    matches!(v.get_ref(), DeValue::String(s) if s.contains(':'))
}

/// A single IPv6 address, without a prefix length.
pub(crate) fn ipv6(v: &Value<'_>) -> Read<Ipv6Addr> {
    match v.get_ref() {
        DeValue::String(s) => {
            if s.contains('/') {
                return Err(format!(
                    "'{}' is not an IPv6 address: expected an address without '/length', e.g. '2001:2:0:1::2'",
                    quote(s)
                ));
            }
            s.trim().parse().map_err(|_| {
                format!(
                    "'{}' is not an IPv6 address (expected e.g. '2001:2:0:1::2')",
                    quote(s)
                )
            })
        }
        other => expected("an IPv6 address string like '2001:2:0:1::2'", other),
    }
}

/// A single IPv4 address, without a prefix length.
pub(crate) fn ipv4(v: &Value<'_>) -> Read<Ipv4Addr> {
    match v.get_ref() {
        DeValue::String(s) => {
            if s.contains('/') {
                return Err(format!(
                    "'{}' is not an IPv4 address: expected an address without '/length', e.g. '198.18.0.2'",
                    quote(s)
                ));
            }
            s.trim().parse().map_err(|_| {
                format!(
                    "'{}' is not an IPv4 address (expected e.g. '198.18.0.2')",
                    quote(s)
                )
            })
        }
        other => expected("an IPv4 address string like '198.18.0.2'", other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `x = <text>` and returns the value of `x`.
    fn val(text: &str) -> Value<'static> {
        let doc = format!("x = {text}");
        let leaked: &'static str = Box::leak(doc.into_boxed_str());
        let table = toml::de::DeTable::parse(leaked).unwrap().into_inner();
        table.get("x").unwrap().clone()
    }

    #[test]
    fn durations() {
        assert_eq!(duration(&val("'10ms'")), Ok(SimDuration::from_millis(10)));
        assert_eq!(duration(&val("0")), Ok(SimDuration::ZERO));
        assert_eq!(
            duration(&val("10")).unwrap_err(),
            "expected a duration string like '10ms', found integer 10"
        );
        assert!(duration(&val("'10 sm'"))
            .unwrap_err()
            .starts_with("'10 sm' is not a duration: unknown unit 'sm' (expected"));
        assert!(positive_duration(&val("'0s'")).is_err());
    }

    #[test]
    fn probabilities() {
        assert_eq!(probability(&val("0.25")), Ok(0.25));
        assert_eq!(probability(&val("1")), Ok(1.0));
        assert_eq!(probability(&val("'1%'")), Ok(0.01));
        assert_eq!(probability(&val("'0.5 %'")), Ok(0.005));
        assert!(probability(&val("1.5"))
            .unwrap_err()
            .contains("not a probability"));
        assert!(probability(&val("5")).unwrap_err().contains("write '5%'"));
        assert!(probability(&val("nan")).is_err());
        assert!(probability(&val("-0.1")).is_err());
        assert!(probability(&val("'150%'"))
            .unwrap_err()
            .contains("outside 0%..100%"));
        assert!(probability(&val("'x%'"))
            .unwrap_err()
            .contains("not a percentage"));
        assert!(probability(&val("'0.5'"))
            .unwrap_err()
            .contains("found string '0.5'"));
    }

    #[test]
    fn rates_sizes_and_integers() {
        assert_eq!(rate_or_unlimited(&val("'unlimited'")), Ok(None));
        assert_eq!(
            rate_or_unlimited(&val("'1Gbps'")),
            Ok(Some(DataRate::from_mbps(1000)))
        );
        assert!(rate(&val("'unlimited'")).is_err());
        assert_eq!(
            packet_rate_or_unlimited(&val("50000")),
            Ok(Some(PacketRate::from_pps(50_000)))
        );
        assert!(packet_rate_or_unlimited(&val("0")).is_err());
        assert_eq!(size(&val("1500")), Ok(Bytes::new(1500)));
        assert_eq!(size(&val("'64kB'")), Ok(Bytes::new(64_000)));
        assert!(size(&val("-1")).is_err());
        assert_eq!(size_or_unlimited(&val("'unlimited'")), Ok(None));
        assert_eq!(u32_in(&val("0x10"), 0, 100, "n"), Ok(16));
        assert_eq!(u32_in(&val("1_000"), 0, 10_000, "n"), Ok(1000));
        assert_eq!(
            u32_in(&val("9"), 68, 65535, "an MTU").unwrap_err(),
            "9 is out of range: expected an MTU from 68 to 65535"
        );
        assert!(u32_in(&val("'9'"), 0, 1, "n")
            .unwrap_err()
            .contains("found string '9'"));
    }

    #[test]
    fn addresses() {
        assert_eq!(
            cidr::<Ipv4Cidr>(&val("'198.18.0.1/24'"))
                .unwrap()
                .to_string(),
            "198.18.0.1/24"
        );
        assert!(cidr::<Ipv4Cidr>(&val("'198.18.0.1'"))
            .unwrap_err()
            .contains("missing '/length'"));
        assert!(network::<Ipv4Cidr>(&val("'198.18.0.1/24'"))
            .unwrap_err()
            .contains("'198.18.0.0/24'"));
        assert_eq!(ipv4(&val("'198.18.0.2'")), Ok(Ipv4Addr::new(198, 18, 0, 2)));
        assert!(ipv4(&val("'198.18.0.2/24'"))
            .unwrap_err()
            .contains("without '/length'"));
        assert!(ipv4(&val("'198.18.0.256'")).is_err());
        assert!(network::<Ipv6Cidr>(&val("'2001:2::1/48'"))
            .unwrap_err()
            .contains("did you mean '2001:2::/48'?"));
        assert!(cidr::<Ipv6Cidr>(&val("'2001:2::1/129'")).is_err());
        assert_eq!(
            Ipv6Cidr::parse("2001:2:0:9::/64").unwrap().not_a_host(),
            Some("'2001:2:0:9::/64' is the subnet-router anycast address of its subnet, not a host address".into())
        );
        assert_eq!(ipv6(&val("'2001:2::2'")), Ok("2001:2::2".parse().unwrap()));
        assert!(ipv6(&val("'2001:2::2/64'")).is_err());
    }

    #[test]
    fn choices_suggest() {
        let e = choice(&val("'rooter'"), &["host", "router", "switch"], "node kind").unwrap_err();
        assert_eq!(
            e,
            "'rooter' is not a known node kind: expected one of host, router, switch; did you mean 'router'?"
        );
    }
}
