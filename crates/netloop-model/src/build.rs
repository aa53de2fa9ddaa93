//! Building a network from a spec. (Scaffolding.)
use crate::network::{Event, Network};
use netloop_core::EventQueue;
/// A network and its event queue.
pub struct Simulation {
    /// The model.
    pub net: Network,
    /// Its events.
    pub queue: EventQueue<Event>,
}
