//! Simulated host. (Scaffolding: being replaced.)
use crate::node::NodeCtx;
use crate::{Frame, PortId};
/// A simulated host.
pub struct Host;
impl Host {
    /// Handles a frame.
    pub fn receive(&mut self, _port: PortId, _frame: Frame, ctx: &mut NodeCtx) {
        ctx.deliver(crate::stats::Sink::Host);
    }
    /// Handles a timer.
    pub fn timer(&mut self, _token: u64, _ctx: &mut NodeCtx) {}
    /// Frames held.
    pub fn in_flight(&self) -> u64 {
        0
    }
}
