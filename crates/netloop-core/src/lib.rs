//! The simulation kernel of netloop: what every other crate builds on.
//!
//! A tour of the layers:
//! - [`time`]: integer-nanosecond simulated time ([`SimTime`]) and spans of it
//!   ([`SimDuration`]). Nothing here reads a wall clock.
//! - [`units`]: the other physical quantities as types ([`DataRate`], [`Bytes`],
//!   [`PacketRate`]), each parsed from text such as `"1Gbps"` or `"64kB"` with
//!   an error that says what was wrong ([`UnitError`]).
//! - [`queue`]: the event queue, with a total, deterministic order (time, then
//!   the scheduling source, then that source's own order: the same in one
//!   queue as across partitions) and the assertion that time never runs
//!   backwards.
//! - [`sched`]: the [`Model`] trait a simulation implements and the
//!   as-fast-as-possible scheduler that drives it. The real-time scheduler
//!   drives the same trait; only the way it waits for the next event differs.
//! - [`rng`]: one seeded random stream per component, derived from the run's
//!   seed and the component's stable name.
//! - [`frame`]: the packet buffer every layer passes around ([`Frame`]: an
//!   Ethernet frame or a GSO super-frame with its metadata), in buffers a
//!   per-thread pool gives back to the next frame.
//!
//! What this crate does *not* own: what packets mean, links and nodes
//! (`netloop-model`), topology files (`netloop-config`), and any I/O.
//!
//! Partitioning (later): a partition is one [`EventQueue`] plus the part of the
//! model it owns; partitions exchange events over links whose propagation delay
//! is the lookahead. Nothing here assumes a single queue per process.

pub mod frame;
pub mod queue;
pub mod rng;
pub mod sched;
pub mod time;
pub mod units;

pub use frame::Frame;
pub use queue::{EventQueue, Source, MAX_SOURCES};
pub use rng::RngStream;
pub use sched::{run_afap, Model, RunStats};
pub use time::{SimDuration, SimTime};
pub use units::{Bytes, DataRate, PacketRate, UnitError};
