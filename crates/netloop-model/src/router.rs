//! IPv4 router. (Scaffolding: being replaced by the full implementation.)

use crate::node::{NodeCtx, PortInfo};
use crate::routing::RoutingTable;
use crate::spec::RouterSpec;
use crate::stats::DropReason;
use crate::{Frame, PortId};

/// An IPv4 router.
pub struct Router {
    #[allow(dead_code)]
    ports: Vec<PortInfo>,
}

impl Router {
    /// A router with `ports`, settings `spec` and routing table `table`.
    pub fn new(
        _name: &str,
        ports: Vec<PortInfo>,
        _spec: &RouterSpec,
        _table: RoutingTable,
    ) -> Self {
        Router { ports }
    }
    /// Handles a frame arriving on `port`.
    pub fn receive(&mut self, _port: PortId, _frame: Frame, ctx: &mut NodeCtx) {
        ctx.drop_frame(DropReason::NoRoute);
    }
    /// Handles timer `token`.
    pub fn timer(&mut self, _token: u64, _ctx: &mut NodeCtx) {}
    /// Counters.
    pub fn stats(&self) -> &RouterStats {
        &RouterStats
    }
    /// Frames held inside the router.
    pub fn in_flight(&self) -> u64 {
        0
    }
}

/// Router counters.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RouterStats;
