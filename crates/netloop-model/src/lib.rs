//! The network model of netloop: packets are real Ethernet frames.
//!
//! The model is sans-I/O and clock-free: time is an argument, nothing here
//! reads a wall clock or touches a file descriptor. The same model runs as fast
//! as possible (tests, plain simulation) and in real time (the I/O layer's
//! scheduler), and can exchange frames with real interfaces through
//! "external" ports that the I/O layer drives.

pub mod error;
pub mod spec;

pub use error::{BuildError, ItemRef};
pub use spec::NetworkSpec;
