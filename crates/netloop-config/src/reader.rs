//! Reading one table of the file as one item: typed fields with positions,
//! unknown and misplaced keys, and the errors collected along the way.
//!
//! [`Diag`] collects errors for the whole file; [`Table`] is one `[[node]]`,
//! `[[link]]`, … (or a sub-table such as `[link.a_to_b]`) being read. Every
//! error goes through here so that each carries the item, the field, and the
//! line and column of the value at fault. What the fields *mean* is the
//! business of the `sections` modules.

use std::collections::BTreeMap;
use std::ops::Range;

use toml::de::{DeTable, DeValue};

use crate::error::ConfigError;
use crate::source::{ItemLocations, LineIndex, Location};
use crate::suggest::did_you_mean;
use crate::value::{Read, Value};

/// The errors found so far in one file.
pub(crate) struct Diag<'s> {
    pub(crate) file: String,
    pub(crate) lines: LineIndex<'s>,
    pub(crate) errors: Vec<ConfigError>,
}

impl<'s> Diag<'s> {
    pub(crate) fn new(file: &str, text: &'s str) -> Self {
        Diag {
            file: file.to_string(),
            lines: LineIndex::new(text),
            errors: Vec::new(),
        }
    }

    pub(crate) fn locate(&self, span: &Range<usize>) -> Location {
        self.lines.locate(span.start)
    }

    /// Records an error at the start of `span`.
    pub(crate) fn error(
        &mut self,
        span: &Range<usize>,
        item: &str,
        field: Option<&str>,
        message: impl Into<String>,
    ) {
        let at = self.locate(span);
        self.errors.push(ConfigError {
            file: self.file.clone(),
            line: at.line,
            column: at.column,
            item: item.to_string(),
            field: field.map(String::from),
            message: message.into(),
        });
    }
}

/// One table being read as (part of) an item.
pub(crate) struct Table<'a, 'i> {
    /// The item's human name for messages, e.g. `link 'h1-r1'`.
    pub(crate) what: String,
    /// The key path of this table inside the item (`""`, `"a_to_b."`), so
    /// that errors and locations name `a_to_b.rate`, not just `rate`.
    prefix: String,
    pub(crate) table: &'a DeTable<'i>,
    /// The table's header (or, for an inline table, the whole table).
    pub(crate) span: Range<usize>,
    /// Whether any error was recorded through this table (or its children,
    /// whose flag the caller folds in): if so, the item is not built.
    pub(crate) failed: bool,
}

impl<'a, 'i> Table<'a, 'i> {
    pub(crate) fn new(what: String, table: &'a DeTable<'i>, span: Range<usize>) -> Self {
        Table {
            what,
            prefix: String::new(),
            table,
            span,
            failed: false,
        }
    }

    /// A nested table of this item, read with field names `key.sub`.
    pub(crate) fn child(&self, key: &str, table: &'a DeTable<'i>, span: Range<usize>) -> Self {
        Table {
            what: self.what.clone(),
            prefix: format!("{}{key}.", self.prefix),
            table,
            span,
            failed: false,
        }
    }

    /// The full key path of `key` (`a_to_b.rate`).
    pub(crate) fn path(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    pub(crate) fn get(&self, key: &str) -> Option<&'a Value<'i>> {
        self.table.get(key)
    }

    pub(crate) fn has(&self, key: &str) -> bool {
        self.table.contains_key(key)
    }

    /// The keys present, with their spans, in file order.
    pub(crate) fn keys(&self) -> Vec<(&'a str, Range<usize>)> {
        let mut keys: Vec<_> = self
            .table
            .iter()
            .map(|(k, _)| (k.get_ref().as_ref(), k.span()))
            .collect();
        keys.sort_by_key(|(_, span)| span.start);
        keys
    }

    /// Records an error about field `key` at `span`.
    pub(crate) fn error_at(
        &mut self,
        d: &mut Diag<'_>,
        span: &Range<usize>,
        key: Option<&str>,
        message: impl Into<String>,
    ) {
        self.failed = true;
        let field = key.map(|k| self.path(k));
        d.error(span, &self.what, field.as_deref(), message);
    }

    /// Records an error about field `key`, at its value.
    pub(crate) fn error(&mut self, d: &mut Diag<'_>, key: &str, message: impl Into<String>) {
        let span = self
            .get(key)
            .map(|v| v.span())
            .unwrap_or_else(|| self.span.clone());
        self.error_at(d, &span, Some(key), message);
    }

    /// Records an error about the item as a whole, at its header.
    pub(crate) fn error_item(&mut self, d: &mut Diag<'_>, message: impl Into<String>) {
        let span = self.span.clone();
        self.error_at(d, &span, None, message);
    }

    /// Reads optional field `key` with `read`. `None` if absent or invalid
    /// (the error is recorded).
    pub(crate) fn opt<T>(
        &mut self,
        d: &mut Diag<'_>,
        key: &str,
        read: impl FnOnce(&Value<'i>) -> Read<T>,
    ) -> Option<T> {
        let v = self.get(key)?;
        match read(v) {
            Ok(x) => Some(x),
            Err(message) => {
                self.error_at(d, &v.span(), Some(key), message);
                None
            }
        }
    }

    /// Reads required field `key`; if it is missing, says so at the item's
    /// header, with `hint` on what to write.
    pub(crate) fn req<T>(
        &mut self,
        d: &mut Diag<'_>,
        key: &str,
        hint: &str,
        read: impl FnOnce(&Value<'i>) -> Read<T>,
    ) -> Option<T> {
        if !self.has(key) {
            let message = format!("missing required field '{}' ({hint})", self.path(key));
            self.error_item(d, message);
            return None;
        }
        self.opt(d, key, read)
    }

    /// Reports every key that is not in `known` (with the closest known
    /// name), and every known key for which `misplaced` returns a reason it
    /// doesn't belong here (a router key on a host, `rate` on a ping).
    pub(crate) fn check_keys(
        &mut self,
        d: &mut Diag<'_>,
        known: &[&str],
        misplaced: impl Fn(&str) -> Option<String>,
    ) {
        for (key, span) in self.keys() {
            if !known.contains(&key) {
                // A suggestion is enough when there is one; otherwise list
                // what is allowed here.
                let hint = did_you_mean(key, known.iter().copied());
                let hint = if hint.is_empty() {
                    format!("; known fields are: {}", known.join(", "))
                } else {
                    hint
                };
                let within = match self.prefix.strip_suffix('.') {
                    Some(table) => format!(" in '{table}'"),
                    None => String::new(),
                };
                let message = format!("unknown field '{}'{within}{hint}", crate::value::quote(key));
                self.error_at(d, &span, None, message);
            } else if let Some(reason) = misplaced(key) {
                self.error_at(d, &span, Some(key), reason);
            }
        }
    }

    /// A sub-table in field `key` (`[link.a_to_b]` or an inline table), or
    /// an error if `key` holds something else.
    pub(crate) fn sub_table(
        &mut self,
        d: &mut Diag<'_>,
        key: &str,
        example: &str,
    ) -> Option<Table<'a, 'i>> {
        let v = self.get(key)?;
        match v.get_ref() {
            DeValue::Table(t) => Some(self.child(key, t, v.span())),
            other => {
                let message = format!(
                    "expected a table like {example}, found {}",
                    crate::value::describe(other)
                );
                self.error_at(d, &v.span(), Some(key), message);
                None
            }
        }
    }
}

/// Records where an item and each of its fields are, recursing into
/// sub-tables so that `a_to_b.rate` and `queue.packets` have positions too.
pub(crate) fn record_locations(
    d: &Diag<'_>,
    span: &Range<usize>,
    table: &DeTable<'_>,
) -> ItemLocations {
    let mut fields = BTreeMap::new();
    record_fields(d, "", table, &mut fields);
    ItemLocations {
        at: d.locate(span),
        fields,
    }
}

fn record_fields(
    d: &Diag<'_>,
    prefix: &str,
    table: &DeTable<'_>,
    out: &mut BTreeMap<String, Location>,
) {
    for (k, v) in table.iter() {
        let path = format!("{prefix}{}", k.get_ref());
        out.insert(path.clone(), d.locate(&v.span()));
        match v.get_ref() {
            DeValue::Table(sub) => record_fields(d, &format!("{path}."), sub, out),
            // Elements by index, so that an error about one endpoint's
            // address can point at that entry: `addresses.1`.
            DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    out.insert(format!("{path}.{i}"), d.locate(&item.span()));
                }
            }
            _ => {}
        }
    }
}
