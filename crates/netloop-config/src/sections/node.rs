//! `[[node]]`: hosts, routers, switches, real hosts in namespaces and
//! attached interfaces, and the settings of each kind.

use std::ops::Range;

use netloop_core::SimDuration;
use netloop_model::spec::{
    AttachedSpec, CommandSpec, HostLink, NamespaceSpec, NodeKind, NodeSpec, ReadyProtocol,
    ReadySpec, RouterSpec, SwitchSpec,
};
use toml::de::{DeTable, DeValue};

use super::{check_name, peek_str, Kind, Loader, NodeInfo};
use crate::reader::{record_locations, Table};
use crate::value::{self, Read, Value};

const KEYS: &[&str] = &[
    "name",
    "kind",
    "forwarding_rate",
    "forwarding_queue",
    "mac_table_size",
    "mac_aging",
    "via",
    "command",
    "interface",
    "force",
    "partition",
];
/// The highest partition number a node may name (partitions are threads or
/// MPI ranks: far more than any run has).
const MAX_PARTITION: u32 = 65_535;
const KINDS: &[&str] = &["host", "router", "switch", "namespace", "attached"];
const ROUTER_KEYS: &[&str] = &["forwarding_rate", "forwarding_queue"];
const SWITCH_KEYS: &[&str] = &["mac_table_size", "mac_aging"];
const NAMESPACE_KEYS: &[&str] = &["via", "command"];
const ATTACHED_KEYS: &[&str] = &["interface", "force"];
const COMMAND_KEYS: &[&str] = &["cmd", "start", "wait", "ready", "ready_timeout"];

pub(crate) fn read(l: &mut Loader<'_, '_>, index: usize, table: &DeTable<'_>, span: Range<usize>) {
    l.map.nodes.push(record_locations(l.d, &span, table));
    let what = match peek_str(table, "name") {
        Some(name) => format!("node '{}'", value::quote(name)),
        None => format!("node #{}", index + 1),
    };
    let mut t = Table::new(what, table, span.clone());

    let kind = t
        .req(l.d, "kind", &format!("one of {}", KINDS.join(", ")), |v| {
            value::choice(v, KINDS, "node kind")
        })
        .map(|k| match k {
            "router" => Kind::Router,
            "switch" => Kind::Switch,
            "namespace" => Kind::Namespace,
            "attached" => Kind::Attached,
            _ => Kind::Host,
        });
    t.check_keys(l.d, KEYS, |key| {
        let owner = if ROUTER_KEYS.contains(&key) {
            Kind::Router
        } else if SWITCH_KEYS.contains(&key) {
            Kind::Switch
        } else if NAMESPACE_KEYS.contains(&key) {
            Kind::Namespace
        } else if ATTACHED_KEYS.contains(&key) {
            Kind::Attached
        } else {
            return None;
        };
        match kind {
            Some(k) if k != owner => Some(format!(
                "'{key}' applies only to nodes of kind '{}', not '{}'{}",
                owner.name(),
                k.name(),
                misplaced_hint(key, k)
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
        Some(Kind::Namespace) => {
            if let Some(name) = &name {
                // The name becomes part of the namespace's and its
                // devices' names (checked again when the network is built).
                if name.len() > 32 || name.contains('.') {
                    let message = format!(
                        "'{}' can't name a namespace host: use at most 32 letters, digits, '-' and '_' (no '.')",
                        value::quote(name)
                    );
                    t.error(l.d, "name", message);
                }
            }
            let via = t
                .opt(l.d, "via", |v| {
                    value::choice(v, &["veth", "tap"], "namespace link")
                })
                .map_or(HostLink::Veth, |v| match v {
                    "tap" => HostLink::Tap,
                    _ => HostLink::Veth,
                });
            let commands = read_commands(l, &mut t);
            Some(NodeKind::Namespace(NamespaceSpec { commands, via }))
        }
        Some(Kind::Attached) => {
            let interface = t.req(
                l.d,
                "interface",
                "the name of an existing interface, e.g. \"eth1\" or \"veth-a\"",
                interface_name,
            );
            let force = t.opt(l.d, "force", value::boolean).unwrap_or(false);
            interface.map(|interface| NodeKind::Attached(AttachedSpec { interface, force }))
        }
        None => None,
    };
    let partition = t.opt(l.d, "partition", |v| {
        value::u32_in(v, 0, MAX_PARTITION, "a partition number")
    });
    if let (Some(name), Some(kind), false) = (name, node_kind, t.failed) {
        l.spec.nodes.push(NodeSpec { name, kind });
        l.partitions.push((partition, span));
    }
}

/// What to do instead, for the misplaced keys that are easy to mistake for
/// a setting of the node's own kind.
fn misplaced_hint(key: &str, kind: Kind) -> &'static str {
    match (key, kind) {
        ("interface", Kind::Namespace) => {
            " (netloop creates a namespace host's interface itself; to use an existing interface, write kind = \"attached\")"
        }
        ("command", Kind::Host) => {
            " (a simulated host sends [[traffic]]; to run real programs, write kind = \"namespace\")"
        }
        ("command", Kind::Attached) => {
            " (netloop runs no programs behind an attached interface)"
        }
        _ => "",
    }
}

/// `[[node.command]]`: the programs of a namespace host, in order.
fn read_commands(l: &mut Loader<'_, '_>, t: &mut Table<'_, '_>) -> Vec<CommandSpec> {
    let Some(v) = t.get("command") else {
        return Vec::new();
    };
    let DeValue::Array(items) = v.get_ref() else {
        let message = format!(
            "expected one [[node.command]] table per program (or an array of tables like [{{ cmd = \"iperf3 -s\" }}]), found {}",
            value::describe(v.get_ref())
        );
        t.error(l.d, "command", message);
        return Vec::new();
    };
    let mut out = Vec::new();
    for item in items.iter() {
        let DeValue::Table(table) = item.get_ref() else {
            let message = format!(
                "expected a table like {{ cmd = \"iperf3 -s\" }}, found {}",
                value::describe(item.get_ref())
            );
            t.error_at(l.d, &item.span(), Some("command"), message);
            continue;
        };
        let mut c = t.child("command", table, item.span());
        c.check_keys(l.d, COMMAND_KEYS, |_| None);
        let cmd = c.req(
            l.d,
            "cmd",
            "the command line, run by /bin/sh -c, e.g. \"iperf3 -s\"",
            |v| {
                let s = value::string(v)?;
                if s.trim().is_empty() {
                    return Err(
                        "the command line is empty: expected a program to run, e.g. \"iperf3 -s\""
                            .into(),
                    );
                }
                Ok(s)
            },
        );
        let start = c.opt(l.d, "start", value::duration);
        if let (Some(start), Some(end)) = (start, l.duration) {
            if start > end {
                let message = format!("{start} is after {}", l.end_of_run(end));
                c.error(l.d, "start", message);
            }
        }
        let wait = c.opt(l.d, "wait", value::boolean).unwrap_or(false);
        let ready = c.opt(l.d, "ready", ready_condition);
        let timeout = c.opt(l.d, "ready_timeout", value::positive_duration);
        if ready.is_some() && start.is_some_and(|s| s > SimDuration::ZERO) {
            // The clock waits for a ready program only before it starts.
            c.error(
                l.d,
                "ready",
                "only a command that starts with the network (start = \"0s\", the default) can \
                 hold the run's start until it is ready; a later one would find the clock running",
            );
        }
        if timeout.is_some() && ready.is_none() {
            c.error(
                l.d,
                "ready_timeout",
                "ready_timeout is how long to wait for `ready`, which this command does not have",
            );
        }
        t.failed |= c.failed;
        if let Some(cmd) = cmd {
            out.push(CommandSpec {
                cmd,
                start: start.unwrap_or(SimDuration::ZERO),
                wait,
                ready: ready.map(|(protocol, port)| ReadySpec {
                    protocol,
                    port,
                    timeout: timeout.unwrap_or(ReadySpec::DEFAULT_TIMEOUT),
                }),
            });
        }
    }
    out
}

/// `ready = "tcp:5201"` or `"udp:5000"`: a transport and a local port.
fn ready_condition(v: &Value<'_>) -> Read<(ReadyProtocol, u16)> {
    let s = value::string(v)?;
    let expected = || {
        format!(
            "'{}' is not a readiness condition: expected \"tcp:PORT\" (a socket listening) or \
             \"udp:PORT\" (a socket bound), e.g. \"tcp:5201\"",
            value::quote(&s)
        )
    };
    let (proto, port) = s.split_once(':').ok_or_else(expected)?;
    let protocol = match proto.trim().to_ascii_lowercase().as_str() {
        "tcp" => ReadyProtocol::Tcp,
        "udp" => ReadyProtocol::Udp,
        _ => return Err(expected()),
    };
    match port.trim().parse::<u16>() {
        Ok(p) if p > 0 => Ok((protocol, p)),
        _ => Err(format!(
            "'{}' is not a port: expected 1 to 65535",
            value::quote(port.trim())
        )),
    }
}

/// The name of an existing interface, as Linux allows it: 1 to 15 bytes,
/// no '/', ':' or white space, not `.` or `..`.
pub(crate) fn interface_name(v: &Value<'_>) -> Read<String> {
    let s = value::string(v)?;
    if s.is_empty() {
        return Err("an interface name must not be empty".to_string());
    }
    if s.len() > 15 {
        return Err(format!(
            "'{}' is not an interface name: longer than 15 bytes (Linux's limit)",
            value::quote(&s)
        ));
    }
    if let Some(c) = s
        .chars()
        .find(|c| matches!(c, '/' | ':') || c.is_whitespace())
    {
        return Err(format!(
            "'{}' is not an interface name: '{}' is not allowed",
            value::quote(&s),
            c.escape_default()
        ));
    }
    if s == "." || s == ".." {
        return Err(format!("'{s}' is not an interface name"));
    }
    Ok(s)
}
