//! The steady state allocates nothing per packet (issue 17): once a run is
//! warm (neighbours resolved, queues, pools and tables grown), carrying
//! more packets through hosts, routers, switches and links costs no heap
//! allocation. Counted with a global allocator that tallies every
//! allocation this test binary makes; the test is alone in its binary, so
//! nothing else allocates meanwhile.
//!
//! What is exempt, and why: the measurements themselves (a flow's sample
//! set grows as samples come, as a histogram's buckets do), which are
//! presized here as a run presizes them.

// A counting allocator is a `GlobalAlloc`, which only unsafe code can be:
// it forwards each call to the system allocator unchanged.
#![allow(unsafe_code)]

mod common;

use common::*;
use netloop_core::{SimDuration, SimTime};
use netloop_model::spec::*;
use netloop_model::Simulation;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// Four senders — a switch — r1 — r2 — four receivers, each on its own
/// link; the middle link FQ-CoDel's; UDP constant-rate, TCP bulk and ping
/// flows across, over IPv4 and IPv6.
fn dumbbell() -> NetworkSpec {
    let mut nodes = vec![switch("sw"), router("r1"), router("r2")];
    let mut middle = dir(Some(1000), ms(5));
    middle.queue.discipline = QueueDiscipline::FqCodel(FqCodelSpec::default());
    let mut links = vec![
        link("sw", "r1", dir(Some(1000), ms(1))),
        link("r1", "r2", middle),
    ];
    let mut traffic = Vec::new();
    for k in 0..4 {
        let (s, d) = (format!("s{k}"), format!("d{k}"));
        nodes.push(host(&s));
        nodes.push(host(&d));
        links.push(link(&s, "sw", dir(Some(1000), ms(1))));
        links.push(link("r2", &d, dir(Some(1000), ms(1))));
        traffic.push(TrafficSpec {
            ipv6: k % 2 == 1,
            ..flow(&format!("u{k}"), &s, &d, cbr(20, 1000))
        });
        traffic.push(TrafficSpec {
            ipv6: k % 2 == 0,
            ..flow(
                &format!("t{k}"),
                &s,
                &d,
                TrafficKind::TcpBulk { bytes: None },
            )
        });
        traffic.push(TrafficSpec {
            ipv6: k % 2 == 0,
            ..flow(
                &format!("p{k}"),
                &d,
                &s,
                TrafficKind::Ping {
                    interval: ms(10),
                    size: netloop_core::Bytes::new(56),
                },
            )
        });
    }
    let mut s = spec(SimDuration::from_secs(4), 1, nodes, links, traffic);
    s.run.ipv6 = true;
    s
}

#[test]
fn a_warm_run_allocates_nothing_per_packet() {
    let mut sim = Simulation::build(&dumbbell()).expect("builds");
    sim.net.presize_samples(None);
    let warm = SimTime::ZERO + SimDuration::from_secs(1);
    sim.run_until(warm, 1 << 20, |_, _| true);
    let frames_before = sim.net.ledger().created_total();
    let before = allocations();
    let until = SimTime::ZERO + SimDuration::from_secs(2);
    sim.run_until(until, 1 << 20, |_, _| true);
    let made = allocations() - before;
    let frames = sim.net.ledger().created_total() - frames_before;
    println!("{made} allocations for {frames} frames");
    assert!(frames > 50_000, "the run carried traffic: {frames} frames");
    // Not one allocation per five thousand frames (the queue's and
    // tables' occasional growth may still happen; per packet, none).
    assert!(
        made * 5000 < frames,
        "{made} allocations for {frames} frames in the steady state"
    );
}
