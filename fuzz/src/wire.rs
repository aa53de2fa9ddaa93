//! Hand-built frames for seeds and tests: just enough IPv4, ICMP, UDP, TCP,
//! ARP, IPv6, ICMPv6 and neighbour discovery to reach deep into a node, with correct checksums (a library
//! such as smoltcp's `wire` refuses to build the malformed variants the
//! seeds also need).

pub const ETH_IPV4: u16 = 0x0800;
pub const ETH_ARP: u16 = 0x0806;
pub const ETH_IPV6: u16 = 0x86dd;

pub fn checksum(data: &[u8]) -> u16 {
    let mut sum = 0u32;
    for c in data.chunks(2) {
        let word = u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]);
        sum += u32::from(word);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An Ethernet frame; the harness rewrites the MACs (flag 3 or 2).
pub fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

pub struct Ip {
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub ttl: u8,
    pub proto: u8,
    pub id: u16,
    /// Fragment offset in 8-byte units and the more-fragments flag.
    pub frag: (u16, bool),
    pub options: Vec<u8>,
}

impl Ip {
    pub fn new(src: [u8; 4], dst: [u8; 4], proto: u8) -> Ip {
        Ip {
            src,
            dst,
            ttl: 64,
            proto,
            id: 1,
            frag: (0, false),
            options: Vec::new(),
        }
    }

    pub fn packet(&self, payload: &[u8]) -> Vec<u8> {
        let hlen = 20 + self.options.len();
        let mut h = vec![0u8; hlen];
        h[0] = 0x40 | (hlen / 4) as u8;
        h[2..4].copy_from_slice(&((hlen + payload.len()) as u16).to_be_bytes());
        h[4..6].copy_from_slice(&self.id.to_be_bytes());
        let frag = self.frag.0 | if self.frag.1 { 0x2000 } else { 0 };
        h[6..8].copy_from_slice(&frag.to_be_bytes());
        h[8] = self.ttl;
        h[9] = self.proto;
        h[12..16].copy_from_slice(&self.src);
        h[16..20].copy_from_slice(&self.dst);
        h[20..].copy_from_slice(&self.options);
        let c = checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h.extend_from_slice(payload);
        h
    }
}

pub fn icmp_echo(seq: u16, data: &[u8]) -> Vec<u8> {
    let mut m = vec![8, 0, 0, 0, 0x12, 0x34];
    m.extend_from_slice(&seq.to_be_bytes());
    m.extend_from_slice(data);
    let c = checksum(&m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    m
}

/// UDP with checksum 0 (none), which IPv4 allows.
pub fn udp(dport: u16, data: &[u8]) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend_from_slice(&40000u16.to_be_bytes());
    m.extend_from_slice(&dport.to_be_bytes());
    m.extend_from_slice(&((8 + data.len()) as u16).to_be_bytes());
    m.extend_from_slice(&[0, 0]);
    m.extend_from_slice(data);
    m
}

/// A TCP SYN; its checksum covers the pseudo-header.
pub fn tcp_syn(src: [u8; 4], dst: [u8; 4], dport: u16) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&40001u16.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[4..8].copy_from_slice(&1000u32.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = 0x02;
    t[14..16].copy_from_slice(&8192u16.to_be_bytes());
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src);
    pseudo.extend_from_slice(&dst);
    pseudo.extend_from_slice(&[0, 6, 0, 20]);
    pseudo.extend_from_slice(&t);
    let c = checksum(&pseudo);
    t[16..18].copy_from_slice(&c.to_be_bytes());
    t
}

pub fn arp(op: u16, sender_ip: [u8; 4], target_ip: [u8; 4]) -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4];
    a.extend_from_slice(&op.to_be_bytes());
    a.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x09]);
    a.extend_from_slice(&sender_ip);
    a.extend_from_slice(&[0; 6]);
    a.extend_from_slice(&target_ip);
    eth(ETH_ARP, &a)
}

/// An IPv6 header in front of `payload`, whose first header is `next`.
pub struct Ip6 {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub hops: u8,
    pub next: u8,
}

impl Ip6 {
    pub fn new(src: [u8; 16], dst: [u8; 16], next: u8) -> Ip6 {
        Ip6 {
            src,
            dst,
            hops: 64,
            next,
        }
    }

    pub fn packet(&self, payload: &[u8]) -> Vec<u8> {
        let mut h = vec![0x60, 0, 0, 0];
        h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        h.extend_from_slice(&[self.next, self.hops]);
        h.extend_from_slice(&self.src);
        h.extend_from_slice(&self.dst);
        h.extend_from_slice(payload);
        h
    }
}

/// The upper-layer checksum over the IPv6 pseudo-header (RFC 8200 §8.1).
pub fn checksum6(src: [u8; 16], dst: [u8; 16], proto: u8, data: &[u8]) -> u16 {
    let mut words = Vec::with_capacity(40 + data.len());
    words.extend_from_slice(&src);
    words.extend_from_slice(&dst);
    words.extend_from_slice(&(data.len() as u32).to_be_bytes());
    words.extend_from_slice(&[0, 0, 0, proto]);
    words.extend_from_slice(data);
    checksum(&words)
}

/// An ICMPv6 message of `ty`/`code` and `body` (after the checksum), its
/// checksum filled in.
pub fn icmp6(src: [u8; 16], dst: [u8; 16], ty: u8, code: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![ty, code, 0, 0];
    m.extend_from_slice(body);
    let c = checksum6(src, dst, 58, &m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    m
}

/// The solicited-node group of `a`.
pub fn solicited_node(a: [u8; 16]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[0..2].copy_from_slice(&[0xff, 0x02]);
    g[11] = 1;
    g[12] = 0xff;
    g[13..].copy_from_slice(&a[13..]);
    g
}

/// A neighbour solicitation (type 135) or advertisement (136, with
/// `flags`) for `target`, with a link-layer option of `mac` (source for a
/// solicitation, target for an advertisement) unless `mac` is `None`, as a
/// whole IPv6 packet with hop limit `hops`.
pub fn ndp(
    ty: u8,
    flags: u8,
    src: [u8; 16],
    dst: [u8; 16],
    target: [u8; 16],
    mac: Option<[u8; 6]>,
    hops: u8,
) -> Vec<u8> {
    let mut body = vec![flags, 0, 0, 0];
    body.extend_from_slice(&target);
    if let Some(m) = mac {
        body.extend_from_slice(&[if ty == 135 { 1 } else { 2 }, 1]);
        body.extend_from_slice(&m);
    }
    let mut ip = Ip6::new(src, dst, 58);
    ip.hops = hops;
    ip.packet(&icmp6(src, dst, ty, 0, &body))
}

/// UDP over IPv6, checksum filled in (IPv6 requires one).
pub fn udp6(src: [u8; 16], dst: [u8; 16], dport: u16, data: &[u8]) -> Vec<u8> {
    let mut m = udp(dport, data);
    let c = checksum6(src, dst, 17, &m);
    m[6..8].copy_from_slice(&c.to_be_bytes());
    m
}

/// Records of the harness's format.
#[derive(Default)]
pub struct Records(pub Vec<u8>);

impl Records {
    /// `mode`: 0 as is, 1 to the neighbour, 2 broadcast, 3 neighbour and our
    /// source MAC; `gap` in 50 µs steps (< 64).
    pub fn push(&mut self, mode: u8, gap: u8, frame: &[u8]) -> &mut Self {
        // Either would shift every later record out of place.
        assert!(
            mode < 4 && gap < 64,
            "mode {mode} or gap {gap} out of range"
        );
        assert!(
            frame.len() <= crate::MAX_FRAME,
            "a {}-byte frame",
            frame.len()
        );
        self.0.push(mode | gap << 2);
        self.0
            .extend_from_slice(&(frame.len() as u16).to_le_bytes());
        self.0.extend_from_slice(frame);
        self
    }

    /// A `frames_super` record: as [`Records::push`], with the GSO header
    /// (`gso_size`, `gso_type`) the frame came with.
    pub fn push_gso(
        &mut self,
        mode: u8,
        gap: u8,
        gso_size: u16,
        gso_type: u8,
        frame: &[u8],
    ) -> &mut Self {
        assert!(
            mode < 4 && gap < 64,
            "mode {mode} or gap {gap} out of range"
        );
        assert!(
            frame.len() <= crate::MAX_SUPER_FRAME,
            "a {}-byte frame",
            frame.len()
        );
        self.0.push(mode | gap << 2);
        self.0
            .extend_from_slice(&(frame.len() as u16).to_le_bytes());
        self.0.extend_from_slice(&gso_size.to_le_bytes());
        self.0.push(gso_type);
        self.0.extend_from_slice(frame);
        self
    }
}
