//! IPv6 packets as bytes (RFC 8200): header fields, validation, the
//! extension-header chain, the upper-layer checksum with its pseudo-header,
//! and building the packets a node originates; shared by routers and
//! neighbour discovery.
//!
//! Functions here take the IPv6 packet (from the version nibble on) and
//! expect at least the fixed header, which [`validate`] checks for packets
//! from the wire.

use std::net::Ipv6Addr;

use crate::ipv4::fold;
use crate::link::ETH_HEADER;
use crate::stats::DropReason;
use crate::Frame;

/// The fixed IPv6 header.
pub const IPV6_HEADER: usize = 40;
/// The smallest MTU every IPv6 link carries (RFC 8200 §5): the size an
/// ICMPv6 error is kept within.
pub const MIN_MTU: usize = 1280;
/// EtherType of IPv6.
pub const ETHERTYPE: u16 = 0x86dd;

/// Next-header values (IANA "Assigned Internet Protocol Numbers").
pub mod next {
    /// Hop-by-Hop Options (RFC 8200 §4.3).
    pub const HOP_BY_HOP: u8 = 0;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// Routing header (§4.4).
    pub const ROUTING: u8 = 43;
    /// Fragment header (§4.5).
    pub const FRAGMENT: u8 = 44;
    /// Encapsulating Security Payload (RFC 4303): what follows is opaque.
    pub const ESP: u8 = 50;
    /// Authentication Header (RFC 4302; its length is in 4-byte units).
    pub const AH: u8 = 51;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// No next header.
    pub const NONE: u8 = 59;
    /// Destination Options (§4.6).
    pub const DEST_OPTS: u8 = 60;
}

/// Checks a received IPv6 header: at least the fixed header, version 6, and
/// a payload length the frame holds. Returns the packet's length (header
/// plus payload), so that Ethernet padding can be trimmed. A payload length
/// of 0 with a Hop-by-Hop header could be a jumbogram (RFC 2675), which no
/// Ethernet link carries: it is taken as an empty payload and fails later.
pub fn validate(ip: &[u8]) -> Result<usize, DropReason> {
    if ip.len() < IPV6_HEADER || ip[0] >> 4 != 6 {
        return Err(DropReason::Malformed);
    }
    let total = IPV6_HEADER + usize::from(payload_len(ip));
    if total > ip.len() {
        return Err(DropReason::Malformed);
    }
    Ok(total)
}

/// The payload length field.
pub fn payload_len(ip: &[u8]) -> u16 {
    u16::from_be_bytes([ip[4], ip[5]])
}
/// The Next Header field of the fixed header.
pub fn next_header(ip: &[u8]) -> u8 {
    ip[6]
}
/// The hop limit.
pub fn hop_limit(ip: &[u8]) -> u8 {
    ip[7]
}
/// The source address.
pub fn src_addr(ip: &[u8]) -> Ipv6Addr {
    Ipv6Addr::from(<[u8; 16]>::try_from(&ip[8..24]).expect("16 bytes"))
}
/// The destination address.
pub fn dst_addr(ip: &[u8]) -> Ipv6Addr {
    Ipv6Addr::from(<[u8; 16]>::try_from(&ip[24..40]).expect("16 bytes"))
}

/// Where the upper layer starts, past the extension headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpperLayer {
    /// Its protocol (the last Next Header value).
    pub proto: u8,
    /// Its offset in the packet.
    pub offset: usize,
    /// A non-first fragment: what follows the Fragment header is not the
    /// upper layer's start.
    pub later_fragment: bool,
    /// A Routing header with segments left: the packet is bound further
    /// than its destination address says.
    pub routing_left: bool,
    /// For a fragment (not an atomic one): where its Fragment header is.
    pub fragment_at: Option<FragmentAt>,
    /// The chain has a Fragment header, an atomic one included (neighbour
    /// discovery must have none, RFC 6980).
    pub fragment_header: bool,
}

impl UpperLayer {
    /// The packet is a fragment (not an atomic one): the upper layer is
    /// only whole after reassembly.
    pub fn is_fragment(&self) -> bool {
        self.fragment_at.is_some()
    }

    /// A first fragment that stops before the end of its upper-layer
    /// header (RFC 7112: the first fragment carries the whole header
    /// chain; Linux's `ipv6_frag_thdr_truncated`, with its sizes: TCP 20
    /// bytes, UDP 8, ICMPv6 8, any other protocol 1).
    pub fn truncated_first_fragment(&self, packet_len: usize) -> bool {
        if !self.is_fragment() || self.later_fragment {
            return false;
        }
        let need = match self.proto {
            next::TCP => 20,
            next::UDP | next::ICMPV6 => 8,
            _ => 1,
        };
        self.offset + need > packet_len
    }
}

/// Where a fragment's Fragment header is (RFC 8200 §4.5): what comes before
/// it is the unfragmentable part, repeated in every fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragmentAt {
    /// The offset of the Next Header field that says "Fragment" (6 in the
    /// fixed header, or the first byte of the extension header before).
    pub next_field: usize,
    /// The offset of the Fragment header.
    pub at: usize,
}

/// The fields of a Fragment header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragmentHeader {
    /// The protocol of the fragmentable part.
    pub next: u8,
    /// The fragment's offset in the fragmentable part, in bytes.
    pub offset: usize,
    /// More fragments follow.
    pub more: bool,
    /// The identification shared by a packet's fragments.
    pub ident: u32,
}

/// The Fragment header at `at` in `ip` (which holds its 8 bytes).
pub fn fragment_header(ip: &[u8], at: usize) -> FragmentHeader {
    let h = &ip[at..at + FRAGMENT_HEADER];
    let word = u16::from_be_bytes([h[2], h[3]]);
    FragmentHeader {
        next: h[0],
        offset: usize::from(word & 0xfff8),
        more: word & 1 != 0,
        ident: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
    }
}

/// The size of a Fragment header.
pub const FRAGMENT_HEADER: usize = 8;

/// Walks the extension-header chain of a validated packet (RFC 8200 §4) to
/// its upper layer. Every header must lie within the packet
/// (`malformed` otherwise); the chain stops at a Fragment header of a
/// non-first fragment, at ESP (whose content is encrypted) and at any
/// protocol that is not an extension header. Bounded by the packet's
/// length: each header is at least 8 bytes.
pub fn upper_layer(ip: &[u8]) -> Result<UpperLayer, DropReason> {
    let mut proto = next_header(ip);
    let mut at = IPV6_HEADER;
    let mut routing_left = false;
    let mut next_field = 6;
    let mut fragment_at = None;
    let mut fragment_header = false;
    loop {
        let len = match proto {
            next::HOP_BY_HOP | next::ROUTING | next::DEST_OPTS => {
                let h = ip.get(at..at + 4).ok_or(DropReason::Malformed)?;
                routing_left |= proto == next::ROUTING && h[3] != 0;
                8 + usize::from(h[1]) * 8
            }
            next::AH => {
                let h = ip.get(at..at + 2).ok_or(DropReason::Malformed)?;
                (usize::from(h[1]) + 2) * 4
            }
            next::FRAGMENT => {
                let h = ip.get(at..at + 8).ok_or(DropReason::Malformed)?;
                let word = u16::from_be_bytes([h[2], h[3]]);
                fragment_header = true;
                // An atomic fragment (offset 0, no more to come) is a whole
                // packet (RFC 6946).
                if word & 0xfff9 != 0 {
                    fragment_at = Some(FragmentAt { next_field, at });
                }
                if word & 0xfff8 != 0 {
                    return Ok(UpperLayer {
                        proto: h[0],
                        offset: at + 8,
                        later_fragment: true,
                        routing_left,
                        fragment_at,
                        fragment_header: true,
                    });
                }
                8
            }
            _ => {
                return Ok(UpperLayer {
                    proto,
                    offset: at,
                    later_fragment: false,
                    routing_left,
                    fragment_at,
                    fragment_header,
                })
            }
        };
        if at + len > ip.len() {
            return Err(DropReason::Malformed);
        }
        proto = ip[at];
        next_field = at;
        at += len;
    }
}

/// The one's-complement sum of the pseudo-header (RFC 8200 §8.1): source,
/// destination, upper-layer length and next header.
fn pseudo_sum(src: Ipv6Addr, dst: Ipv6Addr, proto: u8, len: usize) -> u32 {
    let mut sum: u32 = 0;
    for a in [src.octets(), dst.octets()] {
        for w in a.chunks_exact(2) {
            sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
    }
    sum += (len as u32) >> 16;
    sum += len as u32 & 0xffff;
    sum + u32::from(proto)
}

/// The upper-layer checksum of `data` (an ICMPv6, UDP or TCP message whose
/// checksum field is either zero — the result is the value to put there —
/// or filled in — the result is 0 if it verifies).
pub fn checksum(src: Ipv6Addr, dst: Ipv6Addr, proto: u8, data: &[u8]) -> u16 {
    checksum_zero_from(src, dst, proto, data, data.len())
}

/// [`checksum`] of `data` whose bytes from `zero_from` on are all zero, so
/// that only those before are summed.
pub fn checksum_zero_from(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    proto: u8,
    data: &[u8],
    zero_from: usize,
) -> u16 {
    let sum = crate::ipv4::ones_sum_zero_from(data, zero_from);
    !fold(pseudo_sum(src, dst, proto, data.len()) + u32::from(sum))
}

/// An Ethernet frame (MACs zero, to be filled in) holding an IPv6 packet
/// from `src` to `dst` with hop limit `hops` and traffic class `tclass`,
/// whose payload is the ICMPv6 message `icmp` (checksum field zero: it is
/// computed here).
pub fn icmp_frame(src: Ipv6Addr, dst: Ipv6Addr, hops: u8, tclass: u8, icmp: &[u8]) -> Frame {
    icmp_frame_with(src, dst, hops, tclass, icmp.len(), |b| {
        b.copy_from_slice(icmp)
    })
}

/// [`icmp_frame`] for a message of `len` bytes that `fill` writes in place
/// (from zeros; its checksum field is then computed): nothing allocated
/// beside the frame.
pub fn icmp_frame_with(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hops: u8,
    tclass: u8,
    len: usize,
    fill: impl FnOnce(&mut [u8]),
) -> Frame {
    let mut frame = packet_frame(src, dst, next::ICMPV6, hops, len);
    let ip = &mut frame[ETH_HEADER..];
    ip[0] = 0x60 | tclass >> 4;
    ip[1] = tclass << 4;
    let body = &mut ip[IPV6_HEADER..];
    fill(body);
    body[2..4].fill(0);
    let c = checksum(src, dst, next::ICMPV6, body);
    body[2..4].copy_from_slice(&c.to_be_bytes());
    frame
}

/// An Ethernet frame (MACs zero, EtherType IPv6) holding an IPv6 packet
/// from `src` to `dst` with next header `proto`, hop limit `hops` and
/// traffic class 0, whose `len` payload bytes are zero, to be filled in.
pub fn packet_frame(src: Ipv6Addr, dst: Ipv6Addr, proto: u8, hops: u8, len: usize) -> Frame {
    let mut frame = Frame::zeroed(ETH_HEADER + IPV6_HEADER + len);
    frame[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    let ip = &mut frame[ETH_HEADER..];
    ip[0] = 0x60;
    ip[4..6].copy_from_slice(&(len as u16).to_be_bytes());
    ip[6] = proto;
    ip[7] = hops;
    ip[8..24].copy_from_slice(&src.octets());
    ip[24..40].copy_from_slice(&dst.octets());
    frame
}

/// An ICMPv6 error message (RFC 4443 §2.1) of type `ty` and `code`, whose
/// second word is `word` (Packet Too Big's MTU, else 0), quoting as much of
/// packet `ip` as keeps the error within the minimum MTU (§2.4 (c)); its
/// checksum is left for [`icmp_frame`].
pub fn error_message(ty: u8, code: u8, word: u32, ip: &[u8]) -> Vec<u8> {
    let quoted = &ip[..ip.len().min(MIN_MTU - IPV6_HEADER - 8)];
    let mut msg = Vec::with_capacity(8 + quoted.len());
    msg.extend_from_slice(&[ty, code, 0, 0]);
    msg.extend_from_slice(&word.to_be_bytes());
    msg.extend_from_slice(quoted);
    msg
}

/// Cuts `frame`, an Ethernet frame holding an IPv6 packet with no
/// extension headers (what a node originates), into fragments of at most
/// `mtu` bytes of IPv6 packet each (RFC 8200 §4.5): each is the fixed
/// header (its Next Header now "Fragment", its payload length its own), a
/// Fragment header with identification `ident`, and a piece of the
/// original payload, a multiple of 8 bytes long but for the last. `None` if
/// `mtu` leaves no room for 8 bytes of data (never for IPv6's minimum MTU).
pub fn fragment(frame: &[u8], mtu: usize, ident: u32) -> Option<Vec<Frame>> {
    let head = ETH_HEADER + IPV6_HEADER;
    let per = mtu.checked_sub(IPV6_HEADER + FRAGMENT_HEADER)? & !7;
    if per == 0 {
        return None;
    }
    let payload = &frame[head..];
    let proto = frame[ETH_HEADER + 6];
    let mut out = Vec::with_capacity(payload.len().div_ceil(per));
    for (k, piece) in payload.chunks(per).enumerate() {
        let offset = k * per;
        let more = offset + piece.len() < payload.len();
        let mut f = Frame::zeroed(head + FRAGMENT_HEADER + piece.len());
        f[..head].copy_from_slice(&frame[..head]);
        let len = (FRAGMENT_HEADER + piece.len()) as u16;
        f[ETH_HEADER + 4..ETH_HEADER + 6].copy_from_slice(&len.to_be_bytes());
        f[ETH_HEADER + 6] = next::FRAGMENT;
        let h = &mut f[head..head + FRAGMENT_HEADER];
        h[0] = proto;
        h[2..4].copy_from_slice(&(offset as u16 | u16::from(more)).to_be_bytes());
        h[4..8].copy_from_slice(&ident.to_be_bytes());
        f[head + FRAGMENT_HEADER..].copy_from_slice(piece);
        out.push(f);
    }
    Some(out)
}

/// The traffic class.
pub fn traffic_class(ip: &[u8]) -> u8 {
    (ip[0] << 4) | (ip[1] >> 4)
}

/// The Ethernet multicast address of IPv6 group `group` (RFC 2464 §7):
/// 33:33 and the group's last 32 bits.
pub fn multicast_mac(group: Ipv6Addr) -> [u8; 6] {
    let o = group.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
}

/// The solicited-node multicast group of `addr` (RFC 4291 §2.7.1):
/// `ff02::1:ff00:0/104` and its last 24 bits.
pub fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::from([
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, o[13], o[14], o[15],
    ])
}

/// Whether `a` is link-local unicast (`fe80::/10`).
pub fn is_link_local(a: Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

/// The all-nodes group, `ff02::1`.
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
/// The all-routers group, `ff02::2`.
pub const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(next: u8, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; IPV6_HEADER];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&(payload.len() as u16).to_be_bytes());
        p[6] = next;
        p[7] = 64;
        p.extend_from_slice(payload);
        p
    }

    #[test]
    fn a_checksum_up_to_the_zeros_is_the_whole_messages() {
        let src: Ipv6Addr = "2001:2::1".parse().unwrap();
        let dst: Ipv6Addr = "2001:2:0:9::2".parse().unwrap();
        for (len, written) in [(1008, 28), (1008, 8), (41, 13), (8, 8)] {
            let mut d = vec![0u8; len];
            for (i, b) in d[..written].iter_mut().enumerate() {
                *b = (i as u8).wrapping_mul(37) | 0x80;
            }
            // The plain sum, 16 bits at a time, over every byte.
            let mut sum = pseudo_sum(src, dst, next::UDP, len);
            for w in d.chunks(2) {
                sum += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
                sum = (sum & 0xffff) + (sum >> 16);
            }
            let plain = !fold(sum);
            assert_eq!(checksum(src, dst, next::UDP, &d), plain, "len {len}");
            assert_eq!(
                checksum_zero_from(src, dst, next::UDP, &d, written),
                plain,
                "len {len}, written {written}"
            );
        }
    }

    #[test]
    fn the_chain_is_walked_to_the_upper_layer_and_bounded() {
        // Hop-by-Hop (8 bytes) → Destination Options (16 bytes) → UDP.
        let mut ext = vec![next::DEST_OPTS, 0, 1, 4, 0, 0, 0, 0];
        ext.extend_from_slice(&[next::UDP, 1]);
        ext.extend_from_slice(&[0; 14]);
        ext.extend_from_slice(&[0; 8]);
        let p = packet(next::HOP_BY_HOP, &ext);
        assert_eq!(validate(&p), Ok(p.len()));
        let u = upper_layer(&p).unwrap();
        assert_eq!((u.proto, u.offset, u.is_fragment()), (next::UDP, 64, false));
        // A header that claims more than the packet has.
        let mut bad = packet(next::HOP_BY_HOP, &[next::UDP, 9, 0, 0, 0, 0, 0, 0]);
        assert_eq!(upper_layer(&bad), Err(DropReason::Malformed));
        bad.truncate(IPV6_HEADER + 1);
        bad[4..6].copy_from_slice(&1u16.to_be_bytes());
        assert_eq!(upper_layer(&bad), Err(DropReason::Malformed));
        // A later fragment stops at its Fragment header.
        let p = packet(
            next::FRAGMENT,
            &[next::ICMPV6, 0, 0x05, 0x00, 0, 0, 0, 1, 1, 2, 3],
        );
        let u = upper_layer(&p).unwrap();
        assert!(u.is_fragment() && u.later_fragment);
        assert_eq!(u.proto, next::ICMPV6);
    }

    #[test]
    fn validation_checks_version_and_length() {
        let p = packet(next::NONE, &[1, 2, 3]);
        assert_eq!(validate(&p), Ok(43));
        let mut padded = p.clone();
        padded.extend_from_slice(&[0; 5]);
        assert_eq!(validate(&padded), Ok(43));
        let mut v4 = p.clone();
        v4[0] = 0x45;
        assert_eq!(validate(&v4), Err(DropReason::Malformed));
        assert_eq!(validate(&p[..42]), Err(DropReason::Malformed));
        assert_eq!(validate(&p[..39]), Err(DropReason::Malformed));
    }

    #[test]
    fn a_checksum_written_verifies_and_a_flipped_bit_does_not() {
        let src: Ipv6Addr = "2001:2::1".parse().unwrap();
        let dst: Ipv6Addr = "2001:2:0:1::2".parse().unwrap();
        let f = icmp_frame(src, dst, 64, 0, &[128, 0, 0, 0, 0, 1, 0, 1, 9, 9, 9]);
        let ip = &f[ETH_HEADER..];
        assert_eq!(validate(ip), Ok(ip.len()));
        assert_eq!(checksum(src, dst, next::ICMPV6, &ip[IPV6_HEADER..]), 0);
        let mut g = ip.to_vec();
        g[IPV6_HEADER + 5] ^= 1;
        assert_ne!(checksum(src, dst, next::ICMPV6, &g[IPV6_HEADER..]), 0);
        assert_eq!(
            solicited_node("2001:2::1:2:3".parse().unwrap()),
            "ff02::1:ff02:3".parse::<Ipv6Addr>().unwrap()
        );
        assert!(is_link_local("fe80::1".parse().unwrap()));
        assert!(!is_link_local("fec0::1".parse().unwrap()));
    }
}
