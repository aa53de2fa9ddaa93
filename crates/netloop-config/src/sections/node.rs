//! `[[node]]`: hosts, routers and switches, and the settings of each kind.

use std::ops::Range;

use netloop_model::spec::{NodeKind, NodeSpec, RouterSpec, SwitchSpec};
use toml::de::DeTable;

use super::{check_name, peek_str, Kind, Loader, NodeInfo};
use crate::reader::{record_locations, Table};
use crate::value;

const KEYS: &[&str] = &[
    "name",
    "kind",
    "forwarding_rate",
    "forwarding_queue",
    "mac_table_size",
    "mac_aging",
];
const KINDS: &[&str] = &["host", "router", "switch"];
const ROUTER_KEYS: &[&str] = &["forwarding_rate", "forwarding_queue"];
const SWITCH_KEYS: &[&str] = &["mac_table_size", "mac_aging"];

pub(crate) fn read(l: &mut Loader<'_, '_>, index: usize, table: &DeTable<'_>, span: Range<usize>) {
    l.map.nodes.push(record_locations(l.d, &span, table));
    let what = match peek_str(table, "name") {
        Some(name) => format!("node '{}'", value::quote(name)),
        None => format!("node #{}", index + 1),
    };
    let mut t = Table::new(what, table, span.clone());

    let kind = t
        .req(l.d, "kind", "one of host, router, switch", |v| {
            value::choice(v, KINDS, "node kind")
        })
        .map(|k| match k {
            "router" => Kind::Router,
            "switch" => Kind::Switch,
            _ => Kind::Host,
        });
    t.check_keys(l.d, KEYS, |key| {
        let owner = if ROUTER_KEYS.contains(&key) {
            Kind::Router
        } else if SWITCH_KEYS.contains(&key) {
            Kind::Switch
        } else {
            return None;
        };
        match kind {
            Some(k) if k != owner => Some(format!(
                "'{key}' applies only to nodes of kind '{}', not '{}'",
                owner.name(),
                k.name()
            )),
            _ => None,
        }
    });

    let name = t.req(l.d, "name", "a unique name such as \"r1\"", |v| {
        let s = value::string(v)?;
        check_name(&s)?;
        Ok(s)
    });
    if let Some(name) = &name {
        if let Some(first) = l.node(name) {
            let message = format!(
                "duplicate node name '{name}': the first node with this name is on line {}",
                first.line
            );
            t.error(l.d, "name", message);
        } else {
            l.node_index.insert(name.clone(), l.nodes.len());
            l.nodes.push(NodeInfo {
                name: name.clone(),
                kind,
                line: l.d.locate(&span).line,
            });
        }
    }

    let node_kind = match kind {
        Some(Kind::Host) => Some(NodeKind::Host),
        Some(Kind::Router) => {
            let mut r = RouterSpec::default();
            if let Some(rate) = t.opt(l.d, "forwarding_rate", value::packet_rate_or_unlimited) {
                r.forwarding_rate = rate;
            }
            if let Some(q) = t.opt(l.d, "forwarding_queue", |v| {
                value::u32_in(v, 0, u32::MAX, "a number of packets")
            }) {
                r.forwarding_queue = q;
            }
            Some(NodeKind::Router(r))
        }
        Some(Kind::Switch) => {
            let mut s = SwitchSpec::default();
            if let Some(n) = t.opt(l.d, "mac_table_size", |v| {
                value::u32_in(v, 1, u32::MAX, "a number of entries")
            }) {
                s.mac_table_size = n;
            }
            if let Some(d) = t.opt(l.d, "mac_aging", value::positive_duration) {
                s.mac_aging = d;
            }
            Some(NodeKind::Switch(s))
        }
        None => None,
    };
    if let (Some(name), Some(kind), false) = (name, node_kind, t.failed) {
        l.spec.nodes.push(NodeSpec { name, kind });
    }
}
