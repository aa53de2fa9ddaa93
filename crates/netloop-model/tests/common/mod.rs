//! Helpers for building networks in code and inspecting frames in tests.
#![allow(dead_code)]

use netloop_core::{Bytes, DataRate, SimDuration, SimTime};
use netloop_model::network::{Tap, TapOrder};
use netloop_model::spec::*;
use std::sync::{Arc, Mutex};

pub fn ms(n: u64) -> SimDuration {
    SimDuration::from_millis(n)
}

pub fn host(name: &str) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        kind: NodeKind::Host,
    }
}

pub fn router(name: &str) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        kind: NodeKind::Router(RouterSpec::default()),
    }
}

pub fn switch(name: &str) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        kind: NodeKind::Switch(SwitchSpec::default()),
    }
}

/// An external node: an attached interface (the tests inject frames into
/// it and read its outbox; nothing real is opened).
pub fn attached(name: &str) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        kind: NodeKind::Attached(AttachedSpec {
            interface: format!("if-{name}"),
            force: false,
        }),
    }
}

/// a — b, both external nodes, joined by link "a-b" whose directions are
/// `dir`.
pub fn external_pair(dir: DirectionSpec, seed: u64) -> netloop_model::Simulation {
    let s = spec(
        SimDuration::from_secs(1),
        seed,
        vec![attached("a"), attached("b")],
        vec![link("a", "b", dir)],
        vec![],
    );
    netloop_model::Simulation::build(&s).expect("valid spec")
}

pub fn dir(rate_mbps: Option<u64>, delay: SimDuration) -> DirectionSpec {
    DirectionSpec {
        rate: rate_mbps.map(DataRate::from_mbps),
        delay,
        ..DirectionSpec::default()
    }
}

pub fn link(a: &str, b: &str, d: DirectionSpec) -> LinkSpec {
    LinkSpec {
        name: format!("{a}-{b}"),
        a: EndpointSpec {
            node: a.into(),
            address: None,
            address6: None,
            interface: None,
        },
        b: EndpointSpec {
            node: b.into(),
            address: None,
            address6: None,
            interface: None,
        },
        subnet: None,
        subnet6: None,
        a_to_b: d.clone(),
        b_to_a: d,
    }
}

pub fn flow(name: &str, from: &str, to: &str, kind: TrafficKind) -> TrafficSpec {
    TrafficSpec {
        name: name.into(),
        from: from.into(),
        to: to.into(),
        start: SimDuration::ZERO,
        stop: None,
        count: 1,
        kind,
        ipv6: false,
    }
}

pub fn cbr(mbps: u64, size: u64) -> TrafficKind {
    TrafficKind::UdpCbr {
        rate: DataRate::from_mbps(mbps),
        size: Bytes::new(size),
    }
}

pub fn spec(
    duration: SimDuration,
    seed: u64,
    nodes: Vec<NodeSpec>,
    links: Vec<LinkSpec>,
    traffic: Vec<TrafficSpec>,
) -> NetworkSpec {
    NetworkSpec {
        run: RunSpec {
            duration,
            seed,
            ..Default::default()
        },
        nodes,
        links,
        traffic,
        ..NetworkSpec::default()
    }
}

/// A frame seen by a tap.
#[derive(Clone, Debug)]
pub struct Seen {
    pub time: SimTime,
    pub order: TapOrder,
    pub dir: usize,
    pub rx: bool,
    pub data: Vec<u8>,
}

/// A tap that records every frame.
#[derive(Clone, Default)]
pub struct Recorder(pub Arc<Mutex<Vec<Seen>>>);

impl Tap for Recorder {
    fn frame(&mut self, at: TapOrder, dir: usize, rx: bool, data: &[u8]) {
        self.0.lock().unwrap().push(Seen {
            time: at.time,
            order: at,
            dir,
            rx,
            data: data.to_vec(),
        });
    }
}

impl Recorder {
    pub fn frames(&self) -> Vec<Seen> {
        self.0.lock().unwrap().clone()
    }
}

/// The netloop probe sequence number of a UDP frame (IPv4, no options).
pub fn probe_seq(frame: &[u8]) -> Option<u64> {
    if frame.len() < 14 + 20 + 8 + 20 || frame[12..14] != [0x08, 0x00] || frame[14 + 9] != 17 {
        return None;
    }
    let p = &frame[14 + 28..];
    Some(u64::from_be_bytes(p[4..12].try_into().unwrap()))
}

/// Asserts packet conservation holds.
pub fn assert_conserved(sim: &netloop_model::Simulation) {
    let c = sim.conservation();
    assert_eq!(c.unaccounted, 0, "packet conservation violated: {c:#?}");
}
