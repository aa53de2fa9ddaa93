//! Software segmentation of GSO super-frames, as Linux's own software GSO
//! does it, at the boundary between a real host and the model.
//!
//! A real host whose interface keeps its offloads on (TSO/GSO, as Linux
//! users have them) hands its stack's large TCP and UDP sends to the device
//! as one "super-frame" of up to 64 KiB, with a `virtio_net_hdr` that says
//! how to cut it: the segment size (`gso_size`, the MSS) and the kind of
//! segmentation. A packet socket with `PACKET_VNET_HDR` (or a TAP device
//! with `IFF_VNET_HDR`) reads it whole, with that header. The model carries
//! wire frames, so the super-frame is cut here into exactly the frames the
//! kernel would have put on the wire (`tcp_gso_segment`, `inet_gso_segment`
//! and `__udp_gso_segment` in the kernel's net/ipv4):
//!
//! - TCP over IPv4: each segment carries `gso_size` bytes of payload (the
//!   last one the rest) behind copies of the headers; its sequence number
//!   advances by the payload before it; FIN and PSH stay only on the last
//!   segment and CWR only on the first; the IPv4 identification increments
//!   by one per segment; total length, header checksum and TCP checksum are
//!   computed anew.
//! - UDP over IPv4 (`UDP_L4`, UDP_SEGMENT): each segment is a datagram of
//!   its own with `gso_size` bytes of payload, its UDP length and checksum
//!   computed anew, and the identification incrementing as for TCP.
//!
//! - TCP and UDP over IPv6 (`ipv6_gso_segment`): the same, with the IPv6
//!   payload length computed anew instead of a total length, and neither an
//!   identification nor a header checksum to set.
//!
//! Anything else — another GSO kind (the legacy UDP fragmentation offload),
//! IPv6 extension headers in a super-frame (a socket with sticky
//! destination options or a routing header keeps TSO: rare, and refused
//! rather than cut wrong), a super-frame whose headers do not say what the
//! GSO kind does — is refused with the reason, and the caller drops and
//! counts it.

use crate::link::ETH_HEADER;
use crate::Frame;
use netloop_core::frame::{Checksum, Gso, GsoKind};

/// `virtio_net_hdr.gso_type` values (include/uapi/linux/virtio_net.h).
pub mod gso_type {
    /// Not a super-frame.
    pub const NONE: u8 = 0;
    /// TCP over IPv4.
    pub const TCPV4: u8 = 1;
    /// UDP fragmentation offload (legacy; not produced by Linux stacks).
    pub const UDP: u8 = 3;
    /// TCP over IPv6.
    pub const TCPV6: u8 = 4;
    /// UDP segmentation (UDP_SEGMENT / USO).
    pub const UDP_L4: u8 = 5;
    /// Set with TCPV4/TCPV6 when the sender used ECN (CWR on the first
    /// segment only, which [`super::segment`] does anyway).
    pub const ECN: u8 = 0x80;
}

/// `virtio_net_hdr.flags`: the checksum is partial (`csum_start`,
/// `csum_offset` say where), to be completed by the device.
pub const F_NEEDS_CSUM: u8 = 1;

/// Length of a `virtio_net_hdr`.
pub const VNET_HDR_LEN: usize = 10;

/// A `virtio_net_hdr`, as a packet socket or TAP device gives it (in the
/// host's byte order: `vio_le()`, little-endian on every host netloop runs
/// on, is what both use for a legacy header).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// [`F_NEEDS_CSUM`] and others.
    pub flags: u8,
    /// One of [`gso_type`], possibly with [`gso_type::ECN`].
    pub gso_type: u8,
    /// Length of the headers (Ethernet to L4) as the sender saw them.
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where the partial checksum's coverage starts.
    pub csum_start: u16,
    /// Where, from `csum_start`, the checksum goes.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Reads one from its 10 bytes.
    pub fn parse(b: &[u8; VNET_HDR_LEN]) -> VnetHdr {
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16_at(2),
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        }
    }

    /// Its 10 bytes.
    pub fn bytes(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        b
    }

    /// Whether the frame it came with is a super-frame to cut.
    pub fn is_gso(&self) -> bool {
        self.gso_type & !gso_type::ECN != gso_type::NONE
    }
}

/// Why a super-frame was not cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GsoError {
    /// A GSO kind netloop does not cut (its `gso_type`).
    Unsupported(u8),
    /// The headers do not fit the GSO kind (what is wrong).
    Malformed(&'static str),
}

impl std::fmt::Display for GsoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GsoError::Unsupported(t) => write!(f, "GSO type {t} is not supported"),
            GsoError::Malformed(why) => write!(f, "malformed GSO super-frame: {why}"),
        }
    }
}

/// Where a super-frame's headers are, and what cutting it gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    /// Offset of the IP header (14, or 18 behind a VLAN tag).
    l3: usize,
    /// IP header length (IPv6: the fixed header; extension headers are
    /// refused).
    ihl: usize,
    /// IPv6 rather than IPv4.
    v6: bool,
    /// Offset of the TCP/UDP header.
    l4: usize,
    /// TCP/UDP header length.
    l4_len: usize,
    /// End of the IPv4 packet (the IPv4 total length from `l3`).
    end: usize,
    /// 6 or 17.
    proto: u8,
    /// Payload bytes per segment.
    mss: usize,
    /// Segments.
    segs: usize,
}

impl Layout {
    /// Bytes of headers copied into every segment.
    fn headers(&self) -> usize {
        self.l4 + self.l4_len
    }

    /// Checks `frame`'s headers against the GSO kind `kind` (a
    /// `gso_type` without [`gso_type::ECN`]) and segment size `mss`.
    fn of(frame: &[u8], kind: u8, mss: usize) -> Result<Layout, GsoError> {
        use GsoError::Malformed;
        let (proto, v6) = match kind {
            gso_type::TCPV4 => (6, false),
            gso_type::UDP_L4 => (17, false),
            gso_type::TCPV6 => (6, true),
            other => return Err(GsoError::Unsupported(other)),
        };
        if mss == 0 {
            return Err(Malformed("gso_size is 0"));
        }
        if frame.len() < 14 {
            return Err(Malformed("shorter than an Ethernet header"));
        }
        let mut l3 = 14;
        let mut ethertype = u16::from_be_bytes([frame[12], frame[13]]);
        if ethertype == 0x8100 || ethertype == 0x88a8 {
            if frame.len() < 18 {
                return Err(Malformed("truncated VLAN tag"));
            }
            ethertype = u16::from_be_bytes([frame[16], frame[17]]);
            l3 = 18;
        }
        // UDP_L4 says nothing of the family: the EtherType does.
        let v6 = v6 || (kind == gso_type::UDP_L4 && ethertype == 0x86dd);
        let (ihl, total) = if v6 {
            if ethertype != 0x86dd {
                return Err(Malformed("not IPv6"));
            }
            let ip = &frame[l3..];
            if ip.len() < 40 || ip[0] >> 4 != 6 {
                return Err(Malformed("not an IPv6 header"));
            }
            let total = 40 + usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            if total > ip.len() {
                return Err(Malformed("IPv6 payload length does not fit the frame"));
            }
            // Extension headers in front of TCP or UDP (sticky socket
            // options) are refused: they would need their own handling.
            if ip[6] != proto {
                return Err(Malformed("the IPv6 next header is not the GSO type's"));
            }
            (40, total)
        } else {
            if ethertype != 0x0800 {
                return Err(Malformed("not IPv4"));
            }
            let ip = &frame[l3..];
            if ip.len() < 20 || ip[0] >> 4 != 4 {
                return Err(Malformed("not an IPv4 header"));
            }
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            if ihl < 20 || total < ihl || total > ip.len() {
                return Err(Malformed("IPv4 lengths do not fit the frame"));
            }
            if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
                return Err(Malformed("a fragment"));
            }
            if ip[9] != proto {
                return Err(Malformed("the IPv4 protocol is not the GSO type's"));
            }
            (ihl, total)
        };
        let l4 = l3 + ihl;
        let l4_len = if proto == 6 {
            if total < ihl + 20 {
                return Err(Malformed("truncated TCP header"));
            }
            let thl = usize::from(frame[l4 + 12] >> 4) * 4;
            if thl < 20 || total < ihl + thl {
                return Err(Malformed("TCP header length does not fit"));
            }
            thl
        } else {
            if total < ihl + 8 {
                return Err(Malformed("truncated UDP header"));
            }
            8
        };
        let end = l3 + total;
        let payload = end - (l4 + l4_len);
        // An empty payload (a bare ACK or FIN said to be GSO) is one segment.
        let segs = payload.div_ceil(mss).max(1);
        if segs > usize::from(u16::MAX) {
            return Err(Malformed("more segments than a super-frame may have"));
        }
        Ok(Layout {
            l3,
            ihl,
            v6,
            l4,
            l4_len,
            end,
            proto,
            mss,
            segs,
        })
    }

    /// Puts segment `i` of `frame` into `buf` (emptied first).
    fn build(&self, frame: &[u8], i: usize, buf: &mut Vec<u8>) {
        let (l3, l4, headers) = (self.l3, self.l4, self.headers());
        let payload = &frame[headers..self.end];
        let chunk = &payload[i * self.mss..((i + 1) * self.mss).min(payload.len())];
        buf.clear();
        buf.extend_from_slice(&frame[..headers]);
        buf.extend_from_slice(chunk);
        if self.v6 {
            // IPv6: the payload length only (no identification, no header
            // checksum).
            let payload = (self.l4_len + chunk.len()) as u16;
            buf[l3 + 4..l3 + 6].copy_from_slice(&payload.to_be_bytes());
        } else {
            // IPv4: total length, identification, header checksum.
            let ip_total = (self.ihl + self.l4_len + chunk.len()) as u16;
            let id0 = u16::from_be_bytes([frame[l3 + 4], frame[l3 + 5]]);
            buf[l3 + 2..l3 + 4].copy_from_slice(&ip_total.to_be_bytes());
            buf[l3 + 4..l3 + 6].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
            buf[l3 + 10] = 0;
            buf[l3 + 11] = 0;
            let c = ipv4_header_checksum(&buf[l3..l3 + self.ihl]);
            buf[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        }
        if self.proto == 6 {
            let seq0 =
                u32::from_be_bytes([frame[l4 + 4], frame[l4 + 5], frame[l4 + 6], frame[l4 + 7]]);
            let seq = seq0.wrapping_add((i * self.mss) as u32);
            buf[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
            let last = i + 1 == self.segs;
            let mut flags = buf[l4 + 13];
            if !last {
                flags &= !(0x01 | 0x08); // FIN, PSH
            }
            if i > 0 {
                flags &= !0x80; // CWR
            }
            buf[l4 + 13] = flags;
        } else {
            let udp_len = (8 + chunk.len()) as u16;
            buf[l4 + 4..l4 + 6].copy_from_slice(&udp_len.to_be_bytes());
        }
        complete_l4_checksum(buf);
    }
}

/// Cuts `frame` (Ethernet header first, possibly one VLAN tag), read with
/// `hdr`, into the frames the kernel's software GSO would send, calling
/// `out` with each in order; `buf` is scratch space (kept between calls so
/// that cutting allocates nothing once it has grown). Returns how many.
pub fn segment(
    frame: &[u8],
    hdr: &VnetHdr,
    buf: &mut Vec<u8>,
    out: &mut dyn FnMut(&[u8]),
) -> Result<usize, GsoError> {
    let lay = Layout::of(
        frame,
        hdr.gso_type & !gso_type::ECN,
        usize::from(hdr.gso_size),
    )?;
    for i in 0..lay.segs {
        lay.build(frame, i, buf);
        out(buf);
    }
    Ok(lay.segs)
}

/// What the model carries for a super-frame read with `hdr`: checks its
/// headers as [`segment`] would and counts its segments. A super-frame of one
/// segment is `Ok(None)`: the caller completes its checksum and carries it as
/// a plain frame.
pub fn describe(frame: &[u8], hdr: &VnetHdr) -> Result<Option<Gso>, GsoError> {
    let lay = Layout::of(
        frame,
        hdr.gso_type & !gso_type::ECN,
        usize::from(hdr.gso_size),
    )?;
    // Carried whole, its length is its segments' (a Linux stack never puts
    // bytes after the packet of a super-frame; cutting would drop them).
    if lay.end != frame.len() {
        return Err(GsoError::Malformed("bytes after the IP packet"));
    }
    if lay.segs < 2 {
        return Ok(None);
    }
    let ecn = hdr.gso_type & gso_type::ECN != 0;
    let kind = match (lay.proto, lay.v6) {
        (6, false) => GsoKind::TcpV4 { ecn },
        (6, true) => GsoKind::TcpV6 { ecn },
        (_, false) => GsoKind::UdpV4,
        (_, true) => GsoKind::UdpV6,
    };
    Ok(Some(Gso {
        kind,
        hdr_len: lay.headers() as u16,
        size: hdr.gso_size,
        segs: lay.segs as u16,
    }))
}

/// The `virtio_net_hdr` that hands super-frame `g` to a device to cut (or
/// to a receiving stack to take whole): its kind and segment size, and its
/// partial TCP/UDP checksum's place (`csum_start`: where the L4 header
/// starts, which a VLAN tag moves).
pub fn vnet_for(g: &Gso) -> VnetHdr {
    let (gso_type, csum_offset) = match g.kind {
        GsoKind::TcpV4 { ecn } => (gso_type::TCPV4 | if ecn { gso_type::ECN } else { 0 }, 16),
        GsoKind::TcpV6 { ecn } => (gso_type::TCPV6 | if ecn { gso_type::ECN } else { 0 }, 16),
        GsoKind::UdpV4 | GsoKind::UdpV6 => (gso_type::UDP_L4, 6),
    };
    VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type,
        hdr_len: g.hdr_len,
        gso_size: g.size,
        csum_start: 0,
        csum_offset,
    }
}

/// A [`vnet_for`] header with `csum_start` and `hdr_len` filled in for
/// `frame` (where its TCP/UDP header starts and ends); `None` if the frame
/// no longer fits its GSO kind (the caller cuts it instead, see [`cut`]).
pub fn vnet_for_frame(frame: &Frame, g: &Gso) -> Option<VnetHdr> {
    let mut h = vnet_for(g);
    let kind = h.gso_type & !gso_type::ECN;
    let lay = Layout::of(frame, kind, usize::from(g.size)).ok()?;
    h.csum_start = lay.l4 as u16;
    h.hdr_len = lay.headers() as u16;
    Some(h)
}

/// Completes a checksum that a sender with checksum offload left partial,
/// the way the kernel's `skb_checksum_help` does, from the offsets its
/// `virtio_net_hdr` gives: the one's-complement sum of everything from
/// `csum_start` (whose checksum field holds the pseudo-header's sum) is
/// folded, complemented (0 written as 0xffff) and put at `csum_start +
/// csum_offset`. Works for any protocol and any tags in front. False (the
/// frame untouched) if the offsets do not fit the frame.
pub fn complete_partial(frame: &mut [u8], csum_start: u16, csum_offset: u16) -> bool {
    let (start, at) = (
        usize::from(csum_start),
        usize::from(csum_start) + usize::from(csum_offset),
    );
    if start >= frame.len() || at + 2 > frame.len() {
        return false;
    }
    let mut sum: u32 = 0;
    let mut chunks = frame[start..].chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
        // Fold as we go: a 64 KB frame would overflow otherwise.
        sum = (sum & 0xffff) + (sum >> 16);
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let c = match !(sum as u16) {
        0 => 0xffff,
        c => c,
    };
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// Cuts super-frame `frame` into its wire frames (from the pool), calling
/// `out` with each in order; a plain frame is passed on as it is. Each
/// segment keeps the super-frame's stamp and has its checksums complete.
/// The model cuts only super-frames the edge has checked ([`describe`]) and
/// changes nothing in them that the check depends on (a router's TTL is not
/// such a thing), so they always fit their GSO kind; were one not to, it
/// would be passed on whole and marked plain (the fuzz targets and debug
/// builds stop there instead).
pub fn cut(frame: Frame, out: &mut dyn FnMut(Frame)) {
    let Some(g) = frame.meta.gso else {
        out(frame);
        return;
    };
    let kind = match g.kind {
        GsoKind::TcpV4 { .. } => gso_type::TCPV4,
        GsoKind::TcpV6 { .. } => gso_type::TCPV6,
        GsoKind::UdpV4 | GsoKind::UdpV6 => gso_type::UDP_L4,
    };
    match Layout::of(&frame, kind, usize::from(g.size)) {
        Ok(lay) => {
            for i in 0..lay.segs {
                let mut seg = Frame::with_capacity(lay.headers() + lay.mss);
                lay.build(&frame, i, &mut seg);
                seg.meta.stamp = frame.meta.stamp;
                out(seg);
            }
        }
        Err(e) => {
            debug_assert!(false, "a super-frame the edge checked no longer fits: {e}");
            let mut frame = frame;
            frame.meta.gso = None;
            frame.meta.csum = Checksum::Complete;
            out(frame);
        }
    }
}

/// Computes the TCP or UDP checksum of an IPv4 or IPv6 frame in place
/// (pseudo-header and segment, past any IPv6 extension headers), for frames
/// whose sender left it to checksum offload. Returns whether it did (not for
/// other protocols, fragments, or frames too short for their headers).
pub fn complete_l4_checksum(frame: &mut [u8]) -> bool {
    if frame.len() < ETH_HEADER {
        return false;
    }
    let mut l3 = ETH_HEADER;
    let mut ethertype = u16::from_be_bytes([frame[12], frame[13]]);
    if ethertype == 0x8100 || ethertype == 0x88a8 {
        if frame.len() < ETH_HEADER + 4 {
            return false;
        }
        ethertype = u16::from_be_bytes([frame[16], frame[17]]);
        l3 += 4;
    }
    // Where the TCP/UDP header is, its length, and the pseudo-header's
    // addresses (RFC 793 / RFC 8200 §8.1).
    let (proto, l4, len, addrs) = match ethertype {
        0x0800 if frame.len() >= l3 + 20 => {
            let ip = &frame[l3..];
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            let fragmented = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
            if ip[0] >> 4 != 4 || ihl < 20 || total < ihl || total > ip.len() || fragmented {
                return false;
            }
            (ip[9], l3 + ihl, total - ihl, l3 + 12..l3 + 20)
        }
        0x86dd => {
            let ip = &frame[l3..];
            let Ok(total) = crate::ipv6::validate(ip) else {
                return false;
            };
            let Ok(u) = crate::ipv6::upper_layer(&ip[..total]) else {
                return false;
            };
            // A fragment's checksum covers the whole datagram; with a
            // Routing header it covers the final destination, not the one
            // here (RFC 8200 §8.1): neither is completed, the frame goes on
            // as its sender wrote it.
            if u.is_fragment() || u.routing_left {
                return false;
            }
            (u.proto, l3 + u.offset, total - u.offset, l3 + 8..l3 + 40)
        }
        _ => return false,
    };
    let csum_at = match proto {
        6 => 16,
        17 => 6,
        _ => return false,
    };
    if len < csum_at + 2 {
        return false;
    }
    let mut sum: u32 = 0;
    let mut add = |bytes: &[u8]| {
        let mut chunks = bytes.chunks_exact(2);
        for c in &mut chunks {
            sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
        }
        if let [last] = chunks.remainder() {
            sum += u32::from(*last) << 8;
        }
    };
    add(&frame[addrs]);
    add(&[0, proto]);
    add(&(len as u32).to_be_bytes());
    frame[l4 + csum_at] = 0;
    frame[l4 + csum_at + 1] = 0;
    add(&frame[l4..l4 + len]);
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let mut c = !(sum as u16);
    if c == 0 && proto == 17 {
        // UDP sends a computed zero as all ones (zero means "no checksum").
        c = 0xffff;
    }
    frame[l4 + csum_at..l4 + csum_at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// The RFC 1071 checksum of an IPv4 header whose checksum field is zero.
fn ipv4_header_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks_exact(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 4] = [198, 18, 0, 1];
    const B: [u8; 4] = [198, 18, 0, 2];

    /// An Ethernet + IPv4 + TCP super-frame: `payload` bytes, flags `flags`.
    fn tcp_super(payload: &[u8], flags: u8, id: u16, seq: u32) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 32];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[1] = 0x02; // ECT(0)
        ip[2..4].copy_from_slice(&((20 + 32 + payload.len()) as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&id.to_be_bytes());
        ip[6] = 0x40; // DF
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&A);
        ip[16..20].copy_from_slice(&B);
        let tcp = &mut f[34..66];
        tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&5201u16.to_be_bytes());
        tcp[4..8].copy_from_slice(&seq.to_be_bytes());
        tcp[8..12].copy_from_slice(&77u32.to_be_bytes());
        tcp[12] = 8 << 4; // 32-byte header: timestamps
        tcp[13] = flags;
        tcp[14..16].copy_from_slice(&502u16.to_be_bytes());
        tcp[20..32].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 7]);
        f.extend_from_slice(payload);
        // Partial checksums as the sender leaves them: anything.
        f
    }

    fn ones_sum_ok(bytes: &[u8]) -> bool {
        ipv4_header_checksum(bytes) == 0
    }

    fn cut(frame: &[u8], hdr: VnetHdr) -> Result<Vec<Vec<u8>>, GsoError> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        let n = segment(frame, &hdr, &mut buf, &mut |f| out.push(f.to_vec()))?;
        assert_eq!(n, out.len());
        Ok(out)
    }

    fn tcp_hdr(mss: u16) -> VnetHdr {
        VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: gso_type::TCPV4 | gso_type::ECN,
            hdr_len: 66,
            gso_size: mss,
            csum_start: 34,
            csum_offset: 16,
        }
    }

    /// Every rule of tcp_gso_segment/inet_gso_segment, on a super-frame of
    /// three full segments and a short one with PSH, FIN and CWR set.
    #[test]
    fn tcp_is_cut_as_the_kernel_cuts_it() {
        let payload: Vec<u8> = (0..3 * 1448 + 100).map(|i| (i * 7) as u8).collect();
        let sup = tcp_super(&payload, 0x80 | 0x10 | 0x08 | 0x01, 0xfffe, 0xffff_f000);
        let segs = cut(&sup, tcp_hdr(1448)).unwrap();
        assert_eq!(segs.len(), 4);
        let mut joined = Vec::new();
        for (i, s) in segs.iter().enumerate() {
            let len = if i < 3 { 1448 } else { 100 };
            assert_eq!(s.len(), 66 + len);
            assert_eq!(s[..14], sup[..14], "Ethernet header copied");
            let ip = &s[14..34];
            assert_eq!(usize::from(u16::from_be_bytes([ip[2], ip[3]])), 52 + len);
            assert_eq!(
                u16::from_be_bytes([ip[4], ip[5]]),
                0xfffeu16.wrapping_add(i as u16),
                "IP ID increments (and wraps)"
            );
            assert_eq!((ip[1], ip[6], ip[8]), (0x02, 0x40, 64), "TOS, DF, TTL kept");
            assert!(ones_sum_ok(ip), "IPv4 header checksum");
            let tcp = &s[34..];
            let seq = u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]);
            assert_eq!(seq, 0xffff_f000u32.wrapping_add(1448 * i as u32));
            let flags = tcp[13];
            assert_eq!(flags & 0x10, 0x10, "ACK on every segment");
            assert_eq!(flags & 0x80 != 0, i == 0, "CWR only on the first");
            assert_eq!(flags & 0x09 != 0, i == 3, "PSH and FIN only on the last");
            assert_eq!(flags & 0x09, if i == 3 { 0x09 } else { 0 });
            assert_eq!(tcp[20..32], sup[54..66], "options copied");
            // The checksum is right: computing it again changes nothing.
            let mut again = s.clone();
            assert!(complete_l4_checksum(&mut again));
            assert_eq!(&again, s, "TCP checksum of segment {i}");
            joined.extend_from_slice(&s[66..]);
        }
        assert_eq!(joined, payload, "the payload, in order, nothing lost");
    }

    #[test]
    fn udp_segments_are_datagrams_of_their_own() {
        let mut f = tcp_super(&[], 0, 9, 0);
        f.truncate(34);
        f[23] = 17;
        let payload: Vec<u8> = (0..2500).map(|i| i as u8).collect();
        let mut udp = vec![0u8; 8];
        udp[0..2].copy_from_slice(&1000u16.to_be_bytes());
        udp[2..4].copy_from_slice(&2000u16.to_be_bytes());
        udp[4..6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        f.extend_from_slice(&udp);
        f.extend_from_slice(&payload);
        f[16..18].copy_from_slice(&((20 + 8 + payload.len()) as u16).to_be_bytes());
        let hdr = VnetHdr {
            gso_type: gso_type::UDP_L4,
            gso_size: 1200,
            ..VnetHdr::default()
        };
        let segs = cut(&f, hdr).unwrap();
        assert_eq!(
            segs.iter().map(Vec::len).collect::<Vec<_>>(),
            [42 + 1200, 42 + 1200, 42 + 100]
        );
        for (i, s) in segs.iter().enumerate() {
            let ulen = usize::from(u16::from_be_bytes([s[38], s[39]]));
            assert_eq!(ulen, s.len() - 34);
            assert_eq!(u16::from_be_bytes([s[18], s[19]]), 9 + i as u16);
            assert!(ones_sum_ok(&s[14..34]));
            let mut again = s.clone();
            assert!(complete_l4_checksum(&mut again));
            assert_eq!(&again, s);
            assert_eq!(&s[42..], &payload[i * 1200..(i * 1200 + 1200).min(2500)]);
        }
    }

    #[test]
    fn a_super_frame_that_fits_one_segment_is_passed_whole_with_checksums() {
        let sup = tcp_super(&[5; 1000], 0x18, 1, 1);
        let segs = cut(&sup, tcp_hdr(1448)).unwrap();
        assert_eq!(segs.len(), 1);
        assert_eq!(segs[0].len(), sup.len());
        assert_eq!(segs[0][47], 0x18, "PSH kept on the only segment");
        let bare = tcp_super(&[], 0x11, 1, 1);
        let segs = cut(&bare, tcp_hdr(1448)).unwrap();
        assert_eq!(segs.len(), 1, "no payload: one segment, the headers");
        assert_eq!(segs[0].len(), bare.len());
    }

    /// The IPv4 super-frame's TCP segment behind an IPv6 header instead.
    fn tcp6_super(payload: &[u8], flags: u8, seq: u32) -> Vec<u8> {
        let v4 = tcp_super(payload, flags, 0, seq);
        let mut f = v4[..12].to_vec();
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend_from_slice(&((32 + payload.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[6, 64]);
        f.extend_from_slice(&[0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0x20, 0x01, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2]);
        f.extend_from_slice(&v4[34..]);
        f
    }

    #[test]
    fn tcp_over_ipv6_is_cut_with_its_payload_length_and_checksums() {
        let payload: Vec<u8> = (0..4000u32).map(|i| (i * 7) as u8).collect();
        let sup = tcp6_super(&payload, 0x19, 1000);
        let hdr = VnetHdr {
            gso_type: gso_type::TCPV6,
            hdr_len: 86,
            csum_start: 54,
            ..tcp_hdr(1448)
        };
        let g = describe(&sup, &hdr).unwrap().expect("3 segments");
        assert_eq!(g.kind, GsoKind::TcpV6 { ecn: false });
        assert_eq!((g.segs, g.hdr_len), (3, 86));
        let segs = cut(&sup, hdr).unwrap();
        assert_eq!(segs.len(), 3);
        let mut joined = Vec::new();
        for (i, s) in segs.iter().enumerate() {
            let ip = &s[14..];
            assert_eq!(crate::ipv6::validate(ip), Ok(ip.len()), "segment {i}");
            let seq = u32::from_be_bytes([ip[44], ip[45], ip[46], ip[47]]);
            assert_eq!(seq, 1000 + 1448 * i as u32);
            assert_eq!(ip[53] & 0x09 != 0, i == 2, "PSH and FIN only on the last");
            let (src, dst) = (crate::ipv6::src_addr(ip), crate::ipv6::dst_addr(ip));
            assert_eq!(
                crate::ipv6::checksum(src, dst, 6, &ip[40..]),
                0,
                "segment {i}"
            );
            joined.extend_from_slice(&ip[72..]);
        }
        assert_eq!(joined, payload);
        // Extension headers in front of TCP are refused, not mis-cut.
        let mut ext = sup.clone();
        ext[20] = 0;
        assert_eq!(
            cut(&ext, hdr).unwrap_err(),
            GsoError::Malformed("the IPv6 next header is not the GSO type's")
        );
    }

    #[test]
    fn what_cannot_be_cut_is_refused_with_the_reason() {
        let sup = tcp_super(&[1; 3000], 0x10, 1, 1);
        let err = |f: &[u8], h: VnetHdr| cut(f, h).unwrap_err();
        assert_eq!(
            err(
                &sup,
                VnetHdr {
                    gso_type: gso_type::TCPV6,
                    ..tcp_hdr(1448)
                }
            ),
            GsoError::Malformed("not IPv6")
        );
        assert_eq!(
            err(
                &sup,
                VnetHdr {
                    gso_type: gso_type::UDP,
                    ..tcp_hdr(1448)
                }
            ),
            GsoError::Unsupported(gso_type::UDP)
        );
        assert_eq!(err(&sup, tcp_hdr(0)), GsoError::Malformed("gso_size is 0"));
        assert!(matches!(
            err(&sup[..40], tcp_hdr(1448)),
            GsoError::Malformed(_)
        ));
        let mut frag = sup.clone();
        frag[20] |= 0x20; // MF
        assert_eq!(err(&frag, tcp_hdr(1448)), GsoError::Malformed("a fragment"));
        let mut udp = sup.clone();
        udp[23] = 17;
        assert_eq!(
            err(&udp, tcp_hdr(1448)),
            GsoError::Malformed("the IPv4 protocol is not the GSO type's")
        );
        let mut long = sup.clone();
        long[16..18].copy_from_slice(&60000u16.to_be_bytes());
        assert_eq!(
            err(&long, tcp_hdr(1448)),
            GsoError::Malformed("IPv4 lengths do not fit the frame")
        );
    }

    #[test]
    fn a_super_frame_carried_whole_has_nothing_after_its_packet() {
        let sup = tcp_super(&[1; 3000], 0x10, 1, 1);
        let g = describe(&sup, &tcp_hdr(1448)).unwrap().expect("3 segments");
        assert_eq!(g.segs, 3);
        assert_eq!(g.wire_len(sup.len()), 3 * 66 + 3000);
        // Trailing bytes would make the segments' lengths and the wire's
        // count disagree with what cutting gives: refused.
        let mut tail = sup.clone();
        tail.extend_from_slice(&[0; 3000]);
        assert_eq!(
            describe(&tail, &tcp_hdr(1448)),
            Err(GsoError::Malformed("bytes after the IP packet"))
        );
        // One segment is not carried as a super-frame.
        assert_eq!(describe(&sup, &tcp_hdr(3000)), Ok(None));
    }

    #[test]
    fn a_partial_checksum_is_completed_where_the_header_says() {
        // A UDP datagram behind a VLAN tag, its checksum field holding the
        // pseudo-header's sum, as a sender with checksum offload leaves it.
        let mut f = vec![0u8; 18];
        f[12..14].copy_from_slice(&[0x81, 0x00]);
        f[16..18].copy_from_slice(&[0x08, 0x00]);
        let mut ip = vec![0x45, 0, 0, 28 + 6, 0, 0, 0, 0, 64, 17, 0, 0];
        ip.extend_from_slice(&A);
        ip.extend_from_slice(&B);
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[0x9c, 0x40, 0, 9, 0, 14, 0, 0, 1, 2, 3, 4, 5, 6]);
        let pseudo: u32 = [A, B]
            .concat()
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .sum::<u32>()
            + 17
            + 14;
        let folded = ((pseudo & 0xffff) + (pseudo >> 16)) as u16;
        f[38 + 6..38 + 8].copy_from_slice(&folded.to_be_bytes());
        assert!(complete_partial(&mut f, 38, 6));
        assert!(ones_sum_ok(&udp_pseudo_and_segment(&f[18..])));
        assert!(!complete_partial(&mut f, 60, 6), "beyond the frame");
        assert!(!complete_partial(&mut f, 38, 200));
    }

    /// The pseudo-header and the UDP segment of IPv4 packet `ip`.
    fn udp_pseudo_and_segment(ip: &[u8]) -> Vec<u8> {
        let mut v = ip[12..20].to_vec();
        let len = ip.len() - 20;
        v.extend_from_slice(&[0, 17]);
        v.extend_from_slice(&(len as u16).to_be_bytes());
        v.extend_from_slice(&ip[20..]);
        v
    }

    #[test]
    fn the_header_reads_and_writes_its_ten_bytes() {
        let h = tcp_hdr(1448);
        assert_eq!(VnetHdr::parse(&h.bytes()), h);
        assert_eq!(h.bytes()[4..6], 1448u16.to_le_bytes());
        assert!(h.is_gso());
        assert!(!VnetHdr::default().is_gso());
    }
}
