//! AF_PACKET sockets on existing interfaces (a physical NIC, or the root end
//! of a veth pair), and the checks and settings of such an interface.
//!
//! This module owns:
//! - [`PacketSocket`]: one AF_PACKET socket bound to one interface, with a
//!   memory-mapped TPACKET_V2 RX ring (the kernel writes each frame and its
//!   arrival time into the next slot, we read them without a system call)
//!   and a TPACKET_V2 TX ring (we write frames into slots and hand a whole
//!   batch to the kernel with one `send`);
//! - the interface checks and settings netloop needs before it attaches to
//!   an interface: [`interface_state`], [`carries_default_route`],
//!   [`check_attachable`], [`disable_offloads`].
//!
//! Why TPACKET_V2 and not V3: V3 hands frames over per block, a block being
//! retired when full or after a timeout of at least a millisecond; V2 hands
//! each frame over as soon as it is written, which is what a real-time
//! simulator needs.
//!
//! Checksums and segmentation: frames read here are what the kernel has, not
//! what went on a wire. Frames sent by the local stack with checksum offload
//! carry no valid checksum yet (TP_STATUS_CSUMNOTREADY): they are completed
//! here. With GRO/TSO on, frames larger than the MTU arrive: a socket opened
//! with [`PacketOptions::gso`] reads them whole with their `virtio_net_hdr`
//! (PACKET_VNET_HDR) and cuts them into wire frames ([`crate::gso`]);
//! without it they are truncated (see [`PacketOptions::frame_size`]), so
//! call [`disable_offloads`] on the interface — and on the sending side of a
//! veth pair, its peer.

use crate::clock;
use crate::error::{Context, Error, Result};
use crate::frameio::{send_segments, BoundaryCounters, FrameIo, RecvGso};
use crate::sys;
use crate::tap::{check_name, ETH_HLEN};
use netloop_model::{gso, Frame};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// `PACKET_IGNORE_OUTGOING` (Linux 4.20): do not deliver frames leaving the
/// interface to this socket.
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// Where the kernel puts an Ethernet frame in a TPACKET_V2 RX slot of a
/// SOCK_RAW socket: `TPACKET_ALIGN(TPACKET2_HDRLEN + 16) - 14`, i.e. so that
/// the network header is 16-byte aligned.
pub const RX_MAC_OFFSET: u32 = 66;

/// The smallest [`PacketOptions::frame_size`]: a 1514-byte frame (MTU 1500)
/// after [`RX_MAC_OFFSET`], rounded up to the 16-byte slot alignment.
pub const MIN_FRAME_SIZE: u32 = (RX_MAC_OFFSET + 1514).div_ceil(16) * 16;

/// The largest [`PacketOptions::frame_size`] (a 64 KiB frame and more).
pub const MAX_FRAME_SIZE: u32 = 128 * 1024;

/// The smallest ring block: blocks are a power of two of at least this many
/// bytes (a multiple of any page size Linux uses), holding as many slots as
/// fit.
const MIN_BLOCK: u32 = 64 * 1024;

/// How to open a [`PacketSocket`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketOptions {
    /// Slots in each ring (RX and TX), rounded up to fill whole blocks.
    pub ring_frames: u32,
    /// Bytes per slot, a multiple of 16. A received frame longer than
    /// `frame_size - RX_MAC_OFFSET` (1982 bytes for the default 2048) is
    /// counted as truncated and dropped; a frame to send may be up to
    /// `frame_size - 32` bytes (and the interface's MTU plus header). The
    /// default holds MTU 1500; raise it for jumbo frames (e.g. 9216 for MTU
    /// 9000).
    pub frame_size: u32,
    /// Put the interface in promiscuous mode for as long as the socket is
    /// open (the kernel counts it as one membership and undoes it when the
    /// socket closes, however the process ends).
    pub promisc: bool,
    /// Read GSO super-frames whole (PACKET_VNET_HDR) and cut them into
    /// wire frames: the RX ring then has [`GSO_RX_FRAMES`] slots of
    /// [`GSO_RX_FRAME_SIZE`] bytes (the TX ring keeps `ring_frames` ×
    /// `frame_size`), so the sender's super-frames must be at most
    /// [`GSO_MAX_SIZE`] (its `gso_max_size`).
    pub gso: bool,
}

impl Default for PacketOptions {
    fn default() -> Self {
        PacketOptions {
            ring_frames: 4096,
            frame_size: 2048,
            promisc: true,
            gso: false,
        }
    }
}

/// With [`PacketOptions::gso`]: RX slots, and bytes per slot (32 MiB of
/// ring: a quarter of a second of TCP at 1 Gbit/s in 64 KB super-frames, or
/// 512 small frames).
pub const GSO_RX_FRAMES: u32 = 512;
/// See [`GSO_RX_FRAMES`].
pub const GSO_RX_FRAME_SIZE: u32 = 64 * 1024;
/// The largest super-frame a [`PacketOptions::gso`] socket reads whole
/// (what the sender's `gso_max_size` must be set to): a slot less its
/// header, the virtio header, and room for a VLAN tag; near Linux's own
/// limit for IPv4 (64 KiB).
pub const GSO_MAX_SIZE: u32 = 65_000;

/// The layout of one TPACKET ring in the mapping.
#[derive(Clone, Copy, Debug)]
struct RingGeom {
    /// Offset of the ring in the mapping.
    base: usize,
    block_size: usize,
    frames_per_block: usize,
    frame_size: usize,
    frames: usize,
}

impl RingGeom {
    fn new(opts: &PacketOptions) -> RingGeom {
        let frame_size = opts.frame_size as usize;
        let block_size = (frame_size.next_power_of_two()).max(MIN_BLOCK as usize);
        let frames_per_block = block_size / frame_size;
        let blocks = (opts.ring_frames as usize)
            .div_ceil(frames_per_block)
            .max(1);
        RingGeom {
            base: 0,
            block_size,
            frames_per_block,
            frame_size,
            frames: blocks * frames_per_block,
        }
    }

    fn blocks(&self) -> usize {
        self.frames / self.frames_per_block
    }

    fn bytes(&self) -> usize {
        self.blocks() * self.block_size
    }

    fn req(&self) -> libc::tpacket_req {
        libc::tpacket_req {
            tp_block_size: self.block_size as u32,
            tp_block_nr: self.blocks() as u32,
            tp_frame_size: self.frame_size as u32,
            tp_frame_nr: self.frames as u32,
        }
    }

    /// The offset of slot `i` in the mapping (slots never straddle blocks).
    fn slot(&self, i: usize) -> usize {
        self.base
            + (i / self.frames_per_block) * self.block_size
            + (i % self.frames_per_block) * self.frame_size
    }
}

/// An AF_PACKET socket on one interface with TPACKET_V2 RX and TX rings.
///
/// It reads every frame arriving at the interface (not the frames leaving
/// it: PACKET_IGNORE_OUTGOING, so neither what we send nor what this
/// machine's own stack sends out of it) and writes frames out of it.
///
/// TX slots are reused only once the kernel is done with them: it sends
/// from the ring without copying, but marks such frames zero-copy, so it
/// copies their data before they can outlive the slot (looped to a local
/// socket, forwarded through a veth pair into a namespace) and flags the
/// slot available again only when it has let go of it.
pub struct PacketSocket {
    // Field order matters: the ring is unmapped before the socket closes.
    ring: sys::PacketRing,
    fd: OwnedFd,
    ifname: String,
    label: String,
    ifindex: u32,
    mtu: u32,
    rx: RingGeom,
    /// The next RX slot to look at.
    rx_next: usize,
    tx: RingGeom,
    /// The next TX slot to fill.
    tx_next: usize,
    /// Slots filled (SEND_REQUEST) that the kernel has not taken yet; they
    /// are the ones just before `tx_next`.
    tx_unsent: usize,
    /// Frame length of each TX slot, for counting bytes when the kernel
    /// takes it.
    tx_lens: Vec<u32>,
    /// CLOCK_MONOTONIC minus CLOCK_REALTIME at open, nanoseconds.
    mono_minus_real: i128,
    /// A frame with its VLAN tag put back (see `recv_batch`).
    scratch: Vec<u8>,
    /// Frames carry a `virtio_net_hdr` (PACKET_VNET_HDR).
    vnet: bool,
    /// One segment of a super-frame being cut.
    segment: Vec<u8>,
    /// With [`PacketOptions::gso`]: a second socket on the interface that
    /// only writes (bound to protocol 0, it is handed no frame), without a
    /// ring, for super-frames, which no TX slot holds: each goes out with
    /// one `writev` behind its `virtio_net_hdr`.
    gso_tx: Option<OwnedFd>,
    counters: BoundaryCounters,
}

impl PacketSocket {
    /// Opens a non-blocking AF_PACKET socket on interface `ifname` with
    /// TPACKET_V2 RX and TX rings (2 × `ring_frames` × `frame_size` bytes of
    /// locked kernel memory: 16 MiB with the defaults).
    pub fn open(ifname: &str, opts: &PacketOptions) -> Result<PacketSocket> {
        let what = format!("opening an AF_PACKET socket on '{ifname}'");
        let ctx = |step: &str| format!("{what}: {step}");
        check_name(ifname)
            .map_err(|m| Error::msg(format!("interface name '{ifname}' is invalid: {m}")))?;
        if !opts.frame_size.is_multiple_of(16)
            || !(MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&opts.frame_size)
        {
            return Err(Error::msg(format!(
                "{what}: frame_size {} must be a multiple of 16 between {MIN_FRAME_SIZE} and {MAX_FRAME_SIZE}",
                opts.frame_size
            )));
        }
        if opts.ring_frames == 0 || opts.ring_frames > 1 << 20 {
            return Err(Error::msg(format!(
                "{what}: ring_frames {} must be between 1 and {}",
                opts.ring_frames,
                1 << 20
            )));
        }
        let ifindex = sys::if_index(ifname)
            .ctx(|| ctx("looking up the interface"))?
            .ok_or_else(|| does_not_exist(ifname))?;

        // Protocol 0: no frames are queued to the socket until `bind` below
        // names ETH_P_ALL, after the rings exist.
        let fd =
            sys::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, 0).map_err(|e| {
                let denied = matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES));
                let err = Error::os(ctx("creating the socket"), e);
                if denied {
                    err.hint("run netloop as root or with CAP_NET_RAW and CAP_NET_ADMIN")
                } else {
                    err
                }
            })?;
        let sock = fd.as_fd();
        sys::setsockopt_int(
            sock,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            libc::tpacket_versions::TPACKET_V2 as libc::c_int,
        )
        .ctx(|| ctx("selecting TPACKET_V2"))?;
        sys::setsockopt_int(sock, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1).map_err(|e| {
            Error::os(ctx("setting PACKET_IGNORE_OUTGOING"), e).hint("needs Linux 4.20 or later")
        })?;
        // A malformed TX frame is skipped (and its slot freed) rather than
        // stopping the ring: without PACKET_LOSS the kernel leaves it marked
        // WRONG_FORMAT and sends nothing after it ever again. `send` checks
        // lengths so that this does not happen to frames we count as sent.
        sys::setsockopt_int(sock, libc::SOL_PACKET, libc::PACKET_LOSS, 1)
            .ctx(|| ctx("setting PACKET_LOSS"))?;

        if opts.gso {
            // Before the rings: the kernel refuses it afterwards (EBUSY).
            sys::setsockopt_int(sock, libc::SOL_PACKET, sys::PACKET_VNET_HDR, 1)
                .ctx(|| ctx("setting PACKET_VNET_HDR"))?;
        }
        let rx = RingGeom::new(&if opts.gso {
            PacketOptions {
                ring_frames: GSO_RX_FRAMES,
                frame_size: GSO_RX_FRAME_SIZE,
                ..opts.clone()
            }
        } else {
            opts.clone()
        });
        let mut tx = RingGeom::new(opts);
        tx.base = rx.bytes();
        sys::packet_set_ring(sock, libc::PACKET_RX_RING, &rx.req())
            .ctx(|| ctx("setting up the RX ring"))?;
        sys::packet_set_ring(sock, libc::PACKET_TX_RING, &tx.req())
            .ctx(|| ctx("setting up the TX ring"))?;
        let ring =
            sys::PacketRing::map(sock, rx.bytes() + tx.bytes()).ctx(|| ctx("mapping the rings"))?;

        // Every frame in flight from the TX ring is charged to the socket's
        // send buffer; let the whole ring be in flight. (Forcing it past
        // wmem_max needs CAP_NET_ADMIN; without it the default stays and a
        // flush may send only part of a large batch — the rest goes with the
        // next flush.)
        let sndbuf = libc::c_int::try_from(tx.bytes()).unwrap_or(libc::c_int::MAX);
        let _ = sys::setsockopt_int(sock, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, sndbuf);

        sys::packet_bind(sock, ifindex, libc::ETH_P_ALL as u16).map_err(|e| {
            if e.raw_os_error() == Some(libc::ENODEV) {
                does_not_exist(ifname)
            } else {
                Error::os(ctx("binding to the interface"), e)
            }
        })?;
        if opts.promisc {
            sys::packet_add_membership(sock, ifindex, libc::PACKET_MR_PROMISC)
                .ctx(|| ctx("turning on promiscuous mode"))?;
        }
        let mtu = sys::if_mtu(sock, ifname).ctx(|| ctx("reading the MTU"))?;
        let gso_tx = if opts.gso {
            let w = sys::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, 0)
                .ctx(|| ctx("creating the socket for super-frames"))?;
            sys::setsockopt_int(w.as_fd(), libc::SOL_PACKET, sys::PACKET_VNET_HDR, 1)
                .ctx(|| ctx("setting PACKET_VNET_HDR on the socket for super-frames"))?;
            let _ = sys::setsockopt_int(w.as_fd(), libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 4 << 20);
            sys::packet_bind(w.as_fd(), ifindex, 0)
                .ctx(|| ctx("binding the socket for super-frames"))?;
            Some(w)
        } else {
            None
        };

        Ok(PacketSocket {
            ring,
            fd,
            ifname: ifname.to_string(),
            label: format!("packet {ifname}"),
            ifindex,
            mtu,
            rx,
            rx_next: 0,
            tx,
            tx_next: 0,
            tx_unsent: 0,
            tx_lens: vec![0; tx.frames],
            mono_minus_real: clock::mono_minus_realtime_ns(),
            scratch: Vec::new(),
            vnet: opts.gso,
            segment: Vec::new(),
            gso_tx,
            counters: BoundaryCounters::default(),
        })
    }

    /// The interface's name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The interface's index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The interface's MTU when the socket was opened; `send` drops frames
    /// longer than it plus the Ethernet header (plus 4 for an 802.1Q tag),
    /// as the kernel would.
    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    /// Slots in each ring (`ring_frames` rounded up to whole blocks).
    pub fn ring_frames(&self) -> usize {
        self.rx.frames
    }

    /// Frames written by `send` that the kernel has not taken yet (they go
    /// with the next `flush`).
    pub fn tx_queued(&self) -> usize {
        self.tx_unsent
    }

    /// Converts a kernel arrival stamp (CLOCK_REALTIME) to CLOCK_MONOTONIC
    /// nanoseconds with the offset between the two clocks measured at open
    /// (realtime read between two monotonic reads: to well under a
    /// microsecond). This is an approximation: if CLOCK_REALTIME is stepped
    /// afterwards (NTP, `date -s`), the stamps jump by the step; while NTP
    /// slews it, they drift by at most 0.05 % of the time since open. The
    /// kernel offers no CLOCK_MONOTONIC stamps on a packet ring.
    fn mono_stamp(mono_minus_real: i128, sec: u32, nsec: u32) -> u64 {
        let real = sec as i128 * 1_000_000_000 + nsec as i128;
        (real + mono_minus_real).max(0) as u64
    }

    /// Adds the kernel's RX drop count since the last read (it resets on
    /// every read) to `rx_kernel_drops`.
    fn read_kernel_drops(&mut self) {
        if let Ok((_, drops)) = sys::packet_statistics(self.fd.as_fd()) {
            self.counters.rx_kernel_drops += drops as u64;
        }
    }

    /// Counts the frames the kernel has taken from the TX ring since the
    /// last call (their slots are no longer SEND_REQUEST).
    fn reap_sent(&mut self) {
        while self.tx_unsent > 0 {
            let oldest = (self.tx_next + self.tx.frames - self.tx_unsent) % self.tx.frames;
            let status = self
                .ring
                .tx_status(self.tx.slot(oldest), self.tx.frame_size);
            if status & libc::TP_STATUS_SEND_REQUEST != 0 {
                break;
            }
            self.tx_unsent -= 1;
            self.counters.tx_frames += 1;
            self.counters.tx_bytes += self.tx_lens[oldest] as u64;
        }
    }

    /// Fills the next TX slot, if it is free (behind a `virtio_net_hdr` that
    /// asks nothing of the kernel, on a socket that has them).
    fn try_fill(&mut self, frame: &[u8]) -> bool {
        let slot = self.tx.slot(self.tx_next);
        let prefix: &[u8] = if self.vnet { &[0; sys::VNET_LEN] } else { &[] };
        if !self.ring.tx_fill(slot, self.tx.frame_size, prefix, frame) {
            return false;
        }
        self.tx_lens[self.tx_next] = frame.len() as u32;
        self.tx_next = (self.tx_next + 1) % self.tx.frames;
        self.tx_unsent += 1;
        true
    }

    /// The longest frame `send` accepts: it must fit the slot and the MTU.
    fn max_tx_len(&self, frame: &[u8]) -> usize {
        let tagged = frame.len() >= ETH_HLEN
            && u16::from_be_bytes([frame[12], frame[13]]) == libc::ETH_P_8021Q as u16;
        let wire = self.mtu as usize + ETH_HLEN + if tagged { 4 } else { 0 };
        let vnet = if self.vnet { sys::VNET_LEN } else { 0 };
        wire.min(self.tx.frame_size - sys::TX_DATA_OFFSET - vnet)
    }
}

impl PacketSocket {
    /// The body of [`FrameIo::recv_batch`] and [`FrameIo::recv_batch_gso`]
    /// (`whole`: super-frames passed on whole).
    fn recv(&mut self, max: usize, whole: bool, f: &mut RecvGso<'_>) -> io::Result<usize> {
        let mut passed = 0;
        let mut losing = false;
        for _ in 0..max {
            let off = self.rx.slot(self.rx_next);
            let Some(slot) = self.ring.rx_slot(off, self.rx.frame_size, self.vnet) else {
                break;
            };
            let h = slot.header;
            let data = slot.data();
            losing |= h.status & libc::TP_STATUS_LOSING != 0;
            if h.snaplen < h.len {
                self.counters.rx_truncated += 1;
            } else if (data.len() as u32) < h.snaplen || data.len() < ETH_HLEN {
                self.counters.rx_malformed += 1;
            } else {
                let stamp = Self::mono_stamp(self.mono_minus_real, h.sec, h.nsec);
                let vlan = (h.status & libc::TP_STATUS_VLAN_VALID != 0).then(|| {
                    let tpid = if h.status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                        h.vlan_tpid
                    } else {
                        libc::ETH_P_8021Q as u16
                    };
                    (tpid, h.vlan_tci)
                });
                let vnet = slot.vnet.map(|b| gso::VnetHdr::parse(&b));
                let gso = vnet.filter(gso::VnetHdr::is_gso);
                // A super-frame's checksums are all computed anew as it is
                // cut.
                let csum_partial = h.status & libc::TP_STATUS_CSUMNOTREADY != 0 && gso.is_none();
                let (frame, completed) = wire_frame(data, vlan, csum_partial, &mut self.scratch);
                if completed {
                    self.counters.rx_checksums_completed += 1;
                }
                // Whole, a super-frame is checked as cutting would check it;
                // one of a single segment is cut (its checksum completed).
                let carried = match (whole, gso) {
                    (true, Some(g)) => Some(gso::describe(frame, &g)),
                    _ => None,
                };
                match (gso, carried) {
                    (None, _) => {
                        self.counters.rx_frames += 1;
                        self.counters.rx_bytes += frame.len() as u64;
                        passed += 1;
                        f(frame, Some(stamp), None);
                    }
                    (Some(_), Some(Ok(Some(meta)))) => {
                        self.counters.rx_frames += u64::from(meta.segs);
                        self.counters.rx_bytes += meta.wire_len(frame.len());
                        self.counters.rx_gso_frames += 1;
                        passed += 1;
                        f(frame, Some(stamp), Some(meta));
                    }
                    (Some(_), Some(Err(_))) => self.counters.rx_gso_refused += 1,
                    (Some(g), _) => {
                        let counters = &mut self.counters;
                        let cut = gso::segment(frame, &g, &mut self.segment, &mut |seg| {
                            counters.rx_frames += 1;
                            counters.rx_bytes += seg.len() as u64;
                            passed += 1;
                            f(seg, Some(stamp), None);
                        });
                        match cut {
                            Ok(_) => self.counters.rx_gso_frames += 1,
                            Err(_) => self.counters.rx_gso_refused += 1,
                        }
                    }
                }
            }
            // Hands the slot back to the kernel.
            drop(slot);
            self.rx_next = (self.rx_next + 1) % self.rx.frames;
        }
        if losing {
            // The kernel dropped frames because the ring was full.
            self.read_kernel_drops();
        }
        Ok(passed)
    }
}

impl FrameIo for PacketSocket {
    fn name(&self) -> &str {
        &self.label
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Walks the RX ring from the current slot while the kernel has handed
    /// slots to us. Frames cut short by the slot size are counted in
    /// `rx_truncated`, runts in `rx_malformed`; neither is passed on. A
    /// VLAN tag the NIC stripped is put back, so the frame is as it was on
    /// the wire. The stamp is the kernel's arrival time converted to
    /// CLOCK_MONOTONIC with the clocks' offset measured at open: an
    /// approximation that a later step of CLOCK_REALTIME (NTP, `date -s`)
    /// shifts by the step.
    fn recv_batch(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(&[u8], Option<u64>),
    ) -> io::Result<usize> {
        self.recv(max, false, &mut |frame, stamp, _| f(frame, stamp))
    }

    /// As [`FrameIo::recv_batch`], but a super-frame of more than one
    /// segment is passed on whole, its checksum left partial, with its
    /// [`netloop_model::Gso`] (checked as cutting it would check it).
    fn recv_batch_gso(&mut self, max: usize, f: &mut RecvGso<'_>) -> io::Result<usize> {
        self.recv(max, true, f)
    }

    /// Writes a super-frame whole behind its `virtio_net_hdr` through the
    /// socket for super-frames, after the frames queued in the TX ring (so
    /// that frames leave in order): the kernel hands it on as one packet
    /// (a veth delivers it whole to the namespace's stack, which takes it
    /// as the GRO of its segments) or cuts it where the device cannot.
    /// Without that socket, it is cut here.
    fn send_frame(&mut self, frame: &Frame) -> io::Result<bool> {
        let Some(g) = frame.meta.gso else {
            return self.send(frame);
        };
        if self.gso_tx.is_none() {
            return send_segments(frame, &mut |seg| self.send(seg));
        }
        let segs = u64::from(g.segs);
        let longest = usize::from(g.hdr_len) + usize::from(g.size);
        if frame.len() < ETH_HLEN || longest > self.max_tx_len(frame) {
            self.counters.tx_drops += segs;
            return Ok(false);
        }
        if let Err(e) = self.flush() {
            self.counters.tx_drops += segs;
            return Err(e);
        }
        if self.tx_unsent > 0 {
            // Frames the kernel could not take yet wait in the ring: the
            // super-frame must not pass them, so it is cut into the ring
            // behind them.
            return send_segments(frame, &mut |seg| self.send(seg));
        }
        let Some(hdr) = gso::vnet_for_frame(frame, &g).map(|h| h.bytes()) else {
            return send_segments(frame, &mut |seg| self.send(seg));
        };
        let w = self.gso_tx.as_ref().expect("checked above").as_fd();
        match sys::write2(w, &hdr, frame) {
            Ok(_) => {
                self.counters.tx_frames += segs;
                self.counters.tx_bytes += frame.wire_len();
                self.counters.tx_gso_frames += 1;
                Ok(true)
            }
            Err(e) if transient(&e) => {
                self.counters.tx_drops += segs;
                Ok(false)
            }
            Err(e) => {
                self.counters.tx_drops += segs;
                Err(e)
            }
        }
    }

    /// Puts the frame in the next TX slot; it leaves with the next
    /// [`FrameIo::flush`]. If that slot is still busy, flushes and tries once
    /// more, then drops the frame (`tx_drops`). Frames shorter than an
    /// Ethernet header or longer than the MTU allows (see
    /// [`PacketSocket::mtu`]) or than a slot holds are dropped too. A frame
    /// counts in `tx_frames` once the kernel has taken it.
    fn send(&mut self, frame: &[u8]) -> io::Result<bool> {
        if frame.len() < ETH_HLEN || frame.len() > self.max_tx_len(frame) {
            self.counters.tx_drops += 1;
            return Ok(false);
        }
        if self.try_fill(frame) {
            return Ok(true);
        }
        if let Err(e) = self.flush() {
            self.counters.tx_drops += 1;
            return Err(e);
        }
        if self.try_fill(frame) {
            return Ok(true);
        }
        self.counters.tx_drops += 1;
        Ok(false)
    }

    /// One `send(fd, NULL, 0, MSG_DONTWAIT)`: the kernel transmits every
    /// filled slot in ring order. Frames it cannot take now (socket buffer
    /// full, interface down) stay queued for the next flush.
    fn flush(&mut self) -> io::Result<()> {
        self.reap_sent();
        if self.tx_unsent == 0 {
            return Ok(());
        }
        match sys::packet_tx_kick(self.fd.as_fd()) {
            Ok(_) => {}
            Err(e) if transient(&e) => {}
            Err(e) => return Err(e),
        }
        self.reap_sent();
        Ok(())
    }

    /// Our counters, with `rx_kernel_drops` brought up to date from
    /// PACKET_STATISTICS (frames the kernel dropped because the RX ring was
    /// full).
    fn counters(&mut self) -> BoundaryCounters {
        self.reap_sent();
        self.read_kernel_drops();
        BoundaryCounters {
            tx_unsent: self.tx_unsent as u64,
            ..self.counters
        }
    }

    /// The interface of our name still has our index (a deleted one is gone,
    /// or another of that name has another index).
    fn exists(&self) -> Option<bool> {
        match sys::if_index(&self.ifname) {
            Ok(Some(i)) => Some(i == self.ifindex),
            Ok(None) => Some(false),
            Err(_) => None,
        }
    }
}

impl Drop for PacketSocket {
    fn drop(&mut self) {
        // Frames still queued would be lost with the ring; give them one
        // chance to leave.
        let _ = self.flush();
    }
}

// ---------------------------------------------------------------------------
// Interface checks and settings
// ---------------------------------------------------------------------------

/// The state of an interface, as netloop needs it before attaching.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IfState {
    /// Its index.
    pub index: u32,
    /// Administratively up (IFF_UP).
    pub up: bool,
    /// Its MTU.
    pub mtu: u32,
    /// Its hardware address (meaningful for Ethernet).
    pub mac: [u8; 6],
    /// Its hardware type (`ARPHRD_ETHER` = 1 for Ethernet).
    pub hw_type: u16,
}

fn does_not_exist(ifname: &str) -> Error {
    Error::msg(format!("interface '{ifname}' does not exist"))
        .hint("see `ip -br link` for the interfaces there are")
}

/// A socket to run interface ioctls on.
fn ioctl_socket() -> Result<OwnedFd> {
    sys::socket(libc::AF_INET, libc::SOCK_DGRAM, 0)
        .ctx(|| "creating a socket for interface ioctls".to_string())
}

/// Maps ENODEV to "does not exist", other errors to `what`.
fn if_err(ifname: &str, what: &str) -> impl FnOnce(io::Error) -> Error {
    let ifname = ifname.to_string();
    let what = what.to_string();
    move |e| {
        if e.raw_os_error() == Some(libc::ENODEV) {
            does_not_exist(&ifname)
        } else {
            Error::os(format!("{what} of interface '{ifname}'"), e)
        }
    }
}

/// The interface's index, flags, MTU and hardware address
/// (SIOCGIFFLAGS/SIOCGIFMTU/SIOCGIFHWADDR).
pub fn interface_state(ifname: &str) -> Result<IfState> {
    check_name(ifname)
        .map_err(|m| Error::msg(format!("interface name '{ifname}' is invalid: {m}")))?;
    let sock = ioctl_socket()?;
    let sock = sock.as_fd();
    let flags = sys::if_flags(sock, ifname).map_err(if_err(ifname, "reading the flags"))?;
    let mtu = sys::if_mtu(sock, ifname).map_err(if_err(ifname, "reading the MTU"))?;
    let (hw_type, mac) =
        sys::if_hwaddr(sock, ifname).map_err(if_err(ifname, "reading the hardware address"))?;
    let index = sys::if_index(ifname)
        .ctx(|| format!("looking up interface '{ifname}'"))?
        .ok_or_else(|| does_not_exist(ifname))?;
    Ok(IfState {
        index,
        up: flags as libc::c_int & libc::IFF_UP != 0,
        mtu,
        mac,
        hw_type,
    })
}

/// Whether `ifname` carries a default route of this machine (in the main
/// routing table: `/proc/net/route` for IPv4, `/proc/net/ipv6_route` for
/// IPv6 if present). Routes in other tables (policy routing) are not seen.
pub fn carries_default_route(ifname: &str) -> Result<bool> {
    let v4 =
        std::fs::read_to_string("/proc/net/route").ctx(|| "reading /proc/net/route".to_string())?;
    if has_default_route_v4(&v4, ifname) {
        return Ok(true);
    }
    match std::fs::read_to_string("/proc/net/ipv6_route") {
        Ok(v6) => Ok(has_default_route_v6(&v6, ifname)),
        // No IPv6 on this machine.
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::os("reading /proc/net/ipv6_route", e)),
    }
}

/// A `/proc/net/route` text has a route up with destination and mask 0 on
/// `ifname`.
pub fn has_default_route_v4(text: &str, ifname: &str) -> bool {
    // Iface Destination Gateway Flags RefCnt Use Metric Mask MTU Window IRTT
    text.lines().skip(1).any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        f.len() >= 8
            && f[0] == ifname
            && f[1] == "00000000"
            && f[7] == "00000000"
            && u16::from_str_radix(f[3], 16).is_ok_and(|flags| flags & libc::RTF_UP != 0)
    })
}

/// A `/proc/net/ipv6_route` text has a route `::/0` up and not a reject
/// route (the kernel lists an unreachable `::/0` on `lo`) on `ifname`.
pub fn has_default_route_v6(text: &str, ifname: &str) -> bool {
    // dest plen src plen nexthop metric refcnt use flags device
    text.lines().any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        f.len() >= 10
            && f[9] == ifname
            && f[0].bytes().all(|b| b == b'0')
            && f[1] == "00"
            && u32::from_str_radix(f[8], 16).is_ok_and(|flags| {
                flags & libc::RTF_UP as u32 != 0 && flags & libc::RTF_REJECT as u32 == 0
            })
    })
}

/// Checks that netloop may attach to interface `ifname`: it exists, is an
/// Ethernet interface, is up, and — unless `force` — does not carry this
/// machine's default route.
pub fn check_attachable(ifname: &str, force: bool) -> Result<()> {
    let st = interface_state(ifname)?;
    if st.hw_type != libc::ARPHRD_ETHER {
        return Err(Error::msg(format!(
            "interface '{ifname}' is not an Ethernet interface (hardware type {}); netloop exchanges Ethernet frames",
            st.hw_type
        )));
    }
    if !st.up {
        return Err(Error::msg(format!(
            "interface '{ifname}' is down; bring it up with `ip link set {ifname} up`"
        )));
    }
    if !force && carries_default_route(ifname)? {
        return Err(Error::msg(format!(
            "interface '{ifname}' carries this machine's default route; attaching it would cut the machine off its network. Set force = true on the node to attach it anyway"
        )));
    }
    Ok(())
}

// Legacy ethtool commands (`<linux/ethtool.h>`), each taking a struct
// ethtool_value.
const ETHTOOL_SRXCSUM: u32 = 0x15;
const ETHTOOL_STXCSUM: u32 = 0x17;
const ETHTOOL_SSG: u32 = 0x19;
const ETHTOOL_STSO: u32 = 0x1f;
const ETHTOOL_SUFO: u32 = 0x22;
const ETHTOOL_SGSO: u32 = 0x24;
const ETHTOOL_GFLAGS: u32 = 0x25;
const ETHTOOL_SFLAGS: u32 = 0x26;
const ETHTOOL_SGRO: u32 = 0x2c;
const ETHTOOL_GGRO: u32 = 0x2b;
const ETH_FLAG_LRO: u32 = 1 << 15;

/// Turns off the interface's GRO, GSO, TSO, UFO, LRO and TX and RX checksum
/// offload (legacy SIOCETHTOOL commands), so that frames read from it are at
/// most MTU-sized and frames its stack sends carry complete checksums. A
/// feature the interface cannot change (EOPNOTSUPP: veth can change them
/// all, a physical NIC may not; UFO no longer exists since Linux 4.14) is
/// left as it is.
pub fn disable_offloads(ifname: &str) -> Result<()> {
    turn_off(
        ifname,
        &[
            (ETHTOOL_SGRO, "GRO"),
            (ETHTOOL_SGSO, "GSO"),
            (ETHTOOL_STSO, "TSO"),
            (ETHTOOL_SUFO, "UFO"),
            (ETHTOOL_STXCSUM, "TX checksum offload"),
            (ETHTOOL_SRXCSUM, "RX checksum offload"),
        ],
    )
}

/// Whether a send error leaves the socket usable: its buffer or the
/// device's queue was full, a signal came, or the device is down or gone
/// for now. The frame is lost (and counted); the run goes on.
fn transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAGAIN)
            | Some(libc::ENOBUFS)
            | Some(libc::EINTR)
            | Some(libc::ENETDOWN)
            | Some(libc::ENXIO)
    )
}

/// Whether interface `ifname` is a virtual device (a veth, a bridge; no
/// `device` link in sysfs, which every NIC has): such a device passes GSO
/// super-frames from its peer instead of wire frames.
pub fn is_virtual(ifname: &str) -> bool {
    let dev = std::path::Path::new("/sys/class/net").join(ifname);
    dev.exists() && !dev.join("device").exists()
}

/// Readies netloop's end of a veth pair whose far end keeps its offloads
/// (a [`PacketOptions::gso`] socket reads and writes it): receive
/// coalescing (GRO) and RX checksum offload off, so that netloop reads what
/// the host sent as it sent it, and the transmit offloads (TSO, GSO, TX
/// checksum, a veth's defaults) on, so that a super-frame netloop writes
/// reaches the host's stack whole instead of being cut by the kernel first.
pub fn offloads_for_super_frames(ifname: &str) -> Result<()> {
    set_features(
        ifname,
        &[
            (ETHTOOL_SGRO, "GRO", false),
            (ETHTOOL_SRXCSUM, "RX checksum offload", false),
            // TSO needs scatter-gather and checksum offload under it.
            (ETHTOOL_STXCSUM, "TX checksum offload", true),
            (ETHTOOL_SSG, "scatter-gather", true),
            (ETHTOOL_STSO, "TSO", true),
            (ETHTOOL_SGSO, "GSO", true),
        ],
    )
}

/// Turns off receive coalescing (GRO and LRO) on an attached interface, so
/// that what netloop reads from it are the frames that were on the wire, not
/// super-frames merged by the kernel or the NIC. Its transmit offloads stay:
/// netloop sends complete frames.
pub fn disable_receive_coalescing(ifname: &str) -> Result<()> {
    turn_off(ifname, &[(ETHTOOL_SGRO, "GRO")])
}

/// Whether GRO is on for the interface.
pub fn gro_enabled(ifname: &str) -> Result<bool> {
    let sock = ioctl_socket()?;
    sys::ethtool_value(sock.as_fd(), ifname, ETHTOOL_GGRO, 0)
        .map(|v| v != 0)
        .map_err(|e| Error::os(format!("reading GRO of interface '{ifname}'"), e))
}

/// Turns GRO on or off for the interface.
pub fn set_gro(ifname: &str, on: bool) -> Result<()> {
    let sock = ioctl_socket()?;
    sys::ethtool_value(sock.as_fd(), ifname, ETHTOOL_SGRO, u32::from(on))
        .map(|_| ())
        .map_err(|e| Error::os(format!("setting GRO of interface '{ifname}'"), e))
}

fn turn_off(ifname: &str, features: &[(u32, &str)]) -> Result<()> {
    let off: Vec<(u32, &str, bool)> = features.iter().map(|&(c, f)| (c, f, false)).collect();
    set_features(ifname, &off)
}

/// Sets each `(command, feature, on)` in order (a feature the interface
/// cannot change is left as it is), then turns LRO off.
fn set_features(ifname: &str, features: &[(u32, &str, bool)]) -> Result<()> {
    check_name(ifname)
        .map_err(|m| Error::msg(format!("interface name '{ifname}' is invalid: {m}")))?;
    let sock = ioctl_socket()?;
    let sock = sock.as_fd();
    let unsupported = |e: &io::Error| {
        matches!(
            e.raw_os_error(),
            Some(libc::EOPNOTSUPP) | Some(libc::EINVAL)
        )
    };
    let fail = |feature: &str, on: bool, e: io::Error| -> Error {
        let what = format!(
            "turning {} {feature} on interface '{ifname}'",
            if on { "on" } else { "off" }
        );
        match e.raw_os_error() {
            Some(libc::ENODEV) => does_not_exist(ifname),
            Some(libc::EPERM) | Some(libc::EACCES) => {
                Error::os(what, e).hint("run netloop as root or with CAP_NET_ADMIN")
            }
            _ => Error::os(what, e),
        }
    };
    for &(cmd, feature, on) in features {
        match sys::ethtool_value(sock, ifname, cmd, u32::from(on)) {
            Ok(_) => {}
            Err(e) if unsupported(&e) => {}
            Err(e) => return Err(fail(feature, on, e)),
        }
    }
    match sys::ethtool_value(sock, ifname, ETHTOOL_GFLAGS, 0) {
        Ok(flags) if flags & ETH_FLAG_LRO != 0 => {
            match sys::ethtool_value(sock, ifname, ETHTOOL_SFLAGS, flags & !ETH_FLAG_LRO) {
                Ok(_) => {}
                Err(e) if unsupported(&e) => {}
                Err(e) => return Err(fail("LRO", false, e)),
            }
        }
        Ok(_) => {}
        Err(e) if unsupported(&e) => {}
        Err(e) => return Err(fail("LRO", false, e)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_geometry() {
        let g = RingGeom::new(&PacketOptions::default());
        assert_eq!(g.block_size, 64 * 1024);
        assert_eq!(g.frames_per_block, 32);
        assert_eq!(g.frames, 4096);
        assert_eq!(g.blocks(), 128);
        assert_eq!(g.slot(0), 0);
        assert_eq!(g.slot(31), 31 * 2048);
        assert_eq!(g.slot(32), 64 * 1024);
        let j = RingGeom::new(&PacketOptions {
            ring_frames: 100,
            frame_size: 9216,
            promisc: true,
            gso: false,
        });
        assert_eq!(j.frames_per_block, 7);
        assert_eq!(j.frames, 105);
        assert_eq!(j.slot(7), 64 * 1024);
        assert_eq!(j.slot(8), 64 * 1024 + 9216);
        assert_eq!(MIN_FRAME_SIZE, 1584);
        assert_eq!(sys::TX_DATA_OFFSET, 32);
    }

    #[test]
    fn default_routes_are_found() {
        let v4 =
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
eth0\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
eth0\t0000A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n\
veth1\t0012C6C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        assert!(has_default_route_v4(v4, "eth0"));
        assert!(!has_default_route_v4(v4, "veth1"));
        assert!(!has_default_route_v4(v4, "eth"));
        let v6 = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n\
fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth1\n\
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00450003     eth2\n";
        assert!(!has_default_route_v6(v6, "lo"));
        assert!(!has_default_route_v6(v6, "eth1"));
        assert!(has_default_route_v6(v6, "eth2"));
    }
}

/// The frame as it was on the wire, from what a ring slot holds (`data`, at
/// least an Ethernet header): the VLAN tag the NIC stripped (`vlan`: TPID
/// and TCI) put back, and a TCP/UDP checksum the sender left to offload
/// (`csum_partial`) completed. Returns the frame (`data` itself when nothing
/// changes, else `scratch`) and whether a checksum was completed.
///
/// Bytes from outside, so a fuzz target of its own (`fuzz/`, `boundary`).
pub fn wire_frame<'a>(
    data: &'a [u8],
    vlan: Option<(u16, u16)>,
    csum_partial: bool,
    scratch: &'a mut Vec<u8>,
) -> (&'a [u8], bool) {
    if data.len() < ETH_HLEN || (vlan.is_none() && !csum_partial) {
        return (data, false);
    }
    scratch.clear();
    match vlan {
        Some((tpid, tci)) => {
            scratch.extend_from_slice(&data[..12]);
            scratch.extend_from_slice(&tpid.to_be_bytes());
            scratch.extend_from_slice(&tci.to_be_bytes());
            scratch.extend_from_slice(&data[12..]);
        }
        None => scratch.extend_from_slice(data),
    }
    // The sender left the TCP/UDP checksum to hardware that a frame read
    // here never passes through (checksum offload on the far side of an
    // attached interface): finish it, or the receiving host drops the
    // segment as corrupt.
    let completed = csum_partial && complete_l4_checksum(scratch);
    (scratch, completed)
}

pub use netloop_model::gso::complete_l4_checksum;

#[cfg(test)]
mod csum_tests {
    use super::complete_l4_checksum;

    /// A UDP datagram whose checksum was computed by hand with the RFC 1071
    /// algorithm over the pseudo-header: 198.18.0.1:1000 -> 198.18.0.2:2000,
    /// payload "abc".
    #[test]
    fn udp_checksum_is_completed() {
        let mut f = vec![0u8; 14];
        f[12] = 0x08;
        f.extend_from_slice(&[
            0x45, 0, 0, 31, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
        ]);
        f.extend_from_slice(&[0x03, 0xe8, 0x07, 0xd0, 0, 11, 0x12, 0x34, b'a', b'b', b'c']);
        assert!(complete_l4_checksum(&mut f));
        // Verifying: the one's-complement sum over pseudo-header and
        // datagram, checksum included, is 0xffff.
        let mut sum: u32 = 0;
        let words = |b: &[u8], s: &mut u32| {
            for c in b.chunks(2) {
                *s += u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0));
            }
        };
        words(&f[26..34], &mut sum);
        sum += 17 + 11;
        words(&f[34..], &mut sum);
        while sum >> 16 != 0 {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        assert_eq!(sum, 0xffff);
    }

    #[test]
    fn other_protocols_and_fragments_are_left_alone() {
        let mut f = vec![0u8; 14 + 28];
        f[12] = 0x08;
        f[14] = 0x45;
        f[17] = 28;
        f[23] = 1; // ICMP
        let before = f.clone();
        assert!(!complete_l4_checksum(&mut f));
        assert_eq!(f, before);
        f[23] = 17;
        f[20] = 0x20; // more fragments
        assert!(!complete_l4_checksum(&mut f));
        let mut runt = vec![0u8; 14];
        runt[12] = 0x08;
        assert!(!complete_l4_checksum(&mut runt));
    }
}
