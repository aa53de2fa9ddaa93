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
    let mut sum: u32 = 0;
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        sum += u16::from_be_bytes([w[0], w[1]]) as u32;
    }
    if let [last] = words.remainder() {
        sum += (*last as u32) << 8;
    }
    !fold(sum)
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
}
