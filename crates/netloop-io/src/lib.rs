//! netloop's edge to the real world.
//!
//! The model (`netloop-model`) never touches the operating system; this crate
//! does everything that does:
//! - [`frameio`]: the one trait every real interface implements, and the
//!   counters of what crossed the boundary (or was lost at it);
//! - [`tap`]: TAP devices (a real host's interface is the far side of one);
//! - [`gso`]: cutting GSO super-frames into wire frames as the kernel does;
//! - [`packet`]: AF_PACKET sockets with memory-mapped rings on an existing
//!   interface (a physical NIC, or the root end of a veth pair);
//! - [`netns`], [`proc`]: network namespaces and the programs run in them,
//!   and [`ready`]: whether such a program has its server socket yet;
//! - [`registry`], [`session`]: a record of everything a run creates, so that
//!   it is removed at the end — or by `netloop clean` after a SIGKILL;
//! - [`clock`], [`rt`], [`rtio`], [`notify`]: the real-time scheduler that
//!   ties simulated time to CLOCK_MONOTONIC (the event thread), and the I/O
//!   thread that moves frames between the model and the interfaces;
//! - [`pcap`]: capture to pcap files with simulated timestamps, and
//!   [`pcapparts`]: the same for partitioned runs, merged from their parts;
//! - [`wakeup`]: how long this machine takes to wake a sleeping thread
//!   (`netloop bench wakeup`), the floor under a real-time run's latency;
//! - [`live`]: a whole real-time run — set up, programs on schedule, run,
//!   tear down, report.
//!
//! All `unsafe` code lives in [`sys`], behind safe wrappers.

pub mod clock;
pub mod error;
pub mod frameio;
pub use netloop_model::gso;
pub mod live;
pub mod memory;
pub mod netns;
pub mod notify;
pub mod packet;
pub mod pcap;
pub mod pcapparts;
pub mod proc;
pub mod ready;
pub mod registry;
pub mod rt;
pub mod rtio;
pub mod rtpart;
pub mod session;
#[allow(unsafe_code)]
pub mod sys;
pub mod tap;
pub mod wakeup;

pub use error::{Error, Result};
pub use frameio::{BoundaryCounters, FrameIo, RecvGso};
