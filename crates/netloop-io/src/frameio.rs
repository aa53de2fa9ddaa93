//! The boundary between the model and a real interface: one trait for every
//! kind of real interface, and the counters of what crossed it.

use netloop_model::{gso, Frame, Gso};
use serde::Serialize;
use std::io;
use std::os::fd::BorrowedFd;

/// What crossed one real interface's boundary, and what was lost at it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BoundaryCounters {
    /// Frames read from the interface (handed to the model).
    pub rx_frames: u64,
    /// Their bytes (Ethernet header included).
    pub rx_bytes: u64,
    /// Frames written to the interface.
    pub tx_frames: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Frames the kernel dropped before netloop could read them (AF_PACKET
    /// ring full: `tp_drops`; TAP: the device's rx/tx drop counters on
    /// netloop's side).
    pub rx_kernel_drops: u64,
    /// Frames netloop could not write (the device's queue was full, or the
    /// write failed).
    pub tx_drops: u64,
    /// Frames handed to the interface that it had still not sent when
    /// counted (at the end of a run: the device went away or stayed down).
    pub tx_unsent: u64,
    /// Frames that arrived larger than netloop's buffer (cut short; dropped).
    pub rx_truncated: u64,
    /// Frames dropped because they were not a valid Ethernet frame (shorter
    /// than a header).
    pub rx_malformed: u64,
    /// Frames whose TCP/UDP checksum the sender left to offload hardware
    /// and netloop completed (AF_PACKET only).
    pub rx_checksums_completed: u64,
    /// GSO super-frames read whole and cut into wire frames (each of which
    /// counts in `rx_frames`).
    pub rx_gso_frames: u64,
    /// GSO super-frames that could not be cut (a kind netloop does not cut,
    /// or headers that do not fit it): dropped.
    pub rx_gso_refused: u64,
    /// GSO super-frames written whole, for the kernel to cut (or for the
    /// receiving stack to take whole); each of their segments counts in
    /// `tx_frames`, and their wire bytes in `tx_bytes`.
    pub tx_gso_frames: u64,
}

impl BoundaryCounters {
    /// Frames lost at this boundary, in either direction.
    pub fn lost(&self) -> u64 {
        self.rx_kernel_drops
            + self.tx_drops
            + self.tx_unsent
            + self.rx_truncated
            + self.rx_gso_refused
    }
}

/// Cuts super-frame `frame` into its wire frames and hands each to `send`
/// in order; `Ok(false)` if any was dropped, the first error if one failed
/// (the others are still sent: each is counted by `send`).
pub fn send_segments(
    frame: &Frame,
    send: &mut dyn FnMut(&[u8]) -> io::Result<bool>,
) -> io::Result<bool> {
    let mut result = Ok(true);
    gso::cut(frame.clone(), &mut |seg| {
        let r = send(&seg);
        if matches!(result, Ok(true)) {
            result = r;
        }
    });
    result
}

/// What [`FrameIo::recv_batch_gso`] calls for each frame: its bytes, its
/// arrival stamp (CLOCK_MONOTONIC ns) where the interface gives one, and for
/// a super-frame passed on whole, its [`Gso`].
pub type RecvGso<'a> = dyn FnMut(&[u8], Option<u64>, Option<Gso>) + 'a;

/// A real interface that frames are read from and written to. `Send`: a
/// real-time run hands it to its I/O thread.
pub trait FrameIo: Send {
    /// A name for reports, e.g. `tap nl1a2b3c-0` or `packet veth1`.
    fn name(&self) -> &str;

    /// The file descriptor to wait on for readability, borrowed for as
    /// long as the interface is.
    fn fd(&self) -> BorrowedFd<'_>;

    /// Reads up to `max` frames that are available now, without blocking,
    /// calling `f(frame, stamp)` for each; `stamp` is the kernel's time of
    /// arrival on CLOCK_MONOTONIC in nanoseconds where the interface gives
    /// one. Returns the number of frames read (0 when none are waiting).
    /// Frames that are too short or truncated are counted and not passed on.
    fn recv_batch(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(&[u8], Option<u64>),
    ) -> io::Result<usize>;

    /// Writes (or queues, see [`FrameIo::flush`]) one frame. `Ok(false)` if
    /// the interface's queue was full and the frame was dropped; `Err` if the
    /// write failed. Either way the frame is counted in `tx_drops`: every
    /// frame handed to `send` ends up in `tx_frames`, `tx_drops` or
    /// `tx_unsent`.
    fn send(&mut self, frame: &[u8]) -> io::Result<bool>;

    /// [`FrameIo::recv_batch`] that passes GSO super-frames on whole, with
    /// what the model needs to carry them ([`Gso`]), where the interface
    /// reads them so; `f(frame, stamp, gso)`. By default every frame is a
    /// wire frame.
    fn recv_batch_gso(&mut self, max: usize, f: &mut RecvGso<'_>) -> io::Result<usize> {
        self.recv_batch(max, &mut |frame, stamp| f(frame, stamp, None))
    }

    /// Writes `frame`, which may be a super-frame: whole where the
    /// interface takes super-frames, otherwise (the default) cut into the
    /// wire frames it stands for, each written with [`FrameIo::send`].
    /// `Ok(false)` if any of them was dropped.
    fn send_frame(&mut self, frame: &Frame) -> io::Result<bool> {
        if !frame.is_super() {
            return self.send(frame);
        }
        send_segments(frame, &mut |seg| self.send(seg))
    }

    /// Hands queued frames to the kernel (a no-op where `send` writes at
    /// once).
    fn flush(&mut self) -> io::Result<()>;

    /// The counters so far (kernel drop counters read now).
    fn counters(&mut self) -> BoundaryCounters;

    /// Whether the interface still exists (it may be deleted from outside
    /// while a run goes on); `None` where this kind of interface cannot
    /// tell.
    fn exists(&self) -> Option<bool> {
        None
    }
}
