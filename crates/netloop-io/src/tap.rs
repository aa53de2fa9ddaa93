//! TAP devices: the real side of a simulated host's (or router's) interface.
//!
//! This module owns creating a TAP device, reading and writing its Ethernet
//! frames, and the boundary counters of it. A [`TapDevice`] is
//! non-persistent: the kernel removes the device when its file descriptor
//! closes, i.e. when the `TapDevice` is dropped or the process dies however it
//! dies — that is netloop's clean-up guarantee for TAPs, so nothing here ever
//! makes one persistent.
//!
//! The device may be moved into another network namespace (and renamed
//! there) after it is created; the file descriptor keeps working, and
//! [`TapDevice::counters`] follows the device through the descriptor (see
//! there).

use crate::error::{Context, Error, Result};
use crate::frameio::{send_segments, BoundaryCounters, FrameIo, RecvGso};
use crate::sys;
use netloop_model::gso::{self, VnetHdr, VNET_HDR_LEN};
use netloop_model::Frame;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

/// The shortest frame passed on: an Ethernet header.
pub const ETH_HLEN: usize = 14;

/// The read buffer: larger than any frame a TAP can carry (MTU at most 65535
/// plus the header), so a read that fills it was cut short.
const READ_BUF: usize = 64 * 1024 + 64;

/// What one read from the device was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadClass {
    /// A frame to pass on.
    Frame,
    /// Shorter than an Ethernet header (counted in `rx_malformed`).
    Runt,
    /// Filled the whole buffer, so it was cut short (counted in
    /// `rx_truncated`).
    Truncated,
}

/// Classifies a read of `n` bytes into a buffer of `buf_len` bytes.
pub fn classify_read(n: usize, buf_len: usize) -> ReadClass {
    if n >= buf_len {
        ReadClass::Truncated
    } else if n < ETH_HLEN {
        ReadClass::Runt
    } else {
        ReadClass::Frame
    }
}

/// `TUNSETOFFLOAD` flags (linux/if_tun.h): what netloop takes from the
/// kernel — partial checksums, TCP super-frames over IPv4 and IPv6 (with
/// ECN), UDP super-frames (UDP_SEGMENT; Linux 6.2 and later, which takes
/// IPv4 and IPv6 only together).
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;
const TUN_F_TSO_ECN: libc::c_uint = 0x08;
const TUN_F_USO4: libc::c_uint = 0x20;
const TUN_F_USO6: libc::c_uint = 0x40;

/// A TAP device (IFF_TAP | IFF_NO_PI, and IFF_VNET_HDR if made with
/// [`TapDevice::create_gso`]), removed by the kernel when dropped.
pub struct TapDevice {
    file: File,
    ifname: String,
    label: String,
    /// Each read and write starts with a `virtio_net_hdr` (IFF_VNET_HDR).
    vnet: bool,
    buf: Vec<u8>,
    /// One segment of a super-frame being cut ([`FrameIo::recv_batch`]).
    segment: Vec<u8>,
    counters: BoundaryCounters,
    /// The device's `tx_dropped` when we created it (0 for a new device; kept
    /// in case the kernel ever counts something before we attach).
    tx_dropped_base: u64,
}

impl TapDevice {
    /// Creates TAP device `name` (at most 15 bytes, no '/', ':' or
    /// whitespace), non-blocking, without packet information headers.
    ///
    /// Fails if an interface of that name already exists — also a leftover
    /// persistent TAP, which TUNSETIFF would otherwise silently attach to and
    /// which would then outlive us.
    pub fn create(name: &str) -> Result<TapDevice> {
        TapDevice::create_with(name, false)
    }

    /// [`TapDevice::create`] with a `virtio_net_hdr` before every frame
    /// read and written (IFF_VNET_HDR), so that GSO super-frames cross it
    /// whole both ways once [`TapDevice::set_offload_gso`] says netloop
    /// takes them.
    pub fn create_gso(name: &str) -> Result<TapDevice> {
        TapDevice::create_with(name, true)
    }

    fn create_with(name: &str, vnet: bool) -> Result<TapDevice> {
        let what = || format!("creating TAP device '{name}'");
        check_name(name).map_err(|m| Error::msg(format!("{}: {m}", what())))?;
        if sys::if_index(name).ctx(what)?.is_some() {
            return Err(Error::msg(format!(
                "{}: an interface of that name already exists",
                what()
            ))
            .hint(format!(
                "pick another name, or remove it with `ip link del {name}` if it is a leftover"
            )));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")
            .map_err(|e| {
                let hint = match e.raw_os_error() {
                    Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::ENXIO) => {
                        "the TUN/TAP driver is missing: load it with `modprobe tun` (in a container, pass /dev/net/tun in)"
                    }
                    Some(libc::EACCES) | Some(libc::EPERM) => "run netloop as root or with CAP_NET_ADMIN",
                    _ => "",
                };
                let err = Error::os(format!("{}: opening /dev/net/tun", what()), e);
                if hint.is_empty() {
                    err
                } else {
                    err.hint(hint)
                }
            })?;
        let vnet_flag = if vnet { libc::IFF_VNET_HDR } else { 0 };
        let flags = (libc::IFF_TAP | libc::IFF_NO_PI | vnet_flag) as libc::c_short;
        let ifname = sys::tun_set_iff(file.as_fd(), name, flags).map_err(|e| {
            let hint = match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => Some("run netloop as root or with CAP_NET_ADMIN".to_string()),
                Some(libc::EBUSY) => Some(format!(
                    "the name is in use by a TUN/TAP device another program has open; pick another name or stop that program (`ip link del {name}`)"
                )),
                Some(libc::EINVAL) => Some(format!(
                    "the name is in use by an interface that is not a TAP device; pick another name (see `ip link show {name}`)"
                )),
                _ => None,
            };
            let err = Error::os(what(), e);
            match hint {
                Some(h) => err.hint(h),
                None => err,
            }
        })?;
        // Between the check above and TUNSETIFF someone may have created a
        // persistent TAP of that name, and we attached to it: refuse it (we
        // would not remove it) — our fd closing detaches us again.
        let (_, got) = sys::tun_get_iff(file.as_fd()).ctx(what)?;
        if got & libc::IFF_PERSIST as libc::c_short != 0 {
            return Err(Error::msg(format!(
                "{}: a persistent TAP device of that name already exists",
                what()
            ))
            .hint(format!("remove it with `ip link del {ifname}`")));
        }
        let mut tap = TapDevice {
            file,
            label: format!("tap {ifname}"),
            ifname,
            vnet,
            buf: vec![0; READ_BUF + if vnet { VNET_HDR_LEN } else { 0 }],
            segment: Vec::new(),
            counters: BoundaryCounters::default(),
            tx_dropped_base: 0,
        };
        tap.tx_dropped_base = tap.kernel_tx_dropped().unwrap_or(0);
        Ok(tap)
    }

    /// The name the device was created with (see [`TapDevice::current_name`]
    /// for its name now, if it was renamed).
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The device's name now, wherever it is (TUNGETIFF follows renames in
    /// other namespaces).
    pub fn current_name(&self) -> io::Result<String> {
        sys::tun_get_iff(self.file.as_fd()).map(|(n, _)| n)
    }

    /// Tells the kernel we accept no offloads (TUNSETOFFLOAD 0), so it never
    /// hands us GSO super-frames or frames with partial checksums: every
    /// frame read is at most MTU-sized and complete. This is already the
    /// state of a new device without IFF_VNET_HDR; calling it makes sure.
    pub fn set_offload_none(&self) -> Result<()> {
        sys::tun_set_offload(self.file.as_fd(), 0)
            .ctx(|| format!("turning off offloads of TAP device '{}'", self.ifname))
    }

    /// Tells the kernel that netloop takes super-frames (TCP over IPv4 and
    /// IPv6 with ECN, UDP where the kernel has it) and partial checksums, so the
    /// namespace's stack hands over its large sends whole, as to a NIC with
    /// TSO. Only for a device made with [`TapDevice::create_gso`].
    pub fn set_offload_gso(&self) -> Result<()> {
        let what = || format!("turning on offloads of TAP device '{}'", self.ifname);
        if !self.vnet {
            return Err(Error::msg(format!(
                "{}: it was made without IFF_VNET_HDR",
                what()
            )));
        }
        let tcp = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
        match sys::tun_set_offload(self.file.as_fd(), tcp | TUN_F_USO4 | TUN_F_USO6) {
            Ok(()) => Ok(()),
            // A kernel before 6.2 has no UDP segmentation offload for TAP.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                sys::tun_set_offload(self.file.as_fd(), tcp).ctx(what)
            }
            Err(e) => Err(Error::os(what(), e)),
        }
    }

    /// Reads up to `max` frames; with `whole`, super-frames are passed on
    /// whole with their GSO, else cut.
    fn recv(&mut self, max: usize, whole: bool, f: &mut RecvGso<'_>) -> io::Result<usize> {
        let mut passed = 0;
        let mut reads = 0;
        let head = if self.vnet { VNET_HDR_LEN } else { 0 };
        // Bound the reads, not only the frames passed on, so a flood of
        // runts cannot keep us here.
        while reads < max {
            let n = match (&self.file).read(&mut self.buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // A frame the kernel cannot describe in a virtio_net_hdr (a
                // GSO kind it has no code for): it freed the frame; counted,
                // and the reading goes on.
                Err(e) if self.vnet && e.raw_os_error() == Some(libc::EINVAL) => {
                    reads += 1;
                    self.counters.rx_gso_refused += 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            reads += 1;
            match classify_read(n.saturating_sub(head), self.buf.len() - head) {
                ReadClass::Runt => self.counters.rx_malformed += 1,
                ReadClass::Truncated => self.counters.rx_truncated += 1,
                ReadClass::Frame => {
                    let hdr = (head > 0).then(|| {
                        let mut b = [0u8; VNET_HDR_LEN];
                        b.copy_from_slice(&self.buf[..VNET_HDR_LEN]);
                        VnetHdr::parse(&b)
                    });
                    let frame = &mut self.buf[head..n];
                    match hdr.filter(VnetHdr::is_gso) {
                        None => {
                            // A checksum left to offload is completed at the
                            // place the header names, whatever the protocol;
                            // offsets that do not fit make a malformed frame.
                            if let Some(h) = hdr.filter(|h| h.flags & gso::F_NEEDS_CSUM != 0) {
                                if !gso::complete_partial(frame, h.csum_start, h.csum_offset) {
                                    self.counters.rx_malformed += 1;
                                    continue;
                                }
                                self.counters.rx_checksums_completed += 1;
                            }
                            self.counters.rx_frames += 1;
                            self.counters.rx_bytes += frame.len() as u64;
                            passed += 1;
                            // A TAP gives no arrival time.
                            f(frame, None, None);
                        }
                        Some(h) => {
                            let described = if whole {
                                Some(gso::describe(frame, &h))
                            } else {
                                None
                            };
                            match described {
                                Some(Ok(Some(g))) => {
                                    self.counters.rx_frames += u64::from(g.segs);
                                    self.counters.rx_bytes += g.wire_len(frame.len());
                                    self.counters.rx_gso_frames += 1;
                                    passed += 1;
                                    f(frame, None, Some(g));
                                }
                                Some(Err(_)) => self.counters.rx_gso_refused += 1,
                                // Cut here: not asked to pass it whole, or
                                // one segment (its checksum completed).
                                _ => {
                                    let counters = &mut self.counters;
                                    let cut =
                                        gso::segment(frame, &h, &mut self.segment, &mut |seg| {
                                            counters.rx_frames += 1;
                                            counters.rx_bytes += seg.len() as u64;
                                            passed += 1;
                                            f(seg, None, None);
                                        });
                                    match cut {
                                        Ok(_) => self.counters.rx_gso_frames += 1,
                                        Err(_) => self.counters.rx_gso_refused += 1,
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        Ok(passed)
    }

    /// Writes super-frame `frame` (of `segs` segments) behind `hdr`; an
    /// EINVAL is returned, not counted (the caller cuts the frame then).
    fn write_super(&mut self, hdr: &VnetHdr, frame: &Frame, segs: u16) -> io::Result<bool> {
        loop {
            match sys::write2(self.file.as_fd(), &hdr.bytes(), frame) {
                Ok(_) => {
                    self.counters.tx_frames += u64::from(segs);
                    self.counters.tx_bytes += frame.wire_len();
                    self.counters.tx_gso_frames += 1;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Err(e),
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EIO)
                    ) =>
                {
                    self.counters.tx_drops += u64::from(segs);
                    return Ok(false);
                }
                Err(e) => {
                    self.counters.tx_drops += u64::from(segs);
                    return Err(e);
                }
            }
        }
    }

    /// Writes plain frame `frame`: behind a `virtio_net_hdr` that asks
    /// nothing of the kernel on a device with IFF_VNET_HDR (one `writev`),
    /// else alone.
    fn write_plain(&mut self, frame: &[u8]) -> io::Result<bool> {
        let none = VnetHdr::default().bytes();
        loop {
            let r = if self.vnet {
                sys::write2(self.file.as_fd(), &none, frame).map(drop)
            } else {
                (&self.file).write(frame).map(drop)
            };
            match r {
                Ok(()) => {
                    self.counters.tx_frames += 1;
                    self.counters.tx_bytes += frame.len() as u64;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // The socket buffer is full (EAGAIN) or the kernel is short
                // of buffers (ENOBUFS): a full queue, the frame is lost here.
                // EIO: the device is down (e.g. set down inside its
                // namespace); EINVAL: the frame is shorter than a header.
                // Neither must end the run; both lose this frame.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EAGAIN)
                            | Some(libc::ENOBUFS)
                            | Some(libc::EIO)
                            | Some(libc::EINVAL)
                    ) =>
                {
                    self.counters.tx_drops += 1;
                    return Ok(false);
                }
                Err(e) => {
                    self.counters.tx_drops += 1;
                    return Err(e);
                }
            }
        }
    }

    /// The device's kernel `tx_dropped` counter now: frames the kernel meant
    /// to hand to us (to transmit out of the TAP) but dropped, almost always
    /// because the device's queue (txqueuelen frames, 1000 by default; raise
    /// it with `ip link set NAME txqueuelen N`) was full because we did not
    /// read fast enough.
    ///
    /// Read through the file descriptor, so it works after the device was
    /// moved to another namespace and renamed there: TUNGETDEVNETNS gives the
    /// device's namespace and TUNGETIFF its name there; the counter is read
    /// from `/proc/thread-self/net/dev`, in a short-lived thread that enters
    /// that namespace if it is not the calling thread's. (`/sys/class/net`
    /// cannot be used: it shows the namespace sysfs was mounted in, where the
    /// device no longer is — or where another device may now have its name.)
    /// That thread costs some tens of microseconds: call this for reports,
    /// not per frame. Needs Linux 5.2 (TUNGETDEVNETNS) and the privileges we
    /// created the device with.
    pub fn kernel_tx_dropped(&self) -> io::Result<u64> {
        let fd = self.file.as_fd();
        let (name, _) = sys::tun_get_iff(fd)?;
        let ns = File::from(sys::tun_netns(fd)?);
        let there = ns.metadata()?;
        let here = std::fs::metadata("/proc/thread-self/ns/net")?;
        let read = |name: &str| -> io::Result<u64> {
            let text = std::fs::read_to_string("/proc/thread-self/net/dev")?;
            parse_proc_net_dev_tx_dropped(&text, name).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("'{name}' not in /proc/net/dev"),
                )
            })
        };
        if (there.dev(), there.ino()) == (here.dev(), here.ino()) {
            return read(&name);
        }
        std::thread::scope(|s| {
            s.spawn(|| {
                sys::enter_netns(ns.as_fd())?;
                read(&name)
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("stats thread panicked")))
        })
    }
}

/// Checks an interface name the way the kernel does (`dev_valid_name`).
pub(crate) fn check_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".into());
    }
    if name.len() > sys::IFNAME_MAX {
        return Err(format!(
            "the name is {} bytes long; interface names have at most {} (IFNAMSIZ)",
            name.len(),
            sys::IFNAME_MAX
        ));
    }
    if name == "."
        || name == ".."
        || name
            .bytes()
            .any(|b| b == b'/' || b == b':' || b == 0 || b.is_ascii_whitespace())
    {
        return Err(
            "interface names cannot be '.' or '..' or contain '/', ':' or whitespace".into(),
        );
    }
    Ok(())
}

/// The `tx drop` column of interface `name` in a `/proc/net/dev` text.
pub fn parse_proc_net_dev_tx_dropped(text: &str, name: &str) -> Option<u64> {
    // "  eth0: rx_bytes rx_packets rx_errs rx_drop rx_fifo rx_frame rx_compressed
    //  rx_multicast tx_bytes tx_packets tx_errs tx_drop ..." — names cannot
    // contain ':', and large counters may follow the colon without a space.
    text.lines().skip(2).find_map(|line| {
        let (n, rest) = line.split_once(':')?;
        if n.trim() != name {
            return None;
        }
        rest.split_whitespace().nth(11)?.parse().ok()
    })
}

impl FrameIo for TapDevice {
    fn name(&self) -> &str {
        &self.label
    }

    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.file.as_fd()
    }

    fn recv_batch(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(&[u8], Option<u64>),
    ) -> io::Result<usize> {
        self.recv(max, false, &mut |frame, stamp, _| f(frame, stamp))
    }

    /// With IFF_VNET_HDR, super-frames are passed on whole.
    fn recv_batch_gso(&mut self, max: usize, f: &mut RecvGso<'_>) -> io::Result<usize> {
        self.recv(max, true, f)
    }

    fn send(&mut self, frame: &[u8]) -> io::Result<bool> {
        self.write_plain(frame)
    }

    /// With IFF_VNET_HDR a super-frame goes whole, behind its
    /// `virtio_net_hdr`: the namespace's stack takes it as one packet.
    fn send_frame(&mut self, frame: &Frame) -> io::Result<bool> {
        match frame.meta.gso {
            Some(g) if self.vnet => {
                let Some(hdr) = gso::vnet_for_frame(frame, &g) else {
                    return send_segments(frame, &mut |seg| self.send(seg));
                };
                match self.write_super(&hdr, frame, g.segs) {
                    // Refused whole (a kernel without that GSO kind): its
                    // segments one by one.
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                        send_segments(frame, &mut |seg| self.send(seg))
                    }
                    r => r,
                }
            }
            _ if frame.is_super() => send_segments(frame, &mut |seg| self.send(seg)),
            _ => self.send(frame),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        // `send` writes each frame at once.
        Ok(())
    }

    /// A deleted device detaches its descriptor: TUNGETIFF then fails
    /// (EBADFD).
    fn exists(&self) -> Option<bool> {
        Some(sys::tun_get_iff(self.file.as_fd()).is_ok())
    }

    /// Our counters, with `rx_kernel_drops` = the device's kernel
    /// `tx_dropped` (see [`TapDevice::kernel_tx_dropped`]); if it cannot be
    /// read now (e.g. the namespace is being torn down), the last value read
    /// stays.
    fn counters(&mut self) -> BoundaryCounters {
        if let Ok(d) = self.kernel_tx_dropped() {
            self.counters.rx_kernel_drops = d.saturating_sub(self.tx_dropped_base);
        }
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_classified() {
        assert_eq!(classify_read(0, READ_BUF), ReadClass::Runt);
        assert_eq!(classify_read(10, READ_BUF), ReadClass::Runt);
        assert_eq!(classify_read(13, READ_BUF), ReadClass::Runt);
        assert_eq!(classify_read(14, READ_BUF), ReadClass::Frame);
        assert_eq!(classify_read(1514, READ_BUF), ReadClass::Frame);
        assert_eq!(classify_read(READ_BUF - 1, READ_BUF), ReadClass::Frame);
        assert_eq!(classify_read(READ_BUF, READ_BUF), ReadClass::Truncated);
        // The buffer holds the largest frame a TAP can carry.
        const { assert!(READ_BUF > 65535 + ETH_HLEN) };
    }

    #[test]
    fn proc_net_dev_is_parsed() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0\n\
nl-tap0:12345678901 7 0 3 0 0 0 0 42 5 0 1234 0 0 0 0\n";
        assert_eq!(parse_proc_net_dev_tx_dropped(text, "nl-tap0"), Some(1234));
        assert_eq!(parse_proc_net_dev_tx_dropped(text, "lo"), Some(0));
        assert_eq!(parse_proc_net_dev_tx_dropped(text, "eth0"), None);
        assert_eq!(parse_proc_net_dev_tx_dropped(text, "nl"), None);
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("nl1a2b3c-0").is_ok());
        assert!(check_name("123456789012345").is_ok());
        assert!(check_name("1234567890123456").is_err());
        assert!(check_name("").is_err());
        assert!(check_name("a/b").is_err());
        assert!(check_name("a:b").is_err());
        assert!(check_name("a b").is_err());
        assert!(check_name("..").is_err());
    }
}
