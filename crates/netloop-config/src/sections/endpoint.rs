//! `[[endpoint]]`: message endpoints, UDP or TCP sockets on simulated hosts
//! through which a co-simulation or a Python script sends and receives
//! messages; and `[helics]`: netloop as a federate of a HELICS co-simulation.
//!
//! Whether a `to` that is not an address names an endpoint of the same
//! protocol, and whether two endpoints share a host's port, are checked here; whether the host has an
//! address is the model's check (`netloop_model::Simulation::build`).

use std::collections::HashMap;
use std::ops::Range;

use netloop_core::SimDuration;
use netloop_model::spec::{EndpointTarget, HelicsSpec, MessageEndpointSpec, Transport};
use toml::de::DeTable;

use super::{check_name, peek_str, Kind, Loader};
use crate::reader::{record_locations, Table};
use crate::value::{self, quote};

const KEYS: &[&str] = &["name", "host", "port", "protocol", "to", "federate"];

/// The keys of `[helics]`.
const HELICS_KEYS: &[&str] = &["name", "core", "broker", "init", "timeout", "step"];

/// HELICS's core types (`helicsFederateInfoSetCoreTypeFromString`).
const CORES: &[&str] = &[
    "zmq",
    "zmq_ss",
    "tcp",
    "tcp_ss",
    "udp",
    "ipc",
    "interprocess",
    "inproc",
    "test",
    "mpi",
    "default",
];

/// Reads every `[[endpoint]]`, then checks the `to` that name endpoints.
pub(crate) fn read_all(l: &mut Loader<'_, '_>, tables: &[(&DeTable<'_>, Range<usize>)]) {
    // Endpoint name → (line, protocol if it was read).
    let mut names: HashMap<String, (usize, Option<Transport>)> = HashMap::new();
    let mut ports: HashMap<(String, Transport, u16), (String, usize)> = HashMap::new();
    // (target, span of `to`, endpoint, its protocol)
    let mut pending_to: Vec<(String, Range<usize>, String, Option<Transport>)> = Vec::new();
    for (index, (table, span)) in tables.iter().enumerate() {
        l.map.endpoints.push(record_locations(l.d, span, table));
        let what = match peek_str(table, "name") {
            Some(n) => format!("endpoint '{}'", quote(n)),
            None => format!("endpoint #{}", index + 1),
        };
        let mut t = Table::new(what, table, span.clone());
        t.check_keys(l.d, KEYS, |_| None);
        let line = l.line(span);
        let name = t.req(l.d, "name", "its name, e.g. \"pmu\"", |v| {
            let s = value::string(v)?;
            check_name(&s)?;
            Ok(s)
        });
        let protocol = t.opt(l.d, "protocol", |v| {
            match value::choice(v, &["udp", "tcp"], "endpoint protocol")? {
                "tcp" => Ok(Transport::Tcp),
                _ => Ok(Transport::Udp),
            }
        });
        let failed_protocol = t.get("protocol").is_some() && protocol.is_none();
        let protocol = protocol.unwrap_or_default();
        if let Some(n) = &name {
            if let Some((first, _)) = names.get(n) {
                t.error(
                    l.d,
                    "name",
                    format!("endpoint '{n}' is declared twice (first at line {first})"),
                );
            } else {
                names.insert(n.clone(), (line, (!failed_protocol).then_some(protocol)));
            }
        }
        let host = t.req(l.d, "host", "the simulated host it lives on", value::string);
        if let Some(h) = &host {
            match l.node(h).map(|n| n.kind) {
                None => {
                    let message = l.node_list(h);
                    t.error(l.d, "host", message);
                }
                Some(Some(Kind::Host)) | Some(None) => {}
                Some(Some(k)) => {
                    let hint = match k {
                        Kind::Namespace | Kind::Attached => {
                            " (a real host's program sends as itself: give its address and \
                             port as another endpoint's 'to')"
                        }
                        _ => "",
                    };
                    t.error(
                        l.d,
                        "host",
                        format!("'{h}' is a {}, not a simulated host{hint}", k.name()),
                    );
                }
            }
        }
        let port = t.req(l.d, "port", "its port, 1 to 65535", |v| {
            value::integer_in(v, 1, 65_535, "a port").map(|p| p as u16)
        });
        if let (Some(h), Some(p), Some(n)) = (&host, port, &name) {
            match ports.get(&(h.clone(), protocol, p)) {
                Some((other, other_line)) => {
                    let message = format!(
                        "'{h}' already has endpoint '{other}' (line {other_line}) on {} port {p}",
                        protocol.name().to_uppercase()
                    );
                    t.error(l.d, "port", message);
                }
                None => {
                    ports.insert((h.clone(), protocol, p), (n.clone(), line));
                }
            }
        }
        let to = t.opt(l.d, "to", |v| {
            let s = value::string(v)?;
            if let Ok(a) = s.parse::<std::net::SocketAddr>() {
                return Ok(EndpointTarget::Address(a));
            }
            if s.contains(':') {
                return Err(format!(
                    "'{}' is not an address and port (e.g. \"198.18.0.2:5000\" or \"[2001:2::2]:5000\")",
                    quote(&s)
                ));
            }
            Ok(EndpointTarget::Endpoint(s))
        });
        if let Some(EndpointTarget::Endpoint(target)) = &to {
            if let Some(v) = t.get("to") {
                let known = (!failed_protocol).then_some(protocol);
                pending_to.push((target.clone(), v.span(), t.what.clone(), known));
            }
        }
        let federate = t.opt(l.d, "federate", value::string);
        if let (Some(name), Some(node), Some(port), false) = (name, host, port, t.failed) {
            l.spec.endpoints.push(MessageEndpointSpec {
                name,
                node,
                port,
                protocol,
                to,
                federate,
            });
        }
    }
    for (target, span, what, protocol) in pending_to {
        if let Some((line, Some(theirs))) = names.get(&target) {
            if let Some(ours) = protocol.filter(|p| p != theirs) {
                let message = format!(
                    "'{}' (line {line}) is a {} endpoint and this one is {}: both ends of a \
                     message must use the same protocol",
                    quote(&target),
                    theirs.name().to_uppercase(),
                    ours.name().to_uppercase()
                );
                l.d.error(&span, &what, Some("to"), message);
            }
        }
        if !names.contains_key(&target) {
            let mut list: Vec<&str> = names.keys().map(String::as_str).collect();
            list.sort_unstable();
            let hint = crate::suggest::did_you_mean(&target, list.iter().copied());
            let message = format!(
                "'{}' is neither an endpoint nor an address and port (\"198.18.0.2:5000\"){hint}; endpoints are: {}",
                quote(&target),
                list.join(", ")
            );
            l.d.error(&span, &what, Some("to"), message);
        }
    }
}

/// Reads `[helics]`.
pub(crate) fn read_helics(l: &mut Loader<'_, '_>, table: &DeTable<'_>, span: Range<usize>) {
    l.map.helics = record_locations(l.d, &span, table);
    let mut t = Table::new("helics".to_string(), table, span);
    t.check_keys(l.d, HELICS_KEYS, |_| None);
    let name = t
        .opt(l.d, "name", |v| {
            let s = value::string(v)?;
            check_name(&s)?;
            Ok(s)
        })
        .unwrap_or_else(|| "netloop".to_string());
    let core = t
        .opt(l.d, "core", |v| {
            value::choice(v, CORES, "a HELICS core type")
        })
        .unwrap_or("zmq")
        .to_string();
    let broker = t.opt(l.d, "broker", value::string);
    let init = t.opt(l.d, "init", value::string).unwrap_or_default();
    let timeout = t
        .opt(l.d, "timeout", value::positive_duration)
        .unwrap_or(SimDuration::from_secs(30));
    let step = t
        .opt(l.d, "step", |v| {
            let d = value::positive_duration(v)?;
            if d < SimDuration::from_micros(100) || d > SimDuration::from_secs(1) {
                return Err(format!(
                    "{d} is not a real-time step here: expected 100us to 1s (default 1ms)"
                ));
            }
            Ok(d)
        })
        .unwrap_or(SimDuration::from_millis(1));
    if !t.failed {
        l.spec.helics = Some(HelicsSpec {
            name,
            core,
            broker,
            init,
            timeout,
            step,
        });
    }
}
