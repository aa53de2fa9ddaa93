//! `[[traffic]]`: simulated flows between hosts, the keys of each kind, and
//! their defaults.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use netloop_core::{Bytes, SimDuration};
use netloop_model::spec::{TrafficKind, TrafficSpec};
use toml::de::DeTable;

use super::{check_name, peek_str, Kind, Loader};
use crate::reader::{record_locations, Table};
use crate::value::{self, quote};

const COMMON: &[&str] = &[
    "name", "kind", "from", "to", "start", "stop", "count", "ipv6",
];
const KINDS: &[&str] = &[
    "ping",
    "udp-cbr",
    "udp-poisson",
    "udp-onoff",
    "tcp-bulk",
    "tcp-rr",
    "traceroute",
];

/// The keys each kind takes besides the common ones.
fn kind_keys(kind: &str) -> &'static [&'static str] {
    match kind {
        "ping" => &["interval", "size"],
        "udp-cbr" | "udp-poisson" => &["rate", "size"],
        "udp-onoff" => &["rate", "size", "on", "off"],
        "tcp-bulk" => &["bytes"],
        "tcp-rr" => &["request", "response", "interval"],
        "traceroute" => &["max_hops"],
        _ => &[],
    }
}

/// Every key any kind takes, for "did you mean".
const ALL_KEYS: &[&str] = &[
    "name", "kind", "from", "to", "start", "stop", "count", "ipv6", "rate", "size", "on", "off",
    "interval", "bytes", "request", "response", "max_hops",
];

/// netloop's UDP payload starts with a sequence number and a send timestamp.
const UDP_HEADER: u64 = 20;
/// The largest UDP (or ICMP echo) payload in an IPv4 packet: 65535 − 20 − 8.
const MAX_PAYLOAD: u64 = 65507;

/// Reads all `[[traffic]]` tables. Names are settled first: an unnamed flow
/// is `<kind>-<n>`, numbered per kind from 1, skipping numbers whose name a
/// flow already has explicitly (so adding a named flow never renames
/// another to clash with it).
pub(crate) fn read_all(l: &mut Loader<'_, '_>, tables: &[(&DeTable<'_>, Range<usize>)]) {
    let explicit: HashSet<&str> = tables
        .iter()
        .filter_map(|(t, _)| peek_str(t, "name"))
        .collect();
    let mut counters: HashMap<String, usize> = HashMap::new();
    let mut first_line: HashMap<String, usize> = HashMap::new();
    for (table, span) in tables {
        let (name, named) = match peek_str(table, "name") {
            Some(n) => (n.to_string(), true),
            None => {
                let kind = peek_str(table, "kind")
                    .filter(|k| KINDS.contains(k))
                    .unwrap_or("traffic");
                let n = counters.entry(kind.to_string()).or_insert(0);
                loop {
                    *n += 1;
                    let candidate = format!("{kind}-{n}");
                    if !explicit.contains(candidate.as_str()) {
                        break (candidate, false);
                    }
                }
            }
        };
        let line = l.line(span);
        let duplicate_of = match first_line.get(&name) {
            Some(&first) => Some(first),
            None => {
                first_line.insert(name.clone(), line);
                None
            }
        };
        read(l, table, span.clone(), name, named, duplicate_of);
    }
}

fn read(
    l: &mut Loader<'_, '_>,
    table: &DeTable<'_>,
    span: Range<usize>,
    name: String,
    named: bool,
    duplicate_of: Option<usize>,
) {
    l.map.traffic.push(record_locations(l.d, &span, table));
    let mut t = Table::new(format!("traffic '{}'", quote(&name)), table, span);

    let kind = t.req(l.d, "kind", &format!("one of {}", KINDS.join(", ")), |v| {
        value::choice(v, KINDS, "traffic kind")
    });
    t.check_keys(l.d, ALL_KEYS, |key| match kind {
        Some(kind) if !COMMON.contains(&key) && !kind_keys(kind).contains(&key) => {
            let takes = kind_keys(kind);
            let takes = if takes.is_empty() {
                "it takes only the common fields".to_string()
            } else {
                format!("it takes: {}", takes.join(", "))
            };
            Some(format!(
                "'{key}' does not apply to traffic of kind '{kind}' ({takes})"
            ))
        }
        _ => None,
    });

    // Checked whenever present: a name that is not a string was not
    // `named` above, but is still a mistake.
    if let Some(Err(e)) = t
        .get("name")
        .map(|v| value::string(v).and_then(|s| check_name(&s)))
    {
        t.error(l.d, "name", e);
    }
    if let Some(first) = duplicate_of {
        let message = format!(
            "duplicate traffic name '{name}': the first flow with this name is on line {first}"
        );
        if named {
            t.error(l.d, "name", message);
        } else {
            t.error_item(l.d, message);
        }
    }

    let from = t.req(l.d, "from", "the sending host", value::string);
    let to = t.req(l.d, "to", "the receiving host", value::string);
    for (key, host) in [("from", &from), ("to", &to)] {
        let Some(host) = host else { continue };
        match l.node(host).map(|n| n.kind) {
            None => {
                let message = l.node_list(host);
                t.error(l.d, key, message);
            }
            Some(Some(kind @ (Kind::Namespace | Kind::Attached))) => {
                let message = format!(
                    "'{host}' is a real node (kind '{}'): simulated traffic runs only between simulated hosts (kind 'host'){}",
                    kind.name(),
                    if kind == Kind::Namespace {
                        "; run real programs on it with [[node.command]]"
                    } else {
                        ""
                    }
                );
                t.error(l.d, key, message);
            }
            Some(Some(kind)) if kind != Kind::Host => {
                t.error(
                    l.d,
                    key,
                    format!("'{host}' is a {}: traffic runs between hosts", kind.name()),
                );
            }
            Some(_) => {}
        }
    }
    if let (Some(a), Some(b)) = (&from, &to) {
        if a == b {
            t.error(
                l.d,
                "to",
                format!("traffic from '{a}' to itself: 'from' and 'to' must be different hosts"),
            );
        }
    }

    let start = t
        .opt(l.d, "start", value::duration)
        .unwrap_or(SimDuration::ZERO);
    let stop = t.opt(l.d, "stop", value::duration);
    if let Some(stop) = stop {
        if stop <= start {
            t.error(
                l.d,
                "stop",
                format!("stop ({stop}) must be after start ({start})"),
            );
        }
    }
    if let Some(end) = l.duration {
        if t.has("start") && start >= end {
            let message = match &l.overrides.duration {
                // The file was right; the override made it wrong: say so.
                Some((_, from)) => format!(
                    "starts at {start}, but {from} {end} ends the run, and so stops this \
                     traffic, at {end}: before it starts (expected a {from} longer than {start})"
                ),
                None => format!("starts at {start}, but the run ends at {end}"),
            };
            t.error(l.d, "start", message);
        }
    }
    // Each flow of a group gets its own ports: 65535 is a hard ceiling.
    let count = t
        .opt(l.d, "count", |v| {
            value::u32_in(v, 1, 65535, "a number of flows")
        })
        .unwrap_or(1);
    // Which kinds run over IPv6, and whether the network has it, are the
    // model's checks (the [run] table may come later in the file).
    let ipv6 = t.opt(l.d, "ipv6", value::boolean).unwrap_or(false);

    let traffic_kind = kind.and_then(|kind| read_kind(l, &mut t, kind));
    if let (Some(from), Some(to), Some(kind), false) = (from, to, traffic_kind, t.failed) {
        l.spec.traffic.push(TrafficSpec {
            name,
            from,
            to,
            start,
            stop,
            count,
            kind,
            ipv6,
        });
    }
}

/// The kind-specific fields, with their defaults.
fn read_kind(l: &mut Loader<'_, '_>, t: &mut Table<'_, '_>, kind: &str) -> Option<TrafficKind> {
    // An invalid value falls back to the default here, but the error is
    // recorded and the flow is not built.
    let udp_size = |t: &mut Table<'_, '_>, l: &mut Loader<'_, '_>| {
        t.opt(l.d, "size", |v| {
            payload(
                v,
                UDP_HEADER,
                "netloop's UDP payload carries a 20-byte sequence number and timestamp",
            )
        })
        .unwrap_or(Bytes::new(1000))
    };
    let rate = |t: &mut Table<'_, '_>, l: &mut Loader<'_, '_>| {
        t.req(
            l.d,
            "rate",
            &format!("{kind} needs a payload bit rate like \"10Mbps\""),
            value::rate,
        )
    };
    match kind {
        "ping" => {
            let interval = t
                .opt(l.d, "interval", value::positive_duration)
                .unwrap_or(SimDuration::from_secs(1));
            let size = t
                .opt(l.d, "size", |v| payload(v, 0, "an ICMP echo payload"))
                .unwrap_or(Bytes::new(56));
            Some(TrafficKind::Ping { interval, size })
        }
        "udp-cbr" | "udp-poisson" => {
            let rate = rate(t, l);
            let size = udp_size(t, l);
            let rate = rate?;
            Some(if kind == "udp-cbr" {
                TrafficKind::UdpCbr { rate, size }
            } else {
                TrafficKind::UdpPoisson { rate, size }
            })
        }
        "udp-onoff" => {
            let rate = rate(t, l);
            let size = udp_size(t, l);
            let on = t.req(
                l.d,
                "on",
                "the mean on-period, e.g. \"1s\"",
                value::positive_duration,
            );
            let off = t.req(
                l.d,
                "off",
                "the mean off-period, e.g. \"1s\"",
                value::positive_duration,
            );
            Some(TrafficKind::UdpOnOff {
                rate: rate?,
                size,
                on: on?,
                off: off?,
            })
        }
        "tcp-bulk" => {
            let bytes = t.opt(l.d, "bytes", positive_size);
            Some(TrafficKind::TcpBulk { bytes })
        }
        "tcp-rr" => {
            let request = t
                .opt(l.d, "request", positive_size)
                .unwrap_or(Bytes::new(100));
            let response = t
                .opt(l.d, "response", positive_size)
                .unwrap_or(Bytes::new(1000));
            let interval = t.opt(l.d, "interval", value::positive_duration);
            Some(TrafficKind::TcpRr {
                request,
                response,
                interval,
            })
        }
        _ => {
            let max_hops = t
                .opt(l.d, "max_hops", |v| value::u32_in(v, 1, 255, "a TTL"))
                .unwrap_or(30);
            Some(TrafficKind::Traceroute {
                max_hops: max_hops as u8,
            })
        }
    }
}

/// A datagram payload size in `min..=65507` bytes.
fn payload(v: &value::Value<'_>, min: u64, why: &str) -> value::Read<Bytes> {
    let size = value::size(v)?;
    if size.get() < min {
        return Err(format!(
            "{size} is too small: {why}, so expected at least {min}B"
        ));
    }
    if size.get() > MAX_PAYLOAD {
        return Err(format!(
            "{size} is too large: expected at most {MAX_PAYLOAD}B, the largest payload of one IPv4 datagram"
        ));
    }
    Ok(size)
}

/// A size of at least one byte.
fn positive_size(v: &value::Value<'_>) -> value::Read<Bytes> {
    let size = value::size(v)?;
    if size.get() == 0 {
        return Err("must be at least 1 byte".to_string());
    }
    Ok(size)
}
