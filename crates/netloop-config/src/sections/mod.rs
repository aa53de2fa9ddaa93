//! The schema of a topology file: one module per top-level table, and the
//! [`Loader`] that reads them in dependency order and checks the references
//! between them.
//!
//! Order matters: `[run]` first (event and traffic times are checked against
//! its duration), `[defaults]` (links inherit from it), then nodes (links,
//! routes and traffic refer to them), links (events refer to them), routes,
//! traffic and events. Each section reads every item even after errors, so
//! that one run reports everything; an item that had an error is simply not
//! added to the spec, and the loader fails at the end.
//!
//! What lives elsewhere: the syntax of quantities (`crate::value`, on top of
//! `netloop_core::units`), positions and error plumbing (`crate::reader`,
//! `crate::source`), and the checks that need the built network — whether a
//! route's next hop is reachable, automatic address assignment — which are
//! `netloop_model::Network::build`'s.

mod endpoint;
pub(crate) mod event;
mod link;
mod node;
mod params;
mod route;
mod run;
mod trace;
mod traffic;

use std::collections::HashMap;
use std::ops::Range;

use netloop_core::SimDuration;
use netloop_model::NetworkSpec;
use toml::de::{DeTable, DeValue};

use crate::reader::Diag;
use crate::source::{Location, SourceMap};
use crate::suggest::did_you_mean;
use crate::value::{describe, quote};

pub(crate) use params::Params;

/// The top-level tables, in the order they are documented.
const TOP_LEVEL: &[&str] = &[
    "run", "defaults", "node", "link", "route", "traffic", "event", "endpoint", "helics",
];

/// What kind a node is, as far as other items care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Host,
    Router,
    Switch,
    Namespace,
    Attached,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Host => "host",
            Kind::Router => "router",
            Kind::Switch => "switch",
            Kind::Namespace => "namespace",
            Kind::Attached => "attached",
        }
    }
}

/// A declared node, kept even if the node itself had errors, so that a
/// link to it is not also reported as a link to nowhere.
pub(crate) struct NodeInfo {
    pub(crate) name: String,
    /// `None` if the kind was missing or wrong: checks that depend on it
    /// are skipped rather than guessed.
    pub(crate) kind: Option<Kind>,
    pub(crate) line: usize,
}

/// A declared link, kept for the same reason.
pub(crate) struct LinkInfo {
    pub(crate) line: usize,
}

/// Reads a parsed document into a spec, collecting every error.
pub(crate) struct Loader<'d, 's> {
    pub(crate) d: &'d mut Diag<'s>,
    pub(crate) spec: NetworkSpec,
    pub(crate) map: SourceMap,
    /// The run's duration, if it was valid (times are checked against it).
    pub(crate) duration: Option<SimDuration>,
    /// Link parameters from `[defaults.link]`.
    pub(crate) defaults: Params,
    pub(crate) nodes: Vec<NodeInfo>,
    pub(crate) node_index: HashMap<String, usize>,
    pub(crate) links: HashMap<String, LinkInfo>,
    /// Link names in declaration order, for "links are: …".
    pub(crate) link_names: Vec<String>,
    /// Explicit interface addresses seen so far.
    pub(crate) addresses: HashMap<std::net::IpAddr, link::AddressOwner>,
    /// Static routes seen so far, to report the same route twice.
    pub(crate) route_keys: route::RouteKeys,
    /// Reading a change to a running network (no `at`), not a file.
    pub(crate) live: bool,
    /// Settings given outside the file.
    pub(crate) overrides: crate::Overrides,
    /// Per node of the spec: the partition the file gives it, and where
    /// the node is.
    pub(crate) partitions: Vec<(Option<u32>, Range<usize>)>,
}

impl<'d, 's> Loader<'d, 's> {
    pub(crate) fn new(d: &'d mut Diag<'s>) -> Self {
        let map = SourceMap {
            file: d.file.clone(),
            ..SourceMap::default()
        };
        Loader {
            d,
            spec: NetworkSpec::default(),
            map,
            duration: Some(NetworkSpec::default().run.duration),
            defaults: Params::default(),
            nodes: Vec::new(),
            node_index: HashMap::new(),
            links: HashMap::new(),
            link_names: Vec::new(),
            addresses: HashMap::new(),
            route_keys: HashMap::new(),
            live: false,
            overrides: crate::Overrides::default(),
            partitions: Vec::new(),
        }
    }

    /// Reads the whole document.
    /// A file gives every node a partition or none: a cut given for part
    /// of the network leaves no rule for the rest.
    fn check_partitions(&mut self) {
        let given = self.partitions.iter().position(|(p, _)| p.is_some());
        let missing = self.partitions.iter().position(|(p, _)| p.is_none());
        if let (Some(g), Some(m)) = (given, missing) {
            let (g_name, m_name) = (&self.spec.nodes[g].name, &self.spec.nodes[m].name);
            let g_line = self.d.locate(&self.partitions[g].1).line;
            let message = format!(
                "missing, but node '{g_name}' (line {g_line}) has one: \
                 give every node a partition, or none for an automatic cut"
            );
            let span = self.partitions[m].1.clone();
            self.d.error(
                &span,
                &format!("node '{m_name}'"),
                Some("partition"),
                message,
            );
        }
    }

    pub(crate) fn read(&mut self, doc: &DeTable<'_>) {
        let mut unknown_tables = false;
        for (key, value) in doc.iter() {
            let key = key.get_ref().as_ref();
            if !TOP_LEVEL.contains(&key) {
                unknown_tables = true;
                // A table's span is its header; a plain value's is better
                // shown at its key, where the line starts.
                let span = match value.get_ref() {
                    DeValue::Table(_) | DeValue::Array(_) => value.span(),
                    _ => key_span(doc, key),
                };
                self.unknown_top_level(key, span);
            }
        }
        self.map.run.at = Location::START;
        if let Some(v) = doc.get("run") {
            if let Some(t) = self.table_of("run", v) {
                run::read(self, t, v.span());
            }
        }
        if let Some((d, _)) = &self.overrides.duration {
            self.duration = Some(*d);
            self.spec.run.duration = *d;
        }
        if let Some(v) = doc.get("defaults") {
            if let Some(t) = self.table_of("defaults", v) {
                params::read_defaults(self, t, v.span());
            }
        }
        let nodes = self.array_of("node", doc.get("node"));
        for (i, (t, span)) in nodes.iter().enumerate() {
            node::read(self, i, t, span.clone());
        }
        self.check_partitions();
        // A file without nodes describes nothing to run: most likely the
        // wrong file. (If it has tables the format does not know, such as
        // [[nodes]], those errors say what is wrong.)
        let declared = doc
            .get("node")
            .is_some_and(|v| !matches!(v.get_ref(), DeValue::Array(a) if a.is_empty()));
        if !declared && !unknown_tables {
            self.d.error(
                &(0..0),
                "",
                None,
                "the topology has no nodes: add [[node]] tables (hosts, routers, switches, \
                 real hosts) and [[link]] tables joining them; see docs/topology.md"
                    .to_string(),
            );
        }
        let links = self.array_of("link", doc.get("link"));
        for (i, (t, span)) in links.iter().enumerate() {
            link::read(self, i, t, span.clone());
        }
        for (i, (t, span)) in self.array_of("route", doc.get("route")).iter().enumerate() {
            route::read(self, i, t, span.clone());
        }
        let traffic = self.array_of("traffic", doc.get("traffic"));
        traffic::read_all(self, &traffic);
        for (i, (t, span)) in self.array_of("event", doc.get("event")).iter().enumerate() {
            event::read(self, i, t, span.clone());
        }
        let endpoints = self.array_of("endpoint", doc.get("endpoint"));
        endpoint::read_all(self, &endpoints);
        if let Some(v) = doc.get("helics") {
            if let Some(t) = self.table_of("helics", v) {
                endpoint::read_helics(self, t, v.span());
            }
        }
    }

    /// The run's end as errors name it: "the end of the run (10s)", or
    /// what set it outside the file.
    pub(crate) fn end_of_run(&self, end: SimDuration) -> String {
        match &self.overrides.duration {
            Some((_, from)) => format!("the end of the run ({end}, set by {from} {end})"),
            None => format!("the end of the run ({end})"),
        }
    }

    fn unknown_top_level(&mut self, key: &str, span: Range<usize>) {
        // A run setting written above every table is a common slip: say
        // where it belongs rather than just "unknown".
        let message = if run::KEYS.contains(&key) {
            format!("'{key}' belongs in the [run] table")
        } else {
            let hint = did_you_mean(key, TOP_LEVEL.iter().copied());
            let hint = if hint.is_empty() {
                format!("; the file may have: {}", TOP_LEVEL.join(", "))
            } else {
                hint
            };
            format!("unknown top-level table '{}'{hint}", quote(key))
        };
        self.d.error(&span, "", None, message);
    }

    /// A single table such as `[run]`.
    fn table_of<'a, 'i>(
        &mut self,
        key: &str,
        v: &'a crate::value::Value<'i>,
    ) -> Option<&'a DeTable<'i>> {
        match v.get_ref() {
            DeValue::Table(t) => Some(t),
            other => {
                let message = format!(
                    "'{key}' must be a table, written [{key}], found {}",
                    describe(other)
                );
                self.d.error(&v.span(), "", None, message);
                None
            }
        }
    }

    /// The tables of an array of tables such as `[[node]]`, with spans.
    pub(crate) fn array_of<'a, 'i>(
        &mut self,
        key: &str,
        v: Option<&'a crate::value::Value<'i>>,
    ) -> Vec<(&'a DeTable<'i>, Range<usize>)> {
        let Some(v) = v else { return Vec::new() };
        let DeValue::Array(items) = v.get_ref() else {
            let message = format!(
                "'{key}' must be an array of tables, written [[{key}]] (one per {key}), found {}",
                describe(v.get_ref())
            );
            self.d.error(&v.span(), "", None, message);
            return Vec::new();
        };
        let mut tables = Vec::new();
        for item in items.iter() {
            match item.get_ref() {
                DeValue::Table(t) => tables.push((t, item.span())),
                other => {
                    let message =
                        format!("each '{key}' must be a table, found {}", describe(other));
                    self.d.error(&item.span(), "", None, message);
                }
            }
        }
        tables
    }

    /// The 1-based line of `span`.
    pub(crate) fn line(&self, span: &Range<usize>) -> usize {
        self.d.locate(span).line
    }

    /// `nodes are: h1, r1, …` for messages about unknown node names.
    pub(crate) fn node_list(&self, wanted: &str) -> String {
        let names: Vec<&str> = self.nodes.iter().map(|n| n.name.as_str()).collect();
        name_list(wanted, "node", &names)
    }

    /// The same for link names.
    pub(crate) fn link_list(&self, wanted: &str) -> String {
        let names: Vec<&str> = self.link_names.iter().map(String::as_str).collect();
        name_list(wanted, "link", &names)
    }

    /// Looks up a node by name.
    pub(crate) fn node(&self, name: &str) -> Option<&NodeInfo> {
        self.node_index.get(name).map(|&i| &self.nodes[i])
    }
}

/// `'r9' is not a node; did you mean 'r1'? nodes are: h1, r1` (at most ten
/// names: enough to spot a typo without flooding the terminal).
fn name_list(wanted: &str, what: &str, names: &[&str]) -> String {
    const SHOWN: usize = 10;
    let hint = crate::suggest::closest(wanted, names.iter().copied())
        .map(|c| format!(" did you mean '{c}'?"))
        .unwrap_or_default();
    if names.is_empty() {
        return format!(
            "'{}' is not a {what}; the file declares no {what}s",
            quote(wanted)
        );
    }
    let mut list = names
        .iter()
        .take(SHOWN)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        list.push_str(&format!(", … ({} more)", names.len() - SHOWN));
    }
    format!(
        "'{}' is not a {what};{hint} {what}s are: {list}",
        quote(wanted)
    )
}

/// Checks a name of a node, link or flow. Names appear in messages, file
/// names (pcap, results) and, later, Linux interface and namespace names, so
/// they are kept to letters, digits, `-`, `_` and `.`; `#` in particular is
/// reserved for replicated flows (`video#0`).
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a name must not be empty".to_string());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(format!(
            "'{}' is not a valid name: '{}' is not allowed (use letters, digits, '-', '_' and '.')",
            quote(name),
            c.escape_default()
        ));
    }
    if name.len() > 64 {
        return Err(format!(
            "'{}' is not a valid name: longer than 64 characters",
            quote(name)
        ));
    }
    Ok(())
}

/// The span of `key` itself in `t`.
fn key_span(t: &DeTable<'_>, key: &str) -> Range<usize> {
    t.iter()
        .find(|(k, _)| k.get_ref() == key)
        .map(|(k, _)| k.span())
        .unwrap_or(0..0)
}

/// The string in field `key` of `t`, without checking anything: used to
/// name an item in messages before its fields are read.
pub(crate) fn peek_str<'a>(t: &'a DeTable<'_>, key: &str) -> Option<&'a str> {
    t.get(key).and_then(|v| v.get_ref().as_str())
}
