//! `[run]`: how long to run, the seed, and the pool of automatic addresses.

use std::ops::Range;

use toml::de::DeTable;

use super::Loader;
use crate::reader::{record_locations, Table};
use crate::value;

/// The keys of `[run]`.
pub(crate) const KEYS: &[&str] = &["duration", "seed", "address_pool"];

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
    if let Some(pool) = t.opt(l.d, "address_pool", value::network) {
        if pool.prefix > 30 {
            t.error(l.d, "address_pool", format!("'{pool}' is too small to hold even one link's subnet: expected a prefix of /30 or shorter"));
        } else {
            l.spec.address_pool = Some(pool);
        }
    }
}
