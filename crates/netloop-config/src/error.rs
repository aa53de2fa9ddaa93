//! The errors a topology file can have, each pinned to a file, line and column.
//!
//! This module owns the error *types* and how they print. Finding the errors
//! is the job of the loader ([`crate::load`] and the `sections` it reads);
//! turning a model [`netloop_model::BuildError`] into a [`ConfigError`] is the
//! job of [`crate::SourceMap::located`].

use std::fmt;

/// One thing wrong with a topology file.
///
/// Prints as `file:line:column: item, field 'name': message`, the form
/// compilers use, so that editors and terminals can jump to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file name as given to the loader.
    pub file: String,
    /// 1-based line; 0 when the error is about the whole file (it could not
    /// be read, for instance).
    pub line: usize,
    /// 1-based column, in characters; 0 together with `line == 0`.
    pub column: usize,
    /// The item at fault, e.g. `"link 'r1-r2'"`; empty for errors that
    /// belong to no item (TOML syntax, an unknown top-level table).
    pub item: String,
    /// The field at fault, if one is (`"delay"`, `"a_to_b.rate"`).
    pub field: Option<String>,
    /// What is wrong: the value and what was expected.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: ", self.file)?;
        } else {
            write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
        }
        match (self.item.is_empty(), &self.field) {
            (false, Some(field)) => write!(f, "{}, field '{field}': ", self.item)?,
            (false, None) => write!(f, "{}: ", self.item)?,
            (true, Some(field)) => write!(f, "field '{field}': ")?,
            (true, None) => {}
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Every error found in a file, sorted by position.
///
/// The loader does not stop at the first problem: a user fixing a file wants
/// the whole list at once, the way a compiler reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigErrors {
    errors: Vec<ConfigError>,
}

impl ConfigErrors {
    /// Wraps `errors`, sorting them by line and column. Errors at the same
    /// position keep the order in which they were found.
    pub fn new(mut errors: Vec<ConfigError>) -> Self {
        errors.sort_by_key(|e| (e.line, e.column));
        ConfigErrors { errors }
    }
    /// The errors, sorted by position.
    pub fn errors(&self) -> &[ConfigError] {
        &self.errors
    }
    /// Iterates over the errors in order.
    pub fn iter(&self) -> std::slice::Iter<'_, ConfigError> {
        self.errors.iter()
    }
    /// How many errors there are (never 0 when returned by the loader).
    pub fn len(&self) -> usize {
        self.errors.len()
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> Self {
        ConfigErrors { errors: vec![e] }
    }
}

impl IntoIterator for ConfigErrors {
    type Item = ConfigError;
    type IntoIter = std::vec::IntoIter<ConfigError>;
    fn into_iter(self) -> Self::IntoIter {
        self.errors.into_iter()
    }
}

impl<'a> IntoIterator for &'a ConfigErrors {
    type Item = &'a ConfigError;
    type IntoIter = std::slice::Iter<'a, ConfigError>;
    fn into_iter(self) -> Self::IntoIter {
        self.errors.iter()
    }
}

impl fmt::Display for ConfigErrors {
    /// One error per line, no trailing newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(line: usize, column: usize, item: &str, field: Option<&str>) -> ConfigError {
        ConfigError {
            file: "x.toml".into(),
            line,
            column,
            item: item.into(),
            field: field.map(String::from),
            message: "bad".into(),
        }
    }

    #[test]
    fn prints_like_a_compiler() {
        assert_eq!(
            err(12, 9, "link 'r1-r2'", Some("delay")).to_string(),
            "x.toml:12:9: link 'r1-r2', field 'delay': bad"
        );
        assert_eq!(
            err(3, 1, "node 'h1'", None).to_string(),
            "x.toml:3:1: node 'h1': bad"
        );
        assert_eq!(err(3, 1, "", None).to_string(), "x.toml:3:1: bad");
        assert_eq!(err(0, 0, "", None).to_string(), "x.toml: bad");
    }

    #[test]
    fn sorted_by_position_one_per_line() {
        let all = ConfigErrors::new(vec![err(9, 1, "b", None), err(2, 5, "a", None)]);
        assert_eq!(all.to_string(), "x.toml:2:5: a: bad\nx.toml:9:1: b: bad");
        assert_eq!(all.len(), 2);
    }
}
