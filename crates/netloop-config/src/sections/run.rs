//! `[run]`: how long to run, the seed, IPv6 on or off (and IPv4 off: an
//! IPv6-only network), the pools of
//! automatic addresses, the real-time scheduler's spin window, and static
//! neighbour tables.

use std::ops::Range;

use netloop_core::SimDuration;
use netloop_model::spec::{Ipv4Cidr, Ipv6Cidr, DEFAULT_SPIN};
use toml::de::DeTable;

use super::Loader;
use crate::reader::{record_locations, Table};
use crate::value;

/// The keys of `[run]`.
pub(crate) const KEYS: &[&str] = &[
    "duration",
    "seed",
    "address_pool",
    "spin",
    "ipv6",
    "address_pool6",
    "ipv4",
    "static_neighbours",
];

/// The longest spin window allowed: past a few milliseconds, spinning costs a
/// core and buys nothing that sleeping doesn't already give.
const MAX_SPIN: SimDuration = SimDuration::from_millis(10);

pub(crate) fn read(l: &mut Loader<'_, '_>, table: &DeTable<'_>, span: Range<usize>) {
    l.map.run = record_locations(l.d, &span, table);
    let mut t = Table::new("run".to_string(), table, span);
    t.check_keys(l.d, KEYS, |_| None);
    if t.has("duration") {
        l.duration = t.opt(l.d, "duration", value::positive_duration);
        if let Some(d) = l.duration {
            l.spec.run.duration = d;
        }
    }
    // TOML integers are signed 64-bit, so a seed is 0..=i64::MAX here; that
    // is plenty of seeds.
    if let Some(seed) = t.opt(l.d, "seed", |v| {
        value::integer_in(v, 0, i64::MAX.into(), "a seed")
    }) {
        l.spec.run.seed = seed as u64;
    }
    if let Some(spin) = t.opt(l.d, "spin", |v| {
        let d = value::duration(v)?;
        if d > MAX_SPIN {
            return Err(format!(
                "{d} is too long a spin window: the real-time scheduler would keep a core busy for that long before every event; expected 0s (never spin) to {MAX_SPIN} (default {DEFAULT_SPIN})"
            ));
        }
        Ok(d)
    }) {
        l.spec.run.spin = spin;
    }
    if let Some(pool) = t.opt(l.d, "address_pool", value::network::<Ipv4Cidr>) {
        if pool.prefix > 30 {
            t.error(l.d, "address_pool", format!("'{pool}' is too small to hold even one link's subnet: expected a prefix of /30 or shorter"));
        } else {
            l.spec.address_pool = Some(pool);
        }
    }
    if let Some(on) = t.opt(l.d, "ipv6", value::boolean) {
        l.spec.run.ipv6 = on;
    }
    if let Some(on) = t.opt(l.d, "ipv4", value::boolean) {
        if !on && !l.spec.run.ipv6 {
            t.error(
                l.d,
                "ipv4",
                "a network needs IPv4 or IPv6: with IPv4 off, add 'ipv6 = true' to [run]"
                    .to_string(),
            );
        } else if !on && l.spec.address_pool.is_some() {
            t.error(
                l.d,
                "address_pool",
                "an IPv4 pool in an IPv6-only network (ipv4 = false): remove it".to_string(),
            );
        } else {
            l.spec.run.ipv6_only = !on;
        }
    }
    if let Some(on) = t.opt(l.d, "static_neighbours", value::boolean) {
        l.spec.run.static_neighbours = on;
    }
    if let Some(pool) = t.opt(l.d, "address_pool6", value::network::<Ipv6Cidr>) {
        if pool.prefix > 64 {
            t.error(
                l.d,
                "address_pool6",
                format!("'{pool}' cannot hold a /64 per link: expected a prefix of /64 or shorter"),
            );
        } else if !l.spec.run.ipv6 {
            t.error(
                l.d,
                "address_pool6",
                "an IPv6 pool without IPv6: add 'ipv6 = true' to [run]".to_string(),
            );
        } else {
            l.spec.address_pool6 = Some(pool);
        }
    }
}
