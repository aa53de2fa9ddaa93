//! A small direct-mapped memo of a lookup's answers: the answer for each
//! of the last keys seen, one key per slot, chosen by the key's hash.
//!
//! Why: a router forwards most packets where an earlier packet of the same
//! flow went, and its full decision (the address sets, the routing table,
//! the neighbour map) costs hundreds of instructions a hop and, in a large
//! network, cache misses. A memo of one answer served one flow; with ten
//! flows through a router every packet missed it and paid in full (at 10
//! flows a dumbbell ran 11 % more instructions per packet than at one, most
//! of it there). A few dozen slots hold the answers for the destinations in
//! use at once, and a hit costs what the one-answer memo's did.
//!
//! The memo only repeats answers its owner put in it: the owner decides
//! what may be remembered, and forgets (`clear`) whenever what the answers
//! depend on changes. Slots are allocated on the first `put`, so an owner
//! that never remembers anything (a router's IPv6 side in an IPv4 network)
//! costs only the empty vector.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::PortId;

/// The slots of a router's memos: of the destinations whose way out it
/// remembers, and of the neighbours whose MAC (IPv4's and IPv6's). A
/// dumbbell's router sends to its side's 100 hosts, which 64 slots did not
/// hold; 256 slots are 4 KiB for routes and 6 KiB for IPv4 neighbours,
/// allocated on first use.
pub const ROUTER_SLOTS: usize = 256;

/// A key a [`Memo`] can hold: 32 bits of it that tell keys apart (any
/// 32: the memo mixes them).
pub trait MemoKey: Copy + Eq {
    /// The bits that choose the key's slot.
    fn memo_hash(&self) -> u32;
}

impl MemoKey for Ipv4Addr {
    fn memo_hash(&self) -> u32 {
        u32::from(*self)
    }
}

/// An IPv6 neighbour, by port (`crate::ndp`'s key).
impl MemoKey for (PortId, Ipv6Addr) {
    fn memo_hash(&self) -> u32 {
        // The interface identifier's low half, which tells a subnet's
        // hosts apart, and the port for link-local neighbours that share it.
        let o = self.1.octets();
        u32::from_be_bytes([o[12], o[13], o[14], o[15]]) ^ (self.0 as u32).rotate_left(16)
    }
}

/// Up to `slots` remembered answers `V` for keys `K` (see the module docs).
/// The last answer first (`repr(C)`): a lookup that finds it reads nothing
/// else.
#[repr(C)]
pub struct Memo<K, V> {
    /// The last answer given or remembered, in line: with one flow every
    /// lookup is for it, and finding it costs one comparison, no hash and
    /// no load from the slots' own allocation.
    last: Option<(K, V)>,
    /// Empty until the first `put` of a memo of more than one slot; then
    /// `capacity` slots. (A boxed slice, not a vector, and a 32-bit
    /// capacity: a small memo, read only when `last` misses.)
    slots: Box<[Option<(K, V)>]>,
    /// Slots, a power of two.
    capacity: u32,
}

impl<K, V> Memo<K, V> {
    /// Where the last answer lies in a memo (a layout test's figure).
    #[cfg(test)]
    pub(crate) fn last_at() -> usize {
        std::mem::offset_of!(Self, last)
    }

    /// The last answer's size (a layout test's figure).
    #[cfg(test)]
    pub(crate) fn last_size() -> usize {
        std::mem::size_of::<Option<(K, V)>>()
    }
}

impl<K: MemoKey, V: Copy> Memo<K, V> {
    /// A memo of `capacity` slots (rounded up to a power of two, at least
    /// one).
    pub fn new(capacity: usize) -> Self {
        Memo {
            last: None,
            slots: Box::new([]),
            capacity: u32::try_from(capacity.max(1).next_power_of_two())
                .expect("a memo of fewer than 2^31 slots"),
        }
    }

    /// The slot of a key whose [`MemoKey::memo_hash`] is `hash` (mixed
    /// here, so that keys that differ in a few bits anywhere, such as
    /// hosts of one subnet or of subnets numbered apart, spread over the
    /// slots).
    #[inline]
    fn index(&self, hash: u32) -> usize {
        // Fibonacci hashing: the multiply carries each bit of the key into
        // every higher bit, so the product's top bits, which select the
        // slot, depend on all of the key's. (One slot: a shift by 32,
        // which `checked_shr` refuses.)
        let bits = self.capacity.trailing_zeros();
        hash.wrapping_mul(0x9E37_79B1)
            .checked_shr(32 - bits)
            .unwrap_or(0) as usize
    }

    /// The answer remembered for `key`, if it is the last one or its slot
    /// holds it.
    #[inline]
    pub fn get(&mut self, key: K) -> Option<V> {
        match self.last {
            Some((k, v)) if k == key => return Some(v),
            _ => {}
        }
        match self.slots.get(self.index(key.memo_hash())) {
            Some(&Some((k, v))) if k == key => {
                self.last = Some((k, v));
                Some(v)
            }
            _ => None,
        }
    }

    /// Remembers `value` for `key`, in place of whatever its slot held.
    #[inline]
    pub fn put(&mut self, key: K, value: V) {
        self.last = Some((key, value));
        if self.capacity == 1 {
            return;
        }
        if self.slots.is_empty() {
            self.slots = vec![None; self.capacity as usize].into_boxed_slice();
        }
        let i = self.index(key.memo_hash());
        self.slots[i] = Some((key, value));
    }

    /// Forgets every answer (keeping the slots' memory).
    pub fn clear(&mut self) {
        self.last = None;
        self.slots.fill(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl MemoKey for u32 {
        fn memo_hash(&self) -> u32 {
            *self
        }
    }

    #[test]
    fn remembers_the_answers_of_keys_in_different_slots() {
        let mut m: Memo<u32, u8> = Memo::new(64);
        assert_eq!(m.get(7), None);
        // Consecutive keys (hosts of one subnet) land in different slots.
        for k in 0..16u32 {
            m.put(k, k as u8);
        }
        let kept = (0..16u32).filter(|&k| m.get(k) == Some(k as u8)).count();
        assert!(kept >= 12, "only {kept} of 16 consecutive keys kept");
        // The last one, and one found in its slot, again.
        assert_eq!(m.get(15), Some(15));
        let found = (0..15u32).find(|&k| m.get(k).is_some()).expect("kept");
        assert_eq!(m.get(found), Some(found as u8));
        m.clear();
        assert!((0..16u32).all(|k| m.get(k).is_none()));
    }

    #[test]
    fn a_key_that_shares_a_slot_replaces_the_other_and_never_answers_for_it() {
        let mut m: Memo<u32, u8> = Memo::new(1);
        m.put(1, 10);
        assert_eq!(m.get(1), Some(10));
        m.put(2, 20);
        assert_eq!(m.get(2), Some(20));
        // Key 1 hashes to the same (only) slot: its answer is gone, and the
        // slot does not give key 2's answer for it.
        assert_eq!(m.get(1), None);
        let mut m: Memo<u32, u8> = Memo::new(4);
        // Two keys in one slot of four (found by trying): the later put
        // replaces the earlier, which is not the last answer either.
        let (a, b) = (0..64u32)
            .flat_map(|a| (a + 1..64).map(move |b| (a, b)))
            .find(|&(a, b)| m.index(a) == m.index(b))
            .expect("64 keys in 4 slots share one");
        m.put(a, 1);
        m.put(b, 2);
        assert_eq!(m.get(a), None);
        assert_eq!(m.get(b), Some(2));
    }

    /// Keys that differ only in their top byte (10.1.2.3 and 11.1.2.3)
    /// or only in their low bits spread over the slots.
    #[test]
    fn keys_that_differ_in_their_high_or_low_bits_spread() {
        let m: Memo<u32, u8> = Memo::new(256);
        for shift in [0, 8, 16, 24] {
            let slots: std::collections::HashSet<usize> =
                (0..64u32).map(|k| m.index(k << shift)).collect();
            assert!(
                slots.len() >= 48,
                "keys << {shift}: {} slots of 64 keys",
                slots.len()
            );
        }
    }

    #[test]
    fn capacity_rounds_up_to_a_power_of_two() {
        assert_eq!(Memo::<u32, u8>::new(0).capacity, 1);
        assert_eq!(Memo::<u32, u8>::new(48).capacity, 64);
        let mut m: Memo<u32, u8> = Memo::new(48);
        m.put(5, 1);
        assert_eq!(m.slots.len(), 64);
    }
}
