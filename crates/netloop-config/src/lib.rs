//! netloop's topology files: TOML in, a [`NetworkSpec`] out, and errors that
//! name the file, line, column, item and field.
//!
//! ```no_run
//! let loaded = netloop_config::load(std::path::Path::new("examples/dumbbell.toml"))
//!     .unwrap_or_else(|errors| {
//!         eprintln!("{errors}");
//!         std::process::exit(1)
//!     });
//! println!("{} nodes", loaded.spec.nodes.len());
//! ```
//!
//! The format is described in `docs/topology.md`. A tour of this crate:
//! - [`load`], [`parse_str`], [`parse_bytes`]: the entry points (`netloop
//!   check` and `netloop run` call [`load`]).
//! - `sections`: the schema — one module per top-level table (`[run]`,
//!   `[[node]]`, `[[link]]`, …), the layering of link parameters, and the
//!   checks between items (unknown nodes, duplicate names, address
//!   conflicts).
//! - `reader` and `value`: reading one table's fields and one value's
//!   quantity, with messages that quote the value and say what was expected.
//!   Quantities (`"10ms"`, `"1Gbps"`) are parsed by `netloop_core::units`.
//! - [`ConfigError`], [`ConfigErrors`]: what went wrong, every instance of it,
//!   sorted by line.
//! - [`SourceMap`]: where each item and field of the spec was written, so
//!   that errors found later by `netloop_model::Network::build` (which knows
//!   items only by index) still point at a line: [`SourceMap::located`].
//!
//! What this crate does *not* own: the spec types (`netloop_model::spec`,
//! the one contract between front ends and the model), automatic address
//! and route assignment, and checks that need them (the model's
//! `Network::build`).
//!
//! How it reads a file: the TOML parser's spanned document
//! ([`toml::de::DeTable`], whose values are [`toml::Spanned`]) is walked by
//! hand rather than deserialized with serde derive. serde stops at the first
//! error and knows nothing of "did you mean", cross references or layered
//! defaults; walking the tree lets one pass report every problem with its
//! position.

mod error;
mod reader;
mod sections;
mod source;
mod suggest;
mod value;

use std::path::Path;

use netloop_core::SimDuration;

pub use error::{ConfigError, ConfigErrors};
use netloop_model::NetworkSpec;
pub use source::{ItemLocations, Location, SourceMap};

use reader::Diag;

/// A loaded topology: the spec, and where each of its parts was written.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The network described by the file.
    pub spec: NetworkSpec,
    /// Positions of its items and fields, for errors found later.
    pub sources: SourceMap,
    /// The partition of each node (in spec order), if the file gives them
    /// (`partition` on every node); `None` for an automatic cut.
    pub partitions: Option<Vec<u32>>,
}

/// Settings given outside the file that replace its own, such as `netloop
/// run --duration`. They are applied before the file is checked, so that
/// the checks that depend on them (a traffic's start, a program's start or
/// an event's time against the run's end) see them, and the errors they
/// cause say where they came from.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// The run's duration, and what set it as the user wrote it (e.g.
    /// `"--duration"`), which errors name.
    pub duration: Option<(SimDuration, String)>,
}

/// Reads and checks the topology file at `path`. Errors name the file as
/// `path` displays.
pub fn load(path: &Path) -> Result<Loaded, ConfigErrors> {
    load_with(path, &Overrides::default())
}

/// [`load`], with settings given outside the file.
pub fn load_with(path: &Path, overrides: &Overrides) -> Result<Loaded, ConfigErrors> {
    let file = path.display().to_string();
    match std::fs::read(path) {
        Ok(bytes) => parse_bytes_with(&bytes, &file, overrides),
        Err(e) => Err(ConfigError {
            file,
            line: 0,
            column: 0,
            item: String::new(),
            field: None,
            message: format!("cannot read the file: {e}"),
        }
        .into()),
    }
}

/// Parses TOML, or returns its syntax errors. Only syntax errors are
/// reported when there are any: the parser's recovery guesses at what was
/// meant, and checking its guesses would add errors about things the user
/// never wrote.
fn parse_toml<'s>(
    d: &mut Diag<'s>,
    text: &'s str,
) -> Result<toml::Spanned<toml::de::DeTable<'s>>, ConfigErrors> {
    let (doc, syntax) = toml::de::DeTable::parse_recoverable(text);
    if syntax.is_empty() {
        return Ok(doc);
    }
    for e in syntax {
        let span = e.span().unwrap_or(0..0);
        let message = e.message().trim().replace('\n', "; ");
        d.error(&span, "", None, format!("invalid TOML: {message}"));
    }
    Err(ConfigErrors::new(std::mem::take(&mut d.errors)))
}

/// Checks topology text as if it were the file `file_name`.
pub fn parse_str(text: &str, file_name: &str) -> Result<Loaded, ConfigErrors> {
    parse_str_with(text, file_name, &Overrides::default())
}

/// [`parse_str`], with settings given outside the file.
pub fn parse_str_with(
    text: &str,
    file_name: &str,
    overrides: &Overrides,
) -> Result<Loaded, ConfigErrors> {
    let mut d = Diag::new(file_name, text);
    let doc = parse_toml(&mut d, text)?;
    let mut loader = sections::Loader::new(&mut d);
    loader.overrides = overrides.clone();
    loader.read(doc.get_ref());
    let partitions = loader
        .partitions
        .iter()
        .map(|(p, _)| *p)
        .collect::<Option<Vec<u32>>>()
        .filter(|p| !p.is_empty());
    let (spec, sources) = (loader.spec, loader.map);
    if d.errors.is_empty() {
        Ok(Loaded {
            spec,
            sources,
            partitions,
        })
    } else {
        Err(ConfigErrors::new(d.errors))
    }
}

/// Reads one link change given while a network runs (the Python API's
/// `link.set(...)`): `text` is a TOML document holding one `[[event]]` table
/// without `at`, checked exactly as an `[[event]]` of a topology file whose
/// links are `links` — the same messages, "did you mean" included — and
/// taking effect at once.
pub fn parse_link_change(
    text: &str,
    file_name: &str,
    links: &[String],
) -> Result<netloop_model::spec::LinkEventSpec, ConfigErrors> {
    let mut d = Diag::new(file_name, text);
    let doc = parse_toml(&mut d, text)?;
    let mut loader = sections::Loader::new(&mut d);
    loader.duration = None;
    loader.live = true;
    for name in links {
        loader
            .links
            .insert(name.clone(), sections::LinkInfo { line: 0 });
        loader.link_names.push(name.clone());
    }
    let events = loader.array_of("event", doc.get_ref().get("event"));
    let n = events.len();
    for (i, (t, span)) in events.iter().enumerate() {
        sections::event::read(&mut loader, i, t, span.clone());
    }
    let mut spec = loader.spec;
    if d.errors.is_empty() && n == 1 && spec.events.len() == 1 {
        Ok(spec.events.remove(0))
    } else {
        if d.errors.is_empty() {
            d.error(
                &(0..0),
                "",
                None,
                format!("expected exactly one [[event]] table, found {n}"),
            );
        }
        Err(ConfigErrors::new(d.errors))
    }
}

/// Checks topology bytes as if they were the file `file_name`; text that is
/// not UTF-8 is an error at the first bad byte (TOML files are UTF-8).
pub fn parse_bytes(bytes: &[u8], file_name: &str) -> Result<Loaded, ConfigErrors> {
    parse_bytes_with(bytes, file_name, &Overrides::default())
}

/// [`parse_bytes`], with settings given outside the file.
pub fn parse_bytes_with(
    bytes: &[u8],
    file_name: &str,
    overrides: &Overrides,
) -> Result<Loaded, ConfigErrors> {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse_str_with(text, file_name, overrides),
        Err(e) => {
            let good = &bytes[..e.valid_up_to()];
            // The prefix is valid UTF-8 by definition; lossy conversion is
            // only there so that this can't panic.
            let good = String::from_utf8_lossy(good);
            let at = source::LineIndex::new(&good).locate(good.len());
            Err(ConfigError {
                file: file_name.to_string(),
                line: at.line,
                column: at.column,
                item: String::new(),
                field: None,
                message: "the file is not valid UTF-8 text (TOML files must be UTF-8)".to_string(),
            }
            .into())
        }
    }
}
