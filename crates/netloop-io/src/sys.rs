//! All of this crate's `unsafe` code: small safe wrappers around the system
//! calls the other modules make.
//!
//! Each wrapper owns the one thing that makes its call unsafe (a pointer to a
//! C struct, a raw file descriptor, a shared memory mapping) and states in a
//! `// SAFETY:` comment why the call is sound. The wrappers return plain
//! `io::Result`s; what an error means to the user (and how to fix it) is said
//! by the callers (`tap`, `packet`, ...), not here.
//!
//! Sections: process and clocks; file descriptors and namespaces; interface
//! ioctls (`ifreq`, ethtool); TUN/TAP ioctls; AF_PACKET sockets; the
//! memory-mapped TPACKET_V2 ring; child processes and PID namespaces.

use std::ffi::{c_int, c_short, c_uint, c_ulong, CString};
use std::io;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Turns a C return value into an `io::Result`, taking `errno` when negative.
fn cvt(ret: c_int) -> io::Result<c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

// ---------------------------------------------------------------------------
// Process and clocks
// ---------------------------------------------------------------------------

/// The processor's time-stamp counter, where it has one (x86_64); `None`
/// elsewhere. Not ordered with the instructions around it (no fence): a
/// reading may be taken a few cycles early or late, which is what makes it
/// cheap (see `clock::FastClock`).
#[inline]
pub fn tsc() -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC reads a register; it has no operands and no effect
        // on memory, and every x86_64 processor has it.
        Some(unsafe { std::arch::x86_64::_rdtsc() })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// Blocks, in the calling thread, every signal but those the kernel sends
/// to the thread that faulted (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP,
/// SIGSYS), until the guard is dropped: a thread spawned meanwhile starts
/// with them blocked, and so does every thread it spawns.
///
/// For threads started inside a program that handles signals itself, such
/// as Python: a signal sent to the process goes to one of its threads that
/// does not block it, and Python runs its handlers in its main thread only;
/// a SIGTERM that the kernel gave a netloop thread left the main thread
/// asleep in `time.sleep(60)`, its handler not run (the Python test of
/// SIGTERM hung in 2 of 25 runs on a loaded machine). With netloop's threads
/// blocking them, such signals go to the main thread.
pub fn block_async_signals() -> SignalsBlocked {
    // SAFETY: sigset_t is plain data; all-zero is a valid value, and the
    // calls write only the sets we pass.
    let mut set: libc::sigset_t = unsafe { MaybeUninit::zeroed().assume_init() };
    let mut old: libc::sigset_t = unsafe { MaybeUninit::zeroed().assume_init() };
    // SAFETY: as above; the mask is this thread's own, put back on drop.
    unsafe {
        libc::sigfillset(&mut set);
        for sig in [
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGFPE,
            libc::SIGILL,
            libc::SIGTRAP,
            libc::SIGSYS,
        ] {
            libc::sigdelset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
    }
    SignalsBlocked { old }
}

/// See [`block_async_signals`]: puts the thread's signal mask back.
pub struct SignalsBlocked {
    old: libc::sigset_t,
}

impl Drop for SignalsBlocked {
    fn drop(&mut self) {
        // SAFETY: restores this thread's own mask, saved above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, ptr::null_mut()) };
    }
}

/// The machine's physical memory in bytes, if the system says.
pub fn physical_memory() -> Option<u64> {
    // SAFETY: sysconf takes an integer and has no preconditions.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && size > 0).then(|| pages as u64 * size as u64)
}

/// Tells glibc's allocator to keep freed memory in the heap: no trimming of
/// the heap's top, and blocks up to `heap_up_to` bytes from the heap rather
/// than from fresh mappings. Returns false where the C library is not
/// glibc (nothing is changed there).
pub fn keep_freed_memory(heap_up_to: usize) -> bool {
    #[cfg(target_env = "gnu")]
    {
        let heap_up_to = c_int::try_from(heap_up_to).unwrap_or(c_int::MAX);
        // SAFETY: mallopt takes two integers and changes allocator
        // parameters under the allocator's own lock.
        unsafe {
            libc::mallopt(libc::M_TRIM_THRESHOLD, c_int::MAX) == 1
                && libc::mallopt(libc::M_MMAP_THRESHOLD, heap_up_to) == 1
        }
    }
    #[cfg(not(target_env = "gnu"))]
    {
        let _ = heap_up_to;
        false
    }
}

/// Whether this process runs with effective user id 0 (tests that create
/// network devices skip themselves otherwise).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The version of the GNU C library this process runs on (`2.36`), or
/// `None` where it is not glibc.
pub fn glibc_version() -> Option<(u32, u32)> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: gnu_get_libc_version returns a static NUL-terminated
        // string owned by glibc, valid for the life of the process.
        let v = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
        let mut parts = v.to_str().ok()?.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some((major, minor))
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}

/// Whether this process's address space is laid out at random: not when
/// its personality says ADDR_NO_RANDOMIZE (`setarch -R`, a debugger) or
/// the kernel's `randomize_va_space` is 0.
pub fn address_space_random() -> bool {
    // SAFETY: personality(0xffffffff) only reads the current persona.
    let persona = unsafe { libc::personality(0xffff_ffff) };
    let off = persona != -1 && persona & libc::ADDR_NO_RANDOMIZE != 0;
    let kernel = std::fs::read_to_string("/proc/sys/kernel/randomize_va_space")
        .map_or(true, |v| v.trim() != "0");
    !off && kernel
}

// ---------------------------------------------------------------------------
// File descriptors and namespaces
// ---------------------------------------------------------------------------

/// Waits up to `timeout` for `fd` to become readable (or to report an error
/// or hang-up, which a read will then return). `Ok(false)` on timeout or when
/// a signal interrupted the wait.
pub fn poll_readable(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = c_int::try_from(timeout.as_millis()).unwrap_or(c_int::MAX);
    // SAFETY: `pfd` is one valid, writable pollfd and we pass a count of 1.
    let r = unsafe { libc::poll(&mut pfd, 1, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(r > 0)
}

/// Moves the calling thread (only it) into the network namespace `ns` (an fd
/// of `/proc/PID/ns/net`, `/run/netns/NAME` or from `TUNGETDEVNETNS`).
pub fn enter_netns(ns: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: setns takes an fd we borrow for the call and a flag; it changes
    // no memory of ours, only the calling thread's namespace.
    cvt(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

/// Takes ownership of a descriptor a system call just returned.
fn owned(fd: c_int) -> io::Result<OwnedFd> {
    let fd = cvt(fd)?;
    // SAFETY: `fd` was just returned to us by the kernel, is open, and is
    // owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `socket(2)`, always with `SOCK_CLOEXEC` added.
pub fn socket(domain: c_int, ty: c_int, protocol: c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket takes only integers.
    owned(unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, protocol) })
}

/// `setsockopt(2)` with an `int` value.
pub fn setsockopt_int(
    fd: BorrowedFd<'_>,
    level: c_int,
    name: c_int,
    value: c_int,
) -> io::Result<()> {
    setsockopt_raw(fd, level, name, &value)
}

/// `setsockopt(2)` with any plain C struct (`T` is one of libc's `repr(C)`
/// option structs; the function is private so no other `T` can reach it).
fn setsockopt_raw<T: Copy>(
    fd: BorrowedFd<'_>,
    level: c_int,
    name: c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` points to a live `T` of exactly the length we pass;
    // the kernel only reads it.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

// ---------------------------------------------------------------------------
// Interface ioctls
// ---------------------------------------------------------------------------

/// The longest interface name (IFNAMSIZ minus the terminating NUL).
pub const IFNAME_MAX: usize = libc::IFNAMSIZ - 1;

/// A zeroed `ifreq` carrying `name` (which must be 1..=15 bytes without NUL).
fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    if name.is_empty() || name.len() > IFNAME_MAX || name.bytes().any(|b| b == 0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid interface name {name:?}"),
        ));
    }
    // SAFETY: ifreq is a C struct of integers, arrays and a union of those
    // and a pointer; all-zero bytes are a valid (empty) value for it.
    let mut req: libc::ifreq = unsafe { MaybeUninit::zeroed().assume_init() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    Ok(req)
}

/// The name in an `ifreq` the kernel filled in.
fn ifreq_name(req: &libc::ifreq) -> String {
    let bytes: Vec<u8> = req
        .ifr_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `ioctl(fd, request, &mut ifreq)`.
fn ioctl_ifreq(fd: BorrowedFd<'_>, request: c_ulong, req: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: every request we pass here reads and/or writes one `struct
    // ifreq` (or, for SIOCETHTOOL, also what `ifr_data` points to, see
    // `ethtool_value`), and `req` is a valid, writable ifreq.
    cvt(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            request as libc::Ioctl,
            req as *mut libc::ifreq,
        )
    })
    .map(drop)
}

/// The interface's index, or `None` if there is no interface of that name
/// (in this thread's network namespace).
pub fn if_index(name: &str) -> io::Result<Option<u32>> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx != 0 {
        return Ok(Some(idx));
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ENODEV) {
        Ok(None)
    } else {
        Err(e)
    }
}

/// The interface's flags (`IFF_UP`, `IFF_RUNNING`, ...), via SIOCGIFFLAGS on
/// any socket `sock`.
pub fn if_flags(sock: BorrowedFd<'_>, name: &str) -> io::Result<c_short> {
    let mut req = ifreq(name)?;
    ioctl_ifreq(sock, libc::SIOCGIFFLAGS, &mut req)?;
    // SAFETY: SIOCGIFFLAGS filled in the `ifru_flags` member of the union.
    Ok(unsafe { req.ifr_ifru.ifru_flags })
}

/// The interface's MTU (SIOCGIFMTU).
pub fn if_mtu(sock: BorrowedFd<'_>, name: &str) -> io::Result<u32> {
    let mut req = ifreq(name)?;
    ioctl_ifreq(sock, libc::SIOCGIFMTU, &mut req)?;
    // SAFETY: SIOCGIFMTU filled in the `ifru_mtu` member of the union.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    Ok(mtu.max(0) as u32)
}

/// The interface's hardware type (`ARPHRD_*`) and the first six bytes of its
/// hardware address (SIOCGIFHWADDR).
pub fn if_hwaddr(sock: BorrowedFd<'_>, name: &str) -> io::Result<(u16, [u8; 6])> {
    let mut req = ifreq(name)?;
    ioctl_ifreq(sock, libc::SIOCGIFHWADDR, &mut req)?;
    // SAFETY: SIOCGIFHWADDR filled in the `ifru_hwaddr` member of the union.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (m, &b) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *m = b as u8;
    }
    Ok((sa.sa_family, mac))
}

/// `struct ethtool_value` from `<linux/ethtool.h>` (libc does not have it).
#[repr(C)]
#[derive(Clone, Copy)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// The legacy ethtool commands that take a `struct ethtool_value` (and
/// nothing larger): GLINK, G/S RXCSUM, TXCSUM, SG, TSO, UFO, GSO, FLAGS, GRO.
const ETHTOOL_VALUE_CMDS: [u32; 17] = [
    0x0a, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1e, 0x1f, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x2b,
    0x2c,
];

/// Runs the legacy ethtool command `cmd` (an `ETHTOOL_G*`/`ETHTOOL_S*` that
/// takes a `struct ethtool_value`; others are refused with InvalidInput, as
/// the kernel would read or write a larger struct) on interface `name` with
/// `data`; returns the `data` the kernel left (the value, for a `G*`
/// command).
pub fn ethtool_value(sock: BorrowedFd<'_>, name: &str, cmd: u32, data: u32) -> io::Result<u32> {
    if !ETHTOOL_VALUE_CMDS.contains(&cmd) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("ethtool command {cmd:#x} does not take a struct ethtool_value"),
        ));
    }
    let mut value = EthtoolValue { cmd, data };
    let mut req = ifreq(name)?;
    req.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
    // SIOCETHTOOL with one of the ethtool_value commands reads and writes
    // exactly one `struct ethtool_value` at `ifr_data`, which `value` is and
    // which outlives the call (see `ioctl_ifreq`).
    ioctl_ifreq(sock, libc::SIOCETHTOOL, &mut req)?;
    Ok(value.data)
}

// ---------------------------------------------------------------------------
// TUN/TAP
// ---------------------------------------------------------------------------

/// TUNSETIFF on an open `/dev/net/tun`: creates (or attaches to) the device
/// `name` with `flags`; returns the name the kernel gave it.
pub fn tun_set_iff(fd: BorrowedFd<'_>, name: &str, flags: c_short) -> io::Result<String> {
    let mut req = ifreq(name)?;
    req.ifr_ifru.ifru_flags = flags;
    // SAFETY: TUNSETIFF reads and writes one `struct ifreq`; `req` is one.
    cvt(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TUNSETIFF,
            &mut req as *mut libc::ifreq,
        )
    })?;
    Ok(ifreq_name(&req))
}

/// TUNGETIFF: the device's current name (it follows renames, also in another
/// namespace) and its flags (`IFF_TAP`, `IFF_PERSIST`, ...).
pub fn tun_get_iff(fd: BorrowedFd<'_>) -> io::Result<(String, c_short)> {
    // SAFETY: as in `ifreq`: all-zero is a valid ifreq.
    let mut req: libc::ifreq = unsafe { MaybeUninit::zeroed().assume_init() };
    // SAFETY: TUNGETIFF writes one `struct ifreq`; `req` is one.
    cvt(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TUNGETIFF,
            &mut req as *mut libc::ifreq,
        )
    })?;
    // SAFETY: TUNGETIFF filled in `ifru_flags`.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    Ok((ifreq_name(&req), flags))
}

/// TUNSETOFFLOAD: which offloads (`TUN_F_*`) the reader accepts; 0 means
/// none, so the kernel segments and checksums every frame before we see it.
pub fn tun_set_offload(fd: BorrowedFd<'_>, flags: c_uint) -> io::Result<()> {
    // SAFETY: TUNSETOFFLOAD takes its argument by value (an unsigned int in
    // the pointer-sized argument), not as a pointer.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETOFFLOAD, flags as c_ulong) }).map(drop)
}

/// TUNGETDEVNETNS (Linux 5.2): a new descriptor of the network namespace the
/// device is in now (wherever it has been moved).
pub fn tun_netns(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: TUNGETDEVNETNS takes no argument and returns a new fd.
    owned(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNGETDEVNETNS) })
}

// ---------------------------------------------------------------------------
// AF_PACKET sockets
// ---------------------------------------------------------------------------

/// Sets up a TPACKET ring (`which` is PACKET_RX_RING or PACKET_TX_RING).
pub fn packet_set_ring(
    fd: BorrowedFd<'_>,
    which: c_int,
    req: &libc::tpacket_req,
) -> io::Result<()> {
    setsockopt_raw(fd, libc::SOL_PACKET, which, req)
}

/// PACKET_ADD_MEMBERSHIP of `mr_type` (e.g. PACKET_MR_PROMISC) on `ifindex`;
/// the kernel drops it when the socket closes.
pub fn packet_add_membership(fd: BorrowedFd<'_>, ifindex: u32, mr_type: c_int) -> io::Result<()> {
    let mreq = libc::packet_mreq {
        mr_ifindex: ifindex as c_int,
        mr_type: mr_type as libc::c_ushort,
        mr_alen: 0,
        mr_address: [0; 8],
    };
    setsockopt_raw(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)
}

/// PACKET_STATISTICS: `(tp_packets, tp_drops)` since the last call (the
/// kernel resets them on every read).
pub fn packet_statistics(fd: BorrowedFd<'_>) -> io::Result<(u32, u32)> {
    let mut st = libc::tpacket_stats {
        tp_packets: 0,
        tp_drops: 0,
    };
    let mut len = size_of::<libc::tpacket_stats>() as libc::socklen_t;
    // SAFETY: `st` is a writable tpacket_stats and `len` says its size; the
    // kernel writes at most `len` bytes and updates `len`.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats).cast(),
            &mut len,
        )
    })?;
    Ok((st.tp_packets, st.tp_drops))
}

/// Binds an AF_PACKET socket to interface `ifindex` and `protocol` (host
/// byte order, e.g. ETH_P_ALL).
pub fn packet_bind(fd: BorrowedFd<'_>, ifindex: u32, protocol: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain integers and arrays; all-zero is valid.
    let mut sll: libc::sockaddr_ll = unsafe { MaybeUninit::zeroed().assume_init() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex as c_int;
    // SAFETY: `sll` is a valid sockaddr_ll and we pass its exact size.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// `send(fd, NULL, 0, MSG_DONTWAIT)`: on a socket with a PACKET_TX_RING,
/// asks the kernel to transmit every frame marked TP_STATUS_SEND_REQUEST
/// (in ring order from where it stopped last). Returns the bytes sent.
pub fn packet_tx_kick(fd: BorrowedFd<'_>) -> io::Result<usize> {
    // SAFETY: a NULL buffer of length 0 is never dereferenced; with a TX
    // ring the kernel reads the frames from the ring instead.
    let r = unsafe { libc::send(fd.as_raw_fd(), ptr::null(), 0, libc::MSG_DONTWAIT) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// `writev(fd, [head, body])`: one frame behind its header (a
/// `virtio_net_hdr`) without copying them together. Returns the bytes
/// written.
pub fn write2(fd: BorrowedFd<'_>, head: &[u8], body: &[u8]) -> io::Result<usize> {
    let iov = [
        libc::iovec {
            iov_base: head.as_ptr() as *mut libc::c_void,
            iov_len: head.len(),
        },
        libc::iovec {
            iov_base: body.as_ptr() as *mut libc::c_void,
            iov_len: body.len(),
        },
    ];
    // SAFETY: both iovecs point into live slices of the given lengths, which
    // the kernel only reads.
    let r = unsafe { libc::writev(fd.as_raw_fd(), iov.as_ptr(), 2) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

// ---------------------------------------------------------------------------
// The memory-mapped TPACKET_V2 ring
// ---------------------------------------------------------------------------

/// Where a TX frame's data starts in its slot:
/// `TPACKET2_HDRLEN - sizeof(struct sockaddr_ll)`, i.e. the 32-byte aligned
/// `tpacket2_hdr` (the kernel's default without PACKET_TX_HAS_OFF).
pub const TX_DATA_OFFSET: usize = libc::TPACKET2_HDRLEN - size_of::<libc::sockaddr_ll>();

/// Length of a `virtio_net_hdr` (PACKET_VNET_HDR).
pub const VNET_LEN: usize = 10;

/// `PACKET_VNET_HDR` (linux/if_packet.h): frames on the socket carry a
/// `virtio_net_hdr`, so GSO super-frames are read and written whole.
pub const PACKET_VNET_HDR: c_int = 15;

/// The fields of an RX slot's `tpacket2_hdr`, copied out once the slot is
/// ours.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RxHeader {
    /// `tp_status` (TP_STATUS_USER plus LOSING, CSUMNOTREADY, VLAN_VALID, ...).
    pub status: u32,
    /// The frame's length on the wire.
    pub len: u32,
    /// How much of it is in the slot.
    pub snaplen: u32,
    /// Arrival time, CLOCK_REALTIME seconds.
    pub sec: u32,
    /// ... and nanoseconds.
    pub nsec: u32,
    /// The VLAN tag the NIC stripped (valid with TP_STATUS_VLAN_VALID).
    pub vlan_tci: u16,
    /// Its TPID (valid with TP_STATUS_VLAN_TPID_VALID).
    pub vlan_tpid: u16,
}

/// A shared memory mapping of an AF_PACKET socket's rings (RX ring first,
/// then TX ring, as the kernel lays them out), and the slot protocol on it.
///
/// Each slot starts with a `tpacket2_hdr` whose `tp_status` word says who
/// owns the slot; it is the only word both sides touch concurrently, so it is
/// only ever accessed atomically — Acquire when taking a slot over (so the
/// other side's writes to it are visible), Release when handing it back (so
/// ours are). The rest of a slot is touched only by its owner.
///
/// The mapping must be dropped before the socket is closed (the kernel
/// complains about a busy ring otherwise): put it first in the owning struct.
pub(crate) struct PacketRing {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone (nothing else in the
// process holds its address); moving it to another thread is fine. It is not
// Sync: slots are handed out through `&mut self`.
unsafe impl Send for PacketRing {}

impl PacketRing {
    /// Maps `len` bytes of the rings of AF_PACKET socket `fd` (the kernel
    /// refuses any length but the rings' total). Descriptors of anything but
    /// an AF_PACKET socket are refused: only the kernel may share the memory
    /// with us, or the slot protocol below would not hold.
    pub fn map(fd: BorrowedFd<'_>, len: usize) -> io::Result<PacketRing> {
        let mut domain: c_int = 0;
        let mut dlen = size_of::<c_int>() as libc::socklen_t;
        // SAFETY: `domain` is a writable int and `dlen` says its size.
        let r = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_DOMAIN,
                (&mut domain as *mut c_int).cast(),
                &mut dlen,
            )
        };
        if r < 0 || domain != libc::AF_PACKET || len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "only an AF_PACKET socket's rings can be mapped",
            ));
        }
        // SAFETY: a fresh shared mapping at an address the kernel picks; it
        // overlaps nothing of ours. We own it until `Drop` unmaps it.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned NULL"))?;
        let ring = PacketRing { base, len };
        // A fork (netloop makes none, but a program it is a library of may)
        // must not give the child the rings: the mapping stays this value's
        // alone.
        // SAFETY: `base`/`len` are exactly the mapping just made; the advice
        // changes only what fork copies, not the mapping's contents.
        cvt(unsafe { libc::madvise(base.as_ptr().cast(), len, libc::MADV_DONTFORK) })?;
        Ok(ring)
    }

    /// The slot of `size` bytes at `off` exists in the mapping and its
    /// header is 4-byte aligned (slots are 16-byte aligned by construction).
    fn check_slot(&self, off: usize, size: usize) {
        assert!(
            off.is_multiple_of(16)
                && size >= size_of::<libc::tpacket2_hdr>()
                && off.checked_add(size).is_some_and(|end| end <= self.len),
            "slot {off}+{size} outside the {} byte ring",
            self.len
        );
    }

    /// The `tp_status` word of the slot at `off`.
    fn status(&self, off: usize) -> &AtomicU32 {
        // SAFETY: `off` is inside the mapping and 16-byte aligned (checked
        // by every caller through `check_slot`), `tp_status` is the first
        // field of the header, and the mapping lives as long as `self`. The
        // kernel accesses the word concurrently, which is why it is atomic.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(off).cast::<u32>()) }
    }

    /// Takes the RX slot at `off` (of `size` bytes) if the kernel has handed
    /// it to us (TP_STATUS_USER); the slot goes back to the kernel when the
    /// returned [`RxSlot`] is dropped. With `vnet`, the socket has
    /// PACKET_VNET_HDR and the slot's `virtio_net_hdr` (the 10 bytes before
    /// the frame) is read too.
    pub fn rx_slot(&mut self, off: usize, size: usize, vnet: bool) -> Option<RxSlot<'_>> {
        self.check_slot(off, size);
        let status = self.status(off).load(Ordering::Acquire);
        if status & libc::TP_STATUS_USER == 0 {
            return None;
        }
        // SAFETY: the slot is ours now (TP_STATUS_USER, loaded with Acquire
        // so the kernel's writes to it are visible); the kernel does not
        // touch it until we store TP_STATUS_KERNEL. The header lies inside
        // the slot (checked above).
        let h = unsafe { ptr::read(self.base.as_ptr().add(off).cast::<libc::tpacket2_hdr>()) };
        let header = RxHeader {
            status,
            len: h.tp_len,
            snaplen: h.tp_snaplen,
            sec: h.tp_sec,
            nsec: h.tp_nsec,
            vlan_tci: h.tp_vlan_tci,
            vlan_tpid: h.tp_vlan_tpid,
        };
        // Never trust offsets to point outside the slot: clamp the data.
        let start = (h.tp_mac as usize).min(size);
        let end = start.saturating_add(h.tp_snaplen as usize).min(size);
        let vnet = (vnet && start >= libc::TPACKET2_HDRLEN + VNET_LEN).then(|| {
            let mut b = [0u8; VNET_LEN];
            // SAFETY: `off + start - VNET_LEN .. off + start` lies inside
            // this slot (after its header), which is ours as above.
            unsafe {
                ptr::copy_nonoverlapping(
                    self.base.as_ptr().add(off + start - VNET_LEN),
                    b.as_mut_ptr(),
                    VNET_LEN,
                );
            }
            b
        });
        // SAFETY: `off + start .. off + end` lies inside this slot, which is
        // ours until the RxSlot (which borrows `self` mutably, so no other
        // slot access can happen meanwhile) is dropped.
        let data =
            unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(off + start), end - start) };
        Some(RxSlot {
            status: self.status(off),
            header,
            vnet,
            data,
        })
    }

    /// The `tp_status` of the TX slot at `off`.
    pub fn tx_status(&self, off: usize, size: usize) -> u32 {
        self.check_slot(off, size);
        self.status(off).load(Ordering::Acquire)
    }

    /// Fills the TX slot at `off` (of `size` bytes) with `prefix` (a
    /// `virtio_net_hdr` on a socket with PACKET_VNET_HDR, else nothing)
    /// and `frame`, and marks it TP_STATUS_SEND_REQUEST — if the slot is
    /// free (neither waiting to be sent nor being sent); returns whether it
    /// was. They must fit: `prefix.len() + frame.len() <= size -
    /// TX_DATA_OFFSET`.
    pub fn tx_fill(&mut self, off: usize, size: usize, prefix: &[u8], frame: &[u8]) -> bool {
        self.check_slot(off, size);
        let len = prefix.len() + frame.len();
        assert!(
            len <= size - TX_DATA_OFFSET,
            "frame larger than its TX slot"
        );
        let status = self.status(off);
        // Free is AVAILABLE, possibly with timestamp bits set by the kernel
        // (veth stamps even when not asked to, see libtrace#181), or
        // WRONG_FORMAT (cannot happen with PACKET_LOSS set, but it is ours).
        let busy = libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING;
        if status.load(Ordering::Acquire) & busy != 0 {
            return false;
        }
        // SAFETY: the slot is ours (not SEND_REQUEST/SENDING, loaded with
        // Acquire): the kernel reads it only after we store SEND_REQUEST
        // below. Header and data lie inside the slot (checked above), and
        // `frame` cannot overlap the mapping (we never hand out TX slots).
        unsafe {
            let slot = self.base.as_ptr().add(off);
            let h = slot.cast::<libc::tpacket2_hdr>();
            ptr::addr_of_mut!((*h).tp_len).write(len as u32);
            ptr::addr_of_mut!((*h).tp_snaplen).write(len as u32);
            let data = slot.add(TX_DATA_OFFSET);
            ptr::copy_nonoverlapping(prefix.as_ptr(), data, prefix.len());
            ptr::copy_nonoverlapping(frame.as_ptr(), data.add(prefix.len()), frame.len());
        }
        status.store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        true
    }
}

impl Drop for PacketRing {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly the mapping `map` created, and no
        // borrow of it can outlive `self`.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// An RX slot the kernel handed to us; dropping it hands it back.
pub(crate) struct RxSlot<'a> {
    status: &'a AtomicU32,
    /// The slot's header.
    pub header: RxHeader,
    /// The `virtio_net_hdr` before the frame (PACKET_VNET_HDR).
    pub vnet: Option<[u8; VNET_LEN]>,
    data: &'a [u8],
}

impl RxSlot<'_> {
    /// The frame's bytes in the slot (`tp_snaplen` of them from `tp_mac`,
    /// clamped to the slot).
    pub fn data(&self) -> &[u8] {
        self.data
    }
}

impl Drop for RxSlot<'_> {
    fn drop(&mut self) {
        // Release: our reads of the slot happen before the kernel may
        // overwrite it.
        self.status.store(libc::TP_STATUS_KERNEL, Ordering::Release);
    }
}

// ---------------------------------------------------------------------------
// Child processes and PID namespaces
// ---------------------------------------------------------------------------

/// Held by unit tests that fork or count page faults: a fork makes every
/// page of the process copy-on-write, so a test counting faults must not
/// run beside one that forks.
#[cfg(test)]
pub(crate) static FORKS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Makes `cmd`'s child get SIGKILL when the thread that starts it ends (the
/// thread's process dying included). Only the child: what it starts in turn
/// is taken by its PID namespace's init (see `spawn_pid_namespace_init`).
#[cfg(test)]
pub fn kill_child_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec and calls
    // only prctl(2), which is async-signal-safe; it touches no memory shared
    // with the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A descriptor of this process's own PID namespace, to put a thread's
/// children back into it (see [`children_in_pid_namespace`]).
pub fn own_pid_namespace() -> io::Result<OwnedFd> {
    Ok(std::fs::File::open("/proc/self/ns/pid")?.into())
}

/// Makes the processes the calling thread forks from now on (only this
/// thread's: the setting is per thread) start in PID namespace `ns`, a
/// descriptor of `/proc/PID/ns/pid`: a namespace of which this process's
/// own is an ancestor, or its own (to undo it).
pub fn children_in_pid_namespace(ns: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: setns takes an fd we borrow for the call and a flag; with
    // CLONE_NEWPID it changes only where this thread's later children go.
    cvt(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWPID) }).map(drop)
}

/// A pipe, both ends close-on-exec: (read end, write end).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` is a writable array of two ints, as pipe2 needs.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 succeeded: both are open descriptors owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The init of a PID namespace, as [`spawn_pid_namespace_init`] started
/// it. Dropping it kills the init if it still runs; its stack (it shares our
/// memory) is unmapped once it is seen gone, and left mapped otherwise.
#[derive(Debug)]
pub struct PidInit {
    /// Its pid, in our PID namespace.
    pub pid: i32,
    /// A pidfd of it: it tells when the process is gone without a wait
    /// (which [`crate::proc::kill_init`] does by pid, on another thread).
    pidfd: OwnedFd,
    /// Its stack: a mapping of `stack_len` bytes, the lowest page a guard.
    stack: NonNull<libc::c_void>,
    stack_len: usize,
}

// SAFETY: the stack is a raw mapping that only the init (a process of its
// own) uses; the handle may be kept and dropped on any thread.
unsafe impl Send for PidInit {}

/// Bytes of a PID-namespace init's stack (a guard page comes below them):
/// its loop makes a few system calls with frames of a few hundred bytes.
const INIT_STACK: usize = 64 * 1024;

impl PidInit {
    /// Whether the process has ended (it runs no more code of ours, reaped
    /// or not), waiting up to `wait`.
    fn ended_within(&self, wait: Duration) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = c_int::try_from(wait.as_millis()).unwrap_or(c_int::MAX);
        // SAFETY: one pollfd we own; a pidfd is readable once its process
        // has terminated.
        unsafe { libc::poll(&mut pfd, 1, ms) == 1 }
    }
}

impl Drop for PidInit {
    fn drop(&mut self) {
        // SAFETY: pidfd_send_signal on our own pidfd (it names this process
        // and no other, even after it is reaped).
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                libc::SIGKILL,
                ptr::null::<libc::siginfo_t>(),
                0 as c_uint,
            )
        };
        if self.ended_within(Duration::from_secs(1)) {
            // SAFETY: our mapping of `stack_len` bytes; its only user has
            // ended, so nothing runs on it any more.
            unsafe { libc::munmap(self.stack.as_ptr(), self.stack_len) };
        }
        // Otherwise the stack stays mapped (64 KiB, once): unmapping it under
        // a process that may still run on it could let it write into
        // whatever is mapped there next.
    }
}

/// What the init reads: set up by the parent on the init's own stack
/// mapping, so it lives exactly as long as the init can use it.
struct InitArgs {
    netns: c_int,
    devnull: c_int,
    up_r: c_int,
    up_w: c_int,
    down_r: c_int,
    down_w: c_int,
    /// Whether `close_range` works here (the parent tried it); if not, the
    /// init closes each descriptor up to `max_fd`, the highest the parent
    /// had open.
    close_range: bool,
    max_fd: c_int,
}

/// Starts the init of a new PID namespace: a child of the calling thread
/// that is PID 1 of a namespace of its own, lives in network namespace
/// `netns` (a descriptor of `/run/netns/NAME`), and does nothing but reap
/// the processes the namespace hands it.
///
/// What it is for: when the init of a PID namespace dies, the kernel kills
/// every other process in it with SIGKILL, and no process can leave its PID
/// namespace (not by `setsid`, not by double forking). The init gets SIGKILL
/// itself when the calling thread ends (PR_SET_PDEATHSIG), so a thread that
/// lives as long as the run ties every process started in the namespace to
/// the run, even through a SIGKILL of netloop.
///
/// The init shares netloop's memory (`clone(CLONE_VM)` on a stack of its
/// own) and never calls `exec`: netloop may be a library inside another
/// program, with no binary of ours to run, and a `fork` would make every
/// page of netloop's copy-on-write, so that the model's state built before
/// (a few pages per simulated host) faulted once more in the run, making
/// events late. Sharing memory with a process that runs beside ours puts
/// rules on the init: it runs only `init_main`, which makes its system calls
/// through rustix's raw system calls (no libc, whose wrappers would write
/// `errno` in the calling thread's thread-local storage, which the init
/// shares), allocates nothing, and touches nothing but its stack. Every
/// signal is blocked in it from its first instruction (the calling thread
/// blocks them around the `clone`), so that no handler of ours runs on its
/// stack (glibc's `sigfillset` leaves out the two signals glibc keeps for
/// itself, whose handlers return at once for a signal not meant for them).
/// It holds no descriptor of ours: its table is a copy, which it closes.
///
/// Needs Linux 5.2 or later (CLONE_PIDFD); with 5.9 or later (close_range)
/// it closes every descriptor it inherited, on older ones those open when
/// it started.
///
/// `own_pidns` is [`own_pid_namespace`]: the calling thread's children go
/// back to this process's PID namespace before this returns, whatever
/// happened.
pub fn spawn_pid_namespace_init(
    netns: BorrowedFd<'_>,
    own_pidns: BorrowedFd<'_>,
) -> io::Result<PidInit> {
    use std::io::{Read, Write};
    // Child to parent: a 4-byte errno, 0 once it is ready. Parent to child:
    // one byte, once the parent has seen it ready (see below).
    let (up_r, up_w) = pipe()?;
    let (down_r, down_w) = pipe()?;
    let devnull: OwnedFd = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?
        .into();
    // close_range on an empty range closes nothing and says whether the
    // kernel has it (and no filter forbids it): the init must not try a
    // call that fails, as a failing libc wrapper writes errno.
    // SAFETY: close_range of no descriptor at all.
    let close_range =
        unsafe { libc::syscall(libc::SYS_close_range, c_uint::MAX, c_uint::MAX, 0 as c_uint) } == 0;
    let max_fd = if close_range {
        0
    } else {
        std::fs::read_dir("/proc/self/fd")?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<c_int>().ok())
            .max()
            .unwrap_or(1024)
    };
    // SAFETY: sysconf takes an integer and has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .unwrap_or(4096)
        .max(4096);
    let stack_len = INIT_STACK + page;
    // SAFETY: a fresh anonymous private mapping; no memory of ours changes.
    let base = unsafe {
        libc::mmap(
            ptr::null_mut(),
            stack_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let stack = NonNull::new(base).expect("mmap does not return null on success");
    let unmap = || {
        // SAFETY: our mapping, which no process uses (the init did not
        // start, or has ended).
        unsafe { libc::munmap(base, stack_len) };
    };
    // A guard page at the bottom: an overflow faults instead of writing
    // into a neighbouring mapping of ours.
    // SAFETY: the lowest page of our own mapping.
    if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
        let e = io::Error::last_os_error();
        unmap();
        return Err(e);
    }
    // The arguments at the top of the stack, the stack below them.
    let args_at = (base as usize + stack_len - size_of::<InitArgs>()) & !15;
    let args = args_at as *mut InitArgs;
    // SAFETY: `args` is inside our mapping, aligned, and not yet used.
    unsafe {
        args.write(InitArgs {
            netns: netns.as_raw_fd(),
            devnull: devnull.as_raw_fd(),
            up_r: up_r.as_raw_fd(),
            up_w: up_w.as_raw_fd(),
            down_r: down_r.as_raw_fd(),
            down_w: down_w.as_raw_fd(),
            close_range,
            max_fd,
        })
    };
    let top = (args_at - 16) as *mut libc::c_void;
    // SAFETY: unshare with CLONE_NEWPID changes only where this thread's
    // next child goes (a new PID namespace, of which it is PID 1); it is
    // undone right after the clone.
    if let Err(e) = cvt(unsafe { libc::unshare(libc::CLONE_NEWPID) }) {
        unmap();
        return Err(e);
    }
    let mut pidfd: c_int = -1;
    let (pid, clone_error) = {
        // SAFETY: sigset_t is plain data; all-zero is a valid value, and
        // sigfillset/pthread_sigmask write only the sets we pass.
        let mut all: libc::sigset_t = unsafe { MaybeUninit::zeroed().assume_init() };
        let mut old: libc::sigset_t = unsafe { MaybeUninit::zeroed().assume_init() };
        // SAFETY: as above; the mask is this thread's, restored below.
        unsafe {
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        }
        // SAFETY: the child runs `init_main` on the stack mapped above,
        // with `args` inside it; see the function's docs for what a child
        // sharing our memory may do. CLONE_PIDFD writes the child's pidfd
        // into `pidfd`.
        let pid = unsafe {
            libc::clone(
                init_main,
                top,
                libc::CLONE_VM | libc::CLONE_PIDFD | libc::SIGCHLD,
                args.cast(),
                &mut pidfd as *mut c_int,
            )
        };
        let clone_error = io::Error::last_os_error();
        // SAFETY: puts back this thread's own mask.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, ptr::null_mut()) };
        (pid, clone_error)
    };
    let restored = children_in_pid_namespace(own_pidns);
    if pid < 0 {
        unmap();
        restored?;
        return Err(clone_error);
    }
    if pidfd < 0 {
        // A kernel before 5.2 ignores CLONE_PIDFD: no handle to tell when
        // the child has ended, so its stack is left mapped.
        // SAFETY: `pid` is our child: kill and waitpid take plain integers.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, ptr::null_mut(), 0);
        }
        restored?;
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this kernel has no CLONE_PIDFD (Linux 5.2 or later is needed for real hosts)",
        ));
    }
    // SAFETY: CLONE_PIDFD gave us this open descriptor, owned by nobody else.
    let init = PidInit {
        pid,
        pidfd: unsafe { OwnedFd::from_raw_fd(pidfd) },
        stack,
        stack_len,
    };
    drop(up_w);
    drop(down_r);
    let give_up = |init: PidInit, e: io::Error| {
        // Dropping kills it and frees its stack once it has ended; reap it.
        let pid = init.pid;
        drop(init);
        // SAFETY: `pid` is our child: waitpid takes plain integers.
        unsafe { libc::waitpid(pid, ptr::null_mut(), 0) };
        Err(e)
    };
    if let Err(e) = restored {
        return give_up(init, e);
    }
    // The child arms its parent-death signal, then says it is ready and
    // waits for our answer. If this thread ended before the signal was
    // armed, the answer never comes: the pipe reads end-of-file and the
    // child exits. Either way nothing outlives the thread.
    let mut word = [0u8; 4];
    if let Err(e) = std::fs::File::from(up_r).read_exact(&mut word) {
        return give_up(
            init,
            io::Error::new(
                e.kind(),
                format!("the PID namespace's init ended as it started: {e}"),
            ),
        );
    }
    let errno = i32::from_ne_bytes(word);
    if errno != 0 {
        return give_up(init, io::Error::from_raw_os_error(errno));
    }
    if let Err(e) = std::fs::File::from(down_w).write_all(&[1]) {
        return give_up(init, e);
    }
    Ok(init)
}

/// The init of a real host's PID namespace: the child of
/// [`spawn_pid_namespace_init`]'s clone, sharing our memory. Only rustix's
/// raw system calls (see there), no allocation, no panic; never returns.
extern "C" fn init_main(arg: *mut libc::c_void) -> c_int {
    use rustix::fd::BorrowedFd as Fd;
    // SAFETY: the parent put an InitArgs at `arg` on this stack's mapping,
    // which lives as long as we do.
    let a = unsafe { &*(arg as *const InitArgs) };
    // SAFETY (all `Fd::borrow_raw` below): the descriptors are our copies of
    // the parent's, open until we close them, which we do only after the
    // last use of each.
    let fd = |raw: c_int| unsafe { Fd::borrow_raw(raw) };
    let exit = |code: c_int| -> ! {
        // exit_group of this process only (it is not a thread of ours);
        // glibc's `_exit` is that system call, which does not return and so
        // writes no errno.
        // SAFETY: ending this process; nothing of it is left to clean up.
        unsafe { libc::_exit(code) }
    };
    let fail = |e: rustix::io::Errno| -> ! {
        let _ = rustix::io::write(fd(a.up_w), &e.raw_os_error().to_ne_bytes());
        exit(127)
    };
    if let Err(e) =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
    {
        fail(e);
    }
    // Our copies of the parent's ends: with them closed, the parent's death
    // shows as end-of-file.
    // SAFETY: our copies, not used again.
    unsafe {
        rustix::io::close(a.up_r);
        rustix::io::close(a.down_w);
    }
    // A session of its own (out of netloop's process group and terminal),
    // in the real host's network namespace, holding no directory.
    if let Err(e) = rustix::process::setsid() {
        fail(e);
    }
    if let Err(e) = rustix::thread::move_into_link_name_space(
        fd(a.netns),
        Some(rustix::thread::LinkNameSpaceType::Network),
    ) {
        fail(e);
    }
    if let Err(e) = rustix::process::chdir(c"/") {
        fail(e);
    }
    for dup in [
        rustix::stdio::dup2_stdin::<Fd<'_>>,
        rustix::stdio::dup2_stdout::<Fd<'_>>,
        rustix::stdio::dup2_stderr::<Fd<'_>>,
    ] {
        if let Err(e) = dup(fd(a.devnull)) {
            fail(e);
        }
    }
    if rustix::io::write(fd(a.up_w), &0i32.to_ne_bytes()) != Ok(4) {
        exit(127);
    }
    let mut go = [0u8; 1];
    if rustix::io::read(fd(a.down_r), &mut go) != Ok(1) {
        exit(0);
    }
    // Nothing of the parent's stays open in here (our table is a copy).
    // close_range through libc's `syscall`, which writes `errno` only when
    // the call fails, and the parent has seen that it does not here;
    // otherwise one by one, through rustix.
    if a.close_range {
        // SAFETY: closing descriptors of our own table; none is used after.
        unsafe { libc::syscall(libc::SYS_close_range, 3 as c_uint, c_uint::MAX, 0 as c_uint) };
    } else {
        for raw in 3..=a.max_fd {
            // SAFETY: as above.
            unsafe { rustix::io::close(raw) };
        }
    }
    // Reap whatever the namespace hands us (processes whose parent ended).
    // Every signal is blocked, so we wait in `wait` while there are
    // children and sleep a second at a time while there are none: an
    // orphan that ends while we sleep is reaped within the second.
    let second = rustix::thread::Timespec {
        tv_sec: 1,
        tv_nsec: 0,
    };
    loop {
        match rustix::process::wait(rustix::process::WaitOptions::empty()) {
            Ok(_) => {}
            Err(_) => {
                let _ = rustix::thread::nanosleep(&second);
            }
        }
    }
}

/// Gives `cmd`'s child a mount namespace of its own in which `/proc` is a
/// new proc mount of the PID namespace the child is born in, so that inside
/// a real host `/proc` lists the host's processes under the pids they have
/// there (`/proc/$$` is the shell itself). Best effort: if the kernel
/// refuses, the child keeps the machine's `/proc`. Mounts never propagate
/// back: the new namespace is made a slave of the machine's first.
pub fn private_proc_for_child(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec and calls
    // only unshare(2) and mount(2), which are system calls without locks or
    // allocation, on string literals; it touches no memory shared with the
    // parent.
    unsafe {
        cmd.pre_exec(|| {
            mount_private_proc();
            Ok(())
        });
    }
}

/// In a child before it execs: a mount namespace of its own, a slave of the
/// machine's, with a new proc mount on `/proc` (see
/// [`private_proc_for_child`]). Best effort; system calls only.
///
/// # Safety
/// Only in a child between its creation and `exec`: it changes the calling
/// process's mount namespace.
unsafe fn mount_private_proc() {
    // SAFETY: system calls on string literals and null pointers, as mount(2)
    // and unshare(2) take them; the caller is a child about to exec.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) == 0
            && libc::mount(
                ptr::null(),
                c"/".as_ptr(),
                ptr::null(),
                libc::MS_REC | libc::MS_SLAVE,
                ptr::null(),
            ) == 0
        {
            libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                ptr::null(),
            );
        }
    }
}

/// Puts the calling thread in the SCHED_FIFO real-time class at `priority`
/// (1–99), so that it runs the moment it is runnable instead of waiting
/// behind the programs it serves. Children do not inherit it
/// (SCHED_RESET_ON_FORK).
pub fn set_fifo_priority(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid sched_param that outlives the call; pid 0 is
    // the calling thread.
    let r = unsafe {
        libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param)
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's scheduling policy and priority.
pub fn current_policy() -> (i32, i32) {
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is valid for writing.
    let policy = unsafe { libc::sched_getscheduler(0) };
    // SAFETY: as above.
    unsafe { libc::sched_getparam(0, &mut param) };
    (policy.max(0), param.sched_priority)
}

/// Puts the calling thread back to a policy from [`current_policy`].
pub fn restore_policy((policy, priority): (i32, i32)) {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is valid for the call; pid 0 is the calling thread. A
    // failure leaves the thread in the real-time class, which only matters
    // for a library caller that goes on computing; nothing to do about it.
    unsafe { libc::sched_setscheduler(0, policy, &param) };
}

// ---------------------------------------------------------------------------
// Waiting on descriptors
// ---------------------------------------------------------------------------

/// A `pollfd` waiting for input on `fd`. Raw descriptors, so that a thread
/// can keep its poll set from one wait to the next (no allocation per
/// wait) while it uses the objects that own them; a descriptor closed
/// meanwhile shows as POLLNVAL, never as undefined behaviour.
pub fn pollfd_in(fd: BorrowedFd<'_>) -> libc::pollfd {
    libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }
}

/// `ppoll` on `fds` for at most `timeout` (no signal mask change); returns
/// how many have events (`revents` is set). EINTR counts as none.
pub fn ppoll_raw(fds: &mut [libc::pollfd], timeout: Duration) -> io::Result<usize> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `fds` is a valid, writable array of `fds.len()` pollfds and
    // `ts` a valid timespec, both for the duration of the call; a null
    // signal mask leaves the mask alone.
    let r = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            ptr::null(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(r as usize)
}

/// What [`spawn_shared_vm`] starts.
pub struct SpawnSpec<'a> {
    /// The program, an absolute path (the child does no PATH search).
    pub path: &'a CString,
    /// Its arguments, the program's name first.
    pub argv: &'a [CString],
    /// Descriptors that become the child's 0, 1 and 2.
    pub stdio: [BorrowedFd<'a>; 3],
    /// Whether the child leads a process group of its own.
    pub process_group: bool,
    /// Whether the child gets SIGKILL when the calling thread ends.
    pub kill_with_parent: bool,
    /// Whether the child gets a private `/proc` (see
    /// [`private_proc_for_child`]).
    pub private_proc: bool,
}

/// What the child of [`spawn_shared_vm`] reads (in the parent's memory,
/// which it shares until it execs).
struct ChildArgs {
    path: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    stdio: [c_int; 3],
    process_group: bool,
    kill_with_parent: bool,
    private_proc: bool,
    /// The errno of the step that failed, 0 if the exec succeeded.
    error: c_int,
}

/// The child's body: system calls only, on what the parent prepared; never
/// returns (it execs or exits).
extern "C" fn spawned_child(arg: *mut libc::c_void) -> c_int {
    // SAFETY: `arg` is the `ChildArgs` of the parent's stack frame, which
    // stays alive and untouched while the parent is suspended (CLONE_VFORK)
    // until this child execs or exits. Every call below is a system call or
    // an async-signal-safe libc function; nothing allocates or takes a lock.
    unsafe {
        let a = &mut *(arg as *mut ChildArgs);
        let fail = |a: &mut ChildArgs| -> c_int {
            a.error = *libc::__errno_location();
            if a.error == 0 {
                a.error = libc::EINVAL;
            }
            libc::_exit(127)
        };
        // What std's Command does: an empty signal mask, SIGPIPE back to
        // its default (Rust programs ignore it).
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(set.as_mut_ptr());
        libc::pthread_sigmask(libc::SIG_SETMASK, set.as_ptr(), ptr::null_mut());
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        if a.process_group && libc::setpgid(0, 0) != 0 {
            return fail(a);
        }
        if a.kill_with_parent
            && libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
        {
            return fail(a);
        }
        if a.private_proc {
            mount_private_proc();
        }
        for (to, &from) in a.stdio.iter().enumerate() {
            if libc::dup2(from, to as c_int) < 0 {
                return fail(a);
            }
        }
        libc::execve(a.path, a.argv, a.envp);
        fail(a)
    }
}

/// Starts a program the way `posix_spawn` does: the child shares this
/// process's memory and the calling thread waits until it has exec'd
/// (`clone(CLONE_VM | CLONE_VFORK)`). Unlike `fork`, nothing is copied:
/// forking netloop (100 MB and more while a run goes on) copied its page
/// tables under the memory-map lock, and every page the event thread wrote
/// afterwards took a copy-on-write fault, which made events late each time
/// a program started. The child goes into the PID namespace this thread's
/// children go to (see [`children_in_pid_namespace`]). Returns its pid.
pub fn spawn_shared_vm(spec: &SpawnSpec<'_>) -> io::Result<i32> {
    extern "C" {
        static environ: *const *const libc::c_char;
    }
    let mut argv: Vec<*const libc::c_char> = spec.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(ptr::null());
    let mut args = ChildArgs {
        path: spec.path.as_ptr(),
        argv: argv.as_ptr(),
        // SAFETY: reading the process's environment pointer; no thread of
        // netloop changes the environment while a run goes on.
        envp: unsafe { environ },
        stdio: spec.stdio.map(|f| f.as_raw_fd()),
        process_group: spec.process_group,
        kill_with_parent: spec.kill_with_parent,
        private_proc: spec.private_proc,
        error: 0,
    };
    // The child's stack: it runs a few system calls and libc functions.
    const STACK: usize = 64 * 1024;
    let mut stack = vec![0u8; STACK];
    // SAFETY: the top of a buffer we own, 16-byte aligned down (the stack
    // grows down on x86-64 and aarch64).
    let top = unsafe { stack.as_mut_ptr().add(STACK) };
    let top = (top as usize & !15) as *mut libc::c_void;
    // SAFETY: `spawned_child` only reads `args` and writes its `error`,
    // while this thread is suspended (CLONE_VFORK) until the child has
    // exec'd or exited; `args`, `argv`, `stack` and the strings they point
    // to outlive the call.
    let pid = unsafe {
        libc::clone(
            spawned_child,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &mut args as *mut ChildArgs as *mut libc::c_void,
        )
    };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    // Read after the child exec'd or exited: a volatile read, as the child
    // wrote it behind the compiler's back.
    // SAFETY: a plain read of a field of our own live struct.
    let error = unsafe { ptr::read_volatile(&args.error) };
    drop(stack);
    if error != 0 {
        // SAFETY: reaping our own child, which has exited.
        unsafe { libc::waitpid(pid, ptr::null_mut(), 0) };
        return Err(io::Error::from_raw_os_error(error));
    }
    Ok(pid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// Minor page faults of the calling thread so far.
    fn minor_faults() -> i64 {
        let mut u = MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: `u` is a writable rusage.
        unsafe { libc::getrusage(libc::RUSAGE_THREAD, u.as_mut_ptr()) };
        // SAFETY: getrusage filled it (or it stays zeroed).
        unsafe { u.assume_init() }.ru_minflt
    }

    /// Writes one byte per page of `buf` and returns the faults that took.
    fn rewrite(buf: &mut [u8]) -> i64 {
        let before = minor_faults();
        for i in (0..buf.len()).step_by(4096) {
            buf[i] = buf[i].wrapping_add(1);
        }
        std::hint::black_box(&buf);
        minor_faults() - before
    }

    fn reap(pid: i32) -> i32 {
        let mut status = 0;
        // SAFETY: reaping our own child into a local.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        status
    }

    /// Spawning shares memory instead of copying it: afterwards the
    /// parent's pages are still its own, where after a `fork` (what
    /// `Command` with a `pre_exec` does) each page written faults once.
    #[test]
    fn spawning_leaves_the_parents_pages_alone_where_fork_does_not() {
        let _serial = FORKS.lock().unwrap_or_else(|e| e.into_inner());
        let mut buf = vec![0u8; 32 << 20];
        // SAFETY: advice on a buffer we own; huge pages would hide the
        // per-page faults of the fork case.
        unsafe { libc::madvise(buf.as_mut_ptr().cast(), buf.len(), libc::MADV_NOHUGEPAGE) };
        rewrite(&mut buf);
        let null = std::fs::File::open("/dev/null").unwrap();
        let path = CString::new("/bin/true").unwrap();
        let argv = [CString::new("true").unwrap()];
        let pid = spawn_shared_vm(&SpawnSpec {
            path: &path,
            argv: &argv,
            stdio: [null.as_fd(), null.as_fd(), null.as_fd()],
            process_group: true,
            kill_with_parent: true,
            private_proc: false,
        })
        .expect("spawned");
        let shared = rewrite(&mut buf);
        assert_eq!(reap(pid), 0, "/bin/true ran and exited 0");

        let mut cmd = std::process::Command::new("/bin/true");
        kill_child_with_parent(&mut cmd);
        let mut child = cmd.spawn().expect("forked");
        let forked = rewrite(&mut buf);
        assert!(child.wait().unwrap().success());
        let pages = (buf.len() / 4096) as i64;
        assert!(shared < pages / 100, "{shared} faults after spawning");
        assert!(
            forked > pages / 2,
            "{forked} faults after a fork: the comparison is void"
        );
    }

    /// A PID namespace's init shares our memory: starting one leaves our
    /// pages our own (a fork made each of them fault once more, the model's
    /// state included), it is PID 1 of a namespace of its own, reaps what
    /// ends in there, and dropping its handle kills it. Needs root
    /// (CLONE_NEWPID); skips otherwise.
    #[test]
    fn a_pid_namespace_init_leaves_our_pages_alone_and_ends_with_its_handle() {
        let _serial = FORKS.lock().unwrap_or_else(|e| e.into_inner());
        let netns = std::fs::File::open("/proc/self/ns/net").expect("our netns");
        let own = own_pid_namespace().expect("our pid ns");
        // On a thread of its own, as the session's launcher does: the
        // unshare is per thread, and the init dies with the thread.
        let mut buf = vec![0u8; 32 << 20];
        // SAFETY: advice on a buffer we own (see the test above).
        unsafe { libc::madvise(buf.as_mut_ptr().cast(), buf.len(), libc::MADV_NOHUGEPAGE) };
        rewrite(&mut buf);
        let started = std::thread::scope(|t| {
            t.spawn(|| {
                let init = match spawn_pid_namespace_init(netns.as_fd(), own.as_fd()) {
                    Err(e) if e.raw_os_error() == Some(libc::EPERM) => return None,
                    r => r.expect("init started"),
                };
                let faults = rewrite(&mut buf);
                let status =
                    std::fs::read_to_string(format!("/proc/{}/status", init.pid)).expect("status");
                Some((init, faults, status))
            })
            .join()
            .unwrap()
        });
        let Some((init, faults, status)) = started else {
            eprintln!("skipped: starting a PID namespace needs root (CAP_SYS_ADMIN)");
            return;
        };
        let pid = init.pid;
        let pages = (buf.len() / 4096) as i64;
        assert!(
            faults < pages / 100,
            "{faults} faults after starting an init"
        );
        let nspid = status
            .lines()
            .find(|l| l.starts_with("NSpid:"))
            .expect("NSpid");
        assert!(nspid.split_whitespace().last() == Some("1"), "{nspid}");
        // Its thread has ended: the parent-death signal killed it (a zombie
        // until we reap it) or will any moment.
        assert!(
            init.ended_within(Duration::from_secs(5)),
            "init outlived its thread"
        );
        drop(init);
        assert_eq!(
            reap(pid) & 0x7f,
            libc::SIGKILL,
            "killed by its parent-death signal"
        );
    }

    /// Dropping the handle of a running init kills it.
    #[test]
    fn dropping_a_running_init_kills_it() {
        let netns = std::fs::File::open("/proc/self/ns/net").expect("our netns");
        let own = own_pid_namespace().expect("our pid ns");
        let init = match spawn_pid_namespace_init(netns.as_fd(), own.as_fd()) {
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                eprintln!("skipped: starting a PID namespace needs root (CAP_SYS_ADMIN)");
                return;
            }
            r => r.expect("init started"),
        };
        let pid = init.pid;
        assert!(
            !init.ended_within(Duration::from_millis(50)),
            "the init ended by itself"
        );
        drop(init);
        assert_eq!(reap(pid) & 0x7f, libc::SIGKILL);
    }

    #[test]
    fn a_program_that_cannot_be_executed_is_an_error_with_its_errno() {
        let null = std::fs::File::open("/dev/null").unwrap();
        let path = CString::new("/nonexistent/netloop-test").unwrap();
        let argv = [CString::new("x").unwrap()];
        let err = spawn_shared_vm(&SpawnSpec {
            path: &path,
            argv: &argv,
            stdio: [null.as_fd(), null.as_fd(), null.as_fd()],
            process_group: false,
            kill_with_parent: false,
            private_proc: false,
        })
        .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "{err}");
    }
}
