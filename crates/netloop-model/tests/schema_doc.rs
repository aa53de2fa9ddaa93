//! Drift test between the results JSON and `docs/results-schema.md`.
//!
//! Runs a small network that exercises every kind of result (UDP, ping,
//! TCP bulk and request/response, traceroute, a switch, a router), walks
//! every key path of its JSON results and checks them against the field
//! tables of the document, in both directions, including each field's JSON
//! type. Map-valued objects (whose keys are data, such as drop reasons) are
//! not walked: their keys are checked against the document's key tables, and
//! those against the model's enums.
//!
//! The document's conventions that this test relies on:
//! - a field table has the header `| path | type | …`; each row's first cell
//!   is the field's full path in backticks, its second the JSON type
//!   (`integer`, `number`, `string`, `boolean`, `object`, `array`, or
//!   `map (K → integer)`, each optionally followed by `or null`);
//! - a key table's first header cell names the kind of key (`drop reason`,
//!   `origin`, `sink`), and each row's first cell is one key in backticks;
//! - paths: `a.b` for a key, `a[]` for the elements of an array, `<dir>` for
//!   both directions of a link, `nodes[kind=K].stats` for the counters of a
//!   node of kind K;
//! - the first ```json block is a real (abridged, still valid) example.

mod common;

use common::*;
use netloop_core::{Bytes, DataRate, SimDuration};
use netloop_model::results::{SCHEMA, SCHEMA_VERSION};
use netloop_model::spec::*;
use netloop_model::stats::{DropReason, Origin, Sink};
use netloop_model::Simulation;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

const DOC: &str = include_str!("../../../docs/results-schema.md");

/// What the document says.
#[derive(Debug, Default)]
struct Doc {
    /// Field path → documented JSON type.
    fields: BTreeMap<String, String>,
    /// Kind of key (the key table's first header cell) → keys.
    keys: BTreeMap<String, BTreeSet<String>>,
}

fn cells(line: &str) -> Vec<String> {
    let t = line.trim().trim_start_matches('|').trim_end_matches('|');
    t.split('|').map(|c| c.trim().to_string()).collect()
}

fn backticked(cell: &str) -> Option<&str> {
    cell.strip_prefix('`')?.strip_suffix('`')
}

fn parse_doc(doc: &str) -> Doc {
    let mut d = Doc::default();
    // The first header cell of the table being read, if any.
    let mut header: Option<String> = None;
    let mut in_code = false;
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code || !line.trim_start().starts_with('|') {
            header = None;
            continue;
        }
        let c = cells(line);
        let Some(h) = &header else {
            header = Some(c[0].to_lowercase());
            continue;
        };
        if c[0].starts_with("---") || c[0].starts_with(":--") {
            continue;
        }
        let Some(name) = backticked(&c[0]) else {
            continue;
        };
        if h == "path" {
            let ty = c.get(1).cloned().unwrap_or_default();
            let old = d.fields.insert(name.to_string(), ty);
            assert!(old.is_none(), "`{name}` is documented twice");
        } else {
            let new = d
                .keys
                .entry(h.clone())
                .or_default()
                .insert(name.to_string());
            assert!(new, "key `{name}` is listed twice under `{h}`");
        }
    }
    d
}

/// The JSON type of `v`, in the document's words.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The key kind of a documented `map (K → integer)` type.
fn map_key_kind(ty: &str) -> Option<String> {
    let inner = ty.strip_prefix("map (")?;
    let (k, _) = inner.split_once('→')?;
    Some(k.trim().to_lowercase())
}

/// Whether a value of JSON type `got` fits the documented type `ty`.
fn type_fits(ty: &str, got: &str) -> bool {
    let (base, nullable) = match ty.strip_suffix(" or null") {
        Some(b) => (b.trim(), true),
        None => (ty.trim(), false),
    };
    match got {
        "null" => nullable,
        "object" => base == "object" || base.starts_with("map ("),
        // JSON does not tell integers and floats apart; serde_json writes
        // f64 with a fraction, but a reader may see an integral value.
        "integer" => base == "integer" || base == "number",
        _ => base == got,
    }
}

/// What a walk of some results found.
#[derive(Debug, Default)]
struct Walk {
    /// Path → JSON types seen.
    types: BTreeMap<String, BTreeSet<&'static str>>,
    /// Map path → keys seen.
    map_keys: BTreeMap<String, BTreeSet<String>>,
}

impl Walk {
    fn value(&mut self, doc: &Doc, path: &str, v: &Value) {
        self.types
            .entry(path.to_string())
            .or_default()
            .insert(json_type(v));
        match v {
            Value::Object(m) => {
                let is_map = doc
                    .fields
                    .get(path)
                    .is_some_and(|t| map_key_kind(t).is_some());
                if is_map {
                    self.map_keys
                        .entry(path.to_string())
                        .or_default()
                        .extend(m.keys().cloned());
                } else {
                    self.children(doc, path, v);
                }
            }
            Value::Array(a) => {
                // Elements that are objects are documented by their fields
                // (`a[].x`), not as rows of their own (`a[]`).
                let p = format!("{path}[]");
                for e in a {
                    if e.is_object() && !doc.fields.contains_key(&p) {
                        self.children(doc, &p, e);
                    } else {
                        self.value(doc, &p, e);
                    }
                }
            }
            _ => {}
        }
    }

    fn children(&mut self, doc: &Doc, path: &str, v: &Value) {
        let Value::Object(m) = v else { return };
        for (k, c) in m {
            let seg = if path == "links[]" && (k == "a_to_b" || k == "b_to_a") {
                "<dir>"
            } else {
                k.as_str()
            };
            let p = if path.is_empty() {
                seg.to_string()
            } else {
                format!("{path}.{seg}")
            };
            if path == "nodes[]" && k == "stats" {
                // Counters depend on the node's kind.
                self.types.entry(p).or_default().insert(json_type(c));
                if c.is_object() {
                    let kind = m["kind"].as_str().expect("node kind");
                    let q = format!("nodes[kind={kind}].stats");
                    self.children(doc, &q, c);
                }
            } else {
                self.value(doc, &p, c);
            }
        }
    }
}

fn walk(doc: &Doc, v: &Value) -> Walk {
    let mut w = Walk::default();
    w.children(doc, "", v);
    w
}

/// Undocumented paths, type mismatches and unknown map keys in `w`.
fn forward_errors(doc: &Doc, w: &Walk, what: &str) -> Vec<String> {
    let mut errors = Vec::new();
    for (path, types) in &w.types {
        let Some(ty) = doc.fields.get(path) else {
            errors.push(format!("{what}: `{path}` ({types:?}) is not documented"));
            continue;
        };
        for t in types {
            if !type_fits(ty, t) {
                errors.push(format!(
                    "{what}: `{path}` is documented as `{ty}` but is {t}"
                ));
            }
        }
    }
    for (path, keys) in &w.map_keys {
        let kind = map_key_kind(&doc.fields[path]).unwrap();
        let Some(known) = doc.keys.get(&kind) else {
            errors.push(format!("`{path}`: no key table `| {kind} | …`"));
            continue;
        };
        for k in keys {
            if !known.contains(k) {
                errors.push(format!(
                    "{what}: key `{k}` of `{path}` is not a documented {kind}"
                ));
            }
        }
    }
    errors
}

fn network() -> NetworkSpec {
    let d = dir(Some(100), SimDuration::from_micros(50));
    // UDP overloads the 10 Mbit/s direction sw → h2 for 200 ms, so that the
    // drop maps have keys to check; TCP starts once its queue has drained, so
    // that the bulk transfer completes.
    let slow = DirectionSpec {
        queue: QueueSpec {
            packets: Some(20),
            ..QueueSpec::default()
        },
        ..dir(Some(10), SimDuration::from_micros(50))
    };
    let mut to_h2 = link("h2", "sw", d.clone());
    to_h2.b_to_a = slow;
    // A direction that follows a trace, for its fields.
    let mut to_r = link("sw", "r", d.clone());
    to_r.b_to_a = DirectionSpec {
        rate: None,
        trace: Some(netloop_model::trace::TraceSpec::Rates {
            source: "inline".into(),
            steps: vec![(SimDuration::ZERO, DataRate::from_mbps(100))],
        }),
        ..d.clone()
    };
    // The router is idle (it only hears ARP broadcasts), but its counters
    // must be documented too.
    let mut s = spec(
        SimDuration::from_secs(1),
        3,
        vec![host("h1"), host("h2"), switch("sw"), router("r")],
        vec![link("h1", "sw", d), to_h2, to_r],
        vec![
            TrafficSpec {
                stop: Some(ms(200)),
                ..flow(
                    "udp",
                    "h1",
                    "h2",
                    TrafficKind::UdpCbr {
                        rate: DataRate::from_mbps(12),
                        size: Bytes::new(1000),
                    },
                )
            },
            flow(
                "ping",
                "h2",
                "h1",
                TrafficKind::Ping {
                    interval: ms(100),
                    size: Bytes::new(56),
                },
            ),
            TrafficSpec {
                start: ms(300),
                ..flow(
                    "bulk",
                    "h2",
                    "h1",
                    TrafficKind::TcpBulk {
                        bytes: Some(Bytes::new(200_000)),
                    },
                )
            },
            TrafficSpec {
                start: ms(300),
                ..flow(
                    "rr",
                    "h1",
                    "h2",
                    TrafficKind::TcpRr {
                        request: Bytes::new(100),
                        response: Bytes::new(1000),
                        interval: Some(ms(50)),
                    },
                )
            },
            flow("trace", "h1", "h2", TrafficKind::Traceroute { max_hops: 4 }),
        ],
    );
    // An endpoint, so that the endpoints' fields appear (the test's run
    // sends nothing through it: its counters are zero, not absent).
    s.endpoints.push(MessageEndpointSpec {
        name: "pmu".into(),
        node: "h1".into(),
        port: 4000,
        protocol: Transport::Tcp,
        to: None,
        federate: None,
    });
    // Dual stack, so that routers' interfaces have IPv6 addresses.
    s.run.ipv6 = true;
    s
}

fn results_json() -> Value {
    let mut sim = Simulation::build(&network()).expect("builds");
    sim.run(1 << 20, |_, _| true);
    assert_conserved(&sim);
    serde_json::to_value(sim.results("afap", Some(1.0), Some("t".into()))).unwrap()
}

#[test]
fn every_result_field_is_documented_and_every_documented_field_exists() {
    let doc = parse_doc(DOC);
    assert!(
        doc.fields.len() > 50,
        "found only {} documented paths: has the table format changed?",
        doc.fields.len()
    );
    let json = results_json();
    let w = walk(&doc, &json);
    let mut errors = forward_errors(&doc, &w, "results");
    // The network above produces every field, each at least once with a
    // value (not null), so nothing documented may be missing: a documented
    // path that is never seen was renamed or removed.
    for path in doc.fields.keys() {
        // `realtime` is null in a run as fast as possible; its fields are
        // checked against a real-time run by netloop-io's own drift test.
        // `cosim` is there only when netloop ran as a HELICS federate
        // (tests/cosim checks its fields). `wall.partitions` is there only
        // in a run cut into partitions (docs/partitions.md lists its fields;
        // tests/partition.rs and the command line's tests read them).
        if path == "realtime"
            || path.starts_with("realtime.")
            || path == "cosim"
            || path == "wall.partitions"
        {
            continue;
        }
        match w.types.get(path) {
            None => errors.push(format!("`{path}` is documented but not in the results")),
            Some(t) if t.iter().all(|t| *t == "null") => errors.push(format!(
                "`{path}` is always null in the results: fix the test's network"
            )),
            Some(_) => {}
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn the_example_is_valid_documented_json_of_this_version() {
    let doc = parse_doc(DOC);
    let start = DOC.find("```json\n").expect("a ```json example") + "```json\n".len();
    let len = DOC[start..].find("```").expect("end of the example");
    let example: Value = serde_json::from_str(&DOC[start..start + len])
        .expect("the example is valid JSON (abridge it by removing whole elements)");
    assert_eq!(example["schema"], SCHEMA);
    assert_eq!(example["schema_version"], SCHEMA_VERSION);
    let errors = forward_errors(&doc, &walk(&doc, &example), "example");
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    assert!(
        DOC.contains(&format!("`schema_version` {SCHEMA_VERSION}")),
        "the document must say which schema_version it describes"
    );
}

fn serde_names<T: serde::Serialize>(all: &[T]) -> BTreeSet<String> {
    all.iter()
        .map(|x| {
            serde_json::to_value(x)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn key_tables_list_exactly_the_model_enums() {
    let doc = parse_doc(DOC);
    let keys = |kind: &str| doc.keys.get(kind).cloned().unwrap_or_default();

    let reasons: BTreeSet<String> = DropReason::ALL
        .iter()
        .map(|r| r.as_str().to_string())
        .collect();
    assert_eq!(keys("drop reason"), reasons, "drop reasons");
    // The JSON maps use as_str() (DropCounts) for drops: make sure serde's
    // names, should they ever be used instead, agree.
    assert_eq!(serde_names(&DropReason::ALL), reasons);

    // Origin and Sink have no `ALL`: these matches stop compiling when a
    // variant is added; add it to the list next to the match as well.
    let origins = [
        Origin::Host,
        Origin::Router,
        Origin::SwitchFlood,
        Origin::LinkDuplicate,
        Origin::Fragment,
        Origin::External,
    ];
    for o in origins {
        match o {
            Origin::Host
            | Origin::Router
            | Origin::SwitchFlood
            | Origin::LinkDuplicate
            | Origin::Fragment
            | Origin::External => {}
        }
    }
    assert_eq!(keys("origin"), serde_names(&origins), "origins");

    let sinks = [Sink::Host, Sink::Router, Sink::External];
    for s in sinks {
        match s {
            Sink::Host | Sink::Router | Sink::External => {}
        }
    }
    assert_eq!(keys("sink"), serde_names(&sinks), "sinks");

    // Every map field names a key table that exists.
    for (path, ty) in &doc.fields {
        if let Some(kind) = map_key_kind(ty) {
            assert!(
                doc.keys.contains_key(&kind),
                "`{path}` is a map keyed by `{kind}`, which has no key table"
            );
        }
    }
}
