//! netloop as a federate of a HELICS co-simulation.
//!
//! HELICS (<https://helics.org>) is the co-simulation framework of the
//! power-grid community: federates (a power-flow solver, a controller, a
//! market) exchange messages through a broker and advance in time only as
//! far as the broker grants. netloop joins as the federate that *moves* the
//! messages, as helics-ns3 does for ns-3: each of the topology's
//! `[[endpoint]]`s is registered as a HELICS endpoint of the same name, a
//! message another federate sends to it leaves the endpoint's simulated host
//! as a UDP datagram and crosses the simulated network, and what reaches an
//! endpoint is handed to the federate endpoint named by its `federate`, at
//! the simulated time it arrived (late, reordered or not at all as the
//! network made it). See `docs/cosimulation.md`.
//!
//! - [`api`]: the part of HELICS's C API netloop calls, loaded from
//!   `libhelics.so` at run time ([`api::Helics::load`] says where it looks).
//! - [`federate`]: a safe message federate on top of it.
//! - [`cosim`]: the loop that runs a [`netloop_model::Simulation`] as a
//!   federate, in simulated time.
//! - [`rti`]: the sender and returnee federates of the RTI benchmark.
//! - [`realtime`]: the federate beside a real-time run (real hosts), the
//!   federation kept to the wall clock.
//! - `watch`: the thread that notices a federate gone without leaving
//!   (killed), which HELICS itself may never notice.

pub mod api;
pub mod cosim;
pub mod federate;
pub mod realtime;
pub mod rti;
mod watch;

pub use api::Helics;
pub use cosim::{run, CosimError, CosimReport};
pub use federate::{Broker, Federate, HelicsError};
pub use realtime::{run_realtime, Meeting};
