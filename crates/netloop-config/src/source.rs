//! Where things are in a topology file: byte offsets to lines and columns, and
//! the [`SourceMap`] from every item and field of a [`NetworkSpec`] back to the
//! place in the file that declared it.
//!
//! The map is what lets an error found *after* loading — by
//! `netloop_model::Network::build`, which only knows item indices — still
//! point at a line. It records positions only; the values themselves live in
//! the spec.
//!
//! [`NetworkSpec`]: netloop_model::NetworkSpec

use std::collections::BTreeMap;

use netloop_model::{BuildError, ItemRef};

use crate::error::ConfigError;

/// A position in a file: 1-based line and column (in characters, not bytes,
/// so that a column is what an editor shows).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

impl Location {
    /// The start of the file.
    pub const START: Location = Location { line: 1, column: 1 };
}

/// Converts byte offsets of one text into [`Location`]s.
#[derive(Clone, Debug)]
pub(crate) struct LineIndex<'s> {
    text: &'s str,
    /// Byte offset of the start of each line.
    starts: Vec<usize>,
}

impl<'s> LineIndex<'s> {
    pub(crate) fn new(text: &'s str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { text, starts }
    }

    /// The location of byte `offset`. Offsets past the end, or inside a
    /// multi-byte character, are clamped rather than trusted: spans come from
    /// the TOML parser's error recovery and must never make us panic.
    pub(crate) fn locate(&self, offset: usize) -> Location {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset).max(1);
        let start = self.starts[line - 1];
        let column = self.text[start..offset].chars().count() + 1;
        Location { line, column }
    }
}

/// The positions of one item (a node, a link, …) and of its fields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ItemLocations {
    /// Where the item starts: its `[[node]]`/`[[link]]` header.
    pub at: Location,
    /// Where each field's value is, by key path as written in the file:
    /// `"delay"`, `"a_to_b.rate"`, `"queue.packets"`, `"loss.p"`; elements
    /// of arrays by index: `"addresses.1"`.
    pub fields: BTreeMap<String, Location>,
}

/// The location of every item and every field of a loaded [`NetworkSpec`],
/// indexed the same way as the spec's vectors (and as [`ItemRef`]).
///
/// [`NetworkSpec`]: netloop_model::NetworkSpec
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceMap {
    pub(crate) file: String,
    pub(crate) run: ItemLocations,
    pub(crate) nodes: Vec<ItemLocations>,
    pub(crate) links: Vec<ItemLocations>,
    pub(crate) routes: Vec<ItemLocations>,
    pub(crate) traffic: Vec<ItemLocations>,
    pub(crate) events: Vec<ItemLocations>,
    pub(crate) endpoints: Vec<ItemLocations>,
    pub(crate) helics: ItemLocations,
}

impl SourceMap {
    /// The file name given to the loader.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The positions of `item`, if the spec has it. The run settings always
    /// exist (at the start of the file when there is no `[run]` table).
    pub fn item(&self, item: ItemRef) -> Option<&ItemLocations> {
        match item {
            ItemRef::Run => Some(&self.run),
            ItemRef::Node(i) => self.nodes.get(i),
            ItemRef::Link(i) => self.links.get(i),
            ItemRef::Route(i) => self.routes.get(i),
            ItemRef::Traffic(i) => self.traffic.get(i),
            ItemRef::Event(i) => self.events.get(i),
            ItemRef::Endpoint(i) => self.endpoints.get(i),
            ItemRef::Helics => Some(&self.helics),
        }
    }

    /// Where `field` of `item` was written, trying the names the model might
    /// use for it (see [`SourceMap::located`]); `None` if the file doesn't
    /// set it.
    pub fn field(&self, item: ItemRef, field: &str) -> Option<Location> {
        let locs = self.item(item)?;
        field_candidates(item, field)
            .iter()
            .find_map(|name| locs.fields.get(name.as_str()).copied())
    }

    /// Turns an error from building the model into one that points into the
    /// file: at the field's value if the file sets that field, otherwise at
    /// the item's header (the value came from a default), and at the start
    /// of the file if the item index is unknown (which would be a bug in the
    /// caller, but is no reason to panic while reporting an error).
    ///
    /// The model names fields after the spec (`a.address`, `b`), the file
    /// after its keys (`addresses`, `endpoints`); the few names that differ
    /// are translated (`b.address` is the second entry of `addresses`), and
    /// a per-direction field (`a_to_b.delay`) that the file set for both
    /// directions at once (`delay`) is found there.
    pub fn located(&self, err: &BuildError) -> ConfigError {
        let at = err
            .field
            .and_then(|f| self.field(err.item, f))
            .or_else(|| self.item(err.item).map(|l| l.at))
            .unwrap_or(Location::START);
        ConfigError {
            file: self.file.clone(),
            line: at.line,
            column: at.column,
            item: err.what.clone(),
            field: err.field.map(String::from),
            message: err.message.clone(),
        }
    }
}

/// The key paths under which the model's field `field` of `item` may appear
/// in the file, best first.
fn field_candidates(item: ItemRef, field: &str) -> Vec<String> {
    let mut names = vec![field.to_string()];
    let alias: &[&str] = match (item, field) {
        (ItemRef::Link(_), "a" | "a.node") => &["endpoints.0", "endpoints"],
        (ItemRef::Link(_), "b" | "b.node") => &["endpoints.1", "endpoints"],
        (ItemRef::Link(_), "node") => &["endpoints"],
        (ItemRef::Link(_), "a.address") => &["addresses.0", "addresses"],
        (ItemRef::Link(_), "b.address") => &["addresses.1", "addresses"],
        (ItemRef::Link(_), "address") => &["addresses"],
        (ItemRef::Link(_), "jitter.amount") => &["jitter"],
        (ItemRef::Link(_), "jitter.distribution") => &["jitter_distribution"],
        (ItemRef::Link(_), "jitter.reorder") => &["reorder"],
        (ItemRef::Run, "pool") => &["address_pool"],
        (ItemRef::Endpoint(_), "node") => &["host"],
        (ItemRef::Node(_), "commands") => &["command"],
        (ItemRef::Event(_), "rate" | "delay" | "jitter" | "loss" | "corrupt" | "duplicate") => {
            &["action"]
        }
        _ => &[],
    };
    names.extend(alias.iter().map(|s| s.to_string()));
    for dir in ["a_to_b.", "b_to_a."] {
        if let Some(rest) = field.strip_prefix(dir) {
            names.push(rest.to_string());
            names.extend(field_candidates(item, rest).into_iter().skip(1));
        }
    }
    if let Some((_, last)) = field.rsplit_once('.') {
        names.push(last.to_string());
    }
    // A link parameter the model names without a direction may have been
    // set for one direction only.
    if matches!(item, ItemRef::Link(_)) && !field.contains('.') {
        names.push(format!("a_to_b.{field}"));
        names.push(format!("b_to_a.{field}"));
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_to_lines_and_columns() {
        let idx = LineIndex::new("ab\nçd = 1\n\nx");
        assert_eq!(idx.locate(0), Location { line: 1, column: 1 });
        assert_eq!(idx.locate(2), Location { line: 1, column: 3 });
        assert_eq!(idx.locate(3), Location { line: 2, column: 1 });
        // 'ç' is two bytes but one column.
        assert_eq!(idx.locate(5), Location { line: 2, column: 2 });
        // Inside 'ç': clamped back to its start, no panic.
        assert_eq!(idx.locate(4), Location { line: 2, column: 1 });
        assert_eq!(idx.locate(11), Location { line: 3, column: 1 });
        assert_eq!(idx.locate(999), Location { line: 4, column: 2 });
        assert_eq!(LineIndex::new("").locate(5), Location::START);
    }

    #[test]
    fn build_errors_point_at_the_field_or_the_item() {
        let at = |line, column| Location { line, column };
        let mut link = ItemLocations {
            at: at(10, 1),
            ..Default::default()
        };
        for (field, loc) in [
            ("delay", at(12, 9)),
            ("addresses", at(11, 13)),
            ("addresses.0", at(11, 14)),
            ("addresses.1", at(11, 30)),
            ("b_to_a.mtu", at(15, 7)),
        ] {
            link.fields.insert(field.into(), loc);
        }
        let map = SourceMap {
            file: "t.toml".into(),
            links: vec![link],
            ..Default::default()
        };
        let err = |field, item| BuildError {
            item,
            what: "link 'r1-r2'".into(),
            field,
            message: "bad".into(),
        };
        let e = map.located(&err(Some("a_to_b.delay"), ItemRef::Link(0)));
        assert_eq!((e.line, e.column), (12, 9));
        assert_eq!(
            e.to_string(),
            "t.toml:12:9: link 'r1-r2', field 'a_to_b.delay': bad"
        );
        let located = |field| {
            let e = map.located(&err(Some(field), ItemRef::Link(0)));
            (e.line, e.column)
        };
        assert_eq!(located("address"), (11, 13));
        assert_eq!(located("a.address"), (11, 14));
        assert_eq!(located("b.address"), (11, 30));
        assert_eq!(located("mtu"), (15, 7));
        // Not in the file: the item's header.
        assert_eq!(located("rate"), (10, 1));
        // An index the spec doesn't have: the start of the file.
        let e = map.located(&err(None, ItemRef::Link(7)));
        assert_eq!((e.line, e.column), (1, 1));
    }
}
