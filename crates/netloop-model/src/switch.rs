//! An Ethernet learning bridge (IEEE 802.1D without spanning tree).
//!
//! It learns which port each source MAC address lives behind, forwards
//! unicast frames to the learned port, and floods broadcast, multicast and
//! unknown destinations to every other port. The learning table is bounded
//! (the least recently refreshed entry is evicted, in constant time: a flood
//! of new source addresses must not cost a scan of the table per frame) and
//! entries age out, so a flood of random source addresses fills the bound,
//! not memory.
//!
//! Not modelled: spanning tree (the builder refuses a loop of switches, which
//! without it would flood for ever), VLANs (tagged frames are forwarded like
//! any other).

use lru::LruCache;
use netloop_core::SimTime;
use serde::Serialize;
use smoltcp::wire::EthernetAddress;

use crate::link::ETH_HEADER;
use crate::node::{NodeCtx, PortInfo};
use crate::spec::SwitchSpec;
use crate::stats::{DropReason, Origin};
use crate::{Frame, PortId};

/// Switch counters.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SwitchStats {
    /// Frames forwarded to one learned port.
    pub forwarded: u64,
    /// Frames flooded to all other ports.
    pub flooded: u64,
    /// Table entries evicted because the table was full.
    pub evicted: u64,
}

/// A learning bridge.
pub struct Switch {
    ports: Vec<PortInfo>,
    /// Where each source address was last seen and when, in order of
    /// refresh. Bounded here by `mac_table_size` rather than by the cache's
    /// own capacity, which would allocate the whole table up front for every
    /// switch of a large topology.
    table: LruCache<EthernetAddress, (PortId, SimTime)>,
    spec: SwitchSpec,
    /// Counters.
    pub stats: SwitchStats,
}

impl Switch {
    /// A switch with the given ports.
    pub fn new(ports: Vec<PortInfo>, spec: SwitchSpec) -> Self {
        Switch {
            ports,
            table: LruCache::unbounded(),
            spec,
            stats: SwitchStats::default(),
        }
    }

    fn learn(&mut self, mac: EthernetAddress, port: PortId, now: SimTime) {
        let size = self.spec.mac_table_size as usize;
        if !mac.is_unicast() || size == 0 {
            return;
        }
        if let Some(e) = self.table.get_mut(&mac) {
            *e = (port, now);
            return;
        }
        // A new address in a full table pushes out the least recently
        // refreshed one.
        if self.table.len() >= size {
            self.table.pop_lru();
            self.stats.evicted += 1;
        }
        self.table.push(mac, (port, now));
    }

    /// Handles a frame arriving on `port`.
    pub fn receive(&mut self, port: PortId, frame: Frame, ctx: &mut NodeCtx) {
        if frame.len() < ETH_HEADER {
            ctx.drop_frame(DropReason::Malformed);
            return;
        }
        let dst = EthernetAddress::from_bytes(&frame[0..6]);
        let src = EthernetAddress::from_bytes(&frame[6..12]);
        self.learn(src, port, ctx.now);
        let learned = if dst.is_unicast() {
            // `peek`: being a destination does not refresh an entry.
            self.table
                .peek(&dst)
                .filter(|(_, seen)| ctx.now.saturating_since(*seen) <= self.spec.mac_aging)
                .map(|(p, _)| *p)
        } else {
            None
        };
        // A super-frame is switched whole and counts as its segments.
        let n = frame.segs();
        match learned {
            Some(out) if out == port => ctx.drop_n(DropReason::SwitchFiltered, n),
            Some(out) => {
                self.stats.forwarded += n;
                ctx.send(out, frame);
            }
            None => {
                let others: Vec<PortId> = (0..self.ports.len()).filter(|&p| p != port).collect();
                let Some((&last, rest)) = others.split_last() else {
                    ctx.drop_n(DropReason::SwitchFiltered, n);
                    return;
                };
                self.stats.flooded += n;
                ctx.ledger
                    .create_n(Origin::SwitchFlood, rest.len() as u64 * n);
                for &p in rest {
                    ctx.send(p, frame.clone());
                }
                ctx.send(last, frame);
            }
        }
    }

    /// Learned table size (for reports).
    pub fn table_len(&self) -> usize {
        self.table.len()
    }
}
