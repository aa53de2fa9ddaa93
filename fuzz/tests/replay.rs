//! Replays every committed input through its harness on a stable toolchain
//! (no libFuzzer needed): the hand-made seeds, what the fuzzer found (the
//! corpus), and
//! `regressions/<target>/*`, the inputs that once crashed netloop (each named
//! for what it found). Then checks that the seeds reach where they are meant
//! to: a seed that stopped at the first address check would make the fuzzer
//! shallow without anyone noticing.

use netloop_fuzz::{boundary, frames, topology, Harness, Target};
use std::path::{Path, PathBuf};

fn inputs(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for base in ["seeds", "corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(base).join(dir)) else {
            continue;
        };
        files.extend(entries.filter_map(|e| e.ok().map(|e| e.path())));
    }
    files.sort();
    files
}

fn seed(target: Target, name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seeds")
        .join(format!("frames_{}", target.name()))
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn every_frame_input_replays() {
    for target in Target::ALL {
        let files = inputs(&format!("frames_{}", target.name()));
        assert!(files.len() >= 10, "{target:?}: only {} inputs", files.len());
        for f in files {
            let data = std::fs::read(&f).unwrap();
            println!("{}", f.display());
            frames(target, &data);
        }
    }
}

#[test]
fn every_boundary_input_replays() {
    let files = inputs("boundary");
    assert!(files.len() >= 5, "only {} inputs", files.len());
    for f in files {
        println!("{}", f.display());
        boundary(&std::fs::read(&f).unwrap());
    }
}

#[test]
fn every_gso_input_replays() {
    let files = inputs("gso");
    assert!(files.len() >= 4, "only {} inputs", files.len());
    for f in files {
        println!("{}", f.display());
        netloop_fuzz::gso(&std::fs::read(&f).unwrap());
    }
}

/// The gso seeds are cut (the harness checks the segments only then): all
/// but the one of a kind netloop refuses.
#[test]
fn gso_seeds_are_cut() {
    use netloop_io::gso::{segment, VnetHdr};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds/gso");
    for (name, cut) in [
        ("tcp", 3),
        ("tcp-ecn-small-mss", 6),
        ("udp-l4", 3),
        ("tcpv6-type-on-ipv4", 0),
        ("tcpv6", 3),
        ("udp-l4-ipv6", 3),
    ] {
        let data = std::fs::read(dir.join(name)).unwrap();
        let (h, frame) = data.split_first_chunk::<10>().unwrap();
        let n = segment(frame, &VnetHdr::parse(h), &mut Vec::new(), &mut |_| {}).unwrap_or(0);
        assert_eq!(n, cut, "{name}");
    }
}

/// The boundary seeds reach the checksum completion (the harness verifies
/// a completed checksum, but only if one is completed).
#[test]
fn boundary_seeds_complete_checksums_and_restore_tags() {
    let slot = |name: &str| {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("seeds/boundary")
            .join(name);
        std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let mut scratch = Vec::new();
    for (name, completes, tagged) in [
        ("udp-partial", true, false),
        ("tcp-partial-vlan", true, true),
        ("udp-qinq", false, true),
        ("fragment-partial", false, false),
        ("udp6-partial-hbh", true, false),
    ] {
        let s = slot(name);
        let vlan = (s[0] & 1 != 0).then_some((0x8100, u16::from_be_bytes([s[1], s[2]])));
        let (out, done) =
            netloop_io::packet::wire_frame(&s[3..], vlan, s[0] & 4 != 0, &mut scratch);
        assert_eq!(done, completes, "{name}");
        assert_eq!(out.len() == s.len() - 3 + 4, tagged, "{name}");
    }
}

#[test]
fn every_topology_input_replays() {
    let files = inputs("topology");
    assert!(files.len() >= 8, "only {} inputs", files.len());
    for f in files {
        println!("{}", f.display());
        topology(&std::fs::read(&f).unwrap());
    }
}

/// IPv4 packets the network sent back to the real host: (protocol, first
/// byte of the transport header, e.g. the ICMP type).
fn returned_ipv4(h: &Harness) -> Vec<(u8, u8)> {
    h.returned()
        .iter()
        .filter(|f| f.len() > 34 && f[12..14] == [0x08, 0x00])
        .map(|f| {
            let ihl = usize::from(f[14] & 0x0f) * 4;
            (f[23], f.get(14 + ihl).copied().unwrap_or(0))
        })
        .collect()
}

fn run(target: Target, name: &str) -> Harness {
    let mut h = Harness::new(target);
    h.run(&seed(target, name));
    h
}

#[test]
fn seeds_reach_past_the_address_checks() {
    // A router answers a ping to itself and one through it.
    let h = run(Target::Router, "ping-near");
    assert!(
        returned_ipv4(&h).contains(&(1, 0)),
        "{:?}",
        returned_ipv4(&h)
    );
    let h = run(Target::Router, "ping-far");
    assert!(
        returned_ipv4(&h).contains(&(1, 0)),
        "{:?}",
        returned_ipv4(&h)
    );
    // TTL 0 and 1 expire at r1, TTL 2 at r2, and they say so (ICMP type 11).
    let h = run(Target::Router, "ttl");
    assert!(
        returned_ipv4(&h).contains(&(1, 11)),
        "{:?}",
        returned_ipv4(&h)
    );
    let c = h.conservation();
    assert_eq!(
        c.dropped.get(netloop_model::stats::DropReason::TtlExpired),
        3,
        "{c:?}"
    );
    // A SYN to a closed port of a simulated host gets a RST (TCP flags 0x14).
    let h = run(Target::Host, "tcp-syn");
    let rst = h
        .returned()
        .iter()
        .any(|f| f.len() >= 54 && f[23] == 6 && f[47] & 0x04 != 0);
    assert!(rst, "{:?}", returned_ipv4(&h));
    // 802.1Q is counted as unsupported wherever it ends; the dual-stack
    // router routes the IPv6 packet (no route to the seed's made-up
    // destination), and a simulated host finds it is not for it.
    for target in [Target::Router, Target::Switch, Target::Host] {
        let h = run(target, "vlan-ipv6");
        let c = h.conservation();
        let got = |r| c.dropped.get(r);
        use netloop_model::stats::DropReason::{NoRoute, NotForUs, Unsupported};
        assert!(got(Unsupported) >= 1, "{target:?}: {c:?}");
        match target {
            Target::Router => assert_eq!(got(NoRoute), 1, "{c:?}"),
            Target::Host => assert_eq!(got(NotForUs), 1, "{c:?}"),
            _ => {}
        }
    }
}

/// The super-frame seeds get through: a super-frame to host `a` crosses r1
/// whole once ARP is done and reaches `a` as its segments; one to the host
/// behind the jittered link and the small MTU is cut; one with bytes after
/// its packet enters as a plain frame.
#[test]
fn super_frame_seeds_reach_through_the_model() {
    let run = |name: &str| {
        let mut h = Harness::new(Target::Super);
        h.run(&seed(Target::Super, name));
        h
    };
    let sent = |h: &Harness, link: &str, dir: usize| {
        let id = h.sim().net.link_id(link).expect(link);
        h.sim().net.links()[id].dirs[dir].stats.sent_packets
    };
    let h = run("tcp-to-a");
    // 4 super-frames of 10 segments; the x - r1 link loses about 1 %.
    assert_eq!(sent(&h, "x-r1", 0), 2 + 40, "the ARP pair and 40 segments");
    assert!(sent(&h, "r1-s1", 0) >= 30, "{}", sent(&h, "r1-s1", 0));
    assert!(sent(&h, "s1-a", 0) >= 30, "{}", sent(&h, "s1-a", 0));
    let h = run("tcp-to-b-small-mtu");
    assert!(sent(&h, "r1-r2", 0) >= 6, "{}", sent(&h, "r1-r2", 0));
    // Not a super-frame: one plain frame, larger than the MTU, dropped.
    let h = run("bytes-after");
    let id = h.sim().net.link_id("x-r1").unwrap();
    let st = &h.sim().net.links()[id].dirs[0].stats;
    assert_eq!(
        st.offered_packets,
        2 + 1,
        "the ARP pair and one plain frame"
    );
    assert_eq!(
        st.drops.get(netloop_model::stats::DropReason::MtuExceeded),
        1
    );
}
