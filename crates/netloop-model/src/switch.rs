//! An Ethernet learning bridge (IEEE 802.1D without spanning tree).
//!
//! It learns which port each source MAC address lives behind, forwards
//! unicast frames to the learned port, and floods broadcast, multicast and
//! unknown destinations to every other port. The learning table is bounded
//! (the least recently refreshed entry is evicted) and entries age out, so a
//! flood of random source addresses fills the bound, not memory.
//!
//! Not modelled: spanning tree (a loop of switches floods forever, as it
//! would without STP), VLANs (tagged frames are forwarded like any other).

use netloop_core::SimTime;
use serde::Serialize;
use smoltcp::wire::EthernetAddress;
use std::collections::HashMap;

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
    table: HashMap<EthernetAddress, (PortId, SimTime)>,
    spec: SwitchSpec,
    /// Counters.
    pub stats: SwitchStats,
}

impl Switch {
    /// A switch with the given ports.
    pub fn new(ports: Vec<PortInfo>, spec: SwitchSpec) -> Self {
        Switch {
            ports,
            table: HashMap::new(),
            spec,
            stats: SwitchStats::default(),
        }
    }

    fn learn(&mut self, mac: EthernetAddress, port: PortId, now: SimTime) {
        if !mac.is_unicast() {
            return;
        }
        if let Some(e) = self.table.get_mut(&mac) {
            *e = (port, now);
            return;
        }
        if self.table.len() >= self.spec.mac_table_size as usize {
            // Full: evict the stalest entry. A linear scan, but only on
            // inserting a new address into a full table.
            if let Some(oldest) = self
                .table
                .iter()
                .min_by_key(|(m, (_, t))| (*t, m.0))
                .map(|(m, _)| *m)
            {
                self.table.remove(&oldest);
                self.stats.evicted += 1;
            }
        }
        if self.spec.mac_table_size > 0 {
            self.table.insert(mac, (port, now));
        }
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
            self.table
                .get(&dst)
                .filter(|(_, seen)| ctx.now.saturating_since(*seen) <= self.spec.mac_aging)
                .map(|(p, _)| *p)
        } else {
            None
        };
        match learned {
            Some(out) if out == port => ctx.drop_frame(DropReason::SwitchFiltered),
            Some(out) => {
                self.stats.forwarded += 1;
                ctx.send(out, frame);
            }
            None => {
                let others: Vec<PortId> = (0..self.ports.len()).filter(|&p| p != port).collect();
                let Some((&last, rest)) = others.split_last() else {
                    ctx.drop_frame(DropReason::SwitchFiltered);
                    return;
                };
                self.stats.flooded += 1;
                ctx.ledger.create_n(Origin::SwitchFlood, rest.len() as u64);
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
