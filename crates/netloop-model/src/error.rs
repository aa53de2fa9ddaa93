//! Errors from building a network out of a [`crate::spec::NetworkSpec`].
//!
//! A [`BuildError`] names the item (by its index in the spec, so a front end
//! can point at the line that declared it), the field if one is to blame, and
//! what is wrong. `netloop-config` turns it into a file:line message.

/// Which item of the spec an error is about (index into the spec's vectors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemRef {
    /// The run settings.
    Run,
    /// `spec.nodes[i]`.
    Node(usize),
    /// `spec.links[i]`.
    Link(usize),
    /// `spec.routes[i]`.
    Route(usize),
    /// `spec.traffic[i]`.
    Traffic(usize),
    /// `spec.events[i]`.
    Event(usize),
    /// `spec.endpoints[i]`.
    Endpoint(usize),
    /// `spec.helics`.
    Helics,
}

/// A spec that can't be built, and why.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{what}{}: {message}", field.map(|f| format!(", field '{f}'")).unwrap_or_default())]
pub struct BuildError {
    /// The item at fault.
    pub item: ItemRef,
    /// A human name for the item, e.g. "link 'r1-r2'".
    pub what: String,
    /// The field at fault, if one is (e.g. "address", "to").
    pub field: Option<&'static str>,
    /// What is wrong, including the value and what was expected.
    pub message: String,
}
