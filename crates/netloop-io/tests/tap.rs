//! TAP devices against the real kernel. These tests create network devices
//! and a network namespace, so they need root; they skip themselves
//! otherwise. Every device and namespace is named `nlt...<pid>` and removed
//! by a guard even when a test fails. Only addresses in 198.18.0.0/15 are
//! used.

mod common;
use common::*;

use netloop_io::sys;
use netloop_io::tap::TapDevice;
use netloop_io::FrameIo;
use std::net::UdpSocket;
use std::process::Command;
use std::time::{Duration, Instant};

fn link_exists(name: &str) -> bool {
    Command::new("ip")
        .args(["link", "show", name])
        .output()
        .expect("running ip")
        .status
        .success()
}

/// Whether link `name` is gone within `limit`. Closing a TAP's file
/// removes the device when that is the file's last copy, and a process
/// another test starts holds a copy of every open file from its fork to its
/// exec (where close-on-exec closes it): a device can outlive its
/// `TapDevice` by that long. It must still go.
fn link_gone_within(name: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if !link_exists(name) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Deletes the device when dropped (also when the test panics).
struct LinkGuard(String);

impl Drop for LinkGuard {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).output();
    }
}

/// Deletes the network namespace when dropped.
struct NetnsGuard(String);

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// Keeps the kernel's IPv6 chatter (router solicitations, MLD) off a device
/// (in namespace `ns`, or ours).
fn no_ipv6(ns: Option<&str>, dev: &str) {
    let path = format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6");
    match ns {
        None => {
            let _ = std::fs::write(path, "1");
        }
        Some(ns) => {
            let _ = Command::new("ip")
                .args(["netns", "exec", ns, "sh", "-c", &format!("echo 1 > {path}")])
                .output();
        }
    }
}

fn sys_stat(dev: &str, stat: &str) -> u64 {
    std::fs::read_to_string(format!("/sys/class/net/{dev}/statistics/{stat}"))
        .expect("reading the device's statistics")
        .trim()
        .parse()
        .unwrap()
}

/// Reads frames until `pred` accepts one or `timeout` passes, waiting on the
/// descriptor (not sleeping). Returns the frame accepted.
fn wait_for_frame(
    tap: &mut TapDevice,
    timeout: Duration,
    pred: impl Fn(&[u8]) -> bool,
) -> Option<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut found = None;
        tap.recv_batch(64, &mut |f, stamp| {
            assert_eq!(stamp, None, "a TAP gives no arrival time");
            if found.is_none() && pred(f) {
                found = Some(f.to_vec());
            }
        })
        .expect("recv_batch");
        if found.is_some() {
            return found;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        sys::poll_readable(tap.fd(), left).expect("poll");
    }
}

#[test]
fn tap_carries_frames_both_ways_and_disappears_when_dropped() {
    if !root() {
        return;
    }
    let name = devname("t");
    let _guard = LinkGuard(name.clone());
    let mut tap = TapDevice::create(&name).expect("creating the TAP");
    assert_eq!(tap.ifname(), name);
    assert_eq!(tap.name(), format!("tap {name}"));
    assert!(link_exists(&name), "the TAP exists");
    tap.set_offload_none().expect("TUNSETOFFLOAD 0");
    no_ipv6(None, &name);
    let mut frame = vec![0xff; 6];
    frame.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    frame.extend_from_slice(&0x88b5u16.to_be_bytes());
    frame.extend_from_slice(&[0x5a; 46]);
    // A device that is down refuses frames (EIO): lost, counted, not an
    // error that would end a run.
    assert!(!tap.send(&frame).expect("send to a down TAP"));
    ip(&["link", "set", &name, "up"]);
    // So does a runt (EINVAL).
    assert!(!tap.send(&frame[..10]).expect("send of a runt"));
    assert_eq!(tap.counters().tx_drops, 2);

    // netloop -> kernel: the device counts a frame we write as received.
    let before = sys_stat(&name, "rx_packets");
    assert!(tap.send(&frame).expect("send"), "the frame was written");
    tap.flush().unwrap();
    assert_eq!(
        sys_stat(&name, "rx_packets"),
        before + 1,
        "the kernel received it"
    );
    let c = tap.counters();
    assert_eq!(
        (c.tx_frames, c.tx_bytes, c.tx_drops),
        (1, frame.len() as u64, 2)
    );

    // kernel -> netloop: a datagram to a neighbour it does not know makes
    // the kernel ask for it with ARP, out of the TAP.
    ip(&["addr", "add", "198.18.200.1/24", "dev", &name]);
    let sock = UdpSocket::bind("198.18.200.1:0").expect("binding to the TAP's address");
    sock.send_to(b"hello", "198.18.200.2:9").expect("sending");
    let arp = wait_for_frame(&mut tap, Duration::from_secs(5), |f| {
        f.len() >= 42
            && f[12..14] == [0x08, 0x06]
            && f[20..22] == [0, 1]
            && f[38..42] == [198, 18, 200, 2]
    })
    .expect("an ARP request for 198.18.200.2 within 5 s");
    assert_eq!(&arp[0..6], &[0xff; 6], "ARP requests are broadcast");
    assert_eq!(&arp[28..32], &[198, 18, 200, 1], "from the TAP's address");
    let c = tap.counters();
    assert!(c.rx_frames >= 1);
    assert_eq!(
        (c.rx_malformed, c.rx_truncated, c.rx_kernel_drops),
        (0, 0, 0)
    );

    drop(sock);
    drop(tap);
    assert!(
        link_gone_within(&name, Duration::from_secs(5)),
        "dropping the TapDevice removed the device (within 5 s)"
    );
}

#[test]
fn tap_name_taken_or_invalid_is_refused() {
    if !root() {
        return;
    }
    let name = devname("u");
    let _guard = LinkGuard(name.clone());
    let _tap = TapDevice::create(&name).expect("creating the TAP");
    let err = TapDevice::create(&name)
        .err()
        .expect("the name is taken")
        .to_string();
    assert!(err.contains("already exists"), "{err}");
    let err = TapDevice::create("nlt-far-too-long-a-name")
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("at most 15"), "{err}");
    // A leftover persistent TAP is not attached to (it would outlive us).
    let pers = devname("p");
    let _pguard = LinkGuard(pers.clone());
    ip(&["tuntap", "add", "dev", &pers, "mode", "tap"]);
    let err = TapDevice::create(&pers).err().expect("refused").to_string();
    assert!(err.contains("already exists"), "{err}");
}

#[test]
fn tap_kernel_drops_are_read_in_another_namespace() {
    if !root() {
        return;
    }
    let name = devname("d");
    let ns = devname("n");
    let _guard = LinkGuard(name.clone());
    ip(&["netns", "add", &ns]);
    let _nsguard = NetnsGuard(ns.clone());
    let mut tap = TapDevice::create(&name).expect("creating the TAP");
    tap.set_offload_none().unwrap();

    // Move the device into the namespace and call it eth0 there — a name
    // this namespace has too, for another device whose counters must not be
    // read instead.
    ip(&["link", "set", &name, "netns", &ns]);
    ip(&["-n", &ns, "link", "set", &name, "name", "eth0"]);
    assert_eq!(tap.current_name().unwrap(), "eth0");
    no_ipv6(Some(&ns), "eth0");
    ip(&["-n", &ns, "link", "set", "eth0", "up"]);
    ip(&["-n", &ns, "addr", "add", "198.18.201.1/24", "dev", "eth0"]);
    ip(&[
        "-n",
        &ns,
        "neigh",
        "add",
        "198.18.201.2",
        "lladdr",
        "02:00:00:00:00:02",
        "dev",
        "eth0",
        "nud",
        "permanent",
    ]);
    let before = tap.counters();
    assert_eq!(before.rx_kernel_drops, 0);

    // 2000 datagrams from inside the namespace, none read yet: the TAP's
    // queue (txqueuelen frames, 1000 by default) overflows and the kernel drops the rest.
    let sent = std::thread::spawn({
        let ns = ns.clone();
        move || {
            let nsfd = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
            sys::enter_netns(std::os::fd::AsFd::as_fd(&nsfd)).unwrap();
            let sock = UdpSocket::bind("198.18.201.1:0").unwrap();
            sock.set_nonblocking(true).unwrap();
            (0..2000u32)
                .filter(|i| sock.send_to(&i.to_be_bytes(), "198.18.201.2:9").is_ok())
                .count() as u64
        }
    })
    .join()
    .unwrap();
    assert!(sent > 1000, "sent only {sent}");

    let after = tap.counters();
    let ns_stat = |file: &str| -> u64 {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns,
                "cat",
                &format!("/sys/class/net/eth0/{file}"),
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    let theirs = ns_stat("statistics/tx_dropped");
    let qlen = ns_stat("tx_queue_len");
    assert_eq!(
        after.rx_kernel_drops, theirs,
        "our count is the device's own"
    );
    assert!(
        after.rx_kernel_drops >= sent - qlen,
        "{after:?} after {sent} sent, queue {qlen}"
    );

    // What was queued is still there to read.
    let mut got = 0;
    while tap.recv_batch(256, &mut |_, _| got += 1).unwrap() > 0 {}
    assert_eq!(
        got + after.rx_kernel_drops,
        sent,
        "every datagram read or counted as dropped"
    );
    println!(
        "sent {sent}, read {got}, kernel dropped {}",
        after.rx_kernel_drops
    );
}

/// RX packets of `dev` in namespace `ns` (/proc/net/dev, read there).
fn rx_packets(ns: &str, dev: &str) -> u64 {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat", "/proc/net/dev"])
        .output()
        .expect("reading /proc/net/dev");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            let (n, rest) = l.split_once(':')?;
            (n.trim() == dev).then(|| rest.split_whitespace().nth(1)?.parse().ok())?
        })
        .expect("the device's line")
}

/// A TAP made with IFF_VNET_HDR and offloads on carries super-frames whole
/// both ways: a UDP_SEGMENT send of 5 × 1000 bytes from inside the
/// namespace is read as one super-frame of 5 segments, and a super-frame
/// written to it reaches the namespace's stack as one packet.
#[test]
fn super_frames_cross_a_gso_tap_whole_both_ways() {
    if !root() {
        return;
    }
    let name = devname("g");
    let ns = devname("m");
    let _guard = LinkGuard(name.clone());
    ip(&["netns", "add", &ns]);
    let _nsguard = NetnsGuard(ns.clone());
    let mut tap = TapDevice::create_gso(&name).expect("creating the TAP");
    tap.set_offload_gso().expect("offloads on");
    ip(&["link", "set", &name, "netns", &ns]);
    ip(&["-n", &ns, "link", "set", &name, "name", "eth0"]);
    no_ipv6(Some(&ns), "eth0");
    ip(&["-n", &ns, "link", "set", "eth0", "up"]);
    ip(&["-n", &ns, "addr", "add", "198.18.202.1/24", "dev", "eth0"]);
    ip(&[
        "-n",
        &ns,
        "neigh",
        "add",
        "198.18.202.2",
        "lladdr",
        "02:00:00:00:00:02",
        "dev",
        "eth0",
        "nud",
        "permanent",
    ]);
    std::thread::spawn({
        let ns = ns.clone();
        move || {
            let nsfd = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
            sys::enter_netns(std::os::fd::AsFd::as_fd(&nsfd)).unwrap();
            let sock = UdpSocket::bind("198.18.202.1:0").unwrap();
            // UDP_SEGMENT (linux/udp.h): one send, cut by GSO at 1000 bytes.
            sys::setsockopt_int(std::os::fd::AsFd::as_fd(&sock), libc::SOL_UDP, 103, 1000)
                .expect("UDP_SEGMENT");
            sock.send_to(&[7u8; 5000], "198.18.202.2:9").unwrap();
        }
    })
    .join()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    while got.is_empty() && Instant::now() < deadline {
        tap.recv_batch_gso(16, &mut |f, _, g| {
            if f.len() > 34 && f[12..14] == [8, 0] && f[14 + 9] == 17 {
                got.push((f.to_vec(), g));
            }
        })
        .unwrap();
        sys::poll_readable(tap.fd(), Duration::from_millis(50)).unwrap();
    }
    assert_eq!(got.len(), 1, "one super-frame read");
    let (bytes, g) = got.pop().unwrap();
    let g = g.expect("read whole, with its GSO");
    assert_eq!((g.segs, g.size), (5, 1000), "{g:?}");
    assert_eq!(g.kind, netloop_model::GsoKind::UdpV4);
    assert_eq!(bytes.len(), 14 + 20 + 8 + 5000);
    let c = tap.counters();
    assert_eq!((c.rx_frames, c.rx_gso_frames), (5, 1), "{c:?}");

    // A plain datagram and a TCP SYN from the namespace come with their
    // checksums left to offload; they are read complete.
    std::thread::spawn({
        let ns = ns.clone();
        move || {
            let nsfd = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
            sys::enter_netns(std::os::fd::AsFd::as_fd(&nsfd)).unwrap();
            let sock = UdpSocket::bind("198.18.202.1:0").unwrap();
            sock.send_to(&[9u8; 333], "198.18.202.2:9").unwrap();
            let _ = std::net::TcpStream::connect_timeout(
                &"198.18.202.2:9".parse().unwrap(),
                Duration::from_millis(50),
            );
        }
    })
    .join()
    .unwrap();
    let mut small = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while small.len() < 2 && Instant::now() < deadline {
        tap.recv_batch_gso(16, &mut |f, _, g| {
            if f.len() > 34 && f[12..14] == [8, 0] && matches!(f[14 + 9], 6 | 17) {
                assert!(g.is_none());
                small.push(f.to_vec());
            }
        })
        .unwrap();
        sys::poll_readable(tap.fd(), Duration::from_millis(50)).unwrap();
    }
    assert_eq!(small.len(), 2, "a datagram and a SYN");
    for f in &small {
        // The L4 checksum over the pseudo-header verifies (sums to 0xffff).
        let ihl = usize::from(f[14] & 0x0f) * 4;
        let l4 = &f[14 + ihl..];
        let mut sum: u32 = f[26..34]
            .chunks(2)
            .chain(l4.chunks(2))
            .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
            .sum();
        sum += u32::from(f[14 + 9]) + l4.len() as u32;
        while sum >> 16 != 0 {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        assert_eq!(sum, 0xffff, "protocol {}: checksum completed", f[14 + 9]);
    }
    assert!(tap.counters().rx_checksums_completed >= 2);

    // Back in, addressed to the namespace: MACs and addresses swapped (the
    // partial UDP checksum, a sum over both addresses, stays right).
    let mut back = bytes.clone();
    back[0..6].copy_from_slice(&bytes[6..12]);
    back[6..12].copy_from_slice(&bytes[0..6]);
    back[26..30].copy_from_slice(&bytes[30..34]);
    back[30..34].copy_from_slice(&bytes[26..30]);
    let mut frame = netloop_model::Frame::from(back);
    frame.meta.gso = Some(g);
    let before = rx_packets(&ns, "eth0");
    assert!(tap.send_frame(&frame).unwrap());
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        rx_packets(&ns, "eth0") - before,
        1,
        "the namespace's stack took one packet"
    );
    let c = tap.counters();
    assert_eq!(
        (c.tx_frames, c.tx_gso_frames, c.tx_drops),
        (5, 1, 0),
        "{c:?}"
    );
}
