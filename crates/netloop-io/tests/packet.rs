//! AF_PACKET sockets and interface checks against the real kernel, on veth
//! pairs. These tests create network devices, so they need root; they skip
//! themselves otherwise. Every device is named `nlt...<pid>` and removed by a
//! guard even when a test fails. Frames go only between the two ends of a
//! veth pair, to made-up MAC addresses, with a local experimental ethertype.

mod common;
use common::*;

use netloop_io::packet::{
    carries_default_route, check_attachable, disable_offloads, interface_state, PacketOptions,
    PacketSocket,
};
use netloop_io::{clock, sys, FrameIo};
use std::process::Command;
use std::time::{Duration, Instant};

/// Deletes the device (a veth end takes its peer with it) when dropped, also
/// when the test panics.
struct LinkGuard(String);

impl Drop for LinkGuard {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).output();
    }
}

/// Creates veth pair `a`/`b` without IPv6 (whose router solicitations and
/// MLD reports would be extra frames), with made-up MACs, down.
fn veth_pair(a: &str, b: &str) -> LinkGuard {
    ip(&["link", "add", a, "type", "veth", "peer", "name", b]);
    let guard = LinkGuard(a.to_string());
    for (dev, mac) in [(a, "02:00:00:00:00:01"), (b, "02:00:00:00:00:02")] {
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"), "1");
        ip(&["link", "set", dev, "address", mac]);
    }
    guard
}

const ETHERTYPE: u16 = 0x88b5;

/// A frame from 02::01 to 02::02 with the sequence number and `len` bytes in
/// all.
fn frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01];
    f.extend_from_slice(&ETHERTYPE.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(len, (seq % 251) as u8);
    f
}

/// Reads frames of our ethertype until `want` have arrived or `timeout`
/// passes, waiting on the descriptor; returns (seq, len, stamp) of each and
/// the number of other frames seen.
fn receive(
    sock: &mut PacketSocket,
    want: usize,
    timeout: Duration,
) -> (Vec<(u32, usize, u64)>, usize) {
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    let mut other = 0;
    while got.len() < want {
        sock.recv_batch(256, &mut |f, stamp| {
            if f.len() >= 18 && f[12..14] == ETHERTYPE.to_be_bytes() {
                let seq = u32::from_be_bytes(f[14..18].try_into().unwrap());
                // The payload survived intact.
                assert!(f[18..].iter().all(|&b| b == (seq % 251) as u8));
                got.push((seq, f.len(), stamp.expect("a packet ring stamps frames")));
            } else {
                other += 1;
            }
        })
        .expect("recv_batch");
        let left = deadline.saturating_duration_since(Instant::now());
        if got.len() >= want || left.is_zero() {
            break;
        }
        sys::poll_readable(sock.fd(), left.min(Duration::from_millis(100))).expect("poll");
    }
    (got, other)
}

#[test]
fn veth_carries_1000_frames_in_order_with_stamps() {
    if !root() {
        return;
    }
    let (a, b) = (devname("a"), devname("b"));
    let _guard = veth_pair(&a, &b);
    ip(&["link", "set", &a, "up"]);
    ip(&["link", "set", &b, "up"]);
    disable_offloads(&a).expect("offloads off on A");
    disable_offloads(&b).expect("offloads off on B");
    if let Ok(out) = Command::new("ethtool").args(["-k", &a]).output() {
        let text = String::from_utf8_lossy(&out.stdout);
        for feature in [
            // (Not the umbrella "tcp-segmentation-offload": Linux 6.18's
            // tx-tcp-accecn-segmentation is not in the legacy TSO flag, and
            // harmless: without tx-tcp-segmentation nothing is handed over
            // unsegmented.)
            "tx-tcp-segmentation: off",
            "tx-tcp6-segmentation: off",
            "generic-segmentation-offload: off",
            "generic-receive-offload: off",
            "tx-checksumming: off",
            "rx-checksumming: off",
        ] {
            assert!(
                text.contains(feature),
                "ethtool -k {a} lacks '{feature}':\n{text}"
            );
        }
    }

    let st = interface_state(&a).expect("state of A");
    assert!(st.up);
    assert_eq!(st.mtu, 1500);
    assert_eq!(st.mac, [2, 0, 0, 0, 0, 1]);
    assert_eq!(st.hw_type, 1);
    check_attachable(&a, false).expect("a veth end is attachable");
    assert!(!carries_default_route(&a).unwrap());

    let opts = PacketOptions::default();
    let mut sa = PacketSocket::open(&a, &opts).expect("socket on A");
    let mut sb = PacketSocket::open(&b, &opts).expect("socket on B");
    assert_eq!(sa.name(), format!("packet {a}"));
    assert_eq!(sa.ring_frames(), 4096);
    assert_eq!(sa.mtu(), 1500);

    const N: u32 = 1000;
    let t0 = Instant::now();
    for seq in 0..N {
        // Sizes from 60 to 1514 bytes.
        let len = 60 + (seq as usize * 97) % (1514 - 60 + 1);
        assert!(
            sa.send(&frame(seq, len)).expect("send"),
            "frame {seq} queued"
        );
        if seq % 64 == 63 {
            sa.flush().expect("flush");
        }
    }
    sa.flush().expect("flush");
    let sent_at = Instant::now();
    let (got, other) = receive(&mut sb, N as usize, Duration::from_secs(5));
    let elapsed = t0.elapsed();
    let now = clock::mono_ns();
    println!(
        "{N} frames sent in {:?}, all received after {elapsed:?} ({:.0} frames/s)",
        sent_at - t0,
        N as f64 / elapsed.as_secs_f64()
    );

    assert_eq!(got.len(), N as usize, "all frames arrived");
    assert_eq!(other, 0, "no other frames on the pair");
    let mut last = 0;
    for (i, &(seq, len, stamp)) in got.iter().enumerate() {
        assert_eq!(seq, i as u32, "in order");
        assert_eq!(len, 60 + (i * 97) % (1514 - 60 + 1));
        assert!(stamp >= last, "stamps are monotonic: {stamp} after {last}");
        assert!(
            now.abs_diff(stamp) < 1_000_000_000,
            "stamp {stamp} close to CLOCK_MONOTONIC now {now}"
        );
        last = stamp;
    }

    // A does not read back what it sent.
    assert_eq!(sa.recv_batch(256, &mut |_, _| {}).unwrap(), 0);
    let ca = sa.counters();
    let cb = sb.counters();
    let bytes: u64 = got.iter().map(|g| g.1 as u64).sum();
    assert_eq!(
        (ca.tx_frames, ca.tx_bytes, ca.tx_drops),
        (N as u64, bytes, 0),
        "{ca:?}"
    );
    assert_eq!(ca.rx_frames, 0, "{ca:?}");
    assert_eq!((cb.rx_frames, cb.rx_bytes), (N as u64, bytes), "{cb:?}");
    assert_eq!(cb.lost(), 0, "{cb:?}");
    assert_eq!(cb.rx_malformed, 0, "{cb:?}");
    assert_eq!(sa.tx_queued(), 0);
}

#[test]
fn frames_larger_than_a_slot_are_counted_as_truncated() {
    if !root() {
        return;
    }
    let (c, d) = (devname("c"), devname("d"));
    let _guard = veth_pair(&c, &d);
    for dev in [&c, &d] {
        ip(&["link", "set", dev, "mtu", "9000"]);
        ip(&["link", "set", dev, "up"]);
        disable_offloads(dev).unwrap();
    }
    let big = PacketOptions {
        ring_frames: 64,
        frame_size: 9216,
        promisc: false,
        gso: false,
    };
    let mut sc = PacketSocket::open(&c, &big).expect("jumbo socket on C");
    let mut sd = PacketSocket::open(&d, &PacketOptions::default()).expect("socket on D");
    assert_eq!(sc.mtu(), 9000);

    assert!(sc.send(&frame(1, 4000)).unwrap());
    assert!(sc.send(&frame(2, 100)).unwrap());
    // Longer than MTU + header: dropped before the kernel sees it.
    assert!(!sc.send(&frame(3, 9015)).unwrap());
    sc.flush().unwrap();
    let (got, _) = receive(&mut sd, 1, Duration::from_secs(5));
    assert_eq!(
        got.iter().map(|g| (g.0, g.1)).collect::<Vec<_>>(),
        vec![(2, 100)]
    );
    let cd = sd.counters();
    assert_eq!((cd.rx_frames, cd.rx_truncated), (1, 1), "{cd:?}");
    let cc = sc.counters();
    assert_eq!((cc.tx_frames, cc.tx_drops), (2, 1), "{cc:?}");
}

#[test]
fn interface_checks_explain_what_is_wrong() {
    if !root() {
        return;
    }
    let missing = devname("x");
    let err = check_attachable(&missing, false).unwrap_err().to_string();
    assert!(err.contains("does not exist"), "{err}");
    let err = PacketSocket::open(&missing, &PacketOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("does not exist"), "{err}");
    let err = interface_state(&missing).unwrap_err().to_string();
    assert!(err.contains("does not exist"), "{err}");

    let (e, f) = (devname("e"), devname("f"));
    let _guard = veth_pair(&e, &f);
    ip(&["link", "set", &e, "mtu", "1400"]);
    let err = check_attachable(&e, false).unwrap_err().to_string();
    assert!(err.contains("is down"), "{err}");
    assert!(err.contains(&format!("ip link set {e} up")), "{err}");
    let st = interface_state(&e).unwrap();
    assert!(!st.up);
    assert_eq!(st.mtu, 1400);
    assert_eq!(st.mac, [2, 0, 0, 0, 0, 1]);

    // The loopback device is not Ethernet.
    let err = check_attachable("lo", true).unwrap_err().to_string();
    assert!(err.contains("not an Ethernet interface"), "{err}");

    // The interface with this machine's default route, if it has one, is
    // refused unless forced.
    let routes = ip(&["-4", "route", "show", "default"]);
    let dev = routes
        .split_whitespace()
        .skip_while(|w| *w != "dev")
        .nth(1)
        .map(str::to_string);
    match dev {
        Some(dev) => {
            assert!(carries_default_route(&dev).unwrap());
            let err = check_attachable(&dev, false).unwrap_err().to_string();
            assert!(
                err.contains("carries this machine's default route"),
                "{err}"
            );
            assert!(err.contains("force = true"), "{err}");
            if interface_state(&dev).is_ok_and(|s| s.up && s.hw_type == 1) {
                check_attachable(&dev, true).expect("forced");
            }
        }
        None => println!("no default route here: that check is not exercised"),
    }
}

#[test]
fn full_rings_flush_or_count_their_losses() {
    if !root() {
        return;
    }
    let (g, h) = (devname("g"), devname("h"));
    let _guard = veth_pair(&g, &h);
    for dev in [&g, &h] {
        ip(&["link", "set", dev, "up"]);
        disable_offloads(dev).unwrap();
    }
    // 32 slots each (one 64 KiB block of 2048-byte slots).
    let small = PacketOptions {
        ring_frames: 32,
        frame_size: 2048,
        promisc: false,
        gso: false,
    };
    let mut sg = PacketSocket::open(&g, &small).unwrap();
    let mut sh = PacketSocket::open(&h, &small).unwrap();
    assert_eq!(sg.ring_frames(), 32);

    // No flush in between: when the TX ring is full, send flushes it itself.
    for seq in 0..100 {
        assert!(sg.send(&frame(seq, 200)).unwrap(), "frame {seq}");
    }
    sg.flush().unwrap();
    assert_eq!(sg.counters().tx_frames, 100);

    // H read nothing meanwhile: its ring holds the first 32, the kernel
    // dropped the other 68 and says so.
    let (got, _) = receive(&mut sh, 100, Duration::from_millis(300));
    assert_eq!(
        got.iter().map(|g| g.0).collect::<Vec<_>>(),
        (0..32).collect::<Vec<_>>()
    );
    let ch = sh.counters();
    assert_eq!((ch.rx_frames, ch.rx_kernel_drops), (32, 68), "{ch:?}");
    assert_eq!(ch.lost(), 68);

    // The ring works on after the overflow.
    assert!(sg.send(&frame(100, 200)).unwrap());
    sg.flush().unwrap();
    let (got, _) = receive(&mut sh, 1, Duration::from_secs(5));
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![100]);
}

#[test]
fn vlan_tags_survive_and_promiscuity_ends_with_the_socket() {
    if !root() {
        return;
    }
    let (v, w) = (devname("v"), devname("w"));
    let _guard = veth_pair(&v, &w);
    for dev in [&v, &w] {
        ip(&["link", "set", dev, "up"]);
        disable_offloads(dev).unwrap();
    }
    let mut sv = PacketSocket::open(&v, &PacketOptions::default()).unwrap();
    let mut sw = PacketSocket::open(&w, &PacketOptions::default()).unwrap();
    // The membership counts in the device's promiscuity (not its PROMISC
    // flag, which is for `ip link set promisc on`).
    let promisc = |dev: &str| ip(&["-d", "link", "show", dev]).contains("promiscuity 1");
    assert!(promisc(&w), "promiscuous while the socket is open");

    // An 802.1Q-tagged frame of the largest size MTU 1500 allows: the
    // receiving kernel strips the tag into metadata; it is put back.
    let mut tagged = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01];
    tagged.extend_from_slice(&[0x81, 0x00, 0x20, 0x07]); // PCP 1, VID 7
    tagged.extend_from_slice(&ETHERTYPE.to_be_bytes());
    tagged.resize(1518, 0x77);
    assert!(sv.send(&tagged).unwrap());
    sv.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    while got.is_empty() && Instant::now() < deadline {
        sys::poll_readable(sw.fd(), Duration::from_millis(100)).unwrap();
        sw.recv_batch(16, &mut |f, _| got.push(f.to_vec())).unwrap();
    }
    assert_eq!(got.len(), 1);
    assert_eq!(got[0], tagged, "the frame as sent, tag included");

    drop(sw);
    assert!(!promisc(&w), "promiscuous mode ends with the socket");
}

/// A super-frame from 02::01 to 02::02 as a host with TSO (or UDP_SEGMENT)
/// hands it to its device: the first segment's headers, the IPv4 total
/// length of the whole, and a partial L4 checksum (the pseudo-header's sum,
/// as Linux's `__tcp_v4_send_check` and `udp4_hwcsum` leave it).
fn super_frame(proto: u8, flags: u8, payload: usize, ecn: bool) -> netloop_model::Frame {
    use netloop_model::gso::{self, gso_type, VnetHdr};
    let l4_len = if proto == 6 { 32 } else { 8 };
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00];
    let total = 20 + l4_len + payload;
    let (src, dst) = ([198u8, 18, 0, 1], [198u8, 18, 0, 2]);
    f.extend_from_slice(&[0x45, 0x02, 0, 0, 0x12, 0x34, 0x40, 0, 64, proto, 0, 0]);
    f[16..18].copy_from_slice(&(total as u16).to_be_bytes());
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    let c = netloop_model::ipv4::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    let mut l4 = vec![0u8; l4_len];
    l4[0..2].copy_from_slice(&40000u16.to_be_bytes());
    l4[2..4].copy_from_slice(&5201u16.to_be_bytes());
    if proto == 6 {
        l4[4..8].copy_from_slice(&0xfffff000u32.to_be_bytes()); // wraps
        l4[8..12].copy_from_slice(&77u32.to_be_bytes());
        l4[12] = 8 << 4;
        l4[13] = flags;
        l4[14..16].copy_from_slice(&502u16.to_be_bytes());
        l4[20..22].copy_from_slice(&[1, 1]);
        l4[22..32].copy_from_slice(&[8, 10, 0, 0, 0, 9, 0, 0, 0, 7]);
    } else {
        l4[4..6].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
    }
    f.extend_from_slice(&l4);
    f.extend((0..payload).map(|i| (i * 7 % 253) as u8));
    // The pseudo-header's sum, folded, not complemented.
    let mut sum: u32 = [&src[..], &dst[..]]
        .concat()
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    sum += u32::from(proto) + (l4_len + payload) as u32;
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let at = 34 + if proto == 6 { 16 } else { 6 };
    f[at..at + 2].copy_from_slice(&(sum as u16).to_be_bytes());
    let hdr = VnetHdr {
        flags: gso::F_NEEDS_CSUM,
        gso_type: if proto == 6 {
            gso_type::TCPV4 | if ecn { gso_type::ECN } else { 0 }
        } else {
            gso_type::UDP_L4
        },
        hdr_len: (34 + l4_len) as u16,
        gso_size: 1400,
        csum_start: 34,
        csum_offset: if proto == 6 { 16 } else { 6 },
    };
    let meta = gso::describe(&f, &hdr).expect("a valid super-frame");
    let mut frame = netloop_model::Frame::from(f);
    frame.meta.gso = meta;
    frame
}

/// IPv4 frames read from `sock` until `want` have come or 5 s pass.
fn ipv4_frames(sock: &mut PacketSocket, want: usize) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < deadline {
        sock.recv_batch(256, &mut |f, _| {
            if f.len() > 34 && f[12..14] == [0x08, 0x00] && f[26..30] == [198, 18, 0, 1] {
                got.push(f.to_vec());
            }
        })
        .expect("recv_batch");
        sys::poll_readable(sock.fd(), Duration::from_millis(50)).expect("poll");
    }
    got
}

/// netloop's cutting (`gso::segment`, which the model and every interface
/// without super-frames use) against the kernel's own software GSO on the
/// same super-frames: written whole through a veth whose offloads are off,
/// the kernel cuts them (`tcp_gso_segment`, `__udp_gso_segment`), and what
/// arrives at the far end must equal netloop's segments byte for byte —
/// sequence numbers, IP IDs, flags, lengths, checksums. With the veth's
/// transmit offloads on, the same super-frame arrives whole.
#[test]
fn super_frames_are_cut_as_the_kernel_cuts_them_and_cross_a_veth_whole() {
    if !root() {
        return;
    }
    use netloop_model::gso;
    let (x, y) = (devname("x"), devname("y"));
    let _guard = veth_pair(&x, &y);
    for dev in [&x, &y] {
        ip(&["link", "set", dev, "up"]);
        disable_offloads(dev).unwrap();
    }
    let opts = PacketOptions {
        promisc: false,
        ..PacketOptions::default()
    };
    let mut sx = PacketSocket::open(
        &x,
        &PacketOptions {
            gso: true,
            ..opts.clone()
        },
    )
    .unwrap();
    let mut sy = PacketSocket::open(&y, &opts).unwrap();
    let cases = [
        (
            "TCP, PSH and FIN on the last segment",
            super_frame(6, 0x19, 10 * 1400 + 321, false),
        ),
        (
            "TCP with ECN: CWR on the first segment only",
            super_frame(6, 0x90, 5 * 1400, true),
        ),
        ("UDP_SEGMENT", super_frame(17, 0, 7 * 1400 + 5, false)),
    ];
    let mut segs = 0;
    for (what, f) in &cases {
        let g = f.meta.gso.expect("a super-frame");
        let mut want = Vec::new();
        let hdr = gso::vnet_for_frame(f, &g).expect("a valid super-frame");
        gso::segment(f, &hdr, &mut Vec::new(), &mut |s| want.push(s.to_vec())).unwrap();
        assert_eq!(want.len(), usize::from(g.segs), "{what}");
        segs += want.len() as u64;
        assert!(sx.send_frame(f).unwrap(), "{what}: written");
        let got = ipv4_frames(&mut sy, want.len());
        assert_eq!(got.len(), want.len(), "{what}: segments the kernel sent");
        for (i, (k, n)) in got.iter().zip(&want).enumerate() {
            let first = k.iter().zip(n.iter()).position(|(a, b)| a != b);
            assert!(
                k == n,
                "{what}: segment {i} differs from the kernel's at byte {first:?} (lengths {} and {})",
                k.len(),
                n.len()
            );
        }
    }
    let c = sx.counters();
    assert_eq!(
        (c.tx_gso_frames, c.tx_frames, c.tx_drops),
        (3, segs, 0),
        "{c:?}"
    );

    // Transmit offloads on (netloop's end of a namespace host's veth): the
    // super-frame stays whole, and a super-frame reader on the far end sees
    // the same super-frame.
    netloop_io::packet::offloads_for_super_frames(&x).unwrap();
    drop(sy);
    let mut sy = PacketSocket::open(&y, &PacketOptions { gso: true, ..opts }).unwrap();
    let f = &cases[0].1;
    assert!(sx.send_frame(f).unwrap());
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut whole = Vec::new();
    while whole.is_empty() && Instant::now() < deadline {
        sy.recv_batch_gso(16, &mut |b, _, g| {
            if b.len() > 34 && b[12..14] == [0x08, 0x00] {
                whole.push((b.to_vec(), g));
            }
        })
        .unwrap();
        sys::poll_readable(sy.fd(), Duration::from_millis(50)).unwrap();
    }
    assert_eq!(whole.len(), 1, "one super-frame");
    assert_eq!(whole[0].1, f.meta.gso, "its GSO as sent");
    // Apart from the partial checksum, which the kernel may have left or
    // completed, the bytes are the ones written.
    let (mut a, mut b) = (whole[0].0.clone(), f.to_vec());
    for v in [&mut a, &mut b] {
        v[50] = 0;
        v[51] = 0;
    }
    assert_eq!(a, b);
}
