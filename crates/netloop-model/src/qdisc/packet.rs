//! What a queue discipline reads and writes in a frame: its IPv4 flow (for
//! FQ-CoDel's hash) and its ECN field (RFC 3168 §5), which an AQM sets to
//! Congestion Experienced instead of dropping an ECN-capable packet.

use crate::ipv4;

/// The ECN codepoints (the two low bits of the IPv4 TOS byte).
const ECN_MASK: u8 = 0b11;
/// Congestion Experienced.
const CE: u8 = 0b11;
/// Not ECN-Capable Transport.
const NOT_ECT: u8 = 0b00;

/// Where the IPv4 header starts, past an 802.1Q/802.1ad tag; `None` for
/// anything else (ARP, IPv6, a truncated frame).
fn ipv4_at(frame: &[u8]) -> Option<usize> {
    let mut at = 12;
    let mut ethertype = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
    if ethertype == 0x8100 || ethertype == 0x88a8 {
        at += 4;
        ethertype = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
    }
    let l3 = at + 2;
    (ethertype == 0x0800 && frame.len() >= l3 + 20 && frame[l3] >> 4 == 4).then_some(l3)
}

/// Sets CE on an ECN-capable IPv4 packet (ECT(0), ECT(1) or already CE),
/// patching the header checksum incrementally (RFC 1624, as TTL is);
/// returns whether the packet is ECN-capable, i.e. whether marking stands
/// for the drop. A packet that is not (or not IPv4) is left alone.
pub fn mark_ce(frame: &mut [u8]) -> bool {
    let Some(l3) = ipv4_at(frame) else {
        return false;
    };
    let tos = frame[l3 + 1];
    if tos & ECN_MASK == NOT_ECT {
        return false;
    }
    if tos & ECN_MASK != CE {
        let ip = &mut frame[l3..];
        let old = u16::from_be_bytes([ip[0], ip[1]]);
        ip[1] |= CE;
        let new = u16::from_be_bytes([ip[0], ip[1]]);
        let hc = u16::from_be_bytes([ip[10], ip[11]]);
        let sum = (!hc) as u32 + (!old) as u32 + new as u32;
        ip[10..12].copy_from_slice(&(!ipv4::fold(sum)).to_be_bytes());
    }
    true
}

/// A hash of the frame's flow: the IPv4 5-tuple (addresses, protocol and,
/// for TCP and UDP that is not a fragment, ports: the fragments of a
/// datagram meet in one queue, as with Linux's flow dissector), or the ethertype
/// for what is not IPv4. FNV-1a with a fixed key: stable across runs and
/// Rust releases, so that the same packets meet the same flow queues (a
/// simulation has no adversary to randomise the hash against, which is
/// why Linux perturbs it).
pub fn flow_hash(frame: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    match ipv4_at(frame) {
        Some(l3) => {
            let ip = &frame[l3..];
            let proto = ip[9];
            eat(&ip[12..20]);
            eat(&[proto]);
            let hl = ipv4::header_len(ip);
            let whole = ipv4::frag_offset(ip) == 0 && !ipv4::more_fragments(ip);
            if whole && matches!(proto, 6 | 17) && ip.len() >= hl + 4 {
                eat(&ip[hl..hl + 4]);
            }
        }
        None => eat(frame.get(12..14).unwrap_or(&[])),
    }
    h
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An Ethernet frame with an IPv4 header of TOS `tos` (valid
    /// checksum) and a UDP header from port `sport`.
    pub(crate) fn udp(tos: u8, sport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[1] = tos;
        ip[2..4].copy_from_slice(&28u16.to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
        ip[16..20].copy_from_slice(&[198, 18, 0, 2]);
        let c = ipv4::checksum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&9u16.to_be_bytes());
        f
    }

    #[test]
    fn ce_is_set_on_ect_packets_only_and_the_checksum_stays_valid() {
        for ect in [0b10u8, 0b01, 0b11] {
            let mut f = udp(0xb8 | ect, 1);
            assert!(mark_ce(&mut f));
            assert_eq!(f[15] & 0b11, CE);
            assert_eq!(f[15] & !0b11, 0xb8, "the DSCP is kept");
            assert_eq!(
                ipv4::checksum(&f[14..34]),
                0,
                "checksum verifies after marking"
            );
        }
        let mut f = udp(0xb8, 1);
        let before = f.clone();
        assert!(!mark_ce(&mut f), "Not-ECT: the discipline must drop");
        assert_eq!(f, before);
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert!(!mark_ce(&mut arp));
    }

    #[test]
    fn flows_are_told_apart_by_their_ports_and_stable() {
        assert_eq!(
            flow_hash(&udp(0, 1)),
            flow_hash(&udp(0b10, 1)),
            "ECN is not part of the flow"
        );
        assert_ne!(flow_hash(&udp(0, 1)), flow_hash(&udp(0, 2)));
        assert_eq!(flow_hash(&udp(0, 7)), flow_hash(&udp(0, 7)));
    }

    #[test]
    fn the_fragments_of_a_datagram_share_a_flow() {
        let mut first = udp(0, 1);
        first[20] = 0x20; // more fragments, offset 0
        let mut later = udp(0, 1);
        later[20..22].copy_from_slice(&185u16.to_be_bytes()); // offset 1 480
        later[34..38].fill(0xaa); // payload, not ports
        assert_eq!(flow_hash(&first), flow_hash(&later));
        assert_ne!(flow_hash(&first), flow_hash(&udp(0, 1)));
    }
}
