//! IPv4 packets as bytes: header fields, the Internet checksum, header
//! validation, and fragmentation (RFC 791 §3.2), shared by routers and hosts.
//!
//! Functions here take the IP packet (from the version byte on) unless they
//! say they take an Ethernet frame, and expect a header whose length the
//! caller has checked ([`validate`] does that for packets from the wire).
//! Reassembly is [`crate::reassembly`]; a host's path MTU cache is
//! [`crate::pmtu`].

use std::net::Ipv4Addr;

use crate::link::ETH_HEADER;
use crate::stats::DropReason;
use crate::Frame;

/// Smallest IPv4 header.
pub const IP_HEADER: usize = 20;
/// Protocol number of ICMP.
pub const PROTO_ICMP: u8 = 1;
/// Protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// Protocol number of UDP.
pub const PROTO_UDP: u8 = 17;

/// RFC 1812 §5.2.2's checks of a received IPv4 header; the packet's total
/// length on success. The checksum is checked first, as the RFC orders it, so
/// that a bit flipped anywhere in a plain header counts as `bad_checksum`;
/// when the header length field itself is unusable the first 20 bytes are
/// checked.
pub fn validate(ip: &[u8]) -> Result<usize, DropReason> {
    if ip.len() < IP_HEADER {
        return Err(DropReason::Malformed);
    }
    let hl = header_len(ip);
    let hl_ok = hl >= IP_HEADER && hl <= ip.len();
    if checksum(&ip[..if hl_ok { hl } else { IP_HEADER }]) != 0 {
        return Err(DropReason::BadChecksum);
    }
    let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    if ip[0] >> 4 != 4 || !hl_ok || total < hl || total > ip.len() {
        return Err(DropReason::Malformed);
    }
    Ok(total)
}

/// The UDP destination port of `frame`, an Ethernet frame, if it carries
/// an IPv4 UDP datagram or its first fragment: what the hint before its
/// arrival finds the receiving application by.
pub fn udp_dport(frame: &[u8]) -> Option<u16> {
    let ip = frame.get(crate::link::ETH_HEADER..)?;
    if frame.get(12..14)? != [0x08, 0x00]
        || ip.len() < IP_HEADER
        || ip[0] >> 4 != 4
        || ip[9] != PROTO_UDP
        || frag_offset(ip) != 0
    {
        return None;
    }
    let at = header_len(ip) + 2;
    let &[hi, lo] = ip.get(at..at + 2)? else {
        return None;
    };
    Some(u16::from_be_bytes([hi, lo]))
}

/// The header length in bytes.
pub fn header_len(ip: &[u8]) -> usize {
    (ip[0] & 0x0f) as usize * 4
}
/// The source address.
pub fn src_addr(ip: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15])
}
/// The destination address.
pub fn dst_addr(ip: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19])
}
/// Whether Don't Fragment is set.
pub fn dont_fragment(ip: &[u8]) -> bool {
    ip[6] & 0x40 != 0
}
/// Whether More Fragments is set.
pub fn more_fragments(ip: &[u8]) -> bool {
    ip[6] & 0x20 != 0
}
/// The fragment offset in 8-byte units.
pub fn frag_offset(ip: &[u8]) -> u16 {
    u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff
}

/// The Internet checksum (RFC 1071) of `data`: the one's complement of the
/// one's-complement sum of its 16-bit words. Over data that contains a valid
/// checksum field it is 0.
pub fn checksum(data: &[u8]) -> u16 {
    !ones_sum(data)
}

/// The one's-complement sum of `data`'s 16-bit big-endian words (an odd
/// last byte padded with a zero), folded to 16 bits and not complemented.
///
/// This is on every packet a simulated host sends (a 1000-byte UDP
/// payload's sum was 8 % of the instructions of a dumbbell run when it was
/// taken 16 bits at a time), so it takes 32-bit words in the machine's byte
/// order into a 64-bit sum, which cannot overflow (a frame has far fewer
/// than 2^32 words) and which the compiler turns into vector adds; the sum
/// is byte-order independent (RFC 1071 §2(B)), so one swap at the end
/// gives the big-endian one.
pub fn ones_sum(data: &[u8]) -> u16 {
    let mut words = data.chunks_exact(4);
    let mut acc: u64 = 0;
    for w in &mut words {
        acc += u64::from(u32::from_ne_bytes([w[0], w[1], w[2], w[3]]));
    }
    let rest = words.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    acc += u64::from(u32::from_ne_bytes(tail));
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    u16::from_be(acc as u16)
}

/// [`ones_sum`] of `data` whose bytes from `zero_from` on are all zero:
/// they add nothing, so only those before are summed (debug builds check
/// the rest). A simulated source's 1000-byte payload is a 20-byte probe and
/// zeros.
pub fn ones_sum_zero_from(data: &[u8], zero_from: usize) -> u16 {
    let zero_from = zero_from.min(data.len());
    debug_assert!(
        data[zero_from..].iter().all(|&b| b == 0),
        "the data is not zero from byte {zero_from}"
    );
    ones_sum(&data[..zero_from])
}

/// The one's-complement sum of an IPv4 pseudo-header (RFC 768, RFC 793):
/// source, destination, protocol and the upper-layer length, unfolded.
pub fn pseudo_sum(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, len: usize) -> u32 {
    let (s, d) = (src.octets(), dst.octets());
    u32::from(u16::from_be_bytes([s[0], s[1]]))
        + u32::from(u16::from_be_bytes([s[2], s[3]]))
        + u32::from(u16::from_be_bytes([d[0], d[1]]))
        + u32::from(u16::from_be_bytes([d[2], d[3]]))
        + u32::from(proto)
        + (len as u32 & 0xffff)
        + ((len as u32) >> 16)
}

/// Fills the checksum of the UDP datagram `udp` (header and payload,
/// checksum field any value) sent from `src` to `dst`, whose bytes from
/// `zero_from` on are all zero ([`ones_sum_zero_from`]); a sum of zero is
/// sent as all ones, as zero means none (RFC 768). `udp` is exactly the
/// datagram (its length field's bytes; at least its 8-byte header).
pub fn fill_udp_checksum(src: Ipv4Addr, dst: Ipv4Addr, udp: &mut [u8], zero_from: usize) {
    debug_assert_eq!(usize::from(u16::from_be_bytes([udp[4], udp[5]])), udp.len());
    udp[6] = 0;
    udp[7] = 0;
    let data = ones_sum_zero_from(udp, zero_from.max(8));
    let sum = pseudo_sum(src, dst, 17, udp.len()) + u32::from(data);
    let c = match !fold(sum) {
        0 => 0xffff,
        c => c,
    };
    udp[6..8].copy_from_slice(&c.to_be_bytes());
}

/// Folds carries back into a 16-bit one's-complement sum.
pub fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Decrements the TTL and patches the header checksum incrementally with RFC
/// 1624's equation 3, `HC' = ~(~HC + ~m + m')`, where m is the 16-bit word
/// holding TTL and protocol. (Equation 3 rather than RFC 1141's form, which
/// can produce 0xFFFF where a full recomputation gives 0x0000.)
pub fn decrement_ttl(ip: &mut [u8]) {
    let old = u16::from_be_bytes([ip[8], ip[9]]);
    ip[8] -= 1;
    let new = u16::from_be_bytes([ip[8], ip[9]]);
    let hc = u16::from_be_bytes([ip[10], ip[11]]);
    let sum = (!hc) as u32 + (!old) as u32 + new as u32;
    ip[10..12].copy_from_slice(&(!fold(sum)).to_be_bytes());
}

/// The options of a first fragment's header that go into every later
/// fragment: those with the "copied" flag (RFC 791, option type bit 0),
/// padded with End-of-Options to a multiple of 4 bytes. A malformed option
/// list is copied up to the first bad option.
pub fn copied_options(opts: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            0 => break,  // End of Option List
            1 => i += 1, // No Operation: not copied
            t => {
                let Some(&len) = opts.get(i + 1) else { break };
                let len = len as usize;
                if len < 2 || i + len > opts.len() {
                    break;
                }
                if t & 0x80 != 0 {
                    out.extend_from_slice(&opts[i..i + len]);
                }
                i += len;
            }
        }
    }
    out.resize(out.len().next_multiple_of(4), 0);
    out
}

/// The largest IPv4 datagram (RFC 791: total length is 16 bits); the data
/// of its last fragment ends at most here.
pub const MAX_DATAGRAM: usize = 65535;

/// Splits the IPv4 packet in Ethernet frame `frame` into fragments of at most
/// `mtu` bytes (RFC 791 §3.2, "fragmentation procedure"): data split at 8-byte
/// boundaries, offsets in 8-byte units added to the packet's own offset (it
/// may itself be a fragment), MF on every fragment but the last, which keeps
/// the original MF. The first fragment keeps every option, the others only
/// the copied ones. `None` if `mtu` cannot hold a header and 8 bytes of data.
pub fn fragment(frame: &[u8], mtu: usize) -> Option<Vec<Frame>> {
    let eth = &frame[..ETH_HEADER];
    let ip = &frame[ETH_HEADER..];
    let hl = header_len(ip);
    let data = &ip[hl..];
    let rest_options = copied_options(&ip[IP_HEADER..hl]);
    let base = frag_offset(ip) as usize * 8;
    let last_mf = more_fragments(ip);
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let options = if pos == 0 {
            &ip[IP_HEADER..hl]
        } else {
            &rest_options[..]
        };
        let hlen = IP_HEADER + options.len();
        let room = mtu.checked_sub(hlen)? / 8 * 8;
        if room == 0 {
            return None;
        }
        let n = room.min(data.len() - pos);
        let last = pos + n == data.len();
        let mut f = Frame::with_capacity(ETH_HEADER + hlen + n);
        f.extend_from_slice(eth);
        f.extend_from_slice(&ip[..IP_HEADER]);
        f.extend_from_slice(options);
        f.extend_from_slice(&data[pos..pos + n]);
        let h = &mut f[ETH_HEADER..];
        h[0] = 0x40 | (hlen / 4) as u8;
        h[2..4].copy_from_slice(&((hlen + n) as u16).to_be_bytes());
        let flags = ip[6] & 0x40 | if last && !last_mf { 0 } else { 0x20 };
        let offset = ((base + pos) / 8) as u16;
        h[6] = flags | (offset >> 8) as u8;
        h[7] = offset as u8;
        h[10..12].fill(0);
        let c = checksum(&h[..hlen]);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        out.push(f);
        pos += n;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The port is found after the header's own length, in a datagram or
    /// its first fragment only; anything else has none.
    #[test]
    fn udp_dport_reads_the_first_fragments_port() {
        let frame = |ihl: u8, proto: u8, frag: u16| {
            let mut f = vec![0u8; 14 + 4 * usize::from(ihl) + 8];
            f[12] = 0x08;
            f[14] = 0x40 | ihl;
            f[14 + 6..14 + 8].copy_from_slice(&frag.to_be_bytes());
            f[14 + 9] = proto;
            let at = 14 + 4 * usize::from(ihl) + 2;
            f[at..at + 2].copy_from_slice(&5001u16.to_be_bytes());
            f
        };
        assert_eq!(udp_dport(&frame(5, PROTO_UDP, 0)), Some(5001));
        assert_eq!(udp_dport(&frame(6, PROTO_UDP, 0)), Some(5001), "options");
        assert_eq!(
            udp_dport(&frame(5, PROTO_UDP, 0x2000)),
            Some(5001),
            "first fragment"
        );
        assert_eq!(
            udp_dport(&frame(5, PROTO_UDP, 0x2001)),
            None,
            "a later fragment"
        );
        assert_eq!(udp_dport(&frame(5, PROTO_TCP, 0)), None);
        assert_eq!(udp_dport(&frame(5, PROTO_UDP, 0)[..30]), None, "cut short");
        let mut arp = frame(5, PROTO_UDP, 0);
        arp[13] = 0x06;
        assert_eq!(udp_dport(&arp), None);
    }

    /// A 20-byte header with a valid checksum, varied by `seed`.
    fn header(seed: u32) -> Vec<u8> {
        let mut h: Vec<u8> = (0..20u32)
            .map(|i| (seed.wrapping_mul(2_654_435_761).rotate_left(i) >> 7) as u8)
            .collect();
        h[0] = 0x45;
        h[2..4].copy_from_slice(&20u16.to_be_bytes());
        h[8] = h[8].max(2);
        h[10..12].fill(0);
        let c = checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h
    }

    #[test]
    fn incremental_ttl_update_matches_full_recomputation() {
        for seed in 0..20_000 {
            let mut h = header(seed);
            decrement_ttl(&mut h);
            assert_eq!(checksum(&h), 0, "seed {seed}: {h:02x?}");
            let mut full = h.clone();
            full[10..12].fill(0);
            let c = checksum(&full);
            assert_eq!(h[10..12], c.to_be_bytes(), "seed {seed}");
        }
    }

    #[test]
    fn copied_options_keep_only_the_copied_flag() {
        // NOP, Record Route (7, not copied, len 7), Loose Source Route (131,
        // copied, len 7), EOL.
        let opts = [1, 7, 7, 4, 0, 0, 0, 0, 131, 7, 4, 1, 2, 3, 4, 0, 0, 0, 0, 0];
        assert_eq!(copied_options(&opts), [131, 7, 4, 1, 2, 3, 4, 0]);
        // A truncated option stops the copy.
        assert_eq!(copied_options(&[131, 9, 4, 0]), Vec::<u8>::new());
    }

    #[test]
    fn validate_orders_checksum_before_structure() {
        let h = header(7);
        assert_eq!(validate(&h), Ok(20));
        // A flipped version bit is caught by the checksum first.
        let mut v = h.clone();
        v[0] ^= 0x80;
        assert_eq!(validate(&v), Err(DropReason::BadChecksum));
        // A consistent header with a bad version is malformed.
        v[10..12].fill(0);
        let c = checksum(&v[..20]);
        v[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(validate(&v), Err(DropReason::Malformed));
    }

    /// RFC 1071's sum taken the plain way: 16-bit big-endian words, the
    /// carries folded as they come.
    fn plain_sum(data: &[u8]) -> u16 {
        let mut sum: u32 = 0;
        for w in data.chunks(2) {
            sum += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum as u16
    }

    #[test]
    fn the_word_at_a_time_sum_is_rfc_1071s() {
        use rand::Rng;
        let mut rng = netloop_core::rng::RngStream::new(1071, "ones_sum");
        // Every length up to past a few vector widths, odd and even, at
        // every alignment, random bytes and the carry-heavy all-ones.
        let buf: Vec<u8> = (0..4200).map(|_| rng.random()).collect();
        for len in (0..300).chain([1499, 1500, 1501, 4096, 4095]) {
            for start in 0..4 {
                let d = &buf[start..start + len];
                assert_eq!(ones_sum(d), plain_sum(d), "len {len} at {start}");
            }
            let ones = vec![0xffu8; len];
            assert_eq!(ones_sum(&ones), plain_sum(&ones), "all ones, len {len}");
        }
        assert_eq!(ones_sum(&[]), 0);
        // 64 KiB of 0xff: the 64-bit sum needs several folds.
        let big = vec![0xffu8; 65_535];
        assert_eq!(ones_sum(&big), plain_sum(&big));
    }

    #[test]
    fn udp_checksums_are_smoltcps() {
        use rand::Rng;
        use smoltcp::wire::UdpPacket;
        let mut rng = netloop_core::rng::RngStream::new(768, "udp");
        for len in (0..64).chain([999, 1000, 1472]) {
            let mut a: Vec<u8> = (0..8 + len).map(|_| rng.random()).collect();
            a[4..6].copy_from_slice(&((8 + len) as u16).to_be_bytes());
            let src = Ipv4Addr::from(rng.random::<u32>());
            let dst = Ipv4Addr::from(rng.random::<u32>());
            let mut b = a.clone();
            fill_udp_checksum(src, dst, &mut a, usize::MAX);
            UdpPacket::new_unchecked(&mut b).fill_checksum(&src.into(), &dst.into());
            assert_eq!(a, b, "len {len}");
            assert!(UdpPacket::new_unchecked(&a).verify_checksum(&src.into(), &dst.into()));
        }
        // A payload that is zeros past what was written: summed up to
        // there, the checksum is the whole datagram's.
        for (len, written) in [(1000, 20), (1000, 0), (33, 7), (8, 0)] {
            let mut a = vec![0u8; 8 + len];
            a[..8 + written]
                .iter_mut()
                .for_each(|b| *b = rng.random::<u8>() | 1);
            a[4..6].copy_from_slice(&((8 + len) as u16).to_be_bytes());
            let (src, dst) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 9, 9));
            let mut b = a.clone();
            fill_udp_checksum(src, dst, &mut a, 8 + written);
            UdpPacket::new_unchecked(&mut b).fill_checksum(&src.into(), &dst.into());
            assert_eq!(a, b, "len {len}, written {written}");
        }
        // A datagram whose sum is zero goes out as all ones (RFC 768).
        let src = Ipv4Addr::new(198, 18, 0, 1);
        let dst = Ipv4Addr::new(198, 18, 0, 2);
        let mut d = vec![0u8; 10];
        d[4..6].copy_from_slice(&10u16.to_be_bytes());
        let want = !fold(pseudo_sum(src, dst, 17, 10) + 10);
        d[8..10].copy_from_slice(&want.to_be_bytes());
        fill_udp_checksum(src, dst, &mut d, 10);
        assert_eq!(d[6..8], [0xff, 0xff]);
    }
}
