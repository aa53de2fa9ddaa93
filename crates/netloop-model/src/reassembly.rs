//! IPv4 reassembly (RFC 791 §3.2) and IPv6 reassembly (RFC 8200 §4.5) of
//! datagrams addressed to a node: simulated hosts reassemble what they
//! receive (RFC 1122 §3.3.2), routers what is addressed to them (RFC 1812
//! §5.2.3).
//!
//! An IPv6 packet is kept per (source, destination, identification); its
//! unfragmentable part (the headers before the Fragment header) comes from
//! the fragment at offset 0, and the packet rebuilt has no Fragment header.
//! The rules below hold for both families (Linux shares them between
//! `ip_fragment.c` and `reassembly.c` since 4.19), with IPv6's own time
//! limit, [`TIMEOUT6`] (60 s, RFC 8200 and `ip6frag_time`). The memory
//! bound is one per node for both families.
//!
//! Fragments are kept per (source, destination, protocol, identification)
//! until every byte from 0 to the end given by the last fragment has arrived
//! and the first fragment (which carries the header and options) is there;
//! then the datagram is rebuilt with the first fragment's header. The rules
//! are Linux's (`net/ipv4/ip_fragment.c`), so that a simulated host treats
//! hostile or broken fragments as a real one would:
//! - a datagram not whole [`TIMEOUT`] (30 s, `ipfrag_time`) after its first
//!   fragment arrived is given up (`reassembly_timeout`);
//! - a fragment that overlaps data already received but is not wholly inside
//!   it discards the whole datagram (Linux since 4.19, after FragmentSmack;
//!   RFC 5722 asks the same of IPv6) (`reassembly_invalid`); one wholly
//!   inside is a duplicate and only it is dropped (`reassembly_invalid`);
//! - an end that disagrees with a last fragment already seen, data past the
//!   last fragment's end, or an end past 65 535 bytes (a "ping of death")
//!   discards the datagram (`reassembly_invalid`);
//! - a fragment with More Fragments set whose data is not a multiple of 8
//!   bytes is malformed (RFC 791; Linux trims it instead, which only changes
//!   what a broken sender sees);
//! - at most [`MEMORY_LIMIT`] bytes (4 MiB, `ipfrag_high_thresh`) are held;
//!   a fragment that would go over it is dropped (`reassembly_full`), and
//!   datagrams already started are not evicted for it.
//!
//! What this module does not do: send ICMP time-exceeded (code 1) for a
//! datagram given up (RFC 1122 says SHOULD, RFC 8200 too; the caller gets
//! what to quote in [`Expired`] to do so), or ICMPv6 Parameter Problem for
//! the fragments RFC 8200 says to answer with one (a length not a multiple
//! of 8, an end past 65 535): they are dropped and counted, and the sender
//! learns nothing — a deviation.
//!
//! Accounting: every fragment held here is a frame still in flight at the
//! node ([`Reassembler::held_frames`]); a datagram completed, dropped or given
//! up says how many frames it ends, so that the node can record each one in
//! the conservation ledger.

use netloop_core::{SimDuration, SimTime};
use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::ipv4::{
    checksum, dst_addr, frag_offset, header_len, more_fragments, src_addr, MAX_DATAGRAM,
};
use crate::ipv6::{self, FragmentAt, IPV6_HEADER, MIN_MTU};
use crate::stats::DropReason;

/// How long a datagram may take to become whole (Linux's `ipfrag_time`).
pub const TIMEOUT: SimDuration = SimDuration::from_secs(30);
/// How long an IPv6 packet may take (RFC 8200 §4.5, Linux's
/// `ip6frag_time`).
pub const TIMEOUT6: SimDuration = SimDuration::from_secs(60);
/// Most bytes held at once by one node (Linux's `ipfrag_high_thresh`).
pub const MEMORY_LIMIT: usize = 4 << 20;
/// Bytes charged per fragment on top of its data, for the bookkeeping (Linux
/// charges each fragment's whole buffer, so a flood of tiny fragments still
/// fills the limit).
const PER_FRAGMENT: usize = 256;

/// Identifies the datagram a fragment belongs to (RFC 791; RFC 8200 §4.5
/// has no protocol in it: 0 for IPv6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    src: IpAddr,
    dst: IpAddr,
    proto: u8,
    ident: u32,
}

/// A datagram being reassembled.
struct Pending {
    /// When it is given up: a time limit after its first fragment (in
    /// arrival order) came.
    deadline: SimTime,
    /// The header of the fragment at offset 0, once it has come: IPv4's
    /// header, or IPv6's unfragmentable part (its last Next Header field
    /// already saying what the fragmentable part is).
    header: Option<Vec<u8>>,
    /// What an error about the datagram quotes, from the fragment at
    /// offset 0 (see [`Expired::quote`]).
    quote: Option<Vec<u8>>,
    /// The data received so far, at its offsets (gaps are zeros).
    data: Vec<u8>,
    /// Byte ranges received: start → end, disjoint and not touching.
    ranges: BTreeMap<usize, usize>,
    /// End of the data, once the fragment without More Fragments has come.
    end: Option<usize>,
    /// Fragments held.
    frames: u64,
    /// Bytes charged against [`MEMORY_LIMIT`].
    charged: usize,
}

/// What became of a fragment handed to [`Reassembler::push`].
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Held until the rest of its datagram comes.
    Held,
    /// It completed its datagram: `packet` is the whole IPv4 datagram (with
    /// the first fragment's header and options, a fresh checksum, no
    /// fragment flags), made of `frames` fragments, this one included.
    Complete {
        /// The reassembled datagram.
        packet: Vec<u8>,
        /// Fragments it was made of.
        frames: u64,
    },
    /// `frames` fragments (this one and any of its datagram that were held)
    /// are dropped for `reason`.
    Dropped {
        /// Why.
        reason: DropReason,
        /// Fragments dropped, this one included.
        frames: u64,
    },
}

/// A datagram given up by [`Reassembler::expire`].
#[derive(Debug)]
pub struct Expired {
    /// Fragments that were held for it.
    pub frames: u64,
    /// If the first fragment had come, what an ICMP time-exceeded would
    /// quote: IPv4, its header and the first 8 bytes of data; IPv6, the
    /// fragment itself, within what an ICMPv6 error holds. The version
    /// nibble tells which.
    pub quote: Option<Vec<u8>>,
}

/// Reassembles the IPv4 and IPv6 datagrams addressed to one node.
#[derive(Default)]
pub struct Reassembler {
    pending: BTreeMap<Key, Pending>,
    held_bytes: usize,
    held_frames: u64,
}

/// A fragment as [`Reassembler::insert`] takes it, of either family.
struct Piece<'a> {
    /// The header the datagram gets from the fragment at offset 0.
    header: &'a [u8],
    /// A byte of that header to change, and its value (IPv6: the Next
    /// Header field before the Fragment header gets the fragmentable
    /// part's protocol).
    next_fix: Option<(usize, u8)>,
    /// What an error about the datagram would quote, if this is the
    /// fragment at offset 0.
    quote: &'a [u8],
    /// The fragment's data.
    data: &'a [u8],
    /// Where the data goes, in bytes.
    offset: usize,
    /// More Fragments.
    more: bool,
    /// The furthest the data may end.
    limit: usize,
}

impl Reassembler {
    /// Fragments held, waiting for the rest of their datagram.
    pub fn held_frames(&self) -> u64 {
        self.held_frames
    }

    /// Bytes held, as charged against [`MEMORY_LIMIT`].
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// When the oldest datagram being reassembled is to be given up.
    pub fn next_expiry(&self) -> Option<SimTime> {
        self.pending.values().map(|p| p.deadline).min()
    }

    /// Takes fragment `ip` (a valid IPv4 header whose total length is the
    /// slice's length, with More Fragments set or a non-zero offset).
    pub fn push(&mut self, ip: &[u8], now: SimTime) -> Outcome {
        let hl = header_len(ip);
        let key = Key {
            src: src_addr(ip).into(),
            dst: dst_addr(ip).into(),
            proto: ip[9],
            ident: u32::from(u16::from_be_bytes([ip[4], ip[5]])),
        };
        let piece = Piece {
            header: &ip[..hl],
            next_fix: None,
            // The header and the first 8 bytes of data (RFC 792).
            quote: &ip[..ip.len().min(hl + 8)],
            data: &ip[hl..],
            offset: frag_offset(ip) as usize * 8,
            more: more_fragments(ip),
            // The header and data together within the largest datagram.
            limit: MAX_DATAGRAM - hl,
        };
        let p = match self.insert(key, piece, now, TIMEOUT) {
            Ok(p) => p,
            Err(outcome) => return outcome,
        };
        let mut packet = p.header.expect("is_whole checks the first fragment");
        let total = packet.len() + p.data.len();
        // Each fragment was checked against its own header's length; the
        // datagram gets the first fragment's, which may be longer.
        if total > MAX_DATAGRAM {
            return Outcome::Dropped {
                reason: DropReason::ReassemblyInvalid,
                frames: p.frames,
            };
        }
        packet[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        // No fragment flags or offset, DF kept as the first fragment had it.
        packet[6] &= 0x40;
        packet[7] = 0;
        packet[10..12].fill(0);
        let c = checksum(&packet);
        packet[10..12].copy_from_slice(&c.to_be_bytes());
        packet.extend_from_slice(&p.data);
        Outcome::Complete {
            packet,
            frames: p.frames,
        }
    }

    /// Takes IPv6 fragment `ip` (validated, its length the slice's, not an
    /// atomic fragment) whose Fragment header is where `at` says. The
    /// packet completed has the unfragmentable part of the fragment at
    /// offset 0, no Fragment header, and its payload length set.
    pub fn push6(&mut self, ip: &[u8], at: FragmentAt, now: SimTime) -> Outcome {
        let h = ipv6::fragment_header(ip, at.at);
        let key = Key {
            src: ipv6::src_addr(ip).into(),
            dst: ipv6::dst_addr(ip).into(),
            proto: 0,
            ident: h.ident,
        };
        let piece = Piece {
            header: &ip[..at.at],
            next_fix: Some((at.next_field, h.next)),
            // The fragment as it came, as much as an ICMPv6 error holds.
            quote: &ip[..ip.len().min(MIN_MTU - IPV6_HEADER - 8)],
            data: &ip[at.at + ipv6::FRAGMENT_HEADER..],
            offset: h.offset,
            more: h.more,
            // The payload length field holds what follows the fixed header.
            limit: usize::from(u16::MAX) + IPV6_HEADER - at.at,
        };
        let p = match self.insert(key, piece, now, TIMEOUT6) {
            Ok(p) => p,
            Err(outcome) => return outcome,
        };
        let mut packet = p.header.expect("is_whole checks the first fragment");
        // As for IPv4: the first fragment's unfragmentable part may be
        // longer than the one the end was checked against (Linux's
        // `out_oversize`).
        let Ok(payload) = u16::try_from(packet.len() - IPV6_HEADER + p.data.len()) else {
            return Outcome::Dropped {
                reason: DropReason::ReassemblyInvalid,
                frames: p.frames,
            };
        };
        packet[4..6].copy_from_slice(&payload.to_be_bytes());
        packet.extend_from_slice(&p.data);
        Outcome::Complete {
            packet,
            frames: p.frames,
        }
    }

    /// Adds `piece` to datagram `key` (started now with `timeout` if it is
    /// new): the datagram, taken out, if it is now whole; else what became
    /// of the piece.
    fn insert(
        &mut self,
        key: Key,
        piece: Piece,
        now: SimTime,
        timeout: SimDuration,
    ) -> Result<Pending, Outcome> {
        let Piece {
            header,
            next_fix,
            quote,
            data,
            offset,
            more,
            limit,
        } = piece;
        let end = offset + data.len();
        let dropped = |reason| Outcome::Dropped { reason, frames: 1 };
        if more && (data.is_empty() || !data.len().is_multiple_of(8)) {
            return Err(dropped(DropReason::Malformed));
        }
        if end > limit {
            return Err(self.discard(key, 1, DropReason::ReassemblyInvalid));
        }
        let charge = PER_FRAGMENT + data.len();
        if self.held_bytes + charge > MEMORY_LIMIT {
            return Err(dropped(DropReason::ReassemblyFull));
        }
        let p = self.pending.entry(key).or_insert_with(|| Pending {
            deadline: now + timeout,
            header: None,
            quote: None,
            data: Vec::new(),
            ranges: BTreeMap::new(),
            end: None,
            frames: 0,
            charged: 0,
        });
        match p.check(offset, end, more) {
            Check::Fits => {}
            Check::Duplicate => {
                return Err(dropped(DropReason::ReassemblyInvalid));
            }
            Check::Invalid => {
                return Err(self.discard(key, 1, DropReason::ReassemblyInvalid));
            }
        }
        if !more {
            p.end = Some(end);
        }
        if offset == 0 {
            let mut h = header.to_vec();
            if let Some((at, value)) = next_fix {
                h[at] = value;
            }
            p.header = Some(h);
            p.quote = Some(quote.to_vec());
        }
        if p.data.len() < end {
            p.data.resize(end, 0);
        }
        p.data[offset..end].copy_from_slice(data);
        p.insert_range(offset, end);
        p.frames += 1;
        p.charged += charge;
        self.held_bytes += charge;
        self.held_frames += 1;
        if !p.is_whole() {
            return Err(Outcome::Held);
        }
        Ok(self.take(&key).expect("just inserted"))
    }

    /// Gives up the datagrams whose time ran out by `now`, oldest first.
    pub fn expire(&mut self, now: SimTime) -> Vec<Expired> {
        let due: Vec<Key> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(k, _)| *k)
            .collect();
        let mut out: Vec<(SimTime, Expired)> = due
            .into_iter()
            .filter_map(|k| self.take(&k))
            .map(|p| {
                let quote = p.quote;
                (
                    p.deadline,
                    Expired {
                        frames: p.frames,
                        quote,
                    },
                )
            })
            .collect();
        out.sort_by_key(|(t, _)| *t);
        out.into_iter().map(|(_, e)| e).collect()
    }

    /// Drops datagram `key` with what it held, plus `extra` fragments not
    /// yet held.
    fn discard(&mut self, key: Key, extra: u64, reason: DropReason) -> Outcome {
        let held = self.take(&key).map_or(0, |p| p.frames);
        Outcome::Dropped {
            reason,
            frames: held + extra,
        }
    }

    /// Removes datagram `key`, releasing what it held.
    fn take(&mut self, key: &Key) -> Option<Pending> {
        let p = self.pending.remove(key)?;
        self.held_bytes -= p.charged;
        self.held_frames -= p.frames;
        Some(p)
    }
}

/// How a fragment fits what its datagram has received.
enum Check {
    Fits,
    /// Wholly inside data already received.
    Duplicate,
    /// Overlaps partly, or disagrees with the datagram's end.
    Invalid,
}

impl Pending {
    fn check(&self, offset: usize, end: usize, more: bool) -> Check {
        match (self.end, more) {
            // A second last fragment must agree on the end.
            (Some(e), false) if e != end => return Check::Invalid,
            // Nothing may go past the end.
            (Some(e), true) if end > e => return Check::Invalid,
            // A last fragment can't end before data already received.
            (None, false) if self.data.len() > end => return Check::Invalid,
            _ => {}
        }
        // The range starting at or before `offset`, and the first after it.
        let before = self.ranges.range(..=offset).next_back();
        if let Some((&s, &e)) = before {
            if s <= offset && end <= e {
                return Check::Duplicate;
            }
            if offset < e {
                return Check::Invalid;
            }
        }
        if let Some((&s, _)) = self.ranges.range(offset + 1..).next() {
            if s < end {
                return Check::Invalid;
            }
        }
        Check::Fits
    }

    /// Records `[start, end)` as received, merging it with ranges it
    /// touches.
    fn insert_range(&mut self, mut start: usize, mut end: usize) {
        if let Some((&s, &e)) = self.ranges.range(..=start).next_back() {
            if e == start {
                self.ranges.remove(&s);
                start = s;
            }
        }
        if let Some(e) = self.ranges.remove(&end) {
            end = e;
        }
        self.ranges.insert(start, end);
    }

    fn is_whole(&self) -> bool {
        self.header.is_some()
            && self
                .end
                .is_some_and(|e| self.ranges.len() == 1 && self.ranges.get(&0) == Some(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv4::{fragment, IP_HEADER};
    use crate::link::ETH_HEADER;

    /// An Ethernet frame holding a UDP-protocol datagram of `len` data bytes
    /// (byte i is i mod 251) from 198.18.0.1 to 198.18.0.2 with `ident`.
    fn datagram(len: usize, ident: u16) -> Vec<u8> {
        let mut f = vec![0u8; ETH_HEADER + IP_HEADER + len];
        let ip = &mut f[ETH_HEADER..];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((IP_HEADER + len) as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&ident.to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
        ip[16..20].copy_from_slice(&[198, 18, 0, 2]);
        for (i, b) in ip[IP_HEADER..].iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        let c = checksum(&ip[..IP_HEADER]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f
    }

    fn pieces(len: usize, ident: u16, mtu: usize) -> Vec<Vec<u8>> {
        fragment(&datagram(len, ident), mtu)
            .unwrap()
            .into_iter()
            .map(|f| f[ETH_HEADER..].to_vec())
            .collect()
    }

    const T0: SimTime = SimTime::ZERO;

    #[test]
    fn fragments_in_any_order_give_back_the_datagram() {
        let whole = datagram(4000, 7)[ETH_HEADER..].to_vec();
        let frags = pieces(4000, 7, 1400);
        assert_eq!(frags.len(), 3);
        for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0], [2, 0, 1]] {
            let mut r = Reassembler::default();
            let mut got = None;
            for (n, &i) in order.iter().enumerate() {
                match r.push(&frags[i], T0) {
                    Outcome::Held => assert!(n < 2, "{order:?}"),
                    Outcome::Complete { packet, frames } => {
                        assert_eq!(frames, 3);
                        got = Some(packet);
                    }
                    o => panic!("{order:?}: {o:?}"),
                }
            }
            assert_eq!(got.as_deref(), Some(&whole[..]), "{order:?}");
            assert_eq!((r.held_frames(), r.held_bytes()), (0, 0));
        }
    }

    #[test]
    fn datagrams_with_other_idents_do_not_mix() {
        let a = pieces(3000, 1, 1500);
        let b = pieces(3000, 2, 1500);
        let mut r = Reassembler::default();
        assert_eq!(r.push(&a[0], T0), Outcome::Held);
        assert_eq!(r.push(&b[1], T0), Outcome::Held);
        assert_eq!(r.push(&b[2], T0), Outcome::Held);
        assert_eq!(r.held_frames(), 3);
        assert!(matches!(
            r.push(&b[0], T0),
            Outcome::Complete { frames: 3, .. }
        ));
        assert_eq!(r.held_frames(), 1);
    }

    #[test]
    fn a_partial_overlap_discards_the_datagram_and_a_duplicate_only_itself() {
        let f = pieces(4000, 9, 1400);
        let mut r = Reassembler::default();
        assert_eq!(r.push(&f[0], T0), Outcome::Held);
        assert_eq!(
            r.push(&f[0], T0),
            Outcome::Dropped {
                reason: DropReason::ReassemblyInvalid,
                frames: 1
            }
        );
        assert_eq!(r.held_frames(), 1);
        // The second fragment moved back 8 bytes: it overlaps the first.
        let mut overlap = f[1].clone();
        let off = frag_offset(&overlap) - 1;
        overlap[6] = (overlap[6] & 0xe0) | (off >> 8) as u8;
        overlap[7] = off as u8;
        assert_eq!(
            r.push(&overlap, T0),
            Outcome::Dropped {
                reason: DropReason::ReassemblyInvalid,
                frames: 2
            }
        );
        assert_eq!((r.held_frames(), r.held_bytes()), (0, 0));
    }

    #[test]
    fn ends_that_disagree_or_pass_65535_discard_the_datagram() {
        let f = pieces(4000, 3, 1400);
        let mut r = Reassembler::default();
        assert_eq!(r.push(&f[2], T0), Outcome::Held);
        // The same last fragment, cut short: a different end.
        let mut short = f[2][..f[2].len() - 8].to_vec();
        let len = short.len() as u16;
        short[2..4].copy_from_slice(&len.to_be_bytes());
        assert!(matches!(
            r.push(&short, T0),
            Outcome::Dropped {
                reason: DropReason::ReassemblyInvalid,
                frames: 2
            }
        ));
        // A fragment whose data would end past 65 535 bytes.
        let mut big = f[1].clone();
        big[6] = 0x20 | 0x1f;
        big[7] = 0xff;
        assert!(matches!(
            r.push(&big, T0),
            Outcome::Dropped {
                reason: DropReason::ReassemblyInvalid,
                frames: 1
            }
        ));
        assert_eq!(r.held_frames(), 0);
    }

    #[test]
    fn a_middle_fragment_not_a_multiple_of_8_is_malformed() {
        let f = pieces(4000, 4, 1400);
        let mut odd = f[0][..f[0].len() - 3].to_vec();
        let len = odd.len() as u16;
        odd[2..4].copy_from_slice(&len.to_be_bytes());
        let mut r = Reassembler::default();
        assert_eq!(
            r.push(&odd, T0),
            Outcome::Dropped {
                reason: DropReason::Malformed,
                frames: 1
            }
        );
        assert_eq!(r.held_frames(), 0);
    }

    #[test]
    fn datagrams_not_whole_after_30_s_are_given_up_with_their_first_header() {
        let a = pieces(4000, 5, 1400);
        let b = pieces(4000, 6, 1400);
        let mut r = Reassembler::default();
        r.push(&a[1], T0);
        r.push(&a[0], T0 + SimDuration::from_secs(1));
        r.push(&b[2], T0 + SimDuration::from_secs(10));
        assert_eq!(r.next_expiry(), Some(T0 + TIMEOUT));
        assert!(r
            .expire(SimTime::from_nanos(TIMEOUT.as_nanos() - 1))
            .is_empty());
        let gone = r.expire(T0 + TIMEOUT);
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].frames, 2);
        let quote = gone[0].quote.as_ref().unwrap();
        assert_eq!(quote[..IP_HEADER], a[0][..IP_HEADER]);
        assert_eq!(quote.len(), IP_HEADER + 8);
        assert_eq!(r.held_frames(), 1);
        assert_eq!(r.next_expiry(), Some(T0 + SimDuration::from_secs(40)));
        let gone = r.expire(T0 + SimDuration::from_secs(40));
        assert!(gone[0].quote.is_none(), "its first fragment never came");
        assert_eq!((r.held_frames(), r.held_bytes()), (0, 0));
    }

    #[test]
    fn memory_is_bounded_and_held_datagrams_are_not_evicted() {
        let mut r = Reassembler::default();
        let mut ident = 0u16;
        let mut held = 0u64;
        loop {
            ident += 1;
            let f = pieces(3000, ident, 1500);
            match r.push(&f[0], T0) {
                Outcome::Held => held += 1,
                Outcome::Dropped {
                    reason: DropReason::ReassemblyFull,
                    frames: 1,
                } => break,
                o => panic!("{o:?}"),
            }
        }
        assert!(r.held_bytes() <= MEMORY_LIMIT);
        assert!(r.held_bytes() + PER_FRAGMENT + 1480 > MEMORY_LIMIT);
        assert_eq!(r.held_frames(), held);
        // Nothing held is evicted for new fragments, even of a held datagram;
        // room comes back as datagrams are given up.
        let f = pieces(3000, 1, 1500);
        assert!(matches!(
            r.push(&f[1], T0),
            Outcome::Dropped {
                reason: DropReason::ReassemblyFull,
                ..
            }
        ));
        assert_eq!(r.expire(T0 + TIMEOUT).len() as u64, held);
        assert_eq!((r.held_frames(), r.held_bytes()), (0, 0));
        assert_eq!(r.push(&f[1], T0 + TIMEOUT), Outcome::Held);
    }
    /// An IPv6 packet from 2001:2::1 to 2001:2:0:1::2 with a Destination
    /// Options header (8 bytes) before `len` bytes of UDP-protocol data,
    /// cut into fragments of at most `mtu` bytes after that header, with
    /// `ident`: the whole packet and its fragments.
    fn packet6(len: usize, ident: u32, mtu: usize) -> (Vec<u8>, Vec<Vec<u8>>) {
        let src: std::net::Ipv6Addr = "2001:2::1".parse().unwrap();
        let dst: std::net::Ipv6Addr = "2001:2:0:1::2".parse().unwrap();
        let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        // ipv6::fragment cuts after the fixed header: make the packet, cut
        // it, then put a Destination Options header in front of each
        // Fragment header (it is part of the unfragmentable part).
        let f = ipv6::packet_frame(src, dst, 17, 64, len);
        let mut f = f.to_vec();
        f[ETH_HEADER + IPV6_HEADER..].copy_from_slice(&data);
        let with_opts = |ip: &[u8]| {
            let mut p = ip[..IPV6_HEADER].to_vec();
            let next = p[6];
            p[6] = ipv6::next::DEST_OPTS;
            let len = u16::from_be_bytes([p[4], p[5]]) + 8;
            p[4..6].copy_from_slice(&len.to_be_bytes());
            p.extend_from_slice(&[next, 0, 1, 4, 0, 0, 0, 0]);
            p.extend_from_slice(&ip[IPV6_HEADER..]);
            p
        };
        let whole = with_opts(&f[ETH_HEADER..]);
        let pieces = ipv6::fragment(&f, mtu - 8, ident)
            .unwrap()
            .iter()
            .map(|p| with_opts(&p[ETH_HEADER..]))
            .collect();
        (whole, pieces)
    }

    fn push6(r: &mut Reassembler, ip: &[u8], now: SimTime) -> Outcome {
        let u = ipv6::upper_layer(ip).unwrap();
        let at = u.fragment_at.expect("a fragment");
        assert_eq!(at.next_field, IPV6_HEADER, "after the options header");
        r.push6(ip, at, now)
    }

    #[test]
    fn ipv6_fragments_in_any_order_give_back_the_packet_without_its_fragment_header() {
        let (whole, six) = packet6(3000, 5, 1280);
        assert_eq!(six.len(), 3);
        assert!(six.iter().all(|p| p.len() <= 1280));
        let mut r = Reassembler::default();
        assert_eq!(push6(&mut r, &six[2], T0), Outcome::Held);
        assert_eq!(push6(&mut r, &six[0], T0), Outcome::Held);
        assert_eq!(r.held_frames(), 2);
        let got = push6(&mut r, &six[1], T0);
        assert_eq!(
            got,
            Outcome::Complete {
                packet: whole,
                frames: 3
            }
        );
        assert_eq!(r.held_frames(), 0);
        assert_eq!(r.held_bytes(), 0);
        // IPv4 and IPv6 datagrams with the same identification are apart.
        let v4 = pieces(3000, 5, 1280);
        let (_, v6) = packet6(3000, 5, 1280);
        assert_eq!(r.push(&v4[0], T0), Outcome::Held);
        assert_eq!(push6(&mut r, &v6[0], T0), Outcome::Held);
        assert!(matches!(r.push(&v4[1], T0), Outcome::Held));
        assert!(matches!(r.push(&v4[2], T0), Outcome::Complete { .. }));
        assert_eq!(r.held_frames(), 1);
    }

    #[test]
    fn ipv6_packets_are_given_up_after_60_s_quoting_their_first_fragment() {
        let (_, pieces) = packet6(3000, 9, 1280);
        let mut r = Reassembler::default();
        push6(&mut r, &pieces[1], T0);
        let later = T0 + SimDuration::from_secs(1);
        push6(&mut r, &pieces[0], later);
        // The time runs from the first to arrive.
        assert_eq!(r.next_expiry(), Some(T0 + TIMEOUT6));
        assert!(r.expire(T0 + TIMEOUT).is_empty(), "not IPv4's 30 s");
        let gone = r.expire(T0 + TIMEOUT6);
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].frames, 2);
        let quote = gone[0].quote.as_ref().unwrap();
        assert_eq!(quote[..], pieces[0][..MIN_MTU - IPV6_HEADER - 8]);
        // One whose first fragment never came quotes nothing.
        push6(&mut r, &pieces[2], T0);
        let gone = r.expire(T0 + TIMEOUT6);
        assert!(gone[0].quote.is_none());
    }

    #[test]
    fn ipv6_overlaps_and_oversized_packets_are_discarded() {
        let (_, pieces) = packet6(3000, 3, 1280);
        let mut r = Reassembler::default();
        push6(&mut r, &pieces[0], T0);
        // The second piece moved 8 bytes back: it overlaps the first.
        let mut overlap = pieces[1].clone();
        let at = IPV6_HEADER + 8;
        let word = u16::from_be_bytes([overlap[at + 2], overlap[at + 3]]);
        overlap[at + 2..at + 4].copy_from_slice(&(word - 8).to_be_bytes());
        assert_eq!(
            push6(&mut r, &overlap, T0),
            Outcome::Dropped {
                reason: DropReason::ReassemblyInvalid,
                frames: 2
            }
        );
        // An end past what the payload length can say.
        let mut far = pieces[1].clone();
        far[at + 2..at + 4].copy_from_slice(&(0xfff8u16 | 1).to_be_bytes());
        assert_eq!(
            push6(&mut r, &far, T0),
            Outcome::Dropped {
                reason: DropReason::ReassemblyInvalid,
                frames: 1
            }
        );
        assert_eq!(r.held_frames(), 0);
    }
    #[test]
    fn a_first_fragment_whose_headers_push_the_packet_past_65535_discards_it() {
        // An IPv6 fragment from 2001:2::1 to 2001:2::2 at `offset`, with
        // `opts` bytes of Destination Options before the Fragment header.
        let frag = |opts: usize, offset: usize, more: bool, len: usize| {
            let mut p = vec![0u8; IPV6_HEADER];
            p[0] = 0x60;
            p[8..24].copy_from_slice(&"2001:2::1".parse::<std::net::Ipv6Addr>().unwrap().octets());
            p[24..40].copy_from_slice(&"2001:2::2".parse::<std::net::Ipv6Addr>().unwrap().octets());
            let next_field = if opts > 0 {
                p[6] = ipv6::next::DEST_OPTS;
                let mut o = vec![0u8; opts];
                o[0] = ipv6::next::FRAGMENT;
                o[1] = (opts / 8 - 1) as u8;
                p.extend_from_slice(&o);
                IPV6_HEADER
            } else {
                p[6] = ipv6::next::FRAGMENT;
                6
            };
            let at = p.len();
            p.extend_from_slice(&[17, 0]);
            p.extend_from_slice(&((offset as u16) | u16::from(more)).to_be_bytes());
            p.extend_from_slice(&7u32.to_be_bytes());
            p.extend_from_slice(&vec![1u8; len]);
            let payload = (p.len() - IPV6_HEADER) as u16;
            p[4..6].copy_from_slice(&payload.to_be_bytes());
            (p, FragmentAt { next_field, at })
        };
        let mut r = Reassembler::default();
        let (first, at) = frag(1000, 0, true, 8);
        assert_eq!(r.push6(&first, at, T0), Outcome::Held);
        let (middle, at) = frag(0, 8, true, 65_512);
        assert_eq!(r.push6(&middle, at, T0), Outcome::Held);
        // Each piece ends within 65 535 bytes of its own headers; whole,
        // with the first one's 1000 bytes of options, it would not.
        let (last, at) = frag(0, 65_520, false, 8);
        assert_eq!(
            r.push6(&last, at, T0),
            Outcome::Dropped {
                reason: DropReason::ReassemblyInvalid,
                frames: 3
            }
        );
        assert_eq!(r.held_frames(), 0);
    }
}
