//! Errors of setting up and running the real-world edge: each names what was
//! being done, to what, and — where we know it — how to fix it.

use std::io;

/// An error of the I/O layer.
#[derive(Debug, thiserror::Error)]
#[error("{what}{}{}", .source.as_ref().map(|e| format!(": {e}")).unwrap_or_default(), .hint.as_ref().map(|h| format!("\n  hint: {h}")).unwrap_or_default())]
pub struct Error {
    /// What was being done, e.g. "creating TAP device 'nl1a2b3c-0'".
    pub what: String,
    /// The OS error, if there was one.
    #[source]
    pub source: Option<io::Error>,
    /// How to fix it, if known.
    pub hint: Option<String>,
}

/// A result of the I/O layer.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error with no OS cause.
    pub fn msg(what: impl Into<String>) -> Self {
        Error {
            what: what.into(),
            source: None,
            hint: None,
        }
    }

    /// An error caused by an OS error.
    pub fn os(what: impl Into<String>, source: io::Error) -> Self {
        Error {
            what: what.into(),
            source: Some(source),
            hint: None,
        }
    }

    /// Whether it is a time-out (its OS cause says so): what was waited
    /// for may still come.
    pub fn timed_out(&self) -> bool {
        self.source
            .as_ref()
            .is_some_and(|e| e.kind() == io::ErrorKind::TimedOut)
    }

    /// Adds a hint on how to fix it.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// Adds context to `io::Result`s.
pub trait Context<T> {
    /// Wraps an OS error with what was being done.
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> Context<T> for io::Result<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::os(what(), e))
    }
}
